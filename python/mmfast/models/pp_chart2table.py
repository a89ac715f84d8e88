"""PP-Chart2Table: ``PPChart2TableImageProcessor`` / ``PPChart2TableImageProcessorPil``
(transformers 5.24).

transformers' default pipeline with the class's defaults: every image squashed to 1024x1024
(bicubic), rescaled and normalised with OpenAI's CLIP constants. The class sets no
``do_convert_rgb``, so it is off unless the checkpoint turns it on: transformers then takes
only RGB images (a greyscale or RGBA image fails in its normalisation), and so does mmfast.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmfast.models import registry
from mmfast.models.base import BICUBIC, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from mmfast.models.config import Fields, Source
from mmfast.models.pil_backend import PilBackendConfig, pil_backend_fields

__all__ = ["PPChart2TableConfig"]


@dataclass(frozen=True)
class PPChart2TableConfig(PilBackendConfig):
    """Settings of ``PPChart2TableImageProcessor``.

    ``PPChart2TableProcessor`` has no image token of its own: it hands the text to the
    tokenizer as given (the chat template writes the image's placeholders), so it inserts
    none and ``num_image_tokens`` is 0.
    """

    def count_tokens(self, height: int, width: int) -> int:
        """``PPChart2TableProcessor`` inserts no image tokens."""
        return 0


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> PPChart2TableConfig:
    """Mirrors the class attributes of ``PPChart2TableImageProcessorPil``: no
    ``do_convert_rgb`` (None, read as off), ``default_to_square`` from ``BaseImageProcessor``."""
    fields = pil_backend_fields(
        cfg,
        size={"height": 1024, "width": 1024},
        default_to_square=True,
        resample=BICUBIC,
        mean=OPENAI_CLIP_MEAN,
        std=OPENAI_CLIP_STD,
    )
    fields["do_convert_rgb"] = cfg.flag("do_convert_rgb", False)
    return PPChart2TableConfig(
        model_id=source.model_id, image_processor_type=processor_type, **fields
    )


registry.register(
    registry.Family(
        name="pp_chart2table",
        processor_types=("PPChart2TableImageProcessor",),
        model_types={"pp_chart2table": "PPChart2TableImageProcessor"},
        build=_build,
        processor_classes={"PPChart2TableProcessor": "pp_chart2table"},
        processor_defaults={"PPChart2TableProcessor": {}},
        hf_pil="pp_chart2table.image_processing_pil_pp_chart2table.PPChart2TableImageProcessorPil",
        hf_torchvision="pp_chart2table.image_processing_pp_chart2table.PPChart2TableImageProcessor",
    )
)

# PaddlePaddle/PP-Chart2Table_safetensors (the checkpoint transformers' config docstring
# names): no public copy of its preprocessor_config.json was found. The values are the class
# defaults (1024x1024, bicubic, CLIP mean/std), which transformers' modular file wrote for the
# checkpoint; whether the file also sets do_convert_rgb is unconfirmed (it is off here, as in
# the class).
registry.register_builtin(
    "PaddlePaddle/PP-Chart2Table_safetensors",
    "pp_chart2table",
    {
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "PPChart2TableImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "processor_class": "PPChart2TableProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 1024, "width": 1024},
    },
)
