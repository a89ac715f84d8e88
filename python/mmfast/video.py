"""Video files to frames: transformers' PyAV reader, bit for bit, decoding only what is needed.

The reference is ``transformers.video_utils.load_video(path, backend="pyav", num_frames=...,
fps=...)``: metadata from the stream header (``stream.frames``, ``float(average_rate)``, the
coded size), frame indices from ``default_sample_indices_fn``, and every frame decoded from the
start up to the last sampled one, on one thread, the sampled ones converted with
``frame.to_ndarray(format="rgb24")``.

:func:`load_video` returns the same frames and metadata with less work. One pass over the
demuxer (packets only, nothing decoded) gives every frame's presentation timestamp and the
keyframes; each sampled frame is then decoded from the keyframe at or before it, groups of
pictures holding no sampled frame are skipped, and decoding stops after the last one. Frames no
other frame refers to (most B-frames) are not decoded unless they are sampled: a decoder that
reads the setting for each frame is told to skip non-reference frames until the next sampled
one, which changes no decoded value because nothing reads them. The codec's frame and slice
threads decode, and only the sampled frames are converted to RGB (by the same PyAV call, so the
same libswscale code and flags). Frames are matched to their index by timestamp. A stream
without usable timestamps (missing, repeated, or in decode order where the codec reorders
frames, as H.264 in AVI), packets the demuxer discards (an MP4 edit list), a keyframe flag on
every packet of a codec that predicts frames (no keyframe table), and a clip whose sampled
frames did not all come out (a seek that cannot reach a keyframe, a cut file), are decoded from
the start, as the reference decodes them. PyAV releases the GIL while it decodes and converts.

PyAV is an optional dependency (``pip install 'mmfast[video]'``), imported on first use.
"""

from __future__ import annotations

import bisect
import contextlib
import io
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import IO, Any, Final

import numpy as np
from numpy.typing import NDArray

from mmfast.errors import ImageTooLargeError, MmfastError, VideoDecodeError
from mmfast.image import file_status, shown_path
from mmfast.models.base import DEFAULT_MAX_PIXELS
from mmfast.models.base_video import MAX_FRAMES
from mmfast.models.config import is_finite_number

__all__ = [
    "VideoMetadata",
    "VideoSource",
    "default_sample_indices",
    "load_video",
    "video_metadata",
]

VideoSource = str | os.PathLike[str] | bytes | bytearray | memoryview | IO[bytes]
SampleIndices = Callable[..., Sequence[int] | NDArray[np.integer]]

# Decoders that read ``skip_frame`` for each frame, so non-reference frames before a sampled
# one can be skipped and the next decoded. Others may read it once (libdav1d, for AV1, when it
# opens: every later non-reference frame was dropped, sampled ones too) and decode everything.
SKIPS_PER_FRAME: Final = frozenset({"h264", "hevc", "mpeg4", "mpeg1video", "mpeg2video", "vp9"})
# FFmpeg's own ceiling for the threads it picks, and past which it warns for H.264.
DECODER_THREADS: Final = 16


@dataclass
class VideoMetadata:
    """What transformers' ``VideoMetadata`` holds for a clip read by its PyAV reader.

    ``total_num_frames`` is the stream header's count, ``fps`` its average rate, ``duration``
    ``total_num_frames / fps``, ``height``/``width`` the coded size (rotation metadata is not
    applied, as transformers does not), and ``frames_indices`` the sampled indices as the
    sampler returned them (repeats included, though each frame is returned once).
    """

    total_num_frames: int
    fps: float | None = None
    width: int | None = None
    height: int | None = None
    duration: float | None = None
    video_backend: str | None = "pyav"
    frames_indices: list[int] | None = field(default=None)

    @property
    def timestamps(self) -> list[float]:
        """Each sampled frame's time in seconds: ``index / fps``."""
        if self.fps is None or self.frames_indices is None:
            raise MmfastError("timestamps: expected fps and frames_indices in the metadata")
        return [index / self.fps for index in self.frames_indices]

    @property
    def sampled_fps(self) -> float:
        """Frames per second of the sampled frames over the whole clip."""
        if self.frames_indices is None or not self.total_num_frames or self.fps is None:
            return self.fps or 24.0
        return len(self.frames_indices) / self.total_num_frames * self.fps


def default_sample_indices(
    metadata: VideoMetadata, num_frames: int | None = None, fps: float | None = None
) -> NDArray[np.int64]:
    """transformers' ``default_sample_indices_fn``: ``num_frames`` evenly spaced indices
    (``arange(n) * total // n``, in integers), or ``max(1, int(total / video_fps * fps))`` of
    them for ``fps``, or every frame. Asking for more frames than the header counts is an
    error, not a clamp. More than :data:`MAX_FRAMES` indices are refused before they are
    made: a header's frame count is untrusted (a forged MP4 claims 2**32 - 1 frames)."""
    total = metadata.total_num_frames
    if num_frames is None and fps is not None:
        if metadata.fps is None:
            raise MmfastError("fps: the clip's metadata has no frame rate to sample by")
        num_frames = max(1, int(total / metadata.fps * fps))
    if num_frames is not None and num_frames > total:
        raise MmfastError(
            f"num_frames: expected at most the clip's {total} frames, got {num_frames}"
        )
    count = total if num_frames is None else num_frames
    if count > MAX_FRAMES:
        raise MmfastError(
            f"frames: expected at most {MAX_FRAMES} frames to read from a clip, got {count} "
            f"(of the {total} its header counts); sample fewer (num_frames, fps)"
        )
    if num_frames is not None:
        return np.arange(num_frames, dtype=np.int64) * total // num_frames
    return np.arange(total, dtype=np.int64)


def load_video(
    source: VideoSource,
    *,
    num_frames: int | None = None,
    fps: float | None = None,
    sample_indices_fn: SampleIndices | None = None,
    threads: int | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> tuple[NDArray[np.uint8], VideoMetadata]:
    """Decode a video's sampled frames: ``((T, H, W, 3) uint8 RGB, metadata)``, equal to
    ``transformers.video_utils.load_video(source, backend="pyav", ...)``.

    ``source`` is a path, the file's bytes or a binary file object. ``num_frames`` or ``fps``
    (not both) choose the frames as transformers' default sampler does; or
    ``sample_indices_fn(metadata=...)`` returns the indices (a processor's ``sample_frames``);
    with none of them every frame is returned. ``threads`` are the decoder's (default
    :func:`mmfast.processors.default_threads`), at most the cores and :data:`DECODER_THREADS`:
    FFmpeg starts them for each clip, outside the worker pool.

    Raises :class:`VideoDecodeError` naming the file for data PyAV cannot read (corrupt,
    truncated, no video stream, no frame count or no frame rate in the header, no frames),
    :class:`ImageTooLargeError` for frames over ``max_pixels`` (checked from the header,
    before decoding, and on each frame decoded), and :class:`MmfastError` for bad arguments.
    """
    from mmfast.processors import check_threads, cores, default_threads

    if num_frames is not None and fps is not None:
        raise MmfastError(
            f"num_frames, fps: expected one of them, got num_frames={num_frames!r} and fps={fps!r}"
        )
    if sample_indices_fn is not None and (num_frames is not None or fps is not None):
        raise MmfastError("sample_indices_fn: expected it alone, without num_frames or fps")
    if num_frames is not None and (
        not isinstance(num_frames, int) or isinstance(num_frames, bool) or num_frames < 1
    ):
        raise MmfastError(f"num_frames: expected a positive integer, got {num_frames!r}")
    if fps is not None and not (is_finite_number(fps) and fps > 0):
        raise MmfastError(f"fps: expected a finite number > 0, got {fps!r}")
    threads = check_threads(default_threads() if threads is None else threads)
    threads = min(threads, cores(), DECODER_THREADS)
    with _Reader(source, max_pixels) as reader:
        metadata = reader.metadata
        if sample_indices_fn is not None:
            indices = sample_indices_fn(metadata=metadata)
        else:
            indices = default_sample_indices(metadata, num_frames, fps)
        wanted = reader.check_indices(indices)
        metadata.frames_indices = [int(i) for i in indices]
        frames = reader.read(wanted, threads)
    return frames, metadata


def video_metadata(source: VideoSource, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> VideoMetadata:
    """A video's metadata from its header alone, as :func:`load_video` gives it (without
    ``frames_indices``): nothing is decoded."""
    with _Reader(source, max_pixels) as reader:
        return reader.metadata


def _av() -> Any:
    try:
        import av
    except ImportError as exc:
        raise MmfastError(
            "videos: decoding video files needs PyAV: pip install 'mmfast[video]'"
        ) from exc
    return av


class _Reader:
    """An open video: its metadata from the header, and its sampled frames on request."""

    def __init__(self, source: VideoSource, max_pixels: int) -> None:
        self.av = _av()
        self.max_pixels = max_pixels
        self.name, opened = _describe(source)
        try:
            self.container = self.av.open(opened)
        except self.av.error.FFmpegError as exc:
            raise VideoDecodeError(f"{self.name}: cannot read the video: {exc}") from exc
        except (IsADirectoryError, PermissionError, FileNotFoundError, TimeoutError):
            raise
        except (OSError, ValueError) as exc:
            raise VideoDecodeError(f"{self.name}: cannot read the video: {exc}") from exc
        try:
            self.metadata = self._metadata()
        except (self.av.error.FFmpegError, AttributeError, ValueError) as exc:
            # PyAV's own errors on damaged headers (a stream without a codec has no size).
            self.container.close()
            if isinstance(exc, MmfastError):
                raise
            raise VideoDecodeError(f"{self.name}: cannot read the video header: {exc}") from exc
        except BaseException:
            self.container.close()
            raise

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.container.close()

    def _metadata(self) -> VideoMetadata:
        """The header's metadata, as transformers' reader reads it."""
        if not self.container.streams.video:
            raise VideoDecodeError(f"{self.name}: expected a video stream, found none")
        self.stream = stream = self.container.streams.video[0]
        height, width = stream.height, stream.width
        if not height or not width:
            raise VideoDecodeError(f"{self.name}: the video stream has no frame size")
        self._check_size(width, height)
        total = stream.frames
        rate: Fraction | None = stream.average_rate
        if not total:
            raise VideoDecodeError(
                f"{self.name}: expected a video whose header counts its frames (as MP4 and "
                "MOV do), which transformers' PyAV reader samples by; this one gives none (as "
                "Matroska and WebM files, and still images, do): remux it into MP4 "
                "(ffmpeg -i clip.webm -c copy clip.mp4)"
            )
        if not rate:
            raise VideoDecodeError(f"{self.name}: the video header gives no frame rate")
        return VideoMetadata(
            total_num_frames=int(total),
            fps=float(rate),
            width=width,
            height=height,
            duration=float(total / rate),
            video_backend="pyav",
        )

    def check_indices(self, indices: Sequence[int] | NDArray[np.integer]) -> list[int]:
        """The distinct frames to decode, in order, from the sampler's ``indices``: as
        transformers' reader reads them (``i in indices`` up to ``indices[-1]``)."""
        values = np.asarray(indices)
        if values.ndim != 1 or values.size == 0 or not np.issubdtype(values.dtype, np.integer):
            raise MmfastError(
                f"{self.name}: expected the sampler to return frame indices, got {indices!r:.80}"
            )
        if values.size > MAX_FRAMES:
            raise MmfastError(
                f"{self.name}: expected at most {MAX_FRAMES} sampled frames, got {values.size}"
            )
        last = int(values[-1])
        wanted = sorted({int(i) for i in values if 0 <= i <= last})
        if not wanted:
            # transformers' reader stops at frame 0, past a negative last index, and stacks
            # no frames (a ValueError).
            raise MmfastError(
                f"{self.name}: expected the sampler's indices to select a frame (those from 0 "
                f"up to the last index, {last}), got {indices!r:.80}"
            )
        return wanted

    def _check_size(self, width: int, height: int) -> None:
        if height * width > self.max_pixels:
            raise ImageTooLargeError(
                f"{self.name}: expected frames of at most max_pixels={self.max_pixels} pixels, "
                f"got {width}x{height} ({width * height} pixels)"
            )

    def _rgb(self, frame: Any) -> NDArray[np.uint8]:
        """A decoded frame as (H, W, 3) RGB, once its size is checked: a stream's frames may
        grow past the header's size (an MJPEG AVI's later frames)."""
        self._check_size(frame.width, frame.height)
        rgb: NDArray[np.uint8] = frame.to_ndarray(format="rgb24")
        return rgb

    def read(self, wanted: list[int], threads: int) -> NDArray[np.uint8]:
        """The ``wanted`` frames (distinct, in order) as (T, H, W, 3) RGB."""
        stream = self.stream
        stream.thread_type = "AUTO"
        stream.thread_count = threads
        try:
            index = _FrameIndex.build(self.container, stream, wanted[-1])
            frames: NDArray[np.uint8] | None = None
            got: list[int] = []
            if index is not None:
                with contextlib.suppress(_SeekMissed):
                    frames, got = self._gather(self._decode_sampled(index, wanted), wanted)
            if len(got) < len(wanted):
                # No timestamps to match frames by, a seek that missed its keyframe, or
                # frames the file lacks (a cut file, or a header that counts more frames
                # than the stream holds): decoded from the start as the reference decodes
                # them, which fails where it fails.
                frames, got = self._gather(self._decode_all(wanted), wanted)
        except (self.av.error.FFmpegError, AttributeError, ValueError) as exc:
            if isinstance(exc, MmfastError):
                raise
            raise VideoDecodeError(f"{self.name}: cannot decode the video: {exc}") from exc
        if frames is None:
            raise VideoDecodeError(
                f"{self.name}: expected frames at indices {wanted[:8]}..., decoded none"
                if len(wanted) > 8
                else f"{self.name}: expected frames at indices {wanted}, decoded none"
            )
        return frames if len(got) == len(wanted) else frames[got]

    def _gather(
        self, decoded: Iterator[tuple[int, NDArray[np.uint8]]], wanted: list[int]
    ) -> tuple[NDArray[np.uint8] | None, list[int]]:
        """The ``decoded`` frames, each written as it comes into its place among ``wanted``
        in one (T, H, W, 3) array (kept apart and stacked, every frame was held twice), and
        the places filled, in order."""
        place = {i: k for k, i in enumerate(wanted)}
        frames: NDArray[np.uint8] | None = None
        got = []
        for i, frame in decoded:
            if frames is None:
                frames = np.empty((len(wanted), *frame.shape), np.uint8)
            elif frame.shape != frames.shape[1:]:
                raise VideoDecodeError(f"{self.name}: the sampled frames change size mid-stream")
            frames[place[i]] = frame
            got.append(place[i])
        return frames, sorted(got)

    def _decode_all(self, wanted: list[int]) -> Iterator[tuple[int, NDArray[np.uint8]]]:
        """The reference's way: every frame from the start, counted, up to the last wanted."""
        self.container.seek(0)
        self.stream.codec_context.skip_frame = "DEFAULT"  # as a missed seek may leave it
        need = set(wanted)
        for i, frame in enumerate(self.container.decode(self.stream)):
            if i > wanted[-1]:
                break
            if i in need:
                yield i, self._rgb(frame)

    def _decode_sampled(
        self, index: _FrameIndex, wanted: list[int]
    ) -> Iterator[tuple[int, NDArray[np.uint8]]]:
        """Each group of wanted frames decoded from its keyframe, skipping what no wanted frame
        needs."""
        stream, context = self.stream, self.stream.codec_context
        groups: dict[int, list[int]] = {}
        for i in wanted:
            if i < len(index.order):
                groups.setdefault(index.keyframe_before(i), []).append(i)
        at = -1  # decode position of the next packet the demuxer gives (-1: unknown)
        for keyframe, targets in sorted(groups.items()):
            packets = (
                self.container.demux(stream) if at == keyframe else self._seek(index, keyframe)
            )
            need = set(targets)
            next_target = min(index.order[i] for i in targets)
            if context.codec.name in SKIPS_PER_FRAME:
                context.skip_frame = "NONREF"
            for packet in packets:
                if packet.size == 0:  # the demuxer's end: flush the decoder
                    frames = stream.decode(None)
                    at = -1
                else:
                    # Positions come from timestamps: a seek may land before the keyframe.
                    here = index.where.get(packet.pts, -1)
                    if here >= next_target:
                        context.skip_frame = "DEFAULT"
                    frames = packet.decode()
                    at = here + 1 if here >= 0 else -1
                for frame in frames:
                    found = index.rank.get(frame.pts)
                    if found in need:
                        yield found, self._rgb(frame)
                        need.discard(found)
                        if need:
                            next_target = min(index.order[j] for j in need)
                if not need:
                    break
            context.skip_frame = "DEFAULT"

    def _seek(self, index: _FrameIndex, keyframe: int) -> Iterator[Any]:
        """The demuxer's packets from the keyframe at decode position ``keyframe``, or from
        before it: a seek to its presentation time, else to its decode time (AVI's demuxer
        seeks by decode time, which B-frames put before the presentation time, so a seek to
        the latter lands on the packet after the keyframe). Raises :class:`_SeekMissed` when
        neither lands at or before it."""
        stream = self.stream
        for time in dict.fromkeys((index.pts[keyframe], index.dts[keyframe])):
            if time is None:
                continue
            self.container.seek(time, stream=stream, backward=True)
            packets = self.container.demux(stream)
            first = next(packets, None)
            if first is not None and 0 <= index.where.get(first.pts, -1) <= keyframe:
                yield first
                yield from packets
                return
        raise _SeekMissed


class _SeekMissed(Exception):
    """A seek that landed after the keyframe it was for."""


@dataclass(frozen=True)
class _FrameIndex:
    """Every frame of a stream from its packets alone. Frame ``i`` is the packet with the
    ``i``-th smallest presentation timestamp (the decoder outputs frames in that order, which
    the reference counts); ``order[i]`` is its position in decode (file) order."""

    pts: list[int]  # by decode position
    dts: list[int | None]  # by decode position
    order: list[int]  # frame index -> decode position
    rank: dict[int, int]  # pts -> frame index
    where: dict[int, int]  # pts -> decode position
    keyframes: list[int]  # decode positions

    @classmethod
    def build(cls, container: Any, stream: Any, last: int) -> _FrameIndex | None:
        """The index of frames up to ``last`` at least, or None when timestamps cannot
        identify frames (missing, repeated, or in decode order where the codec reorders).

        The demuxer stops once a packet's decode timestamp passes the ``last + 1``-th smallest
        presentation timestamp so far: every later packet presents later (pts >= dts, and
        dts only grows), so no frame up to ``last`` can still come.

        Also None for frames presented before the first keyframe (see below), for a packet
        the demuxer marks to discard (an MP4 edit list that starts
        after the first frames, as ``ffmpeg -ss ... -c copy`` cuts: the decoder drops their
        frames, so they are not counted), and for a stream whose every packet is a keyframe
        though its codec predicts frames (MPEG-4 in MP4 without a keyframe table: a seek to a
        predicted frame decodes it from nothing)."""
        pts: list[int] = []
        dts: list[int | None] = []
        keyframes: list[int] = []
        seen: list[int] = []  # the pts so far, sorted
        for packet in container.demux(stream):
            if packet.size == 0:
                continue
            if packet.pts is None or packet.is_discard:
                return None
            if len(seen) > last and packet.dts is not None and packet.dts > seen[last]:
                break
            if packet.is_keyframe:
                keyframes.append(len(pts))
            pts.append(packet.pts)
            dts.append(packet.dts)
            bisect.insort(seen, packet.pts)
        if not pts or not keyframes or keyframes[0] != 0 or len(seen) != len(set(seen)):
            return None
        if seen[0] < pts[0]:
            # Frames presented before the first keyframe: the leading B-frames of an open
            # group of pictures cut from the one before (a stream copied from a non-IDR
            # keyframe), which refer to pictures the file lacks. The decoder drops them
            # (H.264: 2 of 76), so timestamps would count frames it never outputs.
            return None
        if len(keyframes) == len(pts) > 1 and not stream.codec_context.codec.intra_only:
            return None
        if stream.codec_context.has_b_frames and pts == seen:
            # The codec reorders frames, yet every timestamp follows decode order: they are
            # not presentation times (AVI stores none for H.264), so they cannot place frames.
            return None
        order = sorted(range(len(pts)), key=pts.__getitem__)
        rank = {pts[d]: i for i, d in enumerate(order)}
        return cls(pts, dts, order, rank, {p: d for d, p in enumerate(pts)}, keyframes)

    def keyframe_before(self, frame: int) -> int:
        """Decode position of the keyframe to decode frame ``frame`` from: the last one at or
        before its packet that does not present after it. A frame decoded after a keyframe but
        presented before it (a B-frame leading an open group of pictures, as MPEG-4 Part 2
        makes them) refers to the group before, so it starts from that group's keyframe."""
        at, when = self.order[frame], self.pts[self.order[frame]]
        k = bisect.bisect_right(self.keyframes, at) - 1
        while k > 0 and self.pts[self.keyframes[k]] > when:
            k -= 1
        return self.keyframes[k]


def _describe(source: VideoSource) -> tuple[str, Any]:
    """How errors name the source, and what ``av.open`` takes for it."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        if not len(source):
            raise VideoDecodeError("video: expected video data, got empty bytes")
        return f"video ({len(source)} bytes)", io.BytesIO(source)
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if path.lower().startswith(("http://", "https://", "ftp://", "data:")):
            raise MmfastError(
                f"video: expected bytes, a file path or a file object, got the URL {path[:80]!r}; "
                "mmfast does not fetch URLs: download the video and pass its bytes"
            )
        if file_status(path) is None:
            raise FileNotFoundError(2, "No such file or directory", shown_path(path))
        return f"video ({shown_path(path)})", path
    if hasattr(source, "read"):
        return f"video ({getattr(source, 'name', 'file object')})", source
    raise MmfastError(
        f"video: expected a path, bytes or a binary file object, got {type(source).__qualname__}"
    )
