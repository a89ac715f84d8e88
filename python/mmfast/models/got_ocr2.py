"""InternVL 3 / 3.5 and Aya Vision: ``GotOcr2ImageProcessor`` (transformers 5.24).

With ``crop_to_patches`` (which InternVLProcessor and AyaVisionProcessor always pass), the image
is resized to the tile grid whose aspect ratio is closest to its own (between ``min_patches`` and
``max_patches`` tiles) and cut into tiles, followed by a thumbnail (the whole image squashed to
one tile) when there is more than one; without it, the image is squashed to one tile.
``num_patches`` counts each image's tiles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from types import MappingProxyType
from typing import Any, ClassVar, Final

import numpy as np

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    HALF,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    ImagePlan,
    View,
    resizer,
)
from mmfast.models.base_video import (
    FRAMES_IGNORES,
    FramesVideoConfig,
    float32_arange,
    frames_fields,
)
from mmfast.models.config import MAX_TILES, Fields, Source, is_finite_number
from mmfast.models.geometry import CropBox
from mmfast.models.pil_backend import PilBackendConfig, pil_backend_fields

__all__ = [
    "GotOcr2Config",
    "InternVLVideoConfig",
    "get_all_supported_aspect_ratios",
    "get_optimal_tiled_canvas",
]

IMAGENET_DEFAULT_MEAN = (0.485, 0.456, 0.406)
IMAGENET_DEFAULT_STD = (0.229, 0.224, 0.225)


@lru_cache(maxsize=16)
def get_all_supported_aspect_ratios(min_tiles: int, max_tiles: int) -> list[tuple[int, int]]:
    """Every (columns, rows) grid of ``min_tiles`` to ``max_tiles`` tiles, by tile count.

    Mirrors ``image_processing_got_ocr2.get_all_supported_aspect_ratios``, order included
    (a stable sort of the width-major enumeration).
    """
    grids = [
        (width, height)
        for width in range(1, max_tiles + 1)
        for height in range(1, max_tiles + 1)
        if min_tiles <= width * height <= max_tiles
    ]
    return sorted(grids, key=lambda grid: grid[0] * grid[1])


def get_optimal_tiled_canvas(
    original_size: tuple[int, int],
    tile_size: tuple[int, int],
    min_tiles: int,
    max_tiles: int,
) -> tuple[int, int]:
    """The (columns, rows) grid whose aspect ratio is closest to the image's.

    Mirrors ``image_processing_got_ocr2.get_optimal_tiled_canvas``: on a tie the grid with more
    tiles wins while the image's area is over half the grid's.
    """
    original_height, original_width = original_size
    tile_height, tile_width = tile_size
    aspect_ratio = original_width / original_height
    area = original_width * original_height
    best_ratio_diff = float("inf")
    best_grid = (1, 1)
    for grid in get_all_supported_aspect_ratios(min_tiles, max_tiles):
        ratio_diff = abs(aspect_ratio - grid[0] / grid[1])
        if ratio_diff < best_ratio_diff:
            best_ratio_diff = ratio_diff
            best_grid = grid
        elif ratio_diff == best_ratio_diff and (
            area > 0.5 * tile_height * tile_width * grid[0] * grid[1]
        ):
            best_grid = grid
    return best_grid


@dataclass(frozen=True)
class GotOcr2Config(PilBackendConfig):
    """Settings of ``GotOcr2ImageProcessor`` plus the token counts of the processors using it.

    ``num_image_tokens``: InternVLProcessor's ``<img>``, ``image_seq_length`` context tokens
    per tile and ``</img>``; AyaVisionProcessor's start and end tokens, one ``TILE_i`` marker
    per tile and ``TILE_GLOBAL``, and ``(img_size // patch_size) ** 2`` patch tokens per tile
    (both as their ``_get_num_multimodal_tokens`` count).
    """

    crop_to_patches: bool
    min_patches: int
    max_patches: int
    processor_class: str | None
    image_seq_length: int
    tokens_per_tile: int

    batch_layout: ClassVar[str] = "concat"
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_values": "rows", "num_patches": "ints"}
    )

    def tiles(self, height: int, width: int) -> tuple[int, int]:
        """(columns, rows) of the tile grid."""
        tile = (self.size["height"], self.size["width"])
        return get_optimal_tiled_canvas((height, width), tile, self.min_patches, self.max_patches)

    def patch_tokens(self, num_patches: int) -> int:
        """The processor's tokens for an image of ``num_patches`` tiles (thumbnail included)."""
        if self.processor_class == "AyaVisionProcessor":
            return self.tokens_per_tile + 3 + (num_patches - 1) * (self.tokens_per_tile + 1)
        return 2 + self.image_seq_length * num_patches

    def count_tokens(self, height: int, width: int) -> int:
        """Tokens for an image squashed to one tile (no cropping)."""
        return self.patch_tokens(1)

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``GotOcr2ImageProcessorPil._preprocess`` and ``crop_image_to_patches``
        (the torchvision class crops whenever ``crop_to_patches`` is on, the PIL class only
        with ``max_patches > 1``)."""
        plan = super().plan(height, width)
        views = plan.views
        item = plan.output_shapes["pixel_values"]
        if self.crop_to_patches and (self.max_patches > 1 or self.backend == "torchvision"):
            columns, rows = self.tiles(height, width)
            tile_h, tile_w = self.size["height"], self.size["width"]
            windows = tuple(
                CropBox(r * tile_h, c * tile_w, tile_h, tile_w)
                for r in range(rows)
                for c in range(columns)
            )
            # crop_image_to_patches resizes whatever do_resize says.
            canvas = (tile_h * rows, tile_w * columns)
            item = (3, tile_h, tile_w)
            views = (View(resize=resizer(self.backend, canvas, self.resample), out=windows),)
            if len(windows) > 1:
                thumbnail = resizer(self.backend, (tile_h, tile_w), self.resample)
                views += (View(resize=thumbnail, out=(CropBox(0, 0, tile_h, tile_w),)),)
        num_patches = sum(len(view.windows) for view in views)
        return replace(
            plan,
            output_shapes=MappingProxyType(
                {
                    "pixel_values": (num_patches, *item),
                    "num_patches": (),
                }
            ),
            num_image_tokens=self.patch_tokens(num_patches),
            views=views,
        )

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``num_patches``: (B,) int64 tiles per image, thumbnail included."""
        return {
            "num_patches": np.array([p.output_shapes["pixel_values"][0] for p in plans], np.int64)
        }


# The processors that use the class, by the model type AutoProcessor gives them.
PROCESSOR_CLASSES: Final = MappingProxyType(
    {
        "InternVLProcessor": "internvl",
        "AyaVisionProcessor": "aya_vision",
        "GotOcr2Processor": "got_ocr2",
        # Counts InternVL's way: <img>, image_seq_length per tile, </img>.
        "QianfanOCRProcessor": "qianfan_ocr",
    }
)


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> GotOcr2Config:
    """Mirrors ``GotOcr2ImageProcessorPil``'s class defaults; the processor values count tokens
    (``InternVLProcessor``: ``image_seq_length``, default 256; ``AyaVisionProcessor``:
    ``img_size``, ``patch_size`` and ``downsample_factor``, defaults 364, 28 and 1)."""
    fields = pil_backend_fields(
        cfg,
        size={"height": 384, "width": 384},
        default_to_square=True,
        resample=BICUBIC,
        mean=OPENAI_CLIP_MEAN,
        std=OPENAI_CLIP_STD,
    )
    crop_to_patches = cfg.flag("crop_to_patches", False)
    if crop_to_patches and set(fields["size"]) != {"height", "width"}:
        raise cfg.error(
            "size", "a {height, width} tile size (crop_to_patches is on)", dict(fields["size"])
        )
    patch = processor.positive_int("patch_size", 28) * processor.positive_int(
        "downsample_factor", 1
    )
    return GotOcr2Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **fields,
        crop_to_patches=crop_to_patches,
        min_patches=cfg.positive_int("min_patches", 1, MAX_TILES),
        max_patches=cfg.positive_int("max_patches", 12, MAX_TILES),
        processor_class=registry.source_processor_class(source, PROCESSOR_CLASSES),
        image_seq_length=processor.positive_int("image_seq_length", 256),
        tokens_per_tile=(processor.positive_int("img_size", 364) // patch) ** 2,
    )


registry.register(
    registry.Family(
        name="got_ocr2",
        processor_types=("GotOcr2ImageProcessor",),
        model_types={
            "got_ocr2": "GotOcr2ImageProcessor",
            "internvl": "GotOcr2ImageProcessor",
            "aya_vision": "GotOcr2ImageProcessor",
            "qianfan_ocr": "GotOcr2ImageProcessor",
        },
        build=_build,
        kwargs=frozenset({"crop_to_patches", "min_patches", "max_patches"}),
        processor_kwargs=frozenset(
            {"image_seq_length", "img_size", "patch_size", "downsample_factor"}
        ),
        processor_classes=PROCESSOR_CLASSES,
        processor_defaults={
            "InternVLProcessor": {"crop_to_patches": True},
            "AyaVisionProcessor": {"crop_to_patches": True},
            "GotOcr2Processor": {"crop_to_patches": False, "min_patches": 1, "max_patches": 12},
            "QianfanOCRProcessor": {"crop_to_patches": True},
        },
        hf_pil="got_ocr2.image_processing_pil_got_ocr2.GotOcr2ImageProcessorPil",
        hf_torchvision="got_ocr2.image_processing_got_ocr2.GotOcr2ImageProcessor",
    )
)

# OpenGVLab/InternVL3-8B-hf: a loaded-processor dump from a public issue log (the file itself
# was not seen): 448x448 tiles, ImageNet mean/std, bicubic, 1 to 12 tiles and crop_to_patches
# false (the processor passes true); InternVLProcessor's image_seq_length 256 agrees with a
# serving project's mock of the processor. InternVL3.5-8B-HF is reported the same.
_INTERNVL = {
    "crop_to_patches": False,
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": list(IMAGENET_DEFAULT_MEAN),
    "image_processor_type": "GotOcr2ImageProcessorFast",
    "image_std": list(IMAGENET_DEFAULT_STD),
    "max_patches": 12,
    "min_patches": 1,
    "processor_class": "InternVLProcessor",
    "resample": BICUBIC,
    "rescale_factor": 0.00392156862745098,
    "size": {"height": 448, "width": 448},
}
# Their video processor: transformers' converter (convert_internvl_weights_to_hf.py) builds it
# with InternVLVideoProcessor.from_pretrained on the converted checkpoint, whose only file then
# is this preprocessor_config.json, and saves it with the processor: the image settings read
# by the video class (448x448 squash, ImageNet mean/std, bicubic) over its class defaults
# (initial_shift true, do_sample_frames false). Derived from the converter, not seen.
_INTERNVL_VIDEO = {
    **{k: v for k, v in _INTERNVL.items() if k != "image_processor_type"},
    "do_sample_frames": False,
    "initial_shift": True,
    "video_processor_type": "InternVLVideoProcessor",
}
for _model_id in ("OpenGVLab/InternVL3-8B-hf", "OpenGVLab/InternVL3_5-8B-HF"):
    registry.register_builtin(
        _model_id,
        "internvl",
        _INTERNVL,
        {"image_seq_length": 256, "processor_class": "InternVLProcessor"},
        video=_INTERNVL_VIDEO,
    )

# CohereLabs/aya-vision-8b: no public copy of its files was found. 364x364 tiles with
# mean/std 0.5 (its SigLIP2 tower) and the processor's 364 image size, 14-pixel patches
# and 2x downsampling (169 tokens a tile) follow the model's design and transformers'
# AyaVisionProcessor defaults; unconfirmed.
registry.register_builtin(
    "CohereLabs/aya-vision-8b",
    "aya_vision",
    {
        "crop_to_patches": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_processor_type": "GotOcr2ImageProcessor",
        "image_std": list(HALF),
        "max_patches": 12,
        "min_patches": 1,
        "processor_class": "AyaVisionProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 364, "width": 364},
    },
    {"img_size": 364, "patch_size": 14, "downsample_factor": 2},
)


# --------------------------------------------------------------------------------------------
# Video: InternVLVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InternVLVideoConfig(FramesVideoConfig):
    """Settings of ``InternVLVideoProcessor``: the base pipeline (each frame squashed to
    ``size``, 384x384 by default) with its own sampler.

    ``num_video_tokens`` counts the special tokens InternVLProcessor's
    ``replace_video_token`` puts in the prompt for a clip: per frame ``<img>``,
    ``image_seq_length`` ``<IMG_CONTEXT>`` tokens and ``</img>`` (the ``FrameN:`` labels and
    the newlines between frames are text).
    """

    initial_shift: bool | float

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``InternVLVideoProcessor.sample_frames``: ``num_frames`` (or
        ``int(total / video_fps * fps)``) indices from ``torch.arange(initial_shift, total,
        total / num_frames).int()`` in float32, the shift half a step when it is true."""
        total = metadata.total_num_frames
        num_frames = self.num_frames if num_frames is None else num_frames
        if num_frames is None and fps is not None:
            if metadata.fps is None:
                raise MmfastError(
                    "video_fps: sampling at fps frames a second needs the clip's own frame rate"
                )
            num_frames = int(total / metadata.fps * fps)
        if num_frames is None:
            raise MmfastError(
                "num_frames: InternVLVideoProcessor samples num_frames frames, or fps frames a "
                "second; the call and the config give neither"
            )
        if num_frames == 0:
            # transformers divides by it (ZeroDivisionError).
            raise MmfastError(f"fps: {fps} frames a second of a {total}-frame clip is 0 frames")
        shift: float = self.initial_shift
        if self.initial_shift is True:
            shift = total / num_frames / 2
        if num_frames > total:
            raise MmfastError(
                f"num_frames: the clip has {total} frames, sampling asked for {num_frames}"
            )
        return float32_arange(shift, total, total / num_frames)


def _build_internvl_video(model_id: str | None, cfg: Fields) -> InternVLVideoConfig:
    """Mirrors ``InternVLVideoProcessor``'s class defaults; ``image_seq_length`` (the
    processor's, default 256) counts tokens."""
    shift = cfg.raw("initial_shift")
    if shift is None:
        shift = True
    elif isinstance(shift, bool):
        pass
    elif is_finite_number(shift):
        shift = float(shift)
    else:
        raise cfg.error("initial_shift", "true, false or a number", shift)
    return InternVLVideoConfig(
        model_id=model_id,
        video_processor_type="InternVLVideoProcessor",
        **frames_fields(
            cfg,
            size={"height": 384, "width": 384},
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            default_to_square=True,
        ),
        frame_tokens=cfg.positive_int("image_seq_length", 256) + 2,
        initial_shift=shift,
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="InternVLVideoProcessor",
        model_types=("internvl",),
        build=_build_internvl_video,
        kwargs=frozenset({"initial_shift"}),
        ignores=FRAMES_IGNORES,
        # _preprocess reads None as off (do_center_crop) or unused (crop_size).
        none_is_default=frozenset({"do_center_crop", "crop_size", "initial_shift"}),
        processor_kwargs=frozenset({"image_seq_length"}),
    )
)
