"""ERNIE-4.5-VL: ``Ernie4_5_VLMoeImageProcessor`` (transformers 5.24).

Qwen2-VL's pipeline line for line (its :func:`~mmfast.models.qwen2_vl.smart_resize` at factor
``patch_size * merge_size``, patch rows grouped by merge unit) with one temporal frame and a
larger pixel budget. Its ``__init__`` has no ``min_pixels``/``max_pixels`` spelling. The
deprecated ``Ernie4_5_VL_MoeImageProcessor`` (and ``...Pil``) subclasses, which only warn, are
the same class under another name: checkpoints converted before the rename name them.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmfast.models import registry
from mmfast.models.base import BICUBIC, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from mmfast.models.config import Fields, Source
from mmfast.models.qwen2_vl import QwenVLConfig, patch_fields

__all__ = ["Ernie4_5_VLMoeConfig"]


@dataclass(frozen=True)
class Ernie4_5_VLMoeConfig(QwenVLConfig):
    """Settings of ``Ernie4_5_VLMoeImageProcessor``.

    ``num_image_tokens`` is the count of ``<|IMAGE_PLACEHOLDER|>`` tokens
    ``Ernie4_5_VLMoeProcessor.replace_image_token`` inserts:
    ``image_grid_thw.prod() // merge_size**2``.
    """


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> Ernie4_5_VLMoeConfig:
    """Mirrors ``Ernie4_5_VLMoeImageProcessorPil``'s class defaults; its ``__init__`` passes
    the kwargs on unchanged (no ``min_pixels`` spelling)."""
    return Ernie4_5_VLMoeConfig(
        model_id=source.model_id,
        model_type=registry.model_type_of(source.preprocessor, source.model_type),
        image_processor_type=processor_type,
        **patch_fields(
            cfg,
            size={"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 6177},
            legacy_pixels=False,
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            temporal_patch_size=1,
        ),
    )


_HF = "ernie4_5_vl_moe"
registry.register(
    registry.Family(
        name="ernie4_5_vl_moe",
        processor_types=("Ernie4_5_VLMoeImageProcessor", "Ernie4_5_VL_MoeImageProcessor"),
        model_types={"ernie4_5_vl_moe": "Ernie4_5_VLMoeImageProcessor"},
        build=_build,
        kwargs=frozenset({"patch_size", "temporal_patch_size", "merge_size"}),
        processor_classes={"Ernie4_5_VLMoeProcessor": "ernie4_5_vl_moe"},
        hf_pil=f"{_HF}.image_processing_pil_ernie4_5_vl_moe.Ernie4_5_VLMoeImageProcessorPil",
        hf_torchvision=f"{_HF}.image_processing_ernie4_5_vl_moe.Ernie4_5_VLMoeImageProcessor",
    )
)

# baidu/ERNIE-4.5-VL-28B-A3B-PT (the checkpoint transformers' ERNIE-VL configs name). No public
# copy of its transformers-format preprocessor file was found: transformers' own conversion
# script (convert_ernie4_5_vl_moe_to_hf.py) saves a default-constructed image processor, so the
# values below are the class defaults it writes (unconfirmed). The hub repository's original
# files are remote code.
registry.register_builtin(
    "baidu/ERNIE-4.5-VL-28B-A3B-PT",
    "ernie4_5_vl_moe",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_std": list(OPENAI_CLIP_STD),
        "merge_size": 2,
        "patch_size": 14,
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"shortest_edge": 3136, "longest_edge": 4842768},
        "temporal_patch_size": 1,
        "image_processor_type": "Ernie4_5_VLMoeImageProcessor",
        "processor_class": "Ernie4_5_VLMoeProcessor",
    },
)
