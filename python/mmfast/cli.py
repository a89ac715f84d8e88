"""The ``mmfast`` command line: ``mmfast preprocess`` and ``mmfast bench``."""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO, cast

import numpy as np

from mmfast.errors import MmfastError, UnsupportedModelError

if TYPE_CHECKING:
    from mmfast.models.base import ImagePlan, ModelConfig, VideoConfig
    from mmfast.processors import BatchFeature, Dtype, ImageProcessor, Position

DEFAULT_MODEL = "Qwen/Qwen2-VL-7B-Instruct"
# ``mmfast bench --only`` sections, in the order a full run takes them.
BENCH_SECTIONS = (
    "kernels",
    "resize",
    "decode",
    "pil",
    "models",
    "fixed",
    "modes",
    "jpeg",
    "batch",
    "scaling",
    "serving",
    "video",
)
# Files read as videos (through the model's video processor), by extension.
VIDEO_EXTENSIONS = frozenset({".mp4", ".mov", ".m4v", ".mkv", ".webm", ".avi"})
# More images than this get a progress bar on stderr, when stderr is a terminal.
PROGRESS_MIN_IMAGES = 8
# Images per batched call.
DEFAULT_BATCH = 32
# np.savez stores ml_dtypes.bfloat16 as raw 2-byte voids that load back untyped, so bfloat16
# arrays are written as their uint16 bit patterns under "<key>.bfloat16_bits".
BF16_SUFFIX = ".bfloat16_bits"

_PREPROCESS_EPILOG = f"""\
timing: the files go through batched proc(files, threads=N) calls of --batch-size images,
the library's real path (decoding in parallel inside each call), one prompt per image. Each
call's wall time is split across its images in proportion to input + resized pixels (an
estimate). Throughput = all images (and source megapixels) / the whole run, writing --out
included.

progress: with more than {PROGRESS_MIN_IMAGES} images and stderr a terminal, a progress bar
on stderr follows the batched calls.

--out: np.savez of the output arrays by name (pixel_values, image_grid_thw, ...), as one
call on all the images (and one on all the videos) gives them whatever --batch-size, plus
mmfast.names (each image's file), mmfast.sizes (its height and width) and mmfast.rows (its
entries along pixel_values' first axis: patch rows, tiles or views; 1 for models that
stack one tensor per image). bfloat16 arrays are stored as uint16 bit patterns under
"<name>{BF16_SUFFIX}"; read them back with
np.load(f)["pixel_values{BF16_SUFFIX}"].view(ml_dtypes.bfloat16).

errors (unknown model, unreadable image, bad --threads) print one line on stderr and exit
with status 2; with --skip-errors an unreadable image is reported on stderr and left out.
"""


class _Version(argparse.Action):
    """``--version``, looked up only when asked for (importlib.metadata is slow to import)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from mmfast import __version__

        print(f"mmfast {__version__}")
        parser.exit()


class _ListModels(argparse.Action):
    """``--list-models``: the built-in ids, imported only when asked for (every family)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from mmfast.models import supported_models

        print("\n".join(supported_models()))
        parser.exit()


def _positive_int(text: str) -> int:
    """An argument that must be a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mmfast",
        description="Images to vision-language-model tensors: bit-exact, fast, GIL-free.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
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
        help="image files (JPEG, PNG, WebP, ...) or directories of them; none: two built-in "
        "generated samples (a 1280x960 JPEG and a 480x360 PNG)",
    )
    pre.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        metavar="ID_OR_DIR",
        help="a built-in model id, a directory with preprocessor_config.json, or such a JSON "
        f"file (default: {DEFAULT_MODEL}; --list-models prints the built-in ids)",
    )
    pre.add_argument(
        "--list-models", action=_ListModels, nargs=0, help="print the built-in model ids and exit"
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
    pre.add_argument(
        "--backend",
        choices=("pil", "torchvision"),
        default=None,
        help="the transformers class to match bit for bit: the PIL one (default, or the "
        "torchvision one for a model transformers has only as torchvision) or the "
        "torchvision one, which AutoImageProcessor picks when torchvision is installed",
    )
    pre.add_argument(
        "--skip-errors",
        action="store_true",
        help="leave out images that cannot be read (reported on stderr) instead of stopping",
    )
    pre.add_argument(
        "--recursive",
        action="store_true",
        help="take the image files in the subfolders of directories too",
    )
    pre.add_argument(
        "--batch-size",
        type=_positive_int,
        default=DEFAULT_BATCH,
        metavar="N",
        help=f"images per batched call (default: {DEFAULT_BATCH})",
    )

    bench = commands.add_parser(
        "bench",
        help="time every kernel against its alternatives, measured in the same run",
        description="Time every kernel on generated images against the NumPy reference and "
        "the memory floor (np.copyto), then resize, decode, PIL export and each model "
        "against Pillow and transformers, and print the ratios. transformers and torch "
        "rows need those packages; they are skipped with a note otherwise.",
    )
    bench.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes and minimal repeats: a smoke test, not a measurement",
    )
    bench.add_argument(
        "--only",
        action="append",
        choices=BENCH_SECTIONS,
        metavar="SECTION",
        help=f"run only this section (repeatable): {', '.join(BENCH_SECTIONS)}",
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

        try:
            bench.run(quick=args.quick, only=args.only, jpeg=args.jpeg)
        except MmfastError as exc:
            print(f"mmfast bench: error: {_one_line(exc)}", file=sys.stderr)
            return 2
        return 0
    try:
        preprocess(
            args.images,
            args.model,
            args.out,
            args.threads,
            args.dtype,
            backend=args.backend,
            skip_errors=args.skip_errors,
            batch_size=args.batch_size,
            recursive=args.recursive,
        )
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

    def message(self, text: str) -> None:
        """``text`` on a line of its own: the bar is cleared first and redrawn by the next
        update."""
        self.close()
        print(text, file=self.stream)


@dataclass(frozen=True)
class ImageRow:
    """One image (or video) of a ``preprocess`` run; ``resized`` says what the model made of
    it: the resized size, or a video's sampled frames."""

    name: str
    size: tuple[int, int]
    resized: str
    shapes: Mapping[str, tuple[int, ...]]
    tokens: int | None  # None: the model's processor cannot count them (it would fail)
    seconds: float
    frames: int | None = None  # a video's sampled frames; None: an image


def image_files(
    paths: Sequence[str],
    recursive: bool = False,
    stderr: TextIO | None = None,
    videos: bool = True,
) -> list[str]:
    """The files to process: each path, or a directory's image files (by the extensions
    Pillow registers, sorted; with ``recursive`` its subfolders' too, linked ones included,
    each folder once, else the subfolders it passes over are named on ``stderr``) and, with
    ``videos``, its video files (:data:`VIDEO_EXTENSIONS`). A path that does not exist is an
    error: a mistyped name is not an unreadable image."""
    from PIL import Image

    known = set(Image.registered_extensions()) | (VIDEO_EXTENSIONS if videos else set())
    files = []
    for path in paths:
        if not os.path.isdir(path):
            # A mistyped name is not an unreadable image: it stops the run, --skip-errors or
            # not (decoding names URLs, which mmfast does not fetch).
            if not os.path.exists(path) and "://" not in path:
                raise MmfastError(f"{path}: No such file or directory")
            files.append(path)
            continue
        found = []
        seen = {os.path.realpath(path)}
        for root, dirs, names in os.walk(path, followlinks=True):
            # Linked subfolders are followed, each folder once (a link may loop back).
            kept = []
            for d in sorted(dirs):
                real = os.path.realpath(os.path.join(root, d))
                if real not in seen:
                    seen.add(real)
                    kept.append(d)
            dirs[:] = kept
            # Regular files only: reading a named pipe or a device found in a folder would
            # wait on it forever.
            found += sorted(
                full
                for name in names
                if os.path.splitext(name)[1].lower() in known
                and os.path.isfile(full := os.path.join(root, name))
            )
            if not recursive:
                if dirs and stderr is not None:
                    print(
                        f"{path}: left out {len(dirs)} subfolder{'s' if len(dirs) > 1 else ''} "
                        f"({', '.join(dirs[:3])}{', ...' if len(dirs) > 3 else ''}); pass "
                        "--recursive to include them",
                        file=stderr,
                    )
                break
        if not found:
            kinds = "image or video files" if videos else "image files"
            raise MmfastError(f"{path}: expected {kinds} in the directory, found none")
        files += found
    return files


def preprocess(
    images: Sequence[str],
    model: str = DEFAULT_MODEL,
    out: str | None = None,
    threads: str | None = None,
    dtype: str | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    *,
    backend: str | None = None,
    skip_errors: bool = False,
    batch_size: int = DEFAULT_BATCH,
    recursive: bool = False,
) -> dict[str, np.ndarray]:
    """The ``preprocess`` command: returns the arrays written to ``--out`` (none without it,
    which joins nothing: clips or canvases one array cannot hold still print their rows)."""
    from mmfast.processors import ImageProcessor, default_threads, parse_threads

    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    n_threads = default_threads() if threads is None else parse_threads("--threads", threads)
    proc = ImageProcessor.from_pretrained(model, backend=backend)
    sources: list[tuple[str, str | bytes]] = list(sample_images()) if not images else []
    if not isinstance(batch_size, int) or batch_size < 1:
        raise MmfastError(f"--batch-size: expected a positive integer, got {batch_size!r}")
    files = image_files(images, recursive, stderr)
    videos = [path for path in files if os.path.splitext(path)[1].lower() in VIDEO_EXTENSIONS]
    sources += [(path, path) for path in files if path not in videos]
    out_file, out_tmp = _open_out(out) if out is not None else (None, None)
    try:
        t0 = time.perf_counter()
        image_rows, image_batches = (
            _run(proc, sources, n_threads, dtype, stderr, skip_errors, batch_size)
            if sources
            else ([], [])
        )
        video_rows, video_batches = (
            _run_videos(proc, videos, n_threads, dtype, stderr, skip_errors) if videos else ([], [])
        )
        rows = image_rows + video_rows
        if not rows:
            kinds = " and ".join(k for k, n in (("images", sources), ("videos", videos)) if n)
            raise MmfastError(f"{kinds}: none of them could be processed")
        arrays_out: dict[str, np.ndarray] = {}
        if out_file is not None:
            arrays_out = _out_arrays(proc, image_rows, image_batches, video_rows, video_batches)
            np.savez(out_file, **arrays_out)  # type: ignore[arg-type]
            out_file.close()
            if out_tmp is not None and out is not None:
                os.replace(out_tmp, os.path.realpath(out))
        total_s = time.perf_counter() - t0
        first = (image_batches or video_batches)[0]
        _report(proc, model, rows, n_threads, first, total_s, bool(images), stdout)
        if out_file is not None:
            print(f"wrote {out}: {describe_arrays(arrays_out)}", file=stdout)
    except BaseException:
        if out_file is not None:
            out_file.close()
        if out_tmp is not None and os.path.lexists(out_tmp):
            os.unlink(out_tmp)
        raise
    return arrays_out


def _open_out(out: str) -> tuple[BinaryIO, str | None]:
    """The file ``--out`` is written through, opened before any work so that an unwritable
    path fails first, and the temporary path to rename over ``out`` once the file is complete
    (None: ``out`` itself is written). A regular file (or a new one) is written beside itself
    and replaced whole, so a failed run leaves what was there; anything else (``/dev/null``,
    a pipe) is written in place and never removed."""
    if not out or (
        (out.endswith(("/", os.sep)) or os.path.basename(out) in (".", ".."))
        and not os.path.exists(out)
    ):
        # Read as the folder it would be written beside, or as a file named without the slash.
        raise MmfastError(f"--out: expected a file path (FILE.npz), got {out!r}")
    if os.path.exists(out) and not os.path.isfile(out):
        return open(out, "wb"), None
    target = os.path.realpath(out)
    tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.{os.getpid()}.tmp")
    try:
        return open(tmp, "xb"), tmp
    except OSError as exc:  # named by the path given, not the temporary one
        raise type(exc)(exc.errno, exc.strerror, out) from None


def _run(
    proc: ImageProcessor,
    sources: Sequence[tuple[str, str | bytes]],
    n_threads: int,
    dtype: str | None,
    stderr: TextIO,
    skip_errors: bool,
    batch_size: int,
) -> tuple[list[ImageRow], list[BatchFeature]]:
    """Batched calls of ``batch_size`` images (one prompt each), decoding included: the rows
    of the images kept and the calls' outputs (none where every image was skipped)."""
    progress = Progress(
        len(sources), stderr, len(sources) > PROGRESS_MIN_IMAGES and stderr.isatty()
    )
    rows: list[ImageRow] = []
    batches: list[BatchFeature] = []
    try:
        for first in range(0, len(sources), batch_size):
            progress.update(first, "processing")
            chunk = sources[first : first + batch_size]
            t0 = time.perf_counter()
            # One prompt per image: a flat list, where a skipped image leaves no empty prompt
            # (which Fuyu's class cannot stack), or a list of one-image lists for a family
            # that reads a flat list as one prompt (Idefics3, SmolVLM); errors are caught per
            # image.
            nested = proc.config.flat_is_one_sample
            feature = proc(
                [[source] for _, source in chunk] if nested else [s for _, s in chunk],
                threads=n_threads,
                dtype=cast("Dtype", dtype),
                on_error="skip",
            )
            for position, error in feature.skipped.items():
                name = chunk[_prompt(position)][0]
                message = f"{name}: {_one_line(error).removeprefix('source: ')}"
                if not skip_errors:
                    raise MmfastError(message) from error
                progress.message(f"skipped {message}")
            kept = [chunk[_prompt(position)] for position in feature.kept]
            if nested and feature.skipped and kept:
                # Its empty prompt is a row of zeros in a padded batch: the kept images
                # again, as --out holds them.
                feature = proc(
                    [[source] for _, source in kept], threads=n_threads, dtype=cast("Dtype", dtype)
                )
            seconds = time.perf_counter() - t0 if kept else 0.0
            plans = cast("list[ImagePlan]", feature.plans)
            weights = [p.height * p.width + p.resize_size[0] * p.resize_size[1] for p in plans]
            rows += [
                ImageRow(
                    name=name,
                    size=(plan.height, plan.width),
                    resized="x".join(map(str, plan.resize_size)),
                    shapes={
                        proc.config.output_key if key == "pixel_values" else key: shape
                        for key, shape in plan.output_shapes.items()
                    },
                    tokens=_image_tokens(proc, plan),
                    seconds=seconds * weight / sum(weights),
                )
                for (name, _), plan, weight in zip(kept, plans, weights, strict=True)
            ]
            if kept:
                batches.append(feature)
        progress.update(len(sources), "processing")
    finally:
        progress.close()
    return rows, batches


def _out_arrays(
    proc: ImageProcessor,
    image_rows: Sequence[ImageRow],
    images: Sequence[BatchFeature],
    video_rows: Sequence[ImageRow],
    videos: Sequence[BatchFeature],
) -> dict[str, np.ndarray]:
    """What ``--out`` holds: the images' calls as one call gives them, with their
    ``mmfast.*`` index arrays, and the videos' likewise."""
    arrays: dict[str, np.ndarray] = {}
    if images:
        arrays = merge_batches(proc.config, images)
        arrays["mmfast.names"] = np.array([row.name for row in image_rows])
        arrays["mmfast.sizes"] = np.array([r.size for r in image_rows], np.int64).reshape(-1, 2)
        stacked = proc.config.layout() == "stack"
        key = proc.config.output_key
        arrays["mmfast.rows"] = np.array(
            [1 if stacked else row.shapes[key][0] for row in image_rows], np.int64
        )
    if videos:
        assert proc.video_config is not None  # proc.videos ran
        clips = merge_batches(proc.video_config, videos)
        clips["mmfast.videos"] = np.array([row.name for row in video_rows])
        clash = sorted(arrays.keys() & clips.keys())
        if clash:
            raise MmfastError(
                f"--out: the images' and the videos' outputs share the names {clash}; "
                "write the images and the videos to separate files"
            )
        arrays |= clips
    return arrays


def _image_tokens(proc: ImageProcessor, plan: ImagePlan) -> int | None:
    """The image's placeholder tokens, or None where the model's processor fails to count
    them for an image its image processor takes (Fuyu without padding, a window its patches
    do not tile)."""
    try:
        return proc.num_image_tokens(plan.height, plan.width)
    except MmfastError:
        return None


def _prompt(position: Position) -> int:
    """The prompt of an image's place in a call: its index, or its sample's."""
    return position[0] if isinstance(position, tuple) else position


def _run_videos(
    proc: ImageProcessor,
    paths: Sequence[str],
    n_threads: int,
    dtype: str | None,
    stderr: TextIO,
    skip_errors: bool,
) -> tuple[list[ImageRow], list[BatchFeature]]:
    """Each video file through the model's video processor (decoding only the frames it
    samples): the rows of the videos kept and their outputs (none where every video was
    skipped)."""
    from mmfast.video import video_metadata

    rows: list[ImageRow] = []
    batches: list[BatchFeature] = []
    for path in paths:
        t0 = time.perf_counter()
        try:
            feature = proc.videos(path, threads=n_threads, dtype=cast("Dtype", dtype))
        except (MmfastError, OSError) as exc:
            if not skip_errors or isinstance(exc, UnsupportedModelError):
                raise MmfastError(f"{path}: {_one_line(exc)}") from exc
            print(f"skipped {path}: {_one_line(exc)}", file=stderr)
            continue
        seconds = time.perf_counter() - t0
        metadata = video_metadata(path)
        frames = proc.sampled_frames(metadata)
        size = (metadata.height or 0, metadata.width or 0)
        rows.append(
            ImageRow(
                name=path,
                size=size,
                resized=f"{frames} frames",
                shapes={key: np.shape(value) for key, value in feature.items()},
                tokens=proc.num_video_tokens(frames, *size),
                seconds=seconds,
                frames=frames,
            )
        )
        batches.append(feature)
    return rows, batches


def merge_batches(
    config: ModelConfig | VideoConfig, batches: Sequence[BatchFeature]
) -> dict[str, np.ndarray]:
    """The arrays of several calls (one prompt per image, or clip) as one call on all of their
    images gives them: each pixel output (and ``pixel_rows_mask``) zero-padded to the largest
    along every axis after the first, as the batch pads its canvases and rows, and joined
    along it (MiniCPM-V's strip along its last axis), to the shape the whole batch's plans
    give; the outputs the plans alone give (grids, counts, masks, indices offset by the
    images before) made again from all the plans; the uint8 table kept once."""
    from mmfast.models.base import ModelConfig

    plans = [plan for batch in batches for plan in batch.plans]
    try:
        if isinstance(config, ModelConfig):
            ones = [1] * len(plans)
            finished = config.finish_batch(plans, ones)
            shapes = {
                config.output_key if k == "pixel_values" else k: s
                for k, (s, _) in config.pixel_shapes(finished, ones).items()
            }
            computed = npz_arrays(config.batch_outputs(finished, ones))
            order = config.output_order
            # uint8 pixels one call makes float32 (Idefics3's float zero padding of unequal
            # prompts), where each batch's prompts were even.
            tables = config.batch_tables(plans, ones)
        else:
            clips = config.finish_batch(plans)
            sizes = {plan.output_shapes[config.output_key] for plan in clips}
            if config.layout() == "clips" and len(sizes) > 1:
                raise MmfastError(
                    f"the clips' {config.output_key} differ in shape ({sorted(sizes)}), "
                    "which one array cannot hold; pass one video at a time"
                )
            shape = config.batch_shape(clips)[0]
            if config.layout() == "clips":
                shape = (len(clips), *sizes.pop())
            shapes = {config.output_key: shape}
            computed = npz_arrays(config.batch_outputs(clips))
            order = ()
            tables = config.tables()
    except MmfastError as exc:
        raise MmfastError(f"joining the batches' outputs: {exc}") from exc
    parts = [npz_arrays(batch) for batch in batches]
    merged: dict[str, np.ndarray] = {}
    for key in dict.fromkeys(key for part in parts for key in part):
        name = key.removesuffix(BF16_SUFFIX)
        if key == "pixel_lut":
            merged[key] = parts[0][key]
        elif key in computed:
            merged[key] = computed[key]
        elif name in shapes or key == "pixel_rows_mask":
            merged[key] = _joined([part[key] for part in parts if key in part], config.layout())
            if name in shapes and merged[key].dtype == np.uint8 and "pixel_lut" not in parts[0]:
                merged[key] = merged[key].astype(tables.dtype, copy=False)
            # The padding is a batch's where this holds: its canvases and rows.
            assert name not in shapes or merged[key].shape == tuple(shapes[name]), name
        else:
            raise AssertionError(f"{key}: neither a pixel output nor one of batch_outputs")
    # One call's order (a batch without an output, such as DeepSeek-OCR-2's local tiles
    # where none of its images has any, lists it after the others): the pixel outputs, the
    # plans' outputs, the family's own order over them, then the uint8 outputs.
    names = [*shapes, *computed]
    names = [*(n for n in order if n in names), *(n for n in names if n not in order)]
    keys = [k for n in [*names, "pixel_lut", "pixel_rows_mask"] for k in (n, n + BF16_SUFFIX)]
    return {key: merged[key] for key in keys if key in merged}


def _joined(arrays: Sequence[np.ndarray], layout: str) -> np.ndarray:
    """Arrays zero-padded to the largest along every axis after the first and joined along
    it; along the last for the "strip" layout. Each is written once into the joined array
    (padding then joining copied a run's outputs twice), and one array is returned as it is."""
    if len(arrays) == 1:
        return arrays[0]
    if layout == "strip":
        return np.concatenate(arrays, axis=-1)
    largest = [max(a.shape[axis] for a in arrays) for axis in range(1, arrays[0].ndim)]
    out = np.zeros((sum(len(a) for a in arrays), *largest), np.result_type(*arrays))
    at = 0
    for a in arrays:
        out[(slice(at, at + len(a)), *(slice(n) for n in a.shape[1:]))] = a
        at += len(a)
    return out


def describe_arrays(arrays: Mapping[str, np.ndarray]) -> str:
    return ", ".join(f"{k} {v.dtype}{list(v.shape)}" for k, v in arrays.items())


def _report(
    proc: ImageProcessor,
    model: str,
    rows: Sequence[ImageRow],
    n_threads: int,
    first: BatchFeature,
    total_s: float,
    given: bool,
    stdout: TextIO,
) -> None:
    from mmfast.models import registry

    config = proc.config
    family = registry.family_of(config.image_processor_type)
    hf = family.hf_pil if config.backend == "pil" else family.hf_torchvision
    # A family with one class gives its output for both backend names (Llama 4's torchvision
    # class; Emu3's PIL-only one, which has no Pil suffix).
    hf = hf or family.hf_torchvision or family.hf_pil
    # The config's own class (a family may have several: Glm4v and Glm46V).
    name = config.image_processor_type.removesuffix("Fast").removesuffix("Pil")
    name += "Pil" if hf is not None and hf.endswith("Pil") else ""
    reference = f"transformers' {name}" if hf else "the checkpoint's processor"
    own = getattr(config, "transformers_class", None)
    if own is not None:  # Kimi-K2.5's checkpoint config: its "torchvision" is transformers'
        reference = (
            f"transformers' {own.image_processor_type}"
            if config.backend == "torchvision"
            else "the checkpoint's processor"
        )
    if proc.video_config is not None and not any(row.frames is None for row in rows):
        reference = f"transformers' {proc.video_config.video_processor_type}"
    elif proc.video_config is not None and any(row.frames is not None for row in rows):
        reference += f" and {proc.video_config.video_processor_type}"
    # The images' pixels, else the videos' (Video-LLaVA's keys differ), as the run gave them.
    outputs = [config.output_key] + (
        [] if proc.video_config is None else [proc.video_config.output_key]
    )
    key = next(name for name in outputs if name in first)
    print(f"model {model}: bit-identical to {reference}", file=stdout)
    print(
        f"backend {config.backend!r}, {n_threads} thread{'s' if n_threads > 1 else ''}, "
        f"{key} {np.asarray(first[key]).dtype}"
        + ("" if given else "; no images given: built-in generated samples"),
        file=stdout,
    )
    print(
        "ms: each batched call (decoding included) split across its images by pixels",
        file=stdout,
    )
    print_table(rows, stdout, shutil.get_terminal_size().columns if stdout.isatty() else None)
    # A video's pixels are its sampled frames'.
    megapixels = sum(row.size[0] * row.size[1] * (row.frames or 1) for row in rows) / 1e6
    images = sum(row.frames is None for row in rows)
    clips = len(rows) - images
    counted = [f"{images} image{'s' if images != 1 else ''}"] if images else []
    if clips:
        frames = sum(row.frames or 0 for row in rows)
        counted.append(f"{clips} video{'s' if clips != 1 else ''} ({frames} frames)")
    rate = f"{images / total_s:.1f} images/s, " if images else ""
    print(
        f"total: {', '.join(counted)}, {megapixels:.2f} MP in {total_s * 1e3:.1f} ms "
        f"(decoding, processing and writing --out): {rate}{megapixels / total_s:.1f} MP/s",
        file=stdout,
    )


def npz_arrays(feature: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays ``--out`` saves: bfloat16 ones as uint16 bits under ``<key>.bfloat16_bits``."""
    # Only ml_dtypes makes bfloat16 arrays: none exists before it is imported (0.5-1 s).
    bfloat16 = getattr(sys.modules.get("ml_dtypes"), "bfloat16", None)
    arrays = {}
    for key, value in feature.items():
        value = np.asarray(value)  # Idefics3's rows/cols are nested lists, as HF returns them
        if bfloat16 is not None and value.dtype == bfloat16:
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


def print_table(rows: Sequence[ImageRow], stream: TextIO, width: int | None = None) -> None:
    """One line per image, columns sized to their contents and, given a ``width`` (the
    terminal's), the table to it: shapes (to 24 characters), then long file names (to 16)
    are shortened with "..."."""
    titles = ("image", "size HxW", "resized", "outputs (shapes)", "tokens", "ms")
    cells = [
        [
            row.name,
            f"{row.size[0]}x{row.size[1]}",
            row.resized,
            ", ".join(f"{key} {shape}" for key, shape in row.shapes.items()),
            "-" if row.tokens is None else str(row.tokens),
            f"{row.seconds * 1e3:.2f}",
        ]
        for row in rows
    ]
    widths = [max(len(t), *(len(c[i]) for c in cells)) for i, t in enumerate(titles)]
    for column, least in ((3, 24), (0, 16)):
        excess = sum(widths) + 2 * (len(widths) - 1) - width if width else 0
        if excess > 0 and widths[column] > least:
            widths[column] = max(least, widths[column] - excess)
            keep = widths[column] - 3
            for c in cells:
                if len(c[column]) > widths[column]:
                    # Shapes keep their start, file names their end.
                    c[column] = (
                        c[column][:keep] + "..." if column == 3 else "..." + c[column][-keep:]
                    )
    left = 4  # text columns left-aligned, numbers (tokens onwards) right-aligned

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.ljust(w) if i < left else v.rjust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        )

    print(line(titles), file=stream)
    for row_cells in cells:
        print(line(row_cells), file=stream)
