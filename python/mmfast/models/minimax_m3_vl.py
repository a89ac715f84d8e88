"""MiniMax-M3: ``MiniMaxM3VLImageProcessor`` (transformers 5.24; torchvision only).

Qwen2-VL's class with other bounds: ``smart_resize`` at factor 28 between 3136 and 451584
pixels, CLIP mean/std, patch rows of two repeated frames in merge-group order. Its
``__init__`` replaces a ``size`` of ``[672, 672]`` (what the official checkpoint saved, and
never read) with the class default before folding ``min_pixels``/``max_pixels`` into it.

transformers has only the torchvision class: the plans always match it, under either backend
name (as for Llama 4). Its video class resizes frames by its own ``min_pixels``/``max_pixels``
and cuts ``video_grid_thw`` into attention segments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, ClassVar, cast

import numpy as np

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RGB,
    ImagePlan,
    Patchify,
    Resize,
    VideoConfig,
    VideoPlan,
    View,
    check_image_size,
)
from mmfast.models.base_video import positive_number
from mmfast.models.config import Fields, Source
from mmfast.models.qwen2_vl import (
    QWEN_VIDEO_IGNORES,
    QwenVideoPlan,
    QwenVLConfig,
    call_over_legacy_pixels,
    patch_fields,
    smart_resize,
    temporal_groups,
)

__all__ = ["MiniMaxM3VLConfig", "MiniMaxM3VLVideoConfig"]

# MiniMaxM3VLImageProcessor.__init__: "The default size saved in offcial ckpt isn't correct and
# wasn't used prev!"
STALE_SIZE = [672, 672]


@dataclass(frozen=True)
class MiniMaxM3VLConfig(QwenVLConfig):
    """Settings of ``MiniMaxM3VLImageProcessor``.

    ``num_image_tokens`` is the count of ``]<]image[>[`` tokens ``MiniMaxM3VLProcessor``
    inserts: ``image_grid_thw.prod() // merge_size**2`` (it wraps them in a start and an end
    token, which ``_get_num_multimodal_tokens`` does not count either).
    """

    def plan(self, height: int, width: int) -> ImagePlan:
        """The torchvision class's plan (torch resize, fused normalisation), whatever
        ``backend`` names."""
        if self.backend != "torchvision":
            return replace(self, backend="torchvision").plan(height, width)
        return super().plan(height, width)


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> MiniMaxM3VLConfig:
    """Mirrors ``MiniMaxM3VLImageProcessor.__init__``: a ``[672, 672]`` size reads as the class
    default, then ``min_pixels``/``max_pixels`` override its bounds, as for Qwen2-VL.

    (transformers folds them into the class's own default dict there, so a later instance
    built without a size inherits them in that process; mmfast reads each config alone.)"""
    if cfg.raw("size") == STALE_SIZE:
        cfg = cfg.with_values(size=None)
    fields = patch_fields(
        cfg,
        size={"shortest_edge": 4 * 28 * 28, "longest_edge": 451584},
        legacy_pixels=True,
        resample=BICUBIC,
        mean=OPENAI_CLIP_MEAN,
        std=OPENAI_CLIP_STD,
        temporal_patch_size=2,
    )
    fields["resample"] = cfg.torch_resample(BICUBIC)
    return MiniMaxM3VLConfig(
        model_id=source.model_id,
        model_type=registry.model_type_of(source.preprocessor, source.model_type),
        image_processor_type=processor_type,
        **fields,
    )


registry.register(
    registry.Family(
        name="minimax_m3_vl",
        processor_types=("MiniMaxM3VLImageProcessor",),
        model_types={"minimax_m3_vl": "MiniMaxM3VLImageProcessor"},
        build=_build,
        kwargs=frozenset(
            {"min_pixels", "max_pixels", "patch_size", "temporal_patch_size", "merge_size"}
        ),
        processor_classes={"MiniMaxM3VLProcessor": "minimax_m3_vl"},
        hf_torchvision="minimax_m3_vl.image_processing_minimax_m3_vl.MiniMaxM3VLImageProcessor",
        call_settings=call_over_legacy_pixels,
    )
)

# MiniMaxAI/MiniMax-M3: the keys a serving project's tests quote "as it appears in the
# MiniMax-M3 checkpoint's preprocessor_config.json" (three copies of the same fixture): CLIP
# mean/std, patch 14, the stale [672, 672] size transformers replaces, and the remote-code
# processor's own keys (read by neither class). The quote names no image_processor_type: the
# one here is assumed (transformers' class, which its comment says loads that file); whether
# the file names another (with an auto_map) is unconfirmed.
registry.register_builtin(
    "MiniMaxAI/MiniMax-M3",
    "minimax_m3_vl",
    {
        "add_start_end_special_tokens": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "MiniMaxM3VLImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "img_token_compression_config": {
            "image_token_compression_method": "patch_merge",
            "image_token_compression_threshold": 1.1,
            "max_image_resolution": 1008,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        "patch_size": 14,
        "process_image_mode": "dynamic_res",
        "processor_class": "MiniMaxVLProcessor",
        "size": list(STALE_SIZE),
    },
)


# --------------------------------------------------------------------------------------------
# Video: MiniMaxM3VLVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MiniMaxVideoPlan(QwenVideoPlan):
    """A MiniMax clip's plan: its patch grid, cut into attention segments of at most
    ``segment`` temporal patches (None: one segment)."""

    segment: int | None

    def segments(self) -> list[tuple[int, int, int]]:
        """``video_grid_thw``'s rows for the clip: ``(t, h, w)`` per segment."""
        t, h, w = self.grid
        step = t if self.segment is None else self.segment
        return [(min(step, t - start), h, w) for start in range(0, t, step)]


@dataclass(frozen=True)
class MiniMaxM3VLVideoConfig(VideoConfig):
    """Settings of ``MiniMaxM3VLVideoProcessor``: transformers' default sampling (no sampling
    unless asked; then ``fps`` frames a second, 1 by default), each
    frame resized by Qwen2-VL's :func:`~mmfast.models.qwen2_vl.smart_resize` between
    ``min_pixels`` and ``max_pixels`` (its ``size`` is not read), Qwen's patch rows, and
    ``video_grid_thw`` cut into segments of ``vision_segment_max_frames`` temporal patches,
    with ``num_chunks_per_video``.

    ``num_video_tokens`` is the count of ``]<]video[>[`` tokens ``MiniMaxM3VLProcessor``
    inserts: ``grid_t * grid_h * grid_w // merge_size**2`` (each frame's wrapped in a start
    and an end token, and a timestamp text with metadata).
    """

    model_id: str | None
    video_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    min_pixels: int
    max_pixels: int
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    patch_size: int
    temporal_patch_size: int
    merge_size: int
    vision_segment_max_frames: int | None
    do_sample_frames: bool
    fps: float | None
    num_frames: int | None

    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({"num_chunks_per_video": "ints"})

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``BaseVideoProcessor.sample_frames`` with the class's ``fps``:
        ``default_sample_indices_fn`` of ``fps`` frames a second, or of the config's
        ``num_frames`` where a call passed ``num_frames=None`` (``sample_frames`` puts the
        instance's in after its check).

        transformers always passes the class's ``fps`` (its kwargs type refuses None), so a
        ``num_frames`` of the call, or the config's where the call names none, meets it and
        ``sample_frames`` raises (``num_frames`` and ``fps`` are mutually exclusive): so does
        this."""
        if num_frames is not None:
            raise MmfastError(
                f"num_frames: MiniMaxM3VLVideoProcessor samples by fps (its fps setting, "
                f"{self.fps if fps is None else fps}, is never None, and transformers refuses "
                f"num_frames beside it), got num_frames={num_frames}"
            )
        fps = self.fps if fps is None else fps
        # Imported here: mmfast.video imports mmfast.models, which imports this module
        # (a module-level import fails when mmfast.video is the first import).
        from mmfast.video import default_sample_indices

        return [int(i) for i in default_sample_indices(metadata, self.num_frames, fps)]

    def plan(self, frames: int, height: int, width: int) -> MiniMaxVideoPlan:
        """Mirrors ``MiniMaxM3VLVideoProcessor._preprocess`` for one clip: every frame resized
        alike (torchvision), ``temporal_patch_size`` frames at a time into Qwen's patch rows,
        the last frame repeated to fill the last group."""
        check_image_size(height, width)
        factor = self.patch_size * self.merge_size
        size = (
            smart_resize(height, width, factor, self.min_pixels, self.max_pixels)
            if self.do_resize
            else (height, width)
        )
        if size[0] % factor or size[1] % factor:
            raise MmfastError(
                f"video size: with do_resize=False both sides must be multiples of {factor}, "
                f"got {height}x{width}"
            )
        t = self.temporal_patch_size
        resize = Resize(size, self.resample, "torch") if self.do_resize else None
        views = temporal_groups(
            frames, t, View(resize=resize, out=Patchify(self.patch_size, t, self.merge_size))
        )
        grid_t, grid_h, grid_w = len(views), size[0] // self.patch_size, size[1] // self.patch_size
        rows = grid_t * grid_h * grid_w
        return MiniMaxVideoPlan(
            height=height,
            width=width,
            frames=frames,
            views=views,
            output_shapes=MappingProxyType(
                {"pixel_values_videos": (rows, 3 * t * self.patch_size**2)}
            ),
            num_video_tokens=rows // self.merge_size**2,
            grid=(grid_t, grid_h, grid_w),
            segment=self.vision_segment_max_frames,
        )

    def batch_outputs(self, plans: Sequence[VideoPlan]) -> dict[str, Any]:
        """``video_grid_thw`` (segments, 3) int64 and ``num_chunks_per_video`` (clips,)
        int64, each clip's segment count."""
        segments = [cast("MiniMaxVideoPlan", plan).segments() for plan in plans]
        return {
            "video_grid_thw": np.array([s for clip in segments for s in clip], np.int64).reshape(
                -1, 3
            ),
            "num_chunks_per_video": np.array([len(clip) for clip in segments], np.int64),
        }


def _build_video(model_id: str | None, cfg: Fields) -> MiniMaxM3VLVideoConfig:
    """Mirrors ``MiniMaxM3VLVideoProcessor``'s class defaults. Its pixel bounds are its own
    ``min_pixels``/``max_pixels`` settings; ``size``, ``total_pixels``, ``min_frames`` and
    ``max_frames`` are read by nothing it runs. ``vision_segment_max_frames`` of None keeps a
    clip one segment in transformers, but a config's null reads as the class default here, as
    every null does (``mmfast.hf`` runs transformers' code for a None)."""
    norm = cfg.normalization(OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)
    for unused in ("total_pixels", "min_frames", "max_frames"):
        cfg.positive_int(unused, 1)
    num_frames = cfg.raw("num_frames")
    return MiniMaxM3VLVideoConfig(
        model_id=model_id,
        video_processor_type="MiniMaxM3VLVideoProcessor",
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=cfg.flag("do_resize", True),
        min_pixels=cfg.positive_int("min_pixels", 4 * 28 * 28),
        max_pixels=cfg.positive_int("max_pixels", 768 * 28 * 28),
        resample=cfg.torch_resample(BICUBIC),
        **norm.fields(),
        patch_size=cfg.positive_int("patch_size", 14),
        temporal_patch_size=cfg.positive_int("temporal_patch_size", 2),
        merge_size=cfg.positive_int("merge_size", 2),
        vision_segment_max_frames=cfg.positive_int("vision_segment_max_frames", 4),
        do_sample_frames=cfg.flag("do_sample_frames", False),
        fps=positive_number(cfg, "fps", 1.0),
        num_frames=None if num_frames is None else cfg.positive_int("num_frames", 1),
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="MiniMaxM3VLVideoProcessor",
        model_types=("minimax_m3_vl",),
        build=_build_video,
        kwargs=frozenset(
            {
                "patch_size",
                "temporal_patch_size",
                "merge_size",
                "min_pixels",
                "max_pixels",
                "total_pixels",
                "min_frames",
                "max_frames",
                "vision_segment_max_frames",
            }
        ),
        # _preprocess resizes by min/max pixels, never by size, and never crops or pads.
        ignores=QWEN_VIDEO_IGNORES | {"size"},
    )
)
