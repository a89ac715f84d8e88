"""Kimi-K2.5 / K2.6: the checkpoint's own ``KimiK25VisionProcessor`` (remote code, which vLLM
and SGLang run).

The reference is the processor shipped with ``moonshotai/Kimi-K2.5`` (and its
``media_utils.py``), configured by the ``media_proc_cfg`` block of its
``preprocessor_config.json``: the image is converted with ``convert("RGB")``, shrunk (never
grown) to fit ``in_patch_limit`` patches and ``patch_limit_on_one_side`` patches a side
(``int()`` truncation) with Pillow's bicubic filter, zero-padded at the right and bottom to a
multiple of the merged patch, normalised in NumPy (``x / 255.0`` in float64 cast to float32,
``-= mean`` and ``*= 1 / std`` with float64 constants) and cut into row-major (3, 14, 14)
patches, returned with ``grid_thws``: that is ``backend="pil"``.

transformers' own ``Kimi_K25ImageProcessor`` (torchvision only) is what ``AutoImageProcessor``
loads for the model type ``kimi_k25``, and for these checkpoints when ``trust_remote_code`` is
not given: the same sizes (its ``navit_resize``; ``max_patches``, ``size["max_height"]`` and
``merge_size`` are ``in_patch_limit``, ``patch_limit_on_one_side`` and ``merge_kernel_size``)
but transformers' RGB conversion (transparency onto white), torch's resize with the config's
``resample``, its fused float32 normalisation and the key ``image_grid_thw``. It is its own
family here (:class:`KimiK25ImageConfig`, read from transformers' settings, which
``mmfast.hf`` backs). ``backend="torchvision"`` on a remote-code config gives that class with the
``media_proc_cfg`` values as its settings, under the class's own keys where the file or the
overrides give them (``do_normalize``, ``resample``, ``max_patches``, ...).

transformers' video processor, ``Kimi_K25VideoProcessor`` (what AutoVideoProcessor loads for
the model type, these checkpoints included: their files name no video class), samples ``fps``
frames a second (2) with the base sampler, cuts each clip into chunks of
``temporal_patch_size`` (4) frames, the last possibly shorter and not padded, and sizes every
frame as the image class does (``navit_resize`` with ``max_patches`` 4096, uint8 zero padding
to the merged patch): raster-order (3, 14, 14) patches of each frame, one ``video_grid_thw``
row ``(frames, rows, columns)`` per chunk and ``num_chunks_per_video``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, cast

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    HALF,
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
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
    frozen,
    plan_constants,
    resizer,
)
from mmfast.models.base_video import positive_number
from mmfast.models.config import Fields, Source
from mmfast.models.kimi_vl import patch_grid_outputs

__all__ = [
    "KimiK25Config",
    "KimiK25ImageConfig",
    "KimiK25VideoConfig",
    "navit_resize_image",
    "numpy_tables",
]


def navit_resize_image(
    width: int,
    height: int,
    patch_size: int,
    merge_kernel_size: int,
    in_patch_limit: int,
    patch_limit_on_one_side: int,
) -> tuple[tuple[int, int], tuple[int, int]]:
    """((new_height, new_width), (pad_height, pad_width)) for an image.

    Mirrors ``media_utils.navit_resize_image`` (argument order included): the smallest of 1,
    ``sqrt(in_patch_limit / patches)`` and the per-side limits, ``int()`` truncation, each
    side at least 1 and at most ``patch_limit_on_one_side * patch_size``; then the padding to
    a multiple of ``merge_kernel_size * patch_size``.
    """
    s1 = math.sqrt(
        in_patch_limit / (max(1.0, width // patch_size) * max(1.0, height // patch_size))
    )
    s2 = patch_limit_on_one_side * patch_size / width
    s3 = patch_limit_on_one_side * patch_size / height
    scale = min(1.0, s1, s2, s3)
    new_w, new_h = max(1, int(width * scale)), max(1, int(height * scale))
    new_w = min(new_w, patch_limit_on_one_side * patch_size)
    new_h = min(new_h, patch_limit_on_one_side * patch_size)
    factor = merge_kernel_size * patch_size
    pad_height = (factor - new_h % factor) % factor
    pad_width = (factor - new_w % factor) % factor
    return (new_h, new_w), (pad_height, pad_width)


@functools.lru_cache(maxsize=64)
def numpy_tables(mean: RGB, std: RGB) -> NDArray[np.float32]:
    """(3, 256) float32: ``media_utils.normalize`` of every uint8 value, per channel, made
    once per mean and std (read-only, shared by every call).

    ``x / 255.0`` is a float64 division cast to float32; ``x -= mean`` and ``x *= std_inv``
    (``std_inv = 1.0 / np.array(std)``) compute in float64 and store float32, exactly as the
    in-place NumPy operations on the float32 image do.
    """
    x = (np.repeat(np.arange(256, dtype=np.uint8)[:, None], 3, axis=1) / 255.0).astype(np.float32)
    x -= np.array(mean)
    x *= 1.0 / np.array(std)
    return frozen(np.ascontiguousarray(x.T))


@dataclass(frozen=True)
class KimiK25ImageConfig(ModelConfig):
    """Settings of transformers' ``Kimi_K25ImageProcessor`` (torchvision only).

    ``max_size_per_side`` is ``size["max_height"]`` (the class requires ``max_width`` equal).
    ``num_image_tokens`` is the count of ``<|media_pad|>`` tokens
    ``Kimi_K25Processor.replace_image_token`` inserts: ``image_grid_thw.prod() //
    merge_size**2``.
    """

    model_id: str | None
    image_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    max_size_per_side: int
    max_patches: int
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    patch_size: int
    merge_size: int

    # transformers has only the torchvision class.
    backend: str = field(default="torchvision", kw_only=True)

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``Kimi_K25ImageProcessor._preprocess`` for one image: ``navit_resize`` (the
        same arithmetic as :func:`navit_resize_image`), resize, uint8 zero pad at the bottom
        and right (``self.pad``), rescale, normalise, raster-order (3, p, p) patches."""
        check_image_size(height, width)
        p = self.patch_size
        if self.do_resize:
            resized, (pad_h, pad_w) = navit_resize_image(
                width, height, p, self.merge_size, self.max_patches, self.max_size_per_side
            )
            canvas = (resized[0] + pad_h, resized[1] + pad_w)
        else:
            # patchify's reshape needs sides divisible by the patch (a RuntimeError in torch).
            if height % p or width % p:
                raise MmfastError(
                    f"image size: with do_resize=False both sides must be multiples of "
                    f"patch_size={p}, got {height}x{width}"
                )
            resized = canvas = (height, width)
        grid = PatchGrid(p, 1, 1, 1, canvas[0] // p, canvas[1] // p)
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=self.do_convert_rgb,
            do_resize=self.do_resize,
            resize_size=resized,
            resample=self.resample,
            crop=None,
            canvas_size=canvas,
            **plan_constants(self),
            compute_dtype="float32",
            patches=grid,
            tiles=None,
            output_shapes=MappingProxyType(
                {"pixel_values": (grid.num_patches, 3, p, p), "image_grid_thw": (3,)}
            ),
            num_image_tokens=grid.num_patches // self.merge_size**2,
            views=(
                View(
                    resize=resizer(self.backend, resized, self.resample)
                    if self.do_resize
                    else None,
                    pad=Pad(canvas) if canvas != resized else None,
                    out=Patchify(p, 1, 1),
                ),
            ),
        )

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``image_grid_thw``: (B, 3) int64 ``(1, patch rows, patch columns)``."""
        return patch_grid_outputs(plans, "image_grid_thw", temporal=True)


@dataclass(frozen=True)
class KimiK25Config(ModelConfig):
    """Settings of Kimi-K2.5's ``KimiK25VisionProcessor`` (its ``media_proc_cfg``).

    ``num_image_tokens`` is the count of ``<|media_pad|>`` tokens the processor's
    ``media_tokens_calculator`` gives: the merged patches, or ``fixed_output_tokens`` when set.
    """

    model_id: str | None
    image_processor_type: str
    patch_size: int
    merge_kernel_size: int
    in_patch_limit: int
    patch_limit_on_one_side: int
    fixed_output_tokens: int | None
    image_mean: RGB
    image_std: RGB
    # transformers' class with these values and the file's and overrides' own settings for
    # it: what ``backend="torchvision"`` matches; or why those settings refuse it, which only
    # that backend says (the checkpoint's processor does not read them).
    transformers_class: KimiK25ImageConfig | str

    # Which transformers backend the plan matches: "pil" or "torchvision".
    backend: str = field(default="pil", kw_only=True)

    def __post_init__(self) -> None:
        if self.backend == "torchvision" and isinstance(self.transformers_class, str):
            raise MmfastError(self.transformers_class)

    @property
    def pil_convert(self) -> str:
        """The checkpoint's processor calls ``convert("RGB")``; transformers' class, HF's."""
        return "rgb" if self.backend == "pil" else "hf"

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``KimiK25VisionProcessor.preprocess`` for one image (``backend="pil"``), or
        :attr:`transformers_class`'s plan."""
        if self.backend == "torchvision":
            return cast(KimiK25ImageConfig, self.transformers_class).plan(height, width)
        check_image_size(height, width)
        p = self.patch_size
        resized, (pad_h, pad_w) = navit_resize_image(
            width,
            height,
            p,
            self.merge_kernel_size,
            self.in_patch_limit,
            self.patch_limit_on_one_side,
        )
        canvas = (resized[0] + pad_h, resized[1] + pad_w)
        grid = PatchGrid(p, 1, 1, 1, canvas[0] // p, canvas[1] // p)
        factor = self.merge_kernel_size * p
        tokens = (canvas[0] // factor) * (canvas[1] // factor)
        return ImagePlan(
            height=height,
            width=width,
            do_convert_rgb=True,
            do_resize=True,
            resize_size=resized,
            resample=BICUBIC,
            crop=None,
            canvas_size=canvas,
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
                {"pixel_values": (grid.num_patches, 3, p, p), "grid_thws": (3,)}
            ),
            num_image_tokens=tokens
            if self.fixed_output_tokens is None
            else self.fixed_output_tokens,
            views=(
                View(
                    resize=resizer(self.backend, resized, BICUBIC),
                    pad=Pad(canvas),
                    out=Patchify(p, 1, 1),
                ),
            ),
        )

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """``media_utils.normalize``'s arithmetic, or transformers' fused one."""
        if self.backend == "pil":
            return numpy_tables(self.image_mean, self.image_std)
        return super().tables(plan)

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """``grid_thws`` (``image_grid_thw`` for transformers' class): (B, 3) int64
        ``(1, patch rows, patch columns)``."""
        key = "grid_thws" if self.backend == "pil" else "image_grid_thw"
        return patch_grid_outputs(plans, key, temporal=True)


_MEDIA_KEYS = frozenset(
    {
        "patch_size",
        "merge_kernel_size",
        "in_patch_limit",
        "patch_limit_on_one_side",
        "fixed_output_tokens",
        "image_mean",
        "image_std",
    }
)


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> KimiK25Config:
    """Reads ``media_proc_cfg`` (``KimiK25VisionProcessor.from_dict``); keyword overrides of
    its image keys replace the file's. Missing keys take the checkpoint's values. The
    torchvision backend's class takes them as its ``max_patches``, ``size``, ``merge_size``,
    ``patch_size``, mean and std where the file and the overrides do not give its own keys;
    the class's other settings (``do_normalize``, ``resample``, ...), which the checkpoint's
    own processor does not read, are read as :func:`_build_image` reads them."""
    block = cfg.raw("media_proc_cfg")
    if block is not None and not isinstance(block, dict):
        raise cfg.error("media_proc_cfg", "an object", block)
    overrides = {k: cfg.raw(k) for k in _MEDIA_KEYS if cfg.raw(k) is not None}
    media = cfg.nested("media_proc_cfg", {**(block or {}), **overrides})
    fixed = media.raw("fixed_output_tokens")
    patch_size = media.positive_int("patch_size", 14)
    merge_kernel_size = media.positive_int("merge_kernel_size", 2)
    in_patch_limit = media.positive_int("in_patch_limit", 16384)
    side = media.positive_int("patch_limit_on_one_side", 512)
    mean, std = media.rgb("image_mean", HALF), media.rgb("image_std", HALF, nonzero=True)
    as_class = {
        "patch_size": patch_size,
        "merge_size": merge_kernel_size,
        "max_patches": in_patch_limit,
        "size": {"max_height": side, "max_width": side},
        "image_mean": list(mean),
        "image_std": list(std),
    }
    own = cfg.with_values(**{k: v for k, v in as_class.items() if cfg.raw(k) is None})
    transformers_class: KimiK25ImageConfig | str
    try:
        transformers_class = _build_image(source, "Kimi_K25ImageProcessor", own, processor)
    except MmfastError as exc:
        transformers_class = str(exc)
    return KimiK25Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        patch_size=patch_size,
        merge_kernel_size=merge_kernel_size,
        in_patch_limit=in_patch_limit,
        patch_limit_on_one_side=side,
        fixed_output_tokens=None if fixed is None else media.positive_int("fixed_output_tokens", 0),
        image_mean=mean,
        image_std=std,
        transformers_class=transformers_class,
    )


_HF_CLASS = "kimi_k25.image_processing_kimi_k25.Kimi_K25ImageProcessor"
# Kimi_K25ImageProcessor's own settings (beside transformers' common ones).
_CLASS_KEYS = frozenset({"max_patches", "patch_size", "merge_size"})
# The checkpoint's remote-code processor: chosen by a config's auto_map (or its
# image_processor_type), never by model type, which AutoImageProcessor sends to transformers'
# class. Its torchvision backend is that class, configured by media_proc_cfg.
registry.register(
    registry.Family(
        name="kimi_k25",
        processor_types=("KimiK25VisionProcessor",),
        model_types={},
        build=_build,
        kwargs=_MEDIA_KEYS | _CLASS_KEYS | {"media_proc_cfg"},
        hf_torchvision=_HF_CLASS,
    )
)


def _build_image(
    source: Source, processor_type: str, cfg: Fields, processor: Fields
) -> KimiK25ImageConfig:
    """Mirrors ``Kimi_K25ImageProcessor``'s class defaults and its
    ``_validate_preprocess_kwargs`` (``size`` needs ``max_height`` and an equal ``max_width``).
    A ``media_proc_cfg`` block in the file is not read: the class ignores it."""
    size_value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"max_height": 512, "max_width": 512} if size_value is None else size_value,
        cfg.flag("default_to_square", True),
    )
    if "max_height" not in size or size.get("max_width") != size["max_height"]:
        raise cfg.error("size", "max_height and max_width keys with identical values", size)
    norm = cfg.normalization(IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD)
    return KimiK25ImageConfig(
        model_id=source.model_id,
        image_processor_type=processor_type,
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=cfg.flag("do_resize", True),
        max_size_per_side=size["max_height"],
        max_patches=cfg.positive_int("max_patches", 16384),
        resample=cfg.torch_resample(BICUBIC),
        **norm.fields(),
        patch_size=cfg.positive_int("patch_size", 14),
        merge_size=cfg.positive_int("merge_size", 2),
    )


# transformers' own class: what AutoImageProcessor loads for model type kimi_k25 (and for the
# checkpoints above without trust_remote_code), and what mmfast.hf backs.
registry.register(
    registry.Family(
        name="kimi_k25_transformers",
        processor_types=("Kimi_K25ImageProcessor",),
        model_types={"kimi_k25": "Kimi_K25ImageProcessor"},
        build=_build_image,
        kwargs=_CLASS_KEYS,
        processor_classes={"Kimi_K25Processor": "kimi_k25"},
        hf_torchvision=_HF_CLASS,
        backends=("torchvision",),
    )
)

# --------------------------------------------------------------------------------------------
# Video: Kimi_K25VideoProcessor (transformers 5.24; torchvision only)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KimiK25VideoPlan(VideoPlan):
    """A Kimi-K2.5 clip's plan, with each chunk's ``(frames, rows, columns)`` patch grid."""

    grids: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class KimiK25VideoConfig(VideoConfig):
    """Settings of transformers' ``Kimi_K25VideoProcessor``.

    ``max_size_per_side`` is ``size["max_height"]`` (the class requires ``max_width`` equal).
    ``num_video_tokens`` is the count of ``<|kimi_k25_video_placeholder|>`` tokens
    ``Kimi_K25Processor.replace_video_token`` inserts: one frame's merged patches per chunk,
    ``chunks * rows * columns // merge_size**2``.
    """

    model_id: str | None
    video_processor_type: str
    do_convert_rgb: bool
    do_resize: bool
    max_size_per_side: int
    max_patches: int
    resample: int
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    patch_size: int
    temporal_patch_size: int
    merge_size: int
    do_sample_frames: bool
    fps: float | None
    num_frames: int | None

    # transformers returns num_chunks_per_video as a list of ints.
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({"num_chunks_per_video": "ints"})

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """Mirrors the base ``sample_frames`` (``default_sample_indices_fn``): ``num_frames``
        evenly spaced frames, else ``fps`` frames a second (the config's 2 without a call's).
        A call's ``num_frames`` replaces the config's ``fps`` (transformers raises unless the
        call also passes ``fps=None``)."""
        from mmfast.video import default_sample_indices

        fps, num_frames = self.sampling(fps, num_frames)
        indices: list[int] = default_sample_indices(metadata, num_frames, fps).tolist()
        return indices

    def plan(self, frames: int, height: int, width: int) -> KimiK25VideoPlan:
        """Mirrors ``_preprocess`` for one clip: chunks of ``temporal_patch_size`` frames,
        each frame resized by ``navit_resize`` (the same arithmetic as
        :func:`navit_resize_image`), zero-padded at the bottom and right (``self.pad``),
        rescaled, normalised and cut into raster-order (3, p, p) patches."""
        check_image_size(height, width)
        p = self.patch_size
        if self.do_resize:
            resized, (pad_h, pad_w) = navit_resize_image(
                width, height, p, self.merge_size, self.max_patches, self.max_size_per_side
            )
            canvas = (resized[0] + pad_h, resized[1] + pad_w)
        else:
            # patchify's view needs sides divisible by the patch (a RuntimeError in torch).
            if height % p or width % p:
                raise MmfastError(
                    f"video size: with do_resize=False both sides must be multiples of "
                    f"patch_size={p}, got {height}x{width}"
                )
            resized = canvas = (height, width)
        view = View(
            resize=Resize(resized, self.resample, "torch") if self.do_resize else None,
            pad=Pad(canvas) if canvas != resized else None,
            out=Patchify(p, 1, 1),
        )
        grid_h, grid_w = canvas[0] // p, canvas[1] // p
        t = self.temporal_patch_size
        grids = tuple((min(t, frames - c), grid_h, grid_w) for c in range(0, frames, t))
        rows = frames * grid_h * grid_w
        return KimiK25VideoPlan(
            height=height,
            width=width,
            frames=frames,
            views=tuple(((i,), view) for i in range(frames)),
            output_shapes=MappingProxyType({"pixel_values_videos": (rows, 3, p, p)}),
            num_video_tokens=len(grids) * (grid_h * grid_w // self.merge_size**2),
            grids=grids,
        )

    def batch_outputs(self, plans: Sequence[VideoPlan]) -> dict[str, Any]:
        """``video_grid_thw`` (chunks, 3) int64, one row per chunk of every clip, and
        ``num_chunks_per_video`` (clips,) int64."""
        grids = [grid for plan in plans for grid in cast("KimiK25VideoPlan", plan).grids]
        chunks = [len(cast("KimiK25VideoPlan", plan).grids) for plan in plans]
        return {
            "video_grid_thw": np.array(grids, np.int64).reshape(-1, 3),
            "num_chunks_per_video": np.array(chunks, np.int64),
        }


def _build_video(model_id: str | None, cfg: Fields) -> KimiK25VideoConfig:
    """Mirrors ``Kimi_K25VideoProcessor``'s class defaults and its
    ``_validate_preprocess_kwargs`` (``size`` needs ``max_height`` and an equal
    ``max_width``). A ``media_proc_cfg`` block in the file is not read: the class ignores it."""
    size_value = cfg.raw("size")
    size = cfg.size_dict(
        "size",
        {"max_height": 512, "max_width": 512} if size_value is None else size_value,
        cfg.flag("default_to_square", True),
    )
    if "max_height" not in size or size.get("max_width") != size["max_height"]:
        raise cfg.error("size", "max_height and max_width keys with identical values", size)
    norm = cfg.normalization(IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD)
    num_frames = cfg.raw("num_frames")
    return KimiK25VideoConfig(
        model_id=model_id,
        video_processor_type="Kimi_K25VideoProcessor",
        do_convert_rgb=cfg.convert_rgb(),
        do_resize=cfg.flag("do_resize", True),
        max_size_per_side=size["max_height"],
        max_patches=cfg.positive_int("max_patches", 4096),
        resample=cfg.torch_resample(BICUBIC),
        **norm.fields(),
        patch_size=cfg.positive_int("patch_size", 14),
        temporal_patch_size=cfg.positive_int("temporal_patch_size", 4),
        merge_size=cfg.positive_int("merge_size", 2),
        do_sample_frames=cfg.flag("do_sample_frames", True),
        fps=positive_number(cfg, "fps", 2.0),
        num_frames=None if num_frames is None else cfg.positive_int("num_frames", 1),
    )


registry.register_video(
    registry.VideoFamily(
        processor_type="Kimi_K25VideoProcessor",
        model_types=("kimi_k25",),
        build=_build_video,
        kwargs=frozenset({"max_patches", "patch_size", "merge_size", "temporal_patch_size"}),
        # _preprocess resizes, pads to the merged patch (its own), normalises and patchifies.
        ignores=frozenset({"do_center_crop", "crop_size", "do_pad", "pad_size"}),
    )
)


# moonshotai/Kimi-K2.5 and Kimi-K2.6: the image keys of media_proc_cfg agree across four copies
# that mirror the checkpoint (a port's defaults "matching the ckpt-side outputs", another
# port's _DEFAULT_MEDIA_PROC_CFG, a config-driven module, a model-card digest); K2.6's file is
# reported byte-identical to K2.5's. The video keys are listed for completeness. The auto_map
# naming the remote-code processor is asserted by a public bundle derived from K2.6's files
# (its test checks preprocessor_config.json's auto_map); config_type was not seen.
_K25 = {
    "auto_map": {"AutoImageProcessor": "kimi_k25_vision_processing.KimiK25VisionProcessor"},
    "media_proc_cfg": {
        "in_patch_limit": 16384,
        "patch_size": 14,
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "merge_kernel_size": 2,
        "fixed_output_tokens": None,
        "patch_limit_on_one_side": 512,
        "in_patch_limit_each_frame": 4096,
        "in_patch_limit_video": None,
        "sample_fps": 2.0,
        "max_num_frames_each_video": None,
        "temporal_merge_kernel_size": 4,
        "timestamp_mode": "hh:mm:ss.fff",
    },
}
registry.register_builtin("moonshotai/Kimi-K2.5", "kimi_k25", _K25)
registry.register_builtin("moonshotai/Kimi-K2.6", "kimi_k25", _K25)
