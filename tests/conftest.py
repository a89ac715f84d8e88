"""Shared fixtures: the seeded RNG and the optional ``../shared`` data."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

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
        pytest.skip(f"{path} is absent (the ../shared data folder is optional)")
    return path


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal dtype, shape and raw bits (so -0.0 != 0.0 and NaN payloads count)."""
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and np.array_equal(a.view(np.uint8), b.view(np.uint8))
    )
