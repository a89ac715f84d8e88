"""The cases that compare ``backend="torchvision"`` with transformers' torchvision classes.

Each case is a row of the parity table (``parity_table.TABLE``) whose family has a torchvision
class, one of its overrides (mmfast's, and transformers' where they are spelt differently) and a
batch of named images. ``goldens/make_torchvision_goldens.py`` runs
transformers on every case where torch is installed and stores a digest of its outputs in
``goldens/torchvision.json``; ``test_torchvision`` checks mmfast against those digests without
torch, and against transformers itself when torch is installed.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MethodType, SimpleNamespace
from typing import Any

import numpy as np
from conftest import SHARED, Override, builtin_dict, builtin_settings, make_image
from huggingface_hub.errors import StrictDataclassError
from parity_table import TABLE, as_outputs, tv_overrides
from PIL import Image, ImageOps

import mmfast
from mmfast import models
from mmfast.models.config import load_video_config

GOLDENS = Path(__file__).resolve().parent / "goldens" / "torchvision.json"

# Synthetic images, by name: kind, height, width (the seed follows from the size).
SYNTHETIC = [
    "noise-300x200",
    "smooth-45x700",
    "noise-1000x37",
    "smooth-1x1",
    "smooth-3x1",
    "noise-27x29",
    "smooth-10x1990",
    "smooth-1080x1920",
]
OVERRIDE_IMAGES = ["noise-150x97", "smooth-61x530"]
SHARED_IMAGES = [
    "astronaut.png",
    "astronaut_16bit_gray.png",
    "camera_gray.png",
    "china.jpg",
    "china_exif6.jpg",
    "coffee.png",
    "coffee_cmyk.jpg",
    "grace_hopper.jpg",
    "grace_hopper_12mp.jpg",
    "logo_rgba.png",
    "one_pixel.png",
    "strip_3000x40.png",
    "tiny_palette.gif",
]


@dataclass(frozen=True)
class Model:
    """A parity-table row on the torchvision side: its overrides, and for families without a
    PIL class (whose token counts ``test_families`` cannot check) its token count."""

    model_id: str
    overrides: Sequence[Override] = field(default_factory=tuple)
    tokens: Callable[[Mapping[str, Any], dict[str, Any]], int] | None = field(
        default=None, compare=False
    )


# Every row of the parity table whose family transformers has a torchvision class for.
MODELS = [
    Model(
        row.model_id,
        tuple(tv_overrides(row)),
        row.tokens if row.family.hf_pil is None and row.pil_reference is None else None,
    )
    for row in TABLE
    if row.torchvision
]


@dataclass(frozen=True)
class Case:
    """One call: a model, its overrides and a batch of images."""

    model: Model
    override: Override
    images: tuple[str, ...]

    @property
    def id(self) -> str:
        short = self.model.model_id.rsplit("/", 1)[-1]
        settings = ",".join(f"{k}={v}" for k, v in sorted(self.override.ours.items()))
        return f"{short}[{settings}]-{'+'.join(self.images)}"


def cases() -> Iterator[Case]:
    """Every image alone with the defaults, a mixed batch, and each override on two images."""
    for model in MODELS:
        plain = Override({})
        for name in (*SYNTHETIC, *SHARED_IMAGES):
            yield Case(model, plain, (name,))
        yield Case(model, plain, ("noise-300x200", "smooth-45x700", "smooth-3x1"))
        for override in model.overrides:
            for name in OVERRIDE_IMAGES:
                yield Case(model, override, (name,))


def load_image(name: str) -> Image.Image | None:
    """A named test image as a PIL image (upright, as HF's loaders leave files), or None for a
    shared file that is absent."""
    if name in SHARED_IMAGES:
        path = SHARED / "images" / name
        if not path.exists():
            return None
        with Image.open(path) as image:
            upright = ImageOps.exif_transpose(image)
            upright.load()
        return upright
    kind, size = name.split("-")
    height, width = (int(v) for v in size.split("x"))
    return Image.fromarray(make_image(kind, height, width, seed=height + width))


def input_digest(images: Sequence[Image.Image]) -> str:
    """A digest of the decoded inputs: a shared file decoded differently (another Pillow build)
    is not the input the golden was made from."""
    h = hashlib.sha256()
    for image in images:
        h.update(f"{image.mode}{image.size}".encode())
        h.update(image.tobytes())
    return h.hexdigest()[:16]


def family_of(model_id: str) -> models.Family:
    family, _ = models.config.select_family(models.config.read_source(model_id))
    return family


def hf_torchvision(case: Case) -> tuple[dict[str, Any], bool]:
    """transformers' torchvision class on the case, as NumPy, and whether ``pixel_values``
    is bfloat16 (returned as its uint16 bits)."""
    import torch

    family = family_of(case.model.model_id)
    assert family.hf_torchvision is not None
    module, name = family.hf_torchvision.rsplit(".", 1)
    cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)
    reference = case.override.reference
    processor = cls.from_dict(builtin_dict(case.model.model_id) | reference)
    defaults = models.registry.builtin_processor_defaults(case.model.model_id, family)
    kwargs = {k: v for k, v in defaults.items() if k not in reference}
    images = [load_image(name) for name in case.images]
    out = as_outputs(processor(images, return_tensors="pt", **kwargs))
    result: dict[str, Any] = {}
    # The pixels come first (pixel_values, or Fuyu's images, Phi-4-multimodal's
    # image_pixel_values).
    bfloat16 = next(iter(out.values())).dtype == torch.bfloat16
    for key, value in out.items():
        if isinstance(value, torch.Tensor):
            if value.dtype == torch.bfloat16:
                value = value.view(torch.int16).numpy().view(np.uint16)
            else:
                value = value.numpy()
        result[key] = value
    return result, bfloat16


def ours(case: Case, bfloat16: bool = False) -> dict[str, Any]:
    """mmfast with ``backend="torchvision"`` on the case; bfloat16 as its uint16 bits."""
    model_id = case.model.model_id
    proc = mmfast.ImageProcessor.from_pretrained(
        model_id, backend="torchvision", **builtin_settings(model_id, **case.override.ours)
    )
    images = [load_image(name) for name in case.images]
    out = dict(proc(images, dtype="bfloat16" if bfloat16 else None))
    if bfloat16:
        out["pixel_values"] = out["pixel_values"].view(np.uint16)
    # The cases run transformers with return_tensors="pt": torch's dtype for what it builds
    # from Python floats, as mmfast's return_tensors="pt" gives it.
    for key, dtype in proc.config.tensor_dtypes.items():
        if key in out:
            out[key] = out[key].astype(dtype)
    return out


def digest(outputs: Mapping[str, Any], bfloat16: bool) -> dict[str, Any]:
    """Per key, in order: dtype, shape and a digest of the bytes (lists kept as they are)."""
    result: dict[str, Any] = {}
    for key, value in outputs.items():
        if isinstance(value, list):
            result[key] = value
            continue
        array = np.ascontiguousarray(value)
        dtype = "bfloat16" if bfloat16 and key == "pixel_values" else str(array.dtype)
        result[key] = [dtype, list(array.shape), hashlib.sha256(array.tobytes()).hexdigest()[:16]]
    return result


@dataclass(frozen=True)
class VideoCase:
    """A synthetic clip of ``frames`` frames at ``rate`` frames a second, through a model's
    video processor with the sampling options ``options`` and the video processor settings
    ``settings`` (over the built-in's, on both sides)."""

    model_id: str
    frames: int
    height: int
    width: int
    rate: float
    options: Mapping[str, Any] = field(default_factory=dict)
    # Settings over the checkpoint's video config (its processor built with them).
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        options = ",".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        short = self.model_id.rsplit("/", 1)[-1]
        case = f"{short}-{self.frames}x{self.height}x{self.width}@{self.rate}[{options}]"
        if self.settings:
            case += "{" + ",".join(f"{k}={v}" for k, v in sorted(self.settings.items())) + "}"
        return case

    def clip(self) -> np.ndarray:
        """(T, H, W, 3) uint8: alternating smooth and noisy frames."""
        return np.stack(
            [
                make_image("noise" if t % 2 else "smooth", self.height, self.width, seed=t)
                for t in range(self.frames)
            ]
        )


ERNIE = "baidu/ERNIE-4.5-VL-28B-A3B-PT"
VL3 = "lkhl/VideoLLaMA3-2B-Image-HF"
KIMI = "moonshotai/Kimi-K2.5"
VIDEO_MODELS = [
    "Qwen/Qwen2-VL-7B-Instruct",
    "Qwen/Qwen2.5-VL-7B-Instruct",
    "Qwen/Qwen3-VL-8B-Instruct",
    "CohereLabs/North-Micro-Vision-Instruct",
    "nvidia/Cosmos3-Edge",
    "tencent/Hy4",
    "MiniMaxAI/MiniMax-M3",
    "meta-models/Muse-Glimmer-30B",
    "LanguageBind/Video-LLaVA-7B-hf",
    "zai-org/GLM-4.1V-9B-Thinking",
    "zai-org/GLM-4.6V",
    "zai-org/GLM-5.3-Flash",
    "baidu/ERNIE-4.5-VL-28B-A3B-PT",
    "lkhl/VideoLLaMA3-2B-Image-HF",
    "moonshotai/Kimi-K2.5",
    "OpenGVLab/InternVL3-8B-hf",
    "llava-hf/llava-onevision-qwen2-7b-ov-hf",
    "llava-hf/LLaVA-NeXT-Video-7B-hf",
    "google/gemma-4-31B-it",
    "HuggingFaceTB/SmolVLM2-2.2B-Instruct",
    "openbmb/MiniCPM-V-4.6",
    "zai-org/GLM-GA",
    "google/gemma-4-12B-it",
    "openbmb/MiniCPM-OCR-1.0",
    "allenai/Molmo2-8B",
    "Salesforce/instructblip-vicuna-7b",
    "facebook/Perception-LM-1B",
]
# Settings every case of a model runs with (what mmfast refuses at the built-in's own values
# has cases of its own).
VIDEO_SETTINGS: dict[str, dict[str, Any]] = {
    # Timestamps drawn with the checkpoint's font: mmfast refuses them (test_video.py).
    "baidu/ERNIE-4.5-VL-28B-A3B-PT": {"draw_on_frames": False},
    # Token compression over several frames: a reduction over the pixels, refused (one-frame
    # clips, whose tokens are all kept, have cases below).
    VL3: {"use_token_compression": False},
}
VIDEO_CASES = [
    VideoCase(model_id, frames, height, width, rate, options, VIDEO_SETTINGS.get(model_id, {}))
    for model_id in VIDEO_MODELS
    for frames, height, width, rate, options in [
        (1, 64, 90, 30.0, {}),
        (7, 240, 320, 30.0, {}),
        (16, 360, 640, 24.0, {"do_sample_frames": True, "fps": 2}),
        (45, 120, 200, 30.0, {"do_sample_frames": True, "fps": 1.5}),
        (30, 97, 411, 12.5, {"do_sample_frames": True, "num_frames": 8, "fps": None}),
        (9, 33, 17, 25.0, {"do_sample_frames": True, "num_frames": 4, "fps": None}),
        (12, 480, 480, 30.0, {"do_sample_frames": False}),
    ]
] + [
    # GLM-4.1V: a clip over max_duration (300 s), sampled with np.linspace; GLM-4.6V: each of
    # its rates (3, 1 and 0.5 frames a second) and np.linspace's fix-up of too few frames.
    VideoCase("zai-org/GLM-4.1V-9B-Thinking", 700, 30, 44, 2.0),
    VideoCase("zai-org/GLM-4.1V-9B-Thinking", 9, 56, 112, 10.0, {}, {"do_resize": False}),
    VideoCase("zai-org/GLM-4.6V", 40, 48, 64, 1.0),
    VideoCase("zai-org/GLM-4.6V", 120, 72, 40, 24.0),
    VideoCase("zai-org/GLM-4.6V", 700, 20, 30, 2.0),
    VideoCase(
        "zai-org/GLM-4.6V",
        5,
        131,
        67,
        2.0,
        {},
        {"size": {"shortest_edge": 3136, "longest_edge": 50000}},
    ),
    # GLM-5: a canvas over the token budget (binary search), one under the minimum (grown),
    # a long clip at 1 frame a second and max_frames, and patch_expand_factor 2.
    VideoCase("zai-org/GLM-5.3-Flash", 20, 700, 1100, 4.0, {}, {"max_image_tokens": 2000}),
    VideoCase("zai-org/GLM-5.3-Flash", 6, 20, 30, 2.0),
    VideoCase("zai-org/GLM-5.3-Flash", 300, 24, 36, 1.0, {}, {"max_frames": 40}),
    VideoCase("zai-org/GLM-5.3-Flash", 9, 200, 150, 5.0, {"fps": 1}, {"patch_expand_factor": 2}),
    # GLM-GA: fewer frames than fps * duration (floor spreading), a long clip over max_frames
    # (np.linspace), a non-integer rate, patch_expand_factor 2, a small budget.
    VideoCase("zai-org/GLM-GA", 5, 60, 80, 1.0),
    VideoCase("zai-org/GLM-GA", 400, 20, 30, 1.0, {}, {"max_frames": 30}),
    VideoCase("zai-org/GLM-GA", 77, 50, 70, 7.3, {"fps": 3.1}),
    VideoCase("zai-org/GLM-GA", 9, 200, 150, 5.0, {"fps": 1}, {"patch_expand_factor": 2}),
    VideoCase(
        "zai-org/GLM-GA",
        11,
        131,
        67,
        4.0,
        {},
        {"size": {"shortest_edge": 3136, "longest_edge": 50000}},
    ),
    # ERNIE: fps sampling under min_frames (16) and over the clip, num_frames at the bounds,
    # an odd clip without sampling (its last frame repeated), a small pixel budget.
    VideoCase(ERNIE, 200, 60, 80, 30.0, {"fps": 2}, {"draw_on_frames": False}),
    VideoCase(ERNIE, 50, 40, 40, 10.0, {"fps": 4}, {"draw_on_frames": False}),
    VideoCase(ERNIE, 40, 30, 50, 8.0, {"num_frames": 16, "fps": None}, {"draw_on_frames": False}),
    VideoCase(ERNIE, 7, 90, 60, 25.0, {"do_sample_frames": False}, {"draw_on_frames": False}),
    VideoCase(
        ERNIE,
        18,
        300,
        500,
        6.0,
        {},
        {"draw_on_frames": False, "size": {"shortest_edge": 3136, "longest_edge": 40000}},
    ),
    # VideoLLaMA3: token compression on with one frame (every token kept), a budget the clip's
    # length divides below the minimum, fps sampling floored to min_frames.
    VideoCase(VL3, 1, 300, 200, 10.0),
    VideoCase(VL3, 40, 120, 90, 10.0, {"do_sample_frames": True, "num_frames": 1, "fps": None}),
    VideoCase(VL3, 60, 256, 320, 30.0, {}, {"use_token_compression": False, "max_pixels": 300000}),
    VideoCase(VL3, 50, 64, 64, 25.0, {"do_sample_frames": True, "fps": 1}, VIDEO_SETTINGS[VL3]),
    # Kimi-K2.5 (transformers' class, its defaults: the checkpoint names no video class):
    # chunks of 4 frames with a short last one, frames over max_patches and per side, a
    # smaller patch budget, unresized frames.
    VideoCase(KIMI, 9, 100, 150, 10.0, {"do_sample_frames": False}),
    VideoCase(KIMI, 20, 900, 1600, 4.0, {"fps": 1}),
    VideoCase(KIMI, 6, 3000, 200, 2.0, {"do_sample_frames": False}),
    VideoCase(KIMI, 5, 300, 500, 5.0, {"do_sample_frames": False}, {"max_patches": 300}),
    VideoCase(KIMI, 7, 56, 84, 7.0, {"do_sample_frames": False}, {"do_resize": False}),
]
# Video settings over each checkpoint's (every setting its class reads, and the refusals).
# (Not VIDEO_SETTINGS, the settings every case of a model runs with: the random cases read it.)
_FRAMES_SETTINGS: list[dict[str, Any]] = [
    {"do_resize": False},
    {"size": {"height": 200, "width": 120}, "resample": 2},
    {"size": {"shortest_edge": 100}, "resample": 1},
    {"size": {"shortest_edge": 90, "longest_edge": 150}},
    {"size": {"max_height": 250, "max_width": 140}, "resample": 0},
    {"do_center_crop": True, "crop_size": {"height": 300, "width": 500}},
    {"do_resize": False, "do_center_crop": True, "crop_size": {"height": 120, "width": 100}},
    {"do_normalize": False},
    {"do_rescale": False, "do_normalize": False},
    {"image_mean": [0.2, 0.4, 0.6], "image_std": [0.3, 0.1, 0.9], "rescale_factor": 0.004},
    {"resample": 4},
]
VIDEO_SETTING_CASES: dict[str, list[dict[str, Any]]] = {
    "OpenGVLab/InternVL3-8B-hf": [
        *_FRAMES_SETTINGS,
        {"initial_shift": False, "do_sample_frames": True, "num_frames": 3},
        {"initial_shift": 1.5, "do_sample_frames": True, "fps": 8},
    ],
    "llava-hf/llava-onevision-qwen2-7b-ov-hf": [
        *_FRAMES_SETTINGS,
        {"do_sample_frames": True, "num_frames": 3},
    ],
    "llava-hf/LLaVA-NeXT-Video-7B-hf": [
        *_FRAMES_SETTINGS,
        {"do_center_crop": False},
        {"crop_size": {"height": 400, "width": 120}},
    ],
    "google/gemma-4-31B-it": [
        {"do_sample_frames": False},
        {"num_frames": 3},
        {"num_frames": None, "fps": 4},
        {"do_sample_frames": False, "max_soft_tokens": 280, "resample": 2},
        {"do_sample_frames": False, "max_soft_tokens": 1120, "resample": 1},
        {"do_sample_frames": False, "max_soft_tokens": 140, "patch_size": 14},
        {"do_sample_frames": False, "pooling_kernel_size": 2},
        {"do_sample_frames": False, "do_rescale": False, "do_normalize": False},
        {"do_sample_frames": False, "image_mean": [0.5, 0.4, 0.3], "image_std": [0.2, 0.5, 0.7]},
        {"max_soft_tokens": 100},
    ],
    # Gemma 4 unified: Gemma 4's settings over merged rows (unresized frames: below).
    "google/gemma-4-12B-it": [
        {"do_sample_frames": False},
        {"num_frames": 3},
        {"num_frames": None, "fps": 4},
        {"do_sample_frames": False, "max_soft_tokens": 280, "resample": 2},
        {"do_sample_frames": False, "max_soft_tokens": 1120, "resample": 1},
        {"do_sample_frames": False, "max_soft_tokens": 140, "patch_size": 14},
        {"do_sample_frames": False, "pooling_kernel_size": 2},
        {"do_sample_frames": False, "do_rescale": False, "do_normalize": False},
        {"do_sample_frames": False, "image_mean": [0.5, 0.4, 0.3], "image_std": [0.2, 0.5, 0.7]},
    ],
    "HuggingFaceTB/SmolVLM2-2.2B-Instruct": [
        {"do_resize": False},
        {"do_pad": False},
        {"size": {"longest_edge": 200}, "max_image_size": {"longest_edge": 150}},
        {"size": {"height": 100, "width": 300}, "resample": 3},
        {"size": {"longest_edge": 5000}, "max_image_size": {"longest_edge": 96}, "resample": 2},
        {"resample": 0},
        {"do_rescale": False, "do_normalize": False},
        {"image_mean": [0.1, 0.2, 0.3], "image_std": [0.4, 0.5, 0.6]},
        {"do_sample_frames": True},
        {"do_sample_frames": True, "video_sampling": {"fps": 4, "max_frames": 3, "video_size": 64}},
        {"resample": 5},
    ],
    "openbmb/MiniCPM-V-4.6": [
        {"do_resize": False},
        {"slice_mode": False},
        {"downsample_mode": "4x", "max_slice_nums": 4},
        {"scale_resolution": 140, "max_slice_nums": 6, "resample": 2},
        {"scale_resolution": 112, "patch_size": 16, "resample": 1},
        {"resample": 0},
        {"do_normalize": False},
        {"do_rescale": False, "image_mean": [100, 120, 140], "image_std": [50, 60, 70]},
        {"max_num_frames": 2},
        {"use_image_id": False, "do_sample_frames": False},
    ],
    # MiniCPM-OCR: MiniCPM-V 4.6's video class with "4x" by default.
    "openbmb/MiniCPM-OCR-1.0": [
        {"do_resize": False},
        {"slice_mode": False},
        {"downsample_mode": "16x", "max_slice_nums": 4},
        {"scale_resolution": 140, "max_slice_nums": 6, "resample": 2},
        {"scale_resolution": 112, "patch_size": 16, "resample": 1},
        {"do_normalize": False},
        {"max_num_frames": 2},
        {"use_image_id": False, "do_sample_frames": False},
    ],
    "allenai/Molmo2-8B": [
        {"do_sample_frames": False},
        {"num_frames": 3},
        {"num_frames": None, "fps": 4},
        {"num_frames": 8, "max_fps": 8},
        {"num_frames": 8, "max_fps": None},
        {"do_rescale": True, "do_normalize": True},
        {"do_rescale": True, "image_mean": [0.2, 0.4, 0.6], "do_normalize": False},
        {"do_normalize": True, "image_mean": [0.1, 0.2, 0.3], "image_std": [0.4, 0.5, 0.6]},
        {"size": {"height": 224, "width": 224}, "pooling_size": [2, 2], "resample": 0},
        {"size": 196, "pooling_size": [2, 3], "resample": 3},
        {"size": {"height": 384, "width": 384}, "patch_size": 16, "do_sample_frames": False},
        # transformers' _preprocess refuses a size that is not square.
        {"size": {"height": 378, "width": 392}},
    ],
}
# Gemma 4 unified's unresized frames of whole merged squares (48 and 32 pixels); other sizes
# fail in transformers' reshape (a RuntimeError) and mmfast refuses them (test_video.py).
VIDEO_CASES += [
    VideoCase("google/gemma-4-12B-it", 3, 96, 144, 10.0, {"do_sample_frames": False}, config)
    for config in (
        {"do_resize": False},
        {"do_resize": False, "pooling_kernel_size": 2, "max_soft_tokens": 140},
    )
]
# Molmo2: num_frames over max_fps (capped at duration * max_fps), a float32 arange step that
# is no integer, fps sampling at an odd rate, a 1-frame clip, and num_frames over the clip.
MOLMO2 = "allenai/Molmo2-8B"
VIDEO_CASES += [
    VideoCase(MOLMO2, 100, 40, 60, 30.0, {"num_frames": 7, "fps": None}),
    VideoCase(MOLMO2, 301, 30, 44, 29.97, {"num_frames": None, "fps": 1.7}),
    VideoCase(MOLMO2, 90, 50, 70, 1.5, {"num_frames": 11, "fps": None}),
    VideoCase(MOLMO2, 1, 378, 378, 24.0),
    VideoCase(MOLMO2, 6, 20, 24, 1.0, {"num_frames": 40, "fps": None}),
    VideoCase(MOLMO2, 1000, 16, 16, 10.0, {}, {"max_fps": 100}),
]
# Muse Glimmer: num_frames capping the rate (116 frames asked of 700), both at once at an odd
# rate, unresized frames, and three frames a temporal group under a small token cap.
MUSE = "meta-models/Muse-Glimmer-30B"
VIDEO_CASES += [
    VideoCase(MUSE, 700, 20, 30, 30.0, {"fps": 5}),
    VideoCase(MUSE, 301, 30, 44, 29.97, {"fps": 1.7, "num_frames": 11}),
    VideoCase(MUSE, 9, 28, 56, 10.0, {}, {"do_resize": False}),
    VideoCase(
        MUSE,
        8,
        60,
        45,
        10.0,
        {"do_sample_frames": False},
        {"temporal_patch_size": 3, "max_video_frame_tokens": 4},
    ),
]
# MiniCPM-V's long-clip sampling (a clip longer than max_num_frames seconds).
VIDEO_CASES += [
    VideoCase("openbmb/MiniCPM-V-4.6", 50, 40, 60, 10.0, {}, {"max_num_frames": 2}),
    VideoCase("openbmb/MiniCPM-V-4.6", 95, 40, 60, 7.5, {}, {"max_num_frames": 7}),
    VideoCase("openbmb/MiniCPM-OCR-1.0", 95, 40, 60, 7.5, {}, {"max_num_frames": 7}),
]
VIDEO_CASES += [
    VideoCase(model_id, frames, height, width, rate, options, config)
    for model_id, settings in VIDEO_SETTING_CASES.items()
    for config in settings
    for frames, height, width, rate, options in [
        (5, 97, 131, 10.0, {}),
        (4, 500, 300, 25.0, {"do_sample_frames": True, "num_frames": 3, "fps": None}),
    ]
]

# A config's num_frames beside a call's fps and explicit num_frames=None: transformers'
# sample_frames puts the instance's num_frames in after its check, and it wins over the fps
# (mmfast refused the pair as both set).
CONFIG_FRAMES = {"do_sample_frames": True, "fps": 1, "num_frames": None}
VIDEO_CASES += [
    VideoCase(KIMI, 40, 64, 90, 4.0, CONFIG_FRAMES, {"num_frames": 5}),
    VideoCase(
        VL3, 40, 64, 90, 4.0, CONFIG_FRAMES, {"use_token_compression": False, "num_frames": 5}
    ),
    VideoCase("MiniMaxAI/MiniMax-M3", 40, 64, 90, 4.0, CONFIG_FRAMES, {"num_frames": 5}),
    VideoCase(ERNIE, 40, 64, 90, 4.0, CONFIG_FRAMES, {"draw_on_frames": False, "num_frames": 16}),
]

# What transformers' video classes raise for a clip they cannot process: ValueError; for a
# clip GLM-5's sampler leaves no frame of (shorter than half a second), ZeroDivisionError in
# its smart_resize; for a setting MiniMax-M3's kwargs type refuses (fps=None),
# huggingface_hub's StrictDataclassError; besides, InternVL's sampler divides by a zero frame
# count at a low fps (ZeroDivisionError), SmolVLM's compares None without fps or num_frames
# (TypeError), and torch refuses the box and hamming filters (NotImplementedError). mmfast
# raises MmfastError for each.
HF_REFUSALS = (ValueError, ZeroDivisionError, StrictDataclassError, TypeError, NotImplementedError)


def video_config(model_id: str) -> dict[str, Any]:
    """The built-in's video processor settings (its image settings where it has none)."""
    builtin = models.registry.BUILTINS[model_id]
    values = builtin.video if builtin.video is not None else builtin.preprocessor
    result: dict[str, Any] = json.loads(json.dumps(dict(values)))
    return result


def hf_video_class(model_id: str) -> Any:
    """transformers' video processor class for a built-in (the one its video config names,
    else its model type's: GLM-4.6V's glm4v_moe has none)."""
    import transformers

    return getattr(transformers, load_video_config(model_id).video_processor_type)


def hf_video(case: VideoCase) -> dict[str, Any]:
    """transformers' video processor for the model on the case's clip, as NumPy."""
    import torch
    from transformers.video_utils import VideoMetadata

    cls = hf_video_class(case.model_id)
    # (deep copies: some classes' __init__ edit the dicts they are given, and case ids are made
    # from the settings)
    processor = cls.from_dict(copy.deepcopy({**video_config(case.model_id), **case.settings}))
    metadata = VideoMetadata(
        total_num_frames=case.frames,
        fps=case.rate,
        width=case.width,
        height=case.height,
        duration=case.frames / case.rate,
    )
    out = processor(
        videos=[torch.from_numpy(case.clip())],
        video_metadata=[metadata],
        return_tensors="pt",
        **case.options,
    )
    # The metadata some classes return by default (VideoLLaMA3) is not an output mmfast gives;
    # MiniCPM-V's num_frames_per_video stays a list.
    return {
        key: value if isinstance(value, list) else value.numpy()
        for key, value in out.items()
        if key != "video_metadata"
    }


def ours_video(case: VideoCase) -> dict[str, Any]:
    proc = mmfast.ImageProcessor.from_pretrained(case.model_id, video_overrides=case.settings)
    return dict(proc.videos(case.clip(), video_fps=case.rate, **case.options))


# The processor whose replace_video_token builds a model's video prompt (``module.Class``
# under ``transformers.models``) and the placeholder token it repeats.
VIDEO_TOKENS: dict[str, tuple[str, str]] = {
    "zai-org/GLM-4.1V-9B-Thinking": ("glm4v.processing_glm4v.Glm4vProcessor", "<|image|>"),
    "zai-org/GLM-4.6V": ("glm46v.processing_glm46v.Glm46VProcessor", "<|image|>"),
    "zai-org/GLM-5.3-Flash": ("glm5_next.processing_glm5_next.Glm5NextProcessor", "<|image|>"),
    # transformers has no GLM-GA processor: GLM-4.6V's serves the checkpoint.
    "zai-org/GLM-GA": ("glm46v.processing_glm46v.Glm46VProcessor", "<|image|>"),
    ERNIE: ("ernie4_5_vl_moe.processing_ernie4_5_vl_moe.Ernie4_5_VLMoeProcessor", "<|VIDEO|>"),
    VL3: ("video_llama_3.processing_video_llama_3.VideoLlama3Processor", "<|video_pad|>"),
    KIMI: ("kimi_k25.processing_kimi_k25.Kimi_K25Processor", "<|kimi_k25_video_placeholder|>"),
    "meta-models/Muse-Glimmer-30B": (
        "muse_glimmer.processing_muse_glimmer.MuseGlimmerProcessor",
        "<|video|>",
    ),
}


def hf_video_tokens(case: VideoCase) -> int:
    """The placeholder tokens ``replace_video_token`` of the model's processor puts in the
    prompt for the case's clip, run on a stand-in holding what it reads (the video processor,
    the placeholder, the frame-token method) with transformers' video outputs and metadata."""
    import torch
    import transformers
    from transformers.video_utils import VideoMetadata

    config = copy.deepcopy({**video_config(case.model_id), **case.settings})
    builtin = models.registry.BUILTINS[case.model_id]
    family = models.registry.video_family(config.get("video_processor_type"), builtin.model_type)
    assert family is not None
    video_processor = getattr(transformers, family.processor_type).from_dict(config)
    metadata = VideoMetadata(
        total_num_frames=case.frames,
        fps=case.rate,
        width=case.width,
        height=case.height,
        duration=case.frames / case.rate,
        # Every frame, as transformers' reader gives them; sampling replaces them.
        frames_indices=list(range(case.frames)),
    )
    out = video_processor(
        videos=[torch.from_numpy(case.clip())],
        video_metadata=[metadata],
        return_tensors="pt",
        return_metadata=True,
        **case.options,
    )
    path, token = VIDEO_TOKENS[case.model_id]
    module, name = path.rsplit(".", 1)
    cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)
    # The markers around the placeholders (Muse Glimmer's), which the count leaves out.
    fake = SimpleNamespace(
        video_processor=video_processor,
        image_token=token,
        video_token=token,
        video_start_token="",
        video_sep_token="",
        video_end_token="",
    )
    if hasattr(cls, "replace_frame_token_id"):
        fake.replace_frame_token_id = MethodType(cls.replace_frame_token_id, fake)
    return str(cls.replace_video_token(fake, out, 0)).count(token)


def ours_video_tokens(case: VideoCase) -> int:
    """mmfast's ``num_video_tokens`` for the case's clip, sampled as ``proc.videos`` samples."""
    from mmfast.video import VideoMetadata

    proc = mmfast.ImageProcessor.from_pretrained(case.model_id, video_overrides=case.settings)
    config = proc.video_config
    assert config is not None
    frames = case.frames
    if case.options.get("do_sample_frames", config.do_sample_frames):
        metadata = VideoMetadata(
            case.frames, case.rate, case.width, case.height, case.frames / case.rate
        )
        indices = config.sample(metadata, case.options.get("fps"), case.options.get("num_frames"))
        frames = len(indices)
    return proc.num_video_tokens(frames, case.height, case.width)
