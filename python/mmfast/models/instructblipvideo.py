"""InstructBLIP-Video: ``InstructBlipVideoVideoProcessor`` (transformers 5.24; torchvision only),
the video processor AutoVideoProcessor gives ``instructblip`` and ``instructblipvideo``, and the
token count of ``InstructBlipVideoProcessor``.

The base video pipeline with BLIP's class defaults: every frame squashed to ``size`` (384x384,
bicubic), rescaled and normalised with OpenAI's CLIP constants, no centre crop and no frame
sampling unless asked. Unlike the other video classes it returns the clips as
``pixel_values``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import ClassVar

from mmfast.models import registry
from mmfast.models.base import BICUBIC, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, VideoPlan
from mmfast.models.base_video import FRAMES_IGNORES, FramesVideoConfig, frames_fields
from mmfast.models.config import Fields

__all__ = ["InstructBlipVideoVideoConfig"]

# What InstructBlipVideoProcessor inserts for a video: num_query_tokens per frame of the four
# it assumes ("InstructBLIP works with 4 frames only"), whatever the clip holds.
FRAMES_COUNTED = 4


@dataclass(frozen=True)
class InstructBlipVideoVideoConfig(FramesVideoConfig):
    """Settings of ``InstructBlipVideoVideoProcessor``; ``frame_tokens`` is the processor's
    ``num_query_tokens``."""

    output_key: ClassVar[str] = "pixel_values"
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({"pixel_values": "clips"})

    def plan(self, frames: int, height: int, width: int) -> VideoPlan:
        """The base pipeline's plan; the tokens of four frames."""
        plan = super().plan(frames, height, width)
        return replace(plan, num_video_tokens=FRAMES_COUNTED * self.frame_tokens)


def _build(model_id: str | None, cfg: Fields) -> InstructBlipVideoVideoConfig:
    """Mirrors the class defaults; ``num_query_tokens`` from ``processor_config.json``
    (InstructBLIP's Q-Former has 32 queries; transformers' processor fails without it)."""
    return InstructBlipVideoVideoConfig(
        model_id=model_id,
        video_processor_type="InstructBlipVideoVideoProcessor",
        **frames_fields(
            cfg,
            size={"height": 384, "width": 384},
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            default_to_square=True,
        ),
        frame_tokens=cfg.positive_int("num_query_tokens", 32),
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="InstructBlipVideoVideoProcessor",
        model_types=("instructblip", "instructblipvideo"),
        build=_build,
        kwargs=frozenset(),
        ignores=FRAMES_IGNORES,
        # The class sets no crop: None, which _preprocess reads as off (the config's default).
        none_is_default=frozenset({"do_center_crop", "crop_size"}),
        processor_kwargs=frozenset({"num_query_tokens"}),
    )
)
