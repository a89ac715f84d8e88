"""PaddleOCR-VL: ``PaddleOCRVLImageProcessor`` (transformers 5.24).

Qwen-VL's pipeline with its own :func:`smart_resize` (a side below the factor is stretched to
it, keeping the aspect ratio with ``round()``) and one temporal frame; patches are not grouped
by merge unit but laid out row-major as ``(N, 3 * temporal_patch_size, patch, patch)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmfast.models import registry
from mmfast.models.base import BICUBIC, HALF, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, Patchify
from mmfast.models.config import Fields, Source
from mmfast.models.qwen2_vl import (
    QwenVLConfig,
    call_over_legacy_pixels,
    check_positive,
    fit_pixel_budget,
    patch_fields,
)

__all__ = ["PaddleOCRVLConfig", "smart_resize"]


def smart_resize(
    height: int,
    width: int,
    factor: int = 28,
    min_pixels: int = 384 * 384,
    max_pixels: int = 1536 * 1536,
) -> tuple[int, int]:
    """Size a PaddleOCR-VL image is resized to.

    Mirrors ``transformers.models.paddleocr_vl.image_processing_paddleocr_vl.smart_resize``:
    a side below ``factor`` becomes ``factor`` and the other side ``round(side * factor /
    short)``, then Qwen's rounding and pixel budget. HF's ``ValueError`` for an aspect ratio
    over 200 is raised as :class:`MmfastError`.
    """
    check_positive(height, width)
    original = (height, width)
    if height < factor:
        width = round((width * factor) / height)
        height = factor
    if width < factor:
        height = round((height * factor) / width)
        width = factor
    return fit_pixel_budget(height, width, factor, min_pixels, max_pixels, original=original)


@dataclass(frozen=True)
class PaddleOCRVLConfig(QwenVLConfig):
    """Settings of ``PaddleOCRVLImageProcessor``.

    ``num_image_tokens`` is the count of image tokens PaddleOCRVLProcessor inserts:
    ``image_grid_thw.prod() // merge_size**2``.
    """

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """``PaddleOCRVLImageProcessorPil.resize``: its own :func:`smart_resize`."""
        assert self.min_pixels is not None and self.max_pixels is not None  # load_config
        factor = self.patch_size * self.merge_size
        return smart_resize(height, width, factor, self.min_pixels, self.max_pixels)

    def patchify(self) -> Patchify:
        """Row-major patches: HF's ``patchify`` does not group them by merge unit."""
        return Patchify(self.patch_size, self.temporal_patch_size, 1)

    def patch_shape(self) -> tuple[int, ...]:
        """One patch of ``pixel_values``: (channel * time, y, x)."""
        return (3 * self.temporal_patch_size, self.patch_size, self.patch_size)


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> PaddleOCRVLConfig:
    """Mirrors ``PaddleOCRVLImageProcessorPil.__init__``: ``min_pixels``/``max_pixels``
    override ``size``'s bounds, as for Qwen2-VL."""
    return PaddleOCRVLConfig(
        model_id=source.model_id,
        model_type=registry.model_type_of(source.preprocessor, source.model_type),
        image_processor_type=processor_type,
        **patch_fields(
            cfg,
            size={"shortest_edge": 384 * 384, "longest_edge": 1536 * 1536},
            legacy_pixels=True,
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            temporal_patch_size=1,
        ),
    )


registry.register(
    registry.Family(
        name="paddleocr_vl",
        processor_types=("PaddleOCRVLImageProcessor",),
        model_types={"paddleocr_vl": "PaddleOCRVLImageProcessor"},
        processor_classes={"PaddleOCRVLProcessor": "paddleocr_vl"},
        build=_build,
        kwargs=frozenset(
            {"min_pixels", "max_pixels", "patch_size", "temporal_patch_size", "merge_size"}
        ),
        hf_pil="paddleocr_vl.image_processing_pil_paddleocr_vl.PaddleOCRVLImageProcessorPil",
        hf_torchvision="paddleocr_vl.image_processing_paddleocr_vl.PaddleOCRVLImageProcessor",
        call_settings=call_over_legacy_pixels,
    )
)

# PaddlePaddle/PaddleOCR-VL: the file as pasted in a write-up (its auto_map left out), with
# min_pixels 147384, max_pixels 2822400, mean/std 0.5 and temporal_patch_size 1 also listed by
# two other projects' copies of the checkpoint's settings.
registry.register_builtin(
    "PaddlePaddle/PaddleOCR-VL",
    "paddleocr_vl",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_processor_type": "PaddleOCRVLImageProcessor",
        "image_std": list(HALF),
        "max_pixels": 2822400,
        "merge_size": 2,
        "min_pixels": 147384,
        "patch_size": 14,
        "processor_class": "PaddleOCRVLProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "temporal_patch_size": 1,
    },
)
