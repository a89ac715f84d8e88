"""Inkling 2: ``Inkling2ImageProcessor`` (transformers 5.24, model types ``inkling2`` and
``inkling2_loop``; torchvision only) and ``Inkling2Processor``'s token count.

No resize: the image is padded at the bottom and right to whole ``size`` squares with -1 on
the 0-255 scale (the engine's outside value), normalised, and cut into channel-last squares in
raster order, ``pixel_values`` (squares, height, width, 3), with ``image_grid_thw`` (1, rows,
columns) per image. A PIL image with transparency is composited onto an 8-pixel checkerboard
of greys 204 and 153 in integers (as an RGBA array is): :func:`mmfast.image.checkerboard_rgb`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from mmfast.models import registry
from mmfast.models.base import (
    HALF,
    RGB,
    HwcPatches,
    ImagePlan,
    ModelConfig,
    View,
    check_image_size,
    plan_constants,
)
from mmfast.models.config import Fields, Source
from mmfast.models.geometry import CropBox
from mmfast.models.inkling import padded_tables, square_side

__all__ = ["Inkling2Config"]


@dataclass(frozen=True)
class Inkling2Config(ModelConfig):
    """Settings of ``Inkling2ImageProcessor``: ``num_image_tokens`` is ``Inkling2Processor``'s
    count, ``image_grid_thw.prod()``, one image token per square."""

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    patch: tuple[int, int]

    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "concat"
    # Values written after normalising: -1 padding, which no byte maps to.
    raw_pixels: ClassVar[bool] = False

    @property
    def pil_convert(self) -> str:
        """PIL images with transparency go onto Inkling 2's checkerboard."""
        return "checkerboard"

    def grid(self, height: int, width: int) -> tuple[int, int]:
        """(rows, columns) of squares: the image padded up to whole ones."""
        return -(-height // self.patch[0]), -(-width // self.patch[1])

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Inkling2ImageProcessor._preprocess`` for one image."""
        check_image_size(height, width)
        ph, pw = self.patch
        rows, columns = self.grid(height, width)
        canvas = (rows * ph, columns * pw)
        if ph == pw:
            # The padded image cut into squares in raster order: one window past the pixels.
            out = HwcPatches(ph, (CropBox(0, 0, *canvas),))
        else:
            # One window per rectangle, each written row by row (1-pixel squares).
            out = HwcPatches(
                1,
                tuple(CropBox(r * ph, c * pw, ph, pw) for r in range(rows) for c in range(columns)),
            )
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=False,
            resize_size=(height, width),
            resample=0,
            crop=None,
            canvas_size=canvas,
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType(
                {"pixel_values": (rows * columns, ph, pw, 3), "image_grid_thw": (3,)}
            ),
            num_image_tokens=rows * columns,
            views=(View(out=out),),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """:func:`~mmfast.models.inkling.padded_tables`: float32 even with both steps off."""
        return padded_tables(plan)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_grid_thw``: (B, 3) int64 (1, rows, columns)."""
        grids = [(1, *self.grid(p.height, p.width)) for p in plans]
        return {"image_grid_thw": np.array(grids, np.int64).reshape(-1, 3)}


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Inkling2Config:
    """Mirrors ``Inkling2ImageProcessor``'s class defaults (it never resizes)."""
    norm = cfg.normalization(HALF, HALF)
    return Inkling2Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        **norm.fields(),
        patch=square_side(cfg, 40, default_to_square=True),
    )


registry.register(
    registry.Family(
        name="inkling2",
        processor_types=("Inkling2ImageProcessor",),
        model_types={
            "inkling2": "Inkling2ImageProcessor",
            "inkling2_loop": "Inkling2ImageProcessor",
        },
        build=_build,
        processor_classes={"Inkling2Processor": "inkling2"},
        hf_torchvision="inkling2.image_processing_inkling2.Inkling2ImageProcessor",
    )
)
