"""Idefics2: ``Idefics2ImageProcessor`` / ``Idefics2ImageProcessorPil`` (transformers 5.24).

With ``do_image_splitting`` the original image is cut at half its height and width into four
quadrants, followed by the whole image; each of these frames is resized on its own (its long
side down to ``size["longest_edge"]`` when over it, then each side up to at least
``size["shortest_edge"]``, which does not keep the aspect ratio), normalised, and zero-padded
*after* normalising, at the bottom and right, to the batch's largest frame. A flat list of
images is one prompt's images; prompts are padded to the most frames with all-zero frames, and
``pixel_attention_mask`` marks each frame's real pixels.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, ClassVar

from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BILINEAR,
    HALF,
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
    RGB,
    Canvas,
    ImagePlan,
    ModelConfig,
    Pad,
    View,
    area_mask,
    check_image_size,
    float32_tables,
    identity_table,
    plan_constants,
    resizer,
    sample_rows,
)
from mmfast.models.config import Fields, Source
from mmfast.models.geometry import CropBox

__all__ = ["Idefics2Config", "get_resize_output_image_size", "split_images"]


def get_resize_output_image_size(
    height: int, width: int, min_len: int, max_len: int
) -> tuple[int, int]:
    """Mirrors ``image_processing_pil_idefics2.get_resize_output_image_size``: the long side
    down to ``max_len`` (the other side truncated), then each side up to ``min_len``.
    Raises :class:`MmfastError` where transformers divides by a zero height."""
    if height == 0:
        raise MmfastError(
            "image size: a frame of height 0 (a 1-pixel-high image split in four), on which "
            "transformers' Idefics2 resize divides by zero"
        )
    aspect_ratio = width / height
    if width >= height and width > max_len:
        width = max_len
        height = int(width / aspect_ratio)
    elif height > width and height > max_len:
        height = max_len
        width = int(height * aspect_ratio)
    return max(height, min_len), max(width, min_len)


def split_images(height: int, width: int) -> tuple[CropBox, ...]:
    """``Idefics2ImageProcessorPil.split_images``: the four quadrants around
    ``(height // 2, width // 2)``, then the whole image (a quadrant may be empty)."""
    mid_h, mid_w = height // 2, width // 2
    return (
        CropBox(0, 0, mid_h, mid_w),
        CropBox(0, mid_w, mid_h, width - mid_w),
        CropBox(mid_h, 0, height - mid_h, mid_w),
        CropBox(mid_h, mid_w, height - mid_h, width - mid_w),
        CropBox(0, 0, height, width),
    )


@dataclass(frozen=True)
class Idefics2Config(ModelConfig):
    """Settings of ``Idefics2ImageProcessor`` plus the processor's ``image_seq_len``.

    ``size`` is HF's resolved size dict: ``shortest_edge`` and ``longest_edge``, or
    ``height`` and ``width`` (a fixed size for every frame). ``num_image_tokens`` counts what
    ``Idefics2Processor`` puts in the prompt for one image: ``<fake_token_around_image>``,
    ``image_seq_len`` ``<image>`` tokens and ``<fake_token_around_image>``, five times with
    splitting (the processor reads the image processor's ``do_image_splitting``), adjacent
    fake tokens merged: ``image_seq_len + 2``, or ``5 * image_seq_len + 6``.
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    size: Mapping[str, int]
    resample: int
    do_image_splitting: bool
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    do_pad: bool
    image_seq_len: int

    # Which transformers backend the plan matches: "pil" or "torchvision".
    backend: str = field(default="pil", kw_only=True)

    batch_layout: ClassVar[str] = "pad_samples"
    batch_shapes_images: ClassVar[bool] = True

    @property
    def raw_pixels(self) -> bool:  # type: ignore[override]
        """Padding is zeros after normalising: dtype="uint8" only without it."""
        return not self.do_pad

    flat_is_one_sample: ClassVar[bool] = True
    float_padding: ClassVar[bool] = True

    def frame_size(self, height: int, width: int) -> tuple[int, int]:
        """``Idefics2ImageProcessorPil.resize``'s target for a frame of this size."""
        if "shortest_edge" in self.size and "longest_edge" in self.size:
            return get_resize_output_image_size(
                height, width, self.size["shortest_edge"], self.size["longest_edge"]
            )
        if "height" in self.size and "width" in self.size:
            return self.size["height"], self.size["width"]
        raise MmfastError(
            "size: expected shortest_edge and longest_edge, or height and width (Idefics2 "
            f"resizes by them), got {dict(self.size)}"
        )

    def frames(self, height: int, width: int) -> list[tuple[CropBox, tuple[int, int]]]:
        """Each frame's window of the image and its size after the resize."""
        boxes = (
            split_images(height, width)
            if self.do_image_splitting
            else (CropBox(0, 0, height, width),)
        )
        out = []
        for box in boxes:
            size = (box.height, box.width)
            if self.do_resize:
                size = self.frame_size(*size)
            elif 0 in size:
                raise MmfastError(
                    f"image size: splitting a {height}x{width} image without resizing leaves "
                    "an empty quadrant, which mmfast does not pad"
                )
            out.append((box, size))
        return out

    def frame_views(self, box: CropBox, size: tuple[int, int], first: int) -> list[View]:
        """The views writing one frame (view indices from ``first``). An empty quadrant (a
        1-pixel-wide image split in four) resizes to black in Pillow: a pixel pasted below a
        black canvas, then the canvas cut out of it. torchvision refuses to resize it."""
        canvas = Canvas(size)
        if box.height and box.width:
            resize = resizer(self.backend, size, self.resample) if self.do_resize else None
            return [View(crop=box, resize=resize, out=canvas)]
        if self.backend == "torchvision":
            raise MmfastError(
                "image size: a 1-pixel-wide image split in four leaves empty quadrants, which "
                "transformers' torchvision class cannot resize"
            )
        black = Pad((size[0] + 1, size[1]), top=size[0])
        return [
            View(crop=CropBox(0, 0, 1, 1), pad=black),
            View(source=first, crop=CropBox(0, 0, *size), out=canvas),
        ]

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Idefics2ImageProcessorPil._preprocess`` for one image: split, resize,
        rescale and normalise each frame onto a canvas of its own size (``finish_batch``
        widens them to the batch's largest frame)."""
        check_image_size(height, width)
        frames = self.frames(height, width)
        views: list[View] = []
        for box, size in frames:
            views += self.frame_views(box, size, len(views))
        sizes = [size for _, size in frames]
        canvas = (max(s[0] for s in sizes), max(s[1] for s in sizes))
        tokens = self.image_seq_len + 2
        if self.do_image_splitting:
            tokens = 5 * self.image_seq_len + 6
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=sizes[-1],
            resample=self.resample,
            crop=None,
            canvas_size=canvas,
            **plan_constants(self),
            compute_dtype="float32",
            patches=None,
            tiles=None,
            output_shapes=MappingProxyType({"pixel_values": (len(frames), 3, *canvas)}),
            num_image_tokens=tokens,
            views=tuple(views),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """With rescale and normalise both off, the PIL class keeps the uint8 pixels (padded
        with 0) while the torchvision class pads them into a float32 batch."""
        if plan.do_rescale or plan.do_normalize:
            return super().tables(plan)
        return identity_table() if plan.backend == "pil" else float32_tables(plan)

    def finish_batch(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> Sequence[ImagePlan]:
        """Every frame's canvas as large as the batch's largest frame (``do_pad``); without
        padding, frames and prompts must agree in size and count, as transformers stacks
        them."""
        frames = [self.frames(p.height, p.width) for p in plans]
        sizes = {size for image in frames for _, size in image}
        counts = sample_rows(plans, sample_sizes)
        if not self.do_pad and (len(sizes) > 1 or len(set(counts)) > 1):
            raise MmfastError(
                "images: with do_pad off, transformers stacks the frames, which needs frames "
                f"of one size (got {sorted(sizes)}) and prompts of as many frames (got "
                f"{counts})"
            )
        height = max(s[0] for s in sizes)
        width = max(s[1] for s in sizes)
        return [
            replace(
                plan,
                canvas_size=(height, width),
                output_shapes=MappingProxyType(
                    {"pixel_values": (plan.output_shapes["pixel_values"][0], 3, height, width)}
                ),
                views=tuple(
                    view if view.out is None else replace(view, out=Canvas((height, width)))
                    for view in plan.views
                ),
            )
            for plan in plans
        ]

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``pixel_attention_mask`` (prompts, frames, height, width) int64, 1 on each frame's
        pixels (with ``do_pad``)."""
        if not self.do_pad:
            return {}
        _, height, width = plans[0].output_shapes["pixel_values"][1:]
        starts = list(itertools.pairwise([0, *itertools.accumulate(sample_sizes)]))
        frames = [
            [size for p in plans[a:b] for _, size in self.frames(p.height, p.width)]
            for a, b in starts
        ]
        slots = max(map(len, frames))
        areas = [area for sample in frames for area in sample + [(0, 0)] * (slots - len(sample))]
        return {"pixel_attention_mask": area_mask((len(frames), slots, height, width), areas)}


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Idefics2Config:
    """Mirrors ``Idefics2ImageProcessorPil``'s class defaults and ``_standardize_kwargs``
    (``default_to_square`` off: an int size is a shortest edge), and the processor's
    ``image_seq_len`` (default 64)."""
    size_value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"shortest_edge": 378, "longest_edge": 980} if size_value is None else size_value,
        cfg.flag("default_to_square", False),
    )
    norm = cfg.normalization(IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD)
    return Idefics2Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=cfg.flag("do_resize", True),
        size=MappingProxyType(size),
        resample=cfg.resample(BILINEAR),
        do_image_splitting=cfg.flag("do_image_splitting", False),
        **norm.fields(),
        do_pad=cfg.flag("do_pad", True),
        image_seq_len=processor.positive_int("image_seq_len", 64),
    )


registry.register(
    registry.Family(
        name="idefics2",
        processor_types=("Idefics2ImageProcessor",),
        model_types={"idefics2": "Idefics2ImageProcessor"},
        build=_build,
        kwargs=frozenset({"do_image_splitting"}),
        processor_kwargs=frozenset({"image_seq_len"}),
        processor_classes={"Idefics2Processor": "idefics2"},
        processor_defaults={"Idefics2Processor": {}},
        hf_pil="idefics2.image_processing_pil_idefics2.Idefics2ImageProcessorPil",
        hf_torchvision="idefics2.image_processing_idefics2.Idefics2ImageProcessor",
    )
)

# HuggingFaceM4/idefics2-8b: no public copy of its files was found. Image splitting on (its
# model card tells how to turn it off to save memory), shortest/longest edge 378/980, bilinear
# and mean/std 0.5 are transformers' Idefics2 defaults and the model card's description; the
# processor's 64 image tokens are its perceiver's latents (Idefics2Processor's default).
registry.register_builtin(
    "HuggingFaceM4/idefics2-8b",
    "idefics2",
    {
        "do_convert_rgb": True,
        "do_image_splitting": True,
        "do_normalize": True,
        "do_pad": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_processor_type": "Idefics2ImageProcessor",
        "image_std": list(HALF),
        "processor_class": "Idefics2Processor",
        "resample": BILINEAR,
        "rescale_factor": 0.00392156862745098,
        "size": {"longest_edge": 980, "shortest_edge": 378},
    },
    {"image_seq_len": 64, "processor_class": "Idefics2Processor"},
)
