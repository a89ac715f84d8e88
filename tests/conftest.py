"""Shared fixtures and helpers: the seeded RNG, the optional ``../shared`` data, test images
and output comparisons."""

from __future__ import annotations

import copy
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from mmfast import models

# The project's sibling data folder; tests that need it skip cleanly without it.
SHARED = Path(os.environ.get("MMFAST_SHARED", Path(__file__).resolve().parents[2] / "shared"))

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


# A function for the scripts tests run in a child process: the child's own peak resident
# size in bytes, from Linux's VmHWM (ru_maxrss would carry the parent's over fork and exec:
# the child's "growth" was nothing beside a large test process).
PEAK_RSS = """
def peak_rss():
    import re
    status = open("/proc/self/status").read()
    return int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) * 1024
"""


def peak_rss_readable() -> None:
    """Skip a test measuring :data:`PEAK_RSS` where ``/proc/self/status`` does not exist."""
    if not Path("/proc/self/status").exists():
        pytest.skip("reads the peak resident size from Linux's /proc/self/status")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture
def deadline_at_stat(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], None]:
    """Makes ``os.stat`` of a path raise TimeoutError, as a deadline's signal handler does
    when it fires there."""

    def arm(path: Path) -> None:
        stat = os.stat

        def late_stat(name: Any, *args: Any, **kwargs: Any) -> os.stat_result:
            if isinstance(name, (str, os.PathLike)) and os.fspath(name) == str(path):
                raise TimeoutError("the request's deadline")
            return stat(name, *args, **kwargs)

        monkeypatch.setattr(os, "stat", late_stat)

    return arm


def shared_path(*parts: str) -> Path:
    """A path under ``../shared``, or skip the test when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"optional test data not found: {path} (see README, 'Test data')")
    return path


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal dtype, shape and raw bits (so -0.0 != 0.0 and NaN payloads count), whatever the
    memory layout (transformers' MiniCPM-V PIL class can return a non-contiguous array)."""
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        # reshape: a 0-d array (vLLM's per-image counts) cannot be viewed as other dtypes;
        # ascontiguousarray: nor can a strided one
        and np.array_equal(
            np.ascontiguousarray(a).reshape(-1).view(np.uint8),
            np.ascontiguousarray(b).reshape(-1).view(np.uint8),
        )
    )


# Settings the tests run a built-in with, over its checkpoint's file, where the file asks for
# something mmfast refuses (UnsupportedModelError, or MmfastError for some inputs) and
# transformers needs outside software or the pixels for: UDOP's apply_ocr (Tesseract),
# PP-FormulaNet's do_crop_margin (a crop found from the pixels).
TEST_SETTINGS: dict[str, dict[str, Any]] = {
    "microsoft/udop-large": {"apply_ocr": False},
    "microsoft/udop-large-512": {"apply_ocr": False},
    "PaddlePaddle/PP-FormulaNet_plus-L_safetensors": {"do_crop_margin": False},
    # Fuyu's class has no do_convert_rgb: transformers keeps a greyscale or RGBA image's
    # channels, which mmfast refuses (test_families checks the refusal).
    "adept/fuyu-8b": {"do_convert_rgb": True},
}


def ticks_during(call: Callable[[], object], min_ms: float = 200) -> tuple[int, float]:
    """How often a Python thread ticks while ``call`` runs, called again until ``min_ms``
    have passed, and those milliseconds: a call that held the GIL would leave the ticker
    at no ticks. One 6 ms call on a machine busy with other processes left the ticker no
    time to run at all; 200 ms of calls leave it some."""
    ticks: list[float] = []
    stop = threading.Event()

    def ticker() -> None:
        while not stop.is_set():
            ticks.append(time.perf_counter())

    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        time.sleep(0.01)
        start = end = time.perf_counter()
        while 1e3 * (end - start) < min_ms:
            call()
            end = time.perf_counter()
    finally:
        stop.set()
        thread.join()
    return sum(start < t < end for t in ticks), 1e3 * (end - start)


def builtin_dict(model_id: str) -> dict[str, Any]:
    """The built-in's preprocessor config, with its :data:`TEST_SETTINGS`."""
    values = dict(models.registry.BUILTINS[model_id].preprocessor) | TEST_SETTINGS.get(model_id, {})
    result: dict[str, Any] = json.loads(json.dumps(values))
    return result


def builtin_settings(model_id: str, **overrides: Any) -> dict[str, Any]:
    """The keyword arguments mmfast's processor for a built-in is built with in the tests:
    its :data:`TEST_SETTINGS`, then ``overrides``."""
    return {**TEST_SETTINGS.get(model_id, {}), **overrides}


def noise(height: int, width: int, seed: int = 0) -> np.ndarray:
    """(H, W, 3) uint8 uniform noise: every pixel differs, so any misplaced tap shows."""
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def smooth(height: int, width: int, seed: int = 0) -> np.ndarray:
    """(H, W, 3) uint8 low-frequency waves: the photographic case, many equal neighbours."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    fy, fx, phase = rng.uniform(0.5, 3.0, 3), rng.uniform(0.5, 3.0, 3), rng.uniform(0, 6.3, 3)
    waves = [
        np.sin(2 * np.pi * (fy[c] * y / height + fx[c] * x / width) + phase[c]) for c in range(3)
    ]
    return np.round(127.5 + 127.4 * np.stack(waves, -1)).astype(np.uint8)


def make_image(kind: str, height: int, width: int, seed: int = 0) -> np.ndarray:
    return (noise if kind == "noise" else smooth)(height, width, seed)


def describe(name: str, got: np.ndarray, want: np.ndarray) -> str:
    """Where two outputs differ: dtype/shape, fraction of equal elements, first differing index."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{name}: got {got.dtype}{got.shape}, want {want.dtype}{want.shape}"
    bits = f"u{got.dtype.itemsize}"
    differ = got.view(bits) != want.view(bits)
    first = tuple(int(i) for i in np.argwhere(differ)[0])
    return (
        f"{name}: {1 - differ.mean():.6%} of elements equal; first difference at {first}: "
        f"got {got[first]!r}, want {want[first]!r}"
    )


def assert_same_outputs(got: Mapping[str, np.ndarray], want: Mapping[str, Any]) -> None:
    """Same keys in the same order, every array equal in dtype, shape and bits, and every list
    equal."""
    assert list(got) == list(want)
    for key in want:
        if isinstance(want[key], list):  # HF leaves some outputs (Idefics3's rows) as lists
            assert isinstance(got[key], list) and got[key] == want[key], key
            continue
        expected = np.asarray(want[key])
        assert same_bits(got[key], expected), describe(key, got[key], expected)


@dataclass(frozen=True)
class Override:
    """Keyword overrides for mmfast, and for the reference when they are spelt differently."""

    ours: dict[str, Any]
    theirs: dict[str, Any] | None = None

    @property
    def reference(self) -> dict[str, Any]:
        """The reference's overrides, a fresh copy each time: some transformers classes'
        ``__init__`` edit the dicts they are given (HunyuanOCR's ``size``), which would
        change the case for the tests after it."""
        return copy.deepcopy(self.ours if self.theirs is None else self.theirs)


def hf_load_image(path: Path) -> Image.Image:
    """``transformers.image_utils.load_image(str(path))``, with the file closed afterwards (its
    own ``Image.open`` would leave a lazily read GIF open, a ResourceWarning here)."""
    load_image = pytest.importorskip("transformers.image_utils").load_image
    with Image.open(path) as opened:
        image = load_image(opened)  # exif_transpose, then convert("RGB")
        image.load()
    return image


def within_intermediate_limit(model_id: str, height: int, width: int, **overrides: Any) -> bool:
    """Whether every image the model's plan resizes or pads to stays within
    ``DEFAULT_MAX_PIXELS``, past which mmfast refuses the image (transformers goes on: a
    1x683 image through Chameleon's 512 shortest edge is a 512x349696 intermediate)."""
    try:
        config = models.load_config(model_id, **builtin_settings(model_id, **overrides))
        plan = config.plan(height, width)
    except Exception:  # the plan's own refusals are the tests' business
        return True
    sizes = [
        stage.size for view in plan.views for stage in (view.resize, view.pad) if stage is not None
    ]
    return all(h * w <= models.base.DEFAULT_MAX_PIXELS for h, w in sizes)
