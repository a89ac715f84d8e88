"""Pixtral, Mistral 3 (Mistral Small 3.1/3.2), Mistral Large 4 and LightOnOCR:
``PixtralImageProcessor`` / ``PixtralImageProcessorPil`` (transformers 5.24).

The longest edge is brought down to ``size["longest_edge"]`` (floored, never up), both sides
then rounded up to whole patches (which can upscale by up to a patch less one pixel), resized
(bicubic), normalised, and zero-padded *after* normalising, at the bottom and right, to the
batch's largest height and width (``do_pad``). ``image_sizes`` gives each image's size before
that padding.

``PixtralProcessor`` calls the image processor with ``patch_size = patch_size *
spatial_merge_size`` (its own values, 14 x 2 for Mistral Small 3.1), whatever the image
processor's file says; ``LightOnOcrProcessor`` leaves the file's patch size and counts tokens
on ``patch_size * spatial_merge_size`` squares.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RGB,
    Canvas,
    ImagePlan,
    ModelConfig,
    View,
    check_image_size,
    identity_table,
    plan_constants,
    resizer,
)
from mmfast.models.config import Fields, Source
from mmfast.models.geometry import CropBox, center_crop_box

__all__ = ["PixtralConfig", "get_resize_output_image_size", "pad_for_batching"]

# The processors that use the class, by the model types AutoProcessor maps to them.
PIXTRAL_PROCESSOR = "PixtralProcessor"
LIGHTON_PROCESSOR = "LightOnOcrProcessor"
PROCESSOR_OF_MODEL_TYPE = {
    "pixtral": PIXTRAL_PROCESSOR,
    "mistral3": PIXTRAL_PROCESSOR,
    "mistral_large4": PIXTRAL_PROCESSOR,
    "lighton_ocr": LIGHTON_PROCESSOR,
}


def get_resize_output_image_size(
    height: int, width: int, max_size: tuple[int, int], patch: tuple[int, int]
) -> tuple[int, int]:
    """Mirrors ``image_processing_pixtral.get_resize_output_image_size``: down (never up)
    to fit ``max_size``, each side floored, then each side rounded up to whole patches
    (``_num_image_tokens``'s ``(side - 1) // patch + 1``)."""
    ratio = max(height / max_size[0], width / max_size[1])
    if ratio > 1:
        # HF floors (int(math.floor(...))) where the original code rounded (banker's).
        height = math.floor(height / ratio)
        width = math.floor(width / ratio)
    return ((height - 1) // patch[0] + 1) * patch[0], ((width - 1) // patch[1] + 1) * patch[1]


@dataclass(frozen=True)
class PixtralConfig(ModelConfig):
    """Settings of ``PixtralImageProcessor`` plus the processor values that count tokens.

    ``size`` and ``patch_size`` are HF's resolved size dicts (``size`` reads
    ``longest_edge`` when it has one, else ``height``/``width``; ``patch_size``
    ``height``/``width``). ``processor_class`` is the checkpoint's processor
    (``PixtralProcessor``, ``LightOnOcrProcessor``, or None: counted as a
    ``PixtralProcessor`` with its defaults); ``token_patch`` is its ``patch_size *
    spatial_merge_size``.

    ``num_image_tokens`` is what the processor's ``replace_image_token`` inserts:
    PixtralProcessor, an ``[IMG]`` per ``token_patch`` square of the image resized with that
    patch size, an ``[IMG_BREAK]`` after each row, the last one an ``[IMG_END]``
    (``rows * (columns + 1)``); LightOnOcrProcessor, an image token per ``token_patch``
    square of the image as the file's patch size resizes it (``rows * columns``).
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    size: Mapping[str, int]
    patch_size: Mapping[str, int]
    resample: int
    do_center_crop: bool
    crop_size: tuple[int, int] | None
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    do_pad: bool
    processor_class: str | None
    token_patch: int

    # Which transformers backend the plan matches: "pil" or "torchvision".
    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "stack"
    batch_shapes_images: ClassVar[bool] = True

    @property
    def raw_pixels(self) -> bool:  # type: ignore[override]
        """Padding is zeros after normalising: dtype="uint8" only without it."""
        return not self.do_pad

    @property
    def unbatched(self) -> Mapping[str, str]:  # type: ignore[override]
        """With ``return_tensors=None`` transformers stacks padded images (an array or
        tensor) and leaves unpadded ones as a list; ``image_sizes`` stays a list of image
        shapes."""
        if self.do_pad:
            return MappingProxyType({"image_sizes": "sizes"})
        return MappingProxyType({"pixel_values": "rows", "image_sizes": "sizes"})

    def resized_size(self, height: int, width: int, patch: tuple[int, int]) -> tuple[int, int]:
        """``PixtralImageProcessorPil.resize``'s target for ``patch``-sized patches."""
        if "longest_edge" in self.size:
            max_size = (self.size["longest_edge"], self.size["longest_edge"])
        elif "height" in self.size and "width" in self.size:
            max_size = (self.size["height"], self.size["width"])
        else:
            raise MmfastError(
                "size: expected longest_edge or height and width (PixtralImageProcessor resizes "
                f"by them), got {dict(self.size)}"
            )
        out = get_resize_output_image_size(height, width, max_size, patch)
        if min(out) < 1:
            raise MmfastError(
                f"image size: {height}x{width} resizes to {out[0]}x{out[1]} under "
                f"size={dict(self.size)}"
            )
        return out

    def own_patch(self) -> tuple[int, int]:
        """The file's ``patch_size`` as (height, width)."""
        if "height" not in self.patch_size or "width" not in self.patch_size:
            raise MmfastError(
                "patch_size: expected height and width (PixtralImageProcessor resizes to whole "
                f"patches), got {dict(self.patch_size)}"
            )
        return self.patch_size["height"], self.patch_size["width"]

    def geometry(
        self, height: int, width: int, patch: tuple[int, int] | None = None
    ) -> tuple[tuple[int, int], CropBox | None, tuple[int, int]]:
        """(resized size, centre-crop window or None, ``image_sizes`` entry) with ``patch``
        (by default the file's): the torchvision class records the size before its centre
        crop, the PIL class after."""
        resized = (height, width)
        if self.do_resize:
            resized = self.resized_size(height, width, patch or self.own_patch())
        crop = None
        if self.do_center_crop:
            assert self.crop_size is not None
            crop = center_crop_box(*resized, *self.crop_size, self.backend)
        recorded = resized if crop is None or self.backend == "torchvision" else self.crop_size
        assert recorded is not None
        return resized, crop, recorded

    def count_tokens(self, height: int, width: int) -> int:
        """The processor's tokens for a (height, width) image; raises :class:`MmfastError`
        where PixtralProcessor fails (no whole row of patches: its token list is empty)."""
        p = self.token_patch
        if self.processor_class == LIGHTON_PROCESSOR:
            _, _, (h, w) = self.geometry(height, width)
            return (h // p) * (w // p)
        _, _, (h, w) = self.geometry(height, width, (p, p))
        if h // p == 0:
            raise MmfastError(
                f"image size: PixtralProcessor fails on an image of {h}x{w} with {p}-pixel "
                "patches (no whole row of patches; transformers raises IndexError)"
            )
        return (h // p) * (w // p + 1)

    def num_image_tokens(self, height: int, width: int) -> int:
        check_image_size(height, width)
        return self.count_tokens(height, width)

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``PixtralImageProcessorPil._preprocess`` for one image: resize, optional
        centre crop, rescale and normalise onto a canvas of its own size (``finish_batch``
        widens it to the batch's)."""
        check_image_size(height, width)
        resized, crop, _ = self.geometry(height, width)
        resize = resizer(self.backend, resized, self.resample) if self.do_resize else None
        out: Canvas | tuple[CropBox, ...] = Canvas(resized) if crop is None else (crop,)
        shape = resized if crop is None else (crop.height, crop.width)
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
            crop=crop,
            canvas_size=shape,
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType({"pixel_values": (3, *shape), "image_sizes": (2,)}),
            num_image_tokens=tokens,
            views=(View(resize=resize, out=out),),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """HF's arithmetic; with rescale and normalise both off, both classes keep the uint8
        pixels (and pad them with 0)."""
        if plan.do_rescale or plan.do_normalize:
            return super().tables(plan)
        return identity_table()

    def finish_batch(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> Sequence[ImagePlan]:
        """``_pad_for_batching``: every canvas as large as the batch's largest image.

        The torchvision class pads by the sizes it recorded before its centre crop, so crops
        of images resized to different sizes come out of different sizes and cannot be
        stacked: transformers raises there, and so does this."""
        if self.do_center_crop:
            if self.do_pad and self.backend == "torchvision":
                sizes = {plan.resize_size for plan in plans}
                if len(sizes) > 1:
                    raise MmfastError(
                        "images: with do_center_crop and do_pad, PixtralImageProcessor pads "
                        "crops by their resized sizes, which differ in this batch "
                        f"({sorted(sizes)}); transformers fails to stack them too"
                    )
            return plans
        return pad_for_batching(plans) if self.do_pad else plans

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_sizes``: (images, 2) int64, each image's (height, width) before padding."""
        sizes = [self.geometry(plan.height, plan.width)[2] for plan in plans]
        return {"image_sizes": np.array(sizes, np.int64).reshape(-1, 2)}


def pad_for_batching(plans: Sequence[ImagePlan]) -> list[ImagePlan]:
    """``_pad_for_batching``: each plan's one canvas widened to the batch's largest height and
    width (plans of one CHW canvas each, ``image_sizes`` beside it). A plan whose canvas is
    that size already (a one-image batch's) is kept as it is: rebuilding it took 9 us a
    call."""
    height = max(plan.output_shapes["pixel_values"][1] for plan in plans)
    width = max(plan.output_shapes["pixel_values"][2] for plan in plans)
    return [
        plan
        if plan.output_shapes["pixel_values"] == (3, height, width)
        else replace(
            plan,
            canvas_size=(height, width),
            output_shapes=MappingProxyType(
                {"pixel_values": (3, height, width), "image_sizes": (2,)}
            ),
            views=tuple(replace(view, out=Canvas((height, width))) for view in plan.views),
        )
        for plan in plans
    ]


def processor_class_of(source: Source, cfg: Fields, processor: Fields) -> str | None:
    """The checkpoint's processor: ``processor_config.json``'s ``processor_class``, else the
    image config's, else the one AutoProcessor gives its model type."""
    for name in (processor.raw("processor_class"), cfg.raw("processor_class")):
        if isinstance(name, str):
            # LightOn's own files spell it LightOnOCRProcessor.
            return LIGHTON_PROCESSOR if name.lower() == LIGHTON_PROCESSOR.lower() else name
    model_type = registry.model_type_of(source.preprocessor, source.model_type)
    return PROCESSOR_OF_MODEL_TYPE.get(model_type or "")


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> PixtralConfig:
    """Mirrors ``PixtralImageProcessorPil``'s class defaults and ``_standardize_kwargs``
    (``default_to_square``: an int size or patch size is a square), and the processor's
    ``patch_size`` and ``spatial_merge_size`` (PixtralProcessor's defaults 16 and 1,
    LightOnOcrProcessor's 14 and 2)."""
    default_to_square = cfg.flag("default_to_square", True)
    size_value = cfg.raw("size")
    size = cfg.size_dict(
        "size", {"longest_edge": 1024} if size_value is None else size_value, default_to_square
    )
    patch_value = cfg.raw("patch_size")
    # _preprocess: get_size_dict(patch_size or self.patch_size, default_to_square=True).
    patch_size = cfg.size_dict(
        "patch_size", {"height": 16, "width": 16} if patch_value is None else patch_value, True
    )
    do_center_crop = cfg.flag("do_center_crop", False)
    crop_value = cfg.raw("crop_size")
    crop_size = None
    if do_center_crop:
        if crop_value is None:
            # validate_preprocess_arguments: the class has no crop size of its own.
            raise cfg.error("crop_size", "a crop size (do_center_crop is on)", None)
        crop = cfg.size_dict("crop_size", crop_value, True)
        if set(crop) != {"height", "width"}:
            raise cfg.error("crop_size", "height and width (do_center_crop is on)", crop)
        crop_size = (crop["height"], crop["width"])
    processor_class = processor_class_of(source, cfg, processor)
    lighton = processor_class == LIGHTON_PROCESSOR
    token_patch = processor.positive_int("patch_size", 14 if lighton else 16)
    token_patch *= processor.positive_int("spatial_merge_size", 2 if lighton else 1)
    norm = cfg.normalization(OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)
    return PixtralConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=cfg.flag("do_resize", True),
        size=MappingProxyType(size),
        patch_size=MappingProxyType(patch_size),
        resample=cfg.resample(BICUBIC),
        do_center_crop=do_center_crop,
        crop_size=crop_size,
        **norm.fields(),
        do_pad=cfg.flag("do_pad", True),
        processor_class=processor_class,
        token_patch=token_patch,
    )


registry.register(
    registry.Family(
        name="pixtral",
        processor_types=("PixtralImageProcessor",),
        model_types={
            "pixtral": "PixtralImageProcessor",
            "mistral3": "PixtralImageProcessor",
            "mistral_large4": "PixtralImageProcessor",
            "lighton_ocr": "PixtralImageProcessor",
        },
        build=_build,
        kwargs=frozenset({"patch_size"}),
        processor_kwargs=frozenset({"spatial_merge_size"}),
        # PixtralProcessor (pixtral, mistral3, mistral_large4) passes no image kwargs of its
        # own (images_kwargs holds only return_tensors) but forces patch_size, which
        # processor_class_of and count_tokens read.
        processor_classes={PIXTRAL_PROCESSOR: "pixtral", LIGHTON_PROCESSOR: "lighton_ocr"},
        processor_defaults={PIXTRAL_PROCESSOR: {}, LIGHTON_PROCESSOR: {"do_pad": True}},
        hf_pil="pixtral.image_processing_pil_pixtral.PixtralImageProcessorPil",
        hf_torchvision="pixtral.image_processing_pixtral.PixtralImageProcessor",
    )
)


def _pixtral_file(
    processor_type: str, processor: str, longest_edge: int, patch: int | dict[str, int]
) -> dict[str, Any]:
    """A ``preprocessor_config.json`` as transformers saves a Pixtral image processor."""
    return {
        "crop_size": None,
        "data_format": "channels_first",
        "default_to_square": True,
        "device": None,
        "do_center_crop": None,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": processor_type,
        "image_std": list(OPENAI_CLIP_STD),
        "input_data_format": None,
        "patch_size": patch,
        "processor_class": processor,
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "return_tensors": None,
        "size": {"longest_edge": longest_edge},
    }


# Mistral Small 3.1 and 3.2: no public copy of either checkpoint's files was found. A public
# copy of Magistral-Small-2509's preprocessor_config.json (the same Pixtral tower, kept verbatim
# as a test fixture by an MLX project) gives every value here: 1540-pixel longest edge,
# {14, 14} patches, CLIP mean/std, bicubic. The processor values (14-pixel patches, 2x2
# spatial merge: 28-pixel tokens) are the model config's and transformers' Mistral 3 processor
# tests'; unconfirmed as files.
_MISTRAL_SMALL_PROCESSOR = {
    "image_break_token": "[IMG_BREAK]",
    "image_end_token": "[IMG_END]",
    "image_token": "[IMG]",
    "patch_size": 14,
    "processor_class": PIXTRAL_PROCESSOR,
    "spatial_merge_size": 2,
}
for _model_id in (
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
    "mistralai/Mistral-Small-3.2-24B-Instruct-2506",
):
    registry.register_builtin(
        _model_id,
        "mistral3",
        _pixtral_file(
            "PixtralImageProcessorFast", PIXTRAL_PROCESSOR, 1540, {"height": 14, "width": 14}
        ),
        _MISTRAL_SMALL_PROCESSOR,
    )

# mistral-community/pixtral-12b (a LLaVA checkpoint with a Pixtral tower): 1024-pixel longest
# edge and 16-pixel patches are transformers' Pixtral defaults, which its docs and the
# config docstring describe for this checkpoint; the processor has no spatial merge
# (PixtralProcessor's default 1). Unconfirmed as files.
registry.register_builtin(
    "mistral-community/pixtral-12b",
    "llava",
    _pixtral_file("PixtralImageProcessor", PIXTRAL_PROCESSOR, 1024, {"height": 16, "width": 16}),
    {
        "image_break_token": "[IMG_BREAK]",
        "image_end_token": "[IMG_END]",
        "image_token": "[IMG]",
        "patch_size": 16,
        "processor_class": PIXTRAL_PROCESSOR,
    },
)

# lightonai/LightOnOCR-1B-1025: no public copy of its files was found. Its Pixtral tower is
# Mistral Small 3.1's (1540-pixel images, 14-pixel patches, CLIP mean/std, a 2x2 merge, as in
# transformers' LightOnOcr config defaults); LightOnOcrProcessor's own defaults are 14 and 2.
# Unconfirmed as files.
registry.register_builtin(
    "lightonai/LightOnOCR-1B-1025",
    "lighton_ocr",
    _pixtral_file("PixtralImageProcessor", LIGHTON_PROCESSOR, 1540, 14),
    {"patch_size": 14, "processor_class": LIGHTON_PROCESSOR, "spatial_merge_size": 2},
)
