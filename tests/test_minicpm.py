"""MiniCPM-V 4.6 / 4.7 and MiniCPM-OCR beyond the parity table: token counts against the models'
processors, the settings transformers refuses or sizes from pixels, and the processors as
drop-ins (with torch and torchvision, which transformers needs to build them).

The parity table (``parity_table.TABLE``) checks the pixels and outputs of both backends; here
``do_resize=False`` (which transformers' torchvision class fails on with ``UnboundLocalError``,
its PIL class takes for sides that are multiples of ``patch_size``) and
``small_image_upsize="adaptive"`` (OpenCV text detection for most images) are checked, with
``num_image_tokens`` for many sizes.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import assert_same_outputs, builtin_dict, make_image
from parity_table import MINICPM_46, MINICPM_47, MINICPM_OCR, hf_class, minicpm_tokens
from PIL import Image

import mmfast
from mmfast import MmfastError, hf, models

TORCH = all(importlib.util.find_spec(m) is not None for m in ("torch", "torchvision"))
needs_torch = pytest.mark.skipif(not TORCH, reason="transformers' class needs torch")

PROCESSORS = {
    MINICPM_46: ("minicpmv4_6.processing_minicpmv4_6.MiniCPMV4_6Processor", "16x"),
    MINICPM_47: ("minicpmv4_7.processing_minicpmv4_7.MiniCPMV4_7Processor", "16x"),
    MINICPM_OCR: ("minicpm_ocr.processing_minicpm_ocr.MiniCPMOcrProcessor", "4x"),
}
# Unsliced, sliced in one row or column and in a grid, tiny and thin.
SIZES = [(1, 1), (30, 40), (448, 448), (449, 449), (600, 900), (900, 600), (1080, 1920)]
SIZES += [(1500, 2000), (10, 1990), (2100, 10), (5000, 300), (1, 5000)]


def image(height: int, width: int, seed: int = 0) -> Image.Image:
    return Image.fromarray(make_image("smooth" if seed % 2 else "noise", height, width, seed))


def hf_torchvision(model_id: str, overrides: dict[str, Any]) -> Any:
    """transformers' torchvision class for the built-in, with ``overrides``."""
    family = models.config.select_family(models.config.read_source(model_id))[0]
    assert family.hf_torchvision is not None
    module, name = family.hf_torchvision.rsplit(".", 1)
    cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)
    return cls.from_dict(builtin_dict(model_id) | overrides)


def numpy_outputs(outputs: Any) -> dict[str, Any]:
    return {k: v.numpy() if hasattr(v, "numpy") else v for k, v in outputs.items()}


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"use_image_id": False},
        {"downsample_mode": "4x"},
        {"slice_mode": False},
        {"scale_resolution": 112, "max_slice_nums": 6},
    ],
    ids=json.dumps,
)
@pytest.mark.parametrize("model_id", [MINICPM_46, MINICPM_47, MINICPM_OCR])
def test_token_counts_match_the_processors(model_id: str, overrides: dict[str, Any]) -> None:
    """``num_image_tokens`` is the length of the placeholder the model's processor builds
    from transformers' outputs for the image (its first in the prompt)."""
    if model_id == MINICPM_OCR and not TORCH:
        pytest.skip("MiniCPMOcrImageProcessor needs torch")
    processor, downsample = PROCESSORS[model_id]
    count = minicpm_tokens(processor, model_id, downsample)
    proc = mmfast.ImageProcessor.from_pretrained(model_id, **overrides)
    rng = np.random.default_rng(0)
    sizes = SIZES + [tuple(int(v) for v in rng.integers(1, 1600, 2)) for _ in range(6)]
    for i, (height, width) in enumerate(sizes):
        picture = image(height, width, i)
        if model_id == MINICPM_OCR:
            want = numpy_outputs(hf_torchvision(model_id, overrides)([picture]))
        else:
            want = dict(
                hf_class(model_id).from_dict(builtin_dict(model_id) | overrides)(
                    [picture], return_tensors="np"
                )
            )
        assert proc.num_image_tokens(height, width) == count(want, overrides), (height, width)


def test_token_count_of_a_worked_example() -> None:
    """600x900 with MiniCPM-V 4.6: a 1x2 grid (log 1.5 is nearest log 2); the source at 448**2
    is 365x547, rounded to multiples of 56: 392x560 (28x40 patches, 70 tokens); each slice
    (600x450 scaled to 517x387) 504x392 (36x28 patches, 63 tokens):
    3 + 2 + 70 + 2 * (2 + 63) + 0 newlines = 205."""
    proc = mmfast.ImageProcessor.from_pretrained(MINICPM_46)
    plan = proc.plan(600, 900)
    assert plan.target_sizes == ((28, 40), (36, 28), (36, 28))
    assert plan.grid == (1, 2)
    assert proc.num_image_tokens(600, 900) == 205


@pytest.mark.parametrize(
    ("overrides", "size"),
    [
        ({"patch_size": 1, "scale_resolution": 4}, (5, 7)),  # rows and columns past the grid
        ({"patch_size": 1, "scale_resolution": 4}, (2, 40)),
        ({"patch_size": 2}, (1000, 1000)),  # a 2x2 grid of 500x500 slices
        ({}, (980, 980)),
        ({}, (30, 40)),  # not multiples of 14: both refuse
    ],
)
def test_pil_class_without_resizing(overrides: dict[str, Any], size: tuple[int, int]) -> None:
    """The PIL class with ``do_resize=False`` cuts the image itself into the grid's windows,
    the last row and column cut short (``divide_to_patches``); where that gives more slices
    than the grid, MiniCPMV4_6Processor refuses the image, and ``num_image_tokens`` too."""
    overrides = {"do_resize": False, **overrides}
    picture = image(*size)
    reference = hf_class(MINICPM_46).from_dict(builtin_dict(MINICPM_46) | overrides)
    proc = mmfast.ImageProcessor.from_pretrained(MINICPM_46, **overrides)
    try:
        want = dict(reference([picture], return_tensors="np"))
    except ValueError:
        with pytest.raises(MmfastError, match="multiples of patch_size"):
            proc(picture)
        return
    assert_same_outputs(proc(picture), want)
    count = minicpm_tokens(PROCESSORS[MINICPM_46][0], MINICPM_46, "16x")
    try:
        tokens = count(want, overrides)
    except ValueError:
        with pytest.raises(MmfastError, match="slices for a"):
            proc.num_image_tokens(*size)
        return
    assert proc.num_image_tokens(*size) == tokens


@needs_torch
def test_torchvision_class_without_resizing() -> None:
    """transformers' torchvision class fails on every image with ``do_resize=False``
    (``UnboundLocalError``); mmfast raises MmfastError naming the setting. MiniCPM-OCR's class
    raises ValueError."""
    picture = image(28, 56)
    with pytest.raises(UnboundLocalError):
        hf_torchvision(MINICPM_46, {"do_resize": False})([picture])
    with pytest.raises(ValueError, match="do_resize=False is not supported"):
        hf_torchvision(MINICPM_OCR, {"do_resize": False})([picture])
    for model_id in (MINICPM_46, MINICPM_OCR):
        proc = mmfast.ImageProcessor.from_pretrained(
            model_id, backend="torchvision", do_resize=False
        )
        with pytest.raises(MmfastError, match="do_resize: expected true"):
            proc(picture)


# Sliced images whose every cell is larger than 448 squared (transformers never looks at their
# pixels) and images it analyses (unsliced, or with a cell that fits).
ADAPTIVE_BY_SIZE = [(3024, 4032), (2000, 3000), (1400, 1400), (5000, 600), (1000, 1000), (600, 900)]
ADAPTIVE_BY_PIXELS = [(300, 300), (800, 800), (449, 449), (30, 40)]


@needs_torch
def test_adaptive_upsize_where_sizes_decide() -> None:
    """``small_image_upsize="adaptive"`` equals transformers where it sizes the image from its
    size alone; elsewhere mmfast raises MmfastError naming the setting (transformers analyses
    the pixels with OpenCV, and raises ImportError without it)."""
    overrides = {"small_image_upsize": "adaptive"}
    reference = hf_torchvision(MINICPM_OCR, overrides)
    proc = mmfast.ImageProcessor.from_pretrained(MINICPM_OCR, **overrides)
    for i, size in enumerate(ADAPTIVE_BY_SIZE):
        picture = image(*size, i)
        assert_same_outputs(proc(picture), numpy_outputs(reference([picture])))
    cv2 = importlib.util.find_spec("cv2") is not None
    for i, size in enumerate(ADAPTIVE_BY_PIXELS):
        picture = image(*size, i)
        with pytest.raises(MmfastError, match="small_image_upsize: 'adaptive'"):
            proc(picture)
        if not cv2:
            with pytest.raises(ImportError):
                reference([picture])


@needs_torch
def test_adaptive_upsize_falls_back_in_mmfast_hf(caplog: pytest.LogCaptureFixture) -> None:
    """Through ``mmfast.hf``, an image "adaptive" sizes from its pixels runs on transformers'
    own code (the same outputs, or the same error without OpenCV); one sized by its size alone
    runs on mmfast."""
    cls = hf.backed_class(type(hf_torchvision(MINICPM_OCR, {})))
    assert cls is not None
    backed = cls.from_dict(builtin_dict(MINICPM_OCR) | {"small_image_upsize": "adaptive"})
    plain = hf_torchvision(MINICPM_OCR, {"small_image_upsize": "adaptive"})
    before = hf.stats()["mmfast"]
    picture = image(300, 300)
    with caplog.at_level(logging.DEBUG, logger="mmfast.hf"):
        try:
            want = numpy_outputs(plain([picture], return_tensors="pt"))
        except ImportError as exc:
            with pytest.raises(type(exc)):
                backed([picture], return_tensors="pt")
        else:
            assert_same_outputs(numpy_outputs(backed([picture], return_tensors="pt")), want)
    assert "small_image_upsize" in caplog.text
    assert hf.stats()["mmfast"] == before
    large = image(3024, 4032)
    want = numpy_outputs(plain([large], return_tensors="pt"))
    assert_same_outputs(numpy_outputs(backed([large], return_tensors="pt")), want)
    assert hf.stats()["mmfast"] == before + 1


@pytest.mark.parametrize(
    ("model_id", "overrides", "match"),
    [
        (MINICPM_46, {"downsample_mode": "8x"}, "downsample_mode: expected '16x' or '4x'"),
        (MINICPM_OCR, {"small_image_upsize": "sometimes"}, "small_image_upsize: expected"),
        (MINICPM_46, {"max_slice_nums": -1}, "max_slice_nums"),
        (MINICPM_46, {"patch_size": 0}, "patch_size"),
    ],
)
def test_bad_settings_name_the_field(model_id: str, overrides: dict[str, Any], match: str) -> None:
    with pytest.raises(MmfastError, match=match):
        mmfast.ImageProcessor.from_pretrained(model_id, **overrides)


def test_ocr_has_one_class() -> None:
    """transformers has only MiniCPM-OCR's torchvision class: both backends compute it."""
    pil = mmfast.ImageProcessor.from_pretrained(MINICPM_OCR)
    torchvision = mmfast.ImageProcessor.from_pretrained(MINICPM_OCR, backend="torchvision")
    assert pil.config.backend == torchvision.config.backend == "torchvision"
    picture = image(300, 700)
    assert_same_outputs(pil(picture), dict(torchvision(picture)))


def test_batch_strip_and_tensors() -> None:
    """The batch's views share one strip; image by image the strip is each image's own, and
    ``return_tensors="pt"`` keeps ``grids`` and ``num_patches_per_image`` lists."""
    proc = mmfast.ImageProcessor.from_pretrained(MINICPM_46)
    pictures = [image(600, 900, 1), image(30, 40, 2), image(1080, 1920, 3)]
    batch = proc(pictures)
    alone = [proc(p) for p in pictures]
    assert np.array_equal(
        batch["pixel_values"], np.concatenate([a["pixel_values"] for a in alone], axis=-1)
    )
    assert batch["grids"] == [[1, 2], [0, 0], [2, 4]]
    assert batch["num_patches_per_image"] == [3, 1, 9]
    if TORCH:
        tensors = proc(pictures, return_tensors="pt")
        assert isinstance(tensors["grids"], list)
        assert isinstance(tensors["num_patches_per_image"], list)


# --------------------------------------------------------------------------------------------
# The processors as drop-ins (transformers builds them only with torchvision: their video
# processors need it).

SPECIAL = {
    "image_token": "<unk>",
    "video_token": "<video>",
    "image_start_token": "<image>",
    "image_end_token": "</image>",
    "slice_start_token": "<slice>",
    "slice_end_token": "</slice>",
    "image_id_start_token": "<image_id>",
    "image_id_end_token": "</image_id>",
}


def write_checkpoint(directory: Path, model_id: str) -> Path:
    """The built-in's files, with a tokenizer that splits MiniCPM-V's placeholder as the
    model's does: each marker, each digit and each newline one token."""
    from tokenizers import Regex, Tokenizer, pre_tokenizers
    from tokenizers import models as tokenizer_models

    builtin = models.registry.BUILTINS[model_id]
    files = {
        "preprocessor_config.json": dict(builtin.preprocessor),
        "config.json": {"model_type": builtin.model_type},
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "unk_token": "<unk>",
            "pad_token": "<pad>",
            "extra_special_tokens": SPECIAL,
        },
    }
    for name, content in files.items():
        (directory / name).write_text(json.dumps(content), encoding="utf-8")
    specials = ["<pad>", *SPECIAL.values()]
    vocab = {token: i for i, token in enumerate([*specials, *"0123456789", "\n"])}
    tokenizer = Tokenizer(tokenizer_models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"\d|\n"), behavior="isolated")
    tokenizer.add_special_tokens(specials)
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


@needs_torch
@pytest.mark.parametrize("model_id", [MINICPM_46, MINICPM_47, MINICPM_OCR])
def test_processors_match_and_count(model_id: str, tmp_path: Path) -> None:
    """AutoProcessor after ``mmfast.hf.install()``: the model's processor around a backed image
    processor, whose input_ids and tensors equal transformers'; a prompt holding only the image
    is ``num_image_tokens`` tokens long."""
    import transformers

    directory = write_checkpoint(tmp_path, model_id)
    plain = transformers.AutoProcessor.from_pretrained(directory)
    hf.install()
    try:
        backed = transformers.AutoProcessor.from_pretrained(directory)
    finally:
        hf.uninstall()
    assert isinstance(backed.image_processor, hf.MmfastBacked)
    for use_image_id in (True, False):
        counted = mmfast.ImageProcessor.from_pretrained(model_id, use_image_id=use_image_id)
        for i, size in enumerate([(600, 900), (30, 40), (1080, 1920), (2100, 10)]):
            picture = image(*size, i)
            kwargs = {"text": ["<unk>"], "images": [picture], "use_image_id": use_image_id}
            want = plain(**kwargs, return_tensors="pt")
            before = hf.stats()["mmfast"]
            got = backed(**kwargs, return_tensors="pt")
            assert hf.stats()["mmfast"] == before + 1
            assert list(got) == list(want)
            for key in want:
                assert np.array_equal(np.asarray(got[key]), np.asarray(want[key])), key
            assert want["input_ids"].shape[1] == counted.num_image_tokens(*size), size
