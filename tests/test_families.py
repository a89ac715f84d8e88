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
import io
import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import kimi_reference
import numpy as np
import pytest
from conftest import (
    SHARED,
    Override,
    assert_same_outputs,
    builtin_dict,
    builtin_settings,
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
    proc = mmfast.ImageProcessor.from_pretrained(
        row.model_id, **builtin_settings(row.model_id, **override.ours)
    )
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
        try:
            tokens = row.tokens(want, override.reference)
        except ValueError:  # the processor's count fails (Fuyu: no whole patches)
            with pytest.raises(MmfastError):
                proc.num_image_tokens(theirs[0].height, theirs[0].width)
            return
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


@pytest.mark.parametrize("row", TABLE, ids=str)
def test_large_gray_images_equal_their_rgb(row: Row) -> None:
    """Grey rows are resampled where they are, one channel for three, where the AVX-512
    planar or eight-taps-a-lane blocks take the tables: an image of many bands of rows, as
    an array and as a PIL image, gives the outputs of its RGB on both backends."""
    proc = mmfast.ImageProcessor.from_pretrained(
        row.model_id, **builtin_settings(row.model_id, do_convert_rgb=True)
    )
    gray = noise(1100, 1500, 5)[..., 0].copy()
    rgb = np.repeat(gray[..., None], 3, axis=2)
    for backend in (None, "torchvision") if row.torchvision else (None,):
        want = proc(rgb, backend=backend)
        assert_same_outputs(proc(gray, backend=backend), want)
        assert_same_outputs(proc(Image.fromarray(gray), backend=backend), want)


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
    proc = mmfast.ImageProcessor.from_pretrained(row.model_id, **builtin_settings(row.model_id))
    refused = [image for image in images if refuses(row, image)]
    if refused:  # GLM-Image takes no aspect ratio over 4: the batch fails as a whole
        with pytest.raises(ValueError):
            row.reference(images, {})
        with pytest.raises(MmfastError):
            proc(images)
        images = [image for image in images if image not in refused]
        assert len(images) >= 2
    want = row.reference(images, {})
    for threads in (1, 2, 5):
        assert_same_outputs(proc(images, threads=threads), want)


def refuses(row: Row, image: Image.Image) -> bool:
    """Whether the row's reference raises ``ValueError`` on the image alone."""
    assert row.reference is not None
    try:
        row.reference([image], {})
    except ValueError:
        return True
    return False


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
    says (its ``images_kwargs``; ``return_tensors`` and ``data_format`` are call arguments)."""
    auto = importlib.import_module("transformers.models.auto.processing_auto")
    cls = auto.processor_class_from_name(name)
    if cls is None or getattr(cls, "is_dummy", False):
        pytest.skip(f"{name}: transformers builds it only with torch and torchvision")
    given = getattr(cls, "images_kwargs", {})
    # (call arguments, not settings; channels-first is the only layout mmfast gives)
    call = {"return_tensors": None, "data_format": "channels_first"}
    images_kwargs = {k: v for k, v in given.items() if k not in call}
    assert all(call[k] in (None, v) for k, v in given.items() if k in call)
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
    "meta-llama/Llama-3.2-11B-Vision-Instruct",
    "ibm-granite/granite-for-docling-500m",
    "deepseek-community/DeepSeek-OCR-2",
]
# Models whose samples are stacked, so that a sample may be empty (a text-only prompt).
STACKED_SAMPLES = (
    "HuggingFaceTB/SmolVLM2-2.2B-Instruct",
    "HuggingFaceM4/Idefics3-8B-Llama3",
    "meta-llama/Llama-3.2-11B-Vision-Instruct",
    "ibm-granite/granite-for-docling-500m",
)


@pytest.mark.parametrize("model_id", NESTED_MODELS)
def test_samples_nest_like_hf(model_id: str) -> None:
    """A nested list is one list of images per prompt: OneVision pads a multi-image prompt's
    images to squares, Idefics3/SmolVLM, Mllama and Granite for Docling stack prompts padded
    to the longest (an empty prompt is all padding), the others flatten the nesting."""
    pil = [
        Image.fromarray(make_image("noise" if i % 2 else "smooth", h, w, i))
        for i, (h, w) in enumerate([(300, 200), (64, 90), (100, 900), (500, 500)])
    ]
    reference = hf_reference(model_id)
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    layouts: list[list[Any]] = [[pil[:2], pil[2:3]], [pil[:1], pil[1:4]], [pil[:1]]]
    if model_id in STACKED_SAMPLES:
        layouts += [[[], pil[1:3]], [pil[1:3], []], [pil[:1], [], pil[1:2]]]
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


@pytest.mark.parametrize(
    ("model_id", "kwargs"),
    [("google/paligemma2-3b-pt-224", {}), ("Qwen/Qwen2-VL-7B-Instruct", {"do_convert_rgb": False})],
)
def test_rgb_colour_keys_stay_without_conversion(model_id: str, kwargs: dict[str, Any]) -> None:
    """An RGB PNG with a transparent colour key (Pillow: mode RGB, info["transparency"]) is
    read as it is when do_convert_rgb is off (PaliGemma 2's file leaves it null); mmfast
    composited the keyed pixels onto white."""
    pixels = noise(90, 110, 1)
    pixels[:20, :20] = (1, 2, 3)
    data = io.BytesIO()
    Image.fromarray(pixels).save(data, "PNG", transparency=(1, 2, 3))
    image = Image.open(data)
    assert image.mode == "RGB" and image.info["transparency"] == (1, 2, 3)
    want = hf_class(model_id).from_dict(builtin_dict(model_id))(
        [image], return_tensors="np", **kwargs
    )
    assert_same_outputs(mmfast.ImageProcessor.from_pretrained(model_id)(image, **kwargs), want)


@pytest.mark.parametrize(
    ("model_id", "kwargs"),
    [("google/paligemma2-3b-pt-224", {}), ("Qwen/Qwen2-VL-7B-Instruct", {"do_convert_rgb": False})],
)
@pytest.mark.parametrize("mode", ["YCbCr", "HSV", "LAB"])
def test_three_band_modes_stay_without_conversion(
    model_id: str, kwargs: dict[str, Any], mode: str
) -> None:
    """With do_convert_rgb off, transformers reads a YCbCr, HSV or LAB image's three bands as
    RGB; mmfast refused them."""
    image = Image.fromarray(noise(90, 110, 1)).convert(mode)
    want = hf_class(model_id).from_dict(builtin_dict(model_id))(
        [image], return_tensors="np", **kwargs
    )
    assert_same_outputs(mmfast.ImageProcessor.from_pretrained(model_id)(image, **kwargs), want)


def test_onevision_pads_with_the_instances_mean_under_a_calls() -> None:
    """A multi-image sample is padded to squares with the instance's mean and normalised with
    the call's; mmfast padded with the call's (0.84 off)."""
    model_id = "llava-hf/llava-onevision-qwen2-7b-ov-hf"
    samples = [[Image.fromarray(noise(300, 200, 1)), Image.fromarray(noise(150, 420, 2))]]
    mean = [0.1, 0.9, 0.5]
    want = hf_class(model_id).from_dict(builtin_dict(model_id))(
        samples, image_mean=mean, return_tensors="np"
    )
    got = mmfast.ImageProcessor.from_pretrained(model_id)(samples, image_mean=mean)
    assert_same_outputs(got, want)


@pytest.mark.parametrize(
    "nulls",
    [
        {"do_resize": None, "do_center_crop": None},  # switches: off
        {"image_mean": None, "do_normalize": None},  # a value its switch (off) does not need
        {"image_mean": None},  # a value its switch needs: both refuse
        {"resample": None},
        {"rescale_factor": None},
    ],
    ids=lambda nulls: ",".join(nulls),
)
def test_a_files_nulls_read_as_transformers_reads_them(
    tmp_path: Path, nulls: dict[str, None]
) -> None:
    """transformers keeps a file's null over the class default: a switch is off, and a value
    its switch needs makes it raise."""
    model_id = "google/siglip-so400m-patch14-384"
    config = {**models.registry.BUILTINS[model_id].preprocessor, **nulls}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(config))
    image = noise(50, 70, 1)
    try:
        want = hf_class(model_id).from_dict(config)(image, return_tensors="np")
    except ValueError:
        with pytest.raises(MmfastError, match="got null"):
            mmfast.ImageProcessor.from_pretrained(tmp_path)
        return
    got = mmfast.ImageProcessor.from_pretrained(tmp_path)(image)
    assert_same_outputs(got, want)


@pytest.mark.parametrize("do_center_crop", [True, False])
def test_video_llava_reads_an_int_size_as_a_shortest_edge(
    tmp_path: Path, do_center_crop: bool
) -> None:
    """VideoLlavaImageProcessor reads an int size as a shortest edge whatever the file's
    default_to_square says; mmfast made it a 320x320 square."""
    model_id = "LanguageBind/Video-LLaVA-7B-hf"
    config = {
        **models.registry.BUILTINS[model_id].preprocessor,
        "size": 320,
        "default_to_square": True,
        "do_center_crop": do_center_crop,
    }
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(config))
    image = noise(333, 517, 1)
    want = hf_class(model_id).from_dict(config)(image, return_tensors="np")
    assert_same_outputs(mmfast.ImageProcessor.from_pretrained(tmp_path)(image), want)


@pytest.mark.parametrize(
    "call", [{"do_pad": True}, {"pad_size": {"height": 500, "width": 500}, "do_pad": True}]
)
def test_video_llava_ignores_what_its_preprocess_does_not_take(call: dict[str, Any]) -> None:
    """VideoLlavaImageProcessor's ``__call__`` warns of the settings its ``preprocess`` does
    not take and ignores them; mmfast refused ``do_pad``."""
    model_id = "LanguageBind/Video-LLaVA-7B-hf"
    image = noise(130, 261, 1)
    with pytest.warns(UserWarning, match="were ignored"):
        want = hf_class(model_id).from_dict(builtin_dict(model_id))(
            image, return_tensors="np", **call
        )
    got = mmfast.ImageProcessor.from_pretrained(model_id)(image, **call)
    assert_same_outputs(got, want)


GEMMA4_PROCESSORS = [
    ("google/gemma-4-31B-it", "gemma4.processing_gemma4.Gemma4Processor"),
    ("google/gemma-4-12B-it", "gemma4_unified.processing_gemma4_unified.Gemma4UnifiedProcessor"),
]


@pytest.mark.parametrize(("model_id", "processor"), GEMMA4_PROCESSORS)
@settings(max_examples=200, deadline=None)
@given(
    height=st.integers(1, 12000),
    width=st.integers(1, 12000),
    budget=st.sampled_from(models.gemma4.SUPPORTED_SOFT_TOKENS),
)
def test_gemma4_token_counts_match_the_processors(
    model_id: str, processor: str, height: int, width: int, budget: int
) -> None:
    """Without pixels: the processor's ``_get_num_multimodal_tokens`` (what vLLM sizes the
    prompt with) at every soft-token budget, on a stand-in holding the image settings."""
    module, name = processor.rsplit(".", 1)
    cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)
    fake = SimpleNamespace(
        image_processor=SimpleNamespace(patch_size=16, pooling_kernel_size=3, max_soft_tokens=280),
        _merge_kwargs=lambda **kwargs: {"images_kwargs": kwargs, "videos_kwargs": {}},
    )
    proc = mmfast.ImageProcessor.from_pretrained(model_id, max_soft_tokens=budget)
    try:
        data = cls._get_num_multimodal_tokens(
            fake, image_sizes=[(height, width)], max_soft_tokens=budget
        )
    except ValueError:
        with pytest.raises(MmfastError):
            proc.num_image_tokens(height, width)
        return
    assert proc.num_image_tokens(height, width) == data.num_image_tokens[0]


def test_lfm2_uint8_rows_of_tiles_and_thumbnail() -> None:
    """A split image's tiles fill their rows; only the thumbnail is padded, and the uint8
    output's pixel_rows_mask says so."""
    proc = mmfast.ImageProcessor.from_pretrained("LiquidAI/LFM2-VL-1.6B")
    images = [smooth(1080, 1920, 1), noise(100, 60, 2)]
    want = proc(images)
    raw = proc(images, dtype="uint8")
    # (want.image_rows is BatchFeature's count of each image's entries: 9 and 1.)
    tiles = int(want["image_rows"][0] * want["image_cols"][0])
    assert tiles > 1 and want["image_rows"][1] == want["image_cols"][1] == 1
    assert want.image_rows == [tiles + 1, 1]
    assert want.pixel_values.shape == (tiles + 2, 1024, 768)  # tiles, thumbnail, small image
    mask = raw.pixel_rows_mask
    assert mask.shape == (tiles + 2, 1024) and mask[:tiles].all() and not mask[tiles:].all()
    assert_same_outputs({"mask": mask.astype(np.int32)}, {"mask": want.pixel_attention_mask})
    back = mmfast.reference.normalize_uint8(
        raw.pixel_values, raw.pixel_lut, mask, channels_last=True
    )
    assert_same_outputs({"pixel_values": back}, {"pixel_values": want.pixel_values})


@pytest.mark.parametrize(
    ("model_id", "overrides", "match"),
    [
        # torchvision's legacy NEAREST, which Gemma 4's classes hand code 0 to.
        ("google/gemma-4-31B-it", {"resample": 0}, "resample"),
        ("google/gemma-4-12B-it", {"resample": 0}, "resample"),
        # Tiles of fewer patches than max_num_patches: zero rows between crops.
        ("LiquidAI/LFM2-VL-1.6B", {"max_image_tokens": 512}, "tile_size"),
        ("LiquidAI/LFM2-VL-1.6B", {"tile_size": 384}, "tile_size"),
    ],
)
def test_what_the_engine_cannot_lay_out_is_refused(
    model_id: str, overrides: dict[str, Any], match: str
) -> None:
    """Refused with MmfastError naming the setting, not approximated (README: not supported)."""
    proc = mmfast.ImageProcessor.from_pretrained(model_id, backend="torchvision", **overrides)
    with pytest.raises(MmfastError, match=match):
        proc(noise(1080, 1920, 3))


@settings(max_examples=100, deadline=None)
@given(
    height=st.integers(1, 5000),
    width=st.integers(1, 5000),
    rate=st.sampled_from(["1/2", "1/4", 0.5, 1]),
    strategy=st.sampled_from(["default", "full"]),
)
def test_granite4_vision_token_counts(height: int, width: int, rate: Any, strategy: str) -> None:
    """Granite4VisionProcessor counts LLaVA-NeXT's features on a patch grid scaled by its
    ``downsample_rate`` (a stand-in holding what ``replace_image_token`` reads)."""
    from transformers.models.granite4_vision.processing_granite4_vision import (
        Granite4VisionProcessor,
    )

    settings_ = {"patch_size": 16, "downsample_rate": rate}
    proc = mmfast.ImageProcessor.from_pretrained(
        "llava-hf/llava-v1.6-mistral-7b-hf",
        vision_feature_select_strategy=strategy,
        num_additional_image_tokens=0,
        **settings_,
    )
    config = proc.config
    fake = SimpleNamespace(
        image_processor=SimpleNamespace(image_grid_pinpoints=config.image_grid_pinpoints),
        image_token="<image>",
        num_additional_image_tokens=0,
        vision_feature_select_strategy=strategy,
        **settings_,
    )
    for method in ("_get_number_of_features", "_get_unpadded_features"):
        setattr(fake, method, getattr(Granite4VisionProcessor, method).__get__(fake))
    side = config.crop_size[0]
    inputs = {"image_sizes": [[height, width]], "pixel_values": [np.zeros((1, 3, side, side))]}
    text = Granite4VisionProcessor.replace_image_token(fake, inputs, 0)
    assert proc.num_image_tokens(height, width) == text.count("<image>")


@pytest.mark.parametrize(
    ("model_type", "processor", "want"),
    [
        ("gemma3n", {}, 256),  # Gemma3nProcessor's image_seq_length
        ("gemma3n", {"image_seq_length": 100}, 100),
        ("qianfan_ocr", {}, 2 + 256 * 3),  # InternVL's count: two tiles and the thumbnail
        ("shieldgemma2", {}, 256),  # Gemma 3's, pan-and-scan off
        ("t5gemma2", {}, 256),
    ],
)
def test_model_types_count_as_their_processors(
    tmp_path: Path, model_type: str, processor: dict[str, Any], want: int
) -> None:
    """Checkpoints that name only their model type count their processor's tokens."""
    (tmp_path / "preprocessor_config.json").write_text("{}")
    (tmp_path / "processor_config.json").write_text(json.dumps(processor))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    proc = mmfast.ImageProcessor.from_pretrained(tmp_path)
    assert proc.num_image_tokens(400, 900) == want


MLLAMA = "meta-llama/Llama-3.2-11B-Vision-Instruct"
DEEPSEEK_OCR2 = "deepseek-community/DeepSeek-OCR-2"


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
        (MLLAMA, {"size": {"height": 300, "width": 200}}),
        (MLLAMA, {"size": {"shortest_edge": 300}}),
        (MLLAMA, {"do_pad": False}),
        (MLLAMA, {"do_resize": False}),
        (MLLAMA, {"max_image_tiles": 0}),
    ],
)
def test_tiled_refusals_follow_hf(model_id: str, overrides: dict[str, Any]) -> None:
    """Settings transformers' class refuses when it is built (ValueError): refused by name."""
    with pytest.raises(ValueError):
        hf_class(model_id).from_dict(builtin_dict(model_id) | overrides)
    with pytest.raises(MmfastError, match=next(iter(overrides))):
        mmfast.ImageProcessor.from_pretrained(model_id, **overrides)


def test_deepseek_ocr2_global_view_of_nothing() -> None:
    """A strip whose short side rounds to 0 in the global view: transformers' ValueError."""
    strip = Image.fromarray(smooth(1, 2100, 1))
    row = next(r for r in PIL_TABLE if r.model_id == DEEPSEEK_OCR2)
    check(row, [strip], [strip], Override({}))
    with pytest.raises(MmfastError, match="global view resizes to 0x1024"):
        mmfast.ImageProcessor.from_pretrained(DEEPSEEK_OCR2)(strip)


def test_deepseek_ocr2_pads_with_a_calls_background_color() -> None:
    """The PIL class paints its padding with a call's background_color."""
    image = Image.fromarray(noise(300, 200, 1))
    hf = hf_class(DEEPSEEK_OCR2).from_dict(builtin_dict(DEEPSEEK_OCR2))
    want = hf([image], return_tensors="np", background_color=[9, 200, 30])
    proc = mmfast.ImageProcessor.from_pretrained(DEEPSEEK_OCR2)
    got = proc(image, background_color=[9, 200, 30])
    assert_same_outputs(got, want)
    assert not np.array_equal(got.pixel_values, proc(image).pixel_values)


def test_fuyu_refuses_what_it_would_not_convert() -> None:
    """Fuyu's class has no do_convert_rgb: transformers keeps a greyscale or RGBA image's
    channels (1- or 4-channel outputs), which mmfast refuses; with do_convert_rgb set, both
    convert."""
    config = dict(models.registry.BUILTINS["adept/fuyu-8b"].preprocessor)
    gray = Image.fromarray(smooth(40, 50, 1)[..., 0])
    rgba = Image.fromarray(noise(40, 50, 2)).convert("RGBA")
    hf = hf_class("adept/fuyu-8b").from_dict(config)
    proc = mmfast.ImageProcessor.from_pretrained("adept/fuyu-8b")
    for image, channels in ((gray, 1), (rgba, 4)):
        assert hf([image], return_tensors="np")["images"].shape[2] == channels
        with pytest.raises(MmfastError, match="do_convert_rgb"):
            proc(image)
    converting = mmfast.ImageProcessor.from_pretrained("adept/fuyu-8b", do_convert_rgb=True)
    want = hf_class("adept/fuyu-8b").from_dict(config | {"do_convert_rgb": True})
    assert_same_outputs(converting(rgba), want([rgba], return_tensors="np"))


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
