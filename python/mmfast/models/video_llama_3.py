"""VideoLLaMA3: ``VideoLlama3ImageProcessor`` and ``VideoLlama3VideoProcessor`` (transformers
5.24).

The image class is Qwen2-VL's image pipeline with other defaults: mean/std 0.5, one temporal
frame and ``merge_size`` 1, so :func:`~mmfast.models.qwen2_vl.smart_resize` works at factor 14
and the patch rows are in raster order. Its outputs add ``image_merge_sizes``, the merge size of
each image.

The video class resizes every frame by that ``smart_resize`` with the pixel budget divided by
the clip's length (``longest_edge // frames``), writes Qwen-VL rows (temporal patch 1, merge 2)
and adds ``video_merge_sizes`` and ``video_compression_mask``: which merged tokens the model
keeps. With ``use_token_compression`` (the default) a token of a clip of several temporal
groups is kept where its mean absolute difference from the same token of the group before,
over the normalised values, exceeds 0.1/255: a reduction over the pixels, which the pixel
engine does not compute, and on which the number of ``<|video_pad|>`` tokens depends. mmfast
refuses such clips (:class:`UnsupportedModelError` naming ``use_token_compression``; mmfast.hf
then runs transformers' code) and computes one-group clips (every token kept) and
``use_token_compression=False`` (every token kept).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, cast

import numpy as np

from mmfast.errors import MmfastError, UnsupportedModelError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    HALF,
    RGB,
    ImagePlan,
    Resize,
    VideoConfig,
    VideoPlan,
    check_image_size,
)
from mmfast.models.base_video import positive_number
from mmfast.models.config import Fields, Source
from mmfast.models.ernie4_5_vl_moe import torch_arange_indices
from mmfast.models.glm4v import GLM_VIDEO_IGNORES, patch_rows_plan
from mmfast.models.qwen2_vl import (
    QwenVideoPlan,
    QwenVLConfig,
    call_over_legacy_pixels,
    grid_thw,
    patch_fields,
    smart_resize,
)

__all__ = ["VideoLlama3Config", "VideoLlama3VideoConfig"]


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
    # Its video processor: VideoLlama3VideoProcessor's class defaults (no copy of the file was
    # found; unconfirmed). use_token_compression is on: clips of several frames are refused.
    video={
        "size": {"shortest_edge": 128 * 28 * 28, "longest_edge": 28 * 28 * 768},
        "patch_size": 14,
        "temporal_patch_size": 1,
        "merge_size": 2,
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "resample": BICUBIC,
        "min_frames": 4,
        "max_frames": 180,
        "do_sample_frames": False,
        "use_token_compression": True,
        "video_processor_type": "VideoLlama3VideoProcessor",
        "processor_class": "VideoLlama3Processor",
    },
)


# --------------------------------------------------------------------------------------------
# Video: VideoLlama3VideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VideoLlama3VideoConfig(VideoConfig):
    """Settings of ``VideoLlama3VideoProcessor``.

    ``min_pixels``/``max_pixels`` are ``size["shortest_edge"]``/``size["longest_edge"]``, the
    latter the whole clip's budget. ``num_video_tokens`` is the count of ``<|video_pad|>``
    tokens ``VideoLlama3Processor.replace_video_token`` inserts: the kept tokens of
    ``video_compression_mask``, every merged token (``video_grid_thw.prod() //
    merge_size**2``) for the clips mmfast computes.
    """

    model_id: str | None
    video_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    min_pixels: int | None
    max_pixels: int | None
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    patch_size: int
    temporal_patch_size: int
    merge_size: int
    min_frames: int
    max_frames: int
    do_sample_frames: bool
    fps: float | None
    num_frames: int | None
    use_token_compression: bool

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``VideoLlama3VideoProcessor.sample_frames``: ``num_frames`` rounded to a
        multiple of ``temporal_patch_size``, or ``fps`` frames a second held to
        ``min_frames``..``max_frames`` and the clip's length (floored to that multiple); the
        indices are :func:`~mmfast.models.ernie4_5_vl_moe.torch_arange_indices`. One of them is
        needed (transformers' ``TypeError`` otherwise). A call's ``num_frames`` replaces the
        config's ``fps``."""
        fps, num_frames = self.sampling(fps, num_frames)
        t = self.temporal_patch_size
        total = int(metadata.total_num_frames)
        count: float
        if num_frames is not None:
            count = round(num_frames / t) * t
        elif fps is not None:
            if metadata.fps is None:
                raise MmfastError(
                    "video_fps: sampling at fps frames a second needs the clip's frame rate"
                )
            max_frames = math.floor(min(self.max_frames, total) / t) * t
            count = total / metadata.fps * fps
            count = min(max(count, self.min_frames), max_frames, total)
            count = math.floor(count / t) * t
        else:
            raise MmfastError(
                "num_frames, fps: VideoLLaMA3 samples by one of them; the config sets neither "
                "(pass one, or do_sample_frames=False)"
            )
        if count > total:
            raise MmfastError(
                f"num_frames: the clip has {total} frames, sampling asked for {count}"
            )
        if count <= 0:
            raise MmfastError(f"num_frames: sampling gives {count} frames of a {total}-frame clip")
        return torch_arange_indices(total, count)

    def plan(self, frames: int, height: int, width: int) -> QwenVideoPlan:
        """Mirrors ``_preprocess`` for one clip: each frame resized by ``smart_resize`` with
        ``max_pixels // frames``, rescaled, normalised and patchified. A clip of several
        temporal groups with ``use_token_compression`` raises :class:`UnsupportedModelError`:
        its compression mask is a reduction over its pixels."""
        check_image_size(height, width)
        t = self.temporal_patch_size
        if self.use_token_compression and -(-frames // t) > 1:
            raise UnsupportedModelError(
                "use_token_compression: True keeps the video tokens whose pixels differ from "
                "the frame before by a mean of more than 0.1/255, a reduction over the pixels "
                "mmfast does not compute (and on which the token count depends); clips of "
                f"one temporal group are computed, this one has {frames} frames. Pass "
                "use_token_compression=False (video_overrides), or use mmfast.hf, which runs "
                "transformers' code for such calls"
            )
        if frames < 1:
            raise MmfastError(f"frames: expected at least one frame, got {frames}")
        size = (height, width)
        if self.do_resize:
            assert self.min_pixels is not None and self.max_pixels is not None  # _build_video
            budget = self.max_pixels // frames
            if budget < 1:
                raise MmfastError(
                    f"size: longest_edge={self.max_pixels} leaves no pixels for each of "
                    f"{frames} frames"
                )
            factor = self.patch_size * self.merge_size
            size = smart_resize(height, width, factor, self.min_pixels, budget)
        return patch_rows_plan(
            frames,
            height,
            width,
            size,
            resize=Resize(size, self.resample, "torch") if self.do_resize else None,
            pad=None,
            patch_size=self.patch_size,
            temporal_patch_size=t,
            merge_size=self.merge_size,
            token_divisor=self.merge_size**2,
        )

    def batch_outputs(self, plans: Sequence[VideoPlan]) -> dict[str, Any]:
        """``video_grid_thw`` (clips, 3) and ``video_merge_sizes`` (clips,), int64, and
        ``video_compression_mask`` (the clips' merged tokens,) bool: every token kept."""
        grids = np.array([cast("QwenVideoPlan", p).grid for p in plans], np.int64).reshape(-1, 3)
        tokens = sum(plan.num_video_tokens for plan in plans)
        return {
            "video_grid_thw": grids,
            "video_merge_sizes": np.full(len(plans), self.merge_size, dtype=np.int64),
            "video_compression_mask": np.ones(tokens, dtype=bool),
        }


def _build_video(model_id: str | None, cfg: Fields) -> VideoLlama3VideoConfig:
    """Mirrors ``VideoLlama3VideoProcessor.__init__``: ``min_pixels``/``max_pixels`` override
    ``size``'s bounds, as for Qwen2-VL."""
    fields = patch_fields(
        cfg,
        size={"shortest_edge": 128 * 28 * 28, "longest_edge": 28 * 28 * 768},
        legacy_pixels=True,
        resample=BICUBIC,
        mean=HALF,
        std=HALF,
        temporal_patch_size=1,
    )
    fields["resample"] = cfg.torch_resample(BICUBIC)
    num_frames, fps = cfg.raw("num_frames"), cfg.raw("fps")
    return VideoLlama3VideoConfig(
        model_id=model_id,
        video_processor_type="VideoLlama3VideoProcessor",
        **fields,
        min_frames=cfg.positive_int("min_frames", 4),
        max_frames=cfg.positive_int("max_frames", 180),
        do_sample_frames=cfg.flag("do_sample_frames", False),
        fps=None if fps is None else positive_number(cfg, "fps"),
        num_frames=None if num_frames is None else cfg.positive_int("num_frames", 1),
        use_token_compression=cfg.flag("use_token_compression", True),
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="VideoLlama3VideoProcessor",
        model_types=("video_llama_3",),
        build=_build_video,
        kwargs=frozenset(
            {
                "min_pixels",
                "max_pixels",
                "patch_size",
                "temporal_patch_size",
                "merge_size",
                "min_frames",
                "max_frames",
                "use_token_compression",
            }
        ),
        ignores=GLM_VIDEO_IGNORES - {"max_image_size"},
    )
)
