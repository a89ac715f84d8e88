"""Apertus 1.5, Cohere North Micro Vision, Cosmos3 Edge, Hy4, MiniMax-M3 and Muse Glimmer: what
the parity table does not reach.

Token counts against transformers' own counting for any size (``get_number_of_image_patches``
and the processors' arithmetic, which vLLM uses to size prompts), the torchvision-only classes'
counts against their processors' ``replace_image_token`` (the parity table checks counts on the
PIL side only), the geometry functions against transformers', and the settings mmfast refuses.
The torchvision-only classes need torch and torchvision; the rest runs without them.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import numpy as np
import pytest
from conftest import assert_same_outputs, builtin_dict, make_image, same_bits
from hypothesis import given, settings
from hypothesis import strategies as st
from parity_table import (
    APERTUS,
    COSMOS3_EDGE,
    HY4,
    MINIMAX_M3,
    MUSE_GLIMMER,
    NORTH,
    TABLE,
)
from PIL import Image

import mmfast
from mmfast import MmfastError, UnsupportedModelError, models
from mmfast.models.config import load_video_config

TORCH = all(importlib.util.find_spec(m) is not None for m in ("torch", "torchvision"))
needs_torch = pytest.mark.skipif(not TORCH, reason="transformers builds this class with torch")
TORCHVISION_ONLY = [APERTUS, MINIMAX_M3, MUSE_GLIMMER]
SIZES = st.tuples(st.integers(1, 12000), st.integers(1, 12000))


def hf(path: str) -> Any:
    """A transformers class by ``module.Class`` under ``transformers.models``."""
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(f"transformers.models.{module}"), name)


def hf_image_processor(model_id: str, backend: str) -> Any:
    """transformers' class for a built-in (``backend`` "pil" or "torchvision"), from its
    config dict."""
    family = models.config.select_family(models.config.read_source(model_id))[0]
    path = family.hf_pil if backend == "pil" else family.hf_torchvision
    assert path is not None
    return hf(path).from_dict(builtin_dict(model_id))


def hf_tokens(model_id: str, processor: Any, height: int, width: int) -> int:
    """The model's processor's count for a (height, width) image, from its image
    processor's ``get_number_of_image_patches``, as its ``_get_num_multimodal_tokens`` counts."""
    patches = processor.get_number_of_image_patches(height, width, {})
    if model_id == HY4:
        processing = hf("hy_v4_vl.processing_hy_v4_vl.HYV4VLProcessor")
        return int(processing._num_frame_tokens(*patches, processor.merge_size))
    if model_id == APERTUS:
        return int(patches)
    return int(patches) // processor.merge_size**2


@pytest.mark.parametrize("model_id", [NORTH, COSMOS3_EDGE, HY4])
@settings(max_examples=150, deadline=None)
@given(size=SIZES)
def test_token_counts_match_transformers(model_id: str, size: tuple[int, int]) -> None:
    """Any size, without pixels: the processors' counts from ``get_number_of_image_patches``
    (the PIL classes, which need no torch), or both refuse the size."""
    processor = hf_image_processor(model_id, "pil")
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    try:
        want = hf_tokens(model_id, processor, *size)
    except ValueError:
        with pytest.raises(MmfastError, match="aspect ratio"):
            proc.num_image_tokens(*size)
        return
    assert proc.num_image_tokens(*size) == want


@needs_torch
@pytest.mark.parametrize("model_id", TORCHVISION_ONLY)
@settings(max_examples=150, deadline=None)
@given(size=SIZES)
def test_torchvision_only_token_counts_match_transformers(
    model_id: str, size: tuple[int, int]
) -> None:
    processor = hf_image_processor(model_id, "torchvision")
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    try:
        want = hf_tokens(model_id, processor, *size)
    except ValueError:
        with pytest.raises(MmfastError, match="aspect ratio"):
            proc.num_image_tokens(*size)
        return
    assert proc.num_image_tokens(*size) == want


@needs_torch
@pytest.mark.parametrize("row", [r for r in TABLE if r.model_id in TORCHVISION_ONLY], ids=str)
def test_torchvision_only_tokens_match_the_processors(row: Any) -> None:
    """What the processor's ``replace_image_token`` inserts for the image transformers'
    class made, for every override of the row (the PIL side checks this in test_families)."""
    assert row.tokens is not None
    images = [make_image("noise", *size, seed=1) for size in [(150, 97), (61, 530), (1080, 1920)]]
    for settings_ in [{}, *(override.ours for override in row.overrides)]:
        processor = hf(row.family.hf_torchvision).from_dict(builtin_dict(row.model_id) | settings_)
        proc = mmfast.ImageProcessor.from_pretrained(row.model_id, **settings_)
        for image in images:
            try:
                out = processor([Image.fromarray(image)], return_tensors="np")
            except (ValueError, RuntimeError):
                continue
            want = row.tokens(dict(out), settings_)
            assert proc.num_image_tokens(*image.shape[:2]) == want, (settings_, image.shape)


@needs_torch
@settings(max_examples=300, deadline=None)
@given(size=st.tuples(st.integers(1, 9000), st.integers(1, 9000)), cap=st.integers(1, 9000))
def test_muse_smart_resize_is_transformers(size: tuple[int, int], cap: int) -> None:
    """The grid closest to the aspect ratio under the token cap, ties included."""
    theirs = importlib.import_module(
        "transformers.models.muse_glimmer.image_processing_muse_glimmer"
    ).smart_resize
    assert models.muse_glimmer.smart_resize(*size, 28, cap) == theirs(*size, 28, cap)


@needs_torch
@settings(max_examples=300, deadline=None)
@given(
    size=st.tuples(st.integers(1, 5000), st.integers(1, 5000)),
    frames=st.integers(1, 300),
    budget=st.sampled_from([33554432, 1 << 20, 50000, 1024]),
    cap=st.sampled_from([1024 * 1024, 4096, 1]),
)
def test_hy_video_smart_resize_is_transformers(
    size: tuple[int, int], frames: int, budget: int, cap: int
) -> None:
    """The largest aligned frame under the clip's token budget and the frame cap."""
    cls = hf("hy_v4_vl.video_processing_hy_v4_vl.HYV4VLVideoProcessor")
    try:
        want = cls.smart_resize(*size, frames, factor=32, max_pixels=budget, max_image_size=cap)
    except ValueError:
        with pytest.raises(MmfastError):
            models.hy_v4_vl.video_smart_resize(
                *size, frames, factor=32, max_pixels=budget, max_image_size=cap
            )
        return
    got = models.hy_v4_vl.video_smart_resize(
        *size, frames, factor=32, max_pixels=budget, max_image_size=cap
    )
    assert got == want


@pytest.mark.parametrize("model_id", TORCHVISION_ONLY)
def test_torchvision_only_classes_answer_to_either_backend(model_id: str) -> None:
    """transformers has one class: "pil" (the default) gives its outputs too."""
    images = [make_image("noise", 300, 200, 1), make_image("smooth", 45, 700, 2)]
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    default, torchvision = proc(images), proc(images, backend="torchvision")
    assert list(default) == list(torchvision)
    for key in default:
        assert same_bits(np.asarray(default[key]), np.asarray(torchvision[key])), key


def test_box_and_hamming_are_refused_where_only_torchvision_resizes() -> None:
    for model_id in TORCHVISION_ONLY:
        for resample in (4, 5):
            with pytest.raises(MmfastError, match="resample"):
                mmfast.ImageProcessor.from_pretrained(model_id, resample=resample)


def test_cosmos3_edge_refuses_what_the_engine_cannot_lay_out() -> None:
    """Image rows (y, x, channel, time) with time repeated: no such layout, so the config
    says so (transformers' own code serves it through mmfast.hf); the video class itself
    refuses any temporal_patch_size but 1."""
    with pytest.raises(UnsupportedModelError, match="temporal_patch_size=2"):
        mmfast.ImageProcessor.from_pretrained(COSMOS3_EDGE, temporal_patch_size=2)
    with pytest.raises(MmfastError, match="temporal_patch_size"):
        load_video_config(COSMOS3_EDGE, temporal_patch_size=2)


def test_hy_reads_no_resample() -> None:
    """HYV4VLImageProcessor resizes bicubic whatever its resample says."""
    image = make_image("noise", 300, 200, 1)
    proc = mmfast.ImageProcessor.from_pretrained(HY4)
    for backend in ("pil", "torchvision"):
        want = proc(image, backend=backend)
        lanczos = mmfast.ImageProcessor.from_pretrained(HY4, resample=1, backend=backend)
        assert_same_outputs(lanczos(image), dict(want))


def test_minimax_stale_size_reads_as_the_class_default() -> None:
    config = models.load_config(MINIMAX_M3)
    assert (config.min_pixels, config.max_pixels) == (3136, 451584)
    resized = models.load_config(MINIMAX_M3, size={"shortest_edge": 100, "longest_edge": 9999})
    assert (resized.min_pixels, resized.max_pixels) == (100, 9999)


@needs_torch
def test_muse_linspace_is_torchs() -> None:
    """``torch.linspace(0, end, steps).long()``, which MuseGlimmerVideoProcessor samples
    frames with, for every clip length to 800 frames and every count to 130 (torch rounds
    each value once: numpy's float32 arithmetic differs in thousands of them)."""
    import torch

    for end in range(800):
        for steps in range(1, min(end + 1, 130) + 1):
            want = torch.linspace(0, end, steps).long().tolist()
            assert models.muse_glimmer.torch_linspace(end, steps) == want, (end, steps)


def test_muse_rows_are_time_major() -> None:
    """Each row is the patch's (channel, y, x) values, then the same again: rows laid out
    (time, channel, y, x) for a still frame."""
    image = make_image("noise", 56, 84, 3)
    proc = mmfast.ImageProcessor.from_pretrained(MUSE_GLIMMER, do_resize=False)
    rows = proc(image).pixel_values
    assert rows.shape == (4 * 6, 2 * 3 * 14 * 14)
    half = 3 * 14 * 14
    assert same_bits(rows[:, :half], rows[:, half:])
    single = mmfast.ImageProcessor.from_pretrained(
        MUSE_GLIMMER, do_resize=False, temporal_patch_size=1
    )(image).pixel_values
    assert same_bits(single, rows[:, :half])
