"""PerceptionLM: ``PerceptionLMImageProcessor`` and ``PerceptionLMVideoProcessor`` (transformers
5.24; torchvision only), and ``PerceptionLMProcessor``'s token counts.

"thumb+tile": the image squashed to one tile (the thumbnail), then the image squashed to the
canvas of tiles its size fits best (Llama 3.2-Vision's dynamic tiling: the grid of at most
``max_num_tiles`` tiles holding the image without downscaling whose shorter image side is
largest, else the grid whose aspect ratio is closest) and cut into tiles in raster order.
Otherwise one squashed tile. Frames of a video are squashed to ``size`` (448 x 448 for the
checkpoints) by the default video processor.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from numpy.typing import NDArray

from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    BOX,
    HALF,
    HAMMING,
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
    RGB,
    TORCH_RESAMPLE,
    ImagePlan,
    ModelConfig,
    Resize,
    View,
    check_image_size,
    fused_tables,
    plan_constants,
)
from mmfast.models.base_video import FRAMES_IGNORES, FramesVideoConfig, frames_fields
from mmfast.models.config import MAX_TILES, Fields, Source
from mmfast.models.geometry import CropBox
from mmfast.models.llama4 import get_factors

__all__ = [
    "PerceptionLMConfig",
    "PerceptionLMVideoConfig",
    "find_closest_aspect_ratio",
    "find_supported_aspect_ratios",
    "fit_image_to_canvas",
]


@functools.lru_cache(maxsize=16)
def find_supported_aspect_ratios(max_num_tiles: int) -> dict[float, list[tuple[int, int]]]:
    """Every (columns, rows) grid of at most ``max_num_tiles`` tiles, by its columns / rows,
    in first-seen order while counting tiles down.

    Mirrors ``PerceptionLMImageProcessor._find_supported_aspect_ratios`` (Llama 4's
    ``find_supported_resolutions`` enumerates the same grids). Cached: callers only read it.
    """
    ratios: dict[float, list[tuple[int, int]]] = {}
    for chunk_size in range(max_num_tiles, 0, -1):
        for factor in sorted(get_factors(chunk_size)):
            grid = (factor, chunk_size // factor)
            ratios.setdefault(grid[0] / grid[1], []).append(grid)
    return ratios


def get_image_height_width(
    image_width: int, image_height: int, target_width: int, target_height: int
) -> tuple[float, float]:
    """(width, height) of the image scaled into the target without distortion, one side
    floored and the other left a float. Mirrors ``_get_image_height_width``."""
    scale = image_width / image_height
    rescaling_factor = min(target_width / image_width, target_height / image_height)
    if scale > 1.0:
        new_w: float = rescaling_factor * image_width
        return new_w, math.floor(new_w / scale)
    new_h: float = rescaling_factor * image_height
    return math.floor(new_h * scale), new_h


def fit_image_to_canvas(
    img_width: int, img_height: int, tile_size: int, max_num_tiles: int
) -> tuple[int, int] | None:
    """The (columns, rows) grid the image fits in without downscaling whose scaled image has
    the largest shorter side, the later grid on ties; None when none holds it. Mirrors
    ``_fit_image_to_canvas``."""
    optimal: tuple[int, int] | None = None
    optimal_size: tuple[float, float] = (0.0, 0.0)
    scale = img_width / img_height
    for grids in find_supported_aspect_ratios(max_num_tiles).values():
        for n_w, n_h in grids:
            canvas_w, canvas_h = n_w * tile_size, n_h * tile_size
            if canvas_w < img_width or canvas_h < img_height:
                continue
            size = get_image_height_width(img_width, img_height, canvas_w, canvas_h)
            if (
                optimal is None
                or (scale < 1.0 and size[0] >= optimal_size[0])
                or (scale >= 1.0 and size[1] >= optimal_size[1])
            ):
                optimal, optimal_size = (n_w, n_h), size
    return optimal


def find_closest_aspect_ratio(
    img_width: int, img_height: int, max_num_tiles: int
) -> tuple[int, int]:
    """The grid whose aspect ratio is closest to the image's (not wider than a wide image, and
    strictly wider than a tall one), the widest (tallest) of its ratio. Mirrors
    ``_find_closest_aspect_ratio``, its first-minimum and first-maximum ties included."""
    target = img_width / img_height
    ratios = find_supported_aspect_ratios(max_num_tiles)
    if target >= 1:
        closest = min((k for k in ratios if k <= target), key=lambda x: abs(x - target))
        return max(ratios[closest], key=lambda grid: grid[0])
    closest = min((k for k in ratios if k > target), key=lambda x: abs(1 / x - 1 / target))
    return max(ratios[closest], key=lambda grid: grid[1])


def tile_grid(height: int, width: int, tile_size: int, max_num_tiles: int) -> tuple[int, int]:
    """(columns, rows): ``PerceptionLMImageProcessor.resize``'s aspect ratio."""
    if max_num_tiles <= 1:
        return 1, 1
    grid = fit_image_to_canvas(width, height, tile_size, max_num_tiles)
    return grid or find_closest_aspect_ratio(width, height, max_num_tiles)


def refuse_box_and_hamming(cfg: Fields, resample: int) -> int:
    """``resample``, unless torchvision cannot apply it (the class is torchvision only)."""
    if resample in (BOX, HAMMING):
        raise cfg.error("resample", TORCH_RESAMPLE, resample)
    return resample


@dataclass(frozen=True)
class PerceptionLMConfig(ModelConfig):
    """Settings of ``PerceptionLMImageProcessor`` plus ``PerceptionLMProcessor``'s
    ``patch_size`` and ``pooling_ratio`` (``processor_config.json``): ``num_image_tokens`` is
    its ``<|image|>`` count, ``(side // patch_size // pooling_ratio) ** 2`` per tile, the
    thumbnail included."""

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    vision_input_type: str
    tile_size: int
    max_num_tiles: int
    instance_max_num_tiles: int
    patch_size: int
    pooling_ratio: int

    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "stack"
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({"pixel_values": "rows"})

    def views(self, height: int, width: int) -> tuple[View, ...]:
        """The thumbnail, then the tiles of the squashed canvas (thumb+tile); the thumbnail
        alone otherwise; the image as it is without ``do_resize``."""
        if not self.do_resize:
            return (View(out=(CropBox(0, 0, height, width),)),)
        side = self.tile_size
        thumbnail = View(
            resize=Resize((side, side), self.resample, "torch"), out=(CropBox(0, 0, side, side),)
        )
        if self.vision_input_type != "thumb+tile":
            return (thumbnail,)
        # Tiled when the call's max_num_tiles is over 1, on the canvases of the instance's
        # (transformers' _find_supported_aspect_ratios reads self.max_num_tiles).
        limit = self.instance_max_num_tiles if self.max_num_tiles > 1 else 1
        columns, rows = tile_grid(height, width, side, limit)
        tiles = tuple(
            CropBox(r * side, c * side, side, side) for r in range(rows) for c in range(columns)
        )
        canvas = Resize((rows * side, columns * side), self.resample, "torch")
        return thumbnail, View(resize=canvas, out=tiles)

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``PerceptionLMImageProcessor._preprocess`` for one image."""
        check_image_size(height, width)
        views = self.views(height, width)
        first = views[0].windows[0]
        count = sum(len(view.windows) for view in views)
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=(first.height, first.width),
            resample=self.resample,
            crop=None,
            canvas_size=None,
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType({"pixel_values": (count, 3, first.height, first.width)}),
            num_image_tokens=count * self.tokens_per_tile(first.height, first.width),
            views=views,
        )

    def tokens_per_tile(self, height: int, width: int) -> int:
        """``PerceptionLMProcessor.replace_image_token``'s tokens for one tile."""
        pool = self.pooling_ratio
        return (height // self.patch_size // pool) * (width // self.patch_size // pool)

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """The torchvision class's arithmetic, whatever the backend is called."""
        return fused_tables(plan)


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> PerceptionLMConfig:
    """Mirrors ``PerceptionLMImageProcessor``'s class defaults (its ``size`` is unused);
    ``PerceptionLMProcessor`` has no default ``patch_size``: the checkpoints' 14."""
    # The class keeps size for compatibility and never reads it; transformers still checks it.
    size = cfg.raw("size")
    if size is not None:
        cfg.size_dict("size", size, cfg.flag("default_to_square", True))
    norm = cfg.normalization(IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD)
    kind = cfg.raw("vision_input_type")
    if kind is not None and not isinstance(kind, str):
        raise cfg.error("vision_input_type", '"thumb+tile" or another string', kind)
    given = cfg.raw(registry.INSTANCE_KEY)
    instance = cfg if given is None else cfg.nested("the instance", given)
    return PerceptionLMConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=cfg.flag("do_resize", True),
        resample=refuse_box_and_hamming(cfg, cfg.resample(BICUBIC)),
        **norm.fields(),
        vision_input_type="thumb+tile" if kind is None else kind,
        tile_size=cfg.positive_int("tile_size", 448, 16384),
        max_num_tiles=cfg.positive_int("max_num_tiles", 36, MAX_TILES),
        instance_max_num_tiles=instance.positive_int("max_num_tiles", 36, MAX_TILES),
        patch_size=processor.positive_int("patch_size", 14),
        pooling_ratio=processor.positive_int("pooling_ratio", 2),
    )


registry.register(
    registry.Family(
        name="perception_lm",
        processor_types=("PerceptionLMImageProcessor",),
        model_types={"perception_lm": "PerceptionLMImageProcessor"},
        build=_build,
        kwargs=frozenset({"vision_input_type", "tile_size", "max_num_tiles"}),
        call_settings=registry.keep_instance("max_num_tiles"),
        instance_attributes=("max_num_tiles",),
        processor_kwargs=frozenset({"patch_size", "pooling_ratio"}),
        processor_classes={"PerceptionLMProcessor": "perception_lm"},
        hf_torchvision="perception_lm.image_processing_perception_lm.PerceptionLMImageProcessor",
    )
)


# --------------------------------------------------------------------------------------------
# Video: PerceptionLMVideoProcessor (transformers 5.24; BaseVideoProcessor's pipeline)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PerceptionLMVideoConfig(FramesVideoConfig):
    """Settings of ``PerceptionLMVideoProcessor``: ``BaseVideoProcessor``'s pipeline with its
    own class defaults (frames squashed to 448x448, mean/std 0.5).

    ``num_video_tokens`` is ``PerceptionLMProcessor.replace_video_token``'s count, ``(H //
    patch_size // pooling_ratio) * (W // patch_size // pooling_ratio)`` per frame
    (``frame_tokens`` holds ``patch_size * pooling_ratio``, the side of a frame's token).
    """

    def tokens_per_frame(self, height: int, width: int) -> int:
        """``replace_video_token``'s tokens for a processed ``height`` x ``width`` frame."""
        side = self.frame_tokens
        return (height // side) * (width // side)


def _build_video(model_id: str | None, cfg: Fields) -> PerceptionLMVideoConfig:
    """Mirrors ``PerceptionLMVideoProcessor``'s class defaults; the processor's patch 14 and
    pooling 2 (``processor_config.json``, which the video processor's file does not hold: the
    checkpoints' values) count tokens."""
    return PerceptionLMVideoConfig(
        model_id=model_id,
        video_processor_type="PerceptionLMVideoProcessor",
        **frames_fields(
            cfg,
            size={"height": 448, "width": 448},
            resample=BICUBIC,
            mean=HALF,
            std=HALF,
            default_to_square=True,
        ),
        frame_tokens=14 * 2,
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="PerceptionLMVideoProcessor",
        model_types=("perception_lm",),
        build=_build_video,
        kwargs=frozenset(),
        ignores=FRAMES_IGNORES,
        # The class has no crop size: None is its default (it crops only with one).
        none_is_default=frozenset({"crop_size"}),
    )
)

# facebook/Perception-LM-1B (gated): the values of open mirrors of its files as a public
# sweep of them prints them (tile 448, 36 tiles, thumb+tile, mean/std 0.5, patch 14, pooling
# 2), and transformers' conversion script, which writes these keys (plus max_frame_tiles,
# unused) and a video processor config of the tile size; the official files not seen. The
# video settings are PerceptionLMVideoProcessor's class defaults with that size.
registry.register_builtin(
    "facebook/Perception-LM-1B",
    "perception_lm",
    {
        "data_format": "channels_first",
        "do_center_crop": False,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_processor_type": "PerceptionLMImageProcessorFast",
        "image_std": list(HALF),
        "max_frame_tiles": 1,
        "max_num_tiles": 36,
        "processor_class": "PerceptionLMProcessor",
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 448, "width": 448},
        "tile_size": 448,
        "vision_input_type": "thumb+tile",
    },
    {"patch_size": 14, "pooling_ratio": 2, "processor_class": "PerceptionLMProcessor"},
    video={
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 448, "width": 448},
        "video_processor_type": "PerceptionLMVideoProcessor",
    },
)
