"""``mmfast bench``: each kernel against its alternatives, measured in the same run.

Times are the median of several calls on one thread, on generated images (a
seeded RNG), so the command needs no data. Ratios compare against what a user
would otherwise run: the pure-NumPy twin in :mod:`mmfast.reference`, and
``np.copyto`` into a buffer the size of the output, the memory floor no kernel
that writes its output can beat by much.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from mmfast import _native, reference

SIZES = ((480, 640), (1080, 1920), (3024, 4032))
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def median_seconds(fn: Callable[[], object], budget: float = 0.5, max_runs: int = 25) -> float:
    """Median wall time of ``fn()`` over runs that fit in about ``budget`` seconds (at least 3)."""
    fn()  # warm up: page faults, lazy imports, caches
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 3 or (len(times) < max_runs and time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


@dataclass(frozen=True)
class Row:
    """One kernel at one size: our time and each alternative's time."""

    case: str
    size: tuple[int, int]
    ours: float
    others: dict[str, float]

    def format(self, columns: list[str]) -> str:
        cells = [
            f"{self.case:<28}",
            f"{self.size[1]:>5}x{self.size[0]:<5}",
            f"{self.ours * 1e3:9.2f}",
        ]
        for name in columns:
            t = self.others.get(name)
            cells.append(f"{t * 1e3:9.2f} {t / self.ours:7.2f}x" if t else f"{'':>18}")
        return "  ".join(cells)


def kernel_rows(sizes: tuple[tuple[int, int], ...] = SIZES) -> Iterator[Row]:
    """The seed kernels: de-interleave, pad, serialise, at each size."""
    rng = np.random.default_rng(0)
    for h, w in sizes:
        yield from _seed_kernels(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))


def _seed_kernels(image: np.ndarray) -> Iterator[Row]:
    size = image.shape[:2]
    planes = _native.deinterleave_rgb_to_planes(image, CLIP_MEAN, CLIP_STD)
    planes_dst = np.empty_like(planes)
    yield Row(
        "deinterleave_rgb_to_planes",
        size,
        median_seconds(lambda: _native.deinterleave_rgb_to_planes(image, CLIP_MEAN, CLIP_STD)),
        {
            "reference": median_seconds(
                lambda: reference.deinterleave_rgb_to_planes(image, CLIP_MEAN, CLIP_STD)
            ),
            "copy floor": median_seconds(lambda: np.copyto(planes_dst, planes)),
        },
    )
    # Llama 4 style: pad up to the next multiple of its 336-pixel tile.
    canvas = (-(-size[0] // 336) * 336, -(-size[1] // 336) * 336)
    canvas_dst = np.empty((3, *canvas), np.float32)
    canvas_src = np.zeros_like(canvas_dst)
    yield Row(
        "pad_and_normalize_to_tensor",
        size,
        median_seconds(
            lambda: _native.pad_and_normalize_to_tensor(image, canvas, CLIP_MEAN, CLIP_STD)
        ),
        {
            "reference": median_seconds(
                lambda: reference.pad_and_normalize_to_tensor(image, canvas, CLIP_MEAN, CLIP_STD)
            ),
            "copy floor": median_seconds(lambda: np.copyto(canvas_dst, canvas_src)),
        },
    )
    yield Row(
        "serialize_pixel_values",
        size,
        median_seconds(lambda: _native.serialize_pixel_values(planes)),
        {
            "reference": median_seconds(lambda: reference.serialize_pixel_values(planes)),
            "tobytes": median_seconds(planes.tobytes),
            "copy floor": median_seconds(lambda: np.copyto(planes_dst, planes)),
        },
    )


def run(print_fn: Callable[[str], None] = print) -> list[Row]:
    """Run every benchmark, print a table, and return the rows."""
    columns = ["reference", "tobytes", "copy floor"]
    header = "  ".join(
        [f"{'case':<28}", f"{'size (WxH)':<11}", f"{'mmfast ms':>9}"]
        + [f"{name + ' ms':>9} {'ratio':>8}" for name in columns]
    )
    print_fn("ratio = alternative time / mmfast time (>1: mmfast is faster); one thread")
    print_fn(header)
    rows = []
    for row in kernel_rows():
        print_fn(row.format(columns))
        rows.append(row)
    return rows
