"""Apertus 1.5: ``Apertus1p5ImageProcessor`` (transformers 5.24; torchvision only).

Each image is resized (torchvision) to Qwen2-VL's ``smart_resize`` size with ``spatial_factor``
as the factor and ``size["min_pixels"]``/``size["max_pixels"]`` as the area bounds, normalised
(``x / 127.5 - 1`` with the default mean/std 0.5), and zero-padded *after* normalising, at the
bottom and right, to the batch's largest height and width (``do_pad``). ``image_sizes`` gives
each image's size before that padding. Each ``spatial_factor`` square of it becomes one discrete
code of the vision tokenizer.

transformers has only the torchvision class: the plans always match it, under either backend
name (as for Llama 4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    HALF,
    RGB,
    Canvas,
    ImagePlan,
    ModelConfig,
    Resize,
    View,
    check_image_size,
    fused_tables,
    plan_constants,
)
from mmfast.models.config import Fields, Source
from mmfast.models.pixtral import pad_for_batching
from mmfast.models.qwen2_vl import smart_resize

__all__ = ["Apertus1p5Config"]


@dataclass(frozen=True)
class Apertus1p5Config(ModelConfig):
    """Settings of ``Apertus1p5ImageProcessor``.

    ``num_image_tokens`` counts the ``<|image|>`` tokens ``Apertus1p5Processor`` inserts, one per
    ``spatial_factor`` square of the resized image (``h // f * w // f``, as its
    ``_get_num_multimodal_tokens`` counts them); the processor also adds an end-of-line token
    between rows, its image markers and the text ``"{h}*{w}"``, whose length depends on the
    tokenizer.
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    min_pixels: int | None
    max_pixels: int | None
    spatial_factor: int
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    do_pad: bool

    # transformers has only the torchvision class, which every plan matches.
    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "stack"

    @property
    def raw_pixels(self) -> bool:  # type: ignore[override]
        """Padding is zeros after normalising: dtype="uint8" only without it."""
        return not self.do_pad

    @property
    def unbatched(self) -> Mapping[str, str]:  # type: ignore[override]
        """With ``return_tensors=None`` transformers stacks padded images (a tensor) and leaves
        unpadded ones as a list; ``image_sizes`` is a list of ``[height, width]`` lists."""
        if self.do_pad:
            return MappingProxyType({"image_sizes": "lists"})
        return MappingProxyType({"pixel_values": "rows", "image_sizes": "lists"})

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """``Apertus1p5ImageProcessor.resize``: Qwen's ``smart_resize`` with factor
        ``spatial_factor``; the input size without ``do_resize``."""
        if not self.do_resize:
            return height, width
        if self.min_pixels is None or self.max_pixels is None:
            raise MmfastError(
                "size: expected min_pixels and max_pixels keys (Apertus1p5ImageProcessor resizes "
                "by them)"
            )
        return smart_resize(height, width, self.spatial_factor, self.min_pixels, self.max_pixels)

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Apertus1p5ImageProcessor._preprocess`` for one image: resize, rescale
        and normalise onto a canvas of its own size (``finish_batch`` widens it to the
        batch's)."""
        check_image_size(height, width)
        size = self.resized_size(height, width)
        resize = Resize(size, self.resample, "torch") if self.do_resize else None
        f = self.spatial_factor
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=size,
            resample=self.resample,
            crop=None,
            canvas_size=size,
            **{**plan_constants(self), "backend": "torchvision"},
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType({"pixel_values": (3, *size), "image_sizes": (2,)}),
            # Apertus1p5Processor.replace_image_token: image_token * grid_width per row.
            num_image_tokens=(size[0] // f) * (size[1] // f),
            views=(View(resize=resize, out=Canvas(size)),),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """The torchvision class's fused arithmetic (the uint8 pixels, padded with 0, with
        rescale and normalise both off)."""
        return fused_tables(plan)

    def finish_batch(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> Sequence[ImagePlan]:
        """``TorchvisionBackend.pad``: every canvas as large as the batch's largest image."""
        return pad_for_batching(plans) if self.do_pad else plans

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_sizes``: (images, 2) int64, each image's size before padding."""
        sizes = [plan.resize_size for plan in plans]
        return {"image_sizes": np.array(sizes, np.int64).reshape(-1, 2)}


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Apertus1p5Config:
    """Mirrors ``Apertus1p5ImageProcessor``'s class defaults: ``size`` holds the pixel-area
    bounds as ``min_pixels``/``max_pixels``, read only when resizing."""
    size_value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"min_pixels": 128 * 128, "max_pixels": 1400 * 1400} if size_value is None else size_value,
        cfg.flag("default_to_square", True),
    )
    norm = cfg.normalization(HALF, HALF)
    return Apertus1p5Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=cfg.flag("do_resize", True),
        min_pixels=size.get("min_pixels"),
        max_pixels=size.get("max_pixels"),
        spatial_factor=cfg.positive_int("spatial_factor", 16),
        resample=cfg.torch_resample(BICUBIC),
        **norm.fields(),
        do_pad=cfg.flag("do_pad", True),
    )


registry.register(
    registry.Family(
        name="apertus1p5",
        processor_types=("Apertus1p5ImageProcessor",),
        model_types={"apertus1p5": "Apertus1p5ImageProcessor"},
        build=_build,
        kwargs=frozenset({"spatial_factor"}),
        processor_classes={"Apertus1p5Processor": "apertus1p5"},
        hf_torchvision="apertus1p5.image_processing_apertus1p5.Apertus1p5ImageProcessor",
    )
)

# swiss-ai/Apertus-v1.5-8B: no public copy of its image processor settings was found. These are
# the class defaults ("the training pipeline's resize policy"); a public data pipeline for the
# model tokenizes images with the same 128² to 1400² pixels and 16-pixel factor. Unconfirmed.
registry.register_builtin(
    "swiss-ai/Apertus-v1.5-8B",
    "apertus1p5",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_pad": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_processor_type": "Apertus1p5ImageProcessor",
        "image_std": list(HALF),
        "processor_class": "Apertus1p5Processor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"max_pixels": 1400 * 1400, "min_pixels": 128 * 128},
        "spatial_factor": 16,
    },
)
