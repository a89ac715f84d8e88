"""Aria: ``AriaImageProcessor`` and its PIL class (transformers 5.24), and ``AriaProcessor``'s
token count.

Each image (or, with ``split_image``, each ``max_image_size`` crop of the image fitted without
distortion into the best of ``split_resolutions`` and padded around the centre, as LLaVA-NeXT
fits it) is resized so that its longer side is ``max_image_size`` and its shorter side at least
``min_image_size``, padded with black at the bottom and right to a ``max_image_size`` square,
and normalised; ``pixel_mask`` marks the resized pixels. ``num_crops`` is the largest crop
count of the batch. AriaProcessor passes ``max_image_size=980`` and ``split_image=False`` on
every call, so a checkpoint's processor splits only when a call asks it to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    DEFAULT_MAX_PIXELS,
    HALF,
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
from mmfast.models.config import MAX_INT, Fields, Source, is_int_in
from mmfast.models.geometry import CropBox, get_patch_output_size, select_best_resolution

__all__ = ["AriaConfig", "aria_crop_size", "default_split_resolutions"]

# AriaImageProcessor.__init__'s split_resolutions, in units of 490 pixels.
_DEFAULT_RATIOS = (
    (1, 2), (1, 3), (1, 4), (1, 5), (1, 6), (1, 7), (1, 8), (2, 4), (2, 3), (2, 2),
    (2, 1), (3, 1), (3, 2), (4, 1), (4, 2), (5, 1), (6, 1), (7, 1), (8, 1),
)  # fmt: skip


def default_split_resolutions() -> tuple[tuple[int, int], ...]:
    """``AriaImageProcessor.__init__``'s resolutions when the config has none."""
    return tuple((h * 490, w * 490) for h, w in _DEFAULT_RATIOS)


def aria_crop_size(
    height: int, width: int, max_image_size: int, min_image_size: int
) -> tuple[int, int]:
    """The size a crop is resized to in ``AriaImageProcessor._preprocess``: the longer side to
    ``max_image_size`` (the width on a tie), the other scaled and truncated with ``int()``,
    then raised to ``min_image_size``."""
    scale = max_image_size / max(height, width)
    if width >= height:
        return max(int(height * scale), min_image_size), max_image_size
    return max_image_size, max(int(width * scale), min_image_size)


@dataclass(frozen=True)
class AriaConfig(ModelConfig):
    """Settings of ``AriaImageProcessor`` plus ``AriaProcessor``'s ``size_conversion`` (from
    ``processor_config.json``): ``num_image_tokens`` is its ``<|img|>`` count for one image,
    ``size_conversion[max_image_size]`` per crop (256 at 980 pixels, 128 at 490)."""

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    max_image_size: int
    min_image_size: int
    split_image: bool
    split_resolutions: tuple[tuple[int, int], ...]
    tokens_per_crop: int

    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "concat"
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({"num_crops": "int"})
    counted_outputs: ClassVar[Mapping[str, str]] = MappingProxyType({"pixel_mask": "pixel_values"})
    # num_crops is the batch's largest crop count.
    batch_shapes_images: ClassVar[bool] = True

    def split(self, height: int, width: int) -> tuple[View, list[CropBox]]:
        """``get_image_patches``: the image fitted into the best resolution and padded with
        black around its centre (``_get_padding_size``: the odd pixel after), as a view; and
        its ``max_image_size`` squares (cut short at the edges), in raster order."""
        best = select_best_resolution((height, width), self.split_resolutions)
        fit = get_patch_output_size(height, width, best)
        top, left = (best[0] - fit[0]) // 2, (best[1] - fit[1]) // 2
        canvas = View(resize=resizer(self.backend, fit, self.resample), pad=Pad(best, top, left))
        side = self.max_image_size
        boxes = [
            CropBox(y, x, min(side, best[0] - y), min(side, best[1] - x))
            for y in range(0, best[0], side)
            for x in range(0, best[1], side)
        ]
        return canvas, boxes

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``AriaImageProcessorPil._preprocess`` for one image (the torchvision class
        does the same with torchvision's resize): each crop (the image itself without
        ``split_image``) resized by :func:`aria_crop_size` and padded with black to the
        ``max_image_size`` square, which is the window reaching past its pixels."""
        check_image_size(height, width)
        side = self.max_image_size
        views: list[View] = []
        pieces: list[tuple[int | None, CropBox | None, tuple[int, int]]] = [
            (None, None, (height, width))
        ]
        if self.split_image:
            canvas, boxes = self.split(height, width)
            views.append(canvas)
            pieces = [(0, box, (box.height, box.width)) for box in boxes]
        for source, box, size in pieces:
            resized = aria_crop_size(*size, side, self.min_image_size)
            views.append(
                View(
                    source=source,
                    crop=box,
                    resize=resizer(self.backend, resized, self.resample),
                    out=(CropBox(0, 0, side, side),),
                )
            )
        count = len(pieces)
        first = views[-count].resize
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=True,
            resize_size=first.size if first else (height, width),
            resample=self.resample,
            crop=None,
            canvas_size=(side, side),
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType(
                {"pixel_values": (count, 3, side, side), "pixel_mask": (count, side, side)}
            ),
            num_image_tokens=count * self.tokens_per_crop,
            views=tuple(views),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """HF's arithmetic; with rescale and normalise both off, both classes hand back the
        padded uint8 pixels."""
        if plan.do_rescale or plan.do_normalize:
            return super().tables(plan)
        return identity_table()

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``pixel_mask`` (crops, side, side) bool, True over each crop's resized pixels;
        ``num_crops``: the batch's largest crop count, a 0-d int64."""
        side = self.max_image_size
        sizes = [v.resize.size for p in plans for v in p.views if v.out is not None and v.resize]
        mask = np.zeros((len(sizes), side, side), bool)
        for i, (h, w) in enumerate(sizes):
            mask[i, :h, :w] = True
        crops = max(p.output_shapes["pixel_values"][0] for p in plans)
        return {"pixel_mask": mask, "num_crops": np.array(crops, np.int64)}


def _resolutions(cfg: Fields) -> tuple[tuple[int, int], ...]:
    value = cfg.raw("split_resolutions")
    if value is None:
        return default_split_resolutions()
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(
            isinstance(p, list | tuple) and len(p) == 2 and all(is_int_in(v, 1, MAX_INT) for v in p)
            for p in value
        )
    ):
        raise cfg.error("split_resolutions", "a list of [height, width] pairs", value)
    if any(h * w > DEFAULT_MAX_PIXELS for h, w in value):
        raise cfg.error(
            "split_resolutions", f"canvases of at most {DEFAULT_MAX_PIXELS} pixels", value
        )
    return tuple((int(h), int(w)) for h, w in value)


def _size_conversion(processor: Fields) -> dict[int, int]:
    """``AriaProcessor.__init__``'s ``size_conversion``: keys read with ``int()``."""
    value = processor.raw("size_conversion")
    if value is None:
        return {490: 128, 980: 256}
    if not isinstance(value, dict):
        raise processor.error("size_conversion", "a mapping of crop sizes to token counts", value)
    result: dict[int, int] = {}
    for key, count in value.items():
        try:
            size = int(key)
        except (TypeError, ValueError):
            raise processor.error("size_conversion", "integer crop sizes", value) from None
        if not is_int_in(count, 0, MAX_INT):
            raise processor.error(f"size_conversion.{key}", "a token count", count)
        result[size] = count
    return result


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> AriaConfig:
    """Mirrors ``AriaImageProcessorPil``'s class defaults and ``__init__``, and the checks of
    its ``_preprocess`` (``max_image_size`` 490 or 980)."""
    max_size = cfg.positive_int("max_image_size", 980)
    if max_size not in (490, 980):
        raise cfg.error("max_image_size", "490 or 980", max_size)
    min_size = cfg.positive_int("min_image_size", 336)
    if min_size > max_size:
        # transformers' pad to the square would need a negative width (numpy refuses it).
        raise cfg.error("min_image_size", f"at most max_image_size ({max_size})", min_size)
    conversion = _size_conversion(processor)
    if max_size not in conversion:
        raise processor.error(
            "size_conversion", f"a token count for max_image_size {max_size}", conversion
        )
    # The class has no size and never reads one; transformers still checks a file's size
    # dict, and refuses do_resize=True without a size (validate_preprocess_arguments).
    size = cfg.raw("size")
    if size is not None:
        cfg.size_dict("size", size, cfg.flag("default_to_square", True))
    if cfg.flag("do_resize", False) and size is None:
        raise cfg.error("do_resize", "false or null (transformers needs a size to resize)", True)
    norm = cfg.normalization(HALF, HALF)
    return AriaConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        resample=cfg.resample(BICUBIC),
        **norm.fields(),
        max_image_size=max_size,
        min_image_size=min_size,
        split_image=cfg.flag("split_image", False),
        split_resolutions=_resolutions(cfg),
        tokens_per_crop=conversion[max_size],
    )


registry.register(
    registry.Family(
        name="aria",
        processor_types=("AriaImageProcessor",),
        model_types={"aria": "AriaImageProcessor"},
        build=_build,
        kwargs=frozenset({"max_image_size", "min_image_size", "split_resolutions", "split_image"}),
        processor_kwargs=frozenset({"size_conversion"}),
        processor_classes={"AriaProcessor": "aria"},
        processor_defaults={"AriaProcessor": {"max_image_size": 980, "split_image": False}},
        hf_pil="aria.image_processing_pil_aria.AriaImageProcessorPil",
        hf_torchvision="aria.image_processing_aria.AriaImageProcessor",
    )
)

# rhymes-ai/Aria: the 980 and 336 sides and the 0.5 mean and std are those of the
# checkpoint's own processor code (rhymes-ai/Aria on GitHub, aria/model/vision_processor.py,
# AriaVisionProcessor's defaults), which transformers' class keeps; the file in its converted
# form (type name, split settings, processor_config.json) was not seen. size_conversion is
# AriaProcessor's default, {490: 128, 980: 256}; bicubic and the rescale factor are the
# class's (the original code resizes with bicubic too).
registry.register_builtin(
    "rhymes-ai/Aria",
    "aria",
    {
        "image_mean": list(HALF),
        "image_processor_type": "AriaImageProcessor",
        "image_std": list(HALF),
        "max_image_size": 980,
        "min_image_size": 336,
        "processor_class": "AriaProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "split_image": False,
    },
    {"size_conversion": {"490": 128, "980": 256}},
)
