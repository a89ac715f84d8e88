"""Gemma 3: ``Gemma3ImageProcessor`` (transformers 5.24) and ``Gemma3Processor``'s token count.

The image is squashed to ``size`` (896x896 bilinear for the checkpoints), rescaled and
normalised with mean/std 0.5. With pan-and-scan on, crops of the *original* image follow it,
each resized the same way (crop, then resize), and ``num_crops`` says how many. The checkpoints
leave ``do_convert_rgb`` and the pan-and-scan settings null; as in ``Gemma3Processor``, null
means converting to RGB, no pan-and-scan, a minimum crop of 256 pixels, at most 4 crops and an
aspect ratio of at least 1.2 to start cropping.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BILINEAR,
    HALF,
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
    ImagePlan,
    View,
    resizer,
)
from mmfast.models.config import Fields, Source
from mmfast.models.geometry import CropBox
from mmfast.models.pil_backend import PilBackendConfig, pil_backend_fields

__all__ = ["Gemma3Config", "pan_and_scan"]


def pan_and_scan(
    height: int,
    width: int,
    min_crop_size: int,
    max_num_crops: int,
    min_ratio_to_activate: float,
) -> list[CropBox]:
    """The crops ``Gemma3ImageProcessorPil.pan_and_scan`` cuts from a height x width image.

    Along the long side only: about ``long / short`` crops (half rounding up), at most
    ``long / min_crop_size`` and between 2 and ``max_num_crops``, each ``ceil(long / n)``
    long; none when the aspect ratio is under ``min_ratio_to_activate`` or a crop would be
    under ``min_crop_size``. HF slices a numpy array, so the last crop stops at the edge.
    """
    if width >= height:
        if width / height < min_ratio_to_activate:
            return []
        num_crops_w = math.floor(width / height + 0.5)
        num_crops_w = min(math.floor(width / min_crop_size), num_crops_w)
        num_crops_w = min(max_num_crops, max(2, num_crops_w))
        num_crops_h = 1
    else:
        if height / width < min_ratio_to_activate:
            return []
        num_crops_h = math.floor(height / width + 0.5)
        num_crops_h = min(math.floor(height / min_crop_size), num_crops_h)
        num_crops_h = min(max_num_crops, max(2, num_crops_h))
        num_crops_w = 1
    crop_size_w = math.ceil(width / num_crops_w)
    crop_size_h = math.ceil(height / num_crops_h)
    if min(crop_size_w, crop_size_h) < min_crop_size:
        return []
    boxes = []
    for pos_h, pos_w in itertools.product(
        (crop_size_h * i for i in range(num_crops_h)), (crop_size_w * i for i in range(num_crops_w))
    ):
        box = CropBox(
            pos_h, pos_w, min(crop_size_h, height - pos_h), min(crop_size_w, width - pos_w)
        )
        if box.height <= 0 or box.width <= 0:
            # HF slices an empty array here and fails when resizing it.
            raise MmfastError(
                f"pan and scan: a {height}x{width} image gives an empty crop at ({pos_h}, "
                f"{pos_w}) with pan_and_scan_min_crop_size={min_crop_size}"
            )
        boxes.append(box)
    return boxes


@dataclass(frozen=True)
class Gemma3Config(PilBackendConfig):
    """Settings of ``Gemma3ImageProcessor`` plus ``Gemma3Processor``'s ``image_seq_length``.

    ``num_image_tokens`` counts the ``<image_soft_token>`` tokens Gemma3Processor inserts:
    ``image_seq_length`` per view (the image and each pan-and-scan crop), as its
    ``_get_num_multimodal_tokens`` does. Each view's tokens are wrapped in
    ``<start_of_image>``/``<end_of_image>`` and blank lines, and crops add an English sentence:
    text whose token count depends on the tokenizer.
    """

    do_pan_and_scan: bool
    pan_and_scan_min_crop_size: int
    pan_and_scan_max_num_crops: int
    pan_and_scan_min_ratio_to_activate: float
    image_seq_length: int

    batch_layout: ClassVar[str] = "concat"
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"pixel_values": "rows", "num_crops": "ints"}
    )

    def count_tokens(self, height: int, width: int) -> int:
        """Soft tokens for one view."""
        return self.image_seq_length

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Gemma3ImageProcessorPil._preprocess``: the image, then its pan-and-scan
        crops, each resized, rescaled and normalised."""
        if self.backend == "torchvision" and self.do_pan_and_scan and not self.do_resize:
            # Gemma3ImageProcessor resizes the image and its crops whatever do_resize says.
            return replace(self, do_resize=True).plan(height, width)
        plan = super().plan(height, width)
        crops = (
            pan_and_scan(
                height,
                width,
                self.pan_and_scan_min_crop_size,
                self.pan_and_scan_max_num_crops,
                self.pan_and_scan_min_ratio_to_activate,
            )
            if self.do_pan_and_scan
            else []
        )
        views = [plan.views[0]]
        for box in crops:
            size = self.resize_size(box.height, box.width) if self.do_resize else None
            if (size or (box.height, box.width)) != plan.resize_size:
                # HF then returns views of different sizes, which cannot be stacked.
                raise MmfastError(
                    f"image size: a {height}x{width} image and its {box.height}x{box.width} "
                    "pan-and-scan crop give outputs of different sizes (do_resize is off)"
                )
            out = (CropBox(0, 0, *plan.resize_size),)
            views.append(
                View(
                    crop=box,
                    resize=None if size is None else resizer(self.backend, size, self.resample),
                    out=out,
                )
            )
        n = len(views)
        return replace(
            plan,
            output_shapes=MappingProxyType(
                {"pixel_values": (n, *plan.output_shapes["pixel_values"]), "num_crops": ()}
            ),
            num_image_tokens=n * self.image_seq_length,
            views=tuple(views),
        )

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``num_crops``: (B,) int64 pan-and-scan crops per image."""
        return {"num_crops": np.array([len(p.views) - 1 for p in plans], np.int64)}


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> Gemma3Config:
    """Mirrors ``Gemma3ImageProcessorPil``'s class defaults (``Gemma3Processor``'s image
    defaults arrive through the family's ``processor_defaults``)."""
    fields = pil_backend_fields(
        cfg,
        size={"height": 224, "width": 224},
        default_to_square=True,
        resample=BILINEAR,
        mean=IMAGENET_STANDARD_MEAN,
        std=IMAGENET_STANDARD_STD,
    )
    # Gemma3's _preprocess never centre-crops, whatever the config says.
    fields["do_center_crop"] = False
    ratio = cfg.number("pan_and_scan_min_ratio_to_activate", 1.2)
    return Gemma3Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **fields,
        do_pan_and_scan=cfg.flag("do_pan_and_scan", False),
        pan_and_scan_min_crop_size=cfg.positive_int("pan_and_scan_min_crop_size", 256),
        pan_and_scan_max_num_crops=cfg.positive_int("pan_and_scan_max_num_crops", 4),
        pan_and_scan_min_ratio_to_activate=ratio,
        image_seq_length=processor.positive_int("image_seq_length", 256),
    )


registry.register(
    registry.Family(
        name="gemma3",
        processor_types=("Gemma3ImageProcessor",),
        model_types={
            "gemma3": "Gemma3ImageProcessor",
            "shieldgemma2": "Gemma3ImageProcessor",
            # T5Gemma 2's processor is Gemma3Processor.
            "t5gemma2": "Gemma3ImageProcessor",
        },
        build=_build,
        kwargs=frozenset(
            {
                "do_pan_and_scan",
                "pan_and_scan_min_crop_size",
                "pan_and_scan_max_num_crops",
                "pan_and_scan_min_ratio_to_activate",
            }
        ),
        processor_kwargs=frozenset({"image_seq_length"}),
        processor_classes={"Gemma3Processor": "gemma3", "ShieldGemma2Processor": "shieldgemma2"},
        # Gemma3Processor.images_kwargs: the values the checkpoints leave null.
        processor_defaults={
            "Gemma3Processor": {
                "do_convert_rgb": True,
                "do_pan_and_scan": False,
                "pan_and_scan_min_crop_size": 256,
                "pan_and_scan_max_num_crops": 4,
                "pan_and_scan_min_ratio_to_activate": 1.2,
            },
            # Counts Gemma 3's way (image_seq_length per view); pan-and-scan off.
            "ShieldGemma2Processor": {"do_convert_rgb": True, "do_pan_and_scan": False},
        },
        hf_pil="gemma3.image_processing_pil_gemma3.Gemma3ImageProcessorPil",
        hf_torchvision="gemma3.image_processing_gemma3.Gemma3ImageProcessor",
    )
)

# google/gemma-3-4b-it: the file verbatim from a training script that restores it into Gemma 3
# checkpoints, with agreeing copies in three other projects; processor_config.json
# {"image_seq_length": 256, "processor_class": "Gemma3Processor"} from a writer of
# checkpoint-compatible files.
registry.register_builtin(
    "google/gemma-3-4b-it",
    "gemma3",
    {
        "do_convert_rgb": None,
        "do_normalize": True,
        "do_pan_and_scan": None,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_processor_type": "Gemma3ImageProcessor",
        "image_seq_length": 256,
        "image_std": list(HALF),
        "pan_and_scan_max_num_crops": None,
        "pan_and_scan_min_crop_size": None,
        "pan_and_scan_min_ratio_to_activate": None,
        "processor_class": "Gemma3Processor",
        "resample": BILINEAR,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 896, "width": 896},
    },
    {"image_seq_length": 256, "processor_class": "Gemma3Processor"},
)
