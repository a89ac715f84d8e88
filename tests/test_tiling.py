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

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import builtin_dict, noise
from hypothesis import given, settings
from hypothesis import strategies as st
from parity_table import aria_tokens, perception_lm_tokens
from PIL import Image

import mmfast
from mmfast import MmfastError

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
