"""IDEFICS (v1): ``IdeficsImageProcessor`` (transformers 5.24) and ``IdeficsProcessor``'s token
count.

transformers' default pipeline with IDEFICS's class defaults: squashed to ``image_size`` x
``image_size`` (224, bicubic), rescaled, normalised with OpenAI's CLIP constants; the class
returns the ``pixel_values`` tensor itself, (N, 3, 224, 224). ``image_size``, read only when the
processor is built, replaces ``size``. IdeficsProcessor then stacks each prompt's images and
zero-fills its empty image slots up to the batch's most images per prompt, and puts
``<fake_token_around_image><image><fake_token_around_image>`` in the prompt for an image: one
image token (the images reach the model through cross-attention).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mmfast.models import registry
from mmfast.models.base import BICUBIC, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from mmfast.models.config import MAX_INT, Fields, Source, is_int_in
from mmfast.models.pil_backend import PilBackendConfig, pil_backend_fields

__all__ = ["IdeficsConfig"]


@dataclass(frozen=True)
class IdeficsConfig(PilBackendConfig):
    """Settings of ``IdeficsImageProcessor`` (``image_num_channels`` only sizes the processor's
    empty image slots)."""

    image_num_channels: int

    def count_tokens(self, height: int, width: int) -> int:
        """IdeficsProcessor's ``image_tokens`` for an image after text: the image token between
        two ``<fake_token_around_image>`` (an image right after another shares the first)."""
        return 3


def call_settings(values: Mapping[str, Any], call: Mapping[str, Any]) -> dict[str, Any]:
    """A call's settings over the config's: the config's ``image_size`` has become ``size``
    when the processor was built (a call's ``size`` replaces it); a call's own ``image_size``
    changes nothing (``preprocess`` ignores it)."""
    values = dict(values)
    image_size = values.get("image_size")
    if is_int_in(image_size, 1, MAX_INT):  # (else _build names it)
        del values["image_size"]
        values["size"] = {"height": image_size, "width": image_size}
    return {**values, **{k: v for k, v in call.items() if k != "image_size"}}


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> IdeficsConfig:
    """Mirrors ``IdeficsImageProcessorPil.__init__``: an ``image_size`` replaces ``size`` with a
    square of that side."""
    image_size = cfg.raw("image_size")
    # An instance (mmfast.hf's settings carry its values) has applied its image_size already:
    # the image_size a call passes is the instance's attribute, which preprocess ignores.
    if image_size is not None and cfg.raw(registry.INSTANCE_KEY) is None:
        side = cfg.positive_int("image_size", 224)
        cfg = cfg.with_values(size={"height": side, "width": side})
    if cfg.raw("transform") is not None:
        raise cfg.error(
            "transform", "None (mmfast runs the class's own pipeline)", cfg.raw("transform")
        )
    return IdeficsConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **pil_backend_fields(
            cfg,
            size={"height": 224, "width": 224},
            default_to_square=True,
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
        ),
        image_num_channels=cfg.int_in("image_num_channels", 3, 0, MAX_INT),
    )


registry.register(
    registry.Family(
        name="idefics",
        processor_types=("IdeficsImageProcessor",),
        model_types={"idefics": "IdeficsImageProcessor"},
        build=_build,
        kwargs=frozenset({"transform", "image_size", "image_num_channels"}),
        processor_classes={"IdeficsProcessor": "idefics"},
        hf_pil="idefics.image_processing_pil_idefics.IdeficsImageProcessorPil",
        hf_torchvision="idefics.image_processing_idefics.IdeficsImageProcessor",
        call_settings=call_settings,
        # Only to mark settings that come from an instance (see _build).
        instance_attributes=("image_size",),
    )
)

# HuggingFaceM4/idefics-9b: the file verbatim (the checkpoint's own, and in its fine-tunes):
# image_size 224, CLIP mean/std, image_num_channels 3; the rest are the class defaults.
registry.register_builtin(
    "HuggingFaceM4/idefics-9b",
    "idefics",
    {
        "image_num_channels": 3,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "IdeficsImageProcessor",
        "image_size": 224,
        "image_std": list(OPENAI_CLIP_STD),
        "processor_class": "IdeficsProcessor",
    },
)
