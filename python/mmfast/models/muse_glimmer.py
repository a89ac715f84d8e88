"""Muse Glimmer and Muse Spark: ``MuseGlimmerImageProcessor`` (transformers 5.24; torchvision
only).

An image is resized (Lanczos by default, antialiased) to the whole grid of ``patch_size *
merge_size`` squares closest to its aspect ratio with at most ``max_image_tokens`` squares
(:func:`smart_resize`), normalised with mean/std 0.5, and cut into ``patch_size`` patches in
raster order, each row laid out (time, channel, y, x): the still frame's (channel, y, x)
patch repeated ``temporal_patch_size`` times (Qwen's rows are (channel, time, y, x)): a
time-major :class:`Patchify`.

transformers has only the torchvision class: the plans always match it, under either backend
name (as for Llama 4).

Its video class, ``MuseGlimmerVideoProcessor``, samples at most ``num_frames`` frames,
``fps`` a second (``torch.linspace`` over the clip), resizes every frame of a clip alike with
:func:`smart_resize` under ``max_video_frame_tokens``, and writes the same rows with each
time slot's own frame: a group of ``temporal_patch_size`` frames after another, the last
frame repeated to fill the last group.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Final

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    HALF,
    LANCZOS,
    RGB,
    ImagePlan,
    ModelConfig,
    PatchGrid,
    Patchify,
    Resize,
    VideoConfig,
    VideoPlan,
    View,
    check_image_size,
    fused_tables,
    plan_constants,
)
from mmfast.models.base_video import positive_number
from mmfast.models.config import Fields, Source
from mmfast.models.qwen2_vl import QwenVideoPlan, grid_thw, temporal_groups, video_grid_thw

__all__ = ["MuseGlimmerConfig", "MuseGlimmerVideoConfig", "smart_resize", "torch_linspace"]


def smart_resize(height: int, width: int, patch_size: int, max_tokens: int) -> tuple[int, int]:
    """Mirrors ``image_processing_muse_glimmer.smart_resize`` step for step: the ideal grid
    of ``patch_size`` squares, shrunk (``** 0.5``) to ``max_tokens`` squares, its floor/ceil
    neighbours that fit, the one closest to the aspect ratio (the first in the order of
    ``list(set(...))``, as in HF, on ties)."""
    ideal_patches_height = height / patch_size
    ideal_patches_width = width / patch_size
    ratio = ideal_patches_width / ideal_patches_height if ideal_patches_height > 0 else 1.0
    if ideal_patches_height * ideal_patches_width > max_tokens:
        ideal_patches_height = (max_tokens / ratio) ** 0.5
        ideal_patches_width = ideal_patches_height * ratio
    candidates = list(
        set(
            itertools.product(
                [math.floor(ideal_patches_height), math.ceil(ideal_patches_height)],
                [math.floor(ideal_patches_width), math.ceil(ideal_patches_width)],
            )
        )
    )
    candidates = [
        (patches_height, patches_width)
        for patches_height, patches_width in candidates
        if patches_height >= 1
        and patches_width >= 1
        and patches_height * patches_width <= max_tokens
    ]
    if not candidates:
        candidates = [(max(1, round(ideal_patches_height)), max(1, round(ideal_patches_width)))]
    patches_height, patches_width = min(
        candidates, key=lambda grid: abs(grid[0] / grid[1] - height / width)
    )
    return patches_height * patch_size, patches_width * patch_size


# Why dtype="uint8" is refused: no rule of normalize_uint8 finds a byte's channel there.
TIME_MAJOR: Final = (
    "its patch rows are (time, channel, y, x), where pixel_lut's rule for a byte's channel "
    "(normalize_uint8) does not apply"
)


@dataclass(frozen=True)
class MuseGlimmerConfig(ModelConfig):
    """Settings of ``MuseGlimmerImageProcessor``.

    ``num_image_tokens`` is the count of ``<|patch|>`` tokens ``MuseGlimmerProcessor`` and
    ``MuseSparkProcessor`` insert: ``image_grid_thw.prod() // merge_size**2`` (they wrap them
    in ``<|image_start|>`` and ``<|image_end|>``, which ``_get_num_multimodal_tokens`` does not
    count either).
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    patch_size: int
    temporal_patch_size: int
    merge_size: int
    max_image_tokens: int

    # transformers has only the torchvision class, which every plan matches.
    backend: str = field(default="pil", kw_only=True)

    raw_pixels: ClassVar[bool] = False
    raw_pixels_refusal: ClassVar[str] = TIME_MAJOR

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """The resize target: :func:`smart_resize` on ``patch_size * merge_size`` squares;
        without ``do_resize`` the input size, which ``patchify``'s view needs in whole
        patches."""
        if self.do_resize:
            return smart_resize(
                height, width, self.patch_size * self.merge_size, self.max_image_tokens
            )
        if height % self.patch_size or width % self.patch_size:
            raise MmfastError(
                f"image size: with do_resize=False both sides must be multiples of "
                f"patch_size={self.patch_size}, got {height}x{width}"
            )
        return height, width

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``MuseGlimmerImageProcessor._preprocess`` for one image: resize, rescale,
        normalise, patch rows (time, channel, y, x)."""
        check_image_size(height, width)
        size = self.resized_size(height, width)
        p, t = self.patch_size, self.temporal_patch_size
        grid = PatchGrid(p, t, self.merge_size, 1, size[0] // p, size[1] // p)
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=size,
            resample=self.resample,
            crop=None,
            canvas_size=None,
            **{**plan_constants(self), "backend": "torchvision"},
            compute_dtype="float32",
            patches=grid,
            tiles=None,
            output_shapes=MappingProxyType(
                {"pixel_values": (grid.num_patches, t * 3 * p * p), "image_grid_thw": (3,)}
            ),
            # MuseGlimmerProcessor.replace_image_token: image_grid_thw.prod() // merge**2
            num_image_tokens=grid.num_patches // self.merge_size**2,
            views=(
                View(
                    resize=Resize(size, self.resample, "torch") if self.do_resize else None,
                    out=Patchify(p, t, 1, time_major=True),
                ),
            ),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """The torchvision class's fused arithmetic (the uint8 pixels with rescale and
        normalise both off)."""
        return fused_tables(plan)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_grid_thw``: (B, 3) int64."""
        return {"image_grid_thw": grid_thw(plans)}


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> MuseGlimmerConfig:
    """Mirrors ``MuseGlimmerImageProcessor``'s class defaults. Its resize reads no ``size``
    (one in the file is only checked as a size dict)."""
    size = cfg.raw("size")
    if size is not None:
        cfg.size_dict("size", size, cfg.flag("default_to_square", False))
    norm = cfg.normalization(HALF, HALF)
    return MuseGlimmerConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=cfg.flag("do_resize", True),
        resample=cfg.torch_resample(LANCZOS),
        **norm.fields(),
        patch_size=cfg.positive_int("patch_size", 14),
        temporal_patch_size=cfg.positive_int("temporal_patch_size", 2),
        merge_size=cfg.positive_int("merge_size", 2),
        max_image_tokens=cfg.positive_int("max_image_tokens", 4096),
    )


registry.register(
    registry.Family(
        name="muse_glimmer",
        processor_types=("MuseGlimmerImageProcessor",),
        model_types={
            "muse_glimmer": "MuseGlimmerImageProcessor",
            "muse_spark": "MuseGlimmerImageProcessor",
        },
        build=_build,
        kwargs=frozenset({"patch_size", "temporal_patch_size", "merge_size", "max_image_tokens"}),
        processor_classes={
            "MuseGlimmerProcessor": "muse_glimmer",
            "MuseSparkProcessor": "muse_spark",
        },
        hf_torchvision="muse_glimmer.image_processing_muse_glimmer.MuseGlimmerImageProcessor",
    )
)

# meta-models/Muse-Glimmer-30B: the image_processor block of its processor_config.json, "the
# snapshot's, verbatim" in a serving project's parity bench, with the same values in another
# project's fixture and a third's validation of the published file (which also checks
# processor_class MuseGlimmerProcessor).
registry.register_builtin(
    "meta-models/Muse-Glimmer-30B",
    "muse_glimmer",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_processor_type": "MuseGlimmerImageProcessor",
        "image_std": list(HALF),
        "max_image_tokens": 4096,
        "merge_size": 2,
        "patch_size": 14,
        "resample": LANCZOS,
        "rescale_factor": 0.00392156862745098,
        "temporal_patch_size": 2,
    },
    {"processor_class": "MuseGlimmerProcessor"},
    # Its video_processor block: no public copy found; the class defaults (144 tokens a
    # frame, at most 96 frames, 2 a second, Lanczos, mean/std 0.5). Unconfirmed.
    video={
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "do_sample_frames": True,
        "fps": 2.0,
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "max_video_frame_tokens": 144,
        "merge_size": 2,
        "num_frames": 96,
        "patch_size": 14,
        "resample": LANCZOS,
        "rescale_factor": 0.00392156862745098,
        "temporal_patch_size": 2,
        "video_processor_type": "MuseGlimmerVideoProcessor",
    },
)


# --------------------------------------------------------------------------------------------
# Video: MuseGlimmerVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


def torch_linspace(end: int, steps: int) -> list[int]:
    """``torch.linspace(0, end, steps).long()``: torch's float32 values (the step rounded to
    float32, the first half of the values counted from 0 and the second half back from
    ``end``, each rounded once, as its fused multiply-add rounds them), truncated. For
    ``end`` under 2**24 with ``steps - 1 <= end``, every step times an index is exact in
    float64, so one rounding to float32 gives torch's value (checked against torch for every
    ``end`` below 1500 and ``steps`` up to 130)."""
    if steps == 1:
        return [0]
    step = float(np.float32(end) / np.float32(steps - 1))
    half = steps // 2
    values = [step * i if i < half else end - step * (steps - 1 - i) for i in range(steps)]
    return [int(v) for v in np.array(values, np.float64).astype(np.float32)]


@dataclass(frozen=True)
class MuseGlimmerVideoConfig(VideoConfig):
    """Settings of ``MuseGlimmerVideoProcessor`` (Muse Glimmer and Muse Spark).

    ``num_video_tokens`` is the count of ``<|video|>`` tokens ``MuseGlimmerProcessor``
    inserts: ``video_grid_thw.prod() // merge_size**2``, ``grid_h * grid_w // merge_size**2``
    after each temporal group's timestamp.
    """

    raw_pixels: ClassVar[bool] = False
    raw_pixels_refusal: ClassVar[str] = TIME_MAJOR

    model_id: str | None
    video_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    patch_size: int
    temporal_patch_size: int
    merge_size: int
    max_video_frame_tokens: int
    do_sample_frames: bool
    fps: float
    num_frames: int

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``MuseGlimmerVideoProcessor.sample_frames``: at most ``num_frames`` frames,
        ``fps`` a second (both at once), a whole number of temporal groups (at least one,
        at most the clip), spread by ``torch.linspace`` over the clip; a clip without a
        frame rate is read at 24 frames a second."""
        fps = self.fps if fps is None else fps
        num_frames = self.num_frames if num_frames is None else num_frames
        video_fps = 24 if metadata.fps is None else metadata.fps
        total, t = metadata.total_num_frames, self.temporal_patch_size
        count = min(int(total * fps / video_fps), num_frames, total)
        count = min(max(t, count // t * t), total)
        return torch_linspace(total - 1, count)

    def plan(self, frames: int, height: int, width: int) -> QwenVideoPlan:
        """Mirrors ``MuseGlimmerVideoProcessor._preprocess`` for one clip: every frame resized
        alike (torchvision, antialiased), ``temporal_patch_size`` frames at a time into
        time-major patch rows in raster order, the last frame repeated to fill the last
        group."""
        check_image_size(height, width)
        p, t = self.patch_size, self.temporal_patch_size
        if self.do_resize:
            size = smart_resize(height, width, p * self.merge_size, self.max_video_frame_tokens)
        elif height % p or width % p:
            raise MmfastError(
                f"video size: with do_resize=False both sides must be multiples of "
                f"patch_size={p}, got {height}x{width}"
            )
        else:
            size = (height, width)
        resize = Resize(size, self.resample, "torch") if self.do_resize else None
        views = temporal_groups(
            frames, t, View(resize=resize, out=Patchify(p, t, 1, time_major=True))
        )
        grid_t, grid_h, grid_w = len(views), size[0] // p, size[1] // p
        rows = grid_t * grid_h * grid_w
        return QwenVideoPlan(
            height=height,
            width=width,
            frames=frames,
            views=views,
            output_shapes=MappingProxyType({"pixel_values_videos": (rows, t * 3 * p * p)}),
            num_video_tokens=rows // self.merge_size**2,
            grid=(grid_t, grid_h, grid_w),
        )

    def batch_outputs(self, plans: Sequence[VideoPlan]) -> dict[str, Any]:
        """``video_grid_thw`` (clips, 3) int64."""
        return {"video_grid_thw": video_grid_thw(plans)}


def _build_video(model_id: str | None, cfg: Fields) -> MuseGlimmerVideoConfig:
    """Mirrors ``MuseGlimmerVideoProcessor``'s class defaults. Its resize reads no ``size``
    (its validation runs with ``do_resize`` off), and ``frame_timestamp_format`` is read by
    the model's processor only."""
    size = cfg.raw("size")
    if size is not None:
        cfg.size_dict("size", size, cfg.flag("default_to_square", True))
    fmt = cfg.raw("frame_timestamp_format")
    if fmt is not None and not isinstance(fmt, str):
        raise MmfastError(f"frame_timestamp_format: expected a format string, got {fmt!r}")
    norm = cfg.normalization(HALF, HALF)
    return MuseGlimmerVideoConfig(
        model_id=model_id,
        video_processor_type="MuseGlimmerVideoProcessor",
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=cfg.flag("do_resize", True),
        resample=cfg.torch_resample(LANCZOS),
        **norm.fields(),
        patch_size=cfg.positive_int("patch_size", 14),
        temporal_patch_size=cfg.positive_int("temporal_patch_size", 2),
        merge_size=cfg.positive_int("merge_size", 2),
        max_video_frame_tokens=cfg.positive_int("max_video_frame_tokens", 144),
        do_sample_frames=cfg.flag("do_sample_frames", True),
        fps=positive_number(cfg, "fps", 2.0),
        num_frames=cfg.positive_int("num_frames", 96),
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="MuseGlimmerVideoProcessor",
        model_types=("muse_glimmer", "muse_spark"),
        build=_build_video,
        kwargs=frozenset(
            {
                "patch_size",
                "temporal_patch_size",
                "max_video_frame_tokens",
                "merge_size",
                "frame_timestamp_format",
            }
        ),
        # _preprocess resizes by max_video_frame_tokens, never by size, and never crops or pads.
        ignores=frozenset({"size", "do_center_crop", "crop_size", "do_pad", "pad_size"}),
    )
)
