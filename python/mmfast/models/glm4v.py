"""GLM-4.1V, GLM-4.5V, GLM-4.6V and GLM-OCR: ``Glm4vImageProcessor`` / ``Glm46VImageProcessor``.

The two classes (transformers 5.24) are line for line the same arithmetic: Qwen-VL's patch rows
and ``image_grid_thw``, but GLM's own :func:`smart_resize`, which counts a still image as
``temporal_patch_size`` frames in the pixel budget and scales images smaller than one merge
unit up first. GLM-4.5V (``glm4v_moe``) and GLM-OCR (``glm_ocr``) name these classes in their
``preprocessor_config.json``; AutoImageProcessor has no model-type fallback for them.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import BICUBIC, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from mmfast.models.config import Fields, Source
from mmfast.models.qwen2_vl import (
    QwenVLConfig,
    check_positive,
    fit_pixel_budget,
    patch_fields,
)

__all__ = ["Glm4vConfig", "smart_resize"]


def smart_resize(
    num_frames: int,
    height: int,
    width: int,
    temporal_factor: int = 2,
    factor: int = 28,
    min_pixels: int = 112 * 112,
    max_pixels: int = 14 * 14 * 2 * 2 * 2 * 6144,
) -> tuple[int, int]:
    """Size a GLM-4V image is resized to.

    Mirrors ``transformers.models.glm4v.image_processing_glm4v.smart_resize`` step for step:
    a side below ``factor`` scales both sides up (``int()`` truncation) to reach it; the
    budget counts ``round(num_frames / temporal_factor) * temporal_factor`` frames; then
    Qwen's rounding (``round()``, ``floor`` above ``max_pixels``, ``ceil`` below
    ``min_pixels``). HF's ``ValueError``s (fewer frames than ``temporal_factor``, an aspect
    ratio over 200) are raised as :class:`MmfastError`.
    """
    if num_frames < temporal_factor:
        raise MmfastError(
            f"num_frames: expected at least temporal_factor={temporal_factor}, got {num_frames}"
        )
    check_positive(height, width)
    original = (height, width)
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height = int(height * scale)
        width = int(width * scale)
    t_bar = round(num_frames / temporal_factor) * temporal_factor
    return fit_pixel_budget(
        height, width, factor, min_pixels, max_pixels, num_frames, t_bar, original
    )


@dataclass(frozen=True)
class Glm4vConfig(QwenVLConfig):
    """Settings of ``Glm4vImageProcessor`` / ``Glm46VImageProcessor``.

    ``num_image_tokens`` is the count of image tokens Glm4vProcessor / Glm46VProcessor insert:
    ``image_grid_thw.prod() // merge_size**2``.
    """

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """``Glm4vImageProcessorPil.resize``: a still image is ``temporal_patch_size`` frames."""
        assert self.min_pixels is not None and self.max_pixels is not None  # load_config
        return smart_resize(
            num_frames=self.temporal_patch_size,
            height=height,
            width=width,
            temporal_factor=self.temporal_patch_size,
            factor=self.patch_size * self.merge_size,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
        )


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Glm4vConfig:
    """Mirrors ``Glm4vImageProcessorPil``'s class defaults (no ``min_pixels`` spelling)."""
    return Glm4vConfig(
        model_id=source.model_id,
        model_type=registry.model_type_of(source.preprocessor, source.model_type),
        image_processor_type=processor_type,
        **patch_fields(
            cfg,
            size={"shortest_edge": 112 * 112, "longest_edge": 28 * 28 * 15000},
            legacy_pixels=False,
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            temporal_patch_size=2,
        ),
    )


registry.register(
    registry.Family(
        name="glm4v",
        processor_types=("Glm4vImageProcessor", "Glm46VImageProcessor"),
        model_types={"glm4v": "Glm4vImageProcessor", "glm46v": "Glm46VImageProcessor"},
        build=_build,
        kwargs=frozenset({"patch_size", "temporal_patch_size", "merge_size"}),
        processor_classes={"Glm4vProcessor": "glm4v", "Glm46VProcessor": "glm46v"},
        hf_pil="glm4v.image_processing_pil_glm4v.Glm4vImageProcessorPil",
        hf_torchvision="glm4v.image_processing_glm4v.Glm4vImageProcessor",
    )
)

# Built-in checkpoints: each dict is the checkpoint's preprocessor_config.json as far as public
# copies show it; the README's model table says which values are confirmed.
_GLM_PIXELS = {"shortest_edge": 12544, "longest_edge": 9633792}
_GLM_COMMON = {
    "size": _GLM_PIXELS,
    "do_rescale": True,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": list(OPENAI_CLIP_MEAN),
    "image_std": list(OPENAI_CLIP_STD),
}

# zai-org/GLM-OCR: the file verbatim, in two independent copies (a Go test pinned to revision
# 2e85a628 "verbatim", and a logged curl of the hub file); model_type glm_ocr.
registry.register_builtin(
    "zai-org/GLM-OCR",
    "glm_ocr",
    {
        **_GLM_COMMON,
        "image_processor_type": "Glm46VImageProcessor",
        "processor_class": "Glm46VProcessor",
    },
)

# zai-org/GLM-4.1V-9B-Thinking (glm4v), GLM-4.5V (glm4v_moe) and GLM-4.6V: no verbatim copy
# found. The pixel bounds 12544 / 9633792 at factor 28 and the CLIP constants come from a
# serving project's per-model table and agree with the GLM-OCR file, which shares the layout;
# GLM-4.6V names the Glm46V classes (vLLM's log of its files), GLM-4.5V the Glm4v ones; the
# model types are glm4v and glm4v_moe (llama.cpp's notes) and, unconfirmed, transformers'
# GLM-4.6V type glm46v.
registry.register_builtin(
    "zai-org/GLM-4.1V-9B-Thinking",
    "glm4v",
    {
        **_GLM_COMMON,
        "image_processor_type": "Glm4vImageProcessor",
        "processor_class": "Glm4vProcessor",
    },
)
registry.register_builtin(
    "zai-org/GLM-4.5V",
    "glm4v_moe",
    {
        **_GLM_COMMON,
        "image_processor_type": "Glm4vImageProcessor",
        "processor_class": "Glm4vProcessor",
    },
)
registry.register_builtin(
    "zai-org/GLM-4.6V",
    "glm46v",
    {
        **_GLM_COMMON,
        "image_processor_type": "Glm46VImageProcessor",
        "processor_class": "Glm46VProcessor",
    },
)
