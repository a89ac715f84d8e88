"""``backend="torchvision"`` against transformers' torchvision classes (torch 2.14,
torchvision 0.29, transformers 5.24, x86 with AVX2/AVX-512).

Without torch, every case of ``torchvision_cases`` is checked against the digests in
``goldens/torchvision.json`` (dtype, shape and a hash of the bytes of every output). With torch
installed, the same cases and random sizes are compared with transformers itself, value by
value.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import numpy as np
import pytest
from conftest import (
    SHARED,
    assert_same_outputs,
    builtin_dict,
    make_image,
    same_bits,
    within_intermediate_limit,
)
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from parity_table import as_outputs, step3p7_tokens
from PIL import Image
from torchvision_cases import (
    GOLDENS,
    MODELS,
    VIDEO_CASES,
    VIDEO_MODELS,
    Case,
    Model,
    Override,
    VideoCase,
    cases,
    digest,
    hf_torchvision,
    hf_video,
    input_digest,
    load_image,
    ours,
    ours_video,
)

import mmfast
from mmfast import MmfastError

GOLDEN = json.loads(GOLDENS.read_text())["cases"]
VIDEOS = json.loads(GOLDENS.read_text())["videos"]
CASES = list(cases())


def images_or_skip(case: Case) -> list[Image.Image]:
    images = [load_image(name) for name in case.images]
    if any(image is None for image in images):
        pytest.skip(f"optional test data not found: {SHARED / 'images'} (see README, 'Test data')")
    return [image for image in images if image is not None]


def test_goldens_cover_every_case() -> None:
    assert sorted(GOLDEN) == sorted(case.id for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_matches_goldens(case: Case) -> None:
    want = GOLDEN[case.id]
    if input_digest(images_or_skip(case)) != want["input"]:
        pytest.skip("this Pillow decodes the file differently from the golden's")
    if "error" in want:
        with pytest.raises(MmfastError):
            ours(case)
        return
    got = digest(ours(case, want["bfloat16"]), want["bfloat16"])
    assert list(got.items()) == list(want["outputs"].items())


def compare_live(case: Case) -> None:
    """mmfast equals transformers' torchvision class on ``case``, or both refuse it."""
    pytest.importorskip("torchvision")
    try:
        want, bfloat16 = hf_torchvision(case)
    except (ValueError, RuntimeError, TypeError, NotImplementedError):
        with pytest.raises(MmfastError):
            ours(case)
        return
    assert_same_outputs(ours(case, bfloat16), want)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_matches_transformers(case: Case) -> None:
    images_or_skip(case)
    compare_live(case)


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.model_id.rsplit("/", 1)[-1])
@settings(max_examples=10, deadline=None)
@given(
    height=st.integers(1, 1500),
    width=st.integers(1, 1500),
    kind=st.sampled_from(["noise", "smooth"]),
)
def test_random_sizes_match_transformers(model: Model, height: int, width: int, kind: str) -> None:
    assume(within_intermediate_limit(model.model_id, height, width, backend="torchvision"))
    compare_live(Case(model, Override({}), (f"{kind}-{height}x{width}",)))


def test_backends_differ_where_transformers_does() -> None:
    """The two backends resize and normalise differently: the default is the PIL class."""
    image = make_image("noise", 300, 200, 1)
    proc = mmfast.ImageProcessor.from_pretrained("Qwen/Qwen2-VL-7B-Instruct")
    pil = proc(image).pixel_values
    torchvision = proc(image, backend="torchvision").pixel_values
    assert pil.shape == torchvision.shape
    assert not np.array_equal(pil, torchvision)
    again = mmfast.ImageProcessor.from_pretrained(
        "Qwen/Qwen2-VL-7B-Instruct", backend="torchvision"
    )(image)
    assert same_bits(again.pixel_values, torchvision)


@pytest.mark.parametrize(
    ("model_id", "overrides", "match"),
    [
        ("Qwen/Qwen2-VL-7B-Instruct", {"resample": 4}, "resample: expected 0, 1, 2 or 3"),
        ("llava-hf/llava-1.5-7b-hf", {"resample": 5}, "resample: expected 0, 1, 2 or 3"),
        ("moonshotai/Kimi-VL-A3B-Instruct", {}, "backend: .* has no torchvision class"),
    ],
)
def test_refusals_name_the_setting(model_id: str, overrides: dict[str, Any], match: str) -> None:
    with pytest.raises(MmfastError, match=match):
        mmfast.ImageProcessor.from_pretrained(model_id, backend="torchvision", **overrides)


@pytest.mark.parametrize("case", VIDEO_CASES, ids=lambda case: case.id)
def test_videos_match_goldens(case: VideoCase) -> None:
    want = VIDEOS[case.id]
    if "error" in want:
        with pytest.raises(MmfastError):
            ours_video(case)
        return
    assert list(digest(ours_video(case), bfloat16=False).items()) == list(want.items())


def compare_video_live(case: VideoCase) -> None:
    """mmfast equals transformers' video processor on ``case``, or both refuse it."""
    pytest.importorskip("torchvision")
    try:
        want = hf_video(case)
    except ValueError:
        with pytest.raises(MmfastError):
            ours_video(case)
        return
    assert_same_outputs(ours_video(case), want)


@pytest.mark.parametrize("case", VIDEO_CASES, ids=lambda case: case.id)
def test_videos_match_transformers(case: VideoCase) -> None:
    compare_video_live(case)


@pytest.mark.parametrize("model_id", VIDEO_MODELS)
@settings(max_examples=8, deadline=None)
@given(
    frames=st.integers(2, 40),
    # HF reads a (T, H, W, 3) clip with H of 1 or 3 as channels-first.
    height=st.integers(4, 700),
    width=st.integers(1, 700),
    rate=st.sampled_from([10.0, 24.0, 29.97, 60.0]),
    options=st.sampled_from(
        [
            {},
            {"do_sample_frames": True, "fps": 2},
            {"do_sample_frames": True, "fps": 0.5},
            {"do_sample_frames": True, "num_frames": 6, "fps": None},
            {"do_sample_frames": False},
        ]
    ),
)
def test_random_videos_match_transformers(
    model_id: str, frames: int, height: int, width: int, rate: float, options: dict[str, Any]
) -> None:
    compare_video_live(VideoCase(model_id, frames, height, width, rate, options))


def hf_class(model_id: str) -> Any:
    from torchvision_cases import family_of

    module, name = family_of(model_id).hf_torchvision.rsplit(".", 1)  # type: ignore[union-attr]
    return getattr(importlib.import_module(f"transformers.models.{module}"), name)


@pytest.mark.parametrize(
    ("overrides", "error"),
    [({"do_pad": False}, KeyError), ({"do_resize": False}, UnboundLocalError)],
)
def test_deepseek_hybrid_needs_resize_and_pad(overrides: dict[str, Any], error: type) -> None:
    """transformers' torchvision hybrid class fails without do_pad or do_resize (its PIL class
    runs): mmfast refuses with MmfastError."""
    pytest.importorskip("torchvision")
    model_id = "deepseek-community/deepseek-vl-7b-chat"
    image = Image.fromarray(make_image("noise", 40, 90, 1))
    hf = hf_class(model_id).from_dict(builtin_dict(model_id) | overrides)
    with pytest.raises(error):
        hf([image], return_tensors="pt")
    proc = mmfast.ImageProcessor.from_pretrained(model_id, backend="torchvision", **overrides)
    with pytest.raises(MmfastError, match="do_resize, do_pad"):
        proc(image)


@pytest.mark.parametrize(
    ("model_id", "settings"),
    [
        ("deepseek-community/Janus-Pro-1B", {"image_mean": [0.1, 0.2, 0.3]}),
        ("deepseek-community/deepseek-vl-7b-chat", {"resample": 0, "high_res_resample": 1}),
        ("liuhaotian/llava-v1.5-7b", {"image_mean": [1.2, -0.1, 0.5]}),
        ("HuggingFaceM4/idefics-9b", {"image_size": 100, "size": {"height": 90, "width": 80}}),
        ("stepfun-ai/Step-3.7-Flash", {"patch_size": 300, "max_image_size": 800}),
    ],
)
def test_call_settings_match_transformers(model_id: str, settings: dict[str, Any]) -> None:
    """A call's settings on the torchvision classes, as transformers applies them over the
    instance's (pad colours fixed when it was built, resample 0 as nearest here)."""
    pytest.importorskip("torchvision")
    import torch

    images = [make_image("noise", 40, 900, 1), make_image("smooth", 700, 70, 2)]
    pils = [Image.fromarray(image) for image in images]
    hf = hf_class(model_id).from_dict(builtin_dict(model_id))
    out = as_outputs(hf(pils, return_tensors="pt", **settings))
    want = {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in out.items()}
    proc = mmfast.ImageProcessor.from_pretrained(model_id, backend="torchvision")
    assert_same_outputs(proc(images, **settings), want)


@settings(max_examples=60, deadline=None)
@given(height=st.integers(1, 5000), width=st.integers(1, 5000))
def test_step3p7_tokens_match_the_processor(height: int, width: int) -> None:
    """Step3p7Processor.replace_image_token's tokens for transformers' outputs (and its
    get_number_of_image_patches) equal mmfast's count and patch layout, without pixels."""
    pytest.importorskip("torchvision")
    model_id = "stepfun-ai/Step-3.7-Flash"
    hf = hf_class(model_id).from_dict(builtin_dict(model_id))
    proc = mmfast.ImageProcessor.from_pretrained(model_id, backend="torchvision")
    try:
        layout = proc.config.patch_layout(height, width)
    except MmfastError:
        with pytest.raises(ZeroDivisionError):
            hf.get_number_of_image_patches(height, width)
        return
    assert hf.get_number_of_image_patches(height, width) == layout.patches_x * layout.patches_y
    # The processor's expansion, on the outputs the class gives such an image (a black one).
    image = Image.new("RGB", (width, height))
    outputs = dict(hf([image], return_tensors="pt"))
    tokens = step3p7_tokens(outputs, {})
    assert proc.num_image_tokens(height, width) == tokens
    assert proc.plan(height, width).output_shapes["pixel_values_local"][0] == int(
        outputs["num_local_patches"][0]
    )
