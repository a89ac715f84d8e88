"""Ray Data throughput: a folder of JPEGs through Qwen2-VL, Ray against one process.

``python benches/ray_throughput.py [--folder DIR] [--images N] [--batch-size B] [--repeat R]``
(needs ``mmfast[ray]``). Without ``--folder`` it writes N synthetic JPEGs (seeded photo-like
pixels, sizes from 640x480 to 1920x1080) to a temporary folder. Each round runs, in turn:

* ``1 process, 1 thread`` / ``2 threads``: ``proc(paths, threads=...)`` on batches of B paths,
  decoding included, in this process;
* ``ray, 2 actors x 1 thread``: :func:`mmfast.ray.preprocess_files` with ``workers=2`` on a
  local 2-CPU cluster (started before timing), every batch pulled back to this process. Each
  run starts its actors (process, imports, config), and its time includes that;
  ``less the actors' start`` takes out the time of a run of one image.

Prints the median images/s of the rounds and the ratios to the one-process runs; no goal, no
exit status.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import ray
from PIL import Image

import mmfast
from mmfast.bench import synthetic_photo
from mmfast.cli import image_files
from mmfast.ray import preprocess_files

MODEL = "Qwen/Qwen2-VL-7B-Instruct"
RAY = "ray, 2 actors x 1 thread"
# A run of one image: the actors' start (process, imports, config) and little else.
START = "ray, 1 image"
# (height, width), both orientations: VGA to full HD.
SIZES = [(480, 640), (1080, 1920), (720, 1280), (768, 1024), (1080, 1440), (640, 480)]


def write_jpegs(folder: Path, count: int) -> None:
    for i in range(count):
        image = Image.fromarray(synthetic_photo(*SIZES[i % len(SIZES)], seed=i))
        image.save(folder / f"{i:04d}.jpg", quality=90)


def one_process(files: list[str], threads: int, batch_size: int) -> int:
    """Images done."""
    proc = mmfast.ImageProcessor.from_pretrained(MODEL)
    return sum(
        len(proc(files[i : i + batch_size], threads=threads).kept)
        for i in range(0, len(files), batch_size)
    )


def through_ray(files: list[str], batch_size: int) -> int:
    """Images done, every batch pulled back to this process."""
    dataset = preprocess_files(files, MODEL, workers=2, batch_size=batch_size)
    return sum(
        len(batch["path"]) for batch in dataset.iter_batches(batch_size=None, batch_format="numpy")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, help="JPEGs to use instead of synthetic ones")
    parser.add_argument("--images", type=int, default=64, help="synthetic images (64)")
    parser.add_argument("--batch-size", type=int, default=8, help="images a call (8)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; medians reported (3)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder or Path(tmp)
        if args.folder is None:
            write_jpegs(folder, args.images)
        files = image_files([os.fspath(folder)])
        megapixels = sum(h * w for h, w in map(mmfast.image_size, files)) / 1e6
        megabytes = sum(os.path.getsize(f) for f in files) / 1e6
        print(
            f"{len(files)} images in {folder} ({megapixels:.0f} MP, {megabytes:.0f} MB), {MODEL}, "
            f"batches of {args.batch_size}, {os.cpu_count()} logical CPUs, "
            f"load {os.getloadavg()[0]:.2f} before"
        )
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        # The one-image run cannot keep 2 actors busy, which Ray warns of.
        warnings.filterwarnings("ignore", "The minimum number of concurrent actors")
        runs: dict[str, tuple[Callable[[], int], int]] = {
            "1 process, 1 thread": (lambda: one_process(files, 1, args.batch_size), len(files)),
            "1 process, 2 threads": (lambda: one_process(files, 2, args.batch_size), len(files)),
            RAY: (lambda: through_ray(files, args.batch_size), len(files)),
            START: (lambda: through_ray(files[:1], args.batch_size), 1),
        }
        one_process(files, 2, args.batch_size)  # untimed: first-call page costs (see warmup)
        seconds: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.repeat):
            for name, (run, count) in runs.items():
                start = time.perf_counter()
                done = run()
                seconds[name].append(time.perf_counter() - start)
                assert done == count, f"{name}: {done} of {count} images"
        ray.shutdown()
        print(f"load {os.getloadavg()[0]:.2f} after")

    median = {name: statistics.median(times) for name, times in seconds.items()}
    rates = {name: len(files) / median[name] for name in runs if name != START}
    # The images beyond one in the time beyond a one-image run: Ray's rate once started.
    rates["ray, less the actors' start"] = (len(files) - 1) / (median[RAY] - median[START])
    one, two = rates["1 process, 1 thread"], rates["1 process, 2 threads"]
    print(f"{'run':36} {'images/s':>9} {'vs 1 thread':>12} {'vs 2 threads':>13}")
    for name, rate in rates.items():
        print(f"{name:36} {rate:9.2f} {rate / one:11.2f}x {rate / two:12.2f}x")
    print(f"{START}: {median[START]:.2f} s (median of {args.repeat})")


if __name__ == "__main__":
    main()
