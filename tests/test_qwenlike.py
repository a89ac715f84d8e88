"""The Qwen-like families of transformers 5.24 beyond Qwen and GLM-4V: ERNIE-4.5-VL, HunyuanOCR,
GLM-5, VideoLLaMA3, GLM-Image, GLM-GA, and transformers' own Kimi-K2.5 class.

Their pixels are checked from the parity table (``test_families``, ``test_torchvision``); here:
token counts without pixels against the PIL classes' ``get_number_of_image_patches`` (what
vLLM sizes prompts with), the settings only a config file carries, and how configs pick the
Kimi-K2.5 classes.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import assert_same_outputs, builtin_dict, noise, same_bits
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import mmfast
from mmfast import MmfastError, models

PATCH_COUNTED = [
    "baidu/ERNIE-4.5-VL-28B-A3B-PT",
    "zai-org/GLM-5.3-Flash",
    "lkhl/VideoLLaMA3-2B-Image-HF",
    "zai-org/GLM-Image",
    "zai-org/GLM-GA",
]


def hf_pil(model_id: str, overrides: dict[str, Any] | None = None) -> Any:
    """transformers' PIL class for a built-in, from its config dict."""
    family, _ = models.config.select_family(models.config.read_source(model_id))
    assert family.hf_pil is not None
    module, name = family.hf_pil.rsplit(".", 1)
    cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)
    return cls.from_dict(builtin_dict(model_id) | (overrides or {}))


@pytest.mark.parametrize("model_id", [*PATCH_COUNTED, "tencent/HunyuanOCR"])
@settings(max_examples=200, deadline=None)
@given(height=st.integers(1, 12000), width=st.integers(1, 12000))
def test_token_counts_match_get_number_of_image_patches(
    model_id: str, height: int, width: int
) -> None:
    """HF's ``get_number_of_image_patches`` (HunyuanOCR: the patch grid, which its processor
    turns into rows of merged patches plus a newline each and two more tokens)."""
    processor = hf_pil(model_id)
    proc = mmfast.ImageProcessor.from_pretrained(model_id)
    try:
        patches = processor.get_number_of_image_patches(height, width, {})
    except ValueError:
        with pytest.raises(MmfastError):
            proc.num_image_tokens(height, width)
        return
    m = processor.merge_size
    if model_id == "tencent/HunyuanOCR":
        grid_h, grid_w = patches
        expected = grid_h // m * (grid_w // m + 1) + 2
    else:
        expected = patches // m**2
    assert proc.num_image_tokens(height, width) == expected


def test_hunyuan_reads_spatial_patch_size_and_cat_extra_token(tmp_path: Path) -> None:
    """``spatial_patch_size`` is an image-processor attribute a config file may set (not a
    kwarg), ``cat_extra_token`` the processor's; both change the token count only."""
    hunyuan = importlib.import_module("transformers.models.hunyuan_vl.processing_hunyuan_vl")
    data = builtin_dict("tencent/HunyuanOCR") | {"spatial_patch_size": 2}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(data))
    (tmp_path / "processor_config.json").write_text(json.dumps({"cat_extra_token": False}))
    proc = mmfast.ImageProcessor.from_pretrained(tmp_path)
    image = Image.fromarray(noise(700, 1300, 1))
    hf = hf_pil("tencent/HunyuanOCR", {"spatial_patch_size": 2})
    want = hf([image], return_tensors="np")
    assert_same_outputs(proc(image), dict(want))
    fake: Any = type("Fake", (), {})()
    fake.image_processor, fake.image_token, fake.cat_extra_token = hf, "<t>", False
    replaced = hunyuan.HunYuanVLProcessor.replace_image_token(fake, want, 0)
    assert proc.num_image_tokens(700, 1300) == replaced.count("<t>") > 0


def test_hunyuan_ignores_resample() -> None:
    """The class resizes with bicubic whatever the config's filter (the checkpoint's is 1)."""
    image = noise(300, 470, 2)
    outputs = [
        mmfast.ImageProcessor.from_pretrained("tencent/HunyuanOCR", resample=code)(image)
        for code in (0, 1, 3, 4)
    ]
    for out in outputs[1:]:
        assert same_bits(out.pixel_values, outputs[0].pixel_values)


@pytest.mark.parametrize("height", [1, 13, 27, 29, 200])
def test_glm5_next_pads_the_canvas_before_normalising(height: int) -> None:
    """Rows past the resized content hold the normalised value of black, as HF's uint8 pad
    gives them."""
    proc = mmfast.ImageProcessor.from_pretrained("zai-org/GLM-5.3-Flash", max_image_tokens=40)
    config = proc.config
    assert isinstance(config, models.Glm5NextConfig)
    content, canvas = config.canvas(height, 900)
    assert canvas[0] % 28 == 0 and canvas[1] % 28 == 0
    assert content[0] <= canvas[0] and content[1] <= canvas[1] and content != canvas
    want = hf_pil("zai-org/GLM-5.3-Flash", {"max_image_tokens": 40})
    image = Image.fromarray(noise(height, 900, 3))
    assert_same_outputs(proc(image), dict(want([image], return_tensors="np")))


def test_glm5_next_binary_search_matches_hf() -> None:
    """The canvas geometry alone, against transformers' smart_resize, over budgets and sizes."""
    glm5 = importlib.import_module("transformers.models.glm5_next.image_processing_pil_glm5_next")
    rng = np.random.default_rng(0)
    for height, width in [(1, 1), (1, 9000), (9000, 1), *rng.integers(1, 6000, (300, 2))]:
        for tokens in (1, 16, 30, 8000):
            args = (2, int(height), int(width), 2, 28, 16, tokens)
            assert models.glm5_next.smart_resize(*args) == glm5.smart_resize(*args)


def test_glm_image_geometry_matches_hf() -> None:
    glm_image = importlib.import_module(
        "transformers.models.glm_image.image_processing_pil_glm_image"
    )
    rng = np.random.default_rng(1)
    for height, width in rng.integers(1, 5000, (500, 2)):
        args = (int(height), int(width), 28, 56 * 56, 28 * 28 * 1280)
        try:
            want = glm_image.smart_resize(*args)
        except ValueError:
            with pytest.raises(MmfastError):
                models.glm_image.smart_resize(*args)
            continue
        assert models.glm_image.smart_resize(*args) == want


def test_video_llama_3_returns_merge_sizes() -> None:
    proc = mmfast.ImageProcessor.from_pretrained("lkhl/VideoLLaMA3-2B-Image-HF", merge_size=2)
    out = proc([noise(100, 200, 1), noise(60, 60, 2)])
    assert list(out) == ["pixel_values", "image_grid_thw", "image_merge_sizes"]
    assert out["image_merge_sizes"].dtype == np.int64
    assert out["image_merge_sizes"].tolist() == [2, 2]


@pytest.mark.parametrize("suffix", ["", "Fast", "Pil"])
def test_ernie_deprecated_names_select_the_family(suffix: str, tmp_path: Path) -> None:
    data = builtin_dict("baidu/ERNIE-4.5-VL-28B-A3B-PT")
    data["image_processor_type"] = "Ernie4_5_VL_MoeImageProcessor" + suffix
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(data))
    config = models.load_config(tmp_path)
    assert isinstance(config, models.Ernie4_5_VLMoeConfig)
    assert config.plan(300, 200) == models.load_config("baidu/ERNIE-4.5-VL-28B-A3B-PT").plan(
        300, 200
    )


def test_kimi_k25_model_type_selects_transformers_class(tmp_path: Path) -> None:
    """Without auto_map (a config saved by transformers, or a bare model type), AutoImageProcessor
    picks Kimi_K25ImageProcessor, which has no PIL class (so the backend defaults to
    torchvision, and backend="pil" is refused); its settings are transformers' own
    (media_proc_cfg is not read)."""
    data = {"media_proc_cfg": {"in_patch_limit": 64}, "max_patches": 100}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(data))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "kimi_k25"}))
    with pytest.raises(MmfastError, match="no pil class"):
        models.load_config(tmp_path, backend="pil")
    config = models.load_config(tmp_path)
    assert isinstance(config, models.KimiK25ImageConfig) and config.backend == "torchvision"
    assert (config.max_patches, config.max_size_per_side, config.merge_size) == (100, 512, 2)
    with pytest.raises(MmfastError, match="max_height and max_width"):
        models.load_config(
            tmp_path, backend="torchvision", size={"max_height": 10, "max_width": 20}
        )


def test_kimi_k25_settings_only_transformers_class_reads_refuse_only_it(tmp_path: Path) -> None:
    """A remote-code config with a key the checkpoint's processor ignores (a box resample,
    which torchvision lacks) loads and runs on its own backend; transformers' class refuses
    it, when chosen at load or by a call."""
    data = {**builtin_dict("moonshotai/Kimi-K2.5"), "resample": 4}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(data))
    proc = mmfast.ImageProcessor.from_pretrained(tmp_path)
    image = noise(30, 40, 1)
    assert_same_outputs(
        proc(image), mmfast.ImageProcessor.from_pretrained("moonshotai/Kimi-K2.5")(image)
    )
    with pytest.raises(MmfastError, match="resample: expected 0, 1, 2 or 3"):
        proc(image, backend="torchvision")
    with pytest.raises(MmfastError, match="resample: expected 0, 1, 2 or 3"):
        mmfast.ImageProcessor.from_pretrained(tmp_path, backend="torchvision")


def test_kimi_k25_torchvision_backend_is_transformers_class() -> None:
    """The checkpoint's remote-code config with backend="torchvision" is transformers' class
    configured by media_proc_cfg: the same plan as that class's defaults."""
    remote = models.load_config("moonshotai/Kimi-K2.5", backend="torchvision")
    assert isinstance(remote, models.KimiK25Config)
    assert models.load_config("moonshotai/Kimi-K2.5").image_processor_type == (
        "KimiK25VisionProcessor"
    )
    own = remote.transformers_class
    assert isinstance(own, models.KimiK25ImageConfig)
    for size in [(1, 1), (300, 200), (3024, 4032), (20, 7000)]:
        assert remote.plan(*size) == own.plan(*size)
