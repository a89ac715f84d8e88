"""Every model family against its PIL-side reference, generated from the parity table.

The rows of ``parity_table.TABLE`` with a PIL-side reference: transformers' PIL-backend class
for the family (``Family.hf_pil``, built from the same config dict as the built-in,
``return_tensors="np"``) or, for the Kimi checkpoints, whose processors are remote code needing
torch, the NumPy restatement in ``kimi_reference``. Every output key must match in order,
dtype, shape and bits; where the reference raises ``ValueError``, mmfast must raise
:class:`MmfastError`. The same table drives the torchvision side (``torchvision_cases``).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kimi_reference
import numpy as np
import pytest
from conftest import (
    SHARED,
    Override,
    assert_same_outputs,
    builtin_dict,
    hf_load_image,
    make_image,
    noise,
    shared_path,
    smooth,
    within_intermediate_limit,
)
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from parity_table import GLM_TYPES, TABLE, Row, hf_class, hf_reference, kimi_vl_reference
from parity_table import as_outputs as parity_outputs
from PIL import Image, ImageOps

import mmfast
from mmfast import MmfastError, models

# The rows with a PIL-side reference (families transformers has a PIL class for).
PIL_TABLE = [row for row in TABLE if row.reference is not None]
SHARED_IMAGES = sorted(p.name for p in (SHARED / "images").glob("*")) if SHARED.exists() else []


def check(row: Row, ours: Sequence[Any], theirs: list[Image.Image], override: Override) -> None:
    """mmfast on ``ours`` equals the reference on ``theirs``, or both refuse them."""
    proc = mmfast.ImageProcessor.from_pretrained(row.model_id, **override.ours)
    assert row.reference is not None
    try:
        want = row.reference(theirs, override.reference)
    except ValueError as exc:
        with pytest.raises(MmfastError):
            proc(list(ours))
        assert str(exc)
        return
    got = proc(list(ours))
    assert_same_outputs(got, want)
    if len(theirs) == 1 and row.tokens is not None:
        tokens = row.tokens(want, override.reference)
        assert proc.num_image_tokens(theirs[0].height, theirs[0].width) == tokens


def opened(path: Path) -> Image.Image:
    with Image.open(path) as image:
        upright = ImageOps.exif_transpose(image)
        upright.load()
    return upright


@pytest.mark.parametrize("name", SHARED_IMAGES or ["(shared images absent)"])
@pytest.mark.parametrize("row", PIL_TABLE, ids=str)
def test_shared_images(row: Row, name: str) -> None:
    """Every awkward file, as a PIL image in its own mode (CMYK, RGBA, P, I;16, 12 MP, ...)."""
    image = opened(shared_path("images", name))
    check(row, [image], [image], Override({}))


@pytest.mark.parametrize("row", PIL_TABLE, ids=str)
def test_input_kinds(row: Row, tmp_path: Path) -> None:
    """PIL, (H, W, 3) and (H, W) arrays, bytes and paths give the reference's output on the
    image each decodes to (``load_image`` for files)."""
    arrays = [smooth(97, 150, 1), noise(301, 64, 2)]
    pils = [Image.fromarray(a) for a in arrays]
    check(row, pils, pils, Override({}))
    check(row, arrays, pils, Override({}))
    gray = arrays[0][..., 1].copy()
    check(row, [gray], [Image.fromarray(gray)], Override({}))
    paths = []
    for i, pil in enumerate(pils):
        paths.append(tmp_path / f"{i}.png")
        pil.save(paths[-1])
    loaded = [hf_load_image(p) for p in paths]
    check(row, paths, loaded, Override({}))
    check(row, [p.read_bytes() for p in paths], loaded, Override({}))
    check(row, [str(paths[0]), arrays[1]], pils, Override({}))


SIZES = st.tuples(st.integers(1, 900), st.integers(1, 900))


@pytest.mark.parametrize("row", PIL_TABLE, ids=str)
@settings(max_examples=12, deadline=None)
@given(size=SIZES, seed=st.integers(0, 2**16), kind=st.sampled_from(["noise", "smooth"]))
def test_random_sizes(row: Row, size: tuple[int, int], seed: int, kind: str) -> None:
    # mmfast refuses intermediates past DEFAULT_MAX_PIXELS (tested on its own).
    assume(within_intermediate_limit(row.model_id, *size))
    image = Image.fromarray(make_image(kind, *size, seed))
    check(row, [image], [image], Override({}))


# Tiny images (upscaled to one merge unit, or padded), strips up to and past the 1:200 limits,
# sizes near merge-unit multiples, and a 12-megapixel photo-sized image.
EDGE_SIZES = [
    (1, 1),
    (1, 2),
    (3, 1),
    (2, 3),
    (13, 13),
    (27, 29),
    (1, 40),
    (40, 1),
    (20, 400),
    (400, 20),
    (10, 1990),
    (2100, 10),
    (5, 1500),
    (3024, 4032),
]


@pytest.mark.parametrize("size", EDGE_SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("row", PIL_TABLE, ids=str)
def test_edge_sizes(row: Row, size: tuple[int, int]) -> None:
    image = Image.fromarray(smooth(*size, seed=size[0] + size[1]))
    check(row, [image], [image], Override({}))


OVERRIDE_CASES = [
    pytest.param(row, override, id=f"{row}-{json.dumps(override.ours, sort_keys=True)}")
    for row in PIL_TABLE
    for override in row.overrides
]


@pytest.mark.parametrize(("row", "override"), OVERRIDE_CASES)
def test_overrides(row: Row, override: Override) -> None:
    images = [Image.fromarray(noise(150, 97, 1)), Image.fromarray(smooth(61, 530, 2))]
    for image in images:
        check(row, [image], [image], override)


@pytest.mark.parametrize("row", PIL_TABLE, ids=str)
def test_batches_and_threads(row: Row) -> None:
    """A batch of mixed sizes equals the reference's batch, on 1, 2 and 5 threads."""
    images = [
        Image.fromarray(make_image("smooth" if i % 2 else "noise", h, w, i))
        for i, (h, w) in enumerate([(300, 200), (45, 700), (1000, 37), (336, 336), (2, 5)])
    ]
    assert row.reference is not None
    want = row.reference(images, {})
    proc = mmfast.ImageProcessor.from_pretrained(row.model_id)
    for threads in (1, 2, 5):
        assert_same_outputs(proc(images, threads=threads), want)


def test_pan_and_scan_crops_follow_hf() -> None:
    """Worked by hand: a 2:1 landscape gives two square crops, a 1:1.1 image none."""
    config = models.load_config("google/gemma-3-4b-it", do_pan_and_scan=True)
    assert models.gemma3.pan_and_scan(600, 1200, 256, 4, 1.2) == [
        models.CropBox(0, 0, 600, 600),
        models.CropBox(0, 600, 600, 600),
    ]
    assert config.plan(600, 1200).output_shapes["pixel_values"] == (3, 3, 896, 896)
    assert config.num_image_tokens(600, 1200) == 3 * 256
    assert config.plan(1000, 1100).output_shapes["pixel_values"] == (1, 3, 896, 896)
    # A crop past the edge is cut short, as numpy slicing does: 1001 / 4 -> 251 + 3 * 250.
    boxes = models.gemma3.pan_and_scan(100, 1001, 50, 4, 1.2)
    assert [(b.left, b.width) for b in boxes] == [(0, 251), (251, 251), (502, 251), (753, 248)]


def test_kimi_vl_converts_after_resizing() -> None:
    """Kimi-VL resizes RGBA with premultiplied alpha and pads a palette image with index 0,
    both before converting: not the same as converting first."""
    # Over the 4096-patch limit, so it is resized.
    rgba = Image.fromarray(noise(1200, 1000, 3)).convert("RGBA")
    rgba.putalpha(Image.fromarray(noise(1200, 1000, 4)[..., 0]))
    # Palette index 0 is red: the padding's colour.
    palette = Image.fromarray(smooth(50, 61, 5)[..., 0] // 2 + 1, "L").convert("P")
    palette.putpalette([200, 10, 10] + [v for i in range(1, 256) for v in (i, i, i)])
    proc = mmfast.ImageProcessor.from_pretrained("moonshotai/Kimi-VL-A3B-Instruct")
    reference = kimi_vl_reference("moonshotai/Kimi-VL-A3B-Instruct")
    for image in (rgba, palette):
        want = reference([image], {})
        assert_same_outputs(proc(image), want)
        converted_first = reference([image.convert("RGB")], {})
        assert not np.array_equal(converted_first["pixel_values"], want["pixel_values"])


def test_kimi_token_counts_match_the_processors() -> None:
    vl = mmfast.ImageProcessor.from_pretrained("moonshotai/Kimi-VL-A3B-Instruct")
    k25 = mmfast.ImageProcessor.from_pretrained("moonshotai/Kimi-K2.5")
    vl_cfg = builtin_dict("moonshotai/Kimi-VL-A3B-Instruct")
    k25_cfg = builtin_dict("moonshotai/Kimi-K2.5")["media_proc_cfg"]
    rng = np.random.default_rng(0)
    for height, width in [
        (1, 1),
        (480, 640),
        (3024, 4032),
        (20, 7000),
        *rng.integers(1, 9000, (200, 2)),
    ]:
        h, w = int(height), int(width)
        assert k25.num_image_tokens(h, w) == kimi_reference.kimi_k25_tokens(w, h, k25_cfg)
        if max(h, w) // 14 < 5000:
            try:
                expected = kimi_reference.kimi_vl_tokens(w, h, vl_cfg)
                tokens = vl.num_image_tokens(h, w)
            except MmfastError:
                continue
            assert tokens == expected


def test_unknown_overrides_name_the_family() -> None:
    for model_id, bad in [
        ("google/gemma-3-4b-it", "min_pixels"),
        ("zai-org/GLM-OCR", "min_pixels"),
        ("moonshotai/Kimi-K2.5", "in_token_limit"),
        ("google/siglip-so400m-patch14-384", "do_pan_and_scan"),
    ]:
        with pytest.raises(MmfastError, match=bad):
            models.load_config(model_id, **{bad: 1})


def test_remote_code_configs_select_by_auto_map(tmp_path: Path) -> None:
    """A Kimi-K2.5 file names its processor only through ``auto_map``."""
    data = builtin_dict("moonshotai/Kimi-K2.5") | {
        "auto_map": {"AutoImageProcessor": "kimi_k25_vision_processing.KimiK25VisionProcessor"}
    }
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(data))
    config = models.load_config(tmp_path)
    assert isinstance(config, models.KimiK25Config)
    assert config.image_processor_type == "KimiK25VisionProcessor"
    assert config.in_patch_limit == 16384


PATCH_FAMILIES = [
    "Qwen/Qwen2.5-Omni-7B",
    "Qwen/Qwen3-Omni-30B-A3B-Instruct",
    *GLM_TYPES,
    "PaddlePaddle/PaddleOCR-VL",
]


@pytest.mark.parametrize("model_id", PATCH_FAMILIES)
@settings(max_examples=200, deadline=None)
@given(height=st.integers(1, 12000), width=st.integers(1, 12000))
def test_token_counts_match_get_number_of_image_patches(
    model_id: str, height: int, width: int
) -> None:
    """Without pixels: HF's ``get_number_of_image_patches(h, w) // merge_size**2``, which the
    processors (and vLLM) use to size the prompt."""
    family, _ = models.config.select_family(models.config.read_source(model_id))
    assert family.hf_pil is not None
    module, name = family.hf_pil.rsplit(".", 1)
    hf = getattr(importlib.import_module(f"transformers.models.{module}"), name)
    processor = hf.from_dict(builtin_dict(model_id))
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    try:
        patches = processor.get_number_of_image_patches(height, width, {})
    except ValueError:
        with pytest.raises(MmfastError, match="aspect ratio"):
            proc.num_image_tokens(height, width)
        return
    assert proc.num_image_tokens(height, width) == patches // processor.merge_size**2


PROCESSORS = [
    pytest.param(family, name, id=name)
    for family in models.registry.FAMILIES.values()
    for name in sorted({*family.processor_classes, *family.processor_defaults})
]


@pytest.mark.parametrize(("family", "name"), PROCESSORS)
def test_processor_defaults_are_hfs(family: models.Family, name: str) -> None:
    """Every processor class a family names passes, on every call, the image kwargs the family
    says (its ``images_kwargs``; ``return_tensors`` is a call argument, not a setting)."""
    auto = importlib.import_module("transformers.models.auto.processing_auto")
    cls = auto.processor_class_from_name(name)
    if cls is None:
        pytest.skip(f"{name}: transformers builds it only with torch and torchvision")
    given = getattr(cls, "images_kwargs", {})
    images_kwargs = {k: v for k, v in given.items() if k != "return_tensors"}
    assert dict(family.processor_defaults.get(name, {})) == images_kwargs


@pytest.mark.parametrize(
    ("config", "tiles"),
    [
        ({}, 1),  # no processor: the image processor's own default, no tiling
        ({"processor_class": "GotOcr2Processor"}, 1),
        ({"processor_class": "InternVLProcessor"}, 3),  # two tiles and the thumbnail
        ({"processor_class": "AyaVisionProcessor"}, 3),
    ],
)
def test_processor_defaults_follow_the_checkpoints_processor(
    tmp_path: Path, config: dict[str, Any], tiles: int
) -> None:
    """A bare GotOcr2ImageProcessor config tiles only where its processor says so."""
    data = {"image_processor_type": "GotOcr2ImageProcessor", **config}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(data))
    proc = mmfast.ImageProcessor.from_pretrained(tmp_path)
    out = proc(Image.fromarray(noise(400, 900, 1)))
    hf = hf_class("OpenGVLab/InternVL3-8B-hf").from_dict({})
    defaults = models.registry.processor_defaults(proc_family(tmp_path), data, {}, None)
    want = hf([Image.fromarray(noise(400, 900, 1))], return_tensors="np", **defaults)
    assert_same_outputs(out, want)
    assert len(out.pixel_values) == tiles
    # The model type says it where the config does not.
    (tmp_path / "preprocessor_config.json").write_text(
        json.dumps({"image_processor_type": "GotOcr2ImageProcessor"})
    )
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "internvl"}))
    internvl = mmfast.ImageProcessor.from_pretrained(tmp_path)
    assert len(internvl(noise(400, 900, 1)).pixel_values) == 3


def proc_family(path: Path) -> models.Family:
    return models.config.select_family(models.config.read_source(path))[0]


NESTED_MODELS = [
    "llava-hf/llava-onevision-qwen2-7b-ov-hf",
    "HuggingFaceTB/SmolVLM2-2.2B-Instruct",
    "HuggingFaceM4/Idefics3-8B-Llama3",
    "llava-hf/llava-v1.6-mistral-7b-hf",
    "OpenGVLab/InternVL3-8B-hf",
    "Qwen/Qwen2.5-Omni-7B",
]


@pytest.mark.parametrize("model_id", NESTED_MODELS)
def test_samples_nest_like_hf(model_id: str) -> None:
    """A nested list is one list of images per prompt: OneVision pads a multi-image prompt's
    images to squares, Idefics3/SmolVLM stack prompts padded to the longest (an empty prompt
    is all padding), the others flatten the nesting."""
    pil = [
        Image.fromarray(make_image("noise" if i % 2 else "smooth", h, w, i))
        for i, (h, w) in enumerate([(300, 200), (64, 90), (100, 900), (500, 500)])
    ]
    reference = hf_reference(model_id)
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    layouts: list[list[Any]] = [[pil[:2], pil[2:3]], [pil[:1], pil[1:4]], [pil[:1]]]
    if model_id in ("HuggingFaceTB/SmolVLM2-2.2B-Instruct", "HuggingFaceM4/Idefics3-8B-Llama3"):
        layouts.append([[], pil[1:3]])
    for samples in layouts:
        assert_same_outputs(proc(samples), reference(samples, {}))
    with pytest.raises(MmfastError, match="mix of both"):
        proc([pil[0], [pil[1]]])
    with pytest.raises(MmfastError, match="only empty samples"):
        proc([[], []])


def test_onevision_multi_image_tokens() -> None:
    proc = mmfast.ImageProcessor.from_pretrained("llava-hf/llava-onevision-qwen2-7b-ov-hf")
    plan = proc.config.plan_in_sample(300, 200, 2)
    # One squashed 384 tile and 729 + 1 tokens (the newline), as the processor counts them.
    assert plan.output_shapes["pixel_values"] == (1, 3, 384, 384)
    assert plan.num_image_tokens == 730
    assert proc.plan(300, 200).num_image_tokens == proc.num_image_tokens(300, 200) != 730


def test_llava_model_type_is_llava_image_processor(tmp_path: Path) -> None:
    """A llava checkpoint without image_processor_type gets LlavaImageProcessor, as
    AutoImageProcessor picks it; llava-hf's files name CLIPImageProcessor."""
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"do_pad": True}))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llava"}))
    config = models.load_config(tmp_path)
    assert isinstance(config, models.LlavaConfig) and config.do_pad
    assert type(models.load_config("llava-hf/llava-1.5-7b-hf")) is models.ClipConfig


@pytest.mark.parametrize(
    ("model_id", "overrides"),
    [
        ("liuhaotian/llava-v1.5-7b", {"image_mean": [1.2, -0.1, 0.5]}),
        ("liuhaotian/llava-v1.5-7b", {"image_mean": 0.5}),
        ("deepseek-community/deepseek-vl-1.3b-chat", {"image_mean": [1.2, -0.1, 0.5]}),
        ("deepseek-community/deepseek-vl-7b-chat", {"high_res_image_mean": [0.2, 1.1, 0.5]}),
    ],
)
def test_pad_colours_transformers_cannot_hold(model_id: str, overrides: dict[str, Any]) -> None:
    """A pad colour int(mean * 255) outside 0..255 (numpy's OverflowError), or a mean given as
    a number the class iterates (TypeError): MmfastError, for an image that is padded; a square
    one needs no pad and runs (but for the number, which LLaVA iterates for every image)."""
    proc = mmfast.ImageProcessor.from_pretrained(model_id, **overrides)
    reference = hf_reference(model_id)
    image = Image.fromarray(noise(40, 90, 1))
    with pytest.raises((OverflowError, TypeError)):
        reference([image], overrides)
    with pytest.raises(MmfastError, match="image_mean"):
        proc(image)
    square = Image.fromarray(noise(50, 50, 2))
    if isinstance(overrides.get("image_mean"), float):
        with pytest.raises(TypeError):
            reference([square], overrides)
        with pytest.raises(MmfastError, match="image_mean"):
            proc(square)
    else:
        assert_same_outputs(proc(square), reference([square], overrides))


@pytest.mark.parametrize(
    ("model_id", "settings"),
    [
        ("deepseek-community/Janus-Pro-1B", {"image_mean": [0.1, 0.2, 0.3]}),
        ("deepseek-community/deepseek-vl-1.3b-chat", {"resample": 0}),
        ("deepseek-community/deepseek-vl-7b-chat", {"resample": 0, "high_res_resample": 0}),
        ("deepseek-community/deepseek-vl-7b-chat", {"high_res_image_mean": [0.7, 0.2, 0.3]}),
        ("liuhaotian/llava-v1.5-7b", {"image_mean": [0.2, 0.3, 0.4]}),
        ("HuggingFaceM4/idefics-9b", {"image_size": 100, "size": {"height": 90, "width": 80}}),
    ],
)
def test_call_settings_keep_what_the_instance_fixed(
    model_id: str, settings: dict[str, Any]
) -> None:
    """A call's settings as transformers applies them: DeepSeek-VL's and Janus's pad colours
    come from the mean the processor was built with, its PIL class's resample 0 falls back to
    the instance's, IDEFICS reads image_size only when built; LLaVA's colour is the call's."""
    images = [Image.fromarray(noise(40, 90, 1)), Image.fromarray(smooth(200, 70, 2))]
    hf = hf_class(model_id).from_dict(builtin_dict(model_id))
    want = parity_outputs(hf(images, return_tensors="np", **settings))
    got = mmfast.ImageProcessor.from_pretrained(model_id)(images, **settings)
    assert_same_outputs(got, want)
    # Built with those settings instead, the processor would differ (the test is not vacuous).
    built = mmfast.ImageProcessor.from_pretrained(model_id, **settings)(images)
    if model_id != "liuhaotian/llava-v1.5-7b":
        assert any(not np.array_equal(built[k], got[k]) for k in got)


def test_blip_pads_a_batch_to_its_largest_image() -> None:
    """With do_resize off, BLIP's do_pad zero-pads the normalised images at the bottom and
    right to the batch's largest height and width."""
    images = [Image.fromarray(noise(40, 90, 1)), Image.fromarray(smooth(70, 30, 2))]
    reference = hf_reference("Salesforce/blip-vqa-base")
    got = mmfast.ImageProcessor.from_pretrained("Salesforce/blip-vqa-base", do_resize=False)
    out = got(images)
    assert_same_outputs(out, reference(images, {"do_resize": False}))
    assert out.pixel_values.shape == (2, 3, 70, 90)


def test_intermediates_past_the_limit_are_refused() -> None:
    """A 1x700 image through Chameleon's 512 shortest edge is a 512x358400 resize that
    transformers makes (537 MB) and mmfast refuses, as it refuses any intermediate over
    DEFAULT_MAX_PIXELS, naming size."""
    assert not within_intermediate_limit("facebook/chameleon-7b", 1, 700)
    proc = mmfast.ImageProcessor.from_pretrained("facebook/chameleon-7b")
    with pytest.raises(MmfastError, match="intermediate images"):
        proc(noise(1, 700, 1))
