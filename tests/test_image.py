"""Decoding: bit-identical to transformers' PIL chain, sizes from headers, errors, threads."""

from __future__ import annotations

import functools
import io
import os
import resource
import struct
import subprocess
import sys
import threading
import warnings
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED, assert_same_outputs, shared_path
from PIL import Image, ImageFile, ImageOps, PngImagePlugin

import mmfast
from mmfast import _native
from mmfast.image import decode_image, image_size, pil_to_rgb

convert_to_rgb = pytest.importorskip("transformers.image_transforms").convert_to_rgb


def hf_decode(source: Path | bytes, orient: bool = True) -> np.ndarray:
    """transformers' chain, the reference for every decode."""
    with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as im:
        return convert_to_rgb(ImageOps.exif_transpose(im) if orient else im, return_numpy=True)


SHARED_IMAGES = sorted(p.name for p in (SHARED / "images").glob("*")) if SHARED.exists() else []


@pytest.mark.parametrize("name", SHARED_IMAGES or ["(shared images absent)"])
def test_shared_images_match_transformers_chain(name):
    path = shared_path("images", name)
    want = hf_decode(path)
    data = path.read_bytes()
    for source in (path, str(path), data, memoryview(data), bytearray(data)):
        got = decode_image(source)
        assert got.dtype == np.uint8 and got.flags.c_contiguous and got.flags.writeable
        assert np.array_equal(got, want), f"{name} from {type(source).__name__}"
    assert image_size(path) == want.shape[:2]
    assert np.array_equal(decode_image(path, apply_exif_orientation=False), hf_decode(path, False))


def gradient(h: int, w: int, mode: str = "RGB", seed: int = 0) -> Image.Image:
    """A smooth image with noise, so lossy codecs and palettes have real work."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) % 256], -1)
    rgb = np.clip(rgb + rng.integers(-20, 21, rgb.shape), 0, 255).astype(np.uint8)
    im = Image.fromarray(rgb)
    if mode == "RGBA":
        im.putalpha(Image.fromarray(((x * 7 + y * 3) % 256).astype(np.uint8)))
    elif mode != "RGB":
        im = im.convert(mode)
    return im


def encode(im: Image.Image, fmt: str, **params: object) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **params)
    return buf.getvalue()


def palette_with_transparency() -> bytes:
    im = gradient(23, 31).convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    return encode(im, "PNG", transparency=3)


GENERATED = {
    "jpeg_baseline": lambda: encode(gradient(67, 91), "JPEG", quality=90),
    "jpeg_progressive": lambda: encode(gradient(67, 91), "JPEG", progressive=True),
    "jpeg_gray": lambda: encode(gradient(40, 33, "L"), "JPEG"),
    "jpeg_cmyk": lambda: encode(gradient(40, 33, "CMYK"), "JPEG"),
    "jpeg_420_odd": lambda: encode(gradient(17, 29), "JPEG", subsampling=2),
    "png_rgb": lambda: encode(gradient(30, 41), "PNG"),
    "png_rgba": lambda: encode(gradient(30, 41, "RGBA"), "PNG"),
    "png_l": lambda: encode(gradient(30, 41, "L"), "PNG"),
    "png_la": lambda: encode(gradient(30, 41, "RGBA").convert("LA"), "PNG"),
    "png_p": lambda: encode(gradient(30, 41).convert("P"), "PNG"),
    "png_p_transparency": palette_with_transparency,
    "png_l_transparency": lambda: encode(gradient(30, 41, "L"), "PNG", transparency=128),
    "png_rgb_transparency": lambda: encode(gradient(30, 41), "PNG", transparency=(0, 0, 0)),
    "png_16bit": lambda: encode(
        Image.fromarray((np.arange(30 * 41).reshape(30, 41) * 53).astype(np.uint16)), "PNG"
    ),
    "webp_lossy": lambda: encode(gradient(30, 41), "WEBP", quality=80),
    "webp_lossless_rgba": lambda: encode(gradient(30, 41, "RGBA"), "WEBP", lossless=True),
    "gif": lambda: encode(gradient(30, 41).convert("P"), "GIF"),
    "bmp": lambda: encode(gradient(30, 41), "BMP"),
    "tiff": lambda: encode(gradient(30, 41), "TIFF"),
    "tiff_rgba": lambda: encode(gradient(30, 41, "RGBA"), "TIFF"),
}


@pytest.mark.parametrize("kind", sorted(GENERATED))
def test_generated_formats_match_transformers_chain(kind):
    data = GENERATED[kind]()
    want = hf_decode(data)
    assert np.array_equal(decode_image(data), want)
    assert image_size(data) == want.shape[:2]


def with_orientation(im: Image.Image, fmt: str, orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return encode(im, fmt, exif=exif)


# Pillow orients a TIFF itself, decoding it at its stored size: orientations 5 to 8 of an RGB
# one raised "tile cannot extend outside image".
@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "TIFF"])
@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("mode", ["RGB", "L"])
# Across the core's 128-pixel tiles, in its 8x8 vector blocks and the pixels past them.
@pytest.mark.parametrize("size", [(13, 22), (150, 71), (133, 260)])
def test_every_exif_orientation(fmt, orientation, mode, size):
    data = with_orientation(gradient(*size, mode, seed=orientation), fmt, orientation)
    want = hf_decode(data)
    assert np.array_equal(decode_image(data), want)
    assert np.array_equal(decode_image(data, apply_exif_orientation=False), hf_decode(data, False))
    assert image_size(data) == want.shape[:2]


def test_decoded_arrays_reuse_freed_memory():
    """A decoded image of 1 MiB or more is written into memory the pool hands back, as a
    processor's output is: the same memory once the last array is freed, holding the new
    image whole, in every orientation."""
    upright = gradient(700, 600)
    data = {o: with_orientation(upright, "JPEG", o) for o in (1, 3, 6)}
    first = decode_image(data[1])
    assert first.nbytes >= 1 << 20 and type(first.base).__name__ == "PooledOutput"
    address = first.ctypes.data
    del first  # its memory goes back to the pool
    for orientation, png in data.items():
        got = decode_image(png)
        assert got.ctypes.data == address, orientation
        assert np.array_equal(got, hf_decode(png))
        got[...] = 7  # writable, and its own memory
        del got


def test_multi_block_pil_images_are_read_in_place(monkeypatch):
    """Over Pillow's 16 MiB block size an image's rows are not one block, and Arrow cannot
    export them: ``pil_to_rgb`` reads them where they are, in every orientation, and copies
    them into one block first where the core does not read this Pillow's rows."""
    im = gradient(2100, 2100)  # 4.4 MP RGBX = 17.6 MB
    with pytest.raises(ValueError):
        im.__arrow_c_array__()
    transposes = [
        None,
        Image.Transpose.FLIP_LEFT_RIGHT,
        Image.Transpose.ROTATE_180,
        Image.Transpose.FLIP_TOP_BOTTOM,
        Image.Transpose.TRANSPOSE,
        Image.Transpose.ROTATE_270,
        Image.Transpose.TRANSVERSE,
        Image.Transpose.ROTATE_90,
    ]
    read: list[str] = []

    def spy(name: str) -> Callable[..., object]:
        real = getattr(_native, name)

        def call(*args: object) -> object:
            read.append(name)
            return real(*args)

        return call

    for name in ("rgb_from_pillow", "rgb_from_arrow"):
        monkeypatch.setattr(_native, name, spy(name))
    # An L image that size fits one block: made with smaller blocks, it takes several.
    block_size = Image.core.get_block_size()
    Image.core.set_block_size(1 << 20)
    try:
        grey = im.convert("L")
    finally:
        Image.core.set_block_size(block_size)
    for readable in (True, False):
        monkeypatch.setattr(mmfast.image, "pillow_rows_readable", functools.partial(bool, readable))
        for image in (im, grey):
            for orientation, transpose in enumerate(transposes, 1):
                turned = image if transpose is None else image.transpose(transpose)
                want = np.asarray(turned.convert("RGB"))
                read.clear()
                got = pil_to_rgb(image, orientation)
                assert np.array_equal(got, want), (readable, image.mode, orientation)
                assert read == ["rgb_from_pillow" if readable else "rgb_from_arrow"]
    # In one block, through the Arrow export, oriented in the same pass.
    small = im.crop((0, 0, 300, 200))
    for orientation in (1, 6):
        read.clear()
        want = np.asarray(small if orientation == 1 else small.transpose(transposes[5]))
        assert np.array_equal(pil_to_rgb(small, orientation), want)
        assert read == ["rgb_from_arrow"]


def test_pil_rows_are_read_in_place_in_one_block_or_several():
    """Batches read a PIL image's rows through ``getim()``: equal to ``np.asarray`` through
    every model path a first resize takes, in one Pillow block and in several."""
    from mmfast.image import pil_source, pillow_rows_readable
    from mmfast.processors import ImageProcessor

    assert pillow_rows_readable()
    rng = np.random.default_rng(0)
    llava = ImageProcessor.from_pretrained("llava-hf/llava-1.5-7b-hf")
    qwen = ImageProcessor.from_pretrained("Qwen/Qwen2.5-VL-7B-Instruct")
    for h, w in ((5, 7), (61, 83), (2100, 2100)):  # the last: 17.6 MB of RGBX, two blocks
        array = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        for im in (Image.fromarray(array), Image.fromarray(array).convert("L")):
            source = pil_source(im)
            assert len(source) == 3 and source[1] == (h, w)
            want = np.asarray(im.convert("RGB"))
            assert np.array_equal(mmfast._native.rgb_from_pillow(source), want)
            for proc in (llava, qwen):
                for backend in ("pil", "torchvision"):
                    got = proc(im, threads=2, backend=backend)["pixel_values"]
                    ref = proc(want, threads=2, backend=backend)["pixel_values"]
                    assert np.array_equal(got, ref), (h, w, im.mode, backend)


def palette_images() -> dict[str, Image.Image]:
    """P images of at least ``LOOKUP_MIN_PIXELS``: an adaptive palette, the web palette, 60
    colours with pixels whose indices lie past them, and an adaptive palette with one
    transparent index or an alpha for each entry."""
    adaptive = gradient(260, 261).convert("P", palette=Image.Palette.ADAPTIVE, colors=200)
    short = Image.frombytes("P", (261, 260), (np.arange(260 * 261) % 80).astype(np.uint8).tobytes())
    short.putpalette(list(range(180)))
    keyed, alphas = adaptive.copy(), adaptive.copy()
    keyed.info["transparency"] = 3
    alphas.info["transparency"] = bytes(range(0, 250, 5)) * 4
    return {
        "adaptive": adaptive,
        "web": gradient(260, 261).convert("P"),
        "short": short,
        "keyed": keyed,
        "alphas": alphas,
    }


@pytest.mark.parametrize("name", ["adaptive", "web", "short", "keyed", "alphas"])
def test_palette_images_are_looked_up_as_pillow_converts(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A P image's indices are read in place and looked up in its 256 colours as Pillow's
    chain converts them (``convert("RGB")``, or transformers' composite onto white of one
    with transparency): equal in every orientation, as a PIL image and as PNG and GIF bytes
    (``load_image``'s ``convert("RGB")``, and a PIL class's composite of the colour key it
    keeps)."""
    from mmfast.image import decode_source, plain_source

    looked_up = []
    real = mmfast._native.rgb_from_palette

    def count(*args: object) -> np.ndarray:
        looked_up.append(args)
        return real(*args)

    monkeypatch.setattr(mmfast._native, "rgb_from_palette", count)
    image = palette_images()[name]
    assert image.width * image.height >= mmfast.image.LOOKUP_MIN_PIXELS
    with warnings.catch_warnings():
        # Pillow's about a palette's alpha given as bytes.
        warnings.simplefilter("ignore", UserWarning)
        plain = np.asarray(image.convert("RGB"))
        assert np.array_equal(plain_source(image), plain)
        for orientation in range(1, 9):
            oriented = image.copy()
            oriented.getexif()[0x0112] = orientation
            want = convert_to_rgb(ImageOps.exif_transpose(oriented), return_numpy=True)
            got = mmfast.image.convert_to_rgb(image, orientation)
            assert np.array_equal(got, want), orientation
        for fmt in ("PNG", "GIF") if name != "alphas" else ("PNG",):
            data = encode(image, fmt)
            assert np.array_equal(decode_image(data), hf_decode(data)), fmt
            loaded = Image.open(io.BytesIO(data)).convert("RGB")
            assert np.array_equal(decode_source(data)[0], np.asarray(loaded)), fmt
            keyed = convert_to_rgb(loaded, return_numpy=True)
            assert np.array_equal(decode_source(data, composite_key=True)[0], keyed), fmt
    assert len(looked_up) >= 10


def test_palette_rows_in_several_blocks_and_small_images() -> None:
    """Indices over Pillow's 16 MiB block are read block by block; an image under
    ``LOOKUP_MIN_PIXELS`` is converted by Pillow (looking up its colours first costs more);
    the core refuses a P image where RGB, RGBA or L rows are read, and others as indices."""
    indices = (np.arange(4100 * 4200, dtype=np.uint32) * 7 % 251).astype(np.uint8)
    big = Image.frombytes("P", (4200, 4100), indices.tobytes())
    big.putpalette([v * 3 % 256 for v in range(768)])
    assert np.array_equal(
        mmfast.image.convert_to_rgb(big, 6),
        np.asarray(big.transpose(Image.Transpose.ROTATE_270).convert("RGB")),
    )
    small = gradient(20, 30).convert("P")
    assert np.array_equal(mmfast.image.convert_to_rgb(small), np.asarray(small.convert("RGB")))
    rows = (small.getim(), (20, 30), small.im)
    with pytest.raises(mmfast.MmfastError, match="image: expected an RGB, RGBA or L Pillow"):
        mmfast._native.rgb_from_pillow(rows)
    palette = np.zeros(768, np.uint8)
    rgb = gradient(20, 30)
    with pytest.raises(mmfast.MmfastError, match="image: expected a P Pillow image, got an RGB"):
        mmfast._native.rgb_from_palette((rgb.getim(), (20, 30), rgb.im), palette, 1)
    with pytest.raises(mmfast.MmfastError, match="palette: expected 768 values"):
        mmfast._native.rgb_from_palette(rows, palette[:765], 1)
    with pytest.raises(mmfast.MmfastError, match="palette: expected a contiguous array"):
        mmfast._native.rgb_from_palette(rows, np.zeros(1536, np.uint8)[::2], 1)


def rgb_of(source: object) -> np.ndarray:
    """A batch's source as (H, W, 3) RGB: an array as it is, Pillow's rows read by the core."""
    return source if isinstance(source, np.ndarray) else mmfast._native.rgb_from_pillow(source)


def test_cmyk_images_are_converted_as_pillow_converts() -> None:
    """A CMYK image of at least ``LOOKUP_MIN_PIXELS`` (a PIL image, or a JPEG made for print)
    is converted to RGB by one pass of the core, each value the one Pillow's own
    ``convert("RGB")`` gives its value and K: equal to it in every orientation, through a
    processor, and as JPEG bytes to transformers' chain; a smaller one by Pillow."""
    from mmfast.image import decode_source, plain_source

    rng = np.random.default_rng(5)
    for h, w in ((260, 261), (20, 30)):
        image = Image.frombytes("CMYK", (w, h), rng.integers(0, 256, (h, w, 4), np.uint8).tobytes())
        rgb = np.asarray(image.convert("RGB"))
        source = plain_source(image)
        assert isinstance(source, np.ndarray) == (h * w >= mmfast.image.LOOKUP_MIN_PIXELS)
        assert np.array_equal(rgb_of(source), rgb)
        for orientation in range(1, 9):
            oriented = image.copy()
            oriented.getexif()[0x0112] = orientation
            want = convert_to_rgb(ImageOps.exif_transpose(oriented), return_numpy=True)
            assert np.array_equal(mmfast.image.convert_to_rgb(image, orientation), want)
        llava = mmfast.ImageProcessor.from_pretrained("llava-hf/llava-1.5-7b-hf")
        for backend in ("pil", "torchvision"):
            got = llava(image, backend=backend)["pixel_values"]
            assert np.array_equal(got, llava(rgb, backend=backend)["pixel_values"]), backend
        data = encode(image, "JPEG", quality=95)
        assert np.array_equal(decode_image(data), hf_decode(data))
        loaded = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        assert np.array_equal(rgb_of(decode_source(data)[0]), loaded)


def test_la_images_are_read_as_pillow_converts_them() -> None:
    """An LA image (grey with alpha, as a PNG of text on a transparent background) is read
    in place, its L for all three colours: composited onto white as transformers'
    ``convert_to_rgb`` composites it in every orientation, its alpha dropped as
    ``convert("RGB")`` drops it (from ``LOOKUP_MIN_PIXELS``), through a processor, and as
    PNG bytes to transformers' chain and ``load_image``'s ``convert("RGB")``."""
    from mmfast.image import decode_source, plain_source

    rng = np.random.default_rng(6)
    llava = mmfast.ImageProcessor.from_pretrained("llava-hf/llava-1.5-7b-hf")
    for h, w in ((260, 261), (20, 30)):
        pairs = rng.integers(0, 256, (h, w, 2), np.uint8)
        pairs[: h // 2, :, 1] = 255
        image = Image.frombytes("LA", (w, h), pairs.tobytes())
        assert np.array_equal(rgb_of(plain_source(image)), np.asarray(image.convert("RGB")))
        for orientation in range(1, 9):
            oriented = image.copy()
            oriented.getexif()[0x0112] = orientation
            want = convert_to_rgb(ImageOps.exif_transpose(oriented), return_numpy=True)
            assert np.array_equal(mmfast.image.convert_to_rgb(image, orientation), want)
        composite = convert_to_rgb(image, return_numpy=True)
        for backend in ("pil", "torchvision"):
            got = llava(image, backend=backend)["pixel_values"]
            assert np.array_equal(got, llava(composite, backend=backend)["pixel_values"]), backend
        data = encode(image, "PNG")
        assert np.array_equal(decode_image(data), hf_decode(data))
        loaded = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        assert np.array_equal(rgb_of(decode_source(data)[0]), loaded)


@pytest.mark.parametrize("transparency", [None, 3])
def test_gifs_opened_as_rgb_decode_as_transformers_chain(
    transparency: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under Pillow's GIF loading strategy RGB_ALWAYS a GIF opens as RGB (RGBA with a
    transparent index) and keeps its palette, which loading would push into a block of its
    own: it is decoded as Pillow decodes it (both failed with "unrecognized image mode")."""
    from PIL import GifImagePlugin

    from mmfast.image import decode_source

    always = GifImagePlugin.LoadingStrategy.RGB_ALWAYS
    monkeypatch.setattr(GifImagePlugin, "LOADING_STRATEGY", always)
    params = {} if transparency is None else {"transparency": transparency}
    data = encode(gradient(300, 301).quantize(200), "GIF", **params)
    assert np.array_equal(decode_image(data), hf_decode(data))
    loaded = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    assert np.array_equal(rgb_of(decode_source(data)[0]), loaded)


def test_upright_rgba_files_are_read_where_decoded() -> None:
    """An upright RGBA file (lossless WebP) is decoded into one block and its rows go to the
    batch, the alpha ignored as ``load_image``'s ``convert("RGB")`` drops it (a PIL class
    then has no colour key to composite); a rotated one is converted to RGB. (An 8-bit PNG
    is decoded by the core into that RGB: ``test_png_files_decoded_by_the_core_are_pillows``.)"""
    from mmfast.image import decode_source

    image = gradient(61, 83, "RGBA")
    for data, rows in ((encode(image, "WEBP", lossless=True), True), (encode(image, "PNG"), False)):
        # WebP keeps no colour under alpha 0.
        want = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        for composite_key in (False, True):
            source, size = decode_source(data, composite_key=composite_key)
            assert isinstance(source, tuple) == rows and size == (61, 83)
            got = mmfast._native.rgb_from_pillow(source) if rows else source
            assert np.array_equal(got, want)
    rotated = with_orientation(image, "PNG", 6)
    got, size = decode_source(rotated)
    assert isinstance(got, np.ndarray) and size == (83, 61)
    assert np.array_equal(
        got, np.asarray(image.transpose(Image.Transpose.ROTATE_270).convert("RGB"))
    )


def png_chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def png_header_only(width: int, height: int) -> bytes:
    """A PNG claiming ``width`` x ``height`` whose pixel data is a few compressed zeros."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(bytes(64))
    signature = bytes([0x89]) + b"PNG\r\n" + bytes([0x1A]) + b"\n"
    return signature + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", idat) + png_chunk(b"IEND", b"")


def test_bomb_header_fails_before_allocating():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    bomb = png_header_only(100_000, 100_000)
    with pytest.raises(mmfast.ImageTooLargeError):
        decode_image(bomb)
    with pytest.raises(mmfast.ImageTooLargeError, match="max_pixels=1000"):
        decode_image(png_header_only(100, 100), max_pixels=1000)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 50_000  # 1e10 RGB pixels would be 30 GB


def test_max_pixels_boundary():
    data = encode(gradient(10, 10), "PNG")
    assert decode_image(data, max_pixels=100).shape == (10, 10, 3)
    with pytest.raises(mmfast.ImageTooLargeError):
        decode_image(data, max_pixels=99)


@pytest.mark.parametrize("kind", ["jpeg_baseline", "png_rgb", "webp_lossy", "gif"])
def test_truncated_files_raise_decode_error(kind):
    data = GENERATED[kind]()
    with pytest.raises(mmfast.ImageDecodeError) as info:
        decode_image(data[: len(data) // 2])
    assert "source" in str(info.value)


@pytest.mark.parametrize(
    "data",
    [b"", b"not an image at all", b"\x89PNG\r\n\x1a\n" + b"\0" * 40, b"\xff\xd8\xff" + b"\0" * 9],
)
def test_garbage_raises_decode_error(data):
    with pytest.raises(mmfast.ImageDecodeError):
        decode_image(data)
    with pytest.raises(mmfast.ImageDecodeError):
        image_size(data)


def test_input_messages_say_what_is_wrong(tmp_path):
    """No object reprs, URLs and empty files named as such, max_pixels checked."""
    with pytest.raises(mmfast.ImageDecodeError) as info:
        decode_image(b"\x00" * 300)
    assert str(info.value) == "source: not an image in a format Pillow reads (300 bytes)"
    with pytest.raises(mmfast.ImageDecodeError, match=r"^source: expected image data, got empty"):
        decode_image(b"")
    empty = tmp_path / "empty.jpg"
    empty.write_bytes(b"")
    with pytest.raises(mmfast.ImageDecodeError, match=f"^source: the file {empty} is empty$"):
        decode_image(empty)
    for url in ("https://example.com/cat.jpg", "HTTP://x/y.png", "data:image/png;base64,iVBOR"):
        with pytest.raises(mmfast.MmfastError, match="mmfast does not fetch URLs"):
            decode_image(url)
    for bad in (0, -5, 2.5, True):
        with pytest.raises(mmfast.MmfastError, match=r"^max_pixels: expected a positive integer"):
            decode_image(encode(gradient(4, 4), "PNG"), max_pixels=bad)


def test_pillow_bomb_warning_does_not_leak():
    """Between Pillow's warning threshold and mmfast's limit, the image decodes quietly
    (pytest turns warnings into errors here); over the limit it raises ImageTooLargeError."""
    side = int((Image.MAX_IMAGE_PIXELS * 1.2) ** 0.5)
    header = png_header_only(side, side)
    with pytest.raises(mmfast.ImageTooLargeError, match="max_pixels=1000000"):
        decode_image(header, max_pixels=1_000_000)
    assert image_size(header) == (side, side)


def test_decoding_leaves_other_warnings_alone():
    """Pillow's warnings are silenced by their module while a decode runs, so that a warning
    of another module meanwhile (another thread's) goes as its filters say: every
    UserWarning was ignored."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with mmfast.image._quiet():
            warnings.warn("another thread's", UserWarning, stacklevel=1)
            warnings.warn_explicit("Pillow's", UserWarning, "x.py", 1, module="PIL.TiffImagePlugin")
            warnings.warn_explicit("big", Image.DecompressionBombWarning, "x.py", 1, "PIL.Image")
    assert [str(w.message) for w in seen] == ["another thread's"]


def test_bad_source_type_and_mode():
    with pytest.raises(mmfast.MmfastError, match="source: expected bytes"):
        decode_image(12345)  # type: ignore[arg-type]
    with pytest.raises(mmfast.MmfastError, match="mode RGB or L, got mode RGBA"):
        pil_to_rgb(gradient(3, 3, "RGBA"))
    with pytest.raises(FileNotFoundError):
        decode_image("/nonexistent/image.jpg")


def test_eight_threads_match_serial_decodes():
    sources = [GENERATED[k]() for k in sorted(GENERATED)] * 2
    serial = [decode_image(s) for s in sources]
    with ThreadPoolExecutor(8) as pool:
        concurrent = list(pool.map(decode_image, sources))
    assert all(np.array_equal(a, b) for a, b in zip(serial, concurrent, strict=True))


def test_pillow_older_than_12_is_refused_at_import() -> None:
    """Pillow 11.2 and 11.3, which the package once allowed, crash the interpreter in their
    Arrow export of an L image made by Image.fromarray: mmfast refuses them at import."""
    code = "import PIL.Image; PIL.__version__ = '11.3.0'; import mmfast.image"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 1
    assert "ImportError: mmfast needs Pillow 12 or newer, found Pillow 11.3.0" in result.stderr


def test_a_deadline_leaves_an_image_call_as_it_is(
    tmp_path: Path, deadline_at_stat: Callable[[Path], None]
) -> None:
    """A deadline's TimeoutError while a path's file is looked up is the call's: os.path's
    checks of an empty file and of its size swallowed it, and the call ran on past it."""
    path = tmp_path / "image.png"
    Image.fromarray(np.zeros((40, 50, 3), np.uint8)).save(path)
    deadline_at_stat(path)
    proc = mmfast.ImageProcessor.from_pretrained("Qwen/Qwen2-VL-7B-Instruct")
    for call in (lambda: decode_image(path), lambda: proc([path])):
        with pytest.raises(TimeoutError, match="deadline"):
            call()


def png_chunks(data: bytes) -> list[bytes]:
    """A PNG file's chunks, each whole (length, type, body, CRC)."""
    chunks, at = [], 8
    while at < len(data):
        end = at + 12 + int.from_bytes(data[at : at + 4], "big")
        chunks.append(data[at:end])
        at = end
    return chunks


def pil_arrow_rgb(source: tuple[object, object, tuple[int, int]]) -> np.ndarray:
    schema, array, size = source
    return _native.rgb_from_arrow((schema, array), size, 1)


def load_image_rgb(data: bytes) -> np.ndarray:
    """transformers' ``load_image`` chain, which ``decode_source`` follows: transparency
    dropped by ``convert("RGB")``."""
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(ImageOps.exif_transpose(im).convert("RGB"))


def test_png_files_decoded_by_the_core_are_pillows(monkeypatch, tmp_path):
    """8-bit RGB, RGBA and grey PNGs are decoded by the core, equal to Pillow's pixels as
    ``load_image`` orients and converts them; every other PNG (and any whose chunks after
    the pixels could hold an orientation) is left to Pillow, with the same result."""
    taken: list[bool] = []
    real = _native.rgb_from_png

    def spy(*args: object) -> object:
        out = real(*args)  # type: ignore[arg-type]
        taken.append(out is not None)
        return out

    monkeypatch.setattr(_native, "rgb_from_png", spy)
    base = gradient(61, 97)
    exif = Image.Exif()
    exif[0x0112] = 6
    plain = encode(base, "PNG")
    parts = png_chunks(plain)
    xmp = '<x:xmpmeta><rdf:Description tiff:Orientation="8"/></x:xmpmeta>'
    itxt = png_chunk(b"iTXt", b"XML:com.adobe.xmp\0\0\0\0\0" + xmp.encode())
    tail = [p for p in png_chunks(encode(base, "PNG", exif=exif.tobytes())) if p[4:8] == b"eXIf"]
    frames = [base, base.transpose(Image.Transpose.ROTATE_180)]
    cases: list[tuple[str, bytes, bool]] = [
        *(
            (f"{mode} {size}", encode(gradient(*size).convert(mode), "PNG"), True)
            for mode in ("RGB", "RGBA", "L")
            for size in ((61, 97), (1, 1), (1, 300), (300, 1))
        ),
        ("RGBA translucent", encode(gradient(61, 97, "RGBA"), "PNG"), True),
        *(
            (
                f"RGBA translucent, orientation {o}",
                with_orientation(gradient(61, 97, "RGBA"), "PNG", o),
                True,
            )
            for o in (3, 6)
        ),
        *((f"orientation {o}", with_orientation(base, "PNG", o), True) for o in range(1, 9)),
        (
            "XMP orientation before the pixels",
            b"".join([plain[:8], parts[0], itxt, *parts[1:]]),
            True,
        ),
        ("EXIF after the pixels", b"".join([plain[:8], *parts[:-1], *tail, parts[-1]]), False),
        (
            "text after the pixels",
            b"".join([plain[:8], *parts[:-1], png_chunk(b"tEXt", b"k\0v"), parts[-1]]),
            False,
        ),
        ("LA", encode(base.convert("LA"), "PNG"), False),
        ("palette", encode(base.convert("P"), "PNG"), False),
        ("16-bit", encode(base.convert("I;16"), "PNG"), False),
        ("colour key", encode(base, "PNG", transparency=(0, 0, 0)), False),
        ("APNG", encode(frames[0], "PNG", save_all=True, append_images=frames[1:]), False),
    ]
    for name, data, core in cases:
        want = load_image_rgb(data)
        for source in (data, bytearray(data), tmp_path / "image.png"):
            if isinstance(source, Path):
                source.write_bytes(data)
            taken.clear()
            got, size = mmfast.image.decode_source(source)
            assert taken == [True] if core else taken in ([], [False]), (name, source)
            if isinstance(got, tuple):  # Pillow's rows, or its Arrow export
                rows = isinstance(got[1], tuple)
                got = _native.rgb_from_pillow(got) if rows else pil_arrow_rgb(got)
            assert size == want.shape[:2] and np.array_equal(got, want), name
    # decode_image takes them too, compositing transparency onto white.
    for name, data, core in cases:
        for orient in (True, False):
            taken.clear()
            got = decode_image(data, apply_exif_orientation=orient)
            assert np.array_equal(got, hf_decode(data, orient)), name
            assert taken == [True] if core else taken in ([], [False]), name
    with pytest.raises(mmfast.ImageTooLargeError, match="max_pixels=5000"):
        decode_image(plain, max_pixels=5000)
    proc = mmfast.ImageProcessor.from_pretrained("llava-hf/llava-1.5-7b-hf")
    data = encode(gradient(300, 451).convert("RGBA"), "PNG", exif=exif.tobytes())
    taken.clear()
    assert_same_outputs(proc(data), proc(load_image_rgb(data)))
    assert taken == [True]
    # A truncated file is left to Pillow, which says what is wrong with it.
    with pytest.raises(mmfast.ImageDecodeError, match="cannot decode the PNG image"):
        mmfast.image.decode_source(plain[: len(plain) // 2])


def test_png_chunks_after_the_pixels_and_bad_checksums_are_left_to_pillow(monkeypatch, tmp_path):
    """Chunks between a PNG's pixel data and its end are read by Pillow when it loads the
    file (an orientation, a transparency key, chunks it refuses), where the crate skips
    some: such a file, and one whose zlib checksum is wrong (Pillow refuses it, or with
    ``LOAD_TRUNCATED_IMAGES`` leaves its last row black), decode as Pillow alone decodes
    them, by ``decode_source`` and ``decode_image``."""
    from mmfast.image import decode_source

    def exif(orientation: int) -> bytes:
        return b"II*\0\x08\0\0\0\x01\0" + struct.pack("<HHII", 0x112, 3, 1, orientation) + bytes(4)

    rows = gradient(5, 7, "L")
    plain = encode(rows, "PNG")
    head, idat, end = png_chunks(plain)[0], png_chunks(plain)[1:-1], png_chunks(plain)[-1]
    body = b"".join(c[8:-4] for c in idat)
    xmp = b"XML:com.adobe.xmp\0\0\0" + "fr-\u00e9".encode() + b'\0\0<x tiff:Orientation="6"/>'
    after = {
        "a second eXIf": [png_chunk(b"eXIf", exif(6))],
        "XMP with a non-ASCII language": [png_chunk(b"iTXt", xmp)],
        "tRNS": [png_chunk(b"tRNS", struct.pack(">H", int(np.asarray(rows)[0, 0])))],
        "short gAMA": [png_chunk(b"gAMA", b"\0\0\1")],
    }
    files = {
        name: b"".join([plain[:8], head, png_chunk(b"eXIf", exif(3)), *idat, *chunks, end])
        for name, chunks in after.items()
    }
    files["bad Adler-32"] = b"".join(
        [plain[:8], head, png_chunk(b"IDAT", body[:-4] + bytes(4)), end]
    )
    for truncated in (False, True):
        monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", truncated)
        for name, data in files.items():
            (tmp_path / "f.png").write_bytes(data)
            for decode in (decode_image, lambda s: decode_source(s, composite_key=True)[0]):
                for source in (data, tmp_path / "f.png"):
                    outcomes = []
                    for core in (True, False):
                        if not core:
                            monkeypatch.setattr(_native, "rgb_from_png", lambda *args: None)
                        try:
                            got = decode(source)
                        except (mmfast.MmfastError, OSError) as exc:
                            outcomes.append(type(exc))
                        else:
                            outcomes.append(
                                _native.rgb_from_pillow(got) if isinstance(got, tuple) else got
                            )
                        monkeypatch.undo()
                        monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", truncated)
                    a, b = outcomes
                    same = np.array_equal(a, b) if isinstance(b, np.ndarray) else a == b
                    assert same, (name, truncated, source)


def test_png_files_damaged_anywhere_decode_as_pillow_decodes_them(monkeypatch):
    """Each byte of a PNG changed in turn: the result, or the error, is what Pillow alone
    gives (the core's decoder leaves every file it finds a fault in to Pillow)."""
    from mmfast.image import decode_source

    data = encode(gradient(9, 13, "RGBA"), "PNG", exif=Image.Exif().tobytes())
    rng = np.random.default_rng(5)

    def outcome(source: bytes) -> object:
        try:
            got, _ = decode_source(source)
        except (mmfast.MmfastError, OSError) as exc:
            return type(exc)
        return got if isinstance(got, np.ndarray) else _native.rgb_from_pillow(got)

    real = _native.rgb_from_png
    for at in range(8, len(data)):
        damaged = bytearray(data)
        damaged[at] ^= int(rng.integers(1, 256))
        monkeypatch.setattr(_native, "rgb_from_png", real)
        got = outcome(bytes(damaged))
        monkeypatch.setattr(_native, "rgb_from_png", lambda *args: None)
        want = outcome(bytes(damaged))
        if isinstance(want, np.ndarray):
            assert isinstance(got, np.ndarray) and np.array_equal(got, want), at
        else:
            assert got == want, at


def test_a_png_path_is_read_once(monkeypatch, tmp_path):
    """A PNG path is read once, and Pillow's header and the core's pixels come from those
    bytes: a file replaced while the call reads it decodes as the one it read, not as its
    pixels under the other's mode and orientation."""
    path = tmp_path / "f.png"
    first = with_orientation(gradient(20, 30), "PNG", 6)
    second = encode(gradient(20, 30, "RGBA", seed=2), "PNG")
    path.write_bytes(first)
    real = mmfast.image._check_size

    def replaced(im: Image.Image, max_pixels: int) -> None:
        real(im, max_pixels)
        path.write_bytes(second)

    monkeypatch.setattr(mmfast.image, "_check_size", replaced)
    assert np.array_equal(decode_image(path), hf_decode(first))
    path.write_bytes(first)
    got, _ = mmfast.image.decode_source(path)
    assert np.array_equal(got, load_image_rgb(first))


def test_lazy_pngs_load_with_the_cores_pixels(monkeypatch, tmp_path):
    """``load_lazy`` loads an RGB, grey or RGBA PNG opened from a path through the core
    (``png_pixels``) and Pillow's own loading around it: the image is the one Pillow loads
    (pixels, mode, text chunks before and after the pixels, several IDAT chunks), its file
    closed and its tile gone, also where its tile is a plain tuple. A PNG the core leaves to
    Pillow (interlaced, or a file rewritten since it was opened) is loaded by Pillow."""
    decoded: list[bool] = []
    real = _native.png_pixels

    def spy(*args):
        decoded.append(real(*args) is not None)
        return real(*args)

    monkeypatch.setattr(_native, "png_pixels", spy)
    rng = np.random.default_rng(4)
    pixels = rng.integers(0, 256, (300, 260, 4), dtype=np.uint8)  # about 300 KB of IDATs
    for mode in ("RGB", "L", "RGBA"):
        for text_after in (False, True):
            info = PngImagePlugin.PngInfo()
            info.add_text("before", "pixels")
            path = tmp_path / f"{mode}{text_after}.png"
            Image.fromarray(pixels).convert(mode).save(path, pnginfo=info)
            if text_after:  # a tEXt chunk between the last IDAT and IEND
                data = path.read_bytes()
                body = b"tEXtafter\0pixels"
                crc = struct.pack(">I", zlib.crc32(body))
                chunk = struct.pack(">I", len(body) - 4) + body + crc
                path.write_bytes(data[:-12] + chunk + data[-12:])
            assert path.read_bytes().count(b"IDAT") > 1
            want = Image.open(path)
            want.load()
            decoded.clear()
            lazy = Image.open(path)
            mmfast.image.load_lazy(lazy)
            assert decoded == [not text_after], (mode, text_after)
            assert lazy.fp is None and not lazy.tile and lazy.mode == want.mode
            assert lazy.info == want.info and lazy.text == want.text
            assert np.array_equal(np.asarray(lazy), np.asarray(want))
            lazy.load()  # loaded: nothing more to do
            assert np.array_equal(np.asarray(lazy), np.asarray(want))
    path = tmp_path / "plain.png"
    Image.fromarray(pixels).save(path)
    want = Image.open(path)
    want.load()
    decoded.clear()
    lazy = Image.open(path)
    lazy.tile = [tuple(lazy.tile[0])]
    mmfast.image.load_lazy(lazy)
    assert decoded == [True] and np.array_equal(np.asarray(lazy), np.asarray(want))

    def outcome(load: Callable[[Image.Image], object], im: Image.Image) -> object:
        try:
            load(im)
            return np.asarray(im).tobytes()
        except Exception as exc:
            return type(exc), str(exc)

    # Rewritten in place since Image.open: with a first pixel chunk of another length, left
    # to Pillow; of the same length (65,536 bytes), decoded as the file now is (Pillow mixes
    # the bytes it read ahead on opening with the new ones, and finds the data broken). And
    # marked interlaced (its IHDR's last byte), which the core never decodes.
    original = path.read_bytes()
    flat, other = io.BytesIO(), io.BytesIO()
    Image.new("RGBA", (260, 300), (1, 2, 3, 4)).save(flat, "PNG")
    Image.fromarray(pixels[::-1]).save(other, "PNG", compress_level=1)
    ihdr = bytearray(original[12:29])
    ihdr[-1] = 1
    interlaced = original[:12] + ihdr + struct.pack(">I", zlib.crc32(ihdr)) + original[33:]
    for opened, rewritten, by_core in (
        (original, flat.getvalue(), []),
        (original, other.getvalue(), [True]),
        (interlaced, interlaced, []),
    ):
        path.write_bytes(opened)
        with Image.open(path) as want, Image.open(path) as lazy:
            path.write_bytes(rewritten)
            decoded.clear()
            got = outcome(mmfast.image.load_lazy, lazy)
            now = Image.open(io.BytesIO(rewritten)) if by_core else want
            assert got == outcome(ImageFile.ImageFile.load, now)
            assert decoded == by_core


# Pillow leaves a pipe it opened by name unclosed, having read it into memory.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_png_paths_that_are_not_regular_files_go_to_pillow(tmp_path):
    """Only a regular file's first bytes are read to see whether it is a PNG: a pipe's
    would be gone for Pillow. A path Pillow cannot open says why, as before."""
    data = encode(gradient(21, 34), "PNG")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as pipe:
            pipe.write(data)

    got: list[np.ndarray] = []
    threads = [
        threading.Thread(target=write, daemon=True),
        threading.Thread(target=lambda: got.append(decode_image(fifo)), daemon=True),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)  # a pipe read twice hung
    assert len(got) == 1 and np.array_equal(got[0], hf_decode(data))
    with pytest.raises(mmfast.ImageDecodeError, match="null byte"):
        decode_image(str(tmp_path / "a\0.png"))
