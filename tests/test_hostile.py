"""Hostile inputs: every bad file, source, config, array or argument raises the documented
exception, exactly that type, with a message naming the argument, and claimed sizes are refused
before anything large is allocated. Inputs that are only unusual (a strided array, a damaged
file Pillow still decodes) give what the contiguous copy or the Pillow/transformers reference gives.
"""

from __future__ import annotations

import base64
import io
import json
import struct
import subprocess
import sys
import textwrap
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import (
    CLIP_MEAN,
    CLIP_STD,
    PEAK_RSS,
    builtin_dict,
    builtin_settings,
    noise,
    peak_rss_readable,
    same_bits,
    smooth,
)
from PIL import Image, ImageOps

import mmfast
from mmfast import ImageDecodeError, ImageTooLargeError, MmfastError, UnsupportedModelError
from mmfast.models import registry

QWEN = "Qwen/Qwen2-VL-7B-Instruct"
QWEN3 = "Qwen/Qwen3-VL-8B-Instruct"
LLAVA = "llava-hf/llava-1.5-7b-hf"
LLAVA_NEXT = "llava-hf/llava-v1.6-mistral-7b-hf"
LLAMA4 = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
INTERNVL = "OpenGVLab/InternVL3-8B-hf"
GLM41V = "zai-org/GLM-4.1V-9B-Thinking"
NAN, INF = float("nan"), float("inf")
BACKENDS = ("pil", "torchvision")
IMAGE = noise(20, 30, 11)
CLIP = np.stack([noise(30, 40, t) for t in range(4)])
BUILTINS = mmfast.supported_models()


def load(model: Any, **overrides: Any) -> mmfast.ImageProcessor:
    """The processor of a built-in (with its test settings, see conftest) or a path."""
    if isinstance(model, str) and model in BUILTINS:
        overrides = builtin_settings(model, **overrides)
    return mmfast.ImageProcessor.from_pretrained(model, **overrides)


def raises(kind: type[BaseException], call: Callable[[], Any], *names: str) -> str:
    """``call()`` raises ``kind`` itself (not a subclass) with every one of ``names`` in its
    message; returns the message."""
    with pytest.raises(kind) as info:
        call()
    assert type(info.value) is kind, f"{type(info.value).__name__}: {info.value}"
    message = str(info.value)
    for name in names:
        assert name in message, f"{name!r} not in {message!r}"
    return message


def short(value: Any) -> str:
    """A stable test id: a class's name, an image's dtype and shape, else the repr's start."""
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, (np.ndarray, Image.Image)):
        return f"{np.asarray(value).dtype}{np.shape(value)}"
    text = repr(value)
    return type(value).__name__ if " at 0x" in text else text[:32]


def encode(image: Image.Image, fmt: str, **params: Any) -> bytes:
    buf = io.BytesIO()
    image.save(buf, fmt, **params)
    return buf.getvalue()


def picture(height: int = 48, width: int = 64, mode: str = "RGB") -> Image.Image:
    """Smooth waves plus noise (every codec has real work), translucent in modes with alpha."""
    rgb = smooth(height, width, 1) // 2 + noise(height, width, 2) // 2
    if mode.startswith("I;16"):
        return Image.fromarray(rgb[..., 0].astype(np.uint16) * 257).convert(mode)
    image = Image.fromarray(rgb)
    image.putalpha(Image.fromarray(noise(height, width, 3)[..., 0] // 2 + 100))
    return image.convert(mode)


def cases(table: dict[Any, list[Any]]) -> list[tuple[Any, Any]]:
    """``(key, value)`` for every value listed under every key of a table."""
    return [(key, value) for key, values in table.items() for value in values]


def pad(image: Any, canvas: Any, **kwargs: Any) -> Any:
    return mmfast.pad_and_normalize_to_tensor(image, canvas, **kwargs)


def read_only(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.setflags(write=False)
    return a


# Files: damaged, without pixel data, random bytes, bad sources -------------------------------

# id: (Pillow format, mode, save parameters)
FORMATS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "jpeg": ("JPEG", "RGB", {"quality": 90}),
    "jpeg_progressive": ("JPEG", "RGB", {"progressive": True}),
    "jpeg_cmyk": ("JPEG", "CMYK", {}),
    "png": ("PNG", "RGB", {}),
    "png_16bit": ("PNG", "I;16", {}),
    "png_rgba": ("PNG", "RGBA", {}),
    "webp": ("WEBP", "RGB", {"quality": 80}),
    "webp_lossless": ("WEBP", "RGBA", {"lossless": True}),
    "gif": ("GIF", "P", {}),
    "bmp": ("BMP", "RGB", {}),
    "tiff_lzw": ("TIFF", "RGB", {"compression": "tiff_lzw"}),
    "tiff": ("TIFF", "RGB", {}),  # regression: a flipped tag count warned while loading
    "ico_rgb": ("ICO", "RGB", {}),  # regression: an RGB icon decoded to zeros
    "ico_rgba": ("ICO", "RGBA", {}),
}


def encoded(fmt: str, height: int = 48, width: int = 64) -> bytes:
    pil_format, mode, params = FORMATS[fmt]
    return encode(picture(height, width, mode), pil_format, **params)


def flip(data: bytes, lo: int, hi: int, count: int) -> bytes:
    rng = np.random.default_rng(count)
    out = bytearray(data)
    for pos in rng.integers(lo, hi, count):
        out[pos] ^= int(rng.integers(1, 256))
    return bytes(out)


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "intact": lambda d: d,
    "cut_to_16_bytes": lambda d: d[:16],
    "cut_in_half": lambda d: d[: len(d) // 2],
    "cut_last_byte": lambda d: d[:-1],
    "flip_header": lambda d: flip(d, 0, min(64, len(d)), 3),
    "flip_body": lambda d: flip(d, len(d) // 4, 3 * len(d) // 4, 8),
    "flip_anywhere": lambda d: flip(d, 0, len(d), 16),
}


def reference_decode(data: bytes) -> np.ndarray:
    """transformers' chain on the bytes: what ``decode_image`` documents equality with."""
    convert_to_rgb = pytest.importorskip("transformers.image_transforms").convert_to_rgb
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pillow's truncation and corrupt-EXIF warnings
        with Image.open(io.BytesIO(data)) as image:
            return convert_to_rgb(ImageOps.exif_transpose(image), return_numpy=True)


@pytest.mark.parametrize("damage", [*DAMAGE, "one_pixel"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_damaged_files_decode_like_pillow(fmt: str, damage: str) -> None:
    """Equal to the reference where Pillow decodes the bytes, else ImageDecodeError naming
    source; no warning escapes (the suite runs with warnings as errors)."""
    data = encoded(fmt, 1, 1) if damage == "one_pixel" else DAMAGE[damage](encoded(fmt))
    try:
        want = reference_decode(data)
    except Exception:
        raises(ImageDecodeError, lambda: mmfast.decode_image(data), "source")
        return
    got = mmfast.decode_image(data)
    assert got.dtype == np.uint8 and got.shape == want.shape and np.array_equal(got, want)


def png(width: int, height: int, pixels: bool = True) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + body))
        return struct.pack(">I", len(body)) + kind + body + crc

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    idat = chunk(b"IDAT", zlib.compress(bytes(64))) if pixels else b""
    return b"\x89PNG\r\n\x1a\n" + header + idat + chunk(b"IEND", b"")


UNDECODABLE: dict[str, bytes] = {
    "jpeg_without_scan": encoded("jpeg").split(b"\xff\xda")[0],  # regression: decoded black
    "png_without_idat": png(16, 16, pixels=False),  # regression: decoded black
    "gif_header": encoded("gif")[:13],
    "bmp_header": encoded("bmp")[:54],
    "webp_header": encoded("webp")[:30],
    "tiff_header": encoded("tiff_lzw")[:8],
    "tiff_cut_in_exif": encoded("tiff_lzw")[:16],  # regression: Pillow's UserWarning escaped
    "ico_header": encoded("ico_rgb")[:22],
}
# Each format's first 12 bytes, then noise; and noise alone.
GARBAGE = {f"{fmt}_start": encoded(fmt)[:12] + noise(1, 70).tobytes() for fmt in FORMATS}
GARBAGE |= {f"random_{n}": noise(1, n, n).tobytes()[:n] for n in (1, 7, 1000, 100_000)}


@pytest.mark.parametrize("name", [*UNDECODABLE, *GARBAGE])
def test_undecodable_bytes(name: str) -> None:
    data = {**UNDECODABLE, **GARBAGE}[name]
    raises(ImageDecodeError, lambda: mmfast.decode_image(data), "source: ")
    raises(ImageDecodeError, lambda: load(QWEN)([IMAGE, data]), "images[1]: source: ")
    assert load(QWEN)([IMAGE, data], on_error="skip").kept == [0]
    if name in GARBAGE:  # described by its length, never printed
        raises(ImageDecodeError, lambda: mmfast.image_size(data), f"({len(data)} bytes)")


PNG = encoded("png")
BAD_SOURCES: list[tuple[Any, type[Exception], list[str]]] = [
    (12345, MmfastError, ["source: expected bytes"]),
    (None, MmfastError, ["source", "NoneType"]),
    (np.zeros(10, np.uint8), MmfastError, ["source", "ndarray"]),
    (b"", ImageDecodeError, ["source", "empty"]),
    (memoryview(b""), ImageDecodeError, ["source", "empty"]),
    # regression: a strided memoryview reached io.BytesIO and raised BufferError
    (memoryview(np.frombuffer(PNG * 2, np.uint8)[::2]), MmfastError, ["source", "C-contiguous"]),
    ("/nonexistent/dir/image.png", FileNotFoundError, []),
    ("/", IsADirectoryError, []),
    ("https://example.com/x.jpg", MmfastError, ["does not fetch URLs"]),
    ("data:image/png;base64,iVBORw0KGgo=", MmfastError, ["does not fetch URLs"]),
]


@pytest.mark.parametrize(("source", "kind", "names"), BAD_SOURCES, ids=short)
def test_bad_sources(source: Any, kind: type[Exception], names: list[str]) -> None:
    raises(kind, lambda: mmfast.decode_image(source), *names)
    raises(kind, lambda: mmfast.image_size(source), *names)


def test_base64_given_as_a_path_is_not_echoed() -> None:
    """Base64 data passed as a str (a client's usual slip) is read as a path; the message cuts
    it and says what to do. A 1.9 MB string gave a 5.8 MB message (the data three times)."""
    data = base64.b64encode(encoded("png", 300, 400)).decode()
    for call in (lambda: load(QWEN)([data]), lambda: mmfast.decode_image(data)):
        message = raises(ImageDecodeError, call, "decode base64 data to bytes first")
        assert len(message) < 1000 and f"({len(data)} characters)" in message
    message = raises(FileNotFoundError, lambda: load(QWEN).videos(data))
    assert len(message) < 1000


@pytest.mark.parametrize("content", [b"", b"not an image\n"], ids=["empty", "text"])
def test_bad_files(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "image.png"
    path.write_bytes(content)
    raises(ImageDecodeError, lambda: mmfast.decode_image(path), "source", str(path))


# Header bombs: a few bytes claiming billions of pixels -----------------------------------------


def patch(data: bytes, offset: int, layout: str, *values: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(layout, out, offset, *values)
    return bytes(out)


def jpeg_claiming(width: int, height: int) -> bytes:
    data = encode(picture(16, 24), "JPEG")
    return patch(data, data.index(b"\xff\xc0") + 5, ">HH", height, width)


def gif_claiming(width: int, height: int) -> bytes:
    data = patch(encode(picture(16, 24, "P"), "GIF"), 6, "<HH", width, height)  # the screen
    table = 3 << ((data[10] & 7) + 1) if data[10] & 0x80 else 0
    return patch(data, data.index(b",", 13 + table) + 5, "<HH", width, height)  # the frame


def tiff_claiming(width: int, height: int) -> bytes:
    data = encode(picture(16, 24), "TIFF")  # little-endian, one IFD
    ifd = struct.unpack_from("<I", data, 4)[0]
    for entry in range(ifd + 2, ifd + 2 + 12 * struct.unpack_from("<H", data, ifd)[0], 12):
        tag, kind = struct.unpack_from("<HH", data, entry)
        if tag in (256, 257):  # ImageWidth, ImageLength
            value = width if tag == 256 else height
            data = patch(data, entry + 8, "<H" if kind == 3 else "<I", value)
    return data


def webp_claiming(width: int, height: int) -> bytes:
    data = encode(picture(16, 24), "WEBP")  # a VP8 key frame: 14-bit sides
    return patch(data, data.index(b"\x9d\x01\x2a") + 3, "<HH", width, height)


# format: (header writer, a side whose square is over Pillow's bomb limit of 178956970 pixels)
BOMBS: dict[str, tuple[Callable[[int, int], bytes], int]] = {
    "jpeg": (jpeg_claiming, 65_000),
    "png": (png, 100_000),
    "gif": (gif_claiming, 65_535),
    "bmp": (lambda w, h: patch(encode(picture(16, 24), "BMP"), 18, "<ii", w, h), 100_000),
    "tiff": (tiff_claiming, 100_000),
    "webp": (webp_claiming, 16_383),
}


@pytest.mark.parametrize("fmt", BOMBS)
def test_header_bombs(fmt: str) -> None:
    claiming, side = BOMBS[fmt]
    bomb, modest = claiming(side, side), claiming(5000, 4000)
    raises(ImageTooLargeError, lambda: mmfast.decode_image(bomb), "source")
    raises(ImageTooLargeError, lambda: mmfast.decode_image(bomb, max_pixels=2**62), "source")
    raises(ImageTooLargeError, lambda: load(QWEN)([IMAGE, bomb]), "images[1]: source")
    # Within Pillow's limit, only max_pixels refuses it, from the header alone.
    call = lambda: mmfast.decode_image(modest, max_pixels=10**6)  # noqa: E731
    raises(ImageTooLargeError, call, "max_pixels=1000000", "5000x4000")
    assert mmfast.image_size(modest) == (4000, 5000)


def test_bombs_do_not_raise_peak_memory() -> None:
    """In a fresh process: every bomb refused without growing its peak RSS."""
    peak_rss_readable()
    bombs = [claiming(side, side) for claiming, side in BOMBS.values()]
    modest = [claiming(5000, 4000) for claiming, _ in BOMBS.values()]
    code = f"""
        import numpy as np, mmfast
        proc = mmfast.ImageProcessor.from_pretrained({QWEN!r})
        proc(np.zeros((64, 64, 3), np.uint8))  # libraries and thread pools loaded first
        before = peak_rss()
        calls = [lambda d=d: mmfast.decode_image(d, max_pixels=10**6) for d in {bombs + modest}]
        for call in calls + [lambda d=d: proc(d) for d in {bombs}]:
            try:
                call()
                raise AssertionError("decoded")
            except mmfast.ImageTooLargeError:
                pass
        print(peak_rss() - before)
        """
    run = [sys.executable, "-c", PEAK_RSS + textwrap.dedent(code)]
    done = subprocess.run(run, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) < 50 << 20, f"peak RSS grew by {done.stdout.strip()} bytes"


# One-pixel images (zero-size ones are among the bad arrays) ---------------------------------------


@pytest.mark.parametrize("model_id", BUILTINS)
def test_one_pixel_image_in_every_model(model_id: str) -> None:
    """The plan's shapes and finite values, or the plan's own refusal."""
    proc, pixel = load(model_id), np.array([[[200, 10, 90]]], np.uint8)
    try:
        plan = proc.plan(1, 1)
    except MmfastError as exc:
        raises(MmfastError, lambda: proc(pixel), "images[0]: " + str(exc)[:20])
        return
    values = proc(pixel)[proc.config.output_key]
    per_image = plan.output_shapes["pixel_values"]
    # Batched along a new or the first axis: the trailing axes are the plan's.
    assert values.shape[values.ndim - len(per_image) + 1 :] == tuple(per_image[1:])
    assert values.dtype != np.float32 or np.isfinite(values).all()
    assert proc.num_image_tokens(1, 1) == plan.num_image_tokens >= 0  # SigLIP counts none


BAD_IMAGE_SIZES = [(0, 10), (10, 0), (-5, 10), (2.5, 10), ("10", 10), (None, 10), (True, 10)]


@pytest.mark.parametrize("model_id", BUILTINS)
def test_bad_image_sizes_are_refused_naming_the_side(model_id: str) -> None:
    """``num_image_tokens`` and ``plan`` refuse what no image measures, as does a call with
    an empty PIL image (the LLaVA-NeXT family divided by zero first)."""
    proc = load(model_id)
    for height, width in BAD_IMAGE_SIZES:
        side = "height" if (height, width) != (10, 0) else "width"
        for call in (proc.num_image_tokens, proc.plan):
            raises(MmfastError, lambda c=call, h=height, w=width: c(h, w), f"image {side}: ")
    raises(MmfastError, lambda: proc(Image.new("RGB", (0, 5))), "images[0]: ")


def test_token_counts_of_huge_sizes_are_arithmetic() -> None:
    """Inkling counted its squares by building each one's window: 10**7 x 10**7 did not
    return."""
    proc = load("thinkingmachines/Inkling")
    assert proc.num_image_tokens(10**7, 10**7) > 10**9
    for size in [(1, 1), (37, 40), (480, 640), (1080, 1920), (3000, 40)]:
        assert proc.num_image_tokens(*size) == proc.plan(*size).num_image_tokens, size


# Malformed configs ---------------------------------------------------------------------------

CONFIG = "preprocessor_config.json"
FAMILY = {m: registry.family_of(load(m).config.image_processor_type) for m in BUILTINS}
# One checkpoint of each family but Kimi's, whose processors read none of these keys.
FAMILIES = [m for m in {f.name: m for m, f in reversed(FAMILY.items())}.values() if "Kimi" not in m]
# key: wrong types and values for it; these families read these keys (but UNREAD)
BAD_FIELDS: dict[str, list[Any]] = {
    "do_resize": ["yes", 1],
    "do_normalize": [[]],
    "rescale_factor": ["1/255", NAN, INF],
    "image_mean": [[0.5, INF, 0.5], [0.5, 0.5], ["a", 0.5, 0.5]],
    "image_std": [[0.5, 0, 0.5], [NAN, 1, 1]],
    "resample": [7, "bicubic", True],
    "size": [{"a": 1}, {"height": 0, "width": 5}, {"height": 2.5, "width": 5}, "336", True],
}

# Keys a family's class stores but never uses, so that transformers takes any value for them
# (HunYuanVL resizes with bicubic whatever `resample` says; Emu3's size is always its
# min/max_pixels).
UNREAD: dict[str, set[str]] = {
    "hunyuan_vl": {"resample"},
    "emu3": {"size"},
    "hy_v4_vl": {"resample"},
    "phi4_multimodal": {"do_resize"},
    "molmo2": {"do_resize"},
    # UnlimitedOCR resizes whatever do_resize says.
    "unlimited_ocr": {"do_resize"},
}


# Keys that replace size where a config has them.
SIZE_OVERRIDES = frozenset({"min_pixels", "max_pixels", "image_size"})


@pytest.mark.parametrize(("key", "value"), cases(BAD_FIELDS), ids=short)
@pytest.mark.parametrize("model_id", FAMILIES)
def test_bad_fields(tmp_path: Path, model_id: str, key: str, value: Any) -> None:
    if key in UNREAD.get(FAMILY[model_id].name, set()):
        load(model_id, **{key: value})  # as transformers takes it
        return
    if key not in registry.builtin_processor_defaults(model_id, FAMILY[model_id]):
        # (else those win over the file)
        config = builtin_dict(model_id) | {key: value}
        if key == "size":  # Qwen's min/max_pixels and IDEFICS's image_size beat size
            config = {k: v for k, v in config.items() if k not in SIZE_OVERRIDES}
        (tmp_path / CONFIG).write_text(json.dumps(config))  # NaN and Infinity as literals
        raises(MmfastError, lambda: load(tmp_path), key, str(tmp_path))
    unset = {k: None for k in SIZE_OVERRIDES & builtin_dict(model_id).keys() if key == "size"}
    raises(MmfastError, lambda: load(model_id, **{key: value}, **unset), key)


# A checkpoint's files (bytes, a JSON value, or None: a directory) and what the message names.
CONFIG_DIRS: list[tuple[dict[str, Any], type[MmfastError], list[str]]] = [
    ({CONFIG: b"{not json"}, MmfastError, ["cannot read JSON config"]),
    ({CONFIG: b""}, MmfastError, ["cannot read JSON config"]),
    ({CONFIG: b'{"size": "\xff\xfe"}'}, MmfastError, ["cannot read JSON config", "utf-8"]),
    ({CONFIG: b"null"}, MmfastError, ["expected a JSON object, got NoneType"]),
    ({CONFIG: {"image_processor_type": 5}}, MmfastError, ["image_processor_type"]),
    ({CONFIG: {"image_processor_type": "FooImageProcessor"}}, UnsupportedModelError, ["Foo"]),
    ({CONFIG: {"image_processor_type": "Qwen2VLImageProcessorSlow"}}, UnsupportedModelError, []),
    ({CONFIG: {"auto_map": {"AutoImageProcessor": "a.B"}}}, UnsupportedModelError, []),
    ({CONFIG: {"feature_extractor_type": "WhisperFeatureExtractor"}}, UnsupportedModelError, []),
    ({CONFIG: {}}, UnsupportedModelError, ["supported processors: ", "CLIPImageProcessor"]),
    ({CONFIG: {}, "config.json": {"model_type": "bert"}}, UnsupportedModelError, ["'bert'"]),
    ({CONFIG: builtin_dict(QWEN), "config.json": b"{broken"}, MmfastError, ["config.json"]),
    # regression: RecursionError, a bare ValueError naming no file, TypeError (unhashable)
    ({CONFIG: b"[" * 100_000}, MmfastError, ["cannot read JSON config"]),
    ({CONFIG: b'{"size": 1' + b"0" * 5000 + b"}"}, MmfastError, ["cannot read JSON config"]),
    ({CONFIG: {}, "config.json": {"model_type": ["qwen2_vl"]}}, MmfastError, ["model_type"]),
    ({}, MmfastError, ["no preprocessor_config.json"]),
    ({"config.json": {"model_type": "qwen2_vl"}}, MmfastError, ["no preprocessor_config.json"]),
    ({CONFIG: None}, MmfastError, ["no preprocessor_config.json"]),
    (
        {"processor_config.json": {"image_processor": 1}},
        MmfastError,
        ["processor_config.json: image_processor: expected an object, got 1"],
    ),
]


@pytest.mark.parametrize(("files", "kind", "names"), CONFIG_DIRS, ids=short)
def test_bad_checkpoint_directories(
    tmp_path: Path, files: dict[str, Any], kind: type[MmfastError], names: list[str]
) -> None:
    for name, content in files.items():
        if content is None:
            (tmp_path / name).mkdir()
        else:
            data = content if isinstance(content, bytes) else json.dumps(content).encode()
            (tmp_path / name).write_bytes(data)
    raises(kind, lambda: load(tmp_path), *names, str(tmp_path))
    missing = tmp_path / "missing"
    raises(UnsupportedModelError, lambda: load(missing), "neither a built-in id nor an existing")


# Keyword overrides (spelling config values) refused at from_pretrained or, for intermediate
# sizes, before the core allocates.
BAD_OVERRIDES: list[tuple[str, dict[str, Any], list[str]]] = [
    (QWEN, {"not_a_key": 1}, ["override 'not_a_key'", "valid:"]),
    (QWEN, {"max_pixels": 0}, ["max_pixels"]),
    (QWEN, {"merge_size": -2}, ["merge_size"]),
    (QWEN, {"temporal_patch_size": 1.5}, ["temporal_patch_size"]),
    (QWEN, {"backend": "PIL"}, ["backend"]),
    # regression: integers above 2**31 - 1 overflowed later (OverflowError)
    (QWEN, {"patch_size": 2**63}, ["patch_size", "from 1 to 2147483647"]),
    (QWEN, {"merge_size": 2**31}, ["merge_size"]),
    (LLAMA4, {"size": 2**63}, ["size.height"]),
    # regression: planning enumerated every tiling, for minutes
    (LLAMA4, {"max_patches": 10**6}, ["max_patches", "from 1 to 1024"]),
    (INTERNVL, {"max_patches": 1025}, ["max_patches"]),
    (LLAVA_NEXT, {"image_grid_pinpoints": [[10**9, 10**9]]}, ["image_grid_pinpoints", "178956970"]),
    # regression: degenerate LLaVA-NeXT grids raised ZeroDivisionError or KeyError
    (LLAVA_NEXT, {"crop_size": 7}, ["crop_size", "patch_size=14"]),
    (LLAVA_NEXT, {"patch_size": 1000}, ["patch_size=1000"]),
    (LLAVA_NEXT, {"image_grid_pinpoints": [[1, 2], [3, 4]]}, ["image_grid_pinpoints"]),
    (LLAVA_NEXT, {"size": {"max_height": 1, "max_width": 1}}, ["size"]),
    # regression: patches larger than the best fit's side raised ZeroDivisionError counting
    # the tokens, which on_error="skip" did not catch
    (
        LLAVA_NEXT,
        {"size": {"shortest_edge": 400}, "do_center_crop": False},
        ["image size", "cannot be counted", "400x400 patches"],
    ),
    # regression: ZeroDivisionError or OverflowError while building the processor
    ("microsoft/Phi-4-multimodal-instruct", {"size": 3}, ["patch_size", "at most size (3)"]),
    (LLAVA_NEXT, {"downsample_rate": INF}, ["downsample_rate", "(0, 1]"]),
    (LLAVA_NEXT, {"downsample_rate": 1e308}, ["downsample_rate"]),
    ("deepseek-community/Janus-Pro-1B", {"image_mean": [1e308, 0, 0]}, ["image_mean"]),
    # regression: the core allocated a 30 GB resize target and aborted
    (LLAVA, {"size": {"shortest_edge": 100_000}}, ["size", "at most 178956970 pixels"]),
]


@pytest.mark.parametrize("model_id", BUILTINS)
@pytest.mark.parametrize(
    "overrides",
    [{"image_std": [1e-46] * 3}, {"image_mean": [1e39, 0, 0]}, {"rescale_factor": 1e38}],
)
def test_normalising_to_non_finite_values_is_refused(model_id: str, overrides: Any) -> None:
    """A std that is zero in float32, or a mean or rescale factor that overflows it: refused,
    naming the setting, or not read. 19 families' torchvision arithmetic returned NaN or inf
    for every pixel, and a rescale factor of 0 raised ZeroDivisionError."""
    try:
        out = load(model_id, **overrides)(noise(64, 64), threads=1)
    except MmfastError as exc:
        assert any(name in str(exc) for name in ("image_mean", "image_std", "mean:", "std:")), exc
        return
    for key, value in out.items():
        if np.asarray(value).dtype.kind == "f":
            assert np.isfinite(np.asarray(value)).all(), key


def test_inkling_checks_its_rescaled_size_before_its_squares(tmp_path: Path) -> None:
    """A rescale past the pixel cap (a null upscale cap lets it through) is refused before a
    window is made per square: 100000 times a 20x30 image made 6 billion, for minutes."""
    config = builtin_dict("thinkingmachines/Inkling") | {
        "rescale_image_frac": 100_000,
        "rescale_image_max_upscaled_long_edge": None,
    }
    (tmp_path / CONFIG).write_text(json.dumps(config))
    proc = mmfast.ImageProcessor.from_pretrained(tmp_path)
    raises(MmfastError, lambda: proc(IMAGE), "rescale_image_frac", "178956970", "2000000x3000000")


@pytest.mark.parametrize(("model_id", "overrides", "names"), BAD_OVERRIDES, ids=short)
def test_bad_overrides(model_id: str, overrides: dict[str, Any], names: list[str]) -> None:
    raises(MmfastError, lambda: load(model_id, **overrides)(IMAGE), *names)


# Kernels: constants, dtypes, shapes, memory layouts, sizes -------------------------------------

# message (its first word names the parameter): values refused
KERNEL_CONSTANTS: dict[str, list[Any]] = {
    "mean: expected finite": [(NAN, 0, 0), (0, -INF, 0), np.array([0, 0, NAN])],
    "mean: expected finite float32": [(1e39, 0, 0)],  # inf once float32
    "mean: expected 3 values": [(0, 0), (0, 0, 0, 0)],
    "mean: expected a sequence of 3 floats": [[None, 0, 0], "abc", 0.5],
    "std: expected finite, non-zero": [(0, 1, 1), (1, -0.0, 1), (1e-46, 1, 1), (NAN, 1, 1)],
    "std: expected a sequence of 3 floats": [(1, 1, 1j)],
    "rescale_factor: expected a finite float": [NAN, INF, np.float64(-INF)],
    "rescale_factor: expected a float": ["0.5", [0.5]],
}


@pytest.mark.parametrize(("message", "value"), cases(KERNEL_CONSTANTS), ids=short)
def test_bad_kernel_constants(message: str, value: Any) -> None:
    kwargs = {message.split(":")[0]: value}
    raises(MmfastError, lambda: mmfast.deinterleave_rgb_to_planes(IMAGE, **kwargs), message)
    raises(MmfastError, lambda: pad(IMAGE, (24, 32), **kwargs), message)


# Arrays every kernel refuses, under what a processor's message names (None: it takes them).
BAD_ARRAYS: dict[str | None, list[Any]] = {
    "images[0]: images: expected": [
        *(IMAGE.astype(dtype) for dtype in (np.float32, np.int8, np.uint16, np.bool_, object)),
        *(np.array(7, np.uint8), IMAGE.reshape(-1), IMAGE[..., :2], IMAGE[None, None]),
    ],
    "images[0]: images: expected a non-empty image": [
        np.zeros(shape, np.uint8) for shape in [(0, 0, 3), (0, 5, 3), (5, 0, 3), (0, 5), (5, 0)]
    ],
    "images[0]: image": [Image.new("RGB", size) for size in [(0, 0), (0, 7), (7, 0)]],
    # Grayscale, one channel, RGBA, channels-first, a batch of one (read as transformers reads
    # them: test_processors compares them).
    None: [
        *(IMAGE[..., 0].copy(), Image.fromarray(IMAGE), IMAGE[..., :1], IMAGE[..., [0, 1, 2, 0]]),
        *(IMAGE.transpose(2, 0, 1).copy(), IMAGE[None]),
    ],
}


@pytest.mark.parametrize(("message", "image"), cases(BAD_ARRAYS), ids=short)
def test_bad_arrays(message: str | None, image: Any) -> None:
    calls = [lambda: mmfast.deinterleave_rgb_to_planes(image), lambda: pad(image, (64, 64))]
    if isinstance(image, np.ndarray):  # resize takes RGB PIL images
        calls += [lambda b=b: mmfast.resize(image, (5, 7), backend=b) for b in BACKENDS]
    for call in calls:
        raises(MmfastError, call, "image: expected", "uint8")
    if message is None:
        assert load(QWEN)(image).pixel_values.dtype == np.float32
    else:
        raises(MmfastError, lambda: load(QWEN)(image), message)


LAYOUTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "fortran": np.asfortranarray,
    "reversed_rows": lambda a: a[::-1],
    "reversed_channels": lambda a: a[..., ::-1],
    "strided_crop": lambda a: a[1:-1:3, 2::2],
    "read_only": read_only,
    "broadcast_pixel": lambda a: np.broadcast_to(a[:1, :1], a.shape),
    "unaligned": lambda a: np.frombuffer(b"\0" + a.tobytes(), np.uint8, offset=1).reshape(a.shape),
    "overlapping": lambda a: np.lib.stride_tricks.as_strided(a, (8, 9, 3), (3, 3, 1)),
    "rgb_of_rgba": lambda a: np.concatenate([a, a[..., :1]], 2)[..., :3],
}
LAYOUT_CALLS: dict[str, Callable[[np.ndarray], Any]] = {
    "deinterleave": lambda a: mmfast.deinterleave_rgb_to_planes(a, CLIP_MEAN, CLIP_STD),
    "pad": lambda a: pad(a, (40, 41)),
    "resize_pil": lambda a: mmfast.resize(a, (13, 29), "bicubic"),
    "resize_torchvision": lambda a: mmfast.resize(a, (13, 29), "bilinear", backend="torchvision"),
    "qwen": lambda a: load(QWEN)(a).pixel_values,
    "llava": lambda a: load(LLAVA)(a).pixel_values,
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_array_layouts_equal_a_contiguous_copy(layout: str) -> None:
    image = LAYOUTS[layout](noise(20, 30, 5))
    before = image.copy()
    for name, call in LAYOUT_CALLS.items():
        got, want = call(image), call(np.ascontiguousarray(image))
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    assert np.array_equal(image, before)  # inputs are read, never written


@pytest.mark.parametrize("call", LAYOUT_CALLS)
def test_strided_arrays_too_large_to_copy_raise_memory_error(call: str) -> None:
    # 3 bytes of memory standing for 3.5e18: the contiguous copy fails to allocate (it
    # aborted the process), on any machine.
    image = np.broadcast_to(np.zeros(3, np.uint8), (2**30, 2**30, 3))
    raises(MemoryError, lambda: LAYOUT_CALLS[call](image), "image: cannot allocate")


def test_serialize_of_a_strided_array_too_large_to_copy_raises_memory_error() -> None:
    tensor = np.broadcast_to(np.float32(1), (2**30, 2**30))
    raises(MemoryError, lambda: mmfast.serialize_pixel_values(tensor), "tensor: cannot allocate")


# message (its first word names the argument: resize's size or pad's canvas_size): values refused
SIZES: dict[str, list[Any]] = {
    "size: expected a positive": [(0, 5), (5, 0)],
    "size: expected a (height, width) pair": [(-1, 5), (5,), (1, 2, 3), "ab", None, (2**64, 1)],
    "size": [(2.5, 3), (2**40, 2**40)],
    # regression: MemoryError
    "size: the element count of shape [1, 4611686018427387904, 3] overflows": [(1, 2**62)],
    "canvas_size: expected at least the image size (20, 30)": [(0, 0), (19, 30), (20, 29)],
    "canvas_size: expected a (height, width) pair": [(-1, 30), "ab", None, (2**64, 30)],
    "canvas_size": [(20, 30, 1), (20.0, 30)],
    "canvas_size: the element count of shape [3, 1099511627776, 1099511627776]": [(2**40, 2**40)],
}
RESAMPLES = {"pil": ["cubic", "", b"bicubic", 6, -1, 2.0], "torchvision": ["box", "hamming", 4, 7]}


@pytest.mark.parametrize(("message", "size"), cases(SIZES), ids=short)
def test_bad_sizes(message: str, size: Any) -> None:
    if message.startswith("canvas_size"):
        raises(MmfastError, lambda: pad(IMAGE, size), message)
    else:
        for backend in BACKENDS:
            raises(MmfastError, lambda b=backend: mmfast.resize(IMAGE, size, backend=b), message)


@pytest.mark.parametrize(("backend", "resample"), cases(RESAMPLES), ids=short)
def test_bad_resample(backend: str, resample: Any) -> None:
    raises(MmfastError, lambda: mmfast.resize(IMAGE, (5, 5), resample, backend=backend), "resample")


def test_other_kernel_arguments() -> None:
    for backend in ("PIL", "torch", "", None):
        raises(MmfastError, lambda b=backend: mmfast.resize(IMAGE, (5, 5), backend=b), "backend")
    raises(MmfastError, lambda: mmfast.resize(IMAGE, (5, 5), antialias=False), "antialias")
    raises(MmfastError, lambda: mmfast.resize(Image.new("L", (4, 4)), (2, 2)), "image", "mode L")
    raises(MemoryError, lambda: pad(IMAGE, (10**6, 10**6)), "canvas_size: cannot allocate")


# Processor calls: threads, dtype, on_error, backend, batches, PIL modes ------------------------

# keyword: values a processor call refuses, naming the keyword
BAD_CALL_ARGUMENTS: dict[str, list[Any]] = {
    "threads": [0, -1, 4097, 2**63, 1.5, "2", np.int64(2), True],
    "dtype": ["Float32", "fp16", "float64", "", np.float32],
    "on_error": ["SKIP", "ignore", "", None, ["skip"]],
    "backend": ["PIL", "tv", "", 0],
}


@pytest.mark.parametrize(("keyword", "value"), cases(BAD_CALL_ARGUMENTS), ids=short)
def test_bad_call_arguments(keyword: str, value: Any) -> None:
    raises(MmfastError, lambda: load(QWEN)(IMAGE, **{keyword: value}), f"{keyword}: expected")


BAD_BATCHES: list[tuple[Any, list[str]]] = [
    ([[[IMAGE]]], ["images[0][0]: images: expected PIL images", "got list"]),
    ([IMAGE, [IMAGE]], ["images: expected images or lists", "mix of both"]),
    ([[], []], ["images: expected at least one image", "only empty samples"]),
    ({"image": IMAGE}, ["images[0]", "got dict"]),
    ((image for image in [IMAGE]), ["images[0]", "got generator"]),
    (None, ["images[0]", "NoneType"]),
    ([IMAGE, 3.5], ["images[1]", "got float"]),
    (Image.new("La", (10, 10)), ["images[0]", "mode La"]),  # regression: a plain ValueError
]


@pytest.mark.parametrize(("images", "names"), BAD_BATCHES, ids=short)
def test_bad_batches(images: Any, names: list[str]) -> None:
    raises(MmfastError, lambda: load(QWEN)(images), *names)


# test_processors compares the common modes (L, LA, P, CMYK, I;16, 1, ...) in every model.
@pytest.mark.parametrize("mode", ["I", "F", "I;16B", "YCbCr", "HSV", "LAB", "RGBa", "PA"])
def test_unusual_pil_modes_match_transformers(mode: str) -> None:
    module = pytest.importorskip("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl")
    hf = module.Qwen2VLImageProcessorPil.from_dict(builtin_dict(QWEN))
    image = picture(30, 40, mode if mode.startswith("I;16") else "RGBA").convert(mode)
    want = hf([image], return_tensors="np")["pixel_values"]
    assert np.array_equal(load(QWEN)(image).pixel_values, want)


# Serialisation -------------------------------------------------------------------------------

TENSOR = np.random.default_rng(3).standard_normal((3, 5, 7)).astype(np.float32)
TENSORS = [TENSOR[::-1], TENSOR[:, ::2], np.asfortranarray(TENSOR), read_only(TENSOR)]
TENSORS += [np.broadcast_to(TENSOR[:1], TENSOR.shape), np.full((2, 2), NAN, np.float32)]
TENSORS += [np.zeros((0, 3), np.float32), np.array(1.5, np.float32), np.ones((1,) * 32, np.float32)]


@pytest.mark.parametrize("tensor", TENSORS, ids=lambda t: f"{t.ndim}d{t.strides[:3]}")
def test_serialize_round_trip(tensor: np.ndarray) -> None:
    """Any layout serialises as its contiguous little-endian copy, and reads back."""
    data = mmfast.serialize_pixel_values(tensor)
    assert data == np.ascontiguousarray(tensor, dtype="<f4").tobytes()
    back = mmfast.deserialize_pixel_values(data, tensor.shape)
    assert back.flags.writeable and back.tobytes() == data


@pytest.mark.parametrize("tensor", [TENSOR.astype(">f4"), TENSOR.astype(np.float16), np.float32(1)])
def test_serialize_refuses_other_dtypes(tensor: Any) -> None:
    raises(MmfastError, lambda: mmfast.serialize_pixel_values(tensor), "tensor: ", "dtype float32")


# message: (data, shape) pairs refused
DESERIALIZE_ERRORS: dict[str, list[tuple[Any, Any]]] = {
    "data: expected 4 bytes": [(b"", ())],
    "data: expected 12 bytes": [(bytes(8), (3,))],
    "data: expected 0 bytes": [(bytes(8), (2, 0))],
    "data: expected bytes": [(bytearray(8), (2,)), (memoryview(bytes(8)), (2,)), (None, (2,))],
    "shape: expected a sequence of non-negative integers": [(bytes(8), (-1,)), (bytes(8), 2)],
    "shape": [(bytes(8), (2.0,)), (bytes(8), (2**64,))],
    "shape: the element count of shape [9223372036854775808, 2]": [(bytes(8), (2**63, 2))],
    "shape: the byte size of shape [4611686018427387904] overflows": [(bytes(8), (2**62,))],
    "shape: expected at most 32 dimensions": [(bytes(4), (1,) * 33)],  # regression: a panic
}


@pytest.mark.parametrize(("message", "arguments"), cases(DESERIALIZE_ERRORS), ids=short)
def test_deserialize_errors(message: str, arguments: tuple[Any, Any]) -> None:
    raises(MmfastError, lambda: mmfast.deserialize_pixel_values(*arguments), message)


# Videos --------------------------------------------------------------------------------------

BAD_VIDEOS: dict[str, tuple[Any, str]] = {
    "mismatched_frames": ([CLIP[0], CLIP[1][:20]], "of one size"),
    "zero_frames": (CLIP[:0], "videos: expected non-empty frames"),
    "empty_list": ([], "videos: expected a (frames, height, width, 3) uint8 array"),
    "empty_clip": ([[]], "videos: expected at least one frame"),
    "float32": (CLIP.astype(np.float32), "videos: expected uint8"),
    "5d": (CLIP[None], "(1, 4, 30, 40, 3)"),
    "4_channels": (np.zeros((2, 8, 8, 4), np.uint8), "with 3 channels"),
    "channels_first_frame": (np.zeros((3, 8, 8), np.uint8), "(3, 8, 8) is ambiguous"),
    "None_frame": ([CLIP[0], None], "NoneType"),
    "aspect_ratio": (np.zeros((2, 1, 400, 3), np.uint8), "aspect ratio"),
    "url": ("https://example.com/clip.mp4", "does not fetch URLs"),
}
# Video files, decoded by mmfast.load_video, which names them (test_video has the rest).
BAD_VIDEO_FILES: dict[str, tuple[Any, str]] = {
    "garbage_bytes": (b"\x00" * 300, "video (300 bytes): cannot read the video"),
    "empty_bytes": (b"", "video: expected video data, got empty bytes"),
    "png_bytes": (png(30, 20), "counts its frames"),
}


@pytest.mark.parametrize("name", BAD_VIDEOS)
@pytest.mark.parametrize("model_id", [QWEN, QWEN3])
def test_bad_videos(model_id: str, name: str) -> None:
    videos, message = BAD_VIDEOS[name]
    raises(MmfastError, lambda: load(model_id).videos(videos), message)


def test_bad_clips_among_several_are_named_by_position() -> None:
    proc = load(QWEN)
    float_clip = CLIP.astype(np.float32)
    raises(MmfastError, lambda: proc.videos([CLIP, float_clip]), "videos[1]: videos: expected")
    raises(
        mmfast.VideoDecodeError,
        lambda: proc.videos([CLIP, CLIP, b"\x00" * 300]),
        "videos[2]: video (300 bytes): cannot read the video",
    )
    raises(MmfastError, lambda: proc.videos(float_clip), "videos: expected")  # one: no position


@pytest.mark.parametrize("name", BAD_VIDEO_FILES)
def test_bad_video_files(name: str) -> None:
    source, message = BAD_VIDEO_FILES[name]
    raises(mmfast.VideoDecodeError, lambda: load(QWEN3).videos(source), message)


def test_missing_video_files_raise_like_missing_images(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"clip\.mp4"):
        load(QWEN).videos(tmp_path / "clip.mp4")


# (model, message): keyword arguments its videos() refuses (regression: Qwen3-VL's rates and
# counts raised ValueError, TypeError, OverflowError or ZeroDivisionError, or allocated 8 GB)
VIDEO_ARGUMENTS: dict[tuple[str, str], list[dict[str, Any]]] = {
    (QWEN3, "fps: expected a number > 0 and at most 65536"): [
        {"fps": v} for v in (NAN, INF, "2", 0, 1e308)
    ],
    (QWEN3, "video_fps: expected a number > 0"): [
        {"fps": 2, "video_fps": v} for v in (0, NAN, "3", 1e308)
    ],
    # regression: GLM-4.1V listed duration * fps frame indices, for ever at fps=1e9
    (GLM41V, "fps: expected a number > 0 and at most 65536"): [{"fps": 1e9, "video_fps": 4.0}],
    (QWEN3, "num_frames: expected an integer"): [{"num_frames": n} for n in (0, 2.5, 2**70, 10**9)],
    (QWEN3, "num_frames: expected at least temporal_factor=2"): [{"num_frames": 1, "fps": None}],
    (QWEN3, "video_fps: expected one rate per clip (1)"): [{"video_fps": [30.0, 30.0]}],
    (QWEN3, "fps, num_frames"): [{"fps": 2, "num_frames": 4}],
    (QWEN3, "threads: expected"): [{"threads": 0}],
    (QWEN3, "dtype: expected"): [{"dtype": "f32"}],
    (QWEN, "video_fps"): [{"do_sample_frames": True, "fps": 2.0}],  # needs the clip's rate
    (QWEN, "num_frames"): [{"do_sample_frames": True, "num_frames": 100}, {"num_frames": True}],
    # Samplers that need the clip's rate (or duration), or frames it does not have.
    ("HuggingFaceTB/SmolVLM2-2.2B-Instruct", "video_fps"): [{"do_sample_frames": True}],
    ("openbmb/MiniCPM-V-4.6", "video_fps"): [{}],
    ("google/gemma-4-31B-it", "num_frames"): [{}, {"num_frames": 100}],
    ("google/gemma-4-31B-it", "fps, num_frames"): [{"fps": 2}],
    ("OpenGVLab/InternVL3-8B-hf", "num_frames: InternVLVideoProcessor samples"): [
        {"do_sample_frames": True}
    ],
    ("OpenGVLab/InternVL3-8B-hf", "fps: "): [
        {"do_sample_frames": True, "fps": 0.01, "video_fps": 30.0}
    ],
}


@pytest.mark.parametrize(("key", "kwargs"), cases(VIDEO_ARGUMENTS), ids=short)
def test_bad_video_arguments(key: tuple[str, str], kwargs: dict[str, Any]) -> None:
    model_id, message = key
    raises(MmfastError, lambda: load(model_id).videos(CLIP, **kwargs), message)


def test_glm_sampling_faster_than_a_frame_takes_every_frame() -> None:
    """GLM-4.1V at a rate past twice the clip's: every frame, without listing one index per
    step (65536 frames a second over 300 seconds listed 20 million)."""
    videos = load(GLM41V).videos
    listed = videos(CLIP, video_fps=4.0, fps=7.9)  # under twice the rate: indices listed
    assert listed.video_grid_thw[0, 0] == 2  # all 4 frames, 2 to a temporal patch
    for fps in (8.0, 9.5, 65536):
        fast = videos(CLIP, video_fps=4.0, fps=fps)
        assert all(same_bits(fast[key], listed[key]) for key in listed)


@pytest.mark.parametrize(
    "model_id", [m for m in BUILTINS if "fps" in (registry.BUILTINS[m].video or {})]
)
@pytest.mark.parametrize("fps", [0, -1, 1e308])
def test_bad_video_config_rates(tmp_path: Path, model_id: str, fps: float) -> None:
    """A video config's fps out of range: refused naming it (GLM's raised ZeroDivisionError,
    GLM-5's and GLM-GA's NumPy's ValueError, Qwen3-VL's and others' OverflowError)."""
    builtin = registry.BUILTINS[model_id]
    (tmp_path / CONFIG).write_text(json.dumps(dict(builtin.preprocessor)))
    (tmp_path / "video_preprocessor_config.json").write_text(
        json.dumps({**builtin.video, "fps": fps})
    )
    (tmp_path / "config.json").write_text(json.dumps({"model_type": builtin.model_type}))
    try:
        proc = mmfast.ImageProcessor.from_pretrained(tmp_path)
        proc.videos(CLIP, video_fps=4.0)
    except MmfastError as exc:
        assert "fps" in str(exc), exc
    else:
        pytest.fail(f"fps={fps} was not refused")


@pytest.mark.parametrize("model_id", [QWEN, QWEN3])
def test_video_layouts_equal_a_contiguous_copy(model_id: str) -> None:
    videos = load(model_id).videos
    for view in (CLIP[:, ::-1], CLIP[:, :, ::2], np.asfortranarray(CLIP), read_only(CLIP)):
        want = videos(np.ascontiguousarray(view)).pixel_values_videos
        assert np.array_equal(videos(view).pixel_values_videos, want)
    tiny = videos(np.zeros((3, 1, 1, 3), np.uint8))  # one-pixel frames, padded to even
    assert np.isfinite(tiny.pixel_values_videos).all()
    raises(UnsupportedModelError, lambda: load(LLAVA).videos(CLIP), "no video processor")
