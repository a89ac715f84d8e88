"""transformers' ``BaseVideoProcessor._preprocess`` (transformers 5.24; torchvision only): what
the video processors that keep the base pipeline do (InternVL, LLaVA-OneVision, LLaVA-NeXT-Video).

Every frame of a clip is resized by its size dict (torchvision's uint8 resize), centre cropped
(zero-padded where the crop is larger), rescaled and normalised; a clip is one (T, 3, H, W)
tensor, and transformers returns the list of them, stacked for ``return_tensors`` "np" and
"pt" (which clips of different shapes cannot be).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Final

import numpy as np

from mmfast.errors import MmfastError
from mmfast.models.base import (
    RGB,
    Resize,
    VideoConfig,
    VideoPlan,
    View,
    check_image_size,
)
from mmfast.models.config import Fields
from mmfast.models.geometry import (
    CropBox,
    center_crop_box,
    get_image_size_for_max_height_width,
    get_resize_output_image_size,
    get_size_with_aspect_ratio,
)

__all__ = [
    "FRAMES_IGNORES",
    "MAX_FPS",
    "MAX_FRAMES",
    "FramesVideoConfig",
    "float32_arange",
    "frames_fields",
    "instance_sampling",
    "torch_resized_size",
]

# BaseVideoProcessor._preprocess never reads these.
FRAMES_IGNORES: Final = frozenset({"do_pad", "pad_size"})

# The most frames a clip may have, and the highest sampling rate (frames a second) a config or
# a call may ask: a rate past the frames a clip can have samples every frame, and samplers
# count or list ``duration * fps`` frames.
MAX_FRAMES: Final = 65536
MAX_FPS: Final = float(MAX_FRAMES)


def torch_resized_size(height: int, width: int, size: Mapping[str, int]) -> tuple[int, int]:
    """``TorchvisionBackend.resize``'s target for a size dict: ``shortest_edge`` with
    ``longest_edge`` (:func:`get_size_with_aspect_ratio`), ``shortest_edge`` alone (the other
    side scaled and truncated), ``max_height``/``max_width``, or ``height``/``width``."""
    if size.get("shortest_edge") and size.get("longest_edge"):
        return get_size_with_aspect_ratio(
            height, width, size["shortest_edge"], size["longest_edge"]
        )
    if size.get("shortest_edge"):
        return get_resize_output_image_size(height, width, size["shortest_edge"])
    if size.get("max_height") and size.get("max_width"):
        return get_image_size_for_max_height_width(
            height, width, size["max_height"], size["max_width"]
        )
    if size.get("height") and size.get("width"):
        return size["height"], size["width"]
    raise MmfastError(
        "size: expected height and width, max_height and max_width, or shortest_edge "
        f"(with or without longest_edge), got {dict(size)}"
    )


@dataclass(frozen=True)
class FramesVideoConfig(VideoConfig):
    """Settings of a video processor running ``BaseVideoProcessor._preprocess``.

    ``num_video_tokens`` is :meth:`tokens_per_frame` per sampled frame, what the model's
    processor counts (each family sets ``frame_tokens`` from its processor's settings).
    """

    model_id: str | None
    video_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    size: Mapping[str, int] | None
    resample: int
    do_center_crop: bool
    crop_size: tuple[int, int] | None
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    do_sample_frames: bool
    fps: float | None
    num_frames: int | None
    frame_tokens: int

    # One (T, 3, H, W) array per clip; a list of them with return_tensors=None.
    batch_layout: ClassVar[str] = "clips"
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({"pixel_values_videos": "clips"})

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``BaseVideoProcessor.sample_frames``: both ``fps`` and ``num_frames`` is
        transformers' ``ValueError``; a None is then the config's, and transformers'
        ``default_sample_indices_fn`` picks the frames."""
        if num_frames is not None and fps is not None:
            raise MmfastError(
                f"fps, num_frames: expected one of them, got fps={fps} and num_frames="
                f"{num_frames} (a call leaving one out takes the config's; pass it as None)"
            )
        fps, num_frames = instance_sampling(self, fps, num_frames)
        # Imported here: mmfast.video imports mmfast.models, which imports this module
        # (a module-level import fails when mmfast.video is the first import).
        from mmfast.video import default_sample_indices

        indices: list[int] = default_sample_indices(metadata, num_frames, fps).tolist()
        return indices

    def frame_size(self, height: int, width: int) -> tuple[int, int]:
        """A frame's size after the resize."""
        if not self.do_resize:
            return height, width
        assert self.size is not None  # frames_fields
        return torch_resized_size(height, width, self.size)

    def window(self, height: int, width: int) -> CropBox:
        """The window each (resized) frame writes: the centre crop, or the whole frame."""
        if not self.do_center_crop:
            return CropBox(0, 0, height, width)
        assert self.crop_size is not None  # frames_fields
        return center_crop_box(height, width, *self.crop_size, backend="torchvision")

    def plan(self, frames: int, height: int, width: int) -> VideoPlan:
        """Every frame resized (none when the size is the frame's), centre cropped,
        normalised into its (3, H, W) slot of the clip's (T, 3, H, W) tensor."""
        check_image_size(height, width)
        size = self.frame_size(height, width)
        if min(size) <= 0:
            raise MmfastError(f"video size: {height}x{width} frames resize to {size[0]}x{size[1]}")
        box = self.window(*size)
        resize = Resize(size, self.resample, "torch") if size != (height, width) else None
        view = View(resize=resize, out=(box,))
        shape = (frames, 3, box.height, box.width)
        return VideoPlan(
            height=height,
            width=width,
            frames=frames,
            views=tuple(((t,), view) for t in range(frames)),
            output_shapes=MappingProxyType({self.output_key: shape}),
            num_video_tokens=frames * self.tokens_per_frame(box.height, box.width),
        )

    def tokens_per_frame(self, height: int, width: int) -> int:
        """The model processor's tokens for a processed frame of ``height`` x ``width``: by
        default ``frame_tokens`` whatever its size."""
        return self.frame_tokens


def frames_fields(
    cfg: Fields,
    *,
    size: Mapping[str, int] | None,
    resample: int,
    mean: RGB,
    std: RGB,
    default_to_square: bool,
    crop_size: Mapping[str, int] | None = None,
    do_center_crop: bool = False,
) -> dict[str, Any]:
    """The :class:`FramesVideoConfig` fields read by ``BaseVideoProcessor`` (all but the ids
    and ``frame_tokens``), given the class defaults. A None ``do_center_crop`` is off, as
    ``_preprocess`` reads it."""
    default_to_square = cfg.flag("default_to_square", default_to_square)
    # A file's null is stored over the class default (ImageProcessingMixin sets it first).
    size_value = cfg.raw("size") if cfg.given("size") else size
    resolved = None
    if size_value is not None:
        resolved = cfg.size_dict("size", size_value, default_to_square)
    do_resize = cfg.flag("do_resize", True)
    if do_resize and resolved is None:
        raise cfg.error("size", "a size dict (do_resize is on)", None)
    crop_value = cfg.raw("crop_size") if cfg.given("crop_size") else crop_size
    crop = None
    if crop_value is not None:
        crop_dict = cfg.size_dict("crop_size", crop_value, True)
        if set(crop_dict) != {"height", "width"}:
            raise cfg.error("crop_size", "a {height, width} size", crop_dict)
        crop = (crop_dict["height"], crop_dict["width"])
    center = cfg.flag("do_center_crop", do_center_crop)
    if center and crop is None:
        raise cfg.error("crop_size", "a {height, width} size (do_center_crop is on)", None)
    resample_code = cfg.torch_resample(resample)
    norm = cfg.normalization(mean, std)
    num_frames = cfg.raw("num_frames")
    fps = cfg.raw("fps")
    return {
        "do_convert_rgb": cfg.convert_rgb(),
        "do_resize": do_resize,
        "size": None if resolved is None else MappingProxyType(resolved),
        "resample": resample_code,
        "do_center_crop": center,
        "crop_size": crop,
        **norm.fields(),
        "do_sample_frames": cfg.flag("do_sample_frames", False),
        "fps": None if fps is None else positive_number(cfg, "fps"),
        "num_frames": None if num_frames is None else cfg.positive_int("num_frames", 1),
    }


def instance_sampling(
    config: Any, fps: float | None, num_frames: int | None
) -> tuple[float | None, int | None]:
    """``sample_frames``' ``fps if fps is not None else self.fps`` (and the same for
    ``num_frames``)."""
    return (config.fps if fps is None else fps), (
        config.num_frames if num_frames is None else num_frames
    )


def positive_number(cfg: Fields, name: str, default: float = 1.0) -> float:
    """A finite number above 0 (``validate_typed_dict`` refuses others for fps), and at most
    :data:`MAX_FPS`."""
    value = cfg.number(name, default)
    if not 0 < value <= MAX_FPS:
        raise cfg.error(name, f"a number > 0 and at most {MAX_FRAMES}", value)
    return value


def float32_arange(start: float, end: float, step: float) -> list[int]:
    """``torch.arange(start, end, step).int()`` with Python floats: ``ceil((end - start) /
    step)`` float32 values ``start + i * step`` (computed in double, then rounded to float32),
    each truncated toward zero."""
    length = math.ceil((end - start) / step)
    values = (start + np.arange(max(length, 0)) * step).astype(np.float32)
    return [int(v) for v in values]
