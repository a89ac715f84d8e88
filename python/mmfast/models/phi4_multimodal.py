"""Phi-4-multimodal: ``Phi4MultimodalImageProcessor`` (transformers 5.24; torchvision only).

Dynamic HD: the image is fitted without distortion into a canvas of ``size`` crops (as many
as its sides need, or the closest aspect ratio of at most ``dynamic_hd`` crops), resized with
torchvision's antialiased bilinear kernel (the class's ``resample`` is not used there),
padded with white at the right and bottom, normalised and cut into crops. The global view
comes first: the *normalised* canvas resized to one crop by torch's float32 kernel for
``resample`` (bicubic) without antialiasing, which mmfast computes in its core from the
canvas (:class:`~mmfast.models.base.Resized`). Images are padded to the batch's largest
number of crops (zeros), their attention masks with ones.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    BILINEAR,
    BOX,
    HALF,
    HAMMING,
    LANCZOS,
    RGB,
    ImagePlan,
    ModelConfig,
    Pad,
    Resize,
    Resized,
    View,
    check_image_size,
    fused_tables,
    plan_constants,
)
from mmfast.models.config import Fields, Source
from mmfast.models.geometry import CropBox

__all__ = ["Phi4MultimodalConfig", "dynamic_preprocess_geometry", "find_closest_aspect_ratio"]

# The largest dynamic_hd a config may give: the class enumerates every crop grid up to it, in
# about dynamic_hd ** 3 / 3 steps.
MAX_DYNAMIC_HD = 128
# Phi4MultimodalImageProcessor._preprocess's token count: 256 global tokens, a separator,
# one per kept sub-crop position (plus one per row) and 16 more.
GLOBAL_TOKENS = 256 + 1
TRAILING_TOKENS = 16


@functools.lru_cache(maxsize=16)
def target_ratios(max_num: int, min_num: int = 1) -> tuple[tuple[int, int], ...]:
    """``dynamic_preprocess``'s candidate grids (columns, rows), in its order: the set of
    every grid of ``min_num`` to ``max_num`` crops sorted by crop count (a stable sort of
    the set's iteration order, built the same way so that ties keep the same order)."""
    ratios = {
        (i, j)
        for n in range(min_num, max_num + 1)
        for i in range(1, n + 1)
        for j in range(1, n + 1)
        if i * j <= max_num and i * j >= min_num
    }
    return tuple(sorted(ratios, key=lambda x: x[0] * x[1]))


def find_closest_aspect_ratio(
    aspect_ratio: float,
    ratios: Sequence[tuple[int, int]],
    width: int,
    height: int,
    image_size: int,
) -> tuple[int, int]:
    """The grid (columns, rows) closest to ``aspect_ratio``; on a tie the later grid wins when
    the image's area exceeds half the grid's. Mirrors
    ``Phi4MultimodalImageProcessor.find_closest_aspect_ratio``."""
    best_ratio_diff = float("inf")
    best_ratio = (1, 1)
    area = width * height
    for ratio in ratios:
        target_aspect_ratio = ratio[0] / ratio[1]
        ratio_diff = abs(aspect_ratio - target_aspect_ratio)
        if ratio_diff < best_ratio_diff:
            best_ratio_diff = ratio_diff
            best_ratio = ratio
        elif (
            ratio_diff == best_ratio_diff
            and area > 0.5 * image_size * image_size * ratio[0] * ratio[1]
        ):
            best_ratio = ratio
    return best_ratio


@dataclass(frozen=True)
class HdGeometry:
    """One image's dynamic-HD layout: the grid (columns, rows), the resized size and the
    padded canvas (height, width), and the crop-level attention mask (rows, columns)."""

    grid: tuple[int, int]
    resized: tuple[int, int]
    canvas: tuple[int, int]
    mask: NDArray[np.float32]


def dynamic_preprocess_geometry(
    height: int, width: int, image_size: int, patch_size: int, mask_size: int, max_num: int
) -> HdGeometry:
    """Mirrors ``Phi4MultimodalImageProcessor.dynamic_preprocess`` without the pixels: the
    crop grid, the resize target (``int()`` truncation of the scaled side), the white padding
    and the attention mask, whose last ``floor(pad / patch_size)`` columns (rows) are zero
    when the padding reaches a patch. Raises :class:`MmfastError` where HF raises for an
    extreme aspect ratio."""
    w_crop_num = math.ceil(width / float(image_size))
    h_crop_num = math.ceil(height / float(image_size))
    if w_crop_num * h_crop_num > max_num:
        grid = find_closest_aspect_ratio(
            width / height, target_ratios(max_num), width, height, image_size
        )
    else:
        grid = (w_crop_num, h_crop_num)
    target_width, target_height = image_size * grid[0], image_size * grid[1]
    ratio_width = target_width / width
    ratio_height = target_height / height
    if ratio_width < ratio_height:
        new_size = (target_width, int(height * ratio_width))
        padding_width, padding_height = 0, target_height - int(height * ratio_width)
    else:
        new_size = (int(width * ratio_height), target_height)
        padding_width, padding_height = target_width - int(width * ratio_height), 0
    mask = np.ones((int(mask_size * grid[1]), int(mask_size * grid[0])), np.float32)
    if padding_width >= patch_size:
        mask[:, -math.floor(padding_width / patch_size) :] = 0
    if padding_height >= patch_size:
        mask[-math.floor(padding_height / patch_size) :, :] = 0
    if min(new_size[1], target_height) < 10 or min(new_size[0], target_width) < 10:
        raise MmfastError(
            f"image: the aspect ratio is very extreme {new_size} (Phi4MultimodalImageProcessor "
            "refuses resizing a side below 10 pixels)"
        )
    return HdGeometry(grid, (new_size[1], new_size[0]), (target_height, target_width), mask)


def crop_masks(mask: NDArray[np.float32], mask_size: int) -> NDArray[np.float32]:
    """The canvas mask cut into (crops, mask_size, mask_size), row-major, as ``_preprocess``
    reshapes it."""
    rows, cols = mask.shape[0] // mask_size, mask.shape[1] // mask_size
    tiles = mask.reshape(rows, mask_size, cols, mask_size).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(tiles.reshape(-1, mask_size, mask_size))


def count_tokens(mask: NDArray[np.float32], mask_size: int) -> int:
    """``_preprocess``'s ``num_img_tokens``: the crop masks subsampled every other patch,
    re-tiled into one (rows, columns) grid, counted, plus its first column, plus the fixed
    global and trailing tokens."""
    rows, cols = mask.shape[0] // mask_size, mask.shape[1] // mask_size
    half = mask_size // 2 + mask_size % 2
    down = crop_masks(mask, mask_size)[:, 0::2, 0::2]
    down = down.reshape(rows, cols, half, half).transpose(0, 2, 1, 3).reshape(rows * half, -1)
    return GLOBAL_TOKENS + int(down.sum()) + int(down[:, 0].sum()) + TRAILING_TOKENS


@dataclass(frozen=True)
class Phi4MultimodalConfig(ModelConfig):
    """Settings of ``Phi4MultimodalImageProcessor``.

    ``size`` is the square crop side; ``resample`` only filters the global view.
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    size: int
    resample: int
    patch_size: int
    dynamic_hd: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB

    # transformers' class is a torchvision one: either backend name matches it, and the
    # inputs are converted as its backend converts them.
    backend: str = field(default="torchvision", kw_only=True)

    batch_layout: ClassVar[str] = "pad_images"
    output_key: ClassVar[str] = "image_pixel_values"
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({"num_img_tokens": "ints"})

    def __post_init__(self) -> None:
        object.__setattr__(self, "backend", "torchvision")

    @property
    def mask_size(self) -> int:
        """Attention-mask cells per crop side: ``size // patch_size``."""
        return self.size // self.patch_size

    def geometry(self, height: int, width: int) -> HdGeometry:
        """The image's dynamic-HD layout (see :func:`dynamic_preprocess_geometry`)."""
        return dynamic_preprocess_geometry(
            height, width, self.size, self.patch_size, self.mask_size, self.dynamic_hd
        )

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Phi4MultimodalImageProcessor._preprocess`` for one image."""
        check_image_size(height, width)
        hd = self.geometry(height, width)
        s = self.size
        canvas = hd.canvas
        crops = tuple(
            CropBox(row * s, col * s, s, s)
            for row in range(canvas[0] // s)
            for col in range(canvas[1] // s)
        )
        constants = plan_constants(self)
        if constants["do_rescale"] or constants["do_normalize"]:
            # The normalised float canvas, resized by torch's float kernel.
            global_view = View(source=0, out=Resized((s, s), self.resample))
        else:
            # rescale_and_normalize hands the uint8 canvas back: torchvision's uint8 kernel.
            global_view = View(
                source=0,
                resize=Resize((s, s), self.resample, "torch-noaa"),
                out=(CropBox(0, 0, s, s),),
            )
        views = (
            # dynamic_preprocess: tvF.resize's defaults (bilinear, antialiased), white pad.
            View(
                resize=Resize(hd.resized, BILINEAR, "torch"),
                pad=Pad(canvas, fill=(255, 255, 255)),
            ),
            global_view,
            View(source=0, out=crops),
        )
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=True,
            resize_size=hd.resized,
            resample=BILINEAR,
            crop=None,
            canvas_size=canvas,
            **constants,
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType(
                {
                    "pixel_values": (1 + len(crops), 3, s, s),
                    "image_sizes": (2,),
                    "image_attention_mask": (1 + len(crops), self.mask_size, self.mask_size),
                }
            ),
            num_image_tokens=count_tokens(hd.mask, self.mask_size),
            views=views,
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """transformers' torchvision arithmetic, whichever backend name was asked for."""
        return fused_tables(plan)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_sizes`` (B, 2) int64 canvas (height, width); ``image_attention_mask``
        (B, max crops, mask_size, mask_size) float32, the global view's all ones, padded with
        ones; ``num_img_tokens`` (B,) int64."""
        m = self.mask_size
        geometries = [self.geometry(plan.height, plan.width) for plan in plans]
        crops = max(plan.output_shapes["pixel_values"][0] for plan in plans)
        masks = np.ones((len(plans), crops, m, m), np.float32)
        for i, hd in enumerate(geometries):
            tiles = crop_masks(hd.mask, m)
            masks[i, 1 : 1 + len(tiles)] = tiles
        return {
            "image_sizes": np.array([hd.canvas for hd in geometries], np.int64).reshape(-1, 2),
            "image_attention_mask": masks,
            "num_img_tokens": np.array([plan.num_image_tokens for plan in plans], np.int64),
        }


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> Phi4MultimodalConfig:
    """Mirrors ``Phi4MultimodalImageProcessor``'s class defaults and the checks its
    ``_preprocess`` makes (a square ``size``)."""
    size_value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"height": 448, "width": 448} if size_value is None else size_value,
        cfg.flag("default_to_square", True),
    )
    if size.keys() != {"height", "width"} or size["height"] != size["width"]:
        raise cfg.error("size", "a square {height, width} crop size", size)
    resample = cfg.resample(BICUBIC)
    if resample in (LANCZOS, BOX, HAMMING):
        # The global view resizes without antialiasing, which torchvision's LANCZOS refuses
        # and torch has no box or hamming mode for.
        raise cfg.error("resample", "0, 2 or 3 (the global view is not antialiased)", resample)
    norm = cfg.normalization(HALF, HALF)
    patch_size = cfg.positive_int("patch_size", 14)
    if patch_size > size["height"]:
        # The attention mask has size // patch_size cells a side, which HF divides by.
        raise cfg.error("patch_size", f"at most size ({size['height']})", patch_size)
    return Phi4MultimodalConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        size=size["height"],
        resample=resample,
        patch_size=patch_size,
        dynamic_hd=cfg.positive_int("dynamic_hd", 36, MAX_DYNAMIC_HD),
        **norm.fields(),
    )


registry.register(
    registry.Family(
        name="phi4_multimodal",
        processor_types=("Phi4MultimodalImageProcessor",),
        model_types={"phi4_multimodal": "Phi4MultimodalImageProcessor"},
        build=_build,
        kwargs=frozenset({"patch_size", "dynamic_hd"}),
        hf_torchvision=(
            "phi4_multimodal.image_processing_phi4_multimodal.Phi4MultimodalImageProcessor"
        ),
        processor_classes={"Phi4MultimodalProcessor": "phi4_multimodal"},
    )
)

# microsoft/Phi-4-multimodal-instruct: dynamic_hd 36 and the audio keys are the main
# branch's preprocessor_config.json, seen verbatim in two public fine-tuning scripts that
# rewrite it (that file names the checkpoint's remote-code Phi4MMImageProcessor). The
# transformers-format file (the hub's converted revision, which transformers' converter
# writes by loading that file into Phi4MultimodalProcessor and saving it) was not found: its
# type name, processor class and the other image keys are Phi4MultimodalImageProcessor's
# class defaults, which the converter saves, not a copy of the file.
registry.register_builtin(
    "microsoft/Phi-4-multimodal-instruct",
    "phi4_multimodal",
    {
        "audio_compression_rate": 8,
        "audio_downsample_rate": 1,
        "audio_feat_stride": 1,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "dynamic_hd": 36,
        "image_mean": list(HALF),
        "image_processor_type": "Phi4MultimodalImageProcessor",
        "image_std": list(HALF),
        "patch_size": 14,
        "processor_class": "Phi4MultimodalProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 448, "width": 448},
    },
)
