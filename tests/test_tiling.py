"""The tiling and crop families of transformers 5.24 added with Aria: PerceptionLM,
UnlimitedOCR and Inkling.

Their pixels are checked from the parity table (``test_families`` for Aria's PIL class,
``test_torchvision`` for the torchvision classes, which are all PerceptionLM, UnlimitedOCR and
Inkling have). Here: token counts against each model's HF processor (its
``_get_num_multimodal_tokens``, or its ``replace_image_token`` on transformers' own outputs,
run on a stand-in holding what it reads, as the processors need a tokenizer), and the
behaviours only a few inputs show.
"""

from __future__ import annotations

import inspect
import json
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import (
    SHARED,
    assert_same_outputs,
    builtin_dict,
    make_image,
    noise,
    same_bits,
    shared_path,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from parity_table import aria_tokens, inkling_tokens, perception_lm_tokens, unlimited_ocr_tokens
from PIL import Image, ImageOps

import mmfast
import mmfast.hf
import mmfast.image
import mmfast.processors  # for the scan of caches, as mmfast.video below
import mmfast.video
from mmfast import MmfastError, models

SHARED_IMAGES = sorted(p.name for p in (SHARED / "images").glob("*")) if SHARED.exists() else []

PERCEPTION_LM = "facebook/Perception-LM-1B"
ARIA = "rhymes-ai/Aria"
SIDES = st.integers(1, 5000)


def torchvision_class(module: str, name: str, model_id: str, **overrides: Any) -> Any:
    """transformers' torchvision class of a built-in, from its config dict (with torch)."""
    pytest.importorskip("torchvision")
    cls = getattr(pytest.importorskip(f"transformers.models.{module}"), name)
    return cls.from_dict(builtin_dict(model_id) | overrides)


@settings(max_examples=60, deadline=None)
@given(height=SIDES, width=SIDES, split=st.booleans(), side=st.sampled_from([490, 980]))
def test_aria_tokens_match_get_num_multimodal_tokens(
    height: int, width: int, split: bool, side: int
) -> None:
    """``AriaProcessor._get_num_multimodal_tokens`` (its PIL image processor counting crops),
    for any size."""
    from transformers.models.aria.image_processing_pil_aria import AriaImageProcessorPil
    from transformers.models.aria.processing_aria import AriaProcessor

    kwargs = {"split_image": split, "max_image_size": side}
    fake = SimpleNamespace(
        size_conversion={490: 128, 980: 256},
        image_processor=AriaImageProcessorPil.from_dict(builtin_dict(ARIA)),
        _merge_kwargs=lambda **kw: {"images_kwargs": kwargs},
    )
    want = AriaProcessor._get_num_multimodal_tokens(fake, [(height, width)])["num_image_tokens"]
    assert (
        mmfast.ImageProcessor.from_pretrained(ARIA, **kwargs).num_image_tokens(height, width)
        == want[0]
    )


def test_aria_tokens_count_the_crops() -> None:
    """A 1000x3000 image split at 490 pixels: its best canvas of the default resolutions,
    980x1960 (two by four 490-pixel units), in 2 x 4 crops of 128 tokens."""
    proc = mmfast.ImageProcessor.from_pretrained(ARIA, split_image=True, max_image_size=490)
    out = proc(noise(1000, 3000, 1))
    assert out.pixel_values.shape == (8, 3, 490, 490)
    assert int(out.num_crops) == 8
    assert proc.num_image_tokens(1000, 3000) == aria_tokens(dict(out), {}) == 8 * 128


@settings(max_examples=60, deadline=None)
@given(
    height=SIDES,
    width=SIDES,
    overrides=st.sampled_from(
        [{}, {"max_num_tiles": 4}, {"vision_input_type": "vanilla"}, {"tile_size": 224}]
    ),
)
def test_perception_lm_tokens_match_get_num_multimodal_tokens(
    height: int, width: int, overrides: dict[str, Any]
) -> None:
    """``PerceptionLMProcessor._get_num_multimodal_tokens`` with the image processor's own
    canvas choice, for any size."""
    from transformers.models.perception_lm.processing_perception_lm import PerceptionLMProcessor

    image_processor = torchvision_class(
        "perception_lm.image_processing_perception_lm",
        "PerceptionLMImageProcessor",
        PERCEPTION_LM,
        **overrides,
    )
    fake = SimpleNamespace(
        patch_size=14,
        pooling_ratio=2,
        image_processor=image_processor,
        _merge_kwargs=lambda **kw: {"images_kwargs": {}},
    )
    result = PerceptionLMProcessor._get_num_multimodal_tokens(fake, [(height, width)])
    proc = mmfast.ImageProcessor.from_pretrained(PERCEPTION_LM, **overrides)
    assert proc.num_image_tokens(height, width) == result["num_image_tokens"][0]
    tiles = proc.plan(height, width).output_shapes["pixel_values"][0]
    assert tiles == result["num_image_patches"][0]


@pytest.mark.parametrize("size", [(300, 200), (45, 700), (1080, 1920), (448, 448), (3, 3000)])
def test_perception_lm_tokens_match_replace_image_token(size: tuple[int, int]) -> None:
    """The processor's count on transformers' own output for the image (tiles of 448)."""
    processor = torchvision_class(
        "perception_lm.image_processing_perception_lm",
        "PerceptionLMImageProcessor",
        PERCEPTION_LM,
    )
    out = processor([Image.fromarray(noise(*size, 1))], return_tensors="np")
    proc = mmfast.ImageProcessor.from_pretrained(PERCEPTION_LM)
    assert proc.num_image_tokens(*size) == perception_lm_tokens(dict(out), {})


@pytest.mark.parametrize("frames", [1, 5])
def test_perception_lm_video_tokens_match_replace_video_token(frames: int) -> None:
    """``PerceptionLMProcessor.replace_video_token`` on transformers' output for a clip:
    (448 // 14 // 2)² tokens per frame."""
    pytest.importorskip("torchvision")
    import torch
    from transformers import PerceptionLMVideoProcessor
    from transformers.models.perception_lm.processing_perception_lm import PerceptionLMProcessor

    clip = np.stack([noise(90, 160, t) for t in range(frames)])
    out = PerceptionLMVideoProcessor()([torch.from_numpy(clip)], return_tensors="np")
    fake = SimpleNamespace(patch_size=14, pooling_ratio=2, video_token="<|video|>")
    text = PerceptionLMProcessor.replace_video_token(fake, dict(out), 0)
    proc = mmfast.ImageProcessor.from_pretrained(PERCEPTION_LM)
    assert proc.num_video_tokens(frames, 90, 160) == str(text).count("<|video|>")
    assert proc.num_video_tokens(frames, 90, 160) == frames * 256


def test_perception_lm_refuses_what_it_cannot_stack() -> None:
    """Images with different tile counts cannot be stacked: transformers raises ValueError."""
    proc = mmfast.ImageProcessor.from_pretrained(PERCEPTION_LM)
    with pytest.raises(MmfastError, match="different output sizes"):
        proc([noise(300, 200, 1), noise(45, 700, 2)])
    out = proc([noise(300, 200, 1), noise(300, 200, 2)])
    assert out.pixel_values.shape == (2, 36, 3, 448, 448)


# --------------------------------------------------------------------------------------------
# Inkling and Inkling 2: -1 padding (the tables' outside value), Inkling 2's checkerboard


INKLING = "thinkingmachines/Inkling"


@settings(max_examples=40, deadline=None)
@given(
    height=st.integers(1, 3000),
    width=st.integers(1, 3000),
    frac=st.sampled_from([None, 2.0, 0.37]),
)
def test_inkling_tokens_are_its_squares(height: int, width: int, frac: float | None) -> None:
    """``InklingProcessor`` inserts ``num_patches[i]`` tokens: ceil(h / 40) rows of
    w // 40 + 1 squares, after the optional rescale."""
    proc = mmfast.ImageProcessor.from_pretrained(INKLING, rescale_image_frac=frac)
    h, w = models.inkling.inkling_rescaled_size(height, width, frac, 2048)
    if min(h, w) < 1:  # transformers cannot resize to an empty image; mmfast refuses it
        with pytest.raises(MmfastError, match="rescale_image_frac"):
            proc.num_image_tokens(height, width)
        return
    assert proc.num_image_tokens(height, width) == -(-h // 40) * (w // 40 + 1)


@pytest.mark.parametrize("size", [(300, 200), (40, 80), (1, 1), (1080, 1920), (79, 81)])
@pytest.mark.parametrize("frac", [None, 2.0])
def test_inkling_tokens_match_replace_image_token(
    size: tuple[int, int], frac: float | None
) -> None:
    """``InklingProcessor.replace_image_token`` on transformers' own output."""
    processor = torchvision_class(
        "inkling.image_processing_inkling",
        "InklingImageProcessor",
        INKLING,
        rescale_image_frac=frac,
    )
    out = processor([Image.fromarray(noise(*size, 1))], return_tensors="np")
    proc = mmfast.ImageProcessor.from_pretrained(INKLING, rescale_image_frac=frac)
    assert proc.num_image_tokens(*size) == inkling_tokens(dict(out), {})


def test_inkling_pads_with_minus_one() -> None:
    """A 40x80 image: two squares of pixels and a third of padding only, each twice."""
    out = mmfast.ImageProcessor.from_pretrained(INKLING)(noise(40, 80, 1))
    assert out.pixel_values.shape == (3, 2, 40, 40, 3)
    assert out.num_patches.tolist() == [3]
    mean, std = np.float32(models.OPENAI_CLIP_MEAN), np.float32(models.OPENAI_CLIP_STD)
    pad = (np.float32(-1) - mean * np.float32(255)) / (std * np.float32(255))
    assert np.array_equal(out.pixel_values[2], np.broadcast_to(pad, (2, 40, 40, 3)))
    assert np.array_equal(out.pixel_values[:, 0], out.pixel_values[:, 1])
    with pytest.raises(MmfastError, match="uint8"):
        mmfast.ImageProcessor.from_pretrained(INKLING)(noise(40, 80, 1), dtype="uint8")


def test_inkling_reads_an_int_size_by_default_to_square(tmp_path: Path) -> None:
    """transformers reads an int ``size`` as a square or a shortest edge by the settings'
    ``default_to_square``, else the class's: False for Inkling, which then fails on the
    missing height (mmfast refuses), and True for Inkling 2 (a row of INKLING2_SETTINGS)."""
    refused = r"size: expected a \{height, width\} patch size"
    with pytest.raises(MmfastError, match=refused):
        mmfast.ImageProcessor.from_pretrained(INKLING, size=224)
    with pytest.raises(MmfastError, match=refused):
        mmfast.ImageProcessor.from_pretrained(
            inkling2_checkpoint(tmp_path, size=16, default_to_square=False)
        )
    image = Image.fromarray(noise(70, 130, 1))
    square = {"size": 40, "default_to_square": True}
    processor = torchvision_class(
        "inkling.image_processing_inkling", "InklingImageProcessor", INKLING, **square
    )
    want = dict(processor([image], return_tensors="np"))
    assert_same_outputs(mmfast.ImageProcessor.from_pretrained(INKLING, **square)(image), want)
    call = mmfast.ImageProcessor.from_pretrained(INKLING)(image, **square)
    assert_same_outputs(call, want)


def inkling2_checkpoint(directory: Path, **settings: Any) -> Path:
    """A checkpoint directory for Inkling 2 (no public one): the class defaults and
    ``settings``, model type inkling2."""
    config = {"image_processor_type": "Inkling2ImageProcessor", **settings}
    (directory / "preprocessor_config.json").write_text(json.dumps(config))
    (directory / "config.json").write_text(json.dumps({"model_type": "inkling2"}))
    return directory


def inkling2_hf(**settings: Any) -> Any:
    pytest.importorskip("torchvision")
    from transformers.models.inkling2.image_processing_inkling2 import Inkling2ImageProcessor

    return Inkling2ImageProcessor(**settings)


def check_inkling2(directory: Path, images: list[Any], **settings: Any) -> None:
    """mmfast on ``images`` equals transformers' Inkling2ImageProcessor, and its token count
    is ``image_grid_thw.prod()`` for each image alone."""
    want = inkling2_hf(**settings)(images, return_tensors="pt")
    proc = mmfast.ImageProcessor.from_pretrained(inkling2_checkpoint(directory, **settings))
    got = proc(images)
    assert_same_outputs(got, {k: v.numpy() for k, v in want.items()})
    from transformers.models.inkling2.processing_inkling2 import Inkling2Processor

    fake = SimpleNamespace(image_token="<|unused_200054|>")
    for i, image in enumerate(images):
        height, width = np.asarray(image).shape[:2]
        text = Inkling2Processor.replace_image_token(fake, dict(want), i)
        assert proc.num_image_tokens(height, width) == str(text).count("<|unused_200054|>")


INKLING2_SETTINGS = [
    {},
    {"do_normalize": False},
    {"do_rescale": False},
    {"do_rescale": False, "do_normalize": False},
    {"image_mean": [0.1, 0.2, 0.3], "image_std": [0.9, 0.7, 0.5]},
    {"size": {"height": 16, "width": 16}},
    {"size": {"height": 16, "width": 24}},
    {"size": 16},
]


@pytest.mark.parametrize("settings", INKLING2_SETTINGS, ids=str)
def test_inkling2_matches_transformers(settings: dict[str, Any], tmp_path: Path) -> None:
    """Mixed sizes (1x1, strips, whole and partial squares), one batch and each alone."""
    images = [
        Image.fromarray(make_image(kind, h, w, seed))
        for seed, (kind, h, w) in enumerate(
            [("noise", 300, 200), ("smooth", 45, 700), ("noise", 1, 1), ("smooth", 40, 80)]
        )
    ]
    check_inkling2(tmp_path, images, **settings)
    for image in images:
        check_inkling2(tmp_path, [image], **settings)


@pytest.mark.parametrize("name", SHARED_IMAGES or ["(shared images absent)"])
def test_inkling2_shared_images(name: str, tmp_path: Path) -> None:
    """Every awkward file as a PIL image in its own mode: the RGBA logo and the palette GIF
    go onto the checkerboard."""
    with Image.open(shared_path("images", name)) as opened:
        image = ImageOps.exif_transpose(opened)
        image.load()
    check_inkling2(tmp_path, [image])


@settings(max_examples=10, deadline=None)
@given(height=st.integers(1, 900), width=st.integers(1, 900), seed=st.integers(0, 99))
def test_inkling2_random_sizes(height: int, width: int, seed: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        check_inkling2(Path(directory), [Image.fromarray(noise(height, width, seed))])


@pytest.mark.parametrize("mode", ["RGBA", "LA", "PA", "P", "RGB"])
def test_inkling2_composites_transparency_onto_its_checkerboard(mode: str, tmp_path: Path) -> None:
    """PIL images with transparency data (an alpha band or ``info["transparency"]``) and
    four-channel arrays go onto the checkerboard; PIL images without go through
    ``convert("RGB")``."""
    rgba = noise(37, 53, 5).copy()
    rgba = np.dstack([rgba, noise(37, 53, 6)[..., 0]])
    image = Image.fromarray(rgba, "RGBA")
    if mode in ("LA", "PA", "RGB"):
        image = image.convert(mode)
    elif mode == "P":
        image = image.convert("RGB").convert("P")
        image.info["transparency"] = 7
    check_inkling2(tmp_path, [image])
    check_inkling2(tmp_path, [rgba])


def test_checkerboard_matches_transformers_for_every_value() -> None:
    """Every colour over every alpha, on both greys of the checkerboard."""
    torch = pytest.importorskip("torch")
    y, x = np.mgrid[0:256, 0:256]
    for shift in (0, 8):
        rgba = np.stack([y, y, y, np.roll(x, shift, axis=1)], axis=-1).astype(np.uint8)
        want = inkling2_hf().convert_to_rgb(torch.from_numpy(rgba).permute(2, 0, 1))
        got = mmfast.image.checkerboard_rgb(rgba)
        assert np.array_equal(got, want.permute(1, 2, 0).numpy())


def test_inkling2_threads_and_drop_in(tmp_path: Path) -> None:
    """1, 2 and 5 threads give the same batch; mmfast.hf backs the class transformers loads
    for model type inkling2 (RGBA PIL images included) with its outputs, for np, pt and
    None."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torchvision")
    rgba = Image.fromarray(np.dstack([noise(90, 130, 1), noise(90, 130, 2)[..., :1]]), "RGBA")
    images = [Image.fromarray(noise(300, 200, 3)), rgba, Image.fromarray(noise(41, 9, 4))]
    directory = inkling2_checkpoint(tmp_path)
    proc = mmfast.ImageProcessor.from_pretrained(directory)
    base = proc(images, threads=1)
    for threads in (2, 5):
        assert_same_outputs(proc(images, threads=threads), dict(base))
    plain = transformers.AutoImageProcessor.from_pretrained(directory)
    mmfast.hf.install()
    try:
        backed = transformers.AutoImageProcessor.from_pretrained(directory)
    finally:
        mmfast.hf.uninstall()
    assert isinstance(backed, mmfast.hf.MmfastBacked)
    before = mmfast.hf.stats()["mmfast"]
    for tensors in ("np", "pt", None):
        want, got = plain(images, return_tensors=tensors), backed(images, return_tensors=tensors)
        assert list(got) == list(want)
        for key in want:
            a, b = np.asarray(got[key]), np.asarray(want[key])
            assert type(got[key]) is type(want[key]) and same_bits(a, b), key
    assert mmfast.hf.stats()["mmfast"] == before + 3


# --------------------------------------------------------------------------------------------
# UnlimitedOCR: two pixel outputs from one call

UNLIMITED = "baidu/Unlimited-OCR"


@pytest.mark.parametrize("size", [(300, 200), (640, 641), (1080, 1920), (700, 700), (45, 2000)])
@pytest.mark.parametrize(
    "overrides", [{}, {"crop_to_patches": False}, {"tile_size": 96, "max_patches": 9}], ids=str
)
def test_unlimited_ocr_tokens_match_replace_image_token(
    size: tuple[int, int], overrides: dict[str, Any]
) -> None:
    """``UnlimitedOcrProcessor.replace_image_token`` on transformers' own output: 273 tokens
    for the 1024 global view, 10 * (10 * columns + 1) per row of 640 tiles."""
    processor = torchvision_class(
        "unlimited_ocr.image_processing_unlimited_ocr",
        "UnlimitedOcrImageProcessor",
        UNLIMITED,
        **overrides,
    )
    out = processor([Image.fromarray(noise(*size, 1))], return_tensors="np")
    proc = mmfast.ImageProcessor.from_pretrained(UNLIMITED, **overrides)
    assert proc.num_image_tokens(*size) == unlimited_ocr_tokens(dict(out), overrides)


def test_unlimited_ocr_outputs_share_one_buffer() -> None:
    """pixel_values and pixel_values_local are views of one native output; the tiles key is
    left out when no image has tiles, as transformers leaves it out."""
    proc = mmfast.ImageProcessor.from_pretrained(UNLIMITED)
    out = proc([noise(300, 200, 1), noise(900, 1300, 2)])
    assert list(out) == ["pixel_values", "pixel_values_local", "num_local_patches", "patches_grid"]
    assert out.pixel_values.shape == (2, 3, 1024, 1024)
    assert out.pixel_values_local.shape == (sum(out.num_local_patches), 3, 640, 640)
    assert out.num_local_patches[0] == 0 and out.patches_grid[0] == [1, 1]
    # The tiles start where the global views end: one allocation, no copy.
    start = out.pixel_values.__array_interface__["data"][0] + out.pixel_values.nbytes
    assert out.pixel_values_local.__array_interface__["data"][0] == start
    small = proc([noise(300, 200, 1)])
    assert list(small) == ["pixel_values", "num_local_patches", "patches_grid"]
    assert proc.num_image_tokens(300, 200) == 16 * 17 + 1


@pytest.mark.parametrize(
    "model_id", ["meta-llama/Llama-3.2-11B-Vision-Instruct", "thisisiron/Ovis2-1B-hf"]
)
def test_size_keyed_caches_stay_bounded(model_id: str) -> None:
    """The tile-grid caches keyed by image size stay bounded over a server's endless sizes
    (they grew by an entry a size: 25 MB over 100,000 sizes)."""
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    cached = (
        models.mllama.get_optimal_tiled_canvas
        if "Llama" in model_id
        else models.ovis2.get_min_tile_covering_grid
    )
    for width in range(100, 3100):
        proc.plan(333, width)
    assert cached.cache_info().currsize <= 1024


def test_setting_keyed_caches_stay_bounded() -> None:
    """Every cache in the package that takes arguments is bounded, unless its keys are few by
    nature. The tile-grid tables keyed by a call's tile settings (InternVL's min_patches and
    max_patches, Llama 3.2 Vision's max_image_tiles, ...) were not: about 100 KB more for each
    setting a server's requests passed through, never given back."""
    few_keys = {
        "mmfast.processors.has_pil_class",  # registered processor types
        "mmfast.image._rgba_table",  # the two backends
        "mmfast.hf._warn_once",  # messages about environment variables
    }
    cached = {
        f"{module.__name__}.{name}": value
        for module in list(sys.modules.values())
        if module.__name__.startswith("mmfast")
        for name, value in vars(module).items()
        if hasattr(value, "cache_parameters") and value.__module__ == module.__name__
    }
    unbounded = {
        name
        for name, function in cached.items()
        if function.cache_parameters()["maxsize"] is None and inspect.signature(function).parameters
    }
    assert "mmfast.models.got_ocr2.get_all_supported_aspect_ratios" in cached
    assert unbounded == few_keys
    proc = mmfast.ImageProcessor.from_pretrained("OpenGVLab/InternVL3-8B-hf")
    for max_patches in range(20, 60):
        proc(noise(64, 64, 0), crop_to_patches=True, max_patches=max_patches)
    assert models.got_ocr2.get_all_supported_aspect_ratios.cache_info().currsize <= 16
