from collections.abc import Sequence
from typing import final

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "PooledOutput",
    "advise_huge_pages",
    "area_mask",
    "deinterleave_rgb_to_planes",
    "deserialize_pixel_values",
    "follow_pillow",
    "opaque",
    "pad_and_normalize_to_tensor",
    "png_pixels",
    "resize",
    "resize_float",
    "rgb_composited",
    "rgb_from_arrow",
    "rgb_from_palette",
    "rgb_from_pillow",
    "rgb_from_png",
    "run_batch",
    "serialize_pixel_values",
    "set_buffer_pool",
    "warmup",
]

@final
class PooledOutput:
    """The ``base`` of a large output array: its memory, given back to mmfast's pool of
    output buffers once the array is freed."""

def advise_huge_pages(image: tuple[object, tuple[int, int], object]) -> int: ...
def area_mask(shape: Sequence[int], areas: Sequence[tuple[int, int]]) -> NDArray[np.int64]: ...
def deinterleave_rgb_to_planes(
    image: NDArray[np.uint8],
    mean: Sequence[float] = (0.0, 0.0, 0.0),
    std: Sequence[float] = (1.0, 1.0, 1.0),
    rescale_factor: float = ...,
) -> NDArray[np.float32]: ...
def pad_and_normalize_to_tensor(
    image: NDArray[np.uint8],
    canvas_size: tuple[int, int],
    mean: Sequence[float] = (0.0, 0.0, 0.0),
    std: Sequence[float] = (1.0, 1.0, 1.0),
    rescale_factor: float = ...,
) -> NDArray[np.float32]: ...
def serialize_pixel_values(tensor: NDArray[np.float32]) -> bytes: ...
def deserialize_pixel_values(data: bytes, shape: Sequence[int]) -> NDArray[np.float32]: ...
def rgb_from_arrow(
    capsules: tuple[object, object], size: tuple[int, int], orientation: int
) -> NDArray[np.uint8]: ...
def opaque(image: tuple[object, tuple[int, int], object]) -> bool: ...
def rgb_composited(
    image: tuple[object, tuple[int, int], object] | NDArray[np.uint8],
    table: NDArray[np.uint8],
    orientation: int,
) -> NDArray[np.uint8]: ...
def rgb_from_palette(
    image: tuple[object, tuple[int, int], object],
    palette: NDArray[np.uint8],
    orientation: int,
) -> NDArray[np.uint8]: ...
def rgb_from_pillow(
    image: tuple[object, tuple[int, int], object], orientation: int = 1
) -> NDArray[np.uint8]: ...
def png_pixels(data: bytes, max_pixels: int) -> NDArray[np.uint8] | None: ...
def rgb_from_png(
    data: bytes, orientation: int, max_pixels: int, table: NDArray[np.uint8] | None = None
) -> NDArray[np.uint8] | None: ...
def resize(
    image: NDArray[np.uint8],
    size: tuple[int, int],
    resample: str | int = "bicubic",
    kernel: str = "pillow",
) -> NDArray[np.uint8]: ...
def resize_float(
    planes: NDArray[np.float32],
    size: tuple[int, int],
    resample: int,
    one_thread: bool = False,
) -> NDArray[np.float32]: ...
def run_batch(
    images: Sequence[
        NDArray[np.uint8]
        | tuple[object, object, tuple[int, int]]
        | tuple[object, tuple[int, int], object]
    ],
    jobs: Sequence[
        tuple[
            int,
            int | None,
            tuple[int, int, int, int] | None,
            tuple[str, int, tuple[int, int]] | None,
            tuple[tuple[int, int], tuple[int, int], tuple[int, int, int]] | None,
            tuple[str, object] | None,
            int,
            Sequence[int],
            int,
        ]
    ],
    tables: NDArray[np.float32] | NDArray[np.uint16] | NDArray[np.uint8],
    shape: Sequence[int],
    threads: int,
    pool_threads: int,
) -> NDArray[np.float32] | NDArray[np.uint16] | NDArray[np.uint8]: ...
def follow_pillow(major: int) -> None: ...
def set_buffer_pool(megabytes: int) -> None: ...
def warmup(megabytes: int) -> None: ...
