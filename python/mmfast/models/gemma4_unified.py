"""Gemma 4 unified (encoder-free): ``Gemma4UnifiedImageProcessor`` (transformers 5.24;
torchvision only).

Gemma 4's resize, rescale and 16-pixel patches, then ``patches_merge`` gathers each
``pooling_kernel_size`` x ``pooling_kernel_size`` group of patches into one row: the rows are
the channel-last rows of ``pooling_kernel_size * patch_size`` (48) pixel squares, in raster
order, which is how mmfast cuts them. Rows are zero-padded to ``max_soft_tokens`` (not to the
patch budget) and ``image_position_ids`` gives each merged square's (x, y).
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
from mmfast.models.gemma4 import GEMMA4_IMAGE_PROCESSOR, GEMMA4_KWARGS, Gemma4Config, gemma4_fields

__all__ = ["Gemma4UnifiedConfig"]


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
        """With ``do_resize`` off, ``patches_merge`` groups the patch grid by the kernel only
        when both sides are whole numbers of merged squares; other sizes fail in HF's reshape or
        merge (or, for some, merge patches out of place), and are refused."""
        if height % self.unit or width % self.unit:
            raise MmfastError(
                f"image size: both sides must be multiples of patch_size * pooling_kernel_size "
                f"= {self.unit} to merge patches (do_resize is off), got {height}x{width}"
            )

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
)
