"""The cases that compare ``backend="torchvision"`` with transformers' torchvision classes.

Each case is a row of the parity table (``parity_table.TABLE``) whose family has a torchvision
class, one of its overrides (mmfast's, and transformers' where they are spelt differently) and a
batch of named images. ``goldens/make_torchvision_goldens.py`` runs
transformers on every case where torch is installed and stores a digest of its outputs in
``goldens/torchvision.json``; ``test_torchvision`` checks mmfast against those digests without
torch, and against transformers itself when torch is installed.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from conftest import SHARED, Override, builtin_dict, make_image
from parity_table import TABLE, tv_overrides
from PIL import Image, ImageOps

import mmfast
from mmfast import models

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
    model_id: str
    overrides: Sequence[Override] = field(default_factory=tuple)


# Every row of the parity table whose family transformers has a torchvision class for.
MODELS = [Model(row.model_id, tuple(tv_overrides(row))) for row in TABLE if row.torchvision]


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
    reference = dict(case.override.reference)
    processor = cls.from_dict(builtin_dict(case.model.model_id) | reference)
    defaults = models.registry.builtin_processor_defaults(case.model.model_id, family)
    kwargs = {k: v for k, v in defaults.items() if k not in reference}
    images = [load_image(name) for name in case.images]
    out = processor(images, return_tensors="pt", **kwargs)
    result: dict[str, Any] = {}
    bfloat16 = out["pixel_values"].dtype == torch.bfloat16
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
    proc = mmfast.ImageProcessor.from_pretrained(
        case.model.model_id, backend="torchvision", **case.override.ours
    )
    images = [load_image(name) for name in case.images]
    out = dict(proc(images, dtype="bfloat16" if bfloat16 else None))
    if bfloat16:
        out["pixel_values"] = out["pixel_values"].view(np.uint16)
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
    video processor with the sampling options ``options``."""

    model_id: str
    frames: int
    height: int
    width: int
    rate: float
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        settings = ",".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        short = self.model_id.rsplit("/", 1)[-1]
        return f"{short}-{self.frames}x{self.height}x{self.width}@{self.rate}[{settings}]"

    def clip(self) -> np.ndarray:
        """(T, H, W, 3) uint8: alternating smooth and noisy frames."""
        return np.stack(
            [
                make_image("noise" if t % 2 else "smooth", self.height, self.width, seed=t)
                for t in range(self.frames)
            ]
        )


VIDEO_MODELS = [
    "Qwen/Qwen2-VL-7B-Instruct",
    "Qwen/Qwen2.5-VL-7B-Instruct",
    "Qwen/Qwen3-VL-8B-Instruct",
    "facebook/Perception-LM-1B",
]
VIDEO_CASES = [
    VideoCase(model_id, frames, height, width, rate, options)
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
]


def video_config(model_id: str) -> dict[str, Any]:
    """The built-in's video processor settings (its image settings where it has none)."""
    builtin = models.registry.BUILTINS[model_id]
    values = builtin.video if builtin.video is not None else builtin.preprocessor
    result: dict[str, Any] = json.loads(json.dumps(dict(values)))
    return result


def hf_video(case: VideoCase) -> dict[str, Any]:
    """transformers' video processor for the model on the case's clip, as NumPy."""
    import torch
    import transformers
    from transformers.video_utils import VideoMetadata

    family = models.registry.video_family(None, models.registry.BUILTINS[case.model_id].model_type)
    assert family is not None
    cls = getattr(transformers, family.processor_type)
    processor = cls.from_dict(video_config(case.model_id))
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
    return {key: value.numpy() for key, value in out.items()}


def ours_video(case: VideoCase) -> dict[str, Any]:
    proc = mmfast.ImageProcessor.from_pretrained(case.model_id)
    return dict(proc.videos(case.clip(), video_fps=case.rate, **case.options))
