"""DeepSeek-VL 7B (hybrid): ``DeepseekVLHybridImageProcessor`` (transformers 5.24) and
``DeepseekVLHybridProcessor``'s token count.

Two outputs per image from one native call. ``high_res_pixel_values``: the longest side resized
to ``high_res_size`` with ``high_res_resample``, centred on a square of the high-resolution
background colour, normalised with ``high_res_image_mean``/``_std``. ``pixel_values``: that
padded uint8 square resized again to ``size`` with ``resample``, padded (square already: a
no-op) and normalised with ``image_mean``/``_std``. Each view picks its normalisation from a
(2, 3, 256) table: 0 for ``pixel_values``, 1 for ``high_res_pixel_values``. The torchvision
class needs both ``do_resize`` and ``do_pad`` (it fails without either); the PIL class without
``do_resize`` normalises the unresized image twice, and without ``do_pad`` resizes the unpadded
high-resolution image.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    BILINEAR,
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RESAMPLE_CODES,
    RGB,
    ImagePlan,
    Normalization,
    Pad,
    View,
    batch_layout_shape,
    check_image_size,
    identity_table,
    resizer,
)
from mmfast.models.config import Fields, Source
from mmfast.models.deepseek_vl import (
    DeepseekVLConfig,
    call_over_instance,
    deepseek_fields,
    instance_color,
    instance_resample,
    instance_values,
    pad_to_square,
    resize_longest_side,
    square_side,
    uint8_fill,
)
from mmfast.models.geometry import CropBox

__all__ = ["DeepseekVLHybridConfig"]

COLORS = ("image_mean", "high_res_image_mean")


@dataclass(frozen=True)
class DeepseekVLHybridConfig(DeepseekVLConfig):
    """Settings of ``DeepseekVLHybridImageProcessor``: DeepSeek-VL's, and the high-resolution
    view's size, filter, mean/std and (construction-time) background colour."""

    high_res_size: Mapping[str, int]
    high_res_resample: int
    high_res_image_mean: RGB
    high_res_image_std: RGB
    high_res_background_color: tuple[int, ...]

    pixel_keys: ClassVar[tuple[str, ...]] = ("pixel_values", "high_res_pixel_values")
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_values": "rows", "high_res_pixel_values": "rows"}
    )

    def padded(
        self, size: tuple[int, int], color: tuple[int, ...], name: str
    ) -> tuple[Pad | None, tuple[int, int]]:
        """``pad_to_square`` of a ``size`` image (with ``do_pad``), and the size it leaves."""
        if not self.do_pad or size[0] == size[1]:
            return None, size
        pad = pad_to_square(size, uint8_fill(color, name))
        return pad, size if pad is None else pad.size

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``DeepseekVLHybridImageProcessorPil._preprocess`` (and the torchvision
        class's, which needs ``do_resize`` and ``do_pad``)."""
        check_image_size(height, width)
        if self.backend != "pil" and not (self.do_resize and self.do_pad):
            # Its _preprocess reads a variable only do_resize sets (UnboundLocalError) and
            # resizes the low-resolution images from a dict only do_pad fills (KeyError).
            raise MmfastError(
                "do_resize, do_pad: transformers' torchvision DeepseekVLHybridImageProcessor "
                "fails unless both are on"
            )
        if not self.do_resize:
            full = (CropBox(0, 0, height, width),)
            views = (View(out=full, table=1, output=1), View(out=full))
            return self.hybrid_plan(height, width, (height, width), (height, width), views)
        high = resize_longest_side(
            height, width, square_side(self.high_res_size, "high_res_size"), self.min_size
        )
        pad, high_out = self.padded(high, self.high_res_background_color, "high_res_image_mean")
        low = resize_longest_side(*high_out, square_side(self.size, "size"), self.min_size)
        low_pad, low_out = self.padded(low, self.background_color, "image_mean")
        views = (
            View(
                resize=resizer(self.backend, high, self.resample_used(self.high_res_resample)),
                pad=pad,
                out=(CropBox(0, 0, *high_out),),
                table=1,
                output=1,
            ),
            View(
                source=0,
                resize=resizer(self.backend, low, self.resample_used(self.resample)),
                pad=low_pad,
                out=(CropBox(0, 0, *low_out),),
            ),
        )
        return self.hybrid_plan(height, width, low_out, high_out, views)

    def hybrid_plan(
        self,
        height: int,
        width: int,
        low: tuple[int, int],
        high: tuple[int, int],
        views: tuple[View, ...],
    ) -> ImagePlan:
        shapes = {"pixel_values": (3, *low), "high_res_pixel_values": (3, *high)}
        return self.image_plan(height, width, high, shapes, views)

    def pixel_shapes(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, tuple[tuple[int, ...], list[int]]]:
        """Both outputs stacked, one image after the other."""
        return {
            key: batch_layout_shape([p.output_shapes[key] for p in plans], "stack", sample_sizes)
            for key in self.pixel_keys
        }

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """(2, 3, 256): ``pixel_values``' arithmetic, then ``high_res_pixel_values``'."""
        if not (plan.do_rescale or plan.do_normalize):
            return np.stack([identity_table()] * 2)
        high = Normalization(
            self.do_rescale,
            self.rescale_factor,
            self.do_normalize,
            self.high_res_image_mean,
            self.high_res_image_std,
        )
        _, mean, std = high.effective()
        high_plan = replace(plan, image_mean=mean, image_std=std)
        return np.stack([super().tables(plan), super().tables(high_plan)])


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> DeepseekVLHybridConfig:
    """Mirrors ``DeepseekVLHybridImageProcessorPil``'s class defaults, ``__init__`` (the two
    background colours) and ``_standardize_kwargs`` (``high_res_size`` as ``size``)."""
    instance, values = instance_values(cfg, COLORS)
    value = cfg.raw("high_res_size")
    high = cfg.size_dict(
        "high_res_size",
        {"height": 1024, "width": 1024} if value is None else value,
        cfg.flag("default_to_square", True),
    )
    resample = cfg.raw("high_res_resample")
    if resample is None:
        resample = BICUBIC
    elif (
        not isinstance(resample, int)
        or isinstance(resample, bool)
        or resample not in RESAMPLE_CODES
    ):
        raise cfg.error("high_res_resample", "a PIL resampling code 0-5", resample)
    return DeepseekVLHybridConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **deepseek_fields(cfg),
        fallback_resample=instance_resample(values.get("resample"), instance),
        background_color=instance_color(
            values.get("background_color"), instance, "background_color"
        ),
        image_tokens=processor.positive_int("num_image_tokens", 576),
        high_res_size=MappingProxyType(high),
        high_res_resample=resample,
        high_res_image_mean=cfg.rgb("high_res_image_mean", OPENAI_CLIP_MEAN),
        high_res_image_std=cfg.rgb("high_res_image_std", OPENAI_CLIP_STD, nonzero=True),
        high_res_background_color=instance_color(
            values.get("high_res_background_color"), instance, "high_res_background_color"
        ),
    )


registry.register(
    registry.Family(
        name="deepseek_vl_hybrid",
        processor_types=("DeepseekVLHybridImageProcessor",),
        model_types={"deepseek_vl_hybrid": "DeepseekVLHybridImageProcessor"},
        build=_build,
        kwargs=frozenset(
            {
                "min_size",
                "high_res_size",
                "high_res_resample",
                "high_res_image_mean",
                "high_res_image_std",
            }
        ),
        processor_kwargs=frozenset({"num_image_tokens"}),
        processor_classes={"DeepseekVLHybridProcessor": "deepseek_vl_hybrid"},
        hf_pil=(
            "deepseek_vl_hybrid.image_processing_pil_deepseek_vl_hybrid."
            "DeepseekVLHybridImageProcessorPil"
        ),
        hf_torchvision=(
            "deepseek_vl_hybrid.image_processing_deepseek_vl_hybrid.DeepseekVLHybridImageProcessor"
        ),
        call_settings=call_over_instance(COLORS),
        instance_attributes=("background_color", "high_res_background_color", "resample"),
    )
)

# deepseek-community/deepseek-vl-7b-chat: transformers' conversion script builds the processor
# with IMAGENET_STANDARD mean/std (0.5) for the 384 SigLIP view, CLIP's for the 1024 SAM view,
# bilinear for the 384 view and the class defaults otherwise; the converted file itself not
# seen.
registry.register_builtin(
    "deepseek-community/deepseek-vl-7b-chat",
    "deepseek_vl_hybrid",
    {
        "do_normalize": True,
        "do_pad": True,
        "do_rescale": True,
        "do_resize": True,
        "high_res_image_mean": list(OPENAI_CLIP_MEAN),
        "high_res_image_std": list(OPENAI_CLIP_STD),
        "high_res_resample": BICUBIC,
        "high_res_size": {"height": 1024, "width": 1024},
        "image_mean": list(IMAGENET_STANDARD_MEAN),
        "image_processor_type": "DeepseekVLHybridImageProcessor",
        "image_std": list(IMAGENET_STANDARD_STD),
        "min_size": 14,
        "processor_class": "DeepseekVLHybridProcessor",
        "resample": BILINEAR,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 384, "width": 384},
    },
    {"num_image_tokens": 576},
)
