"""Command A Vision: ``Cohere2VisionImageProcessor`` (transformers 5.24; torchvision only).

With ``crop_to_patches`` (the class default) the image is resized to the grid of ``size`` tiles
that needs the least upscaling (else the least downscaling) among the grids of at most
``max_patches`` tiles, and cut into tiles; with more than one tile a thumbnail (the whole image
squashed to one tile) follows them. Every view is then resized to ``size`` (a no-op for tiles)
and normalised. ``num_patches`` counts each image's tiles, thumbnail included.
"""

from __future__ import annotations

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
    BOX,
    HAMMING,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    TORCH_RESAMPLE,
    ImagePlan,
    Resize,
    View,
    fused_tables,
)
from mmfast.models.config import MAX_TILES, Fields, Source
from mmfast.models.geometry import CropBox
from mmfast.models.pil_backend import PilBackendConfig, pil_backend_fields

__all__ = ["Cohere2VisionConfig", "get_all_supported_aspect_ratios", "get_optimal_tiled_canvas"]


@lru_cache(maxsize=16)
def get_all_supported_aspect_ratios(max_image_tiles: int) -> list[tuple[int, int]]:
    """Every (columns, rows) grid of at most ``max_image_tiles`` tiles, width-major.

    Mirrors ``image_processing_cohere2_vision.get_all_supported_aspect_ratios``.
    """
    return [
        (width, height)
        for width in range(1, max_image_tiles + 1)
        for height in range(1, max_image_tiles + 1)
        if width * height <= max_image_tiles
    ]


def get_optimal_tiled_canvas(
    original_image_size: tuple[int, int], target_tile_size: tuple[int, int], max_image_tiles: int
) -> tuple[int, int]:
    """The (columns, rows) grid an image is resized to.

    Mirrors ``image_processing_cohere2_vision.get_optimal_tiled_canvas`` (whose
    ``min_image_tiles`` is unused): each grid (by tile count, stably) scales the image by
    ``min(columns * tile / width, rows * tile / height)``, the tile's height for both sides;
    when every scale is below 1 the largest wins, else the smallest of those at least 1, the
    first on ties (``argmax``/``argmin``). float64 like numpy's.
    """
    grids = sorted(get_all_supported_aspect_ratios(max_image_tiles), key=lambda g: g[0] * g[1])
    height, width = original_image_size
    tile = target_tile_size[0]
    scales = [min(columns * tile / width, rows * tile / height) for columns, rows in grids]
    if all(scale < 1 for scale in scales):
        return grids[scales.index(max(scales))]
    upscales = [10e9 if scale < 1.0 else scale for scale in scales]
    return grids[upscales.index(min(upscales))]


@dataclass(frozen=True)
class Cohere2VisionConfig(PilBackendConfig):
    """Settings of ``Cohere2VisionImageProcessor`` plus the ``patch_size`` attribute that
    ``Cohere2VisionProcessor`` counts tokens with.

    ``num_image_tokens``: Cohere2VisionProcessor's ``<|START_OF_IMG|>``, then per tile
    ``patch_size ** 2`` ``<|IMG_PATCH|>`` tokens and an ``<|IMG_LINE_BREAK|>``, then
    ``<|END_OF_IMG|>`` (2 + 257 per tile for the checkpoint).

    transformers has only the torchvision class: both backends compute it (torchvision's
    resizes and fused normalisation), as for Llama 4.
    """

    crop_to_patches: bool
    max_patches: int
    patch_size: int

    batch_layout: ClassVar[str] = "concat"
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_values": "rows", "num_patches": "ints"}
    )

    def tile(self) -> tuple[int, int]:
        """(height, width) of a tile: ``size``."""
        return self.size["height"], self.size["width"]

    def tiles(self, height: int, width: int) -> tuple[int, int]:
        """(columns, rows) of the tile grid."""
        return get_optimal_tiled_canvas((height, width), self.tile(), self.max_patches)

    def count_tokens(self, height: int, width: int) -> int:
        """Tokens for a one-view image (replaced per image in :meth:`plan`)."""
        return 2 + (self.patch_size**2 + 1)

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Cohere2VisionImageProcessor._preprocess`` and ``crop_image_to_patches``
        for one image."""
        # The only class is torchvision's: its resizes whatever backend the config names.
        config = replace(self, backend="torchvision")
        plan = PilBackendConfig.plan(config, height, width)
        views = plan.views
        item = plan.output_shapes["pixel_values"]
        if self.crop_to_patches:
            columns, rows = self.tiles(height, width)
            tile_h, tile_w = self.tile()
            windows = tuple(
                CropBox(r * tile_h, c * tile_w, tile_h, tile_w)
                for r in range(rows)
                for c in range(columns)
            )
            # Each view's later resize to size leaves it as it is.
            item = (3, tile_h, tile_w)
            canvas = (tile_h * rows, tile_w * columns)
            views = (View(resize=Resize(canvas, self.resample, "torch"), out=windows),)
            if len(windows) > 1:
                thumbnail = Resize((tile_h, tile_w), self.resample, "torch")
                views += (View(resize=thumbnail, out=(CropBox(0, 0, tile_h, tile_w),)),)
        num_patches = sum(len(view.windows) for view in views)
        return replace(
            plan,
            backend=self.backend,
            output_shapes=MappingProxyType(
                {"pixel_values": (num_patches, *item), "num_patches": ()}
            ),
            num_image_tokens=2 + num_patches * (self.patch_size**2 + 1),
            views=views,
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """The torchvision class's fused arithmetic (its uint8 pixels with both steps off),
        whatever backend the config names."""
        return fused_tables(plan)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``num_patches``: (B,) int64 tiles per image, thumbnail included."""
        return {
            "num_patches": np.array([p.output_shapes["pixel_values"][0] for p in plans], np.int64)
        }


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> Cohere2VisionConfig:
    """Mirrors ``Cohere2VisionImageProcessor``'s class defaults; ``patch_size`` is a plain
    attribute a checkpoint's file may set (default 16), which the processor reads."""
    fields = pil_backend_fields(
        cfg,
        size={"height": 512, "width": 512},
        default_to_square=True,
        resample=BICUBIC,
        mean=OPENAI_CLIP_MEAN,
        std=OPENAI_CLIP_STD,
        # Its _preprocess neither centre-crops nor pads, whatever the config says.
        pads=True,
    )
    fields["do_center_crop"] = False
    if fields["resample"] in (BOX, HAMMING):
        raise cfg.error("resample", TORCH_RESAMPLE, fields["resample"])
    crop_to_patches = cfg.flag("crop_to_patches", True)
    if crop_to_patches and set(fields["size"]) != {"height", "width"}:
        raise cfg.error(
            "size", "a {height, width} tile size (crop_to_patches is on)", dict(fields["size"])
        )
    cfg.positive_int("min_patches", 1, MAX_TILES)  # read and checked, unused by the class
    return Cohere2VisionConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **fields,
        crop_to_patches=crop_to_patches,
        max_patches=cfg.positive_int("max_patches", 12, MAX_TILES),
        patch_size=cfg.positive_int("patch_size", 16),
    )


registry.register(
    registry.Family(
        name="cohere2_vision",
        processor_types=("Cohere2VisionImageProcessor",),
        model_types={"cohere2_vision": "Cohere2VisionImageProcessor"},
        build=_build,
        kwargs=frozenset({"crop_to_patches", "min_patches", "max_patches"}),
        processor_classes={"Cohere2VisionProcessor": "cohere2_vision"},
        hf_torchvision=(
            "cohere2_vision.image_processing_cohere2_vision.Cohere2VisionImageProcessor"
        ),
    )
)

# CohereLabs/command-a-vision-07-2025: no public copy of its preprocessor_config.json was found
# (the repository is gated). These are Cohere2VisionImageProcessor's class defaults, which the
# model's documentation describes (512x512 tiles, up to 12 and a thumbnail, 256 tokens a tile);
# unconfirmed, the CLIP mean/std above all (its SigLIP2 tower may use 0.5).
registry.register_builtin(
    "CohereLabs/command-a-vision-07-2025",
    "cohere2_vision",
    {
        "crop_to_patches": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "Cohere2VisionImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "max_patches": 12,
        "min_patches": 1,
        "processor_class": "Cohere2VisionProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 512, "width": 512},
    },
)
