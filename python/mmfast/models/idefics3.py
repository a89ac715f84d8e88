"""Idefics3, SmolVLM and SmolVLM2: ``Idefics3ImageProcessor`` / ``SmolVLMImageProcessor``
(transformers 5.24; the two classes are the same arithmetic).

The image's longest edge is resized to ``size["longest_edge"]`` (Lanczos for the checkpoints,
capped at 4096), then to whole multiples of the tile (``max_image_size["longest_edge"]``), and
cut into tiles followed by a global image (the resized image squashed to one tile). Without
splitting, the image is squashed to one tile. A flat list of images is one prompt's images;
samples (a nested list) are zero-padded to the longest with ``pixel_attention_mask`` marking
real tiles. ``rows``/``cols`` (which the processors always request) give each image's grid.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, ClassVar, cast

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    HALF,
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
    LANCZOS,
    RGB,
    Canvas,
    ImagePlan,
    ModelConfig,
    Resize,
    TileGrid,
    VideoConfig,
    VideoPlan,
    View,
    area_mask,
    check_image_size,
    float32_tables,
    identity_table,
    plan_constants,
    resizer,
    sample_rows,
)
from mmfast.models.base_video import positive_number
from mmfast.models.config import Fields, Source
from mmfast.models.geometry import CropBox
from mmfast.models.mllama import last_sample

__all__ = [
    "MAX_IMAGE_SIZE",
    "Idefics3Config",
    "SmolVLMVideoConfig",
    "get_resize_output_image_size",
    "resize_for_vision_encoder",
]

MAX_IMAGE_SIZE = (
    4096  # image_processing_idefics3.MAX_IMAGE_SIZE: "4k resolution as absolute maximum"
)


def _rescale_to_max_len(height: int, width: int, max_len: int) -> tuple[int, int]:
    """``_resize_output_size_rescale_to_max_len``: the longest side to ``max_len`` (up or
    down), the other truncated and made even, both at least 1."""
    aspect_ratio = width / height
    if width >= height:
        width = max_len
        height = int(width / aspect_ratio)
        height += height % 2
    else:
        height = max_len
        width = int(height * aspect_ratio)
        width += width % 2
    return max(height, 1), max(width, 1)


def _scale_below_upper_bound(height: int, width: int, max_len: int) -> tuple[int, int]:
    """``_resize_output_size_scale_below_upper_bound``: the longest side down to ``max_len``."""
    aspect_ratio = width / height
    if width >= height and width > max_len:
        width = max_len
        height = int(width / aspect_ratio)
    elif height > width and height > max_len:
        height = max_len
        width = int(height * aspect_ratio)
    return max(height, 1), max(width, 1)


def get_resize_output_image_size(height: int, width: int, longest_edge: int) -> tuple[int, int]:
    """Mirrors ``image_processing_idefics3.get_resize_output_image_size``."""
    height, width = _rescale_to_max_len(height, width, longest_edge)
    return _scale_below_upper_bound(height, width, MAX_IMAGE_SIZE)


def resize_for_vision_encoder(height: int, width: int, tile: int) -> tuple[int, int]:
    """The size ``Idefics3ImageProcessorPil.resize_for_vision_encoder`` resizes to: the long
    side up to a multiple of ``tile``, the other side from the aspect ratio, then up too."""
    aspect_ratio = width / height
    if width >= height:
        width = math.ceil(width / tile) * tile
        height = math.ceil(int(width / aspect_ratio) / tile) * tile
    else:
        height = math.ceil(height / tile) * tile
        width = math.ceil(int(height * aspect_ratio) / tile) * tile
    return height, width


@dataclass(frozen=True)
class Idefics3Config(ModelConfig):
    """Settings of ``Idefics3ImageProcessor`` / ``SmolVLMImageProcessor`` plus the processor's
    ``image_seq_len``.

    ``num_image_tokens`` counts what Idefics3Processor / SmolVLMProcessor insert for the image,
    as their ``_get_num_multimodal_tokens`` does with a tokenizer that reads "\\n\\n" as one
    token (theirs do): ``image_seq_len`` image tokens per tile and for the global image, a
    ``<fake_token_around_image>`` and a ``<row_r_col_c>`` tag per tile, a newline per tile
    row, and ``<fake_token_around_image>``, ``<global-img>``, ``<fake_token_around_image>``
    around the global image.
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    size: Mapping[str, int]
    resample: int
    do_image_splitting: bool
    tile: int
    return_row_col_info: bool
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    image_seq_len: int

    # Which transformers backend the plan matches: "pil" or "torchvision".
    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "pad_samples"
    flat_is_one_sample: ClassVar[bool] = True
    float_padding: ClassVar[bool] = True

    @property
    def batch_shapes_images(self) -> bool:  # type: ignore[override]
        """The PIL class's uint8 pixels come out float32 in a batch of samples of unequal
        tile counts (:attr:`float_padding`): the batch changes each image's dtype."""
        return self.backend == "pil" and not (self.do_rescale or self.do_normalize)

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """``Idefics3ImageProcessorPil.resize`` by ``size``."""
        if "longest_edge" in self.size:
            return get_resize_output_image_size(height, width, self.size["longest_edge"])
        return self.size["height"], self.size["width"]

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Idefics3ImageProcessorPil._preprocess`` for one image."""
        check_image_size(height, width)
        t = self.tile
        views: list[View] = []
        size = (height, width)
        if self.do_resize:
            size = self.resized_size(height, width)
            views.append(View(resize=resizer(self.backend, size, self.resample)))
        source = len(views) - 1 if views else None
        rows = cols = 0
        tile_box = CropBox(0, 0, t, t)
        if self.do_image_splitting:
            size = resize_for_vision_encoder(*size, t)
            if size[0] > t or size[1] > t:
                rows, cols = (size[0] - t) // t + 1, (size[1] - t) // t + 1
                tiles = tuple(CropBox(r * t, c * t, t, t) for r in range(rows) for c in range(cols))
                views.append(
                    View(
                        source=source, resize=resizer(self.backend, size, self.resample), out=tiles
                    )
                )
                views.append(
                    View(
                        source=len(views) - 1,
                        resize=resizer(self.backend, (t, t), self.resample),
                        out=(tile_box,),
                    )
                )
            else:
                views.append(
                    View(
                        source=source,
                        resize=resizer(self.backend, size, self.resample),
                        out=(tile_box,),
                    )
                )
        else:
            views.append(
                View(
                    source=source,
                    resize=resizer(self.backend, (t, t), self.resample),
                    out=(tile_box,),
                )
            )
        frames = rows * cols + 1 if rows else 1
        tokens = self.image_seq_len + 3 + rows * (cols * (self.image_seq_len + 2) + 1)
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=size,
            resample=self.resample,
            crop=None,
            canvas_size=None,
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            output_shapes=MappingProxyType({"pixel_values": (frames, 3, t, t)}),
            num_image_tokens=tokens,
            tiles=TileGrid(rows, cols, (t, t), rows > 0, self.image_seq_len),
            views=tuple(views),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """With rescale and normalise off, the PIL class keeps the uint8 pixels while the
        torchvision class pads them into a float32 batch."""
        if plan.do_rescale or plan.do_normalize:
            return super().tables(plan)
        return identity_table() if plan.backend == "pil" else float32_tables(plan)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``pixel_attention_mask`` (samples, tiles, tile, tile) int64, 1 on each real tile;
        ``rows`` and ``cols`` as nested lists, one list per sample (the torchvision class's
        stop at the last sample with images, as Mllama's aspect ratios do:
        :func:`~mmfast.models.mllama.last_sample`)."""
        starts = list(itertools.pairwise([0, *itertools.accumulate(sample_sizes)]))
        frames = sample_rows(plans, sample_sizes)
        slots = max(frames)
        tile = (self.tile, self.tile)
        areas = [area for n in frames for area in [tile] * n + [(0, 0)] * (slots - n)]
        shape = (len(sample_sizes), slots, *tile)
        out: dict[str, Any] = {"pixel_attention_mask": area_mask(shape, areas)}
        if self.return_row_col_info:
            if self.backend == "torchvision":
                starts = starts[: last_sample(sample_sizes)]
            out["rows"] = [[p.tiles.tiles_h for p in plans[a:b] if p.tiles] for a, b in starts]
            out["cols"] = [[p.tiles.tiles_w for p in plans[a:b] if p.tiles] for a, b in starts]
        return out


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Idefics3Config:
    """Mirrors ``Idefics3ImageProcessorPil``'s class defaults and the processor's
    ``image_seq_len`` (default 169)."""
    size_value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"longest_edge": 4 * 364} if size_value is None else size_value,
        cfg.flag("default_to_square", True),
    )
    if set(size) not in ({"longest_edge"}, {"height", "width"}):
        raise cfg.error("size", "{longest_edge} or {height, width}", size)
    max_size = cfg.raw("max_image_size")
    max_size = {"longest_edge": 364} if max_size is None else max_size
    if not isinstance(max_size, dict) or set(max_size) != {"longest_edge"}:
        raise cfg.error("max_image_size", "a {longest_edge} dict", max_size)
    tile = cfg.nested("max_image_size", max_size).positive_int("longest_edge", 364)
    if not cfg.flag("do_pad", True):
        raise cfg.error("do_pad", "true (samples are stacked, zero-padded to the longest)", False)
    norm = cfg.normalization(IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD)
    return Idefics3Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=cfg.flag("do_resize", True),
        size=MappingProxyType(size),
        resample=cfg.resample(LANCZOS),
        do_image_splitting=cfg.flag("do_image_splitting", True),
        tile=tile,
        return_row_col_info=cfg.flag("return_row_col_info", False),
        **norm.fields(),
        image_seq_len=processor.positive_int("image_seq_len", 169),
    )


registry.register(
    registry.Family(
        name="idefics3",
        processor_types=("Idefics3ImageProcessor", "SmolVLMImageProcessor"),
        model_types={"idefics3": "Idefics3ImageProcessor", "smolvlm": "SmolVLMImageProcessor"},
        build=_build,
        kwargs=frozenset({"do_image_splitting", "max_image_size", "return_row_col_info"}),
        processor_kwargs=frozenset({"image_seq_len"}),
        # Idefics3Processor and SmolVLMProcessor always ask for the tile grid.
        processor_classes={"Idefics3Processor": "idefics3", "SmolVLMProcessor": "smolvlm"},
        processor_defaults={
            "Idefics3Processor": {"return_row_col_info": True},
            "SmolVLMProcessor": {"return_row_col_info": True},
        },
        hf_pil="idefics3.image_processing_pil_idefics3.Idefics3ImageProcessorPil",
        hf_torchvision="idefics3.image_processing_idefics3.Idefics3ImageProcessor",
    )
)


def _smolvlm_file(image_processor: str, processor: str, longest: int, tile: int) -> dict[str, Any]:
    return {
        "do_convert_rgb": True,
        "do_image_splitting": True,
        "do_normalize": True,
        "do_pad": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_processor_type": image_processor,
        "image_std": list(HALF),
        "max_image_size": {"longest_edge": tile},
        "processor_class": processor,
        "resample": LANCZOS,
        "rescale_factor": 0.00392156862745098,
        "size": {"longest_edge": longest},
    }


# No public copy of these three files was found. SmolVLM-Instruct and SmolVLM2-2.2B-Instruct:
# longest edge 1536, 384 tiles and mean/std 0.5 from an issue quoting the SmolVLM file and two
# projects' tests; the key set follows the smaller SmolVLM checkpoints' files; image_seq_len 81
# is (384 / 14) ** 2 // 3 ** 2 for their 3x pixel shuffle. Idefics3-8B: the 1456 / 364 pair and
# image_seq_len 169 are transformers' Idefics3 defaults, which a test derives from its files.
registry.register_builtin(
    "HuggingFaceTB/SmolVLM-Instruct",
    "idefics3",
    _smolvlm_file("Idefics3ImageProcessor", "Idefics3Processor", 1536, 384),
    {"image_seq_len": 81, "processor_class": "Idefics3Processor"},
)
# SmolVLM2 keeps its video settings in preprocessor_config.json (transformers' SmolVLM2 PR: "the
# preprocessor_config.json will have these"), which AutoVideoProcessor reads without a video
# file: a video_sampling block of 1 frame a second, at most 64 frames, at the tile size, as the
# SmolVLM2-500M file (copied verbatim by a fixture) has it with its 512 tiles. The 384 here
# follows that pattern; unconfirmed for 2.2B.
registry.register_builtin(
    "HuggingFaceTB/SmolVLM2-2.2B-Instruct",
    "smolvlm",
    {
        **_smolvlm_file("SmolVLMImageProcessor", "SmolVLMProcessor", 1536, 384),
        "video_sampling": {"fps": 1, "max_frames": 64, "video_size": {"longest_edge": 384}},
    },
    {"image_seq_len": 81, "processor_class": "SmolVLMProcessor"},
)
registry.register_builtin(
    "HuggingFaceM4/Idefics3-8B-Llama3",
    "idefics3",
    _smolvlm_file("Idefics3ImageProcessor", "Idefics3Processor", 1456, 364),
    {"image_seq_len": 169, "processor_class": "Idefics3Processor"},
)


# --------------------------------------------------------------------------------------------
# Video: SmolVLMVideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


def video_frame_size(height: int, width: int, longest_edge: int) -> tuple[int, int]:
    """``video_processing_smolvlm.get_resize_output_image_size``: the longest side to
    ``min(longest_edge, 4096)`` (up or down), the other truncated and made even."""
    return _rescale_to_max_len(height, width, min(MAX_IMAGE_SIZE, longest_edge))


@dataclass(frozen=True)
class SmolVLMVideoPlan(VideoPlan):
    """A SmolVLM clip's plan, with its frames' size before any padding."""

    frame_hw: tuple[int, int]


@dataclass(frozen=True)
class SmolVLMVideoConfig(VideoConfig):
    """Settings of ``SmolVLMVideoProcessor`` (SmolVLM2).

    Every frame is resized twice, as ``SmolVLMVideoProcessor.resize`` does: its longest edge
    to ``size["longest_edge"]`` (or to ``size``'s height and width), then squashed to the
    ``max_image_size`` square; both with the checkpoint's filter (LANCZOS: torchvision's
    antialiased Lanczos-3 on the CPU, which transformers uses from torchvision 0.27), then
    normalised. With ``do_pad`` the clips are zero-padded (after normalising) to the call's
    longest clip and largest frame, and ``pixel_attention_mask`` marks each clip's frame
    area (on its padded frames too, as transformers marks them).

    ``num_video_tokens`` counts the special tokens SmolVLMProcessor's
    ``replace_video_token`` puts in the prompt per frame: ``<fake_token_around_image>``,
    ``<global-img>``, ``image_seq_len`` ``<image>`` tokens and ``<fake_token_around_image>``
    (the intro, the timestamps and the outro are text).
    """

    model_id: str | None
    video_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    size: Mapping[str, int]
    max_image_size: int
    resample: int
    do_pad: bool
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    do_sample_frames: bool
    fps: float | None
    num_frames: int | None
    image_seq_len: int

    output_key: ClassVar[str] = "pixel_values"
    # Frames padded with zeros after normalising.
    raw_pixels: ClassVar[bool] = False
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_values": "clips", "pixel_attention_mask": "clips"}
    )

    def layout(self) -> str:
        """Clips zero-padded to the longest ("pad_images"), or a list of them."""
        return "pad_images" if self.do_pad else "clips"

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors ``SmolVLMVideoProcessor.sample_frames``: ``round(fps * duration)`` frames,
        at most ``num_frames``, evenly spaced (``np.linspace`` truncated, duplicates
        dropped) between the clip's ends, a second in from each when the clip is long."""
        if metadata.fps is None:
            raise MmfastError(
                "video_fps: SmolVLMVideoProcessor samples by the clip's frame rate; pass it "
                "or do_sample_frames=False"
            )
        num_frames, fps = (
            self.num_frames if num_frames is None else num_frames,
            self.fps if fps is None else fps,
        )
        if num_frames is None or fps is None or metadata.duration is None:
            # transformers: a TypeError comparing or multiplying None.
            raise MmfastError(
                "fps, num_frames, video_fps: SmolVLMVideoProcessor samples with fps, "
                f"num_frames and the clip's duration, got {fps}, {num_frames} and "
                f"{metadata.duration}"
            )
        total = metadata.total_num_frames
        duration = metadata.duration
        desired = max(min(round(fps * duration), num_frames), 1)
        skip_secs = 1
        start, end = 0, total - 1
        if skip_secs > 0 and (duration - 2 * skip_secs) > (num_frames * fps):
            start = int(skip_secs * metadata.fps)
            end = int(total - skip_secs * metadata.fps)
        start, end = max(0, start), min(end, total - 1)
        if start >= end:
            start, end = 0, total - 1
        indices: list[int] = np.unique(np.linspace(start, end, desired, dtype=int)).tolist()
        return indices

    def frame_views(self, height: int, width: int) -> tuple[tuple[int, int], list[View]]:
        """A frame's size after the two resizes, and its views (the last one writes)."""
        if not self.do_resize:
            return (height, width), [View()]
        if "longest_edge" in self.size:
            first = video_frame_size(height, width, self.size["longest_edge"])
        else:
            first = (self.size["height"], self.size["width"])
        square = (self.max_image_size, self.max_image_size)
        views: list[View] = []
        if first != (height, width):
            views.append(View(resize=Resize(first, self.resample, "torch")))
        if square != first:
            source = 0 if views else None
            views.append(View(source=source, resize=Resize(square, self.resample, "torch")))
        return square, views or [View()]

    def plan(self, frames: int, height: int, width: int) -> SmolVLMVideoPlan:
        """One clip's frames resized twice and normalised, each into its (3, H, W) slot."""
        check_image_size(height, width)
        size, views = self.frame_views(height, width)
        window = (CropBox(0, 0, *size),)
        written = replace(views[-1], out=window)
        per_frame = [*views[:-1], written]
        clip_views = tuple(
            ((t,), replace(v, source=None if v.source is None else v.source + t * len(per_frame)))
            for t in range(frames)
            for v in per_frame
        )
        return SmolVLMVideoPlan(
            height=height,
            width=width,
            frames=frames,
            views=clip_views,
            output_shapes=MappingProxyType({self.output_key: (frames, 3, *size)}),
            num_video_tokens=frames * (self.image_seq_len + 3),
            frame_hw=size,
        )

    def finish_batch(self, plans: Sequence[VideoPlan]) -> Sequence[VideoPlan]:
        """With ``do_pad``, every frame on a zero canvas as large as the call's largest."""
        if not self.do_pad:
            return plans
        sizes = [cast("SmolVLMVideoPlan", p).frame_hw for p in plans]
        largest = (max(h for h, _ in sizes), max(w for _, w in sizes))
        if all(size == largest for size in sizes):
            return plans
        return [
            replace(
                plan,
                views=tuple(
                    (positions, replace(view, out=Canvas(largest)) if view.out else view)
                    for positions, view in plan.views
                ),
                output_shapes=MappingProxyType({self.output_key: (plan.frames, 3, *largest)}),
            )
            for plan in plans
        ]

    def batch_outputs(self, plans: Sequence[VideoPlan]) -> dict[str, Any]:
        """With ``do_pad``: ``pixel_attention_mask`` (clips, frames, H, W) int64, 1 on each
        clip's frame area in every frame slot (its padded frames too)."""
        if not self.do_pad:
            return {}
        frames = max(p.frames for p in plans)
        height, width = plans[0].output_shapes[self.output_key][2:]
        areas = [cast("SmolVLMVideoPlan", plan).frame_hw for plan in plans for _ in range(frames)]
        return {"pixel_attention_mask": area_mask((len(plans), frames, height, width), areas)}


def _build_video(model_id: str | None, cfg: Fields) -> SmolVLMVideoConfig:
    """Mirrors ``SmolVLMVideoProcessor.__init__``: the class defaults (LANCZOS, longest edge
    1456 then 364 squares, mean/std 0.5, padding), then a ``video_sampling`` block's
    ``max_frames``, ``fps`` and ``video_size`` (which ``size``, when the file has one too,
    replaces: transformers writes it into the block first). ``image_seq_len`` (the processor's,
    169 by default) counts tokens."""
    default_to_square = cfg.flag("default_to_square", True)
    size_value: Any = cfg.raw("size") if cfg.given("size") else {"longest_edge": 4 * 364}
    fps: Any = cfg.raw("fps")
    num_frames: Any = cfg.raw("num_frames")
    sampling = cfg.raw("video_sampling")
    if sampling is not None:
        if not isinstance(sampling, dict) or not {"max_frames", "fps", "video_size"} <= set(
            sampling
        ):
            raise cfg.error(
                "video_sampling", "a dict with max_frames, fps and video_size", sampling
            )
        block = cfg.nested("video_sampling", sampling)
        num_frames = block.positive_int("max_frames", 1)
        fps = positive_number(block, "fps")
        if not cfg.given("size"):
            size_value = sampling["video_size"]
    if size_value is None:
        raise cfg.error("size", "a size dict", None)
    size = cfg.size_dict("size", size_value, default_to_square)
    do_resize = cfg.flag("do_resize", True)
    if do_resize and not (size.get("longest_edge") or (size.get("height") and size.get("width"))):
        raise cfg.error("size", "{longest_edge} or {height, width}", size)
    max_size = cfg.raw("max_image_size")
    max_size = {"longest_edge": 364} if max_size is None else max_size
    if not isinstance(max_size, dict) or "longest_edge" not in max_size:
        raise cfg.error("max_image_size", "a {longest_edge} dict", max_size)
    tile = cfg.nested("max_image_size", max_size).positive_int("longest_edge", 364)
    resample = cfg.torch_resample(LANCZOS)
    norm = cfg.normalization(IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD)
    return SmolVLMVideoConfig(
        model_id=model_id,
        video_processor_type="SmolVLMVideoProcessor",
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=do_resize,
        size=MappingProxyType(size),
        max_image_size=tile,
        resample=resample,
        do_pad=cfg.flag("do_pad", True),
        **norm.fields(),
        do_sample_frames=cfg.flag("do_sample_frames", False),
        fps=None if fps is None else float(fps),
        num_frames=None if num_frames is None else int(num_frames),
        image_seq_len=cfg.positive_int("image_seq_len", 169),
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="SmolVLMVideoProcessor",
        model_types=("smolvlm",),
        build=_build_video,
        # video_sampling is an __init__ argument only (its values become fps, num_frames and
        # the size).
        kwargs=frozenset({"max_image_size", "video_sampling"}),
        # Its _preprocess never crops; it pads to the call's largest frame, not to pad_size.
        ignores=frozenset({"do_center_crop", "crop_size", "pad_size"}),
        processor_kwargs=frozenset({"image_seq_len"}),
        # Its resize reads the instance's max_image_size, whatever the call passes.
        instance_settings=frozenset({"max_image_size"}),
    )
)
