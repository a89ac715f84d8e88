"""LLaVA-1.5: ``CLIPImageProcessor`` (transformers 5.24) and ``LlavaProcessor``'s token count.

The checkpoint names the CLIP processor: shortest edge to 336 (bicubic), a 336x336 centre crop,
normalisation with OpenAI's CLIP constants. Every other ``size`` spelling the CLIP class accepts
works too.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmfast.models import registry
from mmfast.models.base import BICUBIC, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from mmfast.models.config import MAX_INT, Fields, Source
from mmfast.models.pil_backend import PilBackendConfig, pil_backend_fields

__all__ = ["ClipConfig"]


@dataclass(frozen=True)
class ClipConfig(PilBackendConfig):
    """Settings of ``CLIPImageProcessor`` as LLaVA-1.5 uses it, plus the LlavaProcessor values.

    ``patch_size``, ``num_additional_image_tokens`` and ``vision_feature_select_strategy``
    come from ``processor_config.json`` and only matter for the token count: the ``<image>``
    tokens LlavaProcessor inserts (576 for LLaVA-1.5).
    """

    patch_size: int
    num_additional_image_tokens: int
    vision_feature_select_strategy: str | None

    def count_tokens(self, height: int, width: int) -> int:
        """``LlavaProcessor.replace_image_token``, which counts on the processed size."""
        tokens = (height // self.patch_size) * (width // self.patch_size)
        tokens += self.num_additional_image_tokens
        if self.vision_feature_select_strategy == "default":
            tokens -= 1  # the CLS feature is dropped
        return tokens


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> ClipConfig:
    """Mirrors ``CLIPImageProcessorPil.__init__`` and ``BaseImageProcessor._standardize_kwargs``."""
    if cfg.raw("use_square_size"):
        # CLIPImageProcessor's KOSMOS-2 compatibility: a square of the class default edge,
        # whatever the config's size says.
        cfg = cfg.with_values(size={"height": 224, "width": 224})
    strategy = processor.raw("vision_feature_select_strategy")
    if strategy is not None and not isinstance(strategy, str):
        raise processor.error("vision_feature_select_strategy", "a string", strategy)
    return ClipConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **pil_backend_fields(
            cfg,
            size=224,
            default_to_square=False,
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            do_center_crop=True,
        ),
        # Without processor_config.json, LLaVA-1.5's values: the family mmfast serves here.
        patch_size=processor.positive_int("patch_size", 14),
        num_additional_image_tokens=processor.int_in("num_additional_image_tokens", 1, 0, MAX_INT),
        vision_feature_select_strategy="default" if strategy is None else strategy,
    )


registry.register(
    registry.Family(
        name="llava",
        processor_types=("CLIPImageProcessor",),
        # "llava" is not here: HF maps it to LlavaImageProcessor (pad-to-square), which is not
        # this class.
        model_types={"clip": "CLIPImageProcessor"},
        build=_build,
        kwargs=frozenset({"use_square_size"}),
        processor_kwargs=frozenset(
            {"patch_size", "num_additional_image_tokens", "vision_feature_select_strategy"}
        ),
        hf_pil="clip.image_processing_pil_clip.CLIPImageProcessorPil",
        hf_torchvision="clip.image_processing_clip.CLIPImageProcessor",
    )
)

# llava-hf/llava-1.5-7b-hf: the printed CLIPImageProcessor of a llava-hf conversion
# (bczhou/tiny-llava-v1-hf, same CLIP-ViT-L/14-336 tower) gives these values; the
# processor_config.json values (patch 14, one extra CLS token dropped by the "default"
# strategy) give LLaVA-1.5's documented 576 image tokens.
registry.register_builtin(
    "llava-hf/llava-1.5-7b-hf",
    "llava",
    {
        "crop_size": {"height": 336, "width": 336},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "CLIPImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "processor_class": "LlavaProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"shortest_edge": 336},
    },
    {
        "patch_size": 14,
        "num_additional_image_tokens": 1,
        "vision_feature_select_strategy": "default",
    },
)
