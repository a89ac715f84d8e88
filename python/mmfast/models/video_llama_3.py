"""VideoLLaMA3: ``VideoLlama3ImageProcessor`` (transformers 5.24), images only.

Qwen2-VL's image pipeline with other defaults: mean/std 0.5, one temporal frame and
``merge_size`` 1, so :func:`~mmfast.models.qwen2_vl.smart_resize` works at factor 14 and the
patch rows are in raster order. Its outputs add ``image_merge_sizes``, the merge size of each
image. (Its video processor is a separate class, not served here.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from mmfast.models import registry
from mmfast.models.base import BICUBIC, HALF, ImagePlan
from mmfast.models.config import Fields, Source
from mmfast.models.qwen2_vl import QwenVLConfig, call_over_legacy_pixels, grid_thw, patch_fields

__all__ = ["VideoLlama3Config"]


@dataclass(frozen=True)
class VideoLlama3Config(QwenVLConfig):
    """Settings of ``VideoLlama3ImageProcessor``.

    ``num_image_tokens`` is the count of ``<|image_pad|>`` tokens
    ``VideoLlama3Processor.replace_image_token`` inserts:
    ``image_grid_thw.prod() // merge_size**2``.
    """

    def plan(self, height: int, width: int) -> ImagePlan:
        """Qwen2-VL's plan, with the per-image ``image_merge_sizes`` entry."""
        plan = super().plan(height, width)
        shapes = MappingProxyType({**plan.output_shapes, "image_merge_sizes": ()})
        return replace(plan, output_shapes=shapes)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_grid_thw`` (B, 3) and ``image_merge_sizes`` (B,), both int64."""
        grids = grid_thw(plans)
        return {
            "image_grid_thw": grids,
            "image_merge_sizes": np.full(len(grids), self.merge_size, dtype=np.int64),
        }


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> VideoLlama3Config:
    """Mirrors ``VideoLlama3ImageProcessorPil.__init__``: ``min_pixels``/``max_pixels``
    override ``size``'s bounds, as for Qwen2-VL."""
    fields = patch_fields(
        cfg,
        size={"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 1280},
        legacy_pixels=True,
        resample=BICUBIC,
        mean=HALF,
        std=HALF,
        temporal_patch_size=1,
    )
    fields["merge_size"] = cfg.positive_int("merge_size", 1)
    return VideoLlama3Config(
        model_id=source.model_id,
        model_type=registry.model_type_of(source.preprocessor, source.model_type),
        image_processor_type=processor_type,
        **fields,
    )


_HF = "video_llama_3"
registry.register(
    registry.Family(
        name="video_llama_3",
        processor_types=("VideoLlama3ImageProcessor",),
        model_types={"video_llama_3": "VideoLlama3ImageProcessor"},
        build=_build,
        kwargs=frozenset(
            {"min_pixels", "max_pixels", "patch_size", "temporal_patch_size", "merge_size"}
        ),
        processor_classes={"VideoLlama3Processor": "video_llama_3"},
        hf_pil=f"{_HF}.image_processing_pil_video_llama_3.VideoLlama3ImageProcessorPil",
        hf_torchvision=f"{_HF}.image_processing_video_llama_3.VideoLlama3ImageProcessor",
        call_settings=call_over_legacy_pixels,
    )
)

# lkhl/VideoLLaMA3-2B-Image-HF (the checkpoint transformers' VideoLLaMA3 configs and integration
# tests name). No copy of its preprocessor file was found. The pixel bounds are the original
# VideoLLaMA3 processor's token bounds (min_tokens 16, max_tokens 16384 at 14 x 14 pixels, merge
# 1), which the integration test's 10549 image tokens for a 1080 x 1920 photo need (over the
# class default's 1280-token budget); patch 14, temporal 1, merge 1 and mean/std 0.5 are the
# class defaults and the original's. Unconfirmed as a file.
registry.register_builtin(
    "lkhl/VideoLLaMA3-2B-Image-HF",
    "video_llama_3",
    {
        "size": {"shortest_edge": 16 * 14 * 14, "longest_edge": 16384 * 14 * 14},
        "patch_size": 14,
        "temporal_patch_size": 1,
        "merge_size": 1,
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "resample": BICUBIC,
        "image_processor_type": "VideoLlama3ImageProcessor",
        "processor_class": "VideoLlama3Processor",
    },
)
