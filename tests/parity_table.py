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
from typing import Any, ClassVar

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


def replaced_tokens(
    processor: str | None, merge: int, **attributes: Any
) -> Callable[[Outputs, dict[str, Any]], int]:
    """``replace_image_token``'s count of a Qwen-like processor (``module.Class`` under
    ``transformers.models``), run on a stand-in holding the attributes it reads: the image
    processor's ``merge_size`` (the override's, else ``merge``) and ``attributes`` (the image
    processor's, or the processor's where it has them; an override of the same name wins).
    ``processor`` None: the ``image_grid_thw.prod() // merge_size**2`` that every such
    processor's method returns, where transformers builds the class only with torch."""
    cls = None
    if processor is not None:
        module, name = processor.rsplit(".", 1)
        cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        merge_size = overrides.get("merge_size", merge)
        if cls is None:
            return int(np.prod(out["image_grid_thw"][0])) // merge_size**2
        values = {k: overrides.get(k, v) for k, v in attributes.items()}
        fake = SimpleNamespace(
            image_processor=SimpleNamespace(merge_size=merge_size, **values),
            image_token="<image>",
            **values,
        )
        replaced = cls.replace_image_token(fake, {"image_grid_thw": out["image_grid_thw"]}, 0)
        return str(replaced).count("<image>")

    return count


def idefics3_tokens(seq_len: int) -> Callable[[Outputs, dict[str, Any]], int]:
    """Idefics3Processor._get_num_multimodal_tokens, "\n\n" read as one token."""

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        rows, cols = out["rows"][0][0], out["cols"][0][0]
        return seq_len + 3 + rows * (cols * (seq_len + 2) + 1)

    return count


# MiniCPM-V's placeholder as its tokenizer splits it: each <marker> one token, each digit of an
# image id one token (Qwen-style digit splitting), a newline one token.
MINICPM_TOKEN = re.compile(r"<[^<>]+>|\d|\n")


def minicpm_tokens(
    processor: str, model_id: str, downsample_mode: str
) -> Callable[[Outputs, dict[str, Any]], int]:
    """A MiniCPM-V processor's placeholder for the first image of a prompt
    (``replace_image_token``, then ``_prepend_local_ids`` with ``use_image_id``), run on a
    stand-in holding only the attributes they read, counted in tokens (``MINICPM_TOKEN``).
    ``use_image_id``, ``slice_mode`` and ``downsample_mode`` are the image processor's, as the
    processor reads them: the overrides, else the checkpoint's file, else the class defaults
    (``downsample_mode`` given, the others true)."""
    module, name = processor.rsplit(".", 1)
    cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        defaults = {"use_image_id": True, "slice_mode": True, "downsample_mode": downsample_mode}
        settings = {
            key: overrides.get(key, builtin_dict(model_id).get(key, default))
            for key, default in defaults.items()
        }
        fake = SimpleNamespace(
            image_token="<unk>",
            video_token="<video>",
            image_start_token="<image>",
            image_end_token="</image>",
            slice_start_token="<slice>",
            slice_end_token="</slice>",
            image_id_start_token="<image_id>",
            image_id_end_token="</image_id>",
            slice_mode=settings["slice_mode"],
        )
        divisor = 4 if settings["downsample_mode"] == "4x" else 16
        text = cls.replace_image_token(fake, out, 0, image_token_divisor=divisor)
        if settings["use_image_id"]:
            text = cls._prepend_local_ids(fake, [fake.image_token], [text], fake.image_token)[0]
        tokens = MINICPM_TOKEN.findall(text)
        assert "".join(tokens) == text, text
        return len(tokens)

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
    size = overrides.get("size", {"height": 728})
    size = size if isinstance(size, int) else size["height"]  # an int is a square's side
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
            # The class's own settings, which the checkpoint's processor does not read.
            Override({"in_patch_limit": 64, "max_patches": 100}, {"max_patches": 100}),
            Override({"do_normalize": False, "rescale_factor": 1 / 128}),
            Override({"resample": 0}),
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

# The Qwen-like families of transformers 5.24 (Ernie-4.5-VL, HunyuanOCR, GLM-5, VideoLLaMA3,
# GLM-Image, GLM-GA). Their override images are 150x97 and 61x530: do_resize=False refuses
# both (sides not multiples of the patch grouping), as transformers' reshape does.
QWEN_EXTRA = (
    *PATCH_COMMON,
    Override({"do_rescale": False, "do_normalize": False}),
    Override({"do_resize": False}),
)
TABLE += [
    Row(
        "baidu/ERNIE-4.5-VL-28B-A3B-PT",
        replaced_tokens("ernie4_5_vl_moe.processing_ernie4_5_vl_moe.Ernie4_5_VLMoeProcessor", 2),
        (
            *QWEN_EXTRA,
            Override({"size": {"shortest_edge": 28 * 28 * 10, "longest_edge": 28 * 28 * 90}}),
            Override({"merge_size": 1}),
            Override({"patch_size": 16}),
            Override({"temporal_patch_size": 2}),
        ),
    ),
    Row(
        "tencent/HunyuanOCR",
        replaced_tokens(
            "hunyuan_vl.processing_hunyuan_vl.HunYuanVLProcessor",
            2,
            spatial_patch_size=1,
            cat_extra_token=True,
        ),
        (
            # resample 0 and 1 (in PATCH_COMMON): the class resizes with bicubic whatever.
            *QWEN_EXTRA,
            Override({"max_pixels": 32 * 32 * 64}),
            Override({"min_pixels": 32 * 32 * 400, "max_pixels": 32 * 32 * 900}),
            Override({"size": {"shortest_edge": 32 * 32 * 10, "longest_edge": 32 * 32 * 90}}),
            Override({"merge_size": 1}),
            Override({"merge_size": 3}),
            Override({"temporal_patch_size": 2}),
            Override({"cat_extra_token": False}),
        ),
    ),
    Row(
        "zai-org/GLM-5.3-Flash",
        replaced_tokens("glm5_next.processing_glm5_next.Glm5NextProcessor", 2),
        (
            *QWEN_EXTRA,
            Override({"min_image_tokens": 64}),
            Override({"max_image_tokens": 20}),
            Override({"max_image_tokens": 1}),
            # The torchvision class's factor is patch * merge * patch_expand_factor, the PIL
            # class's patch * merge.
            Override({"patch_expand_factor": 2}),
            Override({"patch_expand_factor": 3, "max_image_tokens": 30}),
            Override({"merge_size": 1}),
            Override({"temporal_patch_size": 1}),
            Override({"temporal_patch_size": 3}),
            Override({"size": {"height": 10, "width": 10}}),  # read, then unused
        ),
    ),
    Row(
        "lkhl/VideoLLaMA3-2B-Image-HF",
        replaced_tokens("video_llama_3.processing_video_llama_3.VideoLlama3Processor", 1),
        (
            *QWEN_EXTRA,
            Override({"max_pixels": 14 * 14 * 64}),
            Override({"min_pixels": 14 * 14 * 400, "max_pixels": 14 * 14 * 900}),
            Override({"merge_size": 2}),
            Override({"temporal_patch_size": 2}),
        ),
    ),
    Row(
        "zai-org/GLM-Image",
        # GlmImageProcessor (built only with torch): image_grid_thw.prod() // merge_size**2.
        replaced_tokens(None, 2),
        (
            *QWEN_EXTRA,
            Override({"min_pixels": 512 * 512, "max_pixels": 2048 * 2048}),
            Override({"max_pixels": 200 * 200}),
            Override({"patch_size": 16}),
            Override({"merge_size": 1}),
            Override({"temporal_patch_size": 1}),
        ),
    ),
    Row(
        "zai-org/GLM-GA",
        # No processor class in transformers: GLM-4.6V's, which serves the checkpoint.
        replaced_tokens("glm46v.processing_glm46v.Glm46VProcessor", 2),
        (
            *QWEN_EXTRA,
            Override({"size": {"shortest_edge": 28 * 28 * 10, "longest_edge": 28 * 28 * 90}}),
            Override({"patch_expand_factor": 2}),
            Override(
                {
                    "patch_expand_factor": 2,
                    "size": {"shortest_edge": 56 * 56 * 10, "longest_edge": 56 * 56 * 90},
                }
            ),
            Override({"temporal_patch_size": 3}),
        ),
    ),
]


# MiniCPM-V 4.6 / 4.7 and MiniCPM-OCR. The override images (150x97, 61x530) are below one
# slice at 448: a small scale_resolution slices them.
MINICPM_SLICED = (
    Override({"scale_resolution": 112}),
    Override({"scale_resolution": 112, "max_slice_nums": 2}),
    Override({"scale_resolution": 56, "downsample_mode": "4x"}),
    Override({"scale_resolution": 112, "slice_mode": False}),
    Override({"scale_resolution": 112, "use_image_id": False}),
    Override({"scale_resolution": 100, "patch_size": 10}),
)
MINICPM_V = (
    *PATCH_COMMON,
    Override({"resample": 2}),
    BOTH_OFF,
    Override({"downsample_mode": "4x"}),
    Override({"max_slice_nums": 0}),
    *MINICPM_SLICED,
)
# transformers' PIL class takes do_resize=False for sides that are multiples of patch_size
# (its torchvision class fails on every image: see test_minicpm).
MINICPM_V_PIL = (
    Override({"do_resize": False}),
    Override({"do_resize": False, "patch_size": 1}),
)
MINICPM_46 = "openbmb/MiniCPM-V-4.6"
MINICPM_47 = "openbmb/MiniCPM-V-4.7-1B"
MINICPM_OCR = "openbmb/MiniCPM-OCR-1.0"
TABLE += [
    Row(
        MINICPM_46,
        minicpm_tokens(
            "minicpmv4_6.processing_minicpmv4_6.MiniCPMV4_6Processor", MINICPM_46, "16x"
        ),
        (*MINICPM_V, *MINICPM_V_PIL),
        tv_overrides=MINICPM_V,
    ),
    Row(
        MINICPM_47,
        minicpm_tokens(
            "minicpmv4_7.processing_minicpmv4_7.MiniCPMV4_7Processor", MINICPM_47, "16x"
        ),
        (Override({"downsample_mode": "4x"}), Override({"scale_resolution": 112})),
    ),
    Row(
        MINICPM_OCR,
        minicpm_tokens("minicpm_ocr.processing_minicpm_ocr.MiniCPMOcrProcessor", MINICPM_OCR, "4x"),
        (
            *COMMON,
            Override({"resample": 2}),
            BOTH_OFF,
            Override({"downsample_mode": "16x"}),
            Override({"small_image_upsize": "never"}),
            Override({"small_image_upsize": "never", "scale_resolution": 112}),
            Override({"do_resize": False}),
            *MINICPM_SLICED,
        ),
    ),
]


def placeholder_tokens(
    processor: str, pattern: str, inputs: Callable[[Outputs], dict[str, Any]], **attributes: Any
) -> Callable[[Outputs, dict[str, Any]], int]:
    """The tokens of the placeholder a processor's ``replace_image_token`` (``module.Class``
    under ``transformers.models``) writes for the image, run on a stand-in holding the
    attributes it reads, counted as the matches of ``pattern`` (one token each: the
    checkpoints' tokenizers hold every tag as a special token). An attribute given as a
    callable is computed from the row's overrides."""
    module, name = processor.rsplit(".", 1)
    cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        values = {k: v(overrides) if callable(v) else v for k, v in attributes.items()}
        text = cls.replace_image_token(SimpleNamespace(**values), inputs(out), 0)
        return len(re.findall(pattern, text))

    return count


def setting(model_id: str, name: str) -> Callable[[dict[str, Any]], Any]:
    """A setting of the built-in as an override may change it."""
    return lambda overrides: overrides.get(name, builtin_dict(model_id)[name])


MLLAMA = "meta-llama/Llama-3.2-11B-Vision-Instruct"
DEEPSEEK_OCR2 = "deepseek-community/DeepSeek-OCR-2"
GRANITE_DOCLING = "ibm-granite/granite-for-docling-500m"
TABLE += [
    Row(
        MLLAMA,
        # MllamaProcessor keeps the one <|image|> token (the model attends by cross-attention).
        placeholder_tokens(
            "mllama.processing_mllama.MllamaProcessor",
            r"<\|image\|>",
            lambda out: {},
            image_token="<|image|>",
        ),
        (
            *COMMON,
            BOTH_OFF,
            Override({"do_rescale": False}),
            Override({"max_image_tiles": 2}),
            Override({"max_image_tiles": 6}),
            Override({"size": {"height": 64, "width": 64}}),
            Override({"size": {"height": 224, "width": 224}, "resample": 3}),
            Override({"resample": 0}),
            Override({"resample": 1}),
        ),
    ),
    Row("meta-llama/Llama-3.2-11B-Vision", lambda out, overrides: 1),
    Row(
        DEEPSEEK_OCR2,
        placeholder_tokens(
            "deepseek_ocr2.processing_deepseek_ocr2.DeepseekOcr2Processor",
            "<image>",
            lambda out: {"num_local_patches": out["num_local_patches"]},
            image_processor=lambda overrides: SimpleNamespace(
                size=setting(DEEPSEEK_OCR2, "size")(overrides),
                tile_size=setting(DEEPSEEK_OCR2, "tile_size")(overrides),
            ),
            patch_size=16,
            downsample_ratio=4,
            image_token="<image>",
        ),
        (
            *COMMON,
            BOTH_OFF,
            Override({"do_rescale": False}),
            Override({"tile_size": 128}),
            Override({"tile_size": 64, "min_patches": 1, "max_patches": 9}),
            Override({"tile_size": 128, "crop_to_patches": False}),
            Override({"crop_to_patches": False}),
            Override({"background_color": [255, 0, 10], "size": {"height": 640, "width": 640}}),
            Override({"background_color": 200}),
            Override({"resample": 2}),
            Override({"resample": 0, "tile_size": 100}),
        ),
    ),
    Row(
        "CohereLabs/command-a-vision-07-2025",
        placeholder_tokens(
            "cohere2_vision.processing_cohere2_vision.Cohere2VisionProcessor",
            r"<\|[A-Z_]+\|>",
            lambda out: {"num_patches": out["num_patches"]},
            patch_size=16,
            boi_token="<|START_OF_IMG|>",
            eoi_token="<|END_OF_IMG|>",
            image_token="<|IMG_PATCH|>",
            img_line_break_token="<|IMG_LINE_BREAK|>",
        ),
        (
            *COMMON,
            BOTH_OFF,
            Override({"do_rescale": False}),
            Override({"crop_to_patches": False}),
            Override({"crop_to_patches": False, "size": {"shortest_edge": 100}}),
            Override({"crop_to_patches": False, "do_resize": False}),
            Override({"max_patches": 3}),
            Override({"size": {"height": 64, "width": 96}}),
            Override({"size": {"height": 48, "width": 48}, "max_patches": 30}),
            Override({"resample": 1}),
            Override({"resample": 2}),
        ),
    ),
    *(
        Row(
            model_id,
            placeholder_tokens(
                "ovis2.processing_ovis2.Ovis2Processor",
                "<[^>]+>",
                lambda out: {"grids": out["grids"]},
                image_seq_length=256,
            ),
            overrides,
        )
        for model_id, overrides in [
            (
                "thisisiron/Ovis2-2B-hf",
                (
                    *COMMON,
                    BOTH_OFF,
                    Override({"do_rescale": False}),
                    Override({"crop_to_patches": False}),
                    Override({"use_covering_area_grid": False}),
                    Override({"size": {"height": 64, "width": 64}}),
                    Override({"size": {"height": 40, "width": 56}, "max_patches": 20}),
                    Override(
                        {
                            "size": {"height": 64, "width": 64},
                            "min_patches": 3,
                            "max_patches": 6,
                            "use_covering_area_grid": False,
                        }
                    ),
                    Override({"size": {"height": 64, "width": 64}, "max_patches": 1}),
                    Override({"do_center_crop": True, "crop_size": {"height": 201, "width": 333}}),
                    Override({"do_center_crop": True, "crop_size": {"height": 461, "width": 447}}),
                    Override({"do_resize": False}),
                    Override({"do_resize": False, "crop_to_patches": False}),
                    Override({"crop_to_patches": False, "size": {"shortest_edge": 100}}),
                    Override({"resample": 2}),
                ),
            ),
            ("thisisiron/Ovis2-1B-hf", ()),
        ]
    ),
    Row(
        GRANITE_DOCLING,
        placeholder_tokens(
            "granite_docling.processing_granite_docling.GraniteDoclingProcessor",
            # Each tag and each run of newlines one token, as Idefics3's tokenizer reads them.
            r"<[^>]+>|\n+",
            lambda out: {
                "rows": out["rows"],
                "cols": out["cols"],
                **({"tile_fine_mask": None} if "tile_fine_mask" in out else {}),
            },
            image_seq_len=64,
            image_token="<image>",
            fake_image_token="<fake_token_around_image>",
            global_image_tag="<global-img>",
        ),
        (
            *COMMON,
            BOTH_OFF,
            Override({"do_rescale": False}),
            Override({"crop_to_patches": False}),
            Override({"size": {"height": 64, "width": 64}}),
            Override({"size": {"height": 64, "width": 64}, "max_patches": 6}),
            Override({"size": {"height": 64, "width": 64}, "min_patches": 4, "max_patches": 3}),
            Override({"size": {"height": 32, "width": 48}, "min_patches": 5}),
            Override({"fine_route": True}),
            Override(
                {
                    "size": {"height": 64, "width": 64},
                    "max_patches": 4,
                    "dense_max_patches": 12,
                    "dense_max_scale": 1.5,
                    "dense_min_aspect": 1.2,
                }
            ),
            Override(
                {
                    "size": {"height": 64, "width": 64},
                    "max_patches": 4,
                    "dense_max_patches": 12,
                    "dense_min_aspect": 1.2,
                    "dense_max_aspect": 5.0,
                }
            ),
            Override({"resample": 2}),
        ),
    ),
]


def molmo2_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """``Molmo2Processor.replace_image_token``'s string for the image's ``image_grids`` row
    (the processor's default column and start tokens), counted in special tokens: it is made
    of ``<im_patch>``, ``<im_col>``, ``<low_res_im_start>``, ``<im_start>`` and ``<im_end>``."""
    from transformers.models.molmo2.processing_molmo2 import Molmo2Processor

    fake = SimpleNamespace(
        image_use_col_tokens=True, use_single_crop_col_tokens=None, use_single_crop_start_token=True
    )
    text = Molmo2Processor.replace_image_token(fake, {"image_grids": out["image_grids"]}, 0)
    return len(re.findall(r"<[^<>]+>", text))


# The families with only a torchvision class whose pixels the core computes in float32
# (Phi-4-multimodal's global view) or resizes in float32 (Molmo2).
TABLE += [
    Row(
        "microsoft/Phi-4-multimodal-instruct",
        # Phi4MultimodalProcessor.replace_image_token: num_img_tokens image tokens.
        lambda out, overrides: int(out["num_img_tokens"][0]),
        (
            *COMMON,
            Override({"do_rescale": False}),
            BOTH_OFF,
            Override({"dynamic_hd": 4}),
            Override({"dynamic_hd": 2, "resample": 2}),
            Override({"resample": 0}),
            Override({"size": {"height": 224, "width": 224}}),
            Override({"patch_size": 16}),
            # A global view of 56 + 56 <= 128 pixels: torch's channels-last bilinear loop.
            Override({"size": {"height": 56, "width": 56}, "resample": 2}),
            Override({"size": {"height": 448, "width": 224}}),
            Override({"resample": 1}),
        ),
    ),
    Row(
        "allenai/Molmo2-8B",
        molmo2_tokens,
        (
            *COMMON,
            Override({"do_rescale": False}),
            BOTH_OFF,
            Override({"resample": 3}),
            Override({"resample": 0}),
            Override({"max_crops": 2}),
            Override({"max_crops": 12, "overlap_margins": [2, 3]}),
            Override({"overlap_margins": [0, 0], "pooling_size": [3, 3]}),
            Override({"pooling_size": [1, 2]}),
            Override({"size": {"height": 384, "width": 384}, "patch_size": 16}),
            # Crops and canvases of at most 128 pixels a side pair: the channels-last loop.
            Override({"size": {"height": 56, "width": 56}, "overlap_margins": [1, 1]}),
            Override({"patch_size": 16}),
            Override({"overlap_margins": [14, 14]}),
            Override({"resample": 1}),
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


# --------------------------------------------------------------------------------------------
# Canvas families: Pixtral (Mistral 3, LightOnOCR), Idefics2, Emu3.


def pixtral_tokens(model_id: str) -> Callable[[Outputs, dict[str, Any]], int]:
    """``PixtralProcessor.replace_image_token``, restated (transformers builds the class only
    with torch): ``([IMG] * cols + [IMG_BREAK]) * rows`` with the last token ``[IMG_END]``,
    (rows, cols) the image size over ``P = patch_size * spatial_merge_size`` (processor
    config). The processor calls the image processor with ``patch_size=P``; the reference ran
    with the file's patch size, whose sizes are the same floored size rounded up to that
    patch, so HF's ``get_resize_output_image_size`` rounds them up to P as the processor's
    call does (P a multiple of the file's patch, and the longest edge too). Without a resize,
    or with a centre crop (the PIL class records the crop), the sizes do not depend on the
    patch size."""
    from transformers.models.pixtral.image_processing_pil_pixtral import (
        get_resize_output_image_size,
    )

    processor = models.registry.BUILTINS[model_id].processor
    patch = processor["patch_size"] * processor.get("spatial_merge_size", 1)
    config = builtin_dict(model_id)
    edge, file_patch = config["size"]["longest_edge"], config["patch_size"]["height"]
    assert patch % file_patch == 0 and edge % file_patch == 0

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        height, width = (int(v) for v in out["image_sizes"][0])
        resized = overrides.get("do_resize", True) and not overrides.get("do_center_crop")
        if resized and patch != file_patch:
            longest = overrides.get("size", {}).get("longest_edge", edge)
            height, width = get_resize_output_image_size(
                np.zeros((height, width, 3)), size=(longest, longest), patch_size=(patch, patch)
            )
        rows = [["[IMG]"] * (width // patch) + ["[IMG_BREAK]"]] * (height // patch)
        tokens = [token for row in rows for token in row]
        tokens[-1] = "[IMG_END]"
        return len(tokens)

    return count


def gemma4_tokens(processor: str) -> Callable[[Outputs, dict[str, Any]], int]:
    """``replace_image_token`` of Gemma4Processor / Gemma4UnifiedProcessor (``module.Class``
    under ``transformers.models``), on a stand-in with its three tokens: the ``<|image|>``
    soft tokens between ``<|image>`` and ``<image|>``."""
    module, name = processor.rsplit(".", 1)
    cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        fake = SimpleNamespace(boi_token="<|image>", image_token="<|image|>", eoi_token="<image|>")
        return str(cls.replace_image_token(fake, out, 0)).count("<|image|>")

    return count


def lighton_tokens(model_id: str) -> Callable[[Outputs, dict[str, Any]], int]:
    """``LightOnOcrProcessor.replace_image_token`` on a stand-in holding what it reads: one
    image token per ``patch_size * spatial_merge_size`` square of ``image_sizes``."""
    from transformers.models.lighton_ocr.processing_lighton_ocr import LightOnOcrProcessor

    processor = models.registry.BUILTINS[model_id].processor
    fake = SimpleNamespace(
        image_token="<|image_pad|>",
        effective_patch_size=processor["patch_size"] * processor["spatial_merge_size"],
    )

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        text = LightOnOcrProcessor.replace_image_token(fake, dict(out), 0)
        return str(text).count("<|image_pad|>")

    return count


def idefics2_tokens(model_id: str) -> Callable[[Outputs, dict[str, Any]], int]:
    """``Idefics2Processor.__call__``'s expansion of one ``<image>``, run on a stand-in holding
    what it reads (its tokenizer records the prompt), counting the special tokens: the
    processor reads ``do_image_splitting`` from its image processor's settings."""
    import re

    from transformers.models.idefics2.processing_idefics2 import Idefics2Processor

    seq_len = models.registry.BUILTINS[model_id].processor["image_seq_len"]

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        prompts: list[str] = []

        class Tokenizer:
            init_kwargs: ClassVar[dict[str, Any]] = {}

            def __call__(self, text: list[str], **kwargs: Any) -> dict[str, Any]:
                prompts.extend(text)
                return {}

        splitting = overrides.get(
            "do_image_splitting", builtin_dict(model_id)["do_image_splitting"]
        )
        fake = SimpleNamespace(
            fake_image_token="<fake_token_around_image>",
            image_token="<image>",
            image_seq_len=seq_len,
            image_processor=SimpleNamespace(do_image_splitting=splitting),
            tokenizer=Tokenizer(),
            _merge_kwargs=lambda **kwargs: {"text_kwargs": {}, "images_kwargs": {}},
            _check_special_mm_tokens=lambda *args, **kwargs: None,
        )
        Idefics2Processor.__call__(fake, text="<image>")
        return len(re.findall(r"<[^<>]+>", prompts[0]))

    return count


def emu3_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """``Emu3Processor.replace_image_token`` on a stand-in holding what it reads, counting its
    ``<image>`` tokens (what ``_get_num_multimodal_tokens`` counts)."""
    from transformers.models.emu3.processing_emu3 import Emu3Processor

    fake = SimpleNamespace(
        image_start_token="<|image start|>",
        image_end_token="<|image end|>",
        fake_token_around_image="<|image token|>",
        eof_token="<|extra_201|>",
        image_token="<image>",
        downsample_ratio=8,
    )
    text = Emu3Processor.replace_image_token(fake, dict(out), 0)
    return str(text).count("<image>")


def refuses_channels_first_misread(reference: Reference) -> Reference:
    """``reference`` (Emu3's NumPy class) refusing, as mmfast does, images 1 or 3 pixels
    high: ``infer_channel_dimension_format`` reads such an image, first in its prompt, as
    channels-first, and transformers then fails (1 row) or scrambles the pixels (3 rows),
    which mmfast does not reproduce (reported, not matched)."""

    def run(images: list[Image.Image], overrides: dict[str, Any]) -> Outputs:
        flat = [i for item in images for i in (item if isinstance(item, list) else [item])]
        if any(image.height in (1, 3) for image in flat):
            raise ValueError("an image 1 or 3 pixels high reads channels-first")
        return reference(images, overrides)

    return run


def raises_value_error(reference: Reference) -> Reference:
    """``reference`` with transformers' ZeroDivisionError (Idefics2 splitting a 1-pixel-high
    image) raised as the ValueError the parity tests expect of a refusal."""

    def run(images: list[Image.Image], overrides: dict[str, Any]) -> Outputs:
        try:
            return reference(images, overrides)
        except ZeroDivisionError as exc:
            raise ValueError(f"transformers raises ZeroDivisionError: {exc}") from exc

    return run


MISTRAL_SMALL = "mistralai/Mistral-Small-3.1-24B-Instruct-2503"
LIGHTON = "lightonai/LightOnOCR-1B-1025"
IDEFICS2 = "HuggingFaceM4/idefics2-8b"
TABLE += [
    Row(
        MISTRAL_SMALL,
        pixtral_tokens(MISTRAL_SMALL),
        (
            *PATCH_COMMON,
            Override({"resample": 2}),
            BOTH_OFF,
            Override({"do_pad": False}),
            Override({"do_resize": False}),
            Override({"do_center_crop": True, "crop_size": {"height": 100, "width": 120}}),
        ),
    ),
    Row(
        "mistralai/Mistral-Small-3.2-24B-Instruct-2506",
        pixtral_tokens("mistralai/Mistral-Small-3.2-24B-Instruct-2506"),
    ),
    Row(
        "mistral-community/pixtral-12b",
        pixtral_tokens("mistral-community/pixtral-12b"),
        (
            *COMMON,
            Override({"size": {"longest_edge": 300}}),
            Override({"size": {"height": 200, "width": 500}}),
            Override({"size": 100}),
        ),
    ),
    Row(
        LIGHTON,
        lighton_tokens(LIGHTON),
        (
            Override({"patch_size": 16}),
            Override({"patch_size": {"height": 14, "width": 20}}),
            Override({"size": {"longest_edge": 500}, "resample": 1}),
            Override({"do_center_crop": True, "crop_size": 701}),
            Override({"do_center_crop": True, "crop_size": {"height": 99, "width": 121}}),
            Override({"do_pad": False, "do_rescale": False}),
            Override({"do_resize": False, "do_normalize": False}),
        ),
    ),
    Row(
        IDEFICS2,
        idefics2_tokens(IDEFICS2),
        (
            *COMMON,
            Override({"do_image_splitting": False}),
            Override({"size": {"shortest_edge": 300, "longest_edge": 700}}),
            Override({"size": {"height": 300, "width": 200}, "resample": 3}),
            Override({"size": 500, "resample": 0}),
            Override({"do_resize": False}),
            Override({"do_pad": False, "do_image_splitting": False}),
            BOTH_OFF,
        ),
        pil_reference=raises_value_error(hf_reference(IDEFICS2)),
    ),
    Row(
        "BAAI/Emu3-Chat-hf",
        emu3_tokens,
        (
            *PATCH_COMMON,
            BOTH_OFF,
            Override({"resample": 2}),
            Override({"min_pixels": 64 * 64, "max_pixels": 200 * 200}),
            Override({"min_pixels": 0, "max_pixels": 100 * 100, "spatial_factor": 16}),
            Override({"do_resize": False}),
            Override({"do_pad": False}),
        ),
        pil_reference=refuses_channels_first_misread(hf_reference("BAAI/Emu3-Chat-hf")),
    ),
]


# Lfm2VlImageProcessor's class defaults of the settings Lfm2VlProcessor counts with.
LFM2_COUNTED = {"tile_size": 512, "downsample_factor": 2, "encoder_patch_size": 16}


def lfm2_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """``Lfm2VlProcessor.replace_image_token`` on a stand-in (special tokens on, as the
    checkpoint says), called with the image kwargs as the processor passes them; every
    ``<image>`` and ``<|...|>`` marker is one token."""
    cls = importlib.import_module("transformers.models.lfm2_vl.processing_lfm2_vl").Lfm2VlProcessor
    settings = LFM2_COUNTED | {"use_thumbnail": True}
    settings |= {k: v for k, v in builtin_dict("LiquidAI/LFM2-VL-1.6B").items() if k in settings}
    settings |= {k: v for k, v in overrides.items() if k in settings}
    fake = SimpleNamespace(
        image_processor=SimpleNamespace(**settings),
        image_token="<image>",
        image_start_token="<|image_start|>",
        image_end_token="<|image_end|>",
        image_thumbnail_token="<|img_thumbnail|>",
    )
    for method in (
        "_get_image_num_tokens",
        "_compute_tokens_per_tile",
        "_compute_tokens_for_image",
    ):
        setattr(fake, method, getattr(cls, method).__get__(fake))
    fake._build_image_tokens = cls._build_image_tokens.__get__(fake)
    text = str(cls.replace_image_token(fake, out, 0, use_image_special_tokens=True, **overrides))
    return len(re.findall(r"<image>|<\|[a-z0-9_]+\|>", text))


GEMMA4_COMMON = (
    Override({"do_normalize": True, "image_mean": [0.1, 0.2, 0.3], "image_std": [0.9, 0.7, 0.5]}),
    Override({"do_rescale": False}),
    BOTH_OFF,
    Override({"resample": 1}),
    Override({"resample": 2}),
    Override({"max_soft_tokens": 70}),
    Override({"max_soft_tokens": 1120}),
    Override({"patch_size": 14, "pooling_kernel_size": 2}),
    # Sides that are not whole patches: both refuse.
    Override({"do_resize": False}),
)
SIGLIP2_COMMON = (
    *COMMON,
    BOTH_OFF,
    Override({"do_rescale": False}),
    Override({"resample": 0}),
    Override({"resample": 3}),
    Override({"max_num_patches": 64}),
    Override({"max_num_patches": 1024}),
    Override({"patch_size": 14}),
    Override({"do_resize": False}),
)
# Overrides whose budget splits even the small override images into tiles (of 64 pixels, so
# that a tile fills max_num_patches = max(4 * 2**2, (64 // 16)**2) = 16 rows).
LFM2_TILED = {"max_image_tokens": 4, "min_image_tokens": 2, "tile_size": 64}
TABLE += [
    Row(
        "google/gemma-4-31B-it",
        gemma4_tokens("gemma4.processing_gemma4.Gemma4Processor"),
        (
            *GEMMA4_COMMON,
            Override({"max_soft_tokens": 140}),
            Override({"max_soft_tokens": 560}),
            # torchvision's legacy NEAREST (what tvF.resize makes of 0) is not in the engine.
            Override({"resample": 0}),
            Override({"resample": 4}),
            Override({"resample": 5}),
        ),
        tv_overrides=(
            *GEMMA4_COMMON,
            Override({"max_soft_tokens": 140}),
            Override({"resample": 4}),
        ),
    ),
    Row("google/siglip2-base-patch16-naflex", lambda out, overrides: 0, SIGLIP2_COMMON),
    Row(
        "google/gemma-4-12B-it",
        gemma4_tokens("gemma4_unified.processing_gemma4_unified.Gemma4UnifiedProcessor"),
        (*GEMMA4_COMMON, Override({"max_soft_tokens": 560})),
    ),
    Row(
        "LiquidAI/LFM2-VL-1.6B",
        lfm2_tokens,
        (
            *COMMON,
            BOTH_OFF,
            Override({"resample": 0}),
            Override({"resample": 3}),
            Override({"max_image_tokens": 128}),
            Override({"min_image_tokens": 128}),
            Override({"do_image_splitting": False}),
            Override({"return_row_col_info": False}),
            Override({"do_pad": False}),
            Override(LFM2_TILED),
            Override({**LFM2_TILED, "use_thumbnail": False}),
            Override({**LFM2_TILED, "min_tiles": 1, "max_tiles": 4}),
            Override({**LFM2_TILED, "max_pixels_tolerance": 0.5}),
            Override({**LFM2_TILED, "do_pad": False}),
            Override({**LFM2_TILED, "downsample_factor": 1, "encoder_patch_size": 32}),
            Override({"min_tiles": 4, "max_tiles": 2}),
        ),
    ),
]


# --------------------------------------------------------------------------------------------
# Smart-resize patch-row families of transformers 5.24: Apertus 1.5, Cohere North Micro Vision,
# Cosmos3 Edge, Hy4, MiniMax-M3, Muse Glimmer. Token counts from each processor's
# replace_image_token, run on a stand-in holding what it reads.


def replaced_tokens(
    processor: str, token: str, **attributes: Any
) -> Callable[[Outputs, dict[str, Any]], int]:
    """The ``token`` count in ``replace_image_token``'s string for the first image of the
    outputs, the processor (``module.Class`` under ``transformers.models``) run on a stand-in
    with ``attributes`` and an image processor holding the row's ``merge_size`` and
    ``spatial_factor`` (the overrides', else 2 and 16)."""
    module, name = processor.rsplit(".", 1)
    cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        image_processor = SimpleNamespace(
            merge_size=overrides.get("merge_size", 2),
            spatial_factor=overrides.get("spatial_factor", 16),
        )
        fake = SimpleNamespace(image_processor=image_processor, **attributes)
        fake._num_frame_tokens = getattr(cls, "_num_frame_tokens", None)
        return str(cls.replace_image_token(fake, dict(out), 0)).count(token)

    return count


APERTUS = "swiss-ai/Apertus-v1.5-8B"
NORTH = "CohereLabs/North-Micro-Vision-Instruct"
COSMOS3_EDGE = "nvidia/Cosmos3-Edge"
HY4 = "tencent/Hy4"
MINIMAX_M3 = "MiniMaxAI/MiniMax-M3"
MUSE_GLIMMER = "meta-models/Muse-Glimmer-30B"
TABLE += [
    Row(
        APERTUS,
        replaced_tokens(
            "apertus1p5.processing_apertus1p5.Apertus1p5Processor",
            "<|image|>",
            image_token="<|image|>",
            eol_token="<|eol|>",
            boi_token="<|boi|>",
            eoi_token="<|eoi|>",
            image_wrapper_token="<|wrap|>",
        ),
        (
            *PATCH_COMMON,
            BOTH_OFF,
            Override({"resample": 2}),
            Override({"size": {"min_pixels": 64 * 64, "max_pixels": 200 * 200}}),
            Override({"size": {"min_pixels": 300 * 300, "max_pixels": 600 * 600}}),
            Override({"spatial_factor": 8}),
            Override({"do_resize": False}),
            Override({"do_pad": False}),
            Override({"do_resize": False, "do_pad": False, "do_rescale": False}),
        ),
    ),
    Row(
        NORTH,
        merged_tokens(2),
        (
            *PATCH_COMMON,
            BOTH_OFF,
            Override({"resample": 2}),
            Override({"max_pixels": 32 * 32 * 64}),
            Override({"min_pixels": 32 * 32 * 400, "max_pixels": 32 * 32 * 900}),
            Override({"size": {"shortest_edge": 28 * 28 * 10, "longest_edge": 28 * 28 * 90}}),
            Override({"patch_size": 14}),
            Override({"temporal_patch_size": 1}),
            Override({"do_resize": False}),
        ),
    ),
    Row(
        COSMOS3_EDGE,
        merged_tokens(2),
        (
            *PATCH_COMMON,
            BOTH_OFF,
            Override({"resample": 2}),
            Override({"size": {"shortest_edge": 32 * 32 * 10, "longest_edge": 32 * 32 * 90}}),
            Override({"size": {"shortest_edge": 400 * 400, "longest_edge": 900 * 900}}),
            Override({"patch_size": 14}),
            Override({"do_resize": False}),
        ),
    ),
    Row(
        HY4,
        replaced_tokens(
            "hy_v4_vl.processing_hy_v4_vl.HYV4VLProcessor",
            "<|image_pad|>",
            image_token="<|image_pad|>",
        ),
        (
            *PATCH_COMMON,
            BOTH_OFF,
            Override({"max_pixels": 32 * 32 * 64}),
            Override({"min_pixels": 32 * 32 * 400, "max_pixels": 32 * 32 * 900}),
            Override({"size": {"shortest_edge": 28 * 28 * 10, "longest_edge": 28 * 28 * 90}}),
            Override({"patch_size": 14}),
            Override({"temporal_patch_size": 2}),
            Override({"do_resize": False}),
        ),
    ),
    Row(
        MINIMAX_M3,
        replaced_tokens(
            "minimax_m3_vl.processing_minimax_m3_vl.MiniMaxM3VLProcessor",
            "]<]image[>[",
            IMAGE_TOKEN="]<]image[>[",
            VISION_START_TOKEN="]<]start of image[>[",
            VISION_END_TOKEN="]<]end of image[>[",
        ),
        (
            # Not min_pixels/max_pixels: with the checkpoint's [672, 672] size, transformers
            # folds them into the class's own default size, which every later instance in the
            # process then inherits (mmfast reads each config alone).
            *PATCH_COMMON,
            BOTH_OFF,
            Override({"resample": 2}),
            Override({"size": {"shortest_edge": 28 * 28 * 10, "longest_edge": 28 * 28 * 90}}),
            Override({"size": {"shortest_edge": 500 * 500, "longest_edge": 900 * 900}}),
            Override({"patch_size": 16}),
            Override({"temporal_patch_size": 1}),
            Override({"do_resize": False}),
        ),
    ),
    Row(
        MUSE_GLIMMER,
        replaced_tokens(
            "muse_glimmer.processing_muse_glimmer.MuseGlimmerProcessor",
            "<|patch|>",
            image_token="<|patch|>",
            image_start_token="<|image_start|>",
            image_end_token="<|image_end|>",
        ),
        (
            *COMMON,
            BOTH_OFF,
            Override({"do_rescale": False}),
            Override({"resample": 0}),
            Override({"resample": 2}),
            Override({"resample": 3}),
            Override({"max_image_tokens": 64}),
            Override({"max_image_tokens": 1}),
            Override({"patch_size": 16}),
            Override({"merge_size": 1}),
            Override({"temporal_patch_size": 1}),
            Override({"temporal_patch_size": 3}),
            Override({"do_resize": False}),
        ),
    ),
]


# --------------------------------------------------------------------------------------------
# PP-Chart2Table, LayoutLMv3 (UDOP), PI0, Video-LLaVA, Fuyu, PP-FormulaNet.


def no_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """PPChart2TableProcessor, UdopProcessor and PPFormulaNetProcessor put no image tokens in
    the text (none of them has an image token)."""
    return 0


def pi0_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """``PI0Processor``: ``image_token * image_seq_length`` per camera image, the length read
    from its image processor (built here from the same settings)."""
    from transformers.models.pi0.image_processing_pi0 import PI0ImageProcessor

    config = builtin_dict("lerobot/pi0_base") | overrides
    return int(PI0ImageProcessor.from_dict(config).image_seq_length)


TABLE += [
    Row(
        "PaddlePaddle/PP-Chart2Table_safetensors",
        no_tokens,
        (
            *COMMON,
            BOTH_OFF,
            Override({"resample": 2}),
            Override({"size": {"height": 300, "width": 200}, "do_convert_rgb": True}),
        ),
    ),
    Row(
        "microsoft/udop-large",
        no_tokens,
        (
            *COMMON,
            BOTH_OFF,
            Override({"resample": 3}),
            Override({"size": {"height": 100, "width": 300}}),
        ),
        tv_overrides=(
            *COMMON,
            BOTH_OFF,
            Override({"resample": 3}),
            # The PIL class fails with a centre crop (a TypeError in transformers).
            Override({"do_center_crop": True, "crop_size": {"height": 200, "width": 250}}),
        ),
    ),
    Row("microsoft/udop-large-512", no_tokens),
    Row(
        "lerobot/pi0_base",
        pi0_tokens,
        (
            *COMMON,
            BOTH_OFF,
            Override({"resample": 2}),
            Override({"pad_size": {"height": 300, "width": 256}}),
            Override({"pad_size": 100}),
            Override({"do_pad": False}),
            Override({"size": {"max_height": 100, "max_width": 300}, "image_seq_length": 64}),
            Override({"size": {"height": 200, "width": 150}}),
            Override({"do_resize": False, "pad_size": 1000}),
        ),
    ),
]


def video_llava_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """``VideoLlavaProcessor.replace_image_token`` on a stand-in holding what it reads (its
    defaults: 14-pixel patches, one CLS token, the "default" strategy dropping it)."""
    from transformers.models.video_llava.processing_video_llava import VideoLlavaProcessor

    fake = SimpleNamespace(
        patch_size=14,
        num_additional_image_tokens=1,
        vision_feature_select_strategy="default",
        image_token="<image>",
    )
    return str(VideoLlavaProcessor.replace_image_token(fake, dict(out), 0)).count("<image>")


VIDEO_LLAVA = "LanguageBind/Video-LLaVA-7B-hf"
TABLE += [
    Row(
        VIDEO_LLAVA,
        video_llava_tokens,
        (
            *PATCH_COMMON,
            BOTH_OFF,
            Override({"size": {"height": 200, "width": 300}}),
            Override({"size": {"shortest_edge": 100, "longest_edge": 150}}),
            Override({"size": 300, "crop_size": {"height": 250, "width": 301}}),
            Override({"do_center_crop": False}),
            Override({"crop_size": 501}),
            Override({"do_resize": False, "crop_size": 100}),
            Override({"do_convert_rgb": False}),
        ),
        pil_reference=refuses_channels_first_misread(hf_reference(VIDEO_LLAVA)),
    ),
]


def fuyu_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """``FuyuProcessor._process_images``' count for the first image: the padded image cut to
    the unpadded size rounded up to whole patches, ``get_num_patches`` of it, then
    ``replace_image_token``'s ``|SPEAKER|`` and ``|NEWLINE|`` tokens (its ``<s>`` not
    counted), on a stand-in holding what it reads."""
    import math

    from transformers.models.fuyu.image_processing_pil_fuyu import FuyuImageProcessorPil
    from transformers.models.fuyu.processing_fuyu import FuyuProcessor

    processor = FuyuImageProcessorPil.from_dict(builtin_dict("adept/fuyu-8b") | overrides)
    patch = processor.patch_size
    height, width = np.asarray(out["images"][0]).shape[-2:]
    new_h = min(
        height, math.ceil(int(out["image_unpadded_heights"][0][0]) / patch.height) * patch.height
    )
    new_w = min(
        width, math.ceil(int(out["image_unpadded_widths"][0][0]) / patch.width) * patch.width
    )
    num_patches = processor.get_num_patches(new_h, new_w, patch)
    fake = SimpleNamespace(image_token="|SPEAKER|", image_newline_token="|NEWLINE|")
    text = str(
        FuyuProcessor.replace_image_token(
            fake, dict(out), 0, num_patches=num_patches, row_width=new_w // patch.width
        )
    )
    return text.count("|SPEAKER|") + text.count("|NEWLINE|")


FUYU = "adept/fuyu-8b"
FUYU_OVERRIDES = (
    *COMMON,
    BOTH_OFF,
    Override({"resample": 0}),
    Override({"resample": 3}),
    Override({"size": {"height": 300, "width": 400}}),
    Override({"size": {"height": 120, "width": 90}, "padding_value": 0.5}),
    Override({"size": {"height": 200, "width": 120}, "padding_value": -1.0}),
    Override({"size": {"height": 160, "width": 600}, "padding_value": 300}),
    Override({"size": {"height": 160, "width": 600}, "patch_size": {"height": 16, "width": 20}}),
    Override({"do_pad": False}),
    # Larger than size on both sides: the PIL class leaves it unpadded, torchvision's raises.
    Override({"do_resize": False, "size": {"height": 50, "width": 60}}),
    Override({"do_resize": False, "size": {"height": 200, "width": 60}}),
)
TABLE += [Row(FUYU, fuyu_tokens, FUYU_OVERRIDES)]

FORMULANET = "PaddlePaddle/PP-FormulaNet_plus-L_safetensors"
TABLE += [
    Row(
        FORMULANET,
        no_tokens,
        (
            *COMMON,
            BOTH_OFF,
            Override({"resample": 3}),
            Override({"size": {"height": 100, "width": 300}}),
            Override({"size": {"height": 300, "width": 90}}),
            Override({"do_thumbnail": False}),
            Override({"do_thumbnail": False, "size": {"height": 120, "width": 64}}),
            Override({"do_resize": False}),
            Override({"do_resize": False, "do_thumbnail": False, "size": 100}),
            Override({"do_pad": False}),
            Override({"do_align_long_axis": True}),
        ),
    ),
]

# The image side of the video checkpoints added with their video processors.
TABLE += [
    Row(
        "llava-hf/LLaVA-NeXT-Video-7B-hf",
        llava_next_tokens(
            "llava_next_video.processing_llava_next_video.LlavaNextVideoProcessor",
            pinpoints=builtin_dict("llava-hf/LLaVA-NeXT-Video-7B-hf")["image_grid_pinpoints"],
            patch_size=14,
            num_additional_image_tokens=1,
            vision_feature_select_strategy="default",
            image_token="<image>",
        ),
        COMMON,
    ),
]


# --------------------------------------------------------------------------------------------
# Tiling and crop families: Aria, PerceptionLM, UnlimitedOCR, Inkling.


def aria_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """``AriaProcessor.replace_image_token`` on a stand-in holding what it reads (its default
    ``size_conversion``), counting its image tokens: ``num_crops`` times the tokens of a crop
    of ``pixel_values``' side."""
    from transformers.models.aria.processing_aria import AriaProcessor

    fake = SimpleNamespace(size_conversion={490: 128, 980: 256}, image_token="<|img|>")
    return str(AriaProcessor.replace_image_token(fake, dict(out), 0)).count("<|img|>")


TABLE += [
    Row(
        "rhymes-ai/Aria",
        aria_tokens,
        (
            *PATCH_COMMON,
            Override({"resample": 2}),
            BOTH_OFF,
            Override({"split_image": True}),
            Override({"split_image": True, "max_image_size": 490}),
            Override({"max_image_size": 490, "min_image_size": 100}),
            Override({"min_image_size": 600}),
            Override({"split_image": True, "split_resolutions": [[490, 490], [980, 1470]]}),
        ),
    ),
]


def perception_lm_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """``PerceptionLMProcessor.replace_image_token`` on a stand-in holding what it reads
    (patch 14, pooling 2), counting its image tokens: per tile of the image's entry."""
    from transformers.models.perception_lm.processing_perception_lm import PerceptionLMProcessor

    fake = SimpleNamespace(patch_size=14, pooling_ratio=2, image_token="<|image|>")
    inputs = {"pixel_values": np.asarray(out["pixel_values"])}
    return str(PerceptionLMProcessor.replace_image_token(fake, inputs, 0)).count("<|image|>")


TABLE += [
    Row(
        "facebook/Perception-LM-1B",
        perception_lm_tokens,
        (
            *PATCH_COMMON,
            Override({"resample": 2}),
            BOTH_OFF,
            Override({"vision_input_type": "vanilla"}),
            Override({"max_num_tiles": 4}),
            Override({"max_num_tiles": 1}),
            Override({"tile_size": 224, "max_num_tiles": 9}),
            Override({"do_resize": False}),
        ),
    ),
]


def inkling_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """``InklingProcessor.replace_image_token`` on a stand-in, counting its image tokens: one
    per square (``num_patches``)."""
    from transformers.models.inkling.processing_inkling import InklingProcessor

    fake = SimpleNamespace(image_token="<|unused_200054|>")
    text = InklingProcessor.replace_image_token(fake, {"num_patches": out["num_patches"]}, 0)
    return str(text).count("<|unused_200054|>")


TABLE += [
    Row(
        "thinkingmachines/Inkling",
        inkling_tokens,
        (
            *PATCH_COMMON,
            Override({"resample": 2}),
            Override({"resample": 3}),
            BOTH_OFF,
            Override({"rescale_image_frac": 2.0}),
            Override({"rescale_image_frac": 0.5, "resample": 2}),
            Override({"rescale_image_frac": 3.0, "rescale_image_max_upscaled_long_edge": 300}),
            Override({"size": {"height": 16, "width": 16}}),
        ),
    ),
]


def unlimited_ocr_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """``UnlimitedOcrProcessor.replace_image_token`` on a stand-in holding what it reads (its
    default patch 16 and downsample 4, the image processor's size and tile size)."""
    from transformers.models.unlimited_ocr.processing_unlimited_ocr import UnlimitedOcrProcessor

    image_processor = SimpleNamespace(
        size=overrides.get("size", {"height": 1024, "width": 1024}),
        tile_size=overrides.get("tile_size", 640),
    )
    fake = SimpleNamespace(
        image_processor=image_processor, patch_size=16, downsample_ratio=4, image_token="<image>"
    )
    return str(UnlimitedOcrProcessor.replace_image_token(fake, dict(out), 0)).count("<image>")


TABLE += [
    Row(
        "baidu/Unlimited-OCR",
        unlimited_ocr_tokens,
        (
            *PATCH_COMMON,
            Override({"resample": 2}),
            BOTH_OFF,
            Override({"crop_to_patches": False}),
            Override({"crop_to_patches": False, "size": {"height": 512, "width": 512}}),
            Override({"tile_size": 64, "max_patches": 6}),
            Override({"tile_size": 96, "min_patches": 1, "background_color": [10, 20, 30]}),
            Override({"size": {"height": 200, "width": 300}, "background_color": 200}),
        ),
    ),
]
