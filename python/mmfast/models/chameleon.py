"""Chameleon: ``ChameleonImageProcessor`` (transformers 5.24) and ``ChameleonProcessor``'s token
count.

transformers' default pipeline with Chameleon's class defaults: the shortest edge to 512 with
Lanczos, a 512x512 centre crop, then ``x * 0.0078`` minus 1 (mean and std 1). ChameleonProcessor
puts ``image_seq_length`` image tokens between its begin- and end-of-image tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmfast.models import registry
from mmfast.models.base import LANCZOS
from mmfast.models.config import Fields, Source
from mmfast.models.pil_backend import PilBackendConfig, pil_backend_fields

__all__ = ["ChameleonConfig"]

# ChameleonImageProcessor's class defaults.
CHAMELEON_RESCALE = 0.0078
ONES = (1.0, 1.0, 1.0)


@dataclass(frozen=True)
class ChameleonConfig(PilBackendConfig):
    """Settings of ``ChameleonImageProcessor``, and ChameleonProcessor's ``image_seq_length``
    (``processor_config.json``)."""

    image_seq_length: int

    def count_tokens(self, height: int, width: int) -> int:
        """``ChameleonProcessor._get_num_multimodal_tokens``: the image tokens plus the begin-
        and end-of-image tokens."""
        return self.image_seq_length + 2


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> ChameleonConfig:
    """Mirrors ``ChameleonImageProcessorPil``'s class defaults (its rescale factor 0.0078)."""
    if cfg.raw("rescale_factor") is None:
        cfg = cfg.with_values(rescale_factor=CHAMELEON_RESCALE)
    return ChameleonConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **pil_backend_fields(
            cfg,
            size={"shortest_edge": 512},
            default_to_square=False,
            resample=LANCZOS,
            mean=ONES,
            std=ONES,
            do_center_crop=True,
            crop_size={"height": 512, "width": 512},
        ),
        image_seq_length=processor.positive_int("image_seq_length", 1024),
    )


registry.register(
    registry.Family(
        name="chameleon",
        processor_types=("ChameleonImageProcessor",),
        model_types={"chameleon": "ChameleonImageProcessor"},
        build=_build,
        processor_kwargs=frozenset({"image_seq_length"}),
        processor_classes={"ChameleonProcessor": "chameleon"},
        hf_pil="chameleon.image_processing_pil_chameleon.ChameleonImageProcessorPil",
        hf_torchvision="chameleon.image_processing_chameleon.ChameleonImageProcessor",
    )
)

# facebook/chameleon-7b: the file as transformers' conversion writes it, verbatim in several
# copies (nopperl/chameleon-7b-hf, GAIR/Anole-7b, leloy/Anole-7b-v0.1-hf, ...): shortest edge
# and crop 512, Lanczos (1), mean/std 1, rescale 0.0078. ChameleonProcessor's image_seq_length
# is its default, 1024.
registry.register_builtin(
    "facebook/chameleon-7b",
    "chameleon",
    {
        "crop_size": {"height": 512, "width": 512},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [1.0, 1.0, 1.0],
        "image_processor_type": "ChameleonImageProcessor",
        "image_std": [1.0, 1.0, 1.0],
        "processor_class": "ChameleonProcessor",
        "resample": LANCZOS,
        "rescale_factor": CHAMELEON_RESCALE,
        "size": {"shortest_edge": 512},
    },
    {"image_seq_length": 1024},
)
