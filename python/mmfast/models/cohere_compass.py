"""Cohere North Micro Vision: ``CohereCompassImageProcessor`` (transformers 5.24).

The image class is Qwen2-VL's line for line (its defaults too: ``smart_resize`` at factor
``patch_size * merge_size`` = 28, 3136 to 1003520 pixels, CLIP mean/std, patch rows of two
repeated frames ordered by merge group, ``min_pixels``/``max_pixels`` folded into ``size``).
Its video class is Qwen3-VL's line for line (:class:`~mmfast.models.qwen3_vl.Qwen3VLVideoConfig`).
"""

from __future__ import annotations

from dataclasses import dataclass

from mmfast.models import registry
from mmfast.models.base import BICUBIC, HALF, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from mmfast.models.config import Fields, Source
from mmfast.models.qwen2_vl import (
    QWEN_VIDEO_IGNORES,
    QwenVLConfig,
    call_over_legacy_pixels,
    patch_fields,
    video_fields,
)
from mmfast.models.qwen3_vl import Qwen3VLVideoConfig

__all__ = ["CohereCompassConfig"]


@dataclass(frozen=True)
class CohereCompassConfig(QwenVLConfig):
    """Settings of ``CohereCompassImageProcessor``.

    ``num_image_tokens`` is the count of ``<|IMAGE_PAD|>`` tokens ``CohereCompassProcessor``
    inserts: ``image_grid_thw.prod() // merge_size**2``.
    """


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> CohereCompassConfig:
    """Mirrors ``CohereCompassImageProcessor.__init__``: ``min_pixels``/``max_pixels``
    override ``size["shortest_edge"]``/``size["longest_edge"]``, as for Qwen2-VL."""
    return CohereCompassConfig(
        model_id=source.model_id,
        model_type=registry.model_type_of(source.preprocessor, source.model_type),
        image_processor_type=processor_type,
        **patch_fields(
            cfg,
            size={"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 1280},
            legacy_pixels=True,
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            temporal_patch_size=2,
        ),
    )


registry.register(
    registry.Family(
        name="cohere_compass",
        processor_types=("CohereCompassImageProcessor",),
        model_types={"cohere_compass": "CohereCompassImageProcessor"},
        build=_build,
        kwargs=frozenset(
            {"min_pixels", "max_pixels", "patch_size", "temporal_patch_size", "merge_size"}
        ),
        processor_classes={"CohereCompassProcessor": "cohere_compass"},
        hf_pil="cohere_compass.image_processing_pil_cohere_compass.CohereCompassImageProcessorPil",
        hf_torchvision="cohere_compass.image_processing_cohere_compass.CohereCompassImageProcessor",
        call_settings=call_over_legacy_pixels,
    )
)

# CohereLabs/North-Micro-Vision-Instruct: the pixel bounds 16384 / 3868706 (as min_pixels,
# max_pixels and size) from a project's test quoting the image block of the
# processor_config.json the mlx-community conversion ships (the nested block transformers builds
# the processor from; the separate preprocessor_config.json there carries Qwen3-VL's stale
# 65536 / 16777216);
# patch 16 and mean/std 0.5 from an MLX port's defaults for the checkpoints (its tower is
# Qwen3-VL's). The rest is the class defaults; the file itself was not seen.
registry.register_builtin(
    "CohereLabs/North-Micro-Vision-Instruct",
    "cohere_compass",
    {
        "image_mean": list(HALF),
        "image_processor_type": "CohereCompassImageProcessor",
        "image_std": list(HALF),
        "max_pixels": 3868706,
        "merge_size": 2,
        "min_pixels": 16384,
        "patch_size": 16,
        "processor_class": "CohereCompassProcessor",
        "size": {"longest_edge": 3868706, "shortest_edge": 16384},
        "temporal_patch_size": 2,
    },
    # Its video processor: no public copy; the class defaults (Qwen3-VL's). Unconfirmed.
    video={
        "do_sample_frames": True,
        "fps": 2,
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "max_frames": 768,
        "merge_size": 2,
        "min_frames": 4,
        "patch_size": 16,
        "resample": BICUBIC,
        "size": {"longest_edge": 32 * 32 * 768, "shortest_edge": 128 * 32 * 32},
        "temporal_patch_size": 2,
        "video_processor_type": "CohereCompassVideoProcessor",
    },
)


# --------------------------------------------------------------------------------------------
# Video: CohereCompassVideoProcessor (transformers 5.24; torchvision only), Qwen3-VL's video
# class line for line: fps sampling with np.linspace, GLM's smart_resize over the whole clip.
# --------------------------------------------------------------------------------------------


def _build_video(model_id: str | None, cfg: Fields) -> Qwen3VLVideoConfig:
    """Mirrors ``CohereCompassVideoProcessor``'s class defaults (Qwen3-VL's)."""
    return Qwen3VLVideoConfig(
        model_id=model_id,
        video_processor_type="CohereCompassVideoProcessor",
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
        processor_type="CohereCompassVideoProcessor",
        model_types=("cohere_compass",),
        build=_build_video,
        ignores=QWEN_VIDEO_IGNORES,
        # _preprocess reads a None cap as False, the config's default.
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
