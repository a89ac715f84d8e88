"""Cosmos3 Edge: ``Cosmos3EdgeImageProcessor`` (transformers 5.24).

GLM-4.1V's ``smart_resize`` (a still image counts ``temporal_patch_size`` frames, one by
default; images smaller than one merge unit are scaled up first) at factor ``patch_size *
merge_size`` = 32 between 256² and 4096² pixels, mean/std 0.5, then patch rows in merge-group
order like Qwen's, but each row channel-last: (y, x, channel, time) where Qwen's is
(channel, time, y, x). mmfast writes them as channel-last patches of each merge block. Its
video class samples and sizes clips like Qwen3-VL's and writes each frame the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import ClassVar

from mmfast.errors import MmfastError, UnsupportedModelError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    HALF,
    HwcPatches,
    ImagePlan,
    Resize,
    View,
    check_image_size,
)
from mmfast.models.config import Fields, Source
from mmfast.models.geometry import CropBox
from mmfast.models.glm4v import Glm4vConfig
from mmfast.models.qwen2_vl import QWEN_VIDEO_IGNORES, QwenVideoPlan, patch_fields, video_fields
from mmfast.models.qwen3_vl import Qwen3VLVideoConfig

__all__ = ["Cosmos3EdgeConfig", "Cosmos3EdgeVideoConfig", "merge_blocks"]


def merge_blocks(height: int, width: int, patch_size: int, merge_size: int) -> tuple[CropBox, ...]:
    """The ``merge_size`` x ``merge_size`` patch blocks of a height x width image, row by row:
    cut into patches in raster order each, they give the merge-group order of Qwen-like
    ``patchify`` (block by block, then the block's patches row by row)."""
    side = patch_size * merge_size
    return tuple(
        CropBox(top, left, side, side)
        for top in range(0, height // side * side, side)
        for left in range(0, width // side * side, side)
    )


@dataclass(frozen=True)
class Cosmos3EdgeConfig(Glm4vConfig):
    """Settings of ``Cosmos3EdgeImageProcessor``.

    ``num_image_tokens`` is the count of ``<|image_pad|>`` tokens ``Cosmos3EdgeProcessor``
    inserts: ``image_grid_thw.prod() // merge_size**2``.
    """

    # Its patch rows are (y, x, channel), images and videos alike.
    channels_last: ClassVar[bool] = True

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Cosmos3EdgeImageProcessor._preprocess``: Qwen-like geometry (GLM's
        resize), each merge block's patches written channel-last (``patchify``'s permute to
        (block, patch, y, x, channel))."""
        plan = super().plan(height, width)
        out = HwcPatches(
            self.patch_size,
            merge_blocks(*plan.resize_size, self.patch_size, self.merge_size),
        )
        return replace(plan, views=tuple(replace(view, out=out) for view in plan.views))


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> Cosmos3EdgeConfig:
    """Mirrors ``Cosmos3EdgeImageProcessor``'s class defaults (no ``min_pixels`` spelling).

    With ``temporal_patch_size`` above 1 each value of a row repeats that many times in a
    row ((y, x, channel, time) with a still frame), which the engine has no layout for:
    :class:`UnsupportedModelError` (``mmfast.hf`` then runs transformers' code)."""
    fields = patch_fields(
        cfg,
        size={"shortest_edge": 256 * 256, "longest_edge": 4096 * 4096},
        legacy_pixels=False,
        resample=BICUBIC,
        mean=HALF,
        std=HALF,
        temporal_patch_size=1,
    )
    fields["patch_size"] = cfg.positive_int("patch_size", 16)
    if fields["temporal_patch_size"] != 1:
        raise UnsupportedModelError(
            f"{processor_type}: temporal_patch_size={fields['temporal_patch_size']}: each patch "
            "row would be (y, x, channel, time) with every value repeated per time slot, a "
            "layout mmfast's engine does not write; only temporal_patch_size=1 (the class "
            "default) is supported"
        )
    return Cosmos3EdgeConfig(
        model_id=source.model_id,
        model_type=registry.model_type_of(source.preprocessor, source.model_type),
        image_processor_type=processor_type,
        **fields,
    )


registry.register(
    registry.Family(
        name="cosmos3_edge",
        processor_types=("Cosmos3EdgeImageProcessor",),
        model_types={"cosmos3_edge": "Cosmos3EdgeImageProcessor"},
        build=_build,
        kwargs=frozenset({"patch_size", "temporal_patch_size", "merge_size"}),
        processor_classes={"Cosmos3EdgeProcessor": "cosmos3_edge"},
        hf_pil="cosmos3_edge.image_processing_pil_cosmos3_edge.Cosmos3EdgeImageProcessorPil",
        hf_torchvision="cosmos3_edge.image_processing_cosmos3_edge.Cosmos3EdgeImageProcessor",
    )
)

# nvidia/Cosmos3-Edge: a project's notes on the released snapshot say its
# preprocessor_config.json names Cosmos3EdgeImageProcessor and Cosmos3EdgeProcessor; no copy of
# the values was found. These are the class defaults (256² to 4096² pixels, patch 16, merge 2,
# one frame, mean/std 0.5), which a public port of the checkpoint's earlier processor shares
# (65536 / 16777216 pixels, patch 16, merge 2). Unconfirmed.
registry.register_builtin(
    "nvidia/Cosmos3-Edge",
    "cosmos3_edge",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_processor_type": "Cosmos3EdgeImageProcessor",
        "image_std": list(HALF),
        "merge_size": 2,
        "patch_size": 16,
        "processor_class": "Cosmos3EdgeProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"longest_edge": 4096 * 4096, "shortest_edge": 256 * 256},
        "temporal_patch_size": 1,
    },
    # Its video_preprocessor_config.json (named by a public export script): the class defaults
    # (64² to 24 Mi pixels over the clip, 2 frames a second, 4 to 768 frames). Unconfirmed.
    video={
        "do_sample_frames": True,
        "fps": 2,
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "max_frames": 768,
        "merge_size": 2,
        "min_frames": 4,
        "patch_size": 16,
        "resample": BICUBIC,
        "size": {"longest_edge": 24 * 1024 * 1024, "shortest_edge": 64 * 64},
        "temporal_patch_size": 1,
        "video_processor_type": "Cosmos3EdgeVideoProcessor",
    },
)


# --------------------------------------------------------------------------------------------
# Video: Cosmos3EdgeVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


class Cosmos3EdgeVideoConfig(Qwen3VLVideoConfig):
    """Settings of ``Cosmos3EdgeVideoProcessor``: Qwen3-VL's sampling (``fps`` frames a
    second with ``np.linspace``) and clip-wide GLM ``smart_resize``, one frame per patch row
    (``temporal_patch_size`` must be 1), each frame's merge blocks written channel-last.

    ``num_video_tokens`` is the count of ``<|video_pad|>`` tokens ``Cosmos3EdgeProcessor``
    inserts: ``video_grid_thw.prod() // merge_size**2``.
    """

    def plan(self, frames: int, height: int, width: int) -> QwenVideoPlan:
        """Mirrors ``Cosmos3EdgeVideoProcessor._preprocess`` for one clip: every frame
        resized alike (torchvision), normalised, and its merge blocks' patches written
        (y, x, channel), frame after frame."""
        check_image_size(height, width)
        size = self.resized_size(frames, height, width) if self.do_resize else (height, width)
        unit = self.patch_size * self.merge_size
        if size[0] % unit or size[1] % unit:
            raise MmfastError(
                f"video size: with do_resize=False both sides must be multiples of {unit}, "
                f"got {height}x{width}"
            )
        resize = Resize(size, self.resample, "torch") if self.do_resize else None
        out = HwcPatches(self.patch_size, merge_blocks(*size, self.patch_size, self.merge_size))
        grid_h, grid_w = size[0] // self.patch_size, size[1] // self.patch_size
        rows = frames * grid_h * grid_w
        return QwenVideoPlan(
            height=height,
            width=width,
            frames=frames,
            views=tuple(((f,), View(resize=resize, out=out)) for f in range(frames)),
            output_shapes=MappingProxyType({"pixel_values_videos": (rows, 3 * self.patch_size**2)}),
            num_video_tokens=rows // self.merge_size**2,
            grid=(frames, grid_h, grid_w),
        )


def _build_video(model_id: str | None, cfg: Fields) -> Cosmos3EdgeVideoConfig:
    """Mirrors ``Cosmos3EdgeVideoProcessor.__init__``: its class defaults, and its
    ``ValueError`` for a ``temporal_patch_size`` other than 1. It has no per-frame cap."""
    fields = video_fields(
        cfg,
        size={"shortest_edge": 64 * 64, "longest_edge": 24 * 1024 * 1024},
        legacy_pixels=False,
        mean=HALF,
        std=HALF,
        patch_size=16,
        do_sample_frames=True,
        fps=2.0,
        max_video_tokens=768,
    )
    fields["temporal_patch_size"] = cfg.positive_int("temporal_patch_size", 1)
    if fields["temporal_patch_size"] != 1:
        raise cfg.error(
            "temporal_patch_size",
            "1 (Cosmos3 Edge only supports temporal_patch_size=1)",
            fields["temporal_patch_size"],
        )
    fields["cap_pixels_per_frame"] = False
    return Cosmos3EdgeVideoConfig(
        model_id=model_id, video_processor_type="Cosmos3EdgeVideoProcessor", **fields
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="Cosmos3EdgeVideoProcessor",
        model_types=("cosmos3_edge",),
        build=_build_video,
        kwargs=frozenset({"patch_size", "temporal_patch_size", "merge_size"}),
        ignores=QWEN_VIDEO_IGNORES,
    )
)
