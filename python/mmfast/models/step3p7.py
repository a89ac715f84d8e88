"""Step-3.7-Flash: ``Step3p7ImageProcessor`` (transformers 5.24; a torchvision class only) and
``Step3p7Processor``'s token count.

Each image gives a global view and, past ``size`` or when elongated, local patches of a
sliding window whose side follows the aspect ratio (``_plan_patches``). A near-degenerate
image (short side under 32, aspect over 4) is first zero-padded at the bottom or right to a
square; one larger than ``max_image_size`` is scaled down. The global view is that image
resized to its (scaled) size, then to ``size`` x ``size``: a chain of two resizes. The local
patches are windows of the image resized to the window-snapped crop size, each resized to
``patch_size`` x ``patch_size`` (a window is partial along a side shorter than the window).
All resizes are torchvision's, antialiased, on uint8. Outputs: ``pixel_values`` (N, 3, size,
size), ``num_local_patches``, and, when any image has patches, ``pixel_values_local`` (their
patches concatenated) and ``patch_newline_masks`` (per image, padded with False to the batch's
most patches).
"""

from __future__ import annotations

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
    BOX,
    HAMMING,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RGB,
    TORCH_RESAMPLE,
    ImagePlan,
    ModelConfig,
    Pad,
    Resize,
    View,
    check_image_size,
    fused_tables,
    plan_constants,
)
from mmfast.models.config import MAX_INT, Fields, Source
from mmfast.models.geometry import CropBox

__all__ = ["PatchLayout", "Step3p7Config", "plan_patches"]


@dataclass(frozen=True)
class PatchLayout:
    """``Step3p7ImageProcessor._plan_patches``'s result: the global view's (height, width)
    before it is squared, the crop size the local patches are cut from, the window side (0:
    no local patches), the patch grid and whether the image is padded to a square first."""

    global_size: tuple[int, int]
    crop_size: tuple[int, int]
    window: int
    patches_x: int
    patches_y: int
    square_pad: bool


def is_extreme_aspect(width: int, height: int) -> bool:
    """``Step3p7ImageProcessor._is_extreme_aspect``: short side under 32, aspect over 4."""
    return min(width, height) < 32 and max(width / height, height / width) > 4


def plan_patches(
    width: int, height: int, image_size: int, patch_size: int, max_image_size: int
) -> PatchLayout:
    """Mirrors ``Step3p7ImageProcessor._plan_patches`` (its int() truncation of the scaled
    sides and its ``> 0.2 * window`` snap included)."""
    square_pad = is_extreme_aspect(width, height)
    if square_pad:
        width = height = max(width, height)
    if max(height, width) > max_image_size:
        scale = max_image_size / max(height, width)
        width, height = int(width * scale), int(height * scale)
    short_side, long_side = min(height, width), max(height, width)
    if short_side == 0:
        # transformers divides by it (ZeroDivisionError).
        raise MmfastError(
            f"image size: scaled to at most {max_image_size}, a side of this image rounds to 0"
        )
    if long_side <= image_size:
        window = short_side if long_side / short_side > 1.5 else 0
    elif long_side / short_side > 4:
        window = min(short_side, patch_size)
    else:
        window = patch_size
    if window == 0:
        return PatchLayout((height, width), (height, width), 0, 0, 0, square_pad)

    def snap(dim: int) -> int:
        if dim < window:
            return dim
        return window * (dim // window + (dim % window > 0.2 * window))

    crop_width, crop_height = snap(width), snap(height)
    return PatchLayout(
        (height, width),
        (crop_height, crop_width),
        window,
        max(1, crop_width // window),
        max(1, crop_height // window),
        square_pad,
    )


@dataclass(frozen=True)
class Step3p7Config(ModelConfig):
    """Settings of ``Step3p7ImageProcessor``, and the class attributes Step3p7Processor counts
    tokens with (``vision_patch_size``, ``downsampler_stride``; a checkpoint file may set
    them).

    ``num_image_tokens`` is what ``Step3p7Processor.replace_image_token`` inserts: per local
    patch ``<patch_start>``, ``(patch_size // stride) ** 2`` ``<im_patch>`` and
    ``<patch_end>``, a ``<patch_newline>`` after each row but the last, then ``<im_start>``,
    ``(size // stride) ** 2`` ``<im_patch>`` and ``<im_end>`` (stride: ``vision_patch_size *
    downsampler_stride``).
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    size: Mapping[str, int]
    patch_size: int
    max_image_size: int
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    vision_patch_size: int
    downsampler_stride: int

    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "stack"
    pixel_keys: ClassVar[tuple[str, ...]] = ("pixel_values", "pixel_values_local")
    output_order: ClassVar[tuple[str, ...]] = (
        "pixel_values",
        "num_local_patches",
        "pixel_values_local",
        "patch_newline_masks",
    )
    counted_outputs: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_values_local": "num_local_patches", "patch_newline_masks": "num_local_patches"}
    )
    # _preprocess sets them on its BatchFeature after converting it: torch tensors always.
    tensor_keys: ClassVar[frozenset[str]] = frozenset({"pixel_values_local"})
    # Its pixel outputs are tensors even with return_tensors=None (stacked by the class).
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({"num_local_patches": "ints"})

    def image_size(self) -> int:
        """``size.height``: the global view's side (the class reads no width)."""
        side = self.size.get("height")
        if side is None:
            raise MmfastError(
                f"size: expected a height (the global view's side), got {dict(self.size)}"
            )
        return side

    def resize(self, size: tuple[int, int]) -> Resize:
        """``TorchvisionBackend.resize`` (antialiased) to ``size``; this class has no PIL twin,
        so both backends name it."""
        return Resize(size, self.resample, "torch")

    def patch_layout(self, height: int, width: int) -> PatchLayout:
        return plan_patches(width, height, self.image_size(), self.patch_size, self.max_image_size)

    def tokens(self, layout: PatchLayout) -> int:
        """``Step3p7Processor.replace_image_token``'s tokens for an image of ``layout``."""
        stride = self.vision_patch_size * self.downsampler_stride
        image_features = (self.image_size() // stride) ** 2
        patch_features = (self.patch_size // stride) ** 2
        patches = layout.patches_x * layout.patches_y
        newlines = layout.patches_y - 1 if patches else 0
        return patches * (patch_features + 2) + newlines + image_features + 2

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Step3p7ImageProcessor._get_image_patches`` and the per-patch resize of
        ``_preprocess`` for one image."""
        check_image_size(height, width)
        layout = self.patch_layout(height, width)
        side = self.image_size()
        views: list[View] = []
        source: int | None = None
        size = (height, width)
        if layout.square_pad:
            # TorchvisionBackend.pad: zeros at the bottom and right.
            square = max(height, width)
            views.append(View(pad=Pad((square, square))))
            source, size = 0, (square, square)
        global_source = source
        if layout.global_size != size:
            views.append(View(source=source, resize=self.resize(layout.global_size)))
            global_source = len(views) - 1
        views.append(
            View(
                source=global_source,
                resize=self.resize((side, side)),
                out=(CropBox(0, 0, side, side),),
            )
        )
        patches = 0
        if layout.window:
            crop_height, crop_width = layout.crop_size
            window, p = layout.window, self.patch_size
            boxes = [
                CropBox(top, left, min(window, crop_height - top), min(window, crop_width - left))
                for top in range(0, crop_height, window)
                for left in range(0, crop_width, window)
            ]
            patches = len(boxes)
            resize = self.resize(layout.crop_size) if layout.crop_size != size else None
            if window == p and min(layout.crop_size) >= window:
                # Every patch is already patch_size square (its resize a no-op): the resized
                # image's windows, written straight out.
                views.append(View(source=source, resize=resize, out=tuple(boxes), output=1))
            else:
                if resize is not None:
                    views.append(View(source=source, resize=resize))
                    source = len(views) - 1
                views += [
                    View(
                        source=source,
                        crop=box,
                        resize=self.resize((p, p)),
                        out=(CropBox(0, 0, p, p),),
                        output=1,
                    )
                    for box in boxes
                ]
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=True,
            resize_size=(side, side),
            resample=self.resample,
            crop=None,
            canvas_size=None,
            **{**plan_constants(self), "backend": "torchvision"},
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType(
                {
                    "pixel_values": (3, side, side),
                    "pixel_values_local": (patches, 3, self.patch_size, self.patch_size),
                    "num_local_patches": (),
                }
            ),
            num_image_tokens=self.tokens(layout),
            views=tuple(views),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """``rescale_and_normalize`` of the torchvision backend."""
        return fused_tables(plan)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``num_local_patches`` (int64, one per image) and, when any image has patches,
        ``patch_newline_masks``: per image, True after the last patch of each row but the
        last, padded with False to the batch's most patches (a list of lists, as HF leaves
        it)."""
        layouts = [self.patch_layout(plan.height, plan.width) for plan in plans]
        counts = [layout.patches_x * layout.patches_y for layout in layouts]
        outputs: dict[str, Any] = {"num_local_patches": np.array(counts, np.int64)}
        most = max(counts, default=0)
        if most:
            outputs["patch_newline_masks"] = [
                [
                    col == layout.patches_x - 1 and row < layout.patches_y - 1
                    for row in range(layout.patches_y)
                    for col in range(layout.patches_x)
                ]
                + [False] * (most - count)
                for layout, count in zip(layouts, counts, strict=True)
            ]
        return outputs


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Step3p7Config:
    """Mirrors ``Step3p7ImageProcessor``'s class defaults (``size`` through ``get_size_dict``
    with ints as squares)."""
    value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"height": 728, "width": 728} if value is None else value,
        cfg.flag("default_to_square", True),
    )
    norm = cfg.normalization(OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)
    # _plan_patches reads self.max_image_size: the instance's, whatever a call passes.
    given = cfg.raw(registry.INSTANCE_KEY)
    instance = cfg if given is None else cfg.nested("the instance", given)
    # A valid ImagesKwargs setting the class never reads (it always resizes): checked only.
    cfg.flag("do_resize", True)
    resample = cfg.resample(BILINEAR)
    if resample in (BOX, HAMMING):
        raise cfg.error("resample", TORCH_RESAMPLE, resample)
    return Step3p7Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        size=MappingProxyType(size),
        patch_size=cfg.positive_int("patch_size", 504),
        max_image_size=instance.positive_int("max_image_size", 3024),
        resample=resample,
        **norm.fields(),
        vision_patch_size=cfg.positive_int("vision_patch_size", 14, MAX_INT),
        downsampler_stride=cfg.positive_int("downsampler_stride", 4, MAX_INT),
    )


registry.register(
    registry.Family(
        name="step3p7",
        processor_types=("Step3p7ImageProcessor",),
        model_types={"step3p7": "Step3p7ImageProcessor"},
        build=_build,
        kwargs=frozenset({"patch_size", "max_image_size"}),
        # Its _preprocess always resizes and never crops or pads to a size.
        call_settings=registry.keep_instance("max_image_size"),
        instance_attributes=("max_image_size",),
        ignored_kwargs=frozenset(
            {"do_resize", "do_center_crop", "crop_size", "do_pad", "pad_size"}
        ),
        processor_classes={"Step3p7Processor": "step3p7"},
        hf_torchvision="step3p7.image_processing_step3p7.Step3p7ImageProcessor",
    )
)

# stepfun-ai/Step-3.7-Flash: the class defaults (728 global view, 504 patches, 3024 cap,
# bilinear, CLIP mean/std), which the upstream processor's constants agree with (as ported by
# a public MLX loader); the checkpoint's own file not seen.
registry.register_builtin(
    "stepfun-ai/Step-3.7-Flash",
    "step3p7",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "Step3p7ImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "max_image_size": 3024,
        "patch_size": 504,
        "processor_class": "Step3p7Processor",
        "resample": BILINEAR,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 728, "width": 728},
    },
)
