"""ERNIE-4.5-VL: ``Ernie4_5_VLMoeImageProcessor`` (transformers 5.24).

Qwen2-VL's pipeline line for line (its :func:`~mmfast.models.qwen2_vl.smart_resize` at factor
``patch_size * merge_size``, patch rows grouped by merge unit) with one temporal frame and a
larger pixel budget. Its ``__init__`` has no ``min_pixels``/``max_pixels`` spelling. The
deprecated ``Ernie4_5_VL_MoeImageProcessor`` (and ``...Pil``) subclasses, which only warn, are
the same class under another name: checkpoints converted before the rename name them.

Its video processor, ``Ernie4_5_VLMoeVideoProcessor``, resizes every frame by that
``smart_resize`` (the clip's length plays no part), repeats the last frame of an odd-length
clip, and writes Qwen-VL rows one frame per temporal patch (``grid_t`` is the frame count,
though ``temporal_patch_size`` must be 2). It samples with ``torch.arange`` steps in float32,
all frames by default (16 to 180). By default it first draws each frame's timestamp on it in
black with a white outline, with the TrueType font the checkpoint ships (``font``, fetched from
the hub): glyphs rasterised by FreeType and blended by Pillow, which the pixel engine does not
compute. mmfast refuses ``draw_on_frames=True`` (:class:`UnsupportedModelError` naming it) and
computes ``draw_on_frames=False``; ``mmfast.hf`` computes either, as transformers draws the
timestamps before ``_preprocess``, which mmfast computes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmfast.errors import MmfastError, UnsupportedModelError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RGB,
    Resize,
    VideoConfig,
    VideoPlan,
    check_image_size,
)
from mmfast.models.base_video import positive_number
from mmfast.models.config import Fields, Source
from mmfast.models.glm4v import GLM_VIDEO_IGNORES, patch_rows_plan, video_grid_thw
from mmfast.models.qwen2_vl import QwenVideoPlan, QwenVLConfig, patch_fields, smart_resize

__all__ = ["Ernie4_5_VLMoeConfig", "Ernie4_5_VLMoeVideoConfig", "torch_arange_indices"]


@dataclass(frozen=True)
class Ernie4_5_VLMoeConfig(QwenVLConfig):
    """Settings of ``Ernie4_5_VLMoeImageProcessor``.

    ``num_image_tokens`` is the count of ``<|IMAGE_PLACEHOLDER|>`` tokens
    ``Ernie4_5_VLMoeProcessor.replace_image_token`` inserts:
    ``image_grid_thw.prod() // merge_size**2``.
    """


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> Ernie4_5_VLMoeConfig:
    """Mirrors ``Ernie4_5_VLMoeImageProcessorPil``'s class defaults; its ``__init__`` passes
    the kwargs on unchanged (no ``min_pixels`` spelling)."""
    return Ernie4_5_VLMoeConfig(
        model_id=source.model_id,
        model_type=registry.model_type_of(source.preprocessor, source.model_type),
        image_processor_type=processor_type,
        **patch_fields(
            cfg,
            size={"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 6177},
            legacy_pixels=False,
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            temporal_patch_size=1,
        ),
    )


_HF = "ernie4_5_vl_moe"
registry.register(
    registry.Family(
        name="ernie4_5_vl_moe",
        processor_types=("Ernie4_5_VLMoeImageProcessor", "Ernie4_5_VL_MoeImageProcessor"),
        model_types={"ernie4_5_vl_moe": "Ernie4_5_VLMoeImageProcessor"},
        build=_build,
        kwargs=frozenset({"patch_size", "temporal_patch_size", "merge_size"}),
        processor_classes={"Ernie4_5_VLMoeProcessor": "ernie4_5_vl_moe"},
        hf_pil=f"{_HF}.image_processing_pil_ernie4_5_vl_moe.Ernie4_5_VLMoeImageProcessorPil",
        hf_torchvision=f"{_HF}.image_processing_ernie4_5_vl_moe.Ernie4_5_VLMoeImageProcessor",
    )
)

# baidu/ERNIE-4.5-VL-28B-A3B-PT (the checkpoint transformers' ERNIE-VL configs name). No public
# copy of its transformers-format preprocessor file was found: transformers' own conversion
# script (convert_ernie4_5_vl_moe_to_hf.py) saves a default-constructed image processor, so the
# values below are the class defaults it writes (unconfirmed). The hub repository's original
# files are remote code.
registry.register_builtin(
    "baidu/ERNIE-4.5-VL-28B-A3B-PT",
    "ernie4_5_vl_moe",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_std": list(OPENAI_CLIP_STD),
        "merge_size": 2,
        "patch_size": 14,
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"shortest_edge": 3136, "longest_edge": 4842768},
        "temporal_patch_size": 1,
        "image_processor_type": "Ernie4_5_VLMoeImageProcessor",
        "processor_class": "Ernie4_5_VLMoeProcessor",
    },
    # The video processor the same script saves: Ernie4_5_VLMoeVideoProcessor's class
    # defaults with the font it copies from AntonV/ernie4_5_fonts (Roboto-Regular.ttf) beside
    # the file; draw_on_frames is on, which mmfast refuses (mmfast.hf computes it). Unconfirmed
    # as a file, like the image settings.
    video={
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "do_sample_frames": True,
        "draw_on_frames": True,
        "font": "Roboto-Regular.ttf",
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_std": list(OPENAI_CLIP_STD),
        "max_frames": 180,
        "merge_size": 2,
        "min_frames": 16,
        "patch_size": 14,
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"shortest_edge": 299 * 28 * 28, "longest_edge": 1196 * 28 * 28},
        "temporal_patch_size": 2,
        "video_processor_type": "Ernie4_5_VLMoeVideoProcessor",
    },
)


# --------------------------------------------------------------------------------------------
# Video: Ernie4_5_VLMoeVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


def torch_arange_indices(total: int, count: float) -> list[int]:
    """``torch.arange(0, total, total / count).int()``: ``ceil(total / step)`` values (in
    double), each ``i * step`` in double rounded to float32, then truncated. Its last index can
    reach ``total`` (a float32 just below a whole number rounds up to it): an
    :class:`MmfastError` here, where transformers fails to index the clip with it."""
    step = total / count
    length = math.ceil(total / step)
    indices = [int(v) for v in (np.arange(length) * step).astype(np.float32)]
    if indices and indices[-1] >= total:
        raise MmfastError(
            f"video: sampling {count} of a clip's {total} frames gives index {indices[-1]}, past "
            "its last frame (torch.arange's float32 rounding, as in transformers)"
        )
    return indices


@dataclass(frozen=True)
class Ernie4_5_VLMoeVideoConfig(VideoConfig):
    """Settings of ``Ernie4_5_VLMoeVideoProcessor``.

    ``min_pixels``/``max_pixels`` are ``size["shortest_edge"]``/``size["longest_edge"]``, one
    frame's pixel bounds. ``num_video_tokens`` is the count of ``<|VIDEO_PLACEHOLDER|>`` tokens
    ``Ernie4_5_VLMoeProcessor.replace_video_token`` inserts: ``video_grid_thw.prod() //
    (merge_size**2 * temporal_patch_size)``.
    """

    model_id: str | None
    video_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    min_pixels: int
    max_pixels: int
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    patch_size: int
    temporal_patch_size: int
    merge_size: int
    min_frames: int
    max_frames: int
    do_sample_frames: bool
    fps: float | None
    num_frames: int | None
    draw_on_frames: bool
    font: str | None

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``Ernie4_5_VLMoeVideoProcessor.sample_frames``: ``num_frames`` (from
        ``min_frames`` to ``max_frames``), else ``fps`` frames a second, else every frame, the
        count held to ``min_frames``..``max_frames`` and the clip's length; the indices are
        :func:`torch_arange_indices`. A call's ``num_frames`` replaces the config's ``fps``
        (transformers raises unless the call also passes ``fps=None``)."""
        fps, num_frames = self.sampling(fps, num_frames)
        total = int(metadata.total_num_frames)
        count: float
        if num_frames is not None:
            if not self.min_frames <= num_frames <= self.max_frames:
                raise MmfastError(
                    f"num_frames: expected {self.min_frames} to {self.max_frames}, got {num_frames}"
                )
            count = num_frames
        else:
            if fps is not None and metadata.fps is None:
                raise MmfastError(
                    "video_fps: sampling at fps frames a second needs the clip's frame rate"
                )
            count = total / metadata.fps * fps if fps is not None else total
            count = min(max(count, self.min_frames), self.max_frames, total)
        if count > total:
            raise MmfastError(
                f"num_frames: the clip has {total} frames, sampling asked for {count}"
            )
        return torch_arange_indices(total, count)

    def plan(self, frames: int, height: int, width: int) -> QwenVideoPlan:
        """Mirrors ``_prepare_input_videos`` (an odd-length clip's last frame repeated) and
        ``_preprocess`` for one clip: resize, rescale, normalise, patch rows one frame per
        temporal group. Raises :class:`UnsupportedModelError` with ``draw_on_frames``."""
        if self.draw_on_frames:
            raise UnsupportedModelError(
                "draw_on_frames: True draws each frame's timestamp with the checkpoint's "
                f"TrueType font ({self.font!r}, FreeType glyphs blended by Pillow), which mmfast "
                "does not compute; pass draw_on_frames=False (video_overrides), or use "
                "mmfast.hf, where transformers draws and mmfast computes the rest"
            )
        check_image_size(height, width)
        size = (height, width)
        if self.do_resize:
            factor = self.patch_size * self.merge_size
            size = smart_resize(height, width, factor, self.min_pixels, self.max_pixels)
        return patch_rows_plan(
            frames,
            height,
            width,
            size,
            resize=Resize(size, self.resample, "torch") if self.do_resize else None,
            pad=None,
            patch_size=self.patch_size,
            temporal_patch_size=1,
            merge_size=self.merge_size,
            token_divisor=self.merge_size**2 * self.temporal_patch_size,
            slots=frames + frames % 2,
        )

    def batch_outputs(self, plans: Sequence[VideoPlan]) -> dict[str, Any]:
        """``video_grid_thw`` (clips, 3) int64."""
        return video_grid_thw(plans)


def _build_video(model_id: str | None, cfg: Fields) -> Ernie4_5_VLMoeVideoConfig:
    """Mirrors ``Ernie4_5_VLMoeVideoProcessor.__init__``: ``temporal_patch_size`` must be 2 and
    ``size`` must hold both ``shortest_edge`` and ``longest_edge`` (HF's ``ValueError``s)."""
    temporal = cfg.raw("temporal_patch_size")
    if temporal is not None and (temporal != 2 or isinstance(temporal, bool)):
        raise cfg.error("temporal_patch_size", "2 (the only value ERNIE-4.5-VL takes)", temporal)
    fields = patch_fields(
        cfg,
        size={"shortest_edge": 299 * 28 * 28, "longest_edge": 1196 * 28 * 28},
        legacy_pixels=False,
        resample=BICUBIC,
        mean=OPENAI_CLIP_MEAN,
        std=OPENAI_CLIP_STD,
        temporal_patch_size=2,
    )
    if fields["min_pixels"] is None or fields["max_pixels"] is None:
        raise cfg.error("size", "shortest_edge and longest_edge", cfg.raw("size"))
    fields["resample"] = cfg.torch_resample(BICUBIC)
    num_frames, fps, font = cfg.raw("num_frames"), cfg.raw("fps"), cfg.raw("font")
    if font is not None and not isinstance(font, str):
        raise cfg.error("font", "a font file name or path", font)
    return Ernie4_5_VLMoeVideoConfig(
        model_id=model_id,
        video_processor_type="Ernie4_5_VLMoeVideoProcessor",
        **fields,
        min_frames=cfg.positive_int("min_frames", 16),
        max_frames=cfg.positive_int("max_frames", 180),
        do_sample_frames=cfg.flag("do_sample_frames", True),
        fps=None if fps is None else positive_number(cfg, "fps"),
        num_frames=None if num_frames is None else cfg.positive_int("num_frames", 1),
        draw_on_frames=cfg.flag("draw_on_frames", True),
        font=font if font is not None else "Roboto-Regular.ttf",
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="Ernie4_5_VLMoeVideoProcessor",
        model_types=("ernie4_5_vl_moe",),
        build=_build_video,
        kwargs=frozenset(
            {
                "patch_size",
                "temporal_patch_size",
                "merge_size",
                "min_frames",
                "max_frames",
                "draw_on_frames",
                "font",
            }
        ),
        # The font is read only to draw, before _preprocess; max_image_size is not a setting.
        ignores=(GLM_VIDEO_IGNORES - {"max_image_size"}) | {"font"},
        # transformers draws the timestamps in _prepare_input_videos: the clips mmfast.hf
        # receives carry them, and only _preprocess is left.
        prepared={"draw_on_frames": False},
    )
)
