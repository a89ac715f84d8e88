"""Decoding: bytes or files to HWC uint8 RGB, bit-identical to transformers' PIL chain.

The reference is what transformers does with an image file::

    img = PIL.ImageOps.exif_transpose(PIL.Image.open(source))
    out = transformers.image_transforms.convert_to_rgb(img, return_numpy=True)

mmfast decodes through Pillow itself (libjpeg-turbo, zlib, libwebp: the very
decoders that chain uses, with the GIL released while they run), so the pixels are
Pillow's by construction. What it saves is the copying around the decoder: an RGB or
grayscale image (RGBA, CMYK and LA too) is decoded into one contiguous block, read in place
through Pillow's Arrow export or its rows, and oriented and packed into the output array
by one Rust pass with the GIL released, instead of ``exif_transpose`` + ``np.array``
copies. One decoder is the core's own: an 8-bit RGB, RGBA or grey PNG given to a
processor (:func:`decode_source`, or as a PIL image not yet loaded: :func:`lazy_png_rgb`,
:func:`load_lazy`)
or to :func:`decode_image` is decoded by the ``png`` crate, whose samples are Pillow's by
construction (the format is lossless), 2.3-2.7 times as fast (:func:`_png_rgb`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import os
import stat
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeGuard, cast

import numpy as np
import PIL
from numpy.typing import NDArray
from PIL import Image, ImageFile, UnidentifiedImageError
from PIL.PngImagePlugin import PngImageFile
from PIL.TiffImagePlugin import TiffImageFile
from PIL.WebPImagePlugin import WebPImageFile

from mmfast import _native
from mmfast.errors import ImageDecodeError, ImageTooLargeError, MmfastError
from mmfast.models.base import DEFAULT_MAX_PIXELS

_PILLOW_MAJOR = int(PIL.__version__.split(".")[0])
if _PILLOW_MAJOR < 12:  # Pillow 11's Arrow export of some L images crashes the interpreter
    raise ImportError(f"mmfast needs Pillow 12 or newer, found Pillow {PIL.__version__}")
# Resizes equal the installed Pillow's, which transformers' PIL classes call: Pillow 13 changed
# the order of a resize's two passes.
_native.follow_pillow(_PILLOW_MAJOR)
# Smaller palette, CMYK and LA images are converted by Pillow (an LA image composited onto
# white is read in place at any size): finding a palette's 256 colours first costs 15-18 us,
# more than the lookup saves under about 50,000 pixels (LLaVA-1.5 on one thread: 64x48 141
# against 123 us, 200x160 179 against 172 us, 320x240 208 against 219 us).
LOOKUP_MIN_PIXELS = 1 << 16

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "ArrowSource",
    "ImageSource",
    "PillowRows",
    "array_to_rgb",
    "arrow_source",
    "checkerboard_rgb",
    "composite_onto_white",
    "convert_to_rgb",
    "decode_image",
    "decode_source",
    "file_status",
    "has_transparency",
    "hf_source",
    "image_size",
    "lazy_png_rgb",
    "load_lazy",
    "pil_source",
    "pil_to_rgb",
    "pillow_rows_readable",
    "plain_rgb_or_gray",
    "plain_source",
    "resize",
    "unloaded",
]

_ORIENTATION = 0x0112

ImageSource = bytes | bytearray | memoryview | str | os.PathLike[str]


# Pillow warns (DecompressionBombWarning) on opening an image over Image.MAX_IMAGE_PIXELS,
# where mmfast checks its own max_pixels, and (UserWarning) on corrupt metadata, which a
# service running with -W error must not see as an exception. Python's warning filters are
# process-wide, so the calls that silence them take turns, and silence Pillow's modules
# alone: another thread's warnings meanwhile stay as its filters say. A forked child takes a
# new lock:
# one a parent's thread held at the fork (decoding a TIFF, say) stays held in the child,
# whose first decode waited on it forever.
_OPEN_LOCK = threading.Lock()


def _new_open_lock() -> None:
    global _OPEN_LOCK
    _OPEN_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_new_open_lock)
_URL_PREFIXES = ("http://", "https://", "ftp://", "data:")
# The longest path a message shows whole: a str that is not a path (base64 image data, as
# clients send it) is cut, not echoed.
SHOWN_PATH = 200


def shown_path(path: str | os.PathLike[str]) -> str:
    """``path`` as messages show it: cut to :data:`SHOWN_PATH` characters, saying how long."""
    text = os.fsdecode(path)
    if len(text) <= SHOWN_PATH:
        return text
    return f"{text[:SHOWN_PATH]}... ({len(text)} characters)"


def file_status(path: str | os.PathLike[str]) -> os.stat_result | None:
    """``os.stat(path)``, or None where ``os.path.exists`` reads False; a deadline's
    ``TimeoutError`` (raised by its signal handler meanwhile) passes, which ``os.path``'s
    checks swallow as a missing file."""
    try:
        return os.stat(path)
    except TimeoutError:
        raise
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Pillow's size and corrupt-metadata warnings silenced, one caller at a time."""
    with _OPEN_LOCK, warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning, module=r"PIL\.")
        warnings.filterwarnings("ignore", category=UserWarning, module=r"PIL\.")
        yield


@contextlib.contextmanager
def _open(source: ImageSource) -> Iterator[Image.Image]:
    """``Image.open`` on any source, with Pillow's errors mapped to mmfast's."""
    if isinstance(source, memoryview) and not source.c_contiguous:
        raise MmfastError("source: expected a C-contiguous buffer, got a strided memoryview")
    if isinstance(source, (bytes, bytearray, memoryview)):
        if not len(source):
            raise ImageDecodeError("source: expected image data, got empty bytes")
        fp: str | os.PathLike[str] | io.BytesIO = io.BytesIO(source)
        what = f"{len(source)} bytes"
    elif isinstance(source, (str, os.PathLike)):
        fp = source
        what = shown_path(source)
        if what.lower().startswith(_URL_PREFIXES):
            raise MmfastError(
                f"source: expected bytes or a file path, got the URL {what[:80]!r}; mmfast "
                "does not fetch URLs: download the image and pass its bytes"
            )
        status = file_status(fp)
        if status is not None and stat.S_ISREG(status.st_mode) and status.st_size == 0:
            raise ImageDecodeError(f"source: the file {what} is empty")
    else:
        raise MmfastError(
            f"source: expected bytes, a buffer, str or os.PathLike, got {type(source).__qualname__}"
        )
    try:
        with _quiet():
            im = Image.open(fp)
    except Image.DecompressionBombError as exc:
        raise ImageTooLargeError(f"source: {exc}") from exc
    except UnidentifiedImageError as exc:
        raise ImageDecodeError(f"source: not an image in a format Pillow reads ({what})") from exc
    except (FileNotFoundError, IsADirectoryError, PermissionError, TimeoutError):
        raise
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
            # The message without the file name, which ``what`` gives (cut if long).
            hint = "; a str is a file path: decode base64 data to bytes first"
            detail = exc.strerror + (hint if exc.errno == errno.ENAMETOOLONG else "")
        else:
            detail = str(exc)
        raise ImageDecodeError(f"source: cannot read the image header ({what}): {detail}") from exc
    with im:
        yield im


def _orientation(im: Image.Image, before_pixels: bool = False) -> int:
    """The EXIF orientation ``ImageOps.exif_transpose`` would apply (1 when none).

    Pillow's warnings about corrupt metadata stay inside: such a file decodes as Pillow
    decodes it, and a service running with ``-W error`` gets the image, not a UserWarning.
    ``before_pixels``: from the metadata Pillow read when it opened the file alone, where
    a PNG's ``getexif`` would first load the whole file for chunks after the pixels (for
    a file with no chunk between its pixels and its end: :func:`_png_rgb`).
    """
    with _quiet():
        exif = Image.Image.getexif(im) if before_pixels else im.getexif()
        value = exif.get(_ORIENTATION, 1)
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_rgb(
    source: ImageSource,
    apply_exif_orientation: bool = True,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    composite: bool = False,
) -> NDArray[np.uint8] | None:
    """An 8-bit RGB, RGBA or grey PNG file as :func:`decode_source` gives it (oriented,
    alpha dropped, grey repeated; with ``composite``, RGBA composited onto white as
    :func:`decode_image` does, by the table of :func:`composite_onto_white`: its call on a
    1920x1080 RGBA PNG, a third translucent, took 51.6-52.6 -> 18.9-19.5 ms, at 12 MP
    311-340 -> 109-110 ms), decoded by the core where its pixels are
    Pillow's by construction (``decode::decode_png``: the file is lossless, and every file
    it does not take is left to Pillow); None for any other file. LLaVA-1.5's call on the
    PNG bytes of a 12 MP photo took 224.8-225.1 -> 89.6-95.2 ms, of a 1920x1080 one 42.9
    -> 18.3-18.5 ms (RGBA: 50.7-51.0 -> 20.2-20.3 ms)."""
    if isinstance(source, (str, os.PathLike)):
        data = _png_file(source)
    elif isinstance(source, (bytes, bytearray)) or (
        isinstance(source, memoryview) and source.c_contiguous
    ):
        data = bytes(source)  # the same object for bytes
    else:
        return None  # _open says what is wrong with it
    if data is None or data[:8] != _PNG_SIGNATURE:
        return None
    try:
        with _open(data) as im:
            if not _plain_png(im, ("RGB", "RGBA", "L")):
                return None
            _check_size(im, max_pixels)
            orientation = _orientation(im, before_pixels=True) if apply_exif_orientation else 1
    except MmfastError:
        if isinstance(source, (str, os.PathLike)):
            return None  # Pillow says what is wrong with the file, naming it
        raise
    table = _pillow_onto_white() if composite and im.mode == "RGBA" else None
    return _native.rgb_from_png(data, orientation, min(max_pixels, sys.maxsize), table)


def _png_file(path: str | os.PathLike[str]) -> bytes | None:
    """The bytes of the file at ``path``, read once, where it is a regular file (a pipe's
    bytes, once read, would be gone for Pillow) that starts as a PNG no longer than one of
    its header's size can need (:func:`_png_bytes_bound`); else None. Pillow reads the
    header, and the core the pixels, of those same bytes, however the file changes."""
    status = file_status(path)
    if status is None or not stat.S_ISREG(status.st_mode):
        return None
    try:
        with open(path, "rb") as file:
            head = file.read(24)
            if head[:8] != _PNG_SIGNATURE or head[12:16] != b"IHDR":
                return None
            width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
            size = os.fstat(file.fileno()).st_size
            if size > _png_bytes_bound(width, height, 4):
                return None
            return head + file.read(size - len(head))
    except TimeoutError:
        raise
    except (OSError, ValueError):
        return None  # Pillow says what is wrong with the path


# The bytes of chunks besides the pixels' that a PNG the core decodes may hold.
PNG_OTHER_BYTES = 64 << 20


def _png_bytes_bound(width: int, height: int, channels: int) -> int:
    """The most bytes a PNG file of that size and ``channels`` samples a pixel is read as
    for the core: its rows stored uncompressed twice over, and ``PNG_OTHER_BYTES``. A
    longer one is left to Pillow, which reads only to the pixels' end: a small image at the
    head of a large file is not read in full."""
    return 2 * height * (width * channels + 1) + PNG_OTHER_BYTES


def _file_object_bytes(fp: object, im: Image.Image) -> bytes | None:
    """The whole of the file object a PIL image was opened from, without moving it or
    changing its state (an in-memory ``BytesIO``, or a regular file read by ``pread``);
    None for any other object (a stream Pillow reads its own way: gzip, a pipe, ...) and
    past :func:`_png_bytes_bound`."""
    bound = _png_bytes_bound(im.width, im.height, len(im.mode))
    if isinstance(fp, io.BytesIO):
        with fp.getbuffer() as view:
            size = view.nbytes
        return fp.getvalue() if size <= bound else None
    if isinstance(fp, io.BufferedReader) and isinstance(fp.raw, io.FileIO) and hasattr(os, "pread"):
        status = os.fstat(fp.fileno())
        if not stat.S_ISREG(status.st_mode) or status.st_size > bound:
            return None
        data = os.pread(fp.fileno(), status.st_size, 0)
        return data if len(data) == status.st_size else None
    return None


# A PNG's colour type (IHDR byte 25) for each mode the core decodes.
_PNG_COLOUR_TYPES = {"L": 0, "RGB": 2, "RGBA": 6}


def _same_png(data: bytes, im: PngImageFile) -> bool:
    """Whether the PNG file ``data`` still holds what Pillow read of it on opening ``im`` (a
    file object's bytes are read apart from Pillow's reading): its header's size, 8-bit
    samples and colour type, and its first pixel chunk (IDAT) where Pillow found it and of
    the length Pillow read there. A file rewritten since in any of these is left to Pillow,
    which loads what it makes of it (or says the file is truncated)."""
    size = im.width.to_bytes(4, "big") + im.height.to_bytes(4, "big")
    header = size + bytes((8, _PNG_COLOUR_TYPES[im.mode]))
    at = _pixels_at(data)
    # Pillow keeps the first IDAT's length, which its loading reads first, as this.
    first = getattr(im, "_PngImageFile__prepare_idat", None)
    return (
        data[16:26] == header
        and at is not None
        and at == im.tile[0][2]
        and int.from_bytes(data[at - 8 : at - 4], "big") == first
    )


def _pixels_at(data: bytes) -> int | None:
    """Where the first pixel data (IDAT) of the PNG file ``data`` starts, found by walking
    its chunk headers (None where it has none)."""
    at = len(_PNG_SIGNATURE)
    while at + 8 <= len(data):
        if data[at + 4 : at + 8] == b"IDAT":
            return at + 8
        at += 12 + int.from_bytes(data[at : at + 4], "big")
    return None


def _plain_png(im: Image.Image, modes: tuple[str, ...]) -> TypeGuard[PngImageFile]:
    """Whether ``im``, opened and not loaded, is a still 8-bit PNG of one of ``modes``
    without a colour key: a file the core may decode (``decode::decode_png`` refuses the
    rest of what Pillow reads differently)."""
    return (
        isinstance(im, PngImageFile)
        and im.mode in modes
        and "transparency" not in im.info
        and not im.info.get("interlace")
        and not im.is_animated
        and [tile[3] for tile in im.tile] == [im.mode]  # 8 bits a sample
    )


def _lazy_png_bytes(im: PngImageFile) -> bytes | None:
    """The whole file object a PNG opened and not loaded was opened from
    (:func:`_file_object_bytes`) where it holds the PNG Pillow opened (:func:`_same_png`),
    else None (and for a closed file, which Pillow reports on loading)."""
    try:
        data = _file_object_bytes(getattr(im, "fp", None), im)
    except (TimeoutError, MemoryError):
        raise
    except (OSError, ValueError):  # a closed file
        return None
    return data if data is not None and _same_png(data, im) else None


def lazy_png_rgb(
    im: Image.Image, modes: tuple[str, ...], composite: bool = False
) -> NDArray[np.uint8] | None:
    """A PIL image opened from an RGB, RGBA or grey PNG and not loaded (``Image.open`` alone
    on a ``BytesIO`` or a file the caller opened, as some servers hand images on) as its
    loaded pixels' (H, W, 3) RGB array: grey repeated and alpha dropped as ``convert("RGB")``
    does, or with ``composite`` RGBA composited onto white as :func:`hf_source` composites
    it. The whole file object is read without moving it (:func:`_file_object_bytes`), must
    hold the PNG Pillow opened (:func:`_same_png`), and is decoded by the core as
    :func:`_png_rgb` decodes bytes; the image is left unloaded. None for any other image
    (or mode not in ``modes``), file object or file the core leaves to Pillow, which
    :func:`load_lazy` loads; and for a file Pillow opened from a path itself, which it
    closes once the image is loaded (:func:`load_lazy` loads such a PNG through the core:
    :func:`_core_png_tile`). LLaVA-1.5's call on a 12 MP PNG opened lazily from
    a ``BytesIO`` took 225.6-230.8 -> 89.0-90.3 ms, what its bytes take, at 1920x1080
    42.9-43.0 -> 18.0-18.3 ms, at 640x480 7.6-7.8 -> 3.0-3.1 ms; an RGBA one, a third
    translucent, 276-277 -> 101-103 ms at 12 MP and 53.3-53.8 -> 20.3-20.5 ms at
    1920x1080."""
    if not unloaded(im) or getattr(im, "_exclusive_fp", True) or not _plain_png(im, modes):
        return None
    data = _lazy_png_bytes(im)
    if data is None:
        return None
    # At most the pixels Pillow's header gave, in that shape.
    table = _pillow_onto_white() if composite and im.mode == "RGBA" else None
    rgb = _native.rgb_from_png(data, 1, im.width * im.height, table)
    return rgb if rgb is not None and rgb.shape[:2] == (im.height, im.width) else None


def _loads_in_place(im: Image.Image) -> bool:
    """Whether ``im.load()`` decodes into a block put in ``im.im`` beforehand.

    Pillow's ``ImageFile.load`` does when the file has pixel data (``im.tile``), and the
    WebP and TIFF loaders end in it. Other loaders (ICO, ICNS, ...) would take such a block
    for pixels already loaded, and a file without pixel data would decode to black.
    """
    if im.palette is not None and im.mode != "P":
        # A GIF opened as RGB or RGBA (``GifImagePlugin.LOADING_STRATEGY`` RGB_ALWAYS) keeps
        # a palette, which loading would push into the block and fail.
        return False
    load = type(im).load
    if isinstance(im, ImageFile.ImageFile) and load is ImageFile.ImageFile.load:
        return bool(im.tile)
    if isinstance(im, TiffImageFile):
        # A TIFF Pillow orients itself (EXIF orientation 5 to 8) decodes its tiles at the
        # stored size, the transpose of ``im.size``: a block of that size cannot hold them.
        extents = [tile.extents for tile in im.tile]
        return all(e is None or (e[2] <= im.width and e[3] <= im.height) for e in extents)
    return load is WebPImageFile.load


def _load(im: Image.Image) -> None:
    """Decode the pixels, with decoder failures as ``ImageDecodeError`` naming the format."""
    try:
        # TIFF's loader parses its tags again, with the same warnings as at open.
        with _quiet() if isinstance(im, TiffImageFile) else contextlib.nullcontext():
            im.load()
    except (MemoryError, TimeoutError):
        raise
    except Exception as exc:  # Pillow's decoders raise OSError, SyntaxError, struct.error, ...
        raise ImageDecodeError(f"source: cannot decode the {im.format} image: {exc}") from exc


def _check_max_pixels(max_pixels: object) -> None:
    if not isinstance(max_pixels, int) or isinstance(max_pixels, bool) or max_pixels <= 0:
        raise MmfastError(f"max_pixels: expected a positive integer, got {max_pixels!r}")


def _check_size(im: Image.Image, max_pixels: int) -> None:
    w, h = im.size
    if w * h > max_pixels:
        raise ImageTooLargeError(
            f"source: expected at most max_pixels={max_pixels} pixels, "
            f"got a {w}x{h} {im.format} image ({w * h} pixels)"
        )


ArrowSource = tuple[object, object, tuple[int, int]]


def arrow_source(im: Image.Image) -> ArrowSource:
    """An RGB or L Pillow image's pixels for the core: ``(schema, array, (height, width))``.

    The capsules of Pillow's Arrow export, which the core reads in place. Pillow
    exports an image only when all its rows sit in one memory block: images under its
    16 MiB block size (about 4 MP of RGB), or decoded by :func:`decode_image`. Larger
    ones are first copied once into a single block by Pillow's own paste (which
    releases the GIL); Pillow's global block size is never changed.
    """
    if im.mode not in ("RGB", "L"):
        raise MmfastError(f"image: expected a PIL image in mode RGB or L, got mode {im.mode}")
    exported = _arrow_export(im)
    if exported is not None:
        return exported
    block = Image.core.new_block(im.mode, im.size)  # type: ignore[attr-defined]
    block.paste(im.im, (0, 0, *im.size))
    return block.__arrow_c_schema__(), block.__arrow_c_array__(), (im.height, im.width)


def _arrow_export(im: Image.Image) -> ArrowSource | None:
    """Pillow's Arrow export of ``im``, or None when its rows are in several blocks."""
    try:
        schema, array = im.__arrow_c_array__()
    except ValueError:
        return None
    return schema, array, (im.height, im.width)


PillowRows = tuple[object, tuple[int, int], object]


def pil_source(im: Image.Image) -> PillowRows | ArrowSource | NDArray[np.uint8]:
    """An RGB or L Pillow image's pixels for a batch, read in place by the core.

    Its rows, through ``Image.getim()``, where this Pillow's image struct reads as the
    core expects (:func:`pillow_rows_readable`): ``(capsule, (height, width), im.im)``, the
    core object kept alive by the tuple. The core's resizes read Pillow's RGBX rows where
    they are, in one block or several (images over Pillow's 16 MiB block size), so a PIL
    image costs what the same pixels as an array cost. Else :func:`arrow_source`, except
    for an RGB image whose rows are in several blocks, which ``np.asarray`` copies (Pillow
    packs the rows to RGB with the GIL released).
    """
    if im.mode in ("RGB", "L") and pillow_rows_readable():
        return _rows(im)
    if im.mode == "RGB":
        exported = _arrow_export(im)
        return np.asarray(im) if exported is None else exported
    return arrow_source(im)


@functools.cache
def pillow_rows_readable() -> bool:
    """Whether the core reads this Pillow's images in place through ``Image.getim()``.

    The core reads the head of Pillow's image struct (Pillow 12 and 13's layout) after
    checking its fields against the image; this probe reads an RGB and an L image that way
    once and compares them with ``np.asarray(image.convert("RGB"))``. Any other outcome
    keeps the copying path of :func:`pil_source`.
    """
    rng = np.random.default_rng(0)
    try:
        for shape in ((5, 7, 3), (6, 3)):
            probe = Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8))
            got = _native.rgb_from_pillow(_rows(probe))
            if not np.array_equal(got, np.asarray(probe.convert("RGB"))):
                return False
    except (MmfastError, AttributeError, TypeError, ValueError):
        return False
    return True


def pil_to_rgb(im: Image.Image, orientation: int = 1) -> NDArray[np.uint8]:
    """An RGB or L Pillow image → (H, W, 3) uint8, oriented, read in place with the GIL
    released: through its Arrow export when its rows are in one block (oriented in the same
    pass), else through its rows where the core reads this Pillow's images so
    (:func:`pillow_rows_readable`; oriented in a second pass), else copied into one block
    first (see :func:`arrow_source`). A 12 MP image in Pillow's blocks took 39.2-40.4 ->
    4.0 ms through its rows."""
    plain = im.mode in ("RGB", "L")
    exported = _arrow_export(im) if plain else None
    if exported is None and plain and pillow_rows_readable():
        return _native.rgb_from_pillow(_rows(im), orientation)
    schema, array, size = arrow_source(im) if exported is None else exported
    return _native.rgb_from_arrow((schema, array), size, orientation)


def hf_source(im: Image.Image) -> PillowRows | ArrowSource | NDArray[np.uint8]:
    """transformers' ``convert_to_rgb`` of a PIL image, as a batch reads it.

    Transparency (an alpha band or ``info["transparency"]``) is composited onto white
    (:func:`composite_onto_white`), except in an RGBA image whose every pixel is opaque,
    whose rows are read in place as an RGB image's are (the composite keeps opaque colours:
    LLaVA-1.5's call on an opaque 12 MP image took 13.0 ms composited, 8.6 ms checked and
    read in place). Others as :func:`plain_source`.
    """
    if not has_transparency(im):
        return plain_source(im)
    rows = _rgba_rows(im)
    if rows is not None and _white_keeps_opaque() and _native.opaque(rows):
        return rows
    return composite_onto_white(im)


def plain_source(im: Image.Image) -> PillowRows | ArrowSource | NDArray[np.uint8]:
    """``im.convert("RGB")`` as a batch reads it: an RGBA image's rows in place, whose alpha
    the batch ignores as ``convert("RGB")`` drops it, a palette or CMYK image converted by
    lookups (:func:`_looked_up`), others :func:`plain_rgb_or_gray`'s image through
    :func:`pil_source`."""
    rows = _rgba_rows(im)
    if rows is not None:
        return rows
    rgb = _looked_up(im, _loaded_rgb)
    return pil_source(plain_rgb_or_gray(im)) if rgb is None else rgb


def _looked_up(
    im: Image.Image,
    convert: Callable[[Image.Image], NDArray[np.uint8]],
    orientation: int = 1,
) -> NDArray[np.uint8] | None:
    """``convert(im)``, then oriented, by one Rust pass with the GIL released that reads
    ``im``'s rows in place, for images of at least ``LOOKUP_MIN_PIXELS``:

    - a P image: ``convert`` (one colour for each pixel, from that pixel alone, as
      ``convert("RGB")`` and every composite give it) runs on its 256 palette indices (a
      256x1 crop of it, which keeps its palette and ``info``, holding 0..255), and each
      index is looked up in those 256 colours. Equal to ``convert(im)`` by construction.
      Pillow's ``convert("RGB")`` writes a 4-byte pixel for each index, and a composite
      converts to RGBA first: LLaVA-1.5's call on a 12 MP P image took 12.9-13.7 ms so
      (19-20 ms with a transparent index), 7.7-9.2 ms looked up (6.4-7.3 ms for its RGB
      image), on one thread of a 2-vCPU Zen 4 EPYC.
    - a CMYK image without a transparency key, whose ``convert`` is ``convert("RGB")``:
      each value is that of its own and the pixel's K in :func:`_pillow_cmyk`. LLaVA-1.5's
      call on a 12 MP CMYK image took 46 ms through Pillow's conversion, 9.2 ms so.
    - an LA image read as :func:`_la_rows` reads it, whose ``convert`` is ``convert("RGB")``
      (:func:`composite_onto_white` composites such an image before calling this): its L
      repeated, the alpha dropped.

    ``None`` for other images, or where the core does not read this Pillow's rows
    (:func:`pillow_rows_readable`)."""
    if im.width * im.height < LOOKUP_MIN_PIXELS or not pillow_rows_readable():
        return None
    la = _la_rows(im)
    if la is not None:
        return _native.rgb_composited(la, _DROP_FOURTH, orientation)
    if im.mode == "CMYK" and "transparency" not in im.info:
        return _native.rgb_composited(_rows(im), _pillow_cmyk(), orientation)
    if im.mode != "P":
        return None
    rows = _rows(im)
    indices = im.crop((0, 0, 256, 1))
    indices.frombytes(bytes(range(256)))
    colours = np.ascontiguousarray(convert(indices).reshape(768))
    return _native.rgb_from_palette(rows, colours, orientation)


def _la_rows(im: Image.Image) -> PillowRows | None:
    """An LA image's rows as the core reads them in place, where it reads this Pillow's rows
    and the installed Pillow converts every LA pixel as the core reads it
    (:func:`_la_repeats_l`): the image has no transparency key either."""
    if im.mode != "LA" or "transparency" in im.info:
        return None
    if not pillow_rows_readable() or not _la_repeats_l():
        return None
    return _rows(im)


@functools.cache
def _la_repeats_l() -> bool:
    """Whether the installed Pillow's ``convert("RGBA")`` of every LA pixel ``(l, a)`` gives
    ``(l, l, l, a)`` and its ``convert("RGB")`` ``(l, l, l)``: then the core reads an LA
    image's rows (byte 0 L, byte 3 alpha) as those conversions, and an LA image composited
    onto white is its RGBA conversion's composite by construction."""
    alpha, grey = np.divmod(np.arange(65536), 256)
    pairs = np.stack([grey, alpha], axis=-1).astype(np.uint8)
    la = Image.frombytes("LA", (256, 256), pairs.tobytes())
    want = np.stack([grey, grey, grey, alpha], axis=-1).reshape(256, 256, 4)
    rgba, rgb = np.asarray(la.convert("RGBA")), np.asarray(la.convert("RGB"))
    return np.array_equal(rgba, want) and np.array_equal(rgb, want[..., :3])


# (65536,) uint8: value ``v`` of a pixel at ``(fourth << 8) | v``, its fourth byte dropped.
_DROP_FOURTH = np.tile(np.arange(256, dtype=np.uint8), 256)


@functools.cache
def _pillow_cmyk() -> NDArray[np.uint8]:
    """(65536,) uint8: value ``v`` of a CMYK pixel whose K is ``k``, at ``(k << 8) | v``, as
    the installed Pillow's ``convert("RGB")`` gives it (each value depends on its own and
    K alone), on all 65,536 pairs at once."""
    k, v = np.divmod(np.arange(65536), 256)
    pairs = np.stack([v, v, v, k], axis=-1).astype(np.uint8)
    rgb = np.asarray(Image.frombytes("CMYK", (256, 256), pairs.tobytes()).convert("RGB"))
    return np.ascontiguousarray(rgb[..., 0].reshape(-1))


def _rgba_rows(im: Image.Image) -> PillowRows | None:
    """An RGBA image's rows as the core reads them in place, where it reads this Pillow's
    rows (:func:`pillow_rows_readable`)."""
    if im.mode == "RGBA" and pillow_rows_readable():
        return _rows(im)
    return None


def _rows(im: Image.Image) -> PillowRows:
    """``(capsule, (height, width), im.im)``: a Pillow image's rows as the core reads them
    in place, the core object kept alive by the tuple (``getim()`` loads the pixels first,
    so it comes before ``im.im``)."""
    capsule = im.getim()
    return capsule, (im.height, im.width), im.im


def has_transparency(im: Image.Image) -> bool:
    """Whether transformers' ``convert_to_rgb`` composites ``im``: an alpha band or a
    transparent colour key."""
    return "A" in im.getbands() or im.info.get("transparency") is not None


def composite_onto_white(im: Image.Image, orientation: int = 1) -> NDArray[np.uint8]:
    """(H, W, 3) uint8 RGB of ``im`` (as ``convert("RGBA")`` gives it) composited onto
    opaque white, as transformers' ``convert_to_rgb`` composites it with Pillow's
    ``alpha_composite``, then oriented.

    One Rust pass with the GIL released reads the RGBA rows (an LA image's, its L repeated
    as ``convert("RGBA")`` repeats it) in place and gives each value of
    :func:`_pillow_onto_white`, the table of Pillow's own composite of every colour value
    over every alpha: computed in vectors where the table is the one the core knows (Pillow
    13's integers, ``AlphaComposite.c``), else looked up. Pillow's chain (a white image,
    the composite, ``convert("RGB")``) held the GIL through the composite: LLaVA-1.5's call
    on a 12 MP RGBA PIL image took 163 ms with it, 8.6 ms (opaque) and 8.3-8.7 ms (a third
    translucent) now, on one thread of a 2-vCPU Zen 4 EPYC (``mmfast bench --only modes``).
    """
    rows = _la_rows(im)
    if rows is not None:
        return _native.rgb_composited(rows, _pillow_onto_white(), orientation)
    rgb = _looked_up(im, _composite_upright, orientation)
    if rgb is not None:
        return rgb
    rgba = im if im.mode == "RGBA" else im.convert("RGBA")
    rows = _rgba_rows(rgba)
    pixels = np.asarray(rgba) if rows is None else rows
    return _native.rgb_composited(pixels, _pillow_onto_white(), orientation)


def _composite_upright(im: Image.Image) -> NDArray[np.uint8]:
    """:func:`composite_onto_white` of a palette image, through its RGBA conversion (which
    :func:`_looked_up` does not take in turn)."""
    return composite_onto_white(im.convert("RGBA"))


@functools.cache
def _pillow_onto_white() -> NDArray[np.uint8]:
    """(65536,) uint8: a colour value ``c`` over alpha ``a`` at ``(a << 8) | c``, composited
    onto opaque white by the installed Pillow's ``alpha_composite`` (each value depends on
    its colour value and alpha alone), on all 65,536 pairs at once."""
    a, c = np.divmod(np.arange(65536), 256)
    pairs = Image.fromarray(np.stack([c, c, c, a], axis=-1).astype(np.uint8).reshape(256, 256, 4))
    white = Image.new("RGBA", pairs.size, (255, 255, 255, 255))
    composite = np.asarray(Image.alpha_composite(white, pairs))
    return np.ascontiguousarray(composite[..., 0].reshape(-1))


@functools.cache
def _white_keeps_opaque() -> bool:
    """Whether Pillow's composite onto white keeps every opaque colour as it is."""
    return np.array_equal(_pillow_onto_white()[255 << 8 :], np.arange(256))


def plain_rgb_or_gray(im: Image.Image) -> Image.Image:
    """``im.convert("RGB")`` as transformers' ``load_image`` converts (transparency dropped,
    not composited), leaving RGB and L images as they are (an L value is read as R, G, B)."""
    return im if im.mode in ("RGB", "L") else im.convert("RGB")


def convert_to_rgb(im: Image.Image, orientation: int = 1) -> NDArray[np.uint8]:
    """transformers' ``convert_to_rgb(im, return_numpy=True)``: (H, W, 3) uint8 RGB, then
    oriented (compositing is per pixel, so this equals orienting first)."""
    if has_transparency(im):
        return composite_onto_white(im, orientation)
    rgb = _looked_up(im, _loaded_rgb, orientation)
    return pil_to_rgb(plain_rgb_or_gray(im), orientation) if rgb is None else rgb


# The channel counts transformers recognises on an image's first or last axis.
_CHANNEL_COUNTS = (1, 3, 4)
_DATA_FORMATS = ("channels_first", "channels_last")


def array_to_rgb(
    image: Any,
    *,
    input_data_format: str | None = None,
    do_convert_rgb: bool = True,
    backend: str = "pil",
    checkerboard: bool = False,
) -> NDArray[np.uint8]:
    """An image array, or a torch tensor, as (H, W, 3) uint8 RGB (HWC), converted as
    transformers' ``backend`` class converts it (``process_image`` and ``convert_to_rgb``;
    ``checkerboard``: four channels onto Inkling 2's checkerboard, :func:`checkerboard_rgb`).

    The channel axis is ``input_data_format`` (``"channels_first"``: (C, H, W);
    ``"channels_last"``: (H, W, C)), else the last axis if it holds 1, 3 or 4 values, else
    the first: the shapes transformers reads one way read the same here, and an (H, W, C)
    array whose height is also 1, 3 or 4, which transformers would take for channels-first,
    stays channels-last (``mmfast.hf`` reads inputs exactly as transformers does). An
    (H, W) array is grayscale. With ``do_convert_rgb``, one channel is repeated into three
    and four (RGBA) are composited onto white, per backend: the PIL class in float64 then
    rounded (``alpha * c + (1 - alpha) * 255``), the torchvision class in float32 then
    truncated (``(c/255 * a/255 + 1 - a/255) * 255.999``); without it, anything but three
    channels is refused, as transformers' normalisation refuses it. Arrays and CPU tensors
    are read in place where they already are HWC RGB. Raises :class:`MmfastError` naming
    ``images`` for other dtypes or shapes.
    """
    if not isinstance(image, np.ndarray) and type(image).__module__.startswith("torch"):
        if str(image.dtype) != "torch.uint8":  # numpy has no bfloat16 to view it as
            raise MmfastError(
                f"images: expected uint8 arrays or tensors, got a tensor of dtype {image.dtype}"
            )
        image = image.detach().cpu().numpy()  # a view of a CPU tensor's memory
    if not isinstance(image, np.ndarray):
        raise MmfastError(f"images: expected an array or a tensor, got {type(image).__qualname__}")
    if image.dtype != np.uint8 or image.ndim not in (2, 3):
        raise MmfastError(
            "images: expected uint8 arrays or tensors of shape (height, width, channels), "
            f"(channels, height, width) or (height, width), got dtype {image.dtype} with "
            f"shape {image.shape}"
        )
    if image.size == 0:
        raise MmfastError(f"images: expected a non-empty image, got shape {image.shape}")
    if input_data_format is not None and input_data_format not in _DATA_FORMATS:
        raise MmfastError(
            f"input_data_format: expected 'channels_first', 'channels_last' or None, got "
            f"{input_data_format!r}"
        )
    if image.ndim == 2:
        image = image[..., None]
    elif input_data_format == "channels_first" or (
        input_data_format is None
        and image.shape[-1] not in _CHANNEL_COUNTS
        and image.shape[0] in _CHANNEL_COUNTS
    ):
        image = np.moveaxis(image, 0, -1)
    channels = image.shape[-1]
    if channels not in _CHANNEL_COUNTS:
        raise MmfastError(
            "images: expected uint8 arrays with 1, 3 or 4 channels on the last or the first "
            f"axis, got shape {image.shape} read as {channels} channels"
        )
    if channels == 3:
        return cast("NDArray[np.uint8]", image)
    if not do_convert_rgb:
        raise MmfastError(
            f"images: with do_convert_rgb off transformers takes only 3-channel images, got "
            f"{channels} channels; pass do_convert_rgb=True to convert"
        )
    if channels == 1:
        return np.repeat(image, 3, axis=2)
    if checkerboard:
        return checkerboard_rgb(image)
    return _native.rgb_composited(image, _rgba_table(backend), 1)


@functools.cache
def _rgba_table(backend: str) -> NDArray[np.uint8]:
    """(65536,) uint8: a colour value ``c`` over alpha ``a`` composited onto white, at
    ``(a << 8) | c``, as transformers' ``backend`` class computes it (see
    :func:`array_to_rgb`; checked against both over every pair)."""
    a, c = np.divmod(np.arange(65536), 256)
    if backend == "pil":
        alpha = a / 255
        composite = np.round(alpha * c + (1 - alpha) * 255)
    else:
        cf = c.astype(np.float32) * np.float32(1 / 255)
        af = a.astype(np.float32) * np.float32(1 / 255)
        composite = (cf * af + (np.float32(1) - af)) * np.float32(255.999)
    return composite.astype(np.uint8)


@functools.cache
def _checker_tables() -> NDArray[np.uint8]:
    """(2, 65536) uint8: a colour value ``c`` over alpha ``a`` on the light (204) and dark
    (153) squares of Inkling 2's checkerboard, at ``(c << 8) | a``:
    ``(c * a + grey * (255 - a) + 127) // 255`` in integers."""
    c, a = np.divmod(np.arange(65536, dtype=np.int32), 256)
    rows = [(c * a + grey * (255 - a) + 127) // 255 for grey in (204, 153)]
    return np.stack(rows).astype(np.uint8)


def checkerboard_rgb(rgba: NDArray[np.uint8]) -> NDArray[np.uint8]:
    """(H, W, 4) uint8 RGBA → (H, W, 3) RGB composited onto ``Inkling2ImageProcessor``'s
    checkerboard of 8-pixel squares, 204 where ``(y // 8 + x // 8)`` is even and 153
    elsewhere, by its integer rounding (see :func:`_checker_tables`). Exact by construction:
    the same integer arithmetic, one table lookup per value."""
    height, width = rgba.shape[:2]
    dark = (np.arange(height)[:, None] // 8 + np.arange(width)[None, :] // 8) % 2 == 1
    index = (rgba[..., :3].astype(np.uint16) << 8) | rgba[..., 3:]
    light_table, dark_table = _checker_tables()
    rgb: NDArray[np.uint8] = np.where(dark[..., None], dark_table[index], light_table[index])
    return rgb


def decode_image(
    source: ImageSource,
    *,
    apply_exif_orientation: bool = True,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> NDArray[np.uint8]:
    """Decode an image file to (H, W, 3) uint8 RGB (HWC), as transformers' PIL chain does.

    ``source`` is ``bytes``, a buffer (``bytearray``, ``memoryview``), a ``str`` path
    or an ``os.PathLike``. Formats: whatever Pillow reads (JPEG, PNG, WebP, GIF's first
    frame, BMP, TIFF, ...). EXIF orientation is applied unless
    ``apply_exif_orientation=False``; transparency is composited onto white.

    Raises ``ImageTooLargeError`` when width x height exceeds ``max_pixels``, checked
    from the header before any pixel memory is allocated, and ``ImageDecodeError``
    for corrupt, truncated or unsupported data. (Pillow also refuses images over
    twice its own ``Image.MAX_IMAGE_PIXELS``, and warns over it, whatever
    ``max_pixels`` says.)
    """
    _check_max_pixels(max_pixels)
    rgb = _png_rgb(source, apply_exif_orientation, max_pixels, composite=True)
    if rgb is not None:
        return rgb
    im, orientation = _decode(source, apply_exif_orientation, max_pixels)
    return convert_to_rgb(im, orientation)


def decode_source(
    source: ImageSource, composite_key: bool = False
) -> tuple[PillowRows | ArrowSource | NDArray[np.uint8], tuple[int, int]]:
    """The pixels of a file for a batch, as transformers' ``load_image`` reads a path
    (``exif_transpose``, then ``convert("RGB")``: transparency dropped, where
    :func:`decode_image` composites it as ``convert_to_rgb`` does), and their ``(height,
    width)``: an upright image (no EXIF rotation, the common case) as the rows of its RGB or
    L conversion, read in place (:func:`pil_source`; for an RGB or L file, where Pillow
    decoded them), which saves copying them to an RGB array; a rotated one as that array.
    ``composite_key``: the colour key ``convert("RGB")`` keeps (of a palette or an RGB or L
    file with a tRNS chunk) composited onto white, as a PIL class's ``convert_to_rgb`` then
    does (a torchvision class decodes the file without it)."""
    rgb = _png_rgb(source)
    if rgb is not None:
        return rgb, (rgb.shape[0], rgb.shape[1])
    im, orientation = _decode(source, True, DEFAULT_MAX_PIXELS)
    rows = _rgba_rows(im) if orientation == 1 and "transparency" not in im.info else None
    if rows is not None:
        # An upright RGBA file (a PNG screenshot) is read where it was decoded, its alpha
        # ignored as ``convert("RGB")`` drops it: LLaVA-1.5's call on the PNG bytes of a 12
        # MP photo took 304 -> 268 ms (the decode alone: 261 ms), of a 1920x1080 one 50.8
        # -> 48.5 ms.
        return rows, (im.height, im.width)

    def loaded(image: Image.Image) -> NDArray[np.uint8]:
        # Pillow warns converting a palette whose transparency is per entry (its alpha).
        with _quiet():
            return _loaded_rgb(image, composite_key)

    rgb = _looked_up(im, loaded, orientation)
    if rgb is not None:
        return rgb, (rgb.shape[0], rgb.shape[1])
    with _quiet() if im.mode not in ("RGB", "L") else contextlib.nullcontext():
        converted = plain_rgb_or_gray(im)
    if composite_key and has_transparency(converted):
        rgb = composite_onto_white(converted, orientation)
        return rgb, (rgb.shape[0], rgb.shape[1])
    if orientation == 1:
        return pil_source(converted), (im.height, im.width)
    rgb = pil_to_rgb(converted, orientation)
    return rgb, (rgb.shape[0], rgb.shape[1])


def _loaded_rgb(im: Image.Image, composite_key: bool = False) -> NDArray[np.uint8]:
    """``im.convert("RGB")`` (as :func:`plain_rgb_or_gray`) as an (H, W, 3) array, its
    colour key composited onto white with ``composite_key`` (as :func:`decode_source`)."""
    converted = plain_rgb_or_gray(im)
    if composite_key and has_transparency(converted):
        return composite_onto_white(converted)
    return pil_to_rgb(converted)


def _decode(
    source: ImageSource, apply_exif_orientation: bool, max_pixels: int
) -> tuple[Image.Image, int]:
    """The decoded Pillow image of ``source`` and its EXIF orientation (1 when not applied)."""
    _check_max_pixels(max_pixels)
    with _open(source) as im:
        _check_size(im, max_pixels)
        _into_block(im)
        _load(im)
        return im, _orientation(im) if apply_exif_orientation else 1


def _into_block(im: Image.Image) -> None:
    """Before Pillow loads ``im`` (opened, not loaded), give it one block for its pixels,
    offered huge pages where Linux gives them, where its loader decodes into such a block
    (an RGB, L, RGBA, CMYK or LA file without a colour key: :func:`_loads_in_place`), so
    that its rows are read in place (see module doc). Pillow's own blocks take 4 KiB pages:
    eight JPEGs of 0.1 to 12 MP decoded in 131 ms with 20,000 page faults, 102 ms with
    1,000 (through LLaVA-1.5, a 12 MP CMYK JPEG: 153 -> 133 ms; an LA PNG: 176 -> 157-159
    ms). A palette image (1 byte a pixel, 12 MB at 12 MP) gained nothing: glibc reuses
    freed memory for blocks that size."""
    in_place = im.mode in ("RGB", "L", "RGBA", "CMYK", "LA") and "transparency" not in im.info
    if in_place and _loads_in_place(im):
        im.im = Image.core.new_block(im.mode, im.size)  # type: ignore[attr-defined]
        if pillow_rows_readable():
            _native.advise_huge_pages((im.im.ptr, (im.height, im.width), im.im))


def unloaded(im: Image.Image) -> bool:
    """Whether ``im`` was opened and its pixels not yet loaded, where Pillow keeps such an
    image's core as ``_im = None`` (Pillow 12 and 13 do; False elsewhere)."""
    return getattr(im, "_im", False) is None


def load_lazy(im: Image.Image) -> None:
    """Load a PIL image given before its pixels were (``Image.open`` without ``load()``)
    as a file is (:func:`_into_block`), rather than into Pillow's 4 KiB pages when it is
    first read: Gemma 3's call on a lazily opened 12 MP JPEG took 60-63 -> 35-37 ms, what
    its bytes take. A PNG the core decodes is decoded by it (:func:`_core_png_tile`).
    Pillow's errors are left as they are. An image already loaded (its pixels, or an
    earlier frame a later one is drawn onto) is left alone, as is every image where Pillow
    does not keep an unloaded image's core as ``_im = None`` (:func:`unloaded`)."""
    if unloaded(im):
        _into_block(im)
        _core_png_tile(im)
        im.load()


class _CorePngDecoder(ImageFile.PyDecoder):
    """Pillow's decoder for a PNG tile whose pixels the core decoded (:func:`_core_png_tile`,
    which gives them as its one argument): it writes them into the image as Pillow's raw
    decoder writes pixels, and reads nothing."""

    _pulls_fd = True  # called once, with no bytes read for it

    def decode(self, buffer: object) -> tuple[int, int]:
        (pixels,) = self.args
        # Pillow's raw decoder takes any contiguous buffer, the array's memory here.
        self.set_as_raw(cast(bytes, memoryview(pixels)))
        return -1, 0


Image.register_decoder("mmfast_png", _CorePngDecoder)


def _core_png_tile(im: Image.Image) -> None:
    """Where ``im`` (opened, not loaded) is a PNG the core decodes (as :func:`lazy_png_rgb`
    reads one, from a file Pillow opened from a path too), decode its pixels now and make
    its tile hand them to Pillow (:class:`_CorePngDecoder`). ``im.load()`` then loads it as
    it loads any PNG: it fills the image, skips the rest of the pixel data to the end chunk
    (a file with any other chunk after the pixels is the core's to refuse) and closes a file
    it opened, so the image is Pillow's loaded image, with the same pixels. Loading
    a 12 MP PNG opened from a path took 218 -> 100 ms, a 1920x1080 one 42 -> 19 ms. Any
    other image, or a file the core leaves to Pillow, keeps its tile."""
    if not _plain_png(im, ("RGB", "L", "RGBA")):
        return
    data = _lazy_png_bytes(im)
    pixels = None if data is None else _native.png_pixels(data, im.width * im.height)
    if pixels is None or pixels.shape != (im.height, im.width, len(im.mode)):
        return
    _, extents, offset, _ = im.tile[0]
    im.tile = [ImageFile._Tile("mmfast_png", extents, offset, (pixels,))]


def image_size(source: ImageSource) -> tuple[int, int]:
    """``(height, width)`` of an image after EXIF orientation, from its header alone.

    No pixels are decoded. A PNG whose EXIF chunk comes after the pixel data reads as
    upright here (Pillow would have to decode to find it); :func:`decode_image` still
    applies it.
    """
    with _open(source) as im:
        w, h = im.size
        # Pillow orients a TIFF as it loads it, and gives the oriented size from the header.
        if (im.format == "PNG" and "exif" not in im.info) or isinstance(im, TiffImageFile):
            return h, w
        swapped = _orientation(im) in (5, 6, 7, 8)
        return (w, h) if swapped else (h, w)


def resize(
    image: NDArray[np.uint8] | Image.Image,
    size: tuple[int, int],
    resample: str | int = "bicubic",
    *,
    backend: str = "pil",
    antialias: bool = True,
) -> NDArray[np.uint8]:
    """Resize HWC uint8 RGB to ``size`` = (height, width), bit-identical to Pillow or to
    torchvision.

    ``backend="pil"``: equal to ``np.asarray(PIL.Image.fromarray(image).resize((w, h),
    resample=...))`` for every filter and any mix of up- and down-scaling.
    ``backend="torchvision"``: equal to ``torchvision.transforms.v2.functional.resize`` of
    the (3, H, W) uint8 tensor (torch 2.14 on x86 with AVX2/AVX-512) with the interpolation
    transformers maps the filter to (nearest -> NEAREST_EXACT; box and hamming have none)
    and ``antialias`` (bilinear and bicubic only; transformers always antialiases).
    ``image`` is an (H, W, 3) uint8 array (read in place when C-contiguous) or a PIL image in
    RGB mode, read through Pillow's Arrow export (see :func:`pil_to_rgb`). ``resample`` is a
    filter name or a PIL code 0..5. Runs with the GIL released.
    """
    if backend not in ("pil", "torchvision"):
        raise MmfastError(f"backend: expected 'pil' or 'torchvision', got {backend!r}")
    if not antialias and backend == "pil":
        raise MmfastError(
            "antialias: expected True with backend 'pil' (Pillow always antialiases), got False"
        )
    if isinstance(image, Image.Image):
        if image.mode != "RGB":
            raise MmfastError(f"image: expected a PIL image in mode RGB, got mode {image.mode}")
        image = pil_to_rgb(image)
    kernel = "pillow" if backend == "pil" else "torch" if antialias else "torch-noaa"
    return _native.resize(image, size, resample, kernel)
