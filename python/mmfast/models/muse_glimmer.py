"""Muse Glimmer and Muse Spark: ``MuseGlimmerImageProcessor`` (transformers 5.24; torchvision
only).

An image is resized (Lanczos by default, antialiased) to the whole grid of ``patch_size *
merge_size`` squares closest to its aspect ratio with at most ``max_image_tokens`` squares
(:func:`smart_resize`), normalised with mean/std 0.5, and cut into ``patch_size`` patches in
raster order, each row laid out (time, channel, y, x): the still frame's (channel, y, x)
patch repeated ``temporal_patch_size`` times (Qwen's rows are (channel, time, y, x)): a
time-major :class:`Patchify`.

transformers has only the torchvision class: the plans always match it, under either backend
name (as for Llama 4).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.apertus1p5 import torch_resample
from mmfast.models.base import (
    HALF,
    LANCZOS,
    RGB,
    ImagePlan,
    ModelConfig,
    PatchGrid,
    Patchify,
    Resize,
    View,
    check_image_size,
    fused_tables,
    plan_constants,
)
from mmfast.models.config import Fields, Source
from mmfast.models.qwen2_vl import grid_thw

__all__ = ["MuseGlimmerConfig", "smart_resize"]


def smart_resize(height: int, width: int, patch_size: int, max_tokens: int) -> tuple[int, int]:
    """Mirrors ``image_processing_muse_glimmer.smart_resize`` step for step: the ideal grid
    of ``patch_size`` squares, shrunk (``** 0.5``) to ``max_tokens`` squares, its floor/ceil
    neighbours that fit, the one closest to the aspect ratio (the first in the order of
    ``list(set(...))``, as in HF, on ties)."""
    ideal_patches_height = height / patch_size
    ideal_patches_width = width / patch_size
    ratio = ideal_patches_width / ideal_patches_height if ideal_patches_height > 0 else 1.0
    if ideal_patches_height * ideal_patches_width > max_tokens:
        ideal_patches_height = (max_tokens / ratio) ** 0.5
        ideal_patches_width = ideal_patches_height * ratio
    candidates = list(
        set(
            itertools.product(
                [math.floor(ideal_patches_height), math.ceil(ideal_patches_height)],
                [math.floor(ideal_patches_width), math.ceil(ideal_patches_width)],
            )
        )
    )
    candidates = [
        (patches_height, patches_width)
        for patches_height, patches_width in candidates
        if patches_height >= 1
        and patches_width >= 1
        and patches_height * patches_width <= max_tokens
    ]
    if not candidates:
        candidates = [(max(1, round(ideal_patches_height)), max(1, round(ideal_patches_width)))]
    patches_height, patches_width = min(
        candidates, key=lambda grid: abs(grid[0] / grid[1] - height / width)
    )
    return patches_height * patch_size, patches_width * patch_size


@dataclass(frozen=True)
class MuseGlimmerConfig(ModelConfig):
    """Settings of ``MuseGlimmerImageProcessor``.

    ``num_image_tokens`` is the count of ``<|patch|>`` tokens ``MuseGlimmerProcessor`` and
    ``MuseSparkProcessor`` insert: ``image_grid_thw.prod() // merge_size**2`` (they wrap them
    in ``<|image_start|>`` and ``<|image_end|>``, which ``_get_num_multimodal_tokens`` does not
    count either).
    """

    model_id: str | None
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
    max_image_tokens: int

    # transformers has only the torchvision class, which every plan matches.
    backend: str = field(default="pil", kw_only=True)

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """The resize target: :func:`smart_resize` on ``patch_size * merge_size`` squares;
        without ``do_resize`` the input size, which ``patchify``'s view needs in whole
        patches."""
        if self.do_resize:
            return smart_resize(
                height, width, self.patch_size * self.merge_size, self.max_image_tokens
            )
        if height % self.patch_size or width % self.patch_size:
            raise MmfastError(
                f"image size: with do_resize=False both sides must be multiples of "
                f"patch_size={self.patch_size}, got {height}x{width}"
            )
        return height, width

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``MuseGlimmerImageProcessor._preprocess`` for one image: resize, rescale,
        normalise, patch rows (time, channel, y, x)."""
        check_image_size(height, width)
        size = self.resized_size(height, width)
        p, t = self.patch_size, self.temporal_patch_size
        grid = PatchGrid(p, t, self.merge_size, 1, size[0] // p, size[1] // p)
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=size,
            resample=self.resample,
            crop=None,
            canvas_size=None,
            **{**plan_constants(self), "backend": "torchvision"},
            compute_dtype="float32",
            patches=grid,
            tiles=None,
            output_shapes=MappingProxyType(
                {"pixel_values": (grid.num_patches, t * 3 * p * p), "image_grid_thw": (3,)}
            ),
            # MuseGlimmerProcessor.replace_image_token: image_grid_thw.prod() // merge**2
            num_image_tokens=grid.num_patches // self.merge_size**2,
            views=(
                View(
                    resize=Resize(size, self.resample, "torch") if self.do_resize else None,
                    out=Patchify(p, t, 1, time_major=True),
                ),
            ),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """The torchvision class's fused arithmetic (the uint8 pixels with rescale and
        normalise both off)."""
        return fused_tables(plan)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_grid_thw``: (B, 3) int64."""
        return {"image_grid_thw": grid_thw(plans)}


def _build(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> MuseGlimmerConfig:
    """Mirrors ``MuseGlimmerImageProcessor``'s class defaults. Its resize reads no ``size``
    (one in the file is only checked as a size dict)."""
    size = cfg.raw("size")
    if size is not None:
        cfg.size_dict("size", size, cfg.flag("default_to_square", False))
    norm = cfg.normalization(HALF, HALF)
    return MuseGlimmerConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=cfg.flag("do_resize", True),
        resample=torch_resample(cfg, LANCZOS),
        **norm.fields(),
        patch_size=cfg.positive_int("patch_size", 14),
        temporal_patch_size=cfg.positive_int("temporal_patch_size", 2),
        merge_size=cfg.positive_int("merge_size", 2),
        max_image_tokens=cfg.positive_int("max_image_tokens", 4096),
    )


registry.register(
    registry.Family(
        name="muse_glimmer",
        processor_types=("MuseGlimmerImageProcessor",),
        model_types={
            "muse_glimmer": "MuseGlimmerImageProcessor",
            "muse_spark": "MuseGlimmerImageProcessor",
        },
        build=_build,
        kwargs=frozenset({"patch_size", "temporal_patch_size", "merge_size", "max_image_tokens"}),
        processor_classes={
            "MuseGlimmerProcessor": "muse_glimmer",
            "MuseSparkProcessor": "muse_spark",
        },
        hf_torchvision="muse_glimmer.image_processing_muse_glimmer.MuseGlimmerImageProcessor",
    )
)

# meta-models/Muse-Glimmer-30B: the image_processor block of its processor_config.json, "the
# snapshot's, verbatim" in a serving project's parity bench, with the same values in another
# project's fixture and a third's validation of the published file (which also checks
# processor_class MuseGlimmerProcessor).
registry.register_builtin(
    "meta-models/Muse-Glimmer-30B",
    "muse_glimmer",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_processor_type": "MuseGlimmerImageProcessor",
        "image_std": list(HALF),
        "max_image_tokens": 4096,
        "merge_size": 2,
        "patch_size": 14,
        "resample": LANCZOS,
        "rescale_factor": 0.00392156862745098,
        "temporal_patch_size": 2,
    },
    {"processor_class": "MuseGlimmerProcessor"},
)
