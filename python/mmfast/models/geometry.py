"""Geometry shared by several families: HF's size-dict resizes and the centre-crop window.

Each function names the transformers function it mirrors and keeps its float rounding, which is
part of the result. Family-specific rules (Qwen's ``smart_resize``, Llama 4's canvases, ...)
live in the family's own module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CropBox",
    "center_crop_box",
    "get_image_size_for_max_height_width",
    "get_patch_output_size",
    "get_resize_output_image_size",
    "get_size_with_aspect_ratio",
    "select_best_resolution",
]


def get_resize_output_image_size(height: int, width: int, shortest_edge: int) -> tuple[int, int]:
    """Shortest side to ``shortest_edge``, the other side scaled and truncated with ``int()``.

    Mirrors ``transformers.image_transforms.get_resize_output_image_size`` with an int size,
    ``default_to_square=False`` and no ``max_size``: the call ``PilBackend.resize`` makes for a
    ``{"shortest_edge": n}`` size dict. A square image takes the width-is-short branch, as in HF.
    """
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = shortest_edge, int(shortest_edge * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def get_size_with_aspect_ratio(
    height: int, width: int, size: int, max_size: int | None = None
) -> tuple[int, int]:
    """Shortest side to ``size`` unless the longest would pass ``max_size``.

    Mirrors ``transformers.image_transforms.get_size_with_aspect_ratio``, used by
    ``PilBackend.resize`` for ``{"shortest_edge", "longest_edge"}`` size dicts; keeps its
    ``int(round(...))`` of the capped size and ``int()`` truncation of the other side.
    """
    raw_size = None
    if max_size is not None:
        min_original_size = float(min(height, width))
        max_original_size = float(max(height, width))
        if max_original_size / min_original_size * size > max_size:
            raw_size = max_size * min_original_size / max_original_size
            size = round(raw_size)

    if (height <= width and height == size) or (width <= height and width == size):
        return height, width
    if width < height:
        ow = size
        oh = int((raw_size if raw_size is not None else size) * height / width)
    else:
        oh = size
        ow = int((raw_size if raw_size is not None else size) * width / height)
    return oh, ow


def get_image_size_for_max_height_width(
    height: int, width: int, max_height: int, max_width: int
) -> tuple[int, int]:
    """Largest aspect-preserving size inside ``max_height`` x ``max_width`` (may upscale).

    Mirrors ``transformers.image_utils.get_image_size_for_max_height_width``.
    """
    min_scale = min(max_height / height, max_width / width)
    return int(height * min_scale), int(width * min_scale)


@dataclass(frozen=True)
class CropBox:
    """A crop window in the coordinates of the (resized) image it is cut from.

    ``top``/``left`` may be negative and the window may reach past the image: HF's numpy
    ``center_crop`` then zero-pads, so output pixel ``(y, x)`` is image pixel
    ``(top + y, left + x)`` when that lies inside the image and 0 (before rescaling) otherwise.
    """

    top: int
    left: int
    height: int
    width: int

    @property
    def bottom(self) -> int:
        """Exclusive bottom row."""
        return self.top + self.height

    @property
    def right(self) -> int:
        """Exclusive right column."""
        return self.left + self.width


def center_crop_box(
    height: int, width: int, crop_height: int, crop_width: int, backend: str = "pil"
) -> CropBox:
    """The window HF's ``backend`` class cuts from a height x width image by centre cropping.

    ``transformers.image_transforms.center_crop`` (PIL backend) takes
    ``top = (height - crop_height) // 2`` (floor division, so an odd excess leaves the extra
    row at the bottom); when the crop is larger than the image it pastes the image at
    ``ceil((crop - side) / 2)`` into a zero canvas and slices from 0: the same window,
    expressed here in image coordinates with a negative offset (``-ceil(x / 2) ==
    floor(-x / 2)``). ``TorchvisionBackend.center_crop`` pads the image at
    ``floor((crop - side) / 2)`` instead and crops at ``int((side - crop) / 2.0)``: the offset
    truncated toward zero.
    """
    if backend == "pil":
        return CropBox(
            top=(height - crop_height) // 2,
            left=(width - crop_width) // 2,
            height=crop_height,
            width=crop_width,
        )
    return CropBox(
        top=int((height - crop_height) / 2),
        left=int((width - crop_width) / 2),
        height=crop_height,
        width=crop_width,
    )


def select_best_resolution(
    original_size: tuple[int, int], possible_resolutions: Sequence[Sequence[int]]
) -> tuple[int, int]:
    """The (height, width) among ``possible_resolutions`` that keeps the most of the image and
    wastes the least canvas.

    Mirrors ``transformers.image_processing_utils.select_best_resolution``: the downscaled size
    truncates with ``int()``, and the first resolution wins ties.
    """
    original_height, original_width = original_size
    best_fit = (0, 0)
    max_effective_resolution = 0
    min_wasted_resolution = float("inf")
    for height, width in possible_resolutions:
        scale = min(width / original_width, height / original_height)
        downscaled_width = int(original_width * scale)
        downscaled_height = int(original_height * scale)
        effective_resolution = min(
            downscaled_width * downscaled_height, original_width * original_height
        )
        wasted_resolution = (width * height) - effective_resolution
        if effective_resolution > max_effective_resolution or (
            effective_resolution == max_effective_resolution
            and wasted_resolution < min_wasted_resolution
        ):
            max_effective_resolution = effective_resolution
            min_wasted_resolution = wasted_resolution
            best_fit = (height, width)
    return best_fit


def get_patch_output_size(
    height: int, width: int, target_resolution: tuple[int, int]
) -> tuple[int, int]:
    """The image's size fitted into ``target_resolution`` without distortion (``ceil``).

    Mirrors ``transformers.image_processing_utils.get_patch_output_size``.
    """
    target_height, target_width = target_resolution
    scale_w = target_width / width
    scale_h = target_height / height
    if scale_w < scale_h:
        return min(math.ceil(height * scale_w), target_height), target_width
    return target_height, min(math.ceil(width * scale_h), target_width)
