"""DeepSeek-VL: ``DeepseekVLImageProcessor`` (transformers 5.24) and ``DeepseekVLProcessor``'s
token count; Janus (:mod:`~mmfast.models.janus`) runs the same pipeline.

The image's longest side is resized to ``size`` (the other side scaled, rounded half to even,
at least ``min_size``), then centred on a square canvas filled with ``background_color``
(``int(mean * 255)`` per channel of the mean the processor was built with: a call's
``image_mean`` does not change it), in uint8, then rescaled and normalised. The class has no
``do_convert_rgb`` default: unless the checkpoint sets it, images must already be RGB.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RESAMPLE_CODES,
    RGB,
    ImagePlan,
    ModelConfig,
    Pad,
    View,
    check_image_size,
    identity_table,
    plan_constants,
    resizer,
)
from mmfast.models.config import (
    FLOAT32_MAX,
    MAX_INT,
    Fields,
    Source,
    is_finite_number,
    is_int_in,
)
from mmfast.models.geometry import CropBox

__all__ = [
    "DeepseekVLConfig",
    "background_color",
    "pad_to_square",
    "resize_longest_side",
]


def resize_longest_side(height: int, width: int, size: int, min_size: int) -> tuple[int, int]:
    """Mirrors ``DeepseekVLImageProcessorPil.resize``'s target: the longest side to ``size``,
    each side ``max(round(side * delta), min_size)`` with ``delta = size / longest``."""
    delta = size / max(height, width)
    out = (max(round(height * delta), min_size), max(round(width * delta), min_size))
    if min(out) < 1:
        raise MmfastError(
            f"image size: {height}x{width} resizes to {out[0]}x{out[1]} (min_size "
            f"{min_size}), which PIL and torchvision refuse"
        )
    return out


def uint8_fill(color: tuple[int, ...], name: str) -> tuple[int, int, int]:
    """``pad_to_square``'s canvas colour: each value assigned to a channel of a uint8 array or
    tensor, which numpy (OverflowError) and torch (RuntimeError) refuse outside 0..255; one
    value (an int) fills channel 0 and leaves the others 0; otherwise one per channel
    (ValueError)."""
    if len(color) not in (1, 3):
        raise MmfastError(f"{name}: expected 3 values (one per RGB channel), got {list(color)}")
    if any(not 0 <= c <= 255 for c in color):
        raise MmfastError(
            f"{name}: the pad colour {list(color)} (int(mean * 255)) is outside 0..255, which "
            "transformers cannot put in a uint8 image"
        )
    fill = (*color, 0, 0)
    return (fill[0], fill[1], fill[2])


def pad_to_square(size: tuple[int, int], fill: tuple[int, int, int]) -> Pad | None:
    """``pad_to_square``: the image centred on a square of its longest side (the extra row
    or column of an odd excess at the bottom or right), None for a square image."""
    height, width = size
    if height == width:
        return None
    side = max(height, width)
    return Pad((side, side), (side - height) // 2, (side - width) // 2, fill)


def background_color(mean: object, origin: Fields, name: str = "image_mean") -> tuple[int, ...]:
    """``tuple(int(x * 255) for x in image_mean)`` as ``__init__`` computes it from the mean
    the instance holds (the class default for None); a number cannot be iterated, so
    transformers cannot build the processor (a TypeError)."""
    if mean is None:
        mean = OPENAI_CLIP_MEAN
    if is_finite_number(mean):
        raise origin.error(name, "a list of 3 values (the class iterates it)", mean)
    if not isinstance(mean, list | tuple) or not all(
        is_finite_number(x) and abs(x) <= FLOAT32_MAX for x in mean
    ):
        raise origin.error(name, "a list of 3 finite numbers (in float32 too)", mean)
    return tuple(int(x * 255) for x in mean)


def instance_color(value: object, instance: Fields, name: str) -> tuple[int, ...]:
    """A background colour as an instance holds it (:data:`registry.INSTANCE_KEY`)."""
    if is_int_in(value, -(2**63), 2**63):
        return (int(value),)  # type: ignore[call-overload]
    if not isinstance(value, list | tuple) or not all(is_int_in(c, -(2**63), 2**63) for c in value):
        raise instance.error(name, "a list of ints", value)
    return tuple(int(c) for c in value)


def instance_resample(value: object, instance: Fields) -> int:
    """The instance's ``resample``, which the PIL class falls back to for a 0 (nearest)."""
    if not isinstance(value, int) or isinstance(value, bool) or value not in RESAMPLE_CODES:
        raise instance.error("resample", "a PIL resampling code 0-5", value)
    return value


def square_side(size: Mapping[str, int], name: str) -> int:
    """The side of a square ``size``; ``resize`` raises ValueError for any other."""
    height, width = size.get("height"), size.get("width")
    if height is None or width is None or height != width:
        raise MmfastError(
            f"{name}: expected a square {{height, width}} (the class resizes the longest side "
            f"to it), got {dict(size)}"
        )
    return height


@dataclass(frozen=True)
class DeepseekVLConfig(ModelConfig):
    """Settings of ``DeepseekVLImageProcessor`` / ``JanusImageProcessor``.

    ``size`` is the resolved size dict (a square {height, width} when resizing);
    ``background_color`` and ``fallback_resample`` are the instance's: the colour fixed at
    construction, and the ``resample`` the PIL class uses when a call's is 0 (its ``resample
    or self.resample``). ``image_tokens`` is what the model's processor inserts per image.
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    size: Mapping[str, int]
    min_size: int
    resample: int
    fallback_resample: int
    do_pad: bool
    background_color: tuple[int, ...]
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    image_tokens: int

    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "stack"
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({"pixel_values": "rows"})

    def resample_used(self, resample: int) -> int:
        """The PIL class resizes with ``resample or self.resample``; torchvision's with the
        call's own."""
        return (resample or self.fallback_resample) if self.backend == "pil" else resample

    def resized(self, height: int, width: int) -> tuple[int, int]:
        """The size ``resize`` gives (the input size without ``do_resize``)."""
        if not self.do_resize:
            return height, width
        return resize_longest_side(height, width, square_side(self.size, "size"), self.min_size)

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``DeepseekVLImageProcessorPil._preprocess``: resize, pad, rescale, normalise."""
        check_image_size(height, width)
        resized = self.resized(height, width)
        resample = self.resample_used(self.resample)
        pad = (
            pad_to_square(resized, uint8_fill(self.background_color, "image_mean"))
            if self.do_pad and resized[0] != resized[1]
            else None
        )
        out = resized if pad is None else pad.size
        view = View(
            resize=resizer(self.backend, resized, resample) if self.do_resize else None,
            pad=pad,
            out=(CropBox(0, 0, *out),),
        )
        return self.image_plan(height, width, resized, {"pixel_values": (3, *out)}, (view,))

    def image_plan(
        self,
        height: int,
        width: int,
        resized: tuple[int, int],
        shapes: Mapping[str, tuple[int, ...]],
        views: tuple[View, ...],
    ) -> ImagePlan:
        """The plan of an image resized to ``resized`` whose outputs are ``views``'."""
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=resized,
            resample=self.resample_used(self.resample),
            crop=None,
            canvas_size=None,
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType(dict(shapes)),
            num_image_tokens=self.image_tokens,
            views=views,
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """HF's arithmetic; with rescale and normalise both off, the uint8 pixels as they are."""
        if plan.do_rescale or plan.do_normalize:
            return super().tables(plan)
        return identity_table()


def instance_fields(values: Fields, colors: tuple[str, ...]) -> dict[str, Any]:
    """What an instance built from ``values`` holds: ``resample`` and each background colour
    (``colors`` names their mean keys), as :data:`registry.INSTANCE_KEY` carries them."""
    instance: dict[str, Any] = {"resample": values.resample(BICUBIC)}
    for mean_key in colors:
        name = mean_key.replace("image_mean", "background_color")
        instance[name] = list(background_color(values.raw(mean_key), values, mean_key))
    return instance


def instance_values(cfg: Fields, colors: tuple[str, ...]) -> tuple[Fields, Mapping[str, Any]]:
    """The instance's values: those :mod:`mmfast.hf` or a call passed under
    :data:`registry.INSTANCE_KEY`, else the ones a processor built from ``cfg`` holds."""
    given = cfg.raw(registry.INSTANCE_KEY)
    if given is None:
        return cfg, instance_fields(cfg, colors)
    if not isinstance(given, Mapping):
        raise cfg.error(registry.INSTANCE_KEY, "a mapping", given)
    return cfg.nested("the instance", given), given


def call_over_instance(colors: tuple[str, ...]) -> Any:
    """A family's ``call_settings``: the call's values over the config's, with what the
    instance built from the config's values holds kept aside (its colours, its resample)."""

    def merge(values: Mapping[str, Any], call: Mapping[str, Any]) -> dict[str, Any]:
        instance = values.get(registry.INSTANCE_KEY)
        if instance is None:
            instance = instance_fields(Fields("the processor's settings", values), colors)
        return {**values, **call, registry.INSTANCE_KEY: instance}

    return merge


def deepseek_fields(cfg: Fields) -> dict[str, Any]:
    """The fields ``DeepseekVLImageProcessor`` and ``JanusImageProcessor`` share with the
    hybrid class: its class defaults, ``_standardize_kwargs`` and ``__init__``."""
    value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"height": 384, "width": 384} if value is None else value,
        cfg.flag("default_to_square", True),
    )
    norm = cfg.normalization(OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)
    return {
        # No class default: None, which reads as off.
        "do_convert_rgb": cfg.flag("do_convert_rgb", False),
        "do_resize": cfg.flag("do_resize", True),
        "size": MappingProxyType(size),
        "min_size": cfg.int_in("min_size", 14, -MAX_INT, MAX_INT),
        "resample": cfg.resample(BICUBIC),
        "do_pad": cfg.flag("do_pad", True),
        **norm.fields(),
    }


def build_with_tokens(tokens: int) -> Any:
    """A ``build`` for the class, whose processor inserts ``tokens`` more than its
    ``num_image_tokens`` (Janus: its begin- and end-of-image tokens)."""

    def build(
        source: Source, processor_type: str, cfg: Fields, processor: Fields
    ) -> DeepseekVLConfig:
        instance, values = instance_values(cfg, ("image_mean",))
        return DeepseekVLConfig(
            model_id=source.model_id,
            image_processor_type=processor_type,
            **deepseek_fields(cfg),
            fallback_resample=instance_resample(values.get("resample"), instance),
            background_color=instance_color(
                values.get("background_color"), instance, "background_color"
            ),
            image_tokens=processor.positive_int("num_image_tokens", 576) + tokens,
        )

    return build


KWARGS = frozenset({"min_size"})

registry.register(
    registry.Family(
        name="deepseek_vl",
        processor_types=("DeepseekVLImageProcessor",),
        model_types={"deepseek_vl": "DeepseekVLImageProcessor"},
        build=build_with_tokens(0),
        kwargs=KWARGS,
        processor_kwargs=frozenset({"num_image_tokens"}),
        processor_classes={"DeepseekVLProcessor": "deepseek_vl"},
        hf_pil="deepseek_vl.image_processing_pil_deepseek_vl.DeepseekVLImageProcessorPil",
        hf_torchvision="deepseek_vl.image_processing_deepseek_vl.DeepseekVLImageProcessor",
        call_settings=call_over_instance(("image_mean",)),
        instance_attributes=("background_color", "resample"),
    )
)

# deepseek-community/deepseek-vl-1.3b-chat: the file of the original deepseek-ai release (its
# SigLIP-L tower at 384, mean/std 0.5, min_size 14, background 127) restated for the
# transformers class, as the conversion copies those keys; the converted file itself not seen.
registry.register_builtin(
    "deepseek-community/deepseek-vl-1.3b-chat",
    "deepseek_vl",
    {
        "do_normalize": True,
        "do_pad": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_processor_type": "DeepseekVLImageProcessor",
        "image_std": [0.5, 0.5, 0.5],
        "min_size": 14,
        "processor_class": "DeepseekVLProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 384, "width": 384},
    },
    {"num_image_tokens": 576},
)
