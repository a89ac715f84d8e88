"""LLaVA-NeXT: ``LlavaNextImageProcessor`` (transformers 5.24) and ``LlavaNextProcessor``'s
token count.

"anyres": the image is fitted without distortion into the best of ``image_grid_pinpoints``,
padded with black around the centre, and cut into ``crop_size`` patches; the whole image,
squashed to the base size, comes first. Each patch is then resized and centre-cropped as
``size`` and ``crop_size`` say (an identity for the checkpoints), rescaled and normalised. With
``do_pad`` (which LlavaNextProcessor always passes) the images' patch counts are padded with
zeros to the batch's largest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

import numpy as np

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    DEFAULT_MAX_PIXELS,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    ImagePlan,
    Pad,
    View,
    check_image_size,
    resizer,
)
from mmfast.models.base_video import FRAMES_IGNORES, FramesVideoConfig, frames_fields
from mmfast.models.config import MAX_INT, Fields, Source, is_int_in
from mmfast.models.geometry import (
    CropBox,
    center_crop_box,
    get_patch_output_size,
    select_best_resolution,
)
from mmfast.models.pil_backend import PilBackendConfig, pil_backend_fields, resize_output_size

__all__ = [
    "LlavaNextConfig",
    "LlavaNextVideoVideoConfig",
    "anyres_checked",
    "anyres_fields",
    "strategy",
    "unpadded_features",
]


def unpadded_features(
    height: int,
    width: int,
    patches_height: int,
    patches_width: int,
    scale_height: int,
    scale_width: int,
) -> tuple[int, int]:
    """(features, newline features) of the patch grid once the padding is cut off.

    Mirrors ``LlavaNextProcessor._get_unpadded_features``, its ``round(..., 7)`` included.
    """
    current_height = patches_height * scale_height
    current_width = patches_width * scale_width
    if width / height > current_width / current_height:
        new_height = int(round(height * (current_width / width), 7))
        current_height -= (current_height - new_height) // 2 * 2
    else:
        new_width = int(round(width * (current_height / height), 7))
        current_width -= (current_width - new_width) // 2 * 2
    return current_height * current_width, current_height


@dataclass(frozen=True)
class LlavaNextConfig(PilBackendConfig):
    """Settings of ``LlavaNextImageProcessor`` plus the ``LlavaNextProcessor`` values that
    count tokens (``patch_size``, ``num_additional_image_tokens``,
    ``vision_feature_select_strategy``, from ``processor_config.json``).

    ``num_image_tokens`` is the count of ``<image>`` tokens LlavaNextProcessor inserts: the
    base patch's features, the unpadded grid's features and one newline per grid row.
    """

    image_grid_pinpoints: tuple[tuple[int, int], ...]
    do_pad: bool
    patch_size: int
    num_additional_image_tokens: int
    vision_feature_select_strategy: str | None
    # Granite4VisionProcessor's: the patch grid scaled by it (a fraction) before counting.
    downsample_rate: Fraction | None = field(default=None, kw_only=True)

    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_values": "rows", "image_sizes": "tuples"}
    )

    def layout(self) -> str:
        """Zero-padded per image with ``do_pad``; stacked (equal patch counts) without."""
        return "pad_images" if self.do_pad else "stack"

    def base_size(self) -> tuple[int, int]:
        """The size the whole image is squashed to for the base patch."""
        if "height" in self.size and "width" in self.size:
            return self.size["height"], self.size["width"]
        return self.size["shortest_edge"], self.size["shortest_edge"]

    def patch_side(self) -> int:
        """The side of the grid patches: ``crop_size``'s height, else ``size``'s."""
        if self.crop_size[0]:
            return self.crop_size[0]
        return self.size.get("height") or self.size["shortest_edge"]

    def finish(self, source: int, crop: CropBox | None, size: tuple[int, int]) -> View:
        """A patch (``crop`` of view ``source``'s pixels, ``size`` big) through the processor's
        per-patch resize and centre crop."""
        resized = resize_output_size(*size, self.size) if self.do_resize else size
        window = (
            center_crop_box(*resized, *self.crop_size, self.backend)
            if self.do_center_crop
            else CropBox(0, 0, *resized)
        )
        resize = resizer(self.backend, resized, self.resample) if self.do_resize else None
        return View(source=source, crop=crop, resize=resize, out=(window,))

    def anyres_views(self, height: int, width: int) -> tuple[View, ...]:
        """``get_image_patches``: the base image, then the padded best-fit canvas's patches."""
        base = self.base_size()
        best = select_best_resolution((height, width), self.image_grid_pinpoints)
        fit = get_patch_output_size(height, width, best)
        top, left = (best[0] - fit[0]) // 2, (best[1] - fit[1]) // 2
        views = [
            View(resize=resizer(self.backend, base, self.resample)),
            self.finish(0, None, base),
            View(resize=resizer(self.backend, fit, self.resample), pad=Pad(best, top, left)),
        ]
        side = self.patch_side()
        for y in range(0, best[0], side):
            for x in range(0, best[1], side):
                box = CropBox(y, x, min(side, best[0] - y), min(side, best[1] - x))
                views.append(self.finish(2, box, (box.height, box.width)))
        return tuple(views)

    def count_tokens(self, height: int, width: int) -> int:
        """Replaced per image in :meth:`plan` (the count needs the original size)."""
        return 0

    def features(self, height: int, width: int, out_height: int, out_width: int) -> int:
        """``LlavaNextProcessor._get_number_of_features`` for an image processed to patches of
        ``out_height`` x ``out_width``."""
        best_height, best_width = select_best_resolution((height, width), self.image_grid_pinpoints)
        patches_height = out_height // self.patch_size
        patches_width = out_width // self.patch_size
        if self.downsample_rate is not None:  # Granite4VisionProcessor
            patches_height = int(patches_height * self.downsample_rate)
            patches_width = int(patches_width * self.downsample_rate)
        scale_height, scale_width = best_height // out_height, best_width // out_width
        if not (patches_height * scale_height and patches_width * scale_width):
            # LlavaNextProcessor divides by the grid's sides (ZeroDivisionError there).
            raise MmfastError(
                f"image size: the tokens of a {height}x{width} image cannot be counted: its "
                f"{out_height}x{out_width} patches of the {best_height}x{best_width} best fit "
                f"give a grid of {patches_height * scale_height}x{patches_width * scale_width} "
                "features (size, crop_size or patch_size against image_grid_pinpoints)"
            )
        unpadded, newlines = unpadded_features(
            height, width, patches_height, patches_width, scale_height, scale_width
        )
        return (
            unpadded + newlines + patches_height * patches_width + self.num_additional_image_tokens
        )

    def tokens(self, height: int, width: int, out_height: int, out_width: int) -> int:
        """``LlavaNextProcessor.replace_image_token``'s count."""
        tokens = self.features(height, width, out_height, out_width)
        return tokens - (self.vision_feature_select_strategy == "default")

    def patch_plan(self, height: int, width: int, views: tuple[View, ...]) -> ImagePlan:
        """The plan of an image whose output is ``views``' windows, one per patch."""
        plan = super().plan(height, width)
        shapes = {(w.height, w.width) for v in views for w in v.windows}
        if len(shapes) != 1:
            raise MmfastError(
                f"image size: a {height}x{width} image gives patches of sizes {sorted(shapes)}, "
                "which transformers cannot stack (do_resize or do_center_crop is off)"
            )
        out_h, out_w = shapes.pop()
        patches = sum(len(v.windows) for v in views)
        return replace(
            plan,
            output_shapes=MappingProxyType(
                {"pixel_values": (patches, 3, out_h, out_w), "image_sizes": (2,)}
            ),
            num_image_tokens=self.tokens(height, width, out_h, out_w),
            views=views,
        )

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``LlavaNextImageProcessorPil._preprocess`` for one image."""
        check_image_size(height, width)  # before the best fit divides by the sides
        return self.patch_plan(height, width, self.anyres_views(height, width))

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_sizes``: (B, 2) int64 original (height, width) of each image."""
        return {"image_sizes": np.array([(p.height, p.width) for p in plans], np.int64)}


def anyres_fields(cfg: Fields, pinpoints: Sequence[Sequence[int]]) -> dict[str, Any]:
    """``image_grid_pinpoints`` and ``do_pad`` from a config, given the class's pinpoints."""
    value = cfg.raw("image_grid_pinpoints")
    value = pinpoints if value is None else value
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(
            isinstance(p, list | tuple) and len(p) == 2 and all(is_int_in(v, 1, MAX_INT) for v in p)
            for p in value
        )
    ):
        raise cfg.error("image_grid_pinpoints", "a list of [height, width] pairs", value)
    if any(h * w > DEFAULT_MAX_PIXELS for h, w in value):
        raise cfg.error(
            "image_grid_pinpoints", f"canvases of at most {DEFAULT_MAX_PIXELS} pixels", value
        )
    return {
        "image_grid_pinpoints": tuple((p[0], p[1]) for p in value),
        "do_pad": cfg.flag("do_pad", True),
    }


AnyresConfig = TypeVar("AnyresConfig", bound=LlavaNextConfig)


def anyres_checked(config: AnyresConfig, cfg: Fields) -> AnyresConfig:
    """``config``, once its sizes make a grid of patches (transformers fails on the others
    with ZeroDivisionError or KeyError while counting tokens)."""
    if "shortest_edge" not in config.size and not {"height", "width"} <= config.size.keys():
        raise cfg.error("size", "{shortest_edge} or {height, width}", dict(config.size))
    side = config.patch_side()
    if side < config.patch_size:
        raise cfg.error(
            "crop_size", f"patches of at least patch_size={config.patch_size} pixels", side
        )
    if any(min(p) < side for p in config.image_grid_pinpoints):
        raise cfg.error(
            "image_grid_pinpoints",
            f"sides of at least the patch side, {side}",
            [list(p) for p in config.image_grid_pinpoints],
        )
    return config


def strategy(processor: Fields) -> str | None:
    """``vision_feature_select_strategy`` from ``processor_config.json``."""
    strategy = processor.raw("vision_feature_select_strategy")
    if strategy is not None and not isinstance(strategy, str):
        raise processor.error("vision_feature_select_strategy", "a string", strategy)
    return strategy


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> LlavaNextConfig:
    """Mirrors ``LlavaNextImageProcessorPil``'s class defaults and ``LlavaNextProcessor``'s."""
    config = LlavaNextConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **pil_backend_fields(
            cfg,
            size={"shortest_edge": 224},
            default_to_square=False,
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            do_center_crop=True,
            pads=True,
        ),
        **anyres_fields(cfg, [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]),
        # The processor has no default patch size; LLaVA-NeXT's CLIP tower uses 14.
        patch_size=processor.positive_int("patch_size", 14),
        num_additional_image_tokens=processor.int_in("num_additional_image_tokens", 0, 0, MAX_INT),
        vision_feature_select_strategy=strategy(processor),
        downsample_rate=downsample_rate(processor),
    )
    return anyres_checked(config, cfg)


def downsample_rate(processor: Fields) -> Fraction | None:
    """Granite4VisionProcessor's ``downsample_rate`` (``Fraction(value)``: "1/2", 0.5, ...)."""
    value = processor.raw("downsample_rate")
    if value is None:
        return None
    try:
        rate = Fraction(value) if isinstance(value, (str, int, float)) else None
    except (ValueError, ZeroDivisionError, OverflowError):
        rate = None
    if rate is None or isinstance(value, bool) or not 0 < rate <= 1:
        raise processor.error("downsample_rate", "a fraction in (0, 1] ('1/2', 0.5, ...)", value)
    return rate


registry.register(
    registry.Family(
        name="llava_next",
        processor_types=("LlavaNextImageProcessor",),
        model_types={
            "llava_next": "LlavaNextImageProcessor",
            "llava_next_video": "LlavaNextImageProcessor",
            "granite4_vision": "LlavaNextImageProcessor",
        },
        build=_build,
        kwargs=frozenset({"image_grid_pinpoints"}),
        init_kwargs=frozenset({"aspect_ratio_setting"}),
        processor_kwargs=frozenset(
            {
                "patch_size",
                "num_additional_image_tokens",
                "vision_feature_select_strategy",
                "downsample_rate",
            }
        ),
        processor_classes={
            "LlavaNextProcessor": "llava_next",
            "LlavaNextVideoProcessor": "llava_next_video",
            "Granite4VisionProcessor": "granite4_vision",
        },
        processor_defaults={
            "LlavaNextProcessor": {"do_pad": True},
            "Granite4VisionProcessor": {"do_pad": True},
        },
        hf_pil="llava_next.image_processing_pil_llava_next.LlavaNextImageProcessorPil",
        hf_torchvision="llava_next.image_processing_llava_next.LlavaNextImageProcessor",
    )
)

# llava-hf/llava-v1.6-mistral-7b-hf: the processor printed after loading the checkpoint, and an
# independent table of the same defaults. processor_config.json (patch 14, one CLS token, the
# "default" strategy) from a LLaVA-NeXT conversion of the same tower; not seen for this one.
registry.register_builtin(
    "llava-hf/llava-v1.6-mistral-7b-hf",
    "llava_next",
    {
        "aspect_ratio_setting": "anyres",
        "crop_size": {"height": 336, "width": 336},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_pad": True,
        "do_rescale": True,
        "do_resize": True,
        "image_grid_pinpoints": [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]],
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "LlavaNextImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "processor_class": "LlavaNextProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"shortest_edge": 336},
    },
    {
        "num_additional_image_tokens": 1,
        "patch_size": 14,
        "vision_feature_select_strategy": "default",
    },
)


# llava-hf/LLaVA-NeXT-Video-7B-hf: transformers' converter
# (convert_llava_next_video_weights_to_hf.py) builds both processors with from_pretrained of
# openai/clip-vit-large-patch14-336, whose CLIP file gives shortest edge 336, a 336x336 centre
# crop, OpenAI CLIP mean/std and bicubic, over LlavaNextImageProcessor's defaults (pinpoints,
# padding). Both were saved to preprocessor_config.json, the image processor last, and
# AutoVideoProcessor reads that file where a checkpoint has no video file, so the video
# processor sees the same settings. processor_config.json (patch 14, the "default" strategy,
# one CLS token) as for LLaVA-NeXT's checkpoints of the same tower. Derived, not seen.
registry.register_builtin(
    "llava-hf/LLaVA-NeXT-Video-7B-hf",
    "llava_next_video",
    {
        "crop_size": {"height": 336, "width": 336},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_pad": True,
        "do_rescale": True,
        "do_resize": True,
        "image_grid_pinpoints": [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]],
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "LlavaNextImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "processor_class": "LlavaNextVideoProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"shortest_edge": 336},
    },
    {
        "num_additional_image_tokens": 1,
        "patch_size": 14,
        "processor_class": "LlavaNextVideoProcessor",
        "vision_feature_select_strategy": "default",
    },
)


# --------------------------------------------------------------------------------------------
# Video: LlavaNextVideoVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LlavaNextVideoVideoConfig(FramesVideoConfig):
    """Settings of ``LlavaNextVideoVideoProcessor`` (LLaVA-NeXT-Video): the base pipeline,
    each frame's shortest edge resized to ``size`` then centre cropped to ``crop_size``
    (224 and 224x224 by default).

    ``num_video_tokens`` is the count of ``<video>`` tokens LlavaNextVideoProcessor inserts:
    per frame ``(H // patch_size) * (W // patch_size) // 4`` for the processed H x W frame
    (``frame_tokens`` holds the processor's ``patch_size``).
    """

    def tokens_per_frame(self, height: int, width: int) -> int:
        """``replace_video_token``: the frame's patches, pooled 2x2."""
        patch = self.frame_tokens
        return (height // patch) * (width // patch) // 4


def _build_video(model_id: str | None, cfg: Fields) -> LlavaNextVideoVideoConfig:
    """Mirrors ``LlavaNextVideoVideoProcessor``'s class defaults; the processor's
    ``patch_size`` (no default there; LLaVA-NeXT-Video's CLIP tower uses 14) counts tokens."""
    return LlavaNextVideoVideoConfig(
        model_id=model_id,
        video_processor_type="LlavaNextVideoVideoProcessor",
        **frames_fields(
            cfg,
            size={"shortest_edge": 224},
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            default_to_square=False,
            crop_size={"height": 224, "width": 224},
            do_center_crop=True,
        ),
        frame_tokens=cfg.positive_int("patch_size", 14),
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="LlavaNextVideoVideoProcessor",
        model_types=("llava_next_video",),
        build=_build_video,
        kwargs=frozenset(),
        ignores=FRAMES_IGNORES,
        processor_kwargs=frozenset({"patch_size"}),
    )
)
