"""Emu3: ``Emu3ImageProcessor`` (transformers 5.24), a NumPy/PIL-only class.

Each image is resized (Pillow) to Qwen2-VL-style ``smart_resize`` dimensions, multiples of
``spatial_factor`` with between ``min_pixels`` and ``max_pixels`` pixels, normalised, and
zero-padded *after* normalising, at the bottom and right, to the batch's largest height and
width. ``image_sizes`` gives each image's resized size.

The class reads its sizes only from its settings: a call's ``size``, ``min_pixels``,
``max_pixels`` or ``spatial_factor`` changes nothing, and ``do_pad`` is a call argument only
(its constructor drops the setting; a call pads unless it passes ``do_pad=False``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Final

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    HALF,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RGB,
    Canvas,
    ImagePlan,
    ModelConfig,
    View,
    check_image_size,
    identity_table,
    plan_constants,
    resizer,
)
from mmfast.models.config import MAX_INT, Fields, Source
from mmfast.models.pixtral import pad_for_batching

__all__ = ["Emu3Config", "smart_resize"]

# Emu3Processor.downsample_ratio: the processor counts tokens on 8-pixel squares whatever
# the image processor's spatial_factor.
DOWNSAMPLE_RATIO: Final = 8
# The key a call's do_pad is kept under (a setting of that name is not read).
CALL_DO_PAD: Final = "mmfast_call_do_pad"
# What Emu3ImageProcessor.preprocess ignores among a call's keyword arguments.
IGNORED_AT_CALL: Final = frozenset(
    {"size", "min_pixels", "max_pixels", "spatial_factor", "ratio", "image_area"}
)


def smart_resize(
    height: int, width: int, factor: int, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """Mirrors ``image_processing_emu3.smart_resize``: sides rounded (banker's) to multiples
    of ``factor``, scaled into ``[min_pixels, max_pixels]`` by the square root of the pixel
    ratio. :class:`MmfastError` where transformers raises (an aspect ratio over 200)."""
    if max(height, width) / min(height, width) > 200:
        raise MmfastError(
            "image size: absolute aspect ratio must be smaller than 200, got "
            f"{max(height, width) / min(height, width)}"
        )
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def misread(height: int, width: int) -> str:
    """Why an image 1 or 3 pixels high is refused."""
    return (
        f"image size: transformers' Emu3ImageProcessor reads a {height}x{width} image that "
        "comes first in its prompt as channels-first (infer_channel_dimension_format: it "
        "fails on 1 row and scrambles 3 rows), which mmfast does not reproduce; mmfast "
        "refuses images 1 or 3 pixels high"
    )


def call_settings(values: Mapping[str, Any], call: Mapping[str, Any]) -> dict[str, Any]:
    """A call's keyword arguments over a config's values as ``Emu3ImageProcessor.preprocess``
    reads them: sizes are the instance's, a None the instance's value, and ``do_pad`` exists
    only as an argument."""
    merged = dict(values)
    for key, value in call.items():
        if key == "do_pad":
            if value is None:
                raise MmfastError(
                    "do_pad: expected True or False (transformers' Emu3ImageProcessor has no "
                    "do_pad setting to fall back on), got None"
                )
            merged[CALL_DO_PAD] = value
        elif key not in IGNORED_AT_CALL and value is not None:
            merged[key] = value
    return merged


@dataclass(frozen=True)
class Emu3Config(ModelConfig):
    """Settings of ``Emu3ImageProcessor``.

    ``num_image_tokens`` counts the ``<image>`` tokens ``Emu3Processor`` puts in the prompt
    (``h * (w + 1)``, with h and w the resized size over 8, as its
    ``_get_num_multimodal_tokens`` counts them); the processor also wraps them in four
    special tokens and the text ``"{h}*{w}"``, whose length depends on the tokenizer.
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    resample: int
    min_pixels: int
    max_pixels: int
    spatial_factor: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    do_pad: bool

    # Which transformers backend the plan matches: only "pil" (a NumPy/PIL class).
    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "stack"
    batch_shapes_images: ClassVar[bool] = True

    @property
    def raw_pixels(self) -> bool:  # type: ignore[override]
        """Padding is zeros after normalising: dtype="uint8" only without it."""
        return not self.do_pad

    # make_nested_list_of_images: a flat list is one prompt's images.
    flat_is_one_sample: ClassVar[bool] = True

    @property
    def unbatched(self) -> Mapping[str, str]:  # type: ignore[override]
        """With ``return_tensors=None`` transformers stacks padded images and leaves unpadded
        ones as a list; ``image_sizes`` stays a list of pairs."""
        if self.do_pad:
            return MappingProxyType({"image_sizes": "tuples"})
        return MappingProxyType({"pixel_values": "rows", "image_sizes": "tuples"})

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """The image's size after ``do_resize``."""
        if not self.do_resize:
            return height, width
        out = smart_resize(height, width, self.spatial_factor, self.min_pixels, self.max_pixels)
        if min(out) < 1:
            raise MmfastError(
                f"image size: {height}x{width} resizes to {out[0]}x{out[1]} under "
                f"min_pixels={self.min_pixels}, max_pixels={self.max_pixels}"
            )
        return out

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Emu3ImageProcessor._preprocess`` for one image: resize, rescale and
        normalise onto a canvas of its own size (``finish_batch`` widens it to the batch's).

        ``_preprocess`` reads the channel axis of a prompt's images from its first image: one
        1 or 3 pixels high reads as channels-first, which fails (1 row: one channel against
        three means) or scrambles the prompt's pixels (3 rows). Such images are refused
        wherever they are (after another image transformers would read them right)."""
        check_image_size(height, width)
        if height in (1, 3):
            raise MmfastError(misread(height, width))
        size = self.resized_size(height, width)
        resize = resizer("pil", size, self.resample) if self.do_resize else None
        h, w = size[0] // DOWNSAMPLE_RATIO, size[1] // DOWNSAMPLE_RATIO
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=size,
            resample=self.resample,
            crop=None,
            canvas_size=size,
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType({"pixel_values": (3, *size), "image_sizes": (2,)}),
            num_image_tokens=h * (w + 1),
            views=(View(resize=resize, out=Canvas(size)),),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """NumPy's float32 arithmetic; with rescale and normalise both off, the uint8 pixels
        (padded with 0)."""
        if plan.do_rescale or plan.do_normalize:
            return super().tables(plan)
        return identity_table()

    def finish_batch(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> Sequence[ImagePlan]:
        """``_pad_for_batching``: every canvas as large as the batch's largest image."""
        return pad_for_batching(plans) if self.do_pad else plans

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_sizes``: (images, 2) int64, each image's resized (height, width)."""
        sizes = [plan.resize_size for plan in plans]
        return {"image_sizes": np.array(sizes, np.int64).reshape(-1, 2)}


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Emu3Config:
    """Mirrors ``Emu3ImageProcessor.__init__``'s defaults: its ``size`` is always
    ``{min_pixels, max_pixels}`` and its ``do_pad`` argument is not kept."""
    norm = cfg.normalization(OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)
    do_pad = cfg.raw(CALL_DO_PAD)
    return Emu3Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=cfg.flag("do_resize", True),
        resample=cfg.resample(BICUBIC),
        min_pixels=cfg.int_in("min_pixels", 512 * 512, 0, MAX_INT),
        max_pixels=cfg.positive_int("max_pixels", 1024 * 1024),
        spatial_factor=cfg.positive_int("spatial_factor", 8),
        **norm.fields(),
        do_pad=True if do_pad is None else bool(do_pad),
    )


registry.register(
    registry.Family(
        name="emu3",
        processor_types=("Emu3ImageProcessor",),
        model_types={"emu3": "Emu3ImageProcessor"},
        build=_build,
        kwargs=frozenset({"min_pixels", "max_pixels", "spatial_factor", "ratio", "image_area"}),
        processor_classes={"Emu3Processor": "emu3"},
        processor_defaults={"Emu3Processor": {}},
        hf_pil="emu3.image_processing_emu3.Emu3ImageProcessor",
        hf_torchvision=None,
        backends=("pil",),
        call_settings=call_settings,
        call_none_is_instance=True,
    )
)

# BAAI/Emu3-Chat-hf: transformers' conversion script copies the image processor from
# BAAI/Emu3-VisionTokenizer. No public copy of either file was found; the values are the
# defaults of the tokenizer's own Emu3VisionVQImageProcessor (a public copy of its code):
# mean/std 0.5, bicubic, 512x512 to 1024x1024 pixels, 8-pixel factor. Unconfirmed.
registry.register_builtin(
    "BAAI/Emu3-Chat-hf",
    "emu3",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_processor_type": "Emu3ImageProcessor",
        "image_std": list(HALF),
        "max_pixels": 1024 * 1024,
        "min_pixels": 512 * 512,
        "processor_class": "Emu3Processor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "spatial_factor": 8,
    },
)
