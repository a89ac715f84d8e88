"""mmfast.ray: every row equals its image's own output, bit for bit.

The first part calls :class:`Preprocess` on plain dicts of NumPy arrays, as ``map_batches``
does, and needs no Ray; the second runs folders through a local two-CPU Ray cluster and skips
without Ray (``pip install -e '.[test]'`` installs it).
"""

from __future__ import annotations

import io
import logging
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from conftest import builtin_settings, describe, same_bits, shared_path, smooth
from PIL import Image

from mmfast import ImageDecodeError, ImageProcessor, MmfastError, supported_models
from mmfast.cli import BF16_SUFFIX, image_files
from mmfast.models import MllamaConfig
from mmfast.ray import Preprocess, preprocess_files

QWEN = "Qwen/Qwen2-VL-7B-Instruct"
LLAVA = "llava-hf/llava-1.5-7b-hf"
LLAVA_NEXT = "llava-hf/llava-v1.6-mistral-7b-hf"
SMOLVLM = "HuggingFaceTB/SmolVLM-Instruct"
LLAMA4 = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
SIGLIP = "google/siglip-so400m-patch14-384"

LFM2 = "LiquidAI/LFM2-VL-1.6B"
SPLITTING: dict[str, dict[str, Any]] = {
    "google/gemma-3-4b-it": {"do_pan_and_scan": True},
    LFM2: {"max_image_tokens": 64, "min_image_tokens": 16, "tile_size": 256},
    "rhymes-ai/Aria": {"split_image": True, "max_image_size": 490},
}

# Mixed aspect ratios, so that the padded layouts pad (LLaVA-NeXT: 3 or 5 tiles, SmolVLM: 13
# or 17) and the concatenated ones cut rows of several lengths.
SIZES = [(40, 60), (90, 50), (300, 200), (500, 900), (200, 200)]


def encoded(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "PNG")
    return buffer.getvalue()


def column(values: list[Any]) -> np.ndarray:
    """A column as Ray's numpy batches hold bytes and strings: a 1-D object array."""
    out = np.empty(len(values), object)
    out[:] = values
    return out


IMAGES = column([encoded(smooth(h, w, seed=i)) for i, (h, w) in enumerate(SIZES)])


def rows(out: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A batch's columns as rows."""
    n = len(next(iter(out.values())))
    return [{key: values[i] for key, values in out.items()} for i in range(n)]


def check_row(row: Mapping[str, Any], proc: ImageProcessor, image: Any, **call: Any) -> None:
    """``row`` holds ``proc([[image]], **call)`` without the batch axis: ``pixel_values``
    whole where the layout concatenates images' rows, ``pixel_lut`` whole (and MiniCPM-V's
    ``target_sizes``, a row per view), every other output's first entry; bfloat16 as uint16
    bits under ``BF16_SUFFIX``. Arrays holding an image's several entries (counted_outputs:
    LFM2-VL's per-crop masks, DeepSeek-OCR-2's and Step-3.7's local tiles) are whole too."""
    for key, value in proc([[image]], **call).items():
        layout = proc.config.layout()
        cut = {proc.config.output_key, "pixel_rows_mask"}
        concatenated = key in proc.config.counted_outputs and not isinstance(value, list)
        whole = (
            key == "pixel_lut"
            or concatenated
            or (key in cut and layout == "concat")
            or (key == "target_sizes" and layout == "strip")  # each of the image's views
            or key in proc.config.batch_dependent
            or np.ndim(value) == 0  # a batch-wide scalar (Aria num_crops), whole
        )
        want = np.atleast_1d(np.asarray(value if whole else value[0]))
        if want.dtype == ml_dtypes.bfloat16:
            key, want = key + BF16_SUFFIX, want.view(np.uint16)
        got = np.atleast_1d(np.asarray(row[key]))  # atleast_1d: same_bits takes no 0-d arrays
        assert same_bits(got, want), describe(key, got, want)


# --------------------------------------------------------------------------------------------
# Preprocess on plain batches
# --------------------------------------------------------------------------------------------

# (model, overrides for the processor and Preprocess, call arguments for both).
CASES = [
    *[
        # Gemma 3 gives every image one view unless pan-and-scan adds crops; LFM2-VL splits
        # only images above its budget (here 500x900, into 256-pixel tiles and a thumbnail).
        (model, builtin_settings(model, **SPLITTING.get(model, {})), {})
        for model in supported_models()
    ],
    (LFM2, SPLITTING[LFM2], {"dtype": "uint8"}),
    *[
        (model, {}, {"dtype": dtype})
        for model in (QWEN, LLAVA_NEXT, LLAMA4)
        for dtype in ("float32", "bfloat16", "float16", "uint8")
    ],
    (QWEN, {"backend": "torchvision", "max_pixels": 100_000}, {}),
    (QWEN, {}, {"threads": 2}),
    # SmolVLM's PIL class gives float32 for a batch of unequal tile counts, uint8 for one
    # image: each row must be its image's own.
    (SMOLVLM, {"do_rescale": False, "do_normalize": False}, {}),
    # Without resizing SigLIP's outputs differ in size, which one call cannot stack.
    (SIGLIP, {"do_resize": False}, {}),
]


@pytest.mark.parametrize(("model", "overrides", "call"), CASES)
def test_rows_equal_each_images_own_output(model, overrides, call):
    out = Preprocess(model, **overrides, **call)({"bytes": IMAGES, "id": np.arange(len(IMAGES))})
    proc = ImageProcessor.from_pretrained(model, **overrides)
    assert "bytes" not in out
    assert out["id"].tolist() == list(range(len(IMAGES)))
    for row, image in zip(rows(out), IMAGES, strict=True):
        check_row(row, proc, image, **call)
    key = proc.config.output_key
    values = out.get(key, out.get(key + BF16_SUFFIX))
    # Mllama's rows are HF's padded ones: every image has max_image_tiles tiles.
    fixed = isinstance(proc.config, MllamaConfig)
    if (proc.config.layout() != "stack" and not fixed) or overrides.get("do_resize") is False:
        # Rows of several shapes: the cutting (or the padding's removal) was exercised.
        assert len({np.shape(v) for v in values}) > 1


def test_path_and_array_columns(tmp_path):
    arrays = [smooth(h, w, seed=i) for i, (h, w) in enumerate(SIZES)]
    paths = [str(tmp_path / f"{i}.png") for i in range(len(arrays))]
    for array, path in zip(arrays, paths, strict=True):
        Image.fromarray(array).save(path)
    # Equal-sized images come as one (B, H, W, 3) array (Ray's fixed-shape tensor column).
    stacked = np.stack([smooth(30, 40, seed=i) for i in range(3)])
    proc = ImageProcessor.from_pretrained(QWEN)
    for name, images, pixels in [
        ("file", column(paths), arrays),
        ("image", column(arrays), arrays),
        ("image", stacked, stacked),
    ]:
        out = Preprocess(QWEN, column=name)({name: images})
        # Paths stay to name the rows; pixels do not.
        assert list(out.get(name, [])) == (paths if name == "file" else [])
        for row, array in zip(rows(out), pixels, strict=True):
            check_row(row, proc, array)


def bad_batch(*, path: bool = True) -> dict[str, np.ndarray]:
    batch = {
        "bytes": column([IMAGES[0], b"\xff\xd8\xff\xe0 not a jpeg", IMAGES[1], b""]),
        "path": column(["a.png", "broken.jpg", "b.png", "empty.png"]),
        "label": np.array([10, 11, 12, 13]),
    }
    if not path:
        del batch["path"]
    return batch


def test_skip_drops_and_logs_bad_rows(caplog):
    with caplog.at_level(logging.WARNING, logger="mmfast.ray"):
        out = Preprocess(QWEN)(bad_batch())
    assert out["path"].tolist() == ["a.png", "b.png"]
    assert out["label"].tolist() == [10, 12]
    proc = ImageProcessor.from_pretrained(QWEN)
    for row, image in zip(rows(out), IMAGES[:2], strict=True):
        check_row(row, proc, image)
    messages = [record.getMessage().split(": ")[0] for record in caplog.records]
    assert messages == ["skipped broken.jpg", "skipped empty.png"]
    # Nothing usable: the other columns stay, empty, and there are no outputs.
    out = Preprocess(QWEN)({"bytes": column([b"junk"]), "path": column(["junk.jpg"])})
    assert list(out) == ["path"]
    assert out["path"].shape == (0,)


@pytest.mark.parametrize(
    ("kwargs", "batch", "error", "message"),
    [
        ({"on_error": "ignore"}, {}, MmfastError, "on_error: expected 'raise' or 'skip', got"),
        ({"threads": 0}, {}, MmfastError, "threads: expected an integer from 1"),
        ({"dtype": "int8"}, {}, MmfastError, "dtype: expected one of"),
        ({}, [IMAGES[0]], MmfastError, "batch: expected a dict of NumPy arrays"),
        (
            {},
            {"path": column(["a.png"])},
            MmfastError,
            r"column: expected one of the batch's columns \(path\), got 'bytes'",
        ),
        (
            {},
            {"bytes": IMAGES[:1], "pixel_values": np.zeros(1)},
            MmfastError,
            r"named like an output of the model, got \['pixel_values'\]",
        ),
        ({"on_error": "raise"}, bad_batch(), ImageDecodeError, r"^broken\.jpg: "),
        (
            {"on_error": "raise"},
            bad_batch(path=False),
            ImageDecodeError,
            r"^bytes\[1\] of a batch without a 'path' column: ",
        ),
        (
            {"column": "path", "on_error": "raise"},
            {"path": column(["missing.png"])},
            FileNotFoundError,
            r"^missing\.png: ",
        ),
    ],
)
def test_errors(kwargs, batch, error, message):
    with pytest.raises(error, match=message):
        Preprocess(QWEN, **kwargs)(batch)


@pytest.mark.parametrize(
    "model", ["lerobot/pi0_base", "thinkingmachines/Inkling", "mistral-community/pixtral-12b"]
)
def test_uint8_is_refused_where_the_processor_refuses_it(model):
    """PI0's letterbox (0 after normalising) and Inkling's -1 are values no byte gives: uint8
    rows would decode to other values than the float outputs."""
    with pytest.raises(MmfastError, match=r"^dtype: 'uint8' cannot give"):
        ImageProcessor.from_pretrained(model)(IMAGES[0], dtype="uint8")
    with pytest.raises(MmfastError, match=r"^dtype: 'uint8' cannot give"):
        Preprocess(model, dtype="uint8")


# --------------------------------------------------------------------------------------------
# Through Ray
# --------------------------------------------------------------------------------------------

# Ray warns of its own deprecated settings whenever it builds a DataContext, and 2.40 (the
# oldest the extra allows) leaves its log files open (ResourceWarning); filterwarnings =
# ["error"] would turn both into errors, in Ray's executor thread too.
through_ray = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning:ray", "ignore::ResourceWarning"
)


@pytest.fixture(scope="module")
def ray_data() -> Iterator[Any]:
    """A local Ray cluster on 2 CPUs for this module; ``ray.data``."""
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    try:
        yield ray.data
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """20 JPEG and PNG files of mixed sizes, a corrupt JPEG and a text file."""
    root = tmp_path_factory.mktemp("images")
    for i in range(20):
        h, w = SIZES[i % len(SIZES)]
        Image.fromarray(smooth(h + i, w, seed=i)).save(
            root / f"{i:02d}.{'jpg' if i % 2 else 'png'}"
        )
    (root / "corrupt.jpg").write_bytes(b"\xff\xd8\xff\xe0" + bytes(100))
    (root / "notes.txt").write_text("not an image")
    (root / "clip.mp4").write_bytes(b"not listed: a video file")  # it was, and skipped
    return root


@through_ray
@pytest.mark.parametrize(
    ("where", "model", "overrides", "skipped"),
    [
        ("tmp", QWEN, {}, ["corrupt.jpg"]),
        # A relative path: the actors, in another working directory, get it absolute.
        ("relative", LLAVA, {}, ["corrupt.jpg"]),
        # 7 or 10 tiles of 384 instead of 13 to 17: a third of the bytes, still padded.
        ("tmp", SMOLVLM, {"size": {"longest_edge": 1152}}, ["corrupt.jpg"]),
        # Real files: EXIF rotation, CMYK, 16-bit grey, RGBA, a palette GIF, 1x1, 12 MP.
        ("shared", QWEN, {"max_pixels": 200_000}, []),
    ],
)
def test_folder_through_ray(ray_data, folder, monkeypatch, where, model, overrides, skipped):
    root = shared_path("images") if where == "shared" else folder
    if where == "relative":
        monkeypatch.chdir(folder)
    given = "." if where == "relative" else root
    got = preprocess_files(given, model, workers=2, batch_size=4, **overrides).take_all()
    by_path = {row["path"]: row for row in got}
    files = image_files([os.fspath(root)], videos=False)
    assert len(by_path) == len(got)
    assert sorted(set(files) - by_path.keys()) == [os.fspath(root / name) for name in skipped]
    proc = ImageProcessor.from_pretrained(model, **overrides)
    for path, row in by_path.items():
        check_row(row, proc, path)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size: expected a positive integer, got 0"),
        ({"batch_size": 1.5}, "batch_size: expected a positive integer, got 1.5"),
        ({"workers": 0}, "workers: expected None or a positive integer, got 0"),
        ({"workers": -2}, "workers: expected None or a positive integer, got -2"),
    ],
)
def test_preprocess_files_checks_its_arguments(folder, kwargs, message):
    """Named before Ray sees them (Ray's own errors named neither: "('size must be >= 1', 0)")."""
    with pytest.raises(MmfastError, match=re.escape(message)):
        preprocess_files(folder, QWEN, **kwargs)


@through_ray
def test_map_batches_with_other_columns(ray_data, folder):
    paths = sorted(folder.glob("*.jpg"))
    items = [{"label": i, "bytes": p.read_bytes(), "path": str(p)} for i, p in enumerate(paths)]
    got = (
        ray_data.from_items(items)
        .map_batches(
            Preprocess,
            fn_constructor_args=(QWEN,),
            fn_constructor_kwargs={"dtype": "bfloat16"},
            batch_size=3,
            batch_format="numpy",
            compute=ray_data.ActorPoolStrategy(size=1),
        )
        .take_all()
    )
    assert set(got[0]) == {"label", "path", "pixel_values" + BF16_SUFFIX, "image_grid_thw"}
    assert sorted(row["path"] for row in got) == [str(p) for p in paths if p.stem != "corrupt"]
    proc = ImageProcessor.from_pretrained(QWEN)
    for row in got:
        assert row["path"] == str(paths[row["label"]])
        check_row(row, proc, row["path"], dtype="bfloat16")
