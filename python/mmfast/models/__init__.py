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
    minicpmv4_6,
    minicpm_ocr,
    siglip2,
    gemma4,
    gemma4_unified,
    lfm2_vl,
    mllama,
    deepseek_ocr2,
    cohere2_vision,
    ovis2,
    granite_docling,
    apertus1p5,
    cohere_compass,
    cosmos3_edge,
    hy_v4_vl,
    minimax_m3_vl,
    muse_glimmer,
    pp_chart2table,
    layoutlmv3,
    pi0,
    video_llava,
    fuyu,
    pp_formulanet,
    phi4_multimodal,
    molmo2,
    deepseek_vl,
    janus,
    deepseek_vl_hybrid,
    step3p7,
    chameleon,
    blip,
    instructblipvideo,
    idefics,
    aria,
    perception_lm,
    inkling,
    inkling2,
    unlimited_ocr,
)

# isort: on
from mmfast.models import registry
from mmfast.models.apertus1p5 import Apertus1p5Config
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
from mmfast.models.base_video import FramesVideoConfig
from mmfast.models.blip import BlipConfig
from mmfast.models.chameleon import ChameleonConfig
from mmfast.models.cohere2_vision import Cohere2VisionConfig
from mmfast.models.cohere_compass import CohereCompassConfig
from mmfast.models.config import load_config, supported_models
from mmfast.models.cosmos3_edge import Cosmos3EdgeConfig
from mmfast.models.deepseek_ocr2 import DeepseekOcr2Config
from mmfast.models.deepseek_vl import DeepseekVLConfig
from mmfast.models.deepseek_vl_hybrid import DeepseekVLHybridConfig
from mmfast.models.emu3 import Emu3Config
from mmfast.models.ernie4_5_vl_moe import Ernie4_5_VLMoeConfig
from mmfast.models.fuyu import FuyuConfig
from mmfast.models.gemma3 import Gemma3Config
from mmfast.models.gemma4 import EmbeddingGemma2VideoConfig, Gemma4Config, Gemma4VideoConfig
from mmfast.models.gemma4_unified import Gemma4UnifiedConfig
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
from mmfast.models.got_ocr2 import GotOcr2Config, InternVLVideoConfig
from mmfast.models.granite_docling import GraniteDoclingConfig
from mmfast.models.hunyuan_vl import HunYuanVLConfig
from mmfast.models.hy_v4_vl import HYV4VLConfig
from mmfast.models.idefics import IdeficsConfig
from mmfast.models.idefics2 import Idefics2Config
from mmfast.models.idefics3 import Idefics3Config, SmolVLMVideoConfig
from mmfast.models.inkling import InklingConfig
from mmfast.models.inkling2 import Inkling2Config
from mmfast.models.kimi_k25 import KimiK25Config, KimiK25ImageConfig
from mmfast.models.kimi_vl import KimiVLConfig
from mmfast.models.layoutlmv3 import LayoutLMv3Config
from mmfast.models.lfm2_vl import Lfm2VlConfig
from mmfast.models.llama4 import (
    Llama4Config,
    find_supported_resolutions,
    get_best_fit,
    get_factors,
    get_llama4_resize_size,
    get_max_res_without_distortion,
)
from mmfast.models.llava import ClipConfig, LlavaConfig
from mmfast.models.llava_next import LlavaNextConfig, LlavaNextVideoVideoConfig
from mmfast.models.llava_onevision import LlavaOnevisionConfig, LlavaOnevisionVideoConfig
from mmfast.models.minicpm_ocr import MiniCPMOcrConfig
from mmfast.models.minicpmv4_6 import MiniCPMV4_6Config, MiniCPMV4_6VideoConfig
from mmfast.models.minimax_m3_vl import MiniMaxM3VLConfig
from mmfast.models.mllama import MllamaConfig
from mmfast.models.molmo2 import Molmo2Config, Molmo2VideoConfig
from mmfast.models.muse_glimmer import MuseGlimmerConfig, MuseGlimmerVideoConfig
from mmfast.models.ovis2 import Ovis2Config
from mmfast.models.paddleocr_vl import PaddleOCRVLConfig
from mmfast.models.perception_lm import PerceptionLMConfig, PerceptionLMVideoConfig
from mmfast.models.phi4_multimodal import Phi4MultimodalConfig
from mmfast.models.pi0 import PI0Config
from mmfast.models.pixtral import PixtralConfig
from mmfast.models.pp_chart2table import PPChart2TableConfig
from mmfast.models.pp_formulanet import PPFormulaNetConfig
from mmfast.models.qwen2_vl import QwenVLConfig, smart_resize
from mmfast.models.siglip import SiglipConfig
from mmfast.models.siglip2 import Siglip2Config
from mmfast.models.step3p7 import Step3p7Config
from mmfast.models.unlimited_ocr import UnlimitedOcrConfig
from mmfast.models.video_llama_3 import VideoLlama3Config
from mmfast.models.video_llava import VideoLlavaConfig, VideoLlavaVideoConfig

__all__ = [
    "BICUBIC",
    "BILINEAR",
    "OPENAI_CLIP_MEAN",
    "OPENAI_CLIP_STD",
    "Apertus1p5Config",
    "AriaConfig",
    "BlipConfig",
    "ChameleonConfig",
    "ClipConfig",
    "Cohere2VisionConfig",
    "CohereCompassConfig",
    "Cosmos3EdgeConfig",
    "CropBox",
    "DeepseekOcr2Config",
    "DeepseekVLConfig",
    "DeepseekVLHybridConfig",
    "EmbeddingGemma2VideoConfig",
    "Emu3Config",
    "Ernie4_5_VLMoeConfig",
    "FramesVideoConfig",
    "FuyuConfig",
    "Gemma3Config",
    "Gemma4Config",
    "Gemma4UnifiedConfig",
    "Gemma4VideoConfig",
    "Glm4vConfig",
    "Glm5NextConfig",
    "GlmImageConfig",
    "GlmgaConfig",
    "GotOcr2Config",
    "GraniteDoclingConfig",
    "HYV4VLConfig",
    "HunYuanVLConfig",
    "Idefics2Config",
    "Idefics3Config",
    "IdeficsConfig",
    "ImagePlan",
    "Inkling2Config",
    "InklingConfig",
    "InternVLVideoConfig",
    "KimiK25Config",
    "KimiK25ImageConfig",
    "KimiVLConfig",
    "LayoutLMv3Config",
    "Lfm2VlConfig",
    "Llama4Config",
    "LlavaConfig",
    "LlavaNextConfig",
    "LlavaNextVideoVideoConfig",
    "LlavaOnevisionConfig",
    "LlavaOnevisionVideoConfig",
    "MiniCPMOcrConfig",
    "MiniCPMV4_6Config",
    "MiniCPMV4_6VideoConfig",
    "MiniMaxM3VLConfig",
    "MllamaConfig",
    "ModelConfig",
    "Molmo2Config",
    "Molmo2VideoConfig",
    "MuseGlimmerConfig",
    "MuseGlimmerVideoConfig",
    "Ovis2Config",
    "PI0Config",
    "PPChart2TableConfig",
    "PPFormulaNetConfig",
    "PaddleOCRVLConfig",
    "PatchGrid",
    "PerceptionLMConfig",
    "PerceptionLMVideoConfig",
    "Phi4MultimodalConfig",
    "PixtralConfig",
    "QwenVLConfig",
    "Siglip2Config",
    "SiglipConfig",
    "SmolVLMVideoConfig",
    "Step3p7Config",
    "TileGrid",
    "UnlimitedOcrConfig",
    "VideoLlama3Config",
    "VideoLlavaConfig",
    "VideoLlavaVideoConfig",
    "apertus1p5",
    "aria",
    "blip",
    "center_crop_box",
    "chameleon",
    "cohere2_vision",
    "cohere_compass",
    "cosmos3_edge",
    "deepseek_ocr2",
    "deepseek_vl",
    "deepseek_vl_hybrid",
    "emu3",
    "ernie4_5_vl_moe",
    "find_supported_resolutions",
    "fuyu",
    "gemma3",
    "gemma4",
    "gemma4_unified",
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
    "granite_docling",
    "hunyuan_vl",
    "hy_v4_vl",
    "idefics",
    "idefics2",
    "idefics3",
    "inkling",
    "inkling2",
    "instructblipvideo",
    "janus",
    "kimi_k25",
    "kimi_vl",
    "layoutlmv3",
    "lfm2_vl",
    "llama4",
    "llava",
    "llava_next",
    "llava_onevision",
    "load_config",
    "minicpm_ocr",
    "minicpmv4_6",
    "minimax_m3_vl",
    "mllama",
    "molmo2",
    "muse_glimmer",
    "ovis2",
    "paddleocr_vl",
    "perception_lm",
    "phi4_multimodal",
    "pi0",
    "pixtral",
    "pp_chart2table",
    "pp_formulanet",
    "qwen2_vl",
    "qwen3_vl",
    "registry",
    "siglip",
    "siglip2",
    "smart_resize",
    "step3p7",
    "supported_models",
    "unlimited_ocr",
    "video_llama_3",
    "video_llava",
]
