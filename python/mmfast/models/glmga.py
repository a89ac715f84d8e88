"""GLM-GA: ``GlmgaImageProcessor`` (transformers 5.24).

GLM-4.1V's pipeline (:func:`~mmfast.models.glm4v.smart_resize` counting a still image as
``temporal_patch_size`` frames, Qwen-VL patch rows) with one more setting,
``patch_expand_factor``: the torchvision class resizes to multiples of ``patch_size *
merge_size * patch_expand_factor``, the PIL class to multiples of ``patch_size * merge_size``
(it leaves the factor out; the two agree at its default of 1). transformers has no processor
class for the model type.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmfast.models import registry
from mmfast.models.base import BICUBIC, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from mmfast.models.config import Fields, Source
from mmfast.models.glm4v import Glm4vConfig, smart_resize
from mmfast.models.qwen2_vl import patch_fields

__all__ = ["GlmgaConfig"]


@dataclass(frozen=True)
class GlmgaConfig(Glm4vConfig):
    """Settings of ``GlmgaImageProcessor``.

    ``num_image_tokens``: ``image_grid_thw.prod() // merge_size**2``, as GLM-4.6V's processor
    (which serves the checkpoint) counts them.
    """

    patch_expand_factor: int = 1

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """``GlmgaImageProcessor.resize`` at factor ``patch_size * merge_size *
        patch_expand_factor`` (``GlmgaImageProcessorPil``: without ``patch_expand_factor``)."""
        assert self.min_pixels is not None and self.max_pixels is not None  # load_config
        expand = self.patch_expand_factor if self.backend == "torchvision" else 1
        return smart_resize(
            num_frames=self.temporal_patch_size,
            height=height,
            width=width,
            temporal_factor=self.temporal_patch_size,
            factor=self.patch_size * self.merge_size * expand,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
        )


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> GlmgaConfig:
    """Mirrors ``GlmgaImageProcessorPil``'s class defaults (no ``min_pixels`` spelling)."""
    return GlmgaConfig(
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
        patch_expand_factor=cfg.positive_int("patch_expand_factor", 1),
    )


registry.register(
    registry.Family(
        name="glmga",
        processor_types=("GlmgaImageProcessor",),
        model_types={"glmga": "GlmgaImageProcessor"},
        build=_build,
        kwargs=frozenset(
            {"patch_size", "temporal_patch_size", "merge_size", "patch_expand_factor"}
        ),
        hf_pil="glmga.image_processing_pil_glmga.GlmgaImageProcessorPil",
        hf_torchvision="glmga.image_processing_glmga.GlmgaImageProcessor",
    )
)

# zai-org/GLM-GA (vLLM's and SGLang's recipes serve it; transformers' GlmgaConfig docstring
# names GLM-4.1V-9B-Thinking, whose file names the Glm4v class). No copy of its preprocessor
# file was found: the recipes describe it as GLM-4.6V-Flash's architecture with GLM-GA's own
# image and video processors, so GLM-4.6V's settings (pixel bounds 12544 / 9633792, patch 14,
# temporal 2, merge 2, CLIP constants) are assumed, with patch_expand_factor at its default of
# 1 (unconfirmed).
registry.register_builtin(
    "zai-org/GLM-GA",
    "glmga",
    {
        "size": {"shortest_edge": 12544, "longest_edge": 9633792},
        "do_rescale": True,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "patch_expand_factor": 1,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_std": list(OPENAI_CLIP_STD),
        "image_processor_type": "GlmgaImageProcessor",
    },
)
