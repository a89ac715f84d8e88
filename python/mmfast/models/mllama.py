"""Llama 3.2 Vision: ``MllamaImageProcessor`` (transformers 5.24).

An image is fitted without distortion into the best canvas of at most ``max_image_tiles``
square tiles (upscaled to one tile at most), resized, padded with black at the bottom and right
and cut into tiles. A flat list of images is one prompt's; the batch is
(samples, images, ``max_image_tiles``, 3, tile, tile), zero-filled for the tiles and images a
sample lacks, with ``aspect_ratio_ids`` (the grid's place among the supported ones, 0 for a
missing image), ``aspect_ratio_mask`` and ``num_tiles``. The model attends to the image by
cross-attention: ``MllamaProcessor`` leaves one ``<|image|>`` token per image in the prompt.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BILINEAR,
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RGB,
    ImagePlan,
    ModelConfig,
    TileGrid,
    View,
    check_image_size,
    float32_tables,
    plan_constants,
    resizer,
)
from mmfast.models.config import MAX_TILES, Fields, Source
from mmfast.models.geometry import CropBox

__all__ = [
    "MllamaConfig",
    "get_all_supported_aspect_ratios",
    "get_image_size_fit_to_canvas",
    "get_optimal_tiled_canvas",
    "last_sample",
]


@lru_cache(maxsize=16)
def get_all_supported_aspect_ratios(max_image_tiles: int) -> list[tuple[int, int]]:
    """Every grid of at most ``max_image_tiles`` tiles, first side major.

    Mirrors ``image_processing_mllama.get_all_supported_aspect_ratios``; HF's callers read a
    pair as (rows, columns) of the canvas, and ``aspect_ratio_ids`` index this list.
    """
    return [
        (width, height)
        for width in range(1, max_image_tiles + 1)
        for height in range(1, max_image_tiles + 1)
        if width * height <= max_image_tiles
    ]


# Keyed by image size: bounded, as a server sees sizes without end.
@lru_cache(maxsize=1024)
def get_optimal_tiled_canvas(
    image_height: int, image_width: int, max_image_tiles: int, tile_size: int
) -> tuple[int, int]:
    """The (height, width) canvas an image is fitted into.

    Mirrors ``image_processing_mllama.get_optimal_tiled_canvas``: each canvas's scale is its
    limiting side's (float64); the smallest scale of at least 1 if any, else the largest
    below 1; among canvases with that scale the smallest area, the first on ties.
    """
    canvases = [
        (a * tile_size, b * tile_size) for a, b in get_all_supported_aspect_ratios(max_image_tiles)
    ]
    scales = [min(h / image_height, w / image_width) for h, w in canvases]
    upscales = [s for s in scales if s >= 1]
    selected = min(upscales) if upscales else max(s for s in scales if s < 1)
    chosen = [c for c, s in zip(canvases, scales, strict=True) if s == selected]
    areas = [h * w for h, w in chosen]
    return chosen[areas.index(min(areas))]


def get_image_size_fit_to_canvas(
    image_height: int, image_width: int, canvas_height: int, canvas_width: int, tile_size: int
) -> tuple[int, int]:
    """The (height, width) an image is resized to inside its canvas: each side clipped to
    [tile, canvas side], then the largest undistorted fit (``math.floor``, at least 1).

    Mirrors ``image_processing_mllama.get_image_size_fit_to_canvas``.
    """
    target_width = min(max(image_width, tile_size), canvas_width)
    target_height = min(max(image_height, tile_size), canvas_height)
    scale_h = target_height / image_height
    scale_w = target_width / image_width
    if scale_w < scale_h:
        new_width = target_width
        new_height = min(math.floor(image_height * scale_w) or 1, target_height)
    else:
        new_height = target_height
        new_width = min(math.floor(image_width * scale_h) or 1, target_width)
    return new_height, new_width


@dataclass(frozen=True)
class MllamaConfig(ModelConfig):
    """Settings of ``MllamaImageProcessor`` (square tiles of ``tile_size``)."""

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
    max_image_tiles: int

    # Which transformers backend the plan matches: "pil" or "torchvision".
    backend: str = field(default="pil", kw_only=True)

    # Each sample's images stacked, each image's tiles padded to max_image_tiles
    # (batch_shape), zero-filled.
    batch_layout: ClassVar[str] = "pad_samples"
    flat_is_one_sample: ClassVar[bool] = True

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``MllamaImageProcessorPil._preprocess`` for one image: ``resize`` (to the
        canvas fit), ``pad`` (uint8 zeros to the canvas) and ``split_to_tiles_np``, row-major:
        tile windows over the resized image, black past it."""
        check_image_size(height, width)
        t = self.tile_size
        canvas = get_optimal_tiled_canvas(height, width, self.max_image_tiles, t)
        resized = get_image_size_fit_to_canvas(height, width, *canvas, t)
        rows, columns = canvas[0] // t, canvas[1] // t
        windows = tuple(CropBox(r * t, c * t, t, t) for r in range(rows) for c in range(columns))
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
            compute_dtype="float32",
            patches=None,
            tiles=TileGrid(rows, columns, (t, t), False, 1),
            output_shapes=MappingProxyType(
                {
                    "pixel_values": (rows * columns, 3, t, t),
                    "aspect_ratio_ids": (),
                    "aspect_ratio_mask": (self.max_image_tiles,),
                    "num_tiles": (),
                }
            ),
            # MllamaProcessor.replace_image_token keeps the one <|image|> token.
            num_image_tokens=1,
            views=(View(resize=resizer(self.backend, resized, self.resample), out=windows),),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """HF's arithmetic, always into float32 (both classes pack the tiles into a float32
        array: with both steps off, the uint8 values as floats)."""
        if plan.do_rescale or plan.do_normalize:
            return super().tables(plan)
        return float32_tables(plan)

    def batch_shape(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> tuple[tuple[int, ...], list[int]]:
        """(samples, the most images in a sample, ``max_image_tiles``, 3, tile, tile):
        ``pack_images``' zero-filled array; image j of sample i starts at its [i, j, 0]."""
        images = max(sample_sizes)
        t = self.tile_size
        slot = self.max_image_tiles * 3 * t * t
        offsets = [(i * images + j) * slot for i, n in enumerate(sample_sizes) for j in range(n)]
        return (len(sample_sizes), images, self.max_image_tiles, 3, t, t), offsets

    def finish_batch(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> Sequence[ImagePlan]:
        """The plans as they are, once the torchvision class could run the batch: its
        ``pad_batches_and_tiles`` reads the first sample's first image (IndexError)."""
        if self.backend == "torchvision" and sample_sizes[0] == 0:
            raise MmfastError(
                "images: transformers' MllamaImageProcessor fails on a batch whose first sample "
                "has no images (IndexError); put a sample with images first"
            )
        return plans

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``aspect_ratio_ids`` (samples, images) int64: each image's grid's index in
        :func:`get_all_supported_aspect_ratios` plus 1, 0 for a missing image;
        ``aspect_ratio_mask`` (samples, images, ``max_image_tiles``) int64: 1 on each image's
        tiles and on every first tile; ``num_tiles``: each sample's tile counts, as lists.

        The torchvision class has no rows in the first two for the samples without images at
        the end of the batch: its second ``reorder_images`` of the batch's grouping has lost
        the sample count (``_reconstruct_nested_structure`` pops it)."""
        images = max(sample_sizes)
        samples = len(sample_sizes) if self.backend == "pil" else last_sample(sample_sizes)
        supported = get_all_supported_aspect_ratios(self.max_image_tiles)
        ids = np.zeros((samples, images), np.int64)
        mask = np.zeros((samples, images, self.max_image_tiles), np.int64)
        mask[:, :, 0] = 1
        num_tiles: list[list[int]] = []
        starts = itertools.pairwise([0, *itertools.accumulate(sample_sizes)])
        for i, (a, b) in enumerate(starts):
            num_tiles.append([])
            for j, plan in enumerate(plans[a:b]):
                assert plan.tiles is not None
                grid = (plan.tiles.tiles_h, plan.tiles.tiles_w)
                ids[i, j] = supported.index(grid) + 1
                mask[i, j, : grid[0] * grid[1]] = 1
                num_tiles[-1].append(grid[0] * grid[1])
        return {"aspect_ratio_ids": ids, "aspect_ratio_mask": mask, "num_tiles": num_tiles}


def last_sample(sample_sizes: Sequence[int]) -> int:
    """The samples up to the last one with images: what transformers' torchvision classes
    rebuild from a nested grouping a second time."""
    return max(i + 1 for i, n in enumerate(sample_sizes) if n)


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> MllamaConfig:
    """Mirrors ``MllamaImageProcessorPil``'s class defaults and
    ``_validate_mllama_preprocess_arguments`` (resizing and padding on, a square tile size,
    a positive ``max_image_tiles``), which transformers runs at init and on every call."""
    size_value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"height": 224, "width": 224} if size_value is None else size_value,
        cfg.flag("default_to_square", True),
    )
    if size.keys() != {"height", "width"} or size["height"] != size["width"]:
        raise cfg.error("size", "a square {height, width} tile size", size)
    for name in ("do_resize", "do_pad"):
        if not cfg.flag(name, True):
            raise cfg.error(name, "true (MllamaImageProcessor always resizes and pads)", False)
    norm = cfg.normalization(IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD)
    return MllamaConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        tile_size=size["height"],
        resample=cfg.resample(BILINEAR),
        **norm.fields(),
        max_image_tiles=cfg.positive_int("max_image_tiles", 4, MAX_TILES),
    )


registry.register(
    registry.Family(
        name="mllama",
        processor_types=("MllamaImageProcessor",),
        model_types={"mllama": "MllamaImageProcessor"},
        build=_build,
        kwargs=frozenset({"max_image_tiles"}),
        # MllamaProcessor declares image_kwargs (sic), which ProcessorMixin never reads: no
        # image defaults of its own.
        processor_classes={"MllamaProcessor": "mllama"},
        hf_pil="mllama.image_processing_pil_mllama.MllamaImageProcessorPil",
        hf_torchvision="mllama.image_processing_mllama.MllamaImageProcessor",
    )
)

# meta-llama/Llama-3.2-11B-Vision-Instruct: the file verbatim (every key below) in two sets of
# notes by a llama.cpp contributor who converted the checkpoint. The base model's file was not
# seen; it is taken to be the same (the same vision tower and preprocessing).
_MLLAMA = {
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_pad": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": list(OPENAI_CLIP_MEAN),
    "image_processor_type": "MllamaImageProcessor",
    "image_std": list(OPENAI_CLIP_STD),
    "max_image_tiles": 4,
    "resample": BILINEAR,
    "rescale_factor": 0.00392156862745098,
    "size": {"height": 560, "width": 560},
}
for _model_id in ("meta-llama/Llama-3.2-11B-Vision-Instruct", "meta-llama/Llama-3.2-11B-Vision"):
    registry.register_builtin(_model_id, "mllama", _MLLAMA)
