"""Kimi-VL: the checkpoint's own ``KimiVLImageProcessor`` (remote code, which vLLM and SGLang run).

transformers has no class for Kimi-VL, so the reference is the processor shipped in
``moonshotai/Kimi-VL-A3B-Instruct`` (``image_processing_kimi_vl.py``): an image with more than
``in_token_limit`` patches is shrunk by ``sqrt(limit / patches)`` (``int()`` truncation) with
Pillow's bicubic filter, padded at the right and bottom with black to a multiple of the merged
patch (``pad_input``; otherwise centre-cropped to whole patches), converted with torchvision's
``to_tensor`` (a float32 division by 255) and ``normalize`` (float32 subtract, then divide),
and cut into row-major (3, 14, 14) patches. The processor resizes and pads a PIL image in its
own mode before converting it to RGB; mmfast does the same in Pillow for modes other than RGB
and L (for those two the order makes no difference).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    HALF,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    RGB,
    ImagePlan,
    ModelConfig,
    Pad,
    PatchGrid,
    Patchify,
    Resize,
    View,
    check_image_size,
    frozen,
)
from mmfast.models.config import MAX_INT, Fields, Source, is_int_in
from mmfast.models.geometry import CropBox

__all__ = ["KimiVLConfig", "patch_grid_outputs", "torchvision_tables"]


@functools.lru_cache(maxsize=64)
def torchvision_tables(mean: RGB, std: RGB) -> NDArray[np.float32]:
    """(3, 256) float32: ``TF.normalize(TF.to_tensor(x), mean, std)`` for every uint8 value,
    made once per mean and std (read-only, shared by every call).

    ``to_tensor`` divides the float32 value by 255 (a division, not a multiplication by
    1/255), ``normalize`` subtracts the float32 mean and divides by the float32 std.
    """
    x = np.arange(256, dtype=np.float32) / np.float32(255)
    rows = [(x - np.float32(m)) / np.float32(s) for m, s in zip(mean, std, strict=True)]
    return frozen(np.stack(rows).astype(np.float32))


def patch_grid_outputs(plans: Sequence[ImagePlan], key: str, temporal: bool) -> dict[str, Any]:
    """``{key: (B, 2 or 3) int64}``: each image's patch grid, ``(1, h, w)`` with ``temporal``."""
    rows = [
        ((1,) if temporal else ()) + (p.patches.grid_h, p.patches.grid_w)
        for p in plans
        if p.patches
    ]
    return {key: np.array(rows, np.int64).reshape(-1, 2 + temporal)}


@dataclass(frozen=True)
class KimiVLConfig(ModelConfig):
    """Settings of Kimi-VL's ``KimiVLImageProcessor``.

    ``num_image_tokens`` is the count of ``<|media_pad|>`` tokens ``KimiVLProcessor`` inserts:
    ``image_grid_hws.prod() // (merge_kernel_size[0] * merge_kernel_size[1])``.
    """

    model_id: str | None
    image_processor_type: str
    patch_size: int
    pad_input: bool
    image_mean: RGB
    image_std: RGB
    in_token_limit: int
    merge_kernel_size: tuple[int, int]

    # Which transformers backend the plan matches: "pil" or "torchvision".
    backend: str = field(default="pil", kw_only=True)

    @property
    def pil_convert(self) -> str:
        """The processor resizes and pads the image in its own mode, then converts it."""
        return "resize_then_rgb"

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """``KimiVLImageProcessor.rescale``'s resize target (the input size when it fits)."""
        p = self.patch_size
        patches = (width // p) * (height // p)
        if patches <= self.in_token_limit:
            return height, width
        scale = math.sqrt(self.in_token_limit / patches)
        new_h, new_w = int(height * scale), int(width * scale)
        if new_h < 1 or new_w < 1:
            raise MmfastError(
                f"image size: {height}x{width} shrinks to {new_h}x{new_w} under "
                f"in_token_limit={self.in_token_limit}, which Pillow cannot resize to"
            )
        return new_h, new_w

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``KimiVLImageProcessor._preprocess`` for one image."""
        check_image_size(height, width)
        p = self.patch_size
        resized = self.resized_size(height, width)
        resize = Resize(resized, BICUBIC) if resized != (height, width) else None
        views: tuple[View, ...]
        crop = None
        if self.pad_input:
            unit_h, unit_w = (k * p for k in self.merge_kernel_size)
            canvas = (-(-resized[0] // unit_h) * unit_h, -(-resized[1] // unit_w) * unit_w)
            views = (View(resize=resize, pad=Pad(canvas), out=Patchify(p, 1, 1)),)
        else:
            canvas = (resized[0] - resized[0] % p, resized[1] - resized[1] % p)
            if min(canvas) < 1:
                raise MmfastError(
                    f"image size: {height}x{width} is smaller than one {p}x{p} patch and "
                    "pad_input is off"
                )
            # torchvision's center_crop: int(round(excess / 2.0)), half to even.
            crop = CropBox(
                round((resized[0] - canvas[0]) / 2.0),
                round((resized[1] - canvas[1]) / 2.0),
                *canvas,
            )
            views = (View(resize=resize), View(source=0, crop=crop, out=Patchify(p, 1, 1)))
        grid_h, grid_w = canvas[0] // p, canvas[1] // p
        if grid_h >= 512 or grid_w >= 512:
            raise MmfastError(
                f"image size: {height}x{width} gives a {grid_h}x{grid_w} patch grid; the "
                "position embedding allows fewer than 512 patches a side"
            )
        grid = PatchGrid(p, 1, 1, 1, grid_h, grid_w)
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=True,
            do_resize=resize is not None,
            resize_size=resized,
            resample=BICUBIC,
            crop=crop,
            canvas_size=canvas if self.pad_input else None,
            do_rescale=True,
            rescale_factor=1 / 255,
            do_normalize=True,
            image_mean=self.image_mean,
            image_std=self.image_std,
            compute_dtype="float32",
            backend=self.backend,
            patches=grid,
            tiles=None,
            output_shapes=MappingProxyType(
                {"pixel_values": (grid_h * grid_w, 3, p, p), "image_grid_hws": (2,)}
            ),
            num_image_tokens=grid_h * grid_w // math.prod(self.merge_kernel_size),
            views=views,
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """torchvision's ``to_tensor`` + ``normalize`` arithmetic."""
        return torchvision_tables(self.image_mean, self.image_std)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_grid_hws``: (B, 2) int64 patch rows and columns."""
        return patch_grid_outputs(plans, "image_grid_hws", temporal=False)


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> KimiVLConfig:
    """Mirrors ``KimiVLImageProcessor.__init__``'s defaults."""
    kernel = cfg.raw("merge_kernel_size")
    if kernel is None:
        kernel = [2, 2]
    if (
        not isinstance(kernel, list | tuple)
        or len(kernel) != 2
        or not all(is_int_in(k, 1, MAX_INT) for k in kernel)
    ):
        raise cfg.error("merge_kernel_size", "a [height, width] pair of positive integers", kernel)
    return KimiVLConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        patch_size=cfg.positive_int("patch_size", 14),
        pad_input=cfg.flag("pad_input", False),
        image_mean=cfg.rgb("image_mean", OPENAI_CLIP_MEAN),
        image_std=cfg.rgb("image_std", OPENAI_CLIP_STD, nonzero=True),
        in_token_limit=cfg.positive_int("in_token_limit", 4096),
        merge_kernel_size=(kernel[0], kernel[1]),
    )


registry.register(
    registry.Family(
        name="kimi_vl",
        processor_types=("KimiVLImageProcessor",),
        model_types={},
        build=_build,
        # The checkpoint's processor resizes with Pillow; transformers has no class for it.
        backends=("pil",),
        kwargs=frozenset(
            {"patch_size", "pad_input", "in_token_limit", "merge_kernel_size", "num_pooled_tokens"}
        ),
    )
)

# moonshotai/Kimi-VL-A3B-Instruct: in_token_limit 4096, pad_input, merge [2, 2], patch 14 and
# num_pooled_tokens 1024 from a fine-tune's config fixture ("the real per-row config ... minus
# the auto_map / mean / std keys"); mean/std 0.5 are what ports of the checkpoint (an MLX
# port, MoonViT-derived configs) use, not seen verbatim. The Thinking-2506 checkpoint raises
# in_token_limit to 16384 (a deployment guide quoting its file).
_KIMI_VL = {
    "image_processor_type": "KimiVLImageProcessor",
    "processor_class": "KimiVLProcessor",
    "in_token_limit": 4096,
    "patch_size": 14,
    "num_pooled_tokens": 1024,
    "merge_kernel_size": [2, 2],
    "pad_input": True,
    "image_mean": list(HALF),
    "image_std": list(HALF),
}
registry.register_builtin("moonshotai/Kimi-VL-A3B-Instruct", "kimi_vl", _KIMI_VL)
registry.register_builtin(
    "moonshotai/Kimi-VL-A3B-Thinking-2506", "kimi_vl", {**_KIMI_VL, "in_token_limit": 16384}
)
