"""SigLIP 2 NaFlex: ``Siglip2ImageProcessor`` (transformers 5.24).

An image is resized, keeping its aspect ratio, to sides that are multiples of ``patch_size``
and give at most ``max_num_patches`` patches (a binary search over the scale), rescaled,
normalised with mean/std 0.5 and cut into channel-last patch rows (y, x, c), zero-padded to
``max_num_patches`` rows; ``pixel_attention_mask`` marks the image's rows and
``spatial_shapes`` gives its patch grid. ``Siglip2Processor`` passes ``max_num_patches=256``
and ``patch_size=16`` on every call, whatever the checkpoint's file says. The class has no
``do_convert_rgb`` default, so it converts nothing unless the config asks. Fixed-resolution
SigLIP 2 checkpoints name ``SiglipImageProcessor`` instead (:mod:`mmfast.models.siglip`).

The channel-last rows and their padding are shared with Gemma 4 and LFM2-VL, whose classes
copy this module's HF functions.
"""

from __future__ import annotations

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
    BILINEAR,
    HALF,
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
    RGB,
    HwcPatches,
    ImagePlan,
    ModelConfig,
    View,
    check_image_size,
    identity_table,
    plan_constants,
    resizer,
)
from mmfast.models.config import Fields, Source
from mmfast.models.geometry import CropBox

__all__ = [
    "Siglip2Config",
    "check_patch_multiple",
    "get_image_size_for_max_num_patches",
    "hwc_rows",
    "padded_length",
    "written_rows_mask",
]


def get_image_size_for_max_num_patches(
    image_height: int, image_width: int, patch_size: int, max_num_patches: int, eps: float = 1e-5
) -> tuple[int, int]:
    """Mirrors ``image_processing_siglip2.get_image_size_for_max_num_patches``: a binary search
    for the largest scale (float64, down to an interval of ``eps``) whose sides, rounded up to
    multiples of ``patch_size`` (at least one patch), give at most ``max_num_patches`` patches."""

    def get_scaled_image_size(scale: float, size: int) -> int:
        scaled_size = size * scale
        scaled_size = math.ceil(scaled_size / patch_size) * patch_size
        scaled_size = max(patch_size, scaled_size)
        return int(scaled_size)

    scale_min, scale_max = eps / 10, 100.0
    while (scale_max - scale_min) >= eps:
        scale = (scale_min + scale_max) / 2
        target_height = get_scaled_image_size(scale, image_height)
        target_width = get_scaled_image_size(scale, image_width)
        num_patches = (target_height / patch_size) * (target_width / patch_size)
        if num_patches <= max_num_patches:
            scale_min = scale
        else:
            scale_max = scale
    scale = scale_min
    return get_scaled_image_size(scale, image_height), get_scaled_image_size(scale, image_width)


def check_patch_multiple(height: int, width: int, patch_size: int) -> None:
    """``convert_image_to_patches`` reshapes the image into whole patches: a side that is not a
    multiple of ``patch_size`` (with ``do_resize`` off) fails there in HF."""
    if height % patch_size or width % patch_size:
        raise MmfastError(
            f"image size: both sides must be multiples of patch_size {patch_size} to be cut "
            f"into patches (do_resize is off), got {height}x{width}"
        )


def hwc_rows(size: tuple[int, int], patch_size: int) -> HwcPatches:
    """``convert_image_to_patches`` of a whole (height, width) image: its ``patch_size``
    squares in raster order, each row (y, x, c)."""
    return HwcPatches(patch_size, (CropBox(0, 0, *size),))


def padded_length(rows: int, length: int) -> int:
    """``pad_along_first_dim``: ``rows`` zero-padded to ``length``, or left as they are when
    longer (HF's later stack then needs every image of the batch to agree)."""
    return max(rows, length)


def written_rows_mask(plans: Sequence[ImagePlan], written: Sequence[int]) -> NDArray[np.bool_]:
    """(images, rows) True on each image's first ``written`` rows: a stacked batch of rows
    zero-padded per image."""
    mask = np.zeros((len(plans), plans[0].output_shapes["pixel_values"][0]), bool)
    for i, n in enumerate(written):
        mask[i, :n] = True
    return mask


@dataclass(frozen=True)
class Siglip2Config(ModelConfig):
    """Settings of ``Siglip2ImageProcessor`` (after the processor's call kwargs).

    ``num_image_tokens`` is 0: the SigLIP 2 processor inserts no image tokens.
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
    max_num_patches: int

    # Which transformers backend the plan matches: "pil" or "torchvision".
    backend: str = field(default="pil", kw_only=True)

    # Each image's rows zero-padded to max_num_patches (a fixed length), stacked.
    batch_layout: ClassVar[str] = "stack"
    channels_last: ClassVar[bool] = True
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_values": "rows", "pixel_attention_mask": "rows", "spatial_shapes": "tuples"}
    )

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Siglip2ImageProcessorPil._preprocess`` for one image: resize, rescale,
        normalise, patch rows, written at the top of its zero-padded rows."""
        check_image_size(height, width)
        p = self.patch_size
        if self.do_resize:
            size = get_image_size_for_max_num_patches(height, width, p, self.max_num_patches)
        else:
            check_patch_multiple(height, width, p)
            size = (height, width)
        grid = (size[0] // p, size[1] // p)
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
                    "pixel_values": (
                        padded_length(grid[0] * grid[1], self.max_num_patches),
                        3 * p * p,
                    ),
                    "pixel_attention_mask": (self.max_num_patches,),
                    "spatial_shapes": (2,),
                }
            ),
            num_image_tokens=0,
            views=(
                View(
                    resize=resizer(self.backend, size, self.resample) if self.do_resize else None,
                    out=hwc_rows(size, p),
                ),
            ),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """HF's arithmetic; with rescale and normalise off both classes pad the uint8 rows."""
        if plan.do_rescale or plan.do_normalize:
            return super().tables(plan)
        return identity_table()

    def rows_mask(
        self, shape: tuple[int, ...], offsets: Sequence[int], plans: Sequence[ImagePlan]
    ) -> NDArray[np.bool_] | None:
        """Each image's patch rows; the zero padding after them is False."""
        return written_rows_mask(plans, [self.patches(p) for p in plans])

    def patches(self, plan: ImagePlan) -> int:
        """The patch rows an image writes."""
        return (plan.resize_size[0] // self.patch_size) * (plan.resize_size[1] // self.patch_size)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``pixel_attention_mask`` (images, max_num_patches) int32, 1 on each image row (all
        1 for an image with more rows); ``spatial_shapes`` (images, 2) int64, the patch grid."""
        mask = np.ones((len(plans), self.max_num_patches), np.int32)
        shapes = np.zeros((len(plans), 2), np.int64)
        for i, plan in enumerate(plans):
            mask[i, self.patches(plan) :] = 0
            shapes[i] = (
                plan.resize_size[0] // self.patch_size,
                plan.resize_size[1] // self.patch_size,
            )
        return {"pixel_attention_mask": mask, "spatial_shapes": shapes}


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Siglip2Config:
    """Mirrors ``Siglip2ImageProcessorPil``'s class defaults: bilinear, mean/std 0.5, patch 16,
    256 patches, and no ``do_convert_rgb`` (None: nothing is converted)."""
    size = cfg.raw("size")
    if size is not None:  # validated by _standardize_kwargs, then unused
        cfg.size_dict("size", size, cfg.flag("default_to_square", True))
    norm = cfg.normalization(IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD)
    return Siglip2Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.flag("do_convert_rgb", False),
        do_resize=cfg.flag("do_resize", True),
        resample=cfg.resample(BILINEAR),
        **norm.fields(),
        patch_size=cfg.positive_int("patch_size", 16),
        max_num_patches=cfg.positive_int("max_num_patches", 256),
    )


registry.register(
    registry.Family(
        name="siglip2",
        processor_types=("Siglip2ImageProcessor",),
        model_types={"siglip2": "Siglip2ImageProcessor"},
        build=_build,
        kwargs=frozenset({"patch_size", "max_num_patches"}),
        processor_classes={"Siglip2Processor": "siglip2"},
        # Siglip2Processor.images_kwargs: the NaFlex budget of every call.
        processor_defaults={"Siglip2Processor": {"max_num_patches": 256, "patch_size": 16}},
        hf_pil="siglip2.image_processing_pil_siglip2.Siglip2ImageProcessorPil",
        hf_torchvision="siglip2.image_processing_siglip2.Siglip2ImageProcessor",
    )
)

# google/siglip2-base-patch16-naflex: transformers' conversion script for the SigLIP 2 release
# (convert_siglip2_to_hf.py) builds Siglip2ImageProcessorFast(patch_size=16,
# max_num_patches=256, bilinear, rescale 1/255, mean/std 0.5) inside a Siglip2Processor and saves
# them, so the file names the fast class and Siglip2Processor with "do_convert_rgb": null and
# "default_to_square": true; the dump's other null keys (crop_size, data_format, device, ...)
# read as the class defaults and are left out. The hub file itself was not seen.
registry.register_builtin(
    "google/siglip2-base-patch16-naflex",
    "siglip2",
    {
        "default_to_square": True,
        "do_convert_rgb": None,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_processor_type": "Siglip2ImageProcessorFast",
        "image_std": list(HALF),
        "max_num_patches": 256,
        "patch_size": 16,
        "processor_class": "Siglip2Processor",
        "resample": BILINEAR,
        "rescale_factor": 0.00392156862745098,
    },
)
