"""Hy4 vision (Tencent): ``HYV4VLImageProcessor`` (transformers 5.24).

HunyuanOCR's image class line for line (:mod:`mmfast.models.hunyuan_vl`): Qwen2-VL's
``smart_resize`` at factor ``patch_size * merge_size`` = 32 between 512² and 2048² pixels,
always bicubic, CLIP mean/std, one temporal frame, patch rows in raster order;
``HYV4VLProcessor`` counts a token per merged patch and a newline per merged row. Its video class
sizes frames by a token budget of its own (:func:`video_smart_resize`), with mean/std 0.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    HALF,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RGB,
    PatchGrid,
    Patchify,
    Resize,
    VideoConfig,
    VideoPlan,
    View,
    check_image_size,
)
from mmfast.models.base_video import positive_number
from mmfast.models.config import MAX_INT, Fields, Source, is_int_in
from mmfast.models.hunyuan_vl import HunYuanVLConfig
from mmfast.models.qwen2_vl import (
    QWEN_VIDEO_IGNORES,
    QwenVideoPlan,
    call_over_legacy_pixels,
    patch_fields,
    temporal_groups,
    video_grid_thw,
)

__all__ = ["HYV4VLConfig", "HYV4VLVideoConfig", "frame_tokens", "video_smart_resize"]


def frame_tokens(grid_h: int, grid_w: int, merge_size: int) -> int:
    """``HYV4VLProcessor._num_frame_tokens``: a token per merged patch and a newline token
    closing each merged row."""
    return (grid_h // merge_size) * (grid_w // merge_size + 1)


@dataclass(frozen=True)
class HYV4VLConfig(HunYuanVLConfig):
    """Settings of ``HYV4VLImageProcessor``, line for line ``HunYuanVLImageProcessor``
    (:class:`~mmfast.models.hunyuan_vl.HunYuanVLConfig`: bicubic whatever ``resample`` says,
    raster-order rows, sides multiples of ``patch_size * merge_size`` without a resize).

    ``num_image_tokens`` is the count of ``<|image_pad|>`` tokens ``HYV4VLProcessor`` inserts:
    ``(grid_h // merge) * (grid_w // merge + 1)`` (a newline token per merged row; no
    ``spatial_patch_size``, no extra tokens around the image).
    """

    def tokens(self, grid: PatchGrid) -> int:
        return frame_tokens(grid.grid_h, grid.grid_w, self.merge_size)


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> HYV4VLConfig:
    """Mirrors ``HYV4VLImageProcessor.__init__``: ``min_pixels``/``max_pixels`` override
    ``size``'s bounds, as for Qwen2-VL. ``resample`` is never read: the class resizes
    bicubic, so no value of it is an error."""
    fields = patch_fields(
        cfg.with_values(resample=None),
        size={"shortest_edge": 512 * 512, "longest_edge": 2048 * 2048},
        legacy_pixels=True,
        resample=BICUBIC,
        mean=OPENAI_CLIP_MEAN,
        std=OPENAI_CLIP_STD,
        temporal_patch_size=1,
    )
    fields["patch_size"] = cfg.positive_int("patch_size", 16)
    return HYV4VLConfig(
        model_id=source.model_id,
        model_type=registry.model_type_of(source.preprocessor, source.model_type),
        image_processor_type=processor_type,
        **fields,
    )


registry.register(
    registry.Family(
        name="hy_v4_vl",
        processor_types=("HYV4VLImageProcessor",),
        model_types={"hy_v4_vl": "HYV4VLImageProcessor"},
        build=_build,
        kwargs=frozenset(
            {"min_pixels", "max_pixels", "patch_size", "temporal_patch_size", "merge_size"}
        ),
        processor_classes={"HYV4VLProcessor": "hy_v4_vl"},
        hf_pil="hy_v4_vl.image_processing_pil_hy_v4_vl.HYV4VLImageProcessorPil",
        hf_torchvision="hy_v4_vl.image_processing_hy_v4_vl.HYV4VLImageProcessor",
        call_settings=call_over_legacy_pixels,
    )
)

# tencent/Hy4 (transformers' docs checkpoint for hy_v4_vl): no public copy of its image
# processor file was found. These are the class defaults (512² to 2048² pixels, patch 16,
# merge 2, one frame, CLIP mean/std). Unconfirmed.
registry.register_builtin(
    "tencent/Hy4",
    "hy_v4_vl",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "HYV4VLImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "max_pixels": 2048 * 2048,
        "merge_size": 2,
        "min_pixels": 512 * 512,
        "patch_size": 16,
        "processor_class": "HYV4VLProcessor",
        "rescale_factor": 0.00392156862745098,
        "temporal_patch_size": 1,
    },
    # Its video processor: no public copy; the class defaults (a 32 Mi-pixel clip budget, 1 Mi
    # pixels a frame, mean/std 0.5, no sampling by default). Unconfirmed.
    video={
        "do_sample_frames": False,
        "fps": 2,
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "max_frames": 1024,
        "max_image_size": {"longest_edge": 1024 * 1024},
        "merge_size": 2,
        "min_frames": 2,
        "patch_size": 16,
        "resample": BICUBIC,
        "size": {"longest_edge": 33554432, "shortest_edge": 4096},
        "temporal_patch_size": 1,
        "video_processor_type": "HYV4VLVideoProcessor",
    },
)


# --------------------------------------------------------------------------------------------
# Video: HYV4VLVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


def video_smart_resize(
    frame_height: int,
    frame_width: int,
    num_frames: int,
    *,
    factor: int,
    max_pixels: int = 33554432,
    max_image_size: int = 1024 * 1024,
) -> tuple[int, int]:
    """Mirrors ``HYV4VLVideoProcessor.smart_resize``: the largest grid of ``factor`` squares
    (rows, cols) on the frame's aspect ray that never upscales, keeps a frame within
    ``max_image_size`` pixels and ``num_frames * rows * (cols + 1)`` within ``max_pixels //
    factor**2`` tokens (integer arithmetic throughout). HF's ``ValueError``s are raised as
    :class:`MmfastError`."""
    if min(num_frames, frame_height, frame_width, factor, max_pixels, max_image_size) <= 0:
        raise MmfastError(
            "video size: frames, sides, factor and pixel budgets must be positive, got "
            f"{num_frames} frames of {frame_height}x{frame_width}"
        )
    ratio = max(frame_height, frame_width) / min(frame_height, frame_width)
    if ratio > 200:
        raise MmfastError(
            f"video size: absolute aspect ratio must be smaller than 200, got {ratio}"
        )
    max_rows = max(1, frame_height // factor)
    max_cols = max(1, frame_width // factor)
    visual_budget = max_pixels // (factor * factor)
    for rows in range(max_rows, 0, -1):
        low_cols = 1 if rows == 1 else max(1, frame_width * rows // frame_height)
        high_cols = min(max_cols, max(1, -(-frame_width * (rows + 1) // frame_height) - 1))
        budget_cols = visual_budget // (num_frames * rows) - 1 if visual_budget > 0 else 0
        cap_cols = max_image_size // (factor * factor * rows)
        cols = min(high_cols, budget_cols, cap_cols)
        if cols >= low_cols:
            return rows * factor, cols * factor
    return factor, factor


@dataclass(frozen=True)
class HYV4VLVideoConfig(VideoConfig):
    """Settings of ``HYV4VLVideoProcessor``: frames sampled at ``fps`` with ``np.linspace``
    (when sampling), each sized by :func:`video_smart_resize` within the clip's token budget
    ``size["longest_edge"]`` and the frame cap ``max_image_size["longest_edge"]``, normalised
    with mean/std 0.5, then raster-order patch rows of ``temporal_patch_size`` frames.

    ``num_video_tokens`` is the count of ``<|video_pad|>`` tokens ``HYV4VLProcessor`` inserts:
    ``grid_t * (grid_h // merge) * (grid_w // merge + 1)``.
    """

    model_id: str | None
    video_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    max_pixels: int | None
    max_image_size: int
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

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``HYV4VLVideoProcessor.sample_frames``: ``fps`` frames a second (24 assumed
        for a clip without a rate) within ``min_frames`` .. ``max_frames``, or ``num_frames``,
        spread with ``np.linspace`` and rounded."""
        if fps is not None and num_frames is not None:
            raise MmfastError("fps, num_frames: expected one of them, got both")
        total, video_fps = metadata.total_num_frames, metadata.fps
        fps = self.fps if fps is None else fps
        count = num_frames
        if count is None and fps is not None:
            rate = 24.0 if video_fps is None else video_fps
            count = min(max(int(total / rate * fps), self.min_frames), self.max_frames, total)
        if count is None:
            count = min(max(total, self.min_frames), self.max_frames)
        indices: list[int] = np.linspace(0, total - 1, count).round().astype(int).tolist()
        return indices

    def resized_size(self, frames: int, height: int, width: int) -> tuple[int, int]:
        """``HYV4VLVideoProcessor.resize``'s size (the input size without ``do_resize``)."""
        if not self.do_resize:
            return height, width
        if self.max_pixels is None:
            raise MmfastError("size: expected a longest_edge (the clip's pixel budget)")
        return video_smart_resize(
            height,
            width,
            frames,
            factor=self.patch_size * self.merge_size,
            max_pixels=self.max_pixels,
            max_image_size=self.max_image_size,
        )

    def plan(self, frames: int, height: int, width: int) -> QwenVideoPlan:
        """Mirrors ``HYV4VLVideoProcessor._preprocess`` for one clip: every frame resized
        alike (torchvision), normalised, ``temporal_patch_size`` frames at a time into
        raster-order patch rows, the last frame repeated to fill the last group."""
        check_image_size(height, width)
        size = self.resized_size(frames, height, width)
        unit = self.patch_size * self.merge_size
        if size[0] % unit or size[1] % unit:
            raise MmfastError(
                f"video size: with do_resize=False both sides must be multiples of {unit} "
                f"(the patch grouping), got {height}x{width}"
            )
        t = self.temporal_patch_size
        resize = Resize(size, self.resample, "torch") if self.do_resize else None
        views = temporal_groups(frames, t, View(resize=resize, out=Patchify(self.patch_size, t, 1)))
        grid_t, grid_h, grid_w = len(views), size[0] // self.patch_size, size[1] // self.patch_size
        rows = grid_t * grid_h * grid_w
        return QwenVideoPlan(
            height=height,
            width=width,
            frames=frames,
            views=views,
            output_shapes=MappingProxyType(
                {"pixel_values_videos": (rows, 3 * t * self.patch_size**2)}
            ),
            num_video_tokens=grid_t * frame_tokens(grid_h, grid_w, self.merge_size),
            grid=(grid_t, grid_h, grid_w),
        )

    def batch_outputs(self, plans: Sequence[VideoPlan]) -> dict[str, Any]:
        """``video_grid_thw`` (clips, 3) int64."""
        return {"video_grid_thw": video_grid_thw(plans)}


def _build_video(model_id: str | None, cfg: Fields) -> HYV4VLVideoConfig:
    """Mirrors ``HYV4VLVideoProcessor``'s class defaults. ``size`` needs only its
    ``longest_edge`` (the clip's budget; a ``shortest_edge`` is accepted and unused), and
    ``max_image_size`` its ``longest_edge`` (a frame's pixel cap)."""
    size_value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"shortest_edge": 4096, "longest_edge": 33554432} if size_value is None else size_value,
        cfg.flag("default_to_square", True),
    )
    do_resize = cfg.flag("do_resize", True)
    if do_resize and "longest_edge" not in size:
        raise cfg.error("size", "a longest_edge key (the clip's pixel budget)", size)
    cap_value = cfg.raw("max_image_size")
    cap = {"longest_edge": 1024 * 1024} if cap_value is None else cap_value
    if not isinstance(cap, dict) or not is_int_in(cap.get("longest_edge"), 1, MAX_INT):
        raise cfg.error("max_image_size", "a dict with a positive longest_edge", cap_value)
    norm = cfg.normalization(HALF, HALF)
    num_frames = cfg.raw("num_frames")
    return HYV4VLVideoConfig(
        model_id=model_id,
        video_processor_type="HYV4VLVideoProcessor",
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=do_resize,
        max_pixels=size.get("longest_edge"),
        max_image_size=cap["longest_edge"],
        resample=cfg.torch_resample(BICUBIC),
        **norm.fields(),
        patch_size=cfg.positive_int("patch_size", 16),
        temporal_patch_size=cfg.positive_int("temporal_patch_size", 1),
        merge_size=cfg.positive_int("merge_size", 2),
        min_frames=cfg.positive_int("min_frames", 2),
        max_frames=cfg.positive_int("max_frames", 1024),
        do_sample_frames=cfg.flag("do_sample_frames", False),
        fps=positive_number(cfg, "fps", 2.0),
        num_frames=None if num_frames is None else cfg.positive_int("num_frames", 1),
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="HYV4VLVideoProcessor",
        model_types=("hy_v4_vl",),
        build=_build_video,
        kwargs=frozenset(
            {
                "patch_size",
                "temporal_patch_size",
                "merge_size",
                "min_frames",
                "max_frames",
                "max_image_size",
            }
        ),
        ignores=QWEN_VIDEO_IGNORES,
    )
)
