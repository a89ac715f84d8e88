"""mmfast.ImageProcessor against transformers' image processors, bit for bit.

Qwen2-VL, Qwen2.5-VL, Qwen3-VL and LLaVA-1.5 are compared with transformers' PIL backend
(``Qwen2VLImageProcessorPil``, ``CLIPImageProcessorPil``) built from the same config dict as
mmfast's built-in, with ``return_tensors="np"``. Llama 4's processor needs torch: it is compared
with the goldens in ``../shared/golden/llama4`` and, when torch and torchvision import, live.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import gzip
import importlib
import io
import json
import threading
import time
import warnings
import weakref
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from conftest import (
    SHARED,
    assert_same_outputs,
    builtin_dict,
    builtin_settings,
    describe,
    hf_load_image,
    make_image,
    noise,
    same_bits,
    shared_path,
    smooth,
    ticks_during,
)
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageFile, ImageOps
from PIL.PngImagePlugin import PngImageFile

import mmfast
from mmfast import MmfastError, UnsupportedModelError, _native, processors, reference
from mmfast.models.base import Resized
from mmfast.models.geometry import CropBox
from mmfast.processors import BatchFeature

QWEN_IDS = ["Qwen/Qwen2-VL-7B-Instruct", "Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen3-VL-8B-Instruct"]
LLAVA_ID = "llava-hf/llava-1.5-7b-hf"
LLAMA4_ID = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
PIL_IDS = [*QWEN_IDS, LLAVA_ID]  # the models with a PIL-backend processor in transformers
ALL_IDS = [*PIL_IDS, LLAMA4_ID]
KEYS = {
    **{m: ["pixel_values", "image_grid_thw"] for m in QWEN_IDS},
    LLAVA_ID: ["pixel_values"],
    LLAMA4_ID: ["pixel_values", "aspect_ratios"],
}

SHARED_IMAGES = sorted(p.name for p in (SHARED / "images").glob("*")) if SHARED.exists() else []
GOLDENS = (
    sorted(p.stem for p in (SHARED / "golden" / "llama4").glob("*.npz")) if SHARED.exists() else []
)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def hf_processor(model_id: str, **overrides: Any) -> Any:
    """transformers' PIL-backend processor for a built-in config plus ``overrides``."""
    if model_id == LLAVA_ID:
        module = pytest.importorskip("transformers.models.clip.image_processing_pil_clip")
        cls = module.CLIPImageProcessorPil
    else:
        module = pytest.importorskip("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl")
        cls = module.Qwen2VLImageProcessorPil
    return cls.from_dict(builtin_dict(model_id) | overrides)


def hf_array_input(array: np.ndarray) -> np.ndarray | Image.Image:
    """The same array for HF, unless HF would read it as channels-first.

    transformers infers the channel axis from the shape and takes a leading 1, 3 or 4 as the
    channels, so an (H, W, 3) array with H in {1, 3, 4} is ambiguous to it; the equivalent PIL
    image is unambiguous.
    """
    return Image.fromarray(array) if array.shape[0] in (1, 3, 4) else array


def assert_matches_hf(
    model_id: str,
    images: list[Any],
    hf_images: list[Any] | None = None,
    **overrides: Any,
) -> BatchFeature:
    """mmfast on ``images`` equals transformers on ``hf_images`` (default: the same objects)."""
    want = hf_processor(model_id, **overrides)(
        images if hf_images is None else hf_images, return_tensors="np"
    )
    got = mmfast.ImageProcessor.from_pretrained(model_id, **overrides)(images)
    assert_same_outputs(got, want)
    return got


def png_bytes(image: Image.Image, **params: Any) -> bytes:
    buf = io.BytesIO()
    image.save(buf, "PNG", **params)
    return buf.getvalue()


@pytest.fixture(autouse=True)
def _default_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests choose MMFAST_NUM_THREADS themselves; an inherited value must not leak in."""
    monkeypatch.delenv("MMFAST_NUM_THREADS", raising=False)


# --------------------------------------------------------------------------------------------
# The BatchFeature
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_batch_feature_is_a_mapping_with_attributes(model_id: str) -> None:
    out = mmfast.ImageProcessor.from_pretrained(model_id)([noise(40, 60), smooth(90, 50)])
    assert isinstance(out, Mapping)
    assert list(out) == list(out.keys()) == KEYS[model_id]
    assert len(out) == len(KEYS[model_id])
    for key in KEYS[model_id]:
        assert out[key] is getattr(out, key)
        assert key in out
    assert out.pixel_values.dtype == np.float32
    assert np.isfinite(out.pixel_values).all() and out.pixel_values.std() > 0.1
    assert "nonexistent" not in out
    with pytest.raises(AttributeError):
        _ = out.nonexistent
    with pytest.raises(KeyError):
        _ = out["nonexistent"]
    assert "pixel_values: float32[" in repr(out)
    assert dict(out) == dict(out.items())


def test_output_layouts() -> None:
    """Shapes and dtypes per model, with values pinned by the equalities beside them."""
    images = [noise(100, 200, 1), smooth(60, 30, 2)]
    qwen = mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])
    out = qwen(images)
    # smart_resize: 100x200 rounds to 112x196; 60x30 rounds to 56x28, under min_pixels, so
    # it is scaled up and ceiled to 84x56. In 14-pixel patches:
    grids = [[1, 8, 14], [1, 6, 4]]
    assert out.image_grid_thw.dtype == np.int64 and out.image_grid_thw.tolist() == grids
    assert out.pixel_values.shape == (8 * 14 + 6 * 4, 3 * 2 * 14 * 14)
    # A still image is one temporal patch, repeated: both halves of each row are equal.
    halves = out.pixel_values.reshape(-1, 3, 2, 14 * 14)
    assert np.array_equal(halves[:, :, 0], halves[:, :, 1])

    llava = mmfast.ImageProcessor.from_pretrained(LLAVA_ID)(images)
    assert llava.pixel_values.shape == (2, 3, 336, 336)

    llama = mmfast.ImageProcessor.from_pretrained(LLAMA4_ID)
    f32, bf16 = llama(images), llama(images, dtype="bfloat16")
    assert f32.aspect_ratios.dtype == np.int64 and f32.aspect_ratios.tolist() == [[1, 1], [1, 1]]
    assert f32.pixel_values.shape == (2, 3, 336, 336) and f32.pixel_values.dtype == np.float32
    assert bf16.pixel_values.dtype == ml_dtypes.bfloat16
    assert same_bits(f32.pixel_values, bf16.pixel_values.astype(np.float32))
    assert same_bits(f32.aspect_ratios, bf16.aspect_ratios)


# --------------------------------------------------------------------------------------------
# Parity with transformers' PIL backend: Qwen-VL and LLaVA-1.5
# --------------------------------------------------------------------------------------------

# Mixed sizes in one batch: tall and wide strips (under Qwen's rounding to 28/32 one side
# grows while the other shrinks), sizes near multiples of the factor, odd sizes and squares.
MIXED_SIZES = [(20, 1000), (900, 30), (15, 990), (55, 57), (83, 29), (224, 224), (333, 500)]


@pytest.mark.parametrize("kind", ["noise", "smooth"])
@pytest.mark.parametrize("model_id", PIL_IDS)
def test_pil_batch_matches_hf(model_id: str, kind: str) -> None:
    images = [
        Image.fromarray(make_image(kind, h, w, seed)) for seed, (h, w) in enumerate(MIXED_SIZES)
    ]
    assert_matches_hf(model_id, images)


@pytest.mark.parametrize("kind", ["noise", "smooth"])
@pytest.mark.parametrize("model_id", PIL_IDS)
def test_array_batch_matches_hf(model_id: str, kind: str) -> None:
    arrays = [make_image(kind, h, w, seed) for seed, (h, w) in enumerate(MIXED_SIZES)]
    assert all(a.shape[0] not in (1, 3, 4) for a in arrays)  # HF gets the very same arrays
    assert_matches_hf(model_id, arrays)


@pytest.mark.parametrize("name", SHARED_IMAGES or ["(shared images absent)"])
@pytest.mark.parametrize("model_id", PIL_IDS)
def test_shared_images_match_hf(model_id: str, name: str) -> None:
    path = shared_path("images", name)
    with Image.open(path) as opened:
        image = ImageOps.exif_transpose(opened)
        image.load()
    # Both convert to RGB themselves: CMYK, RGBA, P, L and I;16 files are all here.
    assert_matches_hf(model_id, [image])


image_kind = st.sampled_from(["noise", "smooth"])
input_kind = st.sampled_from(["pil", "array"])


def hypothesis_case(
    height: int, width: int, seed: int, kind: str, source: str
) -> tuple[list[Any], list[Any]]:
    array = make_image(kind, height, width, seed)
    if source == "pil":
        image = Image.fromarray(array)
        return [image], [image]
    return [array], [hf_array_input(array)]


@pytest.mark.parametrize("model_id", QWEN_IDS)
@settings(max_examples=25, deadline=None)
@given(
    height=st.integers(1, 700),
    width=st.integers(1, 700),
    seed=st.integers(0, 2**16),
    kind=image_kind,
    source=input_kind,
)
def test_qwen_random_sizes_match_hf(
    model_id: str, height: int, width: int, seed: int, kind: str, source: str
) -> None:
    assume(max(height, width) / min(height, width) <= 200)
    images, hf_images = hypothesis_case(height, width, seed, kind, source)
    assert_matches_hf(model_id, images, hf_images)


@settings(max_examples=25, deadline=None)
@given(
    height=st.integers(1, 500),
    width=st.integers(1, 500),
    seed=st.integers(0, 2**16),
    kind=image_kind,
    source=input_kind,
)
def test_llava_random_sizes_match_hf(
    height: int, width: int, seed: int, kind: str, source: str
) -> None:
    # A shortest edge of 336 blows a 1x500 strip up to 336x168000; keep the resize cheap.
    assume(max(height, width) / min(height, width) <= 8)
    images, hf_images = hypothesis_case(height, width, seed, kind, source)
    assert_matches_hf(LLAVA_ID, images, hf_images)


@pytest.mark.parametrize("model_id", QWEN_IDS)
@settings(max_examples=25, deadline=None)
@given(
    multiples=st.tuples(st.integers(1, 24), st.integers(1, 24)),
    offsets=st.tuples(st.integers(-15, 15), st.integers(-15, 15)),
    budget=st.sampled_from(
        [{}, {"max_pixels": 28 * 28 * 64}, {"min_pixels": 28 * 28 * 400, "max_pixels": 10**6}]
    ),
    kind=image_kind,
)
def test_qwen_rounding_near_multiples_matches_hf(
    model_id: str,
    multiples: tuple[int, int],
    offsets: tuple[int, int],
    budget: dict[str, int],
    kind: str,
) -> None:
    """Sides k * factor + d: round() may push each side up or down independently, and the
    pixel budget (max_pixels floors, min_pixels ceils) rescales both."""
    factor = 32 if model_id == QWEN_IDS[2] else 28
    height, width = (max(1, k * factor + d) for k, d in zip(multiples, offsets, strict=True))
    assume(max(height, width) / min(height, width) <= 200)
    array = make_image(kind, height, width, multiples[0] * 100 + multiples[1])
    assert_matches_hf(model_id, [array], [hf_array_input(array)], **budget)


@pytest.mark.parametrize("model_id", QWEN_IDS)
@settings(max_examples=40, deadline=None)
@given(short=st.integers(1, 4), ratio=st.floats(150.0, 260.0), tall=st.booleans())
def test_qwen_extreme_aspect_ratios(model_id: str, short: int, ratio: float, tall: bool) -> None:
    """Over 200:1 HF raises ValueError and mmfast MmfastError; below it the pixels agree."""
    long = max(1, int(short * ratio))
    height, width = (long, short) if tall else (short, long)
    image = Image.fromarray(noise(height, width, short))
    try:
        want = hf_processor(model_id)([image], return_tensors="np")
    except ValueError as exc:
        assert "aspect ratio" in str(exc)
        with pytest.raises(MmfastError, match="aspect ratio"):
            mmfast.ImageProcessor.from_pretrained(model_id)(image)
        return
    assert_same_outputs(mmfast.ImageProcessor.from_pretrained(model_id)(image), want)


@pytest.mark.parametrize("model_id", PIL_IDS)
@pytest.mark.parametrize("size", [(1, 1), (1, 2), (2, 1), (2, 3), (3, 3), (3, 1)])
def test_tiny_images_match_hf(model_id: str, size: tuple[int, int]) -> None:
    """Qwen's min_pixels and CLIP's shortest edge upscale a few pixels to a full image."""
    image = Image.fromarray(noise(*size, seed=size[0] * 7 + size[1]))
    assert_matches_hf(model_id, [image])


QWEN_OVERRIDES: list[dict[str, Any]] = [
    *({"resample": code} for code in range(6)),
    {"do_normalize": False},
    {"do_rescale": False},
    {"do_rescale": False, "do_normalize": False},
    {"max_pixels": 28 * 28 * 32},
    {"min_pixels": 28 * 28 * 300},
    {"min_pixels": 100 * 100, "max_pixels": 200 * 200},
    {"size": {"shortest_edge": 128 * 128, "longest_edge": 256 * 256}},
    {"image_mean": [0.1, 0.2, 0.3], "image_std": [0.9, 0.7, 0.5], "rescale_factor": 1 / 127.5},
    {"resample": 0, "max_pixels": 28 * 28 * 16, "do_normalize": False},
]


@pytest.mark.parametrize("overrides", QWEN_OVERRIDES, ids=repr)
@pytest.mark.parametrize("model_id", QWEN_IDS)
def test_qwen_overrides_match_hf(model_id: str, overrides: dict[str, Any]) -> None:
    images = [noise(150, 97, 1), smooth(61, 230, 2), Image.fromarray(noise(7, 300, 3))]
    assert_matches_hf(model_id, images, **overrides)


@pytest.mark.parametrize("model_id", QWEN_IDS)
def test_qwen_without_resize_matches_hf(model_id: str) -> None:
    factor = 32 if model_id == QWEN_IDS[2] else 28
    sizes = [(factor, factor), (2 * factor, 5 * factor), (7 * factor, 3 * factor)]
    images = [noise(h, w, i) if i % 2 else smooth(h, w, i) for i, (h, w) in enumerate(sizes)]
    patch = factor // 2
    for overrides in ({"do_resize": False}, {"do_resize": False, "do_normalize": False}):
        got = assert_matches_hf(model_id, images, **overrides)
        assert got.image_grid_thw.tolist() == [[1, h // patch, w // patch] for h, w in sizes]
    with pytest.raises(MmfastError, match="multiples"):
        mmfast.ImageProcessor.from_pretrained(model_id, do_resize=False)(noise(factor + 1, factor))


LLAVA_OVERRIDES: list[dict[str, Any]] = [
    *({"resample": code} for code in range(6)),
    {"do_normalize": False},
    {"do_rescale": False},
    {"do_rescale": False, "do_normalize": False},  # HF returns the uint8 pixels
    {"size": {"shortest_edge": 100}, "crop_size": 80},
    {"size": {"shortest_edge": 64}, "crop_size": {"height": 90, "width": 40}},  # pads with 0
    {"size": {"height": 120, "width": 200}, "do_center_crop": False},
    {"size": {"max_height": 80, "max_width": 50}, "do_center_crop": False},
    {"size": {"shortest_edge": 70, "longest_edge": 100}, "crop_size": 64},
    {"do_resize": False},  # crops 336 out of (or pads around) the original
    {"image_mean": [0.1, 0.2, 0.3], "image_std": [0.9, 0.7, 0.5], "rescale_factor": 1 / 127.5},
]


@pytest.mark.parametrize("overrides", LLAVA_OVERRIDES, ids=repr)
def test_llava_overrides_match_hf(overrides: dict[str, Any]) -> None:
    images = [noise(150, 97, 1), smooth(61, 230, 2), noise(400, 500, 3)]
    if not overrides.get("do_center_crop", True):
        # Without a crop the output sizes follow the input, and a batch must stack.
        for image in images:
            assert_matches_hf(LLAVA_ID, [image], **overrides)
    else:
        assert_matches_hf(LLAVA_ID, images, **overrides)


# --------------------------------------------------------------------------------------------
# Llama 4
# --------------------------------------------------------------------------------------------


def golden_input(name: str) -> Image.Image:
    matches = sorted(shared_path("images").glob(f"{name}.*"))
    assert len(matches) == 1, matches
    with Image.open(matches[0]) as opened:
        image = ImageOps.exif_transpose(opened)
        image.load()
    return image


@pytest.mark.parametrize("name", GOLDENS or ["(goldens absent)"])
def test_llama4_matches_goldens(name: str) -> None:
    with np.load(shared_path("golden", "llama4", f"{name}.npz")) as golden:
        want_bits = golden["pixel_values_bf16_bits"]
        want_ratios = golden["aspect_ratios"]
    image = golden_input(name)
    proc = mmfast.ImageProcessor.from_pretrained(LLAMA4_ID)

    bf16 = proc(image, dtype="bfloat16")
    assert bf16.pixel_values.dtype == ml_dtypes.bfloat16
    got_bits = bf16.pixel_values.view(np.uint16)
    assert got_bits.shape == want_bits.shape, describe("pixel_values", got_bits, want_bits)
    equal = float((got_bits == want_bits).mean())
    assert np.array_equal(got_bits, want_bits), (
        f"{name}: {equal:.6%} of bfloat16 values bit-equal; "
        + describe("pixel_values", got_bits, want_bits)
    )
    assert same_bits(bf16.aspect_ratios, want_ratios)

    f32 = proc(image)
    widened = (want_bits.astype(np.uint32) << 16).view(np.float32)
    assert same_bits(f32.pixel_values, widened), describe("pixel_values", f32.pixel_values, widened)
    assert same_bits(f32.aspect_ratios, want_ratios)
    # The number of tiles, global view included, follows from the aspect ratio.
    rows, cols = want_ratios[0]
    assert len(got_bits) == rows * cols + (rows * cols > 1)


# Sizes that force a real resize: down into a 5x3 canvas, a 1x12 strip, past the 16-tile cap,
# a near-square that pads, the float32-rounding case from test_models, and an upscale.
LIVE_LLAMA4_CASES = [
    ((1500, 700), "noise"),
    ((90, 4000), "smooth"),
    ((2000, 2000), "noise"),
    ((333, 337), "smooth"),
    ((1175, 2000), "noise"),
    ((100, 150), "smooth"),
]


def test_llama4_matches_live_transformers() -> None:
    """HF's Llama4ImageProcessor (torchvision backend) run here, when torch is installed."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    llama4 = pytest.importorskip("transformers.models.llama4.image_processing_llama4")
    hf = llama4.Llama4ImageProcessor.from_dict(builtin_dict(LLAMA4_ID))
    proc = mmfast.ImageProcessor.from_pretrained(LLAMA4_ID)

    def hf_outputs(images: list[Image.Image]) -> dict[str, np.ndarray]:
        out = hf(images, return_tensors="pt")
        # bfloat16 has no NumPy dtype in torch; its bits go through int16.
        bits = out["pixel_values"].view(torch.int16).numpy().view(np.uint16)
        return {"pixel_values": bits, "aspect_ratios": out["aspect_ratios"].numpy()}

    def mmfast_outputs(images: list[np.ndarray]) -> dict[str, np.ndarray]:
        out = proc(images, dtype="bfloat16")
        widened = proc(images).pixel_values  # the float32 default: the same values, widened
        assert same_bits(widened, out.pixel_values.astype(np.float32))
        return {
            "pixel_values": out.pixel_values.view(np.uint16),
            "aspect_ratios": out.aspect_ratios,
        }

    arrays = [
        make_image(kind, height, width, seed)
        for seed, ((height, width), kind) in enumerate(LIVE_LLAMA4_CASES)
    ]
    for array in arrays:
        want = hf_outputs([Image.fromarray(array)])
        got = mmfast_outputs([array])
        for key in want:
            assert same_bits(got[key], want[key]), f"{array.shape[:2]}: " + describe(
                key, got[key], want[key]
            )
    # One batch: tiles concatenated in input order, one aspect ratio row per image.
    assert_same_outputs(
        mmfast_outputs(arrays[3:]), hf_outputs([Image.fromarray(a) for a in arrays[3:]])
    )


def test_llama4_refuses_what_hf_cannot_run() -> None:
    """HF's Llama 4 normalises only a rescaled (float) image and has no box/hamming resize;
    rescale-only and both-off follow its torchvision path (``test_torchvision``)."""
    with pytest.raises(MmfastError, match="do_rescale: expected true when do_normalize is"):
        mmfast.ImageProcessor.from_pretrained(LLAMA4_ID, do_rescale=False)
    with pytest.raises(MmfastError, match="resample: expected 0, 1, 2 or 3"):
        mmfast.ImageProcessor.from_pretrained(LLAMA4_ID, resample=4)
    both_off = mmfast.ImageProcessor.from_pretrained(
        LLAMA4_ID, do_rescale=False, do_normalize=False
    )
    assert both_off(noise(40, 40)).pixel_values.dtype == np.uint8


# --------------------------------------------------------------------------------------------
# Token counts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model_id", QWEN_IDS)
@settings(max_examples=20, deadline=None)
@given(height=st.integers(1, 1200), width=st.integers(1, 1200))
def test_qwen_token_count_matches_output(model_id: str, height: int, width: int) -> None:
    assume(max(height, width) / min(height, width) <= 200)
    proc = mmfast.ImageProcessor.from_pretrained(model_id, max_pixels=28 * 28 * 512)
    merge = proc.config.merge_size
    out = proc(noise(height, width, height + width))
    tokens = proc.num_image_tokens(height, width)
    assert tokens == proc.plan(height, width).num_image_tokens
    assert tokens == int(out.image_grid_thw.prod()) // merge**2
    assert tokens * merge**2 == len(out.pixel_values)
    hf = hf_processor(model_id, max_pixels=28 * 28 * 512)
    assert tokens == hf.get_number_of_image_patches(height, width, {}) // merge**2


@pytest.mark.parametrize("size", [(1, 1), (100, 100), (480, 640), (1080, 1920), (40, 3000)])
def test_llava_and_llama4_token_counts(size: tuple[int, int]) -> None:
    llava = mmfast.ImageProcessor.from_pretrained(LLAVA_ID)
    assert llava.num_image_tokens(*size) == llava.plan(*size).num_image_tokens == 576
    llama = mmfast.ImageProcessor.from_pretrained(LLAMA4_ID)
    out = llama(smooth(*size))
    rows, cols = (int(v) for v in out.aspect_ratios[0])
    tiles = rows * cols
    # <|image_start|> <|image|> 144 patches <|image_end|>, plus per tile 144 patches and a
    # separator when there is more than one tile (Llama4Processor._prompt_split_image).
    expected = 3 + 144 + (tiles * 145 if tiles > 1 else 0)
    assert llama.num_image_tokens(*size) == llama.plan(*size).num_image_tokens == expected
    assert len(out.pixel_values) == tiles + (tiles > 1)


# --------------------------------------------------------------------------------------------
# Batches and threads
# --------------------------------------------------------------------------------------------


def batch_images() -> list[Any]:
    return [
        noise(300, 200, 1),
        Image.fromarray(smooth(45, 700, 2)),
        noise(1000, 37, 3),
        smooth(336, 336, 4),
        Image.fromarray(noise(2, 5, 5)),
    ]


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_batch_equals_single_calls(model_id: str) -> None:
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    images = batch_images()
    dtype = "bfloat16" if model_id == LLAMA4_ID else "float32"
    batch = proc(images, dtype=dtype)
    singles = [proc(image, dtype=dtype) for image in images]
    # Qwen concatenates patch rows and Llama 4 tiles; LLaVA stacks one 336x336 image each.
    joined = {key: np.concatenate([s[key] for s in singles]) for key in KEYS[model_id]}
    assert_same_outputs(batch, joined)
    if model_id == LLAVA_ID:
        assert batch.pixel_values.shape[0] == len(images)
        assert same_bits(batch.pixel_values, np.stack([s.pixel_values[0] for s in singles]))


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_threads_do_not_change_results(model_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    images = batch_images() * 2
    reference = proc(images, threads=1)
    for threads in (2, 8):
        assert_same_outputs(proc(images, threads=threads), reference)
    for env in ("1", "3", "8"):
        monkeypatch.setenv("MMFAST_NUM_THREADS", env)
        assert_same_outputs(proc(images), reference)
    # An explicit argument wins over the environment, even a malformed one.
    monkeypatch.setenv("MMFAST_NUM_THREADS", "abc")
    assert_same_outputs(proc(images, threads=2), reference)
    monkeypatch.delenv("MMFAST_NUM_THREADS")
    assert_same_outputs(proc(images), reference)


@pytest.mark.parametrize("value", ["0", "abc", "-2", "", "1.5", "4097", "10000"])
def test_bad_thread_environment_raises(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMFAST_NUM_THREADS", value)
    with pytest.raises(MmfastError, match="MMFAST_NUM_THREADS"):
        mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])(noise(30, 30))


def test_python_threads_run_during_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pixel work releases the GIL: a Python thread keeps ticking while a batch of
    12-megapixel images is processed.

    The ticker gives up the GIL on every tick (``time.sleep(0)``), so each tick needs the GIL
    back: had the native call held it, the ticker could tick once or twice between the call's
    start and end, whatever the machine's speed (measured: 1-2 ticks across a 0.5 s
    GIL-holding ``sum(range(5 * 10**7))``, thousands across a GIL-free ``time.sleep(0.3)``;
    11 in a run that shared the machine's 2 cores with two test suites).
    """
    images = [noise(3000, 4000, 1), smooth(3024, 4032, 2), noise(4000, 3000, 3)]
    proc = mmfast.ImageProcessor.from_pretrained(LLAVA_ID)
    expected = proc(images, threads=2)

    native = processors._native
    real_run_batch = native.run_batch
    state = {"in_native": False, "ticks": 0, "ticks_in_native": 0}
    stop = threading.Event()

    def ticker() -> None:
        while not stop.is_set():
            state["ticks"] += 1
            if state["in_native"]:
                state["ticks_in_native"] += 1
            time.sleep(0)

    def run_batch(*args: Any) -> Any:
        state["in_native"] = True
        try:
            return real_run_batch(*args)
        finally:
            state["in_native"] = False

    monkeypatch.setattr(native, "run_batch", run_batch)
    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        got = proc(images, threads=2)
    finally:
        stop.set()
        thread.join()
    assert_same_outputs(got, expected)
    assert state["ticks_in_native"] >= 5, state


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_one_image_equals_a_list_of_one(model_id: str) -> None:
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    array = smooth(123, 77, 5)
    single = proc(array)
    assert_same_outputs(proc([array]), single)
    assert_same_outputs(proc((array,)), single)
    assert_same_outputs(proc(Image.fromarray(array)), single)
    if model_id != LLAMA4_ID:
        assert_matches_hf(model_id, [array])


@pytest.mark.parametrize("name", SHARED_IMAGES or ["(shared images absent)"])
def test_paths_and_bytes_decode_like_load_image(name: str) -> None:
    """Bytes and paths go through decode_image, which orients like transformers' load_image."""
    path = shared_path("images", name)
    data = path.read_bytes()
    model_id = QWEN_IDS[0]
    overrides = {"max_pixels": 28 * 28 * 256}  # decoding is under test, not the resize
    want = hf_processor(model_id, **overrides)([hf_load_image(path)], return_tensors="np")
    proc = mmfast.ImageProcessor.from_pretrained(model_id, **overrides)
    for source in (path, str(path), data, bytearray(data), memoryview(data)):
        assert_same_outputs(proc(source), want)
    assert_same_outputs(proc([path, data]), proc([str(path), path]))


@pytest.mark.parametrize("model_id", [QWEN_IDS[0], LLAVA_ID])
def test_exif_orientation_from_bytes_matches_load_image(model_id: str, tmp_path: Path) -> None:
    array = smooth(40, 90, 3)
    for orientation in range(1, 9):
        exif = Image.Exif()
        exif[0x0112] = orientation
        buf = io.BytesIO()
        Image.fromarray(array).save(buf, "PNG", exif=exif)
        path = tmp_path / f"o{orientation}.png"
        path.write_bytes(buf.getvalue())
        want = hf_processor(model_id)([hf_load_image(path)], return_tensors="np")
        proc = mmfast.ImageProcessor.from_pretrained(model_id)
        assert_same_outputs(proc(buf.getvalue()), want)
        assert_same_outputs(proc(path), want)


def transparent_files(directory: Path) -> list[Path]:
    """PNG files with transparency of every kind: an alpha band (RGBA, LA, a palette's
    alpha) or a tRNS colour key (palette, RGB, L), half of it see-through."""
    rgba = noise(30, 40, 7)
    alpha = np.concatenate([rgba, np.arange(30 * 40, dtype=np.uint8).reshape(30, 40, 1)], -1)
    key = tuple(int(v) for v in rgba[3, 5])
    images = {
        "rgba": (Image.fromarray(alpha, "RGBA"), None),
        "la": (Image.fromarray(alpha[..., 1:3].copy(), "LA"), None),
        "pa": (Image.fromarray(alpha, "RGBA").quantize(16), None),
        "p": (Image.fromarray(rgba).quantize(16), 3),
        "rgb": (Image.fromarray(rgba), key),
        "l": (Image.fromarray(rgba[..., 0].copy()), key[0]),
    }
    paths = []
    for name, (image, transparency) in images.items():
        paths.append(directory / f"{name}.png")
        extra = {} if transparency is None else {"transparency": transparency}
        image.save(paths[-1], **extra)
    return paths


@pytest.mark.parametrize(
    ("model_id", "backend"),
    [
        (QWEN_IDS[0], "pil"),
        (QWEN_IDS[0], "torchvision"),
        # Only a torchvision class, which the name "pil" matches too: mmfast composited the
        # colour key as a PIL class would (up to 3.8 off).
        ("CohereLabs/command-a-vision-07-2025", "pil"),
        ("MiniMaxAI/MiniMax-M3", "pil"),
    ],
)
def test_transparent_files_decode_like_load_image(
    model_id: str, backend: str, tmp_path: Path
) -> None:
    """A path or bytes is read as transformers reads a path: load_image's convert("RGB")
    drops the alpha band, and a PIL class then composites a colour key onto white, while a
    torchvision class decodes the file without either. mmfast composited the alpha band
    onto white (up to 3.7 off after normalising, for 98% of the values of an RGBA file)."""
    if backend == "torchvision" or model_id != QWEN_IDS[0]:
        pytest.importorskip("torchvision")
    transformers = pytest.importorskip("transformers")
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(builtin_dict(model_id)))
    hf = transformers.AutoImageProcessor.from_pretrained(tmp_path, backend=backend)
    proc = mmfast.ImageProcessor.from_pretrained(tmp_path, backend=backend)
    for path in transparent_files(tmp_path):
        with warnings.catch_warnings():
            # Pillow's about a palette's alpha, torchvision's about its decoders' future.
            warnings.simplefilter("ignore", (UserWarning, DeprecationWarning))
            want = hf(str(path), return_tensors="np")
        assert_same_outputs(proc(path), want)
        assert_same_outputs(proc(path.read_bytes()), want)


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_encoded_images_equal_their_decoded_arrays(model_id: str) -> None:
    """Upright RGB and L files are read where Pillow decoded them, the others copied to RGB
    first: both give what the decoded array gives."""
    rgb = Image.fromarray(smooth(61, 97, 5))
    exif = Image.Exif()
    exif[0x0112] = 6
    files = []
    for image, fmt, options in (
        (rgb, "JPEG", {}),
        (rgb.convert("L"), "PNG", {}),
        (rgb, "PNG", {"exif": exif}),
        (rgb.convert("RGBA"), "PNG", {}),
        (rgb.convert("P"), "GIF", {}),
    ):
        buffer = io.BytesIO()
        image.save(buffer, fmt, **options)
        files.append(buffer.getvalue())
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    assert_same_outputs(proc(files), proc([mmfast.decode_image(f) for f in files]))


THP = Path("/sys/kernel/mm/transparent_hugepage")


@pytest.fixture
def advised(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes each call of ``_native.advise_huge_pages`` asked huge pages for."""
    calls: list[int] = []
    real = _native.advise_huge_pages

    def advise(image: Any) -> int:
        calls.append(real(image))
        return calls[-1]

    monkeypatch.setattr(_native, "advise_huge_pages", advise)
    return calls


def test_decode_blocks_are_offered_huge_pages(advised: list[int]) -> None:
    """Each RGB or L file Pillow decodes is decoded into a fresh block offered huge pages
    where the kernel has them (all of its whole 2 MiB pages), with Pillow's pixels; a block
    under 2 MiB gets none."""
    rgb = Image.fromarray(smooth(1200, 1500, 3))
    huge = 2 << 20
    for image, fmt, block in (
        (rgb, "JPEG", 1200 * 1500 * 4),
        (rgb.convert("L"), "TIFF", 1200 * 1500),  # an 8-bit PNG is the core's
        (rgb.resize((97, 61)), "JPEG", 0),
    ):
        buffer = io.BytesIO()
        image.save(buffer, fmt)
        got = mmfast.decode_image(buffer.getvalue())
        assert np.array_equal(got, np.asarray(Image.open(buffer).convert("RGB")))
        if THP.exists():
            assert block - 2 * huge < advised[-1] <= block and advised[-1] % huge == 0, fmt
        else:
            assert advised[-1] == 0
    assert len(advised) == 3
    small = Image.new("RGB", (7, 5))
    with pytest.raises(
        MmfastError, match="image: expected an RGB, RGBA, L, P, CMYK or LA Pillow image"
    ):
        _native.advise_huge_pages((small.im.ptr, (5, 5), small.im))
    with pytest.raises(MmfastError, match=r"image: expected \(capsule"):
        _native.advise_huge_pages((b"", (5, 7), small.im))
    assert len(advised) == 3


def test_lazily_opened_images_load_into_blocks(advised: list[int], tmp_path: Path) -> None:
    """A PIL image given before its pixels were loaded (``Image.open`` alone) is loaded as a
    file is, into one block offered huge pages where its loader decodes into one, with the
    outputs of the same image loaded by Pillow; an image already loaded, or a later frame
    drawn onto an earlier one, is left to Pillow."""
    rgb = Image.fromarray(smooth(1200, 1500, 3))
    tiff = tmp_path / "plain.tif"
    rgb.save(tiff)  # uncompressed: Pillow maps the file instead of decoding it
    sources: list[tuple[Image.Image, str] | Path] = [
        (rgb, "JPEG"),
        (rgb.convert("L"), "TIFF"),  # an RGB, RGBA or grey PNG is the core's
        (rgb.convert("RGBA"), "TIFF"),
        (rgb.convert("CMYK"), "JPEG"),
        (rgb.convert("LA"), "PNG"),
        (rgb, "WEBP"),
        (rgb.convert("P"), "GIF"),
        tiff,
    ]
    proc = mmfast.ImageProcessor.from_pretrained("llava-hf/llava-1.5-7b-hf")
    for source in sources:
        if isinstance(source, Path):
            file: Path | io.BytesIO = source
        else:
            file = io.BytesIO()
            source[0].save(file, source[1])
        loaded = Image.open(file)
        loaded.load()
        before = len(advised)
        assert_same_outputs(proc(loaded), proc(loaded.convert(loaded.mode)))
        assert len(advised) == before, "an image already loaded is left alone"
        lazy = Image.open(file)
        assert_same_outputs(proc(lazy), proc(loaded))
        assert not lazy.tile, "loaded"
        assert len(advised) == before + (lazy.mode != "P"), lazy.format
    # The second frame of an animated PNG is drawn onto the first: Pillow keeps its image.
    frames = [rgb.convert("RGBA"), Image.new("RGBA", rgb.size, (9, 200, 40, 128))]
    file = io.BytesIO()
    frames[0].save(file, "PNG", save_all=True, append_images=frames[1:])
    lazy, loaded = Image.open(file), Image.open(file)
    lazy.seek(1)
    loaded.seek(1)
    loaded.load()
    before = len(advised)
    assert_same_outputs(proc(lazy), proc(loaded))
    assert len(advised) == before


def test_lazily_opened_pngs_are_decoded_by_the_core(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A PIL image opened from an RGB or grey PNG in a ``BytesIO`` or a file the caller
    opened, and not loaded, is decoded by the core from the whole file object, with the
    outputs of the image loaded by Pillow, and is left unloaded, its file object where it
    was; grey stays Pillow's where the image is not converted to RGB. A file Pillow opened
    from a path, and an RGBA image a model resizes in its own mode, are loaded with the
    pixels the core decoded (``png_pixels``), Pillow's file closed. Other PNGs, other
    streams, a PNG that does not start the file object, and a closed file load as before."""
    taken: list[bool] = []
    loaded_by_core: list[bool] = []
    real, real_pixels = _native.rgb_from_png, _native.png_pixels

    def spy(*args: Any) -> Any:
        taken.append(real(*args) is not None)
        return real(*args)

    def pixels_spy(*args: Any) -> Any:
        loaded_by_core.append(real_pixels(*args) is not None)
        return real_pixels(*args)

    monkeypatch.setattr(_native, "rgb_from_png", spy)
    monkeypatch.setattr(_native, "png_pixels", pixels_spy)
    rgb = Image.fromarray(smooth(61, 97, 3))
    plain = io.BytesIO()
    rgb.save(plain, "PNG")
    text = b"tEXt" + b"k\0v"
    chunk = len(text[4:]).to_bytes(4, "big") + text + zlib.crc32(text).to_bytes(4, "big")
    with_text = io.BytesIO(plain.getvalue()[:-12] + chunk + plain.getvalue()[-12:])
    translucent = rgb.copy()
    translucent.putalpha(Image.fromarray(smooth(61, 97, 3)[..., 0]))
    cases: list[tuple[Image.Image | io.BytesIO, bool]] = [
        (rgb, True),
        (rgb.convert("L"), True),
        (rgb.convert("RGBA"), True),
        (translucent, True),
        (rgb.convert("P"), False),
        (with_text, False),  # a chunk after the pixels
    ]
    # transformers' composite onto white, Pillow's convert("RGB") (Kimi-K2.5's PIL class),
    # and a first resize in the image's own mode (Kimi-VL), which leaves RGBA to Pillow.
    procs = [
        mmfast.ImageProcessor.from_pretrained("llava-hf/llava-1.5-7b-hf"),
        mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0], backend="torchvision"),
        mmfast.ImageProcessor.from_pretrained("moonshotai/Kimi-K2.5"),
        mmfast.ImageProcessor.from_pretrained("moonshotai/Kimi-VL-A3B-Instruct"),
    ]
    path = tmp_path / "f.png"
    for image, core in cases:
        if isinstance(image, io.BytesIO):
            data = image.getvalue()
        else:
            file = io.BytesIO()
            image.save(file, "PNG")
            data = file.getvalue()
        path.write_bytes(data)
        for proc in procs:
            with open(path, "rb") as opened:
                for source, by_core in ((io.BytesIO(data), core), (opened, core), (path, False)):
                    loaded = Image.open(io.BytesIO(data))
                    loaded.load()
                    lazy = Image.open(source)
                    at = lazy.fp.tell()
                    taken.clear()
                    loaded_by_core.clear()
                    assert_same_outputs(proc(lazy), proc(loaded))
                    if lazy.mode == "RGBA" and proc.config.pil_convert == "resize_then_rgb":
                        by_core = False
                    if by_core:
                        assert taken == [True] and lazy.tile, "decoded, left unloaded"
                        assert lazy.fp.tell() == at and loaded_by_core == []
                        assert np.array_equal(np.asarray(lazy), np.asarray(loaded))
                    else:
                        assert taken in ([], [False]) and not lazy.tile, (lazy.mode, source)
                        # Loaded as Pillow loads it, with the core's pixels where it takes
                        # the file; a file Pillow opened is closed.
                        assert loaded_by_core == ([core] if lazy.mode != "P" else [])
                        assert lazy.fp is None and lazy.info == loaded.info
                        assert np.array_equal(np.asarray(lazy), np.asarray(loaded))
                    lazy.close()
    # A file longer than such a PNG can be (here with no room for other chunks) is left to
    # Pillow, which reads it only to the pixels' end, and so is such a path.
    monkeypatch.setattr(mmfast.image, "PNG_OTHER_BYTES", 0)
    tail = plain.getvalue() + bytes(2 * 61 * (97 * 4 + 1))
    path.write_bytes(tail)
    with open(path, "rb") as opened:
        for source in (Image.open(io.BytesIO(tail)), Image.open(opened), path):
            taken.clear()
            assert_same_outputs(procs[0](source), procs[0](rgb))
            assert taken == []
    monkeypatch.undo()
    monkeypatch.setattr(_native, "rgb_from_png", spy)
    # Another stream (gzip) is read by Pillow, its own way.
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb") as gz:
        gz.write(plain.getvalue())
    taken.clear()
    lazy = Image.open(gzip.GzipFile(fileobj=io.BytesIO(packed.getvalue())))
    assert_same_outputs(procs[0](lazy), procs[0](rgb))
    assert taken == []
    # A PNG Pillow was given where it starts, after another in the same file object.
    other = io.BytesIO()
    rgb.transpose(Image.Transpose.ROTATE_180).save(other, "PNG")
    both = io.BytesIO(other.getvalue() + plain.getvalue())
    both.seek(len(other.getvalue()))
    taken.clear()
    assert_same_outputs(procs[0](PngImageFile(both)), procs[0](rgb))
    assert taken == []
    # A file object rewritten since Image.open (here as RGBA) no longer holds the PNG
    # Pillow opened: the core leaves it to Pillow, whatever Pillow makes of it.
    rewritten = io.BytesIO(plain.getvalue())
    lazy = Image.open(rewritten)
    rewritten.seek(0)
    translucent.save(rewritten, "PNG")
    taken.clear()
    with contextlib.suppress(Exception):
        procs[0](lazy)
    assert taken == []
    # Where grey is not converted (do_convert_rgb=False), the image is refused as before.
    proc = mmfast.ImageProcessor.from_pretrained("llava-hf/llava-1.5-7b-hf", do_convert_rgb=False)
    grey = io.BytesIO()
    rgb.convert("L").save(grey, "PNG")
    with pytest.raises(MmfastError, match="mode L"):
        proc(Image.open(grey))
    # A file closed since leaves the image to Pillow, which says so on loading.
    with open(path, "rb") as opened:
        lazy = Image.open(opened)
    taken.clear()
    with pytest.raises(ValueError, match="closed file"):
        procs[0](lazy)
    assert taken == []


def test_lazily_opened_images_sharing_a_file_are_prepared_on_one_thread(tmp_path: Path) -> None:
    """Lazily opened images that share one file object are loaded one after another, even
    on a batch's threads: loading them at once, each seeking and reading the file, failed
    ("image file is truncated") or, with ``LOAD_TRUNCATED_IMAGES``, gave wrong tensors."""
    path = tmp_path / "noise.jpg"
    Image.fromarray(noise(1500, 1400, seed=3)).save(path, "JPEG", quality=95)
    proc = mmfast.ImageProcessor.from_pretrained("llava-hf/llava-1.5-7b-hf")
    want = proc([mmfast.decode_image(path)] * 2)
    for _ in range(5):
        with open(path, "rb") as shared:
            assert_same_outputs(proc([Image.open(shared), Image.open(shared)], threads=2), want)


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_grayscale_arrays_equal_repeated_rgb(model_id: str) -> None:
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    gray = [smooth(80, 50, 1)[..., 0].copy(), noise(33, 140, 2)[..., 1].copy()]
    rgb = [np.repeat(g[..., None], 3, axis=2) for g in gray]
    assert_same_outputs(proc(gray), proc(rgb))
    if model_id != LLAMA4_ID:
        assert_matches_hf(model_id, gray, rgb)


def pil_in_mode(mode: str) -> Image.Image:
    rgb = Image.fromarray(smooth(47, 65, 3))
    if mode == "RGBA":
        alpha = Image.fromarray(noise(47, 65, 4)[..., 0])
        image = rgb.copy()
        image.putalpha(alpha)
        return image
    if mode == "P+transparency":
        return Image.open(io.BytesIO(png_bytes(rgb.convert("P"), transparency=5)))
    if mode == "I;16":
        return Image.fromarray(smooth(47, 65, 3)[..., 0].astype(np.uint16) * 257)
    return rgb.convert(mode)


@pytest.mark.parametrize("mode", ["L", "RGBA", "P", "P+transparency", "CMYK", "LA", "I;16", "1"])
@pytest.mark.parametrize("model_id", PIL_IDS)
def test_pil_modes_match_hf(model_id: str, mode: str) -> None:
    image = pil_in_mode(mode)
    assert image.mode == mode.split("+")[0]
    assert_matches_hf(model_id, [image])


@pytest.mark.parametrize("mode", ["L", "RGBA", "P", "CMYK"])
def test_pil_modes_llama4_equal_converted_rgb(mode: str) -> None:
    """Llama 4 has no PIL processor to compare with; its input conversion is the others'."""
    convert_to_rgb = pytest.importorskip("transformers.image_transforms").convert_to_rgb
    image = pil_in_mode(mode)
    array = convert_to_rgb(image, return_numpy=True)
    proc = mmfast.ImageProcessor.from_pretrained(LLAMA4_ID)
    assert_same_outputs(proc(image, dtype="bfloat16"), proc(array, dtype="bfloat16"))


def pillow_onto_white(image: Image.Image) -> np.ndarray:
    """transformers' ``convert_to_rgb`` of an image with transparency, in Pillow's calls."""
    white = Image.new("RGBA", image.size, (255, 255, 255, 255))
    return np.asarray(Image.alpha_composite(white, image.convert("RGBA")).convert("RGB"))


def transparent_in_mode(mode: str) -> Image.Image:
    """An image of ``mode`` with transparency: opaque rows at the top (packed as runs),
    then every alpha over 37 widths around the 16-pixel blocks, a colour key for modes
    without alpha; "RGBA+opaque": an alpha band all 255 (read in place)."""
    rgba = noise(40, 37, 11).copy()
    alpha = np.arange(40 * 37).reshape(40, 37) % 256
    alpha[: 40 if mode == "RGBA+opaque" else 9] = 255
    mode = mode.removesuffix("+opaque")
    image = Image.fromarray(np.dstack([rgba, alpha]).astype(np.uint8))
    if mode in ("RGBA", "LA", "PA"):
        return image.convert(mode)
    keyed = image.convert(mode.split("+")[0])
    if keyed.mode == "P":
        keyed.info["transparency"] = 3
    elif keyed.mode == "L":
        keyed.info["transparency"] = int(np.asarray(keyed)[0, 0])
    else:
        keyed.info["transparency"] = tuple(int(v) for v in rgba[0, 0])
    return keyed


@pytest.mark.parametrize("rows", [True, False], ids=["rows", "copied"])
@pytest.mark.parametrize("mode", ["RGBA", "RGBA+opaque", "LA", "PA", "P+key", "RGB+key", "L+key"])
def test_transparency_composites_as_pillow_does(
    mode: str, rows: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Images with transparency are composited onto white by one table lookup a value (the
    table from Pillow's own composite), equal to Pillow's chain in every orientation: read
    in place, or from an array where Pillow's rows cannot be read. A processor given the
    image gives what it gives for the composite."""
    if not rows:
        monkeypatch.setattr(mmfast.image, "pillow_rows_readable", lambda: False)
    image = transparent_in_mode(mode)
    assert mmfast.image.has_transparency(image)
    for orientation in range(1, 9):
        oriented = image.copy()
        oriented.getexif()[0x0112] = orientation
        want = pillow_onto_white(ImageOps.exif_transpose(oriented))
        got = mmfast.image.composite_onto_white(image, orientation)
        assert np.array_equal(got, want), orientation
    proc = mmfast.ImageProcessor.from_pretrained(LLAVA_ID)
    assert_same_outputs(proc(image), proc(pillow_onto_white(image)))


def test_pil_video_frames_with_transparency_are_composited() -> None:
    """Video frames given as PIL images are converted as images are, transparency composited
    onto white (transformers' video classes refuse RGBA frames)."""
    frames = [transparent_in_mode("RGBA"), transparent_in_mode("P+key")]
    (clip,) = processors.as_clips(frames)
    assert np.array_equal(clip, np.stack([pillow_onto_white(f) for f in frames]))


def test_composite_refuses_other_pixels_and_tables() -> None:
    rgba = np.zeros((2, 3, 4), np.uint8)
    table = np.zeros(65536, np.uint8)
    for image, bad, match in [
        (rgba, table[:256], "table: expected 65536 values"),
        (rgba, table.astype(np.int16), "table: expected a numpy.ndarray of dtype uint8"),
        (rgba, np.zeros(2 * 65536, np.uint8)[::2], "table: expected a contiguous array"),
        (rgba[..., :3], table, r"image: expected an RGBA .* shape \(height, width, 4\)"),
        ("rgba", table, "image: expected an RGBA"),
    ]:
        with pytest.raises(MmfastError, match=match):
            _native.rgb_composited(image, bad, 1)
    rgb = Image.new("RGB", (3, 2))
    rows = (rgb.getim(), (2, 3), rgb.im)
    with pytest.raises(
        MmfastError, match="image: expected an RGBA, CMYK or LA Pillow image, got an RGB"
    ):
        _native.rgb_composited(rows, table, 1)
    with pytest.raises(MmfastError, match="image: expected an RGBA Pillow image, got an RGB image"):
        _native.opaque(rows)
    with pytest.raises(MmfastError, match="image: expected an RGBA Pillow image's rows"):
        _native.opaque(rgba)


def test_composite_releases_the_gil() -> None:
    """A Python thread keeps ticking while a 12 MP RGBA image is composited: Pillow's chain
    held the GIL through its composite (163 ms on the bench machine)."""
    rgba = np.dstack([noise(3024, 4032, 5), noise(3024, 4032, 6)[..., :1]])
    table = mmfast.image._pillow_onto_white()
    ticks, ms = ticks_during(lambda: _native.rgb_composited(rgba, table, 1))
    assert ticks > 100, f"{ticks} ticks in {ms:.1f} ms"


def transparent_png(mode: str, orientation: int = 1) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    if mode == "L":
        image = Image.fromarray(noise(30, 41, 7)[..., 0])
        return png_bytes(image, transparency=128, exif=exif)
    array = noise(30, 41, 8) // 64 * 64  # a few colours, so (0, 0, 0) occurs
    return png_bytes(Image.fromarray(array), transparency=(0, 0, 0), exif=exif)


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("mode", ["L", "RGB"])
def test_transparent_png_bytes_match_hf(mode: str, orientation: int, tmp_path: Path) -> None:
    """A colour key in a file is composited after the file's EXIF orientation is applied,
    as load_image then a PIL class's convert_to_rgb do."""
    path = tmp_path / "keyed.png"
    path.write_bytes(transparent_png(mode, orientation))
    image = hf_load_image(path)
    assert "transparency" in image.info
    want = hf_processor(QWEN_IDS[0])([image], return_tensors="np")
    assert_same_outputs(mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])(path), want)


def test_rgba_rows_are_read_in_place_as_convert_rgb_reads_them() -> None:
    """Kimi-K2.5's PIL backend converts with convert("RGB"), dropping the alpha band: an
    RGBA image's rows are read as RGB whatever their alpha (a 12 MP image's rows lie in
    several Pillow blocks)."""
    proc = mmfast.ImageProcessor.from_pretrained("moonshotai/Kimi-K2.5")
    for h, w in [(37, 53), (3024, 4032)]:
        image = Image.fromarray(np.dstack([smooth(h, w, 1), noise(h, w, 2)[..., :1]]))
        assert_same_outputs(proc(image), proc(np.asarray(image.convert("RGB"))))


def test_rows_of_other_modes_or_of_another_core_are_refused() -> None:
    """The core reads a Pillow image's rows only with the core they belong to, and only for
    RGB, RGBA, L, P, CMYK and LA, each where its bytes mean what the call reads: RGBX and
    YCbCr have RGBA's pixel layout, CMYK's fourth byte is K, not alpha, and LA's L is in its
    first byte only."""
    table = np.zeros(65536, np.uint8)
    rgba, other = Image.new("RGBA", (3, 2)), Image.new("RGBA", (3, 2))
    for mode in ("RGBX", "YCbCr"):
        image = Image.new(mode, (3, 2))
        with pytest.raises(MmfastError, match=f"image: expected an RGB, .* or LA .* mode {mode}"):
            _native.opaque((image.getim(), (2, 3), image.im))
    for mode in ("CMYK", "LA"):
        image = Image.new(mode, (3, 2))
        rows = (image.getim(), (2, 3), image.im)
        with pytest.raises(
            MmfastError, match=f"image: expected an RGBA Pillow image, got an? {mode}"
        ):
            _native.opaque(rows)
        with pytest.raises(
            MmfastError, match=f"expected an RGB, RGBA or L Pillow image, got an? {mode}"
        ):
            _native.rgb_from_pillow(rows)
    with pytest.raises(MmfastError, match="a capsule that is not its core's"):
        _native.rgb_composited((rgba.getim(), (2, 3), other.im), table, 1)
    with pytest.raises(MmfastError, match="a capsule that is not its core's"):
        _native.opaque((rgba.getim(), (2, 3), None))


@pytest.mark.parametrize("model_id", [QWEN_IDS[0], LLAVA_ID])
@pytest.mark.parametrize("mode", ["L", "RGB"])
def test_transparent_pil_l_and_rgb_match_hf(model_id: str, mode: str) -> None:
    """An L or RGB image whose PNG names a transparent value (tRNS): HF composites those
    pixels onto white, so mmfast must not read such an image as plain L/RGB."""
    with Image.open(io.BytesIO(transparent_png(mode))) as image:
        image.load()
        assert image.mode == mode and "transparency" in image.info
        assert_matches_hf(model_id, [image])


MIXED_INPUTS = """
import asyncio
import numpy as np
from PIL import Image
import mmfast

proc = mmfast.ImageProcessor.from_pretrained("Qwen/Qwen2-VL-7B-Instruct")
image, array = Image.open("photo.jpg"), np.zeros((300, 400, 3), np.uint8)
proc(["photo.jpg", image, array], threads=4)
proc([["photo.jpg", image], [array], []])
asyncio.run(proc.acall([b"...", array]))
"""


def test_mixed_inputs_type_check(tmp_path: Path) -> None:
    """The README's call on a path, a PIL image and an array type-checks: mypy --strict read
    the list as list[object], which the annotation did not take."""
    api = pytest.importorskip("mypy.api")
    script = tmp_path / "mixed.py"
    script.write_text(MIXED_INPUTS)
    out, err, status = api.run(["--strict", "--cache-dir", str(tmp_path / "cache"), str(script)])
    assert status == 0, out + err


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("images", "match"),
    [
        ([], "images: expected at least one image"),
        ((), "images: expected at least one image"),
        (7, "images: expected PIL images.*got int"),
        ([noise(8, 8), 3.5], "images: expected PIL images.*got float"),
        (np.zeros((8, 8, 3), np.float32), "images: expected uint8.*float32"),
        (np.zeros((8, 8, 2), np.uint8), r"images: expected uint8.*\(8, 8, 2\)"),
        (np.zeros((2, 2, 8, 8, 3), np.uint8), r"images: expected uint8.*\(2, 2, 8, 8, 3\)"),
        (np.zeros((0, 8, 3), np.uint8), "images: expected a non-empty image"),
        (b"not an image", "source"),
    ],
    ids=lambda v: type(v).__name__,
)
@pytest.mark.parametrize("model_id", [QWEN_IDS[0], LLAVA_ID, LLAMA4_ID])
def test_bad_images_raise(model_id: str, images: Any, match: str) -> None:
    with pytest.raises(MmfastError, match=match):
        mmfast.ImageProcessor.from_pretrained(model_id)(images)


@pytest.mark.parametrize("threads", [0, -1, 2.0, "4", 4097, 2**70])
def test_bad_threads_raise(threads: Any) -> None:
    with pytest.raises(MmfastError, match="threads: expected an integer from 1 to 4096"):
        mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])(noise(30, 30), threads=threads)


# --------------------------------------------------------------------------------------------
# Errors in batches, decoding in parallel, async
# --------------------------------------------------------------------------------------------


def test_an_error_names_the_image(tmp_path: Path) -> None:
    proc = mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])
    good = noise(40, 50)
    missing = tmp_path / "missing.jpg"
    with pytest.raises(mmfast.ImageDecodeError, match=r"^images\[1\]: source: not an image"):
        proc([good, b"not an image", good])
    with pytest.raises(FileNotFoundError, match=rf"^images\[2\] \({missing}\): "):
        proc([good, good, missing])
    with pytest.raises(MmfastError, match=r"^images\[1\]\[0\]: images: expected uint8"):
        proc([[good], [np.zeros((4, 4), np.float32)]])
    with pytest.raises(MmfastError, match="on_error: expected 'raise' or 'skip', got 'ignore'"):
        proc([good], on_error="ignore")


def test_tensors_of_other_dtypes_are_named() -> None:
    """A bfloat16 tensor (which numpy cannot view) is refused naming images and its dtype, as
    a float32 one is: it raised torch's TypeError."""
    torch = pytest.importorskip("torch")
    proc = mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])
    for dtype in (torch.bfloat16, torch.float32):
        tensor = torch.zeros((3, 20, 30), dtype=dtype)
        with pytest.raises(MmfastError, match=f"images: .* got a tensor of dtype {dtype}"):
            proc(tensor)


def test_a_skipped_image_keeps_nothing_alive() -> None:
    """The outputs of a call with a bad image are freed when dropped, without the garbage
    collector: the error it keeps has no traceback, whose frames led back to the call (its
    decoded images and its result)."""
    proc = mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])
    data = png_bytes(Image.fromarray(smooth(300, 400, 1)))
    gc.disable()
    try:
        out = proc([data, b"junk", data], threads=2, on_error="skip")
        assert out.skipped[1].__traceback__ is None
        values = weakref.ref(out.pixel_values)
        del out
        assert values() is None
    finally:
        gc.enable()


@pytest.mark.parametrize("where", ["open", "load"])
def test_a_timeout_is_not_a_bad_image(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A TimeoutError raised while a file is read (a deadline's signal handler) leaves the
    call as it is: it was an ImageDecodeError, which on_error="skip" swallowed. (A JPEG,
    which Pillow decodes; an 8-bit PNG's pixels are the core's.)"""

    def timeout(*args: Any) -> Any:
        raise TimeoutError("request deadline exceeded")

    if where == "open":
        monkeypatch.setattr(Image, "open", timeout)
    else:
        monkeypatch.setattr(ImageFile.ImageFile, "load", timeout)
    buffer = io.BytesIO()
    Image.fromarray(smooth(30, 40, 1)).save(buffer, "JPEG")
    data = buffer.getvalue()
    with pytest.raises(TimeoutError, match="deadline"):
        mmfast.decode_image(data)
    with pytest.raises(TimeoutError, match="deadline"):
        mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])([data, data], on_error="skip")


# Fuyu stacks each prompt's images: a skipped image of a flat list left an empty prompt,
# which it refused.
@pytest.mark.parametrize(
    "model_id", [QWEN_IDS[0], LLAVA_ID, "HuggingFaceTB/SmolVLM2-2.2B-Instruct", "adept/fuyu-8b"]
)
def test_skip_leaves_out_bad_images(model_id: str, tmp_path: Path) -> None:
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    images = [noise(40, 50, 1), smooth(70, 30, 2)]
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    out = proc([images[0], b"junk", empty, images[1]], on_error="skip")
    assert_same_outputs(out, proc(images))
    assert out.kept == [0, 3]
    assert sorted(out.skipped) == [1, 2]
    assert isinstance(out.skipped[1], mmfast.ImageDecodeError)
    assert str(out.skipped[2]) == f"source: the file {empty} is empty"
    nested = proc([[images[0], b"junk"], [images[1]]], on_error="skip")
    assert nested.kept == [(0, 0), (1, 0)] and list(nested.skipped) == [(0, 1)]
    assert_same_outputs(nested, proc([[images[0]], [images[1]]]))
    nothing = proc([b"junk"], on_error="skip")
    assert dict(nothing) == {} and nothing.kept == [] and list(nothing.skipped) == [0]
    # Reading an output of an empty result says why there is none.
    with pytest.raises(AttributeError, match="no outputs, every image was skipped"):
        _ = nothing.pixel_values
    with pytest.raises(KeyError, match="no outputs, every image was skipped"):
        _ = nothing["pixel_values"]


def test_bytes_and_paths_decode_in_parallel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Encoded images are decoded on the calling thread and the process's decoders, with the
    same result as one thread; concurrent calls share the decoders (an executor for each
    call added threads for each: 96 threads for 32 callers)."""
    buffers = []
    for i, (h, w) in enumerate([(300, 400), (500, 200), (64, 64), (700, 900)]):
        buffer = io.BytesIO()
        Image.fromarray(smooth(h, w, i)).save(buffer, "JPEG" if i % 2 else "PNG")
        buffers.append(buffer.getvalue())
    path = tmp_path / "x.png"
    path.write_bytes(buffers[0])
    images = [*buffers, path]
    proc = mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])
    seen: set[int] = set()
    decoders: set[str] = set()
    real_decode = processors.decode_source

    def decode(source: Any, composite_key: bool) -> Any:
        seen.add(threading.get_ident())
        name = threading.current_thread().name
        if name.startswith("mmfast-decode"):
            decoders.add(name)
        else:
            time.sleep(0.02)  # a decoder takes the next image meanwhile
        return real_decode(source, composite_key)

    monkeypatch.setattr(processors, "decode_source", decode)
    one = proc(images, threads=1)
    assert seen == {threading.get_ident()}
    seen.clear()
    assert_same_outputs(proc(images, threads=3), one)
    assert threading.get_ident() in seen and len(seen) >= 2
    outputs: list[Any] = []
    callers = [
        threading.Thread(target=lambda: outputs.append(proc(images, threads=3))) for _ in range(16)
    ]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert len(outputs) == 16
    for output in outputs:
        assert_same_outputs(output, one)
    assert 1 <= len(decoders) <= processors.decoders()._max_workers  # type: ignore[attr-defined]


def test_pil_images_to_convert_are_prepared_in_parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    """PIL images that are converted or composited before the batch (here RGBA, palette and
    CMYK ones) are prepared on the decoders too, with the same result as one thread; RGB
    images, read in place, and small images are not sent to them."""
    rgba = Image.fromarray(np.dstack([smooth(300, 240, 1), noise(300, 240, 2)[..., :1]]))
    images = [rgba, Image.fromarray(smooth(260, 260, 3)).convert("P"), rgba.convert("CMYK")]
    proc = mmfast.ImageProcessor.from_pretrained(LLAVA_ID)
    threads: set[int] = set()
    real_prepare = processors.prepare

    def prepare(image: Any, *args: Any) -> Any:
        threads.add(threading.get_ident())
        if threading.current_thread() is threading.main_thread():
            time.sleep(0.05)  # a decoder takes the next image meanwhile
        return real_prepare(image, *args)

    monkeypatch.setattr(processors, "prepare", prepare)
    one = proc(images, threads=1)
    assert_same_outputs(proc(images, threads=3), one)
    assert len(threads) >= 2
    threads.clear()
    plain = [Image.fromarray(smooth(40, 30, i)) for i in range(4)]
    small = [Image.fromarray(smooth(200, 300, i)).convert("P") for i in range(2)]
    proc([*plain, *small, rgba], threads=3)
    assert threads == {threading.get_ident()}


def test_an_interrupted_call_stops_its_decoders(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in the calling thread's decode: the decoders stop after the image each is on
    (they went on through the rest of the batch while the caller waited)."""
    buffer = io.BytesIO()
    Image.fromarray(smooth(40, 60, 1)).save(buffer, "PNG")
    images = [buffer.getvalue() + bytes(i) for i in range(20)]
    proc = mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])
    decoded: list[str] = []
    real_decode = processors.decode_source

    def decode(source: Any, composite_key: bool) -> Any:
        if not threading.current_thread().name.startswith("mmfast-decode"):
            time.sleep(0.02)  # a decoder takes an image meanwhile
            raise KeyboardInterrupt
        decoded.append(threading.current_thread().name)
        time.sleep(0.01)
        return real_decode(source, composite_key)

    monkeypatch.setattr(processors, "decode_source", decode)
    with pytest.raises(KeyboardInterrupt):
        proc(images, threads=2)
    assert 1 <= len(decoded) <= 4


def test_a_pil_image_given_twice_is_prepared_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lazily opened PIL image given twice beside bytes (which send the batch to the
    threads) is loaded once, by one thread: two threads loading it at once failed with
    "image file is truncated", and ``on_error="skip"`` dropped it."""
    buffer = io.BytesIO()
    Image.fromarray(smooth(300, 400, 1)).save(buffer, "JPEG")
    data = buffer.getvalue()
    proc = mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])
    want = proc([mmfast.decode_image(data)] * 4)
    threads: dict[int, set[int]] = {}
    real_prepare = processors.prepare

    def prepare(image: Any, *args: Any) -> Any:
        threads.setdefault(id(image), set()).add(threading.get_ident())
        return real_prepare(image, *args)

    monkeypatch.setattr(processors, "prepare", prepare)
    for _ in range(10):
        image = Image.open(io.BytesIO(data))
        threads.clear()
        got = proc([image, data, image, data], threads=2, on_error="skip")
        assert not got.skipped
        assert_same_outputs(got, want)
        assert len(threads[id(image)]) == 1


def test_lazily_opened_images_are_decoded_apart() -> None:
    """A PIL image opened and not loaded is decoded by :func:`prepare`, so a batch prepares
    it on its threads as it does bytes (by its pixels, about a file's bytes); loaded, or
    small, it is read where it is."""
    buffer = io.BytesIO()
    Image.fromarray(smooth(300, 400, 1)).save(buffer, "JPEG")
    lazy = Image.open(buffer)
    assert processors.preparing_cost(lazy) == 300 * 400
    lazy.load()
    assert processors.preparing_cost(lazy) == 0
    small = io.BytesIO()
    Image.fromarray(smooth(64, 48, 1)).save(small, "JPEG")
    assert processors.preparing_cost(Image.open(small)) == 0


def test_window_boxes_convert_a_cached_tuple_once() -> None:
    windows = (CropBox(0, 0, 2, 3), CropBox(-1, 1, 4, 4))
    first = processors.window_boxes(windows)
    assert first == ([(0, 0, 2, 3), (-1, 1, 4, 4)], 3 * 6 + 3 * 16)
    assert processors.window_boxes(windows) is first
    # Another tuple of the same windows, or a list, converts alike.
    assert processors.window_boxes(tuple(list(windows))) == first
    assert processors.window_boxes(list(windows)) == first
    for i in range(100):  # the kept results stay bounded
        processors.window_boxes((CropBox(i, 0, 1, 1),))
    assert len(processors._BOXES.kept) <= processors._BOXES.size


def test_plans_are_made_once_per_config_and_size() -> None:
    proc = mmfast.ImageProcessor.from_pretrained("Qwen/Qwen2-VL-7B-Instruct")
    config = proc.config
    first = processors.plan_for(config, 480, 640, 1)
    assert first == config.plan(480, 640)
    assert processors.plan_for(config, 480, 640, 1) is first
    assert processors.plan_for(config, 640, 480, 1) == config.plan(640, 480)
    other = proc.with_backend("torchvision")
    assert processors.plan_for(other, 480, 640, 1) == other.plan(480, 640) != first
    for i in range(100):  # the kept plans stay bounded
        processors.plan_for(config, 28, 28 + i, 1)
    assert len(processors._PLANS.kept) <= processors._PLANS.size
    # A call's outputs are those of a plan made afresh.
    pil = Image.fromarray(np.random.default_rng(0).integers(0, 256, (480, 640, 3), np.uint8))
    processors._PLANS.kept.clear()
    assert_same_outputs(proc(pil), proc(pil))


@pytest.mark.parametrize("model_id", mmfast.supported_models())
def test_one_image_calls_are_assembled_once(model_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-image call reuses the core's call assembled for its plan (tables, jobs, shapes)
    at every dtype, and gives what a call assembled afresh gives; its outputs are its own: a
    caller changing them changes no later call's."""
    proc = mmfast.ImageProcessor.from_pretrained(model_id, **builtin_settings(model_id))
    image = smooth(120, 160, 3)
    dtypes: list[str | None] = [None, "bfloat16", "float16"]
    if proc.config.raw_pixels and not any(
        isinstance(view.out, Resized) for view in proc.plan(120, 160).views
    ):
        dtypes.append("uint8")
    made: list[object] = []
    assemble = processors.assemble

    def counted(*args: Any) -> processors.Assembled:
        made.append(args)
        return assemble(*args)

    monkeypatch.setattr(processors, "assemble", counted)
    for dtype in dtypes:
        processors._ASSEMBLED.kept.clear()
        first = proc(image, dtype=dtype)
        want = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in first.items()}
        for value in first.values():
            if isinstance(value, np.ndarray):
                value[...] = ~value if value.dtype == np.bool_ else 7
        made.clear()
        assert_same_outputs(proc(image, dtype=dtype), want)
        assert not made
        # Batches of several images are assembled on every call.
        proc([image, image], dtype=dtype)
        assert len(made) == 1
    # Float resizes follow torch's thread count on every call (Molmo2, Phi-4-multimodal).
    fresh = {}
    for one in (True, False):
        monkeypatch.setattr(processors, "torch_one_thread", lambda one=one: one)
        processors._ASSEMBLED.kept.clear()
        fresh[one] = proc(image)
    for one in (True, False, True):
        monkeypatch.setattr(processors, "torch_one_thread", lambda one=one: one)
        assert_same_outputs(proc(image), fresh[one])
    for i in range(40):  # the kept calls stay bounded
        proc(smooth(120 + 8 * i, 160, 4))
    assert len(processors._ASSEMBLED.kept) <= processors._ASSEMBLED.size


def test_warmup_checks_its_argument() -> None:
    mmfast.warmup(4)
    for bad in (0, -1, 2.5, True, 2**21):
        with pytest.raises(MmfastError, match="megabytes: expected an integer from 1 to"):
            mmfast.warmup(bad)


def test_the_buffer_pool_limit_is_set_and_checked() -> None:
    """Every pool limit gives the same outputs, from a pooled buffer (patch rows streamed to
    memory) or from fresh memory (patch rows written through the cache, where the zeroing
    has just put it: outputs of 7.4 MB and of 36 MB, past glibc's heap)."""
    proc = mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])
    for image in (smooth(480, 640, 1), smooth(1056, 1408, 2)):
        first = proc(image, threads=1)
        address = first["pixel_values"].ctypes.data
        del first  # its memory goes back to the pool
        want = proc(image, threads=1)
        assert want["pixel_values"].ctypes.data == address
        try:
            for megabytes in (0, 1, 2048):
                mmfast.set_buffer_pool(megabytes)
                assert_same_outputs(proc(image, threads=1), want)
        finally:
            mmfast.set_buffer_pool(processors.DEFAULT_POOL_MB)
    for bad in (-1, 2.5, True, 2**21, "256"):
        with pytest.raises(MmfastError, match="megabytes: expected an integer from 0 to"):
            mmfast.set_buffer_pool(bad)


def test_acall_leaves_the_event_loop_free() -> None:
    """While a batch of 12-megapixel images runs, other tasks on the loop keep running."""
    images = [noise(3024, 4032, 1), smooth(4032, 3024, 2)]
    proc = mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])

    async def main() -> tuple[mmfast.BatchFeature, int]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.001)

        task = asyncio.create_task(ticker())
        try:
            out = await proc.acall(images, threads=2)
        finally:
            done.set()
            await task
        return out, ticks

    out, ticks = asyncio.run(main())
    assert_same_outputs(out, proc(images, threads=2))
    assert ticks >= 20


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_bad_dtypes_raise(model_id: str) -> None:
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    for dtype in ("float64", "bf16", np.float32, "int8"):
        with pytest.raises(MmfastError, match="dtype: expected one of 'float32', 'bfloat16'"):
            proc(noise(30, 30), dtype=dtype)


def test_unknown_model_lists_supported_ids() -> None:
    with pytest.raises(UnsupportedModelError) as info:
        mmfast.ImageProcessor.from_pretrained("someone/not-a-model")
    for model_id in ALL_IDS:
        assert model_id in str(info.value)
    assert "someone/not-a-model" in str(info.value)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"image_processor_type": 5}'])
def test_malformed_config_dir_raises(tmp_path: Path, content: str) -> None:
    (tmp_path / "preprocessor_config.json").write_text(content)
    with pytest.raises(MmfastError) as info:
        mmfast.ImageProcessor.from_pretrained(tmp_path)
    assert not isinstance(info.value, UnsupportedModelError)
    assert str(tmp_path) in str(info.value)


def test_config_dir_equals_builtin(tmp_path: Path) -> None:
    """A checkpoint directory holding the built-in's JSON gives the built-in's outputs."""
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(builtin_dict(QWEN_IDS[2])))
    images = [noise(100, 60, 1), smooth(40, 200, 2)]
    assert_same_outputs(
        mmfast.ImageProcessor.from_pretrained(tmp_path)(images),
        mmfast.ImageProcessor.from_pretrained(QWEN_IDS[2])(images),
    )


@pytest.mark.parametrize("switch", ["do_normalize", "do_rescale", "do_center_crop"])
def test_a_switch_given_as_none_is_off(tmp_path: Path, switch: str) -> None:
    """transformers stores a keyword's None over the class default, and a call's over the
    instance's, and reads it as off (LLaVA-1.5: unnormalised, unrescaled, uncropped)."""
    transformers = pytest.importorskip("transformers")
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(builtin_dict(LLAVA_ID)))
    image = noise(301, 211, 1)
    loaded = transformers.AutoImageProcessor.from_pretrained(tmp_path, backend="pil")
    want = loaded(image, return_tensors="np", **{switch: None})["pixel_values"]
    got = mmfast.ImageProcessor.from_pretrained(tmp_path)(image, **{switch: None})
    np.testing.assert_array_equal(got.pixel_values, want)
    np.testing.assert_array_equal(
        mmfast.ImageProcessor.from_pretrained(tmp_path, **{switch: None})(image).pixel_values,
        transformers.AutoImageProcessor.from_pretrained(tmp_path, backend="pil", **{switch: None})(
            image, return_tensors="np"
        )["pixel_values"],
    )
    assert not np.array_equal(want, loaded(image, return_tensors="np")["pixel_values"])


@pytest.mark.parametrize("model_id", ["BAAI/Emu3-Chat-hf", "LanguageBind/Video-LLaVA-7B-hf"])
def test_old_style_classes_read_a_calls_none_as_the_instances(model_id: str) -> None:
    """Emu3's and Video-LLaVA's preprocess read a call's None as the instance's value
    (``x if x is not None else self.x``), not as off."""
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    image = noise(64, 96, 1)
    want = proc(image)
    for switch in ("do_resize", "do_rescale", "do_normalize"):
        assert_same_outputs(proc(image, **{switch: None}), want)


def test_call_settings_use_the_files_read_at_load(tmp_path: Path) -> None:
    """A call's settings apply over the files as the processor read them: a checkpoint folder
    changed or removed afterwards changes nothing (transformers' instance holds its values)."""
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(builtin_dict(QWEN_IDS[0])))
    proc = mmfast.ImageProcessor.from_pretrained(tmp_path)
    image = noise(480, 640, 1)
    want = proc(image, max_pixels=200_000)
    changed = {**builtin_dict(QWEN_IDS[0]), "image_mean": [0, 0, 0], "image_std": [1, 1, 1]}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(changed))
    assert_same_outputs(proc(image, do_normalize=True), proc(image))
    (tmp_path / "preprocessor_config.json").unlink()
    assert_same_outputs(proc(image, max_pixels=200_000), want)
    assert proc(image, max_pixels=200_000)["image_grid_thw"].tolist() == [[1, 26, 36]]


# A mean and std of each channel's own, for the uint8 round trips.
DISTINCT_NORMALISATION = {"image_mean": [0.3, 0.5, 0.7], "image_std": [0.2, 0.25, 0.9]}


@pytest.mark.parametrize("model_id", mmfast.supported_models())
def test_output_dtypes(model_id: str) -> None:
    """bfloat16 and float16 are the float32 output rounded to nearest even (torch's
    ``.to(dtype)``); uint8 plus ``pixel_lut`` (and the rows mask of padded batches) gives the
    float32 output back through :func:`mmfast.reference.normalize_uint8`, bit for bit; a
    family whose padding is zero after normalising refuses uint8 before decoding anything.
    The means and stds differ per channel where the family takes them, so that a byte read
    as another channel's (Cosmos3 Edge's channel-last rows read as planes) shows."""
    try:
        proc = mmfast.ImageProcessor.from_pretrained(
            model_id, **{**builtin_settings(model_id), **DISTINCT_NORMALISATION}
        )
    except MmfastError:  # a family whose normalisation is fixed
        proc = mmfast.ImageProcessor.from_pretrained(model_id, **builtin_settings(model_id))
    images = [noise(300, 200, 1), smooth(45, 700, 2), noise(1000, 37, 3), smooth(120, 400, 4)]
    images.append(smooth(300, 200, 5))
    # GLM-Image refuses aspect ratios over 4: the images its geometry takes.
    images = [image for image in images if takes(proc, image)]
    if proc.config.layout() == "stack":  # PerceptionLM stacks only equal tile counts
        first = proc.plan(*images[0].shape[:2]).output_shapes["pixel_values"]
        images = [
            i for i in images if proc.plan(*i.shape[:2]).output_shapes["pixel_values"] == first
        ]
    assert len(images) >= 2
    key = proc.config.output_key  # pixel_values, or the family's own key
    want = proc(images, dtype="float32")
    # Every pixel output takes the dtype: DeepSeek-OCR-2's and UnlimitedOCR's local tiles (the
    # 1000-pixel side gives tiles), DeepSeek-VL hybrid's and Step-3.7's second output.
    pixels = [key, *(k for k in proc.config.pixel_keys[1:] if k in want)]
    for dtype, numpy_dtype in (("bfloat16", ml_dtypes.bfloat16), ("float16", np.float16)):
        got = proc(images, dtype=dtype)
        for name in pixels:
            assert got[name].dtype == numpy_dtype
            assert same_bits(got[name], want[name].astype(numpy_dtype))
        assert list(got) == list(want)
    if not proc.config.raw_pixels:
        with pytest.raises(MmfastError, match="dtype: 'uint8' cannot give"):
            proc([b"not an image"], dtype="uint8")
        return
    if any(isinstance(view.out, Resized) for view in proc.plan(300, 200).views):
        # Values computed after normalising are no table entries: no uint8 output for them.
        with pytest.raises(MmfastError, match=r"^dtype: expected"):
            proc(images, dtype="uint8")
        return
    raw = proc(images, dtype="uint8")
    assert raw[key].dtype == np.uint8 and raw[key].shape == want[key].shape
    assert raw.pixel_lut.shape[-2:] == (3, 256) and raw.pixel_lut.dtype == np.float32
    # One table, or one per pixel output (in pixel_keys' order) where their arithmetic differs.
    luts = raw.pixel_lut if raw.pixel_lut.ndim == 3 else [raw.pixel_lut] * len(pixels)
    back = reference.normalize_uint8(
        raw[key],
        luts[0],
        raw.get("pixel_rows_mask"),
        channels_last=proc.config.channels_last,
    )
    assert same_bits(back, want[key])
    for name, lut in zip(pixels[1:], luts[1:], strict=False):
        assert raw[name].dtype == np.uint8 and raw[name].shape == want[name].shape
        assert same_bits(reference.normalize_uint8(raw[name], lut), want[name])
    for name in want:
        if name not in pixels:
            assert_same_outputs({name: raw[name]}, {name: want[name]})


# The built-ins with a video processor.
VIDEO_MODELS = [
    model_id
    for model_id in mmfast.supported_models()
    if mmfast.ImageProcessor.from_pretrained(model_id, **builtin_settings(model_id)).video_config
]


@pytest.mark.parametrize("model_id", VIDEO_MODELS)
def test_video_uint8_gives_the_float_output_back(model_id: str) -> None:
    """A clip's uint8 output and ``pixel_lut`` give its float32 output back through
    :func:`mmfast.reference.normalize_uint8`, told the image config's ``channels_last``, bit
    for bit; or uint8 is refused. Muse Glimmer's time-major rows were read as planes."""
    # Off where mmfast refuses the built-in's: timestamps drawn in a font, token compression.
    computed = {
        "baidu/ERNIE-4.5-VL-28B-A3B-PT": {"draw_on_frames": False},
        "lkhl/VideoLLaMA3-2B-Image-HF": {"use_token_compression": False},
    }.get(model_id, {})
    proc = mmfast.ImageProcessor.from_pretrained(
        model_id,
        **builtin_settings(model_id),
        video_overrides={**DISTINCT_NORMALISATION, **computed},
    )
    clip = noise(96, 128, 1)[None].repeat(4, axis=0)
    clip[1:] //= np.arange(2, 5, dtype=np.uint8)[:, None, None, None]
    call = {"video_fps": 10.0, "do_sample_frames": False}
    want = proc.videos([clip], dtype="float32", **call)
    try:
        raw = proc.videos([clip], dtype="uint8", **call)
    except MmfastError as exc:
        assert str(exc).startswith("dtype: 'uint8' cannot give")
        return
    assert proc.video_config is not None
    key = proc.video_config.output_key
    assert raw[key].dtype == np.uint8 and raw[key].shape == want[key].shape
    back = reference.normalize_uint8(
        raw[key],
        raw["pixel_lut"],
        raw.get("pixel_rows_mask"),
        channels_last=proc.config.channels_last,
    )
    assert same_bits(back, want[key])


def takes(proc: mmfast.ImageProcessor, image: np.ndarray) -> bool:
    """Whether the processor's geometry takes an image of this size."""
    try:
        proc.plan(*image.shape[:2])
    except MmfastError:
        return False
    return True


# --------------------------------------------------------------------------------------------
# Arrays and tensors as transformers reads them; a call's settings
# --------------------------------------------------------------------------------------------

RGB = noise(37, 51, 11)
RGBA = np.dstack([RGB, noise(37, 51, 12)[..., :1]])
RGBA[0, :5, 3] = [0, 255, 1, 128, 254]  # transparent, opaque and the edges between
ARRAYS = {
    "(H, W, 1)": (RGB[..., :1].copy(), None),
    "(H, W, 4)": (RGBA, None),
    "(3, H, W)": (np.ascontiguousarray(RGB.transpose(2, 0, 1)), None),
    "(4, H, W)": (np.ascontiguousarray(RGBA.transpose(2, 0, 1)), None),
    "(1, H, W)": (RGB[None, ..., 0].copy(), None),
    "channels_first": (np.ascontiguousarray(RGB.transpose(2, 0, 1)), "channels_first"),
    "channels_last": (RGB, "channels_last"),
}


@pytest.mark.parametrize("name", list(ARRAYS))
@pytest.mark.parametrize("model_id", [QWEN_IDS[0], LLAVA_ID])
def test_arrays_read_as_transformers_reads_them(model_id: str, name: str) -> None:
    """One- and four-channel arrays and channels-first ones equal transformers' PIL class
    given the same array (RGBA composited onto white as it composites, rounded)."""
    array, data_format = ARRAYS[name]
    kwargs = {} if data_format is None else {"input_data_format": data_format}
    want = hf_processor(model_id)([array], return_tensors="np", **kwargs)
    got = mmfast.ImageProcessor.from_pretrained(model_id)([array], **kwargs)
    assert_same_outputs(got, want)


def test_a_4d_array_is_a_batch() -> None:
    proc = mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])
    batch = np.stack([RGB, noise(37, 51, 13)])
    assert_same_outputs(proc(batch), proc(list(batch)))
    assert_same_outputs(proc(batch), hf_processor(QWEN_IDS[0])(batch, return_tensors="np"))


@pytest.mark.parametrize("name", list(ARRAYS))
@pytest.mark.parametrize("model_id", [QWEN_IDS[0], LLAVA_ID])
def test_tensors_read_as_transformers_reads_them(model_id: str, name: str) -> None:
    """torch tensors, against transformers' torchvision class (whose RGBA composite is float32
    and truncated) and against mmfast's own arrays."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    array, data_format = ARRAYS[name]
    kwargs = {} if data_format is None else {"input_data_format": data_format}
    family, _ = mmfast.models.config.select_family(mmfast.models.config.read_source(model_id))
    module, cls = family.hf_torchvision.rsplit(".", 1)
    hf_class = getattr(importlib.import_module(f"transformers.models.{module}"), cls)
    want = hf_class.from_dict(builtin_dict(model_id))(
        [torch.from_numpy(array)], return_tensors="np", **kwargs
    )
    proc = mmfast.ImageProcessor.from_pretrained(model_id, backend="torchvision")
    assert_same_outputs(proc([torch.from_numpy(array)], **kwargs), want)
    assert_same_outputs(proc([array], **kwargs), want)


@pytest.mark.parametrize(
    "settings",
    [
        {"max_pixels": 28 * 28 * 40},
        {"min_pixels": 28 * 28 * 900, "max_pixels": 28 * 28 * 2000},
        {"size": {"shortest_edge": 28 * 28 * 10, "longest_edge": 28 * 28 * 60}},
        {"do_normalize": False, "resample": 2},
    ],
)
def test_a_call_takes_the_classes_settings(settings: dict[str, Any]) -> None:
    """Keyword arguments transformers' class takes on a call apply to that call only, with the
    call's precedence (a call's size replaces the checkpoint's min/max pixels, unlike the
    same key given to from_pretrained)."""
    proc = mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])
    images = [noise(300, 410, 1), noise(90, 700, 2)]
    got = proc(images, **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # transformers' min/max_pixels notice
        assert_same_outputs(got, hf_processor(QWEN_IDS[0])(images, return_tensors="np", **settings))
    assert_same_outputs(proc(images), hf_processor(QWEN_IDS[0])(images, return_tensors="np"))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_pixel": 5}, "max_pixel: not a Qwen2VLImageProcessor argument for a call"),
        ({"data_format": "channels_last"}, "data_format: expected 'channels_first' or None"),
        ({"device": "cuda"}, "device: expected 'cpu' or None"),
        ({"return_tensors": "tf"}, "return_tensors: expected 'np', 'pt' or None, got 'tf'"),
        ({"input_data_format": "last"}, "input_data_format: expected 'channels_first'"),
    ],
)
def test_bad_call_settings_name_the_argument(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(MmfastError, match=match):
        mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])(noise(40, 40), **kwargs)


@pytest.mark.parametrize(
    ("model_id", "setting", "value"),
    [
        ("llava-hf/llava-1.5-7b-hf", "use_square_size", True),
        ("llava-hf/llava-v1.6-mistral-7b-hf", "aspect_ratio_setting", "pad"),
    ],
)
def test_construction_settings_are_not_call_arguments(
    model_id: str, setting: str, value: object
) -> None:
    """Settings transformers' class takes at construction only (CLIP's ``__init__`` reads
    ``use_square_size``; LLaVA-NeXT's reads ``aspect_ratio_setting`` from its file and
    nothing reads it) are refused in a call, as transformers refuses them, and still taken
    by ``from_pretrained``."""
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    with pytest.raises(MmfastError, match=f"{setting}: not a .* argument for a call"):
        proc(noise(61, 130), **{setting: value})
    built = mmfast.ImageProcessor.from_pretrained(model_id, **{setting: value})
    assert built(noise(61, 130)).pixel_values.ndim >= 4


@pytest.mark.parametrize(
    "call", [{}, {"size": {"shortest_edge": 300}}, {"size": {"height": 100, "width": 150}}]
)
def test_a_call_size_replaces_the_square_of_use_square_size(call: dict[str, Any]) -> None:
    """CLIP's ``__init__`` makes ``use_square_size`` a 224 square once; a call's ``size``
    replaces it. mmfast squared the call's size too (224x224 where transformers gives
    300x602)."""
    image = noise(150, 301)
    want = hf_processor(LLAVA_ID, use_square_size=True)(
        image, return_tensors="np", do_center_crop=False, **call
    )
    proc = mmfast.ImageProcessor.from_pretrained(LLAVA_ID, use_square_size=True)
    assert_same_outputs(proc(image, do_center_crop=False, **call), want)


def test_call_only_arguments_that_change_nothing() -> None:
    proc = mmfast.ImageProcessor.from_pretrained(QWEN_IDS[0])
    want = proc(noise(40, 40))
    got = proc(noise(40, 40), data_format="channels_first", device="cpu", disable_grouping=True)
    assert_same_outputs(got, want)
    assert_same_outputs(proc(noise(40, 40), return_tensors="np"), want)


def test_settings_need_a_processor_from_pretrained() -> None:
    config = mmfast.models.load_config(QWEN_IDS[0])
    with pytest.raises(MmfastError, match="max_pixels: this processor was built from a config"):
        mmfast.ImageProcessor(config)(noise(40, 40), max_pixels=28 * 28 * 4)


def test_return_tensors_pt_shares_memory() -> None:
    torch = pytest.importorskip("torch")
    proc = mmfast.ImageProcessor.from_pretrained(LLAMA4_ID)
    out = proc(noise(60, 80), return_tensors="pt", dtype="bfloat16")
    assert out.pixel_values.dtype == torch.bfloat16
    want = proc(noise(60, 80), dtype="bfloat16").pixel_values.view(np.uint16)
    assert np.array_equal(out.pixel_values.view(torch.int16).numpy().view(np.uint16), want)


@pytest.mark.parametrize(
    "model_id", ["google/gemma-4-31B-it", "google/siglip2-base-patch16-naflex"]
)
def test_uint8_channel_last_rows_with_per_channel_constants(model_id: str) -> None:
    """Channel-last patch rows: each byte's channel is its index modulo 3, which
    ``normalize_uint8(..., channels_last=True)`` reads, whatever the batch size."""
    proc = mmfast.ImageProcessor.from_pretrained(
        model_id, do_normalize=True, image_mean=[0.1, 0.5, 0.9], image_std=[0.2, 0.4, 0.8]
    )
    assert proc.config.channels_last
    for images in ([noise(300, 200, 1)], [noise(64, 80, 2), smooth(45, 700, 3)] * 2):
        want = proc(images)
        raw = proc(images, dtype="uint8")
        back = reference.normalize_uint8(
            raw.pixel_values, raw.pixel_lut, raw.get("pixel_rows_mask"), channels_last=True
        )
        assert same_bits(back, want.pixel_values)


def test_pooled_outputs_are_rewritten_and_keep_their_zero_padding():
    """Large outputs go back to a pool when freed and serve the next output of a fitting
    size: a reused buffer holds the last call's values, so what no job writes (a sample's
    padding tiles) must still come out zero, and everything else the new values."""
    proc = mmfast.ImageProcessor.from_pretrained("meta-llama/Llama-3.2-11B-Vision-Instruct")
    rng = np.random.default_rng(0)
    big = rng.integers(0, 256, (600, 800, 3), dtype=np.uint8)
    small = rng.integers(0, 256, (90, 120, 3), dtype=np.uint8)
    want = proc([[big], [small]])["pixel_values"].copy()
    assert (want == 0).any() and want.nbytes >= 1 << 20
    for _ in range(3):
        full = proc([[big], [big]])
        assert full["pixel_values"].shape == want.shape and (full["pixel_values"] != 0).all()
        address = full["pixel_values"].ctypes.data
        del full  # its memory goes back to the pool
        got = proc([[big], [small]])
        assert type(got["pixel_values"].base).__name__ == "PooledOutput"
        assert got["pixel_values"].ctypes.data == address  # the same memory, reused
        np.testing.assert_array_equal(got["pixel_values"], want)
        got["pixel_values"][...] = 1.0  # writable, and its own memory
        assert not np.shares_memory(got["pixel_values"], want)
