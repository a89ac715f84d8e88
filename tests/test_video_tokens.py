"""Video token counts against the model processors' own ``replace_video_token``.

Each processor method runs on a stand-in object holding only the attributes it reads (no
tokenizer, no torch), fed with mmfast's outputs for the clip; the count is the placeholder's
special tokens, as each config's ``num_video_tokens`` documents them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import MethodType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import noise
from parity_table import MINICPM_TOKEN

import mmfast
from mmfast.models import registry
from mmfast.models.minicpmv4_6 import MiniCPMV4_6VideoConfig
from mmfast.video import VideoMetadata

# (frames, height, width) of the clips counted.
CLIPS = [(1, 64, 90), (5, 240, 320), (3, 97, 411), (2, 900, 40), (2, 600, 900)]


def processor_method(path: str) -> Callable[..., str]:
    """``module.Class.replace_video_token`` under ``transformers.models``."""
    module, cls = path.rsplit(".", 1)
    owner = getattr(importlib.import_module(f"transformers.models.{module}"), cls)
    method: Callable[..., str] = owner.replace_video_token
    return method


def processor_setting(proc: mmfast.ImageProcessor, name: str, default: Any) -> Any:
    """A setting of the built-in's processor_config.json (the model processor's own)."""
    model_id = proc.config.model_id
    assert model_id is not None
    return registry.BUILTINS[model_id].processor.get(name, default)


def internvl(proc: mmfast.ImageProcessor, out: Any, metadata: VideoMetadata) -> int:
    fake = SimpleNamespace(
        start_image_token="<img>",
        end_image_token="</img>",
        image_token="<IMG_CONTEXT>",
        image_seq_length=processor_setting(proc, "image_seq_length", 256),
    )
    text = processor_method("internvl.processing_internvl.InternVLProcessor")(fake, out, 0)
    return sum(text.count(t) for t in ("<img>", "</img>", "<IMG_CONTEXT>"))


def llava_onevision(proc: mmfast.ImageProcessor, out: Any, metadata: VideoMetadata) -> int:
    fake = SimpleNamespace(
        video_token="<video>", num_image_tokens=processor_setting(proc, "num_image_tokens", 729)
    )
    path = "llava_onevision.processing_llava_onevision.LlavaOnevisionProcessor"
    return processor_method(path)(fake, out, 0).count("<video>")


def llava_next_video(proc: mmfast.ImageProcessor, out: Any, metadata: VideoMetadata) -> int:
    fake = SimpleNamespace(
        video_token="<video>", patch_size=processor_setting(proc, "patch_size", 14)
    )
    path = "llava_next_video.processing_llava_next_video.LlavaNextVideoProcessor"
    return processor_method(path)(fake, out, 0).count("<video>")


def gemma4(proc: mmfast.ImageProcessor, out: Any, metadata: VideoMetadata) -> int:
    fake = SimpleNamespace(video_token="<|video|>", boi_token="<|video>", eoi_token="<video|>")
    inputs = {**out, "video_metadata": [metadata]}
    model_id = proc.config.model_id
    path = (
        "gemma4_unified.processing_gemma4_unified.Gemma4UnifiedProcessor"
        if model_id is not None and registry.BUILTINS[model_id].model_type == "gemma4_unified"
        else "gemma4.processing_gemma4.Gemma4Processor"
    )
    text = processor_method(path)(fake, inputs, 0)
    return text.count("<|video|>")


def smolvlm(proc: mmfast.ImageProcessor, out: Any, metadata: VideoMetadata) -> int:
    module = importlib.import_module("transformers.models.smolvlm.processing_smolvlm")
    fake = SimpleNamespace(
        image_seq_len=processor_setting(proc, "image_seq_len", 169),
        image_token="<image>",
        fake_image_token="<fake_token_around_image>",
        global_image_token="<global-img>",
    )
    inputs = {**out, "video_metadata": [metadata]}
    with pytest.MonkeyPatch.context() as patch:  # num2words spells the frame count only
        patch.setattr(module, "num2words", str)
        text = module.SmolVLMProcessor.replace_video_token(fake, inputs, 0)
    return sum(text.count(t) for t in ("<image>", "<fake_token_around_image>", "<global-img>"))


def minicpm(proc: mmfast.ImageProcessor, out: Any, metadata: VideoMetadata) -> int:
    """The clip as its prompt's first video, counted as MiniCPM-V's tokenizer splits it."""
    config = proc.video_config
    assert isinstance(config, MiniCPMV4_6VideoConfig)
    cls = importlib.import_module(
        "transformers.models.minicpmv4_6.processing_minicpmv4_6"
    ).MiniCPMV4_6Processor
    fake = SimpleNamespace(
        video_token="<video>",
        image_start_token="<image>",
        image_end_token="</image>",
        slice_start_token="<slice>",
        slice_end_token="</slice>",
        image_id_start_token="<image_id>",
        image_id_end_token="</image_id>",
        video_slice_mode=config.slice_mode,
    )
    divisor = 4 if config.downsample_mode == "4x" else 16
    text = cls.replace_video_token(fake, out, 0, video_token_divisor=divisor)
    if config.use_image_id:
        text = cls._prepend_local_ids(fake, [fake.video_token], [text], fake.video_token)[0]
    tokens = MINICPM_TOKEN.findall(text)
    assert "".join(tokens) == text, text
    return len(tokens)


def molmo2(proc: mmfast.ImageProcessor, out: Any, metadata: VideoMetadata) -> int:
    """Each frame's special tokens in Molmo2Processor's video string (its timestamps are
    text), both column-token settings and both frame-token names."""
    config = proc.video_config
    assert config is not None
    cls = importlib.import_module("transformers.models.molmo2.processing_molmo2").Molmo2Processor
    counts = set()
    for frame_tokens in (True, False):
        fake = SimpleNamespace(
            video_use_col_tokens=getattr(config, "video_use_col_tokens", False),
            use_frame_special_tokens=frame_tokens,
            video_processor=SimpleNamespace(max_fps=getattr(config, "max_fps", 2)),
        )
        fake.get_video_string = MethodType(cls.get_video_string, fake)
        text = cls.replace_video_token(fake, {**out, "video_metadata": [metadata]}, 0)
        names = ("<im_patch>", "<im_col>", "<frame_start>", "<frame_end>", "<im_start>", "<im_end>")
        counts.add(sum(text.count(t) for t in names))
    (count,) = counts
    return count


@dataclass(frozen=True)
class Row:
    model_id: str
    count: Callable[[mmfast.ImageProcessor, Any, VideoMetadata], int]


ROWS = [
    Row("OpenGVLab/InternVL3-8B-hf", internvl),
    Row("llava-hf/llava-onevision-qwen2-7b-ov-hf", llava_onevision),
    Row("llava-hf/LLaVA-NeXT-Video-7B-hf", llava_next_video),
    Row("google/gemma-4-31B-it", gemma4),
    Row("google/gemma-4-12B-it", gemma4),
    Row("HuggingFaceTB/SmolVLM2-2.2B-Instruct", smolvlm),
    Row("openbmb/MiniCPM-V-4.6", minicpm),
    Row("openbmb/MiniCPM-V-4.7-1B", minicpm),
    Row("openbmb/MiniCPM-OCR-1.0", minicpm),
    Row("allenai/Molmo2-8B", molmo2),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.model_id)
@pytest.mark.parametrize("clip", CLIPS, ids=lambda clip: "x".join(map(str, clip)))
def test_video_tokens_match_the_processor(row: Row, clip: tuple[int, int, int]) -> None:
    frames, height, width = clip
    proc = mmfast.ImageProcessor.from_pretrained(row.model_id)
    video = np.stack([noise(height, width, t) for t in range(frames)])
    out = dict(proc.videos(video, video_fps=2.0, do_sample_frames=False))
    metadata = VideoMetadata(frames, 2.0, width, height, frames / 2.0)
    metadata.frames_indices = list(range(frames))
    want = row.count(proc, out, metadata)
    assert proc.num_video_tokens(frames, height, width) == want


@pytest.mark.parametrize("col_tokens", [False, True])
@pytest.mark.parametrize("clip", CLIPS, ids=lambda clip: "x".join(map(str, clip)))
def test_molmo2_video_col_tokens(col_tokens: bool, clip: tuple[int, int, int]) -> None:
    """Molmo2Processor's video_use_col_tokens (from processor_config.json) adds a column
    token per pooled row of every frame."""
    frames, height, width = clip
    proc = mmfast.ImageProcessor.from_pretrained(
        "allenai/Molmo2-8B",
        video_overrides={"video_use_col_tokens": col_tokens, "pooling_size": [2, 3]},
    )
    video = np.stack([noise(height, width, t) for t in range(frames)])
    out = dict(proc.videos(video, video_fps=2.0, do_sample_frames=False))
    metadata = VideoMetadata(frames, 2.0, width, height, frames / 2.0)
    metadata.frames_indices = list(range(frames))
    assert proc.num_video_tokens(frames, height, width) == molmo2(proc, out, metadata)
