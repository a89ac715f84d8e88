"""The ``mmfast`` console script."""

from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import noise, same_bits
from PIL import Image

import mmfast
from mmfast import ImageProcessor, bench, cli, decode_image, models, supported_models
from mmfast.cli import main


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    assert "bench" in capsys.readouterr().out


def test_console_script_entry_point():
    result = subprocess.run(
        [sys.executable, "-m", "mmfast", "bench", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "memory floor" in result.stdout


def test_bench_rows_measure_every_alternative():
    rows = list(bench.kernel_rows(sizes=((16, 24),)))
    assert [r.case for r in rows] == [
        "deinterleave_rgb_to_planes",
        "pad_and_normalize_to_tensor",
        "serialize_pixel_values",
    ]
    for row in rows:
        assert row.ours > 0 and all(t > 0 for t in row.others.values())
        assert "reference" in row.others and "copy floor" in row.others
        assert f"{row.ours * 1e3:9.2f}" in row.format(["reference", "tobytes", "copy floor"])


# --------------------------------------------------------------------------------------------
# mmfast preprocess
# --------------------------------------------------------------------------------------------

QWEN = "Qwen/Qwen2-VL-7B-Instruct"
LLAMA4 = "meta-llama/Llama-4-Scout-17B-16E-Instruct"


def write_images(tmp_path: Path) -> list[Path]:
    paths = []
    for i, (size, fmt) in enumerate((((30, 40), "PNG"), ((57, 33), "JPEG"), ((20, 90), "PNG"))):
        path = tmp_path / f"img{i}.{fmt.lower()}"
        Image.fromarray(bench.synthetic_photo(*size, seed=i)).save(path, fmt)
        paths.append(path)
    return paths


def table_rows(out: str) -> list[list[str]]:
    """The per-image rows of the preprocess table, split on runs of spaces."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("image "))
    end = next(i for i, line in enumerate(lines) if line.startswith("total:"))
    return [re.split(r"\s{2,}", line.strip()) for line in lines[start + 1 : end]]


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"mmfast {mmfast.__version__}\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+", mmfast.__version__)


def test_preprocess_without_images_uses_the_samples(capsys):
    assert main(["preprocess", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        f"model {QWEN}: bit-identical to transformers' Qwen2VLImageProcessorPil\n"
        "backend 'pil', 1 thread, pixel_values float32; no images given"
    )
    rows = table_rows(out)
    assert [r[0] for r in rows] == ["sample-1280x960.jpg", "sample-480x360.png"]
    proc = ImageProcessor.from_pretrained(QWEN)
    for row, (_, data) in zip(rows, cli.sample_images(), strict=True):
        h, w = decode_image(data).shape[:2]
        plan = proc.plan(h, w)
        assert row[1] == f"{h}x{w}"
        assert row[2] == f"{plan.resize_size[0]}x{plan.resize_size[1]}"
        patches, dim = plan.output_shapes["pixel_values"]
        assert row[3] == f"pixel_values ({patches}, {dim}), image_grid_thw (3,)"
        assert int(row[4]) == proc.num_image_tokens(h, w)
        assert float(row[5]) > 0
    assert re.search(r"total: 2 images, .* images/s, .* MP/s", out)


@pytest.mark.parametrize(
    ("model", "backend", "reference", "key"),
    [
        (LLAMA4, "torchvision", "Llama4ImageProcessor", "pixel_values"),
        # Only a torchvision class, which both backend names match (it said "the
        # checkpoint's processor").
        (LLAMA4, "pil", "Llama4ImageProcessor", "pixel_values"),
        # Only a PIL class, without the Pil suffix (it said Emu3ImageProcessorPil).
        ("BAAI/Emu3-Chat-hf", "pil", "Emu3ImageProcessor", "pixel_values"),
        ("adept/fuyu-8b", "pil", "FuyuImageProcessorPil", "images"),
        ("moonshotai/Kimi-VL-A3B-Instruct", "pil", None, "pixel_values"),
    ],
)
def test_preprocess_names_the_reference(capsys, model, backend, reference, key):
    assert main(["preprocess", "--backend", backend, "--model", model]) == 0
    named = "the checkpoint's processor" if reference is None else f"transformers' {reference}"
    head = f"model {model}: bit-identical to {named}\nbackend {backend!r}, \\d+ threads?, {key} "
    assert re.match(head, capsys.readouterr().out)


def test_samples_are_deterministic():
    assert cli.sample_images() == cli.sample_images()


@pytest.mark.parametrize(
    ("model", "dtype"),
    [
        (QWEN, "float32"),
        (LLAMA4, "bfloat16"),
        (LLAMA4, "float32"),
        ("llava-hf/llava-1.5-7b-hf", "float32"),
        (QWEN, "float16"),
        ("HuggingFaceTB/SmolVLM2-2.2B-Instruct", "uint8"),
        ("llava-hf/llava-v1.6-mistral-7b-hf", "float32"),
    ],
)
def test_preprocess_out_round_trips_exactly(tmp_path, capsys, model, dtype):
    """The file holds the outputs of the images as one prompt each, in batches of two, and
    says which rows are whose."""
    paths = write_images(tmp_path)
    out_file = tmp_path / "out.npz"
    argv = ["preprocess", *map(str, paths), "--model", model, "--out", str(out_file)]
    assert main([*argv, "--threads", "2", "--dtype", dtype, "--batch-size", "2"]) == 0
    out = capsys.readouterr().out
    assert [r[0] for r in table_rows(out)] == [str(p) for p in paths]
    assert f"wrote {out_file}" in out
    got = cli.load_npz(out_file)
    proc = ImageProcessor.from_pretrained(model)
    want = proc([[p] for p in paths], threads=1, dtype=dtype)
    meta = ["mmfast.names", "mmfast.sizes", "mmfast.rows"]
    assert list(got) == [*want, *meta]
    for key in want:
        expected = np.asarray(want[key])
        if key == "pixel_lut":
            assert same_bits(got[key], expected)
        else:  # two batches joined, padded to the longer where HF pads
            assert got[key].shape[0] == expected.shape[0], key
            assert same_bits(got[key][tuple(slice(n) for n in expected.shape)], expected), key
    assert list(got["mmfast.names"]) == [str(p) for p in paths]
    sizes = [decode_image(p).shape[:2] for p in paths]
    assert got["mmfast.sizes"].tolist() == [list(s) for s in sizes]
    # Each image's own entries, as the README splits them.
    rows = got["mmfast.rows"]
    for i, path in enumerate(paths):
        alone = proc(str(path), dtype=dtype)["pixel_values"]
        values = got["pixel_values"]
        if proc.config.layout() == "concat":
            offsets = np.cumsum([0, *rows])
            mine = values[offsets[i] : offsets[i + 1]]
        elif proc.config.layout() == "stack":
            mine = values[i : i + 1]
        else:  # zero-padded per image or per prompt: image i is entry i, its first rows[i]
            mine = values[i : i + 1, : rows[i]]
        assert same_bits(np.asarray(mine), np.asarray(alone)), path
    if dtype == "bfloat16":
        with np.load(out_file) as raw:
            assert raw.files[:2] == ["pixel_values.bfloat16_bits", "aspect_ratios"]
            assert raw["pixel_values.bfloat16_bits"].dtype == np.uint16


@pytest.mark.parametrize("model", supported_models())
def test_preprocess_out_is_one_call(tmp_path, capsys, model):
    """--out holds what one call on all the kept images gives (a prompt each), whatever the
    batches: canvases padded to the largest (Pixtral, Idefics2, Emu3), Molmo2's pooling
    indices offset by the images of earlier batches, Phi-4's masks padded with ones, Aria's
    crop count, Step-3.7's padded masks; an undecodable file left out. mmfast.rows gives each
    image's entries along pixel_values' first axis (1 where images are stacked). Batches
    used to be joined along the first axis, which crashed or wrote other values."""
    paths = [*write_images(tmp_path), tmp_path / "bad.png"]
    paths[-1].write_bytes(b"\x89PNG not an image")
    argv = ["preprocess", *map(str, paths), "--model", model, "--skip-errors"]
    out = tmp_path / "out.npz"
    try:
        proc = ImageProcessor.from_pretrained(model)
        kept = [p for p in paths if proc([p], on_error="skip").kept]
    except mmfast.MmfastError:  # a default the model refuses
        assert main([*argv, "--batch-size", "1"]) == 2
        return
    try:
        want = cli.npz_arrays(proc([[p] for p in kept]))
    except mmfast.MmfastError:  # sizes one call cannot stack: the rows print, --out refuses
        assert main([*argv, "--batch-size", "1"]) == 0
        assert main([*argv, "--batch-size", "1", "--out", str(out)]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len([line for line in err if not line.startswith("skipped ")]) == 1
        assert not out.exists()
        return
    for batch_size in ("1", "2"):
        out = tmp_path / f"out{batch_size}.npz"
        assert main([*argv, "--batch-size", batch_size, "--out", str(out)]) == 0
        with np.load(out) as got:
            assert got.files == [*want, "mmfast.names", "mmfast.sizes", "mmfast.rows"]
            for key, value in want.items():
                assert same_bits(got[key], value), key
            assert got["mmfast.names"].tolist() == list(map(str, kept))
            rows = got["mmfast.rows"].tolist()
    layout = proc.config.layout()
    if layout == "concat":
        assert sum(rows) == len(want[next(iter(want))])
    elif layout == "stack":
        assert rows == [1] * len(kept)


@pytest.mark.parametrize(
    ("model", "dtype"),
    [
        ("baidu/Unlimited-OCR", "float32"),
        ("deepseek-community/DeepSeek-OCR-2", "uint8"),
        ("stepfun-ai/Step-3.7-Flash", "uint8"),
    ],
)
def test_preprocess_out_keeps_one_calls_key_order(tmp_path, model, dtype):
    """A first batch without local tiles (a small image) has no such output: --out still
    lists the keys as one call does (they came after the others)."""
    paths = [tmp_path / "small.png", tmp_path / "wide.png"]
    for path, (h, w) in zip(paths, [(60, 80), (700, 1600)], strict=True):
        Image.fromarray(bench.synthetic_photo(h, w, seed=1)).save(path)
    out = tmp_path / "out.npz"
    argv = ["preprocess", *map(str, paths), "--model", model, "--dtype", dtype]
    assert main([*argv, "--batch-size", "1", "--out", str(out)]) == 0
    want = cli.npz_arrays(ImageProcessor.from_pretrained(model)([[p] for p in paths], dtype=dtype))
    with np.load(out) as got:
        assert got.files == [*want, "mmfast.names", "mmfast.sizes", "mmfast.rows"]


def test_preprocess_accepts_a_config_directory(tmp_path, capsys):
    config = dict(models.registry.BUILTINS[QWEN].preprocessor) | {"min_pixels": 28 * 28 * 16}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(config))
    paths = write_images(tmp_path)
    assert main(["preprocess", str(paths[0]), "--model", str(tmp_path)]) == 0
    row = table_rows(capsys.readouterr().out)[0]
    resized = models.smart_resize(30, 40, 28, 28 * 28 * 16, config["max_pixels"])
    assert resized != models.load_config(QWEN).plan(30, 40).resize_size
    assert row[2] == f"{resized[0]}x{resized[1]}"


def test_preprocess_out_takes_one_calls_dtype(tmp_path):
    """SmolVLM with rescale and normalise off: one call on prompts of unequal tile counts is
    float32 (transformers' float zero padding); a batch of one prompt is uint8, and --out
    was uint8 with --batch-size 1."""
    config = dict(models.registry.BUILTINS["HuggingFaceTB/SmolVLM-Instruct"].preprocessor)
    config |= {"do_rescale": False, "do_normalize": False}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(config))
    paths = write_images(tmp_path)
    proc = ImageProcessor.from_pretrained(tmp_path)
    want = cli.npz_arrays(proc([[p] for p in paths]))
    assert want["pixel_values"].dtype == np.float32
    out = tmp_path / "out.npz"
    argv = ["preprocess", *map(str, paths), "--model", str(tmp_path), "--out", str(out)]
    assert main([*argv, "--batch-size", "1"]) == 0
    with np.load(out) as got:
        for key, value in want.items():
            assert same_bits(got[key], value), key


def test_preprocess_counts_no_tokens_the_processor_cannot(tmp_path, capsys):
    """Fuyu without padding: its processor fails to count a window its patches do not tile,
    which the image processor computes; the table shows no count, where the run failed."""
    config = dict(models.registry.BUILTINS["adept/fuyu-8b"].preprocessor) | {"do_pad": False}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(config))
    path = tmp_path / "square.png"
    Image.fromarray(bench.synthetic_photo(512, 512, seed=1)).save(path)
    out = tmp_path / "out.npz"
    assert main(["preprocess", str(path), "--model", str(tmp_path), "--out", str(out)]) == 0
    assert table_rows(capsys.readouterr().out)[0][4] == "-"
    want = cli.npz_arrays(ImageProcessor.from_pretrained(tmp_path)([[path]]))
    with np.load(out) as got:
        assert same_bits(got["images"], want["images"])


def test_preprocess_takes_a_directory_and_skips_errors(tmp_path, capsys):
    paths = write_images(tmp_path)
    (tmp_path / "notes.txt").write_text("not an image, not an image extension")
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"not an image")
    assert main(["preprocess", str(tmp_path)]) == 2
    assert f"{bad}: not an image" in capsys.readouterr().err
    assert main(["preprocess", str(tmp_path), "--skip-errors", "--batch-size", "2"]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"skipped {bad}: not an image in a format Pillow reads ({bad})\n"
    assert [r[0] for r in table_rows(captured.out)] == sorted(str(p) for p in paths)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["preprocess", str(empty)]) == 2
    assert "expected image or video files in the directory, found none" in capsys.readouterr().err


def test_preprocess_leaves_out_what_is_not_a_regular_file(tmp_path):
    """A named pipe with an image's extension in a folder is not listed: reading it would
    wait for a writer forever."""
    paths = write_images(tmp_path)
    os.mkfifo(tmp_path / "pipe.png")
    (tmp_path / "folder.jpg").mkdir()
    assert cli.image_files([str(tmp_path)]) == sorted(map(str, paths))


def test_preprocess_keeps_images_when_every_video_fails(tmp_path, capsys):
    """With --skip-errors, images processed are written even when no video could be (and
    the other way round); the run fails only when nothing was processed."""
    image = write_images(tmp_path)[0]
    video = tmp_path / "broken.mp4"
    video.write_bytes(b"not a video")
    saved = tmp_path / "out.npz"
    args = ["preprocess", str(image), str(video), "--skip-errors", "--out", str(saved)]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert f"skipped {video}: " in captured.err
    assert [r[0] for r in table_rows(captured.out)] == [str(image)]
    assert list(cli.load_npz(saved)["mmfast.names"]) == [str(image)]
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not an image")
    assert main(["preprocess", str(broken), str(video), "--skip-errors"]) == 2
    assert "images and videos: none of them could be processed" in capsys.readouterr().err


def test_preprocess_recursive_and_missing_paths(tmp_path, capsys):
    """Subfolders are named and left out unless --recursive; a mistyped path stops the run
    even with --skip-errors; --batch-size must be positive."""
    (tmp_path / "top" / "inner").mkdir(parents=True)
    top = write_images(tmp_path / "top")
    inner = write_images(tmp_path / "top" / "inner")
    assert main(["preprocess", str(tmp_path / "top")]) == 0
    captured = capsys.readouterr()
    assert "left out 1 subfolder (inner); pass --recursive" in captured.err
    assert [r[0] for r in table_rows(captured.out)] == sorted(map(str, top))
    assert main(["preprocess", str(tmp_path / "top"), "--recursive"]) == 0
    rows = [r[0] for r in table_rows(capsys.readouterr().out)]
    assert rows == sorted(map(str, top)) + sorted(map(str, inner))
    # A linked subfolder is followed, each folder once however the links loop back.
    (tmp_path / "elsewhere").mkdir()
    elsewhere = write_images(tmp_path / "elsewhere")
    (tmp_path / "top" / "linked").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "top" / "twice").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere" / "loop").symlink_to(tmp_path / "top")
    assert main(["preprocess", str(tmp_path / "top"), "--recursive"]) == 0
    rows = [r[0] for r in table_rows(capsys.readouterr().out)]
    linked = [str(tmp_path / "top" / "linked" / p.name) for p in elsewhere]
    assert rows == sorted(map(str, top)) + sorted(map(str, inner)) + sorted(linked)
    missing = tmp_path / "typo.jpg"
    assert main(["preprocess", str(top[0]), str(missing), "--skip-errors"]) == 2
    assert capsys.readouterr().err == (
        f"mmfast preprocess: error: {missing}: No such file or directory\n"
    )
    with pytest.raises(SystemExit):
        main(["preprocess", "--batch-size", "0"])
    assert "--batch-size: expected a positive integer, got '0'" in capsys.readouterr().err


def test_skip_messages_get_their_own_line():
    """A skipped image's message does not land on the progress bar's line."""
    stream = io.StringIO()
    progress = cli.Progress(4, stream, enabled=True, width=8)
    progress.update(2, "processing")
    progress.message("skipped broken.jpg: not an image")
    erase = "\r" + " " * (8 + 35) + "\r"
    assert stream.getvalue() == (
        "\rprocessing [####....] 2/4" + erase + "skipped broken.jpg: not an image\n"
    )


def test_help_is_quick_to_import():
    """`mmfast --help` imports neither ml_dtypes (up to a second), transformers, nor the
    model families (a third of a second); --list-models does."""
    code = (
        "import sys, contextlib, io\n"
        "from mmfast import cli\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(['--help'])\n"
        "names = ('ml_dtypes', 'transformers', 'torch', 'mmfast.models.qwen2_vl')\n"
        "print(sorted(m for m in names if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_list_models_prints_the_builtins(capsys):
    with pytest.raises(SystemExit):
        main(["preprocess", "--list-models"])
    assert capsys.readouterr().out.split() == list(supported_models())


def test_preprocess_takes_video_files(tmp_path, capsys):
    """A video file goes through the model's video processor; its row says how many frames
    were sampled and the tokens they make; --out holds its outputs."""
    av = pytest.importorskip("av")
    path = tmp_path / "clip.mp4"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=10)
        stream.height, stream.width = 64, 96
        stream.pix_fmt = "yuv420p"
        for t in range(30):
            image = np.roll(bench.synthetic_photo(64, 96, seed=1), t, axis=1)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    saved = tmp_path / "out.npz"
    model = "Qwen/Qwen3-VL-8B-Instruct"
    assert main(["preprocess", str(path), "--model", model, "--out", str(saved)]) == 0
    rows = table_rows(capsys.readouterr().out)
    proc = ImageProcessor.from_pretrained(model)
    want = proc.videos(path)
    frames = proc.sampled_frames(mmfast.video.video_metadata(path))
    assert rows[0][:3] == [str(path), "64x96", f"{frames} frames"]
    assert rows[0][-2] == str(proc.num_video_tokens(frames, 64, 96))
    loaded = cli.load_npz(saved)
    assert np.array_equal(loaded["pixel_values_videos"], want["pixel_values_videos"])
    assert list(loaded["mmfast.videos"]) == [str(path)]
    assert main(["preprocess", str(path), "--model", "llava-hf/llava-1.5-7b-hf"]) == 2
    assert "no video processor" in capsys.readouterr().err


def write_clip(path: Path, frames: int, height: int, width: int, seed: int = 0) -> Path:
    """An H.264 clip of a synthetic photo moving one pixel a frame, at 10 fps."""
    av = pytest.importorskip("av")
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=10)
        stream.height, stream.width = height, width
        stream.pix_fmt = "yuv420p"
        for t in range(frames):
            image = np.roll(bench.synthetic_photo(height, width, seed=seed), t, axis=1)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


@pytest.mark.parametrize("model", ["allenai/Molmo2-4B", "Qwen/Qwen3-VL-8B-Instruct"])
def test_preprocess_videos_out_is_one_call(tmp_path: Path, model: str) -> None:
    """Video files go one at a time, and --out holds what one call on all of them gives:
    Molmo2's video_token_pooling indices offset by the frames of the clips before (they
    were each clip's own), Qwen3-VL's grids."""
    paths = [
        write_clip(tmp_path / "a.mp4", 20, 64, 96),
        write_clip(tmp_path / "b.mp4", 12, 96, 64, 1),
    ]
    out = tmp_path / "out.npz"
    assert main(["preprocess", *map(str, paths), "--model", model, "--out", str(out)]) == 0
    want = cli.npz_arrays(ImageProcessor.from_pretrained(model).videos(paths))
    with np.load(out) as got:
        assert got.files == [*want, "mmfast.videos"]
        for key, value in want.items():
            assert same_bits(got[key], value), key


def test_preprocess_reports_a_video_only_run(tmp_path: Path, capsys) -> None:
    """Video-LLaVA's image and video outputs have their own keys: a run of videos alone
    reports the videos' (it stopped on a StopIteration looking for the images')."""
    clip = write_clip(tmp_path / "a.mp4", 12, 64, 96)
    model = "LanguageBind/Video-LLaVA-7B-hf"
    assert main(["preprocess", str(clip), "--model", model]) == 0
    assert "pixel_values_videos float32" in capsys.readouterr().out


def test_preprocess_joins_only_for_out(tmp_path: Path, capsys) -> None:
    """Clips of unequal lengths (InternVL's arrays of one clip each) print their rows: only
    --out needs one array, and refuses them. The total counts videos and their frames, the
    header names the video class."""
    clips = [write_clip(tmp_path / "a.mp4", 12, 64, 96), write_clip(tmp_path / "b.mp4", 7, 64, 96)]
    argv = ["preprocess", *map(str, clips), "--model", "OpenGVLab/InternVL3-8B-hf"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert [row[0] for row in table_rows(out)] == list(map(str, clips))
    assert "bit-identical to transformers' InternVLVideoProcessor" in out
    assert re.search(r"total: 2 videos \(19 frames\), 0\.12 MP in ", out), out
    assert main([*argv, "--out", str(tmp_path / "out.npz")]) == 2
    assert "pass one video at a time" in capsys.readouterr().err


def test_preprocess_header_and_table_name_what_the_call_returns(capsys) -> None:
    """The header gives bfloat16 (not the uint16 bits --out stores), names Kimi-K2.5's
    references (the checkpoint's processor; transformers' class for torchvision), and the
    table names Fuyu's pixel output "images"; no --out imports no ml_dtypes (a second of
    the run's time)."""
    assert main(["preprocess", "--model", QWEN, "--dtype", "bfloat16"]) == 0
    assert "pixel_values bfloat16" in capsys.readouterr().out
    kimi = "moonshotai/Kimi-K2.5"
    assert main(["preprocess", "--model", kimi]) == 0
    assert "bit-identical to the checkpoint's processor" in capsys.readouterr().out
    assert main(["preprocess", "--model", kimi, "--backend", "torchvision"]) == 0
    assert "transformers' Kimi_K25ImageProcessor" in capsys.readouterr().out
    assert main(["preprocess", "--model", "adept/fuyu-8b"]) == 0
    assert table_rows(capsys.readouterr().out)[0][3].startswith("images (")
    code = (
        "import sys, io, contextlib; from mmfast import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()): cli.main(['preprocess'])\n"
        "print('ml_dtypes' in sys.modules)"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "False"


def test_preprocess_out_refuses_images_and_videos_of_one_name(tmp_path: Path, capsys) -> None:
    """InstructBLIP's video output is called pixel_values, like its images': --out cannot
    hold both (the clip's used to replace the images')."""
    clip = write_clip(tmp_path / "a.mp4", 12, 64, 96)
    image = write_images(tmp_path)[0]
    argv = ["preprocess", str(image), str(clip), "--model", "Salesforce/instructblip-vicuna-7b"]
    assert main([*argv, "--out", str(tmp_path / "out.npz")]) == 2
    assert "share the names ['pixel_values']" in capsys.readouterr().err
    assert not (tmp_path / "out.npz").exists()
    assert main(argv) == 0


def test_preprocess_video_strips_join(tmp_path: Path) -> None:
    """MiniCPM-V's video strips of two files join along the strip, as one call gives them;
    its list output (frames per video) is saved as an array."""
    av = pytest.importorskip("av")
    paths = []
    for n, frames in enumerate((12, 7)):
        path = tmp_path / f"clip{n}.mp4"
        with av.open(str(path), "w") as out:
            stream = out.add_stream("libx264", rate=5)
            stream.height, stream.width = 64, 96
            stream.pix_fmt = "yuv420p"
            for t in range(frames):
                image = np.roll(bench.synthetic_photo(64, 96, seed=n), t, axis=1)
                for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
        paths.append(path)
    saved = tmp_path / "out.npz"
    model = "openbmb/MiniCPM-V-4.6"
    assert main(["preprocess", *map(str, paths), "--model", model, "--out", str(saved)]) == 0
    proc = ImageProcessor.from_pretrained(model)
    want = [proc.videos(path) for path in paths]
    loaded = cli.load_npz(saved)
    strip = np.concatenate([w["pixel_values_videos"] for w in want], axis=-1)
    assert np.array_equal(loaded["pixel_values_videos"], strip)
    assert loaded["num_frames_per_video"].tolist() == [
        n for w in want for n in w["num_frames_per_video"]
    ]


def test_preprocess_table_keeps_to_the_terminal():
    row = cli.ImageRow(
        "/a/long/path/to/the/photos/IMG_20240101_123456.jpg",
        (3024, 4032),
        "1008x1344",
        {"pixel_values": (5184, 1176), "image_grid_thw": (3,)},
        1296,
        0.1,
    )
    wide, narrow = io.StringIO(), io.StringIO()
    cli.print_table([row], wide)
    cli.print_table([row], narrow, width=80)
    assert row.name in wide.getvalue() and "pixel_values (5184, 1176), image_grid_thw (3,)" in (
        wide.getvalue()
    )
    lines = narrow.getvalue().splitlines()
    assert max(map(len, lines)) == 80
    assert lines[1].startswith("...01_123456.jpg  3024x4032  1008x1344  pixel_values (5184, 1...")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["missing.jpg"], "missing.jpg: No such file or directory"),
        (["--model", "nope/nope"], "model 'nope/nope' is neither a built-in id"),
        (["--threads", "0"], "--threads: expected a positive integer, got '0'"),
        (["--threads", "two"], "--threads: expected a positive integer, got 'two'"),
        (["https://example.com/a.jpg"], "mmfast does not fetch URLs"),
    ],
)
def test_preprocess_errors_exit_2_with_one_line(capsys, argv, message):
    assert main(["preprocess", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("mmfast preprocess: error: ")
    assert message in captured.err
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err


def test_preprocess_unreadable_image_leaves_no_output(tmp_path, capsys):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image")
    out_file = tmp_path / "out.npz"
    assert main(["preprocess", str(bad), "--out", str(out_file)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mmfast preprocess: error: {bad}: not an image")
    assert not out_file.exists()


def test_preprocess_out_must_name_a_file(tmp_path, monkeypatch, capsys):
    """An empty --out failed after all the work on its temporary file, named in the parent
    folder; a new folder's path ("new/", "new/.") wrote a file named "new" and said it wrote
    the path given."""
    image = tmp_path / "image.png"
    Image.fromarray(noise(40, 50)).save(image)
    monkeypatch.chdir(tmp_path)
    for out in ("", "new/", "new/.", "image.png/."):
        assert main(["preprocess", str(image), "--out", out]) == 2
        err = capsys.readouterr().err
        assert (
            err
            == f"mmfast preprocess: error: --out: expected a file path (FILE.npz), got {out!r}\n"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["image.png"]


def test_preprocess_failing_leaves_an_existing_out_as_it_was(tmp_path, capsys):
    """A failed run once truncated and removed ``--out`` whatever it was: yesterday's results,
    the input image itself, or a device node such as /dev/null (as root)."""
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image")
    old = tmp_path / "old.npz"
    old.write_bytes(b"yesterday's results")
    link = tmp_path / "link.npz"
    link.symlink_to(old)
    for out in (old, bad, link):
        assert main(["preprocess", str(bad), "--out", str(out)]) == 2
    assert old.read_bytes() == b"yesterday's results" and bad.read_bytes() == b"not an image"
    assert link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == [
        "bad.jpg",
        "link.npz",
        "old.npz",
    ]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with open(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK), "rb") as reader:
        assert main(["preprocess", str(bad), "--out", str(fifo)]) == 2
        assert reader.read() in (b"", None)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    capsys.readouterr()
    image = tmp_path / "image.png"
    Image.new("RGB", (64, 48), (10, 20, 30)).save(image)
    assert main(["preprocess", str(image), "--out", str(link)]) == 0
    assert link.is_symlink() and "pixel_values" in np.load(old)
    assert main(["preprocess", str(image), "--out", os.devnull]) == 0
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    missing = tmp_path / "missing" / "out.npz"
    assert main(["preprocess", str(image), "--out", str(missing)]) == 2
    assert (
        capsys.readouterr().err
        == f"mmfast preprocess: error: {missing}: No such file or directory\n"
    )


def test_progress_bar_draws_and_clears():
    stream = io.StringIO()
    progress = cli.Progress(4, stream, enabled=True, width=8)
    progress.update(2, "processing")
    assert stream.getvalue() == "\rprocessing [####....] 2/4"
    progress.close()
    assert stream.getvalue().endswith("\r")
    quiet = io.StringIO()
    cli.Progress(4, quiet, enabled=False).update(1, "processing")
    assert quiet.getvalue() == ""


def test_progress_bar_only_on_a_terminal_with_many_images(tmp_path, capsys):
    paths = [str(write_images(tmp_path)[0])] * (cli.PROGRESS_MIN_IMAGES + 1)
    assert main(["preprocess", *paths]) == 0
    assert capsys.readouterr().err == ""  # capsys' stderr is not a terminal

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Tty()
    cli.preprocess(paths, stdout=io.StringIO(), stderr=err, batch_size=4)
    assert f"[{'#' * 26}....] 8/{len(paths)}" in err.getvalue()
    assert f"[{'#' * 30}] {len(paths)}/{len(paths)}" in err.getvalue()
    err = Tty()
    cli.preprocess(paths[:2], stdout=io.StringIO(), stderr=err)
    assert err.getvalue() == ""


# --------------------------------------------------------------------------------------------
# mmfast bench sections, on tiny sizes
# --------------------------------------------------------------------------------------------

HF = bench.Backends.detect()


def check_rows(rows, alternatives):
    assert rows
    for row in rows:
        assert isinstance(row, bench.Row)
        assert row.ours > 0
        assert sorted(row.others) == sorted(alternatives)
        assert all(t > 0 for t in row.others.values())


def test_bench_jpeg_argument_is_checked_and_named(tmp_path, capsys):
    """--jpeg names a file that must decode (a traceback for a non-image, "absent" for a
    folder), and the decode row is labelled by it."""
    bad = tmp_path / "notes.txt"
    bad.write_text("not an image")
    for path in (tmp_path, bad):
        assert main(["bench", "--only", "decode", "--jpeg", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("mmfast bench: error: --jpeg: expected an image file, got")
        assert len(err.splitlines()) == 1
    small = tmp_path / "small.png"
    Image.fromarray(bench.synthetic_photo(30, 40)).save(small)
    rows = bench.run(print_fn=lambda line: None, only=["decode"], jpeg=small)
    assert rows and all(row.case.endswith("(small.png)") for row in rows)


def test_bench_resize_rows():
    rows = list(bench.resize_rows(bench.QUICK_RESIZE_CASES, budget=0))
    check_rows(rows, ["Pillow"])
    assert rows[0].case == "bicubic to 17x23 (WxH)" and rows[0].size == (48, 64)


def test_bench_decode_rows():
    buffer = io.BytesIO()
    Image.fromarray(bench.synthetic_photo(30, 40)).save(buffer, "JPEG")
    rows = list(bench.decode_rows(buffer.getvalue(), "(tiny)", HF, budget=0))
    check_rows(rows, bench.decode_columns(HF))
    # The same bytes with EXIF orientation 6: the image turned a quarter.
    assert [(row.case, row.size) for row in rows] == [
        ("decode_image (tiny)", (30, 40)),
        ("decode_image (orientation 6)", (40, 30)),
    ]
    turned = bench.turned_jpeg(buffer.getvalue(), 6)
    assert Image.open(io.BytesIO(turned)).getexif()[0x0112] == 6
    np.testing.assert_array_equal(
        mmfast.decode_image(turned), np.rot90(mmfast.decode_image(buffer.getvalue()), -1)
    )
    with pytest.raises(ValueError, match="data: expected JPEG bytes"):
        bench.turned_jpeg(b"\x89PNG", 6)


def test_bench_pil_export_rows():
    rows = list(bench.pil_export_rows(((20, 30),), budget=0))
    check_rows(rows, ["np.asarray"])
    assert rows[0].case == "pil_to_rgb (in place)"


def test_bench_model_rows_cover_every_model():
    # --quick's smallest size, which every model takes.
    items = list(bench.model_rows(HF, bench.QUICK_SIZES[:1], budget=0))
    rows = [item for item in items if isinstance(item, bench.Row)]
    # Each model's PIL-side row and, with torch installed, its torchvision-side row ("tv");
    # a model transformers has no PIL class for then has only the "tv" row.
    covered = list(dict.fromkeys(r.case.removesuffix(" tv") for r in rows))
    assert covered == [bench.short_name(m) for m in bench.MODELS]
    assert set(bench.MODELS) <= set(supported_models())
    families = {
        models.config.select_family(models.config.read_source(m))[0].name for m in bench.MODELS
    }
    # transformers' Kimi-K2.5 class has no built-in of its own: the Kimi-K2.5 "tv" row runs it;
    # Inkling 2 has no public checkpoint to make one of.
    assert families == set(models.registry.FAMILIES) - {"kimi_k25_transformers", "inkling2"}
    sides: dict[str, dict[bool, bench.Row]] = {}
    for row in rows:
        sides.setdefault(row.case.removesuffix(" tv"), {})[row.case.endswith(" tv")] = row
    for model_id in bench.MODELS:
        family, _ = models.config.select_family(models.config.read_source(model_id))
        hf_pil = family.hf_pil and HF.transformers
        hf_tv = family.hf_torchvision and HF.torch
        want = {False: ["HF PIL"] if hf_pil else []} if hf_pil or not hf_tv else {}
        if hf_tv:
            want[True] = ["HF torchvision"]
        got = sides[bench.short_name(model_id)]
        assert sorted(got) == sorted(want), model_id
        for tv, alternatives in want.items():
            check_rows([got[tv]], alternatives)
    if HF.transformers:
        assert "  Llama-4-Scout: transformers has no PIL class for it" in items


def test_bench_jpeg_rows(tmp_path):
    path = tmp_path / "small.jpg"
    Image.fromarray(bench.synthetic_photo(30, 40)).save(path, "JPEG")
    rows = list(bench.jpeg_rows(path, HF, budget=0))
    check_rows(rows, ["load_image+HF PIL"] if HF.transformers else [])


def test_bench_batch_rows_report_thread_scaling():
    items = list(bench.batch_rows(HF, [(24, 32), (40, 30), (50, 60)], budget=0))
    rows = [item for item in items if isinstance(item, bench.Row)]
    assert [r.case for r in rows] == [
        f"Qwen2-VL-7B x3 {kind}, {n} thr" for kind in ("PIL", "array", "JPEG bytes") for n in (1, 2)
    ]
    check_rows(rows[:4], ["HF PIL"] if HF.transformers else [])
    check_rows(rows[4:], ["load_image+HF PIL"] if HF.transformers else [])
    assert re.search(
        r"thread scaling t1/t2: PIL [0-9.]+x, array [0-9.]+x, JPEG bytes [0-9.]+x", items[-1]
    )


def test_bench_floor_fixed_and_scaling_rows():
    rows = [i for i in bench.model_rows(HF, ((36, 48),), ["llava-hf/llava-1.5-7b-hf"], 0)]
    rows = [r for r in rows if isinstance(r, bench.Row)]
    assert rows and all(sorted(r.relative) == ["array", "floor"] for r in rows)
    assert all(t > 0 for r in rows for t in r.relative.values())
    line = rows[0].format(bench.MODEL_COLUMNS, bench.RELATIVE_COLUMNS)
    assert re.search(r"[0-9.]+x\s+[0-9.]+\s+[0-9.]+x$", line), line
    fixed = [r for r in bench.fixed_rows(budget=0) if isinstance(r, bench.Row)]
    assert [r.size for r in fixed] == [size for _, size, _ in bench.FIXED_CELLS]
    items = list(bench.scaling_rows([(24, 32), (30, 40), (60, 80)], rounds=3))
    assert [r.case for r in items[:2]] == [f"Qwen2-VL-7B x3 PIL+bytes, {n} thr" for n in (1, 2)]
    assert re.search(r"t1/t2 over 3 interleaved rounds: median [0-9.]+x, quartiles", items[-1])
    pooled = list(bench.scaling_rows([(24, 32)], rounds=1, pool_mb=64))
    assert pooled[0].case == "Qwen2-VL-7B x1 PIL+bytes, pool 64 MB, 1 thr"
    # Qwen2-VL: a 448x448 image is 32x32 patches of 1176 float32 values.
    proc = bench.ImageProcessor.from_pretrained(bench.BATCH_MODEL)
    assert bench.output_mb(proc, [(448, 448), (448, 448)]) == 2 * 1024 * 1176 * 4e-6
    line = bench.memory_line([(448, 448)], total_mb=16, rounds=1)
    assert re.fullmatch(
        r"  memory: np.copyto over 16 MB, [0-9.]+ GB/s on 1 thread, [0-9.]+ GB/s on 2 "
        r"\([0-9.]+x\); the batch writes 5 MB of float32 out",
        line,
    ), line


@pytest.mark.parametrize(
    "model_id", ["HuggingFaceM4/idefics2-8b", "meta-llama/Llama-4-Scout-17B-16E-Instruct"]
)
def test_bench_floor_writes_every_output(model_id):
    # Idefics2's int64 mask is as large again as its pixels; Llama 4's float32 pixels are
    # twice its bfloat16 tables: the floor writes what the processor returns.
    proc = ImageProcessor.from_pretrained(model_id)
    written = bench.floor_fn(proc, (600, 800))()
    out = proc(bench.synthetic_photo(600, 800), threads=1)
    expected = [(a.shape, a.dtype) for a in out.values() if isinstance(a, np.ndarray)]
    assert [(a.shape, a.dtype) for a in written] == expected
    assert len(expected) == 2 and expected[0][1] == np.float32


def test_bench_floor_does_what_the_call_does():
    """The floor writes into arrays allocated once (the call writes into the buffers its pool
    hands back) and resizes only the part a centre crop keeps (LLaVA-1.5 at 1920x1080: a
    336x336 crop of its 336x597 resize, from the 1080x1081 pixels that map to it)."""
    proc = ImageProcessor.from_pretrained("llava-hf/llava-1.5-7b-hf")
    floor = bench.floor_fn(proc, (1080, 1920))
    first, second = floor(), floor()
    assert all(a is b for a, b in zip(first, second, strict=True))
    view = proc.plan(1080, 1920).views[0]
    assert view.resize is not None and view.resize.size == (336, 597)
    assert bench._window_part((1080, 1920), (336, 597), view) == ((1080, 1081), (336, 336))


def test_batch_sizes_span_the_range():
    sizes = bench.batch_sizes()
    assert len(sizes) == 16 and sizes[0] == (240, 320) and sizes[-1] == (3024, 4032)
    assert all(min(s) >= 240 and max(s) <= 4032 for s in sizes)
    assert sizes == bench.batch_sizes()


def test_bench_quick_only(capsys):
    assert main(["bench", "--quick", "--only", "resize", "--only", "pil"]) == 0
    out = capsys.readouterr().out
    assert "## resize" in out and "## pil" in out and "## kernels" not in out
    assert "transformers" in out.splitlines()[1]


def test_bench_modes_section_times_each_mode_on_both_backends(capsys):
    assert main(["bench", "--quick", "--only", "modes"]) == 0
    out = capsys.readouterr().out
    modes = {
        "RGBA opaque",
        "RGBA 1/3 translucent",
        "L",
        "LA 1/3 translucent",
        "P",
        "P transparent index",
        "CMYK",
    }
    labels = [line.split("  ")[0].strip() for line in out.splitlines()]
    rows = [label for label in labels if label.removesuffix(" tv") in modes]
    assert "mmfast/RGB" in out and len(rows) == 2 * 2 * len(modes), out
    assert set(rows) == modes | {f"{mode} tv" for mode in modes}


def test_bench_video_section_runs_in_quick_mode(tmp_path, monkeypatch, capsys):
    """``mmfast bench --quick --only video``: the clip made with PyAV (in the temp directory),
    both readers and the end-to-end row, each pair's outputs equal; a note without PyAV."""
    import importlib.util
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert main(["bench", "--quick", "--only", "video"]) == 0
    out = capsys.readouterr().out
    assert "## video" in out and "## kernels" not in out
    if importlib.util.find_spec("av") is None:
        assert "skipped: PyAV is not installed" in out
        return
    assert "h264-2s-64x48-10fps-g20.mp4 (20 frames)" in out
    items = list(bench.video_rows(HF, bench.QUICK_VIDEO_CLIP, budget=0))
    rows = [item for item in items if isinstance(item, bench.Row)]
    assert [row.case for row in rows] == [
        "load_video 16 frames",
        "load_video fps=2",
        "Qwen2.5-VL-7B file to pixels",
    ]
    check_rows(rows[:2], ["transformers"] if HF.transformers else [])
    check_rows(rows[2:], ["transformers"] if HF.torch else [])
    notes = [item for item in items if isinstance(item, str) and "identical" in item]
    assert len(notes) == (2 if HF.transformers else 0) + (1 if HF.torch else 0)
    assert all(note.endswith("identical to transformers': True") for note in notes)


def test_bench_missing_jpeg_is_skipped_with_a_note(tmp_path, capsys):
    missing = tmp_path / "absent.jpg"
    rows = bench.run(only=["decode", "jpeg"], jpeg=missing)
    assert rows == []
    out = capsys.readouterr().out
    assert out.count(f"skipped: {missing} is absent") == 2
