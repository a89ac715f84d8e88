"""LLaVA-1.5: ``CLIPImageProcessor`` (transformers 5.24) and ``LlavaProcessor``'s token count.

The checkpoint names the CLIP processor: shortest edge to 336 (bicubic), a 336x336 centre crop,
normalisation with OpenAI's CLIP constants. Every other ``size`` spelling the CLIP class accepts
works too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RGB,
    ImagePlan,
    ModelConfig,
    Normalization,
    Resize,
    View,
    check_image_size,
)
from mmfast.models.config import Fields, Source
from mmfast.models.geometry import (
    CropBox,
    center_crop_box,
    get_image_size_for_max_height_width,
    get_resize_output_image_size,
    get_size_with_aspect_ratio,
)

__all__ = ["ClipConfig"]


@dataclass(frozen=True)
class ClipConfig(ModelConfig):
    """Settings of ``CLIPImageProcessor`` as LLaVA-1.5 uses it, plus the LlavaProcessor values.

    ``size`` is HF's resolved size dict (one of ``{"shortest_edge"}``,
    ``{"shortest_edge", "longest_edge"}``, ``{"max_height", "max_width"}``,
    ``{"height", "width"}``); ``crop_size`` is (height, width). ``patch_size``,
    ``num_additional_image_tokens`` and ``vision_feature_select_strategy`` come from
    ``processor_config.json`` and only matter for the token count.
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    size: Mapping[str, int]
    resample: int
    do_center_crop: bool
    crop_size: tuple[int, int]
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    patch_size: int
    num_additional_image_tokens: int
    vision_feature_select_strategy: str | None

    batch_layout: ClassVar[str] = "stack"

    def resize_size(self, height: int, width: int) -> tuple[int, int]:
        """Target size; mirrors the size-dict dispatch in ``PilBackend.resize``."""
        size = self.size
        if size.get("shortest_edge") and size.get("longest_edge"):
            out = get_size_with_aspect_ratio(
                height, width, size["shortest_edge"], size["longest_edge"]
            )
        elif size.get("shortest_edge"):
            out = get_resize_output_image_size(height, width, size["shortest_edge"])
        elif size.get("max_height") and size.get("max_width"):
            out = get_image_size_for_max_height_width(
                height, width, size["max_height"], size["max_width"]
            )
        else:  # {"height", "width"}: load_config rejects every other key set.
            out = (size["height"], size["width"])
        if min(out) < 1:
            raise MmfastError(
                f"image size: {height}x{width} resizes to {out[0]}x{out[1]} under size={dict(size)}"
            )
        return out

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``PilBackend._preprocess``: resize, centre crop, rescale, normalise."""
        check_image_size(height, width)
        resized = self.resize_size(height, width) if self.do_resize else (height, width)
        crop = center_crop_box(*resized, *self.crop_size) if self.do_center_crop else None
        out_h, out_w = (crop.height, crop.width) if crop is not None else resized
        norm = Normalization(
            self.do_rescale, self.rescale_factor, self.do_normalize, self.image_mean, self.image_std
        )
        factor, mean, std = norm.effective()
        # LlavaProcessor.replace_image_token counts on the processed pixel_values' size.
        tokens = (out_h // self.patch_size) * (out_w // self.patch_size)
        tokens += self.num_additional_image_tokens
        if self.vision_feature_select_strategy == "default":
            tokens -= 1  # the CLS feature is dropped
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=resized,
            resample=self.resample,
            crop=crop,
            canvas_size=None,
            do_rescale=self.do_rescale,
            rescale_factor=factor,
            do_normalize=self.do_normalize,
            image_mean=mean,
            image_std=std,
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType({"pixel_values": (3, out_h, out_w)}),
            num_image_tokens=tokens,
            views=(
                View(
                    resize=Resize(resized, self.resample) if self.do_resize else None,
                    out=(crop if crop is not None else CropBox(0, 0, *resized),),
                ),
            ),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """HF's float32 arithmetic; with rescale and normalise both off, HF's PIL backend
        hands back the resized, cropped uint8 pixels untouched."""
        if plan.do_rescale or plan.do_normalize:
            return super().tables(plan)
        return np.repeat(np.arange(256, dtype=np.uint8)[None, :], 3, axis=0)


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> ClipConfig:
    """Mirrors ``CLIPImageProcessorPil.__init__`` and ``BaseImageProcessor._standardize_kwargs``."""
    default_to_square = cfg.flag("default_to_square", False)
    size_value = cfg.raw("size")
    if cfg.raw("use_square_size"):
        # CLIPImageProcessor's KOSMOS-2 compatibility: a square of the class default edge.
        size_value = {"height": 224, "width": 224}
    size = cfg.size_dict("size", 224 if size_value is None else size_value, default_to_square)
    do_resize = cfg.flag("do_resize", True)
    if do_resize and not (
        "shortest_edge" in size
        or {"max_height", "max_width"} <= size.keys()
        or {"height", "width"} <= size.keys()
    ):
        raise cfg.error("size", "shortest_edge, max_height/max_width or height/width", size)
    crop_value = cfg.raw("crop_size")
    # get_size_dict's default_to_square=True: an int crop_size is a square.
    crop = cfg.size_dict("crop_size", 224 if crop_value is None else crop_value, True)
    do_center_crop = cfg.flag("do_center_crop", True)
    if do_center_crop and not {"height", "width"} <= crop.keys():
        raise cfg.error("crop_size", "height and width", crop)
    if cfg.flag("do_pad", False):
        raise cfg.error("do_pad", "false (batch padding is not supported)", True)
    strategy = processor.raw("vision_feature_select_strategy")
    if strategy is not None and not isinstance(strategy, str):
        raise processor.error("vision_feature_select_strategy", "a string", strategy)
    extra_tokens = processor.raw("num_additional_image_tokens")
    if extra_tokens is not None and (
        not isinstance(extra_tokens, int) or isinstance(extra_tokens, bool) or extra_tokens < 0
    ):
        raise processor.error("num_additional_image_tokens", "a non-negative integer", extra_tokens)
    norm = cfg.normalization(OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)
    return ClipConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.flag("do_convert_rgb", True),
        do_resize=do_resize,
        size=MappingProxyType(size),
        resample=cfg.resample(BICUBIC),
        do_center_crop=do_center_crop,
        crop_size=(crop.get("height", 0), crop.get("width", 0)),
        do_rescale=norm.do_rescale,
        rescale_factor=norm.rescale_factor,
        do_normalize=norm.do_normalize,
        image_mean=norm.image_mean,
        image_std=norm.image_std,
        # Without processor_config.json, LLaVA-1.5's values: the family mmfast serves here.
        patch_size=processor.positive_int("patch_size", 14),
        num_additional_image_tokens=1 if extra_tokens is None else extra_tokens,
        vision_feature_select_strategy="default" if strategy is None else strategy,
    )


registry.register(
    registry.Family(
        name="llava",
        processor_types=("CLIPImageProcessor",),
        # "llava" is not here: HF maps it to LlavaImageProcessor (pad-to-square), which is not
        # this class.
        model_types={"clip": "CLIPImageProcessor"},
        build=_build,
        kwargs=frozenset({"use_square_size"}),
        processor_kwargs=frozenset(
            {"patch_size", "num_additional_image_tokens", "vision_feature_select_strategy"}
        ),
    )
)

# llava-hf/llava-1.5-7b-hf: the printed CLIPImageProcessor of a llava-hf conversion
# (bczhou/tiny-llava-v1-hf, same CLIP-ViT-L/14-336 tower) gives these values; the
# processor_config.json values (patch 14, one extra CLS token dropped by the "default"
# strategy) give LLaVA-1.5's documented 576 image tokens.
registry.register_builtin(
    "llava-hf/llava-1.5-7b-hf",
    "llava",
    {
        "crop_size": {"height": 336, "width": 336},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "CLIPImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "processor_class": "LlavaProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"shortest_edge": 336},
    },
    {
        "patch_size": 14,
        "num_additional_image_tokens": 1,
        "vision_feature_select_strategy": "default",
    },
)
