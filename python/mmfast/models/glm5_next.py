"""GLM-5.3-Flash: ``Glm5NextImageProcessor`` (transformers 5.24).

The pixel budget is a token budget (``min_image_tokens`` / ``max_image_tokens``, each token
``temporal_patch_size * factor**2`` pixels) and the canvas is sized by :func:`smart_resize`,
which aligns sides up to the factor and, over budget, binary-searches the tallest canvas that
fits. The image is then resized, keeping its aspect ratio, to fit inside that canvas (never
grown when it already holds the minimum budget) and zero-padded at the bottom and right to it
as uint8 before normalising: Qwen-VL patch rows of the padded canvas. The torchvision class's
factor is ``patch_size * merge_size * patch_expand_factor``, the PIL class's ``patch_size *
merge_size`` (the two agree at the default ``patch_expand_factor`` of 1). ``size`` is read and
checked but unused.

Its video processor, ``Glm5NextVideoProcessor``, runs the same arithmetic over a clip: the
budget counts the clip's frames (``smart_resize`` with ``num_frames``), every frame is resized
into the canvas and padded, and the frames go ``temporal_patch_size`` at a time into Qwen-VL
rows (the last repeated to fill the last group). It samples ``fps`` frames a second (2), taken
at each tick up to the clip's last whole second and fixed up with ``np.linspace`` to
``duration * fps`` frames (at most ``max_frames``), then GLM's repeat of the last index to an
even count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RGB,
    ImagePlan,
    ModelConfig,
    Pad,
    PatchGrid,
    Patchify,
    Resize,
    VideoConfig,
    VideoPlan,
    View,
    check_image_size,
    plan_constants,
    resizer,
)
from mmfast.models.base_video import positive_number
from mmfast.models.config import Fields, Source
from mmfast.models.glm4v import (
    GLM_VIDEO_IGNORES,
    glm_clip_duration,
    patch_rows_plan,
    tick_indices,
    unique_even,
    video_grid_thw,
)
from mmfast.models.qwen2_vl import QwenVideoPlan, grid_thw

__all__ = ["Glm5NextConfig", "Glm5NextVideoConfig", "content_size", "smart_resize"]


def smart_resize(
    num_frames: int,
    height: int,
    width: int,
    temporal_factor: int = 2,
    factor: int = 28,
    min_pixels: int = 16,
    max_pixels: int = 8000,
) -> tuple[int, int]:
    """The canvas a GLM-5 image is padded to (``min_pixels``/``max_pixels`` in tokens).

    Mirrors ``transformers.models.glm5_next.image_processing_glm5_next.smart_resize`` step for
    step: sides aligned up (``ceil``) to ``factor``; under the minimum, both scaled by
    ``sqrt(min / (num_frames * h * w))`` (``ceil``) and aligned; over the maximum, a binary
    search over content heights ``1..height`` with widths ``floor(width * h / height)``,
    keeping the tallest aligned canvas within budget. HF's ``ValueError`` for a budget below
    one aligned patch is raised as :class:`MmfastError`.
    """
    pixels_per_token = temporal_factor * factor**2
    min_pixels *= pixels_per_token
    max_pixels *= pixels_per_token

    def align(value: float) -> int:
        return math.ceil(value / factor) * factor

    def fit_within_budget(aligned_frames: int) -> tuple[int, int]:
        minimum_pixels = aligned_frames * factor**2
        if max_pixels < minimum_pixels:
            raise MmfastError(
                f"max_image_tokens: max_pixels={max_pixels} is too small; at least "
                f"{minimum_pixels} pixels are required for one aligned patch"
            )
        low, high = 1, height
        best_height, best_width = factor, factor
        while low <= high:
            content_height = (low + high) // 2
            content_width = max(1, math.floor(width * content_height / height))
            candidate_height = align(content_height)
            candidate_width = align(content_width)
            if aligned_frames * candidate_height * candidate_width <= max_pixels:
                best_height, best_width = candidate_height, candidate_width
                low = content_height + 1
            else:
                high = content_height - 1
        return best_height, best_width

    aligned_frames = max(temporal_factor, round(num_frames / temporal_factor) * temporal_factor)
    aligned_height = align(height)
    aligned_width = align(width)
    budget = aligned_frames * aligned_height * aligned_width
    if budget < min_pixels:
        scale = math.sqrt(min_pixels / (num_frames * height * width))
        aligned_height = align(max(1, math.ceil(height * scale)))
        aligned_width = align(max(1, math.ceil(width * scale)))
        budget = aligned_frames * aligned_height * aligned_width
    if budget > max_pixels:
        aligned_height, aligned_width = fit_within_budget(aligned_frames)
    return aligned_height, aligned_width


def content_size(
    height: int,
    width: int,
    target: tuple[int, int],
    temporal_factor: int,
    factor: int,
    min_image_tokens: int,
    num_frames: int | None = None,
) -> tuple[int, int]:
    """The size the image is resized to inside the ``target`` canvas.

    Mirrors ``Glm5NextImageProcessor.resize``: ``scale = min(th / h, tw / w)``, capped at 1
    when the image (a still image counting as ``temporal_factor`` frames; a clip's
    ``num_frames``, as ``Glm5NextVideoProcessor.resize`` counts them) already holds
    ``min_image_tokens`` tokens' pixels; each side ``floor(side * scale)``, at least 1 and at
    most the canvas side.
    """
    pixels_per_token = temporal_factor * factor**2
    frames = temporal_factor if num_frames is None else num_frames
    scale = min(target[0] / height, target[1] / width)
    if frames * height * width >= pixels_per_token * min_image_tokens:
        scale = min(1.0, scale)
    return (
        max(1, min(target[0], math.floor(height * scale))),
        max(1, min(target[1], math.floor(width * scale))),
    )


@dataclass(frozen=True)
class Glm5NextConfig(ModelConfig):
    """Settings of ``Glm5NextImageProcessor``.

    ``num_image_tokens`` is the count of ``<|image|>`` tokens
    ``Glm5NextProcessor.replace_image_token`` inserts: ``image_grid_thw.prod() //
    merge_size**2``.
    """

    model_id: str | None
    model_type: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    patch_size: int
    temporal_patch_size: int
    merge_size: int
    patch_expand_factor: int
    min_image_tokens: int
    max_image_tokens: int

    # Which transformers backend the plan matches: "pil" or "torchvision".
    backend: str = field(default="pil", kw_only=True)

    @property
    def factor(self) -> int:
        """The canvas multiple: the torchvision class multiplies in ``patch_expand_factor``
        (``_preprocess``), the PIL class does not."""
        expand = self.patch_expand_factor if self.backend == "torchvision" else 1
        return self.patch_size * self.merge_size * expand

    def canvas(self, height: int, width: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """(content size, canvas size) of a resized image."""
        t = self.temporal_patch_size
        target = smart_resize(
            t, height, width, t, self.factor, self.min_image_tokens, self.max_image_tokens
        )
        content = content_size(height, width, target, t, self.factor, self.min_image_tokens)
        return content, target

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``_preprocess`` for one image: resize into the canvas, pad, rescale,
        normalise, patchify."""
        check_image_size(height, width)
        p, m = self.patch_size, self.merge_size
        if self.do_resize:
            content, canvas = self.canvas(height, width)
        else:
            # HF's patchify reshape only succeeds on sides divisible by its merge grouping.
            if height % (p * m) or width % (p * m):
                raise MmfastError(
                    f"image size: with do_resize=False both sides must be multiples of {p * m} "
                    f"(the patch grouping), got {height}x{width}"
                )
            content = canvas = (height, width)
        grid = PatchGrid(p, self.temporal_patch_size, m, 1, canvas[0] // p, canvas[1] // p)
        resize = (
            resizer(self.backend, content, self.resample) if content != (height, width) else None
        )
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=content,
            resample=self.resample,
            crop=None,
            canvas_size=canvas,
            **plan_constants(self),
            compute_dtype="float32",
            patches=grid,
            tiles=None,
            output_shapes=MappingProxyType(
                {
                    "pixel_values": (grid.num_patches, 3 * self.temporal_patch_size * p * p),
                    "image_grid_thw": (3,),
                }
            ),
            num_image_tokens=grid.num_patches // m**2,
            views=(
                View(
                    resize=resize,
                    pad=Pad(canvas) if canvas != content else None,
                    out=Patchify(p, self.temporal_patch_size, m),
                ),
            ),
        )

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_grid_thw``: (B, 3) int64 (``np.array`` of Python ints / ``torch.tensor``)."""
        return {"image_grid_thw": grid_thw(plans)}


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Glm5NextConfig:
    """Mirrors ``Glm5NextImageProcessorPil``'s class defaults. ``size`` is checked as HF's
    ``__init__`` checks it (a valid size dict), then unused."""
    size = cfg.raw("size")
    if size is not None:
        cfg.size_dict("size", size, cfg.flag("default_to_square", False))
    norm = cfg.normalization(OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)
    return Glm5NextConfig(
        model_id=source.model_id,
        model_type=registry.model_type_of(source.preprocessor, source.model_type),
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=cfg.flag("do_resize", True),
        resample=cfg.resample(BICUBIC),
        **norm.fields(),
        patch_size=cfg.positive_int("patch_size", 14),
        temporal_patch_size=cfg.positive_int("temporal_patch_size", 2),
        merge_size=cfg.positive_int("merge_size", 2),
        patch_expand_factor=cfg.positive_int("patch_expand_factor", 1),
        min_image_tokens=cfg.positive_int("min_image_tokens", 16),
        max_image_tokens=cfg.positive_int("max_image_tokens", 8000),
    )


registry.register(
    registry.Family(
        name="glm5_next",
        processor_types=("Glm5NextImageProcessor",),
        model_types={"glm5_next": "Glm5NextImageProcessor"},
        build=_build,
        kwargs=frozenset(
            {
                "patch_size",
                "temporal_patch_size",
                "merge_size",
                "patch_expand_factor",
                "min_image_tokens",
                "max_image_tokens",
            }
        ),
        processor_classes={"Glm5NextProcessor": "glm5_next"},
        hf_pil="glm5_next.image_processing_pil_glm5_next.Glm5NextImageProcessorPil",
        hf_torchvision="glm5_next.image_processing_glm5_next.Glm5NextImageProcessor",
    )
)

# zai-org/GLM-5.3-Flash: its processor_config.json nests these image settings (transformers 5's
# layout; mmfast reads them as the image processor's file) beside processor_class
# Glm5NextProcessor. The same ten keys and values appear in three independent copies: a fork's
# transformers test ("OFFICIAL_IMAGE_CONFIG"), another project's GLM-5.3 processor test, and a
# write-up quoting the hub repository's processor_config.json.
registry.register_builtin(
    "zai-org/GLM-5.3-Flash",
    "glm5_next",
    {
        "do_rescale": True,
        "patch_expand_factor": 1,
        "merge_size": 2,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_std": list(OPENAI_CLIP_STD),
        "temporal_patch_size": 2,
        "patch_size": 14,
        "min_image_tokens": 16,
        "max_image_tokens": 8000,
        "image_processor_type": "Glm5NextImageProcessor",
        "processor_class": "Glm5NextProcessor",
    },
    # The video block of the same processor_config.json: the fork's test quotes it beside the
    # image block ("OFFICIAL_VIDEO_CONFIG", these eleven keys), and a serving project's test of
    # the checkpoint's video config agrees on max_image_tokens 240000; the other settings are
    # the class defaults (max_frames 2048, max_duration 0, num_frames 16).
    video={
        "do_rescale": True,
        "video_processor_type": "Glm5NextVideoProcessor",
        "patch_expand_factor": 1,
        "merge_size": 2,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_std": list(OPENAI_CLIP_STD),
        "temporal_patch_size": 2,
        "patch_size": 14,
        "min_image_tokens": 16,
        "max_image_tokens": 240000,
        "fps": 2,
    },
)


# --------------------------------------------------------------------------------------------
# Video: Glm5NextVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Glm5NextVideoConfig(VideoConfig):
    """Settings of ``Glm5NextVideoProcessor``.

    ``num_video_tokens`` is the count of ``<|image|>`` tokens
    ``Glm5NextProcessor.replace_video_token`` inserts: one run of ``grid_h * grid_w //
    merge_size**2`` per temporal group (each with begin/end tokens and a timestamp),
    ``video_grid_thw.prod() // merge_size**2`` in all.
    """

    model_id: str | None
    video_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    patch_size: int
    temporal_patch_size: int
    merge_size: int
    patch_expand_factor: int
    min_image_tokens: int
    max_image_tokens: int
    do_sample_frames: bool
    fps: float
    num_frames: int
    max_duration: float
    max_frames: int

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``Glm5NextVideoProcessor.sample_frames``: ``fps`` frames a second (the
        config's without one) over ``duration`` (capped at ``max_duration`` when that is
        positive) and at most ``max_frames``, taken at each tick up to the clip's last whole
        second; ``num_frames`` is not read."""
        total, video_fps, duration = glm_clip_duration(metadata, "GLM-5")
        max_seconds = int(duration)
        if self.max_duration > 0:
            duration = min(duration, self.max_duration)
        target_fps = self.fps if fps is None else fps
        extract_t = min(int(duration * target_fps), self.max_frames)
        indices = tick_indices(total, video_fps, extract_t, 1 / target_fps, max_seconds)
        return unique_even(indices)

    def plan(self, frames: int, height: int, width: int) -> QwenVideoPlan:
        """Mirrors ``_preprocess`` for one clip: each frame resized to fit the canvas
        :func:`smart_resize` gives for the clip (factor ``patch_size * merge_size *
        patch_expand_factor``, the budget counting its frames), zero-padded at the bottom and
        right to it, then rescaled, normalised and patchified."""
        check_image_size(height, width)
        content = canvas = (height, width)
        if self.do_resize:
            t = self.temporal_patch_size
            factor = self.patch_size * self.merge_size * self.patch_expand_factor
            try:
                canvas = smart_resize(
                    frames, height, width, t, factor, self.min_image_tokens, self.max_image_tokens
                )
            except ZeroDivisionError as exc:
                # A clip of no frames under the minimum budget: HF divides by its frame count.
                raise MmfastError(
                    f"video: a clip of {frames} frames cannot be sized (transformers divides "
                    "by its frame count)"
                ) from exc
            content = content_size(
                height, width, canvas, t, factor, self.min_image_tokens, num_frames=frames
            )
        return patch_rows_plan(
            frames,
            height,
            width,
            canvas,
            resize=Resize(content, self.resample, "torch") if content != (height, width) else None,
            pad=Pad(canvas) if canvas != content else None,
            patch_size=self.patch_size,
            temporal_patch_size=self.temporal_patch_size,
            merge_size=self.merge_size,
            token_divisor=self.merge_size**2,
        )

    def batch_outputs(self, plans: Sequence[VideoPlan]) -> dict[str, Any]:
        """``video_grid_thw`` (clips, 3) int64."""
        return video_grid_thw(plans)


def _build_video(model_id: str | None, cfg: Fields) -> Glm5NextVideoConfig:
    """Mirrors ``Glm5NextVideoProcessor``'s class defaults. ``size`` (``{"longest_edge": 1}``)
    is checked as a size dict and unused, as are ``max_image_size`` and ``num_frames``."""
    size = cfg.raw("size")
    if size is not None:
        cfg.size_dict("size", size, cfg.flag("default_to_square", True))
    norm = cfg.normalization(OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)
    return Glm5NextVideoConfig(
        model_id=model_id,
        video_processor_type="Glm5NextVideoProcessor",
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=cfg.flag("do_resize", True),
        resample=cfg.torch_resample(BICUBIC),
        **norm.fields(),
        patch_size=cfg.positive_int("patch_size", 14),
        temporal_patch_size=cfg.positive_int("temporal_patch_size", 2),
        merge_size=cfg.positive_int("merge_size", 2),
        patch_expand_factor=cfg.positive_int("patch_expand_factor", 1),
        min_image_tokens=cfg.positive_int("min_image_tokens", 16),
        max_image_tokens=cfg.positive_int("max_image_tokens", 240000),
        do_sample_frames=cfg.flag("do_sample_frames", True),
        fps=positive_number(cfg, "fps", 2.0),
        num_frames=cfg.positive_int("num_frames", 16),
        max_duration=cfg.number("max_duration", 0.0),
        max_frames=cfg.positive_int("max_frames", 2048),
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="Glm5NextVideoProcessor",
        model_types=("glm5_next",),
        build=_build_video,
        kwargs=frozenset(
            {
                "max_image_size",
                "patch_size",
                "temporal_patch_size",
                "merge_size",
                "patch_expand_factor",
                "max_frames",
                "min_image_tokens",
                "max_image_tokens",
            }
        ),
        # size is read by nothing either (Glm5NextVideoProcessor's _preprocess takes it and
        # sizes clips by min/max_image_tokens).
        ignores=GLM_VIDEO_IGNORES | {"size"},
    )
)
