"""LayoutLMv3 and UDOP: ``LayoutLMv3ImageProcessor`` / ``LayoutLMv3ImageProcessorPil``
(transformers 5.24), pixels only.

transformers' default pipeline with the class's defaults: every image squashed to 224x224
(bilinear), rescaled and normalised with mean and std 0.5. The class sets no
``do_convert_rgb``: off unless the checkpoint turns it on, so only RGB images go through
(transformers fails on others in its normalisation), as in mmfast. With ``apply_ocr`` (the class
default, and what UDOP's and LayoutLMv3's checkpoints save) the class also runs Tesseract on
each image and returns its ``words`` and ``boxes``: text recognition mmfast does not do, so a
config with ``apply_ocr`` on raises :class:`~mmfast.UnsupportedModelError` naming it
(``mmfast.hf`` then runs transformers' own code). ``UdopProcessor`` and
``LayoutLMv3Processor`` pass no image settings of their own: they read ``apply_ocr`` from the
image processor, so a processor built with ``apply_ocr=False`` (words and boxes given by the
caller) runs on mmfast.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmfast.errors import MmfastError, UnsupportedModelError
from mmfast.models import registry
from mmfast.models.base import (
    BILINEAR,
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
    ImagePlan,
)
from mmfast.models.config import Fields, Source
from mmfast.models.got_ocr2 import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from mmfast.models.pil_backend import PilBackendConfig, pil_backend_fields

__all__ = ["LayoutLMv3Config"]


@dataclass(frozen=True)
class LayoutLMv3Config(PilBackendConfig):
    """Settings of ``LayoutLMv3ImageProcessor`` with ``apply_ocr`` off.

    ``UdopProcessor`` and ``LayoutLMv3Processor`` put no image tokens in the text (the
    models embed the image's patches themselves): ``num_image_tokens`` is 0.
    """

    def count_tokens(self, height: int, width: int) -> int:
        """The processors insert no image tokens."""
        return 0

    def plan(self, height: int, width: int) -> ImagePlan:
        """``_preprocess`` without OCR. The PIL class calls its ``center_crop`` with a keyword
        it does not take (transformers raises TypeError): a centre crop is refused there."""
        if self.do_center_crop and self.backend == "pil":
            raise MmfastError(
                "do_center_crop: LayoutLMv3ImageProcessorPil fails with it on (its _preprocess "
                "calls center_crop(crop_size=...), a TypeError in transformers 5.24); turn it "
                "off or use backend='torchvision'"
            )
        return super().plan(height, width)


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> LayoutLMv3Config:
    """Mirrors ``LayoutLMv3ImageProcessorPil``'s class attributes; ``apply_ocr`` must be off."""
    if cfg.flag("apply_ocr", True):
        raise UnsupportedModelError(
            f"{source.origin}: apply_ocr: mmfast computes the pixels only, and apply_ocr=True "
            "asks for Tesseract's words and boxes too; pass apply_ocr=False (and give the "
            "words and boxes yourself) to run it on mmfast"
        )
    for name in ("ocr_lang", "tesseract_config"):
        value = cfg.raw(name)
        if value is not None and not isinstance(value, str):
            raise cfg.error(name, "a string or null", value)
    fields = pil_backend_fields(
        cfg,
        size={"height": 224, "width": 224},
        default_to_square=True,
        resample=BILINEAR,
        mean=IMAGENET_STANDARD_MEAN,
        std=IMAGENET_STANDARD_STD,
        crop_size=None,
    )
    # The class sets no do_convert_rgb: None, read as off (transformers then takes RGB only).
    fields["do_convert_rgb"] = cfg.flag("do_convert_rgb", False)
    return LayoutLMv3Config(model_id=source.model_id, image_processor_type=processor_type, **fields)


registry.register(
    registry.Family(
        name="layoutlmv3",
        processor_types=("LayoutLMv3ImageProcessor",),
        model_types={
            "layoutlmv3": "LayoutLMv3ImageProcessor",
            "udop": "LayoutLMv3ImageProcessor",
        },
        build=_build,
        kwargs=frozenset({"apply_ocr", "ocr_lang", "tesseract_config"}),
        processor_classes={"LayoutLMv3Processor": "layoutlmv3", "UdopProcessor": "udop"},
        processor_defaults={"LayoutLMv3Processor": {}, "UdopProcessor": {}},
        hf_pil="layoutlmv3.image_processing_pil_layoutlmv3.LayoutLMv3ImageProcessorPil",
        hf_torchvision="layoutlmv3.image_processing_layoutlmv3.LayoutLMv3ImageProcessor",
    )
)


def _udop_file(side: int) -> dict[str, object]:
    return {
        "apply_ocr": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(IMAGENET_DEFAULT_MEAN),
        "image_processor_type": "LayoutLMv3ImageProcessor",
        "image_std": list(IMAGENET_DEFAULT_STD),
        "processor_class": "UdopProcessor",
        "rescale_factor": 0.00392156862745098,
        "size": {"height": side, "width": side},
        "tesseract_config": "",
    }


# microsoft/udop-large and microsoft/udop-large-512: a public write-up quotes udop-large's
# preprocessor_config.json verbatim (these keys: apply_ocr true, ImageNet's default mean/std,
# 224x224, no resample key, so bilinear) and gives udop-large-512's as the same with 512x512.
# apply_ocr is on, as saved: mmfast refuses the file as it is (UnsupportedModelError naming
# apply_ocr) and runs it with apply_ocr=False.
registry.register_builtin("microsoft/udop-large", "udop", _udop_file(224))
registry.register_builtin("microsoft/udop-large-512", "udop", _udop_file(512))
