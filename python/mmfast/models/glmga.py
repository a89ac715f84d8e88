"""GLM-GA: ``GlmgaImageProcessor`` (transformers 5.24).

GLM-4.1V's pipeline (:func:`~mmfast.models.glm4v.smart_resize` counting a still image as
``temporal_patch_size`` frames, Qwen-VL patch rows) with one more setting,
``patch_expand_factor``: the torchvision class resizes to multiples of ``patch_size *
merge_size * patch_expand_factor``, the PIL class to multiples of ``patch_size * merge_size``
(it leaves the factor out; the two agree at its default of 1). transformers has no processor
class for the model type.

Its video processor, ``GlmgaVideoProcessor``, is ``Glm46VVideoProcessor`` with a larger pixel
budget (``28 * 28 * 2 * 55790``), the same ``patch_expand_factor`` in its resize factor, and its
own sampler: ``fps`` frames a second (2) over the clip's duration, at most ``max_frames`` (640),
taken at each tick until a tick reaches ``duration - 1 / fps`` (a clip with fewer frames than
that count: ``floor(i * total / count)``), fixed up with ``np.linspace`` as GLM-4.6V's, then
GLM's repeat of the last index to an even count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from mmfast.models import registry
from mmfast.models.base import BICUBIC, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from mmfast.models.config import Fields, Source
from mmfast.models.glm4v import (
    GLM_VIDEO_IGNORES,
    Glm4vConfig,
    Glm46VVideoConfig,
    glm_clip_duration,
    glm_video_fields,
    linspace_fixup,
    smart_resize,
    ticks,
    unique_even,
)
from mmfast.models.qwen2_vl import patch_fields

__all__ = ["GlmgaConfig", "GlmgaVideoConfig"]


@dataclass(frozen=True)
class GlmgaConfig(Glm4vConfig):
    """Settings of ``GlmgaImageProcessor``.

    ``num_image_tokens``: ``image_grid_thw.prod() // merge_size**2``, as GLM-4.6V's processor
    (which serves the checkpoint) counts them.
    """

    patch_expand_factor: int = 1

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """``GlmgaImageProcessor.resize`` at factor ``patch_size * merge_size *
        patch_expand_factor`` (``GlmgaImageProcessorPil``: without ``patch_expand_factor``)."""
        assert self.min_pixels is not None and self.max_pixels is not None  # load_config
        expand = self.patch_expand_factor if self.backend == "torchvision" else 1
        return smart_resize(
            num_frames=self.temporal_patch_size,
            height=height,
            width=width,
            temporal_factor=self.temporal_patch_size,
            factor=self.patch_size * self.merge_size * expand,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
        )


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> GlmgaConfig:
    """Mirrors ``GlmgaImageProcessorPil``'s class defaults (no ``min_pixels`` spelling)."""
    return GlmgaConfig(
        model_id=source.model_id,
        model_type=registry.model_type_of(source.preprocessor, source.model_type),
        image_processor_type=processor_type,
        **patch_fields(
            cfg,
            size={"shortest_edge": 112 * 112, "longest_edge": 28 * 28 * 15000},
            legacy_pixels=False,
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            temporal_patch_size=2,
        ),
        patch_expand_factor=cfg.positive_int("patch_expand_factor", 1),
    )


registry.register(
    registry.Family(
        name="glmga",
        processor_types=("GlmgaImageProcessor",),
        model_types={"glmga": "GlmgaImageProcessor"},
        build=_build,
        kwargs=frozenset(
            {"patch_size", "temporal_patch_size", "merge_size", "patch_expand_factor"}
        ),
        hf_pil="glmga.image_processing_pil_glmga.GlmgaImageProcessorPil",
        hf_torchvision="glmga.image_processing_glmga.GlmgaImageProcessor",
    )
)

# zai-org/GLM-GA (vLLM's and SGLang's recipes serve it; transformers' GlmgaConfig docstring
# names GLM-4.1V-9B-Thinking, whose file names the Glm4v class). No copy of its preprocessor
# file was found: the recipes describe it as GLM-4.6V-Flash's architecture with GLM-GA's own
# image and video processors, so GLM-4.6V's settings (pixel bounds 12544 / 9633792, patch 14,
# temporal 2, merge 2, CLIP constants) are assumed, with patch_expand_factor at its default of
# 1 (unconfirmed). Its video settings: the GlmgaVideoProcessor class defaults, which vLLM's
# GLM-GA recipe describes (2 frames a second, at most 640 frames, a video budget of "87M"
# pixels: 28 * 28 * 2 * 55790); no copy of a video_preprocessor_config.json was found.
registry.register_builtin(
    "zai-org/GLM-GA",
    "glmga",
    {
        "size": {"shortest_edge": 12544, "longest_edge": 9633792},
        "do_rescale": True,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "patch_expand_factor": 1,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_std": list(OPENAI_CLIP_STD),
        "image_processor_type": "GlmgaImageProcessor",
    },
    video={
        "size": {"shortest_edge": 12544, "longest_edge": 87478720},
        "max_image_size": {"longest_edge": 87478720},
        "do_convert_rgb": True,
        "do_resize": True,
        "do_rescale": True,
        "do_normalize": True,
        "do_sample_frames": True,
        "fps": 2,
        "num_frames": 16,
        "max_frames": 640,
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "patch_expand_factor": 1,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_std": list(OPENAI_CLIP_STD),
        "video_processor_type": "GlmgaVideoProcessor",
    },
)


# --------------------------------------------------------------------------------------------
# Video: GlmgaVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GlmgaVideoConfig(Glm46VVideoConfig):
    """Settings of ``GlmgaVideoProcessor``: GLM-4.6V's clip arithmetic (the budget counting
    every sampled frame, Qwen-VL rows, the last frame repeated to fill the last group) at
    factor ``patch_size * merge_size * patch_expand_factor``, with its own sampler.
    ``num_video_tokens`` counts the ``<|image|>`` tokens ``Glm46VProcessor`` (which serves the
    checkpoint) inserts: ``video_grid_thw.prod() // merge_size**2``."""

    patch_expand_factor: int
    max_frames: int

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``GlmgaVideoProcessor.sample_frames``: ``int(duration * fps)`` frames (the
        config's ``fps`` without one; at most the config's ``max_frames``, which a call does not
        change), taken at each ``1 / fps`` tick until a tick reaches ``duration - 1 / fps`` (a
        clip with fewer frames than that: ``floor(i * total / count)``), fixed up with
        ``np.linspace`` to the count; ``num_frames`` is not read."""
        total, video_fps, duration = glm_clip_duration(metadata, "GLM-GA")
        target_fps = self.fps if fps is None else fps
        extract_t = min(int(duration * target_fps), self.max_frames)
        indices: list[int]
        if total < extract_t:
            indices = [math.floor(i * total / extract_t) for i in range(extract_t)]
        else:
            inv_fps = 1 / target_fps
            indices = ticks(total, video_fps, inv_fps, duration - inv_fps)
        return unique_even(linspace_fixup(indices, extract_t, total))

    def resized_size(self, frames: int, height: int, width: int) -> tuple[int, int]:
        """``resize``: :func:`smart_resize` of a frame at factor ``patch_size * merge_size *
        patch_expand_factor``, the budget counting the clip's frames."""
        assert self.min_pixels is not None and self.max_pixels is not None  # _build_video
        return smart_resize(
            num_frames=frames,
            height=height,
            width=width,
            temporal_factor=self.temporal_patch_size,
            factor=self.patch_size * self.merge_size * self.patch_expand_factor,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
        )


def _build_video(model_id: str | None, cfg: Fields) -> GlmgaVideoConfig:
    """Mirrors ``GlmgaVideoProcessor``'s class defaults (GLM-4.6V's, a budget of ``28 * 28 * 2
    * 55790`` pixels, ``patch_expand_factor`` 1, ``max_frames`` 640)."""
    return GlmgaVideoConfig(
        model_id=model_id,
        video_processor_type="GlmgaVideoProcessor",
        **glm_video_fields(cfg, longest_edge=28 * 28 * 2 * 55790),
        patch_expand_factor=cfg.positive_int("patch_expand_factor", 1),
        max_frames=cfg.positive_int("max_frames", 640),
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="GlmgaVideoProcessor",
        model_types=("glmga",),
        build=_build_video,
        kwargs=frozenset(
            {
                "max_image_size",
                "patch_size",
                "temporal_patch_size",
                "merge_size",
                "patch_expand_factor",
                "max_frames",
            }
        ),
        ignores=GLM_VIDEO_IGNORES,
    )
)
