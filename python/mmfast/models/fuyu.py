"""Fuyu: ``FuyuImageProcessor`` / ``FuyuImageProcessorPil`` (transformers 5.24).

An image larger than ``size`` (1080x1920) is scaled down to fit it (aspect kept, sides
truncated with ``int()``, bilinear), never up; it is then padded at the bottom and right to
``size`` with ``padding_value`` *before* normalising (the uint8 image is padded: 1.0 becomes
1), rescaled and normalised with mean and std 0.5. The outputs are ``images`` (samples,
images, 3, H, W) and, for each sample's first image, ``image_unpadded_heights`` /
``image_unpadded_widths`` (its size after the resize), ``image_scale_factors`` (resized
height over original height) and ``image_sizes`` (its original size).

The class has no ``do_convert_rgb``: a greyscale or RGBA image keeps its 1 or 4 channels in
transformers, which mmfast does not give; such inputs are refused (``mmfast.hf`` runs
transformers' code for them). A ``padding_mode`` other than "constant" is refused too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from mmfast.errors import MmfastError, UnsupportedModelError
from mmfast.models import registry
from mmfast.models.base import (
    BILINEAR,
    HALF,
    RGB,
    ImagePlan,
    ModelConfig,
    Pad,
    View,
    check_image_size,
    plan_constants,
    resizer,
)
from mmfast.models.config import Fields, Source
from mmfast.models.geometry import CropBox

__all__ = ["FuyuConfig", "fuyu_resize_size"]


def fuyu_resize_size(height: int, width: int, target: tuple[int, int]) -> tuple[int, int]:
    """Mirrors ``FuyuImageProcessorPil.resize``: unchanged when it fits in ``target``, else
    scaled by ``min(target_h / h, target_w / w)`` with each side truncated."""
    if width <= target[1] and height <= target[0]:
        return height, width
    scale = min(target[0] / height, target[1] / width)
    return int(height * scale), int(width * scale)


def pad_fill(value: float, backend: str) -> int:
    """The uint8 the padding holds: the PIL class's ``np.pad`` casts ``padding_value`` into the
    uint8 image (truncated toward zero, wrapping modulo 256: -1.0 gives 255); the torchvision
    class's ``tvF.pad`` truncates values from 0 to 255.99 and raises for the rest."""
    if backend == "pil":
        if abs(value) >= 2**31:
            raise MmfastError(
                f"padding_value: expected a number whose integer part fits in int32 (numpy's cast "
                f"of a larger one into uint8 is undefined), got {value!r}"
            )
        return int(value) % 256
    if not 0 <= value < 256:
        raise MmfastError(
            f"padding_value: expected a value from 0 to below 256 with backend 'torchvision' "
            f"(transformers raises: it cannot be converted to uint8), got {value!r}"
        )
    return int(value)


@dataclass(frozen=True)
class FuyuConfig(ModelConfig):
    """Settings of ``FuyuImageProcessor``, sizes as (height, width).

    ``num_image_tokens`` is what ``FuyuProcessor`` inserts (as its
    ``_get_num_multimodal_tokens`` counts): one ``|SPEAKER|`` per ``patch_size`` square of the
    window it patches (the unpadded size rounded up to whole patches, at most the padded
    image) and a ``|NEWLINE|`` after each row of them; it also adds a ``<s>`` after them.
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    size: tuple[int, int]
    resample: int
    do_pad: bool
    padding_value: float
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    patch_size: tuple[int, int]

    # Which transformers backend the plan matches: "pil" or "torchvision".
    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "stack"
    output_key: ClassVar[str] = "images"
    # transformers builds image_scale_factors from Python floats: float64 with
    # return_tensors="np", float32 with "pt".
    tensor_dtypes: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"image_scale_factors": "float32"}
    )
    skip_tensor_conversion: ClassVar[tuple[str, ...]] = ("overflowing_values",)

    @property
    def unbatched(self) -> Mapping[str, str]:  # type: ignore[override]
        """With ``return_tensors=None``: the PIL class's images as lists of each sample's
        arrays (the torchvision class stacks them), the sizes and factors as nested lists,
        ``image_sizes`` as shapes."""
        kinds = {
            "image_unpadded_heights": "lists",
            "image_unpadded_widths": "lists",
            "image_scale_factors": "lists",
            "image_sizes": "sizes",
        }
        if self.backend == "pil":
            kinds = {"images": "samples", **kinds}
        return MappingProxyType(kinds)

    @property
    def raw_pixels(self) -> bool:  # type: ignore[override]
        """The padding is a uint8 fill, normalised like the image: any dtype works."""
        return True

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """The image's size after ``do_resize``."""
        if not self.do_resize:
            return height, width
        out = fuyu_resize_size(height, width, self.size)
        if min(out) < 1:
            raise MmfastError(
                f"image size: {height}x{width} resizes to {out[0]}x{out[1]} under "
                f"size={self.size[0]}x{self.size[1]} (transformers fails too)"
            )
        return out

    def padded_size(self, resized: tuple[int, int]) -> tuple[int, int] | None:
        """The canvas ``pad`` makes of a ``resized`` image, or None when it is not padded;
        :class:`MmfastError` where transformers refuses to pad (a negative padding)."""
        if not self.do_pad:
            return None
        pad_h, pad_w = self.size[0] - resized[0], self.size[1] - resized[1]
        if self.backend == "pil" and pad_h <= 0 and pad_w <= 0:
            return None  # the PIL class pads only when a side grows
        if pad_h < 0 or pad_w < 0:
            raise MmfastError(
                f"image size: a {resized[0]}x{resized[1]} image is larger than size "
                f"{self.size[0]}x{self.size[1]}, which transformers refuses to pad"
            )
        return None if (pad_h, pad_w) == (0, 0) else self.size

    def count_tokens(self, height: int, width: int) -> int:
        """``FuyuProcessor``'s ``|SPEAKER|`` and ``|NEWLINE|`` tokens for the image."""
        resized = self.resized_size(height, width)
        padded = self.padded_size(resized) or resized
        p_h, p_w = self.patch_size
        new_h = min(padded[0], math.ceil(resized[0] / p_h) * p_h)
        new_w = min(padded[1], math.ceil(resized[1] / p_w) * p_w)
        if new_h % p_h or new_w % p_w:
            raise MmfastError(
                f"image size: FuyuProcessor fails on a {new_h}x{new_w} window with "
                f"{p_h}x{p_w} patches (not whole patches; transformers raises ValueError)"
            )
        return (new_h // p_h) * (new_w // p_w + 1)

    def num_image_tokens(self, height: int, width: int) -> int:
        check_image_size(height, width)
        return self.count_tokens(height, width)

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``FuyuImageProcessorPil._preprocess`` for one image: resize, pad the uint8
        image with ``padding_value``, rescale and normalise."""
        check_image_size(height, width)
        resized = self.resized_size(height, width)
        padded = self.padded_size(resized)
        out_size = padded or resized
        pad = None
        if padded is not None:
            fill = pad_fill(self.padding_value, self.backend)
            pad = Pad(padded, 0, 0, (fill, fill, fill))
        resize = (
            resizer(self.backend, resized, self.resample) if resized != (height, width) else None
        )
        try:
            tokens = self.count_tokens(height, width)
        except MmfastError:
            tokens = 0  # the image processor runs; only the processor's count fails
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=resized,
            resample=self.resample,
            crop=None,
            canvas_size=out_size,
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType({"pixel_values": (3, *out_size)}),
            num_image_tokens=tokens,
            views=(View(resize=resize, pad=pad, out=(CropBox(0, 0, *out_size),)),),
        )

    def tables(self, plan: ImagePlan) -> Any:
        """HF's arithmetic; with rescale and normalise both off, both classes keep the
        padded uint8 pixels."""
        from mmfast.models.base import identity_table

        if plan.do_rescale or plan.do_normalize:
            return super().tables(plan)
        return identity_table()

    def batch_shape(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> tuple[tuple[int, ...], list[int]]:
        """(samples, images per sample, 3, H, W): transformers stacks each sample's images,
        then the samples, which needs them all of one size and as many in each sample."""
        shapes = {plan.output_shapes["pixel_values"] for plan in plans}
        if len(shapes) > 1 or len(set(sample_sizes)) > 1:
            raise MmfastError(
                "images: transformers' Fuyu class stacks the images of each sample, then the "
                "samples: they must all come out of one size and the samples hold as many "
                f"images each (got sizes {sorted(shapes)} and sample sizes {list(sample_sizes)})"
            )
        shape = shapes.pop()
        size = math.prod(shape)
        return (len(sample_sizes), sample_sizes[0], *shape), [i * size for i in range(len(plans))]

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """The first image of each sample's resized height and width, scale factor and
        original size."""
        starts = np.cumsum([0, *sample_sizes[:-1]]).tolist()
        firsts = [plans[s] for s, n in zip(starts, sample_sizes, strict=True) if n]
        return {
            "image_unpadded_heights": np.array(
                [[p.resize_size[0]] for p in firsts], np.int64
            ).reshape(-1, 1),
            "image_unpadded_widths": np.array(
                [[p.resize_size[1]] for p in firsts], np.int64
            ).reshape(-1, 1),
            "image_scale_factors": np.array(
                [[p.resize_size[0] / p.height] for p in firsts], np.float64
            ).reshape(-1, 1),
            "image_sizes": np.array([[p.height, p.width] for p in firsts], np.int64).reshape(-1, 2),
        }


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> FuyuConfig:
    """Mirrors ``FuyuImageProcessorPil``'s class attributes and ``_standardize_kwargs``."""
    size_value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"height": 1080, "width": 1920} if size_value is None else size_value,
        cfg.flag("default_to_square", True),
    )
    if set(size) != {"height", "width"}:
        raise cfg.error("size", "height and width (Fuyu fits images into them)", size)
    patch_value = cfg.raw("patch_size")
    patch = cfg.size_dict(
        "patch_size", {"height": 30, "width": 30} if patch_value is None else patch_value, True
    )
    if set(patch) != {"height", "width"}:
        raise cfg.error("patch_size", "height and width", patch)
    do_pad = cfg.flag("do_pad", True)
    mode = cfg.raw("padding_mode")
    if mode is not None and not isinstance(mode, str):
        raise cfg.error("padding_mode", "a string", mode)
    if do_pad and mode not in (None, "constant"):
        raise UnsupportedModelError(
            f"{source.origin}: padding_mode: mmfast pads with a constant only, got {mode!r} "
            "(numpy's and torchvision's other modes copy the image's edges)"
        )
    norm = cfg.normalization(HALF, HALF)
    return FuyuConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        # The class has no do_convert_rgb: None, read as off.
        do_convert_rgb=cfg.flag("do_convert_rgb", False),
        do_resize=cfg.flag("do_resize", True),
        size=(size["height"], size["width"]),
        resample=cfg.resample(BILINEAR),
        do_pad=do_pad,
        padding_value=cfg.number("padding_value", 1.0),
        **norm.fields(),
        patch_size=(patch["height"], patch["width"]),
    )


registry.register(
    registry.Family(
        name="fuyu",
        processor_types=("FuyuImageProcessor",),
        model_types={"fuyu": "FuyuImageProcessor"},
        build=_build,
        kwargs=frozenset({"patch_size", "padding_value", "padding_mode"}),
        processor_classes={"FuyuProcessor": "fuyu"},
        processor_defaults={"FuyuProcessor": {}},
        hf_pil="fuyu.image_processing_pil_fuyu.FuyuImageProcessorPil",
        hf_torchvision="fuyu.image_processing_fuyu.FuyuImageProcessor",
    )
)

# adept/fuyu-8b: no public copy of its preprocessor_config.json was found; transformers'
# Fuyu docs and tests load it and describe these values (1080x1920 canvas, 30x30 patches,
# padding value 1.0, constant padding, mean/std 0.5, bilinear), which are also the class's
# defaults. Unconfirmed as a file.
registry.register_builtin(
    "adept/fuyu-8b",
    "fuyu",
    {
        "do_normalize": True,
        "do_pad": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": 0.5,
        "image_processor_type": "FuyuImageProcessor",
        "image_std": 0.5,
        "padding_mode": "constant",
        "padding_value": 1.0,
        "patch_size": {"height": 30, "width": 30},
        "processor_class": "FuyuProcessor",
        "resample": BILINEAR,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 1080, "width": 1920},
    },
)
