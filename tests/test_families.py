"""Every model family against its reference, generated from one table.

Each row names a built-in checkpoint, its reference and the overrides to try. The reference is
transformers' PIL-backend class for the family (``Family.hf_pil``, built from the same config
dict as the built-in, ``return_tensors="np"``) or, for the Kimi checkpoints, whose processors
are remote code needing torch, the NumPy restatement in ``kimi_reference``. Every output key must
match in order, dtype, shape and bits; where the reference raises ``ValueError``, mmfast must
raise :class:`MmfastError`. Llama 4 (torch only) is tested against goldens in
``test_processors``.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
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
    hf_load_image,
    make_image,
    noise,
    shared_path,
    smooth,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageOps

import mmfast
from mmfast import MmfastError, models

Outputs = Mapping[str, np.ndarray]
Reference = Callable[[list[Image.Image], dict[str, Any]], Outputs]


def hf_class(model_id: str) -> Any:
    """transformers' PIL class for the checkpoint's family."""
    family, _ = models.config.select_family(models.config.read_source(model_id))
    assert family.hf_pil is not None
    module, name = family.hf_pil.rsplit(".", 1)
    return getattr(importlib.import_module(f"transformers.models.{module}"), name)


def hf_reference(model_id: str) -> Reference:
    """transformers' PIL class for the checkpoint's family, from the built-in's config dict,
    called with the image kwargs the model's processor passes (the family's
    ``processor_defaults``, checked against the HF processors below)."""
    cls = hf_class(model_id)
    family, _ = models.config.select_family(models.config.read_source(model_id))

    def run(images: list[Any], overrides: dict[str, Any]) -> Outputs:
        processor = cls.from_dict(builtin_dict(model_id) | overrides)
        kwargs = {k: v for k, v in family.processor_defaults.items() if k not in overrides}
        return dict(processor(images, return_tensors="np", **kwargs))

    return run


def kimi_vl_reference(model_id: str) -> Reference:
    def run(images: list[Image.Image], overrides: dict[str, Any]) -> Outputs:
        return kimi_reference.kimi_vl(images, builtin_dict(model_id) | overrides)

    return run


def kimi_k25_reference(model_id: str) -> Reference:
    def run(images: list[Image.Image], overrides: dict[str, Any]) -> Outputs:
        return kimi_reference.kimi_k25(images, builtin_dict(model_id)["media_proc_cfg"] | overrides)

    return run


def merged_tokens(merge: int) -> Callable[[Outputs, dict[str, Any]], int]:
    """Qwen-like processors: ``image_grid_thw.prod() // merge_size**2``."""

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        return int(np.prod(out["image_grid_thw"][0])) // merge**2

    return count


def gemma3_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """Gemma3Processor: 256 soft tokens for the image and each pan-and-scan crop."""
    return 256 * (1 + int(out["num_crops"][0]))


def internvl_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """InternVLProcessor: <img>, 256 context tokens per tile, </img>."""
    return 2 + 256 * int(out["num_patches"][0])


def aya_tokens(out: Outputs, overrides: dict[str, Any]) -> int:
    """AyaVisionProcessor._get_num_multimodal_tokens with (364 // (14 * 2)) ** 2 per tile."""
    per_tile = (364 // 28) ** 2
    return per_tile + 3 + (int(out["num_patches"][0]) - 1) * (per_tile + 1)


def llava_next_tokens(
    processor: str, **attributes: Any
) -> Callable[[Outputs, dict[str, Any]], int]:
    """``replace_image_token``'s count of a LLaVA-NeXT-style processor (``module.Class`` under
    ``transformers.models``), run on a stand-in holding only the attributes it reads (the real
    processor needs a tokenizer)."""
    module, name = processor.rsplit(".", 1)
    cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        pinpoints = overrides.get("image_grid_pinpoints") or attributes["pinpoints"]
        fake = SimpleNamespace(
            image_processor=SimpleNamespace(image_grid_pinpoints=pinpoints),
            **{k: v for k, v in attributes.items() if k != "pinpoints"},
        )
        fake._get_unpadded_features = lambda *a: cls._get_unpadded_features(fake, *a)
        fake._get_number_of_features = lambda *a: cls._get_number_of_features(fake, *a)
        inputs = {
            "image_sizes": out["image_sizes"],
            "pixel_values": out["pixel_values"],
            "batch_num_images": out.get("batch_num_images", [1]),
        }
        return str(cls.replace_image_token(fake, inputs, 0)).count("<image>")

    return count


def idefics3_tokens(seq_len: int) -> Callable[[Outputs, dict[str, Any]], int]:
    """Idefics3Processor._get_num_multimodal_tokens, "\n\n" read as one token."""

    def count(out: Outputs, overrides: dict[str, Any]) -> int:
        rows, cols = out["rows"][0][0], out["cols"][0][0]
        return seq_len + 3 + rows * (cols * (seq_len + 2) + 1)

    return count


@dataclass(frozen=True)
class Row:
    model_id: str
    reference: Reference
    tokens: Callable[[Outputs, dict[str, Any]], int]
    overrides: Sequence[Override] = field(default_factory=tuple)

    def __str__(self) -> str:
        return self.model_id.rsplit("/", 1)[-1]


COMMON = (
    Override({"do_normalize": False}),
    Override({"image_mean": [0.1, 0.2, 0.3], "image_std": [0.9, 0.7, 0.5]}),
)
PATCH_COMMON = (
    *COMMON,
    Override({"resample": 0}),
    Override({"resample": 1}),
    Override({"do_rescale": False}),
)

GLM_TYPES = "zai-org/GLM-4.1V-9B-Thinking", "zai-org/GLM-OCR"
TABLE = [
    Row(
        "Qwen/Qwen2.5-Omni-7B",
        hf_reference("Qwen/Qwen2.5-Omni-7B"),
        merged_tokens(2),
        (*PATCH_COMMON, Override({"max_pixels": 28 * 28 * 64})),
    ),
    Row(
        "Qwen/Qwen3-Omni-30B-A3B-Instruct",
        hf_reference("Qwen/Qwen3-Omni-30B-A3B-Instruct"),
        merged_tokens(2),
        (Override({"min_pixels": 32 * 32 * 300}),),
    ),
    *(
        Row(
            model_id,
            hf_reference(model_id),
            merged_tokens(2),
            (
                *PATCH_COMMON,
                Override({"size": {"shortest_edge": 28 * 28 * 10, "longest_edge": 28 * 28 * 90}}),
                Override({"patch_size": 16}),
                Override({"temporal_patch_size": 3}),
            ),
        )
        for model_id in GLM_TYPES
    ),
    Row(
        "PaddlePaddle/PaddleOCR-VL",
        hf_reference("PaddlePaddle/PaddleOCR-VL"),
        merged_tokens(2),
        (
            *PATCH_COMMON,
            Override({"max_pixels": 28 * 28 * 100}),
            Override({"min_pixels": 28 * 28 * 400, "max_pixels": 28 * 28 * 900}),
            Override({"temporal_patch_size": 2}),
        ),
    ),
    Row(
        "moonshotai/Kimi-VL-A3B-Instruct",
        kimi_vl_reference("moonshotai/Kimi-VL-A3B-Instruct"),
        lambda out, overrides: (
            int(np.prod(out["image_grid_hws"][0]))
            // int(np.prod(overrides.get("merge_kernel_size", [2, 2])))
        ),
        (
            Override({"in_token_limit": 64}),
            Override({"pad_input": False}),
            Override({"pad_input": False, "in_token_limit": 100}),
            Override({"merge_kernel_size": [1, 3], "in_token_limit": 300}),
            Override({"image_mean": [0.1, 0.2, 0.3], "image_std": [0.9, 0.7, 0.5]}),
        ),
    ),
    Row(
        "moonshotai/Kimi-K2.5",
        kimi_k25_reference("moonshotai/Kimi-K2.5"),
        lambda out, overrides: (
            int(np.prod(out["grid_thws"][0])) // overrides.get("merge_kernel_size", 2) ** 2
        ),
        (
            Override({"in_patch_limit": 64}),
            Override({"patch_limit_on_one_side": 20}),
            Override({"merge_kernel_size": 3, "in_patch_limit": 500}),
            Override({"image_mean": [0.1, 0.2, 0.3], "image_std": [0.9, 0.7, 0.5]}),
        ),
    ),
    Row(
        "google/gemma-3-4b-it",
        hf_reference("google/gemma-3-4b-it"),
        gemma3_tokens,
        (
            *COMMON,
            Override({"do_pan_and_scan": True}),
            Override({"do_pan_and_scan": True, "pan_and_scan_min_crop_size": 32}),
            Override({"do_pan_and_scan": True, "pan_and_scan_max_num_crops": 2}),
            Override({"size": {"height": 224, "width": 160}, "resample": 3}),
        ),
    ),
    Row(
        "google/siglip-so400m-patch14-384",
        hf_reference("google/siglip-so400m-patch14-384"),
        lambda out, overrides: 0,
        (*COMMON, Override({"do_rescale": False, "do_normalize": False})),
    ),
    Row(
        "google/paligemma2-3b-pt-224",
        hf_reference("google/paligemma2-3b-pt-224"),
        lambda out, overrides: 256,
        (Override({"size": {"height": 448, "width": 448}, "resample": 2}),),
    ),
    Row(
        "OpenGVLab/InternVL3-8B-hf",
        hf_reference("OpenGVLab/InternVL3-8B-hf"),
        internvl_tokens,
        (
            *COMMON,
            Override({"crop_to_patches": False}),
            Override({"max_patches": 4}),
            Override({"min_patches": 3, "max_patches": 6}),
            Override({"size": {"height": 224, "width": 224}, "resample": 2}),
        ),
    ),
    Row(
        "CohereLabs/aya-vision-8b",
        hf_reference("CohereLabs/aya-vision-8b"),
        aya_tokens,
        (Override({"max_patches": 2}),),
    ),
    Row(
        "llava-hf/llava-v1.6-mistral-7b-hf",
        hf_reference("llava-hf/llava-v1.6-mistral-7b-hf"),
        llava_next_tokens(
            "llava_next.processing_llava_next.LlavaNextProcessor",
            pinpoints=builtin_dict("llava-hf/llava-v1.6-mistral-7b-hf")["image_grid_pinpoints"],
            patch_size=14,
            num_additional_image_tokens=1,
            vision_feature_select_strategy="default",
            image_token="<image>",
        ),
        (
            *COMMON,
            Override({"image_grid_pinpoints": [[336, 336], [336, 1008], [1344, 336]]}),
            Override({"size": {"shortest_edge": 224}, "crop_size": 224}),
            Override({"size": {"shortest_edge": 400}}),
            Override({"resample": 2}),
        ),
    ),
    Row(
        "llava-hf/llava-onevision-qwen2-7b-ov-hf",
        hf_reference("llava-hf/llava-onevision-qwen2-7b-ov-hf"),
        llava_next_tokens(
            "llava_onevision.processing_llava_onevision.LlavaOnevisionProcessor",
            pinpoints=builtin_dict("llava-hf/llava-onevision-qwen2-7b-ov-hf")[
                "image_grid_pinpoints"
            ],
            num_image_tokens=729,
            vision_aspect_ratio="anyres_max_9",
            vision_feature_select_strategy="full",
            image_token="<image>",
        ),
        (
            *COMMON,
            Override({"image_grid_pinpoints": [[384, 384], [384, 768], [768, 768]]}),
            Override({"size": {"height": 224, "width": 224}}),
        ),
    ),
    *(
        Row(
            model_id,
            hf_reference(model_id),
            idefics3_tokens(seq_len),
            (
                *COMMON,
                Override({"do_image_splitting": False}),
                Override({"size": {"longest_edge": 700}}),
                Override({"max_image_size": {"longest_edge": 200}}),
                Override({"do_resize": False}),
                Override({"resample": 3}),
            ),
        )
        for model_id, seq_len in [
            ("HuggingFaceTB/SmolVLM2-2.2B-Instruct", 81),
            ("HuggingFaceM4/Idefics3-8B-Llama3", 169),
        ]
    ),
]
ROWS = {str(row): row for row in TABLE}
SHARED_IMAGES = sorted(p.name for p in (SHARED / "images").glob("*")) if SHARED.exists() else []


def check(row: Row, ours: Sequence[Any], theirs: list[Image.Image], override: Override) -> None:
    """mmfast on ``ours`` equals the reference on ``theirs``, or both refuse them."""
    proc = mmfast.ImageProcessor.from_pretrained(row.model_id, **override.ours)
    try:
        want = row.reference(theirs, override.reference)
    except ValueError as exc:
        with pytest.raises(MmfastError):
            proc(list(ours))
        assert str(exc)
        return
    got = proc(list(ours))
    assert_same_outputs(got, want)
    if len(theirs) == 1:
        tokens = row.tokens(want, override.reference)
        assert proc.num_image_tokens(theirs[0].height, theirs[0].width) == tokens


def opened(path: Path) -> Image.Image:
    with Image.open(path) as image:
        upright = ImageOps.exif_transpose(image)
        upright.load()
    return upright


@pytest.mark.parametrize("name", SHARED_IMAGES or ["(shared images absent)"])
@pytest.mark.parametrize("row", TABLE, ids=str)
def test_shared_images(row: Row, name: str) -> None:
    """Every awkward file, as a PIL image in its own mode (CMYK, RGBA, P, I;16, 12 MP, ...)."""
    image = opened(shared_path("images", name))
    check(row, [image], [image], Override({}))


@pytest.mark.parametrize("row", TABLE, ids=str)
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


@pytest.mark.parametrize("row", TABLE, ids=str)
@settings(max_examples=12, deadline=None)
@given(size=SIZES, seed=st.integers(0, 2**16), kind=st.sampled_from(["noise", "smooth"]))
def test_random_sizes(row: Row, size: tuple[int, int], seed: int, kind: str) -> None:
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
@pytest.mark.parametrize("row", TABLE, ids=str)
def test_edge_sizes(row: Row, size: tuple[int, int]) -> None:
    image = Image.fromarray(smooth(*size, seed=size[0] + size[1]))
    check(row, [image], [image], Override({}))


OVERRIDE_CASES = [
    pytest.param(row, override, id=f"{row}-{json.dumps(override.ours, sort_keys=True)}")
    for row in TABLE
    for override in row.overrides
]


@pytest.mark.parametrize(("row", "override"), OVERRIDE_CASES)
def test_overrides(row: Row, override: Override) -> None:
    images = [Image.fromarray(noise(150, 97, 1)), Image.fromarray(smooth(61, 530, 2))]
    for image in images:
        check(row, [image], [image], override)


@pytest.mark.parametrize("row", TABLE, ids=str)
def test_batches_and_threads(row: Row) -> None:
    """A batch of mixed sizes equals the reference's batch, on 1, 2 and 5 threads."""
    images = [
        Image.fromarray(make_image("smooth" if i % 2 else "noise", h, w, i))
        for i, (h, w) in enumerate([(300, 200), (45, 700), (1000, 37), (336, 336), (2, 5)])
    ]
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


# Families whose HF processors pass image kwargs of their own on every call.
PROCESSOR_DEFAULTS = [
    ("google/gemma-3-4b-it", "gemma3.processing_gemma3.Gemma3Processor"),
    ("OpenGVLab/InternVL3-8B-hf", "internvl.processing_internvl.InternVLProcessor"),
    ("CohereLabs/aya-vision-8b", "aya_vision.processing_aya_vision.AyaVisionProcessor"),
    ("llava-hf/llava-v1.6-mistral-7b-hf", "llava_next.processing_llava_next.LlavaNextProcessor"),
    ("HuggingFaceM4/Idefics3-8B-Llama3", "idefics3.processing_idefics3.Idefics3Processor"),
    ("HuggingFaceTB/SmolVLM2-2.2B-Instruct", "smolvlm.processing_smolvlm.SmolVLMProcessor"),
]


@pytest.mark.parametrize(("model_id", "processor"), PROCESSOR_DEFAULTS)
def test_processor_defaults_are_hfs(model_id: str, processor: str) -> None:
    module, name = processor.rsplit(".", 1)
    cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)
    family, _ = models.config.select_family(models.config.read_source(model_id))
    assert dict(family.processor_defaults) == cls.images_kwargs


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
