"""Granite for Docling: ``GraniteDoclingImageProcessor`` (transformers 5.24).

A page is resized to the grid of ``size`` tiles whose aspect ratio is closest to its own (at
most ``max_patches`` tiles, 16 a side; ``dense_max_patches`` for the pages the spread rule
picks; one tile without ``crop_to_patches``) and cut into tiles, followed by a thumbnail (the
page squashed to one tile) when there is more than one. A flat list of pages is one prompt's;
each sample's tiles are joined and the samples zero-padded to the longest, with
``pixel_attention_mask`` marking real tiles. ``rows``/``cols`` give each page's grid.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    ImagePlan,
    View,
    float32_tables,
    resizer,
)
from mmfast.models.config import MAX_INT, MAX_TILES, Fields, Source
from mmfast.models.geometry import CropBox
from mmfast.models.mllama import last_sample
from mmfast.models.pil_backend import PilBackendConfig, pil_backend_fields

__all__ = [
    "GraniteDoclingConfig",
    "get_all_supported_aspect_ratios",
    "get_optimal_tiled_canvas",
    "get_page_max_patches",
    "get_tile_budget",
]

# get_all_supported_aspect_ratios: the tokenizer has <row_i_col_j> markers up to 16x16.
MAX_SIDE = 16


@lru_cache(maxsize=16)
def get_all_supported_aspect_ratios(
    min_image_tiles: int, max_image_tiles: int
) -> list[tuple[int, int]]:
    """Every (columns, rows) grid of ``min_image_tiles`` to ``max_image_tiles`` tiles with
    sides of at most 16, by tile count (a stable sort of the width-major enumeration).

    Mirrors ``image_processing_granite_docling.get_all_supported_aspect_ratios``.
    """
    max_side = min(max_image_tiles, MAX_SIDE)
    ratios = [
        (width, height)
        for width in range(1, max_side + 1)
        for height in range(1, max_side + 1)
        if min_image_tiles <= width * height <= max_image_tiles
    ]
    return sorted(ratios, key=lambda grid: grid[0] * grid[1])


def get_optimal_tiled_canvas(
    original_image_size: tuple[int, int],
    target_tile_size: tuple[int, int],
    min_image_tiles: int,
    max_image_tiles: int,
) -> tuple[int, int]:
    """The (columns, rows) grid whose aspect ratio is closest to the page's; on a tie the
    grid with more tiles while the page's area is over half the grid's.

    Mirrors ``image_processing_granite_docling.get_optimal_tiled_canvas``.
    """
    original_height, original_width = original_image_size
    target_tile_height, target_tile_width = target_tile_size
    aspect_ratio = original_width / original_height
    area = original_width * original_height
    best_ratio_diff = float("inf")
    best_grid = (1, 1)
    for grid in get_all_supported_aspect_ratios(min_image_tiles, max_image_tiles):
        ratio_diff = abs(aspect_ratio - grid[0] / grid[1])
        if ratio_diff < best_ratio_diff:
            best_ratio_diff = ratio_diff
            best_grid = grid
        elif ratio_diff == best_ratio_diff and (
            area > 0.5 * target_tile_height * target_tile_width * grid[0] * grid[1]
        ):
            best_grid = grid
    return best_grid


@dataclass(frozen=True)
class DenseRule:
    """The spread rule's settings (``dense_*``): pages it picks get ``max_patches`` tiles."""

    max_patches: int
    max_scale: float
    min_aspect: float
    max_aspect: float


def get_tile_budget(
    original_image_size: tuple[int, int],
    target_tile_size: tuple[int, int],
    min_image_tiles: int,
    max_image_tiles: int,
    dense: DenseRule,
) -> int:
    """``dense.max_patches`` for a page under-resolved at ``max_image_tiles`` with its
    width/height ratio in (``min_aspect``, ``max_aspect``], else ``max_image_tiles``.

    Mirrors ``image_processing_granite_docling.get_tile_budget``.
    """
    if not dense.max_patches or (dense.max_scale <= 0 and dense.min_aspect <= 0):
        return max_image_tiles
    original_height, original_width = original_image_size
    aspect_ratio = original_width / original_height
    if dense.min_aspect > 0 and not aspect_ratio > dense.min_aspect:
        return max_image_tiles
    if dense.max_aspect > 0 and aspect_ratio > dense.max_aspect:
        return max_image_tiles
    if dense.max_scale > 0:
        num_columns, _ = get_optimal_tiled_canvas(
            original_image_size, target_tile_size, min_image_tiles, max_image_tiles
        )
        if not num_columns * target_tile_size[1] / original_width < dense.max_scale:
            return max_image_tiles
    return dense.max_patches


def get_page_max_patches(
    height: int,
    width: int,
    tile: tuple[int, int],
    crop_to_patches: bool,
    min_patches: int,
    max_patches: int,
    dense: DenseRule,
) -> int:
    """The most tiles a page may get: 1 without cropping, else :func:`get_tile_budget`.
    Mirrors ``image_processing_granite_docling.get_page_max_patches``."""
    if not crop_to_patches or max_patches <= 1:
        return 1
    return get_tile_budget((height, width), tile, min_patches, max_patches, dense)


@dataclass(frozen=True)
class GraniteDoclingConfig(PilBackendConfig):
    """Settings of ``GraniteDoclingImageProcessor`` plus ``GraniteDoclingProcessor``'s
    ``image_seq_len``.

    ``num_image_tokens`` counts GraniteDoclingProcessor's placeholder as its
    ``_get_num_multimodal_tokens`` does with a tokenizer that reads every tag as one token and
    "\\n\\n" as one (Idefics3's does): per tile ``<fake_token_around_image>``, a
    ``<row_r_col_c>`` tag and ``image_seq_len`` ``<image>`` tokens (four times as many with
    ``fine_route``), a newline per tile row, and with more than one tile the thumbnail's
    ``<fake_token_around_image><global-img>``, its tokens and ``<fake_token_around_image>``.
    """

    crop_to_patches: bool
    min_patches: int
    max_patches: int
    dense: DenseRule
    fine_route: bool
    image_seq_len: int

    batch_layout: ClassVar[str] = "pad_samples"
    flat_is_one_sample: ClassVar[bool] = True
    # Arrays with return_tensors=None too (rows and cols are lists either way).
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({})
    skip_tensor_conversion: ClassVar[tuple[str, ...]] = ("rows", "cols")

    def tile(self) -> tuple[int, int]:
        return self.size["height"], self.size["width"]

    def max_tiles(self, height: int, width: int) -> int:
        """``get_page_max_patches`` for a page of this size."""
        return get_page_max_patches(
            height,
            width,
            self.tile(),
            self.crop_to_patches,
            self.min_patches,
            self.max_patches,
            self.dense,
        )

    def grid(self, height: int, width: int) -> tuple[int, int]:
        """(rows, columns) the processor is told: ``get_page_tile_grid``."""
        max_patches = self.max_tiles(height, width)
        if max_patches <= 1:
            return 1, 1
        columns, rows = get_optimal_tiled_canvas(
            (height, width), self.tile(), self.min_patches, max_patches
        )
        return rows, columns

    def count_tokens(self, height: int, width: int) -> int:
        """Replaced per image in :meth:`plan` (the count needs the grid)."""
        return 0

    def tokens(self, rows: int, columns: int) -> int:
        """``GraniteDoclingProcessor.replace_image_token``'s placeholder, in tokens."""
        per_tile = self.image_seq_len * 4 if self.fine_route else self.image_seq_len
        count = rows * (columns * (per_tile + 2) + 1)
        if rows * columns > 1:
            # "\n<fake><global-img>", its tokens, "<fake>": the "\n" joins the last row's.
            count += per_tile + 3
        return count

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``GraniteDoclingImageProcessorPil._preprocess`` and
        ``crop_image_to_patches`` for one page: the crop picks its own grid, among
        ``min(min_patches, max_tiles)`` to ``max_tiles`` tiles."""
        plan = super().plan(height, width)
        max_tiles = self.max_tiles(height, width)
        tile_h, tile_w = self.tile()
        columns, rows = get_optimal_tiled_canvas(
            (height, width), (tile_h, tile_w), min(self.min_patches, max_tiles), max_tiles
        )
        windows = tuple(
            CropBox(r * tile_h, c * tile_w, tile_h, tile_w)
            for r in range(rows)
            for c in range(columns)
        )
        canvas = (tile_h * rows, tile_w * columns)
        views: tuple[View, ...] = (
            View(resize=resizer(self.backend, canvas, self.resample), out=windows),
        )
        if len(windows) > 1:
            thumbnail = resizer(self.backend, (tile_h, tile_w), self.resample)
            views += (View(resize=thumbnail, out=(CropBox(0, 0, tile_h, tile_w),)),)
        n = sum(len(view.windows) for view in views)
        return replace(
            plan,
            do_resize=True,
            resize_size=canvas,
            output_shapes=MappingProxyType({"pixel_values": (n, 3, tile_h, tile_w)}),
            num_image_tokens=self.tokens(*self.grid(height, width)),
            views=views,
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """HF's arithmetic; with rescale and normalise both off the torchvision class pads
        the uint8 tiles, the PIL class packs them into a float32 array."""
        if plan.do_rescale or plan.do_normalize or plan.backend == "torchvision":
            return super().tables(plan)
        return float32_tables(plan)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``pixel_attention_mask`` (samples, tiles) bool, True on each real tile;
        ``tile_fine_mask`` (samples,) bool with ``fine_route``; ``rows`` and ``cols`` as
        nested lists, one list per sample (the torchvision class's stop at the last sample
        with images, as Mllama's aspect ratios do: :func:`~mmfast.models.mllama.last_sample`)."""
        starts = list(itertools.pairwise([0, *itertools.accumulate(sample_sizes)]))
        tiles = [sum(p.output_shapes["pixel_values"][0] for p in plans[a:b]) for a, b in starts]
        mask = np.zeros((len(sample_sizes), max(tiles)), bool)
        for i, n in enumerate(tiles):
            mask[i, :n] = True
        out: dict[str, Any] = {"pixel_attention_mask": mask}
        if self.fine_route:
            out["tile_fine_mask"] = np.ones(len(sample_sizes), bool)
        if self.backend == "torchvision":
            # Its second reorder_images drops the samples without images at the end.
            starts = starts[: last_sample(sample_sizes)]
        grids = [[self.grid(p.height, p.width) for p in plans[a:b]] for a, b in starts]
        out["rows"] = [[rows for rows, _ in sample] for sample in grids]
        out["cols"] = [[cols for _, cols in sample] for sample in grids]
        return out


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> GraniteDoclingConfig:
    """Mirrors ``GraniteDoclingImageProcessorPil``'s class defaults and the processor's
    ``image_seq_len`` (default 64). Its ``_preprocess`` always tiles (one tile without
    ``crop_to_patches``), so ``do_resize`` and the centre crop are not read."""
    fields = pil_backend_fields(
        cfg,
        size={"height": 512, "width": 512},
        default_to_square=True,
        resample=BICUBIC,
        mean=OPENAI_CLIP_MEAN,
        std=OPENAI_CLIP_STD,
        pads=True,
    )
    if set(fields["size"]) != {"height", "width"}:
        raise cfg.error("size", "a {height, width} tile size", dict(fields["size"]))
    fields["do_resize"] = True
    fields["do_center_crop"] = False
    dense = DenseRule(
        max_patches=cfg.int_in("dense_max_patches", 0, 0, MAX_TILES),
        max_scale=cfg.number("dense_max_scale", 0.0),
        min_aspect=cfg.number("dense_min_aspect", 0.0),
        max_aspect=cfg.number("dense_max_aspect", 0.0),
    )
    return GraniteDoclingConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **fields,
        crop_to_patches=cfg.flag("crop_to_patches", True),
        min_patches=cfg.positive_int("min_patches", 1, MAX_TILES),
        max_patches=cfg.positive_int("max_patches", 32, MAX_TILES),
        dense=dense,
        fine_route=cfg.flag("fine_route", False),
        image_seq_len=processor.int_in("image_seq_len", 64, 0, MAX_INT),
    )


registry.register(
    registry.Family(
        name="granite_docling",
        processor_types=("GraniteDoclingImageProcessor",),
        model_types={"granite_docling": "GraniteDoclingImageProcessor"},
        build=_build,
        kwargs=frozenset(
            {
                "crop_to_patches",
                "min_patches",
                "max_patches",
                "fine_route",
                "dense_max_patches",
                "dense_max_scale",
                "dense_min_aspect",
                "dense_max_aspect",
            }
        ),
        processor_kwargs=frozenset({"image_seq_len"}),
        processor_classes={"GraniteDoclingProcessor": "granite_docling"},
        hf_pil="granite_docling.image_processing_pil_granite_docling.GraniteDoclingImageProcessorPil",
        hf_torchvision="granite_docling.image_processing_granite_docling.GraniteDoclingImageProcessor",
    )
)

# ibm-granite/granite-for-docling-500m (the checkpoint transformers' docs name; its pull request
# names docling-project/granite-for-docling-500m): no public copy of its files was found. These
# are GraniteDoclingImageProcessor's class defaults (512 tiles, 1 to 32 of them, the spread rule
# off, coarse route) and GraniteDoclingProcessor's image_seq_len 64; unconfirmed.
registry.register_builtin(
    "ibm-granite/granite-for-docling-500m",
    "granite_docling",
    {
        "crop_to_patches": True,
        "dense_max_aspect": 0.0,
        "dense_max_patches": 0,
        "dense_max_scale": 0.0,
        "dense_min_aspect": 0.0,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "fine_route": False,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "GraniteDoclingImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "max_patches": 32,
        "min_patches": 1,
        "processor_class": "GraniteDoclingProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 512, "width": 512},
    },
    {"image_seq_len": 64, "processor_class": "GraniteDoclingProcessor"},
)
