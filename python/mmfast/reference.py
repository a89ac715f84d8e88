"""Pure-NumPy twins of mmfast's native kernels, for parity tests.

Each function has the same signature, the same output (bit for bit) and raises the
same :class:`~mmfast.errors.MmfastError` for bad input as its twin in :mod:`mmfast`.
It needs only NumPy and :mod:`mmfast.errors`, not the compiled core, so another
implementation (a Go or Rust gateway, say) can import it to run cross-language
parity tests. It is written for clarity, not speed.

The arithmetic is transformers' PIL backend: ``rescale`` multiplies in float64 and
rounds to float32, then ``normalize`` subtracts and divides in float32 by the mean
and std rounded to float32.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError

__all__ = [
    "deinterleave_rgb_to_planes",
    "deserialize_pixel_values",
    "normalize_uint8",
    "pad_and_normalize_to_tensor",
    "serialize_pixel_values",
]


def _describe(obj: object) -> str:
    if isinstance(obj, np.ndarray):
        return f"an array of dtype {obj.dtype} with shape {obj.shape}"
    return type(obj).__qualname__


def _check_image(image: object) -> NDArray[np.uint8]:
    expected = "a numpy.ndarray of dtype uint8 and shape (height, width, 3)"
    if not (isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.ndim == 3):
        raise MmfastError(f"image: expected {expected}, got {_describe(image)}")
    if image.shape[2] != 3 or image.size == 0:
        raise MmfastError(f"image: expected {expected}, non-empty, got {_describe(image)}")
    return image


def _channel_values(arg: str, values: Sequence[float]) -> NDArray[np.float32]:
    try:
        as_f64 = [float(v) for v in values]
    except (TypeError, ValueError):
        raise MmfastError(
            f"{arg}: expected a sequence of 3 floats (one per RGB channel), got {values!r}"
        ) from None
    if len(as_f64) != 3:
        raise MmfastError(
            f"{arg}: expected 3 values (one per RGB channel), got {len(as_f64)} values"
        )
    with np.errstate(over="ignore"):
        as_f32 = np.array(as_f64, dtype=np.float32)
    return as_f32


def _normalized(
    image: NDArray[np.uint8],
    mean: Sequence[float],
    std: Sequence[float],
    rescale_factor: float,
) -> NDArray[np.float32]:
    """(3, H, W) float32: transformers' rescale then normalize, channels first."""
    m = _channel_values("mean", mean)
    s = _channel_values("std", std)
    if isinstance(rescale_factor, (str, bytes)) or not hasattr(rescale_factor, "__float__"):
        raise MmfastError(f"rescale_factor: expected a float, got {rescale_factor!r}")
    if not math.isfinite(rescale_factor):
        raise MmfastError(f"rescale_factor: expected a finite float, got {rescale_factor}")
    if not np.isfinite(m).all():
        raise MmfastError(f"mean: expected finite float32 values, got {list(mean)}")
    if not (np.isfinite(s).all() and (s != 0).all()):
        raise MmfastError(f"std: expected finite, non-zero float32 values, got {list(std)}")
    rescaled = (image.astype(np.float64) * rescale_factor).astype(np.float32)
    planes: NDArray[np.float32] = ((rescaled - m) / s).transpose(2, 0, 1)
    return planes


def _checked_shape(arg: str, dims: tuple[int, ...]) -> tuple[int, ...]:
    """``dims``, refused as the core refuses them: the product of the non-zero sides (and its
    float32 bytes) must fit in ``isize``, as numpy needs for any shape."""
    extent = math.prod(d for d in dims if d)
    for what, size in (("element count", extent), ("byte size", 4 * extent)):
        if size >= 2**63:
            raise MmfastError(
                f"{arg}: the {what} of shape {list(dims)} overflows the address space"
            )
    return dims


def deinterleave_rgb_to_planes(
    image: NDArray[np.uint8],
    mean: Sequence[float] = (0.0, 0.0, 0.0),
    std: Sequence[float] = (1.0, 1.0, 1.0),
    rescale_factor: float = 1 / 255,
) -> NDArray[np.float32]:
    """HWC uint8 RGB (H, W, 3) -> normalised CHW float32 (3, H, W)."""
    return np.ascontiguousarray(_normalized(_check_image(image), mean, std, rescale_factor))


def pad_and_normalize_to_tensor(
    image: NDArray[np.uint8],
    canvas_size: tuple[int, int],
    mean: Sequence[float] = (0.0, 0.0, 0.0),
    std: Sequence[float] = (1.0, 1.0, 1.0),
    rescale_factor: float = 1 / 255,
) -> NDArray[np.float32]:
    """HWC uint8 RGB -> CHW float32 of ``canvas_size`` (height, width); image top-left.

    The rest of the canvas is the normalised value of black (pixel value 0).
    """
    image = _check_image(image)
    h, w = image.shape[:2]
    try:
        ch, cw = (operator.index(v) for v in canvas_size)
    except (TypeError, ValueError):
        raise MmfastError(
            f"canvas_size: expected a (height, width) pair of non-negative integers, "
            f"got {canvas_size!r}"
        ) from None
    if ch < h or cw < w:
        raise MmfastError(
            f"canvas_size: expected at least the image size ({h}, {w}), got {(ch, cw)}"
        )
    black = _normalized(np.zeros((1, 1, 3), np.uint8), mean, std, rescale_factor)
    out = np.empty(_checked_shape("canvas_size", (3, ch, cw)), np.float32)
    out[...] = black
    out[:, :h, :w] = _normalized(image, mean, std, rescale_factor)
    return out


def serialize_pixel_values(tensor: NDArray[np.float32]) -> bytes:
    """float32 array -> C-order little-endian bytes."""
    if not (isinstance(tensor, np.ndarray) and tensor.dtype == np.float32):
        raise MmfastError(
            f"tensor: expected a numpy.ndarray of dtype float32, got {_describe(tensor)}"
        )
    return np.ascontiguousarray(tensor, dtype="<f4").tobytes()


def deserialize_pixel_values(data: bytes, shape: Sequence[int]) -> NDArray[np.float32]:
    """Little-endian float32 bytes -> a new, writable float32 array of ``shape``."""
    if not isinstance(data, bytes):
        raise MmfastError(f"data: expected bytes, got {_describe(data)}")
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise MmfastError(f"shape: expected a sequence of non-negative integers, got {shape!r}")
    count = math.prod(_checked_shape("shape", dims))
    if 4 * count != len(data):
        raise MmfastError(
            f"data: expected {4 * count} bytes for shape {list(dims)} (4 per float32), "
            f"got {len(data)} bytes"
        )
    return np.frombuffer(data, dtype="<f4").astype(np.float32).reshape(dims)


def normalize_uint8(
    pixel_values: NDArray[np.uint8],
    pixel_lut: NDArray[np.float32],
    pixel_rows_mask: NDArray[np.bool_] | None = None,
    *,
    channels_last: bool = False,
) -> NDArray[np.float32]:
    """The float32 ``pixel_values`` of a processor call, from its ``dtype="uint8"`` output.

    Each byte goes through its channel's row of ``pixel_lut`` (3, 256), which holds the model's
    own rescale/normalise arithmetic for every byte value; rows of a zero-padded batch that
    ``pixel_rows_mask`` marks False are 0.0, as HF pads them. The channel of a byte is its
    axis -3 (``(..., 3, height, width)`` layouts), or, for 2-D patch rows ``(N, 3 * K)``, the
    third of the row it lies in; with ``channels_last`` (the processor config's: channel-last
    patch rows, (y, x, c), as Gemma 4's, SigLIP 2's, LFM2-VL's, Molmo2's and Cosmos3 Edge's)
    its index along the last axis modulo 3. A GPU does the same with one gather. DeepSeek-VL 7B's
    ``pixel_lut`` is (2, 3, 256): its first table for ``pixel_values``, its second for
    ``high_res_pixel_values``.
    """
    x = np.asarray(pixel_values)
    lut = np.asarray(pixel_lut, np.float32)
    if x.dtype != np.uint8 or lut.shape != (3, 256):
        raise MmfastError(
            "pixel_values, pixel_lut: expected uint8 pixels and a (3, 256) table, got "
            f"{_describe(x)} and {_describe(lut)}"
        )
    if channels_last:
        out = lut[np.arange(x.shape[-1]) % 3, x]
    elif x.ndim == 2:
        out = lut[np.arange(3)[None, :, None], x.reshape(x.shape[0], 3, -1)].reshape(x.shape)
    else:
        out = lut[np.arange(3)[:, None, None], x]
    if pixel_rows_mask is not None:
        out[~np.asarray(pixel_rows_mask, bool)] = 0.0
    return np.ascontiguousarray(out, dtype=np.float32)
