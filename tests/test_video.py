"""``mmfast.load_video`` against transformers' PyAV reader, bit for bit, on clips made here.

Every clip is encoded by the test with PyAV (libx264, mpeg4 and VP9; short and long groups of
pictures; with and without B-frames; odd sizes), nothing is downloaded. The reference is
``transformers.video_utils.load_video(path, backend="pyav", ...)``: the same frames (uint8,
every bit), the same metadata, for every sampling.
"""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import PEAK_RSS, noise, peak_rss_readable, smooth

import mmfast
from mmfast import ImageTooLargeError, MmfastError, VideoDecodeError, processors, video

av = pytest.importorskip("av")
hf_video = pytest.importorskip("transformers.video_utils")


@dataclass(frozen=True)
class Clip:
    """An encoding: codec, frames, (height, width), rate, group of pictures, B-frames."""

    codec: str
    frames: int
    size: tuple[int, int]
    rate: int = 25
    gop: int = 12
    bframes: int = 0
    container: str = "mp4"

    @property
    def id(self) -> str:
        h, w = self.size
        return f"{self.codec}-{self.frames}f-{w}x{h}-g{self.gop}-b{self.bframes}.{self.container}"


def frame(t: int, size: tuple[int, int]) -> np.ndarray:
    """Moving waves with noise: every frame differs, and motion makes P- and B-frames work."""
    h, w = size
    image = np.roll(smooth(h, w, seed=1), 3 * t, axis=1)
    image[::5, ::3] = noise(h, w, seed=t)[::5, ::3]
    return image


def encode(
    clip: Clip,
    path: Path,
    pts: Callable[[int], int] | None = None,
    options: dict[str, str] | None = None,
) -> Path:
    """``clip`` written to ``path``; ``pts(t)`` gives frame t's timestamp in 1/rate units
    (a variable frame rate when they are uneven); ``options`` are the muxer's."""
    with av.open(str(path), "w", options=options or {}) as out:
        stream = out.add_stream(clip.codec, rate=clip.rate)
        stream.height, stream.width = clip.size
        stream.pix_fmt = "yuv420p"
        stream.codec_context.gop_size = clip.gop
        stream.codec_context.max_b_frames = clip.bframes
        if clip.codec == "libx264":
            stream.codec_context.options = {"sc_threshold": "0"}  # keyframes only every gop
        for t in range(clip.frames):
            picture = av.VideoFrame.from_ndarray(frame(t, clip.size), format="rgb24")
            if pts is not None:
                picture.pts = pts(t)
                picture.time_base = Fraction(1, clip.rate)
            for packet in stream.encode(picture):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


CLIPS = [
    Clip("libx264", 60, (64, 96), gop=12, bframes=0),
    Clip("libx264", 90, (120, 160), gop=10, bframes=3),
    Clip("libx264", 75, (72, 128), gop=250, bframes=2),
    Clip("mpeg4", 50, (66, 90), gop=8, bframes=2),
    Clip("libvpx-vp9", 40, (64, 80), gop=9),
    Clip("libx264", 33, (58, 74), rate=30, gop=5, bframes=1),
    # AVI's demuxer seeks by decode time, which B-frames put before the presentation time
    # (a seek to the latter landed after the keyframe, and frames went missing).
    Clip("mpeg4", 60, (64, 96), gop=3, bframes=2, container="avi"),
    Clip("mpeg4", 60, (64, 96), gop=250, bframes=1, container="avi"),
    Clip("libx264", 45, (64, 96), gop=9, bframes=3, container="avi"),
]


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("clips")
    return {clip.id: encode(clip, folder / clip.id) for clip in CLIPS}


def reference(path: Path, **kwargs: Any) -> tuple[np.ndarray, Any] | tuple[type, str]:
    try:
        return hf_video.load_video(str(path), backend="pyav", **kwargs)
    except Exception as exc:
        return type(exc), str(exc)


def assert_same(got: tuple[np.ndarray, video.VideoMetadata], want: tuple[np.ndarray, Any]) -> None:
    frames, metadata = got
    want_frames, want_metadata = want
    assert frames.dtype == np.uint8 and frames.shape == want_frames.shape
    assert np.array_equal(frames, want_frames)
    for name in ("total_num_frames", "fps", "width", "height", "duration", "video_backend"):
        assert getattr(metadata, name) == getattr(want_metadata, name), name
    assert metadata.frames_indices == [int(i) for i in want_metadata.frames_indices]


SAMPLINGS = [
    {},
    {"num_frames": 1},
    {"num_frames": 4},
    {"num_frames": 16},
    {"fps": 1},
    {"fps": 2.5},
    {"num_frames": 10**6},  # more than the clip: both refuse
]


@pytest.mark.parametrize("sampling", SAMPLINGS, ids=lambda s: repr(s))
@pytest.mark.parametrize("clip", CLIPS, ids=lambda c: c.id)
def test_frames_equal_transformers(
    clips: dict[str, Path], clip: Clip, sampling: dict[str, Any]
) -> None:
    path = clips[clip.id]
    want = reference(path, **sampling)
    if isinstance(want[0], type):
        with pytest.raises(MmfastError):
            mmfast.load_video(path, **sampling)
        return
    assert_same(mmfast.load_video(path, **sampling), want)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "indices",
    [[5, 5, 3, 20], [0, 7, 7, 7, 30], [29], [3, 40, 12]],
    ids=lambda i: "-".join(map(str, i)),
)
def test_custom_samplers_read_as_transformers_reads_them(
    clips: dict[str, Path], indices: list[int]
) -> None:
    """Repeats come back once; an unsorted list stops at its last index (the reference reads
    ``indices[-1]`` as the end); the metadata keeps the list as given."""
    path = clips[CLIPS[1].id]

    def sampler(metadata: Any, **kwargs: Any) -> list[int]:
        return indices

    want = hf_video.load_video(str(path), backend="pyav", sample_indices_fn=sampler)
    assert_same(mmfast.load_video(path, sample_indices_fn=sampler), want)


def awkward_file(kind: str, folder: Path) -> Path:
    """A file whose packets alone mislead a seek: AV1 (libdav1d reads its frame skipping once,
    when it opens), an MP4 cut with an edit list (its first packets are discarded, so the
    decoder outputs fewer frames than there are packets), and MPEG-4 in MP4 without a keyframe
    table (every packet then reads as a keyframe)."""
    path = folder / f"{kind}.mp4"
    if kind == "av1":
        if "libsvtav1" not in av.codecs_available:
            pytest.skip("PyAV's FFmpeg has no AV1 encoder (libsvtav1)")
        return encode(Clip("libsvtav1", 30, (64, 64), gop=8), path)
    if kind == "edit-list":
        return encode(Clip("libx264", 30, (48, 64), gop=10, bframes=2), path, pts=lambda t: t - 3)
    if kind == "open-gop-cut":
        return open_gop_cut(folder, path)
    encode(Clip("mpeg4", 30, (48, 64), gop=8), path)
    data = bytearray(path.read_bytes())
    at = data.index(b"stss")
    data[at : at + 4] = b"free"  # the keyframe table becomes padding
    path.write_bytes(bytes(data))
    return path


def open_gop_cut(folder: Path, path: Path) -> Path:
    """An H.264 stream with open groups of pictures, copied from its second keyframe with its
    timestamps shifted to start at 0 (as a stream-copy segmenter cuts): the B-frames decoded
    after that keyframe and shown before it refer to pictures the file lacks, and the decoder
    drops them."""
    whole = folder / "open-gop.mp4"
    with av.open(str(whole), "w") as out:
        stream = out.add_stream("libx264", rate=25)
        stream.height, stream.width = 48, 64
        stream.pix_fmt = "yuv420p"
        stream.codec_context.max_b_frames = 3
        stream.codec_context.options = {
            "x264-params": "open-gop=1:keyint=16:min-keyint=16:scenecut=0"
        }
        for t in range(60):
            picture = av.VideoFrame.from_ndarray(frame(t, (48, 64)), format="rgb24")
            for packet in stream.encode(picture):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    with av.open(str(whole)) as source, av.open(str(path), "w") as out:
        packets = [p for p in source.demux(source.streams.video[0]) if p.size]
        start = [i for i, p in enumerate(packets) if p.is_keyframe][1]
        offset = min(p.pts for p in packets[start:])
        copy = out.add_stream_from_template(source.streams.video[0])
        for packet in packets[start:]:
            packet.pts -= offset
            packet.dts -= offset
            packet.stream = copy
            out.mux(packet)
    return path


@pytest.mark.parametrize("kind", ["av1", "edit-list", "no-keyframe-table", "open-gop-cut"])
def test_frames_a_seek_would_misplace_equal_transformers(tmp_path: Path, kind: str) -> None:
    """Samplers that skip the first frames (as InternVL's does) got other frames than the
    reference: AV1 came back as later frames or none, the cut files shifted by their
    discarded or dropped frames, and MPEG-4 without its keyframe table predicted from a blank
    picture."""
    path = awkward_file(kind, tmp_path)
    for indices in ([3, 6, 12], [25], [1, 10, 11, 13, 15, 25]):

        def sampler(metadata: Any, **kwargs: Any) -> list[int]:
            return indices  # noqa: B023 (called before the loop moves on)

        want = hf_video.load_video(str(path), backend="pyav", sample_indices_fn=sampler)
        assert_same(mmfast.load_video(path, sample_indices_fn=sampler), want)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_sources_and_threads_agree(clips: dict[str, Path], threads: int) -> None:
    """A path, its bytes and an open file give the same frames on any number of threads."""
    path = clips[CLIPS[2].id]
    want = reference(path, num_frames=6)
    assert_same(mmfast.load_video(str(path), num_frames=6, threads=threads), want)  # type: ignore[arg-type]
    data = path.read_bytes()
    assert_same(mmfast.load_video(data, num_frames=6, threads=threads), want)  # type: ignore[arg-type]
    with path.open("rb") as file:
        assert_same(mmfast.load_video(file, num_frames=6, threads=threads), want)  # type: ignore[arg-type]
    assert_same(mmfast.load_video(io.BytesIO(data), num_frames=6), want)  # type: ignore[arg-type]


def test_decoder_threads_are_bounded(
    clips: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """FFmpeg starts the decoder's threads for each clip, outside the worker pool: a call
    asking for 4096 gets at most the cores and 16 (it started 4096)."""
    asked: list[int] = []
    real_read = video._Reader.read

    def read(self: Any, wanted: list[int], threads: int) -> np.ndarray:
        asked.append(threads)
        return real_read(self, wanted, threads)

    monkeypatch.setattr(video._Reader, "read", read)
    for threads in (1, 2, 4096):
        mmfast.load_video(clips[CLIPS[1].id], num_frames=4, threads=threads)
    assert asked == [1, min(2, processors.cores()), min(processors.cores(), 16)]


def test_decoded_frames_are_held_once(tmp_path: Path) -> None:
    """Each decoded frame is written into the returned array as it comes: the decode's peak
    memory grows by about the frames' size (kept apart and stacked, it grew by twice)."""
    peak_rss_readable()
    path = tmp_path / "clip.mp4"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=25, options={"preset": "ultrafast"})
        stream.height, stream.width = 720, 1280
        stream.pix_fmt = "yuv420p"
        picture = av.VideoFrame.from_ndarray(smooth(720, 1280, seed=1), format="rgb24")
        for _ in range(80):  # 221 MB of RGB frames
            for packet in stream.encode(picture):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    script = PEAK_RSS + (
        "import sys, mmfast\n"
        "mmfast.load_video(sys.argv[1], num_frames=1, threads=1)\n"
        "before = peak_rss()\n"
        "frames, _ = mmfast.load_video(sys.argv[1], threads=1)\n"
        "print(peak_rss() - before, frames.nbytes)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    )
    grown, nbytes = map(int, run.stdout.split())
    assert nbytes == 80 * 720 * 1280 * 3
    assert grown < 1.4 * nbytes, (grown, nbytes)


def test_variable_frame_rate_follows_transformers(tmp_path: Path) -> None:
    """Uneven timestamps: the header's average rate and frame count, frames by position."""
    clip = Clip("libx264", 40, (64, 64), gop=8, bframes=2)
    path = encode(clip, tmp_path / "vfr.mp4", pts=lambda t: t * 2 + (t % 3 == 0) + t // 7)
    for sampling in ({"num_frames": 9}, {"fps": 3}, {}):
        want = reference(path, **sampling)
        assert_same(mmfast.load_video(path, **sampling), want)  # type: ignore[arg-type]


def test_rotation_metadata_is_ignored_as_transformers_ignores_it(tmp_path: Path) -> None:
    """A display matrix (phone videos) turns nothing: frames come in coded orientation."""
    path = tmp_path / "rotated.mp4"
    clip = Clip("libx264", 20, (48, 80), gop=5)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=25)
        stream.height, stream.width = clip.size
        stream.pix_fmt = "yuv420p"
        stream.metadata["rotate"] = "90"
        for t in range(clip.frames):
            picture = av.VideoFrame.from_ndarray(frame(t, clip.size), format="rgb24")
            for packet in stream.encode(picture):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    frames, metadata = mmfast.load_video(path, num_frames=5)
    assert frames.shape == (5, 48, 80, 3) and (metadata.height, metadata.width) == (48, 80)
    assert_same((frames, metadata), reference(path, num_frames=5))  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Bad input: a clear error naming the file, never a crash or a hang


def audio_only(path: Path) -> Path:
    with av.open(str(path), "w") as out:
        stream = out.add_stream("aac", rate=16000)
        samples = np.zeros((1, 1024), np.float32)
        for _ in range(10):
            audio = av.AudioFrame.from_ndarray(samples, format="fltp", layout="mono")
            audio.sample_rate = 16000
            for packet in stream.encode(audio):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def test_cut_files_never_lose_sampled_frames(tmp_path: Path) -> None:
    """A file cut short whose header (at the front) still counts every frame: the frames
    the reference returns, or where it fails, a failure or every sampled frame (equal to the
    whole file's), never the frames before the cut as if the clip were shorter. (The
    reference also fails where its decoder reads past the cut after its last sampled frame,
    which depends on the encoder's output, nondeterministic with threads.)"""
    clip = Clip("libx264", 60, (120, 160), gop=10, bframes=2)
    whole = encode(clip, tmp_path / "whole.mp4", options={"movflags": "faststart"})
    path = tmp_path / "cut.mp4"
    data = whole.read_bytes()
    path.write_bytes(data[: len(data) * 3 // 5])
    for sampling in SAMPLINGS:
        want = reference(path, **sampling)
        try:
            frames, metadata = mmfast.load_video(path, **sampling)
        except MmfastError:
            assert isinstance(want[0], type), sampling
            continue
        if not isinstance(want[0], type):
            assert_same((frames, metadata), want)  # type: ignore[arg-type]
            continue

        def same(indices: list[int] = metadata.frames_indices, **_: Any) -> list[int]:
            return indices

        whole_frames, _ = mmfast.load_video(whole, sample_indices_fn=same)
        assert np.array_equal(frames, whole_frames), sampling


def test_bad_files_raise_naming_the_file(clips: dict[str, Path], tmp_path: Path) -> None:
    good = clips[CLIPS[0].id]
    data = good.read_bytes()
    cases: list[tuple[Any, type[Exception], str]] = []
    truncated = tmp_path / "truncated.mp4"
    truncated.write_bytes(data[: len(data) // 3])
    cases.append((truncated, VideoDecodeError, "truncated.mp4"))
    header_only = tmp_path / "header.mp4"
    header_only.write_bytes(data[:200])
    cases.append((header_only, VideoDecodeError, "header.mp4"))
    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(np.random.default_rng(0).bytes(5000))
    cases.append((garbage, VideoDecodeError, "garbage.mp4"))
    cases.append(
        (audio_only(tmp_path / "audio.mp4"), VideoDecodeError, "no video stream|found none")
    )
    mkv = tmp_path / "clip.mkv"
    mkv_clip = Clip("libx264", 10, (32, 32), container="mkv")
    cases.append((encode(mkv_clip, mkv), VideoDecodeError, "clip.mkv.*counts its frames"))
    cases.append((b"", VideoDecodeError, "empty bytes"))
    cases.append((b"\x00" * 64, VideoDecodeError, "64 bytes"))
    for source, error, match in cases:
        with pytest.raises(error, match=match):
            mmfast.load_video(source, num_frames=2)
    with pytest.raises(FileNotFoundError):
        mmfast.load_video(tmp_path / "missing.mp4")
    with pytest.raises(MmfastError, match="does not fetch URLs"):
        mmfast.load_video("https://example.com/a.mp4")


def test_a_deadline_leaves_a_video_call_as_it_is(
    clips: dict[str, Path], deadline_at_stat: Callable[[Path], None]
) -> None:
    """A deadline's TimeoutError (raised by its signal handler) while a clip opens is the
    call's, as it is for images: it came out as VideoDecodeError, or from a path's check as
    FileNotFoundError for a file that exists."""
    path = clips[CLIPS[0].id]

    class Late(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            raise TimeoutError("the request's deadline")

    proc = mmfast.ImageProcessor.from_pretrained("Qwen/Qwen2.5-VL-7B-Instruct")
    for call in (lambda: mmfast.load_video(Late(), num_frames=2), lambda: proc.videos(Late())):
        with pytest.raises(TimeoutError, match="deadline") as raised:
            call()
        assert not isinstance(raised.value, MmfastError)
    deadline_at_stat(path)
    with pytest.raises(TimeoutError, match="deadline"):
        mmfast.load_video(path, num_frames=2)


def test_oversized_frames_are_refused_before_decoding(clips: dict[str, Path]) -> None:
    with pytest.raises(ImageTooLargeError, match=r"max_pixels=1000.*96x64"):
        mmfast.load_video(clips[CLIPS[0].id], max_pixels=1000)


def test_frames_growing_past_the_header_are_refused(tmp_path: Path) -> None:
    """An MJPEG AVI whose header and first frames are 32x32 and whose later frames are
    400x400: each decoded frame's size is checked, not only the header's."""
    path = tmp_path / "growing.avi"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mjpeg", rate=25)
        stream.width = stream.height = 32
        stream.pix_fmt = "yuvj420p"
        large = av.CodecContext.create("mjpeg", "w")
        large.width = large.height = 400
        large.pix_fmt = "yuvj420p"
        large.time_base = Fraction(1, 25)
        for t in range(6):
            side, codec = (32, stream) if t < 2 else (400, large)
            picture = av.VideoFrame.from_ndarray(smooth(side, side, seed=t), format="rgb24")
            picture = picture.reformat(format="yuvj420p")
            picture.pts = t
            for packet in codec.encode(picture):
                packet.stream = stream
                packet.pts = packet.dts = t
                out.mux(packet)
    assert video.video_metadata(path).width == 32
    for indices in ([4], [0, 5]):
        with pytest.raises(ImageTooLargeError, match=r"max_pixels=10000.*400x400"):
            mmfast.load_video(
                path, sample_indices_fn=lambda metadata, i=indices: i, max_pixels=10_000
            )
    frames, _ = mmfast.load_video(path, sample_indices_fn=lambda metadata: [0, 1])
    assert frames.shape == (2, 32, 32, 3)


def test_a_forged_frame_count_is_refused_before_its_indices_are_made(
    clips: dict[str, Path], tmp_path: Path
) -> None:
    """An MP4 whose time-to-sample table claims 10**8 frames: reading it whole, or sampling
    more than 65536 frames, is refused at once (the indices alone would take 800 MB)."""
    data = bytearray(clips[CLIPS[0].id].read_bytes())
    at = data.index(b"stts")
    data[at + 12 : at + 16] = (10**8).to_bytes(4, "big")
    path = tmp_path / "forged.mp4"
    path.write_bytes(bytes(data))
    assert video.video_metadata(path).total_num_frames == 10**8
    for kwargs in ({}, {"fps": 1}):
        with pytest.raises(
            MmfastError, match=r"at most 65536 frames .* got [0-9]+ \(of the 100000000"
        ):
            mmfast.load_video(path, **kwargs)
    proc = mmfast.ImageProcessor.from_pretrained("Qwen/Qwen2-VL-7B-Instruct")
    with pytest.raises(MmfastError, match="at most 65536 frames"):
        proc.videos(path)
    frames, _ = mmfast.load_video(path, sample_indices_fn=lambda metadata: [0, 1, 2, 3])
    assert frames.shape[0] == 4


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_frames": 2, "fps": 1}, "num_frames, fps: expected one of them"),
        ({"num_frames": 0}, "num_frames: expected a positive integer"),
        ({"fps": float("nan")}, "fps: expected a finite number > 0"),
        ({"fps": -1}, "fps: expected a finite number > 0"),
        ({"threads": 0}, "threads: expected an integer"),
        ({"sample_indices_fn": lambda metadata: []}, "expected the sampler to return"),
        ({"sample_indices_fn": lambda metadata: [0.5]}, "expected the sampler to return"),
        ({"sample_indices_fn": lambda metadata: [-5]}, "indices to select a frame"),
        ({"sample_indices_fn": lambda metadata: [3, -1]}, "indices to select a frame"),
        ({"sample_indices_fn": lambda metadata: np.array([1000, -5])}, "indices to select"),
    ],
)
def test_bad_arguments_name_them(
    clips: dict[str, Path], kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(MmfastError, match=match):
        mmfast.load_video(clips[CLIPS[0].id], **kwargs)


def test_decoding_releases_the_gil(tmp_path: Path) -> None:
    """A ticker thread keeps ticking while a clip decodes (each tick needs the GIL back)."""
    path = encode(Clip("libx264", 240, (240, 320), gop=48, bframes=2), tmp_path / "long.mp4")
    ticks = 0
    stop = threading.Event()

    def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0)

    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        start = time.perf_counter()
        mmfast.load_video(path, num_frames=8, threads=1)
        elapsed = time.perf_counter() - start
    finally:
        stop.set()
        thread.join()
    assert ticks >= 20, (ticks, elapsed)


@pytest.mark.parametrize(
    ("model_id", "options"),
    [
        ("Qwen/Qwen2-VL-7B-Instruct", {"do_sample_frames": True, "fps": 2}),
        ("Qwen/Qwen2-VL-7B-Instruct", {}),
        ("Qwen/Qwen3-VL-8B-Instruct", {}),
        # Its config sets fps: num_frames needs fps=None, as in transformers.
        ("Qwen/Qwen3-VL-8B-Instruct", {"num_frames": 6, "fps": None}),
        ("OpenGVLab/InternVL3-8B-hf", {"do_sample_frames": True, "num_frames": 5}),
        ("llava-hf/LLaVA-NeXT-Video-7B-hf", {"do_sample_frames": True, "fps": 1}),
        ("google/gemma-4-31B-it", {"num_frames": 8}),
        ("HuggingFaceTB/SmolVLM2-2.2B-Instruct", {"do_sample_frames": True}),
        ("openbmb/MiniCPM-V-4.6", {}),
        ("allenai/Molmo2-8B", {}),
        # Its config sets num_frames: fps needs num_frames=None, as in transformers.
        ("allenai/Molmo2-8B", {"fps": 1, "num_frames": None}),
    ],
)
def test_processors_take_video_files(
    clips: dict[str, Path], model_id: str, options: dict[str, Any]
) -> None:
    """proc.videos(path) decodes only the frames the processor samples, from the file's own
    metadata: the same outputs as the frames transformers' reader returns for that sampling,
    given to the processor with that metadata."""
    path = clips[CLIPS[1].id]
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    config = proc.video_config
    assert config is not None
    sample = options.get("do_sample_frames", config.do_sample_frames)

    def sampler(metadata: Any, **kwargs: Any) -> list[int]:
        if not sample:
            return list(range(metadata.total_num_frames))
        fps, num_frames = (options.get(k, processors.CONFIG) for k in ("fps", "num_frames"))
        return config.sample(metadata, *processors.sampling_arguments(config, fps, num_frames))

    frames, _ = hf_video.load_video(str(path), backend="pyav", sample_indices_fn=sampler)
    want = proc.videos(frames, do_sample_frames=False)
    for source in (path, path.read_bytes()):
        got = proc.videos(source, **options)
        for key in want:
            assert np.array_equal(got[key], want[key]), key


@pytest.mark.parametrize(
    ("model_id", "num_frames"),
    [
        ("zai-org/GLM-4.1V-9B-Thinking", None),
        ("zai-org/GLM-4.6V", None),
        ("Qwen/Qwen3-VL-8B-Instruct", 120),
    ],
)
def test_video_files_keep_sampled_repeats(
    clips: dict[str, Path], model_id: str, num_frames: int | None
) -> None:
    """GLM's samplers repeat the last index to an even count, Qwen3-VL's ``linspace`` repeats
    indices over a clip shorter than ``num_frames``: proc.videos(path) gives what the
    processor gives for the whole decoded clip as an array (``video[indices]``, repeats
    included, as transformers' torchcodec reader gives them), though the reader decodes
    each frame once."""
    path = clips[CLIPS[1].id]
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    config = proc.video_config
    assert config is not None
    frames, _ = hf_video.load_video(str(path), backend="pyav")
    indices = config.sample(video.video_metadata(path), None, num_frames)
    assert len(indices) > len(set(indices))
    want = proc.videos(frames[indices], do_sample_frames=False)
    settings = {} if num_frames is None else {"num_frames": num_frames, "fps": None}
    got = proc.videos(path, **settings)
    for key in want:
        assert np.array_equal(got[key], want[key]), key


# Settings over a built-in's that make it run at all (the defaults mmfast refuses).
RUNNABLE = {
    "baidu/ERNIE-4.5-VL-28B-A3B-PT": {"draw_on_frames": False},
    "lkhl/VideoLLaMA3-2B-Image-HF": {"use_token_compression": False},
}


@pytest.mark.parametrize("model_id", mmfast.supported_models())
def test_box_and_hamming_are_refused_naming_resample(model_id: str) -> None:
    """Every video class is a torchvision class, which has no box or hamming filter: the
    setting is refused by name. Qwen's, GLM's, Kimi's, ERNIE's, VideoLLaMA3's and
    Video-LLaVA's reached the core, whose error named its own argument (jobs)."""
    clip = np.stack([frame(t, (48, 64)) for t in range(4)])
    for code in (4, 5):
        settings = {"resample": code, **RUNNABLE.get(model_id, {})}
        try:
            proc = mmfast.ImageProcessor.from_pretrained(model_id, video_overrides=settings)
        except MmfastError:  # an image default mmfast refuses (UDOP's OCR, ...)
            return
        with pytest.raises(MmfastError) as info:
            proc.videos(clip, video_fps=4.0)
        if "no supported video processor" in str(info.value):
            return
        assert "(video): resample: expected 0, 1, 2 or 3 (" in str(info.value)
        assert str(info.value).endswith(f"got {code}")


@pytest.mark.parametrize(
    ("model_id", "rate", "num_frames"),
    [("Qwen/Qwen2-VL-7B-Instruct", 30.0, 62), ("allenai/Molmo2-8B", 1.0, 29)],
)
def test_sampling_past_an_array_clip_is_refused_naming_num_frames(
    model_id: str, rate: float, num_frames: int
) -> None:
    """A sampler whose float step rounds up to one frame past a 100-frame clip (transformers
    fails on its own indexing): an MmfastError naming num_frames, not numpy's IndexError."""
    clip = np.zeros((100, 28, 28, 3), np.uint8)
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    with pytest.raises(MmfastError, match=r"^num_frames, fps: .* takes frame 100 of"):
        proc.videos(clip, video_fps=rate, do_sample_frames=True, num_frames=num_frames, fps=None)


def test_ernie_timestamps_are_refused_naming_the_setting() -> None:
    """ERNIE-4.5-VL draws each frame's timestamp with its checkpoint's TrueType font by
    default: mmfast refuses that, naming draw_on_frames, and computes the clip without it."""
    clip = np.stack([frame(t, (48, 64)) for t in range(6)])
    proc = mmfast.ImageProcessor.from_pretrained("baidu/ERNIE-4.5-VL-28B-A3B-PT")
    with pytest.raises(mmfast.UnsupportedModelError, match="draw_on_frames"):
        proc.videos(clip, video_fps=6.0)
    with pytest.raises(mmfast.UnsupportedModelError, match="draw_on_frames"):
        proc.num_video_tokens(6, 48, 64)
    plain = mmfast.ImageProcessor.from_pretrained(
        "baidu/ERNIE-4.5-VL-28B-A3B-PT", video_overrides={"draw_on_frames": False}
    )
    out = plain.videos(clip, video_fps=6.0)
    assert out["video_grid_thw"].tolist() == [[6, 30, 40]]
    assert plain.num_video_tokens(6, 48, 64) == 6 * 30 * 40 // 8


def test_video_llama_3_compression_is_refused_naming_the_setting() -> None:
    """VideoLLaMA3 keeps the tokens of a clip whose pixels change from frame to frame (token
    compression, on by default): mmfast refuses clips of several frames with it, naming
    use_token_compression, and computes one-frame clips (every token kept) and the setting
    off."""
    clip = np.stack([frame(t, (56, 84)) for t in range(3)])
    proc = mmfast.ImageProcessor.from_pretrained("lkhl/VideoLLaMA3-2B-Image-HF")
    with pytest.raises(mmfast.UnsupportedModelError, match="use_token_compression"):
        proc.videos(clip)
    one = proc.videos(clip[:1])
    assert one["video_compression_mask"].tolist() == [True] * proc.num_video_tokens(1, 56, 84)
    off = mmfast.ImageProcessor.from_pretrained(
        "lkhl/VideoLLaMA3-2B-Image-HF", video_overrides={"use_token_compression": False}
    )
    out = off.videos(clip)
    assert list(out) == [
        "pixel_values_videos",
        "video_grid_thw",
        "video_merge_sizes",
        "video_compression_mask",
    ]
    assert out["video_compression_mask"].sum() == off.num_video_tokens(3, 56, 84)


def test_gemma4_unified_unresized_frames_must_be_whole_merged_squares() -> None:
    """Gemma 4 unified merges each 3x3 group of 16-pixel patches: unresized frames whose sides
    are not multiples of 48 fail in transformers (its reshape, or patches merged out of
    place), and mmfast refuses them naming the unit; whole squares give one row each."""
    proc = mmfast.ImageProcessor.from_pretrained(
        "google/gemma-4-12B-it", video_overrides={"do_resize": False}
    )
    with pytest.raises(MmfastError, match="patch_size \\* pooling_kernel_size = 48"):
        proc.videos(np.stack([frame(t, (96, 160)) for t in range(2)]), do_sample_frames=False)
    out = proc.videos(np.stack([frame(t, (96, 144)) for t in range(2)]), do_sample_frames=False)
    assert out["pixel_values_videos"].shape == (2, 70, 48 * 48 * 3)
    assert out["num_soft_tokens_per_video"].tolist() == [6]
    assert proc.num_video_tokens(2, 96, 144) == 12


def test_mmfast_video_imports_first() -> None:
    """``from mmfast.video import load_video`` as a fresh process's first import (mmfast.video
    imports mmfast.models, whose video families sample with mmfast.video's functions)."""
    code = "from mmfast.video import load_video; print(load_video.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "load_video"


def test_a_video_switch_given_as_none_is_off() -> None:
    """transformers' video processors store a keyword's None and read a switch's as off, but
    where the class reads None as its default (Qwen3-VL's cap_pixels_per_frame)."""
    from mmfast.models.config import load_video_config

    assert load_video_config("Qwen/Qwen2-VL-7B-Instruct", do_normalize=None).do_normalize is False
    qwen3 = "Qwen/Qwen3-VL-8B-Instruct"
    assert load_video_config(qwen3, cap_pixels_per_frame=None) == load_video_config(qwen3)
