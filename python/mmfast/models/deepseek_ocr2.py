"""DeepSeek-OCR-2: ``DeepseekOcr2ImageProcessor`` (transformers 5.24).

Two views of each image. Local tiles, with ``crop_to_patches`` (which DeepseekOcr2Processor
always passes) and a side over ``tile_size``: the image resized to the grid of 2 to 6
``tile_size`` tiles whose aspect ratio is closest to its own and cut into them, into
``pixel_values_local`` (left out of a batch without tiles). A global view: the longest side
resized to ``size["height"]`` (``tile_size`` without ``crop_to_patches``), the image padded to a
square with ``background_color`` (uint8, before normalising), into ``pixel_values``.
``num_local_patches`` counts each image's tiles.
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
    BICUBIC,
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
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
from mmfast.models.config import MAX_INT, MAX_TILES, Fields, Source, is_int_in
from mmfast.models.geometry import CropBox
from mmfast.models.got_ocr2 import get_optimal_tiled_canvas

__all__ = ["DeepseekOcr2Config", "global_view_size"]


def global_view_size(height: int, width: int, target: int) -> tuple[int, int]:
    """The global view's (height, width) before its padding: the longest side to ``target``,
    ``round`` (banker's) on both. Mirrors ``DeepseekOcr2ImageProcessorPil._preprocess``."""
    scale = target / max(width, height)
    return round(height * scale), round(width * scale)


@dataclass(frozen=True)
class DeepseekOcr2Config(ModelConfig):
    """Settings of ``DeepseekOcr2ImageProcessor`` plus the two ``DeepseekOcr2Processor``
    values that count tokens (``patch_size`` 16, ``downsample_ratio`` 4).

    ``num_image_tokens``: DeepseekOcr2Processor's ``<image>`` tokens,
    ``ceil(size["height"] / patch_size / downsample_ratio) ** 2`` for the global view (256),
    ``ceil(tile_size / patch_size / downsample_ratio) ** 2`` per tile (144) and one separator.

    A call's ``background_color`` paints the PIL class's padding; the torchvision class keeps
    its own (the family's ``instance_settings``).
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    global_size: int
    tile_size: int
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    crop_to_patches: bool
    min_patches: int
    max_patches: int
    background_color: tuple[int, int, int]
    patch_size: int
    downsample_ratio: int

    # Which transformers backend the plan matches: "pil" or "torchvision".
    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "stack"
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_values": "rows", "num_local_patches": "ints", "pixel_values_local": "rows"}
    )
    # The local tiles are a second pixel output (written by the same native call), joined
    # along their first axis and left out of a batch without tiles (ModelConfig.pixel_shapes).
    pixel_keys: ClassVar[tuple[str, ...]] = ("pixel_values", "pixel_values_local")
    output_order: ClassVar[tuple[str, ...]] = (
        "pixel_values",
        "num_local_patches",
        "pixel_values_local",
    )
    counted_outputs: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_values_local": "num_local_patches"}
    )

    def target(self) -> int:
        """The global view's side."""
        return self.global_size if self.crop_to_patches else self.tile_size

    def tokens(self, tiles: int) -> int:
        """``DeepseekOcr2Processor.replace_image_token``'s count."""
        queries_global = math.ceil(self.global_size / self.patch_size / self.downsample_ratio)
        queries_local = math.ceil(self.tile_size / self.patch_size / self.downsample_ratio)
        return queries_global**2 + queries_local**2 * tiles + 1

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``DeepseekOcr2ImageProcessorPil._preprocess``, ``crop_image_to_patches``
        and ``pad_to_square`` for one image: the local tiles' view (if any), then the
        global view's."""
        check_image_size(height, width)
        views: list[View] = []
        t = self.tile_size
        tiles = 0
        if self.crop_to_patches and max(width, height) > t:
            columns, rows = get_optimal_tiled_canvas(
                (height, width), (t, t), self.min_patches, self.max_patches
            )
            windows = tuple(
                CropBox(r * t, c * t, t, t) for r in range(rows) for c in range(columns)
            )
            canvas = (t * rows, t * columns)
            views.append(
                View(resize=resizer(self.backend, canvas, self.resample), out=windows, output=1)
            )
            tiles = len(windows)
        target = self.target()
        resized = global_view_size(height, width, target)
        if min(resized) < 1:
            raise MmfastError(
                f"image size: a {height}x{width} image's global view resizes to "
                f"{resized[0]}x{resized[1]} (its longest side to {target})"
            )
        side = max(resized)
        fill = self.background_color
        pad = Pad((side, side), (side - resized[0]) // 2, (side - resized[1]) // 2, fill)
        views.append(
            View(
                resize=resizer(self.backend, resized, self.resample),
                pad=pad,
                out=(CropBox(0, 0, side, side),),
            )
        )
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=True,
            resize_size=resized,
            resample=self.resample,
            crop=None,
            canvas_size=(side, side),
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType(
                {
                    "pixel_values": (3, side, side),
                    "num_local_patches": (),
                    "pixel_values_local": (tiles, 3, t, t),
                }
            ),
            num_image_tokens=self.tokens(tiles),
            views=tuple(views),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """HF's arithmetic; with rescale and normalise both off, both classes hand back the
        uint8 pixels."""
        if plan.do_rescale or plan.do_normalize:
            return super().tables(plan)
        return identity_table()

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``num_local_patches``: each image's tiles, int64 (B,)."""
        tiles = [p.output_shapes["pixel_values_local"][0] for p in plans]
        return {"num_local_patches": np.array(tiles, np.int64)}


def _background(cfg: Fields, name: str, value: object) -> tuple[int, int, int]:
    """A ``background_color``: three uint8 values, or one for the first channel (the others
    0), as ``pad_to_square`` reads an int."""
    if is_int_in(value, 0, 255):
        return (int(value), 0, 0)  # type: ignore[call-overload]
    if (
        isinstance(value, list | tuple)
        and len(value) == 3
        and all(is_int_in(v, 0, 255) for v in value)
    ):
        return (int(value[0]), int(value[1]), int(value[2]))
    raise cfg.error(name, "an integer 0-255 or a list of 3 of them (one per RGB channel)", value)


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> DeepseekOcr2Config:
    """Mirrors ``DeepseekOcr2ImageProcessorPil``'s class defaults (only ``size["height"]`` is
    read; ``do_resize`` is not: both views are always resized) and ``DeepseekOcr2Processor``'s
    ``patch_size`` and ``downsample_ratio``."""
    size_value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"height": 1024, "width": 1024} if size_value is None else size_value,
        cfg.flag("default_to_square", True),
    )
    if "height" not in size:
        raise cfg.error("size", "a {height, width} size (its height is the global view's)", size)
    cfg.flag("do_resize", True)  # read and checked; both views are always resized
    background = cfg.raw("background_color")
    norm = cfg.normalization(IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD)
    return DeepseekOcr2Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        global_size=size["height"],
        tile_size=cfg.positive_int("tile_size", 768),
        resample=cfg.resample(BICUBIC),
        **norm.fields(),
        crop_to_patches=cfg.flag("crop_to_patches", True),
        min_patches=cfg.positive_int("min_patches", 2, MAX_TILES),
        max_patches=cfg.positive_int("max_patches", 6, MAX_TILES),
        background_color=_background(
            cfg, "background_color", [127, 127, 127] if background is None else background
        ),
        patch_size=processor.positive_int("patch_size", 16),
        downsample_ratio=processor.int_in("downsample_ratio", 4, 1, MAX_INT),
    )


registry.register(
    registry.Family(
        name="deepseek_ocr2",
        processor_types=("DeepseekOcr2ImageProcessor",),
        model_types={"deepseek_ocr2": "DeepseekOcr2ImageProcessor"},
        build=_build,
        kwargs=frozenset(
            {"crop_to_patches", "min_patches", "max_patches", "tile_size", "background_color"}
        ),
        processor_kwargs=frozenset({"patch_size", "downsample_ratio"}),
        processor_classes={"DeepseekOcr2Processor": "deepseek_ocr2"},
        processor_defaults={
            "DeepseekOcr2Processor": {"crop_to_patches": True, "min_patches": 2, "max_patches": 6}
        },
        # DeepseekOcr2ImageProcessor pads with self.background_color, whatever a call passes.
        instance_settings=frozenset({"background_color"}),
        hf_pil="deepseek_ocr2.image_processing_pil_deepseek_ocr2.DeepseekOcr2ImageProcessorPil",
        hf_torchvision="deepseek_ocr2.image_processing_deepseek_ocr2.DeepseekOcr2ImageProcessor",
    )
)

# deepseek-community/DeepSeek-OCR-2 (the checkpoint transformers' docs name): no public copy of
# its files was found. transformers' conversion script (convert_deepseek_ocr2_weights_to_hf.py)
# saves DeepseekOcr2ImageProcessor() and DeepseekOcr2Processor(image_processor, tokenizer): the
# class defaults below (1024 global view, 768 tiles, grey 127 padding, mean/std 0.5, bicubic)
# and patch_size 16, downsample_ratio 4; a transformers test counts 257 and 1121 <image> tokens
# with them. Unconfirmed as a file.
registry.register_builtin(
    "deepseek-community/DeepSeek-OCR-2",
    "deepseek_ocr2",
    {
        "background_color": [127, 127, 127],
        "crop_to_patches": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(IMAGENET_STANDARD_MEAN),
        "image_processor_type": "DeepseekOcr2ImageProcessor",
        "image_std": list(IMAGENET_STANDARD_STD),
        "max_patches": 6,
        "min_patches": 2,
        "processor_class": "DeepseekOcr2Processor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 1024, "width": 1024},
        "tile_size": 768,
    },
    {"patch_size": 16, "downsample_ratio": 4, "processor_class": "DeepseekOcr2Processor"},
)
