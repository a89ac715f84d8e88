"""LLaVA-OneVision: ``LlavaOnevisionImageProcessor`` (transformers 5.24) and
``LlavaOnevisionProcessor``'s token count.

A single image takes LLaVA-NeXT's anyres path with OneVision's grid (384 tiles, up to 6x6). The
images of a multi-image prompt (a sample of several images, passed as a nested list) are each
padded to a square with the mean colour instead, then squashed to one 384 tile. Outputs add
``batch_num_images``, the images of each sample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    HALF,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RGB,
    ImagePlan,
    Pad,
    VideoPlan,
    View,
    check_image_size,
)
from mmfast.models.base_video import FRAMES_IGNORES, FramesVideoConfig, frames_fields
from mmfast.models.config import Fields, Source
from mmfast.models.geometry import select_best_resolution
from mmfast.models.llava_next import (
    LlavaNextConfig,
    anyres_checked,
    anyres_fields,
    strategy,
    unpadded_features,
)
from mmfast.models.pil_backend import pil_backend_fields

__all__ = ["LlavaOnevisionConfig", "LlavaOnevisionVideoConfig"]

# LlavaOnevisionImageProcessor.image_grid_pinpoints: 384 to 2304 on each side, in 384 steps.
_PINPOINTS = [[h, w] for h in range(384, 2305, 384) for w in range(384, 2305, 384)]


@dataclass(frozen=True)
class LlavaOnevisionConfig(LlavaNextConfig):
    """Settings of ``LlavaOnevisionImageProcessor`` plus ``LlavaOnevisionProcessor``'s
    ``num_image_tokens`` (per tile, 729), ``vision_aspect_ratio`` (``anyres_max_N``, kept as
    N) and strategy.

    ``num_image_tokens(h, w)`` is the single-image count of ``<image>`` tokens; an image of a
    multi-image prompt gets ``num_image_tokens + 1`` (its plan says so).
    """

    tile_tokens: int
    max_num_patches: int
    # The instance's image_mean: pad_to_square's colour (a call's mean only normalises).
    pad_mean: RGB

    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_values": "rows", "image_sizes": "tuples", "batch_num_images": "ints"}
    )

    def features(self, height: int, width: int, out_height: int, out_width: int) -> int:
        """``LlavaOnevisionProcessor._get_number_of_features``: a ``sqrt(tile_tokens)`` grid per
        tile, unpadded, then shrunk when it holds over 1.1x ``anyres_max_N`` tiles' worth."""
        best_height, best_width = select_best_resolution((height, width), self.image_grid_pinpoints)
        side = math.isqrt(self.tile_tokens)
        unpadded, rows = unpadded_features(
            height, width, side, side, best_height // out_height, best_width // out_width
        )
        cols = unpadded // rows
        ratio = math.sqrt(rows * cols / (self.max_num_patches * side**2))
        if ratio > 1.1:
            unpadded = int(rows // ratio) * int(cols // ratio)
            rows = int(rows // ratio)
        return unpadded + rows + self.tile_tokens

    def square_views(self, height: int, width: int) -> tuple[View, ...]:
        """``pad_to_square`` with the mean colour, then the per-patch resize."""
        fill = tuple(int(m * 255) for m in self.pad_mean)
        if not all(0 <= v <= 255 for v in fill):
            raise MmfastError(
                "image_mean: expected values in [0, 1] (the padding colour is mean * 255), "
                f"got {self.pad_mean}"
            )
        side = max(height, width)
        top, left = (
            (side - height) // 2 if width > height else 0,
            (side - width) // 2 if height > width else 0,
        )
        return (
            View(pad=Pad((side, side), top, left, (fill[0], fill[1], fill[2]))),
            self.finish(0, None, (side, side)),
        )

    def plan_in_sample(self, height: int, width: int, sample_size: int) -> ImagePlan:
        """The anyres plan alone in its sample; padded to a square among several."""
        check_image_size(height, width)
        if sample_size <= 1:
            return self.plan(height, width)
        plan = self.patch_plan(height, width, self.square_views(height, width))
        tokens = self.tile_tokens + 1 - (self.vision_feature_select_strategy == "default")
        return replace(plan, num_image_tokens=tokens)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_sizes`` (B, 2) and ``batch_num_images`` (samples,) int64."""
        return {
            **super().batch_outputs(plans, sample_sizes),
            "batch_num_images": np.array([n for n in sample_sizes if n], np.int64),
        }


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> LlavaOnevisionConfig:
    """Mirrors ``LlavaOnevisionImageProcessorPil``'s class defaults and the processor's."""
    aspect = processor.raw("vision_aspect_ratio")
    aspect = "anyres_max_9" if aspect is None else aspect
    # HF parses it with str.strip, a character set: "anyres_max_9" -> "9".
    digits = aspect.strip("anyres_max_") if isinstance(aspect, str) else ""  # noqa: B005
    if not digits.isdigit() or int(digits) < 1:
        raise processor.error("vision_aspect_ratio", "a string like 'anyres_max_9'", aspect)
    tile_tokens = processor.positive_int("num_image_tokens", 729)
    if math.isqrt(tile_tokens) ** 2 != tile_tokens:
        raise processor.error("num_image_tokens", "a square number of tokens per tile", tile_tokens)
    given = cfg.raw(registry.INSTANCE_KEY)
    instance = cfg if given is None else cfg.nested("the instance", given)
    config = LlavaOnevisionConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **pil_backend_fields(
            cfg,
            size={"height": 384, "width": 384},
            default_to_square=False,
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            crop_size=None,
            pads=True,
        ),
        **anyres_fields(cfg, _PINPOINTS),
        patch_size=14,
        num_additional_image_tokens=0,
        vision_feature_select_strategy=strategy(processor),
        tile_tokens=tile_tokens,
        max_num_patches=int(digits),
        pad_mean=instance.rgb("image_mean", OPENAI_CLIP_MEAN),
    )
    return anyres_checked(config, cfg)


registry.register(
    registry.Family(
        name="llava_onevision",
        processor_types=("LlavaOnevisionImageProcessor",),
        model_types={"llava_onevision": "LlavaOnevisionImageProcessor"},
        build=_build,
        kwargs=frozenset({"image_grid_pinpoints"}),
        call_settings=registry.keep_instance("image_mean"),
        instance_attributes=("image_mean",),
        processor_kwargs=frozenset(
            {"num_image_tokens", "vision_aspect_ratio", "vision_feature_select_strategy"}
        ),
        hf_pil="llava_onevision.image_processing_pil_llava_onevision.LlavaOnevisionImageProcessorPil",
        hf_torchvision="llava_onevision.image_processing_llava_onevision.LlavaOnevisionImageProcessor",
    )
)

# llava-hf/llava-onevision-qwen2-7b-ov-hf: a converter that writes "verbatim" the official
# conversion's preprocessor_config.json and processor_config.json (as a Python dict, so key
# order is not the file's); the 0.5b checkpoint comes from the same conversion.
registry.register_builtin(
    "llava-hf/llava-onevision-qwen2-7b-ov-hf",
    "llava_onevision",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_pad": True,
        "do_rescale": True,
        "do_resize": True,
        "image_grid_pinpoints": _PINPOINTS,
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "image_processor_type": "LlavaOnevisionImageProcessor",
        "processor_class": "LlavaOnevisionProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 384, "width": 384},
    },
    {
        "image_token": "<image>",
        "num_image_tokens": 729,
        "processor_class": "LlavaOnevisionProcessor",
        "video_token": "<video>",
        "vision_feature_select_strategy": "full",
    },
)


# --------------------------------------------------------------------------------------------
# Video: LlavaOnevisionVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


def onevision_frame_tokens(tile_tokens: int) -> int:
    """``LlavaOnevisionProcessor.replace_video_token``'s ``<video>`` tokens per frame: the
    ``sqrt(num_image_tokens)`` patch grid pooled 2x2 (rounding up)."""
    pooled = math.ceil(int(math.sqrt(tile_tokens)) / 2)
    return pooled * pooled


@dataclass(frozen=True)
class LlavaOnevisionVideoConfig(FramesVideoConfig):
    """Settings of ``LlavaOnevisionVideoProcessor`` (LLaVA-OneVision and VideoPrism): the
    base pipeline, each frame squashed to 384x384 by default.

    ``num_video_tokens`` is the count of ``<video>`` tokens LlavaOnevisionProcessor inserts:
    per frame the pooled grid of its ``num_image_tokens`` (196 for 729), plus one newline
    token for the clip.
    """

    def plan(self, frames: int, height: int, width: int) -> VideoPlan:
        """The base plan; one ``<video>`` token more for the clip's newline."""
        plan = super().plan(frames, height, width)
        return replace(plan, num_video_tokens=plan.num_video_tokens + 1)


def _build_video(model_id: str | None, cfg: Fields) -> LlavaOnevisionVideoConfig:
    """Mirrors ``LlavaOnevisionVideoProcessor``'s class defaults; the processor's
    ``num_image_tokens`` (729) counts tokens."""
    return LlavaOnevisionVideoConfig(
        model_id=model_id,
        video_processor_type="LlavaOnevisionVideoProcessor",
        **frames_fields(
            cfg,
            size={"height": 384, "width": 384},
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            default_to_square=False,
        ),
        frame_tokens=onevision_frame_tokens(cfg.positive_int("num_image_tokens", 729)),
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="LlavaOnevisionVideoProcessor",
        model_types=("llava_onevision", "videoprism"),
        build=_build_video,
        kwargs=frozenset(),
        ignores=FRAMES_IGNORES,
        none_is_default=frozenset({"do_center_crop", "crop_size"}),
        processor_kwargs=frozenset({"num_image_tokens"}),
    )
)
