"""GLM-4.1V, GLM-4.5V, GLM-4.6V and GLM-OCR: ``Glm4vImageProcessor`` / ``Glm46VImageProcessor``,
and their video processors ``Glm4vVideoProcessor`` / ``Glm46VVideoProcessor``.

The two image classes (transformers 5.24) are line for line the same arithmetic: Qwen-VL's
patch rows and ``image_grid_thw``, but GLM's own :func:`smart_resize`, which counts a still
image as ``temporal_patch_size`` frames in the pixel budget and scales images smaller than one
merge unit up first. GLM-4.5V and GLM-4.6V (``glm4v_moe``) and GLM-OCR (``glm_ocr``) name these
classes in their ``preprocessor_config.json`` (and ``video_preprocessor_config.json``):
AutoImageProcessor and AutoVideoProcessor have no model-type fallback for ``glm4v_moe`` or
``glm_ocr``.

The two video classes share everything but ``sample_frames``: the same :func:`smart_resize`
over the clip's frames (its budget counts them all), torchvision's resize of every frame, and
Qwen-VL's patch rows with the last frame repeated to fill the last temporal group. GLM-4.1V
samples ``fps`` frames a second up to ``max_duration``; GLM-4.6V picks its rate from the clip's
length (3, 1 or 0.5 frames a second, ``temporal_patch_size`` frames per tick) and ignores
``fps``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

import numpy as np

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RGB,
    Pad,
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
    check_positive,
    fit_pixel_budget,
    patch_fields,
)

__all__ = [
    "Glm4vConfig",
    "Glm4vVideoConfig",
    "Glm46VVideoConfig",
    "glm_video_fields",
    "patch_rows_plan",
    "smart_resize",
    "tick_indices",
    "ticks",
    "unique_even",
]


def smart_resize(
    num_frames: int,
    height: int,
    width: int,
    temporal_factor: int = 2,
    factor: int = 28,
    min_pixels: int = 112 * 112,
    max_pixels: int = 14 * 14 * 2 * 2 * 2 * 6144,
) -> tuple[int, int]:
    """Size a GLM-4V image is resized to.

    Mirrors ``transformers.models.glm4v.image_processing_glm4v.smart_resize`` step for step:
    a side below ``factor`` scales both sides up (``int()`` truncation) to reach it; the
    budget counts ``round(num_frames / temporal_factor) * temporal_factor`` frames; then
    Qwen's rounding (``round()``, ``floor`` above ``max_pixels``, ``ceil`` below
    ``min_pixels``). HF's ``ValueError``s (fewer frames than ``temporal_factor``, an aspect
    ratio over 200) are raised as :class:`MmfastError`.
    """
    if num_frames < temporal_factor:
        raise MmfastError(
            f"num_frames: expected at least temporal_factor={temporal_factor}, got {num_frames}"
        )
    check_positive(height, width)
    original = (height, width)
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height = int(height * scale)
        width = int(width * scale)
    t_bar = round(num_frames / temporal_factor) * temporal_factor
    return fit_pixel_budget(
        height, width, factor, min_pixels, max_pixels, num_frames, t_bar, original
    )


@dataclass(frozen=True)
class Glm4vConfig(QwenVLConfig):
    """Settings of ``Glm4vImageProcessor`` / ``Glm46VImageProcessor``.

    ``num_image_tokens`` is the count of image tokens Glm4vProcessor / Glm46VProcessor insert:
    ``image_grid_thw.prod() // merge_size**2``.
    """

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """``Glm4vImageProcessorPil.resize``: a still image is ``temporal_patch_size`` frames."""
        assert self.min_pixels is not None and self.max_pixels is not None  # load_config
        return smart_resize(
            num_frames=self.temporal_patch_size,
            height=height,
            width=width,
            temporal_factor=self.temporal_patch_size,
            factor=self.patch_size * self.merge_size,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
        )


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Glm4vConfig:
    """Mirrors ``Glm4vImageProcessorPil``'s class defaults (no ``min_pixels`` spelling)."""
    return Glm4vConfig(
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
    )


registry.register(
    registry.Family(
        name="glm4v",
        processor_types=("Glm4vImageProcessor", "Glm46VImageProcessor"),
        model_types={"glm4v": "Glm4vImageProcessor", "glm46v": "Glm46VImageProcessor"},
        build=_build,
        kwargs=frozenset({"patch_size", "temporal_patch_size", "merge_size"}),
        processor_classes={"Glm4vProcessor": "glm4v", "Glm46VProcessor": "glm46v"},
        hf_pil="glm4v.image_processing_pil_glm4v.Glm4vImageProcessorPil",
        hf_torchvision="glm4v.image_processing_glm4v.Glm4vImageProcessor",
    )
)

# Built-in checkpoints: each dict is the checkpoint's preprocessor_config.json as far as public
# copies show it; the README's model table says which values are confirmed.
_GLM_PIXELS = {"shortest_edge": 12544, "longest_edge": 9633792}
_GLM_COMMON = {
    "size": _GLM_PIXELS,
    "do_rescale": True,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": list(OPENAI_CLIP_MEAN),
    "image_std": list(OPENAI_CLIP_STD),
}

# zai-org/GLM-OCR: the file verbatim, in two independent copies (a Go test pinned to revision
# 2e85a628 "verbatim", and a logged curl of the hub file); model_type glm_ocr.
registry.register_builtin(
    "zai-org/GLM-OCR",
    "glm_ocr",
    {
        **_GLM_COMMON,
        "image_processor_type": "Glm46VImageProcessor",
        "processor_class": "Glm46VProcessor",
    },
)

# zai-org/GLM-4.1V-9B-Thinking (glm4v), GLM-4.5V and GLM-4.6V (both glm4v_moe): no verbatim
# copy found. The pixel bounds 12544 / 9633792 at factor 28 and the CLIP constants come from a
# serving project's per-model table and agree with the GLM-OCR file, which shares the layout;
# GLM-4.6V names the Glm46V classes (vLLM's log of its files; a note patching a GLM-4.6V copy's
# preprocessor_config.json and video_preprocessor_config.json quotes their Glm46VImageProcessor,
# Glm46VVideoProcessor and Glm46VProcessor), GLM-4.5V the Glm4v ones. The model types are glm4v
# and, for GLM-4.5V and GLM-4.6V, glm4v_moe (llama.cpp's notes; GLM-4.6V's config.json), which
# transformers maps to no image or video processor: the files' class names choose them.
#
# Their video settings: GLM-4.1V's as a loaded Glm4vVideoProcessor printed them (vLLM issue
# #22077, loading zai-org/GLM-4.1V-9B-Thinking): the class defaults with size 12544 /
# 47040000, fps 2, num_frames 16, processor_class Glm4vProcessor. GLM-4.5V's and GLM-4.6V's
# files were not seen: their class names as above, the other values GLM-4.1V's (unconfirmed).
_GLM_VIDEO = {
    "size": {"shortest_edge": 12544, "longest_edge": 47040000},
    "max_image_size": {"longest_edge": 47040000},
    "do_convert_rgb": True,
    "do_resize": True,
    "do_rescale": True,
    "do_normalize": True,
    "do_sample_frames": True,
    "fps": 2,
    "num_frames": 16,
    "resample": BICUBIC,
    "rescale_factor": 0.00392156862745098,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": list(OPENAI_CLIP_MEAN),
    "image_std": list(OPENAI_CLIP_STD),
}
registry.register_builtin(
    "zai-org/GLM-4.1V-9B-Thinking",
    "glm4v",
    {
        **_GLM_COMMON,
        "image_processor_type": "Glm4vImageProcessor",
        "processor_class": "Glm4vProcessor",
    },
    video={
        **_GLM_VIDEO,
        "video_processor_type": "Glm4vVideoProcessor",
        "processor_class": "Glm4vProcessor",
    },
)
registry.register_builtin(
    "zai-org/GLM-4.5V",
    "glm4v_moe",
    {
        **_GLM_COMMON,
        "image_processor_type": "Glm4vImageProcessor",
        "processor_class": "Glm4vProcessor",
    },
    video={
        **_GLM_VIDEO,
        "video_processor_type": "Glm4vVideoProcessor",
        "processor_class": "Glm4vProcessor",
    },
)
registry.register_builtin(
    "zai-org/GLM-4.6V",
    "glm4v_moe",
    {
        **_GLM_COMMON,
        "image_processor_type": "Glm46VImageProcessor",
        "processor_class": "Glm46VProcessor",
    },
    video={
        **_GLM_VIDEO,
        "video_processor_type": "Glm46VVideoProcessor",
        "processor_class": "Glm46VProcessor",
    },
)


# --------------------------------------------------------------------------------------------
# Video: Glm4vVideoProcessor and Glm46VVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


def unique_even(indices: Sequence[int]) -> list[int]:
    """The end of GLM's ``sample_frames``: repeated indices dropped (first kept, order kept),
    then the last one repeated if the count is odd, so the clip fills its temporal groups.
    None for a clip too short to reach one tick, as in HF (its ``smart_resize`` then refuses
    the empty clip, GLM-5's outside its minimum budget)."""
    seen: set[int] = set()
    kept: list[int] = []
    for index in indices:
        if index not in seen:
            seen.add(index)
            kept.append(int(index))
    if len(kept) & 1:
        kept.append(kept[-1])
    return kept


def patch_rows_plan(
    frames: int,
    height: int,
    width: int,
    canvas: tuple[int, int],
    *,
    resize: Resize | None,
    pad: Pad | None,
    patch_size: int,
    temporal_patch_size: int,
    merge_size: int,
    token_divisor: int,
    slots: int | None = None,
) -> QwenVideoPlan:
    """A clip's patch rows as Qwen-VL's video ``patchify`` lays them out: each frame resized
    and padded to ``canvas`` (torchvision's uint8 kernel, zeros at the bottom and right), then
    ``temporal_patch_size`` frames at a time into rows grouped by ``merge_size``, the last
    frame repeated to fill the last group. ``num_video_tokens`` is the rows over
    ``token_divisor``. ``slots`` (at least ``frames``): the frames the clip is taken to have,
    the last repeated to fill them (ERNIE repeats it to an even count before grouping). A clip
    of no frames (GLM's samplers leave none of a clip too short to reach a tick) gives no rows,
    as transformers' ``patchify`` does."""
    check_image_size(height, width)
    if frames < 0:
        raise MmfastError(f"frames: expected a frame count, got {frames}")
    p, t = patch_size, temporal_patch_size
    unit = p * merge_size
    if canvas[0] % unit or canvas[1] % unit:
        raise MmfastError(
            f"video size: with do_resize=False both sides must be multiples of {unit} (the "
            f"patch grouping), got {height}x{width}"
        )
    grid_t = -(-max(frames, slots or 0) // t)
    grid_h, grid_w = canvas[0] // p, canvas[1] // p
    positions = [min(i, frames - 1) for i in range(grid_t * t)]
    view = View(resize=resize, pad=pad, out=Patchify(p, t, merge_size))
    rows = grid_t * grid_h * grid_w
    return QwenVideoPlan(
        height=height,
        width=width,
        frames=frames,
        views=tuple((tuple(positions[g * t : (g + 1) * t]), view) for g in range(grid_t)),
        output_shapes=MappingProxyType({"pixel_values_videos": (rows, 3 * t * p * p)}),
        num_video_tokens=rows // token_divisor,
        grid=(grid_t, grid_h, grid_w),
    )


def video_grid_thw(plans: Sequence[VideoPlan]) -> dict[str, Any]:
    """``video_grid_thw``: (clips, 3) int64, one ``(grid_t, grid_h, grid_w)`` per clip."""
    grids = [cast("QwenVideoPlan", plan).grid for plan in plans]
    return {"video_grid_thw": np.array(grids, np.int64).reshape(-1, 3)}


def glm_clip_duration(metadata: Any, name: str) -> tuple[int, float, float]:
    """(total frames, frame rate, duration) as GLM's samplers read a clip's metadata: the
    duration given, else ``round((total - 1) / fps) + 1``. HF's ``ValueError`` for a clip
    without a frame rate is raised as :class:`MmfastError`."""
    if metadata is None or metadata.fps is None:
        raise MmfastError(
            f"video_fps: {name} samples frames by time, which needs the clip's frame rate; "
            "pass video_fps= or do_sample_frames=False"
        )
    total = int(metadata.total_num_frames)
    duration = metadata.duration or round((total - 1) / metadata.fps) + 1
    return total, float(metadata.fps), duration


@dataclass(frozen=True)
class Glm4vVideoConfig(VideoConfig):
    """Settings of ``Glm4vVideoProcessor`` (GLM-4.1V, GLM-4.5V).

    ``min_pixels``/``max_pixels`` are ``size["shortest_edge"]``/``size["longest_edge"]``: the
    pixel budget of the whole clip (every sampled frame counts). ``num_video_tokens`` is the
    count of ``<|image|>`` tokens ``Glm4vProcessor.replace_video_token`` inserts: one run of
    ``grid_h * grid_w // merge_size**2`` per temporal group, ``video_grid_thw.prod() //
    merge_size**2`` in all (each run also gets begin/end tokens and a timestamp).
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
    do_sample_frames: bool
    fps: float
    num_frames: int
    max_duration: float

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``Glm4vVideoProcessor.sample_frames``: ``fps`` frames a second (the
        config's without one) up to ``max_duration`` seconds, else ``max_duration * fps``
        frames spread over the clip; ``num_frames`` is not read."""
        total, video_fps, duration = glm_clip_duration(metadata, "GLM-4V")
        requested = self.fps if fps is None else fps
        last = total - 1
        if duration <= self.max_duration:
            n = max(math.floor(duration * requested), 1)
            if requested >= 2 * video_fps:
                # Steps of at most half a frame take every frame up to the last one taken:
                # the same indices without listing n of them (n grows with the rate asked).
                top = min(last, math.ceil((n - 1) * video_fps / requested))
                indices = list(range(top + 1))
            else:
                indices = [min(last, math.ceil(i * video_fps / requested)) for i in range(n)]
        else:
            num_samples = int(self.max_duration * requested)
            if num_samples >= total:
                indices = list(range(total))
            else:
                seconds = np.linspace(0, duration, num_samples, endpoint=True)
                indices = [min(last, math.ceil(t * video_fps)) for t in seconds]
        return unique_even(indices)

    def resized_size(self, frames: int, height: int, width: int) -> tuple[int, int]:
        """``resize``: :func:`smart_resize` of a frame, the budget counting the clip's frames."""
        assert self.min_pixels is not None and self.max_pixels is not None  # _build_video
        return smart_resize(
            num_frames=frames,
            height=height,
            width=width,
            temporal_factor=self.temporal_patch_size,
            factor=self.patch_size * self.merge_size,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
        )

    def plan(self, frames: int, height: int, width: int) -> QwenVideoPlan:
        """Mirrors ``_preprocess`` for one clip: resize, rescale, normalise, patchify."""
        check_image_size(height, width)
        size = self.resized_size(frames, height, width) if self.do_resize else (height, width)
        return patch_rows_plan(
            frames,
            height,
            width,
            size,
            resize=Resize(size, self.resample, "torch") if self.do_resize else None,
            pad=None,
            patch_size=self.patch_size,
            temporal_patch_size=self.temporal_patch_size,
            merge_size=self.merge_size,
            token_divisor=self.merge_size**2,
        )

    def batch_outputs(self, plans: Sequence[VideoPlan]) -> dict[str, Any]:
        """``video_grid_thw`` (clips, 3) int64."""
        return video_grid_thw(plans)


# Glm46VVideoProcessor.sample_frames' constants, hard-coded there.
GLM46V_RATES = ((30, 3), (300, 1))  # up to that many seconds: frames a second; else 0.5
GLM46V_MAX_FRAMES = 640
GLM46V_MAX_DURATION = 2400


@dataclass(frozen=True)
class Glm46VVideoConfig(Glm4vVideoConfig):
    """Settings of ``Glm46VVideoProcessor`` (GLM-4.6V): ``Glm4vVideoProcessor`` with another
    sampler. ``num_video_tokens`` counts ``Glm46VProcessor``'s ``<|image|>`` tokens, as for
    GLM-4.1V."""

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``Glm46VVideoProcessor.sample_frames``: a rate chosen by the clip's length
        (``temporal_patch_size`` frames per tick), frames taken at each tick up to the last
        whole second, fixed up with ``np.linspace`` to the count the rate gives; ``fps`` and
        ``num_frames`` are not read."""
        total, video_fps, duration = glm_clip_duration(metadata, "GLM-4.6V")
        effective = min(duration, GLM46V_MAX_DURATION)
        target_fps: float = next((r for limit, r in GLM46V_RATES if effective <= limit), 0.5)
        extract_t = int(effective * target_fps * self.temporal_patch_size)
        extract_t = min(extract_t, GLM46V_MAX_FRAMES)
        inv_fps = 1 / (self.temporal_patch_size * target_fps)
        indices = tick_indices(total, video_fps, extract_t, inv_fps, int(duration))
        return unique_even(indices)


def tick_indices(
    total: int, video_fps: float, extract_t: int, inv_fps: float, max_second: int
) -> list[int]:
    """The frames GLM-4.6V's and GLM-5's samplers take before their repeat fix-up: every
    ``inv_fps`` seconds the first frame at or past the tick, until a tick reaches
    ``max_second`` (a clip with fewer frames than ``extract_t``: ``np.linspace`` over it),
    then :func:`linspace_fixup` to ``extract_t`` frames."""
    indices: list[int]
    if total < extract_t:
        indices = np.linspace(0, total - 1, extract_t, dtype=int).tolist()
    else:
        indices = ticks(total, video_fps, inv_fps, max_second)
    return linspace_fixup(indices, extract_t, total)


def ticks(total: int, video_fps: float, inv_fps: float, stop: float) -> list[int]:
    """The tick loop of GLM's samplers: every ``inv_fps`` seconds (from 0) the first frame
    whose timestamp ``i / video_fps`` is at or past the tick, until a tick reaches ``stop``
    (GLM-4.6V and GLM-5: the last whole second; GLM-GA: ``duration - inv_fps``)."""
    duration_per_frame = 1 / video_fps
    timestamps = [i * duration_per_frame for i in range(total)]
    indices: list[int] = []
    current = 0.0
    for index in range(total):
        if timestamps[index] >= current:
            current += inv_fps
            indices.append(index)
            if current >= stop:
                break
    return indices


def linspace_fixup(indices: list[int], extract_t: int, total: int) -> list[int]:
    """The fix-up GLM-4.6V's and GLM-5's samplers share: too few ticks are spread with
    ``np.linspace`` between the first and last taken, too many over the whole clip."""
    if len(indices) < extract_t:
        start, end = (indices[0], indices[-1]) if indices else (0, max(total - 1, 0))
        result: list[int] = np.linspace(start, end, extract_t, dtype=int).tolist()
        return result
    if len(indices) > extract_t:
        result = np.linspace(0, total - 1, extract_t, dtype=int).tolist()
        return result
    return indices


def glm_video_fields(cfg: Fields, longest_edge: int = 28 * 28 * 2 * 30000) -> dict[str, Any]:
    """Mirrors ``Glm4vVideoProcessor``'s class defaults (and ``Glm46VVideoProcessor``'s, the
    same; ``GlmgaVideoProcessor``'s but for ``longest_edge``): no ``min_pixels`` spelling;
    ``max_image_size`` is read by nothing."""
    fields = patch_fields(
        cfg,
        size={"shortest_edge": 112 * 112, "longest_edge": longest_edge},
        legacy_pixels=False,
        resample=BICUBIC,
        mean=OPENAI_CLIP_MEAN,
        std=OPENAI_CLIP_STD,
        temporal_patch_size=2,
    )
    return {
        **fields,
        "resample": cfg.torch_resample(BICUBIC),
        "do_sample_frames": cfg.flag("do_sample_frames", True),
        "fps": positive_number(cfg, "fps", 2.0),
        "num_frames": cfg.positive_int("num_frames", 16),
        "max_duration": cfg.number("max_duration", 300.0),
    }


def _build_video(model_id: str | None, cfg: Fields) -> Glm4vVideoConfig:
    return Glm4vVideoConfig(
        model_id=model_id, video_processor_type="Glm4vVideoProcessor", **glm_video_fields(cfg)
    )


def _build_video_46v(model_id: str | None, cfg: Fields) -> Glm46VVideoConfig:
    return Glm46VVideoConfig(
        model_id=model_id, video_processor_type="Glm46VVideoProcessor", **glm_video_fields(cfg)
    )


# _preprocess resizes, normalises and patchifies: no crop or pad; max_image_size is unused.
GLM_VIDEO_IGNORES = QWEN_VIDEO_IGNORES | {"max_image_size"}
_GLM_VIDEO_KWARGS = frozenset(
    {"max_image_size", "patch_size", "temporal_patch_size", "merge_size", "max_duration"}
)
registry.register_video(
    registry.VideoFamily(
        processor_type="Glm4vVideoProcessor",
        model_types=("glm4v",),
        build=_build_video,
        kwargs=_GLM_VIDEO_KWARGS,
        ignores=GLM_VIDEO_IGNORES,
    )
)
registry.register_video(
    registry.VideoFamily(
        processor_type="Glm46VVideoProcessor",
        model_types=("glm46v",),
        build=_build_video_46v,
        kwargs=_GLM_VIDEO_KWARGS,
        ignores=GLM_VIDEO_IGNORES,
    )
)
