"""mmfast.hf against transformers 5.24, bit for bit, offline.

Each case writes a checkpoint directory in tmp_path from a built-in id (preprocessor_config.json,
processor_config.json where the model has one, config.json with the model type, and a WordLevel
tokenizer made here, holding the special tokens the model's processor reads) and loads it with
transformers twice: as is, and after ``mmfast.hf.install()``. Both loads must return the same
keys, types, dtypes, shapes and bits (``input_ids`` included); the installed one must be
mmfast-backed and must have run mmfast. Without torch, transformers loads its PIL classes and
only ``return_tensors="np"`` is checked; with torch and torchvision it loads the torchvision
classes, checked with "np" and "pt".

transformers builds the Qwen, GLM-4.1V, LLaVA-OneVision and InternVL processors only with
torchvision (their video processors need it): without it those cases check the image processor
alone (every built-in model is checked that way). SmolVLM2's processor needs num2words, which is
not installed: SmolVLM-Instruct's Idefics3Processor covers the family.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import builtin_dict, describe, noise, same_bits
from PIL import Image

import mmfast
from mmfast import UnsupportedModelError, hf
from mmfast.models import registry
from mmfast.models.config import load_video_config

transformers = pytest.importorskip("transformers")

TORCH = all(importlib.util.find_spec(m) is not None for m in ("torch", "torchvision"))
TENSORS = ["np", "pt"] if TORCH else ["np"]
NEEDS_TORCHVISION = "transformers builds this only with torch and torchvision"


LLAMA4 = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
QWEN2 = "Qwen/Qwen2-VL-7B-Instruct"
LLAVA = "llava-hf/llava-1.5-7b-hf"
KIMI_K25 = "moonshotai/Kimi-K2.5"
# Built-in models whose image processor transformers loads and mmfast backs (Kimi-VL's is
# remote code only; for the Kimi-K2.5 checkpoints transformers loads its own
# Kimi_K25ImageProcessor, with its class defaults, unless trust_remote_code is given).
IMAGE_IDS = [m for m in mmfast.supported_models() if not m.startswith("moonshotai/Kimi-VL")]
# Image processors transformers has only as torchvision classes, for the checkpoints a family
# lookup does not tell: Kimi-K2.5's (AutoImageProcessor loads transformers' own
# Kimi_K25ImageProcessor, its local class winning over their auto_map) and Fuyu's
# (FuyuImageProcessorPil is marked as needing torch: AutoImageProcessor loads neither).
TORCHVISION_ONLY = (KIMI_K25, "moonshotai/Kimi-K2.6", "adept/fuyu-8b")

# Every special token the processors below put in or look for; the words make the prompts.
SPECIAL_TOKENS = (
    "<pad>", "<unk>", "<s>", "</s>", "<|image_pad|>", "<|video_pad|>", "<|vision_start|>",
    "<|vision_end|>", "<image>", "<video>", "<start_of_image>", "<end_of_image>",
    "<image_soft_token>", "<IMG_CONTEXT>", "<img>", "</img>", "<fake_token_around_image>",
    "<global-img>", "<end_of_utterance>", "<|image|>", "<|image_start|>", "<|image_end|>",
    "<|patch|>", "<|tile_x_separator|>", "<|tile_y_separator|>", "<|START_OF_IMG|>",
    "<|END_OF_IMG|>", "<|IMG_PATCH|>", "<|IMG_LINE_BREAK|>", "<|begin_of_image|>",
    "<|end_of_image|>", "<|IMAGE_PLACEHOLDER|>", "<|IMAGE_START|>", "<|IMAGE_END|>",
    "<|begin_of_video|>", "<|end_of_video|>", "<|image>", "<image|>", "<|video|>", "<|audio>",
    "<|audio|>", "<audio|>",
    "<|python_tag|>", "<IMG_ATOM>", "<IMG_START>", "<IMG_GRID>", "<IMG_COL>", "<IMG_ROW>",
    "<IMG_END>",
    "<im_patch>", "<im_col>", "<im_start>", "<low_res_im_start>", "<frame_start>", "<im_end>",
    "<frame_end>", "<im_low>",
    "<image_placeholder>", "<begin_of_image>", "<racm3:break>", "<eoss>", "<patch_start>",
    "<patch_end>", "<patch_newline>",
)  # fmt: skip
WORDS = ("describe", "this", "image", "a", "picture")


@dataclass(frozen=True)
class Case:
    """A model's processor: the built-in id whose files the directory holds, one prompt with one
    image placeholder, the tokenizer attributes the processor reads (``extra_special_tokens``),
    the token its expanded placeholders consist of (None: SigLIP's processor inserts none), and
    whether transformers needs torchvision to build the processor."""

    model_id: str
    prompt: str = "<image> describe this image"
    tokens: Mapping[str, str] = field(default_factory=dict)
    image_token: str | None = "<image>"
    torchvision: bool = False


# Gemma4Processor also checks the audio tokens, whatever the inputs.
GEMMA4_TOKENS = {
    "boi_token": "<|image>",
    "image_token": "<|image|>",
    "eoi_token": "<image|>",
    "boa_token": "<|audio>",
    "audio_token": "<|audio|>",
    "eoa_token": "<audio|>",
}
QWEN_PROMPT = "<|vision_start|><|image_pad|><|vision_end|>describe this image"
PROCESSOR_CASES = [
    Case(QWEN2, QWEN_PROMPT, image_token="<|image_pad|>", torchvision=True),
    Case("Qwen/Qwen2.5-VL-7B-Instruct", QWEN_PROMPT, image_token="<|image_pad|>", torchvision=True),
    Case("Qwen/Qwen3-VL-8B-Instruct", QWEN_PROMPT, image_token="<|image_pad|>", torchvision=True),
    Case(LLAVA),
    Case("llava-hf/llava-v1.6-mistral-7b-hf"),
    Case("llava-hf/llava-onevision-qwen2-7b-ov-hf", torchvision=True),
    Case(
        "google/gemma-3-4b-it",
        "<start_of_image> describe this image",
        {
            "boi_token": "<start_of_image>",
            "image_token": "<image_soft_token>",
            "eoi_token": "<end_of_image>",
        },
        image_token="<image_soft_token>",
    ),
    Case("google/siglip-so400m-patch14-384", "a picture", image_token=None),
    Case("google/paligemma2-3b-pt-224", "<image>describe this image"),
    Case(
        "zai-org/GLM-4.1V-9B-Thinking",
        "<|begin_of_image|><|image|><|end_of_image|> describe this image",
        image_token="<|image|>",
        torchvision=True,
    ),
    Case(
        "PaddlePaddle/PaddleOCR-VL",
        "<|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|> describe this image",
        {"image_token": "<|IMAGE_PLACEHOLDER|>"},
        image_token="<|IMAGE_PLACEHOLDER|>",
    ),
    Case(
        "OpenGVLab/InternVL3-8B-hf",
        "<IMG_CONTEXT> describe this image",
        {
            "start_image_token": "<img>",
            "end_image_token": "</img>",
            "context_image_token": "<IMG_CONTEXT>",
            "video_token": "<video>",
        },
        image_token="<IMG_CONTEXT>",
        torchvision=True,
    ),
    Case("HuggingFaceTB/SmolVLM-Instruct"),
    Case("HuggingFaceM4/Idefics3-8B-Llama3"),
    Case(LLAMA4, "<|image|> describe this image", image_token="<|patch|>", torchvision=True),
    Case("CohereLabs/aya-vision-8b", image_token="<|IMG_PATCH|>"),
    Case("google/siglip2-base-patch16-naflex", "a picture", image_token=None),
    Case(
        "google/gemma-4-31B-it",
        "<|image|> describe this image",
        GEMMA4_TOKENS,
        image_token="<|image|>",
        torchvision=True,
    ),
    Case(
        "google/gemma-4-12B-it",
        "<|image|> describe this image",
        GEMMA4_TOKENS,
        image_token="<|image|>",
        torchvision=True,
    ),
    Case("LiquidAI/LFM2-VL-1.6B", torchvision=True),
    # MllamaProcessor keeps one <|image|> per image (cross-attention): nothing to expand.
    Case(
        "meta-llama/Llama-3.2-11B-Vision-Instruct",
        "<|image|> describe this image",
        image_token=None,
    ),
    Case("deepseek-community/DeepSeek-OCR-2"),
    Case(
        "CohereLabs/command-a-vision-07-2025",
        "<|IMG_PATCH|> describe this image",
        {
            "boi_token": "<|START_OF_IMG|>",
            "eoi_token": "<|END_OF_IMG|>",
            "image_token": "<|IMG_PATCH|>",
            "img_line_break_token": "<|IMG_LINE_BREAK|>",
        },
        image_token="<|IMG_PATCH|>",
        torchvision=True,
    ),
    Case("thisisiron/Ovis2-2B-hf", image_token="<IMG_ATOM>"),
    Case("ibm-granite/granite-for-docling-500m"),
    Case(
        "microsoft/Phi-4-multimodal-instruct",
        "<|image|> describe this image",
        {"image_token": "<|image|>", "audio_token": "<|audio|>"},
        image_token="<|image|>",
        torchvision=True,
    ),
    Case(
        "allenai/Molmo2-8B",
        "<|image|> describe this image",
        {"image_token": "<|image|>"},
        image_token="<im_patch>",
        torchvision=True,
    ),
    Case("liuhaotian/llava-v1.5-7b"),
    Case(
        "deepseek-community/deepseek-vl-1.3b-chat",
        "<image_placeholder> describe this image",
        {"image_token": "<image_placeholder>"},
        image_token="<image_placeholder>",
    ),
    Case(
        "deepseek-community/Janus-Pro-1B",
        "<image_placeholder> describe this image",
        {
            "image_token": "<image_placeholder>",
            "boi_token": "<begin_of_image>",
            "eoi_token": "<end_of_image>",
        },
        image_token="<image_placeholder>",
    ),
    Case(
        "deepseek-community/deepseek-vl-7b-chat",
        "<image_placeholder> describe this image",
        {"image_token": "<image_placeholder>"},
        image_token="<image_placeholder>",
    ),
    Case(
        "facebook/chameleon-7b",
        tokens={"boi_token": "<racm3:break>", "eoi_token": "<eoss>", "image_token": "<image>"},
    ),
    Case(
        "stepfun-ai/Step-3.7-Flash",
        "<im_patch> describe this image",
        image_token="<im_patch>",
        torchvision=True,
    ),
    Case("rhymes-ai/Aria", tokens={"image_token": "<image>"}),
]


@pytest.fixture(autouse=True)
def _uninstalled() -> Any:
    """Every test starts and ends with transformers' loading untouched."""
    hf.uninstall()
    yield
    hf.uninstall()


@pytest.fixture
def mmfast_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Grows by one for each call mmfast.ImageProcessor completes (a call it refuses, which
    transformers then computes, does not count)."""
    calls: list[int] = []
    original = mmfast.ImageProcessor.__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        calls.append(1)
        return result

    monkeypatch.setattr(mmfast.ImageProcessor, "__call__", counting)
    return calls


def write_checkpoint(directory: Path, model_id: str, tokens: Mapping[str, str] = {}) -> Path:
    """A local checkpoint of a built-in model, with a tokenizer of :data:`SPECIAL_TOKENS`."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    builtin = registry.BUILTINS[model_id]
    files = {
        "preprocessor_config.json": builtin_dict(model_id),
        "config.json": {"model_type": builtin.model_type},
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "unk_token": "<unk>",
            "pad_token": "<pad>",
            "bos_token": "<s>",
            "eos_token": "</s>",
            "extra_special_tokens": dict(tokens),
        },
    }
    if builtin.processor:
        files["processor_config.json"] = dict(builtin.processor)
    for name, content in files.items():
        (directory / name).write_text(json.dumps(content), encoding="utf-8")
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + WORDS)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


def load_pair(auto: Any, directory: Path) -> tuple[Any, Any]:
    """``auto.from_pretrained(directory)`` as transformers loads it, then after install()."""
    plain = auto.from_pretrained(directory)
    hf.install()
    try:
        backed = auto.from_pretrained(directory)
    finally:
        hf.uninstall()
    return plain, backed


def pil(height: int, width: int, seed: int = 0) -> Image.Image:
    return Image.fromarray(noise(height, width, seed))


def outcome(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """What ``function(*args, **kwargs)`` returns, or the type and message of what it raises."""
    try:
        return function(*args, **kwargs)
    except Exception as exc:
        return type(exc), str(exc)


def assert_same(got: Any, want: Any, name: str = "output") -> None:
    """Same types, keys in the same order, and every tensor equal in dtype, shape and bits;
    a BatchFeature's keys left unconverted too."""
    assert type(got) is type(want), f"{name}: {type(got)} != {type(want)}"
    if isinstance(want, Mapping):
        assert list(got) == list(want), name
        skipped = [getattr(f, "skip_tensor_conversion", None) for f in (got, want)]
        assert skipped[0] == skipped[1], f"{name}: skip_tensor_conversion {skipped}"
        for key in want:
            assert_same(got[key], want[key], key)
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), name
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_same(a, b, f"{name}[{i}]")
    elif isinstance(want, np.ndarray) or type(want).__name__ == "Tensor":
        assert got.dtype == want.dtype and got.shape == want.shape, name
        a, b = as_array(got), as_array(want)
        assert same_bits(a, b), describe(name, a, b)
    else:
        assert got == want, name


def as_array(value: Any) -> np.ndarray:
    """A numpy array of the same bits (bfloat16 tensors as int16)."""
    if isinstance(value, np.ndarray):
        return np.ascontiguousarray(value)
    import torch

    return (value.view(torch.int16) if value.dtype == torch.bfloat16 else value).numpy()


# --------------------------------------------------------------------------------------------
# Parity, image processors and processors


@pytest.mark.parametrize("model_id", IMAGE_IDS)
def test_image_processor_matches_transformers(
    model_id: str, tmp_path: Path, mmfast_calls: list[int]
) -> None:
    """AutoImageProcessor after install(): a backed subclass of the class transformers loads,
    with its settings, whose outputs are transformers' bit for bit, computed by mmfast."""
    family = mmfast.models.config.select_family(mmfast.models.config.read_source(model_id))[0]
    if not TORCH and (model_id in TORCHVISION_ONLY or family.hf_pil is None):
        pytest.skip(f"{model_id}'s image processor: {NEEDS_TORCHVISION}")
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, model_id))
    assert not isinstance(plain, hf.MmfastBacked)
    assert isinstance(backed, hf.MmfastBacked) and isinstance(backed, type(plain))
    assert type(backed).__name__ == type(plain).__name__
    assert backed.to_dict() == plain.to_dict()
    images = [pil(120, 200, 1), noise(333, 250, 2), pil(64, 96, 3)]
    for tensors in [*TENSORS, None]:
        before = len(mmfast_calls)
        want = outcome(plain, images, return_tensors=tensors)
        got = outcome(backed, images, return_tensors=tensors)
        assert_same(got, want)
        # transformers' Llama 4 class returns bfloat16, which it cannot give as numpy: it raises.
        ran = not (model_id == LLAMA4 and tensors == "np")
        assert len(mmfast_calls) == before + ran


# transformers' GLM and PaliGemma processors call np.array on torch tensors when returning "pt",
# which numpy 2 flags (in their code, with or without mmfast).
@pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy keyword")
@pytest.mark.parametrize("case", PROCESSOR_CASES, ids=lambda c: c.model_id)
def test_processor_matches_transformers(case: Case, tmp_path: Path) -> None:
    """AutoProcessor after install(): the model's own processor class around a backed image
    processor, computing on mmfast; input_ids and image tensors equal transformers' for two
    prompts with an image each, of different sizes."""
    if case.torchvision and not TORCH:
        pytest.skip(f"{case.model_id}'s processor: {NEEDS_TORCHVISION}")
    directory = write_checkpoint(tmp_path, case.model_id, case.tokens)
    plain, backed = load_pair(transformers.AutoProcessor, directory)
    assert type(backed) is type(plain)
    assert isinstance(backed.image_processor, hf.MmfastBacked)
    assert not isinstance(plain.image_processor, hf.MmfastBacked)
    images = [[pil(120, 200, 1)], [pil(333, 250, 2)]]
    for tensors in ["pt"] if case.model_id == LLAMA4 else TENSORS:
        text = [case.prompt] * 2
        want = plain(images=images, text=text, return_tensors=tensors, padding=True)
        before = hf.stats()["mmfast"]
        got = backed(images=images, text=text, return_tensors=tensors, padding=True)
        assert hf.stats()["mmfast"] == before + 1
        assert_same(dict(got), dict(want))
        if case.image_token is not None:
            # The placeholders were expanded: the test would pass vacuously otherwise.
            token = plain.tokenizer.convert_tokens_to_ids(case.image_token)
            assert (as_array(want["input_ids"]) == token).sum() > len(images)


def torchvision_only(*values: Any) -> Any:
    """A case whose class transformers has only with torch and torchvision."""
    return pytest.param(*values, marks=pytest.mark.skipif(not TORCH, reason=NEEDS_TORCHVISION))


# What Gemma3Processor passes to its image processor on every call.
GEMMA3_PROCESSOR_DEFAULTS = {
    "do_convert_rgb": True,
    "do_pan_and_scan": False,
    "pan_and_scan_min_crop_size": 256,
    "pan_and_scan_max_num_crops": 4,
    "pan_and_scan_min_ratio_to_activate": 1.2,
}


@pytest.mark.parametrize(
    ("model_id", "kwargs"),
    [
        (QWEN2, {"size": {"shortest_edge": 3136, "longest_edge": 50176}}),
        (QWEN2, {"do_normalize": False, "resample": 2, "image_mean": [0.5, 0.5, 0.5]}),
        (LLAVA, {"do_center_crop": False, "size": {"height": 224, "width": 160}}),
        ("OpenGVLab/InternVL3-8B-hf", {"crop_to_patches": True, "max_patches": 4}),
        ("google/gemma-3-4b-it", {**GEMMA3_PROCESSOR_DEFAULTS, "do_pan_and_scan": True}),
        ("HuggingFaceM4/Idefics3-8B-Llama3", {"do_image_splitting": False}),
        ("llava-hf/llava-v1.6-mistral-7b-hf", {"do_pad": False}),
        # The pad colour follows a call's mean here; DeepSeek-VL's and Janus's was fixed when
        # the processor was built.
        ("liuhaotian/llava-v1.5-7b", {"image_mean": [0.2, 0.3, 0.4]}),
        ("deepseek-community/Janus-Pro-1B", {"image_mean": [0.1, 0.2, 0.3]}),
        # The PIL class resizes with "resample or self.resample": a call's 0 is the instance's.
        ("deepseek-community/deepseek-vl-1.3b-chat", {"resample": 0}),
        ("deepseek-community/deepseek-vl-7b-chat", {"resample": 0, "high_res_resample": 0}),
        ("deepseek-community/deepseek-vl-7b-chat", {"high_res_image_mean": [0.1, 0.2, 0.3]}),
        # IdeficsImageProcessor reads image_size only when it is built.
        ("HuggingFaceM4/idefics-9b", {"image_size": 100}),
        ("Salesforce/blip-vqa-base", {"do_resize": False}),
        # The canvases come from the instance's max_num_tiles; a call's says only whether to
        # tile (4 gave 5 tiles for transformers' 36).
        torchvision_only("facebook/Perception-LM-1B", {"max_num_tiles": 4}),
        torchvision_only("facebook/Perception-LM-1B", {"max_num_tiles": 1}),
        # The global view is padded with the instance's colour, whatever the call passes.
        torchvision_only("baidu/Unlimited-OCR", {"background_color": [10, 200, 30]}),
    ],
)
def test_call_settings_run_on_mmfast(
    model_id: str, kwargs: dict[str, Any], tmp_path: Path, mmfast_calls: list[int]
) -> None:
    """Keyword arguments of a call (what processors pass) are merged by transformers and read
    by mmfast, with the same outputs."""
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, model_id))
    images = [pil(100, 420, 1), pil(333, 250, 2)]
    if model_id == "facebook/Perception-LM-1B":  # it stacks equal tile counts only
        images = [pil(100, 420, 1), pil(120, 500, 2)]
    want = outcome(plain, images, return_tensors="np", **kwargs)
    got = outcome(backed, images, return_tensors="np", **kwargs)
    assert_same(got, want)
    assert len(mmfast_calls) == 1


def test_changed_attributes_and_pixel_bounds_follow_transformers(
    tmp_path: Path, mmfast_calls: list[int]
) -> None:
    """An attribute changed after loading, and Qwen's deprecated call-time max_pixels (with
    transformers' own FutureWarning), give transformers' outputs."""
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, QWEN2))
    images = [pil(300, 410, 1)]
    for processor in (plain, backed):
        processor.do_normalize = False
    assert_same(backed(images, return_tensors="np"), plain(images, return_tensors="np"))
    with pytest.warns(FutureWarning, match="min_pixels"):
        want = plain(images, return_tensors="np", max_pixels=40000)
    with pytest.warns(FutureWarning, match="min_pixels"):
        got = backed(images, return_tensors="np", max_pixels=40000)
    assert_same(got, want)
    assert len(mmfast_calls) == 2


def test_concurrent_calls_match_transformers(tmp_path: Path, mmfast_calls: list[int]) -> None:
    """Calls from several threads at once (a server's workers) give each call's own outputs."""
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, QWEN2))
    batches = [[pil(100 + 40 * i, 300 - 30 * i, i)] for i in range(6)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        got = list(pool.map(lambda batch: backed(batch, return_tensors="np"), batches))
    for batch, result in zip(batches, got, strict=True):
        assert_same(result, plain(batch, return_tensors="np"))
    assert len(mmfast_calls) == len(batches)


TILED_BATCHES = [
    # Local tiles in one image of two: pixel_values_local, a list with return_tensors=None.
    ("deepseek-community/DeepSeek-OCR-2", [pil(900, 500, 1), pil(300, 200, 2)], {}),
    # A call's background colour: the PIL class paints with it, the torchvision class not.
    ("deepseek-community/DeepSeek-OCR-2", [pil(300, 200, 2)], {"background_color": [9, 200, 30]}),
    # Samples padded to the most images and tiles, an empty one included.
    ("meta-llama/Llama-3.2-11B-Vision-Instruct", [[pil(300, 500, 1), pil(90, 60, 2)], []], {}),
    ("meta-llama/Llama-3.2-11B-Vision-Instruct", [[pil(300, 500, 1)], [pil(9, 60, 2)]], {}),
    ("ibm-granite/granite-for-docling-500m", [[pil(700, 500, 1), pil(90, 60, 2)], []], {}),
    ("thisisiron/Ovis2-2B-hf", [pil(700, 500, 1), pil(90, 60, 2)], {}),
]


@pytest.mark.parametrize(("model_id", "images", "kwargs"), TILED_BATCHES)
@pytest.mark.parametrize("tensors", [*TENSORS, None])
def test_tiled_batches(
    model_id: str,
    images: Any,
    kwargs: dict[str, Any],
    tensors: str | None,
    tmp_path: Path,
    mmfast_calls: list[int],
) -> None:
    """Outputs HF leaves out of some batches, nested samples and a call's settings that one
    class reads and the other ignores: transformers' outputs, computed by mmfast."""
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, model_id))
    want = plain(images, return_tensors=tensors, **kwargs)
    got = backed(images, return_tensors=tensors, **kwargs)
    assert_same(dict(got), dict(want))
    assert len(mmfast_calls) == 1


IDEFICS3 = ["HuggingFaceM4/Idefics3-8B-Llama3", "HuggingFaceTB/SmolVLM-Instruct"]


@pytest.mark.parametrize("model_id", IDEFICS3)
@pytest.mark.parametrize("tensors", [*TENSORS, None])
def test_ragged_idefics3_batch(
    model_id: str, tensors: str | None, tmp_path: Path, mmfast_calls: list[int]
) -> None:
    """Samples with unequal image counts and row/column info: rows and cols stay the nested
    lists transformers returns, whatever the tensor type (they used to crash the conversion)."""
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, model_id))
    images = [[pil(300, 500, 1), pil(700, 260, 2)], [pil(120, 90, 3)]]
    want = plain(images, return_tensors=tensors, return_row_col_info=True)
    got = backed(images, return_tensors=tensors, return_row_col_info=True)
    assert_same(dict(got), dict(want))
    assert isinstance(got["rows"], list) and len(got["rows"][0]) == 2
    assert len(mmfast_calls) == 1


@pytest.mark.parametrize("model_id", IDEFICS3)
def test_idefics3_rows_stop_at_the_last_sample_with_images(
    model_id: str, tmp_path: Path, mmfast_calls: list[int]
) -> None:
    """The torchvision class's rows and cols end at the last sample with images (its
    regrouping drops the empty ones after it, as Mllama's): mmfast gave them an empty list
    each."""
    if not TORCH:
        pytest.skip(f"{model_id}'s torchvision class: {NEEDS_TORCHVISION}")
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, model_id))
    for images in ([[pil(400, 600, 1)], []], [[pil(400, 600, 1)], [], []], [[], [pil(90, 60)]]):
        want = plain(images, return_tensors="np", return_row_col_info=True)
        got = backed(images, return_tensors="np", return_row_col_info=True)
        assert_same(got, want)
    assert len(mmfast_calls) == 3


@pytest.mark.parametrize("tensors", [*TENSORS, None])
def test_lfm2_row_col_info(tensors: str | None, tmp_path: Path, mmfast_calls: list[int]) -> None:
    """LFM2-VL's tile grid as its processor asks for it: arrays, or with return_tensors=None
    ints and [height, width] lists, beside a split image's crops."""
    if not TORCH:
        pytest.skip(f"Lfm2VlImageProcessor: {NEEDS_TORCHVISION}")
    directory = write_checkpoint(tmp_path, "LiquidAI/LFM2-VL-1.6B")
    plain, backed = load_pair(transformers.AutoImageProcessor, directory)
    images = [pil(900, 1400, 1), pil(120, 90, 2)]
    want = plain(images, return_tensors=tensors, return_row_col_info=True)
    got = backed(images, return_tensors=tensors, return_row_col_info=True)
    assert_same(dict(got), dict(want))
    assert len(want["pixel_values"]) > 2  # the first image was split
    assert len(mmfast_calls) == 1


@pytest.mark.parametrize("tensors", TENSORS)
def test_ragged_idefics3_processor(tensors: str, tmp_path: Path, mmfast_calls: list[int]) -> None:
    """Idefics3Processor with a 2-image prompt beside a 1-image prompt, as a chat server sends
    them: the same input_ids and tensors, computed by mmfast."""
    directory = write_checkpoint(tmp_path, IDEFICS3[0])
    plain, backed = load_pair(transformers.AutoProcessor, directory)
    images = [[pil(300, 500, 1), pil(700, 260, 2)], [pil(120, 90, 3)]]
    text = ["<image><image> describe this image", "<image> describe this image"]
    want = plain(images=images, text=text, return_tensors=tensors, padding=True)
    got = backed(images=images, text=text, return_tensors=tensors, padding=True)
    assert_same(dict(got), dict(want))
    assert len(mmfast_calls) == 1


# --------------------------------------------------------------------------------------------
# Video processors

VIDEO_IDS = [m for m in mmfast.supported_models() if registry.BUILTINS[m].video is not None] + [
    m
    for m in mmfast.supported_models()
    if registry.BUILTINS[m].video is None
    and registry.video_family(None, registry.BUILTINS[m].model_type) is not None
]


# Settings over a built-in's for the generic video test, where its own make mmfast refuse the
# test's clips (test_video_llama_3_compression covers them).
VIDEO_TEST_SETTINGS = {"lkhl/VideoLLaMA3-2B-Image-HF": {"use_token_compression": False}}


def write_video_checkpoint(
    directory: Path, model_id: str, settings: Mapping[str, Any] | None = None
) -> Path:
    """A checkpoint with the built-in's video processor settings (its image settings where
    it has none) and ``settings`` over them, as video_preprocessor_config.json."""
    builtin = registry.BUILTINS[model_id]
    config = dict(builtin.video if builtin.video is not None else builtin.preprocessor)
    config.update(settings or {})
    family = registry.video_family(config.get("video_processor_type"), builtin.model_type)
    assert family is not None
    config["video_processor_type"] = family.processor_type
    font = config.get("font")
    if config.get("draw_on_frames") and isinstance(font, str):
        # ERNIE's checkpoint ships the font it draws timestamps with beside the file, where
        # transformers loads it: any TrueType font stands in (transformers draws, not mmfast).
        source = truetype_font()
        if source is None:
            config["draw_on_frames"] = False
        else:
            shutil.copyfile(source, directory / font)
    (directory / "video_preprocessor_config.json").write_text(json.dumps(config))
    (directory / "config.json").write_text(json.dumps({"model_type": builtin.model_type}))
    return directory


def truetype_font() -> Path | None:
    """A TrueType font of the system's, if it has one."""
    for folder in map(Path, ("/usr/share/fonts", "/usr/local/share/fonts", "/Library/Fonts")):
        found = sorted(folder.glob("**/DejaVuSans.ttf")) if folder.is_dir() else []
        if found:
            return found[0]
    return None


def clip(frames: int, height: int, width: int, seed: int = 0) -> np.ndarray:
    return np.stack([noise(height, width, seed + t) for t in range(frames)])


@pytest.mark.skipif(not TORCH, reason="transformers' video processors need torch")
@pytest.mark.parametrize("model_id", sorted(set(VIDEO_IDS)))
def test_video_processor_matches_transformers(
    model_id: str, tmp_path: Path, mmfast_calls: list[int]
) -> None:
    """AutoVideoProcessor after install(): a backed subclass whose outputs (arrays and
    tensors) are transformers' bit for bit, sampled by transformers, computed by mmfast."""
    auto = transformers.AutoVideoProcessor
    directory = write_video_checkpoint(tmp_path, model_id, VIDEO_TEST_SETTINGS.get(model_id))
    plain, backed = load_pair(auto, directory)
    assert isinstance(backed, hf.MmfastBackedVideo) and isinstance(backed, type(plain))
    assert type(backed).__name__ in hf.supported_classes()
    batches = [
        # Clips of different sizes and lengths (which the classes returning a list of clips
        # stack for return_tensors "np" and "pt" only when they have one shape).
        (
            [clip(8, 90, 120, 1), clip(5, 60, 200, 2)],
            [{"total_num_frames": 8, "fps": 24.0}, {"total_num_frames": 5, "fps": 10.0}],
        ),
        (
            [clip(6, 90, 120, 3), clip(6, 90, 120, 4)],
            [{"total_num_frames": 6, "fps": 4.0, "duration": 1.5}] * 2,
        ),
    ]
    before = hf.stats()["mmfast"]
    for videos, metadata in batches:
        for tensors in [*TENSORS, None]:
            for kwargs in ({}, {"do_sample_frames": False}):
                call = {"return_tensors": tensors, "video_metadata": metadata, **kwargs}
                want = outcome(plain, videos, **call)
                got = outcome(backed, videos, **call)
                assert_same(got, want)
    assert hf.stats()["mmfast"] > before


@pytest.mark.skipif(not TORCH, reason="transformers' video processors need torch")
@pytest.mark.parametrize(
    "model_id",
    [
        "Qwen/Qwen2-VL-7B-Instruct",
        "Qwen/Qwen3-VL-8B-Instruct",
        "CohereLabs/North-Micro-Vision-Instruct",
    ],
)
def test_a_calls_video_token_budget_is_the_instances(model_id: str, tmp_path: Path) -> None:
    """The Qwen video classes' resize() caps frames with the instance's max_video_tokens: a
    call's changes nothing (mmfast sized Qwen2-VL's frames 6x6 patches for 50 tokens, where
    transformers keeps 32x32)."""
    directory = write_video_checkpoint(tmp_path, model_id, {"cap_pixels_per_frame": True})
    plain, backed = load_pair(transformers.AutoVideoProcessor, directory)
    call = {
        "return_tensors": "np",
        "video_metadata": [{"total_num_frames": 8, "fps": 4.0}],
        "do_sample_frames": False,
        "max_video_tokens": 50,
    }
    videos = [clip(8, 448, 448, 1)]
    want = outcome(plain, videos, **call)
    assert_same(outcome(backed, videos, **call), want)
    del call["max_video_tokens"]
    assert_same(want, outcome(plain, videos, **call))


GLM_ROUTES = [
    # (model type, preprocessor_config.json, video_preprocessor_config.json or None)
    ("glm4v_moe", {"image_processor_type": "Glm46VImageProcessor"}, None),
    ("glm4v_moe", {"image_processor_type": "Glm4vImageProcessor"}, None),
    ("glm4v_moe", {"patch_size": 14}, None),
    ("glm4v_moe", {"processor_class": "Glm46VProcessor"}, None),
    ("glm4v_moe", {"image_processor_type": "Glm46VImageProcessor"}, {"fps": 2}),
    (
        "glm4v_moe",
        {"image_processor_type": "Glm46VImageProcessor"},
        {"video_processor_type": "Glm46VVideoProcessor"},
    ),
    ("glm46v", {"patch_size": 14}, None),
    ("glm46v", {"image_processor_type": "Glm4vImageProcessor"}, None),
    ("glm4v", {"patch_size": 14}, None),
    ("glm5_next", {"patch_size": 14}, None),
]


@pytest.mark.skipif(not TORCH, reason="transformers' video processors need torch")
@pytest.mark.parametrize(("model_type", "image", "video"), GLM_ROUTES)
def test_glm_checkpoints_route_as_transformers_routes_them(
    model_type: str, image: dict[str, Any], video: dict[str, Any] | None, tmp_path: Path
) -> None:
    """GLM-4.5V and GLM-4.6V checkpoints say model type glm4v_moe, which transformers maps to
    no image or video processor: the class named in a file (a video processor's also inferred
    from the image processor's name) chooses, else both refuse. mmfast picks the same
    classes."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(image))
    if video is not None:
        (tmp_path / "video_preprocessor_config.json").write_text(json.dumps(video))
    for auto, load in (
        (transformers.AutoImageProcessor, lambda: mmfast.ImageProcessor.from_pretrained(tmp_path)),
        (transformers.AutoVideoProcessor, lambda: load_video_config(tmp_path)),
    ):
        try:
            want: str | None = type(auto.from_pretrained(tmp_path)).__name__
        except ValueError:
            want = None
        try:
            loaded = load()
        except UnsupportedModelError:
            got = None
        else:
            got = (
                getattr(loaded, "video_processor_type", None) or loaded.config.image_processor_type
            )
        assert got == want, auto.__name__


@pytest.mark.skipif(not TORCH, reason="transformers' video processors need torch")
def test_video_llama_3_compression(tmp_path: Path) -> None:
    """VideoLLaMA3's token compression (its default) over several frames is a reduction over
    the pixels: those calls run on transformers' code; one-frame clips, whose tokens are all
    kept, run on mmfast. Both equal transformers'."""
    directory = write_video_checkpoint(tmp_path, "lkhl/VideoLLaMA3-2B-Image-HF")
    plain, backed = load_pair(transformers.AutoVideoProcessor, directory)
    for videos, computed in (
        ([clip(1, 90, 120, 1), clip(1, 60, 200, 2)], True),
        ([clip(3, 90, 120)], False),
    ):
        before = hf.stats()
        for tensors in TENSORS:
            assert_same(
                backed(videos, return_tensors=tensors), plain(videos, return_tensors=tensors)
            )
        after = hf.stats()
        assert (after["mmfast"] > before["mmfast"]) is computed
        assert (after["transformers"] > before["transformers"]) is not computed


@pytest.mark.skipif(not TORCH, reason="transformers' video processors need torch")
def test_embedding_gemma2_video_processor_matches_transformers(
    tmp_path: Path, mmfast_calls: list[int]
) -> None:
    """EmbeddingGemma2VideoProcessor (no built-in checkpoint: its class defaults), backed."""
    (tmp_path / "video_preprocessor_config.json").write_text(
        json.dumps({"video_processor_type": "EmbeddingGemma2VideoProcessor"})
    )
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "embedding_gemma2"}))
    plain, backed = load_pair(transformers.AutoVideoProcessor, tmp_path)
    assert isinstance(backed, hf.MmfastBackedVideo)
    videos = [clip(9, 90, 120, 1), clip(5, 60, 200, 2)]
    metadata = [
        {"total_num_frames": 9, "fps": 3.0, "duration": 3.0},
        {"total_num_frames": 5, "fps": 3.0, "duration": 5 / 3},
    ]
    before = hf.stats()["mmfast"]
    for tensors in [*TENSORS, None]:
        call = {"return_tensors": tensors, "video_metadata": metadata}
        assert_same(outcome(backed, videos, **call), outcome(plain, videos, **call))
    assert hf.stats()["mmfast"] > before


@pytest.mark.skipif(not TORCH, reason="transformers' video processors need torch")
def test_refused_video_settings_run_on_transformers(tmp_path: Path) -> None:
    """MiniCPM-V's stack_frames (sub-second composites, refused by mmfast): transformers'
    outputs, computed by its own code, and counted as such."""
    directory = write_video_checkpoint(tmp_path, "openbmb/MiniCPM-V-4.6")
    plain, backed = load_pair(transformers.AutoVideoProcessor, directory)
    videos = [clip(7, 90, 120, 1)]
    call = {"video_metadata": [{"total_num_frames": 7, "fps": 3.0, "duration": 7 / 3}]}
    before = hf.stats()["by_class"].get("MiniCPMV4_6VideoProcessor", {})
    want = outcome(plain, videos, stack_frames=2, return_tensors="pt", **call)
    got = outcome(backed, videos, stack_frames=2, return_tensors="pt", **call)
    assert_same(got, want)
    after = hf.stats()["by_class"]["MiniCPMV4_6VideoProcessor"]
    refused = "mmfast refused the call"
    assert after.get(refused, 0) == before.get(refused, 0) + 1, after


# --------------------------------------------------------------------------------------------
# What runs on transformers' code
# --------------------------------------------------------------------------------------------
# What runs on transformers' code


def former_fallbacks() -> dict[str, tuple[Any, dict[str, Any]]]:
    """Inputs and arguments that ran on transformers' code before mmfast read them as
    transformers does (its own preparation of the input, then mmfast's pixels)."""
    image = noise(90, 130, 4)
    rgba = np.dstack([image, noise(90, 130, 5)[..., :1]])
    cases: dict[str, tuple[Any, dict[str, Any]]] = {
        "return_tensors=None": ([pil(90, 130), pil(40, 70, 1)], {"return_tensors": None}),
        "channels-first array": ([np.ascontiguousarray(image.transpose(2, 0, 1))], {}),
        "ambiguous (3, W, 3) array": ([image[:3]], {}),
        "(H, W, 1) array": ([image[..., :1].copy()], {}),
        "(H, W, 4) array": ([rgba], {}),
        "channels-first (4, H, W) array": ([np.ascontiguousarray(rgba.transpose(2, 0, 1))], {}),
        "4-D batch array": (np.stack([image, noise(90, 130, 6)]), {}),
        "reversed view": ([image[:, ::-1]], {}),
        "input_data_format": ([image], {"input_data_format": "channels_last"}),
        "input_data_format first": (
            [np.ascontiguousarray(image.transpose(2, 0, 1))],
            {"input_data_format": "channels_first"},
        ),
        "device cpu": ([pil(90, 130)], {"device": "cpu"}),
    }
    if TORCH:
        import torch

        chw = torch.from_numpy(image.transpose(2, 0, 1).copy())
        cases["torch CHW tensor"] = ([chw], {})
        cases["torch HWC tensor"] = ([torch.from_numpy(image.copy())], {})
        cases["torch 4-D tensor"] = (torch.stack([chw, chw.flip(1)]), {})
        cases["torch device"] = ([chw], {"device": torch.device("cpu")})
    return cases


def fallback_inputs() -> dict[str, tuple[list[Any], dict[str, Any]]]:
    image = noise(90, 130, 4)
    cases: dict[str, tuple[list[Any], dict[str, Any]]] = {
        "float array": ([image.astype(np.float32)], {}),
        "data_format": ([pil(90, 130)], {"data_format": "channels_last"}),
        "path": ([str(Path(__file__))], {}),
        "empty list": ([], {}),
        "device cuda": ([pil(90, 130)], {"device": "cuda:0"}),
    }
    if TORCH:
        import torch

        chw = torch.from_numpy(image.transpose(2, 0, 1).copy())
        # numpy has no bfloat16, nor views of a tensor that needs its gradient: reading them
        # raised inside mmfast, logged as a fault of mmfast.
        cases["bfloat16 tensor"] = ([chw.to(torch.bfloat16)], {})
        cases["float tensor needing a gradient"] = ([chw.float().requires_grad_()], {})
    return cases


COMPUTED = former_fallbacks()
FALLBACKS = fallback_inputs()


@pytest.mark.parametrize("model_id", [QWEN2, LLAVA, "OpenGVLab/InternVL3-8B-hf"])
@pytest.mark.parametrize("name", list(COMPUTED))
def test_former_fallbacks_run_on_mmfast(
    model_id: str, name: str, tmp_path: Path, mmfast_calls: list[int]
) -> None:
    """Tensors, channels-first, one- and four-channel arrays, 4-D batches, input_data_format,
    device="cpu" and return_tensors=None: read as transformers reads them, computed by mmfast,
    with transformers' outputs (the same types too: lists, arrays or tensors)."""
    images, kwargs = COMPUTED[name]
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, model_id))
    for tensors in TENSORS if "return_tensors" not in kwargs else [None]:
        call = {"return_tensors": tensors, **kwargs}
        want = outcome(plain, images, **call)
        before = len(mmfast_calls)
        got = outcome(backed, images, **call)
        assert_same(got, want)
        # Where transformers refuses the input (a reversed view for torch), it raises its own
        # error; otherwise mmfast computed the call.
        raised = isinstance(want, tuple)
        assert len(mmfast_calls) == before + (not raised), "transformers computed this call"


@pytest.mark.parametrize("model_id", [QWEN2, LLAVA])
@pytest.mark.parametrize("name", list(FALLBACKS))
def test_fallbacks_give_transformers_results(
    model_id: str,
    name: str,
    tmp_path: Path,
    mmfast_calls: list[int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Inputs and arguments mmfast does not take run transformers' own code: the same result
    or the same exception, mmfast untouched, and the reason logged at DEBUG."""
    images, kwargs = FALLBACKS[name]
    kwargs = {"return_tensors": "np", **kwargs}
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, model_id))
    want = outcome(plain, images, **kwargs)
    with caplog.at_level(logging.DEBUG, logger="mmfast.hf"):
        got = outcome(backed, images, **kwargs)
    assert_same(got, want)
    assert mmfast_calls == []
    assert "running transformers' code" in caplog.text
    warned = [r for r in caplog.records if r.name == "mmfast.hf" and r.levelno >= logging.WARNING]
    assert not warned, caplog.text


@pytest.mark.parametrize("model_id", [QWEN2, LLAVA])
def test_replaced_methods_run_on_transformers(
    model_id: str, tmp_path: Path, mmfast_calls: list[int]
) -> None:
    """A method replaced on the instance or on transformers' class (a user's monkeypatch) is
    called, as transformers' code calls it: mmfast computed such calls with its own pipeline,
    so a resize patched to mirror the image came back unmirrored."""
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, model_id))
    images = [pil(300, 410, 1)]
    unpatched = plain(images, return_tensors="np")

    def mirrored(out: Any) -> Any:
        return out.flip(-1) if hasattr(out, "flip") else np.ascontiguousarray(out[..., ::-1])

    for processor in (plain, backed):
        resize = processor.resize
        processor.resize = lambda *args, _resize=resize, **kwargs: mirrored(
            _resize(*args, **kwargs)
        )
    want = plain(images, return_tensors="np")
    assert not np.array_equal(want["pixel_values"], unpatched["pixel_values"])
    assert_same(backed(images, return_tensors="np"), want)
    del plain.resize, backed.resize
    hf_class, resize = type(plain), type(plain).resize
    own = vars(hf_class).get("resize")  # None where inherited (LLaVA's)
    # A wrapper that keeps the name and module of transformers' method.
    hf_class.resize = functools.wraps(resize)(
        lambda *args, **kwargs: mirrored(resize(*args, **kwargs))
    )
    try:
        assert_same(backed(images, return_tensors="np"), want)
    finally:
        if own is None:
            del hf_class.resize
        else:
            hf_class.resize = own
    assert mmfast_calls == []
    assert_same(backed(images, return_tensors="np"), unpatched)
    assert mmfast_calls == [1]


def test_a_4d_batch_onevision_counts_as_one_image_runs_on_transformers(
    tmp_path: Path, mmfast_calls: list[int]
) -> None:
    """transformers counts a 4-D array as one LLaVA-OneVision image (and fails on it): mmfast
    read three images and kept the first alone, with no error."""
    model_id = "llava-hf/llava-onevision-qwen2-7b-ov-hf"
    batch = np.stack([noise(120, 200, seed) for seed in range(3)])
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, model_id))
    for images in (batch, [batch]):
        want = outcome(plain, images, return_tensors="np")
        assert isinstance(want, tuple)  # transformers raises
        assert outcome(backed, images, return_tensors="np") == want
    assert mmfast_calls == []


def test_onevision_tuples_run_on_mmfast(tmp_path: Path, mmfast_calls: list[int]) -> None:
    """Tuples where transformers takes lists (the images, or a sample's): LLaVA-OneVision
    counted a tuple as one image and ran every such call on transformers."""
    model_id = "llava-hf/llava-onevision-qwen2-7b-ov-hf"
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, model_id))
    a, b, c = pil(120, 200, 1), pil(333, 250, 2), pil(200, 200, 3)
    cases = [(a,), (a, b), [(a, b), (c,)], ((a,), (b, c)), [(a,), [c]]]
    for images in cases:
        assert_same(backed(images, return_tensors="np"), plain(images, return_tensors="np"))
    assert len(mmfast_calls) == len(cases)


@pytest.mark.skipif(not TORCH, reason=f"LLaVA-OneVision's processor: {NEEDS_TORCHVISION}")
def test_onevision_prompt_lists_run_on_mmfast(tmp_path: Path) -> None:
    """LlavaOnevisionProcessor (and its chat template) passes a list of images per prompt,
    which transformers flattens: mmfast regrouped the lists themselves, refusing [[a], [b]]
    and miscounting [[a, b], [c]], so every such call ran on transformers."""
    directory = write_checkpoint(tmp_path, "llava-hf/llava-onevision-qwen2-7b-ov-hf")
    plain, backed = load_pair(transformers.AutoProcessor, directory)
    a, b, c = pil(120, 200, 1), pil(333, 250, 2), pil(200, 200, 3)
    for images, text in [
        ([[a], [b]], ["<image> describe", "<image> describe"]),
        ([[a, b], [c]], ["<image> <image> describe", "<image> describe"]),
        ([[a, b]], ["<image> <image> describe"]),
    ]:
        want = plain(text=text, images=images, return_tensors="pt", padding=True)
        before = hf.stats()["mmfast"]
        got = backed(text=text, images=images, return_tensors="pt", padding=True)
        assert hf.stats()["mmfast"] == before + 1, len(images)
        assert_same(dict(got), dict(want))


def test_mmfast_errors_give_transformers_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Where mmfast raises MmfastError (a strip over 1:200 for Qwen), transformers runs and
    raises its own error."""
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, QWEN2))
    strip = [pil(20, 4100)]
    want = outcome(plain, strip, return_tensors="np")
    with caplog.at_level(logging.DEBUG, logger="mmfast.hf"):
        got = outcome(backed, strip, return_tensors="np")
    assert want[0] is ValueError and got == want
    assert "aspect ratio" in caplog.text


@pytest.mark.parametrize(
    "kwargs",
    [
        {"do_pan_and_scan": True},  # the file's null crop settings: transformers raises
        {"do_center_crop": True},  # no crop_size: transformers raises
        {"do_pad": None},  # over LLaVA-NeXT's True: transformers does not pad
    ],
)
@pytest.mark.parametrize("model_id", ["google/gemma-3-4b-it", "llava-hf/llava-v1.6-mistral-7b-hf"])
def test_none_settings_run_as_transformers_runs_them(
    model_id: str, kwargs: dict[str, Any], tmp_path: Path
) -> None:
    """A setting left None that mmfast would read as its default runs on transformers."""
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, model_id))
    images = [pil(100, 420, 1)]
    want = outcome(plain, images, return_tensors="np", **kwargs)
    got = outcome(backed, images, return_tensors="np", **kwargs)
    assert_same(got, want)


@pytest.mark.parametrize(
    ("model_id", "settings"),
    [
        ("BAAI/Emu3-Chat-hf", {"do_resize": None}),
        ("LanguageBind/Video-LLaVA-7B-hf", {"do_resize": None}),
        ("LanguageBind/Video-LLaVA-7B-hf", {"do_center_crop": None}),
    ],
)
def test_old_style_instances_with_none_settings_run_on_transformers(
    model_id: str, settings: dict[str, Any]
) -> None:
    """An old-style class reads its instance's None as it is (no resize, no crop); mmfast
    read it as the default: Emu3 resized a 333x517 image to 416x640."""
    config = builtin_dict(model_id) | settings
    hf_class = getattr(transformers, config["image_processor_type"])
    images = [pil(333, 517, 1)]
    want = outcome(hf_class.from_dict(dict(config)), images, return_tensors="np")
    got = outcome(hf.wrap(hf_class.from_dict(dict(config))), images, return_tensors="np")
    assert_same(got, want)


def unsupported_checkpoints() -> list[Any]:
    vit = (
        {"image_processor_type": "ViTImageProcessor", "size": {"height": 32, "width": 32}},
        "vit",
    )
    return [pytest.param(*vit, id="vit")]


@pytest.mark.parametrize(("preprocessor", "model_type"), unsupported_checkpoints())
def test_unsupported_classes_load_untouched(
    preprocessor: dict[str, Any], model_type: str, tmp_path: Path, mmfast_calls: list[int]
) -> None:
    """A class mmfast does not back (ViT) loads as transformers' class after install()."""
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(preprocessor))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    plain, backed = load_pair(transformers.AutoImageProcessor, tmp_path)
    assert type(backed) is type(plain)
    assert type(backed).__module__.startswith("transformers.models.")
    images = [pil(60, 80)]
    assert_same(backed(images, return_tensors="np"), plain(images, return_tensors="np"))
    assert mmfast_calls == []
    with pytest.raises(UnsupportedModelError, match=f"got a {type(plain).__name__}"):
        hf.wrap(backed)


@pytest.mark.skipif(not TORCH, reason=f"Kimi_K25ImageProcessor: {NEEDS_TORCHVISION}")
@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"max_patches": 64},
        {"size": {"max_height": 20, "max_width": 20}, "merge_size": 3},
        {"patch_size": 16, "resample": 2},
        {"do_normalize": False, "image_mean": [0.1, 0.2, 0.3]},
        {"do_rescale": False, "do_normalize": False},
        {"size": {"max_height": 20, "max_width": 30}},  # transformers refuses unequal sides
        {"do_resize": False},  # a 333 x 250 image is no multiple of 14: torch refuses
    ],
)
def test_kimi_k25_transformers_class_is_backed(
    kwargs: dict[str, Any], tmp_path: Path, mmfast_calls: list[int]
) -> None:
    """The Kimi-K2.5 checkpoint, loaded without trust_remote_code, is transformers'
    Kimi_K25ImageProcessor (its remote-code auto_map is passed over for the local class):
    backed after install(), with transformers' settings and call arguments read as its own."""
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, KIMI_K25))
    assert type(plain).__name__ == "Kimi_K25ImageProcessor"
    assert isinstance(backed, hf.MmfastBacked)
    images = [pil(100, 420, 1), pil(333, 250, 2)]
    for tensors in TENSORS:
        before = len(mmfast_calls)
        want = outcome(plain, images, return_tensors=tensors, **kwargs)
        got = outcome(backed, images, return_tensors=tensors, **kwargs)
        assert_same(got, want)
        if not isinstance(want, tuple):  # where transformers refuses, it raised its own error
            assert len(mmfast_calls) == before + 1


@pytest.mark.parametrize("suffix", ["", "Fast"])
def test_deprecated_class_names_are_backed(
    suffix: str, tmp_path: Path, mmfast_calls: list[int]
) -> None:
    """A checkpoint converted before ERNIE-4.5-VL's rename names the deprecated alias
    (Ernie4_5_VL_MoeImageProcessor, a subclass that only warns): transformers loads the alias,
    and install() backs it with transformers' outputs."""
    config = dict(registry.BUILTINS["baidu/ERNIE-4.5-VL-28B-A3B-PT"].preprocessor)
    config["image_processor_type"] = "Ernie4_5_VL_MoeImageProcessor" + suffix
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(config))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "ernie4_5_vl_moe"}))
    plain, backed = load_pair(transformers.AutoImageProcessor, tmp_path)
    assert type(plain).__name__.startswith("Ernie4_5_VL_MoeImageProcessor")
    assert isinstance(backed, hf.MmfastBacked) and isinstance(backed, type(plain))
    images = [pil(120, 200, 1), pil(64, 96, 3)]
    for tensors in TENSORS:
        assert_same(backed(images, return_tensors=tensors), plain(images, return_tensors=tensors))
    assert len(mmfast_calls) == len(TENSORS)
    proc = mmfast.ImageProcessor.from_pretrained(tmp_path)
    assert proc.config.image_processor_type == config["image_processor_type"]


def test_unknown_model_type_raises_as_transformers_does(tmp_path: Path) -> None:
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"do_resize": True}))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "made_up_vlm"}))
    want = outcome(transformers.AutoImageProcessor.from_pretrained, tmp_path)
    hf.install()
    got = outcome(transformers.AutoImageProcessor.from_pretrained, tmp_path)
    assert want[0] is ValueError and got == want


# --------------------------------------------------------------------------------------------
# The transformers surface stays transformers'


def test_backed_processor_keeps_the_transformers_surface(tmp_path: Path) -> None:
    """Attributes, helpers, repr, to_dict, save_pretrained (loadable by plain transformers) and
    pickling are the class's own."""
    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, QWEN2))
    assert (backed.merge_size, backed.patch_size) == (plain.merge_size, plain.patch_size) == (2, 14)
    assert backed.get_number_of_image_patches(480, 640, {}) == plain.get_number_of_image_patches(
        480, 640, {}
    )
    assert repr(backed) == repr(plain)
    saved = tmp_path / "saved"
    backed.save_pretrained(saved)
    reloaded = transformers.AutoImageProcessor.from_pretrained(saved)
    assert type(reloaded) is type(plain) and reloaded.to_dict() == plain.to_dict()
    restored = pickle.loads(pickle.dumps(backed))
    assert type(restored) is type(backed) and restored.to_dict() == backed.to_dict()
    images = [pil(100, 150)]
    assert_same(restored(images, return_tensors="np"), plain(images, return_tensors="np"))


def test_backed_classes_live_in_transformers_modules(tmp_path: Path) -> None:
    """The backed class has its transformers class's name and module, so lookups by module
    (transformers' tests find ``<Name>Kwargs`` that way) see what they see for the class."""
    import inspect

    plain, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, QWEN2))
    cls = type(backed)
    assert (cls.__module__, cls.__qualname__) == (type(plain).__module__, type(plain).__qualname__)
    assert inspect.getmodule(cls) is inspect.getmodule(type(plain))
    module = sys.modules[cls.__module__]
    assert module.Qwen2VLImageProcessorKwargs is cls.valid_kwargs is type(plain).valid_kwargs
    assert hf.backed_class(cls) is None  # already backed


def test_stats_count_who_computed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stats() counts the calls mmfast computed and those transformers ran, by class and
    reason, and the first of each is logged at INFO."""
    monkeypatch.setattr(hf, "_calls", hf.Counter())
    _, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, LLAVA))
    name = type(backed).__name__
    with caplog.at_level(logging.INFO, logger="mmfast.hf"):
        for _ in range(3):
            backed([pil(60, 80)], return_tensors="np")
        outcome(backed, [pil(60, 80)], return_tensors="np", data_format="channels_last")
    assert hf.stats() == {
        "mmfast": 3,
        "transformers": 1,
        "by_class": {name: {"mmfast": 3, "data_format": 1}},
    }
    assert f"{name}: calls computed by mmfast" in caplog.text
    assert caplog.text.count("computed by mmfast") == 1


@pytest.mark.skipif(not TORCH, reason="device tensors need torch")
@pytest.mark.parametrize("policy", ["transformers", "cpu", "other"])
def test_device_calls_follow_the_cuda_policy(
    policy: str, tmp_path: Path, mmfast_calls: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call with a device other than the CPU runs on transformers unless MMFAST_HF_CUDA=cpu,
    which computes on the CPU and moves the outputs (torch's meta device stands in for a GPU
    here; an unknown value reads as the default)."""
    monkeypatch.setenv(hf.CUDA_ENV_VAR, policy)
    _, backed = load_pair(transformers.AutoImageProcessor, write_checkpoint(tmp_path, QWEN2))
    got = outcome(backed, [pil(60, 80)], return_tensors="pt", device="meta")
    if policy == "cpu":
        assert got["pixel_values"].device.type == "meta"
        assert len(mmfast_calls) == 1
    else:
        assert mmfast_calls == []


def test_supported_classes_name_transformers_classes() -> None:
    names = hf.supported_classes()
    assert {"Qwen2VLImageProcessorPil", "Qwen2VLImageProcessor", "Llama4ImageProcessor"} <= set(
        names
    )
    assert "Llama4ImageProcessorPil" not in names  # transformers has no such class


# --------------------------------------------------------------------------------------------
# Ways in: wrap, from_pretrained, install, the environment variable


def test_wrap_converts_in_place(tmp_path: Path, mmfast_calls: list[int]) -> None:
    """wrap() keeps the object and its settings; it takes a processor too, and is idempotent."""
    directory = write_checkpoint(tmp_path, LLAVA)
    image_processor = transformers.AutoImageProcessor.from_pretrained(directory)
    settings = image_processor.to_dict()
    assert hf.wrap(image_processor) is image_processor
    assert isinstance(image_processor, hf.MmfastBacked) and image_processor.to_dict() == settings
    assert hf.wrap(image_processor) is image_processor
    processor = transformers.AutoProcessor.from_pretrained(directory)
    assert hf.wrap(processor) is processor
    assert isinstance(processor.image_processor, hf.MmfastBacked)
    processor(images=[pil(50, 70)], text=["<image> a picture"], return_tensors="np")
    assert len(mmfast_calls) == 1


def test_wrap_refuses_other_objects() -> None:
    with pytest.raises(
        UnsupportedModelError, match=r"got a dict; supported classes: .*CLIPImageProcessor,"
    ):
        hf.wrap({})


def test_from_pretrained(tmp_path: Path) -> None:
    """mmfast.hf.from_pretrained is AutoImageProcessor.from_pretrained, backed."""
    directory = write_checkpoint(tmp_path, QWEN2)
    image_processor = hf.from_pretrained(directory, max_pixels=40000)
    assert isinstance(image_processor, hf.MmfastBacked)
    assert image_processor.size["longest_edge"] == 40000
    loaded, unused = hf.from_pretrained(directory, return_unused_kwargs=True, foo=1)
    assert isinstance(loaded, hf.MmfastBacked) and unused == {"foo": 1}
    (tmp_path / "preprocessor_config.json").write_text(
        json.dumps({"image_processor_type": "ViTImageProcessor"})
    )
    with pytest.raises(UnsupportedModelError, match="ViTImageProcessor"):
        hf.from_pretrained(tmp_path)


def test_install_is_one_idempotent_hook(tmp_path: Path) -> None:
    """install() replaces ImageProcessingMixin.from_dict once; direct class loads are backed
    too; uninstall() puts transformers' classmethod back."""
    mixin = transformers.image_processing_base.ImageProcessingMixin
    original = mixin.__dict__["from_dict"]
    directory = write_checkpoint(tmp_path, QWEN2)
    cls = type(transformers.AutoImageProcessor.from_pretrained(directory))
    hf.install()
    hook = mixin.__dict__["from_dict"]
    hf.install()
    assert hook is not original and mixin.__dict__["from_dict"] is hook
    assert isinstance(cls.from_pretrained(directory), hf.MmfastBacked)
    assert isinstance(cls.from_dict({}), hf.MmfastBacked)
    # The dict by transformers' name for it, on a class mmfast backs and on one it does not
    # (the hook took it by position only: TypeError).
    assert isinstance(cls.from_dict(image_processor_dict={}), hf.MmfastBacked)
    vit = transformers.ViTImageProcessor.from_dict(image_processor_dict={"size": 32})
    assert type(vit) is transformers.ViTImageProcessor and vit.size == {"height": 32, "width": 32}
    hf.uninstall()
    assert mixin.__dict__["from_dict"] is original
    assert not isinstance(cls.from_pretrained(directory), hf.MmfastBacked)


@pytest.mark.parametrize(
    ("value", "installs"),
    [
        *[("", False), ("0", False), ("off", False), ("False", False), (" no ", False)],
        *[("1", True), ("yes", True), ("TRUE", True), ("On", True)],
    ],
)
def test_install_from_env_values(
    value: str, installs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The usual spellings of true and false, in any case."""
    mixin = transformers.image_processing_base.ImageProcessingMixin
    original = mixin.__dict__["from_dict"]
    monkeypatch.setenv(hf.ENV_VAR, value)
    assert hf.install_from_env() is installs
    assert (mixin.__dict__["from_dict"] is not original) is installs


def test_install_from_env_warns_once_on_other_values(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An unknown value does not install, and is warned about once, not raised: the .pth hook
    runs at every interpreter start."""
    monkeypatch.setenv(hf.ENV_VAR, "maybe")
    with caplog.at_level(logging.WARNING, logger="mmfast.hf"):
        assert hf.install_from_env() is False
        assert hf.install_from_env() is False
    assert [r.getMessage() for r in caplog.records].count(
        "MMFAST_HF_INSTALL: expected 1, true, yes or on (install) or 0, false, no or off (do not), "
        "got 'maybe'; not installing"
    ) <= 1
    assert "got 'maybe'" in caplog.text


# The line of python/mmfast_hf.pth, which a wheel installs into site-packages.
PTH_LINE = (
    'import os; os.environ.get("MMFAST_HF_INSTALL") and '
    '__import__("mmfast.hf").hf.install_from_env()\n'
)
SHIPPED_PTH = Path(__file__).resolve().parents[1] / "python" / "mmfast_hf.pth"


def test_shipped_pth_is_the_tested_line() -> None:
    """The file the wheel ships (pyproject's ``[tool.maturin] include``) is the line tested
    below."""
    if not SHIPPED_PTH.exists():
        pytest.skip(f"{SHIPPED_PTH} is not in this checkout")
    assert SHIPPED_PTH.read_text(encoding="utf-8") == PTH_LINE


CHILD = """
import site, sys
site.addsitedir(sys.argv[1])  # reads mmfast_hf.pth, as the interpreter does for site-packages
lazy = "transformers" not in sys.modules
from transformers import AutoImageProcessor
from mmfast.hf import MmfastBacked
image_processor = AutoImageProcessor.from_pretrained(sys.argv[2])
print(lazy, isinstance(image_processor, MmfastBacked))
"""


def test_pth_installs_at_startup(tmp_path: Path) -> None:
    """With MMFAST_HF_INSTALL=1 the .pth line installs in a process that never imports mmfast
    itself, without importing transformers before the process does (one process: it takes
    seconds to import transformers; the other values are checked above)."""
    (tmp_path / "mmfast_hf.pth").write_text(PTH_LINE)
    directory = write_checkpoint(tmp_path, QWEN2)
    env = {**os.environ, "MMFAST_HF_INSTALL": "1"}
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), str(directory)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "True True"


def test_pth_warns_once_on_an_unknown_value(tmp_path: Path) -> None:
    """A value the hook does not understand prints one warning line at start, no traceback."""
    (tmp_path / "mmfast_hf.pth").write_text(PTH_LINE)
    result = subprocess.run(
        [sys.executable, "-c", f"import site; site.addsitedir({str(tmp_path)!r})"],
        env={**os.environ, "MMFAST_HF_INSTALL": "maybe"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Traceback" not in result.stderr
    assert result.stderr.count("MMFAST_HF_INSTALL") == 1, result.stderr
