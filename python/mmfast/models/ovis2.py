"""Ovis2: ``Ovis2ImageProcessor`` (transformers 5.24).

With ``crop_to_patches`` (and ``max_patches`` over 1) the image is resized to a grid of ``size``
tiles, chosen by how much of the image the tiles cover (``use_covering_area_grid``, the default)
or by the closest aspect ratio, and cut into tiles; with more than one tile a thumbnail (the
whole image squashed to one tile) comes first. Each view then goes through the default pipeline
(resize to ``size``, a no-op for tiles, centre crop, rescale, normalise). ``grids`` gives each
image's (rows, columns).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    ImagePlan,
    View,
    resizer,
)
from mmfast.models.config import MAX_INT, MAX_TILES, Fields, Source
from mmfast.models.geometry import CropBox, center_crop_box
from mmfast.models.got_ocr2 import get_all_supported_aspect_ratios, get_optimal_tiled_canvas
from mmfast.models.pil_backend import PilBackendConfig, pil_backend_fields

__all__ = [
    "Ovis2Config",
    "compute_patch_covering_area",
    "get_min_tile_covering_grid",
    "split_image_into_grid",
]

# crop_image_to_patches' covering_threshold default, which _preprocess never changes.
COVERING_THRESHOLD = 0.9


def compute_patch_covering_area(left: int, upper: int, right: int, lower: int, side: int) -> float:
    """The area of a cell once its long side is capped at ``side`` (the short one scaled).

    Mirrors ``image_processing_ovis2.compute_patch_covering_area``, its float order included.
    """
    w = right - left
    h = lower - upper
    long, short = max(w, h), min(w, h)
    if long > side:
        # HF: h = h / w * side; w = side; w * h (int * float: the same product).
        return side * (short / long * side)
    return long * short


def split_image_into_grid(h: int, w: int, grid: tuple[int, int]) -> list[tuple[int, int, int, int]]:
    """(left, upper, right, lower) of each cell of a ``grid[0]`` x ``grid[1]`` split, the last
    row and column taking the remainder. Mirrors ``image_processing_ovis2.split_image_into_grid``.
    """
    row_height = h // grid[0]
    col_width = w // grid[1]
    return [
        (
            col * col_width,
            row * row_height,
            w if col == grid[1] - 1 else (col + 1) * col_width,
            h if row == grid[0] - 1 else (row + 1) * row_height,
        )
        for row in range(grid[0])
        for col in range(grid[1])
    ]


# Keyed by image size: bounded, as a server sees sizes without end.
@lru_cache(maxsize=1024)
def get_min_tile_covering_grid(
    image_size: tuple[int, int], target_patch_size: int, max_image_tiles: int
) -> tuple[int, int]:
    """The grid with the fewest tiles covering over 90% of the image (most coverage first on
    ties), else the best-covering one (fewest tiles on ties).

    Mirrors ``image_processing_ovis2.get_min_tile_covering_grid``: a grid ``(a, b)`` is split
    as ``a`` rows by ``b`` columns for its coverage, and the caller unpacks it as
    (columns, rows), as HF does.
    """
    image_height, image_width = image_size
    image_area = image_width * image_height
    evaluated = []
    sufficient = []
    for grid in get_all_supported_aspect_ratios(1, max_image_tiles):
        regions = split_image_into_grid(image_height, image_width, grid)
        ratio = (
            sum(compute_patch_covering_area(*region, target_patch_size) for region in regions)
            / image_area
        )
        evaluated.append((grid, ratio))
        if ratio > COVERING_THRESHOLD:
            sufficient.append((grid, ratio))
    if sufficient:
        return min(sufficient, key=lambda x: (x[0][0] * x[0][1], -x[1]))[0]
    return min(evaluated, key=lambda x: (-x[1], x[0][0] * x[0][1]))[0]


@dataclass(frozen=True)
class Ovis2Config(PilBackendConfig):
    """Settings of ``Ovis2ImageProcessor`` plus ``Ovis2Processor``'s ``image_seq_length``.

    ``num_image_tokens`` counts the tokens of Ovis2Processor's placeholder, each tag one
    token: ``<IMG_START>``, ``image_seq_length`` ``<IMG_ATOM>`` and ``<IMG_GRID>`` for the
    thumbnail; with more than one tile, ``image_seq_length`` atoms per tile with ``<IMG_COL>``
    between columns and ``<IMG_ROW>`` between rows; then ``<IMG_END>``.
    """

    crop_to_patches: bool
    min_patches: int
    max_patches: int
    use_covering_area_grid: bool
    image_seq_length: int

    batch_layout: ClassVar[str] = "concat"
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_values": "rows", "grids": "lists"}
    )

    def grid(self, height: int, width: int) -> tuple[int, int]:
        """(columns, rows) of the tile grid, as ``crop_image_to_patches`` unpacks it."""
        tile_h, tile_w = self.size["height"], self.size["width"]
        if self.use_covering_area_grid:
            return get_min_tile_covering_grid((height, width), tile_h, self.max_patches)
        return get_optimal_tiled_canvas(
            (height, width), (tile_h, tile_w), self.min_patches, self.max_patches
        )

    def count_tokens(self, height: int, width: int) -> int:
        """Replaced per image in :meth:`plan` (the count needs the grid)."""
        return 0

    def tokens(self, rows: int, columns: int) -> int:
        """``Ovis2Processor.replace_image_token``'s placeholder, in tokens."""
        count = 2 + self.image_seq_length
        if rows * columns > 1:
            count += rows * columns * self.image_seq_length + rows * (columns - 1) + rows - 1
        return count + 1

    def view_of(self, source: int, box: CropBox) -> tuple[View, tuple[int, int]]:
        """The default pipeline on ``box`` of view ``source``'s pixels (a tile): resize to
        ``size`` (a no-op) and centre crop; the view and its output size."""
        size = (box.height, box.width)
        resize = None
        if self.do_resize:
            size = self.resize_size(*size)
            resize = resizer(self.backend, size, self.resample)
        window = CropBox(0, 0, *size)
        if self.do_center_crop:
            window = center_crop_box(*size, *self.crop_size, self.backend)
        return View(source=source, crop=box, resize=resize, out=(window,)), (
            window.height,
            window.width,
        )

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Ovis2ImageProcessorPil._preprocess`` and ``crop_image_to_patches``."""
        plan = super().plan(height, width)
        grid = (1, 1)
        views = plan.views
        if self.crop_to_patches and self.max_patches > 1:
            columns, rows = self.grid(height, width)
            grid = (rows, columns)
            tile_h, tile_w = self.size["height"], self.size["width"]
            boxes = [
                CropBox(r * tile_h, c * tile_w, tile_h, tile_w)
                for r in range(rows)
                for c in range(columns)
            ]
            canvas = (tile_h * rows, tile_w * columns)
            sources = [View(resize=resizer(self.backend, canvas, self.resample))]
            if len(boxes) > 1:
                # The thumbnail comes first.
                thumbnail = resizer(self.backend, (tile_h, tile_w), self.resample)
                sources.append(View(resize=thumbnail))
                pieces = [(1, CropBox(0, 0, tile_h, tile_w)), *((0, box) for box in boxes)]
            else:
                pieces = [(0, boxes[0])]
            outs = [self.view_of(source, box) for source, box in pieces]
            views = (*sources, *(view for view, _ in outs))
            item: tuple[int, ...] = (3, *outs[0][1])  # every piece a tile: views of one size
        else:
            item = plan.output_shapes["pixel_values"]
        n = sum(len(view.windows) for view in views)
        return replace(
            plan,
            output_shapes=MappingProxyType({"pixel_values": (n, *item[-3:]), "grids": (2,)}),
            num_image_tokens=self.tokens(*grid),
            views=tuple(views),
            tiles=None,
        )

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``grids``: (B, 2) int64 (rows, columns) of each image's tile grid."""
        grids = [self._grid_of(p) for p in plans]
        return {"grids": np.array(grids, np.int64).reshape(-1, 2)}

    def _grid_of(self, plan: ImagePlan) -> tuple[int, int]:
        if self.crop_to_patches and self.max_patches > 1:
            columns, rows = self.grid(plan.height, plan.width)
            return rows, columns
        return 1, 1


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Ovis2Config:
    """Mirrors ``Ovis2ImageProcessorPil``'s class defaults (no crop size: a centre crop needs
    one) and ``Ovis2Processor``'s ``image_seq_length`` (default 256)."""
    fields = pil_backend_fields(
        cfg,
        size={"height": 384, "width": 384},
        default_to_square=True,
        resample=BICUBIC,
        mean=OPENAI_CLIP_MEAN,
        std=OPENAI_CLIP_STD,
        crop_size=None,
    )
    crop_to_patches = cfg.flag("crop_to_patches", False)
    max_patches = cfg.positive_int("max_patches", 12, MAX_TILES)
    if crop_to_patches and max_patches > 1 and set(fields["size"]) != {"height", "width"}:
        raise cfg.error(
            "size", "a {height, width} tile size (crop_to_patches is on)", dict(fields["size"])
        )
    return Ovis2Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **fields,
        crop_to_patches=crop_to_patches,
        min_patches=cfg.positive_int("min_patches", 1, MAX_TILES),
        max_patches=max_patches,
        use_covering_area_grid=cfg.flag("use_covering_area_grid", True),
        image_seq_length=processor.int_in("image_seq_length", 256, 0, MAX_INT),
    )


registry.register(
    registry.Family(
        name="ovis2",
        processor_types=("Ovis2ImageProcessor",),
        model_types={"ovis2": "Ovis2ImageProcessor"},
        build=_build,
        kwargs=frozenset(
            {"crop_to_patches", "min_patches", "max_patches", "use_covering_area_grid"}
        ),
        processor_kwargs=frozenset({"image_seq_length"}),
        processor_classes={"Ovis2Processor": "ovis2"},
        hf_pil="ovis2.image_processing_pil_ovis2.Ovis2ImageProcessorPil",
        hf_torchvision="ovis2.image_processing_ovis2.Ovis2ImageProcessor",
    )
)

# thisisiron/Ovis2-2B-hf and -1B-hf: no public copy of their files was found. transformers'
# conversion script (convert_ovis2_weights_to_hf.py, which names the 2B hub repository) saves
# Ovis2ImageProcessor(crop_to_patches=True, size 448x448) with the class's other defaults and
# Ovis2Processor's default image_seq_length 256; unconfirmed.
_OVIS2 = {
    "crop_to_patches": True,
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": list(OPENAI_CLIP_MEAN),
    "image_processor_type": "Ovis2ImageProcessor",
    "image_std": list(OPENAI_CLIP_STD),
    "max_patches": 12,
    "min_patches": 1,
    "processor_class": "Ovis2Processor",
    "resample": BICUBIC,
    "rescale_factor": 0.00392156862745098,
    "size": {"height": 448, "width": 448},
    "use_covering_area_grid": True,
}
for _model_id in ("thisisiron/Ovis2-2B-hf", "thisisiron/Ovis2-1B-hf"):
    registry.register_builtin(
        _model_id,
        "ovis2",
        _OVIS2,
        {"image_seq_length": 256, "processor_class": "Ovis2Processor"},
    )
