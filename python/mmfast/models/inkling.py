"""Inkling: ``InklingImageProcessor`` (transformers 5.24, model type ``inkling_mm_model``;
torchvision only) and ``InklingProcessor``'s token count.

The image, optionally rescaled by ``rescale_image_frac`` (Lanczos), is cut into ``size``
squares in raster order over ``ceil(height / side)`` rows and ``width // side + 1`` columns
(one column more than a whole number of squares: a width that is a multiple of the side gets a
column of padding only); every square is padded at the bottom and right with -1 on the 0-255
scale, a value no byte has, normalised, and written channel-last twice (two time slots):
``pixel_values`` (squares, 2, side, side, 3). The engine writes the -1 as each table's outside
value (a 257th entry). One image token per square.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    DEFAULT_MAX_PIXELS,
    LANCZOS,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RGB,
    HwcPatches,
    ImagePlan,
    ModelConfig,
    Resize,
    View,
    check_image_size,
    fused_values,
    plan_constants,
)
from mmfast.models.config import MAX_INT, Fields, Source
from mmfast.models.geometry import CropBox
from mmfast.models.perception_lm import refuse_box_and_hamming

__all__ = ["InklingConfig", "inkling_rescaled_size", "padded_tables", "square_side"]

# The value transformers pads Inkling's squares with, on the 0-255 scale before normalising.
PAD_VALUE = np.float32(-1.0)


def padded_tables(plan: Any) -> NDArray[np.float32]:
    """(3, 257) float32: the torchvision backend's arithmetic on a float image for every byte,
    then for the -1 padding (the engine's outside value): ``rescale_and_normalize`` of the
    float tensor, or the float values themselves with both steps off."""
    values = np.append(np.arange(256, dtype=np.float32), PAD_VALUE)
    return fused_values(plan, values)


def inkling_rescaled_size(
    height: int, width: int, frac: float | None, max_upscaled_long_edge: int | None
) -> tuple[int, int]:
    """The size ``InklingImageProcessor._preprocess`` resizes an image to: the long edge times
    ``frac``, at most ``max(max_upscaled_long_edge, long edge)``, each side rounded half up
    (``floor(x + 0.5)``); the image's own size without ``frac`` or at a ratio of 1."""
    if frac is None:
        return height, width
    long_edge = max(height, width)
    target = long_edge * frac
    if max_upscaled_long_edge is not None:
        target = min(target, max(max_upscaled_long_edge, long_edge))
    ratio = target / long_edge
    if ratio == 1.0:
        return height, width
    return math.floor(height * ratio + 0.5), math.floor(width * ratio + 0.5)


def square_side(cfg: Fields, default: int, default_to_square: bool) -> tuple[int, int]:
    """(height, width) of ``size``: transformers reads ``size.height`` and ``size.width``, of
    an int read as a square or a shortest edge (which has neither, and is refused) per the
    settings' ``default_to_square``, else the class's."""
    value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"height": default, "width": default} if value is None else value,
        cfg.flag("default_to_square", default_to_square),
    )
    if size.keys() != {"height", "width"}:
        raise cfg.error("size", "a {height, width} patch size", size)
    return size["height"], size["width"]


@dataclass(frozen=True)
class InklingConfig(ModelConfig):
    """Settings of ``InklingImageProcessor``: ``num_image_tokens`` is ``InklingProcessor``'s
    count, one image token per square (``num_patches``)."""

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    side: int
    rescale_image_frac: float | None
    rescale_image_max_upscaled_long_edge: int | None

    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "concat"
    # Values written after normalising: -1 padding, which no byte maps to.
    raw_pixels: ClassVar[bool] = False

    def grid(self, height: int, width: int) -> tuple[tuple[int, int], int, int]:
        """The size an image is resized to, and the rows (``ceil(height / side)``) and
        columns (``width // side + 1``, as transformers counts them) of its squares."""
        check_image_size(height, width)
        size = inkling_rescaled_size(
            height, width, self.rescale_image_frac, self.rescale_image_max_upscaled_long_edge
        )
        if min(size) < 1:
            raise MmfastError(
                f"image size: rescale_image_frac={self.rescale_image_frac} takes a "
                f"{height}x{width} image to {size[0]}x{size[1]} (transformers cannot resize to it)"
            )
        return size, -(-size[0] // self.side), size[1] // self.side + 1

    def num_image_tokens(self, height: int, width: int) -> int:
        """One token a square, counted without the plan's windows (a square each)."""
        _, rows, columns = self.grid(height, width)
        return rows * columns

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``InklingImageProcessor._preprocess`` for one image."""
        size, rows, columns = self.grid(height, width)
        if size[0] * size[1] > DEFAULT_MAX_PIXELS:
            # Before a window a square: 12.5 billion of them for 100000 times a 40x50 image.
            raise MmfastError(
                f"rescale_image_frac: expected intermediate images of at most "
                f"{DEFAULT_MAX_PIXELS} pixels, got a resize of a {height}x{width} image to "
                f"{size[0]}x{size[1]}"
            )
        p = self.side
        squares = [CropBox(r * p, c * p, p, p) for r in range(rows) for c in range(columns)]
        # Each square twice: the two time slots of (squares, 2, side, side, 3).
        windows = tuple(box for box in squares for _ in range(2))
        resize = Resize(size, self.resample, "torch") if size != (height, width) else None
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=resize is not None,
            resize_size=size,
            resample=self.resample,
            crop=None,
            canvas_size=(rows * p, columns * p),
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType(
                {"pixel_values": (len(squares), 2, p, p, 3), "num_patches": ()}
            ),
            num_image_tokens=len(squares),
            views=(View(resize=resize, out=HwcPatches(p, windows)),),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """:func:`padded_tables`: float32 even with both steps off."""
        return padded_tables(plan)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``num_patches``: (B,) int64 squares per image."""
        counts = [p.output_shapes["pixel_values"][0] for p in plans]
        return {"num_patches": np.array(counts, np.int64)}


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> InklingConfig:
    """Mirrors ``InklingImageProcessor``'s class defaults and ``_validate_preprocess_kwargs``
    (``do_resize`` on, a square ``size``)."""
    if not cfg.flag("do_resize", True):
        raise cfg.error("do_resize", "true (transformers refuses false for this model)", False)
    height, width = square_side(cfg, 40, default_to_square=False)
    if height != width:
        raise cfg.error("size", "a square size (transformers resizes only to one)", [height, width])
    frac = cfg.raw("rescale_image_frac")
    if frac is not None:
        frac = cfg.number("rescale_image_frac", 1.0)
        if frac <= 0:
            raise cfg.error("rescale_image_frac", "a positive number or null", frac)
    edge = cfg.raw("rescale_image_max_upscaled_long_edge")
    norm = cfg.normalization(OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)
    return InklingConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        resample=refuse_box_and_hamming(cfg, cfg.resample(LANCZOS)),
        **norm.fields(),
        side=height,
        rescale_image_frac=frac,
        # A file's null is kept (no cap); a missing value is the class's 2048.
        rescale_image_max_upscaled_long_edge=(
            None
            if "rescale_image_max_upscaled_long_edge" in source.preprocessor and edge is None
            else cfg.positive_int("rescale_image_max_upscaled_long_edge", 2048, MAX_INT)
        ),
    )


registry.register(
    registry.Family(
        name="inkling",
        processor_types=("InklingImageProcessor",),
        model_types={"inkling_mm_model": "InklingImageProcessor"},
        build=_build,
        kwargs=frozenset({"rescale_image_frac", "rescale_image_max_upscaled_long_edge"}),
        processor_classes={"InklingProcessor": "inkling_mm_model"},
        hf_torchvision="inkling.image_processing_inkling.InklingImageProcessor",
    )
)

# thinkingmachines/Inkling: its processor_config.json holds the image processor's settings
# (a port that reads it takes only image_mean, image_std and the image token from it); the
# 40-pixel squares, two time slots and CLIP mean/std agree across the SGLang, vLLM and MLX
# ports. The file itself was not seen: the other values are InklingImageProcessor's class
# defaults. vLLM's and SGLang's own processors rescale by 2.0 up to a 2048-pixel long edge
# (rescale_image_frac=2.0 gives that here); transformers' class default does not rescale.
registry.register_builtin(
    "thinkingmachines/Inkling",
    "inkling_mm_model",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "InklingImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "processor_class": "InklingProcessor",
        "resample": LANCZOS,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 40, "width": 40},
    },
)
