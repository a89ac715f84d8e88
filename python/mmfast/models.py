"""Model configs, processor selection and per-image geometry.

Python decides *what* happens to an image; the Rust core does the pixels. This module reads a
checkpoint's ``preprocessor_config.json`` the way transformers 5.24 does, picks the image
processor, and turns one image size into an :class:`ImagePlan`: resize target and filter, crop
or canvas, rescale/normalise constants, patch or tile layout, output shapes and the number of
placeholder tokens the model's processor inserts.

Supported processors (transformers 5.24 class names):

* ``Qwen2VLImageProcessor`` (also ``...Fast``/``...Pil``): Qwen2-VL, Qwen2.5-VL and Qwen3-VL, whose
  checkpoints all name this processor.
* ``Llama4ImageProcessor`` (also ``...Fast``): Llama 4.
* ``CLIPImageProcessor`` (also ``...Fast``/``...Pil``): LLaVA-1.5.

Each geometry function names the transformers function it mirrors. Only the stdlib, numpy and
:mod:`mmfast.errors` are imported, so this works without transformers or torch.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, TypeAlias

import numpy as np

from mmfast.errors import MmfastError, UnsupportedModelError

__all__ = [
    "BICUBIC",
    "BILINEAR",
    "ClipConfig",
    "CropBox",
    "ImagePlan",
    "Llama4Config",
    "ModelConfig",
    "PatchGrid",
    "QwenVLConfig",
    "TileGrid",
    "center_crop_box",
    "find_supported_resolutions",
    "get_best_fit",
    "get_factors",
    "get_image_size_for_max_height_width",
    "get_llama4_resize_size",
    "get_max_res_without_distortion",
    "get_resize_output_image_size",
    "get_size_with_aspect_ratio",
    "load_config",
    "smart_resize",
    "supported_models",
]

RGB: TypeAlias = tuple[float, float, float]
JsonDict: TypeAlias = dict[str, Any]

# PIL.Image.Resampling codes, as stored in the "resample" field of preprocessor configs.
NEAREST: Final = 0
LANCZOS: Final = 1
BILINEAR: Final = 2
BICUBIC: Final = 3
BOX: Final = 4
HAMMING: Final = 5
_RESAMPLE_CODES: Final = frozenset({NEAREST, LANCZOS, BILINEAR, BICUBIC, BOX, HAMMING})

# transformers.image_utils.OPENAI_CLIP_MEAN / OPENAI_CLIP_STD: the class defaults of the Qwen2-VL
# and CLIP processors.
OPENAI_CLIP_MEAN: Final[RGB] = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD: Final[RGB] = (0.26862954, 0.26130258, 0.27577711)
_HALF: Final[RGB] = (0.5, 0.5, 0.5)
# BaseImageProcessor.rescale_factor; the configs store it as 0.00392156862745098, the same double.
_DEFAULT_RESCALE: Final = 1 / 255


# --------------------------------------------------------------------------------------------
# Geometry: Qwen2-VL
# --------------------------------------------------------------------------------------------


def smart_resize(
    height: int,
    width: int,
    factor: int = 28,
    min_pixels: int = 56 * 56,
    max_pixels: int = 14 * 14 * 4 * 1280,
) -> tuple[int, int]:
    """Size a Qwen-VL image is resized to: sides divisible by ``factor``, area within bounds.

    Mirrors ``transformers.models.qwen2_vl.image_processing_qwen2_vl.smart_resize`` step for
    step, because the float rounding is part of the result: ``round()`` (banker's rounding) for
    the nearest multiple, then ``math.floor`` of ``side / beta`` when above ``max_pixels`` or
    ``math.ceil`` of ``side * beta`` when below ``min_pixels``. HF's ``ValueError`` for an
    aspect ratio over 200 is raised as :class:`MmfastError`, as is a zero side (a
    ``ZeroDivisionError`` in HF).
    """
    if height <= 0 or width <= 0:
        raise MmfastError(f"image size: expected positive height and width, got {height}x{width}")
    if max(height, width) / min(height, width) > 200:
        raise MmfastError(
            "image size: absolute aspect ratio must be smaller than 200, got "
            f"{max(height, width) / min(height, width)} for {height}x{width}"
        )
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


# --------------------------------------------------------------------------------------------
# Geometry: CLIP (PilBackend.resize and image_transforms.center_crop)
# --------------------------------------------------------------------------------------------


def get_resize_output_image_size(height: int, width: int, shortest_edge: int) -> tuple[int, int]:
    """Shortest side to ``shortest_edge``, the other side scaled and truncated with ``int()``.

    Mirrors ``transformers.image_transforms.get_resize_output_image_size`` with an int size,
    ``default_to_square=False`` and no ``max_size``: the call ``PilBackend.resize`` makes for a
    ``{"shortest_edge": n}`` size dict. A square image takes the width-is-short branch, as in HF.
    """
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = shortest_edge, int(shortest_edge * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def get_size_with_aspect_ratio(
    height: int, width: int, size: int, max_size: int | None = None
) -> tuple[int, int]:
    """Shortest side to ``size`` unless the longest would pass ``max_size``.

    Mirrors ``transformers.image_transforms.get_size_with_aspect_ratio``, used by
    ``PilBackend.resize`` for ``{"shortest_edge", "longest_edge"}`` size dicts; keeps its
    ``int(round(...))`` of the capped size and ``int()`` truncation of the other side.
    """
    raw_size = None
    if max_size is not None:
        min_original_size = float(min(height, width))
        max_original_size = float(max(height, width))
        if max_original_size / min_original_size * size > max_size:
            raw_size = max_size * min_original_size / max_original_size
            size = round(raw_size)

    if (height <= width and height == size) or (width <= height and width == size):
        return height, width
    if width < height:
        ow = size
        oh = int((raw_size if raw_size is not None else size) * height / width)
    else:
        oh = size
        ow = int((raw_size if raw_size is not None else size) * width / height)
    return oh, ow


def get_image_size_for_max_height_width(
    height: int, width: int, max_height: int, max_width: int
) -> tuple[int, int]:
    """Largest aspect-preserving size inside ``max_height`` x ``max_width`` (may upscale).

    Mirrors ``transformers.image_utils.get_image_size_for_max_height_width``.
    """
    min_scale = min(max_height / height, max_width / width)
    return int(height * min_scale), int(width * min_scale)


@dataclass(frozen=True)
class CropBox:
    """A crop window in the coordinates of the (resized) image it is cut from.

    ``top``/``left`` may be negative and the window may reach past the image: HF's numpy
    ``center_crop`` then zero-pads, so output pixel ``(y, x)`` is image pixel
    ``(top + y, left + x)`` when that lies inside the image and 0 (before rescaling) otherwise.
    """

    top: int
    left: int
    height: int
    width: int

    @property
    def bottom(self) -> int:
        """Exclusive bottom row."""
        return self.top + self.height

    @property
    def right(self) -> int:
        """Exclusive right column."""
        return self.left + self.width


def center_crop_box(height: int, width: int, crop_height: int, crop_width: int) -> CropBox:
    """The window ``transformers.image_transforms.center_crop`` cuts from a height x width image.

    HF takes ``top = (height - crop_height) // 2`` (floor division, so an odd excess leaves the
    extra row at the bottom). When the crop is larger than the image it pastes the image at
    ``ceil((crop - side) / 2)`` into a zero canvas and slices from 0: the same window, expressed
    here in image coordinates with a negative offset (``-ceil(x / 2) == floor(-x / 2)``).
    """
    return CropBox(
        top=(height - crop_height) // 2,
        left=(width - crop_width) // 2,
        height=crop_height,
        width=crop_width,
    )


# --------------------------------------------------------------------------------------------
# Geometry: Llama 4 (transformers.models.llama4.image_processing_llama4)
# --------------------------------------------------------------------------------------------


def get_factors(dividend: int) -> set[int]:
    """All divisors of ``dividend``. Mirrors ``image_processing_llama4.get_factors``."""
    factors: set[int] = set()
    for i in range(1, int(dividend**0.5) + 1):
        if dividend % i == 0:
            factors.add(i)
            factors.add(dividend // i)
    return factors


def find_supported_resolutions(max_num_chunks: int, tile_size: int) -> list[tuple[int, int]]:
    """Every canvas (height, width) made of at most ``max_num_chunks`` square tiles.

    Mirrors ``image_processing_llama4.find_supported_resolutions``, including its order: tile
    grids are grouped by aspect ratio in first-seen order while counting chunks down from
    ``max_num_chunks``. The order matters because :func:`get_best_fit` breaks ties between
    equal-area canvases by taking the first.
    """
    by_ratio: defaultdict[float, list[tuple[int, int]]] = defaultdict(list)
    for chunk_size in range(max_num_chunks, 0, -1):
        for factor in sorted(get_factors(chunk_size)):
            rows, cols = factor, chunk_size // factor
            by_ratio[rows / cols].append((rows, cols))
    return [
        (rows * tile_size, cols * tile_size) for grids in by_ratio.values() for rows, cols in grids
    ]


def get_best_fit(
    image_size: tuple[int, int],
    possible_resolutions: Sequence[tuple[int, int]],
    resize_to_max_canvas: bool = False,
) -> tuple[int, int]:
    """The canvas an image is fitted into without distortion.

    Mirrors ``image_processing_llama4.get_best_fit``: each canvas's scale is the limiting
    side's; take the smallest upscale >= 1 (the largest with ``resize_to_max_canvas``), else
    the mildest downscale; among canvases with that scale take the smallest area, first on ties.
    HF does this on torch tensors, where ``int64 / int`` is a float32 division, so the scales
    here are float32 too: ties and the ``>= 1`` test then agree bit for bit.
    """
    original_height, original_width = image_size
    resolutions = np.asarray(possible_resolutions, dtype=np.int64)
    scale_h = resolutions[:, 0].astype(np.float32) / np.float32(original_height)
    scale_w = resolutions[:, 1].astype(np.float32) / np.float32(original_width)
    scales = np.where(scale_h > scale_w, scale_w, scale_h)

    upscaling_options = scales[scales >= 1]
    if upscaling_options.size > 0:
        selected = upscaling_options.max() if resize_to_max_canvas else upscaling_options.min()
    else:
        selected = scales[scales < 1].max()

    chosen = resolutions[scales == selected]
    best = chosen[np.argmin(chosen[:, 0] * chosen[:, 1])] if len(chosen) > 1 else chosen[0]
    return int(best[0]), int(best[1])


def _divide(numerator: int, denominator: int, in_float32: bool) -> float | np.float32:
    if in_float32:
        return np.float32(numerator) / np.float32(denominator)
    return numerator / denominator


def _times(side: int, scale: float | np.float32) -> float:
    if isinstance(scale, np.float32):
        return float(np.float32(side) * scale)
    return side * scale


def _less(a: float | np.float32, b: float | np.float32) -> bool:
    # torch compares a float32 tensor with a Python float in float32.
    if isinstance(a, np.float32) or isinstance(b, np.float32):
        return bool(np.float32(a) < np.float32(b))
    return a < b


def get_max_res_without_distortion(
    image_size: tuple[int, int],
    target_size: tuple[int, int],
    float32_target: tuple[bool, bool] = (False, False),
) -> tuple[int, int]:
    """Largest aspect-preserving (height, width) inside ``target_size``.

    Mirrors ``image_processing_llama4.get_max_res_without_distortion``. In HF a target side
    is either a Python int or an element of the torch canvas tensor, and in the latter case
    ``target / original`` and ``original * scale`` are float32 operations whose rounding can
    move the ``math.floor`` by one. ``float32_target`` says, per (height, width), which sides
    were tensor elements; :func:`get_llama4_resize_size` works that out.
    """
    original_height, original_width = image_size
    target_height, target_width = target_size
    scale_w = _divide(target_width, original_width, float32_target[1])
    scale_h = _divide(target_height, original_height, float32_target[0])
    if _less(scale_w, scale_h):
        new_width = target_width
        new_height = min(math.floor(_times(original_height, scale_w)), target_height)
    else:
        new_height = target_height
        new_width = min(math.floor(_times(original_width, scale_h)), target_width)
    return new_height, new_width


def get_llama4_resize_size(
    image_size: tuple[int, int],
    canvas: tuple[int, int],
    tile_size: int,
    resize_to_max_canvas: bool,
) -> tuple[int, int]:
    """The size an image is resized to before being padded to ``canvas``.

    Mirrors the body of ``Llama4ImageProcessor._preprocess``: unless ``resize_to_max_canvas``,
    each side may grow only up to ``max(side, tile_size)`` (so small images are upscaled to one
    tile at most, larger ones never), capped by the canvas; then the largest undistorted fit,
    with each side at least 1. HF writes the cap as ``min(python_int, canvas_tensor_element)``,
    which yields the tensor element only when it is strictly smaller; that choice decides which
    arithmetic below is float32.
    """
    if resize_to_max_canvas:
        target, float32_target = canvas, (True, True)
    else:
        capped = []
        for side, canvas_side in zip(image_size, canvas, strict=True):
            allowed = max(side, tile_size)
            capped.append((canvas_side, True) if canvas_side < allowed else (allowed, False))
        target = (capped[0][0], capped[1][0])
        float32_target = (capped[0][1], capped[1][1])
    new_height, new_width = get_max_res_without_distortion(image_size, target, float32_target)
    return max(new_height, 1), max(new_width, 1)


# --------------------------------------------------------------------------------------------
# Plans
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PatchGrid:
    """Qwen-VL patchify parameters (``Qwen2VLImageProcessorPil.patchify``).

    A still image is one temporal patch (``grid_t == 1``): HF repeats the frame
    ``temporal_patch_size`` times inside each patch row.
    """

    patch_size: int
    temporal_patch_size: int
    merge_size: int
    grid_t: int
    grid_h: int
    grid_w: int

    @property
    def num_patches(self) -> int:
        """Rows of ``pixel_values`` for this image."""
        return self.grid_t * self.grid_h * self.grid_w


@dataclass(frozen=True)
class TileGrid:
    """Llama 4 tiling (``Llama4ImageProcessor._preprocess`` and ``Llama4Processor``).

    The padded canvas is cut into ``tiles_h`` x ``tiles_w`` tiles in row-major order. With more
    than one tile, a global tile follows: the *original* image resized straight to
    ``tile_size`` (distorting, same filter, no padding). ``tokens_per_tile`` is the number of
    ``<|patch|>`` tokens each tile (and the global view) stands for in the prompt.
    """

    tiles_h: int
    tiles_w: int
    tile_size: tuple[int, int]
    global_tile: bool
    tokens_per_tile: int

    @property
    def num_tiles(self) -> int:
        """Tiles in ``pixel_values`` for this image, global tile included."""
        return self.tiles_h * self.tiles_w + int(self.global_tile)


@dataclass(frozen=True)
class ImagePlan:
    """Everything the pixel engine does to one image, in HF's order.

    1. Convert to RGB if ``do_convert_rgb``.
    2. If ``do_resize``, resize to ``resize_size`` (height, width) with PIL filter ``resample``;
       otherwise ``resize_size`` is the input size.
    3. CLIP: cut ``crop`` (zero outside the image). Llama 4: paste at the top-left of a zero
       ``canvas_size`` canvas.
    4. ``x * rescale_factor`` then ``(x - image_mean) / image_std`` per channel, in
       ``compute_dtype``. A disabled step is expressed as factor 1.0 / mean 0 / std 1, and
       its flag is False so the engine may skip it.
    5. Qwen: patchify per ``patches``. Llama 4: split per ``tiles``.

    ``output_shapes`` gives the per-image shape of each output key (HF concatenates Qwen
    patches and stacks the rest along a leading batch axis). ``num_image_tokens`` is the number
    of tokens the model's processor puts in the prompt for this image.
    """

    height: int
    width: int
    do_convert_rgb: bool
    do_resize: bool
    resize_size: tuple[int, int]
    resample: int
    crop: CropBox | None
    canvas_size: tuple[int, int] | None
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    compute_dtype: str
    patches: PatchGrid | None
    tiles: TileGrid | None
    output_shapes: Mapping[str, tuple[int, ...]]
    num_image_tokens: int


def _check_image_size(height: int, width: int) -> None:
    for name, side in (("height", height), ("width", width)):
        if not isinstance(side, int) or isinstance(side, bool) or side <= 0:
            raise MmfastError(f"image {name}: expected a positive int, got {side!r}")


@dataclass(frozen=True)
class _Normalization:
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB

    def effective(self) -> tuple[float, RGB, RGB]:
        """(factor, mean, std) with disabled steps turned into identities."""
        factor = self.rescale_factor if self.do_rescale else 1.0
        if self.do_normalize:
            return factor, self.image_mean, self.image_std
        return factor, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)


# --------------------------------------------------------------------------------------------
# Configs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QwenVLConfig:
    """Settings of ``Qwen2VLImageProcessor``, used by Qwen2-VL, Qwen2.5-VL and Qwen3-VL.

    ``min_pixels``/``max_pixels`` are HF's resolved ``size["shortest_edge"]`` and
    ``size["longest_edge"]`` (pixel-area bounds despite the names); None only when the config
    leaves them out and ``do_resize`` is off.
    """

    model_id: str | None
    model_type: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    min_pixels: int | None
    max_pixels: int | None
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    patch_size: int
    temporal_patch_size: int
    merge_size: int

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Qwen2VLImageProcessorPil._preprocess`` for one image."""
        _check_image_size(height, width)
        factor = self.patch_size * self.merge_size
        if self.do_resize:
            assert self.min_pixels is not None and self.max_pixels is not None  # load_config
            resized = smart_resize(height, width, factor, self.min_pixels, self.max_pixels)
        else:
            # HF's patchify reshape only succeeds on sides divisible by patch * merge.
            if height % factor or width % factor:
                raise MmfastError(
                    f"image size: with do_resize=False both sides must be multiples of "
                    f"patch_size * merge_size = {factor}, got {height}x{width}"
                )
            resized = (height, width)
        grid = PatchGrid(
            patch_size=self.patch_size,
            temporal_patch_size=self.temporal_patch_size,
            merge_size=self.merge_size,
            grid_t=1,
            grid_h=resized[0] // self.patch_size,
            grid_w=resized[1] // self.patch_size,
        )
        norm = _Normalization(
            self.do_rescale, self.rescale_factor, self.do_normalize, self.image_mean, self.image_std
        )
        factor_, mean, std = norm.effective()
        patch_dim = 3 * self.temporal_patch_size * self.patch_size**2
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=resized,
            resample=self.resample,
            crop=None,
            canvas_size=None,
            do_rescale=self.do_rescale,
            rescale_factor=factor_,
            do_normalize=self.do_normalize,
            image_mean=mean,
            image_std=std,
            compute_dtype="float32",
            patches=grid,
            tiles=None,
            output_shapes=MappingProxyType(
                {"pixel_values": (grid.num_patches, patch_dim), "image_grid_thw": (3,)}
            ),
            # Qwen2VLProcessor.replace_image_token: image_grid_thw.prod() // merge_size**2
            num_image_tokens=grid.num_patches // self.merge_size**2,
        )

    def num_image_tokens(self, height: int, width: int) -> int:
        """``<|image_pad|>`` tokens Qwen2VLProcessor / Qwen3VLProcessor insert for the image."""
        return self.plan(height, width).num_image_tokens


@dataclass(frozen=True)
class ClipConfig:
    """Settings of ``CLIPImageProcessor`` as LLaVA-1.5 uses it, plus the LlavaProcessor values.

    ``size`` is HF's resolved size dict (one of ``{"shortest_edge"}``,
    ``{"shortest_edge", "longest_edge"}``, ``{"max_height", "max_width"}``,
    ``{"height", "width"}``); ``crop_size`` is (height, width). ``patch_size``,
    ``num_additional_image_tokens`` and ``vision_feature_select_strategy`` come from
    ``processor_config.json`` and only matter for the token count.
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    size: Mapping[str, int]
    resample: int
    do_center_crop: bool
    crop_size: tuple[int, int]
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    patch_size: int
    num_additional_image_tokens: int
    vision_feature_select_strategy: str | None

    def resize_size(self, height: int, width: int) -> tuple[int, int]:
        """Target size; mirrors the size-dict dispatch in ``PilBackend.resize``."""
        size = self.size
        if size.get("shortest_edge") and size.get("longest_edge"):
            out = get_size_with_aspect_ratio(
                height, width, size["shortest_edge"], size["longest_edge"]
            )
        elif size.get("shortest_edge"):
            out = get_resize_output_image_size(height, width, size["shortest_edge"])
        elif size.get("max_height") and size.get("max_width"):
            out = get_image_size_for_max_height_width(
                height, width, size["max_height"], size["max_width"]
            )
        else:  # {"height", "width"}: load_config rejects every other key set.
            out = (size["height"], size["width"])
        if min(out) < 1:
            raise MmfastError(
                f"image size: {height}x{width} resizes to {out[0]}x{out[1]} under size={dict(size)}"
            )
        return out

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``PilBackend._preprocess``: resize, centre crop, rescale, normalise."""
        _check_image_size(height, width)
        resized = self.resize_size(height, width) if self.do_resize else (height, width)
        crop = center_crop_box(*resized, *self.crop_size) if self.do_center_crop else None
        out_h, out_w = (crop.height, crop.width) if crop is not None else resized
        norm = _Normalization(
            self.do_rescale, self.rescale_factor, self.do_normalize, self.image_mean, self.image_std
        )
        factor, mean, std = norm.effective()
        # LlavaProcessor.replace_image_token counts on the processed pixel_values' size.
        tokens = (out_h // self.patch_size) * (out_w // self.patch_size)
        tokens += self.num_additional_image_tokens
        if self.vision_feature_select_strategy == "default":
            tokens -= 1  # the CLS feature is dropped
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=resized,
            resample=self.resample,
            crop=crop,
            canvas_size=None,
            do_rescale=self.do_rescale,
            rescale_factor=factor,
            do_normalize=self.do_normalize,
            image_mean=mean,
            image_std=std,
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType({"pixel_values": (3, out_h, out_w)}),
            num_image_tokens=tokens,
        )

    def num_image_tokens(self, height: int, width: int) -> int:
        """``<image>`` tokens LlavaProcessor inserts for the image (576 for LLaVA-1.5)."""
        return self.plan(height, width).num_image_tokens


@dataclass(frozen=True)
class Llama4Config:
    """Settings of ``Llama4ImageProcessor`` plus the two ``Llama4Processor`` values that count
    tokens (``patch_size`` of the vision encoder and ``pixel_shuffle_ratio``)."""

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    tile_size: int
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    max_patches: int
    resize_to_max_canvas: bool
    patch_size: int
    pixel_shuffle_ratio: float

    def tokens_per_tile(self) -> int:
        """``<|patch|>`` tokens per tile: ``Llama4Processor.replace_image_token``'s
        ``(tile // patch_size) ** 2 // round(1 / pixel_shuffle_ratio ** 2)`` (144 for Scout)."""
        downsample_ratio = round(1.0 / (self.pixel_shuffle_ratio**2))
        per_side = self.tile_size // self.patch_size
        return per_side * per_side // downsample_ratio

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Llama4ImageProcessor._preprocess`` for one image."""
        _check_image_size(height, width)
        resolutions = find_supported_resolutions(self.max_patches, self.tile_size)
        canvas = get_best_fit((height, width), resolutions, self.resize_to_max_canvas)
        resized = get_llama4_resize_size(
            (height, width), canvas, self.tile_size, self.resize_to_max_canvas
        )
        tiles_h, tiles_w = canvas[0] // self.tile_size, canvas[1] // self.tile_size
        tiles = TileGrid(
            tiles_h=tiles_h,
            tiles_w=tiles_w,
            tile_size=(self.tile_size, self.tile_size),
            global_tile=tiles_h * tiles_w > 1,
            tokens_per_tile=self.tokens_per_tile(),
        )
        norm = _Normalization(
            self.do_rescale, self.rescale_factor, self.do_normalize, self.image_mean, self.image_std
        )
        factor, mean, std = norm.effective()
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=True,
            resize_size=resized,
            resample=self.resample,
            crop=None,
            canvas_size=canvas,
            do_rescale=self.do_rescale,
            rescale_factor=factor,
            do_normalize=self.do_normalize,
            image_mean=mean,
            image_std=std,
            # Llama4ImageProcessor.rescale_and_normalize casts to bfloat16 when doing both.
            compute_dtype="bfloat16" if self.do_rescale and self.do_normalize else "float32",
            patches=None,
            tiles=tiles,
            output_shapes=MappingProxyType(
                {
                    "pixel_values": (tiles.num_tiles, 3, self.tile_size, self.tile_size),
                    "aspect_ratios": (2,),
                }
            ),
            num_image_tokens=self._count_tokens(tiles),
        )

    @staticmethod
    def _count_tokens(tiles: TileGrid) -> int:
        """Length in tokens of ``Llama4Processor._prompt_split_image``'s string.

        ``<|image_start|>``; then, with more than one tile, for each tile row: per tile
        ``tokens_per_tile`` ``<|patch|>`` tokens, ``<|tile_x_separator|>`` between tiles and a
        ``<|tile_y_separator|>`` closing the row; then ``<|image|>``, ``tokens_per_tile``
        ``<|patch|>`` tokens for the global view and ``<|image_end|>``. One tile gives
        1 + 1 + 144 + 1 = 147 tokens for Scout; a 2x2 grid adds 2 * 2 * (144 + 1) = 580.
        """
        count = 1 + 1 + tiles.tokens_per_tile + 1
        if tiles.tiles_h * tiles.tiles_w > 1:
            # per row: tiles_w patch runs, tiles_w - 1 x-separators and one y-separator
            count += tiles.tiles_h * tiles.tiles_w * (tiles.tokens_per_tile + 1)
        return count

    def num_image_tokens(self, height: int, width: int) -> int:
        """All tokens Llama4Processor inserts for the image, special tokens included."""
        return self.plan(height, width).num_image_tokens


ModelConfig: TypeAlias = QwenVLConfig | ClipConfig | Llama4Config


# --------------------------------------------------------------------------------------------
# Built-in checkpoints
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Builtin:
    model_type: str
    preprocessor: Mapping[str, Any]
    processor: Mapping[str, Any]


# Each dict is the checkpoint's preprocessor_config.json (processor_config.json for
# `processor`). No network here: the values were read from public copies found with a code
# search; each comment says where.
# Qwen2-VL-7B and Qwen2.5-VL-7B ship the same image-processor settings.
_QWEN2_VL_PREPROCESSOR: Final[Mapping[str, Any]] = MappingProxyType(
    {
        "min_pixels": 3136,
        "max_pixels": 12845056,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_std": list(OPENAI_CLIP_STD),
        "image_processor_type": "Qwen2VLImageProcessor",
    }
)

_BUILTINS: Final[Mapping[str, _Builtin]] = MappingProxyType(
    {
        # Qwen/Qwen2-VL-7B-Instruct: identical copies in a README that quotes the checkpoint's
        # file (RealQA, with only the pixel bounds edited) and in the Valley processor source
        # (`qwen2vl_processor_config`), both giving min_pixels 3136 and max_pixels 12845056.
        "Qwen/Qwen2-VL-7B-Instruct": _Builtin(
            model_type="qwen2_vl",
            preprocessor={**_QWEN2_VL_PREPROCESSOR, "processor_class": "Qwen2VLProcessor"},
            processor={},
        ),
        # Qwen/Qwen2.5-VL-7B-Instruct: a Rust crate's test fixture "trimmed from
        # Qwen/Qwen2.5-VL-7B-Instruct"; the trimming left every processor key.
        "Qwen/Qwen2.5-VL-7B-Instruct": _Builtin(
            model_type="qwen2_5_vl",
            preprocessor={**_QWEN2_VL_PREPROCESSOR, "processor_class": "Qwen2_5_VLProcessor"},
            processor={},
        ),
        # Qwen/Qwen3-VL-8B-Instruct: the same crate's fixture "trimmed from
        # Qwen/Qwen3-VL-8B-Instruct (a fast-processor dump: pixel bounds under `size`)"; size,
        # patch 16 and mean/std 0.5 agree with several other projects' copies. Keys that are
        # null or inert for images (data_format, device, ...) are left out.
        "Qwen/Qwen3-VL-8B-Instruct": _Builtin(
            model_type="qwen3_vl",
            preprocessor={
                "size": {"longest_edge": 16777216, "shortest_edge": 65536},
                "patch_size": 16,
                "temporal_patch_size": 2,
                "merge_size": 2,
                "image_mean": list(_HALF),
                "image_std": list(_HALF),
                "do_resize": True,
                "do_rescale": True,
                "do_normalize": True,
                "do_convert_rgb": True,
                "resample": BICUBIC,
                "rescale_factor": 0.00392156862745098,
                "default_to_square": True,
                "processor_class": "Qwen3VLProcessor",
                "image_processor_type": "Qwen2VLImageProcessorFast",
            },
            processor={},
        ),
        # meta-llama/Llama-4-Scout-17B-16E-Instruct: max_patches 16, resize_to_max_canvas false
        # and the 336 tile are confirmed by a deployment tool's bundled copy of the checkpoint
        # config (image_processor_config, vision_config.image_size 336, patch_size 14,
        # pixel_shuffle_ratio 0.5). The remaining keys (type name, resample 2, mean/std 0.5)
        # were not found verbatim; they equal Llama4ImageProcessor's class defaults, so the
        # result would not change if the file omitted them.
        "meta-llama/Llama-4-Scout-17B-16E-Instruct": _Builtin(
            model_type="llama4",
            preprocessor={
                "do_convert_rgb": True,
                "do_normalize": True,
                "do_rescale": True,
                "do_resize": True,
                "image_mean": list(_HALF),
                "image_std": list(_HALF),
                "image_processor_type": "Llama4ImageProcessorFast",
                "max_patches": 16,
                "processor_class": "Llama4Processor",
                "resample": BILINEAR,
                "rescale_factor": 0.00392156862745098,
                "resize_to_max_canvas": False,
                "size": {"height": 336, "width": 336},
            },
            processor={"patch_size": 14, "pixel_shuffle_ratio": 0.5},
        ),
        # llava-hf/llava-1.5-7b-hf: the printed CLIPImageProcessor of a llava-hf conversion
        # (bczhou/tiny-llava-v1-hf, same CLIP-ViT-L/14-336 tower) gives these values; the
        # processor_config.json values (patch 14, one extra CLS token dropped by the "default"
        # strategy) give LLaVA-1.5's documented 576 image tokens.
        "llava-hf/llava-1.5-7b-hf": _Builtin(
            model_type="llava",
            preprocessor={
                "crop_size": {"height": 336, "width": 336},
                "do_center_crop": True,
                "do_convert_rgb": True,
                "do_normalize": True,
                "do_rescale": True,
                "do_resize": True,
                "image_mean": list(OPENAI_CLIP_MEAN),
                "image_processor_type": "CLIPImageProcessor",
                "image_std": list(OPENAI_CLIP_STD),
                "processor_class": "LlavaProcessor",
                "resample": BICUBIC,
                "rescale_factor": 0.00392156862745098,
                "size": {"shortest_edge": 336},
            },
            processor={
                "patch_size": 14,
                "num_additional_image_tokens": 1,
                "vision_feature_select_strategy": "default",
            },
        ),
    }
)


def supported_models() -> list[str]:
    """The built-in model ids :func:`load_config` accepts without a local file."""
    return list(_BUILTINS)


# --------------------------------------------------------------------------------------------
# Reading configs
# --------------------------------------------------------------------------------------------

_FAMILY_QWEN: Final = "qwen"
_FAMILY_CLIP: Final = "clip"
_FAMILY_LLAMA4: Final = "llama4"

# Base class names; "Fast" (transformers 4.x torchvision classes) and "Pil" (5.x PIL classes)
# spellings name the same processor, as AutoImageProcessor resolves them.
_PROCESSOR_FAMILIES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "Qwen2VLImageProcessor": _FAMILY_QWEN,
        "CLIPImageProcessor": _FAMILY_CLIP,
        "Llama4ImageProcessor": _FAMILY_LLAMA4,
    }
)
_SUPPORTED_TYPES: Final = (
    "Qwen2VLImageProcessor, CLIPImageProcessor, Llama4ImageProcessor (each also spelled with a "
    "Fast or Pil suffix)"
)
# AutoImageProcessor's model_type fallback, for configs without image_processor_type. "llava"
# is not here: HF maps it to LlavaImageProcessor (pad-to-square), which mmfast does not do.
_MODEL_TYPE_FAMILIES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "qwen2_vl": _FAMILY_QWEN,
        "qwen2_5_vl": _FAMILY_QWEN,
        "qwen3_vl": _FAMILY_QWEN,
        "llama4": _FAMILY_LLAMA4,
        "clip": _FAMILY_CLIP,
    }
)
_QWEN_PROCESSOR_MODEL_TYPES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "Qwen2VLProcessor": "qwen2_vl",
        "Qwen2_5_VLProcessor": "qwen2_5_vl",
        "Qwen3VLProcessor": "qwen3_vl",
    }
)

# transformers.processing_utils.ImagesKwargs: what every image processor accepts.
_IMAGES_KWARGS: Final = frozenset(
    {
        "do_convert_rgb",
        "do_resize",
        "size",
        "default_to_square",
        "crop_size",
        "resample",
        "do_rescale",
        "rescale_factor",
        "do_normalize",
        "image_mean",
        "image_std",
        "do_pad",
        "pad_size",
        "do_center_crop",
        "data_format",
        "input_data_format",
        "device",
        "return_tensors",
        "disable_grouping",
        "image_seq_length",
    }
)
# Per family: the processor's extra valid kwargs, and the processor-level (processor_config.json)
# keys that only affect the token count.
_EXTRA_KWARGS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        _FAMILY_QWEN: frozenset(
            {"min_pixels", "max_pixels", "patch_size", "temporal_patch_size", "merge_size"}
        ),
        _FAMILY_CLIP: frozenset({"use_square_size"}),
        _FAMILY_LLAMA4: frozenset({"max_patches", "resize_to_max_canvas"}),
    }
)
_PROCESSOR_KWARGS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        _FAMILY_QWEN: frozenset(),
        _FAMILY_CLIP: frozenset(
            {"patch_size", "num_additional_image_tokens", "vision_feature_select_strategy"}
        ),
        _FAMILY_LLAMA4: frozenset({"patch_size", "pixel_shuffle_ratio"}),
    }
)

# image_processing_utils.VALID_SIZE_DICT_KEYS
_VALID_SIZE_KEYS: Final = (
    frozenset({"height", "width"}),
    frozenset({"shortest_edge"}),
    frozenset({"shortest_edge", "longest_edge"}),
    frozenset({"longest_edge"}),
    frozenset({"max_height", "max_width"}),
    frozenset({"min_pixels", "max_pixels"}),
)


@dataclass(frozen=True)
class _Source:
    origin: str
    model_id: str | None
    model_type: str | None
    preprocessor: JsonDict
    processor: JsonDict


def _read_json(path: Path) -> JsonDict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MmfastError(f"{path}: cannot read JSON config: {exc}") from exc
    if not isinstance(data, dict):
        raise MmfastError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _read_source(name_or_path: str | os.PathLike[str]) -> _Source:
    key = os.fspath(name_or_path)
    builtin = _BUILTINS.get(key)
    if builtin is not None:
        return _Source(
            origin=key,
            model_id=key,
            model_type=builtin.model_type,
            preprocessor=copy.deepcopy(dict(builtin.preprocessor)),
            processor=copy.deepcopy(dict(builtin.processor)),
        )
    path = Path(key)
    if path.is_file():
        return _Source(str(path), None, None, _read_json(path), {})
    if path.is_dir():
        processor = {}
        if (path / "processor_config.json").is_file():
            processor = _read_json(path / "processor_config.json")
        if (path / "preprocessor_config.json").is_file():
            preprocessor = _read_json(path / "preprocessor_config.json")
        elif isinstance(processor.get("image_processor"), dict):
            # transformers 5 may save the image processor nested in processor_config.json.
            preprocessor = processor["image_processor"]
        else:
            raise MmfastError(f"{path}: no preprocessor_config.json in this directory")
        model_type = None
        if (path / "config.json").is_file():
            model_type = _read_json(path / "config.json").get("model_type")
        return _Source(str(path), None, model_type, preprocessor, processor)
    raise UnsupportedModelError(
        f"model {key!r} is neither a built-in id nor an existing directory or JSON file; "
        f"built-in ids: {', '.join(_BUILTINS)}"
    )


def _select_family(source: _Source) -> tuple[str, str]:
    """(family, image_processor_type), as AutoImageProcessor picks the class."""
    processor_type = source.preprocessor.get("image_processor_type")
    if processor_type is None:
        # AutoImageProcessor's fallback for configs written by feature extractors.
        extractor = source.preprocessor.get("feature_extractor_type")
        if isinstance(extractor, str):
            processor_type = extractor.replace("FeatureExtractor", "ImageProcessor")
    if processor_type is not None:
        if not isinstance(processor_type, str):
            raise MmfastError(
                f"{source.origin}: image_processor_type: expected a string, got {processor_type!r}"
            )
        base = processor_type.removesuffix("Fast").removesuffix("Pil")
        family = _PROCESSOR_FAMILIES.get(base)
        if family is None:
            raise UnsupportedModelError(
                f"{source.origin}: image_processor_type {processor_type!r} is not supported; "
                f"supported: {_SUPPORTED_TYPES}"
            )
        return family, processor_type
    family = _MODEL_TYPE_FAMILIES.get(source.model_type or "")
    if family is None:
        raise UnsupportedModelError(
            f"{source.origin}: no image_processor_type and model_type {source.model_type!r} "
            f"has no supported processor; supported processors: {_SUPPORTED_TYPES}; model types: "
            f"{', '.join(_MODEL_TYPE_FAMILIES)}"
        )
    default_type = {
        _FAMILY_QWEN: "Qwen2VLImageProcessor",
        _FAMILY_CLIP: "CLIPImageProcessor",
        _FAMILY_LLAMA4: "Llama4ImageProcessor",
    }[family]
    return family, default_type


def _is_finite_number(value: object) -> bool:
    # JSON true/false parse as bool, a subclass of int; a config meaning 1 would say 1.
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class _Fields:
    """Reads processor kwargs with HF's rule that a missing or null value means the class
    default, and names the offending field in every error."""

    def __init__(self, origin: str, values: Mapping[str, Any]) -> None:
        self._origin = origin
        self._values = values

    def error(self, name: str, expected: str, got: object) -> MmfastError:
        return MmfastError(f"{self._origin}: {name}: expected {expected}, got {got!r}")

    def raw(self, name: str) -> Any:
        return self._values.get(name)

    def flag(self, name: str, default: bool) -> bool:
        value = self._values.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(name, "true or false", value)
        return value

    def positive_int(self, name: str, default: int) -> int:
        value = self._values.get(name)
        if value is None:
            return default
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise self.error(name, "a positive integer", value)
        return value

    def number(self, name: str, default: float) -> float:
        value = self._values.get(name)
        if value is None:
            return default
        if not _is_finite_number(value):
            raise self.error(name, "a finite number", value)
        return float(value)

    def rgb(self, name: str, default: RGB, nonzero: bool = False) -> RGB:
        """A per-channel value; a single number applies to all three channels, as in HF."""
        value = self._values.get(name)
        if value is None:
            return default
        items = [value] * 3 if _is_finite_number(value) else value
        if not isinstance(items, list | tuple) or len(items) != 3:
            raise self.error(name, "a number or a list of 3 numbers (one per RGB channel)", value)
        for item in items:
            if not _is_finite_number(item):
                raise self.error(name, "finite numbers", value)
            if nonzero and item == 0:
                raise self.error(name, "non-zero values (normalisation divides by them)", value)
        return (float(items[0]), float(items[1]), float(items[2]))

    def resample(self, default: int) -> int:
        value = self._values.get("resample")
        if value is None:
            return default
        if not isinstance(value, int) or isinstance(value, bool) or value not in _RESAMPLE_CODES:
            raise self.error("resample", "a PIL resampling code 0-5", value)
        return value

    def size_dict(self, name: str, value: object, default_to_square: bool) -> dict[str, int]:
        """Mirrors ``image_processing_utils.get_size_dict``: an int is a square or a shortest
        edge (per ``default_to_square``), a pair is (height, width), a dict is checked against
        the valid key sets."""
        if isinstance(value, int) and not isinstance(value, bool):
            size = (
                {"height": value, "width": value} if default_to_square else {"shortest_edge": value}
            )
        elif isinstance(value, list | tuple) and len(value) == 2:
            size = {"height": value[0], "width": value[1]}
        elif isinstance(value, dict):
            size = dict(value)
        else:
            raise self.error(name, "an int, a [height, width] pair or a size dict", value)
        if frozenset(size) not in _VALID_SIZE_KEYS:
            valid = " or ".join("{" + ", ".join(sorted(keys)) + "}" for keys in _VALID_SIZE_KEYS)
            raise self.error(name, f"a size dict with keys {valid}", value)
        for key, item in size.items():
            if not isinstance(item, int) or isinstance(item, bool) or item <= 0:
                raise self.error(f"{name}.{key}", "a positive integer", item)
        return size

    def normalization(self, mean: RGB, std: RGB) -> _Normalization:
        return _Normalization(
            do_rescale=self.flag("do_rescale", True),
            rescale_factor=self.number("rescale_factor", _DEFAULT_RESCALE),
            do_normalize=self.flag("do_normalize", True),
            image_mean=self.rgb("image_mean", mean),
            image_std=self.rgb("image_std", std, nonzero=True),
        )


def _qwen_config(source: _Source, processor_type: str, cfg: _Fields) -> QwenVLConfig:
    """Mirrors ``Qwen2VLImageProcessorPil.__init__``: ``min_pixels``/``max_pixels`` override
    ``size["shortest_edge"]``/``size["longest_edge"]`` when both spellings are present."""
    size_value = cfg.raw("size")
    if size_value is None:
        size_value = {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 1280}
    if not isinstance(size_value, dict):
        # HF writes the pixel bounds into `size` as a dict before validating it.
        raise cfg.error("size", "a size dict such as {shortest_edge, longest_edge}", size_value)
    size = dict(size_value)
    for legacy, key in (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge")):
        if cfg.raw(legacy) is not None:
            size[key] = cfg.positive_int(legacy, 0)
            size.pop(legacy, None)
    size = cfg.size_dict("size", size, cfg.flag("default_to_square", False))
    do_resize = cfg.flag("do_resize", True)
    if do_resize and not ("shortest_edge" in size and "longest_edge" in size):
        raise cfg.error(
            "size", "shortest_edge and longest_edge (or min_pixels and max_pixels)", size
        )
    norm = cfg.normalization(OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)
    processor_class = source.preprocessor.get("processor_class")
    model_type = source.model_type or _QWEN_PROCESSOR_MODEL_TYPES.get(
        processor_class if isinstance(processor_class, str) else ""
    )
    return QwenVLConfig(
        model_id=source.model_id,
        model_type=model_type,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.flag("do_convert_rgb", True),
        do_resize=do_resize,
        min_pixels=size.get("shortest_edge"),
        max_pixels=size.get("longest_edge"),
        resample=cfg.resample(BICUBIC),
        do_rescale=norm.do_rescale,
        rescale_factor=norm.rescale_factor,
        do_normalize=norm.do_normalize,
        image_mean=norm.image_mean,
        image_std=norm.image_std,
        patch_size=cfg.positive_int("patch_size", 14),
        temporal_patch_size=cfg.positive_int("temporal_patch_size", 2),
        merge_size=cfg.positive_int("merge_size", 2),
    )


def _clip_config(
    source: _Source, processor_type: str, cfg: _Fields, processor: _Fields
) -> ClipConfig:
    """Mirrors ``CLIPImageProcessorPil.__init__`` and ``BaseImageProcessor._standardize_kwargs``."""
    default_to_square = cfg.flag("default_to_square", False)
    size_value = cfg.raw("size")
    if cfg.raw("use_square_size"):
        # CLIPImageProcessor's KOSMOS-2 compatibility: a square of the class default edge.
        size_value = {"height": 224, "width": 224}
    size = cfg.size_dict("size", 224 if size_value is None else size_value, default_to_square)
    do_resize = cfg.flag("do_resize", True)
    if do_resize and not (
        "shortest_edge" in size
        or {"max_height", "max_width"} <= size.keys()
        or {"height", "width"} <= size.keys()
    ):
        raise cfg.error("size", "shortest_edge, max_height/max_width or height/width", size)
    crop_value = cfg.raw("crop_size")
    # get_size_dict's default_to_square=True: an int crop_size is a square.
    crop = cfg.size_dict("crop_size", 224 if crop_value is None else crop_value, True)
    do_center_crop = cfg.flag("do_center_crop", True)
    if do_center_crop and not {"height", "width"} <= crop.keys():
        raise cfg.error("crop_size", "height and width", crop)
    if cfg.flag("do_pad", False):
        raise cfg.error("do_pad", "false (batch padding is not supported)", True)
    strategy = processor.raw("vision_feature_select_strategy")
    if strategy is not None and not isinstance(strategy, str):
        raise processor.error("vision_feature_select_strategy", "a string", strategy)
    extra_tokens = processor.raw("num_additional_image_tokens")
    if extra_tokens is not None and (
        not isinstance(extra_tokens, int) or isinstance(extra_tokens, bool) or extra_tokens < 0
    ):
        raise processor.error("num_additional_image_tokens", "a non-negative integer", extra_tokens)
    norm = cfg.normalization(OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)
    return ClipConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.flag("do_convert_rgb", True),
        do_resize=do_resize,
        size=MappingProxyType(size),
        resample=cfg.resample(BICUBIC),
        do_center_crop=do_center_crop,
        crop_size=(crop.get("height", 0), crop.get("width", 0)),
        do_rescale=norm.do_rescale,
        rescale_factor=norm.rescale_factor,
        do_normalize=norm.do_normalize,
        image_mean=norm.image_mean,
        image_std=norm.image_std,
        # Without processor_config.json, LLaVA-1.5's values: the family mmfast serves here.
        patch_size=processor.positive_int("patch_size", 14),
        num_additional_image_tokens=1 if extra_tokens is None else extra_tokens,
        vision_feature_select_strategy="default" if strategy is None else strategy,
    )


def _llama4_config(
    source: _Source, processor_type: str, cfg: _Fields, processor: _Fields
) -> Llama4Config:
    """Mirrors ``Llama4ImageProcessor``'s class defaults and the checks in its ``_preprocess``
    and ``find_supported_resolutions`` (square tiles, ``do_resize`` on)."""
    size_value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"height": 336, "width": 336} if size_value is None else size_value,
        cfg.flag("default_to_square", True),
    )
    if size.keys() != {"height", "width"} or size["height"] != size["width"]:
        raise cfg.error("size", "a square {height, width} tile size", size)
    if not cfg.flag("do_resize", True):
        raise cfg.error("do_resize", "true (Llama 4 always resizes to a tile canvas)", False)
    norm = cfg.normalization(_HALF, _HALF)
    shuffle = processor.number("pixel_shuffle_ratio", 0.5)
    if not 0 < shuffle <= 1:
        raise processor.error("pixel_shuffle_ratio", "a number in (0, 1]", shuffle)
    return Llama4Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.flag("do_convert_rgb", True),
        tile_size=size["height"],
        resample=cfg.resample(BILINEAR),
        do_rescale=norm.do_rescale,
        rescale_factor=norm.rescale_factor,
        do_normalize=norm.do_normalize,
        image_mean=norm.image_mean,
        image_std=norm.image_std,
        max_patches=cfg.positive_int("max_patches", 16),
        resize_to_max_canvas=cfg.flag("resize_to_max_canvas", False),
        # Llama4Processor.__init__ defaults, which the Scout checkpoint keeps.
        patch_size=processor.positive_int("patch_size", 14),
        pixel_shuffle_ratio=shuffle,
    )


def load_config(name_or_path: str | os.PathLike[str], **overrides: Any) -> ModelConfig:
    """Load a model's image-processing config.

    ``name_or_path`` is a built-in id (see :func:`supported_models`), a directory holding
    ``preprocessor_config.json`` (plus, optionally, ``processor_config.json`` for the token
    count and ``config.json`` for ``model_type``), or a path to such a JSON file.

    ``overrides`` behave like keyword arguments to HF's ``from_pretrained``: they replace the
    config's keys before the processor is built, so the processor's own precedence still holds
    (for Qwen, a ``min_pixels``/``max_pixels`` in the config or overrides beats ``size``), and
    None means "class default". Processor-level keys (``patch_size`` for LLaVA / Llama 4,
    ``pixel_shuffle_ratio``, ``num_additional_image_tokens``, ``vision_feature_select_strategy``)
    go to the processor config. An unknown override key raises :class:`MmfastError`.

    Raises :class:`UnsupportedModelError` for an unknown model or processor type and
    :class:`MmfastError`, naming the field, for a malformed config.
    """
    source = _read_source(name_or_path)
    family, processor_type = _select_family(source)
    preprocessor = dict(source.preprocessor)
    processor = dict(source.processor)
    for key, value in overrides.items():
        if key in _PROCESSOR_KWARGS[family]:
            processor[key] = value
        elif key in _IMAGES_KWARGS or key in _EXTRA_KWARGS[family]:
            preprocessor[key] = value
        else:
            valid = sorted(_IMAGES_KWARGS | _EXTRA_KWARGS[family] | _PROCESSOR_KWARGS[family])
            raise MmfastError(
                f"override {key!r} is not a {processor_type} argument; valid: {', '.join(valid)}"
            )
    cfg = _Fields(source.origin, preprocessor)
    processor_fields = _Fields(f"{source.origin} (processor)", processor)
    if family == _FAMILY_QWEN:
        return _qwen_config(source, processor_type, cfg)
    if family == _FAMILY_CLIP:
        return _clip_config(source, processor_type, cfg, processor_fields)
    return _llama4_config(source, processor_type, cfg, processor_fields)
