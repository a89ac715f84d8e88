"""Video-LLaVA: ``VideoLlavaImageProcessor`` (transformers 5.24, a NumPy/PIL-only class) and
``VideoLlavaVideoProcessor`` (torchvision).

Images: CLIP's pipeline run image by image by the class's own ``preprocess``: the shortest
edge to 224 (bicubic, Pillow), a 224x224 centre crop, rescale and normalise with OpenAI's CLIP
constants. The outputs are under ``pixel_values_images`` (``return_legacy_image_output``, a
call argument, True by default) or ``pixel_values``. The class reads each image's channel axis
from its shape (``infer_channel_dimension_format``): an image 1 or 3 pixels high reads as
channels-first, which fails (1 row) or scrambles the pixels (3 rows); mmfast refuses such
images.

Videos: transformers' default video pipeline (``BaseVideoProcessor._preprocess``) with the same
settings, on torchvision's kernels: every frame resized and centre-cropped, then normalised;
``pixel_values_videos`` one (frames, 3, 224, 224) array per clip, stacked where the clips have
one frame count (the list of them otherwise, as transformers returns with
``return_tensors=None``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Final

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RGB,
    ImagePlan,
    Resize,
    VideoConfig,
    VideoPlan,
    View,
    check_image_size,
)
from mmfast.models.base_video import positive_number
from mmfast.models.config import Fields, Source
from mmfast.models.geometry import center_crop_box, get_resize_output_image_size
from mmfast.models.llava import ClipConfig, processor_fields
from mmfast.models.pil_backend import pil_backend_fields, resize_output_size

__all__ = ["VideoLlavaConfig", "VideoLlavaVideoConfig"]

# The key a call's return_legacy_image_output is kept under: the class reads it only as a
# preprocess argument (a setting of that name changes nothing).
CALL_LEGACY: Final = "mmfast_call_return_legacy_image_output"


# The settings ``VideoLlavaImageProcessor.preprocess`` takes; ``__call__`` warns of any other
# ``ImagesKwargs`` (``do_pad``, ``pad_size``, ...) and ignores it.
PREPROCESS_ARGS: Final = frozenset(
    {
        "do_resize",
        "size",
        "resample",
        "do_center_crop",
        "crop_size",
        "do_rescale",
        "rescale_factor",
        "do_normalize",
        "image_mean",
        "image_std",
        "do_convert_rgb",
        "return_legacy_image_output",
    }
)


def call_settings(values: Mapping[str, Any], call: Mapping[str, Any]) -> dict[str, Any]:
    """A call's keyword arguments over a config's values as ``VideoLlavaImageProcessor.
    preprocess`` reads them: each of its arguments replaces the setting it names (a None
    leaves the instance's), ``return_legacy_image_output`` exists only as an argument, and
    the rest are ignored."""
    merged = dict(values)
    for key, value in call.items():
        if key not in PREPROCESS_ARGS:
            continue
        if key == "return_legacy_image_output":
            if not isinstance(value, bool):
                raise MmfastError(
                    f"return_legacy_image_output: expected True or False, got {value!r}"
                )
            merged[CALL_LEGACY] = value
        elif value is not None:
            merged[key] = value
    return merged


@dataclass(frozen=True)
class VideoLlavaConfig(ClipConfig):
    """Settings of ``VideoLlavaImageProcessor`` plus the ``VideoLlavaProcessor`` values that
    count its tokens (``LlavaProcessor``'s count: one ``<image>`` per 14-pixel patch of the
    crop, plus the CLS token, which the "default" strategy drops). ``legacy_output``: the
    pixels are returned as ``pixel_values_images``."""

    legacy_output: bool

    @property
    def output_key(self) -> str:  # type: ignore[override]
        return "pixel_values_images" if self.legacy_output else "pixel_values"

    @property
    def unbatched(self) -> Mapping[str, str]:  # type: ignore[override]
        """With ``return_tensors=None``, a list of each image's array."""
        return MappingProxyType({self.output_key: "rows"})

    def resize_size(self, height: int, width: int) -> tuple[int, int]:
        """``VideoLlavaImageProcessor.resize``: by ``shortest_edge`` when the size has one
        (a ``longest_edge`` beside it is ignored), else to ``height`` x ``width``."""
        if "shortest_edge" in self.size:
            return get_resize_output_image_size(height, width, self.size["shortest_edge"])
        if "height" in self.size and "width" in self.size:
            return self.size["height"], self.size["width"]
        raise MmfastError(
            f"size: expected shortest_edge or height and width (VideoLlavaImageProcessor resizes "
            f"by them), got {dict(self.size)}"
        )

    def plan(self, height: int, width: int) -> ImagePlan:
        """CLIP's pipeline; an image 1 or 3 pixels high is refused (transformers reads it as
        channels-first)."""
        check_image_size(height, width)
        if height in (1, 3):
            raise MmfastError(
                f"image size: transformers' VideoLlavaImageProcessor reads a {height}x{width} "
                "image as channels-first (infer_channel_dimension_format: it fails on 1 row and "
                "scrambles 3 rows), which mmfast does not reproduce; mmfast refuses images 1 or "
                "3 pixels high"
            )
        return super().plan(height, width)


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> VideoLlavaConfig:
    """Mirrors ``VideoLlavaImageProcessor.__init__`` (its defaults are CLIP's) and the
    processor's ``patch_size``, ``num_additional_image_tokens`` and
    ``vision_feature_select_strategy`` (VideoLlavaProcessor's defaults 14, 1, "default")."""
    legacy = cfg.raw(CALL_LEGACY)
    return VideoLlavaConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **pil_backend_fields(
            cfg,
            size={"shortest_edge": 224},
            default_to_square=False,
            resample=BICUBIC,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            do_center_crop=True,
            # get_size_dict(size, default_to_square=False) in __init__ and preprocess alike.
            reads_default_to_square=False,
        ),
        **processor_fields(processor),
        fixed_tokens=None,
        legacy_output=True if legacy is None else bool(legacy),
    )


registry.register(
    registry.Family(
        name="video_llava",
        processor_types=("VideoLlavaImageProcessor",),
        model_types={"video_llava": "VideoLlavaImageProcessor"},
        build=_build,
        kwargs=frozenset({"return_legacy_image_output"}),
        processor_kwargs=frozenset(
            {"patch_size", "num_additional_image_tokens", "vision_feature_select_strategy"}
        ),
        processor_classes={"VideoLlavaProcessor": "video_llava"},
        # images_kwargs holds only return_tensors.
        processor_defaults={"VideoLlavaProcessor": {}},
        hf_pil="video_llava.image_processing_video_llava.VideoLlavaImageProcessor",
        hf_torchvision=None,
        backends=("pil",),
        call_settings=call_settings,
        call_none_is_instance=True,
    )
)


# --------------------------------------------------------------------------------------------
# Video: VideoLlavaVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VideoLlavaVideoConfig(VideoConfig):
    """Settings of ``VideoLlavaVideoProcessor``.

    ``num_video_tokens`` is what ``VideoLlavaProcessor.replace_video_token`` inserts: one
    ``<video>`` per 14-pixel patch of a frame plus the CLS token (the video count keeps it,
    whatever the strategy), times the frames (the processor's defaults: the video config
    does not hold the processor's values).
    """

    model_id: str | None
    video_processor_type: str
    do_resize: bool
    size: Mapping[str, int]
    resample: int
    do_center_crop: bool
    crop_size: tuple[int, int]
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    do_sample_frames: bool
    fps: float | None
    num_frames: int | None

    batch_layout: ClassVar[str] = "clips"
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({"pixel_values_videos": "clips"})

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``BaseVideoProcessor.sample_frames`` and ``default_sample_indices_fn``."""
        fps, num_frames = self.sampling(fps, num_frames)
        total = metadata.total_num_frames
        if num_frames is None and fps is not None:
            if metadata.fps is None:
                raise MmfastError(
                    "video_fps: sampling at fps frames a second needs the clip's own frame rate"
                )
            num_frames = max(1, int(total / metadata.fps * fps))
        if num_frames is None:
            return list(range(total))
        if num_frames > total:
            raise MmfastError(
                f"num_frames: the clip has {total} frames, sampling asked for {num_frames}"
            )
        return [i * total // num_frames for i in range(num_frames)]

    def plan(self, frames: int, height: int, width: int) -> VideoPlan:
        """``BaseVideoProcessor._preprocess`` of one clip: each frame resized (torchvision's
        uint8 kernel), centre-cropped (outside the frame: black), normalised."""
        check_image_size(height, width)
        size = resize_output_size(height, width, self.size) if self.do_resize else (height, width)
        resize = Resize(size, self.resample, "torch") if self.do_resize else None
        if self.do_center_crop:
            window = center_crop_box(*size, *self.crop_size, "torchvision")
        else:
            window = center_crop_box(*size, *size, "torchvision")
        view = View(resize=resize, out=(window,))
        shape = (frames, 3, window.height, window.width)
        per_frame = (window.height // 14) * (window.width // 14) + 1
        return VideoPlan(
            height=height,
            width=width,
            frames=frames,
            views=tuple(((t,), view) for t in range(frames)),
            output_shapes=MappingProxyType({"pixel_values_videos": shape}),
            num_video_tokens=per_frame * frames,
        )


def _build_video(model_id: str | None, cfg: Fields) -> VideoLlavaVideoConfig:
    """Mirrors ``VideoLlavaVideoProcessor``'s class attributes."""
    fields = pil_backend_fields(
        cfg,
        size={"shortest_edge": 224},
        default_to_square=False,
        resample=BICUBIC,
        mean=OPENAI_CLIP_MEAN,
        std=OPENAI_CLIP_STD,
        do_center_crop=True,
    )
    num_frames = cfg.raw("num_frames")
    fps = cfg.raw("fps")
    return VideoLlavaVideoConfig(
        model_id=model_id,
        video_processor_type="VideoLlavaVideoProcessor",
        do_resize=fields["do_resize"],
        size=fields["size"],
        resample=cfg.torch_resample(BICUBIC),
        do_center_crop=fields["do_center_crop"],
        crop_size=fields["crop_size"],
        do_rescale=fields["do_rescale"],
        rescale_factor=fields["rescale_factor"],
        do_normalize=fields["do_normalize"],
        image_mean=fields["image_mean"],
        image_std=fields["image_std"],
        do_sample_frames=cfg.flag("do_sample_frames", False),
        fps=None if fps is None else positive_number(cfg, "fps"),
        num_frames=None if num_frames is None else cfg.positive_int("num_frames", 1),
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="VideoLlavaVideoProcessor",
        model_types=("video_llava",),
        build=_build_video,
        kwargs=frozenset(),
        # _preprocess never pads.
        ignores=frozenset({"do_pad", "pad_size"}),
    )
)

# LanguageBind/Video-LLaVA-7B-hf: no public copy of its preprocessor_config.json was found.
# transformers' conversion script (convert_video_llava_weights_to_hf) builds its processor from
# a VideoLlavaImageProcessor with the CLIP-ViT-L/14 tower's settings (224 shortest edge, 224
# crop, bicubic, CLIP mean/std), which these are; the processor values (14-pixel patches, the
# CLS token dropped by the "default" strategy: 256 image tokens) are VideoLlavaProcessor's
# defaults and the model config's. Unconfirmed as files.
registry.register_builtin(
    "LanguageBind/Video-LLaVA-7B-hf",
    "video_llava",
    {
        "crop_size": {"height": 224, "width": 224},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "VideoLlavaImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "processor_class": "VideoLlavaProcessor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"shortest_edge": 224},
    },
    {
        "num_additional_image_tokens": 1,
        "patch_size": 14,
        "processor_class": "VideoLlavaProcessor",
        "vision_feature_select_strategy": "default",
    },
)
