"""mmfast.resize: bit-identical to Pillow for every filter and any mix of directions, and to
torchvision's tensor resize with ``backend="torchvision"`` (exact values in ``cargo test``;
compared with torchvision itself here when it is installed)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import PIL
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from PIL import Image

import mmfast
import mmfast.image  # which sets the order of the installed Pillow at import
from mmfast import _native

FILTERS = {
    "nearest": Image.Resampling.NEAREST,
    "box": Image.Resampling.BOX,
    "bilinear": Image.Resampling.BILINEAR,
    "hamming": Image.Resampling.HAMMING,
    "bicubic": Image.Resampling.BICUBIC,
    "lanczos": Image.Resampling.LANCZOS,
}


def pillow(image: np.ndarray, size: tuple[int, int], resample: int) -> np.ndarray:
    return np.asarray(Image.fromarray(image).resize((size[1], size[0]), resample=resample))


def make_image(h: int, w: int, seed: int, smooth: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if not smooth:
        return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x * y) % 256], -1)
    return np.clip(base + rng.integers(-8, 9, base.shape), 0, 255).astype(np.uint8)


# Sides: mostly small (fast), sometimes up to 4000 on one axis, so that strips, both
# directions per axis and mixed directions all come up.
side = st.one_of(st.integers(1, 64), st.integers(65, 400), st.integers(401, 4000))


@settings(max_examples=120, deadline=None)
@given(
    src=st.tuples(side, side).filter(lambda s: s[0] * s[1] <= 600_000),
    dst=st.tuples(side, side).filter(lambda s: s[0] * s[1] <= 600_000),
    name=st.sampled_from(sorted(FILTERS)),
    seed=st.integers(0, 2**32 - 1),
    smooth=st.booleans(),
)
def test_every_filter_matches_pillow(src, dst, name, seed, smooth):
    image = make_image(*src, seed, smooth)
    got = mmfast.resize(image, dst, name)
    assert got.dtype == np.uint8 and got.shape == (*dst, 3)
    want = pillow(image, dst, FILTERS[name])
    assert np.array_equal(got, want), f"max diff {np.abs(got.astype(int) - want).max()}"


@pytest.mark.parametrize("name", sorted(FILTERS))
@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ((480, 640), (756, 1036)),  # both up
        ((480, 640), (300, 1036)),  # height down, width up
        ((480, 640), (900, 200)),  # height up, width down
        ((3024, 4032), (1148, 868)),  # 12 MP down (Qwen-like)
        ((1080, 1920), (336, 336)),  # distorting down
        ((1, 1), (37, 53)),
        ((40, 3000), (28, 2996)),  # extreme aspect ratio, nearly unchanged
        ((2000, 3), (17, 1)),
    ],
)
def test_fixed_cases_match_pillow(name, src, dst):
    image = make_image(*src, seed=sum(src), smooth=True)
    assert np.array_equal(mmfast.resize(image, dst, name), pillow(image, dst, FILTERS[name]))


def test_pil_codes_pil_images_and_views():
    image = make_image(50, 70, 1, smooth=False)
    want = pillow(image, (33, 90), Image.Resampling.LANCZOS)
    assert np.array_equal(mmfast.resize(image, (33, 90), 1), want)
    assert np.array_equal(mmfast.resize(image, (33, 90), "LANCZOS"), want)
    assert np.array_equal(mmfast.resize(Image.fromarray(image), (33, 90), "lanczos"), want)
    view = make_image(100, 140, 2, smooth=False)[::2, ::2]
    assert np.array_equal(
        mmfast.resize(view, (21, 9)), pillow(np.ascontiguousarray(view), (21, 9), 3)
    )
    assert np.array_equal(mmfast.resize(image, (50, 70)), image)  # same size: a copy


@pytest.mark.parametrize(
    ("kwargs", "arg"),
    [
        ({"size": (0, 5)}, "size"),
        ({"size": (5,)}, "size"),
        ({"size": (-1, 5)}, "size"),
        ({"size": (5, 5), "resample": "cubic"}, "resample"),
        ({"size": (5, 5), "resample": 7}, "resample"),
        ({"size": (5, 5), "resample": None}, None),
        ({"size": (5, 5), "backend": "torch"}, "backend"),
        ({"size": (5, 5), "antialias": False}, "antialias"),
        ({"size": (5, 5), "resample": "box", "backend": "torchvision"}, "resample"),
        ({"size": (5, 5), "resample": 1, "backend": "torchvision", "antialias": False}, "mode"),
    ],
)
def test_argument_errors(kwargs, arg):
    image = make_image(4, 4, 0, smooth=False)
    if arg is None:
        assert mmfast.resize(image, **kwargs).shape == (5, 5, 3)
        return
    with pytest.raises(mmfast.MmfastError, match=f"^{arg}: expected"):
        mmfast.resize(image, **kwargs)


def test_bad_images():
    with pytest.raises(mmfast.MmfastError, match=r"^image: expected"):
        mmfast.resize(np.zeros((4, 4, 4), np.uint8), (2, 2))
    with pytest.raises(mmfast.MmfastError, match="mode RGB, got mode L"):
        mmfast.resize(Image.new("L", (4, 4)), (2, 2))


def test_eight_threads_match_serial():
    cases = [
        (make_image(300 + 7 * i, 500 - 9 * i, i, smooth=i % 2 == 0), (100 + 31 * i, 640 - 13 * i))
        for i in range(8)
    ]
    names = sorted(FILTERS)
    serial = [mmfast.resize(img, size, names[i % 6]) for i, (img, size) in enumerate(cases)]
    with ThreadPoolExecutor(8) as pool:
        futures = [
            pool.submit(mmfast.resize, img, size, names[i % 6])
            for i, (img, size) in enumerate(cases)
        ]
        concurrent = [f.result() for f in futures]
    assert all(np.array_equal(a, b) for a, b in zip(serial, concurrent, strict=True))


TORCH_FILTERS = ["nearest", "bilinear", "bicubic", "lanczos"]


# Widening 4 pixels to 3402: output 850 is whole (1.0) in exact arithmetic and a rounding
# short with the float32 scale; torch's fused multiply-add reads pixel 1 (found by hypothesis).
@settings(max_examples=60, deadline=None)
@given(src=st.tuples(side, side), dst=st.tuples(side, side), seed=st.integers(0, 2**16))
@example(src=(1, 4), dst=(1, 3402), seed=0)
@example(src=(10, 8), dst=(705, 1588), seed=1)
def test_torchvision_backend_matches_torchvision(src, dst, seed):
    """``tvF.resize`` of the (3, H, W) uint8 tensor with transformers' mode for each filter
    (nearest -> NEAREST_EXACT), with and without antialiasing."""
    pytest.importorskip("torchvision")
    import torch
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.v2 import functional as tvf

    modes = {
        "nearest": InterpolationMode.NEAREST_EXACT,
        "bilinear": InterpolationMode.BILINEAR,
        "bicubic": InterpolationMode.BICUBIC,
        "lanczos": InterpolationMode.LANCZOS,
    }
    image = make_image(*src, seed, smooth=seed % 2 == 0)
    tensor = torch.from_numpy(image).permute(2, 0, 1).contiguous()
    for name in TORCH_FILTERS:
        for antialias in (True, False) if name in ("bilinear", "bicubic") else (True,):
            if dst == (1, 1) and src[0] > 1 and name != "nearest":
                continue  # torch's AVX2 kernels fail an internal assert for a 1x1 output
            want = tvf.resize(tensor, list(dst), interpolation=modes[name], antialias=antialias)
            got = mmfast.resize(image, dst, name, backend="torchvision", antialias=antialias)
            assert np.array_equal(got, want.permute(1, 2, 0).numpy()), (name, antialias)


FLOAT_MODES = {0: "NEAREST_EXACT", 2: "BILINEAR", 3: "BICUBIC"}


def tv_resize(tensor, size, code):
    """torchvision's ``resize`` of a (3, H, W) or (1, 3, H, W) tensor without antialiasing,
    with the mode transformers maps PIL ``code`` to."""
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.v2 import functional as tvf

    mode = getattr(InterpolationMode, FLOAT_MODES[code])
    return tvf.resize(tensor, list(size), interpolation=mode, antialias=False)


@settings(max_examples=60, deadline=None)
@given(
    src=st.tuples(side, side).filter(lambda s: s[0] * s[1] <= 600_000),
    dst=st.tuples(side, side).filter(lambda s: s[0] * s[1] <= 600_000),
    seed=st.integers(0, 2**16),
    one_thread=st.booleans(),
)
@example(src=(1, 4), dst=(1, 3402), seed=0, one_thread=True)  # as for the uint8 resize
def test_float_resize_matches_torch(src, dst, seed, one_thread):
    """``_native.resize_float``: torchvision's resize of float32 planes (normalised-like
    values, the Phi-4-multimodal global view's input), on one torch thread and on several,
    bit for bit."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")

    rng = np.random.default_rng(seed)
    planes = (rng.standard_normal((3, *src)) * 1.5).astype(np.float32)
    threads = torch.get_num_threads()
    torch.set_num_threads(1 if one_thread else max(threads, 2))
    try:
        for code in FLOAT_MODES:
            want = tv_resize(torch.from_numpy(planes), dst, code).numpy()
            got = _native.resize_float(planes, dst, code, one_thread)
            assert got.dtype == np.float32 and got.shape == want.shape
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (
                FLOAT_MODES[code],
                int((got.view(np.uint32) != want.view(np.uint32)).sum()),
            )
    finally:
        torch.set_num_threads(threads)


@settings(max_examples=60, deadline=None)
@given(src=st.tuples(side, side), dst=st.tuples(side, side), seed=st.integers(0, 2**16))
def test_torch_float_kernel_matches_molmo2s_resize(src, dst, seed):
    """``kernel="torch-float"``: ``tvF.resize(image.float(), ..., antialias=False)`` then
    ``.round().clamp(0, 255).to(torch.uint8)``, as Molmo2 resizes (torch on two threads or
    more, its default on a machine of several CPUs; on one thread torch rounds some values
    differently: 1x2 to 1x185 bilinear gives 226.50002 at x=129, rounded to 227, where two
    threads give 226.5, rounded to 226)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")

    image = make_image(*src, seed, smooth=seed % 2 == 0)
    tensor = torch.from_numpy(image).permute(2, 0, 1).contiguous()[None].float()
    threads = torch.get_num_threads()
    torch.set_num_threads(max(threads, 2))
    try:
        for code in FLOAT_MODES:
            want = tv_resize(tensor, dst, code).round().clamp(0, 255).to(torch.uint8)[0]
            got = _native.resize(image, dst, code, "torch-float")
            assert np.array_equal(got, want.permute(1, 2, 0).numpy()), FLOAT_MODES[code]
    finally:
        torch.set_num_threads(threads)


def test_float_resize_arguments():

    planes = np.zeros((3, 4, 5), np.float32)
    with pytest.raises(mmfast.MmfastError, match=r"^resample: expected"):
        _native.resize_float(planes, (2, 2), 1)
    with pytest.raises(mmfast.MmfastError, match=r"^planes: expected"):
        _native.resize_float(planes[:2], (2, 2), 2)
    with pytest.raises(mmfast.MmfastError, match=r"^size: expected"):
        _native.resize_float(planes, (0, 2), 2)
    same = _native.resize_float(planes + 1, (4, 5), 3)
    assert np.array_equal(same, planes + 1)
    strided = np.ascontiguousarray(np.arange(3 * 8 * 10, dtype=np.float32).reshape(3, 8, 10))
    assert np.array_equal(
        _native.resize_float(strided[:, ::2, ::2], (3, 3), 2),
        _native.resize_float(np.ascontiguousarray(strided[:, ::2, ::2]), (3, 3), 2),
    )


@pytest.fixture
def pillow_12() -> Iterator[None]:
    """Resizes in the order of Pillow 12 and older, as mmfast.image sets it at import where one
    is installed (Python 3.10 has no Pillow 13), then back to the installed one's."""
    _native.follow_pillow(12)
    try:
        yield
    finally:
        _native.follow_pillow(int(PIL.__version__.split(".")[0]))


def horizontal_first(image: np.ndarray, size: tuple[int, int], resample: int) -> np.ndarray:
    """Pillow 12's resize: the horizontal pass, then the vertical one (each alone runs the same
    in every Pillow)."""
    return pillow(pillow(image, (image.shape[0], size[1]), resample), size, resample)


@pytest.mark.parametrize("name", ["bilinear", "bicubic", "lanczos", "box", "hamming"])
def test_pillow_12_runs_the_horizontal_pass_first(name: str, pillow_12: None) -> None:
    """Pillow 13 runs the vertical pass first where the height shrinks by more than twice the
    width, Pillow 12 never: mmfast followed 13 whatever was installed, so under Pillow 12.3
    69% of Qwen2-VL's values for a 427x640 image were equal to transformers'."""
    image = make_image(427, 640, seed=0, smooth=False)
    for size in [(420, 644), (300, 700), (200, 320), (900, 500)]:
        want = horizontal_first(image, size, FILTERS[name])
        assert np.array_equal(mmfast.resize(image, size, name), want), size
    # The order matters here: Pillow 13 runs the vertical pass first.
    _native.follow_pillow(13)
    assert not np.array_equal(mmfast.resize(image, (420, 644), name), want)
