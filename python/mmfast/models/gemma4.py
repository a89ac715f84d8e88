"""Gemma 4 and EmbeddingGemma 2: ``Gemma4ImageProcessor`` (transformers 5.24).

An image is resized, keeping its aspect ratio, to the largest size whose sides are multiples of
``pooling_kernel_size * patch_size`` (48) within a budget of ``max_soft_tokens *
pooling_kernel_size**2`` patches (the soft-token budget: 70, 140, 280, 560 or 1120), rescaled
to [0, 1] (no normalisation) and cut into channel-last ``patch_size`` rows (y, x, c),
zero-padded to the budget. ``image_position_ids`` gives each row's patch (x, y), -1 on
padding; ``num_soft_tokens_per_image`` the soft tokens the processor inserts (patches /
``pooling_kernel_size**2``). The checkpoints keep the settings in ``processor_config.json``'s
``image_processor`` block.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Final, cast

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError, UnsupportedModelError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    NEAREST,
    RGB,
    ImagePlan,
    ModelConfig,
    Resize,
    VideoConfig,
    VideoPlan,
    View,
    check_image_size,
    identity_table,
    plan_constants,
    resizer,
)
from mmfast.models.base_video import FramesVideoConfig, positive_number
from mmfast.models.config import Fields, Source
from mmfast.models.siglip2 import check_patch_multiple, hwc_rows, padded_length, written_rows_mask

__all__ = [
    "SUPPORTED_SOFT_TOKENS",
    "EmbeddingGemma2VideoConfig",
    "Gemma4Config",
    "Gemma4VideoConfig",
    "gemma4_fields",
    "gemma4_video_fields",
    "get_aspect_ratio_preserving_size",
]

# image_processing_gemma4._SUPPORTED_SOFT_TOKENS
SUPPORTED_SOFT_TOKENS: Final = (70, 140, 280, 560, 1120)
NO_MEAN: Final[RGB] = (0.0, 0.0, 0.0)
NO_STD: Final[RGB] = (1.0, 1.0, 1.0)


def get_aspect_ratio_preserving_size(
    height: int, width: int, patch_size: int, max_patches: int, pooling_kernel_size: int
) -> tuple[int, int]:
    """Mirrors ``image_processing_gemma4.get_aspect_ratio_preserving_size``: both sides scaled
    by ``sqrt(max_patches * patch_size**2 / (height * width))`` (float64) and floored to
    multiples of ``pooling_kernel_size * patch_size``; a side that floors to 0 becomes one
    multiple and the other ``floor(long / short)`` multiples, capped. HF's ``ValueError``s (both
    sides 0, or over the budget) are raised as :class:`MmfastError`."""
    total_px = height * width
    target_px = max_patches * (patch_size**2)
    factor = math.sqrt(target_px / total_px)
    ideal_height = factor * height
    ideal_width = factor * width
    side_mult = pooling_kernel_size * patch_size
    target_height = math.floor(ideal_height / side_mult) * side_mult
    target_width = math.floor(ideal_width / side_mult) * side_mult
    if target_height == 0 and target_width == 0:
        raise MmfastError(
            f"image size: {height}x{width} resizes to 0x0 at "
            f"pooling_kernel_size * patch_size = {side_mult}"
        )
    max_side_length = (max_patches // pooling_kernel_size**2) * side_mult
    if target_height == 0:
        target_height = side_mult
        target_width = min(math.floor(width / height) * side_mult, max_side_length)
    elif target_width == 0:
        target_width = side_mult
        target_height = min(math.floor(height / width) * side_mult, max_side_length)
    if target_height * target_width > target_px:
        raise MmfastError(
            f"image size: resizing {height}x{width} to {target_height}x{target_width} exceeds "
            f"{max_patches} patches of {patch_size} pixels"
        )
    return target_height, target_width


@dataclass(frozen=True)
class Gemma4Config(ModelConfig):
    """Settings of ``Gemma4ImageProcessor``.

    ``num_image_tokens`` is the image's soft tokens, ``num_soft_tokens_per_image``: the
    ``<|image|>`` tokens Gemma4Processor puts between its ``<|image>`` and ``<image|>``
    markers, what its ``_get_num_multimodal_tokens`` counts.
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
    max_soft_tokens: int
    pooling_kernel_size: int

    # Which transformers backend the plan matches: "pil" or "torchvision".
    backend: str = field(default="pil", kw_only=True)

    # Each image's rows zero-padded to the patch budget (a fixed length), stacked.
    batch_layout: ClassVar[str] = "stack"
    channels_last: ClassVar[bool] = True
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({"num_soft_tokens_per_image": "ints"})

    @property
    def max_patches(self) -> int:
        """The patch budget: ``max_soft_tokens * pooling_kernel_size**2`` (2520 by default)."""
        return self.max_soft_tokens * self.pooling_kernel_size**2

    @property
    def unit(self) -> int:
        """The side of an output row's square of pixels."""
        return self.patch_size

    @property
    def pad_length(self) -> int:
        """The rows each image is zero-padded to."""
        return self.max_patches

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """``aspect_ratio_preserving_resize``'s target."""
        return get_aspect_ratio_preserving_size(
            height, width, self.patch_size, self.max_patches, self.pooling_kernel_size
        )

    def resize(self, size: tuple[int, int]) -> Resize:
        """The resize to ``size``. The torchvision class hands the PIL code to ``tvF.resize``
        itself, which reads 0 as ``NEAREST`` (transformers' own mapping, which mmfast's
        torch kernel follows, says ``NEAREST_EXACT``): that filter is not in the engine."""
        if self.backend == "torchvision" and self.resample == NEAREST:
            raise MmfastError(
                f"resample: {self.image_processor_type} with backend 'torchvision' resizes with "
                "torchvision's legacy NEAREST for 0, which mmfast does not implement; use 1, 2 "
                "or 3, or backend 'pil'"
            )
        return resizer(self.backend, size, self.resample)

    def soft_tokens(self, grid: tuple[int, int]) -> int:
        """``num_soft_tokens_per_image`` for a ``patch_size`` grid: patches // kernel**2."""
        return grid[0] * grid[1] // self.pooling_kernel_size**2

    def check_unpadded(self, height: int, width: int) -> None:
        """With ``do_resize`` off, the image must cut into whole patches."""
        check_patch_multiple(height, width, self.patch_size)

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Gemma4ImageProcessorPil._preprocess`` for one image: the aspect-preserving
        resize (none when the target is the image's size), rescale, normalise, patch rows,
        written at the top of its zero-padded rows."""
        check_image_size(height, width)
        if self.do_resize:
            size = self.resized_size(height, width)
        else:
            self.check_unpadded(height, width)
            size = (height, width)
        resize = self.resize(size) if size != (height, width) else None
        grid = (size[0] // self.patch_size, size[1] // self.patch_size)
        u = self.unit
        rows = (size[0] // u) * (size[1] // u)
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=size,
            resample=self.resample,
            crop=None,
            canvas_size=None,
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType(
                {
                    "pixel_values": (padded_length(rows, self.pad_length), 3 * u * u),
                    "image_position_ids": (padded_length(rows, self.pad_length), 2),
                    "num_soft_tokens_per_image": (),
                }
            ),
            num_image_tokens=self.soft_tokens(grid),
            views=(View(resize=resize, out=hwc_rows(size, u)),),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """HF's arithmetic; with rescale and normalise off both classes pad the uint8 rows."""
        if plan.do_rescale or plan.do_normalize:
            return super().tables(plan)
        return identity_table()

    def rows(self, plan: ImagePlan) -> int:
        """The rows an image writes: its squares of ``unit`` pixels."""
        return (plan.resize_size[0] // self.unit) * (plan.resize_size[1] // self.unit)

    def rows_mask(
        self, shape: tuple[int, ...], offsets: Sequence[int], plans: Sequence[ImagePlan]
    ) -> NDArray[np.bool_] | None:
        """Each image's patch rows; the zero padding after them is False."""
        return written_rows_mask(plans, [self.rows(p) for p in plans])

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_position_ids`` (images, rows, 2) int64: each row's (x, y) in the image's
        grid of ``unit`` squares, raster order, -1 on padding; ``num_soft_tokens_per_image``
        (images,) int64."""
        rows = plans[0].output_shapes["pixel_values"][0]  # stack: every image's
        positions = np.full((len(plans), rows, 2), -1, np.int64)
        for i, plan in enumerate(plans):
            grid_h, grid_w = plan.resize_size[0] // self.unit, plan.resize_size[1] // self.unit
            y, x = np.divmod(np.arange(grid_h * grid_w, dtype=np.int64), grid_w)
            positions[i, : grid_h * grid_w] = np.stack([x, y], axis=-1)
        tokens = np.array([p.num_image_tokens for p in plans], np.int64)
        return {"image_position_ids": positions, "num_soft_tokens_per_image": tokens}


def gemma4_fields(cfg: Fields) -> dict[str, Any]:
    """The :class:`Gemma4Config` fields (but the ids) from a config, with the class defaults
    of ``Gemma4ImageProcessorPil``: bicubic, rescale only (mean 0, std 1), patch 16, 280 soft
    tokens, pooling kernel 3. ``size`` is validated and unused, as in HF."""
    size = cfg.raw("size")
    if size is not None:  # _standardize_kwargs still checks it
        cfg.size_dict("size", size, cfg.flag("default_to_square", True))
    soft = cfg.raw("max_soft_tokens")
    if soft is not None and (
        not isinstance(soft, int) or isinstance(soft, bool) or soft not in SUPPORTED_SOFT_TOKENS
    ):
        raise cfg.error("max_soft_tokens", f"one of {SUPPORTED_SOFT_TOKENS}", soft)
    norm = cfg.normalization(NO_MEAN, NO_STD)
    return {
        "do_convert_rgb": cfg.convert_rgb(),
        "do_resize": cfg.flag("do_resize", True),
        "resample": cfg.resample(BICUBIC),
        "do_rescale": norm.do_rescale,
        "rescale_factor": norm.rescale_factor,
        "do_normalize": cfg.flag("do_normalize", False),
        "image_mean": norm.image_mean,
        "image_std": norm.image_std,
        "patch_size": cfg.positive_int("patch_size", 16),
        "max_soft_tokens": 280 if soft is None else int(soft),
        "pooling_kernel_size": cfg.positive_int("pooling_kernel_size", 3),
    }


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Gemma4Config:
    """Mirrors ``Gemma4ImageProcessorPil.__init__``."""
    return Gemma4Config(
        model_id=source.model_id, image_processor_type=processor_type, **gemma4_fields(cfg)
    )


GEMMA4_KWARGS: Final = frozenset({"patch_size", "max_soft_tokens", "pooling_kernel_size"})

registry.register(
    registry.Family(
        name="gemma4",
        processor_types=("Gemma4ImageProcessor",),
        model_types={
            "gemma4": "Gemma4ImageProcessor",
            "embedding_gemma2": "Gemma4ImageProcessor",
        },
        build=_build,
        kwargs=GEMMA4_KWARGS,
        processor_classes={
            "Gemma4Processor": "gemma4",
            "EmbeddingGemma2Processor": "embedding_gemma2",
        },
        hf_pil="gemma4.image_processing_pil_gemma4.Gemma4ImageProcessorPil",
        hf_torchvision="gemma4.image_processing_gemma4.Gemma4ImageProcessor",
    )
)

# google/gemma-4-31B-it: the image_processor block of its processor_config.json, as a serving
# project's test pins "the released checkpoints' processor_config.json sections" (the video
# block beside it is left out); the processor-level keys are Gemma4Processor's defaults.
# image_seq_length is read by nothing for images (each image gets its own soft-token count).
GEMMA4_IMAGE_PROCESSOR: Final[Mapping[str, Any]] = MappingProxyType(
    {
        "do_convert_rgb": True,
        "do_normalize": False,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.0, 0.0, 0.0],
        "image_processor_type": "Gemma4ImageProcessor",
        "image_seq_length": 280,
        "image_std": [1.0, 1.0, 1.0],
        "max_soft_tokens": 280,
        "patch_size": 16,
        "pooling_kernel_size": 3,
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
    }
)


# Its video_processor block, as two projects pin it (a Rust port's test of "the released
# checkpoints' processor_config.json sections", and a GGUF converter writing the same block).
GEMMA4_VIDEO_PROCESSOR: Final[Mapping[str, Any]] = MappingProxyType(
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "do_sample_frames": True,
        "image_mean": [0.0, 0.0, 0.0],
        "image_std": [1.0, 1.0, 1.0],
        "max_soft_tokens": 70,
        "num_frames": 32,
        "patch_size": 16,
        "pooling_kernel_size": 3,
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "return_metadata": False,
        "video_processor_type": "Gemma4VideoProcessor",
    }
)
registry.register_builtin(
    "google/gemma-4-31B-it",
    "gemma4",
    GEMMA4_IMAGE_PROCESSOR,
    {
        "audio_ms_per_token": 40,
        "audio_seq_length": 750,
        "image_seq_length": 280,
        "processor_class": "Gemma4Processor",
    },
    video=GEMMA4_VIDEO_PROCESSOR,
)


# --------------------------------------------------------------------------------------------
# Video: Gemma4VideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gemma4VideoPlan(VideoPlan):
    """A Gemma 4 clip's plan with its frames' grid of output rows (rows, columns: squares of
    the config's ``unit``) and each frame's soft tokens."""

    grid: tuple[int, int]
    frame_tokens: int


@dataclass(frozen=True)
class Gemma4VideoConfig(VideoConfig):
    """Settings of ``Gemma4VideoProcessor``: each frame resized like a Gemma 4 image (within a
    budget of ``max_soft_tokens`` soft tokens a frame, 70 by default), rescaled (and, by
    default, normalised with mean 0 and std 1), cut into channel-last patch rows zero-padded
    to the budget; the frames of every clip concatenated.

    ``num_video_tokens`` is the count of ``<|video|>`` tokens Gemma4Processor inserts for a
    clip: ``num_soft_tokens_per_video`` per frame (the ``mm:ss`` timestamps and the markers
    around each frame are apart).
    """

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
    max_soft_tokens: int
    pooling_kernel_size: int
    do_sample_frames: bool
    fps: float | None
    num_frames: int | None

    # Rows padded with zeros after normalising.
    raw_pixels: ClassVar[bool] = False
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"num_frames_per_video": "ints", "num_soft_tokens_per_video": "ints"}
    )

    @property
    def max_patches(self) -> int:
        """The patch budget of each frame: ``max_soft_tokens * pooling_kernel_size**2``."""
        return self.max_soft_tokens * self.pooling_kernel_size**2

    @property
    def unit(self) -> int:
        """The side of an output row's square of pixels: a patch."""
        return self.patch_size

    @property
    def pad_length(self) -> int:
        """The rows each frame is zero-padded to: the patch budget."""
        return self.max_patches

    def check_unpadded(self, height: int, width: int) -> None:
        """With ``do_resize`` off, the frame must cut into whole patches."""
        check_patch_multiple(height, width, self.patch_size)

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """``BaseVideoProcessor.sample_frames`` (32 evenly spaced frames by default)."""
        return FramesVideoConfig.sample(cast("Any", self), metadata, fps, num_frames)

    def frame_size(self, height: int, width: int) -> tuple[int, int]:
        """``aspect_ratio_preserving_resize``'s target (the frame's own size when not
        resizing, checked by :meth:`check_unpadded`)."""
        if not self.do_resize:
            self.check_unpadded(height, width)
            return height, width
        return get_aspect_ratio_preserving_size(
            height, width, self.patch_size, self.max_patches, self.pooling_kernel_size
        )

    def plan(self, frames: int, height: int, width: int) -> Gemma4VideoPlan:
        """Mirrors ``Gemma4VideoProcessor._preprocess`` for one clip: every frame resized
        (none when the target is its size), normalised, cut into patch rows at the top of its
        zero-padded slot."""
        check_image_size(height, width)
        size = self.frame_size(height, width)
        resize = Resize(size, self.resample, "torch") if size != (height, width) else None
        u = self.unit
        grid = (size[0] // u, size[1] // u)
        rows = grid[0] * grid[1]
        slot = padded_length(rows, self.pad_length)
        row_values = 3 * u * u
        view = View(resize=resize, out=hwc_rows(size, u))
        # num_soft_tokens_per_video: the frame's patches over the pooling kernel's.
        ps = self.patch_size
        frame_tokens = (size[0] // ps) * (size[1] // ps) // self.pooling_kernel_size**2
        return Gemma4VideoPlan(
            height=height,
            width=width,
            frames=frames,
            views=tuple(((t,), view) for t in range(frames)),
            output_shapes=MappingProxyType({self.output_key: (frames, slot, row_values)}),
            num_video_tokens=frames * frame_tokens,
            starts=tuple(t * slot * row_values for t in range(frames)),
            grid=grid,
            frame_tokens=frame_tokens,
        )

    def batch_outputs(self, plans: Sequence[VideoPlan]) -> dict[str, Any]:
        """``video_position_ids`` (frames, rows, 2) int64: each row's square (x, y), -1 on
        padding; ``num_frames_per_video`` and ``num_soft_tokens_per_video`` (clips,) int64,
        the latter per frame."""
        gemma = cast("Sequence[Gemma4VideoPlan]", plans)
        slots = [p.output_shapes[self.output_key][1] for p in gemma]
        if any(s != slots[0] for s in slots):
            raise MmfastError(
                "videos: the clips' frames give different patch counts (over max_soft_tokens "
                "with do_resize off), which transformers cannot concatenate"
            )
        positions = np.full((sum(p.frames for p in gemma), slots[0], 2), -1, np.int64)
        at = 0
        for p in gemma:
            grid_h, grid_w = p.grid
            y, x = np.divmod(np.arange(grid_h * grid_w, dtype=np.int64), grid_w)
            positions[at : at + p.frames, : grid_h * grid_w] = np.stack([x, y], axis=-1)
            at += p.frames
        tokens = [p.frame_tokens for p in gemma]
        return {
            "video_position_ids": positions,
            "num_frames_per_video": np.array([p.frames for p in gemma], np.int64),
            "num_soft_tokens_per_video": np.array(tokens, np.int64),
        }


def _build_video(model_id: str | None, cfg: Fields) -> Gemma4VideoConfig:
    """Mirrors ``Gemma4VideoProcessor``'s class defaults and ``__init__`` check: bicubic,
    rescale and normalise with mean 0 and std 1, patch 16, 70 soft tokens a frame, pooling
    kernel 3, 32 sampled frames. transformers hands the resample code to ``tvF.resize``
    itself, which reads 0 as its legacy NEAREST (not in the engine) and refuses 4 and 5."""
    size = cfg.raw("size")
    if size is not None:  # _standardize_kwargs still checks it
        cfg.size_dict("size", size, cfg.flag("default_to_square", True))
    soft = cfg.raw("max_soft_tokens")
    if soft is not None and (
        not isinstance(soft, int) or isinstance(soft, bool) or soft not in SUPPORTED_SOFT_TOKENS
    ):
        raise cfg.error("max_soft_tokens", f"one of {SUPPORTED_SOFT_TOKENS}", soft)
    resample = cfg.torch_resample(BICUBIC)
    if resample == NEAREST:  # transformers computes it, mmfast cannot
        error = cfg.error(
            "resample", "1, 2 or 3 (torchvision's legacy NEAREST for 0 is not in mmfast)", 0
        )
        raise UnsupportedModelError(str(error))
    norm = cfg.normalization(NO_MEAN, NO_STD)
    num_frames = cfg.raw("num_frames")
    return Gemma4VideoConfig(
        model_id=model_id,
        video_processor_type="Gemma4VideoProcessor",
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=cfg.flag("do_resize", True),
        resample=resample,
        **norm.fields(),
        patch_size=cfg.positive_int("patch_size", 16),
        max_soft_tokens=70 if soft is None else int(soft),
        pooling_kernel_size=cfg.positive_int("pooling_kernel_size", 3),
        do_sample_frames=cfg.flag("do_sample_frames", True),
        fps=None if cfg.raw("fps") is None else positive_number(cfg, "fps"),
        # A file's null is stored over the class's 32 (ImageProcessingMixin sets it first).
        num_frames=(
            (None if cfg.given("num_frames") else 32)
            if num_frames is None
            else cfg.positive_int("num_frames", 32)
        ),
    )


def gemma4_video_fields(model_id: str | None, cfg: Fields) -> dict[str, Any]:
    """The :class:`Gemma4VideoConfig` fields as ``Gemma4VideoProcessor`` reads a config, for
    the classes that share its ``__init__`` (EmbeddingGemma 2's, Gemma 4 unified's)."""
    gemma = _build_video(model_id, cfg)
    return {f.name: getattr(gemma, f.name) for f in dataclasses.fields(gemma)}


# Its _preprocess resizes by the soft-token budget, never by size; it never crops or pads.
GEMMA4_VIDEO_IGNORES: Final = frozenset(
    {"size", "default_to_square", "do_center_crop", "crop_size", "do_pad", "pad_size"}
)
registry.register_video(
    registry.VideoFamily(
        processor_type="Gemma4VideoProcessor",
        model_types=("gemma4",),
        build=_build_video,
        kwargs=GEMMA4_KWARGS,
        ignores=GEMMA4_VIDEO_IGNORES,
    )
)


@dataclass(frozen=True)
class EmbeddingGemma2VideoConfig(Gemma4VideoConfig):
    """Settings of ``EmbeddingGemma2VideoProcessor``: Gemma 4's video pipeline with its own
    sampler (1 frame a second by default, at most ``max_frames``, thinned by
    ``overflow_strategy``). ``num_video_tokens`` counts the ``<|video|>`` tokens
    EmbeddingGemma2Processor inserts without audio: soft tokens per frame."""

    max_frames: int | None
    overflow_strategy: str | None

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``EmbeddingGemma2VideoProcessor.sample_frames``: every frame, or ``fps``
        frames a second (each ``int(i * video_fps / fps)``, capped at the last) when the clip
        has a rate and duration; then at most ``max_frames``, cut ("truncate") or picked by
        ``np.linspace`` ("uniform")."""
        if num_frames is not None:
            raise MmfastError(
                "num_frames: EmbeddingGemma2VideoProcessor samples with fps and max_frames, "
                f"got num_frames={num_frames}"
            )
        total = metadata.total_num_frames
        if fps is not None and (metadata.fps is None or metadata.duration is None):
            fps = None  # transformers keeps every frame (with a warning)
        if fps is None:
            indices = list(range(total))
        else:
            step = metadata.fps / fps
            count = max(1, int(metadata.duration * fps))
            indices = [min(total - 1, int(i * step)) for i in range(count)]
        if self.overflow_strategy is None or len(indices) <= (self.max_frames or 0):
            return indices
        if self.max_frames is None:
            raise MmfastError(
                f"max_frames: overflow_strategy={self.overflow_strategy!r} needs max_frames"
            )
        if self.overflow_strategy == "truncate":
            return indices[: self.max_frames]
        picks = np.linspace(0, len(indices) - 1, self.max_frames, dtype=int)
        return [indices[i] for i in picks]


def _build_embedding_video(model_id: str | None, cfg: Fields) -> EmbeddingGemma2VideoConfig:
    """Mirrors ``EmbeddingGemma2VideoProcessor``'s class defaults: Gemma 4's (without its 32
    frames), 1 frame a second, at most 32 frames, thinned evenly."""
    fields = gemma4_video_fields(model_id, cfg)
    strategy = cfg.raw("overflow_strategy") if cfg.given("overflow_strategy") else "uniform"
    if strategy not in (None, "truncate", "uniform"):
        raise cfg.error("overflow_strategy", "'truncate' or 'uniform'", strategy)
    max_frames = cfg.raw("max_frames") if cfg.given("max_frames") else 32
    num_frames = cfg.raw("num_frames")
    return EmbeddingGemma2VideoConfig(
        **{
            **fields,
            "video_processor_type": "EmbeddingGemma2VideoProcessor",
            "fps": (None if cfg.given("fps") else 1.0)
            if cfg.raw("fps") is None
            else positive_number(cfg, "fps"),
            "num_frames": None if num_frames is None else cfg.positive_int("num_frames", 1),
        },
        max_frames=None if max_frames is None else cfg.positive_int("max_frames", 32),
        overflow_strategy=strategy,
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="EmbeddingGemma2VideoProcessor",
        model_types=("embedding_gemma2",),
        build=_build_embedding_video,
        kwargs=GEMMA4_KWARGS
        | {"add_timestamps", "max_frames", "overflow_strategy", "load_audio_from_video"},
        # Its _preprocess is Gemma 4's; the timestamps and audio are the processor's.
        ignores=GEMMA4_VIDEO_IGNORES | {"add_timestamps", "load_audio_from_video"},
    )
)
