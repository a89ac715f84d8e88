"""Janus / Janus-Pro: ``JanusImageProcessor`` (transformers 5.24) and ``JanusProcessor``'s token
count.

The class's ``_preprocess`` is DeepSeek-VL's, line for line (resize the longest side, centre on
a square of the construction-time mean colour, rescale, normalise): the config and plan are
:class:`~mmfast.models.deepseek_vl.DeepseekVLConfig`'s. JanusProcessor puts its begin- and
end-of-image tokens around the 576 image tokens.
"""

from __future__ import annotations

from mmfast.models import registry
from mmfast.models.base import BICUBIC
from mmfast.models.deepseek_vl import KWARGS, build_with_tokens, call_over_instance

__all__: list[str] = []

registry.register(
    registry.Family(
        name="janus",
        processor_types=("JanusImageProcessor",),
        model_types={"janus": "JanusImageProcessor"},
        # JanusProcessor.replace_image_token: boi + num_image_tokens images + eoi.
        build=build_with_tokens(2),
        kwargs=KWARGS,
        processor_kwargs=frozenset({"num_image_tokens"}),
        processor_classes={"JanusProcessor": "janus"},
        hf_pil="janus.image_processing_pil_janus.JanusImageProcessorPil",
        hf_torchvision="janus.image_processing_janus.JanusImageProcessor",
        call_settings=call_over_instance(("image_mean",)),
        instance_attributes=("background_color", "resample"),
    )
)

# deepseek-community/Janus-Pro-1B: transformers' conversion script copies image_mean,
# image_std, min_size, rescale_factor and image_size (as a square size) from deepseek-ai's
# file, seen verbatim in a fine-tune's copy (midbee/Janus-Pro-R1-7B: VLMImageProcessor,
# image_size 384, mean/std 0.5, min_size 14, background 127 = int(0.5 * 255)); the rest are
# the class defaults. The converted file itself not seen.
registry.register_builtin(
    "deepseek-community/Janus-Pro-1B",
    "janus",
    {
        "do_normalize": True,
        "do_pad": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_processor_type": "JanusImageProcessor",
        "image_std": [0.5, 0.5, 0.5],
        "min_size": 14,
        "processor_class": "JanusProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 384, "width": 384},
    },
    {"num_image_tokens": 576},
)
