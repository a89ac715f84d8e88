"""Gemma 4 unified (encoder-free): ``Gemma4UnifiedImageProcessor`` (transformers 5.24;
torchvision only).

Gemma 4's resize, rescale and 16-pixel patches, then ``patches_merge`` gathers each
``pooling_kernel_size`` x ``pooling_kernel_size`` group of patches into one row: the rows are
the channel-last rows of ``pooling_kernel_size * patch_size`` (48) pixel squares, in raster
order, which is how mmfast cuts them. Rows are zero-padded to ``max_soft_tokens`` (not to the
patch budget) and ``image_position_ids`` gives each merged square's (x, y).

Its video processor, ``Gemma4UnifiedVideoProcessor``, is ``Gemma4VideoProcessor`` (the same
sampler, 70 soft tokens a frame, rescaled and normalised with mean 0 and std 1) with the same
merge: each frame's rows are its 48-pixel squares, zero-padded to ``max_soft_tokens``, and
``video_position_ids`` the squares' (x, y).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BOX,
    HAMMING,
    NEAREST,
    TORCH_RESAMPLE,
    ImagePlan,
    Resize,
    fused_tables,
    identity_table,
)
from mmfast.models.config import Fields, Source
from mmfast.models.gemma4 import (
    GEMMA4_IMAGE_PROCESSOR,
    GEMMA4_KWARGS,
    GEMMA4_VIDEO_IGNORES,
    GEMMA4_VIDEO_PROCESSOR,
    Gemma4Config,
    Gemma4VideoConfig,
    gemma4_fields,
    gemma4_video_fields,
)

__all__ = ["Gemma4UnifiedConfig", "Gemma4UnifiedVideoConfig"]


def check_whole_squares(height: int, width: int, unit: int) -> None:
    """With ``do_resize`` off, ``patches_merge`` groups the patch grid by the kernel only
    when both sides are whole numbers of merged squares; other sizes fail in HF's reshape or
    merge (or, for some, merge patches out of place), and are refused."""
    if height % unit or width % unit:
        raise MmfastError(
            f"image size: both sides must be multiples of patch_size * pooling_kernel_size "
            f"= {unit} to merge patches (do_resize is off), got {height}x{width}"
        )


@dataclass(frozen=True)
class Gemma4UnifiedConfig(Gemma4Config):
    """Settings of ``Gemma4UnifiedImageProcessor``: Gemma 4's, with merged rows.

    transformers has only a torchvision class for it, which both backend names match.
    ``num_image_tokens`` is ``num_soft_tokens_per_image``, the merged rows.
    """

    @property
    def unit(self) -> int:
        """A merged row's square: ``patch_size * pooling_kernel_size`` pixels."""
        return self.patch_size * self.pooling_kernel_size

    @property
    def pad_length(self) -> int:
        """Rows are padded to ``max_soft_tokens``."""
        return self.max_soft_tokens

    def resize(self, size: tuple[int, int]) -> Resize:
        """``tvF.resize`` with the PIL code as torchvision reads it (see
        :meth:`Gemma4Config.resize`); antialiased."""
        if self.resample == NEAREST:
            raise MmfastError(
                f"resample: {self.image_processor_type} resizes with torchvision's legacy NEAREST "
                "for 0, which mmfast does not implement; use 1, 2 or 3"
            )
        if self.resample in (BOX, HAMMING):
            raise MmfastError(f"resample: expected {TORCH_RESAMPLE}, got {self.resample}")
        return Resize(size, self.resample, "torch")

    def check_unpadded(self, height: int, width: int) -> None:
        """:func:`check_whole_squares`."""
        check_whole_squares(height, width, self.unit)

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """The torchvision class's arithmetic, or its uint8 pixels with both steps off."""
        if plan.do_rescale or plan.do_normalize:
            return fused_tables(plan)
        return identity_table()


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> Gemma4UnifiedConfig:
    """Mirrors ``Gemma4UnifiedImageProcessor.__init__`` (Gemma 4's class defaults)."""
    return Gemma4UnifiedConfig(
        model_id=source.model_id, image_processor_type=processor_type, **gemma4_fields(cfg)
    )


registry.register(
    registry.Family(
        name="gemma4_unified",
        processor_types=("Gemma4UnifiedImageProcessor",),
        model_types={"gemma4_unified": "Gemma4UnifiedImageProcessor"},
        build=_build,
        kwargs=GEMMA4_KWARGS,
        processor_classes={"Gemma4UnifiedProcessor": "gemma4_unified"},
        hf_torchvision=(
            "gemma4_unified.image_processing_gemma4_unified.Gemma4UnifiedImageProcessor"
        ),
    )
)

# google/gemma-4-12B-it: see the README's model table for what is confirmed.
GEMMA4_UNIFIED_IMAGE_PROCESSOR: Final[Mapping[str, Any]] = {
    **GEMMA4_IMAGE_PROCESSOR,
    "image_processor_type": "Gemma4UnifiedImageProcessor",
}
# Its video processor: transformers' converter saves Gemma4UnifiedVideoProcessor() (the class
# defaults: 70 soft tokens a frame, 32 frames, mean 0 / std 1), the values of Gemma 4's block
# (GEMMA4_VIDEO_PROCESSOR); no copy of the checkpoint's file was found.
GEMMA4_UNIFIED_VIDEO_PROCESSOR: Final[Mapping[str, Any]] = {
    **GEMMA4_VIDEO_PROCESSOR,
    "video_processor_type": "Gemma4UnifiedVideoProcessor",
}
registry.register_builtin(
    "google/gemma-4-12B-it",
    "gemma4_unified",
    GEMMA4_UNIFIED_IMAGE_PROCESSOR,
    {
        "audio_ms_per_token": 40,
        "audio_seq_length": 750,
        "image_seq_length": 280,
        "processor_class": "Gemma4UnifiedProcessor",
    },
    video=GEMMA4_UNIFIED_VIDEO_PROCESSOR,
)


# --------------------------------------------------------------------------------------------
# Video: Gemma4UnifiedVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gemma4UnifiedVideoConfig(Gemma4VideoConfig):
    """Settings of ``Gemma4UnifiedVideoProcessor``: Gemma 4's video pipeline with merged
    rows (``patches_merge``): each frame's ``patch_size * pooling_kernel_size`` squares in
    raster order, channel-last, zero-padded to ``max_soft_tokens``. ``num_video_tokens`` counts
    the ``<|video|>`` tokens Gemma4UnifiedProcessor inserts: ``num_soft_tokens_per_video``
    (the merged rows) per frame."""

    @property
    def unit(self) -> int:
        """A merged row's square: ``patch_size * pooling_kernel_size`` pixels."""
        return self.patch_size * self.pooling_kernel_size

    @property
    def pad_length(self) -> int:
        """Rows are padded to ``max_soft_tokens``."""
        return self.max_soft_tokens

    def check_unpadded(self, height: int, width: int) -> None:
        """:func:`check_whole_squares`."""
        check_whole_squares(height, width, self.unit)


def _build_video(model_id: str | None, cfg: Fields) -> Gemma4UnifiedVideoConfig:
    """Mirrors ``Gemma4UnifiedVideoProcessor``'s class defaults and ``__init__`` check
    (Gemma 4's)."""
    return Gemma4UnifiedVideoConfig(
        **{
            **gemma4_video_fields(model_id, cfg),
            "video_processor_type": "Gemma4UnifiedVideoProcessor",
        }
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="Gemma4UnifiedVideoProcessor",
        model_types=("gemma4_unified",),
        build=_build_video,
        kwargs=GEMMA4_KWARGS,
        ignores=GEMMA4_VIDEO_IGNORES,
    )
)
