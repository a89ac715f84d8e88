"""Model processors: images in, the tensors transformers would return out.

:class:`ImageProcessor` reads a config (:mod:`mmfast.models` decides every size, window
and constant, mirroring HF), turns each image into plain-number jobs and hands the
whole batch to the Rust core in one call: all pixel work for all images runs with
the GIL released once, in parallel across images, each image written straight into
its slot of the final output.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import ml_dtypes
import numpy as np
from numpy.typing import NDArray
from PIL import Image

from mmfast import _native, reference
from mmfast.errors import MmfastError
from mmfast.image import ArrowSource, ImageSource, arrow_source, decode_image, rgb_or_gray
from mmfast.models import ImagePlan, Llama4Config, ModelConfig, load_config

__all__ = [
    "BatchFeature",
    "ImageInput",
    "ImageProcessor",
    "default_threads",
    "parse_threads",
]

ImageInput = Image.Image | NDArray[np.uint8] | ImageSource
Dtype = Literal["float32", "bfloat16"]


def parse_threads(arg: str, value: str) -> int:
    """A thread count given as text (``arg`` names where: a variable, a flag), at least 1."""
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if threads < 1:
        raise MmfastError(f"{arg}: expected a positive integer, got {value!r}")
    return threads


def default_threads() -> int:
    """``MMFAST_NUM_THREADS`` if set, else the cores this process may run on."""
    env = os.environ.get("MMFAST_NUM_THREADS")
    if env is not None:
        return parse_threads("MMFAST_NUM_THREADS", env)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class BatchFeature(Mapping[str, np.ndarray]):
    """Output arrays by name (``pixel_values``, ...), as a mapping and as attributes."""

    def __init__(self, data: Mapping[str, np.ndarray]) -> None:
        self._data = dict(data)

    def __getitem__(self, key: str) -> np.ndarray:
        return self._data[key]

    def __getattr__(self, key: str) -> np.ndarray:
        try:
            return self._data[key]
        except KeyError:
            raise AttributeError(key) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}: {v.dtype}{list(v.shape)}" for k, v in self._data.items())
        return f"BatchFeature({items})"


BatchInput = NDArray[np.uint8] | ArrowSource


def to_batch_input(image: ImageInput) -> tuple[BatchInput, tuple[int, int]]:
    """One input image → what the core reads, and its (height, width), as HF sees it.

    A PIL image is converted as ``convert_to_rgb`` does (no EXIF orientation: HF's
    processors apply none to PIL input) and handed over as its Arrow export, so the
    core packs its pixels on the batch's threads. Bytes and paths go through
    :func:`mmfast.decode_image`, which applies EXIF orientation like
    ``transformers.image_utils.load_image``. Arrays must be (H, W, 3) or (H, W) uint8.
    """
    if isinstance(image, Image.Image):
        converted = rgb_or_gray(image)
        return arrow_source(converted), (converted.height, converted.width)
    if isinstance(image, (bytes, bytearray, memoryview, str, os.PathLike)):
        decoded = decode_image(image)
        return decoded, (decoded.shape[0], decoded.shape[1])
    if isinstance(image, np.ndarray):
        if (
            image.dtype != np.uint8
            or image.ndim not in (2, 3)
            or (image.ndim == 3 and image.shape[2] != 3)
        ):
            raise MmfastError(
                "images: expected uint8 arrays of shape (height, width, 3) or (height, width), "
                f"got dtype {image.dtype} with shape {image.shape}"
            )
        if image.size == 0:
            raise MmfastError(f"images: expected a non-empty image, got shape {image.shape}")
        rgb = np.repeat(image[..., None], 3, axis=2) if image.ndim == 2 else image
        return rgb, (image.shape[0], image.shape[1])
    raise MmfastError(
        f"images: expected PIL images, uint8 arrays, bytes or paths, got {type(image).__qualname__}"
    )


def float32_tables(plan: ImagePlan) -> NDArray[np.float32]:
    """(3, 256): the normalised float32 value of every uint8 in each channel.

    Computed by :mod:`mmfast.reference`, i.e. transformers' own rescale-then-normalise
    arithmetic, so a table lookup is bit-exact by construction.
    """
    ramp = np.repeat(np.arange(256, dtype=np.uint8)[None, :, None], 3, axis=2)
    planes = reference.deinterleave_rgb_to_planes(
        ramp, plan.image_mean, plan.image_std, plan.rescale_factor
    )
    return np.ascontiguousarray(planes.reshape(3, 256))


class ImageProcessor:
    """Preprocessing for one model, equal to transformers' image processor for it.

    Build it with :meth:`from_pretrained`; call it on one image or a list.
    """

    def __init__(self, config: ModelConfig) -> None:
        self.config = config

    @classmethod
    def from_pretrained(
        cls, name_or_path: str | os.PathLike[str], **overrides: Any
    ) -> ImageProcessor:
        """A local directory with ``preprocessor_config.json``, such a file, or a built-in id.

        ``overrides`` work like keyword arguments to the HF processor (``max_pixels=...``).
        """
        return cls(load_config(name_or_path, **overrides))

    def __repr__(self) -> str:
        return f"ImageProcessor({self.config!r})"

    def num_image_tokens(self, height: int, width: int) -> int:
        """Placeholder tokens the model's processor inserts for a (height, width) image."""
        return self.config.num_image_tokens(height, width)

    def plan(self, height: int, width: int) -> ImagePlan:
        """What happens to an image of this size (sizes, windows, constants, shapes)."""
        return self.config.plan(height, width)

    def __call__(
        self,
        images: ImageInput | Sequence[ImageInput],
        *,
        threads: int | None = None,
        dtype: Dtype = "float32",
    ) -> BatchFeature:
        """Preprocess ``images`` (one, or a list) into a :class:`BatchFeature`.

        ``threads`` defaults to :func:`default_threads`. ``dtype="bfloat16"`` returns
        Llama 4's raw bfloat16 values (``ml_dtypes.bfloat16``), with no float32 round trip.
        """
        # Arguments first: nothing is decoded for a call that cannot run.
        threads = default_threads() if threads is None else threads
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise MmfastError(f"threads: expected a positive integer, got {threads!r}")
        if dtype not in ("float32", "bfloat16"):
            raise MmfastError(f"dtype: expected 'float32' or 'bfloat16', got {dtype!r}")
        llama4 = isinstance(self.config, Llama4Config)
        if dtype != "float32" and not llama4:
            raise MmfastError(f"dtype: {dtype} is only offered for Llama 4, whose HF output it is")
        batch = _as_list(images)
        inputs, sizes = zip(*(to_batch_input(image) for image in batch), strict=True)
        arrays = list(inputs)
        plans = [self.config.plan(h, w) for h, w in sizes]
        if llama4:
            return _llama4(arrays, plans, threads, dtype)
        if plans[0].patches is not None:
            return _qwen(arrays, plans, threads)
        return _clip(arrays, plans, threads)


def _as_list(images: ImageInput | Sequence[ImageInput]) -> list[ImageInput]:
    if isinstance(images, (list, tuple)):
        if not images:
            raise MmfastError("images: expected at least one image, got an empty sequence")
        return list(images)
    return [images]  # type: ignore[list-item]


def _resize_job(plan: ImagePlan) -> tuple[str, int, tuple[int, int]]:
    if not plan.do_resize or plan.resize_size == (plan.height, plan.width):
        return ("keep", 0, plan.resize_size)
    return ("pillow", plan.resample, plan.resize_size)


def _qwen(arrays: list[BatchInput], plans: list[ImagePlan], threads: int) -> BatchFeature:
    jobs = []
    rows = 0
    for i, plan in enumerate(plans):
        assert plan.patches is not None
        p = plan.patches
        layout = ("patches", (p.patch_size, p.temporal_patch_size, p.merge_size))
        jobs.append((i, *_resize_job(plan), *layout))
        rows += p.num_patches
    dim = plans[0].output_shapes["pixel_values"][1]
    out = _native.run_batch(arrays, jobs, float32_tables(plans[0]), (rows, dim), threads)
    grid = np.array(
        [(p.patches.grid_t, p.patches.grid_h, p.patches.grid_w) for p in plans if p.patches],
        dtype=np.int64,
    )
    return BatchFeature({"pixel_values": out, "image_grid_thw": grid})


def _clip(arrays: list[BatchInput], plans: list[ImagePlan], threads: int) -> BatchFeature:
    shape = plans[0].output_shapes["pixel_values"]
    if any(p.output_shapes["pixel_values"] != shape for p in plans):
        raise MmfastError(
            "images: this config gives images of different output sizes, which cannot be "
            "stacked; pass them one at a time"
        )
    jobs = []
    for i, plan in enumerate(plans):
        h, w = plan.resize_size
        box = plan.crop
        window = (box.top, box.left, box.height, box.width) if box else (0, 0, h, w)
        jobs.append((i, *_resize_job(plan), "windows", [window]))
    if plans[0].do_rescale or plans[0].do_normalize:
        tables = float32_tables(plans[0])
    else:
        # HF's PIL backend then hands back the resized, cropped uint8 pixels untouched.
        tables = np.repeat(np.arange(256, dtype=np.uint8)[None, :], 3, axis=0)
    out = _native.run_batch(arrays, jobs, tables, (len(plans), *shape), threads)
    return BatchFeature({"pixel_values": out})


def bfloat16_tables(plan: ImagePlan) -> NDArray[np.uint16]:
    """(3, 256) bfloat16 bit patterns: Llama 4's normalisation of every uint8, per channel.

    HF's Llama 4 processor converts the uint8 image to bfloat16, multiplies by the
    rescale factor, then subtracts the mean and divides by the std, each a float32
    operation rounded to bfloat16 (torch's CPU kernels for bfloat16 tensors and a
    Python scalar). Verified bit-exact against HF's outputs on every shared image.
    """
    bf16 = ml_dtypes.bfloat16
    x = np.arange(256, dtype=np.float32).astype(bf16)  # exact: every uint8 is a bfloat16
    rows = []
    for mean, std in zip(plan.image_mean, plan.image_std, strict=True):
        y = (x.astype(np.float32) * np.float32(plan.rescale_factor)).astype(bf16)
        y = (y.astype(np.float32) - bf16(mean).astype(np.float32)).astype(bf16)
        y = (y.astype(np.float32) / bf16(std).astype(np.float32)).astype(bf16)
        rows.append(y.view(np.uint16))
    return np.stack(rows)


def _llama4(
    arrays: list[BatchInput], plans: list[ImagePlan], threads: int, dtype: Dtype
) -> BatchFeature:
    jobs = []
    tiles = 0
    for i, plan in enumerate(plans):
        assert plan.tiles is not None
        grid = plan.tiles
        th, tw = grid.tile_size
        windows = [
            (row * th, col * tw, th, tw)
            for row in range(grid.tiles_h)
            for col in range(grid.tiles_w)
        ]
        # torchvision returns the input unchanged when the size does not change.
        resize = "keep" if plan.resize_size == (plan.height, plan.width) else "torch-bilinear-aa"
        jobs.append((i, resize, 0, plan.resize_size, "windows", windows))
        if grid.global_tile:
            # The original image, squeezed to one tile.
            resize = "keep" if (plan.height, plan.width) == (th, tw) else "torch-bilinear-aa"
            jobs.append((i, resize, 0, (th, tw), "windows", [(0, 0, th, tw)]))
        tiles += grid.num_tiles
    if plans[0].compute_dtype != "bfloat16":
        # HF then takes its torchvision backend's fused float32 path, not reproduced here.
        raise MmfastError(
            "do_rescale/do_normalize: Llama 4 is supported with both on (HF's bfloat16 path), "
            "got one of them off"
        )
    shape = (tiles, *plans[0].output_shapes["pixel_values"][1:])
    bits = _native.run_batch(arrays, jobs, bfloat16_tables(plans[0]), shape, threads)
    values = bits.view(ml_dtypes.bfloat16)
    pixel_values = values if dtype == "bfloat16" else values.astype(np.float32)
    aspect = np.array([(p.tiles.tiles_h, p.tiles.tiles_w) for p in plans if p.tiles], np.int64)
    return BatchFeature({"pixel_values": pixel_values, "aspect_ratios": aspect})
