"""UnlimitedOCR: ``UnlimitedOcrImageProcessor`` (transformers 5.24; torchvision only) and
``UnlimitedOcrProcessor``'s token count.

Two outputs, as DeepSeek-OCR's "Gundam" mode: ``pixel_values``, a global view per image (its
longer side resized to ``max(size)`` and padded to a square with ``background_color`` around
the centre, or, without ``crop_to_patches`` and at most ``maximum_pad_value`` pixels, squashed
to the square), and ``pixel_values_local``, the ``tile_size`` tiles of the grid whose aspect
ratio is closest to the image's (GOT-OCR 2's choice, between ``min_patches`` and
``max_patches`` tiles), for images larger than a tile with ``crop_to_patches``; with
``num_local_patches`` and ``patches_grid`` (columns, rows) per image, as lists.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    HALF,
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
    RGB,
    ImagePlan,
    ModelConfig,
    Pad,
    Resize,
    View,
    check_image_size,
    fused_tables,
    plan_constants,
)
from mmfast.models.config import MAX_TILES, Fields, Source, is_int_in
from mmfast.models.geometry import CropBox
from mmfast.models.got_ocr2 import get_optimal_tiled_canvas
from mmfast.models.perception_lm import refuse_box_and_hamming

__all__ = ["UnlimitedOcrConfig"]


@dataclass(frozen=True)
class UnlimitedOcrConfig(ModelConfig):
    """Settings of ``UnlimitedOcrImageProcessor`` plus ``UnlimitedOcrProcessor``'s
    ``patch_size`` and ``downsample_ratio``: ``num_image_tokens`` is its ``<image>`` count,
    ``g * (g + 1) + 1`` for the global view (``g = ceil(side // patch_size /
    downsample_ratio)``) and ``rows * l * (columns * l + 1)`` for the tiles (``l`` the same
    for a tile), a newline token after each row of queries."""

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    global_size: int
    crop_to_patches: bool
    min_patches: int
    max_patches: int
    tile_size: int
    background_color: tuple[int, int, int]
    maximum_pad_value: int
    patch_size: int
    downsample_ratio: int

    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "stack"
    pixel_keys: ClassVar[tuple[str, ...]] = ("pixel_values", "pixel_values_local")
    counted_outputs: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_values_local": "num_local_patches"}
    )
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_values": "rows", "pixel_values_local": "rows"}
    )
    skip_tensor_conversion: ClassVar[tuple[str, ...]] = ("num_local_patches", "patches_grid")

    def grid(self, height: int, width: int) -> tuple[int, int] | None:
        """(columns, rows) of the local tiles, or None: only with ``crop_to_patches`` for an
        image larger than a tile."""
        if not self.crop_to_patches or max(height, width) <= self.tile_size:
            return None
        tile = (self.tile_size, self.tile_size)
        return get_optimal_tiled_canvas((height, width), tile, self.min_patches, self.max_patches)

    def global_view(self, height: int, width: int) -> View:
        """The global view: squashed to the square, or the longer side to it (sides rounded
        half to even) and padded to a square with the background colour, the odd pixel
        after (``pad_to_square``)."""
        side = self.global_size
        if not self.crop_to_patches and side <= self.maximum_pad_value:
            resize = Resize((side, side), self.resample, "torch")
            return View(resize=resize, out=(CropBox(0, 0, side, side),))
        scale = side / max(height, width)
        size = (round(height * scale), round(width * scale))
        if min(size) < 1:
            raise MmfastError(
                f"image size: a {height}x{width} image resizes to {size[0]}x{size[1]} for the "
                "global view (transformers cannot resize to it)"
            )
        square = max(size)
        pad = Pad(
            (square, square),
            (square - size[0]) // 2,
            (square - size[1]) // 2,
            self.background_color,
        )
        resize = Resize(size, self.resample, "torch")
        return View(resize=resize, pad=pad, out=(CropBox(0, 0, square, square),))

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``UnlimitedOcrImageProcessor._preprocess`` for one image: the global view
        into ``pixel_values``, the tiles into ``pixel_values_local``."""
        check_image_size(height, width)
        views = [self.global_view(height, width)]
        square = views[0].windows[0].height
        grid = self.grid(height, width)
        t = self.tile_size
        tiles = 0
        if grid is not None:
            columns, rows = grid
            canvas = Resize((rows * t, columns * t), self.resample, "torch")
            boxes = tuple(CropBox(r * t, c * t, t, t) for r in range(rows) for c in range(columns))
            views.append(View(resize=canvas, out=boxes, output=1))
            tiles = len(boxes)
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=True,
            resize_size=views[0].resize.size if views[0].resize else (height, width),
            resample=self.resample,
            crop=None,
            canvas_size=(square, square),
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType(
                {"pixel_values": (3, square, square), "pixel_values_local": (tiles, 3, t, t)}
            ),
            num_image_tokens=self.count_tokens(grid),
            views=tuple(views),
        )

    def queries(self, side: int) -> int:
        """``ceil(side // patch_size / downsample_ratio)``: queries along a view's side."""
        return math.ceil(side // self.patch_size / self.downsample_ratio)

    def count_tokens(self, grid: tuple[int, int] | None) -> int:
        """``UnlimitedOcrProcessor.replace_image_token``'s count."""
        g = self.queries(self.global_size)
        tokens = g * (g + 1) + 1
        if grid is not None:
            columns, rows = grid
            local = self.queries(self.tile_size)
            tokens += rows * local * (columns * local + 1)
        return tokens

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """The torchvision class's arithmetic, whatever the backend is called."""
        return fused_tables(plan)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``num_local_patches`` (tiles per image) and ``patches_grid`` ([columns, rows] per
        image, [1, 1] without tiles), as lists: transformers leaves them unconverted."""
        grids = [self.grid(p.height, p.width) for p in plans]
        return {
            "num_local_patches": [0 if g is None else g[0] * g[1] for g in grids],
            "patches_grid": [[1, 1] if g is None else [g[0], g[1]] for g in grids],
        }


def _background(cfg: Fields) -> tuple[int, int, int]:
    """``background_color``: ``pad_to_square`` pads the uint8 image with it (an int fills the
    first channel only, as torchvision's per-channel fill of ``[value, 0, 0]``)."""
    value = cfg.raw("background_color")
    if value is None:
        return (127, 127, 127)
    if is_int_in(value, 0, 255):
        return (int(value), 0, 0)
    if (
        not isinstance(value, list | tuple)
        or len(value) != 3
        or not all(is_int_in(v, 0, 255) for v in value)
    ):
        raise cfg.error("background_color", "3 integers from 0 to 255 (one per channel)", value)
    return (int(value[0]), int(value[1]), int(value[2]))


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> UnlimitedOcrConfig:
    """Mirrors ``UnlimitedOcrImageProcessor``'s class defaults; ``UnlimitedOcrProcessor``'s
    ``patch_size`` 16 and ``downsample_ratio`` 4 count the tokens."""
    value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"height": 1024, "width": 1024} if value is None else value,
        cfg.flag("default_to_square", True),
    )
    if size.keys() != {"height", "width"}:
        raise cfg.error("size", "a {height, width} size (the global view's side)", size)
    norm = cfg.normalization(IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD)
    return UnlimitedOcrConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        resample=refuse_box_and_hamming(cfg, cfg.resample(BICUBIC)),
        **norm.fields(),
        global_size=max(size["height"], size["width"]),
        crop_to_patches=cfg.flag("crop_to_patches", True),
        min_patches=cfg.positive_int("min_patches", 2, MAX_TILES),
        max_patches=cfg.positive_int("max_patches", 32, MAX_TILES),
        tile_size=cfg.positive_int("tile_size", 640, 16384),
        background_color=_background(cfg),
        maximum_pad_value=cfg.int_in("maximum_pad_value", 640, 0, 2**31 - 1),
        patch_size=processor.positive_int("patch_size", 16),
        downsample_ratio=processor.positive_int("downsample_ratio", 4),
    )


registry.register(
    registry.Family(
        name="unlimited_ocr",
        processor_types=("UnlimitedOcrImageProcessor",),
        model_types={"unlimited_ocr": "UnlimitedOcrImageProcessor"},
        build=_build,
        kwargs=frozenset(
            {
                "crop_to_patches",
                "min_patches",
                "max_patches",
                "tile_size",
                "background_color",
                "maximum_pad_value",
            }
        ),
        processor_kwargs=frozenset({"patch_size", "downsample_ratio"}),
        processor_classes={"UnlimitedOcrProcessor": "unlimited_ocr"},
        hf_torchvision="unlimited_ocr.image_processing_unlimited_ocr.UnlimitedOcrImageProcessor",
        instance_settings=frozenset({"background_color"}),
    )
)

# baidu/Unlimited-OCR: the checkpoint id as projects serving it name it; its files were not
# seen. These are UnlimitedOcrImageProcessor's class defaults (1024-pixel global view, 640
# tiles from 2 to 32, grey 127 padding, mean/std 0.5), the same "Gundam" geometry as
# DeepSeek-OCR's published configs (base 1024, image 640, crop mode); the processor's
# defaults (patch 16, downsample 4) count the tokens.
registry.register_builtin(
    "baidu/Unlimited-OCR",
    "unlimited_ocr",
    {
        "background_color": [127, 127, 127],
        "crop_to_patches": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_processor_type": "UnlimitedOcrImageProcessor",
        "image_std": list(HALF),
        "max_patches": 32,
        "maximum_pad_value": 640,
        "min_patches": 2,
        "processor_class": "UnlimitedOcrProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 1024, "width": 1024},
        "tile_size": 640,
    },
    {"patch_size": 16, "downsample_ratio": 4},
)
