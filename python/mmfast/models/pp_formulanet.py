"""PP-FormulaNet: ``PPFormulaNetImageProcessor`` (transformers 5.24; torchvision only).

Each image is resized so its shortest side is the shorter side of ``size`` (768x768; bilinear,
torchvision's kernel), shrunk again to fit in ``size`` (``thumbnail``: bicubic, aspect kept,
the other side truncated), padded to ``size`` with black, centred (a larger image is cropped
by the negative padding), then rescaled and normalised (mean 0.7931, std 0.1738).

What mmfast refuses, with :class:`~mmfast.UnsupportedModelError` naming the setting:
``do_crop_margin`` (the class default), which crops each image to the bounding box of its
pixels darker than a threshold of its own greyscale range: a crop found from the pixels,
where mmfast's plans come from image sizes alone; and ``do_align_long_axis`` with a size
that is not square, which rotates portrait images by 90 degrees, a step mmfast's engine does
not have (with a square size it never rotates, and is taken). ``mmfast.hf`` runs
transformers' code for those configs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, ClassVar

from numpy.typing import NDArray

from mmfast.errors import MmfastError, UnsupportedModelError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    BILINEAR,
    RGB,
    ImagePlan,
    ModelConfig,
    Resize,
    View,
    check_image_size,
    identity_table,
    plan_constants,
)
from mmfast.models.config import Fields, Source
from mmfast.models.geometry import CropBox, get_resize_output_image_size

__all__ = ["PPFormulaNetConfig", "thumbnail_size"]

# PPFormulaNetImageProcessor's normalisation constants (a greyish paper colour).
FORMULA_MEAN: RGB = (0.7931, 0.7931, 0.7931)
FORMULA_STD: RGB = (0.1738, 0.1738, 0.1738)


def thumbnail_size(height: int, width: int, size: tuple[int, int]) -> tuple[int, int]:
    """Mirrors ``PPFormulaNetImageProcessor.thumbnail``'s target: each side at most
    ``size``'s, the shorter one scaled with the longer (truncated); unchanged when it fits."""
    out_h, out_w = min(height, size[0]), min(width, size[1])
    if (out_h, out_w) == (height, width):
        return height, width
    if height > width:
        out_w = int(width * out_h / height)
    elif width > height:
        out_h = int(height * out_w / width)
    return out_h, out_w


@dataclass(frozen=True)
class PPFormulaNetConfig(ModelConfig):
    """Settings of ``PPFormulaNetImageProcessor`` (``do_crop_margin`` off), sizes as
    (height, width). ``PPFormulaNetProcessor`` calls the image processor alone (no text):
    it inserts no image tokens, so ``num_image_tokens`` is 0."""

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    size: tuple[int, int]
    resample: int
    do_thumbnail: bool
    do_pad: bool
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB

    # transformers has only a torchvision class.
    backend: str = field(default="torchvision", kw_only=True)

    batch_layout: ClassVar[str] = "stack"
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({"pixel_values": "rows"})

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``PPFormulaNetImageProcessor._preprocess`` for one image (without
        ``crop_margin``): resize, thumbnail, centred pad, rescale and normalise."""
        check_image_size(height, width)
        resizes: list[Resize] = []
        current = (height, width)
        if self.do_resize:
            target = get_resize_output_image_size(height, width, min(self.size))
            if target != current:
                resizes.append(Resize(target, self.resample, "torch"))
            current = target
        if self.do_thumbnail:
            target = thumbnail_size(*current, self.size)
            if target != current:
                # tvF.resize's default: bicubic, antialiased.
                resizes.append(Resize(target, BICUBIC, "torch"))
            current = target
        if min(current) < 1:
            raise MmfastError(
                f"image size: {height}x{width} resizes to {current[0]}x{current[1]} under "
                f"size={self.size[0]}x{self.size[1]} (transformers fails too)"
            )
        window = CropBox(0, 0, *current)
        if self.do_pad:
            # pad_images: delta // 2 before, the rest after; a negative delta crops.
            top = (self.size[0] - current[0]) // 2
            left = (self.size[1] - current[1]) // 2
            window = CropBox(-top, -left, *self.size)
        # One view per resize, each from the previous one's pixels; the last writes the window.
        views = [View(resize=r, source=i - 1 if i else None) for i, r in enumerate(resizes)]
        last = views.pop() if views else View()
        views.append(replace(last, out=(window,)))
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=current,
            resample=self.resample,
            crop=window,
            canvas_size=None,
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType({"pixel_values": (3, window.height, window.width)}),
            num_image_tokens=0,
            views=tuple(views),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """The torchvision class's arithmetic; with both steps off, its uint8 pixels."""
        if plan.do_rescale or plan.do_normalize:
            return super().tables(plan)
        return identity_table()


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> PPFormulaNetConfig:
    """Mirrors ``PPFormulaNetImageProcessor``'s class attributes; refuses what mmfast cannot
    compute exactly (see the module docstring)."""
    if cfg.flag("do_crop_margin", True):
        raise UnsupportedModelError(
            f"{source.origin}: do_crop_margin: PPFormulaNetImageProcessor crops each image to "
            "the box of its pixels darker than a threshold of its own greyscale range, a crop "
            "found from the pixels, which mmfast does not compute (its plans come from image "
            "sizes); pass do_crop_margin=False (with images already cropped) to run on mmfast"
        )
    size_value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"height": 768, "width": 768} if size_value is None else size_value,
        cfg.flag("default_to_square", True),
    )
    if set(size) != {"height", "width"}:
        raise cfg.error("size", "height and width", size)
    if cfg.flag("do_align_long_axis", False) and size["height"] != size["width"]:
        raise UnsupportedModelError(
            f"{source.origin}: do_align_long_axis: with a size that is not square "
            f"({size['height']}x{size['width']}) it rotates images by 90 degrees, which "
            "mmfast's engine does not do"
        )
    norm = cfg.normalization(FORMULA_MEAN, FORMULA_STD)
    return PPFormulaNetConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        # The class sets no do_convert_rgb: None, read as off.
        do_convert_rgb=cfg.flag("do_convert_rgb", False),
        do_resize=cfg.flag("do_resize", True),
        size=(size["height"], size["width"]),
        resample=cfg.resample(BILINEAR),
        do_thumbnail=cfg.flag("do_thumbnail", True),
        do_pad=cfg.flag("do_pad", True),
        **norm.fields(),
    )


registry.register(
    registry.Family(
        name="pp_formulanet",
        processor_types=("PPFormulaNetImageProcessor",),
        model_types={"pp_formulanet": "PPFormulaNetImageProcessor"},
        build=_build,
        kwargs=frozenset({"do_crop_margin", "do_thumbnail", "do_align_long_axis"}),
        processor_classes={"PPFormulaNetProcessor": "pp_formulanet"},
        hf_pil=None,
        hf_torchvision="pp_formulanet.image_processing_pp_formulanet.PPFormulaNetImageProcessor",
        backends=("torchvision",),
    )
)

# PaddlePaddle/PP-FormulaNet_plus-L_safetensors (the checkpoint transformers' docs and
# config name): no public copy of its preprocessor_config.json was found. The values are
# PPFormulaNetImageProcessor's class defaults (768x768, bilinear, crop margin, thumbnail,
# centred pad, mean 0.7931 / std 0.1738), which transformers' modular file wrote for the
# checkpoint. Unconfirmed. do_crop_margin is on: mmfast refuses the file as it is
# (UnsupportedModelError naming do_crop_margin) and runs it with do_crop_margin=False.
registry.register_builtin(
    "PaddlePaddle/PP-FormulaNet_plus-L_safetensors",
    "pp_formulanet",
    {
        "do_align_long_axis": False,
        "do_crop_margin": True,
        "do_normalize": True,
        "do_pad": True,
        "do_rescale": True,
        "do_resize": True,
        "do_thumbnail": True,
        "image_mean": list(FORMULA_MEAN),
        "image_processor_type": "PPFormulaNetImageProcessor",
        "image_std": list(FORMULA_STD),
        "processor_class": "PPFormulaNetProcessor",
        "resample": BILINEAR,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 768, "width": 768},
    },
)
