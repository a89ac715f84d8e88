"""``mmfast bench``: each kernel against its alternatives, measured in the same run.

Times are the median of several calls (:func:`median_seconds`), on generated images (a
seeded RNG) so the command needs no data, except the decode and JPEG sections, which read
the 12 MP photo from ``../shared`` (``--jpeg PATH``) and are skipped with a note without it.
Every ratio compares two times measured in this run, on one thread unless a row says
otherwise. The alternatives are what a user would otherwise run:

* ``kernels``: the pure-NumPy twin in :mod:`mmfast.reference`, and ``np.copyto`` of the
  bytes each kernel reads (uint8 pixels, or the float32 it serialises) into a buffer the size
  of its output, the memory floor no kernel that writes its output can beat by much.
* ``resize``: ``PIL.Image.resize`` on the same decoded pixels (mmfast reads them as an array).
* ``decode``: transformers' chain ``convert_to_rgb(exif_transpose(Image.open(...)))`` (plain
  Pillow when transformers is absent).
* ``pil``: ``np.asarray`` of a PIL image, against :func:`mmfast.image.pil_to_rgb`.
* ``models``, ``jpeg``, ``batch``: transformers' PIL-backend processors (``return_tensors="np"``)
  and, when torch and torchvision import, its torchvision backend (``return_tensors="pt"``,
  ``torch.set_num_threads(1)``), built from the same config as mmfast's processor.
* ``models`` and ``fixed`` also print mmfast's own time against two of its own: the same
  pixels given as a uint8 array (``mmfast/array``: what a PIL image costs beyond its pixels)
  and the cell's **floor**, mmfast's exact resizes for that cell plus writing arrays the
  size of its outputs (``mmfast/floor``: the work no processor of that cell can skip). These
  are timed interleaved, call by call, so that a busy machine slows all of them alike.
* ``fixed``: the fixed cost of a call, on small images through LLaVA-1.5 and SigLIP.
* ``modes``: PIL images of modes a server gets besides RGB (RGBA as from a screenshot's PNG,
  LA as from a PNG of grey text, palette as from a GIF or a PNG8, CMYK as from a JPEG made
  for print) through LLaVA-1.5,
  against transformers' classes on the same images, which convert them (compositing
  transparency onto white), and against mmfast given the conversion as an RGB PIL image
  (``mmfast/RGB``).
* ``scaling``: a 16-image batch of mixed PIL images and JPEG bytes on 2 threads against 1,
  as the median and spread of interleaved runs, beside how far the machine's memory
  bandwidth grows with a second thread (:func:`memory_line`).
* ``video``: ``transformers.video_utils.load_video(path, backend="pyav")`` on a 60 s 640x360
  H.264 clip made with PyAV in the run (cached in the temp directory), and, end to end,
  that reader plus transformers' Qwen2-VL video processor (torchvision). Skipped, with a note,
  without PyAV (and the end-to-end row without torch).

transformers and torch are optional: their rows are skipped, with a note, when absent.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import itertools
import math
import os
import platform
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import PIL
from numpy.typing import NDArray
from PIL import Image, ImageOps

from mmfast import _native, models, reference
from mmfast.cli import BENCH_SECTIONS as SECTIONS
from mmfast.errors import MmfastError
from mmfast.image import convert_to_rgb, decode_image, pil_to_rgb, pillow_rows_readable, resize
from mmfast.models.base import View
from mmfast.processors import DEFAULT_POOL_MB, ImageProcessor, set_buffer_pool

SIZES = ((480, 640), (1080, 1920), (3024, 4032))
# GLM-Image takes no side under 28 pixels.
QUICK_SIZES = ((36, 48), (60, 80))
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)

# (source (height, width), target (height, width), filter). The first target is the
# brief's Pillow size (868, 1148): width 868, height 1148, so it also squeezes the aspect.
# The third upscales both sides; the fourth is the mixed-direction case (width up, height down).
RESIZE_CASES: tuple[tuple[tuple[int, int], tuple[int, int], str], ...] = (
    ((3024, 4032), (1148, 868), "bicubic"),
    ((1080, 1920), (336, 336), "bilinear"),
    ((480, 640), (756, 1036), "bicubic"),
    ((480, 640), (336, 1036), "bicubic"),
)
QUICK_RESIZE_CASES = (((48, 64), (23, 17), "bicubic"), ((30, 40), (52, 20), "bilinear"))

# The brief's mixed batch: 16 images from 320x240 up to 4032x3024.
BATCH_IMAGES = 16
BATCH_MODEL = "Qwen/Qwen2-VL-7B-Instruct"
# The batch section's models: a patch family and a tiling one (several resizes per image).
BATCH_MODELS = (BATCH_MODEL, "OpenGVLab/InternVL3-8B-hf")
# One checkpoint per family and distinct image setting (the other built-ins share one of these
# configs: GLM-4.5V/4.6V/OCR, Kimi-VL-Thinking-2506, Kimi-K2.6, SigLIP2, Qwen2.5-Omni,
# MiniCPM-V-4.7-1B).
MODELS = (
    "Qwen/Qwen2-VL-7B-Instruct",
    "Qwen/Qwen2.5-VL-7B-Instruct",
    "Qwen/Qwen3-VL-8B-Instruct",
    "Qwen/Qwen3-Omni-30B-A3B-Instruct",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "llava-hf/llava-1.5-7b-hf",
    "zai-org/GLM-4.1V-9B-Thinking",
    "PaddlePaddle/PaddleOCR-VL",
    "moonshotai/Kimi-VL-A3B-Instruct",
    "moonshotai/Kimi-K2.5",
    "google/gemma-3-4b-it",
    "google/siglip-so400m-patch14-384",
    "google/paligemma2-3b-pt-224",
    "OpenGVLab/InternVL3-8B-hf",
    "CohereLabs/aya-vision-8b",
    "llava-hf/llava-v1.6-mistral-7b-hf",
    "llava-hf/llava-onevision-qwen2-7b-ov-hf",
    "HuggingFaceTB/SmolVLM2-2.2B-Instruct",
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
    "HuggingFaceM4/idefics2-8b",
    "BAAI/Emu3-Chat-hf",
    "baidu/ERNIE-4.5-VL-28B-A3B-PT",
    "tencent/HunyuanOCR",
    "zai-org/GLM-5.3-Flash",
    "lkhl/VideoLLaMA3-2B-Image-HF",
    "zai-org/GLM-Image",
    "zai-org/GLM-GA",
    "openbmb/MiniCPM-V-4.6",
    "openbmb/MiniCPM-OCR-1.0",
    "google/gemma-4-31B-it",
    "google/siglip2-base-patch16-naflex",
    "LiquidAI/LFM2-VL-1.6B",
    "google/gemma-4-12B-it",
    "meta-llama/Llama-3.2-11B-Vision-Instruct",
    "deepseek-community/DeepSeek-OCR-2",
    "CohereLabs/command-a-vision-07-2025",
    "thisisiron/Ovis2-2B-hf",
    "ibm-granite/granite-for-docling-500m",
    "swiss-ai/Apertus-v1.5-8B",
    "CohereLabs/North-Micro-Vision-Instruct",
    "nvidia/Cosmos3-Edge",
    "tencent/Hy4",
    "MiniMaxAI/MiniMax-M3",
    "meta-models/Muse-Glimmer-30B",
    "PaddlePaddle/PP-Chart2Table_safetensors",
    "microsoft/udop-large",
    "lerobot/pi0_base",
    "LanguageBind/Video-LLaVA-7B-hf",
    "adept/fuyu-8b",
    "PaddlePaddle/PP-FormulaNet_plus-L_safetensors",
    "microsoft/Phi-4-multimodal-instruct",
    "allenai/Molmo2-8B",
    "liuhaotian/llava-v1.5-7b",
    "deepseek-community/deepseek-vl-1.3b-chat",
    "deepseek-community/Janus-Pro-1B",
    "deepseek-community/deepseek-vl-7b-chat",
    "stepfun-ai/Step-3.7-Flash",
    "facebook/chameleon-7b",
    "Salesforce/blip-vqa-base",
    "HuggingFaceM4/idefics-9b",
    "rhymes-ai/Aria",
    "facebook/Perception-LM-1B",
    "thinkingmachines/Inkling",
    "baidu/Unlimited-OCR",
)
# Settings a model is measured with where its file asks for something mmfast refuses (both
# sides run them): UDOP's OCR and PP-FormulaNet's crop found from the pixels.
MODEL_SETTINGS: dict[str, dict[str, Any]] = {
    "microsoft/udop-large": {"apply_ocr": False},
    "PaddlePaddle/PP-FormulaNet_plus-L_safetensors": {"do_crop_margin": False},
}
JPEG_NAME = "grace_hopper_12mp.jpg"

# The video section's clip: 60 s of 640x360 H.264 at 30 frames a second (1800 frames, about
# 1.2 Mbit/s: libx264's defaults, B-frames, but a keyframe every 2 s as streaming encoders and
# phone cameras write them, where libx264 alone puts one every 250 frames), the frames it
# samples and the model of its end-to-end row. --quick uses a 2 s 64x48 clip at 10 frames a
# second.
VIDEO_CLIP = (60, (360, 640), 30)
QUICK_VIDEO_CLIP = (2, (48, 64), 10)
VIDEO_FRAMES = 16
VIDEO_FPS = 2
VIDEO_MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"


def default_jpeg() -> Path:
    """The 12 MP JPEG: ``$MMFAST_SHARED/images/...``, else ``../shared/images/...`` beside the
    repository root (meaningful in a source checkout only)."""
    shared = os.environ.get("MMFAST_SHARED")
    root = Path(shared) if shared else Path(__file__).resolve().parents[3] / "shared"
    return root / "images" / JPEG_NAME


def median_seconds(
    fn: Callable[[], object], budget: float = 0.5, max_runs: int = 25, min_runs: int = 3
) -> float:
    """Median wall time of ``fn()`` over runs that fit in about ``budget`` seconds (at least
    ``min_runs``, after one warm-up call)."""
    fn()  # warm up: page faults, lazy imports, caches
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_runs or (len(times) < max_runs and time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


@dataclass(frozen=True)
class Row:
    """One case at one size (``None``: a batch of mixed sizes): our time and each
    alternative's time; ``relative``: times of mmfast's own baselines (the cell's floor, the
    same pixels as an array), printed as mmfast's time over theirs."""

    case: str
    size: tuple[int, int] | None
    ours: float
    others: dict[str, float]
    relative: dict[str, float] = field(default_factory=dict)

    def format(self, columns: list[str], relative: Sequence[str] = ()) -> str:
        size = f"{self.size[1]:>5}x{self.size[0]:<5}" if self.size else f"{'mixed':^11}"
        cells = [f"{self.case:<28}", size, f"{self.ours * 1e3:9.2f}"]
        for name in columns:
            t = self.others.get(name)
            width = _width(name)
            cells.append(f"{t * 1e3:{width}.2f} {t / self.ours:7.2f}x" if t else " " * (width + 9))
        for name in relative:
            t = self.relative.get(name)
            width = _width(name)
            cells.append(
                f"{t * 1e3:{width}.3f} {self.ours / t:{len(name) + 7}.2f}x"
                if t
                else " " * (width + len(name) + 9)
            )
        return "  ".join(cells).rstrip()


def _width(column: str) -> int:
    return max(9, len(column) + 3)


def header(columns: list[str], relative: Sequence[str] = ()) -> str:
    """The column titles matching :meth:`Row.format`."""
    return "  ".join(
        [f"{'case':<28}", f"{'size (WxH)':<11}", f"{'mmfast ms':>9}"]
        + [f"{name + ' ms':>{_width(name)}} {'ratio':>8}" for name in columns]
        + [
            f"{name + ' ms':>{_width(name)}} {'mmfast/' + name:>{len(name) + 8}}"
            for name in relative
        ]
    )


def interleaved_medians(
    fns: Sequence[Callable[[], object]], budget: float = 0.5, max_runs: int = 41, min_runs: int = 3
) -> list[float]:
    """Median wall time of each of ``fns``, called in turn (one call of each per round, after
    a warm-up round) for about ``budget`` seconds: on a busy machine a slow stretch slows
    every function alike, so their ratios hold where separate medians would drift.

    Each round starts one function further on, so that each follows each other equally
    often: a call right after one that wrote and freed a large output runs slower. (In a
    fixed order, Qwen3-Omni's 1920x1080 PIL image, timed right after the cell's floor, took
    1.13-1.23x as long as its array; with the array right after the floor, 1.00-1.04x;
    rotated, 1.08-1.13x.)"""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    start = time.perf_counter()
    rounds = 0
    while len(times[0]) < min_runs or (
        len(times[0]) < max_runs and time.perf_counter() - start < budget
    ):
        for i in range(len(fns)):
            turn = (rounds + i) % len(fns)
            t0 = time.perf_counter()
            fns[turn]()
            times[turn].append(time.perf_counter() - t0)
        rounds += 1
    return [float(np.median(t)) for t in times]


def floor_fn(
    proc: ImageProcessor, size: tuple[int, int], backend: str | None = None
) -> Callable[[], object]:
    """The floor of one cell: mmfast's own exact resizes of the cell's plan for an image of
    ``size`` (each view's, from a source of the size it reads; of the part its windows read
    where it writes windows of the resized image, as the engine resizes only that part: a
    centre crop), then writing arrays of the shapes and dtypes of the cell's outputs: the
    pixels, and masks such as Idefics2's int64 ``pixel_attention_mask``, as large again as
    its float32 pixels. The arrays are allocated once and written on every run, as the
    processor writes its outputs into the freed buffers its pool hands back (fresh arrays
    would add the kernel's zeroing of new pages, which no such call pays: Qwen2-VL's floor
    at 1920x1080 took 9.4 ms with them, 4.8 ms without)."""
    config = proc.config if backend is None else proc.with_backend(backend)
    plan = config.plan(*size)
    resizes = []
    sizes: list[tuple[int, int]] = []
    for view in plan.views:
        src = size if view.source is None else sizes[view.source]
        if view.crop is not None:
            src = (view.crop.height, view.crop.width)
        if view.resize is not None and view.resize.size != src:
            read, target = _window_part(src, view.resize.size, view)
            pixels = synthetic_photo(*read)
            kernel = view.resize.kernel
            resizes.append(partial(_native.resize, pixels, target, view.resize.resample, kernel))
            src = view.resize.size
        if view.pad is not None:
            src = view.pad.size
        sizes.append(src)
    outputs = proc(synthetic_photo(*size), threads=1, backend=backend).values()
    arrays = [np.empty(a.shape, a.dtype) for a in outputs if isinstance(a, np.ndarray)]

    def floor() -> object:
        for run in resizes:
            run()
        for array in arrays:
            array.fill(1)
        return arrays

    return floor


def _window_part(
    src: tuple[int, int], resized: tuple[int, int], view: View
) -> tuple[tuple[int, int], tuple[int, int]]:
    """(source, target) sizes of the resize a view needs: the whole, or, for windows of the
    resized pixels with no pad after, the rows and columns they read inside the resized image
    and the source part that maps to them."""
    windows = view.windows
    if not windows or view.pad is not None:
        return src, resized
    top = max(0, min(w.top for w in windows))
    left = max(0, min(w.left for w in windows))
    bottom = min(resized[0], max(w.bottom for w in windows))
    right = min(resized[1], max(w.right for w in windows))
    if bottom <= top or right <= left:
        return src, resized
    target = (bottom - top, right - left)
    read = tuple(max(1, round(s * t / r)) for s, t, r in zip(src, target, resized, strict=True))
    return (read[0], read[1]), target


def synthetic_photo(height: int, width: int, seed: int = 0) -> NDArray[np.uint8]:
    """(H, W, 3) uint8: smooth colour waves and gradients plus pixel noise, like a photo to a
    resampler or a JPEG codec (pure noise compresses and decodes unlike any photo)."""
    rng = np.random.default_rng(seed)
    y = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :]
    out = np.empty((height, width, 3), np.uint8)
    for c in range(3):
        fx, fy, phase = rng.uniform(0.5, 3.0), rng.uniform(0.5, 3.0), rng.uniform(0, 2 * np.pi)
        smooth = 128 + 70 * np.sin(2 * np.pi * (fx * x + fy * y * y) + phase) + 40 * (x - y)
        noise = rng.integers(-12, 13, (height, width), dtype=np.int16)
        out[..., c] = np.clip(smooth + noise, 0, 255)
    return out


def _pil(size: tuple[int, int], seed: int = 0) -> Image.Image:
    return Image.fromarray(synthetic_photo(*size, seed=seed))


# --------------------------------------------------------------------------------------------
# Optional comparison libraries
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backends:
    """What can be compared against in this environment (versions, or None when absent)."""

    transformers: str | None
    torch: str | None

    @classmethod
    def detect(cls) -> Backends:
        hf = torch = None
        if importlib.util.find_spec("transformers") is not None:
            hf = importlib.import_module("transformers").__version__
        if all(importlib.util.find_spec(m) is not None for m in ("torch", "torchvision")):
            torch = importlib.import_module("torch").__version__
        return cls(hf, torch if hf else None)

    def describe(self) -> str:
        hf = f"transformers {self.transformers}" if self.transformers else "transformers: absent"
        tv = f"torch {self.torch}" if self.torch else "torch not installed"
        return f"{hf}; torchvision backend: {tv}"


def hf_processor(model_id: str, backend: str) -> Any | None:
    """transformers' image processor for a built-in model (``backend`` "pil" or "torch"),
    from the same preprocessor config mmfast reads; None when that backend does not exist.

    The torchvision classes come from their own modules: transformers' top-level names fall
    back to the PIL classes when torchvision is missing.
    """
    family, _ = models.config.select_family(models.config.read_source(model_id))
    where = family.hf_pil if backend == "pil" else family.hf_torchvision
    if where is None:
        return None
    module, name = where.rsplit(".", 1)
    # The model's processor passes its image defaults on every call (InternVL's tiling, ...).
    defaults = models.registry.builtin_processor_defaults(model_id, family)
    config = {
        **models.registry.BUILTINS[model_id].preprocessor,
        **defaults,
        **MODEL_SETTINGS.get(model_id, {}),
    }
    return getattr(importlib.import_module(f"transformers.models.{module}"), name).from_dict(config)


def short_name(model_id: str) -> str:
    """``Qwen/Qwen2-VL-7B-Instruct`` -> ``Qwen2-VL-7B``: fits the case column."""
    name = model_id.rsplit("/", 1)[-1]
    for suffix in ("-Instruct", "-hf", "-17B-16E"):
        name = name.removesuffix(suffix)
    return name


# --------------------------------------------------------------------------------------------
# Sections: each yields rows, or strings printed as notes
# --------------------------------------------------------------------------------------------

Item = Row | str


def kernel_rows(sizes: tuple[tuple[int, int], ...] = SIZES, budget: float = 0.5) -> Iterator[Row]:
    """The seed kernels: de-interleave, pad, serialise, at each size."""
    rng = np.random.default_rng(0)
    for h, w in sizes:
        yield from _seed_kernels(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), budget)


def _seed_kernels(image: np.ndarray, budget: float = 0.5) -> Iterator[Row]:
    size = image.shape[:2]
    planes = _native.deinterleave_rgb_to_planes(image, CLIP_MEAN, CLIP_STD)
    planes_dst = np.empty_like(planes)
    # The copy floors move what each kernel moves: uint8 pixels in, float32 values out (a
    # float32 source would read four times the kernel's bytes), into arrays allocated once.
    pixels = np.zeros(planes.shape, np.uint8)

    def t(fn: Callable[[], object]) -> float:
        return median_seconds(fn, budget)

    yield Row(
        "deinterleave_rgb_to_planes",
        size,
        t(lambda: _native.deinterleave_rgb_to_planes(image, CLIP_MEAN, CLIP_STD)),
        {
            "reference": t(
                lambda: reference.deinterleave_rgb_to_planes(image, CLIP_MEAN, CLIP_STD)
            ),
            "copy floor": t(lambda: np.copyto(planes_dst, pixels)),
        },
    )
    # Llama 4 style: pad up to the next multiple of its 336-pixel tile.
    canvas = (-(-size[0] // 336) * 336, -(-size[1] // 336) * 336)
    canvas_dst = np.empty((3, *canvas), np.float32)
    canvas_src = np.zeros(canvas_dst.shape, np.uint8)
    yield Row(
        "pad_and_normalize_to_tensor",
        size,
        t(lambda: _native.pad_and_normalize_to_tensor(image, canvas, CLIP_MEAN, CLIP_STD)),
        {
            "reference": t(
                lambda: reference.pad_and_normalize_to_tensor(image, canvas, CLIP_MEAN, CLIP_STD)
            ),
            "copy floor": t(lambda: np.copyto(canvas_dst, canvas_src)),
        },
    )
    yield Row(
        "serialize_pixel_values",
        size,
        t(lambda: _native.serialize_pixel_values(planes)),
        {
            "reference": t(lambda: reference.serialize_pixel_values(planes)),
            "tobytes": t(planes.tobytes),
            "copy floor": t(lambda: np.copyto(planes_dst, planes)),
        },
    )


def resize_rows(
    cases: Sequence[tuple[tuple[int, int], tuple[int, int], str]] = RESIZE_CASES,
    budget: float = 0.5,
) -> Iterator[Row]:
    """``mmfast.resize`` against ``pil.resize((w, h))`` on the same decoded RGB image.

    The kernel against the kernel: mmfast reads the pixels as an array. The cost of
    getting them out of a PIL image first is the ``pil`` section's.
    """
    filters = {"bilinear": Image.Resampling.BILINEAR, "bicubic": Image.Resampling.BICUBIC}
    for src, (h, w), name in cases:
        pil = _pil(src)
        array = np.asarray(pil)
        yield Row(
            f"{name} to {w}x{h} (WxH)",
            src,
            median_seconds(partial(resize, array, (h, w), name), budget),
            {"Pillow": median_seconds(partial(pil.resize, (w, h), filters[name]), budget)},
        )


def decode_columns(backends: Backends) -> list[str]:
    return ["transformers" if backends.transformers else "Pillow"]


def turned_jpeg(data: bytes, orientation: int) -> bytes:
    """JPEG ``data`` with an EXIF segment giving ``orientation`` put after its start marker,
    the pixels' bytes unchanged: a photo as a phone stores it (turned by its EXIF tag)."""
    if data[:2] != b"\xff\xd8":
        raise ValueError(f"data: expected JPEG bytes, got {data[:2]!r} first")
    exif = Image.Exif()
    exif[0x0112] = orientation
    payload = exif.tobytes()
    return data[:2] + b"\xff\xe1" + (len(payload) + 2).to_bytes(2, "big") + payload + data[2:]


def decode_rows(data: bytes, label: str, backends: Backends, budget: float = 0.5) -> Iterator[Row]:
    """``mmfast.decode_image(bytes)`` against transformers' decode chain on the same bytes,
    and on them with EXIF orientation 6 (a phone photo held upright) where they are a JPEG
    without an orientation of its own."""
    if backends.transformers:
        from transformers.image_transforms import convert_to_rgb

        def other(data: bytes) -> object:
            with Image.open(io.BytesIO(data)) as im:
                return convert_to_rgb(ImageOps.exif_transpose(im), return_numpy=True)

    else:

        def other(data: bytes) -> object:
            with Image.open(io.BytesIO(data)) as im:
                return np.array(ImageOps.exif_transpose(im).convert("RGB"))

    cases = [(f"decode_image {label}", data)]
    with Image.open(io.BytesIO(data)) as im:
        # Pillow opens a phone's JPEG with a second picture (a depth map) as MPO.
        if im.format in ("JPEG", "MPO") and im.getexif().get(0x0112, 1) == 1:
            cases.append(("decode_image (orientation 6)", turned_jpeg(data, 6)))
    for case, encoded in cases:
        h, w = decode_image(encoded).shape[:2]
        big = h * w > 4_000_000
        yield Row(
            case[:28],
            (h, w),
            median_seconds(partial(decode_image, encoded), budget),
            {
                decode_columns(backends)[0]: median_seconds(
                    partial(other, encoded), budget, min_runs=2 if big else 3
                )
            },
        )


def pil_export_rows(
    sizes: tuple[tuple[int, int], ...] = SIZES, budget: float = 0.5
) -> Iterator[Row]:
    """:func:`pil_to_rgb` (in place) against ``np.asarray`` of an RGB PIL image."""
    for size in sizes:
        pil = _pil(size)
        try:
            pil.__arrow_c_array__()
            how = "in place"
        except ValueError:  # rows in several Pillow blocks: read where they are, or copied once
            how = "in place" if pillow_rows_readable() else "one block copy"
        yield Row(
            f"pil_to_rgb ({how})",
            size,
            median_seconds(partial(pil_to_rgb, pil), budget),
            {"np.asarray": median_seconds(partial(np.asarray, pil), budget)},
        )


MODEL_COLUMNS = ["HF PIL", "HF torchvision"]


def model_rows(
    backends: Backends,
    sizes: tuple[tuple[int, int], ...] = SIZES,
    model_ids: Sequence[str] | None = None,
    budget: float = 0.5,
) -> Iterator[Item]:
    """Each built-in model on a decoded PIL RGB image, one thread: mmfast
    ``proc(pil, threads=1)`` against transformers' PIL backend (``return_tensors="np"``), and
    mmfast's ``backend="torchvision"`` against transformers' torchvision backend (``"pt"``,
    torch on one thread) on a row marked "tv"."""
    ids = list(MODELS if model_ids is None else model_ids)
    images = {size: _pil(size) for size in sizes}
    with _torch_threads(backends, 1):
        for model_id in ids:
            proc = ImageProcessor.from_pretrained(model_id, **MODEL_SETTINGS.get(model_id, {}))
            hf_pil = hf_processor(model_id, "pil") if backends.transformers else None
            hf_torch = hf_processor(model_id, "torch") if backends.torch else None
            if backends.transformers and hf_pil is None:
                yield f"  {short_name(model_id)}: transformers has no PIL class for it"
            for size, pil in images.items():
                min_runs = 2 if size[0] * size[1] > 4_000_000 else 3
                name = short_name(model_id)
                array = np.asarray(pil)
                if hf_pil is not None or hf_torch is None:
                    others = {}
                    if hf_pil is not None:
                        hf = _bind(hf_pil, pil, "np")
                        others["HF PIL"] = median_seconds(hf, budget, min_runs=min_runs)
                    ours, relative = _against_floor(proc, pil, array, None, budget)
                    yield Row(name, size, ours, others, relative)
                if hf_torch is not None:
                    hf = _bind(hf_torch, pil, "pt")
                    ours, relative = _against_floor(proc, pil, array, "torchvision", budget)
                    yield Row(
                        f"{name} tv",
                        size,
                        ours,
                        {"HF torchvision": median_seconds(hf, budget, min_runs=min_runs)},
                        relative,
                    )


RELATIVE_COLUMNS = ["array", "floor"]


def _against_floor(
    proc: ImageProcessor,
    pil: Image.Image,
    array: NDArray[np.uint8],
    backend: str | None,
    budget: float,
) -> tuple[float, dict[str, float]]:
    """mmfast's time on ``pil`` (one thread, ``backend``, None: the processor's), and,
    interleaved with it, its time on the same pixels as an array and the cell's floor
    (:func:`floor_fn`)."""
    try:
        floor: Callable[[], object] | None = floor_fn(proc, (pil.height, pil.width), backend)
    except (AttributeError, TypeError, ValueError):  # a plan the floor cannot replay
        floor = None
    fns: list[Callable[[], object]] = [
        partial(proc, pil, threads=1, backend=backend),
        partial(proc, array, threads=1, backend=backend),
    ]
    if floor is not None:
        fns.append(floor)
    times = interleaved_medians(fns, budget)
    return times[0], dict(zip(RELATIVE_COLUMNS, times[1:], strict=False))


def _bind(hf: Any, images: object, tensors: str) -> Callable[[], object]:
    return lambda: hf(images, return_tensors=tensors)


@contextmanager
def _torch_threads(backends: Backends, n: int) -> Iterator[None]:
    """``torch.set_num_threads(n)`` inside the block when torch is in use, restored after."""
    torch = importlib.import_module("torch") if backends.torch else None
    old = torch.get_num_threads() if torch is not None else 0
    if torch is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if torch is not None:
            torch.set_num_threads(old)


def jpeg_rows(
    path: Path, backends: Backends, model_id: str = BATCH_MODEL, budget: float = 0.5
) -> Iterator[Row]:
    """From a JPEG file: mmfast ``proc(bytes, threads=1)`` (decode included) against
    ``transformers.image_utils.load_image(path)`` + the PIL-backend processor."""
    data = path.read_bytes()
    proc = ImageProcessor.from_pretrained(model_id)
    others: dict[str, float] = {}
    h, w = decode_image(data).shape[:2]
    if backends.transformers:
        from transformers.image_utils import load_image

        hf = hf_processor(model_id, "pil")

        def from_path() -> object:
            assert hf is not None  # Qwen2-VL has a PIL backend
            return hf(load_image(str(path)), return_tensors="np")

        others["load_image+HF PIL"] = median_seconds(
            from_path,
            budget,
            min_runs=2 if h * w > 4_000_000 else 3,
        )
    yield Row(
        f"{short_name(model_id)} from bytes",
        (h, w),
        median_seconds(partial(proc, data, threads=1), budget),
        others,
    )


# The fixed-cost cells: (model, (height, width), goal in ms on one thread).
FIXED_CELLS = (
    ("llava-hf/llava-1.5-7b-hf", (48, 64), 0.2),
    ("google/siglip-so400m-patch14-384", (48, 64), 0.2),
    ("llava-hf/llava-1.5-7b-hf", (480, 640), 0.6),
)


def fixed_rows(budget: float = 0.5) -> Iterator[Item]:
    """What one call costs beyond its work: small images through LLaVA-1.5 and SigLIP on one
    thread, given as a PIL image (the row's time) and as an array, against the cell's floor
    (:func:`floor_fn`), all interleaved, with the issue's goal for the call."""
    for model_id, size, goal in FIXED_CELLS:
        proc = ImageProcessor.from_pretrained(model_id)
        pil = _pil(size)
        ours, relative = _against_floor(proc, pil, np.asarray(pil), None, 2 * budget)
        yield Row(f"{short_name(model_id)[:16]} goal {goal} ms", size, ours, {}, relative)


MODES_MODEL = "llava-hf/llava-1.5-7b-hf"


def mode_images(size: tuple[int, int]) -> Iterator[tuple[str, Image.Image]]:
    """The photo of ``size`` in the modes :func:`mode_rows` times, labelled: RGBA opaque
    (alpha 255 throughout, as in most screenshots) and with its top third fading through
    every alpha, its green band as L (a scan) and as L with that alpha, a palette of 256
    colours, the same with one index transparent, and CMYK."""
    photo = synthetic_photo(*size)
    alpha = np.full((*size, 1), 255, np.uint8)
    yield "RGBA opaque", Image.fromarray(np.concatenate([photo, alpha], axis=2))
    alpha[: size[0] // 3] = (np.arange(size[1]) % 256)[None, :, None]
    yield "RGBA 1/3 translucent", Image.fromarray(np.concatenate([photo, alpha], axis=2))
    yield "L", Image.fromarray(photo[..., 1])
    grey_alpha = np.concatenate([photo[..., 1:2], alpha], axis=2)
    yield "LA 1/3 translucent", Image.frombytes("LA", size[::-1], grey_alpha.tobytes())
    palette = Image.fromarray(photo).convert("P", palette=Image.Palette.ADAPTIVE)
    yield "P", palette
    keyed = palette.copy()
    keyed.info["transparency"] = 3
    yield "P transparent index", keyed
    yield "CMYK", Image.fromarray(photo).convert("CMYK")


def mode_rows(
    backends: Backends,
    sizes: tuple[tuple[int, int], ...] = SIZES,
    model_id: str = MODES_MODEL,
    budget: float = 0.5,
) -> Iterator[Row]:
    """PIL images of other modes (:func:`mode_images`) through one processor, one thread,
    on both backends against transformers' (as :func:`model_rows`); each interleaved with
    mmfast on its conversion (transformers' ``convert_to_rgb``) as an RGB PIL image."""
    proc = ImageProcessor.from_pretrained(model_id)
    hf = {
        "HF PIL": (hf_processor(model_id, "pil") if backends.transformers else None, "np"),
        "HF torchvision": (hf_processor(model_id, "torch") if backends.torch else None, "pt"),
    }
    with _torch_threads(backends, 1):
        for size in sizes:
            min_runs = 2 if size[0] * size[1] > 4_000_000 else 3
            for label, image in mode_images(size):
                rgb = Image.fromarray(convert_to_rgb(image))
                for backend, column in ((None, "HF PIL"), ("torchvision", "HF torchvision")):
                    others = {}
                    other, tensors = hf[column]
                    if other is not None:
                        call = _bind(other, image, tensors)
                        others[column] = median_seconds(call, budget, min_runs=min_runs)
                    ours, on_rgb = interleaved_medians(
                        [
                            partial(proc, image, threads=1, backend=backend),
                            partial(proc, rgb, threads=1, backend=backend),
                        ],
                        budget,
                    )
                    tv = " tv" if backend else ""
                    yield Row(f"{label}{tv}", size, ours, others, {"RGB": on_rgb})


def scaling_rows(
    sizes: Sequence[tuple[int, int]] | None = None,
    model_id: str = BATCH_MODEL,
    rounds: int = 9,
    pool_mb: int | None = None,
) -> Iterator[Item]:
    """One call on a batch of mixed inputs (even positions PIL images, odd ones JPEG bytes,
    :func:`batch_sizes`) on 1 and on 2 threads, the two interleaved for ``rounds`` rounds:
    the median of each, and the median and spread of the per-round speed-ups. With
    ``pool_mb``, under ``set_buffer_pool(pool_mb)`` (the default afterwards): the full batch's
    1.3 GB output then reuses its memory instead of the kernel zeroing fresh pages each call."""
    if pool_mb is None:
        yield from _scaling_rows(sizes, model_id, rounds, "")
        return
    set_buffer_pool(pool_mb)
    try:
        yield from _scaling_rows(sizes, model_id, rounds, f", pool {pool_mb} MB")
    finally:
        set_buffer_pool(DEFAULT_POOL_MB)


def _scaling_rows(
    sizes: Sequence[tuple[int, int]] | None, model_id: str, rounds: int, note: str
) -> Iterator[Item]:
    sizes = batch_sizes() if sizes is None else list(sizes)
    batch: list[Image.Image | bytes] = []
    for i, size in enumerate(sizes):
        im = _pil(size, seed=i)
        if i % 2:
            buffer = io.BytesIO()
            im.save(buffer, "JPEG", quality=90)
            batch.append(buffer.getvalue())
        else:
            batch.append(im)
    proc = ImageProcessor.from_pretrained(model_id)
    one, two = partial(proc, batch, threads=1), partial(proc, batch, threads=2)
    one(), two()
    t1: list[float] = []
    t2: list[float] = []
    for _ in range(rounds):
        for fn, record in ((one, t1), (two, t2)):
            t0 = time.perf_counter()
            fn()
            record.append(time.perf_counter() - t0)
    label = f"{short_name(model_id)} x{len(batch)} PIL+bytes{note}"
    yield Row(f"{label}, 1 thr", None, float(np.median(t1)), {})
    yield Row(f"{label}, 2 thr", None, float(np.median(t2)), {"1 thread": float(np.median(t1))})
    speedups = np.array(t1) / np.array(t2)
    q1, q3 = np.percentile(speedups, [25, 75])
    yield (
        f"  t1/t2 over {rounds} interleaved rounds: median {np.median(speedups):.2f}x, "
        f"quartiles {q1:.2f}-{q3:.2f}x, range {speedups.min():.2f}-{speedups.max():.2f}x "
        f"(goal 1.8x on a quiet machine; {os.cpu_count()} logical CPUs, load average "
        f"{os.getloadavg()[0]:.1f})"
    )


def output_mb(proc: ImageProcessor, sizes: Sequence[tuple[int, int]]) -> float:
    """Megabytes of float32 ``pixel_values`` that ``proc`` writes for images of ``sizes``."""
    return sum(math.prod(proc.plan(h, w).output_shapes["pixel_values"]) for h, w in sizes) * 4e-6


def memory_line(
    sizes: Sequence[tuple[int, int]] | None = None,
    model_id: str = BATCH_MODEL,
    total_mb: int = 512,
    rounds: int = 5,
) -> str:
    """The write bandwidth of the machine's memory on 1 and 2 threads, interleaved, median
    of ``rounds``: ``np.copyto`` of a piece of at most 8 MB (in cache) over a ``total_mb``
    buffer (past any cache, its pages touched first), split between the threads. Beside it,
    the float32 output of the scaling batch (``sizes``, through ``model_id``): where a second
    thread adds little bandwidth, the part of a batch that writes its output cannot scale."""
    piece = np.ones(min(total_mb, 8) << 18, np.float32)
    rows = np.ones((total_mb << 18) // piece.size * piece.size, np.float32).reshape(-1, piece.size)

    def fill(part: NDArray[np.float32]) -> None:
        for row in part:
            np.copyto(row, piece)

    times: dict[int, list[float]] = {1: [], 2: []}
    with ThreadPoolExecutor(2) as pool:
        for _ in range(rounds):
            for threads, record in times.items():
                t0 = time.perf_counter()
                list(pool.map(fill, np.array_split(rows, threads)))
                record.append(time.perf_counter() - t0)
    one, two = (rows.nbytes / float(np.median(t)) / 1e9 for t in times.values())
    out = output_mb(
        ImageProcessor.from_pretrained(model_id), batch_sizes() if sizes is None else sizes
    )
    return (
        f"  memory: np.copyto over {total_mb} MB, {one:.1f} GB/s on 1 thread, {two:.1f} GB/s "
        f"on 2 ({two / one:.2f}x); the batch writes {out:.0f} MB of float32 out"
    )


def batch_sizes(
    n: int = BATCH_IMAGES, smallest: int = 320, largest: int = 4032
) -> list[tuple[int, int]]:
    """``n`` seeded (height, width) pairs, widths log-uniform from ``smallest`` to ``largest``
    (both included), 4:3, a quarter of them portrait."""
    rng = np.random.default_rng(0)
    widths = np.exp(rng.uniform(np.log(smallest), np.log(largest), n)).round().astype(int)
    widths[0], widths[-1] = smallest, largest
    sizes: list[tuple[int, int]] = []
    for w, portrait in zip(widths.tolist(), rng.random(n) < 0.25, strict=True):
        h = w * 3 // 4
        sizes.append((w, h) if portrait and 0 < len(sizes) < n - 1 else (h, w))
    return sizes


def batch_rows(
    backends: Backends,
    sizes: Sequence[tuple[int, int]] | None = None,
    model_id: str = BATCH_MODEL,
    budget: float = 0.5,
) -> Iterator[Item]:
    """A batch of mixed images in one call: mmfast on 1 and 2 threads, given the PIL images,
    the same pixels as uint8 arrays, and the images as JPEG bytes (decoded inside the call,
    in parallel); transformers' PIL backend on the PIL images, and ``load_image`` of the JPEG
    files plus that backend, for reference.

    PIL images over 4 MP sit in several Pillow blocks and are copied out (by
    ``np.asarray``, one by one) before the parallel part starts; arrays show the scaling of
    the batch itself, bytes that of decoding and processing together.
    """
    sizes = batch_sizes() if sizes is None else list(sizes)
    images = [_pil(size, seed=i) for i, size in enumerate(sizes)]
    arrays = [np.array(pil_to_rgb(im)) for im in images]
    jpegs = []
    for im in images:
        buffer = io.BytesIO()
        im.save(buffer, "JPEG", quality=90)
        jpegs.append(buffer.getvalue())
    proc = ImageProcessor.from_pretrained(model_id)
    others: dict[str, float] = {}
    from_files: dict[str, float] = {}
    hf = hf_processor(model_id, "pil") if backends.transformers else None
    if hf is not None:
        others["HF PIL"] = median_seconds(_bind(hf, images, "np"), budget, min_runs=2)
        load_image = importlib.import_module("transformers.image_utils").load_image
        with tempfile.TemporaryDirectory() as folder:
            paths = [os.path.join(folder, f"{i}.jpg") for i in range(len(jpegs))]
            for path, data in zip(paths, jpegs, strict=True):
                Path(path).write_bytes(data)
            from_files["load_image+HF PIL"] = median_seconds(
                lambda: hf([load_image(p) for p in paths], return_tensors="np"),
                budget,
                min_runs=2,
            )
    scaling = []
    for kind, batch, alternatives in (
        ("PIL", images, others),
        ("array", arrays, others),
        ("JPEG bytes", jpegs, from_files),
    ):
        times: dict[int, float] = {}
        for threads in (1, 2):
            times[threads] = median_seconds(partial(proc, batch, threads=threads), budget)
            label = f"{short_name(model_id)} x{len(batch)} {kind}, {threads} thr"
            yield Row(label, None, times[threads], alternatives)
        scaling.append(f"{kind} {times[1] / times[2]:.2f}x")
    megapixels = sum(h * w for h, w in sizes) / 1e6
    yield (
        f"  {len(images)} images, {megapixels:.1f} MP in, {output_mb(proc, sizes):.1f} MB of "
        "float32 out; "
        f"thread scaling t1/t2: {', '.join(scaling)} ({os.cpu_count()} logical CPUs)"
    )


# A server's image mix: 1 to 4 megapixels (phone photos scaled down, screenshots, scans).
SERVING_SIZES = ((768, 1366), (1080, 1440), (1080, 1920), (1200, 1600), (1536, 2048), (1728, 2304))
SERVING_REQUESTS = 48


def serving_rows(
    backends: Backends,
    sizes: Sequence[tuple[int, int]] = SERVING_SIZES,
    requests: int = SERVING_REQUESTS,
    model_id: str = BATCH_MODEL,
    repeats: int = 3,
) -> Iterator[Item]:
    """A server's image-processor pool: ``requests`` calls of transformers' image processor
    (one PIL image each, ``return_tensors="pt"``), the way vLLM's renderer and SGLang's
    processor pool call it, spread over 1 and 2 worker threads; through :mod:`mmfast.hf`
    against plain transformers (its torchvision class when torch is installed, else its PIL
    class). Each call gets one core on both sides (``MMFAST_NUM_THREADS=1``,
    ``torch.set_num_threads(1)``): the workers are the parallelism, so the requests/s of 2
    workers over 1 shows whether the GIL serialises the calls. Then the latency of one
    request at a time, alone and while a third thread spins a CPU-bound Python loop.
    """
    if not backends.transformers:
        yield "  skipped: transformers is not installed"
        return
    from mmfast import hf as mmfast_hf

    kind = "torch" if backends.torch else "pil"
    tensors = "pt" if backends.torch else "np"
    plain, backed = hf_processor(model_id, kind), mmfast_hf.wrap(hf_processor(model_id, kind))
    assert plain is not None  # Qwen2-VL has both classes
    images = [_pil(sizes[i % len(sizes)], seed=i) for i in range(requests)]
    rates: dict[tuple[str, int], float] = {}
    latency: dict[tuple[str, bool], float] = {}
    previous = os.environ.get("MMFAST_NUM_THREADS")
    os.environ["MMFAST_NUM_THREADS"] = "1"
    try:
        with _torch_threads(backends, 1):
            for name, processor in (("mmfast", backed), ("transformers", plain)):
                for image in images[: len(sizes)]:  # warm up: caches, first-touch pages
                    processor(image, return_tensors=tensors)
                for workers in (1, 2):
                    rates[name, workers] = max(
                        _requests_per_second(processor, images, tensors, workers)
                        for _ in range(repeats)
                    )
                for busy in (False, True):
                    latency[name, busy] = _latency(processor, images[: len(sizes)], tensors, busy)
    finally:
        if previous is None:
            del os.environ["MMFAST_NUM_THREADS"]
        else:
            os.environ["MMFAST_NUM_THREADS"] = previous
    label = f"{short_name(model_id)} {'torchvision' if kind == 'torch' else 'PIL'}"
    for workers in (1, 2):
        yield Row(
            f"{label}, {workers} worker{'s' * (workers > 1)}",
            None,
            1 / rates["mmfast", workers],
            {"transformers": 1 / rates["transformers", workers]},
        )
    megapixels = sum(h * w for h, w in sizes) / len(sizes) / 1e6
    yield (
        f"  {requests} requests, one image each ({megapixels:.1f} MP on average); times are "
        "wall time per request"
    )
    for name in ("mmfast", "transformers"):
        one, two = rates[name, 1], rates[name, 2]
        yield f"  {name}: {one:.1f} req/s on 1 worker, {two:.1f} on 2 ({two / one:.2f}x)"
    ratio = rates["mmfast", 2] / rates["transformers", 2]
    yield f"  mmfast / transformers at 2 workers: {ratio:.2f}x the requests/s"
    for name in ("mmfast", "transformers"):
        alone, beside = latency[name, False], latency[name, True]
        yield (
            f"  {name} latency per request: {alone * 1e3:.1f} ms alone, {beside * 1e3:.1f} ms "
            "beside a CPU-bound Python thread"
        )
    mmfast_stats = mmfast_hf.stats()["by_class"].get(type(backed).__name__, {})
    fallbacks = sum(count for reason, count in mmfast_stats.items() if reason != "mmfast")
    yield f"  calls that fell back to transformers: {fallbacks}"


def _requests_per_second(
    processor: Any, images: Sequence[Image.Image], tensors: str, workers: int
) -> float:
    """``len(images)`` calls on ``workers`` threads, one image each: requests per second."""
    with ThreadPoolExecutor(workers) as pool:
        start = time.perf_counter()
        list(pool.map(lambda image: processor(image, return_tensors=tensors), images))
        return len(images) / (time.perf_counter() - start)


def _latency(processor: Any, images: Sequence[Image.Image], tensors: str, busy: bool) -> float:
    """Median seconds of one call at a time, with a thread spinning a Python loop if
    ``busy`` (it holds the GIL except when the interpreter switches threads)."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(1000))

    spinner = threading.Thread(target=spin) if busy else None
    if spinner is not None:
        spinner.start()
    try:
        times = []
        for image in images:
            start = time.perf_counter()
            processor(image, return_tensors=tensors)
            times.append(time.perf_counter() - start)
    finally:
        stop.set()
        if spinner is not None:
            spinner.join()
    return float(np.median(times))


def bench_clip(
    seconds: int, size: tuple[int, int] = (360, 640), rate: int = 30, folder: Path | None = None
) -> Path:
    """An H.264 clip of ``seconds`` seconds of ``size`` (height, width) frames at ``rate``
    frames a second, made with PyAV (libx264, yuv420p, a keyframe every ``2 * rate`` frames)
    from a synthetic photo panning sideways with fresh grain in every frame (a camera's
    noise: without it the frames are motion vectors only, far cheaper to decode than any
    real clip); cached as ``<temp dir>/mmfast-bench/h264-...mp4`` (written to a temporary
    name, then renamed, so a cut-short run leaves no half file)."""
    import av

    height, width = size
    folder = Path(tempfile.gettempdir()) / "mmfast-bench" if folder is None else folder
    path = folder / f"h264-{seconds}s-{width}x{height}-{rate}fps-g{2 * rate}.mp4"
    if path.is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    partial_path = path.with_name(f"{path.stem}.{os.getpid()}.part.mp4")
    base = synthetic_photo(height, width * 2, seed=7).astype(np.int16)
    rng = np.random.default_rng(0)
    with av.open(str(partial_path), "w") as container:
        stream = container.add_stream("libx264", rate=rate, options={"g": str(2 * rate)})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for t in range(seconds * rate):
            pixels = np.roll(base, -3 * t, axis=1)[:, :width]
            pixels = pixels + rng.integers(-8, 9, (height, width, 1), dtype=np.int16)
            rgb = np.clip(pixels, 0, 255).astype(np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")))
        container.mux(stream.encode())
    os.replace(partial_path, path)
    return path


VIDEO_COLUMNS = ["transformers"]


def video_rows(
    backends: Backends, clip: tuple[int, tuple[int, int], int] = VIDEO_CLIP, budget: float = 0.5
) -> Iterator[Item]:
    """Reading a clip file into sampled frames: ``mmfast.load_video(path, num_frames=16)``
    (and ``fps=2``) against ``transformers.video_utils.load_video(path, backend="pyav")``
    with the same arguments; then file to ``pixel_values_videos`` for Qwen2.5-VL, 2 frames a
    second: ``proc.videos(path)`` against transformers' reader plus its Qwen2-VL video
    processor (torchvision). Each pair's outputs are checked equal once (a note says so).
    mmfast decodes with the codec's frame threads (all CPUs); transformers' reader decodes on
    one thread; torch keeps its default threads."""
    if importlib.util.find_spec("av") is None:
        yield "  skipped: PyAV is not installed (pip install 'mmfast[video]')"
        return
    from mmfast.video import load_video

    seconds, size, rate = clip
    path = bench_clip(seconds, size, rate)
    yield f"  clip: {path.name} ({seconds * rate} frames)"
    hf_load = None
    if backends.transformers:
        hf_load = importlib.import_module("transformers.video_utils").load_video
    else:
        yield "  transformers not installed: mmfast times only"
    # transformers' reader decodes every frame up to the last sampled one: one or two timed
    # calls (after the warm-up) are enough to see it.
    slow = {"min_runs": 1 if budget == 0 else 2, "max_runs": 3}
    cases: list[tuple[str, dict[str, Any]]] = [
        (f"load_video {VIDEO_FRAMES} frames", {"num_frames": VIDEO_FRAMES}),
        (f"load_video fps={VIDEO_FPS}", {"fps": VIDEO_FPS}),
    ]
    for label, kwargs in cases:
        ours = median_seconds(partial(load_video, str(path), **kwargs), budget, **slow)
        others = {}
        if hf_load is not None:
            hf_call = partial(hf_load, str(path), backend="pyav", **kwargs)
            others["transformers"] = median_seconds(hf_call, budget, **slow)
            ours_frames, ours_meta = load_video(str(path), **kwargs)
            hf_frames, hf_meta = hf_call()
            same = np.array_equal(ours_frames, hf_frames) and list(
                ours_meta.frames_indices or []
            ) == [int(i) for i in hf_meta.frames_indices]
            yield f"  {label}: {len(ours_frames)} frames, identical to transformers': {same}"
        yield Row(label, size, ours, others)
    yield from _video_end_to_end(backends, path, size, budget, slow)


def _video_end_to_end(
    backends: Backends, path: Path, size: tuple[int, int], budget: float, slow: dict[str, int]
) -> Iterator[Item]:
    """File to ``pixel_values_videos`` for Qwen2.5-VL at ``VIDEO_FPS`` frames a second."""
    proc = ImageProcessor.from_pretrained(VIDEO_MODEL)
    ours_call = partial(proc.videos, str(path), do_sample_frames=True, fps=VIDEO_FPS)
    others = {}
    if backends.torch:
        video_utils = importlib.import_module("transformers.video_utils")
        transformers = importlib.import_module("transformers")
        builtin = models.registry.BUILTINS[VIDEO_MODEL]
        config = dict(builtin.video if builtin.video is not None else builtin.preprocessor)
        # transformers' current default, said explicitly to silence its warning about a
        # future one (mmfast's config reads the same default).
        config["cap_pixels_per_frame"] = False
        hf_proc = transformers.Qwen2VLVideoProcessor.from_dict(config)

        def hf_call() -> Any:
            frames, metadata = video_utils.load_video(
                str(path),
                backend="pyav",
                sample_indices_fn=partial(hf_proc.sample_frames, fps=VIDEO_FPS),
            )
            return hf_proc(
                videos=[frames],
                video_metadata=[metadata],
                do_sample_frames=False,
                return_tensors="pt",
            )

        others["transformers"] = median_seconds(hf_call, budget, **slow)
        ours, want = ours_call(), hf_call()
        same = all(np.array_equal(ours[k], want[k].numpy()) for k in want)
        grid = want["video_grid_thw"].tolist()
        yield f"  {short_name(VIDEO_MODEL)} video: grid {grid}, identical to transformers': {same}"
    else:
        yield "  end to end: torch not installed (mmfast time only)"
    yield Row(
        f"{short_name(VIDEO_MODEL)} file to pixels",
        size,
        median_seconds(ours_call, budget, **slow),
        others,
    )


# --------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------


def run(
    print_fn: Callable[[str], None] = print,
    *,
    quick: bool = False,
    only: Sequence[str] | None = None,
    jpeg: str | os.PathLike[str] | None = None,
) -> list[Row]:
    """Run the benchmarks (every section, or those in ``only``), print tables, return the rows.

    ``quick`` uses tiny sizes and the shortest timing budget: a smoke test, not a measurement.
    """
    chosen = list(only if only else SECTIONS)
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        raise ValueError(f"only: unknown sections {unknown}; valid: {', '.join(SECTIONS)}")
    budget = 0.0 if quick else 0.5
    sizes = QUICK_SIZES if quick else SIZES
    backends = Backends.detect()
    jpeg_path = Path(jpeg) if jpeg is not None else default_jpeg()
    if jpeg is not None and jpeg_path.exists() and not jpeg_path.is_file():
        # An absent file skips its sections with a note; something else there is a mistake.
        raise MmfastError(f"--jpeg: expected an image file, got {os.fspath(jpeg)!r}")
    jpeg_data: tuple[bytes, str] | None = None
    if quick:
        buffer = io.BytesIO()
        Image.fromarray(synthetic_photo(60, 80)).save(buffer, "JPEG", quality=90)
        jpeg_data = (buffer.getvalue(), "(generated)")
    elif jpeg_path.is_file():
        jpeg_data = (
            jpeg_path.read_bytes(),
            "(12 MP JPEG)" if jpeg is None else f"({jpeg_path.name})",
        )
        try:
            decode_image(jpeg_data[0])
        except MmfastError as exc:
            raise MmfastError(f"--jpeg: expected an image file, got {jpeg_path}: {exc}") from exc

    print_fn(
        f"mmfast bench: Python {platform.python_version()}, numpy {np.__version__}, "
        f"Pillow {PIL.__version__}, {os.cpu_count()} logical CPUs"
    )
    print_fn(f"compared against: {backends.describe()}")
    print_fn("ratio = alternative time / mmfast time (>1: mmfast is faster); one thread")
    print_fn("times: median of several calls after a warm-up (2 for slow transformers calls)")
    rows: list[Row] = []

    def section(
        title: str, columns: list[str], items: Iterator[Item], relative: Sequence[str] = ()
    ) -> None:
        print_fn("")
        print_fn(f"## {title}")
        print_fn(header(columns, relative))
        for item in items:
            if isinstance(item, Row):
                print_fn(item.format(columns, relative))
                rows.append(item)
            else:
                print_fn(item)

    for name in chosen:
        if name == "kernels":
            section(
                "kernels: seed kernels vs the NumPy reference and the memory floor",
                ["reference", "tobytes", "copy floor"],
                iter(kernel_rows(sizes, budget)),
            )
        elif name == "resize":
            section(
                "resize: mmfast.resize(array) vs PIL.Image.resize(pil_image), same pixels",
                ["Pillow"],
                iter(resize_rows(QUICK_RESIZE_CASES if quick else RESIZE_CASES, budget)),
            )
        elif name == "decode":
            section(
                "decode: mmfast.decode_image(bytes) vs "
                + (
                    "convert_to_rgb(exif_transpose(Image.open(...)))"
                    if backends.transformers
                    else "np.array(exif_transpose(Image.open(...)).convert('RGB'))"
                ),
                decode_columns(backends),
                iter(decode_rows(*jpeg_data, backends, budget))
                if jpeg_data
                else iter([f"  skipped: {jpeg_path} is absent (pass --jpeg PATH)"]),
            )
        elif name == "pil":
            section(
                "pil: mmfast.image.pil_to_rgb(pil_image) vs np.asarray(pil_image)",
                ["np.asarray"],
                iter(pil_export_rows(sizes, budget)),
            )
        elif name == "models":
            section(
                "models: proc(pil_image, threads=1) vs transformers' processors, one thread; "
                "mmfast/array: the PIL image against its pixels as an array (goal <= 1.2x); "
                "mmfast/floor: against the cell's own resizes plus writing the output "
                "(goal <= 1.5x)",
                MODEL_COLUMNS,
                _with_notes(model_rows(backends, sizes, budget=budget), backends),
                RELATIVE_COLUMNS,
            )
        elif name == "fixed":
            section(
                "fixed: the fixed cost of a call, proc(pil_image, threads=1), against the same "
                "pixels as an array and the cell's floor (interleaved)",
                [],
                fixed_rows(budget),
                RELATIVE_COLUMNS,
            )
        elif name == "modes":
            section(
                f"modes: proc(pil_image, threads=1) ({short_name(MODES_MODEL)}) on PIL images of "
                "other modes vs transformers' processors on the same image, one thread; "
                "mmfast/RGB: against its conversion (onto white) as an RGB PIL image "
                "(interleaved)",
                MODEL_COLUMNS,
                mode_rows(backends, sizes, budget=budget),
                ["RGB"],
            )
        elif name == "scaling":
            scaling_sizes = [(24, 32), (30, 40), (60, 80), (45, 60)] if quick else None
            section(
                "scaling: one call on 16 mixed PIL images and JPEG bytes, 2 threads vs 1, "
                "interleaved",
                ["1 thread"],
                itertools.chain(
                    *(
                        scaling_rows(scaling_sizes, rounds=3 if quick else 9, pool_mb=pool_mb)
                        for pool_mb in (None, 2048)
                    ),
                    [memory_line(scaling_sizes, total_mb=64 if quick else 512)],
                ),
            )
        elif name == "jpeg":
            items: Iterator[Item]
            if quick:
                items = iter(["  skipped in --quick mode"])
            elif jpeg_path.is_file():
                items = jpeg_rows(jpeg_path, backends, budget=budget)
            else:
                items = iter([f"  skipped: {jpeg_path} is absent (pass --jpeg PATH)"])
            section(
                "jpeg: proc(jpeg_bytes, threads=1) vs load_image(path) + HF PIL processor",
                ["load_image+HF PIL"],
                items,
            )
        elif name == "serving":
            section(
                "serving: requests through transformers' image processor on worker threads, "
                "one core each, mmfast.hf vs plain transformers",
                ["transformers"],
                serving_rows(
                    backends,
                    [(60, 80), (90, 120)] if quick else SERVING_SIZES,
                    requests=4 if quick else SERVING_REQUESTS,
                    repeats=1 if quick else 3,
                ),
            )
        elif name == "batch":
            mixed = [(24, 32), (30, 40), (60, 80), (45, 60)] if quick else batch_sizes()
            section(
                f"batch: one call on {len(mixed)} mixed images, mmfast on 1 and 2 threads "
                "(transformers, one thread, for reference)",
                ["HF PIL", "load_image+HF PIL"],
                itertools.chain.from_iterable(
                    batch_rows(backends, mixed, model, budget=budget) for model in BATCH_MODELS
                ),
            )
        elif name == "video":
            section(
                "video: mmfast.load_video(path) (codec threads) vs transformers' "
                "load_video(path, backend='pyav'); file to pixel_values_videos (Qwen2.5-VL, "
                "2 fps) vs that reader + its video processor (torchvision)",
                VIDEO_COLUMNS,
                video_rows(backends, QUICK_VIDEO_CLIP if quick else VIDEO_CLIP, budget),
            )
    return rows


def _with_notes(items: Iterator[Item], backends: Backends) -> Iterator[Item]:
    if not backends.transformers:
        yield "  transformers not installed: mmfast times only"
    elif not backends.torch:
        yield "  torchvision backend: torch not installed"
    yield from items
