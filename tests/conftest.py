"""Shared fixtures and helpers: the seeded RNG, the optional ``../shared`` data, test images
and output comparisons."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
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


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


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
        and np.array_equal(
            np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)
        )
    )


def builtin_dict(model_id: str) -> dict[str, Any]:
    return json.loads(json.dumps(dict(models.registry.BUILTINS[model_id].preprocessor)))


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
        return self.ours if self.theirs is None else self.theirs


def hf_load_image(path: Path) -> Image.Image:
    """``transformers.image_utils.load_image(str(path))``, with the file closed afterwards (its
    own ``Image.open`` would leave a lazily read GIF open, a ResourceWarning here)."""
    load_image = pytest.importorskip("transformers.image_utils").load_image
    with Image.open(path) as opened:
        image = load_image(opened)  # exif_transpose, then convert("RGB")
        image.load()
    return image
