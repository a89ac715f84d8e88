"""transformers' default image pipeline, ``PilBackend._preprocess``, shared by several families.

Resize by a size dict (shortest edge, shortest/longest edge, max height/width or a fixed
height/width), optionally centre-crop, rescale, normalise; one CHW tensor per image, stacked.
CLIP (LLaVA-1.5) and SigLIP (PaliGemma) run exactly this; Gemma 3 adds pan-and-scan crops. Each
family subclasses :class:`PilBackendConfig` with its class defaults and its token count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models.base import (
    RGB,
    ImagePlan,
    ModelConfig,
    View,
    check_image_size,
    identity_table,
    plan_constants,
    resizer,
)
from mmfast.models.config import Fields
from mmfast.models.geometry import (
    CropBox,
    center_crop_box,
    get_image_size_for_max_height_width,
    get_resize_output_image_size,
    get_size_with_aspect_ratio,
)

__all__ = ["PilBackendConfig", "pil_backend_fields", "resize_output_size"]


def resize_output_size(height: int, width: int, size: Mapping[str, int]) -> tuple[int, int]:
    """Target size of ``PilBackend.resize`` for a resolved size dict (its key dispatch).

    Raises :class:`MmfastError` when a side would round to 0, where PIL would fail.
    """
    if size.get("shortest_edge") and size.get("longest_edge"):
        out = get_size_with_aspect_ratio(height, width, size["shortest_edge"], size["longest_edge"])
    elif size.get("shortest_edge"):
        out = get_resize_output_image_size(height, width, size["shortest_edge"])
    elif size.get("max_height") and size.get("max_width"):
        out = get_image_size_for_max_height_width(
            height, width, size["max_height"], size["max_width"]
        )
    else:  # {"height", "width"}: pil_backend_fields rejects every other key set.
        out = (size["height"], size["width"])
    if min(out) < 1:
        raise MmfastError(
            f"image size: {height}x{width} resizes to {out[0]}x{out[1]} under size={dict(size)}"
        )
    return out


def pil_backend_fields(
    cfg: Fields,
    *,
    size: int | Mapping[str, int],
    default_to_square: bool,
    resample: int,
    mean: RGB,
    std: RGB,
    do_center_crop: bool = False,
    crop_size: int | Mapping[str, int] | None = 224,
    pads: bool = False,
    reads_default_to_square: bool = True,
) -> dict[str, Any]:
    """The :class:`PilBackendConfig` fields from a config, given the class defaults.

    Mirrors ``PilBackend.__init__`` and ``BaseImageProcessor._standardize_kwargs``: sizes go
    through ``get_size_dict`` (an int is a square or a shortest edge per ``default_to_square``,
    a crop size always a square). ``pads``: the family reads ``do_pad`` itself (a batch
    padding of its own); otherwise ``do_pad`` must be off. A ``crop_size`` of None (the class
    has none) reads as (0, 0). ``reads_default_to_square``: whether the class takes the
    config's ``default_to_square`` (an old-style class such as Video-LLaVA's fixes its own).
    """
    size_value = cfg.raw("size")
    if reads_default_to_square:
        default_to_square = cfg.flag("default_to_square", default_to_square)
    resolved = cfg.size_dict("size", size if size_value is None else size_value, default_to_square)
    do_resize = cfg.flag("do_resize", True)
    if do_resize and not (
        "shortest_edge" in resolved
        or {"max_height", "max_width"} <= resolved.keys()
        or {"height", "width"} <= resolved.keys()
    ):
        raise cfg.error("size", "shortest_edge, max_height/max_width or height/width", resolved)
    crop_value = cfg.raw("crop_size")
    if crop_value is None:
        crop_value = crop_size
    crop = {} if crop_value is None else cfg.size_dict("crop_size", crop_value, True)
    center_crop = cfg.flag("do_center_crop", do_center_crop)
    if center_crop and not {"height", "width"} <= crop.keys():
        raise cfg.error("crop_size", "height and width", crop)
    if not pads and cfg.flag("do_pad", False):
        # PilBackend._preprocess pads to pad_size, which mmfast does not do.
        raise cfg.error("do_pad", "false (padding to pad_size is not supported)", True)
    norm = cfg.normalization(mean, std)
    return {
        "do_convert_rgb": cfg.convert_rgb(),
        "do_resize": do_resize,
        "size": MappingProxyType(resolved),
        "resample": cfg.resample(resample),
        "do_center_crop": center_crop,
        "crop_size": (crop.get("height", 0), crop.get("width", 0)),
        **norm.fields(),
    }


@dataclass(frozen=True)
class PilBackendConfig(ModelConfig):
    """Settings of a ``PilBackend`` processor that keeps its default ``_preprocess``.

    ``size`` is HF's resolved size dict (one of ``{"shortest_edge"}``,
    ``{"shortest_edge", "longest_edge"}``, ``{"max_height", "max_width"}``,
    ``{"height", "width"}``); ``crop_size`` is (height, width). Subclasses add the fields
    their token count needs.
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    size: Mapping[str, int]
    resample: int
    do_center_crop: bool
    crop_size: tuple[int, int]
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB

    # Which transformers backend the plan matches: "pil" or "torchvision".
    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "stack"
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({"pixel_values": "rows"})

    def resize_size(self, height: int, width: int) -> tuple[int, int]:
        """Target size; mirrors the size-dict dispatch in ``PilBackend.resize``."""
        return resize_output_size(height, width, self.size)

    def count_tokens(self, height: int, width: int) -> int:
        """Tokens the model's processor inserts for an image processed to (height, width)."""
        raise NotImplementedError

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``PilBackend._preprocess``: resize, centre crop, rescale, normalise."""
        check_image_size(height, width)
        resized = self.resize_size(height, width) if self.do_resize else (height, width)
        crop = (
            center_crop_box(*resized, *self.crop_size, self.backend)
            if self.do_center_crop
            else None
        )
        out_h, out_w = (crop.height, crop.width) if crop is not None else resized
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=resized,
            resample=self.resample,
            crop=crop,
            canvas_size=None,
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType({"pixel_values": (3, out_h, out_w)}),
            num_image_tokens=self.count_tokens(out_h, out_w),
            views=(
                View(
                    resize=resizer(self.backend, resized, self.resample)
                    if self.do_resize
                    else None,
                    out=(crop if crop is not None else CropBox(0, 0, *resized),),
                ),
            ),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """HF's float32 arithmetic; with rescale and normalise both off, both of HF's
        backends hand back the resized, cropped uint8 pixels untouched."""
        if plan.do_rescale or plan.do_normalize:
            return super().tables(plan)
        return identity_table()
