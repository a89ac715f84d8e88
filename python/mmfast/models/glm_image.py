"""GLM-Image: ``GlmImageImageProcessor`` (transformers 5.24), the source images of its
image-to-image prompts.

Qwen2-VL's patch rows (two temporal frames, grouped by merge unit) and ``__init__``, with
GLM-Image's own :func:`smart_resize`: the pixel bounds become side lengths, the image is scaled
up to the shortest or down to the longest, then *halved* before rounding to the factor. Sides
under the factor and aspect ratios over 4 are errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import BICUBIC, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from mmfast.models.config import Fields, Source
from mmfast.models.qwen2_vl import QwenVLConfig, call_over_legacy_pixels, patch_fields

__all__ = ["GlmImageConfig", "smart_resize"]


def smart_resize(
    height: int,
    width: int,
    factor: int = 16,
    min_pixels: int = 512 * 512,
    max_pixels: int = 2048 * 2048,
) -> tuple[int, int]:
    """Size a GLM-Image source image is resized to.

    Mirrors ``transformers.models.glm_image.image_processing_glm_image.smart_resize`` step for
    step: ``int(round(sqrt(...)))`` side bounds, a float ``scale`` (up to the shortest edge,
    then down to the longest), the sides halved by ``//``, ``int(round(side * scale /
    factor))`` (banker's rounding) multiples of ``factor`` and a ``floor`` cut when one is
    still over the longest edge. HF's ``ValueError``s (a side under ``factor``, an aspect ratio
    over 4) are raised as :class:`MmfastError`.
    """
    if height < factor or width < factor:
        raise MmfastError(
            f"image size: height {height} and width {width} must be at least factor={factor}"
        )
    if max(height, width) / min(height, width) > 4:
        raise MmfastError(
            "image size: absolute aspect ratio must be smaller than 4, got "
            f"{max(height, width) / min(height, width)} for {height}x{width}"
        )
    shortest_edge = round(math.sqrt(min_pixels))
    longest_edge = round(math.sqrt(max_pixels))
    min_side = min(height, width)
    max_side = max(height, width)
    scale = 1.0
    if min_side < shortest_edge:
        scale = shortest_edge / min_side
    if max_side * scale > longest_edge:
        scale = longest_edge / max_side
    height = height // 2
    width = width // 2
    h_bar = max(factor, round(height * scale / factor) * factor)
    w_bar = max(factor, round(width * scale / factor) * factor)
    if max(h_bar, w_bar) > longest_edge:
        beta = max(h_bar, w_bar) / longest_edge
        h_bar = max(factor, math.floor((h_bar / beta) / factor) * factor)
        w_bar = max(factor, math.floor((w_bar / beta) / factor) * factor)
    return h_bar, w_bar


@dataclass(frozen=True)
class GlmImageConfig(QwenVLConfig):
    """Settings of ``GlmImageImageProcessor``.

    ``num_image_tokens`` is the count of ``<|image|>`` tokens ``GlmImageProcessor`` inserts for
    a source image: ``image_grid_thw.prod() // merge_size**2``.
    """

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """``GlmImageImageProcessorPil.resize``: its own :func:`smart_resize`."""
        assert self.min_pixels is not None and self.max_pixels is not None  # load_config
        factor = self.patch_size * self.merge_size
        return smart_resize(height, width, factor, self.min_pixels, self.max_pixels)


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> GlmImageConfig:
    """Mirrors ``GlmImageImageProcessorPil.__init__``: ``min_pixels``/``max_pixels`` override
    ``size``'s bounds, as for Qwen2-VL."""
    return GlmImageConfig(
        model_id=source.model_id,
        model_type=registry.model_type_of(source.preprocessor, source.model_type),
        image_processor_type=processor_type,
        **patch_fields(
            cfg,
            size={"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 1280},
            legacy_pixels=True,
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            temporal_patch_size=2,
        ),
    )


registry.register(
    registry.Family(
        name="glm_image",
        processor_types=("GlmImageImageProcessor",),
        model_types={"glm_image": "GlmImageImageProcessor"},
        build=_build,
        kwargs=frozenset(
            {"min_pixels", "max_pixels", "patch_size", "temporal_patch_size", "merge_size"}
        ),
        processor_classes={"GlmImageProcessor": "glm_image"},
        hf_pil="glm_image.image_processing_pil_glm_image.GlmImageImageProcessorPil",
        hf_torchvision="glm_image.image_processing_glm_image.GlmImageImageProcessor",
        call_settings=call_over_legacy_pixels,
    )
)

# zai-org/GLM-Image (the checkpoint transformers' GLM-Image configs name). No copy of its
# processor's image settings was found: these are the class defaults (unconfirmed).
registry.register_builtin(
    "zai-org/GLM-Image",
    "glm_image",
    {
        "size": {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 1280},
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_std": list(OPENAI_CLIP_STD),
        "resample": BICUBIC,
        "image_processor_type": "GlmImageImageProcessor",
        "processor_class": "GlmImageProcessor",
    },
)
