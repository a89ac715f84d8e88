"""MiniCPM-OCR: ``MiniCPMOcrImageProcessor`` (transformers 5.24; torchvision only).

MiniCPM-V 4.6's slicing and NaViT strip (:mod:`~mmfast.models.minicpmv4_6`) with "4x"
downsampling by default (sides in multiples of 28) and ``small_image_upsize``, which says how an
image without slices is sized: "always" upscaled to ``scale_resolution`` squared like MiniCPM-V,
"never" kept near its own size (only aligned to the patch grid), or "adaptive", chosen from the
pixels: an Otsu threshold and OpenCV's connected components measure glyph height and density,
for the whole image and for each slice cell that fits ``scale_resolution`` squared.

mmfast computes "always" and "never" exactly, and "adaptive" for the images whose sizes alone
decide it: sliced images whose every cell is larger than ``scale_resolution`` squared, where
transformers never looks at the pixels (they are sized as in the other modes). For any other
image in "adaptive" mode it raises :class:`~mmfast.MmfastError` naming ``small_image_upsize``
(``mmfast.hf`` then runs transformers' own code, which needs OpenCV). The torchvision class is
transformers' only one: a config for the "pil" backend computes it too.

Its video processor, ``MiniCPMOcrVideoProcessor``, is ``MiniCPMV4_6VideoProcessor`` with "4x"
downsampling by default (:class:`~mmfast.models.minicpmv4_6.MiniCPMV4_6VideoConfig`): frames
are sized as MiniCPM-V's images (upscaled to ``scale_resolution``, no ``small_image_upsize``),
sampled a frame a second, and ``stack_frames`` above 1 is refused as for MiniCPM-V.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import HALF
from mmfast.models.config import Fields, Source
from mmfast.models.minicpmv4_6 import (
    MINICPM_KWARGS,
    MINICPM_VIDEO_IGNORES,
    MINICPM_VIDEO_KWARGS,
    MiniCPMV4_6Config,
    MiniCPMV4_6VideoConfig,
    find_best_resize,
    minicpm_fields,
    minicpm_video_fields,
)

__all__ = ["MiniCPMOcrConfig", "MiniCPMOcrVideoConfig", "adaptive_cells"]

SMALL_IMAGE_UPSIZE = ("always", "never", "adaptive")


def adaptive_cells(height: int, width: int, grid: tuple[int, int]) -> list[tuple[int, int]]:
    """(height, width) of each cell ``MiniCPMOcrImageProcessor._resolve_tile_size`` cuts from
    the original image, row-major: boundaries at ``round(side * k / count)`` (half to even)."""
    rows, columns = grid
    return [
        (
            round(height * (r + 1) / rows) - round(height * r / rows),
            round(width * (c + 1) / columns) - round(width * c / columns),
        )
        for r in range(rows)
        for c in range(columns)
    ]


@dataclass(frozen=True)
class MiniCPMOcrConfig(MiniCPMV4_6Config):
    """Settings of ``MiniCPMOcrImageProcessor``; ``num_image_tokens`` counts
    MiniCPMOcrProcessor's placeholder like MiniCPM-V's (4 patches a token in "4x" mode)."""

    small_image_upsize: str

    def __post_init__(self) -> None:
        # transformers has only the torchvision class: every backend computes it.
        object.__setattr__(self, "backend", "torchvision")

    def source_size(self, height: int, width: int, grid: tuple[int, int] | None) -> tuple[int, int]:
        """An image without slices is upscaled to ``scale_resolution`` only with "always"
        ("adaptive" never gets here: :meth:`check_call`)."""
        return find_best_resize(
            (height, width),
            self.scale_resolution,
            self.patch_size,
            self.downsample_mode,
            allow_upscale=grid is None and self.small_image_upsize == "always",
        )

    def check_call(self, height: int, width: int) -> None:
        """transformers' ``ValueError`` for ``do_resize`` off, and the images "adaptive"
        sizes from their pixels (OpenCV's analysis, which mmfast does not run)."""
        if not self.do_resize:
            raise MmfastError(
                "do_resize: expected true (MiniCPMOcrImageProcessor always resizes to the "
                f"patch grid), got {self.do_resize}"
            )
        if self.small_image_upsize != "adaptive":
            return
        grid = self.grid(height, width)
        area = self.scale_resolution**2
        if grid is None or any(
            h >= 1 and w >= 1 and h * w <= area for h, w in adaptive_cells(height, width, grid)
        ):
            raise MmfastError(
                f"small_image_upsize: 'adaptive' sizes this {height}x{width} image from its "
                "pixels (OpenCV text detection), which mmfast does not run; use 'always' or "
                "'never', or transformers' own MiniCPMOcrImageProcessor (mmfast.hf falls back "
                "to it)"
            )


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> MiniCPMOcrConfig:
    """Mirrors ``MiniCPMOcrImageProcessor``'s class defaults: MiniCPM-V's with "4x"
    downsampling and ``small_image_upsize="always"``."""
    upsize = cfg.raw("small_image_upsize")
    if upsize is None:
        upsize = "always"
    elif upsize not in SMALL_IMAGE_UPSIZE:
        raise cfg.error("small_image_upsize", "'always', 'never' or 'adaptive'", upsize)
    return MiniCPMOcrConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **minicpm_fields(cfg, "4x"),
        small_image_upsize=str(upsize),
    )


registry.register(
    registry.Family(
        name="minicpm_ocr",
        processor_types=("MiniCPMOcrImageProcessor",),
        model_types={"minicpm_ocr": "MiniCPMOcrImageProcessor"},
        build=_build,
        kwargs=MINICPM_KWARGS | {"small_image_upsize"},
        processor_classes={"MiniCPMOcrProcessor": "minicpm_ocr"},
        hf_torchvision="minicpm_ocr.image_processing_minicpm_ocr.MiniCPMOcrImageProcessor",
    )
)

# openbmb/MiniCPM-OCR-1.0 (transformers 5.24's MiniCPM-OCR checkpoint): no public copy of its
# files was found. MiniCPM-V 4.6's file with the OCR class and processor names; every value
# equals MiniCPMOcrImageProcessor's class default ("4x" and small_image_upsize "always" come
# from the class, which the file is assumed not to override). Unconfirmed.
registry.register_builtin(
    "openbmb/MiniCPM-OCR-1.0",
    "minicpm_ocr",
    {
        "image_processor_type": "MiniCPMOcrImageProcessor",
        "processor_class": "MiniCPMOcrProcessor",
        "max_slice_nums": 9,
        "scale_resolution": 448,
        "patch_size": 14,
        "use_image_id": True,
        "slice_mode": True,
        "image_mean": list(HALF),
        "image_std": list(HALF),
    },
)


# --------------------------------------------------------------------------------------------
# Video: MiniCPMOcrVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MiniCPMOcrVideoConfig(MiniCPMV4_6VideoConfig):
    """Settings of ``MiniCPMOcrVideoProcessor``: MiniCPM-V 4.6's video class with "4x"
    downsampling by default. ``num_video_tokens`` counts MiniCPMOcrProcessor's placeholders
    (MiniCPMV4_6Processor's code: one video token per 4 patches in "4x" mode)."""


def _build_video(model_id: str | None, cfg: Fields) -> MiniCPMOcrVideoConfig:
    """Mirrors ``MiniCPMOcrVideoProcessor``'s class defaults: MiniCPM-V 4.6's with "4x"."""
    return MiniCPMOcrVideoConfig(
        model_id=model_id,
        video_processor_type="MiniCPMOcrVideoProcessor",
        **minicpm_video_fields(cfg, "4x"),
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="MiniCPMOcrVideoProcessor",
        model_types=("minicpm_ocr",),
        build=_build_video,
        kwargs=MINICPM_VIDEO_KWARGS,
        ignores=MINICPM_VIDEO_IGNORES,
    )
)
