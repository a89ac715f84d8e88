"""SigLIP, fixed-size SigLIP2 and PaliGemma: ``SiglipImageProcessor`` (transformers 5.24).

transformers' default pipeline with SigLIP's class defaults: the image is squashed to
``size`` = {height, width} (no crop), rescaled and normalised with mean/std 0.5. PaliGemma
checkpoints name this processor and add ``image_seq_length``, the ``<image>`` tokens
PaliGemmaProcessor inserts; fixed-size SigLIP2 checkpoints name it too (NaFlex SigLIP2 uses
another class).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    BILINEAR,
    HALF,
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
)
from mmfast.models.config import Fields, Source
from mmfast.models.pil_backend import PilBackendConfig, pil_backend_fields

__all__ = ["SiglipConfig"]


@dataclass(frozen=True)
class SiglipConfig(PilBackendConfig):
    """Settings of ``SiglipImageProcessor``.

    ``image_seq_length`` is the ``<image>`` tokens per image of the processor: PaliGemma's
    from the checkpoint's ``preprocessor_config.json``, Gemma3nProcessor's from
    ``processor_config.json`` (default 256); SiglipProcessor itself inserts none, so a config
    without either counts 0.
    """

    image_seq_length: int | None

    def count_tokens(self, height: int, width: int) -> int:
        """``PaliGemmaProcessor.replace_image_token`` (and Gemma3nProcessor's):
        ``image_seq_length`` tokens."""
        return self.image_seq_length or 0


# The processors that use the class, by the model type AutoProcessor gives them.
PROCESSOR_CLASSES: Final = MappingProxyType(
    {"SiglipProcessor": "siglip", "PaliGemmaProcessor": "paligemma", "Gemma3nProcessor": "gemma3n"}
)


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> SiglipConfig:
    """Mirrors ``SiglipImageProcessorPil``'s class defaults."""
    if registry.source_processor_class(source, PROCESSOR_CLASSES) == "Gemma3nProcessor":
        seq_length: int | None = processor.positive_int("image_seq_length", 256)
    elif cfg.raw("image_seq_length") is None:
        seq_length = None
    else:
        seq_length = cfg.positive_int("image_seq_length", 0)
    return SiglipConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **pil_backend_fields(
            cfg,
            size={"height": 224, "width": 224},
            default_to_square=False,
            resample=BICUBIC,
            mean=IMAGENET_STANDARD_MEAN,
            std=IMAGENET_STANDARD_STD,
        ),
        image_seq_length=seq_length,
    )


registry.register(
    registry.Family(
        name="siglip",
        processor_types=("SiglipImageProcessor",),
        model_types={
            "siglip": "SiglipImageProcessor",
            "paligemma": "SiglipImageProcessor",
            "gemma3n": "SiglipImageProcessor",
        },
        build=_build,
        processor_classes=PROCESSOR_CLASSES,
        hf_pil="siglip.image_processing_pil_siglip.SiglipImageProcessorPil",
        hf_torchvision="siglip.image_processing_siglip.SiglipImageProcessor",
    )
)


def _siglip_file(side: int, resample: int, processor_class: str) -> dict[str, object]:
    return {
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_processor_type": "SiglipImageProcessor",
        "image_std": list(HALF),
        "processor_class": processor_class,
        "resample": resample,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": side, "width": side},
    }


# google/siglip-so400m-patch14-384: the file verbatim in two copies (a serving plugin's dicts).
registry.register_builtin(
    "google/siglip-so400m-patch14-384", "siglip", _siglip_file(384, BICUBIC, "SiglipProcessor")
)
# google/siglip2-base-patch16-224 (fixed size): two write-ups of the hub file give 224x224,
# bilinear (resample 2) and mean/std 0.5; the exact key set is not confirmed. Fixed-size SigLIP 2
# checkpoints name SiglipImageProcessor and SiglipProcessor with "do_convert_rgb": null (a
# saved copy of another one, siglip2-giant-opt-patch16-384, has exactly these keys): transformers
# then converts nothing and refuses greyscale, palette and RGBA images, and so does mmfast.
registry.register_builtin(
    "google/siglip2-base-patch16-224",
    "siglip",
    {**_siglip_file(224, BILINEAR, "SiglipProcessor"), "do_convert_rgb": None},
)
# google/paligemma2-3b-pt-224: transformers' conversion script writes siglip-so400m's file with
# the tower's size (224) and image_seq_length (224 / 14) ** 2 = 256; the 448 checkpoint's file,
# seen verbatim, has the same keys with 448 and 1024 (and do_convert_rgb null).
registry.register_builtin(
    "google/paligemma2-3b-pt-224",
    "paligemma",
    {
        **_siglip_file(224, BICUBIC, "PaliGemmaProcessor"),
        "do_convert_rgb": None,
        "image_seq_length": 256,
    },
)
