"""LFM2-VL: ``Lfm2VlImageProcessor`` (transformers 5.24; torchvision only).

A small image is resized by LFM2's :func:`smart_resize` (sides multiples of
``encoder_patch_size * downsample_factor``, between ``min_image_tokens`` and
``max_image_tokens`` tokens). A large one is resized to a grid of ``tile_size`` tiles chosen by
aspect ratio (``min_tiles`` to ``max_tiles`` of them), cut row by row, and followed by a
thumbnail: the image resized by :func:`smart_resize`. Each crop is normalised (mean/std 0.5)
and cut into channel-last patch rows (y, x, c), zero-padded to ``max_num_patches`` rows, with
``pixel_attention_mask`` and ``spatial_shapes`` per crop. ``Lfm2VlProcessor`` always asks for
``image_rows``, ``image_cols`` and ``image_sizes``. The class has no ``do_convert_rgb``
default: it converts nothing unless the config asks. (LFM3-VL names the Qwen2-VL processor.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BILINEAR,
    BOX,
    HALF,
    HAMMING,
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
    RGB,
    TORCH_RESAMPLE,
    HwcPatches,
    ImagePlan,
    ModelConfig,
    Resize,
    TileGrid,
    View,
    check_image_size,
    fused_tables,
    identity_table,
    plan_constants,
)
from mmfast.models.config import Fields, Source
from mmfast.models.geometry import CropBox
from mmfast.models.siglip2 import hwc_rows

__all__ = ["Lfm2VlConfig", "find_closest_aspect_ratio", "smart_resize", "target_ratios"]


def round_by_factor(number: float, factor: int) -> int:
    """``image_processing_lfm2_vl.round_by_factor``: ``round()`` (banker's) of the ratio."""
    return round(number / factor) * factor


def smart_resize(
    height: int,
    width: int,
    downsample_factor: int,
    min_image_tokens: int,
    max_image_tokens: int,
    encoder_patch_size: int,
) -> tuple[int, int]:
    """Mirrors ``Lfm2VlImageProcessor.smart_resize`` (and returns, as it does, (width,
    height)): sides rounded to multiples of ``encoder_patch_size * downsample_factor`` (at
    least one), then scaled down (``floor``) or up (``ceil``) into the token bounds."""
    total_factor = encoder_patch_size * downsample_factor
    min_pixels = min_image_tokens * encoder_patch_size**2 * downsample_factor**2
    max_pixels = max_image_tokens * encoder_patch_size**2 * downsample_factor**2
    h_bar = max(total_factor, round_by_factor(height, total_factor))
    w_bar = max(total_factor, round_by_factor(width, total_factor))
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(total_factor, math.floor(height / beta / total_factor) * total_factor)
        w_bar = max(total_factor, math.floor(width / beta / total_factor) * total_factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / total_factor) * total_factor
        w_bar = math.ceil(width * beta / total_factor) * total_factor
    return w_bar, h_bar


def is_image_too_large(
    height: int,
    width: int,
    max_image_tokens: int,
    encoder_patch_size: int,
    downsample_factor: int,
    max_pixels_tolerance: float,
) -> bool:
    """Mirrors ``Lfm2VlImageProcessor._is_image_too_large`` (its floor is one patch, not one
    merge unit)."""
    total_factor = encoder_patch_size * downsample_factor
    h_bar = max(encoder_patch_size, round_by_factor(height, total_factor))
    w_bar = max(encoder_patch_size, round_by_factor(width, total_factor))
    limit = max_image_tokens * encoder_patch_size**2 * downsample_factor**2 * max_pixels_tolerance
    return h_bar * w_bar > limit


def target_ratios(min_tiles: int, max_tiles: int) -> list[tuple[int, int]]:
    """Mirrors ``Lfm2VlImageProcessor._target_ratios``: every (w, h) grid with ``min_tiles`` to
    ``max_tiles`` tiles, sorted by tile count; grids of one count keep the iteration order of
    the ``set`` HF builds (tuples of small ints hash the same in every CPython run)."""
    ratios = [
        (w, h)
        for n in range(min_tiles, max_tiles + 1)
        for w in range(1, n + 1)
        for h in range(1, n + 1)
        if min_tiles <= w * h <= max_tiles
    ]
    return sorted(set(ratios), key=lambda x: x[0] * x[1])


def find_closest_aspect_ratio(
    aspect_ratio: float,
    ratios: list[tuple[int, int]],
    width: int,
    height: int,
    image_size: int,
) -> tuple[int, int]:
    """Mirrors ``image_processing_lfm2_vl.find_closest_aspect_ratio``: the nearest (w, h)
    ratio; on a tie, a later grid wins when the image covers over half its area."""
    best_ratio_diff = float("inf")
    best_ratio = (1, 1)
    area = width * height
    for ratio in ratios:
        target_aspect_ratio = ratio[0] / ratio[1]
        ratio_diff = abs(aspect_ratio - target_aspect_ratio)
        if ratio_diff < best_ratio_diff:
            best_ratio_diff = ratio_diff
            best_ratio = ratio
        elif ratio_diff == best_ratio_diff:
            target_area = image_size * image_size * ratio[0] * ratio[1]
            if area > 0.5 * target_area:
                best_ratio = ratio
    return best_ratio


@dataclass(frozen=True)
class Lfm2VlConfig(ModelConfig):
    """Settings of ``Lfm2VlImageProcessor`` (after ``Lfm2VlProcessor``'s call kwargs) and the
    processor's ``use_image_special_tokens``.

    transformers has only a torchvision class for it, which both backend names match. A plan's
    ``tiles`` is the tile grid (None when the image is not split) and its ``resize_size`` the
    :func:`smart_resize` size (the thumbnail's, and ``image_sizes``).

    ``num_image_tokens`` counts the tokens ``Lfm2VlProcessor`` puts in place of the image's
    ``<image>``: ``ceil(tile / patch / downsample)**2`` ``<image>`` tokens per tile and
    ``ceil((h // patch) / downsample) * ceil((w // patch) / downsample)`` for the thumbnail
    (or the single image), and with special tokens (the default) ``<|image_start|>``, a
    ``<|img_row_r_col_c|>`` before each tile, ``<|img_thumbnail|>`` before the thumbnail and
    ``<|image_end|>``, each one token.
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    downsample_factor: int
    do_image_splitting: bool
    min_tiles: int
    max_tiles: int
    use_thumbnail: bool
    min_image_tokens: int
    max_image_tokens: int
    encoder_patch_size: int
    tile_size: int
    max_pixels_tolerance: float
    do_pad: bool
    return_row_col_info: bool
    use_image_special_tokens: bool

    # Which transformers backend the plan matches: "pil" or "torchvision" (the same here).
    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "concat"
    channels_last: ClassVar[bool] = True
    counted_outputs: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_attention_mask": "pixel_values", "spatial_shapes": "pixel_values"}
    )
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"image_rows": "ints", "image_cols": "ints", "image_sizes": "lists"}
    )

    @property
    def max_num_patches(self) -> int:
        """The rows each crop is padded to: ``max(max_image_tokens * downsample_factor**2,
        (tile_size // encoder_patch_size)**2)``, the tile term only when splitting."""
        tile = (self.tile_size // self.encoder_patch_size) ** 2 if self.do_image_splitting else 0
        return max(self.max_image_tokens * self.downsample_factor**2, tile)

    def resize(self, source: tuple[int, int], size: tuple[int, int]) -> Resize:
        """``TorchvisionBackend.resize`` (antialiased). It has no box or hamming filter:
        torch refuses them when the size changes."""
        if self.resample in (BOX, HAMMING) and source != size:
            raise MmfastError(f"resample: expected {TORCH_RESAMPLE}, got {self.resample}")
        return Resize(size, self.resample, "torch")

    def crop_grids(self, plan: ImagePlan) -> list[tuple[int, int]]:
        """Each crop's patch grid (rows, columns): the tiles, then the thumbnail."""
        p = self.encoder_patch_size
        thumb = (plan.resize_size[0] // p, plan.resize_size[1] // p)
        if plan.tiles is None:
            return [thumb]
        side = self.tile_size // p
        grids = [(side, side)] * (plan.tiles.tiles_h * plan.tiles.tiles_w)
        return grids + [thumb] * plan.tiles.global_tile

    def count_tokens(self, rows: int, cols: int, size: tuple[int, int]) -> int:
        """``Lfm2VlProcessor._build_image_tokens``' tokens, for a rows x cols grid of an image
        whose :func:`smart_resize` size is ``size``."""
        p, d = self.encoder_patch_size, self.downsample_factor
        per_tile = math.ceil((self.tile_size // p) / d) ** 2
        for_image = math.ceil((size[0] // p) / d) * math.ceil((size[1] // p) / d)
        marks = int(self.use_image_special_tokens)
        tokens = 2 * marks
        if rows > 1 or cols > 1:
            tokens += rows * cols * (marks + per_tile)
            if self.use_thumbnail:
                tokens += marks + for_image
        else:
            tokens += for_image
        return tokens

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Lfm2VlImageProcessor.resize_and_split`` and ``_preprocess`` for one image.
        ``pixel_values``' shape is (crops, rows, 3 * patch**2), each crop's rows padded."""
        check_image_size(height, width)
        p = self.encoder_patch_size
        min_tiles, max_tiles = (
            (self.min_tiles, self.max_tiles) if self.do_image_splitting else (1, 1)
        )
        new_w, new_h = smart_resize(
            height,
            width,
            self.downsample_factor,
            self.min_image_tokens,
            self.max_image_tokens,
            p,
        )
        large = is_image_too_large(
            height,
            width,
            self.max_image_tokens,
            p,
            self.downsample_factor,
            self.max_pixels_tolerance,
        )
        tiles = None

        def thumbnail() -> View:
            """The image resized to the smart-resize size: the thumbnail, or the only crop."""
            resize = self.resize((height, width), (new_h, new_w))
            return View(resize=resize, out=hwc_rows((new_h, new_w), p))

        if large and not min_tiles == max_tiles == 1:
            grid_w, grid_h = find_closest_aspect_ratio(
                width / height,
                target_ratios(min_tiles, max_tiles),
                width,
                height,
                self.tile_size,
            )
            t = self.tile_size
            if t % p:
                raise MmfastError(
                    f"tile_size: tiles are cut into whole patches of {p}, got {t} (the image "
                    "is split)"
                )
            with_thumbnail = self.use_thumbnail and grid_w * grid_h != 1
            tiles = TileGrid(grid_h, grid_w, (t, t), with_thumbnail, 0)
            boxes = tuple(CropBox(r * t, c * t, t, t) for r in range(grid_h) for c in range(grid_w))
            resize = self.resize((height, width), (grid_h * t, grid_w * t))
            views: tuple[View, ...] = (View(resize=resize, out=HwcPatches(p, boxes)),)
            if with_thumbnail:
                views += (thumbnail(),)
        else:
            views = (thumbnail(),)
        plan = ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=True,
            resize_size=(new_h, new_w),
            resample=self.resample,
            crop=None,
            canvas_size=None,
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=tiles,
            output_shapes=MappingProxyType({}),
            num_image_tokens=self.count_tokens(
                tiles.tiles_h if tiles else 1, tiles.tiles_w if tiles else 1, (new_h, new_w)
            ),
            views=views,
        )
        counts = [gh * gw for gh, gw in self.crop_grids(plan)]
        padded = [max(n, self.max_num_patches) if self.do_pad else n for n in counts]
        if len(set(padded)) > 1:
            # HF stacks an image's crops: their padded lengths must agree.
            raise MmfastError(
                f"image size: a {height}x{width} image gives crops of {counts} patches, padded "
                f"to {padded} rows, which transformers cannot stack"
            )
        if any(n != padded[0] for n in counts[:-1]):
            # Zero rows between two crops: no view leaves a gap behind what it writes.
            raise MmfastError(
                f"tile_size: with tiles of {counts[0]} patches padded to {padded[0]} rows (zero "
                "rows between crops), mmfast cannot lay out this image; keep (tile_size // "
                "encoder_patch_size)**2 at least max_image_tokens * downsample_factor**2"
            )
        shapes = {
            "pixel_values": (len(counts), padded[0], 3 * p * p),
            "pixel_attention_mask": (len(counts), self.max_num_patches),
            "spatial_shapes": (len(counts), 2),
        }
        return replace(plan, output_shapes=MappingProxyType(shapes))

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """The torchvision class's arithmetic, or its uint8 pixels with both steps off."""
        if plan.do_rescale or plan.do_normalize:
            return fused_tables(plan)
        return identity_table()

    def rows_mask(
        self, shape: tuple[int, ...], offsets: Sequence[int], plans: Sequence[ImagePlan]
    ) -> NDArray[np.bool_] | None:
        """The crops' rows: an image writes its crops back to back, the last one's padding
        (the only one a crop can have here) left zero."""
        if not self.do_pad:
            return None
        row = math.prod(shape[2:])
        mask = np.zeros(shape[:2], bool).reshape(-1)
        for offset, plan in zip(offsets, plans, strict=True):
            crops, rows = plan.output_shapes["pixel_values"][:2]
            gh, gw = self.crop_grids(plan)[-1]
            first = offset // row
            mask[first : first + (crops - 1) * rows + gh * gw] = True
        return mask.reshape(shape[:2])

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """With ``do_pad``: ``pixel_attention_mask`` (crops, max_num_patches) int32, 1 on each
        crop's rows (all 1 for a crop with more), and ``spatial_shapes`` (crops, 2) int64. With
        ``return_row_col_info``: ``image_rows``, ``image_cols`` (images,) and ``image_sizes``
        (images, 2) int64, the tile grid and the :func:`smart_resize` size."""
        out: dict[str, Any] = {}
        if self.do_pad:
            grids = [grid for plan in plans for grid in self.crop_grids(plan)]
            mask = np.ones((len(grids), self.max_num_patches), np.int32)
            for i, (gh, gw) in enumerate(grids):
                mask[i, gh * gw :] = 0
            out["pixel_attention_mask"] = mask
            out["spatial_shapes"] = np.array(grids, np.int64).reshape(-1, 2)
        if self.return_row_col_info:
            out["image_rows"] = np.array([p.tiles.tiles_h if p.tiles else 1 for p in plans])
            out["image_cols"] = np.array([p.tiles.tiles_w if p.tiles else 1 for p in plans])
            out["image_sizes"] = np.array([p.resize_size for p in plans], np.int64).reshape(-1, 2)
        return out


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Lfm2VlConfig:
    """Mirrors ``Lfm2VlImageProcessor``'s class defaults; ``_preprocess`` always resizes, and
    refuses ``min_tiles > max_tiles`` when splitting."""
    size = cfg.raw("size")
    if size is not None:  # validated by _standardize_kwargs, then unused
        cfg.size_dict("size", size, cfg.flag("default_to_square", True))
    cfg.flag("do_resize", True)  # checked, then overridden: _preprocess always resizes
    splitting = cfg.flag("do_image_splitting", True)
    min_tiles = cfg.positive_int("min_tiles", 2)
    max_tiles = cfg.positive_int("max_tiles", 10)
    if splitting and min_tiles > max_tiles:
        raise cfg.error("min_tiles", f"at most max_tiles ({max_tiles})", min_tiles)
    tolerance = cfg.number("max_pixels_tolerance", 2.0)
    norm = cfg.normalization(IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD)
    return Lfm2VlConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.flag("do_convert_rgb", False),
        resample=cfg.resample(BILINEAR),
        **norm.fields(),
        downsample_factor=cfg.positive_int("downsample_factor", 2),
        do_image_splitting=splitting,
        min_tiles=min_tiles,
        max_tiles=max_tiles,
        use_thumbnail=cfg.flag("use_thumbnail", True),
        min_image_tokens=cfg.positive_int("min_image_tokens", 64),
        max_image_tokens=cfg.positive_int("max_image_tokens", 256),
        encoder_patch_size=cfg.positive_int("encoder_patch_size", 16),
        tile_size=cfg.positive_int("tile_size", 512),
        max_pixels_tolerance=tolerance,
        do_pad=cfg.flag("do_pad", True),
        return_row_col_info=cfg.flag("return_row_col_info", False),
        use_image_special_tokens=processor.flag("use_image_special_tokens", True),
    )


registry.register(
    registry.Family(
        name="lfm2_vl",
        processor_types=("Lfm2VlImageProcessor",),
        model_types={"lfm2_vl": "Lfm2VlImageProcessor"},
        build=_build,
        kwargs=frozenset(
            {
                "downsample_factor",
                "do_image_splitting",
                "min_tiles",
                "max_tiles",
                "use_thumbnail",
                "min_image_tokens",
                "max_image_tokens",
                "encoder_patch_size",
                "tile_size",
                "max_pixels_tolerance",
                "do_pad",
                "return_row_col_info",
            }
        ),
        processor_kwargs=frozenset({"use_image_special_tokens"}),
        processor_classes={"Lfm2VlProcessor": "lfm2_vl"},
        # Lfm2VlProcessor.images_kwargs: it builds the prompt from the tile grid.
        processor_defaults={"Lfm2VlProcessor": {"return_row_col_info": True}},
        hf_torchvision="lfm2_vl.image_processing_lfm2_vl.Lfm2VlImageProcessor",
    )
)

# LiquidAI/LFM2-VL-1.6B: no copy of its current files was found. The tiling budget is the one
# LFM2-VL-450M's first release shipped in processor_config.json (seen verbatim: splitting on,
# downsample 2, patch 16, 64 to 256 image tokens, 2 to 10 tiles of 512, tolerance 2.0, special
# tokens on) and its preprocessor_config.json gave bilinear, rescale 1/255, mean/std 0.5 and
# "do_convert_rgb": null. That release had use_thumbnail false; the model card says only the
# 1.6B model adds the thumbnail. transformers' class reads all of these from one file (its
# processor only adds use_image_special_tokens); the class name is transformers' own.
registry.register_builtin(
    "LiquidAI/LFM2-VL-1.6B",
    "lfm2_vl",
    {
        "do_convert_rgb": None,
        "do_image_splitting": True,
        "do_normalize": True,
        "do_rescale": True,
        "downsample_factor": 2,
        "encoder_patch_size": 16,
        "image_mean": list(HALF),
        "image_processor_type": "Lfm2VlImageProcessor",
        "image_std": list(HALF),
        "max_image_tokens": 256,
        "max_pixels_tolerance": 2.0,
        "max_tiles": 10,
        "min_image_tokens": 64,
        "min_tiles": 2,
        "processor_class": "Lfm2VlProcessor",
        "resample": BILINEAR,
        "rescale_factor": 0.00392156862745098,
        "tile_size": 512,
        "use_thumbnail": True,
    },
    {"processor_class": "Lfm2VlProcessor", "use_image_special_tokens": True},
)
