"""Soak and stress runs (``make soak``; minutes, not part of ``make test``).

1. Soak: 10,000 mixed calls, every built-in model and every input kind (PIL, arrays, bytes,
   paths, nested samples, videos, bad images skipped), cycling through the same list of
   calls, with the process's resident memory sampled at the end of every cycle (the same
   point of the cycle each time). Goal: flat within 5% after the first 2,000 calls.
2. Stress: 8 threads making 1,000 calls each on shared processors; every result must equal
   the serial result for the same call, bit for bit.
3. Error paths: 20,000 calls that fail (undecodable bytes, wrong arrays, bad arguments,
   bad configs), RSS before and after. Goal: growth under 5%.

Prints the figures and exits non-zero when a goal is missed.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import hashlib
import io
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

import mmfast
from mmfast import MmfastError

SOAK_CALLS = 10_000
WARM_UP = 2_000
STRESS_THREADS = 8
STRESS_CALLS = 1_000
ERROR_CALLS = 20_000
TOLERANCE = 0.05
LIBC = ctypes.CDLL(ctypes.util.find_library("c"))


def rss_mib() -> float:
    """Resident set size of this process, from /proc/self/statm, once the allocator has
    returned its free memory (``malloc_trim``): what stays is memory in use, so growth
    is a leak rather than the allocator's caching."""
    gc.collect()
    LIBC.malloc_trim(0)
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def image(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    height, width = (int(v) for v in rng.integers(8, 320, 2))
    return rng.integers(0, 256, (height, width, 3), dtype=np.uint8)


def encoded(array: np.ndarray, fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, fmt)
    return buffer.getvalue()


def digest(out: Any) -> str:
    h = hashlib.sha256()
    for key, value in out.items():
        h.update(key.encode())
        if isinstance(value, list):  # Idefics3's rows and cols
            h.update(repr(value).encode())
        else:
            h.update(np.ascontiguousarray(value).tobytes())
    return h.hexdigest()


def make_calls(folder: Path) -> list[Callable[[], Any]]:
    """A cycle of calls covering every model, input kind and error kind."""
    processors = {m: mmfast.ImageProcessor.from_pretrained(m) for m in mmfast.supported_models()}
    torchvision = mmfast.ImageProcessor.from_pretrained(
        "Qwen/Qwen2.5-VL-7B-Instruct", backend="torchvision"
    )
    video = processors["Qwen/Qwen3-VL-8B-Instruct"]
    calls: list[Callable[[], Any]] = []
    for i, proc in enumerate(processors.values()):
        arrays = [image(10 * i + k) for k in range(3)]
        path = folder / f"{i}.png"
        path.write_bytes(encoded(arrays[2], "PNG"))
        inputs: list[Any] = [
            arrays[0],
            Image.fromarray(arrays[1]),
            encoded(arrays[2], "JPEG"),
            str(path),
            [[arrays[0]], [arrays[1], arrays[2]]],
        ]
        for data in inputs:
            calls.append(lambda p=proc, d=data: p(d, threads=2))
        calls.append(lambda p=proc, a=arrays: p([a[0], b"junk", a[1]], on_error="skip"))
    clip = np.stack([image(7)[:64, :64]] * 6)
    calls.append(lambda: video.videos(clip, video_fps=24.0, threads=2))
    calls.append(lambda: torchvision(image(3), dtype="bfloat16"))
    return calls


def failing_calls() -> list[Callable[[], Any]]:
    proc = mmfast.ImageProcessor.from_pretrained("Qwen/Qwen2-VL-7B-Instruct")
    return [
        lambda: proc(b"not an image"),
        lambda: proc(b"\x89PNG\r\n\x1a\n" + b"\0" * 64),
        lambda: proc(np.zeros((4, 4, 4), np.uint8)),
        lambda: proc(np.zeros((30, 30, 3), np.float32)),
        lambda: proc(image(1), threads=0),
        lambda: proc(image(1), dtype="int8"),
        lambda: mmfast.ImageProcessor.from_pretrained("nope/nope"),
        lambda: mmfast.ImageProcessor.from_pretrained("Qwen/Qwen2-VL-7B-Instruct", max_pixels=-1),
        lambda: mmfast.decode_image(b"GIF89a" + b"\0" * 20),
        lambda: mmfast.resize(image(2), (0, 5)),
    ]


def soak(calls: Sequence[Callable[[], Any]]) -> bool:
    samples: list[tuple[int, float]] = []
    start = time.perf_counter()
    for i in range(SOAK_CALLS):
        calls[i % len(calls)]()
        if (i + 1) % len(calls) == 0:
            samples.append((i + 1, rss_mib()))
    seconds = time.perf_counter() - start
    after = [rss for n, rss in samples if n > WARM_UP]
    base = after[0]
    spread = (max(after) - min(after)) / base
    print(
        f"soak: {SOAK_CALLS} calls ({len(calls)} kinds) in {seconds:.0f} s; RSS after "
        f"{WARM_UP} calls {base:.0f} MiB, then {min(after):.0f}-{max(after):.0f} MiB "
        f"(spread {spread:.1%}), at the end {after[-1]:.0f} MiB; goal: within {TOLERANCE:.0%}"
    )
    return spread <= TOLERANCE


def stress(calls: Sequence[Callable[[], Any]]) -> bool:
    serial = [digest(call()) for call in calls]
    plan = [(t * 7 + k) % len(calls) for t in range(STRESS_THREADS) for k in range(STRESS_CALLS)]

    def run(index: int) -> bool:
        return digest(calls[index]()) == serial[index]

    start = time.perf_counter()
    with ThreadPoolExecutor(STRESS_THREADS) as pool:
        same = list(pool.map(run, plan))
    seconds = time.perf_counter() - start
    print(
        f"stress: {STRESS_THREADS} threads x {STRESS_CALLS} calls in {seconds:.0f} s: "
        f"{sum(same)} of {len(same)} results equal to serial"
    )
    return all(same)


def error_paths(calls: Sequence[Callable[[], Any]]) -> bool:
    for call in calls * 20:  # warm-up
        with contextlib.suppress(MmfastError):
            call()
    before = rss_mib()
    start = time.perf_counter()
    for i in range(ERROR_CALLS):
        try:
            calls[i % len(calls)]()
        except MmfastError:
            continue
        print(f"error paths: call {i % len(calls)} did not fail")
        return False
    after = rss_mib()
    growth = (after - before) / before
    print(
        f"error paths: {ERROR_CALLS} failing calls in {time.perf_counter() - start:.0f} s; "
        f"RSS {before:.0f} -> {after:.0f} MiB ({growth:+.1%}); goal: under {TOLERANCE:.0%}"
    )
    return growth < TOLERANCE


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        calls = make_calls(Path(folder))
        results = [soak(calls), stress(calls), error_paths(failing_calls())]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
