"""Qwen3-VL video: ``Qwen3VLVideoProcessor`` (transformers 5.24; torchvision only).

Qwen3-VL's still images use ``Qwen2VLImageProcessor`` (:mod:`mmfast.models.qwen2_vl`). Its video
processor samples ``fps`` frames a second (2 by default, assuming 24 for a clip whose rate is
unknown) with ``np.linspace``, and sizes frames with GLM's ``smart_resize``, which spends the
pixel budget on the whole clip: ``max_pixels`` counts every frame.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import HALF
from mmfast.models.config import Fields
from mmfast.models.glm4v import smart_resize
from mmfast.models.qwen2_vl import QWEN_VIDEO_IGNORES, Qwen2VLVideoConfig, video_fields

__all__ = ["Qwen3VLVideoConfig"]


class Qwen3VLVideoConfig(Qwen2VLVideoConfig):
    """Settings of ``Qwen3VLVideoProcessor``."""

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``Qwen3VLVideoProcessor.sample_frames``."""
        total, video_fps = metadata.total_num_frames, metadata.fps
        if fps is not None and num_frames is not None:
            raise MmfastError("fps, num_frames: expected one of them, got both")
        fps = self.fps if fps is None else fps
        count = num_frames
        if count is None and fps is not None:
            # HF assumes 24 frames a second (with a warning) for a clip without metadata.
            rate = 24.0 if video_fps is None else video_fps
            count = int(total / rate * fps)
            count = min(max(count, self.min_frames), self.max_frames, total)
        if count is None:
            count = min(max(total, self.min_frames), self.max_frames)
        indices: list[int] = np.linspace(0, total - 1, count).round().astype(int).tolist()
        return indices

    def pixel_budget(self, num_frames: int) -> int:
        """``max_pixels`` for the whole clip, capped per frame with ``cap_pixels_per_frame``."""
        if not self.cap_pixels_per_frame:
            return self.max_pixels
        factor = self.patch_size * self.merge_size
        frame_cap = self.max_video_tokens * factor * factor
        per_frame = max(min(frame_cap, self.max_pixels // num_frames), int(self.min_pixels * 1.05))
        return per_frame * num_frames

    def resized_size(self, num_frames: int, height: int, width: int) -> tuple[int, int]:
        """``Qwen3VLVideoProcessor.resize``: GLM's ``smart_resize`` over the clip's frames."""
        return smart_resize(
            num_frames=num_frames,
            height=height,
            width=width,
            temporal_factor=self.temporal_patch_size,
            factor=self.patch_size * self.merge_size,
            min_pixels=self.min_pixels,
            max_pixels=self.pixel_budget(num_frames),
        )


def _build_video(model_id: str | None, cfg: Fields) -> Qwen3VLVideoConfig:
    """Mirrors ``Qwen3VLVideoProcessor``'s class defaults (no ``min_pixels`` spelling)."""
    return Qwen3VLVideoConfig(
        model_id=model_id,
        video_processor_type="Qwen3VLVideoProcessor",
        **video_fields(
            cfg,
            size={"shortest_edge": 128 * 32 * 32, "longest_edge": 32 * 32 * 768},
            legacy_pixels=False,
            mean=HALF,
            std=HALF,
            patch_size=16,
            do_sample_frames=True,
            fps=2.0,
            max_video_tokens=768,
        ),
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="Qwen3VLVideoProcessor",
        model_types=(
            "qwen3_vl",
            "qwen3_vl_moe",
            "qwen3_5",
            "qwen3_5_moe",
            "qwen4_exp",
            "cosmos3_omni",
            "dots3_note",
            "lfm3_vl",
        ),
        build=_build_video,
        ignores=QWEN_VIDEO_IGNORES,
        none_is_default=frozenset({"cap_pixels_per_frame"}),
        kwargs=frozenset(
            {
                "patch_size",
                "temporal_patch_size",
                "merge_size",
                "min_frames",
                "max_frames",
                "cap_pixels_per_frame",
                "max_video_tokens",
            }
        ),
        # resize() reads the instance's budget, whatever a call passes.
        instance_settings=frozenset({"max_video_tokens"}),
    )
)
