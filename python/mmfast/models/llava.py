"""LLaVA-1.5: ``CLIPImageProcessor`` and ``LlavaImageProcessor`` (transformers 5.24), and
``LlavaProcessor``'s token count.

The llava-hf checkpoints name the CLIP processor: shortest edge to 336 (bicubic), a 336x336
centre crop, normalisation with OpenAI's CLIP constants. Every other ``size`` spelling the CLIP
class accepts works too. ``LlavaImageProcessor`` (what AutoImageProcessor gives model type
``llava`` without an ``image_processor_type``) is the same pipeline with one step first: with
``do_pad``, the original LLaVA's ``expand2square``, the image centred on a square of its
longest side filled with the mean colour, before the resize.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    ImagePlan,
    Pad,
    View,
    check_image_size,
)
from mmfast.models.config import MAX_INT, Fields, Source, is_finite_number
from mmfast.models.pil_backend import PilBackendConfig, pil_backend_fields

__all__ = ["ClipConfig", "LlavaConfig"]


@dataclass(frozen=True)
class ClipConfig(PilBackendConfig):
    """Settings of ``CLIPImageProcessor`` as LLaVA-1.5 uses it, plus the LlavaProcessor values.

    ``patch_size``, ``num_additional_image_tokens`` and ``vision_feature_select_strategy``
    come from ``processor_config.json`` and only matter for the token count: the ``<image>``
    tokens LlavaProcessor inserts (576 for LLaVA-1.5).
    """

    patch_size: int
    num_additional_image_tokens: int
    vision_feature_select_strategy: str | None
    fixed_tokens: int | None

    def count_tokens(self, height: int, width: int) -> int:
        """``LlavaProcessor.replace_image_token``, which counts on the processed size; the
        count of another model type's processor where it has one (:func:`fixed_tokens`)."""
        if self.fixed_tokens is not None:
            return self.fixed_tokens
        tokens = (height // self.patch_size) * (width // self.patch_size)
        tokens += self.num_additional_image_tokens
        if self.vision_feature_select_strategy == "default":
            tokens -= 1  # the CLS feature is dropped
        return tokens


def processor_fields(processor: Fields) -> dict[str, Any]:
    """LlavaProcessor's token-count values; without processor_config.json, LLaVA-1.5's (the
    family mmfast serves here)."""
    strategy = processor.raw("vision_feature_select_strategy")
    if strategy is not None and not isinstance(strategy, str):
        raise processor.error("vision_feature_select_strategy", "a string", strategy)
    return {
        "patch_size": processor.positive_int("patch_size", 14),
        "num_additional_image_tokens": processor.int_in(
            "num_additional_image_tokens", 1, 0, MAX_INT
        ),
        "vision_feature_select_strategy": "default" if strategy is None else strategy,
    }


def fixed_tokens(model_type: str | None, cfg: Fields, processor: Fields) -> int | None:
    """The image tokens of the processors that share the CLIP class but not LlavaProcessor's
    count (``clip`` and ``vipllava`` use LlavaProcessor's)."""
    if model_type == "florence2":
        # Florence2Processor: image_processor.image_seq_length, a key of the Florence-2 files
        # (577 in base and large; transformers' processor fails without it).
        return cfg.positive_int("image_seq_length", 577)
    if model_type == "kosmos-2":
        return processor.positive_int("num_image_tokens", 64)  # Kosmos2ProcessorKwargs
    if model_type == "git":
        return 0  # GitProcessor inserts none: the model prepends the image features
    return None


def _construct(values: dict[str, Any]) -> dict[str, Any]:
    """Mirrors ``CLIPImageProcessorPil.__init__``'s KOSMOS-2 compatibility: ``use_square_size``
    makes the size a square of the class default edge, whatever the config's size says."""
    if not values.get("use_square_size"):
        return values
    return {**values, "size": {"height": 224, "width": 224}}


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> ClipConfig:
    """Mirrors ``BaseImageProcessor._standardize_kwargs`` (``__init__``: :func:`_construct`)."""
    return ClipConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **pil_backend_fields(
            cfg,
            size=224,
            default_to_square=False,
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            do_center_crop=True,
        ),
        **processor_fields(processor),
        fixed_tokens=fixed_tokens(
            registry.model_type_of(source.preprocessor, source.model_type), cfg, processor
        ),
    )


@dataclass(frozen=True)
class LlavaConfig(ClipConfig):
    """Settings of ``LlavaImageProcessor``: CLIP's, and ``do_pad``.

    ``background`` is the pad colour as ``_preprocess`` computes it from the (call's)
    ``image_mean``, ``tuple(int(x * 255) for x in image_mean)``, before any range check;
    ``scalar_mean`` is a mean given as one number, which that expression cannot iterate.
    """

    do_pad: bool
    background: tuple[int, ...]
    scalar_mean: float | None

    def check_background(self) -> None:
        """transformers computes the colour for every image it pads or not: a TypeError for a
        mean that is a number, but for the PIL class's ``if image_mean else 0`` on a 0."""
        if self.scalar_mean is not None and (self.scalar_mean or self.backend != "pil"):
            raise MmfastError(
                "image_mean: with do_pad, transformers takes a list of 3 values, got "
                f"{self.scalar_mean!r}"
            )

    def pad_fill(self) -> tuple[int, int, int]:
        """The uint8 fill ``pad_to_square`` gives the canvas: the PIL class assigns each value
        to a uint8 array (numpy refuses one outside 0..255, an OverflowError), the
        torchvision class hands them to ``tvF.pad``, which wraps them modulo 256."""
        if self.scalar_mean is not None:
            return (0, 0, 0)  # background_color 0: channel 0 set to 0, the others zeros
        if self.backend != "pil":
            if any(not -(2**63) <= c < 2**63 for c in self.background):
                raise MmfastError(
                    f"image_mean: a pad colour of {self.background} does not fit torch's int64"
                )
            return (self.background[0] % 256, self.background[1] % 256, self.background[2] % 256)
        if any(not 0 <= c <= 255 for c in self.background):
            raise MmfastError(
                f"image_mean: the pad colour int(mean * 255) = {self.background} is outside "
                "0..255, which transformers' PIL class cannot put in a uint8 image"
            )
        return (self.background[0], self.background[1], self.background[2])

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``LlavaImageProcessorPil._preprocess``: ``pad_to_square`` (centred, in
        uint8), then CLIP's resize, centre crop, rescale and normalise."""
        check_image_size(height, width)  # the square's plan checks only its side
        if not self.do_pad:
            return super().plan(height, width)
        self.check_background()
        if height == width:
            return super().plan(height, width)
        side = max(height, width)
        squared = super().plan(side, side)
        pad = Pad((side, side), (side - height) // 2, (side - width) // 2, self.pad_fill())
        views = (View(pad=pad), *(replace(v, source=0) for v in squared.views))
        return replace(squared, height=height, width=width, views=views)


def _build_llava(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> LlavaConfig:
    """Mirrors ``LlavaImageProcessorPil``'s class defaults; the pad colour is
    ``_preprocess``'s, from the mean a call passes."""
    base = pil_backend_fields(
        cfg,
        size={"shortest_edge": 224},
        default_to_square=False,
        resample=BICUBIC,
        mean=OPENAI_CLIP_MEAN,
        std=OPENAI_CLIP_STD,
        do_center_crop=True,
        pads=True,
    )
    mean = cfg.raw("image_mean")
    scalar = float(mean) if is_finite_number(mean) else None
    values = OPENAI_CLIP_MEAN if mean is None or scalar is not None else mean
    return LlavaConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **base,
        **processor_fields(processor),
        fixed_tokens=None,
        do_pad=cfg.flag("do_pad", False),
        background=tuple(int(x * 255) for x in values),
        scalar_mean=scalar,
    )


registry.register(
    registry.Family(
        name="clip",
        processor_types=("CLIPImageProcessor",),
        # "llava" is not here: HF maps it to LlavaImageProcessor (below).
        model_types={
            t: "CLIPImageProcessor" for t in ("clip", "florence2", "git", "kosmos-2", "vipllava")
        },
        build=_build,
        init_kwargs=frozenset({"use_square_size"}),
        construct=_construct,
        processor_kwargs=frozenset(
            {
                "patch_size",
                "num_additional_image_tokens",
                "vision_feature_select_strategy",
                "num_image_tokens",
            }
        ),
        processor_classes={
            "Florence2Processor": "florence2",
            "GitProcessor": "git",
            "Kosmos2Processor": "kosmos-2",
        },
        hf_pil="clip.image_processing_pil_clip.CLIPImageProcessorPil",
        hf_torchvision="clip.image_processing_clip.CLIPImageProcessor",
    )
)

# llava-hf/llava-1.5-7b-hf: the printed CLIPImageProcessor of a llava-hf conversion
# (bczhou/tiny-llava-v1-hf, same CLIP-ViT-L/14-336 tower) gives these values; the
# processor_config.json values (patch 14, one extra CLS token dropped by the "default"
# strategy) give LLaVA-1.5's documented 576 image tokens.
registry.register_builtin(
    "llava-hf/llava-1.5-7b-hf",
    "llava",
    {
        "crop_size": {"height": 336, "width": 336},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "CLIPImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "processor_class": "LlavaProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"shortest_edge": 336},
    },
    {
        "patch_size": 14,
        "num_additional_image_tokens": 1,
        "vision_feature_select_strategy": "default",
    },
)

registry.register(
    registry.Family(
        name="llava",
        processor_types=("LlavaImageProcessor",),
        model_types={"llava": "LlavaImageProcessor"},
        build=_build_llava,
        processor_kwargs=frozenset(
            {"patch_size", "num_additional_image_tokens", "vision_feature_select_strategy"}
        ),
        processor_classes={"LlavaProcessor": "llava"},
        hf_pil="llava.image_processing_pil_llava.LlavaImageProcessorPil",
        hf_torchvision="llava.image_processing_llava.LlavaImageProcessor",
    )
)

# liuhaotian/llava-v1.5-7b: the original LLaVA-1.5 release, not a transformers conversion (no
# public checkpoint names LlavaImageProcessor). Its config says image_aspect_ratio "pad" and
# its tower is openai/clip-vit-large-patch14-336, whose file (seen verbatim, as quoted in
# haotian-liu/LLaVA#1738: size 336, crop_size 336, bicubic, CLIP mean/std) this restates for
# LlavaImageProcessor with do_pad, the step transformers added to match that model (#33191).
# Tokens as LLaVA-1.5's: 576.
registry.register_builtin(
    "liuhaotian/llava-v1.5-7b",
    "llava",
    {
        "crop_size": {"height": 336, "width": 336},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_pad": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "LlavaImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "processor_class": "LlavaProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"shortest_edge": 336},
    },
    {
        "patch_size": 14,
        "num_additional_image_tokens": 1,
        "vision_feature_select_strategy": "default",
    },
)
