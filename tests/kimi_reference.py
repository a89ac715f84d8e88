"""NumPy/Pillow restatements of the Kimi checkpoints' own image processors.

transformers has no PIL class for Kimi-VL or Kimi-K2.5, and the checkpoints' processors (remote
code that vLLM and SGLang run) need torch. These functions restate their arithmetic step by step
with Pillow and NumPy, written from the processors' source, not from mmfast's:

* ``KimiVLImageProcessor`` (``moonshotai/Kimi-VL-A3B-Instruct``, ``image_processing_kimi_vl.py``):
  ``rescale`` (Pillow bicubic resize over ``in_token_limit``, torchvision's PIL ``pad`` or
  ``center_crop``), ``to_tensor`` on ``convert("RGB")``, ``normalize``, ``patchify``.
* ``KimiK25VisionProcessor`` (``moonshotai/Kimi-K2.5``, with ``media_utils.py``):
  ``convert("RGB")``, ``navit_resize_image``, ``image_to_np`` (Pillow bicubic), ``np.pad``,
  ``normalize`` (float64 intermediates stored into float32), ``navit_patchify``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image, ImageOps


def _tv_pad(image: Image.Image, right: int, bottom: int) -> Image.Image:
    """torchvision ``functional.pad(img, [0, 0, right, bottom])`` on a PIL image (fill 0)."""
    bands = len(image.getbands())
    fill: int | tuple[int, ...] = 0 if bands == 1 else (0,) * bands
    if image.mode == "P":
        palette = image.getpalette()
        image = ImageOps.expand(image, border=(0, 0, right, bottom), fill=fill)
        image.putpalette(palette)
        return image
    return ImageOps.expand(image, border=(0, 0, right, bottom), fill=fill)


def _tv_center_crop(image: Image.Image, height: int, width: int) -> Image.Image:
    """torchvision ``functional.center_crop`` on a PIL image no larger than the crop."""
    top = round((image.height - height) / 2.0)
    left = round((image.width - width) / 2.0)
    return image.crop((left, top, left + width, top + height))


def kimi_vl(images: Sequence[Image.Image], cfg: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """``KimiVLImageProcessor.preprocess(images)`` with the settings ``cfg``."""
    p = cfg["patch_size"]
    kernel_h, kernel_w = cfg["merge_kernel_size"]
    mean = np.asarray(cfg["image_mean"], np.float32)[:, None, None]
    std = np.asarray(cfg["image_std"], np.float32)[:, None, None]
    pixel_values, grids = [], []
    for image in images:
        w, h = image.size
        if (w // p) * (h // p) > cfg["in_token_limit"]:
            scale = math.sqrt(cfg["in_token_limit"] / ((w // p) * (h // p)))
            image = image.resize((int(w * scale), int(h * scale)), Image.Resampling.BICUBIC)
        new_w, new_h = image.size
        if cfg["pad_input"]:
            pad_h = (kernel_h * p - new_h % (kernel_h * p)) % (kernel_h * p)
            pad_w = (kernel_w * p - new_w % (kernel_w * p)) % (kernel_w * p)
            image = _tv_pad(image, pad_w, pad_h)
        else:
            image = _tv_center_crop(image, new_h - new_h % p, new_w - new_w % p)
        w, h = image.size
        if w // p >= 512 or h // p >= 512:
            raise ValueError("Exceed pos emb")
        # to_tensor: uint8 HWC -> CHW float32 / 255; normalize: (x - mean) / std in float32.
        x = np.asarray(image.convert("RGB"), np.uint8).transpose(2, 0, 1).astype(np.float32)
        x = ((x / np.float32(255)) - mean) / std
        c, hh, ww = x.shape
        patches = x.reshape(c, hh // p, p, ww // p, p).transpose(1, 3, 0, 2, 4)
        pixel_values.append(patches.reshape(-1, c, p, p))
        grids.append((hh // p, ww // p))
    return {"pixel_values": np.concatenate(pixel_values), "image_grid_hws": np.array(grids)}


def kimi_vl_tokens(width: int, height: int, cfg: Mapping[str, Any]) -> int:
    """``KimiVLProcessor``'s ``<|media_pad|>`` count, as vLLM's size-only helper computes it."""
    p = cfg["patch_size"]
    kernel_h, kernel_w = cfg["merge_kernel_size"]
    limit = cfg["in_token_limit"]
    if (width // p) * (height // p) > limit:
        scale = math.sqrt(limit / ((width // p) * (height // p)))
        width, height = int(width * scale), int(height * scale)
    pad_h = (kernel_h * p - height % (kernel_h * p)) % (kernel_h * p)
    pad_w = (kernel_w * p - width % (kernel_w * p)) % (kernel_w * p)
    return ((height + pad_h) // (kernel_h * p)) * ((width + pad_w) // (kernel_w * p))


def _navit_resize_image(width: int, height: int, cfg: Mapping[str, Any]) -> dict[str, int]:
    p = cfg["patch_size"]
    side = cfg["patch_limit_on_one_side"]
    s1 = math.sqrt(cfg["in_patch_limit"] / (max(1.0, width // p) * max(1.0, height // p)))
    scale = min(1.0, s1, side * p / width, side * p / height)
    new_w, new_h = max(1, int(width * scale)), max(1, int(height * scale))
    new_w, new_h = min(new_w, side * p), min(new_h, side * p)
    factor = cfg["merge_kernel_size"] * p
    pad_h, pad_w = (factor - new_h % factor) % factor, (factor - new_w % factor) % factor
    tokens = ((new_h + pad_h) // factor) * ((new_w + pad_w) // factor)
    if cfg.get("fixed_output_tokens") is not None:
        tokens = cfg["fixed_output_tokens"]
    return {"new_w": new_w, "new_h": new_h, "pad_w": pad_w, "pad_h": pad_h, "tokens": tokens}


def kimi_k25(images: Sequence[Image.Image], cfg: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """``KimiK25VisionProcessor.preprocess`` of image medias, ``cfg`` its ``media_proc_cfg``."""
    p = cfg["patch_size"]
    pixel_values, grids = [], []
    for image in images:
        image = image.convert("RGB")
        size = _navit_resize_image(image.width, image.height, cfg)
        pixels = np.asarray(
            image.resize((size["new_w"], size["new_h"]), resample=Image.Resampling.BICUBIC)
        )
        pixels = np.pad(pixels, ((0, size["pad_h"]), (0, size["pad_w"]), (0, 0)))[None]
        x = (pixels / 255.0).astype(np.float32)
        x -= np.array(cfg["image_mean"])
        x *= 1.0 / np.array(cfg["image_std"])
        t, h, w, c = x.shape
        patches = x.reshape(t, h // p, p, w // p, p, c).transpose(0, 1, 3, 5, 2, 4)
        pixel_values.append(patches.reshape(-1, c, p, p))
        grids.append((t, h // p, w // p))
    return {"pixel_values": np.concatenate(pixel_values), "grid_thws": np.array(grids)}


def kimi_k25_tokens(width: int, height: int, cfg: Mapping[str, Any]) -> int:
    """``KimiK25VisionProcessor.media_tokens_calculator`` for an image."""
    return _navit_resize_image(width, height, cfg)["tokens"]
