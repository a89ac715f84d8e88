"""Molmo2: ``Molmo2ImageProcessor`` and ``Molmo2VideoProcessor`` (transformers 5.24;
torchvision only).

The image is squashed to a canvas of overlapping crops: ``select_tiling`` (float32 scales,
argmin/argmax ties to the first) picks a grid of windows, the canvas holds them plus the
overlap margins, and the crops are the ``size`` windows ``window`` pixels apart, all inside
it. Both the canvas and the global view (the whole image squashed to one crop, first) are
resized by torchvision from the image as float32 without antialiasing, rounded half to even
and clamped back to uint8 (``Resize(kernel="torch-float")``), then normalised and written as
channel-last patch rows. ``image_token_pooling`` groups each crop's patch indices (overlap
margins removed) into pooling windows, offset by the patches of the earlier images in the
batch.

The video processor squashes every sampled frame to one ``size`` crop the same way (no
tiling), writes its channel-last patch rows and pools each frame's patch grid; its sampler
takes ``num_frames`` evenly spaced frames (fewer for clips over ``max_fps``) or ``fps`` frames
a second, through a float32 ``torch.arange``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, cast

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BILINEAR,
    BOX,
    DEFAULT_RESCALE,
    HALF,
    HAMMING,
    LANCZOS,
    RGB,
    HwcPatches,
    ImagePlan,
    ModelConfig,
    Resize,
    VideoConfig,
    VideoPlan,
    View,
    check_image_size,
    fused_tables,
    plan_constants,
)
from mmfast.models.base_video import float32_arange, positive_number
from mmfast.models.config import MAX_TILES, Fields, Source
from mmfast.models.geometry import CropBox

__all__ = [
    "Molmo2Config",
    "Molmo2VideoConfig",
    "arange_for_pooling",
    "compute_crop_geometry",
    "overlap_patch_grid",
    "select_tiling",
]


def select_tiling(height: int, width: int, patch_size: int, max_num_crops: int) -> tuple[int, int]:
    """The (rows, columns) of windows to cover a (height, width) image with ``patch_size``
    windows. Mirrors ``image_processing_molmo2.select_tiling``: candidates sorted by
    ``(rows * columns, rows)``, each one's float32 scale ``min(candidate / size)``; the
    largest scale if all are below 1, else the smallest at least 1 (ties: the first)."""
    tilings = [
        (tile_height, tile_width)
        for tile_height, tile_width in itertools.product(range(1, max_num_crops + 1), repeat=2)
        if tile_height * tile_width <= max_num_crops
    ]
    tilings.sort(key=lambda x: (x[0] * x[1], x[0]))
    candidates = np.array(tilings, np.int32) * np.int32(patch_size)
    original = np.array([height, width], np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        scales = candidates.astype(np.float32) / original
    scale = scales.min(axis=-1, keepdims=True)
    if np.all(scale < 1):
        return tilings[int(scale.argmax())]
    scale = np.where(scale < 1.0, np.float32(10e9), scale)
    return tilings[int(scale.argmin())]


def compute_crop_geometry(
    height: int,
    width: int,
    max_crops: int,
    overlap_margins: Sequence[int],
    crop_size: int,
    patch_size: int,
) -> tuple[int, int, int, int]:
    """``(tiling_h, tiling_w, canvas_height, canvas_width)``. Mirrors
    ``image_processing_molmo2.compute_crop_geometry``."""
    left_margin, right_margin = overlap_margins
    crop_patches = crop_size // patch_size
    window_patches = crop_patches - (left_margin + right_margin)
    window_size = window_patches * patch_size
    margin_size = (left_margin + right_margin) * patch_size
    tiling_h, tiling_w = select_tiling(
        height - margin_size, width - margin_size, window_size, max_crops
    )
    return (
        tiling_h,
        tiling_w,
        tiling_h * window_size + margin_size,
        tiling_w * window_size + margin_size,
    )


def overlap_patch_grid(
    tiling: tuple[int, int], crop_patches: int, overlap_margins: Sequence[int]
) -> NDArray[np.int32]:
    """The canvas's patch-index grid: each crop's patch indices (crop after crop), the
    interior overlap margins dropped. Mirrors ``_build_overlapping_crops``'s
    ``patch_index_grid``."""
    tiling_h, tiling_w = tiling
    left_margin, right_margin = overlap_margins
    grid = np.arange(tiling_h * tiling_w * crop_patches * crop_patches, dtype=np.int32).reshape(
        tiling_h, tiling_w, crop_patches, crop_patches
    )
    if left_margin:
        grid[1:, :, :left_margin, :] = -1
        grid[:, 1:, :, :left_margin] = -1
    if right_margin:
        grid[:-1, :, -right_margin:, :] = -1
        grid[:, :-1, :, -right_margin:] = -1
    flat = grid.transpose(0, 2, 1, 3).reshape(-1)
    return flat[flat >= 0]


def arange_for_pooling(
    index_grid: NDArray[np.int32], pool_h: int, pool_w: int
) -> tuple[NDArray[np.int32], int, int]:
    """The grid grouped into (rows * columns, pool_h * pool_w) pooling windows, padded with
    -1 (centred), and the pooled (rows, columns). Mirrors
    ``image_processing_molmo2.arange_for_pooling``."""
    height_padding = pool_h * ((index_grid.shape[0] + pool_h - 1) // pool_h) - index_grid.shape[0]
    width_padding = pool_w * ((index_grid.shape[1] + pool_w - 1) // pool_w) - index_grid.shape[1]
    padded = np.pad(
        index_grid,
        (
            (height_padding // 2, (height_padding + 1) // 2),
            (width_padding // 2, (width_padding + 1) // 2),
        ),
        constant_values=-1,
    )
    rows, cols = padded.shape[0] // pool_h, padded.shape[1] // pool_w
    pooling = (
        padded.reshape(rows, pool_h, cols, pool_w)
        .transpose(0, 2, 1, 3)
        .reshape(rows * cols, pool_h * pool_w)
    )
    return pooling, rows, cols


@dataclass(frozen=True)
class Molmo2Config(ModelConfig):
    """Settings of ``Molmo2ImageProcessor`` plus the ``Molmo2Processor`` values that count
    tokens (``image_use_col_tokens``, ``use_single_crop_col_tokens``)."""

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    crop_size: int
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    max_crops: int
    overlap_margins: tuple[int, int]
    patch_size: int
    pooling_size: tuple[int, int]
    image_use_col_tokens: bool
    use_single_crop_col_tokens: bool | None

    # transformers' class is a torchvision one: either backend name matches it, and the
    # inputs are converted as its backend converts them.
    backend: str = field(default="torchvision", kw_only=True)

    batch_dependent: ClassVar[frozenset[str]] = frozenset({"image_token_pooling"})
    channels_last: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "backend", "torchvision")

    @property
    def crop_patches(self) -> int:
        """Patches per crop side."""
        return self.crop_size // self.patch_size

    def tiling(self, height: int, width: int) -> tuple[int, int, int, int]:
        """``(tiling_h, tiling_w, canvas_height, canvas_width)`` of an image, checked as
        ``_build_overlapping_crops`` needs it (HF fails on the others)."""
        left, right = self.overlap_margins
        window = (self.crop_patches - left - right) * self.patch_size
        if window <= 0:
            raise MmfastError(
                f"overlap_margins: expected margins leaving a window inside the "
                f"{self.crop_patches}-patch crop, got {list(self.overlap_margins)}"
            )
        return compute_crop_geometry(
            height, width, self.max_crops, self.overlap_margins, self.crop_size, self.patch_size
        )

    def grid(self, height: int, width: int) -> tuple[int, int, int, int]:
        """``image_grids``' row: the pooled (rows, columns) of the global view, then of the
        canvas."""
        _, _, canvas_h, canvas_w = self.tiling(height, width)
        pool_h, pool_w = self.pooling_size
        p = self.patch_size
        high = -(-(canvas_h // p) // pool_h), -(-(canvas_w // p) // pool_w)
        low = -(-self.crop_patches // pool_h), -(-self.crop_patches // pool_w)
        return (*low, *high)

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Molmo2ImageProcessor._image_batch_to_patches_and_grids`` for one image."""
        check_image_size(height, width)
        tiling_h, tiling_w, canvas_h, canvas_w = self.tiling(height, width)
        s, p = self.crop_size, self.patch_size
        window = (self.crop_patches - sum(self.overlap_margins)) * p
        crops = tuple(
            CropBox(row * window, col * window, s, s)
            for row in range(tiling_h)
            for col in range(tiling_w)
        )
        views = (
            View(
                resize=Resize((s, s), self.resample, "torch-float"),
                out=HwcPatches(p, (CropBox(0, 0, s, s),)),
            ),
            View(
                resize=Resize((canvas_h, canvas_w), self.resample, "torch-float"),
                out=HwcPatches(p, crops),
            ),
        )
        low_h, low_w, high_h, high_w = self.grid(height, width)
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=True,
            resize_size=(canvas_h, canvas_w),
            resample=self.resample,
            crop=None,
            canvas_size=None,
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType(
                {
                    "pixel_values": (1 + len(crops), self.crop_patches**2, p * p * 3),
                    "image_grids": (4,),
                }
            ),
            num_image_tokens=self._count_tokens(low_h, low_w, high_h, high_w),
            views=views,
        )

    def _count_tokens(self, low_h: int, low_w: int, high_h: int, high_w: int) -> int:
        """Length in tokens of ``Molmo2Processor.replace_image_token``'s string: the global
        view's start token, rows of ``<im_patch>`` tokens each closed by ``<im_col>`` (with
        column tokens on), ``<im_end>``, then the same for the canvas."""
        col = int(self.image_use_col_tokens)
        single = self.use_single_crop_col_tokens
        single_col = col if single is None else int(single)
        return (2 + low_h * (low_w + single_col)) + (2 + high_h * (high_w + col))

    def pooling(self, plan: ImagePlan) -> NDArray[np.int32]:
        """One image's pooling windows (global view first, canvas indices after the global
        view's patches), before the batch offset."""
        pool_h, pool_w = self.pooling_size
        tiling_h, tiling_w, _, _ = self.tiling(plan.height, plan.width)
        grid = overlap_patch_grid((tiling_h, tiling_w), self.crop_patches, self.overlap_margins)
        canvas_h, canvas_w = plan.resize_size
        grid = grid.reshape(canvas_h // self.patch_size, canvas_w // self.patch_size)
        high, _, _ = arange_for_pooling(grid, pool_h, pool_w)
        per_crop = self.crop_patches**2
        resized = np.arange(per_crop, dtype=np.int32).reshape(self.crop_patches, -1)
        low, _, _ = arange_for_pooling(resized, pool_h, pool_w)
        high = np.where(high >= 0, high + np.int32(per_crop), np.int32(-1))
        return np.concatenate([low, high]).astype(np.int32)

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """transformers' torchvision arithmetic, whichever backend name was asked for."""
        return fused_tables(plan)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_token_pooling`` (sum of pooled windows, pool_h * pool_w) int32, each
        image's indices offset by the patches of the images before it; ``image_grids``
        (N, 4) int64; ``image_num_crops`` (N,) int64 (crops plus the global view)."""
        pooled = []
        offset = 0
        for plan in plans:
            crops, patches, _ = plan.output_shapes["pixel_values"]
            indices = self.pooling(plan)
            pooled.append(np.where(indices >= 0, indices + np.int32(offset), indices))
            offset += crops * patches
        grids = [self.grid(plan.height, plan.width) for plan in plans]
        return {
            "image_token_pooling": np.concatenate(pooled).astype(np.int32),
            "image_grids": np.array(grids, np.int64).reshape(-1, 4),
            "image_num_crops": np.array(
                [plan.output_shapes["pixel_values"][0] for plan in plans], np.int64
            ),
        }


def _pair(cfg: Fields, name: str, default: tuple[int, int], low: int) -> tuple[int, int]:
    """A list of two integers (overlap margins, pooling size), each at least ``low``."""
    value = cfg.raw(name)
    if value is None:
        return default
    ok = isinstance(value, list | tuple) and len(value) == 2
    if not ok or not all(
        isinstance(v, int) and not isinstance(v, bool) and low <= v <= MAX_TILES for v in value
    ):
        raise cfg.error(name, f"a list of two integers from {low} to {MAX_TILES}", value)
    return int(value[0]), int(value[1])


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Molmo2Config:
    """Mirrors ``Molmo2ImageProcessor``'s class defaults and the checks its ``_preprocess``
    makes (a square ``size``); ``do_resize`` is not read by the class."""
    size_value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"height": 378, "width": 378} if size_value is None else size_value,
        cfg.flag("default_to_square", True),
    )
    if size.keys() != {"height", "width"} or size["height"] != size["width"]:
        raise cfg.error("size", "a square {height, width} crop size", size)
    resample = cfg.resample(BILINEAR)
    if resample in (LANCZOS, BOX, HAMMING):
        # Resized without antialiasing: torchvision refuses LANCZOS, torch has no box or
        # hamming mode.
        raise cfg.error("resample", "0, 2 or 3 (Molmo2 resizes without antialiasing)", resample)
    patch_size = cfg.positive_int("patch_size", 14)
    if size["height"] % patch_size:
        # batch_pixels_to_patches reshapes each crop into whole patches.
        raise cfg.error("size", f"a crop side that is a multiple of patch_size {patch_size}", size)
    norm = cfg.normalization(HALF, HALF)
    single = processor.raw("use_single_crop_col_tokens")
    return Molmo2Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        crop_size=size["height"],
        resample=resample,
        **norm.fields(),
        max_crops=cfg.positive_int("max_crops", 8, MAX_TILES),
        overlap_margins=_pair(cfg, "overlap_margins", (4, 4), 0),
        patch_size=patch_size,
        pooling_size=_pair(cfg, "pooling_size", (2, 2), 1),
        # Molmo2Processor.__init__ defaults.
        image_use_col_tokens=processor.flag("image_use_col_tokens", True),
        use_single_crop_col_tokens=None
        if single is None
        else processor.flag("use_single_crop_col_tokens", True),
    )


registry.register(
    registry.Family(
        name="molmo2",
        processor_types=("Molmo2ImageProcessor",),
        model_types={"molmo2": "Molmo2ImageProcessor"},
        build=_build,
        kwargs=frozenset({"max_crops", "overlap_margins", "patch_size", "pooling_size"}),
        processor_kwargs=frozenset({"image_use_col_tokens", "use_single_crop_col_tokens"}),
        hf_torchvision="molmo2.image_processing_molmo2.Molmo2ImageProcessor",
        processor_classes={"Molmo2Processor": "molmo2"},
    )
)

# allenai/Molmo2-4B's preprocessor_config.json, verbatim from a public copy of the checkpoint
# (a project that vendored the model folder). allenai/Molmo2-8B's file was not found; the
# family's model cards and the remote code it names (the same image_processing_molmo2.py)
# give the same settings, assumed identical. The auto_map names the checkpoint's remote code,
# which transformers 5.24 does not load without trust_remote_code: its own class reads the
# same keys.
_MOLMO2 = {
    "auto_map": {
        "AutoImageProcessor": "image_processing_molmo2.Molmo2ImageProcessor",
        "AutoVideoProcessor": "video_processing_molmo2.Molmo2VideoProcessor",
        "AutoProcessor": "processing_molmo2.Molmo2Processor",
    },
    "do_convert_rgb": True,
    "image_mean": list(HALF),
    "image_processor_type": "Molmo2ImageProcessor",
    "image_std": list(HALF),
    "max_crops": 8,
    "overlap_margins": [4, 4],
    "patch_size": 14,
    "pooling_size": [2, 2],
    "processor_class": "Molmo2Processor",
    "resample": BILINEAR,
    "size": {"height": 378, "width": 378},
}
# The checkpoints' video_preprocessor_config.json was not found in a public copy. What is known
# of it: the checkpoints name Molmo2VideoProcessor in their auto_map (above), and a public
# reader of the checkpoint folder (OpenVINO GenAI's Molmo2 inputs embedder) reads num_frames,
# max_fps, frame_sample_mode and sampling_fps from it, the last two keys of the remote code
# that transformers 5.24's class never reads. So the built-ins' video block is transformers'
# class defaults as its to_dict() writes them (unconfirmed: in particular num_frames and
# whether the file turns do_rescale/do_normalize on; without them the class returns the
# resized uint8 pixels).
_MOLMO2_VIDEO = {
    "do_sample_frames": True,
    "image_mean": list(HALF),
    "image_std": list(HALF),
    "max_fps": 2,
    "num_frames": 64,
    "patch_size": 14,
    "pooling_size": [3, 3],
    "resample": BILINEAR,
    "rescale_factor": 1 / 255,
    "return_metadata": False,
    "size": {"height": 378, "width": 378},
    "video_processor_type": "Molmo2VideoProcessor",
}
registry.register_builtin("allenai/Molmo2-8B", "molmo2", _MOLMO2, video=_MOLMO2_VIDEO)
registry.register_builtin("allenai/Molmo2-4B", "molmo2", _MOLMO2, video=_MOLMO2_VIDEO)


# --------------------------------------------------------------------------------------------
# Video: Molmo2VideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Molmo2VideoConfig(VideoConfig):
    """Settings of ``Molmo2VideoProcessor`` plus ``Molmo2Processor``'s
    ``video_use_col_tokens``: every sampled frame squashed to one ``crop_size`` square (as the
    image processor's global view: a float32 resize without antialiasing, rounded and clamped
    back to uint8), rescaled and normalised only where the config turns them on (the class
    sets neither, so by default its outputs are those uint8 pixels), cut into channel-last
    patch rows; the frames of every clip concatenated.

    ``num_video_tokens`` counts the special tokens ``Molmo2Processor.get_video_string`` puts
    in the prompt for a clip: per frame a start and an end token (``<frame_start>`` and
    ``<frame_end>``, or ``<im_start>``/``<im_end>``) around the pooled rows of ``<im_patch>``
    tokens, each row closed by ``<im_col>`` with ``video_use_col_tokens``. Each frame's
    timestamp (``"0.5 "``) is text, apart.
    """

    model_id: str | None
    video_processor_type: str
    do_convert_rgb: bool
    crop_size: int
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    patch_size: int
    pooling_size: tuple[int, int]
    do_sample_frames: bool
    fps: float | None
    num_frames: int | None
    max_fps: float | None
    video_use_col_tokens: bool

    @property
    def crop_patches(self) -> int:
        """Patches per frame side."""
        return self.crop_size // self.patch_size

    @property
    def pooled(self) -> tuple[int, int]:
        """``video_grids``' (rows, columns): the pooled patch grid of every frame."""
        pool_h, pool_w = self.pooling_size
        return -(-self.crop_patches // pool_h), -(-self.crop_patches // pool_w)

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``Molmo2VideoProcessor.sample_frames``: ``int(duration * fps)`` frames, or
        ``num_frames`` (the config's 64 by default) capped at ``int(duration * max_fps)`` for
        clips faster than ``max_fps``; at least 1, at most the clip's; the indices a float32
        ``torch.arange(0, total, total / count)`` truncates. A clip without a rate is read at
        ``fps`` (else ``max_fps``) frames a second, as transformers does (with a warning)."""
        if fps is not None and num_frames is not None:
            raise MmfastError(
                f"fps, num_frames: expected one of them, got fps={fps} and num_frames="
                f"{num_frames} (a call leaving one out takes the config's; pass it as None)"
            )
        max_fps = self.max_fps
        total = metadata.total_num_frames
        rate = metadata.fps if metadata.fps is not None else (fps if fps is not None else max_fps)
        if rate is None:
            raise MmfastError(
                "video_fps: Molmo2VideoProcessor needs the clip's rate, an fps or max_fps to "
                "sample it (transformers fails on a clip without them)"
            )
        duration = metadata.duration if metadata.duration is not None else total / rate
        if fps is not None:
            count = int(duration * fps)
        else:
            if num_frames is None and self.num_frames is None:
                raise MmfastError(
                    "num_frames: Molmo2VideoProcessor samples num_frames frames without fps, "
                    "got None (transformers fails comparing it)"
                )
            count = num_frames if num_frames is not None else cast("int", self.num_frames)
            if max_fps is not None and rate > max_fps:
                count = min(count, int(duration * max_fps))
        count = max(min(count, total), 1)
        return float32_arange(0, total, total / count)

    def plan(self, frames: int, height: int, width: int) -> VideoPlan:
        """Mirrors ``Molmo2VideoProcessor._build_video_patches`` for one clip: every frame
        resized to the crop (``resize_and_normalize_image``), then its (crop_patches**2,
        patch_size**2 * 3) channel-last rows."""
        check_image_size(height, width)
        s, p = self.crop_size, self.patch_size
        view = View(
            resize=Resize((s, s), self.resample, "torch-float"),
            out=HwcPatches(p, (CropBox(0, 0, s, s),)),
        )
        rows, cols = self.pooled
        per_frame = 2 + rows * (cols + int(self.video_use_col_tokens))
        return VideoPlan(
            height=height,
            width=width,
            frames=frames,
            views=tuple(((t,), view) for t in range(frames)),
            output_shapes=MappingProxyType(
                {self.output_key: (frames, self.crop_patches**2, p * p * 3)}
            ),
            num_video_tokens=frames * per_frame,
        )

    def batch_outputs(self, plans: Sequence[VideoPlan]) -> dict[str, Any]:
        """``video_token_pooling`` (pooled windows of every frame, pool_h * pool_w) int64:
        each frame's patch indices offset by the patches of the frames (of every clip) before
        it, -1 on padding; ``video_grids`` (clips, 3) int64: frames, pooled rows, columns."""
        pool_h, pool_w = self.pooling_size
        per_frame = self.crop_patches**2
        grid = np.arange(per_frame, dtype=np.int32).reshape(self.crop_patches, -1)
        windows, rows, cols = arange_for_pooling(grid, pool_h, pool_w)
        total = sum(plan.frames for plan in plans)
        offsets = np.arange(total, dtype=np.int64)[:, None, None] * per_frame
        pooled = np.where(windows >= 0, windows.astype(np.int64) + offsets, np.int64(-1))
        return {
            "video_token_pooling": pooled.reshape(-1, pool_h * pool_w),
            "video_grids": np.array(
                [(plan.frames, rows, cols) for plan in plans], np.int64
            ).reshape(-1, 3),
        }


def _optional_number(cfg: Fields, name: str, default: float | None) -> float | None:
    """A number above 0, the class ``default`` where the config leaves it out, and None
    where the file stores a null over it (``from_dict`` sets it)."""
    if cfg.raw(name) is None:
        return None if cfg.given(name) else default
    return positive_number(cfg, name)


def _build_video(model_id: str | None, cfg: Fields) -> Molmo2VideoConfig:
    """Mirrors ``Molmo2VideoProcessor``'s class defaults and checks: a square ``size`` (378
    by default; ``__init__`` and ``_preprocess`` refuse others), bilinear, patch 14, pooling
    3 x 3, 64 frames at most ``max_fps`` 2 a second; rescale, normalise and RGB conversion off
    (the class sets none of them: ``VideoProcessorMixin`` leaves them None)."""
    size_value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"height": 378, "width": 378} if size_value is None else size_value,
        cfg.flag("default_to_square", True),
    )
    if size.keys() != {"height", "width"} or size["height"] != size["width"]:
        raise cfg.error("size", "a square {height, width} size (Molmo2 squashes frames)", size)
    resample = cfg.resample(BILINEAR)
    if resample in (LANCZOS, BOX, HAMMING):
        # Resized as float32 without antialiasing: torchvision refuses LANCZOS there, torch
        # has no box or hamming mode.
        raise cfg.error("resample", "0, 2 or 3 (Molmo2 resizes without antialiasing)", resample)
    patch_size = cfg.positive_int("patch_size", 14)
    if size["height"] % patch_size:
        # batch_pixels_to_patches reshapes each frame into whole patches (torch fails).
        raise cfg.error("size", f"a side that is a multiple of patch_size {patch_size}", size)
    num_frames = cfg.raw("num_frames")
    return Molmo2VideoConfig(
        model_id=model_id,
        video_processor_type="Molmo2VideoProcessor",
        do_convert_rgb=cfg.flag("do_convert_rgb", False),
        crop_size=size["height"],
        resample=resample,
        do_rescale=cfg.flag("do_rescale", False),
        rescale_factor=cfg.number("rescale_factor", DEFAULT_RESCALE),
        do_normalize=cfg.flag("do_normalize", False),
        image_mean=cfg.rgb("image_mean", HALF),
        image_std=cfg.rgb("image_std", HALF, nonzero=True),
        patch_size=patch_size,
        pooling_size=_pair(cfg, "pooling_size", (3, 3), 1),
        do_sample_frames=cfg.flag("do_sample_frames", True),
        fps=_optional_number(cfg, "fps", None),
        num_frames=(
            (None if cfg.given("num_frames") else 64)
            if num_frames is None
            else cfg.positive_int("num_frames", 64)
        ),
        max_fps=_optional_number(cfg, "max_fps", 2.0),
        # Molmo2Processor.__init__'s default.
        video_use_col_tokens=cfg.flag("video_use_col_tokens", False),
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="Molmo2VideoProcessor",
        model_types=("molmo2",),
        build=_build_video,
        kwargs=frozenset({"patch_size", "pooling_size", "max_fps"}),
        # Its _preprocess always squashes the frames to size: it never reads do_resize, never
        # crops or pads.
        ignores=frozenset({"do_resize", "do_center_crop", "crop_size", "do_pad", "pad_size"}),
        # sample_frames reads a None max_fps as the instance's; the class leaves do_rescale
        # and do_normalize None, which _preprocess reads as off, the config's default.
        none_is_default=frozenset({"max_fps", "do_rescale", "do_normalize"}),
        processor_kwargs=frozenset({"video_use_col_tokens"}),
    )
)
