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
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from conftest import (
    SHARED,
    assert_same_outputs,
    builtin_dict,
    builtin_settings,
    make_image,
    noise,
    same_bits,
    within_intermediate_limit,
)
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from parity_table import TABLE, Row, as_outputs, step3p7_tokens, tv_overrides
from PIL import Image
from torchvision_cases import (
    GOLDENS,
    HF_REFUSALS,
    MODELS,
    SYNTHETIC,
    VIDEO_CASES,
    VIDEO_MODELS,
    VIDEO_SETTINGS,
    VIDEO_TOKENS,
    Case,
    Model,
    Override,
    VideoCase,
    cases,
    digest,
    hf_torchvision,
    hf_video,
    hf_video_class,
    hf_video_tokens,
    input_digest,
    load_image,
    ours,
    ours_video,
    ours_video_tokens,
    video_config,
)

import mmfast
from mmfast import MmfastError, UnsupportedModelError

GOLDEN = json.loads(GOLDENS.read_text())["cases"]
VIDEOS = json.loads(GOLDENS.read_text())["videos"]
CASES = list(cases())


def images_or_skip(case: Case) -> list[Image.Image]:
    images = [load_image(name) for name in case.images]
    if any(image is None for image in images):
        pytest.skip(f"optional test data not found: {SHARED / 'images'} (see README, 'Test data')")
    return [image for image in images if image is not None]


@pytest.fixture
def torch_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The goldens are transformers' outputs with torch on one thread, where torch's float
    bilinear resize takes another loop (other last bits: Molmo2): mmfast follows torch's
    thread count (``processors.torch_one_thread``), set to one here, torch imported or not."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def test_goldens_cover_every_case() -> None:
    assert sorted(GOLDEN) == sorted(case.id for case in CASES)


@pytest.mark.usefixtures("torch_on_one_thread")
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
    """mmfast equals transformers' torchvision class on ``case``, or both refuse it; for a
    family without a PIL class, a lone image's token count equals its model processor's."""
    pytest.importorskip("torchvision")
    try:
        want, bfloat16 = hf_torchvision(case)
    except (ValueError, RuntimeError, TypeError, NotImplementedError, ZeroDivisionError):
        with pytest.raises(MmfastError):
            ours(case)
        return
    assert_same_outputs(ours(case, bfloat16), want)
    if case.model.tokens is not None and len(case.images) == 1:
        image = load_image(case.images[0])
        assert image is not None
        settings = builtin_settings(case.model.model_id, **case.override.ours)
        proc = mmfast.ImageProcessor.from_pretrained(
            case.model.model_id, backend="torchvision", **settings
        )
        try:
            tokens = case.model.tokens(want, dict(case.override.reference))
        except KeyError:  # without image_rows (return_row_col_info off) LFM2's cannot count
            return
        assert proc.num_image_tokens(image.height, image.width) == tokens


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


# Rows whose family transformers has only a torchvision class for: their token counts are
# checked here (the others are checked against the PIL class in test_families).
TOKEN_ROWS = [row for row in TABLE if row.torchvision and row.reference is None and row.tokens]


@pytest.mark.parametrize("name", SYNTHETIC)
@pytest.mark.parametrize("row", TOKEN_ROWS, ids=str)
def test_token_counts_match_transformers(row: Row, name: str) -> None:
    """num_image_tokens equals the row's count of what the model's processor inserts for the
    outputs of transformers' torchvision class, with the defaults and every override."""
    pytest.importorskip("torchvision")
    image = load_image(name)
    assert image is not None and row.tokens is not None
    for override in (Override({}), *tv_overrides(row)):
        case = Case(Model(row.model_id), override, (name,))
        try:
            want, _ = hf_torchvision(case)
        except (ValueError, RuntimeError, TypeError, NotImplementedError):
            continue
        proc = mmfast.ImageProcessor.from_pretrained(
            row.model_id, backend="torchvision", **builtin_settings(row.model_id, **override.ours)
        )
        try:
            tokens = row.tokens(want, override.reference)
        except KeyError:  # without image_rows (return_row_col_info off) LFM2's cannot count
            continue
        assert proc.num_image_tokens(image.height, image.width) == tokens, override.ours


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


@pytest.mark.parametrize(
    ("model_id", "overrides", "error", "match"),
    [
        ("openbmb/MiniCPM-V-4.6", {"stack_frames": 2}, UnsupportedModelError, "stack_frames: 2"),
        ("openbmb/MiniCPM-OCR-1.0", {"stack_frames": 3}, UnsupportedModelError, "stack_frames: 3"),
        (
            "google/gemma-4-12B-it",
            {"resample": 0},
            UnsupportedModelError,
            "resample: expected 1, 2 or 3",
        ),
        (
            "openbmb/MiniCPM-V-4.6",
            {"do_rescale": False, "do_normalize": False},
            MmfastError,
            "do_rescale, do_normalize",
        ),
        (
            "google/gemma-4-31B-it",
            {"resample": 0},
            UnsupportedModelError,
            "resample: expected 1, 2 or 3",
        ),
        ("HuggingFaceTB/SmolVLM2-2.2B-Instruct", {"resample": 4}, MmfastError, "resample"),
        ("OpenGVLab/InternVL3-8B-hf", {"initial_shift": "half"}, MmfastError, "initial_shift"),
        # Molmo2 cuts each frame into whole patches (transformers' reshape fails otherwise),
        # resizes without antialiasing (no LANCZOS then) and squashes to a square.
        ("allenai/Molmo2-8B", {"size": 100}, MmfastError, "size: expected a side"),
        ("allenai/Molmo2-8B", {"resample": 1}, MmfastError, "resample: expected 0, 2 or 3"),
        ("allenai/Molmo2-8B", {"size": {"shortest_edge": 378}}, MmfastError, "size"),
        ("allenai/Molmo2-8B", {"pooling_size": [0, 2]}, MmfastError, "pooling_size"),
    ],
)
def test_video_refusals_name_the_setting(
    model_id: str, overrides: dict[str, Any], error: type[Exception], match: str
) -> None:
    """What mmfast cannot compute exactly (or transformers refuses) is refused, naming the
    setting; mmfast.hf then runs transformers' code."""
    with pytest.raises(error, match=match):
        mmfast.ImageProcessor.from_pretrained(model_id, video_overrides=overrides)


@pytest.mark.usefixtures("torch_on_one_thread")
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
    except HF_REFUSALS:
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
    settings = VIDEO_SETTINGS.get(model_id, {})
    compare_video_live(VideoCase(model_id, frames, height, width, rate, options, settings))


def test_deepseek_ocr2_keeps_its_background_color_over_a_calls() -> None:
    """transformers' torchvision DeepseekOcr2ImageProcessor pads with its own
    background_color whatever a call passes (its PIL class takes the call's)."""
    pytest.importorskip("torchvision")
    from transformers.models.deepseek_ocr2.image_processing_deepseek_ocr2 import (
        DeepseekOcr2ImageProcessor,
    )

    model_id = "deepseek-community/DeepSeek-OCR-2"
    image = Image.fromarray(make_image("noise", 300, 200, 1))
    hf = DeepseekOcr2ImageProcessor.from_dict(builtin_dict(model_id))
    want = hf([image], return_tensors="pt", background_color=[9, 200, 30])
    proc = mmfast.ImageProcessor.from_pretrained(model_id, backend="torchvision")
    got = proc(image, background_color=[9, 200, 30])
    assert_same_outputs(got, {k: v.numpy() for k, v in want.items()})
    assert same_bits(got.pixel_values, proc(image).pixel_values)


@pytest.mark.parametrize(
    "case", [c for c in VIDEO_CASES if c.model_id in VIDEO_TOKENS], ids=lambda case: case.id
)
def test_video_tokens_match_processors(case: VideoCase) -> None:
    """``num_video_tokens`` equals the placeholders the model's processor puts in the prompt
    for the clip (its ``replace_video_token`` on transformers' video outputs), or both
    refuse the clip."""
    pytest.importorskip("torchvision")
    try:
        want = hf_video_tokens(case)
    except HF_REFUSALS:
        with pytest.raises(MmfastError):
            ours_video_tokens(case)
        return
    except RuntimeError as exc:
        # A clip GLM-5 samples no frame of: the video processor gives no rows and grid_t 0,
        # which GLM's replace_video_token divides by.
        assert "ZeroDivisionError" in str(exc)
        assert ours_video_tokens(case) == 0
        return
    assert ours_video_tokens(case) == want


# Calls of several clips: (model, config settings, clips as (frames, height, width)). Clips of
# different lengths and sizes pad (SmolVLM), concatenate (Gemma 4) or stay a list.
VIDEO_BATCHES = [
    ("OpenGVLab/InternVL3-8B-hf", {}, [(3, 90, 120), (5, 60, 200)]),
    ("OpenGVLab/InternVL3-8B-hf", {"do_resize": False}, [(2, 90, 120), (2, 90, 120)]),
    ("llava-hf/LLaVA-NeXT-Video-7B-hf", {}, [(4, 300, 200), (4, 120, 500)]),
    ("LanguageBind/Video-LLaVA-7B-hf", {"do_sample_frames": False}, [(6, 90, 120), (4, 48, 64)]),
    ("LanguageBind/Video-LLaVA-7B-hf", {"do_sample_frames": False}, [(3, 90, 120), (3, 48, 64)]),
    ("google/gemma-4-31B-it", {"do_sample_frames": False}, [(3, 90, 120), (2, 400, 100)]),
    ("HuggingFaceTB/SmolVLM2-2.2B-Instruct", {}, [(3, 90, 120), (5, 60, 200)]),
    ("HuggingFaceTB/SmolVLM2-2.2B-Instruct", {"do_resize": False}, [(3, 90, 120), (2, 60, 200)]),
    ("HuggingFaceTB/SmolVLM2-2.2B-Instruct", {"do_pad": False}, [(3, 90, 120), (2, 60, 200)]),
    ("openbmb/MiniCPM-V-4.6", {"do_sample_frames": False}, [(2, 600, 900), (3, 90, 120)]),
    ("openbmb/MiniCPM-OCR-1.0", {"do_sample_frames": False}, [(2, 600, 900), (3, 90, 120)]),
    ("google/gemma-4-12B-it", {"do_sample_frames": False}, [(3, 90, 120), (2, 400, 100)]),
    ("zai-org/GLM-GA", {"do_sample_frames": False}, [(3, 90, 120), (2, 400, 100)]),
    ("allenai/Molmo2-8B", {"do_sample_frames": False}, [(3, 90, 120), (2, 400, 100)]),
    (
        "allenai/Molmo2-8B",
        {"do_sample_frames": False, "do_rescale": True, "do_normalize": True},
        [(1, 30, 40), (4, 64, 64), (2, 10, 300)],
    ),
]


@pytest.mark.parametrize(
    ("model_id", "config", "shapes"),
    VIDEO_BATCHES,
    ids=[f"{m.rsplit('/', 1)[-1]}-{c}-{s}" for m, c, s in VIDEO_BATCHES],
)
def test_video_batches_match_transformers(
    model_id: str, config: dict[str, Any], shapes: list[tuple[int, int, int]]
) -> None:
    """Several clips in one call: each clip's arrays (and lists) as transformers returns them
    with ``return_tensors=None``."""
    torch = pytest.importorskip("torch")
    clips = [
        VideoCase(model_id, t, h, w, 10.0).clip() + np.uint8(i)
        for i, (t, h, w) in enumerate(shapes)
    ]
    cls = hf_video_class(model_id)
    processor = cls.from_dict({**video_config(model_id), **config})
    want = processor(videos=[torch.from_numpy(c) for c in clips], return_tensors=None)
    proc = mmfast.ImageProcessor.from_pretrained(model_id, video_overrides=config)
    got = dict(proc.videos(clips, do_sample_frames=False))
    assert list(got) == list(want)
    for key, value in want.items():
        if isinstance(value, list) and value and hasattr(value[0], "numpy"):
            assert len(got[key]) == len(value), key
            for a, b in zip(got[key], value, strict=True):
                assert same_bits(np.asarray(a), b.numpy()), key
        elif isinstance(value, list):
            assert np.asarray(got[key]).tolist() == value, key
        else:
            assert same_bits(got[key], value.numpy()), key


@pytest.mark.parametrize("model_id", VIDEO_MODELS)
def test_video_outputs_as_torch_tensors(model_id: str) -> None:
    """``return_tensors="pt"``: each array output a torch tensor of its memory (its dtype and
    bits, which transformers' ``"pt"`` outputs have: see the tests above), lists as lists;
    clips of different shapes a list of tensors."""
    torch = pytest.importorskip("torch")
    case = next(c for c in VIDEO_CASES if c.model_id == model_id)
    proc = mmfast.ImageProcessor.from_pretrained(model_id, video_overrides=case.settings)
    clips = [case.clip(), case.clip()[: max(1, case.frames // 2)]]
    for videos in (case.clip(), clips):
        try:
            want = dict(proc.videos(videos, video_fps=case.rate, **case.options))
        except MmfastError:
            continue
        got = dict(proc.videos(videos, video_fps=case.rate, return_tensors="pt", **case.options))
        assert list(got) == list(want)
        for key, value in want.items():
            if isinstance(value, np.ndarray):
                assert isinstance(got[key], torch.Tensor), key
                assert same_bits(got[key].numpy(), value), key
            elif key == proc.video_config.output_key:
                assert len(got[key]) == len(value), key
                for tensor, array in zip(got[key], value, strict=True):
                    assert isinstance(tensor, torch.Tensor), key
                    assert same_bits(tensor.numpy(), array), key
            else:
                assert got[key] == value, key
    with pytest.raises(MmfastError, match="return_tensors: expected 'np', 'pt' or None"):
        proc.videos(case.clip(), video_fps=case.rate, return_tensors="tf")


@pytest.mark.parametrize(
    "model_id",
    ["Qwen/Qwen2-VL-7B-Instruct", "Qwen/Qwen3-VL-8B-Instruct", "llava-hf/LLaVA-NeXT-Video-7B-hf"],
)
def test_one_frame_array_is_a_one_frame_clip(model_id: str) -> None:
    """An (H, W, 3) array given as the video is one frame, as transformers reads it (it was
    read as H grayscale frames W pixels by 3), or both refuse a clip of one frame."""
    torch = pytest.importorskip("torch")
    frame = VideoCase(model_id, 1, 48, 64, 10.0).clip()[0]
    processor = hf_video_class(model_id).from_dict(video_config(model_id))
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    try:
        want = processor(videos=torch.from_numpy(frame), return_tensors="pt")
    except ValueError:
        with pytest.raises(MmfastError, match="1"):
            proc.videos(frame, do_sample_frames=False)
        return
    got = proc.videos(frame, do_sample_frames=False)
    assert list(got) == list(want)
    for key, value in want.items():
        assert same_bits(got[key], value.numpy()), key


# EmbeddingGemma 2's video processor: Gemma 4's pipeline, its own sampler. No built-in
# checkpoint: a checkpoint directory of its class defaults and these settings.
EMBEDDING_GEMMA2 = [
    ({}, {}),
    ({}, {"fps": None}),
    ({"overflow_strategy": "truncate", "max_frames": 3}, {}),
    ({"fps": 4, "max_soft_tokens": 140}, {}),
    ({"max_frames": 4}, {"fps": 12}),
    ({}, {"num_frames": 3}),
    ({}, {"do_sample_frames": False}),
]


@pytest.mark.parametrize(("config", "options"), EMBEDDING_GEMMA2, ids=str)
def test_embedding_gemma2_videos_match_transformers(
    config: dict[str, Any], options: dict[str, Any], tmp_path: Any
) -> None:
    torch = pytest.importorskip("torch")
    import transformers
    from transformers.video_utils import VideoMetadata

    settings = {**config, "video_processor_type": "EmbeddingGemma2VideoProcessor"}
    (tmp_path / "video_preprocessor_config.json").write_text(json.dumps(settings))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "embedding_gemma2"}))
    (tmp_path / "preprocessor_config.json").write_text(
        json.dumps(dict(mmfast.models.registry.BUILTINS["google/gemma-4-31B-it"].preprocessor))
    )
    clip = VideoCase("embedding", 23, 97, 131, 6.0).clip()
    processor = transformers.EmbeddingGemma2VideoProcessor.from_dict(settings)
    metadata = VideoMetadata(total_num_frames=23, fps=6.0, width=131, height=97, duration=23 / 6)
    try:
        want = processor(
            videos=[torch.from_numpy(clip)],
            video_metadata=[metadata],
            return_tensors="pt",
            **options,
        )
    except ValueError:
        with pytest.raises(MmfastError):
            mmfast.ImageProcessor.from_pretrained(tmp_path).videos(clip, video_fps=6.0, **options)
        return
    got = mmfast.ImageProcessor.from_pretrained(tmp_path).videos(clip, video_fps=6.0, **options)
    assert_same_outputs(dict(got), {k: v.numpy() for k, v in want.items()})


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
        ("baidu/Unlimited-OCR", {"background_color": [10, 200, 30]}),
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


@pytest.mark.parametrize("max_num_tiles", [1, 2, 4])
def test_perception_lm_tiles_on_its_instances_canvases(max_num_tiles: int) -> None:
    """transformers' class picks canvases from its instance's max_num_tiles (36); a call's
    says only whether to tile. A call's 4 gave 5 tiles here, transformers' 36."""
    pytest.importorskip("torchvision")
    model_id = "facebook/Perception-LM-1B"
    image = make_image("noise", 333, 250, 2)
    hf = hf_class(model_id).from_dict(builtin_dict(model_id))
    want = hf([Image.fromarray(image)], return_tensors="pt", max_num_tiles=max_num_tiles)
    proc = mmfast.ImageProcessor.from_pretrained(model_id, backend="torchvision")
    assert_same_outputs(
        proc(image, max_num_tiles=max_num_tiles), {k: v.numpy() for k, v in want.items()}
    )


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


@pytest.mark.parametrize("clip", [(1, 64, 90), (4, 240, 320), (9, 97, 411)])
def test_instructblip_video_tokens_match_the_processor(clip: tuple[int, int, int]) -> None:
    """InstructBlipVideoProcessor puts num_query_tokens video tokens for each of the four
    frames it assumes before the text, whatever the clip holds (a word-level tokenizer)."""
    pytest.importorskip("torchvision")
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    model_id = "Salesforce/instructblip-vicuna-7b"
    backend = Tokenizer(models.WordLevel({"<unk>": 0, "hi": 1}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>")
    query_tokens = mmfast.models.registry.BUILTINS[model_id].processor["num_query_tokens"]
    processor = transformers.InstructBlipVideoProcessor(
        video_processor=hf_video_class(model_id).from_dict(video_config(model_id)),
        tokenizer=tokenizer,
        qformer_tokenizer=tokenizer,
        num_query_tokens=query_tokens,
    )
    frames, height, width = clip
    video = np.stack([noise(height, width, t) for t in range(frames)])
    out = processor(text="hi", images=[video], return_tensors="np")
    video_id = tokenizer.convert_tokens_to_ids("<video>")
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    assert proc.num_video_tokens(frames, height, width) == int((out["input_ids"] == video_id).sum())
