"""Pixtral (Mistral 3, LightOnOCR), Idefics2 and Emu3 beyond the parity table: the tokens their
transformers processors put in the prompt, mmfast.hf under those processors, prompts as nested
lists, and what each class does with a call's arguments.

Each processor is transformers' own, loaded from a checkpoint directory written here from the
built-in (with a WordLevel tokenizer of the special tokens it reads), run on one prompt with
one image; the count of its placeholder tokens in ``input_ids`` must be mmfast's
``num_image_tokens``. transformers builds PixtralProcessor only with torch and torchvision.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import assert_same_outputs, noise, smooth
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal
from parity_table import hf_reference
from PIL import Image

import mmfast
from mmfast import MmfastError, hf
from mmfast.models import registry
from mmfast.reference import normalize_uint8

transformers = pytest.importorskip("transformers")

TORCH = all(importlib.util.find_spec(m) is not None for m in ("torch", "torchvision"))
MISTRAL = "mistralai/Mistral-Small-3.1-24B-Instruct-2503"
PIXTRAL = "mistral-community/pixtral-12b"
LIGHTON = "lightonai/LightOnOCR-1B-1025"
IDEFICS2 = "HuggingFaceM4/idefics2-8b"
IDEFICS3 = "HuggingFaceM4/Idefics3-8B-Llama3"
SMOLVLM = "HuggingFaceTB/SmolVLM-Instruct"
EMU3 = "BAAI/Emu3-Chat-hf"

SPECIAL_TOKENS = (
    "<pad>", "<unk>", "<s>", "</s>", "[IMG]", "[IMG_BREAK]", "[IMG_END]", "<|image_pad|>",
    "<|vision_pad|>", "<|vision_end|>", "<image>", "<fake_token_around_image>",
    "<end_of_utterance>", "<|image start|>", "<|image end|>", "<|image token|>",
    "<|extra_201|>",
)  # fmt: skip


@dataclass(frozen=True)
class Case:
    """A model's processor: the prompt holding one image, the tokenizer attributes it reads,
    the tokens an image expands to, and whether transformers needs torchvision for it."""

    model_id: str
    prompt: str
    placeholders: tuple[str, ...]
    tokens: Mapping[str, str] = field(default_factory=dict)
    torchvision: bool = False
    backed: bool = True


PIXTRAL_TOKENS = ("[IMG]", "[IMG_BREAK]", "[IMG_END]")
CASES = [
    Case(MISTRAL, "[IMG] describe", PIXTRAL_TOKENS, torchvision=True),
    Case(PIXTRAL, "[IMG] describe", PIXTRAL_TOKENS, torchvision=True),
    Case(
        LIGHTON,
        "<|image_pad|> describe",
        ("<|image_pad|>",),
        {
            "image_token": "<|image_pad|>",
            "image_break_token": "<|vision_pad|>",
            "image_end_token": "<|vision_end|>",
        },
    ),
    Case(IDEFICS2, "<image> describe", ("<image>", "<fake_token_around_image>")),
    Case(
        EMU3,
        "<image> describe",
        ("<image>",),
        {
            "image_token": "<image>",
            "boi_token": "<|image start|>",
            "eoi_token": "<|image end|>",
            "image_wrapper_token": "<|image token|>",
            "eof_token": "<|extra_201|>",
        },
        backed=False,  # a NumPy-only class, which mmfast.hf does not back
    ),
]


def write_checkpoint(directory: Path, case: Case) -> Path:
    """A local checkpoint of the built-in, with a tokenizer of :data:`SPECIAL_TOKENS`."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    builtin = registry.BUILTINS[case.model_id]
    files = {
        "preprocessor_config.json": dict(builtin.preprocessor),
        "config.json": {"model_type": builtin.model_type},
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "unk_token": "<unk>",
            "pad_token": "<pad>",
            "bos_token": "<s>",
            "eos_token": "</s>",
            "extra_special_tokens": dict(case.tokens),
        },
    }
    if builtin.processor:
        files["processor_config.json"] = dict(builtin.processor)
    for name, content in files.items():
        (directory / name).write_text(json.dumps(content), encoding="utf-8")
    vocab = {token: i for i, token in enumerate((*SPECIAL_TOKENS, "describe"))}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


def needs(case: Case) -> None:
    if case.torchvision and not TORCH:
        pytest.skip(f"transformers builds {case.model_id}'s processor only with torchvision")


SIZES = [(1, 1), (3, 7), (27, 29), (97, 150), (333, 250), (61, 530), (2000, 900), (5, 1600)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.model_id.rsplit("/", 1)[-1])
def test_token_counts_are_the_processors(case: Case, tmp_path: Path) -> None:
    """The placeholder tokens transformers' processor puts in ``input_ids`` for one image are
    ``num_image_tokens``, for the image processor class transformers loads with it."""
    needs(case)
    processor = transformers.AutoProcessor.from_pretrained(write_checkpoint(tmp_path, case))
    # The class AutoProcessor loads: torchvision's where it exists and is installed.
    backend = "torchvision" if TORCH and case.model_id != EMU3 else "pil"
    proc = mmfast.ImageProcessor.from_pretrained(case.model_id, backend=backend)
    ids = [processor.tokenizer.convert_tokens_to_ids(t) for t in case.placeholders]
    for height, width in SIZES:
        image = Image.fromarray(smooth(height, width, height + width))
        if case.model_id == EMU3 and height in (1, 3):
            # transformers reads the image as channels-first: mmfast refuses it.
            with pytest.raises(MmfastError, match="channels-first"):
                proc.num_image_tokens(height, width)
            continue
        try:
            out = processor(images=[image], text=[case.prompt], return_tensors="np")
        except (ValueError, IndexError, ZeroDivisionError, RuntimeError):
            with pytest.raises(MmfastError):
                proc.num_image_tokens(height, width)
                proc(image)
            continue
        count = int(np.isin(out["input_ids"], ids).sum())
        assert proc.num_image_tokens(height, width) == count, (height, width)


@pytest.mark.parametrize("case", [c for c in CASES if c.backed], ids=lambda c: c.model_id)
def test_processors_run_on_mmfast(case: Case, tmp_path: Path) -> None:
    """AutoProcessor after ``mmfast.hf.install()``: the same ``input_ids`` and tensors for two
    prompts with an image each, the image processor computed by mmfast."""
    needs(case)
    directory = write_checkpoint(tmp_path, case)
    plain = transformers.AutoProcessor.from_pretrained(directory)
    hf.install()
    try:
        backed = transformers.AutoProcessor.from_pretrained(directory)
    finally:
        hf.uninstall()
    assert isinstance(backed.image_processor, hf.MmfastBacked)
    before = hf.stats()["mmfast"]
    images = [[Image.fromarray(noise(120, 200, 1))], [Image.fromarray(noise(333, 250, 2))]]
    for tensors in ["np", "pt"] if TORCH else ["np"]:
        text = [case.prompt] * 2
        want = plain(images=images, text=text, return_tensors=tensors, padding=True)
        got = backed(images=images, text=text, return_tensors=tensors, padding=True)
        assert list(got) == list(want)
        for key in want:
            a, b = np.asarray(got[key]), np.asarray(want[key])
            assert a.dtype == b.dtype and np.array_equal(a, b), key
    assert hf.stats()["mmfast"] > before


def images(*sizes: tuple[int, int]) -> list[Image.Image]:
    return [Image.fromarray(noise(h, w, h * w)) for h, w in sizes]


@pytest.mark.parametrize("model_id", [IDEFICS2, EMU3])
def test_prompts_nest_like_hf(model_id: str) -> None:
    """A nested list is each prompt's images: Idefics2 pads prompts to the most frames (an
    empty prompt is all padding), Emu3 flattens them; both pad every frame to the batch's
    largest."""
    reference = hf_reference(model_id)
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    a, b, c, d = images((300, 200), (64, 90), (100, 900), (500, 500))
    layouts: list[Any] = [[[a, b], [c]], [[a], [b, c, d]], [[a]], [a, b, c]]
    if model_id == IDEFICS2:
        layouts.append([[], [b, c]])
    for samples in layouts:
        assert_same_outputs(proc(samples), reference(samples, {}))


def test_idefics2_refuses_what_it_cannot_stack() -> None:
    """Without padding transformers stacks frames, which fails for frames of different
    sizes."""
    reference = hf_reference(IDEFICS2)
    unpadded = mmfast.ImageProcessor.from_pretrained(IDEFICS2, do_pad=False)
    with pytest.raises(ValueError):
        reference(images((100, 100), (1000, 100)), {"do_pad": False})
    with pytest.raises(MmfastError, match="do_pad off"):
        unpadded(images((100, 100), (1000, 100)))


def test_idefics3_reads_an_int_size_by_default_to_square() -> None:
    """An int ``size`` is a square, or with ``default_to_square`` off a shortest edge, which
    transformers refuses (it wants a longest edge or a height and width); mmfast made it a
    square whatever ``default_to_square`` said."""
    reference = hf_reference(SMOLVLM)
    image = images((70, 130))
    for square in (True, False):
        settings = {"size": 112, "default_to_square": square}
        if square:
            got = mmfast.ImageProcessor.from_pretrained(SMOLVLM)(image, **settings)
            assert_same_outputs(got, reference(image, settings))
            continue
        with pytest.raises(ValueError, match="longest_edge"):
            reference(image, settings)
        with pytest.raises(MmfastError, match=r"size: expected \{longest_edge\} or"):
            mmfast.ImageProcessor.from_pretrained(SMOLVLM, **settings)


@pytest.mark.parametrize("model_id", [IDEFICS2, IDEFICS3, SMOLVLM])
def test_unequal_prompts_pad_into_float32(model_id: str) -> None:
    """With rescale and normalise off, the PIL classes of Idefics2 and Idefics3 (SmolVLM's too)
    pad prompts of unequal frame or tile counts with float32 zeros, which make the uint8
    pixels float32 as numpy stacks them; prompts of equal counts stay uint8. mmfast gives the
    same dtype and values (it refused Idefics2's case and returned uint8 for Idefics3's)."""
    reference = hf_reference(model_id)
    raw = {"do_rescale": False, "do_normalize": False}
    proc = mmfast.ImageProcessor.from_pretrained(model_id, **raw)
    ragged = [images((100, 100), (50, 50)), images((40, 30))]
    # One image each, in unequal tile counts where Idefics3 splits them (one frame each in
    # Idefics2).
    tall = [images((900, 300)), images((300, 300))]
    even = [images((100, 100)), images((50, 50))]
    for samples, dtype in [(ragged, np.float32), (tall, np.float32), (even, np.uint8)]:
        want = reference(samples, raw)
        if model_id == IDEFICS2 and samples is tall:
            dtype = np.uint8  # one frame each
        assert want["pixel_values"].dtype == dtype
        assert_same_outputs(proc(samples), want)
    if not proc.config.raw_pixels:
        return  # Idefics2 pads frames with zeros after normalising
    # The pixels before the tables: the lookup gives the float32 values.
    packed = proc(ragged, dtype="uint8")
    assert packed["pixel_values"].dtype == np.uint8
    assert_array_equal(
        normalize_uint8(packed["pixel_values"], packed["pixel_lut"], packed["pixel_rows_mask"]),
        reference(ragged, raw)["pixel_values"],
    )


def test_emu3_reads_its_sizes_from_its_settings() -> None:
    """Emu3ImageProcessor resizes by the settings it was built with: a call's size or pixel
    bounds change nothing, and do_pad is a call argument only (the setting is dropped)."""
    cls = hf_reference(EMU3)
    proc = mmfast.ImageProcessor.from_pretrained(EMU3)
    batch = images((300, 200), (64, 90))
    ignored = {"min_pixels": 64 * 64, "max_pixels": 100 * 100, "size": {"height": 8, "width": 8}}
    assert_same_outputs(proc(batch, **ignored), cls(batch, {}))
    # A do_pad setting is dropped by the class: the batch is still padded.
    assert_same_outputs(
        mmfast.ImageProcessor.from_pretrained(EMU3, do_pad=False)(batch), cls(batch, {})
    )
    from transformers.models.emu3.image_processing_emu3 import Emu3ImageProcessor

    hf_class = Emu3ImageProcessor.from_dict(dict(registry.BUILTINS[EMU3].preprocessor))
    one = images((300, 200))
    want = hf_class(one, do_pad=False, return_tensors="np")
    assert_same_outputs(proc(one, do_pad=False), want)


def test_pixtral_processor_patch_size_reaches_the_pixels() -> None:
    """PixtralProcessor calls its image processor with ``patch_size * spatial_merge_size``
    (28 for Mistral Small 3.1): as a call argument mmfast takes it too."""
    reference = hf_reference(MISTRAL)
    proc = mmfast.ImageProcessor.from_pretrained(MISTRAL)
    batch = images((300, 200), (61, 530))
    got = proc(batch, patch_size=28)
    assert_same_outputs(got, reference(batch, {"patch_size": 28}))
    assert (got["image_sizes"] % 28 == 0).all()
    assert [proc.num_image_tokens(h, w) for h, w in [(300, 200), (61, 530)]] == [
        (h // 28) * (w // 28 + 1) for h, w in got["image_sizes"]
    ]


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.model_id != IDEFICS2], ids=lambda c: c.model_id
)
@settings(max_examples=150, deadline=None)
@given(height=st.integers(1, 9000), width=st.integers(1, 9000))
def test_token_counts_match_get_num_multimodal_tokens(
    case: Case, height: int, width: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Without pixels: the processor's ``_get_num_multimodal_tokens`` (what vLLM sizes prompts
    by) for any image size but 1 or 3 pixels high: transformers sizes
    ``np.zeros((height, width, 3))`` there, which it reads as channels-first (an image
    ``width`` x 3), so its count is not what the processor's prompt holds
    (``test_token_counts_are_the_processors`` checks those)."""
    needs(case)
    if height in (1, 3):
        return
    if case.model_id == EMU3 and max(height, width) / min(height, width) > 200:
        return
    processor = loaded_processor(case, tmp_path_factory)
    proc = mmfast.ImageProcessor.from_pretrained(case.model_id)
    want = processor._get_num_multimodal_tokens(image_sizes=[(height, width)]).num_image_tokens[0]
    try:
        tokens = proc.num_image_tokens(height, width)
    except MmfastError:
        # A side floored to 0: transformers counts on, but its image processor cannot
        # resize to it (nor can the processor that calls it).
        with pytest.raises((ValueError, RuntimeError)):
            processor.image_processor(Image.new("RGB", (width, height)))
        return
    assert tokens == want


_PROCESSORS: dict[str, Any] = {}


def loaded_processor(case: Case, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """transformers' processor for the case, loaded once."""
    if case.model_id not in _PROCESSORS:
        directory = write_checkpoint(tmp_path_factory.mktemp("checkpoint"), case)
        _PROCESSORS[case.model_id] = transformers.AutoProcessor.from_pretrained(directory)
    return _PROCESSORS[case.model_id]
