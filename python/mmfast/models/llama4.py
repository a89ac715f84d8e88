"""Llama 4: ``Llama4ImageProcessor`` (transformers 5.24; torchvision only).

An image is fitted without distortion into the best canvas of square tiles, resized with
torchvision's antialiased bilinear kernel, padded with zeros and cut into tiles, followed by a
global tile (the whole image squashed to one tile) when there are several. HF computes the
normalisation in bfloat16.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from mmfast.models import registry
from mmfast.models.base import (
    BILINEAR,
    BOX,
    HALF,
    HAMMING,
    RGB,
    TORCH_RESAMPLE,
    ImagePlan,
    ModelConfig,
    Resize,
    TileGrid,
    View,
    bfloat16_bits,
    bfloat16_values,
    check_image_size,
    frozen,
    fused_tables,
    plan_constants,
    table_key,
)
from mmfast.models.config import MAX_TILES, Fields, Source
from mmfast.models.geometry import CropBox

__all__ = [
    "Llama4Config",
    "bfloat16_tables",
    "find_supported_resolutions",
    "get_best_fit",
    "get_factors",
    "get_llama4_resize_size",
    "get_max_res_without_distortion",
]


def get_factors(dividend: int) -> set[int]:
    """All divisors of ``dividend``. Mirrors ``image_processing_llama4.get_factors``."""
    factors: set[int] = set()
    for i in range(1, int(dividend**0.5) + 1):
        if dividend % i == 0:
            factors.add(i)
            factors.add(dividend // i)
    return factors


@functools.lru_cache(maxsize=64)
def find_supported_resolutions(max_num_chunks: int, tile_size: int) -> tuple[tuple[int, int], ...]:
    """Every canvas (height, width) made of at most ``max_num_chunks`` square tiles.

    Mirrors ``image_processing_llama4.find_supported_resolutions``, including its order: tile
    grids are grouped by aspect ratio in first-seen order while counting chunks down from
    ``max_num_chunks``. The order matters because :func:`get_best_fit` breaks ties between
    equal-area canvases by taking the first. Made once per (count, size): every call's plan
    reads it.
    """
    by_ratio: defaultdict[float, list[tuple[int, int]]] = defaultdict(list)
    for chunk_size in range(max_num_chunks, 0, -1):
        for factor in sorted(get_factors(chunk_size)):
            rows, cols = factor, chunk_size // factor
            by_ratio[rows / cols].append((rows, cols))
    return tuple(
        (rows * tile_size, cols * tile_size) for grids in by_ratio.values() for rows, cols in grids
    )


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


@dataclass(frozen=True)
class Llama4Config(ModelConfig):
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

    # Which transformers backend the plan matches: "pil" or "torchvision".
    backend: str = field(default="pil", kw_only=True)

    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_values": "images", "aspect_ratios": "rows"}
    )

    def tokens_per_tile(self) -> int:
        """``<|patch|>`` tokens per tile: ``Llama4Processor.replace_image_token``'s
        ``(tile // patch_size) ** 2 // round(1 / pixel_shuffle_ratio ** 2)`` (144 for Scout)."""
        downsample_ratio = round(1.0 / (self.pixel_shuffle_ratio**2))
        per_side = self.tile_size // self.patch_size
        return per_side * per_side // downsample_ratio

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Llama4ImageProcessor._preprocess`` for one image."""
        check_image_size(height, width)
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
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=True,
            resize_size=resized,
            resample=self.resample,
            crop=None,
            canvas_size=canvas,
            **plan_constants(self),
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
            views=self._views(resized, tiles),
        )

    def _views(self, resized: tuple[int, int], tiles: TileGrid) -> tuple[View, ...]:
        """The resized image cut into the canvas's tiles (zeros past it), then the global tile:
        the original image squashed to one tile."""
        th, tw = tiles.tile_size
        windows = tuple(
            CropBox(row * th, col * tw, th, tw)
            for row in range(tiles.tiles_h)
            for col in range(tiles.tiles_w)
        )
        views = [View(resize=Resize(resized, self.resample, "torch"), out=windows)]
        if tiles.global_tile:
            views.append(
                View(
                    resize=Resize((th, tw), self.resample, "torch"),
                    out=(CropBox(0, 0, th, tw),),
                )
            )
        return tuple(views)

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """bfloat16 bit patterns (uint16) of HF's bfloat16 arithmetic when it rescales and
        normalises; otherwise its torchvision backend's float32 rescale, or the uint8 pixels."""
        if plan.compute_dtype == "bfloat16":
            return bfloat16_tables(plan)
        return fused_tables(plan)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``aspect_ratios``: (B, 2) int64 tile rows and columns."""
        ratios = [(p.tiles.tiles_h, p.tiles.tiles_w) for p in plans if p.tiles]
        return {"aspect_ratios": np.array(ratios, np.int64).reshape(-1, 2)}

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


def bfloat16_tables(plan: ImagePlan) -> NDArray[np.uint16]:
    """(3, 256) bfloat16 bit patterns: Llama 4's normalisation of every uint8, per channel.

    HF's Llama 4 processor converts the uint8 image to bfloat16, multiplies by the
    rescale factor, then subtracts the mean and divides by the std, each a float32
    operation rounded to bfloat16 (torch's CPU kernels for bfloat16 tensors and a
    Python scalar). Verified bit-exact against HF's outputs on every shared image.
    Read-only, and made once per (mean, std, rescale factor): building it on every call
    took about a fifth of a 640x480 image's call.
    """
    return _bfloat16_tables(*table_key(plan))


@functools.lru_cache(maxsize=64)
def _bfloat16_tables(
    means: tuple[float, ...], stds: tuple[float, ...], rescale_factor: float
) -> NDArray[np.uint16]:
    x = np.arange(256, dtype=np.float32)  # exact: every uint8 is a bfloat16

    def bf16(value: Any) -> NDArray[np.float32]:
        return bfloat16_values(bfloat16_bits(np.asarray(value, np.float32)))

    rows = []
    for mean, std in zip(means, stds, strict=True):
        y = bf16(x * np.float32(rescale_factor))
        y = bf16(y - bf16(mean))
        y = bf16(y / bf16(std))
        rows.append(bfloat16_bits(y))
    return frozen(np.stack(rows))


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Llama4Config:
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
    norm = cfg.normalization(HALF, HALF)
    if norm.do_normalize and not norm.do_rescale:
        # Llama4ImageProcessor.rescale_and_normalize hands the uint8 image to torchvision's
        # normalize, which raises TypeError.
        raise cfg.error("do_rescale", "true when do_normalize is (HF fails on uint8)", False)
    resample = cfg.resample(BILINEAR)
    if resample in (BOX, HAMMING):
        raise cfg.error("resample", TORCH_RESAMPLE, resample)
    shuffle = processor.number("pixel_shuffle_ratio", 0.5)
    if not 0 < shuffle <= 1:
        raise processor.error("pixel_shuffle_ratio", "a number in (0, 1]", shuffle)
    return Llama4Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        tile_size=size["height"],
        resample=resample,
        **norm.fields(),
        max_patches=cfg.positive_int("max_patches", 16, MAX_TILES),
        resize_to_max_canvas=cfg.flag("resize_to_max_canvas", False),
        # Llama4Processor.__init__ defaults, which the Scout checkpoint keeps.
        patch_size=processor.positive_int("patch_size", 14),
        pixel_shuffle_ratio=shuffle,
    )


registry.register(
    registry.Family(
        name="llama4",
        processor_types=("Llama4ImageProcessor",),
        model_types={"llama4": "Llama4ImageProcessor"},
        build=_build,
        kwargs=frozenset({"max_patches", "resize_to_max_canvas"}),
        processor_kwargs=frozenset({"patch_size", "pixel_shuffle_ratio"}),
        hf_torchvision="llama4.image_processing_llama4.Llama4ImageProcessor",
    )
)

# meta-llama/Llama-4-Scout-17B-16E-Instruct: max_patches 16, resize_to_max_canvas false
# and the 336 tile are confirmed by a deployment tool's bundled copy of the checkpoint
# config (image_processor_config, vision_config.image_size 336, patch_size 14,
# pixel_shuffle_ratio 0.5). The remaining keys (type name, resample 2, mean/std 0.5)
# were not found verbatim; they equal Llama4ImageProcessor's class defaults, so the
# result would not change if the file omitted them.
registry.register_builtin(
    "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "llama4",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "image_processor_type": "Llama4ImageProcessorFast",
        "max_patches": 16,
        "processor_class": "Llama4Processor",
        "resample": BILINEAR,
        "rescale_factor": 0.00392156862745098,
        "resize_to_max_canvas": False,
        "size": {"height": 336, "width": 336},
    },
    {"patch_size": 14, "pixel_shuffle_ratio": 0.5},
)
