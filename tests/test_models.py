"""mmfast.models against the installed transformers (5.24).

Where transformers can run here (numpy/PIL code) its functions and PIL-backend processors are
called directly. Llama 4's image processor imports torch, which is not installed, so its
module-level geometry functions are compiled from the installed source with a small numpy
stand-in for the few torch calls they make (see ``_hf_llama4``).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import re
from collections import defaultdict
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest
from conftest import builtin_dict, builtin_settings
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from transformers.image_transforms import center_crop as hf_center_crop
from transformers.image_transforms import (
    get_resize_output_image_size as hf_get_resize_output_image_size,
)
from transformers.image_transforms import get_size_with_aspect_ratio as hf_get_size_with_aspect
from transformers.image_utils import SizeDict
from transformers.image_utils import (
    get_image_size_for_max_height_width as hf_get_image_size_for_max_height_width,
)
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
from transformers.models.llama4.processing_llama4 import Llama4Processor
from transformers.models.llava.processing_llava import LlavaProcessor
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
    Qwen2VLImageProcessorPil,
)
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
    smart_resize as hf_smart_resize,
)

import mmfast
from mmfast import models
from mmfast.errors import MmfastError, UnsupportedModelError
from mmfast.models import (
    ClipConfig,
    Llama4Config,
    QwenVLConfig,
    center_crop_box,
    find_supported_resolutions,
    get_best_fit,
    get_image_size_for_max_height_width,
    get_llama4_resize_size,
    get_resize_output_image_size,
    get_size_with_aspect_ratio,
    load_config,
    smart_resize,
    supported_models,
)
from mmfast.models.config import load_video_config

FIXTURES = Path(__file__).parent / "fixtures"
QWEN_IDS = ["Qwen/Qwen2-VL-7B-Instruct", "Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen3-VL-8B-Instruct"]
LLAMA4_ID = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
LLAVA_ID = "llava-hf/llava-1.5-7b-hf"

side = st.integers(min_value=1, max_value=20000)


def random_image(height: int, width: int, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


def shape_only(height: int, width: int) -> np.ndarray:
    """A (3, height, width) array that allocates nothing: HF size helpers only read .shape."""
    return np.broadcast_to(np.zeros((), np.uint8), (3, height, width))


# --------------------------------------------------------------------------------------------
# smart_resize
# --------------------------------------------------------------------------------------------

# (factor, min_pixels, max_pixels): Qwen2-VL/2.5-VL and Qwen3-VL checkpoints, the Qwen2-VL
# class defaults, and a tight budget that exercises both the floor and ceil branches.
QWEN_BUDGETS = [(28, 3136, 12845056), (32, 65536, 16777216), (28, 3136, 1003520), (28, 3136, 50176)]


@pytest.mark.parametrize(("factor", "min_pixels", "max_pixels"), QWEN_BUDGETS)
@settings(max_examples=300, deadline=None)
@given(height=side, width=side)
def test_smart_resize_matches_hf(
    factor: int, min_pixels: int, max_pixels: int, height: int, width: int
) -> None:
    assert_smart_resize_agrees(height, width, factor, min_pixels, max_pixels)


@pytest.mark.parametrize(("factor", "min_pixels", "max_pixels"), QWEN_BUDGETS)
@settings(max_examples=200, deadline=None)
@given(short=st.integers(1, 120), ratio=st.floats(150.0, 260.0), tall=st.booleans())
def test_smart_resize_extreme_aspect_ratios(
    factor: int, min_pixels: int, max_pixels: int, short: int, ratio: float, tall: bool
) -> None:
    long = min(20000, max(1, int(short * ratio)))
    height, width = (long, short) if tall else (short, long)
    assert_smart_resize_agrees(height, width, factor, min_pixels, max_pixels)


def assert_smart_resize_agrees(
    height: int, width: int, factor: int, min_pixels: int, max_pixels: int
) -> None:
    try:
        expected = hf_smart_resize(height, width, factor, min_pixels, max_pixels)
    except ValueError:
        with pytest.raises(MmfastError, match="aspect ratio"):
            smart_resize(height, width, factor, min_pixels, max_pixels)
        return
    assert smart_resize(height, width, factor, min_pixels, max_pixels) == expected


GLM_BUDGETS = [(28, 12544, 9633792), (28, 112 * 112, 28 * 28 * 15000), (32, 3136, 50176)]


@pytest.mark.parametrize(("factor", "min_pixels", "max_pixels"), GLM_BUDGETS)
@pytest.mark.parametrize("frames", [2, 3, 4])
@settings(max_examples=150, deadline=None)
@given(height=side, width=side)
def test_glm_smart_resize_matches_hf(
    factor: int, min_pixels: int, max_pixels: int, frames: int, height: int, width: int
) -> None:
    hf = importlib.import_module("transformers.models.glm4v.image_processing_pil_glm4v")
    args = (frames, height, width, 2, factor, min_pixels, max_pixels)
    try:
        expected = hf.smart_resize(*args)
    except ValueError:
        with pytest.raises(MmfastError, match="aspect ratio"):
            models.glm4v.smart_resize(*args)
        return
    assert models.glm4v.smart_resize(*args) == expected


@pytest.mark.parametrize(
    ("factor", "min_pixels", "max_pixels"), [(28, 147384, 2822400), *QWEN_BUDGETS]
)
@settings(max_examples=200, deadline=None)
@given(height=side, width=side)
def test_paddleocr_smart_resize_matches_hf(
    factor: int, min_pixels: int, max_pixels: int, height: int, width: int
) -> None:
    hf = importlib.import_module(
        "transformers.models.paddleocr_vl.image_processing_pil_paddleocr_vl"
    )
    try:
        expected = hf.smart_resize(height, width, factor, min_pixels, max_pixels)
    except ValueError:
        with pytest.raises(MmfastError, match="aspect ratio"):
            models.paddleocr_vl.smart_resize(height, width, factor, min_pixels, max_pixels)
        return
    assert (
        models.paddleocr_vl.smart_resize(height, width, factor, min_pixels, max_pixels) == expected
    )


@settings(max_examples=400, deadline=None)
@given(
    height=side,
    width=side,
    min_crop=st.integers(1, 600),
    max_crops=st.integers(1, 8),
    ratio=st.floats(0.5, 4.0),
)
def test_pan_and_scan_matches_hf(
    height: int, width: int, min_crop: int, max_crops: int, ratio: float
) -> None:
    """Gemma 3's crops, against HF's method on zero-stride arrays of the image's size whose
    values are the row (then the column) index, so each crop tells where it starts."""
    pas = importlib.import_module(
        "transformers.models.gemma3.image_processing_pil_gemma3"
    ).Gemma3ImageProcessorPil.pan_and_scan
    rows = np.broadcast_to(np.arange(height)[None, :, None], (1, height, width))
    cols = np.broadcast_to(np.arange(width)[None, None, :], (1, height, width))
    row_crops = pas(None, rows, min_crop, max_crops, ratio)
    col_crops = pas(None, cols, min_crop, max_crops, ratio)
    if any(crop.size == 0 for crop in row_crops):
        with pytest.raises(MmfastError, match="empty crop"):
            models.gemma3.pan_and_scan(height, width, min_crop, max_crops, ratio)
        return
    boxes = models.gemma3.pan_and_scan(height, width, min_crop, max_crops, ratio)
    expected = [
        (int(r[0, 0, 0]), int(c[0, 0, 0]), *r.shape[1:])
        for r, c in zip(row_crops, col_crops, strict=True)
    ]
    assert [(b.top, b.left, b.height, b.width) for b in boxes] == expected


def test_smart_resize_rejects_empty_image() -> None:
    with pytest.raises(MmfastError, match="positive"):
        smart_resize(0, 10)


# --------------------------------------------------------------------------------------------
# CLIP resize and centre crop
# --------------------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(height=side, width=side, edge=st.integers(1, 2048))
def test_shortest_edge_resize_matches_hf(height: int, width: int, edge: int) -> None:
    expected = hf_get_resize_output_image_size(
        shape_only(height, width),
        size=edge,
        default_to_square=False,
        input_data_format="channels_first",
    )
    assert get_resize_output_image_size(height, width, edge) == tuple(expected)


@settings(max_examples=400, deadline=None)
@given(height=side, width=side, edge=st.integers(1, 1024), extra=st.integers(0, 2048))
def test_shortest_longest_edge_resize_matches_hf(
    height: int, width: int, edge: int, extra: int
) -> None:
    expected = hf_get_size_with_aspect((height, width), edge, edge + extra)
    assert get_size_with_aspect_ratio(height, width, edge, edge + extra) == expected


@settings(max_examples=300, deadline=None)
@given(height=side, width=side, max_height=st.integers(1, 4096), max_width=st.integers(1, 4096))
def test_max_height_width_resize_matches_hf(
    height: int, width: int, max_height: int, max_width: int
) -> None:
    expected = hf_get_image_size_for_max_height_width((height, width), max_height, max_width)
    assert get_image_size_for_max_height_width(height, width, max_height, max_width) == expected


def apply_crop_box(image: np.ndarray, box: models.CropBox) -> np.ndarray:
    """What the pixel engine does with a CropBox: copy the window, zeros outside the image."""
    out = np.zeros((image.shape[0], box.height, box.width), image.dtype)
    top, left = max(box.top, 0), max(box.left, 0)
    bottom, right = min(box.bottom, image.shape[1]), min(box.right, image.shape[2])
    if top < bottom and left < right:
        out[:, top - box.top : bottom - box.top, left - box.left : right - box.left] = image[
            :, top:bottom, left:right
        ]
    return out


@settings(max_examples=300, deadline=None)
@given(
    height=st.integers(1, 40),
    width=st.integers(1, 40),
    crop_height=st.integers(1, 40),
    crop_width=st.integers(1, 40),
)
def test_center_crop_box_matches_hf_pixels(
    height: int, width: int, crop_height: int, crop_width: int
) -> None:
    # Distinct non-zero pixels, so any off-by-one or wrong padding shows.
    image = (np.arange(3 * height * width, dtype=np.int64).reshape(3, height, width) + 1).astype(
        np.float32
    )
    expected = hf_center_crop(image, (crop_height, crop_width), input_data_format="channels_first")
    box = center_crop_box(height, width, crop_height, crop_width)
    np.testing.assert_array_equal(apply_crop_box(image, box), expected)


# --------------------------------------------------------------------------------------------
# Llama 4 geometry against the installed source
# --------------------------------------------------------------------------------------------


class _TorchTensor(np.ndarray):
    """Just enough of torch's int64 tensors for the Llama 4 helpers: dividing promotes to
    float32 (torch's default dtype), and indexing yields 0-d tensors, not Python scalars."""

    def __truediv__(self, other: object) -> _TorchTensor:
        numerator = np.asarray(self).astype(np.float32)
        return np.asarray(numerator / np.float32(other)).view(_TorchTensor)

    def __getitem__(self, index: Any) -> _TorchTensor:
        return np.asarray(np.asarray(self)[index]).view(_TorchTensor)


_TORCH_SHIM = SimpleNamespace(
    Tensor=_TorchTensor,
    tensor=lambda data, device=None: np.asarray(data, np.int64).view(_TorchTensor),
    where=np.where,
    max=np.max,
    min=np.min,
    argmin=np.argmin,
)


@lru_cache(maxsize=1)
def _hf_llama4() -> dict[str, Callable[..., Any]]:
    """The installed Llama 4 geometry functions, compiled without importing torch."""
    spec = importlib.util.find_spec("transformers.models.llama4.image_processing_llama4")
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text())
    wanted = {
        "get_factors",
        "get_max_res_without_distortion",
        "find_supported_resolutions",
        "get_best_fit",
    }
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    assert {n.name for n in body} == wanted
    namespace: dict[str, Any] = {
        "torch": _TORCH_SHIM,
        "math": math,
        "defaultdict": defaultdict,
        "lru_cache": lru_cache,
        "SizeDict": SizeDict,
    }
    exec(compile(ast.Module(body=body, type_ignores=[]), spec.origin, "exec"), namespace)
    return {name: namespace[name] for name in wanted}


def hf_llama4_geometry(
    height: int, width: int, max_patches: int, tile: int, resize_to_max_canvas: bool
) -> tuple[tuple[int, int], tuple[int, int]]:
    """(canvas, resize size) as ``Llama4ImageProcessor._preprocess`` computes them; these few
    lines restate its body around the HF helpers, which are the installed ones."""
    hf = _hf_llama4()
    size = SizeDict(height=tile, width=tile)
    possible = _TORCH_SHIM.tensor(hf["find_supported_resolutions"](max_patches, size))
    image_size = (height, width)
    target_size = hf["get_best_fit"](
        image_size, possible, resize_to_max_canvas=resize_to_max_canvas
    )
    if resize_to_max_canvas:
        target_without_distortion = target_size
    else:
        target_without_distortion = (
            min(max(image_size[0], size.height), target_size[0]),
            min(max(image_size[1], size.height), target_size[1]),
        )
    new_size = hf["get_max_res_without_distortion"](image_size, target_without_distortion)
    canvas = (int(target_size[0]), int(target_size[1]))
    return canvas, (max(int(new_size[0]), 1), max(int(new_size[1]), 1))


@pytest.mark.parametrize("max_patches", range(1, 21))
@pytest.mark.parametrize("tile", [224, 336])
def test_find_supported_resolutions_matches_hf(max_patches: int, tile: int) -> None:
    expected = _hf_llama4()["find_supported_resolutions"](
        max_patches, SizeDict(height=tile, width=tile)
    )
    assert list(find_supported_resolutions(max_patches, tile)) == expected


@settings(max_examples=500, deadline=None)
@given(
    height=side,
    width=side,
    max_patches=st.sampled_from([1, 2, 4, 9, 16]),
    resize_to_max_canvas=st.booleans(),
)
def test_llama4_canvas_and_resize_match_hf(
    height: int, width: int, max_patches: int, resize_to_max_canvas: bool
) -> None:
    canvas, resized = hf_llama4_geometry(height, width, max_patches, 336, resize_to_max_canvas)
    resolutions = find_supported_resolutions(max_patches, 336)
    assert get_best_fit((height, width), resolutions, resize_to_max_canvas) == canvas
    assert get_llama4_resize_size((height, width), canvas, 336, resize_to_max_canvas) == resized

    config = load_config(
        LLAMA4_ID, max_patches=max_patches, resize_to_max_canvas=resize_to_max_canvas
    )
    plan = config.plan(height, width)
    assert plan.canvas_size == canvas
    assert plan.resize_size == resized
    assert plan.tiles is not None
    assert (plan.tiles.tiles_h, plan.tiles.tiles_w) == (canvas[0] // 336, canvas[1] // 336)
    assert plan.tiles.global_tile == (plan.tiles.tiles_h * plan.tiles.tiles_w > 1)


@pytest.mark.parametrize(
    ("size", "canvas", "resized"),
    [
        # Worked by hand with the HF rules (tile 336, 16 tiles, no max canvas):
        # small images are upscaled to one tile at most...
        ((100, 100), (336, 336), (336, 336)),
        # ...an image that fits a 2x2 canvas is left alone and padded...
        ((480, 640), (672, 672), (480, 640)),
        # ...and a 1080p frame is downscaled into the 3x5 canvas: 1680 / 1920 * 1080 = 945.
        ((1080, 1920), (1008, 1680), (945, 1680)),
    ],
)
def test_llama4_worked_examples(
    size: tuple[int, int], canvas: tuple[int, int], resized: tuple[int, int]
) -> None:
    plan = load_config(LLAMA4_ID).plan(*size)
    assert (plan.canvas_size, plan.resize_size) == (canvas, resized)


@pytest.mark.parametrize(
    ("size", "resized"),
    [
        # 1680 / 2000 * 1175 is exactly 987, but torch computes it in float32 (0.84 rounds down
        # to 0.83999997) and floors to 986; float64 arithmetic would give 987.
        ((1175, 2000), (986, 1680)),
        # 1344 / 1920 * 1450 is exactly 1015: float32 lands on it, float64 just below (1014).
        ((1450, 1920), (1015, 1344)),
        ((1460, 1920), (1022, 1344)),
    ],
)
def test_llama4_resize_uses_torch_float32_rounding(
    size: tuple[int, int], resized: tuple[int, int]
) -> None:
    assert load_config(LLAMA4_ID).plan(*size).resize_size == resized
    assert hf_llama4_geometry(*size, 16, 336, False)[1] == resized


# --------------------------------------------------------------------------------------------
# End to end against the PIL-backend processors
# --------------------------------------------------------------------------------------------

IMAGE_SIZES = [(1, 1), (17, 300), (64, 48), (100, 29), (28, 56), (150, 150)]


@pytest.mark.parametrize("model_id", QWEN_IDS)
@pytest.mark.parametrize(
    "overrides",
    [{}, {"max_pixels": 28 * 28 * 8}, {"size": {"shortest_edge": 4096, "longest_edge": 9000}}],
)
def test_qwen_plans_match_hf_processor(model_id: str, overrides: dict[str, Any]) -> None:
    config_dict = builtin_dict(model_id) | overrides
    processor = Qwen2VLImageProcessorPil.from_dict(config_dict)
    config = load_config(model_id, **overrides)
    assert isinstance(config, QwenVLConfig)
    sizes = IMAGE_SIZES if config.patch_size == 14 else [(1, 1), (40, 400), (64, 48)]
    images = [random_image(h, w, seed) for seed, (h, w) in enumerate(sizes)]
    out = processor(images, return_tensors="np")
    plans = [config.plan(h, w) for h, w in sizes]
    grids = [(p.patches.grid_t, p.patches.grid_h, p.patches.grid_w) for p in plans if p.patches]
    assert [tuple(row) for row in out["image_grid_thw"].tolist()] == grids
    rows = sum(p.output_shapes["pixel_values"][0] for p in plans)
    assert out["pixel_values"].shape == (rows, plans[0].output_shapes["pixel_values"][1])
    for plan, grid in zip(plans, out["image_grid_thw"], strict=True):
        assert plan.num_image_tokens == processor.get_number_of_image_patches(
            plan.height, plan.width, {}
        ) // (config.merge_size**2)
        assert plan.num_image_tokens == int(np.prod(grid)) // config.merge_size**2


def test_qwen_without_resize_matches_hf_processor() -> None:
    processor = Qwen2VLImageProcessorPil.from_dict(builtin_dict(QWEN_IDS[0]) | {"do_resize": False})
    config = load_config(QWEN_IDS[0], do_resize=False)
    out = processor([random_image(56, 112, 0)], return_tensors="np")
    plan = config.plan(56, 112)
    assert plan.resize_size == (56, 112)
    assert out["pixel_values"].shape == plan.output_shapes["pixel_values"]
    with pytest.raises(MmfastError, match="multiples of"):
        config.plan(57, 112)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"do_center_crop": False},
        {"size": {"height": 200, "width": 120}, "crop_size": 150},
        {
            "size": {"shortest_edge": 64, "longest_edge": 100},
            "crop_size": {"height": 90, "width": 40},
        },
        {"size": {"max_height": 80, "max_width": 50}, "do_center_crop": False},
    ],
)
def test_clip_plans_match_hf_processor(overrides: dict[str, Any]) -> None:
    processor = CLIPImageProcessorPil.from_dict(builtin_dict(LLAVA_ID) | overrides)
    config = load_config(LLAVA_ID, **overrides)
    assert isinstance(config, ClipConfig)
    images = [random_image(h, w, seed) for seed, (h, w) in enumerate(IMAGE_SIZES)]
    out = processor(images)
    for (h, w), pixels in zip(IMAGE_SIZES, out["pixel_values"], strict=True):
        assert pixels.shape == config.plan(h, w).output_shapes["pixel_values"]


def test_clip_plan_pixels_match_hf_processor() -> None:
    """Resize with PIL to the planned size, crop by the planned box, rescale and normalise with
    the planned constants: the result must equal the HF PIL processor's output."""
    config = load_config(
        LLAVA_ID, size={"shortest_edge": 40}, crop_size={"height": 50, "width": 30}
    )
    processor = CLIPImageProcessorPil.from_dict(
        builtin_dict(LLAVA_ID)
        | {"size": {"shortest_edge": 40}, "crop_size": {"height": 50, "width": 30}}
    )
    for seed, (h, w) in enumerate([(30, 90), (61, 20), (40, 40)]):
        image = random_image(h, w, seed)
        plan = config.plan(h, w)
        resized = image.resize(plan.resize_size[::-1], resample=plan.resample)
        pixels = np.asarray(resized).transpose(2, 0, 1)
        assert plan.crop is not None
        cropped = apply_crop_box(pixels, plan.crop).astype(np.float32) * np.float32(
            plan.rescale_factor
        )
        mean = np.asarray(plan.image_mean, np.float32)[:, None, None]
        std = np.asarray(plan.image_std, np.float32)[:, None, None]
        expected = processor(image)["pixel_values"][0]
        np.testing.assert_allclose((cropped - mean) / std, expected, rtol=0, atol=1e-6)


# --------------------------------------------------------------------------------------------
# Token counts
# --------------------------------------------------------------------------------------------


def test_llava_token_count_matches_llava_processor() -> None:
    config = load_config(LLAVA_ID)
    plan = config.plan(480, 640)
    # LlavaProcessor.replace_image_token only reads these attributes; the real processor needs
    # a tokenizer, which is not available offline.
    fake = SimpleNamespace(
        patch_size=14,
        num_additional_image_tokens=1,
        vision_feature_select_strategy="default",
        image_token="<image>",
    )
    pixel_values = np.zeros((1, *plan.output_shapes["pixel_values"]), np.float32)
    text = LlavaProcessor.replace_image_token(fake, {"pixel_values": pixel_values}, 0)
    assert plan.num_image_tokens == text.count("<image>") == 576
    assert config.num_image_tokens(480, 640) == 576


@pytest.mark.parametrize(
    "size", [(100, 100), (480, 640), (1080, 1920), (20, 3000), (5000, 300), (336, 336)]
)
def test_llama4_token_count_matches_llama4_processor(size: tuple[int, int]) -> None:
    config = load_config(LLAMA4_ID)
    plan = config.plan(*size)
    assert plan.tiles is not None
    # Llama4Processor.replace_image_token / _prompt_split_image read only these attributes.
    fake = SimpleNamespace(patch_size=14, downsample_ratio=4)
    fake._prompt_split_image = lambda ratio, n: Llama4Processor._prompt_split_image(fake, ratio, n)
    pixel_values = [np.zeros(plan.output_shapes["pixel_values"], np.float32)]
    ratios = [[plan.tiles.tiles_h, plan.tiles.tiles_w]]
    text = Llama4Processor.replace_image_token(
        fake, {"pixel_values": pixel_values, "aspect_ratios": ratios}, 0
    )
    tokens = re.findall(r"<\|[a-z_]+\|>", text)
    assert "".join(tokens) == text
    assert plan.num_image_tokens == len(tokens) == config.num_image_tokens(*size)
    assert plan.tiles.tokens_per_tile == 144
    assert tokens.count("<|patch|>") == 144 * plan.tiles.num_tiles


def test_llama4_token_count_worked_examples() -> None:
    config = load_config(LLAMA4_ID)
    # One tile: <|image_start|> <|image|> 144 x <|patch|> <|image_end|>.
    assert config.num_image_tokens(100, 100) == 147
    # 2x2 tiles: each row is 2 x 144 patches + 1 x-separator + 1 y-separator, then as above.
    assert config.num_image_tokens(480, 640) == 2 * (2 * 144 + 2) + 147


# --------------------------------------------------------------------------------------------
# Reading configs
# --------------------------------------------------------------------------------------------


def test_supported_models_load() -> None:
    expected = {
        **dict.fromkeys(QWEN_IDS, QwenVLConfig),
        "Qwen/Qwen2.5-Omni-7B": QwenVLConfig,
        "Qwen/Qwen3-Omni-30B-A3B-Instruct": QwenVLConfig,
        LLAMA4_ID: Llama4Config,
        LLAVA_ID: ClipConfig,
        "zai-org/GLM-OCR": models.Glm4vConfig,
        "zai-org/GLM-4.1V-9B-Thinking": models.Glm4vConfig,
        "zai-org/GLM-4.5V": models.Glm4vConfig,
        "zai-org/GLM-4.6V": models.Glm4vConfig,
        "PaddlePaddle/PaddleOCR-VL": models.PaddleOCRVLConfig,
        "moonshotai/Kimi-VL-A3B-Instruct": models.KimiVLConfig,
        "moonshotai/Kimi-VL-A3B-Thinking-2506": models.KimiVLConfig,
        "moonshotai/Kimi-K2.5": models.KimiK25Config,
        "moonshotai/Kimi-K2.6": models.KimiK25Config,
        "google/gemma-3-4b-it": models.Gemma3Config,
        "google/siglip-so400m-patch14-384": models.SiglipConfig,
        "google/siglip2-base-patch16-224": models.SiglipConfig,
        "google/paligemma2-3b-pt-224": models.SiglipConfig,
        "OpenGVLab/InternVL3-8B-hf": models.GotOcr2Config,
        "OpenGVLab/InternVL3_5-8B-HF": models.GotOcr2Config,
        "CohereLabs/aya-vision-8b": models.GotOcr2Config,
        "llava-hf/llava-v1.6-mistral-7b-hf": models.LlavaNextConfig,
        "llava-hf/LLaVA-NeXT-Video-7B-hf": models.LlavaNextConfig,
        "llava-hf/llava-onevision-qwen2-7b-ov-hf": models.LlavaOnevisionConfig,
        "HuggingFaceTB/SmolVLM-Instruct": models.Idefics3Config,
        "HuggingFaceTB/SmolVLM2-2.2B-Instruct": models.Idefics3Config,
        "HuggingFaceM4/Idefics3-8B-Llama3": models.Idefics3Config,
        "mistralai/Mistral-Small-3.1-24B-Instruct-2503": models.PixtralConfig,
        "mistralai/Mistral-Small-3.2-24B-Instruct-2506": models.PixtralConfig,
        "mistral-community/pixtral-12b": models.PixtralConfig,
        "lightonai/LightOnOCR-1B-1025": models.PixtralConfig,
        "HuggingFaceM4/idefics2-8b": models.Idefics2Config,
        "BAAI/Emu3-Chat-hf": models.Emu3Config,
        "baidu/ERNIE-4.5-VL-28B-A3B-PT": models.Ernie4_5_VLMoeConfig,
        "tencent/HunyuanOCR": models.HunYuanVLConfig,
        "zai-org/GLM-5.3-Flash": models.Glm5NextConfig,
        "lkhl/VideoLLaMA3-2B-Image-HF": models.VideoLlama3Config,
        "zai-org/GLM-Image": models.GlmImageConfig,
        "zai-org/GLM-GA": models.GlmgaConfig,
        "openbmb/MiniCPM-V-4.6": models.MiniCPMV4_6Config,
        "openbmb/MiniCPM-V-4.7-1B": models.MiniCPMV4_6Config,
        "openbmb/MiniCPM-OCR-1.0": models.MiniCPMOcrConfig,
        "google/siglip2-base-patch16-naflex": models.Siglip2Config,
        "google/gemma-4-31B-it": models.Gemma4Config,
        "google/gemma-4-12B-it": models.Gemma4UnifiedConfig,
        "LiquidAI/LFM2-VL-1.6B": models.Lfm2VlConfig,
        "meta-llama/Llama-3.2-11B-Vision-Instruct": models.MllamaConfig,
        "meta-llama/Llama-3.2-11B-Vision": models.MllamaConfig,
        "deepseek-community/DeepSeek-OCR-2": models.DeepseekOcr2Config,
        "CohereLabs/command-a-vision-07-2025": models.Cohere2VisionConfig,
        "thisisiron/Ovis2-2B-hf": models.Ovis2Config,
        "thisisiron/Ovis2-1B-hf": models.Ovis2Config,
        "ibm-granite/granite-for-docling-500m": models.GraniteDoclingConfig,
        "swiss-ai/Apertus-v1.5-8B": models.Apertus1p5Config,
        "CohereLabs/North-Micro-Vision-Instruct": models.CohereCompassConfig,
        "nvidia/Cosmos3-Edge": models.Cosmos3EdgeConfig,
        "tencent/Hy4": models.HYV4VLConfig,
        "MiniMaxAI/MiniMax-M3": models.MiniMaxM3VLConfig,
        "meta-models/Muse-Glimmer-30B": models.MuseGlimmerConfig,
        "PaddlePaddle/PP-Chart2Table_safetensors": models.PPChart2TableConfig,
        "microsoft/udop-large": models.LayoutLMv3Config,
        "microsoft/udop-large-512": models.LayoutLMv3Config,
        "lerobot/pi0_base": models.PI0Config,
        "LanguageBind/Video-LLaVA-7B-hf": models.VideoLlavaConfig,
        "adept/fuyu-8b": models.FuyuConfig,
        "PaddlePaddle/PP-FormulaNet_plus-L_safetensors": models.PPFormulaNetConfig,
        "microsoft/Phi-4-multimodal-instruct": models.Phi4MultimodalConfig,
        "allenai/Molmo2-8B": models.Molmo2Config,
        "allenai/Molmo2-4B": models.Molmo2Config,
        "liuhaotian/llava-v1.5-7b": models.LlavaConfig,
        "deepseek-community/deepseek-vl-1.3b-chat": models.DeepseekVLConfig,
        "deepseek-community/Janus-Pro-1B": models.DeepseekVLConfig,
        "deepseek-community/deepseek-vl-7b-chat": models.DeepseekVLHybridConfig,
        "stepfun-ai/Step-3.7-Flash": models.Step3p7Config,
        "facebook/chameleon-7b": models.ChameleonConfig,
        "Salesforce/blip-vqa-base": models.BlipConfig,
        "Salesforce/blip2-opt-2.7b": models.BlipConfig,
        "Salesforce/instructblip-vicuna-7b": models.BlipConfig,
        "HuggingFaceM4/idefics-9b": models.IdeficsConfig,
        "rhymes-ai/Aria": models.AriaConfig,
        "facebook/Perception-LM-1B": models.PerceptionLMConfig,
        "thinkingmachines/Inkling": models.InklingConfig,
        "baidu/Unlimited-OCR": models.UnlimitedOcrConfig,
    }
    assert sorted(supported_models()) == sorted(expected)
    for model_id, config_type in expected.items():
        assert type(load_config(model_id, **builtin_settings(model_id))) is config_type, model_id


def test_builtin_values() -> None:
    qwen2 = load_config(QWEN_IDS[0])
    assert isinstance(qwen2, QwenVLConfig)
    assert (qwen2.min_pixels, qwen2.max_pixels, qwen2.patch_size) == (3136, 12845056, 14)
    assert qwen2.model_type == "qwen2_vl"
    qwen3 = load_config(QWEN_IDS[2])
    assert isinstance(qwen3, QwenVLConfig)
    assert (qwen3.min_pixels, qwen3.max_pixels, qwen3.patch_size) == (65536, 16777216, 16)
    assert qwen3.image_mean == qwen3.image_std == (0.5, 0.5, 0.5)
    assert qwen3.image_processor_type == "Qwen2VLImageProcessorFast"
    llama = load_config(LLAMA4_ID)
    assert isinstance(llama, Llama4Config)
    assert (llama.tile_size, llama.max_patches, llama.resample) == (336, 16, models.BILINEAR)
    llava = load_config(LLAVA_ID)
    assert isinstance(llava, ClipConfig)
    assert dict(llava.size) == {"shortest_edge": 336}
    assert llava.crop_size == (336, 336)
    assert llava.resample == models.BICUBIC


@pytest.mark.parametrize(
    ("name", "min_pixels", "max_pixels", "patch", "model_type"),
    [
        ("qwen2_vl_pixels.json", 3136, 12845056, 14, "qwen2_vl"),
        ("qwen3_vl_size.json", 65536, 16777216, 16, "qwen3_vl"),
        # Both spellings: Qwen2VLImageProcessor.__init__ lets min/max_pixels win over size.
        ("qwen_both_spellings.json", 3136, 50176, 14, None),
    ],
)
def test_qwen_spellings(
    name: str, min_pixels: int, max_pixels: int, patch: int, model_type: str | None
) -> None:
    config = load_config(FIXTURES / name)
    assert isinstance(config, QwenVLConfig)
    assert (config.min_pixels, config.max_pixels, config.patch_size) == (
        min_pixels,
        max_pixels,
        patch,
    )
    assert config.model_type == model_type
    hf = Qwen2VLImageProcessorPil.from_dict(json.loads((FIXTURES / name).read_text()))
    assert (hf.size.shortest_edge, hf.size.longest_edge) == (min_pixels, max_pixels)


def test_clip_spellings_agree() -> None:
    legacy = load_config(FIXTURES / "clip_legacy.json")
    current = load_config(FIXTURES / "clip_llava.json")
    assert isinstance(legacy, ClipConfig) and isinstance(current, ClipConfig)
    # "size": 336 is a shortest edge (CLIP's default_to_square=False); "crop_size": 336 a square.
    assert dict(legacy.size) == dict(current.size) == {"shortest_edge": 336}
    assert legacy.crop_size == current.crop_size == (336, 336)
    assert legacy.image_processor_type == "CLIPImageProcessor"  # from feature_extractor_type
    hf = CLIPImageProcessorPil.from_dict(json.loads((FIXTURES / "clip_legacy.json").read_text()))
    assert dict(hf.size) == {"shortest_edge": 336}
    assert dict(hf.crop_size) == {"height": 336, "width": 336}


def test_directory_with_processor_config(tmp_path: Path) -> None:
    (tmp_path / "preprocessor_config.json").write_text((FIXTURES / "clip_llava.json").read_text())
    (tmp_path / "processor_config.json").write_text(
        json.dumps({"patch_size": 14, "num_additional_image_tokens": 0, "processor_class": "X"})
    )
    config = load_config(tmp_path)
    assert isinstance(config, ClipConfig)
    # No CLS token added, and "default" still drops one: 24 * 24 - 1.
    assert config.num_image_tokens(336, 336) == 575


def test_directory_falls_back_to_model_type(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "llama4.json").read_text())
    del data["image_processor_type"]
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(data))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama4"}))
    config = load_config(tmp_path)
    assert isinstance(config, Llama4Config)
    assert config.image_processor_type == "Llama4ImageProcessor"


def test_nested_image_processor_in_processor_config(tmp_path: Path) -> None:
    nested = {"image_processor": json.loads((FIXTURES / "qwen3_vl_size.json").read_text())}
    (tmp_path / "processor_config.json").write_text(json.dumps(nested))
    config = load_config(tmp_path)
    assert isinstance(config, QwenVLConfig) and config.patch_size == 16


def test_a_local_folder_named_like_a_builtin_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """transformers reads a local folder before the hub, and ``--local-dir`` downloads lay
    checkpoints out under their ids: the folder's settings win over the built-in's."""
    model_id = "Qwen/Qwen2-VL-7B-Instruct"
    folder = tmp_path / model_id
    folder.mkdir(parents=True)
    settings = {**builtin_dict(model_id), "max_pixels": 50_000}
    (folder / "preprocessor_config.json").write_text(json.dumps(settings))
    monkeypatch.chdir(tmp_path)
    image = np.zeros((480, 640, 3), np.uint8)
    got = mmfast.ImageProcessor.from_pretrained(model_id)(image)
    assert got["image_grid_thw"].tolist() == [[1, 12, 18]]
    assert load_config(model_id).model_id is None  # read from the folder, not the built-in


def test_nested_image_processor_wins_over_preprocessor_config(tmp_path: Path) -> None:
    """transformers reads processor_config.json's image_processor block first, even beside a
    preprocessor_config.json (an older save) whose settings differ; its video processor reads
    that file (transformers: the same video size, 3136 to 50176 pixels)."""
    import transformers

    qwen = builtin_dict("Qwen/Qwen2-VL-7B-Instruct")
    legacy = {**qwen, "max_pixels": 28 * 28 * 64, "min_pixels": 28 * 28 * 4}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(legacy))
    (tmp_path / "processor_config.json").write_text(json.dumps({"image_processor": qwen}))
    hf = transformers.AutoImageProcessor.from_pretrained(tmp_path, backend="pil")
    image = np.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=np.uint8)
    want = hf(image, return_tensors="np")
    got = mmfast.ImageProcessor.from_pretrained(tmp_path)(image)
    assert got["image_grid_thw"].tolist() == want["image_grid_thw"].tolist() == [[1, 34, 46]]
    np.testing.assert_array_equal(got.pixel_values, want["pixel_values"])
    # AutoVideoProcessor falls back to preprocessor_config.json, not to the nested image block.
    assert load_video_config(tmp_path).max_pixels == 28 * 28 * 64
    # A null block is no block: preprocessor_config.json is read (the image settings too).
    (tmp_path / "processor_config.json").write_text(json.dumps({"image_processor": None}))
    assert cast(QwenVLConfig, load_config(tmp_path)).max_pixels == 28 * 28 * 64
    (tmp_path / "processor_config.json").write_text(json.dumps({"image_processor": [1]}))
    with pytest.raises(MmfastError, match=r"processor_config\.json: image_processor: expected an"):
        load_config(tmp_path)


@pytest.mark.parametrize(
    ("type_name", "family"),
    [
        ("Qwen2VLImageProcessor", QwenVLConfig),
        ("Qwen2VLImageProcessorFast", QwenVLConfig),
        ("Qwen2VLImageProcessorPil", QwenVLConfig),
        ("CLIPImageProcessor", ClipConfig),
        ("CLIPImageProcessorFast", ClipConfig),
        ("CLIPImageProcessorPil", ClipConfig),
        ("Llama4ImageProcessor", Llama4Config),
        ("Llama4ImageProcessorFast", Llama4Config),
    ],
)
def test_selection_by_type(tmp_path: Path, type_name: str, family: type) -> None:
    path = tmp_path / "preprocessor_config.json"
    path.write_text(json.dumps({"image_processor_type": type_name}))
    config = load_config(path)
    assert isinstance(config, family)
    assert config.image_processor_type == type_name


def test_overrides_follow_hf_precedence() -> None:
    config = load_config(QWEN_IDS[0], max_pixels=200704)
    assert isinstance(config, QwenVLConfig) and config.max_pixels == 200704
    # As in from_pretrained: the checkpoint's max_pixels still beats an overriding size dict.
    config = load_config(QWEN_IDS[0], size={"shortest_edge": 100, "longest_edge": 200})
    assert isinstance(config, QwenVLConfig)
    assert (config.min_pixels, config.max_pixels) == (3136, 12845056)
    hf = Qwen2VLImageProcessorPil.from_dict(
        builtin_dict(QWEN_IDS[0]), size={"shortest_edge": 100, "longest_edge": 200}
    )
    assert (hf.size.shortest_edge, hf.size.longest_edge) == (3136, 12845056)
    # On Qwen3-VL, whose checkpoint spells size, the override does win.
    config = load_config(QWEN_IDS[2], size={"shortest_edge": 100, "longest_edge": 200})
    assert isinstance(config, QwenVLConfig)
    assert (config.min_pixels, config.max_pixels) == (100, 200)
    # None restores the class default, as HF treats None kwargs.
    config = load_config(QWEN_IDS[2], image_mean=None, do_normalize=False)
    assert isinstance(config, QwenVLConfig)
    assert config.image_mean == models.OPENAI_CLIP_MEAN
    plan = config.plan(64, 64)
    assert (plan.image_mean, plan.image_std, plan.do_normalize) == ((0, 0, 0), (1, 1, 1), False)


def test_disabled_steps_are_identities() -> None:
    plan = load_config(LLAVA_ID, do_rescale=False, do_normalize=False).plan(10, 10)
    assert (plan.rescale_factor, plan.image_mean, plan.image_std) == (1.0, (0, 0, 0), (1, 1, 1))
    llama = load_config(LLAMA4_ID)
    assert llama.plan(10, 10).compute_dtype == "bfloat16"
    assert load_config(LLAMA4_ID, do_normalize=False).plan(10, 10).compute_dtype == "float32"


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


def write(tmp_path: Path, content: str) -> Path:
    path = tmp_path / "preprocessor_config.json"
    path.write_text(content)
    return path


def test_unknown_model_lists_supported() -> None:
    with pytest.raises(UnsupportedModelError, match="Qwen/Qwen2-VL-7B-Instruct"):
        load_config("someone/unknown-model")


def test_unknown_processor_type_lists_supported(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps({"image_processor_type": "DonutImageProcessor"}))
    with pytest.raises(UnsupportedModelError, match="DonutImageProcessor") as info:
        load_config(path)
    for name in ("CLIPImageProcessor", "Llama4ImageProcessor", "Qwen2VLImageProcessor"):
        assert name in str(info.value)


def test_unknown_model_type(tmp_path: Path) -> None:
    write(tmp_path, "{}")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(UnsupportedModelError, match="bert"):
        load_config(tmp_path)


def test_missing_preprocessor_config(tmp_path: Path) -> None:
    with pytest.raises(MmfastError, match=re.escape("preprocessor_config.json")):
        load_config(tmp_path)


@pytest.mark.parametrize(("content", "match"), [("{not json", "JSON"), ("[1, 2]", "JSON object")])
def test_bad_json(tmp_path: Path, content: str, match: str) -> None:
    with pytest.raises(MmfastError, match=match):
        load_config(write(tmp_path, content))


@pytest.mark.parametrize(
    ("model_id", "overrides", "field"),
    [
        (QWEN_IDS[0], {"do_resize": "yes"}, "do_resize"),
        (QWEN_IDS[0], {"patch_size": 0}, "patch_size"),
        (QWEN_IDS[0], {"min_pixels": -5}, "min_pixels"),
        (QWEN_IDS[2], {"size": {"shortest_edge": -1, "longest_edge": 10}}, "size.shortest_edge"),
        (QWEN_IDS[2], {"size": {"shortest_edge": 3136}}, "size"),
        (QWEN_IDS[2], {"size": 512}, "size"),
        (QWEN_IDS[2], {"size": {"bogus": 1}}, "size"),
        (QWEN_IDS[0], {"image_std": [0.5, 0.0, 0.5]}, "image_std"),
        (QWEN_IDS[0], {"image_mean": [0.5, 0.5]}, "image_mean"),
        (QWEN_IDS[0], {"image_mean": "grey"}, "image_mean"),
        (QWEN_IDS[0], {"rescale_factor": "1/255"}, "rescale_factor"),
        (QWEN_IDS[0], {"resample": 9}, "resample"),
        (LLAVA_ID, {"size": {"longest_edge": 10}}, "size"),
        (LLAVA_ID, {"crop_size": {"shortest_edge": 10}}, "crop_size"),
        (LLAVA_ID, {"crop_size": -3}, "crop_size.height"),
        (LLAVA_ID, {"do_pad": True}, "do_pad"),
        (LLAVA_ID, {"vision_feature_select_strategy": 3}, "vision_feature_select_strategy"),
        (LLAMA4_ID, {"size": {"height": 336, "width": 224}}, "size"),
        (LLAMA4_ID, {"do_resize": False}, "do_resize"),
        (LLAMA4_ID, {"max_patches": 0}, "max_patches"),
        (LLAMA4_ID, {"pixel_shuffle_ratio": 2}, "pixel_shuffle_ratio"),
        (LLAMA4_ID, {"bogus_option": 1}, "bogus_option"),
    ],
)
def test_malformed_values_name_the_field(
    model_id: str, overrides: dict[str, Any], field: str
) -> None:
    with pytest.raises(MmfastError, match=re.escape(field)) as info:
        load_config(model_id, **overrides)
    assert not isinstance(info.value, UnsupportedModelError)


def test_malformed_file_names_the_field(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "qwen2_vl_pixels.json").read_text())
    data["max_pixels"] = "lots"
    with pytest.raises(MmfastError, match="max_pixels"):
        load_config(write(tmp_path, json.dumps(data)))


def test_bad_image_sizes() -> None:
    config = load_config(QWEN_IDS[0])
    with pytest.raises(MmfastError, match="height"):
        config.plan(0, 10)
    with pytest.raises(MmfastError, match="aspect ratio"):
        config.plan(1, 201)
    with pytest.raises(MmfastError, match="resizes to"):
        load_config(LLAVA_ID, size={"max_height": 1, "max_width": 1}).plan(1, 5)


@pytest.mark.parametrize(
    ("model_type", "preprocessor", "processor", "tokens"),
    [
        # LlavaProcessor's count: 24 x 24 patches of the 336 crop, the CLS feature dropped.
        ("vipllava", {"size": {"shortest_edge": 336}, "crop_size": 336}, {}, 576),
        # Florence2Processor: the image processor's image_seq_length.
        ("florence2", {"size": {"height": 768, "width": 768}, "image_seq_length": 577}, {}, 577),
        ("florence2", {"image_seq_length": 99}, {}, 99),
        # Kosmos2Processor.num_image_tokens (64), or the processor file's.
        ("kosmos-2", {"use_square_size": True}, {}, 64),
        ("kosmos-2", {}, {"num_image_tokens": 32}, 32),
        ("git", {}, {}, 0),  # GitProcessor inserts no image token
    ],
)
def test_clip_model_types_count_their_processors_tokens(
    tmp_path: Path,
    model_type: str,
    preprocessor: dict[str, Any],
    processor: dict[str, Any],
    tokens: int,
) -> None:
    """The model types AutoImageProcessor gives CLIPImageProcessor count the image tokens of
    their own processors."""
    write(tmp_path, json.dumps(preprocessor))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    (tmp_path / "processor_config.json").write_text(json.dumps(processor))
    proc = mmfast.ImageProcessor.from_pretrained(tmp_path)
    assert proc.config.image_processor_type == "CLIPImageProcessor"
    assert proc.num_image_tokens(400, 500) == tokens
