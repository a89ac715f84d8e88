"""The parity table: every built-in checkpoint family's row, from which the parity tests of
both backends are generated (``test_families`` for transformers' PIL classes, live;
``torchvision_cases`` for its torchvision classes, against goldens and live with torch).

A row names a built-in checkpoint, the token count its model's processor inserts, and the
overrides to try on both backends. Adding a family is adding its row here.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import kimi_reference
import numpy as np
from conftest import Override, builtin_dict
from PIL import Image

from mmfast import models

Outputs = Mapping[str, np.ndarray]
Reference = Callable[[list[Image.Image], dict[str, Any]], Outputs]


def hf_class(model_id: str) -> Any:
    """transformers' PIL class for the checkpoint's family."""
    family, _ = models.config.select_family(models.config.read_source(model_id))
    assert family.hf_pil is not None
    module, name = family.hf_pil.rsplit(".", 1)
    return getattr(importlib.import_module(f"transformers.models.{module}"), name)


def as_outputs(out: Any) -> dict[str, Any]:
    """A class's outputs by key: IdeficsImageProcessor returns its ``pixel_values`` alone."""
    return dict(out) if isinstance(out, Mapping) else {"pixel_values": out}


def hf_reference(model_id: str) -> Reference:
    """transformers' PIL class for the checkpoint's family, from the built-in's config dict,
    called with the image kwargs the model's processor passes (the family's
    ``processor_defaults``, checked against the HF processors below)."""
    cls = hf_class(model_id)
    family, _ = models.config.select_family(models.config.read_source(model_id))

    def run(images: list[Any], overrides: dict[str, Any]) -> Outputs:
        processor = cls.from_dict(builtin_dict(model_id) | overrides)
        defaults = models.registry.builtin_processor_defaults(model_id, family)
        kwargs = {k: v for k, v in defaults.items() if k not in overrides}
        return as_outputs(processor(images, return_tensors="np", **kwargs))

    return run


def kimi_vl_reference(model_id: str) -> Reference:
    def run(images: list[Image.Image], overrides: dict[str, Any]) -> Outputs:
        return kimi_reference.kimi_vl(images, builtin_dict(model_id) | overrides)

    return run


def kimi_k25_reference(model_id: str) -> Reference:
    def run(images: list[Image.Image], overrides: dict[str, Any]) -> Outputs:
        return kimi_reference.kimi_k25(images, builtin_dict(model_id)["media_proc_cfg"] | overrides)

    return run


def merged_tokens(merge: int) -> Callable[[Outputs, dict[str, Any]], int]:
    """Qwen-like processors: ``image_grid_thw.prod() // merge_size**2``."""

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        return int(np.prod(out["image_grid_thw"][0])) // merge**2

    return count


def gemma3_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """Gemma3Processor: 256 soft tokens for the image and each pan-and-scan crop."""
    return 256 * (1 + int(out["num_crops"][0]))


def internvl_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """InternVLProcessor: <img>, 256 context tokens per tile, </img>."""
    return 2 + 256 * int(out["num_patches"][0])


def aya_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """AyaVisionProcessor._get_num_multimodal_tokens with (364 // (14 * 2)) ** 2 per tile."""
    per_tile = (364 // 28) ** 2
    return per_tile + 3 + (int(out["num_patches"][0]) - 1) * (per_tile + 1)


def llava_next_tokens(
    processor: str, **attributes: Any
) -> Callable[[Outputs, dict[str, Any]], int]:
    """``replace_image_token``'s count of a LLaVA-NeXT-style processor (``module.Class`` under
    ``transformers.models``), run on a stand-in holding only the attributes it reads (the real
    processor needs a tokenizer)."""
    module, name = processor.rsplit(".", 1)
    cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        pinpoints = overrides.get("image_grid_pinpoints") or attributes["pinpoints"]
        fake = SimpleNamespace(
            image_processor=SimpleNamespace(image_grid_pinpoints=pinpoints),
            **{k: v for k, v in attributes.items() if k != "pinpoints"},
        )
        fake._get_unpadded_features = lambda *a: cls._get_unpadded_features(fake, *a)
        fake._get_number_of_features = lambda *a: cls._get_number_of_features(fake, *a)
        inputs = {
            "image_sizes": out["image_sizes"],
            "pixel_values": out["pixel_values"],
            "batch_num_images": out.get("batch_num_images", [1]),
        }
        return str(cls.replace_image_token(fake, inputs, 0)).count("<image>")

    return count


def idefics3_tokens(seq_len: int) -> Callable[[Outputs, dict[str, Any]], int]:
    """Idefics3Processor._get_num_multimodal_tokens, "\n\n" read as one token."""

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        rows, cols = out["rows"][0][0], out["cols"][0][0]
        return seq_len + 3 + rows * (cols * (seq_len + 2) + 1)

    return count


SPECIAL_TOKEN = re.compile(r"<[^<>]+>")


def replacement_tokens(
    processor: str, **attributes: Any
) -> Callable[[Outputs, dict[str, Any]], int]:
    """The tokens ``replace_image_token`` of a processor (``module.Class`` under
    ``transformers.models``) puts in the prompt for the first image, run on a stand-in holding
    only the attributes it reads (the real processor needs a tokenizer); every token is a
    special token, ``<...>``."""

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        module, name = processor.rsplit(".", 1)
        cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)
        fake = SimpleNamespace(**attributes)
        text = str(cls.replace_image_token(fake, dict(out), 0))
        assert SPECIAL_TOKEN.sub("", text) == "", text
        return len(SPECIAL_TOKEN.findall(text))

    return count


def step3p7_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """Step3p7Processor.replace_image_token, its placeholders sized as its ``__init__`` sizes
    them (a stride of 14 * 4)."""
    size = overrides.get("size", {"height": 728})["height"]
    patch = overrides.get("patch_size", 504)
    return replacement_tokens(
        "step3p7.processing_step3p7.Step3p7Processor",
        patch_feature_placeholder="<im_patch>" * (patch // 56) ** 2,
        image_feature_placeholder="<im_patch>" * (size // 56) ** 2,
    )(out, overrides)


def idefics_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """IdeficsProcessor's ``image_tokens(last_was_image=False)``:
    ``<fake_token_around_image><image><fake_token_around_image>``."""
    return 3


@dataclass(frozen=True)
class Row:
    """A built-in checkpoint, the token count its model's processor inserts for one image
    (None: not checked here), and the overrides to try. ``pil_reference`` replaces
    transformers' PIL class as the PIL-side reference (the Kimi checkpoints' processors are
    remote code); ``tv_overrides`` replaces ``overrides`` for the torchvision class where
    they are spelt differently there."""

    model_id: str
    tokens: Callable[[Outputs, dict[str, Any]], int] | None = None
    overrides: Sequence[Override] = field(default_factory=tuple)
    pil_reference: Reference | None = None
    tv_overrides: Sequence[Override] | None = None

    def __str__(self) -> str:
        return self.model_id.rsplit("/", 1)[-1]

    @property
    def family(self) -> models.Family:
        return models.config.select_family(models.config.read_source(self.model_id))[0]

    @property
    def reference(self) -> Reference | None:
        """The PIL-backend reference: transformers' PIL class, or the row's own."""
        if self.pil_reference is not None:
            return self.pil_reference
        return hf_reference(self.model_id) if self.family.hf_pil is not None else None

    @property
    def torchvision(self) -> bool:
        """Whether transformers has a torchvision class for the family."""
        return self.family.hf_torchvision is not None


COMMON = (
    Override({"do_normalize": False}),
    Override({"image_mean": [0.1, 0.2, 0.3], "image_std": [0.9, 0.7, 0.5]}),
)
PATCH_COMMON = (
    *COMMON,
    Override({"resample": 0}),
    Override({"resample": 1}),
    Override({"do_rescale": False}),
)

GLM_TYPES = "zai-org/GLM-4.1V-9B-Thinking", "zai-org/GLM-OCR"
TABLE = [
    Row(
        "Qwen/Qwen2.5-Omni-7B",
        merged_tokens(2),
        (*PATCH_COMMON, Override({"max_pixels": 28 * 28 * 64})),
    ),
    Row(
        "Qwen/Qwen3-Omni-30B-A3B-Instruct",
        merged_tokens(2),
        (Override({"min_pixels": 32 * 32 * 300}),),
    ),
    *(
        Row(
            model_id,
            merged_tokens(2),
            (
                *PATCH_COMMON,
                Override({"size": {"shortest_edge": 28 * 28 * 10, "longest_edge": 28 * 28 * 90}}),
                Override({"patch_size": 16}),
                Override({"temporal_patch_size": 3}),
                Override({"do_rescale": False, "do_normalize": False}),
            ),
        )
        for model_id in GLM_TYPES
    ),
    Row(
        "PaddlePaddle/PaddleOCR-VL",
        merged_tokens(2),
        (
            *PATCH_COMMON,
            Override({"max_pixels": 28 * 28 * 100}),
            Override({"min_pixels": 28 * 28 * 400, "max_pixels": 28 * 28 * 900}),
            Override({"temporal_patch_size": 2}),
            Override({"do_rescale": False, "do_normalize": False}),
        ),
    ),
    Row(
        "moonshotai/Kimi-VL-A3B-Instruct",
        lambda out, overrides: (
            int(np.prod(out["image_grid_hws"][0]))
            // int(np.prod(overrides.get("merge_kernel_size", [2, 2])))
        ),
        (
            Override({"in_token_limit": 64}),
            Override({"pad_input": False}),
            Override({"pad_input": False, "in_token_limit": 100}),
            Override({"merge_kernel_size": [1, 3], "in_token_limit": 300}),
            Override({"image_mean": [0.1, 0.2, 0.3], "image_std": [0.9, 0.7, 0.5]}),
        ),
        pil_reference=kimi_vl_reference("moonshotai/Kimi-VL-A3B-Instruct"),
    ),
    Row(
        "moonshotai/Kimi-K2.5",
        lambda out, overrides: (
            int(np.prod(out["grid_thws"][0])) // overrides.get("merge_kernel_size", 2) ** 2
        ),
        (
            Override({"in_patch_limit": 64}),
            Override({"patch_limit_on_one_side": 20}),
            Override({"merge_kernel_size": 3, "in_patch_limit": 500}),
            Override({"image_mean": [0.1, 0.2, 0.3], "image_std": [0.9, 0.7, 0.5]}),
        ),
        pil_reference=kimi_k25_reference("moonshotai/Kimi-K2.5"),
        # transformers' Kimi_K25ImageProcessor spells them as its own kwargs.
        tv_overrides=(
            Override({"in_patch_limit": 64}, {"max_patches": 64}),
            Override({"merge_kernel_size": 3}, {"merge_size": 3}),
            Override(
                {"patch_limit_on_one_side": 20}, {"size": {"max_height": 20, "max_width": 20}}
            ),
        ),
    ),
    Row(
        "google/gemma-3-4b-it",
        gemma3_tokens,
        (
            *COMMON,
            Override({"do_pan_and_scan": True}),
            Override({"do_pan_and_scan": True, "pan_and_scan_min_crop_size": 32}),
            Override({"do_pan_and_scan": True, "pan_and_scan_max_num_crops": 2}),
            Override({"size": {"height": 224, "width": 160}, "resample": 3}),
            Override({"do_pan_and_scan": True, "do_resize": False}),
        ),
    ),
    Row(
        "google/siglip-so400m-patch14-384",
        lambda out, overrides: 0,
        (
            *COMMON,
            Override({"do_rescale": False, "do_normalize": False}),
            Override({"resample": 0}),
        ),
    ),
    Row(
        "google/paligemma2-3b-pt-224",
        lambda out, overrides: 256,
        (Override({"size": {"height": 448, "width": 448}, "resample": 2}),),
    ),
    Row(
        "OpenGVLab/InternVL3-8B-hf",
        internvl_tokens,
        (
            *COMMON,
            Override({"crop_to_patches": False}),
            Override({"max_patches": 4}),
            Override({"min_patches": 3, "max_patches": 6}),
            Override({"size": {"height": 224, "width": 224}, "resample": 2}),
            # The torchvision class tiles whenever crop_to_patches is on.
            Override({"max_patches": 1, "do_resize": False}),
            Override({"crop_to_patches": False, "do_resize": False}),
        ),
    ),
    Row(
        "CohereLabs/aya-vision-8b",
        aya_tokens,
        (Override({"max_patches": 2}),),
    ),
    Row(
        "llava-hf/llava-v1.6-mistral-7b-hf",
        llava_next_tokens(
            "llava_next.processing_llava_next.LlavaNextProcessor",
            pinpoints=builtin_dict("llava-hf/llava-v1.6-mistral-7b-hf")["image_grid_pinpoints"],
            patch_size=14,
            num_additional_image_tokens=1,
            vision_feature_select_strategy="default",
            image_token="<image>",
        ),
        (
            *COMMON,
            Override({"image_grid_pinpoints": [[336, 336], [336, 1008], [1344, 336]]}),
            Override({"size": {"shortest_edge": 224}, "crop_size": 224}),
            Override({"size": {"shortest_edge": 400}}),
            Override({"resample": 2}),
            Override({"do_rescale": False, "do_normalize": False}),
        ),
    ),
    Row(
        "llava-hf/llava-onevision-qwen2-7b-ov-hf",
        llava_next_tokens(
            "llava_onevision.processing_llava_onevision.LlavaOnevisionProcessor",
            pinpoints=builtin_dict("llava-hf/llava-onevision-qwen2-7b-ov-hf")[
                "image_grid_pinpoints"
            ],
            num_image_tokens=729,
            vision_aspect_ratio="anyres_max_9",
            vision_feature_select_strategy="full",
            image_token="<image>",
        ),
        (
            *COMMON,
            Override({"image_grid_pinpoints": [[384, 384], [384, 768], [768, 768]]}),
            Override({"size": {"height": 224, "width": 224}}),
            Override({"resample": 0}),
        ),
    ),
    *(
        Row(
            model_id,
            idefics3_tokens(seq_len),
            (
                *COMMON,
                Override({"do_image_splitting": False}),
                Override({"size": {"longest_edge": 700}}),
                Override({"max_image_size": {"longest_edge": 200}}),
                Override({"do_resize": False}),
                Override({"resample": 3}),
                Override({"do_rescale": False, "do_normalize": False}),
            ),
        )
        for model_id, seq_len in [
            ("HuggingFaceTB/SmolVLM2-2.2B-Instruct", 81),
            ("HuggingFaceM4/Idefics3-8B-Llama3", 169),
        ]
    ),
]

# Overrides shared by the torchvision-heavy rows below.
QWEN_LIKE = (
    Override({"do_normalize": False}),
    Override({"do_rescale": False, "do_normalize": False}),
)
BOTH_OFF = Override({"do_rescale": False, "do_normalize": False})
TABLE += [
    Row(
        "Qwen/Qwen2-VL-7B-Instruct",
        merged_tokens(2),
        (
            *QWEN_LIKE,
            Override({"do_rescale": False}),
            Override({"resample": 0}),
            Override({"resample": 1}),
            Override({"resample": 2}),
            Override({"max_pixels": 28 * 28 * 64}),
        ),
    ),
    Row("Qwen/Qwen2.5-VL-7B-Instruct", merged_tokens(2), QWEN_LIKE),
    Row("Qwen/Qwen3-VL-8B-Instruct", merged_tokens(2), QWEN_LIKE),
    Row("zai-org/GLM-4.5V", merged_tokens(2)),
    Row("zai-org/GLM-4.6V", merged_tokens(2), QWEN_LIKE),
    Row("moonshotai/Kimi-K2.6"),
    Row("google/siglip2-base-patch16-224", lambda out, overrides: 0, (BOTH_OFF,)),
    Row(
        "llava-hf/llava-1.5-7b-hf",
        # LlavaProcessor: one token per 14-pixel patch of the crop (its CLS token is dropped).
        lambda out, overrides: (
            (out["pixel_values"].shape[-2] // 14) * (out["pixel_values"].shape[-1] // 14)
        ),
        (
            # Crops larger than the resized image by an odd excess, and inside it.
            Override({"crop_size": {"height": 231, "width": 229}}),
            Override({"crop_size": {"height": 223, "width": 221}, "size": {"shortest_edge": 224}}),
            Override({"resample": 1}),
        ),
    ),
    Row("OpenGVLab/InternVL3_5-8B-HF", internvl_tokens),
    Row(
        "HuggingFaceTB/SmolVLM-Instruct",
        idefics3_tokens(81),
        (BOTH_OFF, Override({"do_image_splitting": False})),
    ),
    Row(
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        None,
        (
            Override({"resample": 0}),
            Override({"resample": 1}),
            Override({"resample": 3}),
            Override({"do_normalize": False}),
            BOTH_OFF,
        ),
    ),
]


LLAVA_15_TOKENS = TABLE[[r.model_id for r in TABLE].index("llava-hf/llava-1.5-7b-hf")].tokens
# Pad colours int(mean * 255) outside 0..255: the PIL class cannot assign them to its uint8
# canvas (OverflowError), the torchvision class wraps them modulo 256.
WRAPPED_MEAN = Override({"image_mean": [1.2, -0.1, 0.5], "image_std": [0.9, 0.7, 0.5]})
LLAVA_PAD = (
    *COMMON,
    Override({"do_pad": False}),
    Override({"image_mean": [0.9, 0.1, 0.3]}),
    # A mean of 0 given as a number: the PIL class pads with 0, the torchvision one cannot
    # iterate it (TypeError).
    Override({"image_mean": 0.0}),
    Override({"resample": 1}),
    Override({"crop_size": {"height": 231, "width": 229}}),
    Override({"size": {"height": 200, "width": 300}, "do_center_crop": False}),
    Override({"do_resize": False}),
    BOTH_OFF,
)
DEEPSEEK = (
    *COMMON,
    Override({"min_size": 200}),
    Override({"min_size": 500}),
    Override({"size": {"height": 200, "width": 300}}),
    Override({"size": {"shortest_edge": 300}}),
    Override({"size": 200, "resample": 2}),
    Override({"do_pad": False}),
    Override({"do_resize": False}),
    Override({"resample": 0}),
    Override({"do_convert_rgb": True}),
    BOTH_OFF,
)
HYBRID = (
    *COMMON,
    Override({"high_res_image_mean": [0.2, 0.4, 0.6], "high_res_image_std": [0.3, 0.5, 0.7]}),
    Override({"high_res_size": {"height": 512, "width": 512}, "size": 256}),
    # The PIL class resizes with "high_res_resample or self.resample": 0 reads as resample.
    Override({"high_res_resample": 0}),
    Override({"resample": 0, "high_res_resample": 1}),
    Override({"min_size": 600}),
    # A low-resolution colour out of range: unused, the padded square resizes to a square.
    Override({"image_mean": [1.2, 0.1, 0.2]}),
    Override({"high_res_size": {"height": 600, "width": 500}}),
    Override({"do_rescale": False}),
    BOTH_OFF,
)
# The torchvision class fails without do_pad (KeyError) or do_resize (UnboundLocalError).
HYBRID_PIL_ONLY = (Override({"do_pad": False}), Override({"do_resize": False}))
TABLE += [
    Row(
        "liuhaotian/llava-v1.5-7b",
        LLAVA_15_TOKENS,
        LLAVA_PAD,
        tv_overrides=(*LLAVA_PAD, WRAPPED_MEAN),
    ),
    Row(
        "deepseek-community/deepseek-vl-1.3b-chat",
        replacement_tokens(
            "deepseek_vl.processing_deepseek_vl.DeepseekVLProcessor",
            image_token="<image_placeholder>",
            num_image_tokens=576,
        ),
        DEEPSEEK,
        tv_overrides=(*DEEPSEEK, WRAPPED_MEAN),  # torch refuses them too (RuntimeError)
    ),
    Row(
        "deepseek-community/Janus-Pro-1B",
        replacement_tokens(
            "janus.processing_janus.JanusProcessor",
            image_token="<image_placeholder>",
            image_start_token="<begin_of_image>",
            image_end_token="<end_of_image>",
            num_image_tokens=576,
        ),
        (*COMMON, Override({"min_size": 300}), Override({"do_pad": False}), BOTH_OFF),
    ),
    Row(
        "deepseek-community/deepseek-vl-7b-chat",
        replacement_tokens(
            "deepseek_vl_hybrid.processing_deepseek_vl_hybrid.DeepseekVLHybridProcessor",
            image_token="<image_placeholder>",
            num_image_tokens=576,
        ),
        (*HYBRID, *HYBRID_PIL_ONLY),
        tv_overrides=HYBRID,
    ),
    Row(
        "stepfun-ai/Step-3.7-Flash",
        step3p7_tokens,
        (
            Override({"patch_size": 336}),
            Override({"max_image_size": 1000}),
            Override({"size": {"height": 448, "width": 448}}),
            Override({"size": 500, "patch_size": 300}),
            Override({"resample": 0}),
            Override({"resample": 3}),
            Override({"do_normalize": False}),
            BOTH_OFF,
        ),
    ),
    Row(
        "facebook/chameleon-7b",
        replacement_tokens(
            "chameleon.processing_chameleon.ChameleonProcessor",
            image_token="<image>",
            image_start_token="<racm3:break>",
            image_end_token="<eoss>",
            image_seq_length=1024,
        ),
        (
            *COMMON,
            Override({"resample": 3}),
            Override({"rescale_factor": 1 / 255}),
            Override({"size": {"shortest_edge": 300}, "crop_size": 301}),
            Override({"do_center_crop": False}),
            BOTH_OFF,
        ),
    ),
    Row(
        "Salesforce/blip-vqa-base",
        lambda out, overrides: 0,  # BlipProcessor inserts no image tokens
        (
            *COMMON,
            Override({"do_resize": False}),
            Override({"size": {"shortest_edge": 300}}),
            Override({"do_pad": False}),
            Override({"resample": 0}),
            BOTH_OFF,
        ),
    ),
    Row(
        "Salesforce/blip2-opt-2.7b",
        # Blip2Processor: image_token * num_query_tokens.
        lambda out, overrides: 32,
        (Override({"size": 300}),),
    ),
    Row(
        "HuggingFaceM4/idefics-9b",
        idefics_tokens,
        (
            *COMMON,
            Override({"image_size": 300}),
            # The file's image_size replaces any size.
            Override({"size": {"height": 100, "width": 150}}),
            Override({"resample": 2}),
            BOTH_OFF,
        ),
    ),
]


def tv_overrides(row: Row) -> Sequence[Override]:
    """The overrides the torchvision class is tried with."""
    return row.tv_overrides if row.tv_overrides is not None else row.overrides
