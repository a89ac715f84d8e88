"""The ``mmfast`` command line: ``mmfast preprocess`` and ``mmfast bench``."""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO, cast

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import MmfastError

if TYPE_CHECKING:
    from mmfast.processors import Dtype, ImageProcessor

DEFAULT_MODEL = "Qwen/Qwen2-VL-7B-Instruct"
# More images than this get a progress bar on stderr, when stderr is a terminal.
PROGRESS_MIN_IMAGES = 8
# np.savez stores ml_dtypes.bfloat16 as raw 2-byte voids that load back untyped, so bfloat16
# arrays are written as their uint16 bit patterns under "<key>.bfloat16_bits".
BF16_SUFFIX = ".bfloat16_bits"

_PREPROCESS_EPILOG = f"""\
timing: each image is decoded in turn (mmfast.decode_image, timed per image), then all of
them go through one batched proc(images, threads=N) call, the library's real path. That
call's wall time is split across images in proportion to input + resized pixels (an
estimate); an image's ms = its decode + that share. Throughput = all images (and source
megapixels) / (all decodes + the batched call).

progress: with more than {PROGRESS_MIN_IMAGES} images and stderr a terminal, a progress bar
on stderr follows decoding and then the batched call.

--out: np.savez of the output arrays by name (pixel_values, image_grid_thw, ...).
bfloat16 arrays are stored as uint16 bit patterns under "<name>{BF16_SUFFIX}"; read them
back with np.load(f)["pixel_values{BF16_SUFFIX}"].view(ml_dtypes.bfloat16).

errors (unknown model, unreadable image, bad --threads) print one line on stderr and exit
with status 2.
"""


def _parser() -> argparse.ArgumentParser:
    from mmfast.models import supported_models

    parser = argparse.ArgumentParser(
        prog="mmfast",
        description="Images to vision-language-model tensors: bit-exact, fast, GIL-free.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    pre = commands.add_parser(
        "preprocess",
        help="preprocess images for a model; print sizes, shapes, tokens and timings",
        description="Preprocess images exactly as the model's transformers image processor "
        "would, print one row per image (sizes, output shapes, image tokens, ms) and the "
        "throughput, and optionally save the tensors.",
        epilog=_PREPROCESS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pre.add_argument(
        "images",
        nargs="*",
        metavar="IMAGES",
        help="image files (JPEG, PNG, WebP, ...); none: two built-in generated samples "
        "(a 1280x960 JPEG and a 480x360 PNG)",
    )
    pre.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        metavar="ID_OR_DIR",
        help="a built-in model id, a directory with preprocessor_config.json, or such a JSON "
        f"file (default: {DEFAULT_MODEL}; built-in ids: {', '.join(supported_models())})",
    )
    pre.add_argument(
        "--out", metavar="FILE.npz", help="save the output arrays with np.savez, at exactly FILE"
    )
    pre.add_argument(
        "--threads",
        metavar="N",
        help="threads of the batched call (default: MMFAST_NUM_THREADS, else every core "
        "this process may use)",
    )
    pre.add_argument(
        "--dtype",
        choices=("float32", "bfloat16", "float16", "uint8"),
        default=None,
        help="pixel_values dtype (default: the reference's, float32 for most models); uint8 "
        "adds pixel_lut, the per-channel table that normalises it",
    )

    bench = commands.add_parser(
        "bench",
        help="time every kernel against its alternatives, measured in the same run",
        description="Time every kernel on generated images against the NumPy reference and "
        "the memory floor (np.copyto), then resize, decode, PIL export and each model "
        "against Pillow and transformers, and print the ratios. transformers and torch "
        "rows need those packages; they are skipped with a note otherwise.",
    )
    from mmfast.bench import SECTIONS

    bench.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes and minimal repeats: a smoke test, not a measurement",
    )
    bench.add_argument(
        "--only",
        action="append",
        choices=SECTIONS,
        metavar="SECTION",
        help=f"run only this section (repeatable): {', '.join(SECTIONS)}",
    )
    bench.add_argument(
        "--jpeg",
        metavar="PATH",
        help="the 12 MP JPEG for the decode and jpeg sections (default: "
        "../shared/images/grace_hopper_12mp.jpg beside the repository, or under "
        "$MMFAST_SHARED/images)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mmfast`` console script."""
    args = _parser().parse_args(argv)
    if args.command == "bench":
        from mmfast import bench

        bench.run(quick=args.quick, only=args.only, jpeg=args.jpeg)
        return 0
    try:
        preprocess(args.images, args.model, args.out, args.threads, args.dtype)
    except (MmfastError, OSError) as exc:
        print(f"mmfast preprocess: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    return 0


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        text = f"{exc.filename}: {exc.strerror}"
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())


# --------------------------------------------------------------------------------------------
# preprocess
# --------------------------------------------------------------------------------------------


def sample_images() -> list[tuple[str, bytes]]:
    """The built-in samples, generated deterministically: (name, encoded bytes)."""
    from PIL import Image

    from mmfast.bench import synthetic_photo

    samples = []
    for name, (h, w), fmt, seed in (
        ("sample-1280x960.jpg", (960, 1280), "JPEG", 0),
        ("sample-480x360.png", (360, 480), "PNG", 1),
    ):
        buffer = io.BytesIO()
        Image.fromarray(synthetic_photo(h, w, seed)).save(buffer, fmt, quality=90)
        samples.append((name, buffer.getvalue()))
    return samples


class Progress:
    """A one-line progress bar on ``stream``, redrawn in place; nothing when disabled."""

    def __init__(self, total: int, stream: TextIO, enabled: bool, width: int = 30) -> None:
        self.total = total
        self.stream = stream
        self.enabled = enabled
        self.width = width

    def update(self, done: int, label: str) -> None:
        if not self.enabled:
            return
        filled = self.width * done // max(self.total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{label:<10} [{bar}] {done}/{self.total}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * (self.width + 35) + "\r")
            self.stream.flush()


@dataclass(frozen=True)
class ImageRow:
    """One image of a ``preprocess`` run."""

    name: str
    size: tuple[int, int]
    resized: tuple[int, int]
    shapes: Mapping[str, tuple[int, ...]]
    tokens: int
    decode_s: float
    process_s: float


def preprocess(
    images: Sequence[str],
    model: str = DEFAULT_MODEL,
    out: str | None = None,
    threads: str | None = None,
    dtype: str | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> dict[str, np.ndarray]:
    """The ``preprocess`` command: returns the output arrays (as written by ``--out``)."""
    from mmfast.processors import ImageProcessor, default_threads, parse_threads

    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    n_threads = default_threads() if threads is None else parse_threads("--threads", threads)
    proc = ImageProcessor.from_pretrained(model)
    sources: list[tuple[str, str | bytes]] = list(sample_images()) if not images else []
    sources += [(path, path) for path in images]
    # Opened first so an unwritable path fails before any work; removed again on failure.
    out_file = open(out, "wb") if out is not None else None  # noqa: SIM115
    try:
        arrays_out = _run(proc, model, sources, n_threads, dtype, stdout, stderr, bool(images))
        if out_file is not None:
            np.savez(out_file, **arrays_out)  # type: ignore[arg-type]
            out_file.close()
            saved = ", ".join(f"{k} {v.dtype}{list(v.shape)}" for k, v in arrays_out.items())
            print(f"wrote {out}: {saved}", file=stdout)
    except BaseException:
        if out_file is not None:
            out_file.close()
            os.unlink(out_file.name)
        raise
    return arrays_out


def _run(
    proc: ImageProcessor,
    model: str,
    sources: Sequence[tuple[str, str | bytes]],
    n_threads: int,
    dtype: str | None,
    stdout: TextIO,
    stderr: TextIO,
    given: bool,
) -> dict[str, np.ndarray]:
    from mmfast.image import decode_image

    progress = Progress(
        len(sources), stderr, len(sources) > PROGRESS_MIN_IMAGES and stderr.isatty()
    )
    arrays: list[NDArray[np.uint8]] = []
    decode_times = []
    for i, (name, source) in enumerate(sources):
        progress.update(i, "decoding")
        t0 = time.perf_counter()
        try:
            arrays.append(decode_image(source))
        except MmfastError as exc:
            raise MmfastError(f"{name}: {str(exc).removeprefix('source: ')}") from exc
        decode_times.append(time.perf_counter() - t0)
    progress.update(len(sources), "processing")
    t0 = time.perf_counter()
    try:
        feature = proc(arrays, threads=n_threads, dtype=cast("Dtype", dtype))
    finally:
        progress.close()
    process_s = time.perf_counter() - t0

    plans = [proc.plan(a.shape[0], a.shape[1]) for a in arrays]
    weights = [p.height * p.width + p.resize_size[0] * p.resize_size[1] for p in plans]
    rows = [
        ImageRow(
            name=name,
            size=(plan.height, plan.width),
            resized=plan.resize_size,
            shapes=plan.output_shapes,
            tokens=proc.num_image_tokens(plan.height, plan.width),
            decode_s=decode_s,
            process_s=process_s * weight / sum(weights),
        )
        for (name, _), plan, decode_s, weight in zip(
            sources, plans, decode_times, weights, strict=True
        )
    ]
    config = proc.config
    print(
        f"model {model} ({config.image_processor_type}), {n_threads} thread"
        f"{'s' if n_threads > 1 else ''}, {feature['pixel_values'].dtype}"
        + ("" if given else "; no images given: built-in generated samples"),
        file=stdout,
    )
    print(
        "ms = decode (timed per image) + a share of one batched proc(images, threads="
        f"{n_threads}) call, split by input + resized pixels (estimate)",
        file=stdout,
    )
    print_table(rows, stdout)
    total_s = sum(decode_times) + process_s
    megapixels = sum(p.height * p.width for p in plans) / 1e6
    print(
        f"total: {len(rows)} image{'s' if len(rows) > 1 else ''}, {megapixels:.2f} MP in "
        f"{total_s * 1e3:.1f} ms (decode {sum(decode_times) * 1e3:.1f} ms + batched call "
        f"{process_s * 1e3:.1f} ms): {len(rows) / total_s:.1f} images/s, "
        f"{megapixels / total_s:.1f} MP/s",
        file=stdout,
    )
    return npz_arrays(feature)


def npz_arrays(feature: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays ``--out`` saves: bfloat16 ones as uint16 bits under ``<key>.bfloat16_bits``."""
    import ml_dtypes

    arrays = {}
    for key, value in feature.items():
        value = np.asarray(value)  # Idefics3's rows/cols are nested lists, as HF returns them
        if value.dtype == ml_dtypes.bfloat16:
            arrays[key + BF16_SUFFIX] = value.view(np.uint16)
        else:
            arrays[key] = value
    return arrays


def load_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read a ``--out`` file back into the processor's arrays (bfloat16 restored)."""
    import ml_dtypes

    with np.load(path) as data:
        return {
            key.removesuffix(BF16_SUFFIX): (
                data[key].view(ml_dtypes.bfloat16) if key.endswith(BF16_SUFFIX) else data[key]
            )
            for key in data.files
        }


def print_table(rows: Sequence[ImageRow], stream: TextIO) -> None:
    """One line per image, columns sized to their contents."""
    titles = ("image", "size HxW", "resized HxW", "output shapes (this image)", "tokens")
    titles_ms = ("decode ms", "process ms", "ms")
    cells = [
        (
            row.name,
            f"{row.size[0]}x{row.size[1]}",
            f"{row.resized[0]}x{row.resized[1]}",
            " ".join(
                f"{key}={'x'.join(str(n) for n in shape)}" for key, shape in row.shapes.items()
            ),
            str(row.tokens),
            f"{row.decode_s * 1e3:.2f}",
            f"{row.process_s * 1e3:.2f}",
            f"{(row.decode_s + row.process_s) * 1e3:.2f}",
        )
        for row in rows
    ]
    titles_all = titles + titles_ms
    widths = [max(len(t), *(len(c[i]) for c in cells)) for i, t in enumerate(titles_all)]
    left = len(titles) - 1  # text columns left-aligned, numbers (tokens onwards) right-aligned

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.ljust(w) if i < left else v.rjust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        )

    print(line(titles_all), file=stream)
    for row_cells in cells:
        print(line(row_cells), file=stream)
