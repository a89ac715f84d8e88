"""Model processors: images in, the tensors transformers would return out.

:class:`ImageProcessor` reads a config (:mod:`mmfast.models` decides every size, window
and constant, mirroring HF), turns each image into plain-number jobs and hands the
whole batch to the Rust core in one call: all pixel work for all images runs with
the GIL released once, in parallel across images, each image written straight into
its slot of the final output.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import functools
import importlib
import itertools
import json
import math
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import IO, Any, Final, Literal, NamedTuple, cast

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageOps

from mmfast import _native
from mmfast.errors import MmfastError, UnsupportedModelError
from mmfast.image import (
    DEFAULT_MAX_PIXELS,
    ArrowSource,
    ImageSource,
    PillowRows,
    array_to_rgb,
    checkerboard_rgb,
    convert_to_rgb,
    decode_source,
    file_status,
    hf_source,
    lazy_png_rgb,
    load_lazy,
    pil_source,
    plain_source,
    shown_path,
    unloaded,
)
from mmfast.models import ImagePlan, ModelConfig, load_config, registry
from mmfast.models.base import (
    Canvas,
    HwcPatches,
    Output,
    Patchify,
    Resized,
    Strip,
    VideoConfig,
    VideoPlan,
    View,
    bfloat16_bits,
    bfloat16_values,
    identity_table,
)
from mmfast.models.base_video import MAX_FPS, MAX_FRAMES
from mmfast.models.config import (
    is_finite_number,
    is_int_in,
    load_video_config,
    read_source,
    with_backend,
)
from mmfast.models.geometry import CropBox

__all__ = [
    "BatchFeature",
    "ImageInput",
    "ImageProcessor",
    "default_threads",
    "parse_threads",
    "warmup",
]

ImageInput = Image.Image | NDArray[np.uint8] | ImageSource
VideoInput = NDArray[np.uint8] | Sequence[Image.Image | NDArray[np.uint8]] | ImageSource | IO[bytes]
Dtype = Literal["float32", "bfloat16", "float16", "uint8"]
DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16", "uint8")


def parse_threads(arg: str, value: str) -> int:
    """A thread count given as text (``arg`` names where: a variable, a flag), from 1 to
    :data:`MAX_THREADS`."""
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if threads < 1:
        raise MmfastError(f"{arg}: expected a positive integer, got {value!r}")
    if threads > MAX_THREADS:
        raise MmfastError(f"{arg}: expected at most {MAX_THREADS}, got {value!r}")
    return threads


# More threads than this is a mistake (and would not fit the core's thread pool).
MAX_THREADS = 4096


class Default(enum.Enum):
    """The value of a sampling argument a call leaves out: the config's, as transformers'
    ``preprocess`` fills it from the instance (an explicit None stays None)."""

    CONFIG = "config"


CONFIG: Final = Default.CONFIG


def sampling_arguments(
    config: VideoConfig, fps: float | Default | None, num_frames: int | Default | None
) -> tuple[float | None, int | None]:
    """``fps`` and ``num_frames`` as the class's ``sample_frames`` receives them."""
    return (
        getattr(config, "fps", None) if fps is CONFIG else fps,
        getattr(config, "num_frames", None) if num_frames is CONFIG else num_frames,
    )


def check_threads(threads: object) -> int:
    """``threads`` if it is an int in 1..MAX_THREADS, else :class:`MmfastError`."""
    if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= MAX_THREADS:
        raise MmfastError(f"threads: expected an integer from 1 to {MAX_THREADS}, got {threads!r}")
    return threads


def check_dtype(dtype: object) -> None:
    if dtype is not None and dtype not in DTYPES:
        raise MmfastError(f"dtype: expected one of {', '.join(map(repr, DTYPES))}, got {dtype!r}")


def check_return_tensors(return_tensors: object) -> None:
    if return_tensors not in (None, "np", "pt"):
        raise MmfastError(f"return_tensors: expected 'np', 'pt' or None, got {return_tensors!r}")


def check_image_dtype(config: ModelConfig, dtype: object) -> None:
    """:func:`check_dtype`, and ``"uint8"`` refused where no byte gives the padding."""
    check_dtype(dtype)
    if dtype == "uint8" and not config.raw_pixels:
        raise MmfastError(
            f"dtype: 'uint8' cannot give {config.image_processor_type}'s outputs "
            f"({config.raw_pixels_refusal}); use a float dtype"
        )


def warmup(megabytes: int = 512) -> None:
    """Touch ``megabytes`` of fresh memory once, before the first request.

    The first time a process writes memory it has never used, the kernel (and, in a VM,
    the hypervisor) has to provide and zero every page; memory freed afterwards is reused
    without that cost. Large first calls pay it: on the development VM a 12 MP JPEG through
    Qwen2-VL took 571 ms on the first call, 489 ms of it in the kernel, and 120 ms on the
    next ones. After ``warmup(512)`` at start (281 ms, once) the first call took 123 ms.
    Call it at server start, sized like a large batch (decoded images plus outputs).
    """
    _native.warmup(_megabytes(megabytes, 1))


# set_buffer_pool's default: room for one 12 MP Qwen output (292 MB; see src/alloc.rs).
DEFAULT_POOL_MB = 512


def set_buffer_pool(megabytes: int) -> None:
    """Keep up to ``megabytes`` of freed output and scratch buffers for reuse (default
    :data:`DEFAULT_POOL_MB`, 512; 0 keeps none and frees what is kept).

    A call whose output (or resize scratch) fits a kept buffer writes into it instead of
    fresh memory, whose pages the kernel has to provide and zero first. An output larger
    than the limit is never kept. Qwen2-VL on 16 mixed images up to 12 MP makes a 1.3 GB
    output: on the development VM each call then spent 100 ms to 3 s in the kernel, and
    under 80 ms after ``set_buffer_pool(2048)`` (what is left is Pillow's own memory for
    the decoded images). The memory stays held by the process between calls; a forked
    worker starts with an empty pool and the parent's limit.
    """
    _native.set_buffer_pool(_megabytes(megabytes, 0))


def _megabytes(value: object, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= 2**20:
        raise MmfastError(f"megabytes: expected an integer from {low} to {2**20}, got {value!r}")
    return value


def default_threads() -> int:
    """``MMFAST_NUM_THREADS`` if set, else the cores this process may run on.

    This is also the size of the process's one worker pool, fixed by its first parallel
    call (a forked child builds its own): a call's ``threads`` beyond it run on the pool's
    threads, the calling thread being one of them.
    """
    env = os.environ.get("MMFAST_NUM_THREADS")
    if env is not None:
        return parse_threads("MMFAST_NUM_THREADS", env)
    return cores()


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def pool_threads(threads: int) -> int:
    """The size the worker pool is built with by a call on ``threads`` threads:
    :func:`default_threads`, or the cores when ``MMFAST_NUM_THREADS`` is unusable (a call
    that passes ``threads=`` does not read it); 1 for a call on one thread, which needs no
    pool (reading the environment and the affinity took 1.4 us a call)."""
    if threads <= 1:
        return 1
    try:
        return default_threads()
    except MmfastError:
        return cores()


class BatchFeature(Mapping[str, Any]):
    """Output arrays by name (``pixel_values``, ...), as a mapping and as attributes.

    ``kept`` lists the positions of the images the outputs hold, as the call was given them
    (``i``, or ``(sample, i)`` for a nested list), and ``skipped`` maps the position of each
    image dropped by ``on_error="skip"`` to the error it raised. ``image_rows`` gives each
    kept image's entries along ``pixel_values``' first axis: its patch rows, tiles or crops,
    or 1 for models that give each image one entry (empty for models that pad per sample,
    Idefics3 and SmolVLM, whose entries are samples, and for MiniCPM-V's one strip: see
    ``num_patches_per_image``). When every image was skipped there
    are no outputs, and asking for one raises an error that says so. ``plans`` holds each
    kept image's (or clip's) plan as its sample gave it, before the batch shaped them
    (:meth:`~mmfast.models.base.ModelConfig.finish_batch`): ``mmfast preprocess`` joins its
    batched calls' outputs by them.
    """

    def __init__(
        self,
        data: Mapping[str, Any],
        kept: Sequence[Position] = (),
        skipped: Mapping[Position, BaseException] | None = None,
        image_rows: Sequence[int] = (),
        plans: Sequence[Any] = (),
    ) -> None:
        self._data = dict(data)
        self.kept = list(kept)
        self.skipped = dict(skipped or {})
        self.image_rows = list(image_rows)
        self.plans = list(plans)

    def __getitem__(self, key: str) -> Any:
        try:
            return self._data[key]
        except KeyError:
            raise KeyError(self._missing(key)) from None

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__"):
            raise AttributeError(key)
        try:
            return self._data[key]
        except KeyError:
            raise AttributeError(self._missing(key)) from None

    def _missing(self, key: str) -> str:
        if not self._data and self.skipped:
            return (
                f"{key!r}: no outputs, every image was skipped ({len(self.skipped)}, see "
                ".skipped); check .kept before reading outputs"
            )
        return f"{key!r}: not an output of this model; outputs: {', '.join(self._data)}"

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        items = ", ".join(
            f"{k}: {v.dtype}{list(v.shape)}" if hasattr(v, "shape") else f"{k}: {v!r:.40}"
            for k, v in self._data.items()
        )
        return f"BatchFeature({items})"


BatchInput = NDArray[np.uint8] | ArrowSource | PillowRows
# An image's place in a call: its index in a flat list, or (sample, index) in a nested one.
Position = int | tuple[int, int]
ON_ERROR: tuple[str, ...] = ("raise", "skip")
# Pillow's modes of three 8-bit bands other than RGB, which transformers reads as RGB when it
# does not convert images.
RAW_BAND_MODES = ("YCbCr", "HSV", "LAB")
# Inputs decoded by decode_source (decode_image's pixels).
ENCODED = (bytes, bytearray, memoryview, str, os.PathLike)
# Errors one image can cause, which on_error="skip" drops it for: not a TimeoutError (an
# OSError), which a deadline's signal handler raises whatever the image.
IMAGE_ERRORS = (MmfastError, OSError)


Prepared = tuple[BatchInput, ImagePlan] | BaseException


class KeptByIdentity:
    """Values made from immutable objects (and a few numbers), kept by the objects'
    identities: at most ``size`` of them, all dropped at once when full (one step, safe
    between threads). Each entry holds its objects, so no other object takes their ids
    while it is kept: the ids find it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.kept: dict[tuple[Any, ...], tuple[tuple[object, ...], Any]] = {}

    def get(self, objs: tuple[object, ...], key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        """The value kept for ``(*objs, *key)``, or ``make()``, kept."""
        at = (*map(id, objs), *key)
        kept = self.kept.get(at)
        if kept is not None:
            return kept[1]
        value = make()
        if len(self.kept) >= self.size:
            self.kept.clear()
        self.kept[at] = (objs, value)
        return value


def prepare_batch(
    samples: Sequence[Sequence[ImageInput]],
    config: ModelConfig,
    threads: int,
    input_data_format: str | None = None,
) -> list[Prepared]:
    """:func:`prepare` for every image, in order, or the error it raised (see
    ``IMAGE_ERRORS``). Bytes and paths are decoded, and PIL images converted, in parallel on
    up to ``threads`` threads, the calling thread and the process's :func:`decoders`: Pillow
    releases the GIL while decoding and converting, and so does the core while packing and
    compositing (:func:`preparing_cost`)."""

    def one(image: ImageInput, sample_size: int) -> Prepared:
        try:
            return prepare(image, config, sample_size, input_data_format)
        except TimeoutError:
            raise
        except IMAGE_ERRORS as exc:
            # Without their tracebacks, whose frames lead back to the call holding the
            # result that holds the error: a cycle that kept every image of a call with a
            # bad one alive until the garbage collector ran (93 MB a call at 12 MP).
            chain: list[BaseException | None] = [exc]
            while chain:
                error = chain.pop()
                if error is not None and error.__traceback__ is not None:
                    error.__traceback__ = None
                    chain += [error.__cause__, error.__context__]
            return exc

    work = [(image, len(sample)) for sample in samples for image in sample]
    costs = [0 if threads == 1 else preparing_cost(image) for image, _ in work]
    if sum(cost > 0 for cost in costs) < 2:
        return [one(image, size) for image, size in work]
    # Largest first, so that the last decode to finish is a short one (a 12 MP JPEG
    # submitted last would keep one thread busy while the others wait). A PIL image given
    # more than once is one task, its places prepared one after another: Pillow loads a
    # lazily opened image on first use, and two threads loading it at once each read part
    # of its file ("image file is truncated"). So are lazily opened images that share a file.
    tasks: dict[int, list[int]] = {}
    for i in sorted(range(len(work)), key=lambda i: -costs[i]):
        image = work[i][0]
        if isinstance(image, Image.Image):
            fp = getattr(image, "fp", None) if unloaded(image) else None
            key = id(image if fp is None else fp)
        else:
            key = -1 - i
        tasks.setdefault(key, []).append(i)
    queue = collections.deque(tasks.values())
    prepared: dict[int, Prepared] = {}

    def drain() -> None:
        while True:
            try:
                places = queue.popleft()
            except IndexError:
                return
            for i in places:
                prepared[i] = one(*work[i])

    # The calling thread drains the tasks too, so the call ends without waiting for a
    # decoder that other calls keep busy; those not started by then are called off.
    helpers = [decoders().submit(drain) for _ in range(min(threads, len(tasks)) - 1)]
    try:
        drain()
    finally:
        queue.clear()  # when drain() raised (KeyboardInterrupt): the helpers stop too
        for helper in helpers:
            if not helper.cancel():
                helper.result()
    return [prepared[i] for i in range(len(work))]


_decoders: ThreadPoolExecutor | None = None
_decoders_lock = threading.Lock()


def decoders() -> ThreadPoolExecutor:
    """The process's threads that decode a call's bytes and paths beside the calling thread:
    one fewer than the worker pool's size (:func:`pool_threads`) or the cores, at least one,
    made on first use and shared by every call (an executor for each call added threads for
    each concurrent call)."""
    global _decoders
    with _decoders_lock:
        if _decoders is None:
            workers = max(min(pool_threads(2), cores()) - 1, 1)
            _decoders = ThreadPoolExecutor(workers, thread_name_prefix="mmfast-decode")
        return _decoders


def _forget_decoders() -> None:
    """A forked child has none of its parent's threads: it makes its own decoders."""
    global _decoders, _decoders_lock
    _decoders, _decoders_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_decoders)


# PIL images of fewer pixels are converted on the calling thread: four 64x48 palette
# images on two threads took 0.47 ms so, 0.54 ms handed to the decoders.
CONVERT_APART_MIN_PIXELS = 1 << 16


def preparing_cost(image: ImageInput) -> int:
    """What :func:`prepare` does for ``image`` before the batch reads it, in bytes: an
    encoded image's (its file's size for a path), a PIL image's pixels where it is decoded
    (opened and not loaded) or converted or composited first (a mode other than RGB and L,
    or a colour key), for PIL images of at least ``CONVERT_APART_MIN_PIXELS``; 0 for
    anything else. On two threads, a batch of 16 RGBA PIL images at 1920x1080 took 41-44
    -> 26 ms once they were prepared in parallel too (a third of each translucent,
    composited), 19-20 -> 15-16 ms (opaque, their alpha checked); one thread took 50 and
    26 ms. LLaVA-1.5 on 16 lazily opened JPEGs of 0.3 to 12 MP took 196-201 -> 108-116 ms
    on two threads (one: 210-213 ms)."""
    if isinstance(image, Image.Image):
        pixels = image.width * image.height
        if pixels < CONVERT_APART_MIN_PIXELS:
            return 0
        if unloaded(image):
            # Opened and not loaded: decoded here (a file has about a byte a pixel).
            return pixels
        converted = image.mode not in ("RGB", "L") or "transparency" in image.info
        return 4 * pixels if converted else 0
    if isinstance(image, (bytes, bytearray)):
        return len(image)
    if isinstance(image, memoryview):
        return image.nbytes
    if isinstance(image, (str, os.PathLike)):
        status = file_status(image)
        return 0 if status is None else status.st_size
    return 0


def describe_position(position: Position, image: object) -> str:
    """``images[3]`` or ``images[1][0]``, with the file name of a path."""
    where = (
        f"images[{position}]" if isinstance(position, int) else "images[{}][{}]".format(*position)
    )
    if isinstance(image, (str, os.PathLike)):
        where += f" ({shown_path(image)})"
    return where


def relabelled(error: BaseException, message: str) -> BaseException:
    """``error``'s type with ``message``; an :class:`MmfastError` when the type takes other
    arguments."""
    try:
        return type(error)(message)
    except TypeError:
        return MmfastError(message)


def prepare(
    image: ImageInput,
    config: ModelConfig,
    sample_size: int = 1,
    input_data_format: str | None = None,
) -> tuple[BatchInput, ImagePlan]:
    """One input image → what the core reads, and its plan (for an image in a sample of
    ``sample_size`` images).

    A PIL image is converted to RGB the way the model's reference does
    (``config.pil_convert``; no EXIF orientation: HF's processors apply none to PIL input:
    :func:`mmfast.image.hf_source`, :func:`mmfast.image.plain_source`) and handed over as its
    rows, read in place on the batch's threads, or as the array of its composite. Bytes and
    paths are decoded as ``transformers.image_utils.load_image`` reads a path
    (:func:`mmfast.image.decode_source`: EXIF orientation applied, then ``convert("RGB")``,
    which drops transparency). uint8 arrays and torch tensors are read as transformers reads
    them (:func:`mmfast.image.array_to_rgb`, with ``input_data_format``).
    """
    if isinstance(image, Image.Image):
        plan = plan_for(config, image.height, image.width, sample_size)
        # Grey and RGBA become RGB only where the image is converted, RGBA where its alpha
        # is composited onto white ("hf") or dropped ("rgb").
        modes: tuple[str, ...] = ("RGB",)
        if plan.do_convert_rgb:
            modes = ("RGB", "L", "RGBA") if config.pil_convert in ("hf", "rgb") else ("RGB", "L")
        rgb = lazy_png_rgb(image, modes, composite=config.pil_convert == "hf")
        if rgb is not None:
            return rgb, plan
        load_lazy(image)
        if not plan.do_convert_rgb:
            if image.mode in RAW_BAND_MODES:
                # Its three bands as RGB, as transformers reads the image's array.
                return np.asarray(image), plan
            if image.mode != "RGB":
                raise _not_converted(f"a PIL image in mode {image.mode}")
            # Its pixels as they are: a transparent colour key is not composited.
            return pil_source(image), plan
        try:
            if config.pil_convert == "resize_then_rgb" and image.mode not in ("RGB", "L"):
                return _resize_then_rgb(image, plan)
            if config.pil_convert == "checkerboard" and image.has_transparency_data:
                return checkerboard_rgb(np.asarray(image.convert("RGBA"))), plan
            if config.pil_convert == "hf":
                return hf_source(image), plan
            return plain_source(image), plan
        except ValueError as exc:  # modes Pillow cannot convert, such as La
            raise MmfastError(
                f"images: cannot convert a PIL image in mode {image.mode} to RGB: {exc}"
            ) from exc
    if isinstance(image, ENCODED):
        # A PIL class converts what load_image gave; a torchvision class (Llama 4's, whatever
        # the backend's name) decodes the file, without the colour key.
        composite_key = (
            config.backend == "pil"
            and config.pil_convert == "hf"
            and getattr(config, "do_convert_rgb", True)
            and has_pil_class(config.image_processor_type)
        )
        decoded, (height, width) = decode_source(image, composite_key)
        return decoded, plan_for(config, height, width, sample_size)
    if isinstance(image, np.ndarray) or type(image).__module__.startswith("torch"):
        rgb = array_to_rgb(
            image,
            input_data_format=input_data_format,
            do_convert_rgb=getattr(config, "do_convert_rgb", True),
            backend=config.backend,
            checkerboard=config.pil_convert == "checkerboard",
        )
        return rgb, plan_for(config, rgb.shape[0], rgb.shape[1], sample_size)
    raise MmfastError(
        "images: expected PIL images, uint8 arrays or tensors, bytes or paths, got "
        f"{type(image).__qualname__}"
    )


# Plans of the configs and image sizes seen last: a server meets the same few sizes again
# and again. Building a plan took 11-14 us (Qwen2-VL, LLaVA-1.5, SigLIP at 640x480), of the
# 0.1 ms of Python in such a call; a kept one takes 0.7 us. Few are kept, as a plan can hold
# tens of thousands of windows (Muse Glimmer at 12 MP), which its family caches for 64 sizes.
_PLANS = KeptByIdentity(32)


def plan_for(config: ModelConfig, height: int, width: int, sample_size: int) -> ImagePlan:
    """``config.plan_in_sample(height, width, sample_size)``, made once while it is kept
    (plans are frozen, so calls share them)."""
    return cast(
        ImagePlan,
        _PLANS.get(
            (config,),
            (height, width, sample_size),
            lambda: config.plan_in_sample(height, width, sample_size),
        ),
    )


@functools.cache
def has_pil_class(image_processor_type: str) -> bool:
    """Whether transformers has a PIL class for the config's family (Llama 4, Command A
    Vision, ... have only a torchvision class, which both backend names match)."""
    return registry.family_of(image_processor_type).hf_pil is not None


def _not_converted(what: str) -> MmfastError:
    return MmfastError(
        f"images: with do_convert_rgb off (the config sets it false or null) transformers reads "
        f"an image's bands as they are, which mmfast takes for three 8-bit bands (RGB, YCbCr, "
        f"HSV, LAB), got {what}; pass do_convert_rgb=True to convert it"
    )


def _resize_then_rgb(image: Image.Image, plan: ImagePlan) -> tuple[BatchInput, ImagePlan]:
    """The plan's first resize and pad done by Pillow in the image's own mode, then
    ``convert("RGB")``: what a reference that converts last does with, say, an RGBA image
    (Pillow resizes it with premultiplied alpha) or a palette one (Pillow resizes it with
    the nearest filter). The pad is torchvision's for a PIL image: ``ImageOps.expand`` with 0
    in every band, the palette kept. The engine then runs the rest of the plan."""
    view = plan.views[0]
    if view.resize is not None:
        image = image.resize(view.resize.size[::-1], view.resize.resample)
    if view.pad is not None:
        pad = view.pad
        bands = len(image.getbands())
        right = pad.size[1] - pad.left - image.width
        bottom = pad.size[0] - pad.top - image.height
        palette = image.getpalette() if image.mode == "P" else None
        image = ImageOps.expand(
            image, border=(pad.left, pad.top, right, bottom), fill=0 if bands == 1 else (0,) * bands
        )
        if palette is not None:
            image.putpalette(palette)
    rgb = image.convert("RGB")
    views = (replace(view, resize=None, pad=None), *plan.views[1:])
    return pil_source(rgb), replace(plan, height=rgb.height, width=rgb.width, views=views)


# transformers' call arguments that change nothing here, and the values that do not: how a
# value is accepted, and what the error says was expected.
CALL_ONLY: dict[str, tuple[Callable[[Any], bool], str]] = {
    "data_format": (lambda v: v in (None, "channels_first"), "'channels_first' or None"),
    "device": (lambda v: v is None or str(v) == "cpu", "'cpu' or None (outputs are on the CPU)"),
    "disable_grouping": (lambda v: v in (None, True, False), "True, False or None"),
}
# Configs a processor keeps for the settings its calls pass.
MAX_CACHED_CONFIGS = 64


def as_tensors(
    outputs: Mapping[str, Any], dtypes: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The outputs as torch tensors sharing their memory (:func:`as_tensor`); lists stay
    lists. ``dtypes``: keys converted as torch converts the Python floats transformers builds
    them from (``ModelConfig.tensor_dtypes``)."""
    tensors: dict[str, Any] = {}
    for key, value in outputs.items():
        if dtypes and key in dtypes and isinstance(value, np.ndarray):
            value = value.astype(dtypes[key])
        tensors[key] = as_tensor(value) if isinstance(value, np.ndarray) else value
    return tensors


def as_tensor(array: NDArray[Any]) -> Any:
    """``array`` as a torch tensor sharing its memory (bfloat16 through its bits)."""
    torch = importlib.import_module("torch")
    bf16 = array.dtype.name == "bfloat16"
    tensor = torch.from_numpy(array.view(np.uint16) if bf16 else array)
    return tensor.view(torch.bfloat16) if bf16 else tensor


class ImageProcessor:
    """Preprocessing for one model, equal to transformers' image processor for it.

    Build it with :meth:`from_pretrained`; call it on one image or a list.
    """

    def __init__(
        self,
        config: ModelConfig,
        video_config: VideoConfig | None = None,
        *,
        reload: Callable[..., ModelConfig] | None = None,
    ) -> None:
        """``reload(backend=..., call=settings)`` rebuilds the config with a call's settings
        (:meth:`from_pretrained` passes :func:`~mmfast.models.load_config` with its arguments;
        without it a call's settings raise)."""
        self.config = config
        self.video_config = video_config
        self._reload = reload
        self._video_error: MmfastError | None = None
        self._configs: dict[str, ModelConfig] = {}
        # with_backend's configs, each with the config it was made from.
        self._backends: dict[str, tuple[ModelConfig, ModelConfig]] = {}

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike[str],
        *,
        backend: str | None = None,
        video_overrides: Mapping[str, Any] | None = None,
        **overrides: Any,
    ) -> ImageProcessor:
        """A local directory with ``preprocessor_config.json``, such a file, or a built-in id.

        ``backend`` is the transformers class the outputs match bit for bit: ``"pil"``
        (``XImageProcessorPil``, the default where transformers has one) or ``"torchvision"``
        (``XImageProcessor``, which ``AutoImageProcessor`` picks when torchvision is
        installed, and the default for PI0 and PP-FormulaNet, which have only that class); a
        call can override it.
        ``overrides`` work like keyword arguments to the HF processor (``max_pixels=...``);
        ``video_overrides`` do the same for its video processor, where the model has one
        (:meth:`videos`).
        """
        source = read_source(name_or_path)
        config = load_config(source, backend=backend, **overrides)
        try:
            video: VideoConfig | MmfastError | None = load_video_config(
                source, **(video_overrides or {})
            )
        except MmfastError as exc:
            if video_overrides:
                raise
            # The images run; a video call says what is wrong with the video settings.
            video = None if isinstance(exc, UnsupportedModelError) else exc
        proc = cls(
            config,
            None if isinstance(video, MmfastError) else video,
            reload=functools.partial(load_config, source, **overrides),
        )
        proc._video_error = video if isinstance(video, MmfastError) else None
        return proc

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
        images: ImageInput | Sequence[ImageInput | Sequence[ImageInput]],
        *,
        threads: int | None = None,
        dtype: Dtype | None = None,
        backend: str | None = None,
        on_error: str = "raise",
        input_data_format: str | None = None,
        return_tensors: str | None = None,
        **settings: Any,
    ) -> BatchFeature:
        """Preprocess ``images`` (one, a list, or a list of lists: the images of each prompt)
        into a :class:`BatchFeature`.

        Images are PIL images, uint8 arrays or torch tensors (read as transformers reads them:
        the channel axis from ``input_data_format`` or the shape, one channel repeated and
        RGBA composited onto white; a 4-D array is a batch of images), bytes or paths,
        decoded in parallel on the call's threads. An image that cannot be used
        (undecodable, too large, a missing file, a size the model refuses) raises its error
        with its position (and file name) in the message; with ``on_error="skip"`` it is
        left out instead, and the result's ``kept`` and ``skipped`` say which images the
        outputs hold (none: no outputs at all).

        ``threads`` defaults to :func:`default_threads`. ``dtype`` is ``pixel_values``': by
        default the reference's (float32; uint8 where HF leaves the pixels untouched; float32
        for Llama 4, its bfloat16 values widened exactly). ``"bfloat16"``/``"float16"`` are the
        float32 values rounded as torch's ``.to(dtype)`` rounds them, written directly.
        ``"uint8"`` returns the resized pixels in the final layout before rescaling and
        normalising, with ``pixel_lut`` (3, 256) float32, each channel's output value of each
        byte, and for zero-padded batches ``pixel_rows_mask``:
        :func:`mmfast.reference.normalize_uint8` turns them into the float32 output.
        ``backend`` overrides the processor's (see :meth:`from_pretrained`) for this call.
        ``return_tensors`` is ``"np"`` or None (numpy arrays) or ``"pt"`` (torch tensors of
        the same memory).

        ``settings`` are the transformers class's keyword arguments for this call
        (``size=``, ``max_pixels=``, ``do_normalize=``, ...): they apply as they would in
        :meth:`from_pretrained`. transformers' other call arguments are taken where they
        change nothing here: ``data_format="channels_first"``, ``device="cpu"`` or None, and
        ``disable_grouping``. Anything else raises :class:`MmfastError` naming it.
        """
        # Arguments first: nothing is decoded for a call that cannot run.
        threads = check_threads(default_threads() if threads is None else threads)
        if on_error not in ON_ERROR:
            raise MmfastError(f"on_error: expected 'raise' or 'skip', got {on_error!r}")
        check_return_tensors(return_tensors)
        config = self._config_for(backend, settings)
        check_image_dtype(config, dtype)
        samples = as_samples(images, config.flat_is_one_sample)
        nested = isinstance(images, (list, tuple)) and all(
            isinstance(item, (list, tuple)) for item in images
        )
        results = iter(prepare_batch(samples, config, threads, input_data_format))
        inputs: list[BatchInput] = []
        plans: list[ImagePlan] = []
        sizes: list[int] = []
        kept: list[Position] = []
        skipped: dict[Position, BaseException] = {}
        for s, sample in enumerate(samples):
            sizes.append(0)
            for i, image in enumerate(sample):
                position: Position = (s, i) if nested else s + i
                result = next(results)
                if isinstance(result, BaseException):
                    if on_error == "raise":
                        message = f"{describe_position(position, image)}: {result}"
                        raise relabelled(result, message) from result
                    skipped[position] = result
                    continue
                inputs.append(result[0])
                plans.append(result[1])
                sizes[-1] += 1
                kept.append(position)
            if not (nested or config.flat_is_one_sample or sizes[-1]):
                sizes.pop()  # a skipped image of a flat list leaves no empty prompt behind
        if not plans:
            return BatchFeature({}, kept, skipped)
        out = run_plans(config, inputs, plans, sizes, threads, dtype)
        if return_tensors == "pt":
            return BatchFeature(
                as_tensors(out, config.tensor_dtypes), kept, skipped, out.image_rows, out.plans
            )
        out.kept, out.skipped = kept, skipped
        return out

    def _config_for(self, backend: str | None, settings: dict[str, Any]) -> ModelConfig:
        """The config of a call: the processor's, with ``backend`` and ``settings`` (see
        :meth:`__call__`) applied."""
        for name, (accepted, expected) in CALL_ONLY.items():
            if name in settings and not accepted(value := settings.pop(name)):
                raise MmfastError(f"{name}: expected {expected}, got {value!r}")
        if not settings:
            return self.config if backend is None else self.with_backend(backend)
        if self._reload is None:
            raise MmfastError(
                f"{', '.join(settings)}: this processor was built from a config object, which "
                "call settings cannot change; build it with ImageProcessor.from_pretrained"
            )
        backend = self.config.backend if backend is None else backend
        try:
            key = json.dumps([backend, settings], sort_keys=True)
        except (TypeError, ValueError):
            return self._reload(backend=backend, call=settings)
        config = self._configs.get(key)
        if config is None:
            if len(self._configs) >= MAX_CACHED_CONFIGS:
                self._configs.clear()
            config = self._configs[key] = self._reload(backend=backend, call=settings)
        return config

    async def acall(
        self,
        images: ImageInput | Sequence[ImageInput | Sequence[ImageInput]],
        *,
        threads: int | None = None,
        dtype: Dtype | None = None,
        backend: str | None = None,
        on_error: str = "raise",
        **kwargs: Any,
    ) -> BatchFeature:
        """:meth:`__call__` on a worker thread, for event loops: the pixel work runs with the
        GIL released, so the loop keeps serving other tasks meanwhile. ``kwargs`` are
        :meth:`__call__`'s other arguments."""
        call = functools.partial(
            self.__call__, threads=threads, dtype=dtype, backend=backend, on_error=on_error
        )
        return await asyncio.to_thread(call, images, **kwargs)

    def with_backend(self, backend: str) -> ModelConfig:
        """This processor's config matching transformers' ``backend`` class (made once per
        backend: a call naming its backend no longer rebuilds it)."""
        made = self._backends.get(backend) if isinstance(backend, str) else None
        if made is None or made[0] is not self.config:
            family = registry.family_of(self.config.image_processor_type)
            made = self._backends[backend] = (
                self.config,
                with_backend(self.config, backend, family),
            )
        return made[1]

    def sampled_frames(
        self,
        metadata: Any,
        fps: float | Default | None = CONFIG,
        num_frames: int | Default | None = CONFIG,
    ) -> int:
        """How many frames :meth:`videos` keeps of a clip of ``metadata`` (a
        :class:`~mmfast.video.VideoMetadata`) with the processor's sampling (``fps`` and
        ``num_frames`` as for :meth:`videos`): every index the sampler returns, repeats
        included (GLM's repeat the last to an even count)."""
        config = self._video()
        if not config.do_sample_frames:
            return int(metadata.total_num_frames)
        return len(config.sample(metadata, *sampling_arguments(config, fps, num_frames)))

    def num_video_tokens(self, num_frames: int, height: int, width: int) -> int:
        """``<|video_pad|>``-style tokens for a clip of ``num_frames`` (sampled) frames."""
        return self._video().num_video_tokens(num_frames, height, width)

    def videos(
        self,
        videos: VideoInput | Sequence[VideoInput],
        *,
        video_fps: float | Sequence[float | None] | None = None,
        fps: float | Default | None = CONFIG,
        num_frames: int | Default | None = CONFIG,
        do_sample_frames: bool | None = None,
        threads: int | None = None,
        dtype: Dtype | None = None,
        return_tensors: str | None = None,
    ) -> BatchFeature:
        """Preprocess video clips into the model's video outputs (``pixel_values_videos``
        and its grid or counts), bit-identical to its transformers video processor (a
        torchvision class).

        A clip is a video file (a path, its bytes or a binary file object, decoded by
        :func:`mmfast.load_video`, which decodes only the frames the processor samples), a
        (T, H, W, 3) or (T, H, W) uint8 array (an (H, W, 3) array is one frame, as
        transformers reads it; (3, H, W) is refused as ambiguous), or a list of frames (arrays
        or PIL images); pass one clip or a list of clips. ``video_fps`` is each array clip's
        own frame rate (the metadata HF samples by; a file's comes from its header);
        ``fps``/``num_frames`` and ``do_sample_frames`` choose frames as the processor's
        ``sample_frames`` does: left out, they are the config's (as transformers fills a
        call's from the instance), and an explicit None is None (which some classes need,
        such as ``fps=2, num_frames=None`` where the config sets ``num_frames``). ``threads``,
        ``dtype`` and ``return_tensors`` work as for images (with ``"pt"``, clips of
        different shapes are a list of tensors).
        """
        from mmfast.video import VideoMetadata, default_sample_indices, load_video

        config = self._video()
        threads = check_threads(default_threads() if threads is None else threads)
        check_dtype(dtype)
        check_return_tensors(return_tensors)
        clips = as_clips(videos)
        rates: list[float | None] = (
            list(video_fps)
            if isinstance(video_fps, (list, tuple))
            else [cast("float | None", video_fps)] * len(clips)
        )
        if len(rates) != len(clips):
            raise MmfastError(
                f"video_fps: expected one rate per clip ({len(clips)}), got {len(rates)}"
            )
        call_fps = None if fps is CONFIG else fps
        for name, rate in [("fps", call_fps)] + [("video_fps", r) for r in rates]:
            if rate is not None and not (is_finite_number(rate) and 0 < rate <= MAX_FPS):
                raise MmfastError(
                    f"{name}: expected a number > 0 and at most {MAX_FRAMES}, got {rate!r}"
                )
        if num_frames not in (None, CONFIG) and not is_int_in(num_frames, 1, MAX_FRAMES):
            raise MmfastError(
                f"num_frames: expected an integer from 1 to {MAX_FRAMES}, got {num_frames!r}"
            )
        sample = config.do_sample_frames if do_sample_frames is None else do_sample_frames

        sampling = sampling_arguments(config, fps, num_frames)

        def sampler(metadata: VideoMetadata) -> Sequence[int] | NDArray[np.int64]:
            if sample:
                return config.sample(metadata, *sampling)
            return default_sample_indices(metadata)

        clip_frames = []
        for i, (clip, rate) in enumerate(zip(clips, rates, strict=True)):
            with clip_named(i, len(clips)):
                if isinstance(clip, np.ndarray):
                    total, height, width = clip.shape[:3]
                    # The duration transformers' reader gives (GLM's samplers read it).
                    duration = None if rate is None else total / rate
                    metadata = VideoMetadata(total, rate, width, height, duration)
                    if not sample:
                        clip_frames.append(clip)
                        continue
                    indices = np.asarray(sampler(metadata), np.int64)
                    if indices.size and indices.max() >= total:
                        # A float step rounded up (Qwen's linspace, Molmo2's arange); transformers
                        # fails on its own indexing.
                        raise MmfastError(
                            f"num_frames, fps: {config.video_processor_type}'s sampling takes "
                            f"frame {indices.max()} of a clip of {total} frames; ask for fewer"
                        )
                    clip_frames.append(clip[indices])
                else:
                    frames, decoded = load_video(clip, sample_indices_fn=sampler, threads=threads)
                    clip_frames.append(in_sampled_order(frames, decoded.frames_indices or []))
        out = run_videos(config, clip_frames, threads, dtype)
        if return_tensors != "pt":
            return out
        tensors = as_tensors(out)
        pixels = tensors[config.output_key]
        if isinstance(pixels, list):  # clips of different shapes
            tensors[config.output_key] = [as_tensor(clip) for clip in pixels]
        return BatchFeature(tensors, image_rows=out.image_rows, plans=out.plans)

    def _video(self) -> VideoConfig:
        if self._video_error is not None:
            raise MmfastError(str(self._video_error)) from self._video_error
        if self.video_config is None:
            supported = ", ".join(registry.VIDEO_FAMILIES)
            raise UnsupportedModelError(
                f"{self.config.model_id or self.config.image_processor_type}: this model has no "
                f"video processor mmfast supports (supported: {supported})"
            )
        return self.video_config


def in_sampled_order(frames: NDArray[np.uint8], indices: Sequence[int]) -> NDArray[np.uint8]:
    """A file's decoded frames (each sampled frame once, in index order, as transformers' PyAV
    reader gives them) in the sampler's order with its repeats: what a processor's
    ``video[indices]`` gives for the clip as an array (GLM's samplers repeat the last index
    to an even count). Frames the reader left out stay left out."""
    if not indices:
        return frames
    last = indices[-1]
    wanted = sorted({int(i) for i in indices if 0 <= i <= last})
    if len(wanted) != len(frames) or len(wanted) == len(indices) or min(indices) < 0:
        return frames
    if any(i > last for i in indices):
        return frames
    rank = {index: k for k, index in enumerate(wanted)}
    return frames[[rank[int(i)] for i in indices]]


def is_video_file(clip: object) -> bool:
    """A path, the bytes of a file, or a binary file object."""
    return isinstance(clip, ENCODED) or hasattr(clip, "read")


def as_clips(videos: VideoInput | Sequence[VideoInput]) -> list[Any]:
    """Each clip as a (T, H, W, 3) uint8 array, or a video file as given: one clip or a list
    of clips, a clip being a file, an array of frames or a list of (H, W, 3) / (H, W) arrays
    or PIL images (converted like ``convert_to_rgb``)."""
    if is_video_file(videos):
        return [videos]
    if isinstance(videos, np.ndarray):
        return [_array_clip(videos)]
    if not isinstance(videos, (list, tuple)) or not videos:
        raise MmfastError(
            "videos: expected a (frames, height, width, 3) uint8 array, a list of frames or a "
            f"list of clips, got {videos!r:.80}"
        )
    if all(
        isinstance(v, (Image.Image,)) or (isinstance(v, np.ndarray) and v.ndim in (2, 3))
        for v in videos
    ):
        return [_clip_array(videos)]
    clips = []
    for i, v in enumerate(videos):
        with clip_named(i, len(videos)):
            clips.append(
                v
                if is_video_file(v)
                else _array_clip(v)
                if isinstance(v, np.ndarray)
                else _clip_array(v)
            )
    return clips


@contextlib.contextmanager
def clip_named(i: int, clips: int) -> Iterator[None]:
    """Errors raised for clip ``i`` of a call's ``clips`` name it (``videos[1]: ...``) when
    there are several."""
    try:
        yield
    except (MmfastError, OSError) as exc:
        if clips == 1:
            raise
        raise relabelled(exc, f"videos[{i}]: {exc}") from exc


def _array_clip(clip: NDArray[Any]) -> NDArray[np.uint8]:
    """An array given as a clip: (T, H, W, 3), (T, H, W) grayscale, or (H, W, 3) one frame
    (transformers reads a 3-D array as one frame); (3, H, W), one channels-first frame to
    transformers and three grayscale frames here, is refused."""
    if clip.ndim == 3 and clip.shape[2] == 3:
        return _clip_array(clip[None])
    if clip.ndim == 3 and clip.shape[0] == 3:
        raise MmfastError(
            f"videos: a clip of shape {clip.shape} is ambiguous: one channels-first frame to "
            "transformers, three grayscale frames as (frames, height, width); pass "
            "(frames, height, width, 3) frames"
        )
    return _clip_array(clip)


def _clip_array(clip: Any) -> NDArray[np.uint8]:
    if isinstance(clip, (list, tuple)):
        if not clip:
            raise MmfastError("videos: expected at least one frame, got an empty clip")
        frames = [convert_to_rgb(f) if isinstance(f, Image.Image) else f for f in clip]
        if any(not isinstance(f, np.ndarray) or f.shape != frames[0].shape for f in frames):
            raise MmfastError("videos: expected frames that are arrays or PIL images of one size")
        clip = np.stack(frames)
    if not isinstance(clip, np.ndarray) or clip.dtype != np.uint8 or clip.ndim not in (3, 4):
        raise MmfastError(
            "videos: expected uint8 arrays of shape (frames, height, width, 3) or "
            f"(frames, height, width), got {_describe(clip)}"
        )
    if clip.ndim == 3:
        clip = np.repeat(clip[..., None], 3, axis=3)
    if clip.shape[3] != 3 or 0 in clip.shape:
        raise MmfastError(
            f"videos: expected non-empty frames with 3 channels, got shape {clip.shape}"
        )
    return np.ascontiguousarray(clip)


def _describe(value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"dtype {value.dtype} with shape {value.shape}"
    return type(value).__qualname__


def as_samples(
    images: ImageInput | Sequence[ImageInput | Sequence[ImageInput]],
    flat_is_one_sample: bool,
) -> list[list[ImageInput]]:
    """The batch as samples (the images of one prompt each), as HF nests its input.

    A list of lists is taken as samples (one may be empty: a text-only prompt). A flat list
    is one sample per image, or, for processors that read it as one prompt's images
    (``flat_is_one_sample``: Idefics3, SmolVLM), a single sample; one image is one sample,
    and a 4-D array or tensor is a flat list of images.
    """
    if getattr(images, "ndim", None) == 4:
        images = list(images)  # type: ignore[arg-type]
    if not isinstance(images, (list, tuple)):
        return [[images]]  # type: ignore[list-item]
    if not images:
        raise MmfastError("images: expected at least one image, got an empty sequence")
    nested = [isinstance(item, (list, tuple)) for item in images]
    if all(nested):
        samples = [list(sample) for sample in images]
        if not any(samples):
            raise MmfastError("images: expected at least one image, got only empty samples")
        return samples
    if any(nested):
        raise MmfastError(
            "images: expected images or lists of images (one per sample), got a mix of both"
        )
    if flat_is_one_sample:
        return [list(images)]
    return [[image] for image in images]


def torch_one_thread() -> bool:
    """Whether torch computes on one thread here: torch's ``get_num_threads()`` where this
    process imported it, else ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` set to 1 (what torch
    would start with). torch's float bilinear resize takes another loop on one thread
    (``DataLoader`` workers, one-core machines), with other last bits; the float resizes
    (Molmo2's, Phi-4-multimodal's global view) follow it."""
    torch = sys.modules.get("torch")
    get_num_threads = getattr(torch, "get_num_threads", None)
    if callable(get_num_threads):
        return bool(get_num_threads() == 1)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value:
            return value == "1"
    return False


def native_jobs(
    index: int,
    plan: ImagePlan,
    offsets: Sequence[int | None],
    first: int,
    one_thread: bool = False,
) -> list[tuple[Any, ...]]:
    """One image's views as the core's job tuples.

    ``index`` is the image's position in the batch, ``offsets`` where its values start in
    each pixel output (:attr:`View.output` indexes them; None: not an output of the batch)
    and ``first`` the batch index its first job gets (views name their sources within the
    image). ``one_thread``: float resizes as torch computes them on one thread (see
    :func:`torch_one_thread`).
    """
    offsets = list(offsets)
    jobs: list[tuple[Any, ...]] = []
    sizes: list[tuple[int, int]] = []
    for view in plan.views:
        size = (plan.height, plan.width) if view.source is None else sizes[view.source]
        source = None if view.source is None else first + view.source
        offset = offsets[view.output]
        if offset is None:
            raise AssertionError(f"a view writes output {view.output}, absent from the batch")
        job, length = view_job(index, view, size, offset, source, one_thread)
        jobs.append(job)
        sizes.append(job_size(view, size))
        offsets[view.output] = offset + length
    return jobs


def job_size(view: View, size: tuple[int, int]) -> tuple[int, int]:
    """The size of a view's pixels (after its crop, resize and pad) from its source's
    ``size``; :class:`MmfastError` for an intermediate image over the pixel cap."""
    size = size if view.crop is None else (view.crop.height, view.crop.width)
    for stage in (view.resize, view.pad):
        if stage is not None:
            size = stage.size
            if size[0] * size[1] > DEFAULT_MAX_PIXELS:
                # Before the core allocates it: a config asking for this is wrong.
                raise MmfastError(
                    f"size: expected intermediate images of at most {DEFAULT_MAX_PIXELS} "
                    f"pixels, got a {type(stage).__name__.lower()} to {size[0]}x{size[1]} "
                    "(check the config's size values)"
                )
    return size


def view_job(
    index: int,
    view: View,
    size: tuple[int, int],
    offset: int,
    source: int | None,
    one_thread: bool = False,
) -> tuple[tuple[Any, ...], int]:
    """A view of input ``index`` (or of job ``source``, whose pixels are ``size``) as the
    core's job tuple at ``offset``, and the output values it moves the next view along;
    ``one_thread``: float resizes as torch computes them on one thread
    (:func:`torch_one_thread`)."""
    crop, resize, pad = view.crop, view.resize, view.pad
    layout, length = native_layout(view.out, job_size(view, size), one_thread)
    kernel = None if resize is None else resize.kernel
    if kernel == "torch-float" and one_thread:
        kernel = "torch-float-1"
    job: tuple[Any, ...] = (
        index,
        source,
        None if crop is None else (crop.top, crop.left, crop.height, crop.width),
        None if resize is None else (kernel, resize.resample, resize.size),
        None if pad is None else (pad.size, (pad.top, pad.left), pad.fill),
        layout,
        offset,
        [],
        view.table,
    )
    return job, length


def native_layout(
    out: Output | None, size: tuple[int, int], one_thread: bool = False
) -> tuple[tuple[str, Any] | None, int]:
    """A view's output as the core's ``(kind, params)`` layout, and how far it moves the next
    view's offset (a strip's rows belong to the batch: a strip moves it along its first row).
    ``one_thread``: a :class:`Resized` view as torch computes it on one thread."""
    h, w = size
    if out is None:
        return None, 0
    if isinstance(out, Patchify):
        p, t = out.patch_size, out.temporal_patch_size
        layout = ("patches", (p, t, out.merge_size, out.time_major))
        return layout, (h // p) * (w // p) * 3 * t * p * p
    if isinstance(out, HwcPatches):
        boxes, length = window_boxes(out.windows)
        return ("hwc_patches", (out.patch_size, boxes)), length
    if isinstance(out, Canvas):
        ch, cw = out.size
        return ("canvas", (cw, ch * cw)), 3 * ch * cw
    if isinstance(out, Strip):
        return ("strip", (out.patch_size, out.stride)), h // out.patch_size * w
    if isinstance(out, Resized):
        rh, rw = out.size
        return ("resized", (out.resample, out.size, one_thread)), 3 * rh * rw
    boxes, length = window_boxes(out)
    return ("windows", boxes), length


# window_boxes' results for the tuples of windows it saw last.
_BOXES = KeptByIdentity(64)


def window_boxes(
    windows: Sequence[CropBox],
) -> tuple[list[tuple[int, int, int, int]], int]:
    """Windows as the core's ``(top, left, height, width)`` tuples, and the values they
    write. A tuple is converted once while it is kept: families cache their windows per
    size and hand every call the same tuple. Muse Glimmer's plan has 3,129 windows at
    640x480 (tens of thousands at 12 MP); converting them on every call took 0.5 ms."""

    def convert() -> tuple[list[tuple[int, int, int, int]], int]:
        boxes = [(b.top, b.left, b.height, b.width) for b in windows]
        return boxes, sum(3 * b.height * b.width for b in windows)

    if isinstance(windows, tuple):
        kept = _BOXES.get((windows,), (), convert)
        return cast(tuple[list[tuple[int, int, int, int]], int], kept)
    return convert()


def run_videos(
    config: VideoConfig,
    clips: Sequence[NDArray[np.uint8]],
    threads: int,
    dtype: Dtype | None,
) -> BatchFeature:
    """The sampled frames of each clip ((T, H, W, 3) uint8 each) through ``config``, in one
    native call: its outputs, in HF's key order. ``image_rows`` of the result gives each
    clip's entries along the pixels' first axis (for the "clips" layout, 1: its array). Float
    resizes follow torch's thread count, as for images (:func:`torch_one_thread`)."""
    if dtype == "uint8" and not config.raw_pixels:
        raise MmfastError(
            f"dtype: 'uint8' cannot give {config.video_processor_type}'s outputs "
            f"({config.raw_pixels_refusal}); use a float dtype"
        )
    inputs: list[BatchInput] = []
    plans: list[VideoPlan] = []
    firsts: list[int] = []
    for frames in clips:
        firsts.append(len(inputs))
        inputs += list(frames)
        plans.append(config.plan(len(frames), frames.shape[1], frames.shape[2]))
    given = plans
    plans = list(config.finish_batch(plans))
    tables, view, lut = output_tables(finite_tables(config, config.tables), dtype)
    shape, offsets = config.batch_shape(plans)
    jobs: list[tuple[Any, ...]] = []
    one_thread = torch_one_thread()
    for plan, first, offset in zip(plans, firsts, offsets, strict=True):
        at = offset
        clip_jobs: list[int] = []
        sizes: list[tuple[int, int]] = []
        for k, (positions, clip_view) in enumerate(plan.views):
            if plan.starts is not None:
                at = offset + plan.starts[k]
            source = clip_view.source
            size = (plan.height, plan.width) if source is None else sizes[source]
            job, length = view_job(
                first + positions[0],
                clip_view,
                size,
                at,
                None if source is None else clip_jobs[source],
                one_thread,
            )
            clip_jobs.append(len(jobs))
            sizes.append(job_size(clip_view, size))
            jobs.append((*job[:7], [first + p for p in positions[1:]], job[8]))
            at += length
    out = _native.run_batch(inputs, jobs, tables, shape, threads, pool_threads(threads))
    pixels = out if view is None else out.view(view)
    rows: list[int] = []
    if config.layout() == "clips":
        clip_shapes = [plan.output_shapes[config.output_key] for plan in plans]
        pixels = (
            pixels.reshape(len(plans), *clip_shapes[0])
            if all(s == clip_shapes[0] for s in clip_shapes)
            else [
                pixels[a : a + math.prod(s)].reshape(s)
                for a, s in zip(offsets, clip_shapes, strict=True)
            ]
        )
        rows = [1] * len(plans)
    elif config.layout() == "concat":
        rows = [plan.output_shapes[config.output_key][0] for plan in plans]
    else:
        rows = [1] * len(plans)
    outputs: dict[str, Any] = {config.output_key: pixels}
    outputs.update(config.batch_outputs(plans))
    if lut is not None:
        outputs["pixel_lut"] = lut
    return BatchFeature(outputs, image_rows=rows, plans=given)


class Assembled(NamedTuple):
    """A batch's plans as the core's call (:func:`assemble`): everything but the pixels."""

    tables: NDArray[Any]
    view: Any
    lut: NDArray[np.float32] | None
    plans: list[ImagePlan]
    shapes: dict[str, tuple[tuple[int, ...], list[int]]]
    bases: dict[str, int]
    total: tuple[int, ...]
    # The jobs by torch_one_thread(), which only float resizes follow (else False alone).
    jobs: dict[bool, list[tuple[Any, ...]]]
    torch_threads: bool
    computed: bool
    rows: list[int]
    mask: NDArray[np.bool_] | None


def assemble(
    config: ModelConfig, plans: list[ImagePlan], sample_sizes: list[int], dtype: Dtype | None
) -> Assembled:
    """The core's call for a batch of ``plans`` (``sample_sizes`` counts the images of each
    sample): its tables and jobs, the output's size, and how the output is read back."""
    computed = any(isinstance(v.out, Resized) for plan in plans for v in plan.views)
    native = finite_tables(config, lambda: config.batch_tables(plans, sample_sizes))
    if dtype == "uint8" and native.ndim == 3 and len(native) != len(config.pixel_keys):
        # pixel_lut holds one table per pixel output (DeepSeek-VL hybrid's two), not more.
        raise MmfastError(
            f"dtype: 'uint8' cannot give {config.image_processor_type}'s outputs (its images "
            "are normalised in several ways within one output, and pixel_lut holds one table "
            "per output); use a float dtype"
        )
    if computed and dtype == "uint8":
        raise MmfastError(
            "dtype: expected 'float32', 'bfloat16', 'float16' or None for "
            f"{config.image_processor_type}, got 'uint8' (its resized views are computed "
            "in float32 after normalising, not looked up from the pixels)"
        )
    # Computed values are rounded to bfloat16 or float16 after the float32 run, as torch's
    # .to(dtype) rounds the float32 tensor.
    tables, view, lut = output_tables(native, None if computed else dtype)
    plans = list(config.finish_batch(plans, sample_sizes))
    shapes = config.pixel_shapes(plans, sample_sizes)
    shape, offsets = shapes["pixel_values"]
    # Several pixel outputs share one buffer, one after the other, each a view of its part.
    sizes = {key: math.prod(s) for key, (s, _) in shapes.items()}
    bases = dict(zip(sizes, itertools.accumulate(sizes.values(), initial=0), strict=False))
    # torch's thread count matters to the float resizes alone (4 us a call to read).
    torch_threads = computed or any(
        v.resize is not None and v.resize.kernel == "torch-float" for p in plans for v in p.views
    )
    jobs: dict[bool, list[tuple[Any, ...]]] = {}
    for one_thread in {False, torch_threads}:
        jobs[one_thread] = []
        for i, plan in enumerate(plans):
            starts = [
                bases[k] + shapes[k][1][i] if k in shapes else None for k in config.pixel_keys
            ]
            jobs[one_thread] += native_jobs(i, plan, starts, len(jobs[one_thread]), one_thread)
    layout = config.layout()
    rows = (
        [plan.output_shapes["pixel_values"][0] for plan in plans]
        if layout == "concat"
        else [1] * len(plans)
        if layout in ("stack", "pad_images")
        else []
    )
    return Assembled(
        tables=tables,
        view=view,
        lut=lut,
        plans=plans,
        shapes=shapes,
        bases=bases,
        total=shape if len(shapes) == 1 else (sum(sizes.values()),),
        jobs=jobs,
        torch_threads=torch_threads,
        computed=computed,
        rows=rows,
        mask=None if lut is None else config.rows_mask(shape, offsets, plans),
    )


# The calls of one image assembled last: a server meets the same few sizes again and again,
# and assembling took 6 us of the 20 us of Python in a call (Qwen3-VL at 640x480).
_ASSEMBLED = KeptByIdentity(32)


def run_plans(
    config: ModelConfig,
    inputs: list[BatchInput],
    plans: list[ImagePlan],
    sample_sizes: list[int],
    threads: int,
    dtype: Dtype | None,
) -> BatchFeature:
    """Runs the plans of a batch in one native call and assembles HF's outputs;
    ``sample_sizes`` counts the images of each sample, in order."""
    batch = (
        cast(
            Assembled,
            _ASSEMBLED.get(
                (config, plans[0]),
                (*sample_sizes, dtype),
                lambda: assemble(config, plans, sample_sizes, dtype),
            ),
        )
        if len(plans) == 1
        else assemble(config, plans, sample_sizes, dtype)
    )
    jobs = batch.jobs[batch.torch_threads and torch_one_thread()]
    out = _native.run_batch(inputs, jobs, batch.tables, batch.total, threads, pool_threads(threads))
    view = batch.view
    if batch.computed and dtype in ("bfloat16", "float16"):
        out, view = rounded(np.asarray(out, np.float32), dtype)
    out = out if view is None else out.view(view)
    shapes, bases = batch.shapes, batch.bases
    parts = (
        {"pixel_values": out}
        if len(shapes) == 1
        else {k: out[bases[k] : bases[k] + math.prod(s)].reshape(s) for k, (s, _) in shapes.items()}
    )
    # The plans' pixel_values are HF's output_key (Fuyu's images, Phi-4's image_pixel_values).
    outputs = {config.output_key if k == "pixel_values" else k: v for k, v in parts.items()}
    outputs.update(config.batch_outputs(batch.plans, sample_sizes))
    if config.output_order:
        order = [k for k in config.output_order if k in outputs]
        outputs = {k: outputs[k] for k in [*order, *(k for k in outputs if k not in order)]}
    if batch.lut is not None:
        # Copies: the caller may change its arrays, and the next call reads these.
        outputs["pixel_lut"] = batch.lut.copy()
        if batch.mask is not None:
            outputs["pixel_rows_mask"] = batch.mask.copy()
    return BatchFeature(outputs, image_rows=batch.rows, plans=plans)


def finite_tables(config: Any, make: Callable[[], NDArray[Any]]) -> NDArray[Any]:
    """``config``'s tables as ``make`` gives them, refused when a value is not finite: an
    ``image_std`` that is zero once rounded to float32, or a mean or rescale factor that
    overflows, gives NaN or inf for every pixel (transformers computes them, warning at
    most)."""
    with np.errstate(all="ignore"):
        native = make()
    values = bfloat16_values(native) if native.dtype == np.uint16 else native
    if not np.isfinite(values).all():
        names = ("do_rescale", "rescale_factor", "do_normalize", "image_mean", "image_std")
        got = ", ".join(
            f"{name}={getattr(config, name)!r}" for name in names if hasattr(config, name)
        )
        raise MmfastError(
            "image_mean, image_std, rescale_factor: expected settings whose normalised values "
            f"are finite in float32, got {got}"
        )
    return native


def output_tables(
    native: NDArray[Any], dtype: Dtype | None
) -> tuple[NDArray[Any], Any, NDArray[np.float32] | None]:
    """The core's tables for ``dtype``, the dtype its output is viewed as, and the
    ``pixel_lut`` of a uint8 output.

    ``native`` is the family's table: float32 values, bfloat16 bits (uint16, Llama 4) or, where
    HF returns the pixels untouched, an identity uint8 table. bfloat16 and float16 are the
    float32 values rounded to nearest even, as torch's ``.to(dtype)`` rounds them.
    """
    bf16 = native.dtype == np.uint16
    values = bfloat16_values(native) if bf16 else native.astype(np.float32, copy=False)
    if dtype is None:
        dtype = "uint8" if native.dtype == np.uint8 else "float32"
        if dtype == "uint8":
            return native, None, None
    if dtype == "float32":
        return values, None, None
    if dtype == "bfloat16":
        import ml_dtypes  # 0.5-1 s to import: only when bfloat16 arrays are asked for

        with np.errstate(all="ignore"):  # huge constants overflow to inf, as in transformers
            bits = native if bf16 else bfloat16_bits(values)
        return np.ascontiguousarray(bits), ml_dtypes.bfloat16, None
    if dtype == "float16":
        with np.errstate(all="ignore"):  # as above
            return values.astype(np.float16).view(np.uint16), np.float16, None
    identity = np.broadcast_to(identity_table(), native.shape)
    # A copy: the family's table is cached and shared by every call.
    return np.ascontiguousarray(identity), None, np.array(values, np.float32)


def rounded(values: NDArray[np.float32], dtype: str) -> tuple[NDArray[Any], Any]:
    """float32 values rounded to ``dtype`` ("bfloat16" or "float16") as torch's ``.to(dtype)``
    rounds them (the tables of :func:`output_tables` round the same way), and the dtype to
    view the bits as."""
    if dtype == "float16":
        return values.astype(np.float16), None
    import ml_dtypes  # as in output_tables

    return bfloat16_bits(values), ml_dtypes.bfloat16
