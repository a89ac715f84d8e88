"""Model configs, processor selection and per-image geometry.

Python decides *what* happens to an image; the Rust core does the pixels. This package reads a
checkpoint's ``preprocessor_config.json`` the way transformers 5.24 does, picks the image
processor, and turns one image size into an :class:`ImagePlan`: resize target and filter, crop
or canvas, rescale/normalise constants, patch or tile layout, output shapes and the number of
placeholder tokens the model's processor inserts.

One module per HF family, named like transformers' own (:mod:`~mmfast.models.qwen2_vl`,
:mod:`~mmfast.models.llava`, :mod:`~mmfast.models.llama4`, ...), holds that family's config
reading, geometry and plan, and registers itself with :mod:`~mmfast.models.registry`;
:mod:`~mmfast.models.geometry` holds the geometry several families share and
:mod:`~mmfast.models.config` reads config files and selects the family. Each geometry function
names the transformers function it mirrors. Only the stdlib, numpy and :mod:`mmfast.errors` are
imported, so this works without transformers or torch.
"""

from __future__ import annotations

# The family modules register themselves on import; their order is supported_models()'s.
# isort: off
from mmfast.models import (
    qwen2_vl,
    llama4,
    llava,
    glm4v,
    paddleocr_vl,
    kimi_vl,
    kimi_k25,
    gemma3,
    siglip,
    got_ocr2,
    llava_next,
    llava_onevision,
    idefics3,
    qwen3_vl,
    pixtral,
    idefics2,
    emu3,
    ernie4_5_vl_moe,
    hunyuan_vl,
    glm5_next,
    video_llama_3,
    glm_image,
    glmga,
    aria,
    perception_lm,
    inkling,
    inkling2,
    unlimited_ocr,
)

# isort: on
from mmfast.models import registry
from mmfast.models.aria import AriaConfig
from mmfast.models.base import (
    BICUBIC,
    BILINEAR,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    ImagePlan,
    ModelConfig,
    PatchGrid,
    TileGrid,
)
from mmfast.models.config import load_config, supported_models
from mmfast.models.emu3 import Emu3Config
from mmfast.models.ernie4_5_vl_moe import Ernie4_5_VLMoeConfig
from mmfast.models.gemma3 import Gemma3Config
from mmfast.models.geometry import (
    CropBox,
    center_crop_box,
    get_image_size_for_max_height_width,
    get_resize_output_image_size,
    get_size_with_aspect_ratio,
)
from mmfast.models.glm4v import Glm4vConfig
from mmfast.models.glm5_next import Glm5NextConfig
from mmfast.models.glm_image import GlmImageConfig
from mmfast.models.glmga import GlmgaConfig
from mmfast.models.got_ocr2 import GotOcr2Config
from mmfast.models.hunyuan_vl import HunYuanVLConfig
from mmfast.models.idefics2 import Idefics2Config
from mmfast.models.idefics3 import Idefics3Config
from mmfast.models.inkling import InklingConfig
from mmfast.models.inkling2 import Inkling2Config
from mmfast.models.kimi_k25 import KimiK25Config, KimiK25ImageConfig
from mmfast.models.kimi_vl import KimiVLConfig
from mmfast.models.llama4 import (
    Llama4Config,
    find_supported_resolutions,
    get_best_fit,
    get_factors,
    get_llama4_resize_size,
    get_max_res_without_distortion,
)
from mmfast.models.llava import ClipConfig
from mmfast.models.llava_next import LlavaNextConfig
from mmfast.models.llava_onevision import LlavaOnevisionConfig
from mmfast.models.paddleocr_vl import PaddleOCRVLConfig
from mmfast.models.perception_lm import PerceptionLMConfig, PerceptionLMVideoConfig
from mmfast.models.pixtral import PixtralConfig
from mmfast.models.qwen2_vl import QwenVLConfig, smart_resize
from mmfast.models.siglip import SiglipConfig
from mmfast.models.unlimited_ocr import UnlimitedOcrConfig
from mmfast.models.video_llama_3 import VideoLlama3Config

__all__ = [
    "BICUBIC",
    "BILINEAR",
    "OPENAI_CLIP_MEAN",
    "OPENAI_CLIP_STD",
    "AriaConfig",
    "ClipConfig",
    "CropBox",
    "Emu3Config",
    "Ernie4_5_VLMoeConfig",
    "Gemma3Config",
    "Glm4vConfig",
    "Glm5NextConfig",
    "GlmImageConfig",
    "GlmgaConfig",
    "GotOcr2Config",
    "HunYuanVLConfig",
    "Idefics2Config",
    "Idefics3Config",
    "ImagePlan",
    "Inkling2Config",
    "InklingConfig",
    "KimiK25Config",
    "KimiK25ImageConfig",
    "KimiVLConfig",
    "Llama4Config",
    "LlavaNextConfig",
    "LlavaOnevisionConfig",
    "ModelConfig",
    "PaddleOCRVLConfig",
    "PatchGrid",
    "PerceptionLMConfig",
    "PerceptionLMVideoConfig",
    "PixtralConfig",
    "QwenVLConfig",
    "SiglipConfig",
    "TileGrid",
    "UnlimitedOcrConfig",
    "VideoLlama3Config",
    "aria",
    "center_crop_box",
    "emu3",
    "ernie4_5_vl_moe",
    "find_supported_resolutions",
    "gemma3",
    "get_best_fit",
    "get_factors",
    "get_image_size_for_max_height_width",
    "get_llama4_resize_size",
    "get_max_res_without_distortion",
    "get_resize_output_image_size",
    "get_size_with_aspect_ratio",
    "glm4v",
    "glm5_next",
    "glm_image",
    "glmga",
    "got_ocr2",
    "hunyuan_vl",
    "idefics2",
    "idefics3",
    "inkling",
    "inkling2",
    "kimi_k25",
    "kimi_vl",
    "llama4",
    "llava",
    "llava_next",
    "llava_onevision",
    "load_config",
    "paddleocr_vl",
    "perception_lm",
    "pixtral",
    "qwen2_vl",
    "qwen3_vl",
    "registry",
    "siglip",
    "smart_resize",
    "supported_models",
    "unlimited_ocr",
    "video_llama_3",
]
