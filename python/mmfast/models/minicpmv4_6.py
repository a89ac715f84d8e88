"""MiniCPM-V 4.6 and 4.7: ``MiniCPMV4_6ImageProcessor`` / ``MiniCPMV4_6ImageProcessorPil``
(transformers 5.24; AutoImageProcessor gives MiniCPM-V 4.7 the same class).

Each image gives a source view (the whole image resized to about ``scale_resolution`` squared,
in multiples of ``patch_size`` times the merge factor) and, when it is larger than that, a grid
of slices cut from a refine image (the image resized so that each slice is such a view). Every
view is cut into ``patch_size`` squares laid along MiniCPM-V's NaViT strip: ``pixel_values``
is one (1, 3, patch_size, L) tensor for the whole batch, each view's patches following the
previous ones along its last axis. ``target_sizes`` (int32) gives each view's patch grid;
``grids`` and ``num_patches_per_image`` stay Python lists.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, ClassVar, cast

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError, UnsupportedModelError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    HALF,
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
    RGB,
    ImagePlan,
    ModelConfig,
    Strip,
    VideoConfig,
    VideoPlan,
    View,
    check_image_size,
    identity_table,
    plan_constants,
    resizer,
)
from mmfast.models.config import MAX_TILES, Fields, Source
from mmfast.models.geometry import CropBox

__all__ = [
    "MiniCPMPlan",
    "MiniCPMV4_6Config",
    "MiniCPMV4_6VideoConfig",
    "ensure_divide",
    "find_best_resize",
    "get_refine_size",
    "get_sliced_grid",
    "minicpm_video_fields",
]

DOWNSAMPLE_MODES = ("16x", "4x")
# MiniCPM-V's placeholder markers around an image id, which the processor numbers from 0
# within each prompt: <image_id>0</image_id> is three tokens for a prompt's first image.
IMAGE_ID_TOKENS = 3


def ensure_divide(length: float, divisor: int) -> int:
    """``image_processing_minicpmv4_6.ensure_divide``: the nearest multiple of ``divisor``
    (Python's ``round``, half to even), at least ``divisor``."""
    return max(round(length / divisor) * divisor, divisor)


def merge_factor(downsample_mode: str) -> int:
    """``find_best_resize``'s merge factor: "4x" merges one 2x2 block, anything else two."""
    return 2 if downsample_mode == "4x" else 4


def find_best_resize(
    image_size: tuple[float, float],
    scale_resolution: int,
    patch_size: int,
    downsample_mode: str,
    allow_upscale: bool = False,
) -> tuple[int, int]:
    """``MiniCPMV4_6ImageProcessorPil.find_best_resize``: an image over ``scale_resolution``
    squared (or any image, with ``allow_upscale``) takes that area at its aspect ratio
    (``int()`` truncations), then each side goes to a multiple of ``patch_size`` times the
    merge factor. Sides may be floats (a refine image's slice)."""
    height, width = image_size
    if (height * width > scale_resolution * scale_resolution) or allow_upscale:
        aspect_ratio = width / height
        height = int(scale_resolution / math.sqrt(aspect_ratio))
        width = int(height * aspect_ratio)
    unit = patch_size * merge_factor(downsample_mode)
    return ensure_divide(height, unit), ensure_divide(width, unit)


def get_refine_size(
    image_size: tuple[int, int],
    grid: tuple[int, int],
    scale_resolution: int,
    patch_size: int,
    downsample_mode: str,
) -> tuple[int, int]:
    """``MiniCPMV4_6ImageProcessorPil.get_refine_size`` (as ``_preprocess`` calls it, with
    ``allow_upscale=True``): the sides rounded to the grid, one slice's best size (from float
    slice sides), times the grid."""
    height, width = image_size
    grid_y, grid_x = grid
    refine_width = ensure_divide(width, grid_x)
    refine_height = ensure_divide(height, grid_y)
    best_height, best_width = find_best_resize(
        (refine_height / grid_y, refine_width / grid_x),
        scale_resolution,
        patch_size,
        downsample_mode,
        allow_upscale=True,
    )
    return best_height * grid_y, best_width * grid_x


def get_sliced_grid(
    image_size: tuple[int, int], max_slice_nums: int, scale_resolution: int
) -> tuple[int, int] | None:
    """``MiniCPMV4_6ImageProcessorPil.get_sliced_grid``: (rows, columns), or None for an image
    of at most one slice. Slice counts next to ``ceil(area / scale_resolution**2)`` (capped at
    ``max_slice_nums``) are tried with every row count dividing them; the grid whose
    ``log(columns / rows)`` is closest to the image's ``log(width / height)`` wins, the one
    with more rows on a tie."""
    original_height, original_width = image_size
    log_ratio = math.log(original_width / original_height)
    ratio = original_width * original_height / (scale_resolution * scale_resolution)
    multiple = min(math.ceil(ratio), max_slice_nums)
    if multiple <= 1:
        return None
    best_grid = (1, 1)
    min_error = float("inf")
    for num_slices in [multiple - 1, multiple, multiple + 1]:
        if num_slices == 1 or num_slices > max_slice_nums:
            continue
        for num_rows in range(1, num_slices + 1):
            if num_slices % num_rows == 0:
                num_cols = num_slices // num_rows
                error = abs(log_ratio - math.log(num_cols / num_rows))
                if error < min_error:
                    best_grid = (num_rows, num_cols)
                    min_error = error
                elif error == min_error and num_rows > best_grid[0]:
                    best_grid = (num_rows, num_cols)
    return best_grid


def divide_to_patches(
    height: int, width: int, patch_height: int, patch_width: int
) -> tuple[CropBox, ...]:
    """``image_transforms.divide_to_patches``'s windows, row-major: steps of the patch size
    from the top-left, the last row and column cut short at the image's edge."""
    return tuple(
        CropBox(top, left, min(patch_height, height - top), min(patch_width, width - left))
        for top in range(0, height, patch_height)
        for left in range(0, width, patch_width)
    )


@dataclass(frozen=True)
class MiniCPMPlan(ImagePlan):
    """An :class:`ImagePlan` with what MiniCPM-V's outputs and prompt read: ``target_sizes``,
    the (rows, columns) of patches of each view (the source first, then each slice, as HF
    counts them), and ``grid``, the slice grid ((0, 0) without slices)."""

    target_sizes: tuple[tuple[int, int], ...] = field(default=(), kw_only=True)
    grid: tuple[int, int] = field(default=(0, 0), kw_only=True)


@dataclass(frozen=True)
class MiniCPMV4_6Config(ModelConfig):
    """Settings of ``MiniCPMV4_6ImageProcessor`` / ``MiniCPMV4_6ImageProcessorPil``.

    ``num_image_tokens`` counts the placeholder MiniCPMV4_6Processor / MiniCPMV4_7Processor
    put in the prompt for an image (``replace_image_token`` and ``_prepend_local_ids``), as
    the model's tokenizer splits it: ``<image_id>0</image_id>`` with ``use_image_id`` (three
    tokens: the image is counted as its prompt's first), ``<image>``, one image token per
    ``16`` patches of the source (``4`` in "4x" mode) and ``</image>``; then per slice
    ``<slice>``, its image tokens and ``</slice>``, and a newline between slice rows.
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
    max_slice_nums: int
    scale_resolution: int
    patch_size: int
    slice_mode: bool
    downsample_mode: str
    use_image_id: bool

    # Which transformers backend the plan matches: "pil" or "torchvision".
    backend: str = field(default="pil", kw_only=True)

    # The batch's views share one strip: pixel_values has no per-image first axis.
    batch_layout: ClassVar[str] = "strip"
    skip_tensor_conversion: ClassVar[tuple[str, ...]] = ("grids", "num_patches_per_image")

    @property
    def token_divisor(self) -> int:
        """Patches per image token: the processor's ``image_token_divisor``."""
        return 4 if self.downsample_mode == "4x" else 16

    def grid(self, height: int, width: int) -> tuple[int, int] | None:
        """The slice grid, with slicing on."""
        if not self.slice_mode:
            return None
        return get_sliced_grid((height, width), self.max_slice_nums, self.scale_resolution)

    def source_size(self, height: int, width: int, grid: tuple[int, int] | None) -> tuple[int, int]:
        """The source view's size: upscaled only for an image without slices."""
        return find_best_resize(
            (height, width),
            self.scale_resolution,
            self.patch_size,
            self.downsample_mode,
            allow_upscale=grid is None,
        )

    def check_call(self, height: int, width: int) -> None:
        """Refusals of transformers' ``_preprocess`` for this image, before any work.

        The torchvision class reads the source size only where it resizes: with ``do_resize``
        off it fails (``UnboundLocalError``) on every image.
        """
        if not self.do_resize and self.backend == "torchvision":
            raise MmfastError(
                "do_resize: expected true (transformers' MiniCPMV4_6ImageProcessor fails "
                "without resizing; its PIL class takes images whose sides are multiples of "
                f"patch_size), got {self.do_resize}"
            )

    def plan(self, height: int, width: int) -> MiniCPMPlan:
        """Mirrors ``MiniCPMV4_6ImageProcessorPil._preprocess`` for one image (the
        torchvision class computes the same sizes): the source view, then the refine image's
        slices, row-major, each one ``divide_to_patches`` window of it."""
        check_image_size(height, width)
        self.check_call(height, width)
        grid = self.grid(height, width)
        ps = self.patch_size
        views: list[View] = []
        source = (height, width)
        if self.do_resize:
            source = self.source_size(height, width, grid)
        resize = resizer(self.backend, source, self.resample) if self.do_resize else None
        views.append(View(resize=resize, out=Strip(ps, 0)))
        sizes = [source]
        target_sizes = [(source[0] // ps, source[1] // ps)]
        if grid is not None:
            refine = (height, width)
            parent = None
            if self.do_resize:
                refine = get_refine_size(
                    (height, width), grid, self.scale_resolution, ps, self.downsample_mode
                )
                views.append(View(resize=resizer(self.backend, refine, self.resample)))
                parent = 1
            slice_h, slice_w = refine[0] // grid[0], refine[1] // grid[1]
            if slice_h == 0 or slice_w == 0:
                raise MmfastError(
                    f"image size: {height}x{width} is cut into slices of {slice_h}x{slice_w} "
                    f"pixels by the {grid[0]}x{grid[1]} grid (transformers fails on it)"
                )
            for box in divide_to_patches(*refine, slice_h, slice_w):
                sizes.append((box.height, box.width))
                target_sizes.append((slice_h // ps, slice_w // ps))
                views.append(View(source=parent, crop=box, out=Strip(ps, 0)))
        for h, w in sizes:
            if h % ps or w % ps:
                # PilBackend's reshape_by_patch raises ValueError on it.
                raise MmfastError(
                    f"image size: with do_resize off, every view's sides must be multiples of "
                    f"patch_size={ps}; {height}x{width} gives a {h}x{w} view"
                )
        run = sum(h // ps * w for h, w in sizes)
        return MiniCPMPlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=source,
            resample=self.resample,
            crop=None,
            canvas_size=None,
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType(
                {"pixel_values": (1, 3, ps, run), "target_sizes": (len(sizes), 2)}
            ),
            num_image_tokens=self.count_tokens(target_sizes, grid),
            views=tuple(views),
            target_sizes=tuple(target_sizes),
            grid=grid or (0, 0),
        )

    def count_tokens(
        self, target_sizes: Sequence[tuple[int, int]], grid: tuple[int, int] | None
    ) -> int:
        """The placeholder's length in tokens (see the class docstring), from the views'
        patch grids as ``replace_image_token`` reads ``target_sizes``."""
        per_view = [h * w // self.token_divisor for h, w in target_sizes]
        tokens = IMAGE_ID_TOKENS * self.use_image_id + 2 + per_view[0]
        if self.slice_mode and grid is not None:
            rows = grid[0]
            tokens += sum(2 + n for n in per_view[1:]) + rows - 1
        return tokens

    def num_image_tokens(self, height: int, width: int) -> int:
        """Tokens of the image's placeholder (see the class docstring); MiniCPMV4_6Processor
        refuses an image whose slice count is not the grid's (only the PIL class with
        ``do_resize`` off can give one)."""
        plan = self.plan(height, width)
        rows, cols = plan.grid
        if self.slice_mode and rows and len(plan.target_sizes) - 1 != rows * cols:
            raise MmfastError(
                f"image size: {height}x{width} gives {len(plan.target_sizes) - 1} slices for a "
                f"{rows}x{cols} grid, which MiniCPMV4_6Processor refuses"
            )
        return plan.num_image_tokens

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """HF's arithmetic per backend. With rescale and normalise both off, the PIL class
        keeps the uint8 pixels while the torchvision class has made them float32
        (``stacked.float()``)."""
        if plan.do_rescale or plan.do_normalize:
            return super().tables(plan)
        if plan.backend == "pil":
            return identity_table()
        return np.repeat(np.arange(256, dtype=np.float32)[None, :], 3, axis=0)

    def finish_batch(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> Sequence[ImagePlan]:
        """Every view's strip rows are the batch's strip length apart (plans carry stride 0
        until the batch is known)."""
        stride = sum(p.output_shapes["pixel_values"][3] for p in plans)
        return [
            replace(
                plan,
                views=tuple(
                    replace(v, out=Strip(self.patch_size, stride))
                    if isinstance(v.out, Strip)
                    else v
                    for v in plan.views
                ),
            )
            for plan in plans
        ]

    def batch_shape(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> tuple[tuple[int, ...], list[int]]:
        """(1, 3, patch_size, L), L the views' strip lengths summed; each image starts where
        the previous one's views end along the first strip row."""
        runs = [p.output_shapes["pixel_values"][3] for p in plans]
        shape = (1, 3, self.patch_size, sum(runs))
        return shape, [0, *itertools.accumulate(runs)][:-1]

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``target_sizes`` (views, 2) int32; ``grids`` ([rows, columns] per image, [0, 0]
        without slices) and ``num_patches_per_image`` (views per image) as lists."""
        minicpm = cast("Sequence[MiniCPMPlan]", plans)
        sizes = [list(ts) for p in minicpm for ts in p.target_sizes]
        return {
            "target_sizes": np.array(sizes, np.int32).reshape(-1, 2),
            "grids": [list(p.grid) for p in minicpm],
            "num_patches_per_image": [len(p.target_sizes) for p in minicpm],
        }


def downsample_mode(cfg: Fields, default: str) -> str:
    """``downsample_mode``: "16x" or "4x" (transformers reads any other value as "16x")."""
    value = cfg.raw("downsample_mode")
    if value is None:
        return default
    if value not in DOWNSAMPLE_MODES:
        raise cfg.error("downsample_mode", "'16x' or '4x'", value)
    return str(value)


def minicpm_fields(cfg: Fields, downsample: str) -> dict[str, Any]:
    """The settings both MiniCPM-V classes share, with their class defaults (bicubic,
    ImageNet-standard mean/std 0.5, 9 slices of 448, 14-pixel patches, slicing and image ids
    on)."""
    norm = cfg.normalization(IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD)
    size = cfg.raw("size")
    if size is not None:
        # The classes have no size and never read one, but transformers still checks it as a
        # size dict (get_size_dict).
        cfg.size_dict("size", size, True)
    return {
        "do_convert_rgb": cfg.convert_rgb(),
        "do_resize": cfg.flag("do_resize", True),
        "resample": cfg.resample(BICUBIC),
        **norm.fields(),
        "max_slice_nums": cfg.int_in("max_slice_nums", 9, 0, MAX_TILES),
        "scale_resolution": cfg.positive_int("scale_resolution", 448, 2**16),
        "patch_size": cfg.positive_int("patch_size", 14, 2**10),
        "slice_mode": cfg.flag("slice_mode", True),
        "downsample_mode": downsample_mode(cfg, downsample),
        "use_image_id": cfg.flag("use_image_id", True),
    }


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> MiniCPMV4_6Config:
    """Mirrors ``MiniCPMV4_6ImageProcessorPil``'s class defaults ("16x" downsampling). The
    processors read ``use_image_id`` from the image processor (their own attribute comes only
    from a call)."""
    return MiniCPMV4_6Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **minicpm_fields(cfg, "16x"),
    )


MINICPM_KWARGS = frozenset(
    {
        "max_slice_nums",
        "scale_resolution",
        "patch_size",
        "slice_mode",
        "downsample_mode",
        "use_image_id",
    }
)

registry.register(
    registry.Family(
        name="minicpmv4_6",
        processor_types=("MiniCPMV4_6ImageProcessor",),
        model_types={
            "minicpmv4_6": "MiniCPMV4_6ImageProcessor",
            "minicpmv4_7": "MiniCPMV4_6ImageProcessor",
        },
        build=_build,
        kwargs=MINICPM_KWARGS,
        processor_classes={
            "MiniCPMV4_6Processor": "minicpmv4_6",
            "MiniCPMV4_7Processor": "minicpmv4_7",
        },
        hf_pil="minicpmv4_6.image_processing_pil_minicpmv4_6.MiniCPMV4_6ImageProcessorPil",
        hf_torchvision="minicpmv4_6.image_processing_minicpmv4_6.MiniCPMV4_6ImageProcessor",
    )
)

# Built-in checkpoints: each dict is the checkpoint's preprocessor_config.json as far as public
# copies show it; the README's model table says which values are confirmed.
_MINICPM_V: Mapping[str, Any] = MappingProxyType(
    {
        "image_processor_type": "MiniCPMV4_6ImageProcessor",
        "max_slice_nums": 9,
        "scale_resolution": 448,
        "patch_size": 14,
        "use_image_id": True,
        "slice_mode": True,
        "image_mean": list(HALF),
        "image_std": list(HALF),
    }
)

# openbmb/MiniCPM-V-4.6: the file verbatim in three agreeing copies (a "Duplicate from
# openbmb/MiniCPM-V-4.6" repository, the MiniCPM-V-4.6-Thinking checkpoint's file, and
# transformers' tiny processor fixture hf-internal-testing/tiny-processor-minicpmv4_6). It sets
# no downsample_mode, resample or rescale_factor: the class defaults ("16x", bicubic, 1/255)
# apply.
registry.register_builtin(
    "openbmb/MiniCPM-V-4.6",
    "minicpmv4_6",
    {**_MINICPM_V, "processor_class": "MiniCPMV4_6Processor"},
)

# openbmb/MiniCPM-V-4.7-1B (transformers 5.24's MiniCPM-V 4.7 checkpoint): no public copy of
# its file was found. A port of the shipping checkpoint reads max_slice_nums 9, patch 14,
# mean/std 0.5 and "16x" (its literal fallbacks "from the shipping checkpoint"); llama.cpp's
# notes say its file is edited to get "4x", so it has 16x by default. The 4.6 file's other keys
# and the class names (4.7 has no image processor of its own; MiniCPMV4_7Processor) are
# assumed, not seen.
registry.register_builtin(
    "openbmb/MiniCPM-V-4.7-1B",
    "minicpmv4_7",
    {**_MINICPM_V, "processor_class": "MiniCPMV4_7Processor"},
)


# --------------------------------------------------------------------------------------------
# Video: MiniCPMV4_6VideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MiniCPMVideoPlan(VideoPlan):
    """A MiniCPM-V clip's plan: each frame's views' patch grids and its slice grid."""

    target_sizes: tuple[tuple[int, int], ...]
    grid: tuple[int, int]
    run: int


@dataclass(frozen=True)
class MiniCPMV4_6VideoConfig(VideoConfig):
    """Settings of ``MiniCPMV4_6VideoProcessor`` (MiniCPM-V 4.6 and 4.7): every sampled frame
    is one unit, processed as the image processor processes an image (a source view and,
    past ``scale_resolution`` squared, a grid of slices of a refine image, torchvision's
    resizes), laid along one NaViT strip for the whole call.

    ``num_video_tokens`` counts what MiniCPMV4_6Processor's ``replace_video_token`` (then
    ``_prepend_local_ids`` with ``use_image_id``) puts in the prompt for a clip, as the model's
    tokenizer splits it: ``<image_id>0</image_id>`` once (three tokens: the clip counted as
    its prompt's first video), then per frame ``<image>``, one video token per ``16``
    patches of its source view (``4`` in "4x" mode) and ``</image>``, then per slice
    ``<slice>``, its tokens and ``</slice>``, with a newline between slice rows.

    ``stack_frames`` above 1 (sub-second frames pasted into per-second composites, laid out
    by the clip's duration) is refused: :class:`~mmfast.errors.UnsupportedModelError`.
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
    max_slice_nums: int
    scale_resolution: int
    patch_size: int
    slice_mode: bool
    downsample_mode: str
    use_image_id: bool
    do_sample_frames: bool
    max_num_frames: int
    stack_frames: int

    # Every view of the call shares one strip.
    batch_layout: ClassVar[str] = "strip"
    # transformers makes these tensors itself and skips converting them (and the list).
    skip_tensor_conversion: ClassVar[tuple[str, ...]] = (
        "grids_videos",
        "num_patches_per_frame",
        "num_frames_per_video",
    )
    tensor_keys: ClassVar[frozenset[str]] = frozenset(skip_tensor_conversion)

    @property
    def image_config(self) -> MiniCPMV4_6Config:
        """The image processor with these settings (the torchvision class), whose per-image
        plan is a frame's."""
        return MiniCPMV4_6Config(
            model_id=self.model_id,
            image_processor_type="MiniCPMV4_6ImageProcessor",
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resample=self.resample,
            do_rescale=self.do_rescale,
            rescale_factor=self.rescale_factor,
            do_normalize=self.do_normalize,
            image_mean=self.image_mean,
            image_std=self.image_std,
            max_slice_nums=self.max_slice_nums,
            scale_resolution=self.scale_resolution,
            patch_size=self.patch_size,
            slice_mode=self.slice_mode,
            downsample_mode=self.downsample_mode,
            use_image_id=self.use_image_id,
            backend="torchvision",
        )

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``MiniCPMV4_6VideoProcessor.sample_frames`` (``fps`` and ``num_frames`` are
        not its arguments): a frame a second, or, for a clip longer than ``max_num_frames``
        seconds, every tenth of a second thinned to ``max_num_frames`` by ``np.linspace``."""
        if metadata.duration is None or metadata.fps is None:
            raise MmfastError(
                "video_fps: MiniCPMV4_6VideoProcessor samples by the clip's frame rate and "
                "duration; pass its rate or do_sample_frames=False"
            )
        total, avg_fps, duration = metadata.total_num_frames, metadata.fps, metadata.duration
        num_seconds = math.ceil(duration)
        if duration > self.max_num_frames:
            timestamps = [round(i * 0.1, 1) for i in range(int(duration / 0.1))]
            main = [min(int(ts * avg_fps), total - 1) for ts in timestamps]
            if len(main) > self.max_num_frames:
                picks = np.linspace(0, len(main) - 1, self.max_num_frames, dtype=int)
                main = [main[i] for i in picks]
            return main
        return [int(i * avg_fps) for i in range(num_seconds)]

    def frame_plan(self, height: int, width: int) -> MiniCPMPlan:
        """One frame's views: the image processor's, or without resizing the frame itself,
        cut to whole patches (``unfold`` leaves the rest)."""
        if self.do_resize:
            return self.image_config.plan(height, width)
        ps = self.patch_size
        if height < ps or width < ps:
            raise MmfastError(
                f"video size: frames of {height}x{width} hold no {ps}-pixel patch (do_resize "
                "is off; transformers' unfold fails on them)"
            )
        box = CropBox(0, 0, height // ps * ps, width // ps * ps)
        sizes = (box.height // ps, box.width // ps)
        tokens = self.image_config.count_tokens([sizes], None)
        return MiniCPMPlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=False,
            resize_size=(box.height, box.width),
            resample=self.resample,
            crop=None,
            canvas_size=None,
            **plan_constants(self.image_config),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType(
                {"pixel_values": (1, 3, ps, sizes[0] * box.width), "target_sizes": (1, 2)}
            ),
            num_image_tokens=tokens,
            views=(View(crop=box, out=Strip(ps, 0)),),
            target_sizes=(sizes,),
            grid=(0, 0),
        )

    def plan(self, frames: int, height: int, width: int) -> MiniCPMVideoPlan:
        """Every frame's views, frame after frame along the strip."""
        check_image_size(height, width)
        frame = self.frame_plan(height, width)
        per_frame = frame.views
        views = tuple(
            (
                (t,),
                replace(v, source=None if v.source is None else v.source + t * len(per_frame)),
            )
            for t in range(frames)
            for v in per_frame
        )
        run = frame.output_shapes["pixel_values"][3]
        # Per frame: the placeholder without the image id, which the clip's video gets once.
        id_tokens = IMAGE_ID_TOKENS * self.use_image_id
        tokens = id_tokens + frames * (frame.num_image_tokens - id_tokens)
        return MiniCPMVideoPlan(
            height=height,
            width=width,
            frames=frames,
            views=views,
            output_shapes=MappingProxyType(
                {self.output_key: (1, 3, self.patch_size, frames * run)}
            ),
            num_video_tokens=tokens,
            target_sizes=frame.target_sizes,
            grid=frame.grid,
            run=run,
        )

    def finish_batch(self, plans: Sequence[VideoPlan]) -> Sequence[VideoPlan]:
        """Every view's strip rows are the call's strip length apart."""
        stride = sum(p.output_shapes[self.output_key][3] for p in plans)
        strip = Strip(self.patch_size, stride)
        return [
            replace(
                plan,
                views=tuple(
                    (positions, replace(v, out=strip) if isinstance(v.out, Strip) else v)
                    for positions, v in plan.views
                ),
            )
            for plan in plans
        ]

    def batch_shape(self, plans: Sequence[VideoPlan]) -> tuple[tuple[int, ...], list[int]]:
        """(1, 3, patch_size, L), each clip after the previous one along the strip."""
        runs = [p.output_shapes[self.output_key][3] for p in plans]
        return (1, 3, self.patch_size, sum(runs)), [0, *itertools.accumulate(runs)][:-1]

    def batch_outputs(self, plans: Sequence[VideoPlan]) -> dict[str, Any]:
        """``target_sizes_videos`` (views, 2), ``grids_videos`` (frames, 2) ([0, 0] without
        slices) and ``num_patches_per_frame`` (frames,), int32; ``num_frames_per_video``, a
        list."""
        minicpm = cast("Sequence[MiniCPMVideoPlan]", plans)
        sizes = [list(ts) for p in minicpm for _ in range(p.frames) for ts in p.target_sizes]
        grids = [list(p.grid) for p in minicpm for _ in range(p.frames)]
        counts = [p.grid[0] * p.grid[1] + 1 for p in minicpm for _ in range(p.frames)]
        return {
            "target_sizes_videos": np.array(sizes, np.int32).reshape(-1, 2),
            "grids_videos": np.array(grids, np.int32).reshape(-1, 2),
            "num_patches_per_frame": np.array(counts, np.int32),
            "num_frames_per_video": [p.frames for p in minicpm],
        }


def minicpm_video_fields(cfg: Fields, downsample: str) -> dict[str, Any]:
    """The :class:`MiniCPMV4_6VideoConfig` fields (but the ids) as ``MiniCPMV4_6VideoProcessor``
    reads a config, given the class's default ``downsample_mode`` (MiniCPM-OCR's class differs
    in that alone): the image class's settings, plus a frame a second up to 128 frames, no
    stacking."""
    stack = cfg.positive_int("stack_frames", 1, MAX_TILES)
    if stack > 1:
        raise UnsupportedModelError(
            f"stack_frames: {stack} pastes each second's sub-frames into a composite laid out "
            "by the clip's duration, which mmfast's video plans do not see; only 1 (no "
            "stacking) is supported"
        )
    fields = minicpm_fields(cfg, downsample)
    fields["resample"] = cfg.torch_resample(fields["resample"])
    if not (fields["do_rescale"] or fields["do_normalize"]):
        raise cfg.error(
            "do_rescale, do_normalize",
            "one of them on (transformers' unfold refuses the uint8 frames)",
            False,
        )
    return {
        **fields,
        "do_sample_frames": cfg.flag("do_sample_frames", True),
        "max_num_frames": cfg.positive_int("max_num_frames", 128),
        "stack_frames": stack,
    }


def _build_video(model_id: str | None, cfg: Fields) -> MiniCPMV4_6VideoConfig:
    """Mirrors ``MiniCPMV4_6VideoProcessor``'s class defaults ("16x")."""
    return MiniCPMV4_6VideoConfig(
        model_id=model_id,
        video_processor_type="MiniCPMV4_6VideoProcessor",
        **minicpm_video_fields(cfg, "16x"),
    )


MINICPM_VIDEO_KWARGS = MINICPM_KWARGS | {"max_num_frames", "stack_frames"}
# Its _preprocess never crops or pads, resizes by its own rule (not size), and reads the
# metadata only to stack frames (refused).
MINICPM_VIDEO_IGNORES = frozenset(
    {
        "size",
        "default_to_square",
        "do_center_crop",
        "crop_size",
        "do_pad",
        "pad_size",
        "video_metadata",
    }
)
registry.register_video(
    registry.VideoFamily(
        processor_type="MiniCPMV4_6VideoProcessor",
        model_types=("minicpmv4_6", "minicpmv4_7"),
        build=_build_video,
        kwargs=MINICPM_VIDEO_KWARGS,
        ignores=MINICPM_VIDEO_IGNORES,
    )
)
