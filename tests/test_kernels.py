"""The seed kernels: bit-exact against mmfast.reference and transformers, errors, threads."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import CLIP_MEAN, CLIP_STD, same_bits, ticks_during
from hypothesis import given, settings
from hypothesis import strategies as st

import mmfast
from mmfast import _native, reference

IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
LLAMA4 = ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))

channel = st.floats(-2.0, 2.0, allow_nan=False, width=64)
stds = st.floats(0.01, 4.0, allow_nan=False, width=64)
params = st.tuples(
    st.tuples(channel, channel, channel),
    st.tuples(stds, stds, stds),
    st.sampled_from([1 / 255, 1.0, 0.5, 1 / 127.5]),
)


def image_of(h: int, w: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


@settings(max_examples=150, deadline=None)
@given(h=st.integers(1, 70), w=st.integers(1, 70), p=params, seed=st.integers(0, 2**32 - 1))
def test_deinterleave_matches_reference_bit_for_bit(h, w, p, seed):
    image = image_of(h, w, seed)
    mean, std, rescale = p
    got = mmfast.deinterleave_rgb_to_planes(image, mean, std, rescale)
    assert same_bits(got, reference.deinterleave_rgb_to_planes(image, mean, std, rescale))
    assert got.flags.c_contiguous and got.flags.writeable


@settings(max_examples=150, deadline=None)
@given(
    h=st.integers(1, 40),
    w=st.integers(1, 40),
    extra=st.tuples(st.integers(0, 30), st.integers(0, 30)),
    p=params,
    seed=st.integers(0, 2**32 - 1),
)
def test_pad_matches_reference_bit_for_bit(h, w, extra, p, seed):
    image = image_of(h, w, seed)
    canvas = (h + extra[0], w + extra[1])
    mean, std, rescale = p
    got = mmfast.pad_and_normalize_to_tensor(image, canvas, mean, std, rescale)
    assert same_bits(got, reference.pad_and_normalize_to_tensor(image, canvas, mean, std, rescale))


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 1), (3, 17), (480, 641), (3024, 4032)])
def test_fixed_shapes_including_12mp(shape):
    image = image_of(*shape)
    got = mmfast.deinterleave_rgb_to_planes(image, *IMAGENET)
    assert same_bits(got, reference.deinterleave_rgb_to_planes(image, *IMAGENET))
    canvas = (shape[0] + 5, -(-shape[1] // 336) * 336)
    got = mmfast.pad_and_normalize_to_tensor(image, canvas, *LLAMA4)
    assert same_bits(got, reference.pad_and_normalize_to_tensor(image, canvas, *LLAMA4))


def test_defaults_rescale_only():
    image = image_of(5, 9)
    want = (image.astype(np.float64) / 255).astype(np.float32).transpose(2, 0, 1)
    assert same_bits(mmfast.deinterleave_rgb_to_planes(image), np.ascontiguousarray(want))
    assert same_bits(mmfast.pad_and_normalize_to_tensor(image, (5, 9)), np.ascontiguousarray(want))


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a[::2, ::3],
        lambda a: a[:, ::-1],
        lambda a: np.asfortranarray(a),
        lambda a: a.transpose(1, 0, 2),
    ],
    ids=["strided", "reversed", "fortran", "transposed"],
)
def test_non_contiguous_views_are_copied_once_and_exact(view):
    image = view(image_of(31, 45))
    assert not image.flags.c_contiguous
    got = mmfast.deinterleave_rgb_to_planes(image, *IMAGENET)
    want = mmfast.deinterleave_rgb_to_planes(np.ascontiguousarray(image), *IMAGENET)
    assert same_bits(got, want)
    canvas = (image.shape[0] + 3, image.shape[1] + 4)
    got = mmfast.pad_and_normalize_to_tensor(image, canvas, *IMAGENET)
    assert same_bits(got, reference.pad_and_normalize_to_tensor(image, canvas, *IMAGENET))


@pytest.mark.parametrize("mean_std", [IMAGENET, LLAMA4, (CLIP_MEAN, CLIP_STD)])
@pytest.mark.parametrize("shape", [(1, 1), (13, 27), (336, 336), (123, 1001)])
def test_against_transformers_rescale_and_normalize(mean_std, shape):
    """transformers' PIL-backend arithmetic: rescale (float64 -> float32), then normalize."""
    image_transforms = pytest.importorskip("transformers.image_transforms")
    from transformers.image_utils import ChannelDimension

    image = image_of(*shape)
    mean, std = mean_std
    chw = np.ascontiguousarray(image.transpose(2, 0, 1))
    rescaled = image_transforms.rescale(chw, 1 / 255, input_data_format=ChannelDimension.FIRST)
    want = image_transforms.normalize(rescaled, mean, std, input_data_format=ChannelDimension.FIRST)
    assert same_bits(mmfast.deinterleave_rgb_to_planes(image, mean, std), want)
    # Padding with black then normalising is the unfused path the pad kernel replaces.
    canvas = (shape[0] + 11, shape[1] + 6)
    padded = np.zeros((3, *canvas), np.uint8)
    padded[:, : shape[0], : shape[1]] = chw
    rescaled = image_transforms.rescale(padded, 1 / 255, input_data_format=ChannelDimension.FIRST)
    want = image_transforms.normalize(rescaled, mean, std, input_data_format=ChannelDimension.FIRST)
    assert same_bits(mmfast.pad_and_normalize_to_tensor(image, canvas, mean, std), want)


@pytest.mark.parametrize(
    "tensor",
    [
        np.zeros((0,), np.float32),
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45], np.float32),
        np.random.default_rng(1).standard_normal((3, 64, 48)).astype(np.float32),
        np.random.default_rng(2).standard_normal((20, 1176)).astype(np.float32)[::2, 5:],
    ],
    ids=["empty", "special", "chw", "strided"],
)
def test_serialisation_round_trip(tensor):
    data = mmfast.serialize_pixel_values(tensor)
    assert data == np.ascontiguousarray(tensor, dtype="<f4").tobytes()
    assert data == reference.serialize_pixel_values(tensor)
    back = mmfast.deserialize_pixel_values(data, tensor.shape)
    assert same_bits(back, np.ascontiguousarray(tensor))
    assert back.flags.writeable
    assert same_bits(reference.deserialize_pixel_values(data, tensor.shape), back)


def test_outputs_own_their_memory():
    """Outputs are new arrays: no aliasing of the input, and they survive it."""
    image = image_of(4, 4)
    out = mmfast.deinterleave_rgb_to_planes(image)
    before = out.copy()
    image[:] = 0
    del image
    assert same_bits(out, before)
    assert out.base is not None or out.flags.owndata


def test_outputs_written_into_freed_buffers_hold_only_their_values():
    """Large outputs reuse the memory of freed ones (no fresh pages to fault in): every value
    is written again, the canvas margin with black's, whatever the buffer held."""
    bright = np.full((600, 700, 3), 255, np.uint8)
    for _ in range(3):
        mmfast.deinterleave_rgb_to_planes(bright, CLIP_MEAN, CLIP_STD)  # freed at once
        image = image_of(600, 700, seed=1)
        assert same_bits(
            mmfast.deinterleave_rgb_to_planes(image, CLIP_MEAN, CLIP_STD),
            reference.deinterleave_rgb_to_planes(image, CLIP_MEAN, CLIP_STD),
        )
        mmfast.pad_and_normalize_to_tensor(bright, (672, 1008), CLIP_MEAN, CLIP_STD)
        small = image_of(300, 400, seed=2)
        assert same_bits(
            mmfast.pad_and_normalize_to_tensor(small, (672, 1008), CLIP_MEAN, CLIP_STD),
            reference.pad_and_normalize_to_tensor(small, (672, 1008), CLIP_MEAN, CLIP_STD),
        )


# Each case: (call, the argument the message must name). Run against both twins.
ERROR_CASES = [
    (lambda m: m.deinterleave_rgb_to_planes(np.zeros((2, 2, 3), np.float32)), "image"),
    (lambda m: m.deinterleave_rgb_to_planes(np.zeros((2, 2), np.uint8)), "image"),
    (lambda m: m.deinterleave_rgb_to_planes(np.zeros((2, 2, 4), np.uint8)), "image"),
    (lambda m: m.deinterleave_rgb_to_planes(np.zeros((0, 5, 3), np.uint8)), "image"),
    (lambda m: m.deinterleave_rgb_to_planes([[[0, 0, 0]]]), "image"),
    (lambda m: m.deinterleave_rgb_to_planes(np.zeros((2, 2, 3), np.uint8), (0.5, 0.5)), "mean"),
    (lambda m: m.deinterleave_rgb_to_planes(np.zeros((2, 2, 3), np.uint8), "abc"), "mean"),
    (
        lambda m: m.deinterleave_rgb_to_planes(np.zeros((2, 2, 3), np.uint8), std=[1, 1, 1, 1]),
        "std",
    ),
    (lambda m: m.deinterleave_rgb_to_planes(np.zeros((2, 2, 3), np.uint8), std=(1, 0, 1)), "std"),
    (
        lambda m: m.deinterleave_rgb_to_planes(np.zeros((2, 2, 3), np.uint8), std=(1, 1e-300, 1)),
        "std",
    ),
    (lambda m: m.deinterleave_rgb_to_planes(np.zeros((2, 2, 3), np.uint8), (np.nan, 0, 0)), "mean"),
    (lambda m: m.deinterleave_rgb_to_planes(np.zeros((2, 2, 3), np.uint8), (1e300, 0, 0)), "mean"),
    (
        lambda m: m.deinterleave_rgb_to_planes(np.zeros((2, 2, 3), np.uint8), std=(np.inf, 1, 1)),
        "std",
    ),
    (
        lambda m: m.deinterleave_rgb_to_planes(
            np.zeros((2, 2, 3), np.uint8), rescale_factor=np.inf
        ),
        "rescale_factor",
    ),
    (lambda m: m.pad_and_normalize_to_tensor(np.zeros((4, 4, 3), np.uint8), (3, 8)), "canvas_size"),
    (lambda m: m.pad_and_normalize_to_tensor(np.zeros((4, 4, 3), np.uint8), (8, 3)), "canvas_size"),
    (lambda m: m.pad_and_normalize_to_tensor(np.zeros((4, 4, 3), np.uint8), (8,)), "canvas_size"),
    (lambda m: m.pad_and_normalize_to_tensor(np.zeros((4, 4, 3), np.uint8), "big"), "canvas_size"),
    (lambda m: m.pad_and_normalize_to_tensor(np.zeros((0, 4, 3), np.uint8), (8, 8)), "image"),
    (lambda m: m.serialize_pixel_values(np.zeros(4, np.float64)), "tensor"),
    (lambda m: m.serialize_pixel_values(np.zeros(4, ">f4")), "tensor"),
    (lambda m: m.serialize_pixel_values([1.0, 2.0]), "tensor"),
    (lambda m: m.deserialize_pixel_values(b"\0" * 7, (2,)), "data"),
    (lambda m: m.deserialize_pixel_values(b"\0" * 8, (3,)), "data"),
    (lambda m: m.deserialize_pixel_values("abcd", (1,)), "data"),
    (lambda m: m.deserialize_pixel_values(b"\0" * 8, (-2, -1)), "shape"),
    (lambda m: m.deserialize_pixel_values(b"\0" * 8, (2**62, 2**62)), "shape"),
    # The reference took these (a float side, a rescale factor given as text, a zero side
    # beside sides numpy cannot multiply) or raised numpy's and Python's own errors.
    (
        lambda m: m.pad_and_normalize_to_tensor(np.zeros((4, 4, 3), np.uint8), (8.5, 8)),
        "canvas_size",
    ),
    (
        lambda m: m.pad_and_normalize_to_tensor(np.zeros((4, 4, 3), np.uint8), (2**40, 2**40)),
        "canvas_size",
    ),
    (
        lambda m: m.deinterleave_rgb_to_planes(np.zeros((2, 2, 3), np.uint8), rescale_factor="x"),
        "rescale_factor",
    ),
    (lambda m: m.deserialize_pixel_values(b"", (0, 2**62, 2**62)), "shape"),
]


@pytest.mark.parametrize("module", [mmfast, reference], ids=["native", "reference"])
@pytest.mark.parametrize(("call", "arg"), ERROR_CASES)
def test_errors_name_the_argument(module, call, arg):
    with pytest.raises(mmfast.MmfastError) as info:
        call(module)
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith(f"{arg}: expected") or str(info.value).startswith(f"{arg}: ")


def test_error_message_says_what_came_in():
    with pytest.raises(
        mmfast.MmfastError, match=r"got an array of dtype float32 with shape \(2, 2, 3\)"
    ):
        mmfast.deinterleave_rgb_to_planes(np.zeros((2, 2, 3), np.float32))
    with pytest.raises(mmfast.MmfastError, match=r"at least the image size \(4, 4\), got \(3, 8\)"):
        mmfast.pad_and_normalize_to_tensor(np.zeros((4, 4, 3), np.uint8), (3, 8))


def test_huge_canvas_fails_cleanly_without_allocating():
    image = np.zeros((1, 1, 3), np.uint8)
    with pytest.raises(mmfast.MmfastError, match="canvas_size"):
        mmfast.pad_and_normalize_to_tensor(image, (2**40, 2**40))
    with pytest.raises(MemoryError, match="canvas_size"):
        mmfast.pad_and_normalize_to_tensor(image, (2**22, 2**22))


def test_eight_threads_give_identical_results():
    images = [image_of(300 + i, 200 + 3 * i, seed=i) for i in range(8)]
    canvases = [(336 * 2, 336 * 2)] * 8

    def work(i: int) -> tuple[np.ndarray, np.ndarray, bytes]:
        planes = mmfast.deinterleave_rgb_to_planes(images[i], *IMAGENET)
        padded = mmfast.pad_and_normalize_to_tensor(images[i], canvases[i], *LLAMA4)
        return planes, padded, mmfast.serialize_pixel_values(padded)

    serial = [work(i) for i in range(8)]
    for _ in range(3):
        with ThreadPoolExecutor(8) as pool:
            concurrent = list(pool.map(work, range(8)))
        for (a, b, c), (x, y, z) in zip(serial, concurrent, strict=True):
            assert same_bits(a, x) and same_bits(b, y) and c == z


def test_gil_is_released_during_a_large_call():
    """A Python thread keeps ticking while one large kernel call runs."""
    image = image_of(3024, 4032)
    ticks, ms = ticks_during(
        lambda: mmfast.pad_and_normalize_to_tensor(image, (4032, 4032), *LLAMA4)
    )
    assert ticks > 100, f"{ticks} ticks in {ms:.1f} ms"


def test_reference_imports_without_the_native_module():
    code = (
        "import sys; sys.modules['mmfast._native'] = None\n"
        "import numpy as np, mmfast.reference as r\n"
        "out = r.deinterleave_rgb_to_planes(np.zeros((1, 1, 3), np.uint8))\n"
        "assert out.shape == (3, 1, 1)\n"
        "try:\n    mmfast_native = __import__('mmfast').serialize_pixel_values\n"
        "except ImportError:\n    print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "ok"


@pytest.mark.parametrize("shape", [(1, 3, 5), (2, 3, 301, 217), (3, 0, 4), (1, 1, 1), (2, 1, 7, 1)])
def test_area_mask_marks_each_frames_area(shape):
    """``_native.area_mask`` against numpy, twice over: a large mask's memory comes back from
    the pool holding the last mask's values, which the next one must all overwrite."""
    rng = np.random.default_rng(len(shape))
    height, width = shape[-2:]
    frames = int(np.prod(shape[:-2]))
    for _ in range(2):
        areas = [
            (int(rng.integers(0, height + 1)), int(rng.integers(0, width + 1)))
            for _ in range(frames)
        ]
        want = np.zeros((frames, height, width), np.int64)
        for k, (h, w) in enumerate(areas):
            want[k, :h, :w] = 1
        got = _native.area_mask(shape, areas)
        assert got.dtype == np.int64
        assert got.shape == shape
        assert np.array_equal(got.reshape(want.shape), want)
        del got


@pytest.mark.parametrize(
    ("shape", "areas", "arg"),
    [
        ((4,), [], "shape"),
        ((2, 3), [(3, 1)], "areas"),
        ((2, 3), [(1, 4)], "areas"),
        ((2, 2, 3), [(1, 1)], "areas"),
        ((2, 3), [(1, -1)], "areas"),
        ((2, 3), "ab", "areas"),
        ((2**40, 2**40, 2**40), [], "shape"),
    ],
)
def test_area_mask_errors_name_the_argument(shape, areas, arg):
    with pytest.raises(mmfast.MmfastError, match=rf"^{arg}: "):
        _native.area_mask(shape, areas)
