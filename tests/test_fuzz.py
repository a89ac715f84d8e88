"""Property fuzz of the public API (issue 11): random bytes, mutated image files and random
configs, overrides and arguments give a result or one of mmfast's documented exceptions,
never a crash, a ``PanicException`` or another exception type, and whatever decodes equals
Pillow's own decode.

The test suite runs a few examples of each property; ``make fuzz`` runs
``MMFAST_FUZZ_EXAMPLES`` of each with fresh random seeds.
"""

from __future__ import annotations

import functools
import io
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import SHARED, builtin_dict, builtin_settings, noise, smooth
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageOps
from transformers.image_transforms import convert_to_rgb

import mmfast
from mmfast import ImageDecodeError, ImageTooLargeError, MmfastError

EXAMPLES = int(os.environ.get("MMFAST_FUZZ_EXAMPLES", "20"))
fuzz = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize="MMFAST_FUZZ_EXAMPLES" not in os.environ,  # fixed examples in the test suite
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# Decodes are capped so that a mutated header cannot ask for a huge image.
MAX_PIXELS = 4_000_000
DECODE_ERRORS = (ImageDecodeError, ImageTooLargeError)


def encoded(fmt: str, mode: str = "RGB", **params: Any) -> bytes:
    image = Image.fromarray(smooth(24, 32, 1) // 2 + noise(24, 32, 2) // 2)
    if mode == "RGBA":
        image.putalpha(Image.fromarray(noise(24, 32, 3)[..., 0]))
    buf = io.BytesIO()
    image.convert(mode).save(buf, fmt, **params)
    return buf.getvalue()


def seed_files() -> list[bytes]:
    """Small files of every format Pillow writes here, and the small real ones in ../shared."""
    files = [
        encoded("JPEG", quality=90),
        encoded("JPEG", "L", progressive=True),
        encoded("JPEG", "CMYK"),
        encoded("PNG"),
        encoded("PNG", "P"),
        encoded("PNG", "RGBA"),
        encoded("WEBP", quality=80),
        encoded("WEBP", "RGBA", lossless=True),
        encoded("GIF", "P"),
        encoded("BMP"),
        encoded("TIFF", compression="tiff_lzw"),
        encoded("ICO", "RGBA"),
    ]
    images = SHARED / "images"
    if images.is_dir():
        files += [p.read_bytes() for p in sorted(images.iterdir()) if p.stat().st_size < 100_000]
    return files


SEEDS = seed_files()


def reference(data: bytes) -> np.ndarray | None:
    """transformers' decode chain (``exif_transpose`` then ``convert_to_rgb``), or None
    where Pillow refuses the data."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Pillow's warnings on corrupt files
            with Image.open(io.BytesIO(data)) as im:
                if im.width * im.height > MAX_PIXELS:
                    return None
                rgb: np.ndarray = convert_to_rgb(ImageOps.exif_transpose(im), return_numpy=True)
                return rgb
    except Exception:
        return None


def check_decode(data: bytes) -> None:
    """``decode_image`` equals the reference where Pillow decodes ``data``; elsewhere it
    raises a decode error naming ``source``."""
    want = reference(data)
    try:
        got = mmfast.decode_image(data, max_pixels=MAX_PIXELS)
    except DECODE_ERRORS as exc:
        assert str(exc).startswith("source: "), exc
        assert want is None or want.size == 0, "mmfast refused what Pillow decodes"
        return
    assert want is not None, "mmfast decoded what Pillow refuses"
    assert got.dtype == np.uint8 and got.shape == want.shape
    assert np.array_equal(got, want)


@fuzz
@given(data=st.binary(max_size=2048), head=st.sampled_from([b"", *(s[:16] for s in SEEDS)]))
def test_random_bytes(data: bytes, head: bytes) -> None:
    """Random bytes, bare or behind a real file's first 16 bytes (its signature)."""
    check_decode(head + data)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        kind = draw(st.sampled_from(["flip", "byte", "cut", "drop", "repeat"]))
        if kind == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte":
            data[at] = draw(st.sampled_from([0, 0xFF, 0x7F, 0x80]))
        elif kind == "cut":
            del data[max(at, 1) :]
        elif kind == "drop":
            del data[at : at + draw(st.integers(1, 64))]
        else:
            data[at:at] = data[at : at + draw(st.integers(1, 64))]
    return bytes(data)


@fuzz
@given(data=mutated())
def test_mutated_files(data: bytes) -> None:
    check_decode(data)
    proc = mmfast.ImageProcessor.from_pretrained("Qwen/Qwen2-VL-7B-Instruct", max_pixels=200_000)
    out = proc([data, noise(20, 30)], on_error="skip")
    assert out.kept in ([0, 1], [1])


# Values a config field may hold after a bad edit: wrong types, out-of-range numbers, nesting.
WILD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.one_of(st.integers(-2, 2**20), st.floats(-2, 2)), max_size=4),
    st.dictionaries(
        st.sampled_from(["height", "width", "shortest_edge", "longest_edge", "max_pixels"]),
        st.integers(-1, 5000),
        max_size=3,
    ),
)


def run_model(proc: mmfast.ImageProcessor, sizes: list[tuple[int, int]], dtype: str) -> None:
    """The call gives outputs (inf where a finite float32 value overflows bfloat16, as in
    transformers) or raises ``MmfastError``; on 2 threads as on 1."""
    images = [noise(h, w, i) for i, (h, w) in enumerate(sizes)]
    try:
        out = proc(images, dtype=dtype, threads=2)
    except MmfastError:
        return
    serial = proc(images, dtype=dtype, threads=1)
    for key, value in out.items():
        assert np.array_equal(np.asarray(value), np.asarray(serial[key]), equal_nan=True), key


@fuzz
@given(
    model=st.sampled_from(mmfast.supported_models()),
    edits=st.dictionaries(st.text(min_size=1, max_size=3), WILD, max_size=2),
    wild_keys=st.data(),
    sizes=st.lists(st.tuples(st.integers(1, 300), st.integers(1, 300)), min_size=1, max_size=3),
    dtype=st.sampled_from(["float32", "bfloat16", "uint8"]),
)
def test_random_configs(
    model: str,
    edits: dict[str, Any],
    wild_keys: st.DataObject,
    sizes: list[tuple[int, int]],
    dtype: str,
) -> None:
    """A built-in config with some of its own fields (and some unknown ones) replaced by
    wild values, read from a file: ``MmfastError`` naming the file, or a working processor."""
    config = builtin_dict(model)
    for key in wild_keys.draw(st.lists(st.sampled_from(sorted(config)), max_size=3)):
        config[key] = wild_keys.draw(WILD)
    config.update(edits)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "preprocessor_config.json"
        path.write_text(json.dumps(config, allow_nan=True))
        try:
            proc = mmfast.ImageProcessor.from_pretrained(folder)
        except MmfastError:
            return
    run_model(proc, sizes, dtype)


@fuzz
@given(
    model=st.sampled_from(mmfast.supported_models()),
    overrides=st.dictionaries(
        st.sampled_from(
            [
                "size",
                "max_pixels",
                "min_pixels",
                "patch_size",
                "merge_size",
                "max_patches",
                "crop_size",
                "do_resize",
                "do_normalize",
                "image_mean",
                "resample",
                "do_pad",
            ]
        ),
        WILD,
        max_size=2,
    ),
    sizes=st.lists(st.tuples(st.integers(1, 300), st.integers(1, 300)), min_size=1, max_size=2),
    backend=st.sampled_from(["pil", "torchvision"]),
)
def test_random_overrides(
    model: str, overrides: dict[str, Any], sizes: list[tuple[int, int]], backend: str
) -> None:
    try:
        proc = mmfast.ImageProcessor.from_pretrained(
            model, backend=backend, **builtin_settings(model, **overrides)
        )
    except MmfastError:
        return
    run_model(proc, sizes, "float32")


@fuzz
@given(shape=st.lists(st.integers(0, 2**62), max_size=5), data=st.binary(max_size=64))
@example(shape=[0, 2**61], data=b"")  # regression: an empty array whose strides overflowed crashed
def test_deserialize(shape: list[int], data: bytes) -> None:
    try:
        out = mmfast.deserialize_pixel_values(data, shape)
    except (MmfastError, MemoryError):
        return
    assert out.shape == tuple(shape)
    assert mmfast.serialize_pixel_values(out) == data


@pytest.mark.skipif(not SEEDS, reason="no seed files")
def test_seed_files_decode_like_pillow() -> None:
    """The unmutated seeds decode, so the mutations start from working files."""
    for data in SEEDS:
        if reference(data) is not None:
            check_decode(data)


@functools.cache
def video_seeds() -> list[bytes]:
    """Short clips in the codecs the video tests use (B-frames, short groups of pictures),
    encoded once (an encoder's bytes may differ from run to run)."""
    av = pytest.importorskip("av")
    clips = []
    for codec, bframes in (("libx264", 2), ("mpeg4", 2), ("libvpx-vp9", 0)):
        buf = io.BytesIO()
        with av.open(buf, "w", format="mp4") as out:
            stream = out.add_stream(codec, rate=10)
            stream.height, stream.width = 32, 48
            stream.pix_fmt = "yuv420p"
            stream.codec_context.gop_size = 5
            stream.codec_context.max_b_frames = bframes
            for t in range(12):
                picture = np.roll(smooth(32, 48, 1), 2 * t, axis=1)
                for packet in stream.encode(av.VideoFrame.from_ndarray(picture, format="rgb24")):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
        clips.append(buf.getvalue())
    return clips


@st.composite
def mutated_video(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(video_seeds())))
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        kind = draw(st.sampled_from(["flip", "byte", "cut", "drop"]))
        if kind == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte":
            data[at] = draw(st.sampled_from([0, 0xFF, 0x7F, 0x80]))
        elif kind == "cut":
            del data[max(at, 1) :]
        else:
            del data[at : at + draw(st.integers(1, 64))]
    return bytes(data)


@fuzz
@given(
    data=mutated_video(),
    sampling=st.sampled_from([{}, {"num_frames": 3}, {"fps": 4}, {"num_frames": 12}]),
    threads=st.integers(1, 2),
)
def test_mutated_videos(data: bytes, sampling: dict[str, Any], threads: int) -> None:
    """A damaged clip gives frames or a documented error, never a crash or a hang; through a
    processor too."""
    try:
        frames, metadata = mmfast.load_video(
            data, threads=threads, max_pixels=MAX_PIXELS, **sampling
        )
    except (MmfastError, EOFError) as exc:
        assert isinstance(exc, MmfastError), exc
    else:
        assert frames.dtype == np.uint8 and frames.ndim == 4 and frames.shape[3] == 3
        assert metadata.frames_indices is not None
    proc = mmfast.ImageProcessor.from_pretrained("Qwen/Qwen3-VL-8B-Instruct")
    try:
        out = proc.videos(data, num_frames=4, threads=threads)
    except MmfastError:
        return
    assert np.isfinite(out.pixel_values_videos).all()
