"""BLIP, BLIP-2 and InstructBLIP: ``BlipImageProcessor`` (transformers 5.24) and the token
counts of the processors using it.

transformers' default pipeline with BLIP's class defaults: squashed to ``size`` (384x384,
bicubic), rescaled, normalised with OpenAI's CLIP constants. The Salesforce checkpoints also set
``do_pad``: the default pipeline's last step, the normalised images zero-padded at the bottom
and right to the batch's largest (a no-op when every image is resized to one size).
BlipProcessor inserts no image tokens; Blip2Processor and InstructBlipProcessor insert
``num_query_tokens`` (``processor_config.json``) per image.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import ClassVar

from mmfast.models import registry
from mmfast.models.base import BICUBIC, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, Canvas, ImagePlan
from mmfast.models.config import Fields, Source
from mmfast.models.pil_backend import PilBackendConfig, pil_backend_fields

__all__ = ["BlipConfig"]


@dataclass(frozen=True)
class BlipConfig(PilBackendConfig):
    """Settings of ``BlipImageProcessor``, ``do_pad`` (transformers' default pipeline pads to
    the batch's largest image), and the processor's ``num_query_tokens`` (None: BlipProcessor,
    which inserts none)."""

    do_pad: bool
    num_query_tokens: int | None

    # do_pad pads every image to the batch's largest (finish_batch).
    batch_shapes_images: ClassVar[bool] = True

    def count_tokens(self, height: int, width: int) -> int:
        """``Blip2Processor`` / ``InstructBlipProcessor``: ``num_query_tokens`` image tokens."""
        return self.num_query_tokens or 0

    def finish_batch(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> Sequence[ImagePlan]:
        """``PilBackend.pad`` to the batch's largest height and width, after normalising: each
        image's values at the top-left of a zero canvas. Only images of different sizes
        (``do_resize`` off, or a shortest-edge ``size``) need it."""
        shapes = {plan.output_shapes["pixel_values"] for plan in plans}
        if not self.do_pad or len(shapes) == 1:
            return plans
        height = max(shape[1] for shape in shapes)
        width = max(shape[2] for shape in shapes)
        return [
            replace(
                plan,
                output_shapes=MappingProxyType({"pixel_values": (3, height, width)}),
                views=(replace(plan.views[0], out=Canvas((height, width))),),
            )
            for plan in plans
        ]


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> BlipConfig:
    """Mirrors ``BlipImageProcessorPil``'s class defaults."""
    query = processor.raw("num_query_tokens")
    return BlipConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **pil_backend_fields(
            cfg,
            size={"height": 384, "width": 384},
            default_to_square=True,
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            pads=True,
        ),
        do_pad=cfg.flag("do_pad", False),
        num_query_tokens=None
        if query is None
        else processor.int_in("num_query_tokens", 0, 0, 2**31 - 1),
    )


registry.register(
    registry.Family(
        name="blip",
        processor_types=("BlipImageProcessor",),
        model_types={
            "blip": "BlipImageProcessor",
            "blip-2": "BlipImageProcessor",
            "instructblip": "BlipImageProcessor",
        },
        build=_build,
        processor_kwargs=frozenset({"num_query_tokens"}),
        processor_classes={
            "BlipProcessor": "blip",
            "Blip2Processor": "blip-2",
            "InstructBlipProcessor": "instructblip",
        },
        hf_pil="blip.image_processing_pil_blip.BlipImageProcessorPil",
        hf_torchvision="blip.image_processing_blip.BlipImageProcessor",
    )
)

# Salesforce/blip-vqa-base: its 445-byte file as ybelkada's "Upload processor" wrote it for the
# BLIP checkpoints, verbatim for blip-vqa-capfilt-large and blip-image-captioning-large (same
# size, same commit message) and in fine-tunes of blip-vqa-base: 384x384, bicubic, CLIP
# mean/std, do_pad with size_divisor 32 (an attribute the class no longer reads).
registry.register_builtin(
    "Salesforce/blip-vqa-base",
    "blip",
    {
        "do_normalize": True,
        "do_pad": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "BlipImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "processor_class": "BlipProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 384, "width": 384},
        "size_divisor": 32,
    },
)
# Salesforce/blip2-opt-2.7b: the file verbatim in copies of the BLIP-2 checkpoints
# (Mediocreatmybest/blip2-opt-2.7b-fp16-sharded, sooh-j/blip2-vizwizqa): 224x224, bicubic,
# CLIP mean/std. Blip2Processor's num_query_tokens: 32, the Q-Former's query count
# (Blip2Config's num_query_tokens); its processor_config.json not seen.
registry.register_builtin(
    "Salesforce/blip2-opt-2.7b",
    "blip-2",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "BlipImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "processor_class": "Blip2Processor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 224, "width": 224},
    },
    {"num_query_tokens": 32},
)
# Salesforce/instructblip-vicuna-7b: its file not seen; BLIP-2's (224x224, bicubic, CLIP
# mean/std), the image size and 32 Q-Former queries of the original InstructBLIP configs
# (LAVIS's instruct_vicuna7b). AutoVideoProcessor reads this file for its video processor
# (InstructBlipVideoVideoProcessor: it has no video file).
registry.register_builtin(
    "Salesforce/instructblip-vicuna-7b",
    "instructblip",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "BlipImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "processor_class": "InstructBlipProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 224, "width": 224},
    },
    {"num_query_tokens": 32},
)
