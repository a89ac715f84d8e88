"""Qwen2-VL, Qwen2.5-VL and Qwen3-VL: ``Qwen2VLImageProcessor`` (transformers 5.24).

The three model generations all name this processor (Qwen3-VL with patch 16 and mean/std 0.5);
AutoImageProcessor also maps the Qwen-Omni model types to it. An image is resized by
:func:`smart_resize` to sides divisible by ``patch_size * merge_size``, normalised and cut into
patch rows ordered by merge group.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, cast

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    HALF,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
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
    plan_constants,
    resizer,
)
from mmfast.models.base_video import positive_number
from mmfast.models.config import Fields, Source


def grid_thw(plans: Sequence[ImagePlan]) -> NDArray[np.int64]:
    """(B, 3) int64 ``(grid_t, grid_h, grid_w)`` per image, as Qwen-like processors return."""
    return np.array(
        [(p.patches.grid_t, p.patches.grid_h, p.patches.grid_w) for p in plans if p.patches],
        dtype=np.int64,
    ).reshape(-1, 3)


__all__ = [
    "QwenVLConfig",
    "check_positive",
    "fit_pixel_budget",
    "grid_thw",
    "patch_fields",
    "smart_resize",
]


def smart_resize(
    height: int,
    width: int,
    factor: int = 28,
    min_pixels: int = 56 * 56,
    max_pixels: int = 14 * 14 * 4 * 1280,
) -> tuple[int, int]:
    """Size a Qwen-VL image is resized to: sides divisible by ``factor``, area within bounds.

    Mirrors ``transformers.models.qwen2_vl.image_processing_qwen2_vl.smart_resize`` step for
    step, because the float rounding is part of the result: ``round()`` (banker's rounding) for
    the nearest multiple, then ``math.floor`` of ``side / beta`` when above ``max_pixels`` or
    ``math.ceil`` of ``side * beta`` when below ``min_pixels``. HF's ``ValueError`` for an
    aspect ratio over 200 is raised as :class:`MmfastError`, as is a zero side (a
    ``ZeroDivisionError`` in HF).
    """
    check_positive(height, width)
    return fit_pixel_budget(height, width, factor, min_pixels, max_pixels)


def check_positive(height: int, width: int) -> None:
    """A zero side is a ``ZeroDivisionError`` in HF's ``smart_resize`` functions."""
    if height <= 0 or width <= 0:
        raise MmfastError(f"image size: expected positive height and width, got {height}x{width}")


def fit_pixel_budget(
    height: int,
    width: int,
    factor: int,
    min_pixels: int,
    max_pixels: int,
    num_frames: int = 1,
    t_bar: int = 1,
    original: tuple[int, int] | None = None,
) -> tuple[int, int]:
    """The part every Qwen-like ``smart_resize`` shares: the aspect-ratio check, the nearest
    multiples of ``factor`` and the pixel budget, counted over ``t_bar`` frames (GLM), with
    ``num_frames`` in the rescale. ``original`` is the size named in errors."""
    if max(height, width) / min(height, width) > 200:
        h, w = original or (height, width)
        raise MmfastError(
            "image size: absolute aspect ratio must be smaller than 200, got "
            f"{max(height, width) / min(height, width)} for {h}x{w}"
        )
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((num_frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


@dataclass(frozen=True)
class QwenVLConfig(ModelConfig):
    """Settings of ``Qwen2VLImageProcessor``, used by Qwen2-VL, Qwen2.5-VL and Qwen3-VL.

    ``num_image_tokens`` is the count of ``<|image_pad|>`` tokens Qwen2VLProcessor /
    Qwen3VLProcessor insert: ``image_grid_thw.prod() // merge_size**2``.

    ``min_pixels``/``max_pixels`` are HF's resolved ``size["shortest_edge"]`` and
    ``size["longest_edge"]`` (pixel-area bounds despite the names); None only when the config
    leaves them out and ``do_resize`` is off.
    """

    model_id: str | None
    model_type: str | None
    image_processor_type: str
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

    # Which transformers backend the plan matches: "pil" or "torchvision".
    backend: str = field(default="pil", kw_only=True)

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """The resize target: :func:`smart_resize` with factor ``patch_size * merge_size``."""
        assert self.min_pixels is not None and self.max_pixels is not None  # load_config
        factor = self.patch_size * self.merge_size
        return smart_resize(height, width, factor, self.min_pixels, self.max_pixels)

    def patchify(self) -> Patchify:
        """How the resized image becomes patch rows: grouped by ``merge_size``."""
        return Patchify(self.patch_size, self.temporal_patch_size, self.merge_size)

    def patch_shape(self) -> tuple[int, ...]:
        """One patch row of ``pixel_values``: (channel, time, y, x) flattened."""
        return (3 * self.temporal_patch_size * self.patch_size**2,)

    def tokens(self, grid: PatchGrid) -> int:
        """Image tokens the model's processor inserts for this grid:
        ``Qwen2VLProcessor.replace_image_token``'s ``image_grid_thw.prod() // merge_size**2``."""
        return grid.num_patches // self.merge_size**2

    def patch_unit(self) -> int:
        """The side multiple HF's ``patchify`` reshape needs (``patch_size`` times the grouping
        of its reshape): images left unresized must have sides divisible by it."""
        layout = self.patchify()
        return layout.patch_size * layout.merge_size

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors the processor's ``_preprocess`` for one image: resize, rescale,
        normalise, patchify."""
        check_image_size(height, width)
        layout = self.patchify()
        if self.do_resize:
            resized = self.resized_size(height, width)
        else:
            # HF's patchify reshape only succeeds on sides divisible by its patch grouping.
            unit = self.patch_unit()
            if height % unit or width % unit:
                raise MmfastError(
                    f"image size: with do_resize=False both sides must be multiples of "
                    f"{unit} (the patch grouping), got {height}x{width}"
                )
            resized = (height, width)
        grid = PatchGrid(
            patch_size=self.patch_size,
            temporal_patch_size=self.temporal_patch_size,
            merge_size=self.merge_size,
            grid_t=1,
            grid_h=resized[0] // self.patch_size,
            grid_w=resized[1] // self.patch_size,
        )
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=resized,
            resample=self.resample,
            crop=None,
            canvas_size=None,
            **plan_constants(self),
            compute_dtype="float32",
            patches=grid,
            tiles=None,
            output_shapes=MappingProxyType(
                {"pixel_values": (grid.num_patches, *self.patch_shape()), "image_grid_thw": (3,)}
            ),
            num_image_tokens=self.tokens(grid),
            views=(
                View(
                    resize=resizer(self.backend, resized, self.resample)
                    if self.do_resize
                    else None,
                    out=layout,
                ),
            ),
        )

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_grid_thw``: (B, 3) int64."""
        return {"image_grid_thw": grid_thw(plans)}


def patch_fields(
    cfg: Fields,
    *,
    size: Mapping[str, int],
    legacy_pixels: bool,
    resample: int,
    mean: RGB,
    std: RGB,
    temporal_patch_size: int,
) -> dict[str, Any]:
    """The fields of a Qwen-like config (every :class:`QwenVLConfig` field but the ids),
    given the class defaults.

    ``legacy_pixels``: the class's ``__init__`` lets ``min_pixels``/``max_pixels`` override
    ``size["shortest_edge"]``/``size["longest_edge"]`` (Qwen2-VL and PaddleOCR-VL do, GLM
    does not).
    """
    size_value = cfg.raw("size")
    if size_value is None:
        size_value = dict(size)
    if not isinstance(size_value, dict):
        # HF writes the pixel bounds into `size` as a dict before validating it.
        raise cfg.error("size", "a size dict such as {shortest_edge, longest_edge}", size_value)
    resolved = dict(size_value)
    for legacy, key in (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge")):
        if legacy_pixels and cfg.raw(legacy) is not None:
            resolved[key] = cfg.positive_int(legacy, 0)
            resolved.pop(legacy, None)
    resolved = cfg.size_dict("size", resolved, cfg.flag("default_to_square", False))
    do_resize = cfg.flag("do_resize", True)
    if do_resize and not ("shortest_edge" in resolved and "longest_edge" in resolved):
        expected = "shortest_edge and longest_edge"
        raise cfg.error(
            "size", expected + (" (or min_pixels and max_pixels)" * legacy_pixels), resolved
        )
    norm = cfg.normalization(mean, std)
    return {
        "do_convert_rgb": cfg.convert_rgb(),
        "do_resize": do_resize,
        "min_pixels": resolved.get("shortest_edge"),
        "max_pixels": resolved.get("longest_edge"),
        "resample": cfg.resample(resample),
        **norm.fields(),
        "patch_size": cfg.positive_int("patch_size", 14),
        "temporal_patch_size": cfg.positive_int("temporal_patch_size", temporal_patch_size),
        "merge_size": cfg.positive_int("merge_size", 2),
    }


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> QwenVLConfig:
    """Mirrors ``Qwen2VLImageProcessorPil.__init__``: ``min_pixels``/``max_pixels`` override
    ``size["shortest_edge"]``/``size["longest_edge"]`` when both spellings are present."""
    return QwenVLConfig(
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


def call_over_legacy_pixels(values: Mapping[str, Any], call: Mapping[str, Any]) -> dict[str, Any]:
    """A call's settings over a config whose class folds ``min_pixels``/``max_pixels`` into
    ``size`` in its ``__init__``: a call's ``size`` replaces that folded size (so the file's
    min/max pixels no longer apply), and the call's own ``min_pixels``/``max_pixels`` then
    override its edges (``_standardize_kwargs``)."""
    if "size" in call:
        values = {k: v for k, v in values.items() if k not in ("min_pixels", "max_pixels")}
    return {**values, **call}


registry.register(
    registry.Family(
        name="qwen2_vl",
        processor_types=("Qwen2VLImageProcessor",),
        model_types={
            model_type: "Qwen2VLImageProcessor"
            for model_type in (
                "qwen2_vl",
                "qwen2_5_vl",
                "qwen3_vl",
                "qwen2_5_omni",
                "qwen3_omni_moe",
                "qwen3_5",
                "qwen3_5_moe",
                "qwen4_exp",
                # Models built on Qwen's vision tower that AutoImageProcessor maps here too.
                "cosmos3_omni",
                "dots3_note",
                "exaone4_5",
                "hyperclovax_vision_v2",
                "lfm3_vl",
            )
        },
        build=_build,
        kwargs=frozenset(
            {"min_pixels", "max_pixels", "patch_size", "temporal_patch_size", "merge_size"}
        ),
        processor_classes={
            "Qwen2VLProcessor": "qwen2_vl",
            "Qwen2_5_VLProcessor": "qwen2_5_vl",
            "Qwen3VLProcessor": "qwen3_vl",
            "Qwen2_5OmniProcessor": "qwen2_5_omni",
            "Qwen3OmniMoeProcessor": "qwen3_omni_moe",
            # Their processors count Qwen's way: image_grid_thw.prod() // merge_size**2.
            "Dots3NoteProcessor": "dots3_note",
            "Exaone4_5_Processor": "exaone4_5",
            "HyperCLOVAXVisionV2Processor": "hyperclovax_vision_v2",
            "Lfm3VlProcessor": "lfm3_vl",
        },
        hf_pil="qwen2_vl.image_processing_pil_qwen2_vl.Qwen2VLImageProcessorPil",
        hf_torchvision="qwen2_vl.image_processing_qwen2_vl.Qwen2VLImageProcessor",
        call_settings=call_over_legacy_pixels,
    )
)

# Built-in checkpoints. Each dict is the checkpoint's preprocessor_config.json. No network here:
# the values were read from public copies found with a code search; each comment says where.
# Qwen2-VL-7B and Qwen2.5-VL-7B ship the same image-processor settings.
_QWEN2_VL_PREPROCESSOR: Final[Mapping[str, Any]] = MappingProxyType(
    {
        "min_pixels": 3136,
        "max_pixels": 12845056,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_std": list(OPENAI_CLIP_STD),
        "image_processor_type": "Qwen2VLImageProcessor",
    }
)

# Qwen/Qwen2-VL-7B-Instruct: identical copies in a README that quotes the checkpoint's
# file (RealQA, with only the pixel bounds edited) and in the Valley processor source
# (`qwen2vl_processor_config`), both giving min_pixels 3136 and max_pixels 12845056.
registry.register_builtin(
    "Qwen/Qwen2-VL-7B-Instruct",
    "qwen2_vl",
    {**_QWEN2_VL_PREPROCESSOR, "processor_class": "Qwen2VLProcessor"},
)

# Qwen/Qwen2.5-VL-7B-Instruct: a Rust crate's test fixture "trimmed from
# Qwen/Qwen2.5-VL-7B-Instruct"; the trimming left every processor key.
registry.register_builtin(
    "Qwen/Qwen2.5-VL-7B-Instruct",
    "qwen2_5_vl",
    {**_QWEN2_VL_PREPROCESSOR, "processor_class": "Qwen2_5_VLProcessor"},
)

# Qwen/Qwen3-VL-8B-Instruct: the same crate's fixture "trimmed from
# Qwen/Qwen3-VL-8B-Instruct (a fast-processor dump: pixel bounds under `size`)"; size,
# patch 16 and mean/std 0.5 agree with several other projects' copies. Keys that are
# null or inert for images (data_format, device, ...) are left out.
registry.register_builtin(
    "Qwen/Qwen3-VL-8B-Instruct",
    "qwen3_vl",
    {
        "size": {"longest_edge": 16777216, "shortest_edge": 65536},
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "do_resize": True,
        "do_rescale": True,
        "do_normalize": True,
        "do_convert_rgb": True,
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "default_to_square": True,
        "processor_class": "Qwen3VLProcessor",
        "image_processor_type": "Qwen2VLImageProcessorFast",
    },
    # Its video processor, as printed by a loaded Qwen3VLProcessor and in two other projects'
    # copies of the checkpoint's file. The Qwen2-VL, Qwen2.5-VL and Omni checkpoints have no
    # video file that public copies show: transformers then reads preprocessor_config.json.
    video={
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "do_sample_frames": True,
        "fps": 2,
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "max_frames": 768,
        "merge_size": 2,
        "min_frames": 4,
        "patch_size": 16,
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"longest_edge": 25165824, "shortest_edge": 4096},
        "temporal_patch_size": 2,
        "video_processor_type": "Qwen3VLVideoProcessor",
    },
)

# Qwen/Qwen2.5-Omni-7B: the file verbatim in three agreeing copies (an audit note that numbers
# its lines, a script loading the checkpoint, a mock writer). The audio feature extractor's keys
# share the file; only the image keys matter here.
registry.register_builtin(
    "Qwen/Qwen2.5-Omni-7B",
    "qwen2_5_omni",
    {
        "chunk_length": 300,
        "dither": 0.0,
        "feature_extractor_type": "WhisperFeatureExtractor",
        "feature_size": 128,
        "hop_length": 160,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "Qwen2VLImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "max_pixels": 12845056,
        "merge_size": 2,
        "min_pixels": 3136,
        "n_fft": 400,
        "n_samples": 4800000,
        "nb_max_frames": 30000,
        "padding_side": "right",
        "padding_value": 0.0,
        "patch_size": 14,
        "processor_class": "Qwen2_5OmniProcessor",
        "return_attention_mask": True,
        "sampling_rate": 16000,
        "temporal_patch_size": 2,
    },
)

# Qwen/Qwen3-Omni-30B-A3B-Instruct: an audit of the official repos lists the image keys (patch
# 16, merge 2, temporal 2, min_pixels 3136, max_pixels 12845056) and a walkthrough of the same
# file adds mean/std 0.5. Whether the file also sets resample or rescale_factor is unconfirmed
# (the class defaults, bicubic and 1/255, would apply either way).
registry.register_builtin(
    "Qwen/Qwen3-Omni-30B-A3B-Instruct",
    "qwen3_omni_moe",
    {
        "image_mean": list(HALF),
        "image_processor_type": "Qwen2VLImageProcessor",
        "image_std": list(HALF),
        "max_pixels": 12845056,
        "merge_size": 2,
        "min_pixels": 3136,
        "patch_size": 16,
        "processor_class": "Qwen3OmniMoeProcessor",
        "temporal_patch_size": 2,
    },
)


# --------------------------------------------------------------------------------------------
# Video: Qwen2VLVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QwenVideoPlan(VideoPlan):
    """A Qwen clip's plan, with its patch grid (``video_grid_thw``)."""

    grid: tuple[int, int, int]


@dataclass(frozen=True)
class Qwen2VLVideoConfig(VideoConfig):
    """Settings of ``Qwen2VLVideoProcessor`` (Qwen2-VL, Qwen2.5-VL, Qwen-Omni).

    ``num_video_tokens`` is the count of ``<|video_pad|>`` tokens the processor inserts:
    ``video_grid_thw.prod() // merge_size**2``.
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
    min_frames: int
    max_frames: int
    do_sample_frames: bool
    fps: float | None
    num_frames: int | None
    cap_pixels_per_frame: bool
    max_video_tokens: int

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``Qwen2VLVideoProcessor.sample_frames``: the frame indices to keep."""
        total, video_fps = metadata.total_num_frames, metadata.fps
        fps, num_frames = self.sampling(fps, num_frames)
        t = self.temporal_patch_size
        count: float | int | None = None
        if num_frames is not None:
            count = round(num_frames / t) * t
        elif fps is not None:
            if video_fps is None:
                raise MmfastError(
                    "video_fps: sampling at fps frames a second needs the clip's own frame rate"
                )
            max_frames = math.floor(min(self.max_frames, total) / t) * t
            count = min(max(total / video_fps * fps, self.min_frames), max_frames, total)
            count = math.floor(count / t) * t
        if count is None:
            return list(range(total))
        if count > total:
            raise MmfastError(
                f"num_frames: the clip has {total} frames, sampling asked for {count}"
            )
        if count <= 0:
            raise MmfastError(
                f"num_frames: sampling gives {count} frames from a {total}-frame clip"
            )
        # torch.arange(0, total, total / count).int(): float32 values of start + i * step.
        step = total / count
        length = math.ceil(total / step)
        values = (np.arange(length) * step).astype(np.float32)
        return [int(v) for v in values]

    def pixel_budget(self, num_frames: int) -> int:
        """``max_pixels``, capped per frame with ``cap_pixels_per_frame`` (qwen-vl-utils)."""
        if not self.cap_pixels_per_frame:
            return self.max_pixels
        factor = self.patch_size * self.merge_size
        total_pixels = int(self.max_video_tokens * factor * factor * 0.9)
        share = total_pixels * self.temporal_patch_size // num_frames
        return max(min(self.max_pixels, share), int(self.min_pixels * 1.05))

    def resized_size(self, num_frames: int, height: int, width: int) -> tuple[int, int]:
        """``Qwen2VLVideoProcessor.resize``: :func:`smart_resize` of each frame."""
        factor = self.patch_size * self.merge_size
        return smart_resize(height, width, factor, self.min_pixels, self.pixel_budget(num_frames))

    def plan(self, frames: int, height: int, width: int) -> QwenVideoPlan:
        """A clip of ``frames`` sampled frames of ``height`` x ``width``: each frame resized
        (torchvision's uint8 kernel), then ``temporal_patch_size`` frames at a time into patch
        rows, the last frame repeated to fill the last group."""
        check_image_size(height, width)
        size = self.resized_size(frames, height, width) if self.do_resize else (height, width)
        unit = self.patch_size * self.merge_size
        if size[0] % unit or size[1] % unit:
            raise MmfastError(
                f"video size: with do_resize=False both sides must be multiples of {unit}, "
                f"got {height}x{width}"
            )
        t = self.temporal_patch_size
        resize = Resize(size, self.resample, "torch") if self.do_resize else None
        views = temporal_groups(
            frames, t, View(resize=resize, out=Patchify(self.patch_size, t, self.merge_size))
        )
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
            num_video_tokens=rows // self.merge_size**2,
            grid=(grid_t, grid_h, grid_w),
        )

    def batch_outputs(self, plans: Sequence[VideoPlan]) -> dict[str, Any]:
        """``video_grid_thw`` (clips, 3) int64."""
        return {"video_grid_thw": video_grid_thw(plans)}


def temporal_groups(frames: int, t: int, view: View) -> tuple[tuple[tuple[int, ...], View], ...]:
    """A clip's views for patch rows of ``t`` time slots: ``view`` over each group of ``t``
    sampled frames in turn (the frame of each slot), the last frame repeated to fill the
    last group."""
    groups = -(-frames // t)
    slots = [min(i, frames - 1) for i in range(groups * t)]
    return tuple((tuple(slots[g * t : (g + 1) * t]), view) for g in range(groups))


def video_grid_thw(plans: Sequence[VideoPlan]) -> NDArray[np.int64]:
    """(clips, 3) int64: each :class:`QwenVideoPlan`'s grid."""
    grids = [cast("QwenVideoPlan", plan).grid for plan in plans]
    return np.array(grids, np.int64).reshape(-1, 3)


def video_fields(
    cfg: Fields,
    *,
    size: Mapping[str, int],
    legacy_pixels: bool,
    mean: RGB,
    std: RGB,
    patch_size: int,
    do_sample_frames: bool,
    fps: float | None,
    max_video_tokens: int,
) -> dict[str, Any]:
    """The fields of a Qwen video config, given the class defaults (``VideosKwargs`` and the
    class's own)."""
    fields = patch_fields(
        cfg,
        size=size,
        legacy_pixels=legacy_pixels,
        resample=BICUBIC,
        mean=mean,
        std=std,
        temporal_patch_size=2,
    )
    fields["patch_size"] = cfg.positive_int("patch_size", patch_size)
    fields["resample"] = cfg.torch_resample(BICUBIC)
    num_frames = cfg.raw("num_frames")
    return {
        **fields,
        "min_frames": cfg.positive_int("min_frames", 4),
        "max_frames": cfg.positive_int("max_frames", 768),
        "do_sample_frames": cfg.flag("do_sample_frames", do_sample_frames),
        "fps": None
        if cfg.raw("fps") is None and fps is None
        else positive_number(cfg, "fps", fps or 1.0),
        "num_frames": None if num_frames is None else cfg.positive_int("num_frames", 1),
        "cap_pixels_per_frame": cfg.flag("cap_pixels_per_frame", False),
        "max_video_tokens": cfg.positive_int("max_video_tokens", max_video_tokens),
    }


def _build_video(model_id: str | None, cfg: Fields) -> Qwen2VLVideoConfig:
    """Mirrors ``Qwen2VLVideoProcessor.__init__`` and its class defaults."""
    return Qwen2VLVideoConfig(
        model_id=model_id,
        video_processor_type="Qwen2VLVideoProcessor",
        **video_fields(
            cfg,
            size={"shortest_edge": 128 * 28 * 28, "longest_edge": 28 * 28 * 768},
            legacy_pixels=True,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            patch_size=14,
            do_sample_frames=False,
            fps=None,
            max_video_tokens=128000,
        ),
    )


# Qwen's video _preprocess resizes, normalises and patchifies: it never crops or pads.
QWEN_VIDEO_IGNORES = frozenset({"do_center_crop", "crop_size", "do_pad", "pad_size"})
_VIDEO_KWARGS = frozenset(
    {
        "min_pixels",
        "max_pixels",
        "patch_size",
        "temporal_patch_size",
        "merge_size",
        "min_frames",
        "max_frames",
        "cap_pixels_per_frame",
        "max_video_tokens",
    }
)
registry.register_video(
    registry.VideoFamily(
        processor_type="Qwen2VLVideoProcessor",
        model_types=(
            "qwen2_vl",
            "qwen2_5_vl",
            "qwen2_5_omni",
            "qwen3_omni_moe",
            "exaone4_5",
            "hyperclovax_vision_v2",
        ),
        build=_build_video,
        kwargs=_VIDEO_KWARGS,
        # resize() reads the instance's budget, whatever a call passes.
        instance_settings=frozenset({"max_video_tokens"}),
        ignores=QWEN_VIDEO_IGNORES,
        # _preprocess reads a None cap as False, the config's default.
        none_is_default=frozenset({"cap_pixels_per_frame"}),
    )
)
