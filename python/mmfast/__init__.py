"""mmfast: images to the exact tensors vision-language models expect.

Bit-for-bit the numbers transformers computes, from a Rust core that runs with the
GIL released. Shapes are ``(height, width)``; images are HWC uint8 RGB, tensors are
CHW float32.

The compiled core is imported on first use, so :mod:`mmfast.reference` (pure
NumPy) and :mod:`mmfast.errors` work without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mmfast.errors import (
    ImageDecodeError,
    ImageTooLargeError,
    MmfastError,
    UnsupportedModelError,
    VideoDecodeError,
)

if TYPE_CHECKING:
    from mmfast._native import (
        deinterleave_rgb_to_planes,
        deserialize_pixel_values,
        pad_and_normalize_to_tensor,
        serialize_pixel_values,
    )
    from mmfast.image import decode_image, image_size, resize
    from mmfast.models import supported_models
    from mmfast.processors import BatchFeature, ImageProcessor, set_buffer_pool, warmup
    from mmfast.video import VideoMetadata, load_video

__all__ = [
    "BatchFeature",
    "ImageDecodeError",
    "ImageProcessor",
    "ImageTooLargeError",
    "MmfastError",
    "UnsupportedModelError",
    "VideoDecodeError",
    "VideoMetadata",
    "decode_image",
    "deinterleave_rgb_to_planes",
    "deserialize_pixel_values",
    "image_size",
    "load_video",
    "pad_and_normalize_to_tensor",
    "resize",
    "serialize_pixel_values",
    "set_buffer_pool",
    "supported_models",
    "warmup",
]

# Public name -> the module that defines it, loaded on first access (PEP 562).
_LAZY = {
    "deinterleave_rgb_to_planes": "mmfast._native",
    "deserialize_pixel_values": "mmfast._native",
    "pad_and_normalize_to_tensor": "mmfast._native",
    "serialize_pixel_values": "mmfast._native",
    "decode_image": "mmfast.image",
    "image_size": "mmfast.image",
    "resize": "mmfast.image",
    "supported_models": "mmfast.models",
    "BatchFeature": "mmfast.processors",
    "ImageProcessor": "mmfast.processors",
    "set_buffer_pool": "mmfast.processors",
    "warmup": "mmfast.processors",
    "VideoMetadata": "mmfast.video",
    "load_video": "mmfast.video",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        # Looked up on first use: importlib.metadata is slow to import, and the .pth hook
        # imports this package at interpreter start.
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("mmfast")
        except PackageNotFoundError:  # a source tree on sys.path, not installed
            value = "unknown"
        globals()[name] = value
        return value
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mmfast' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
