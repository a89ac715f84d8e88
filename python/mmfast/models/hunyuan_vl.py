"""HunyuanOCR: ``HunYuanVLImageProcessor`` (transformers 5.24).

Qwen2-VL's :func:`~mmfast.models.qwen2_vl.smart_resize` at factor ``patch_size * merge_size``
(32 with the defaults), but always with the bicubic filter (the class ignores ``resample``: the
reference processor calls ``PIL.Image.resize`` without one, whatever the config says) and patch
rows in plain raster order (its ``patchify`` does not group them by merge unit, although it
reshapes by it). ``HunYuanVLProcessor`` counts ``(grid_h / merge) * (grid_w / merge + 1)``
tokens, a newline token closing each row of merged patches, plus the two around the image.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmfast.models import registry
from mmfast.models.base import BICUBIC, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, PatchGrid, Patchify
from mmfast.models.config import Fields, Source
from mmfast.models.qwen2_vl import QwenVLConfig, call_over_legacy_pixels, patch_fields

__all__ = ["HunYuanVLConfig"]


@dataclass(frozen=True)
class HunYuanVLConfig(QwenVLConfig):
    """Settings of ``HunYuanVLImageProcessor``; ``resample`` is always bicubic, the filter the
    class resizes with.

    ``num_image_tokens`` is ``HunYuanVLProcessor.replace_image_token``'s count:
    ``patch_h * (patch_w + 1) + 2 * cat_extra_token`` with ``patch_h = grid_h // merge_size //
    spatial_patch_size`` (likewise ``patch_w``). ``spatial_patch_size`` is the image processor's
    attribute (1, or the config file's value); ``cat_extra_token`` the processor's (True, or
    ``processor_config.json``'s).
    """

    spatial_patch_size: int = 1
    cat_extra_token: bool = True

    def patchify(self) -> Patchify:
        """Raster-order rows: ``patchify``'s permute (0, 2, 3, 5, 6, 1, 4, 7) keeps each merge
        group's rows and columns in image order."""
        return Patchify(self.patch_size, self.temporal_patch_size, 1)

    def patch_unit(self) -> int:
        """The reshape still splits the grid into merge units."""
        return self.patch_size * self.merge_size

    def tokens(self, grid: PatchGrid) -> int:
        patch_h = grid.grid_h // self.merge_size // self.spatial_patch_size
        patch_w = grid.grid_w // self.merge_size // self.spatial_patch_size
        return patch_h * (patch_w + 1) + (2 if self.cat_extra_token else 0)


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> HunYuanVLConfig:
    """Mirrors ``HunYuanVLImageProcessorPil.__init__``: ``min_pixels``/``max_pixels`` override
    ``size``'s bounds, as for Qwen2-VL. ``resample`` is stored by HF but never used."""
    fields = patch_fields(
        # HunYuanVLImageProcessor.resize passes PILImageResampling.BICUBIC whatever `resample`
        # says, so no value of it is an error.
        cfg.with_values(resample=None),
        size={"shortest_edge": 512 * 512, "longest_edge": 2048 * 2048},
        legacy_pixels=True,
        resample=BICUBIC,
        mean=OPENAI_CLIP_MEAN,
        std=OPENAI_CLIP_STD,
        temporal_patch_size=1,
    )
    fields["patch_size"] = cfg.positive_int("patch_size", 16)
    return HunYuanVLConfig(
        model_id=source.model_id,
        model_type=registry.model_type_of(source.preprocessor, source.model_type),
        image_processor_type=processor_type,
        **fields,
        # A class attribute, not a kwarg: from_dict sets it from the config file.
        spatial_patch_size=cfg.positive_int("spatial_patch_size", 1),
        cat_extra_token=processor.flag("cat_extra_token", True),
    )


_HF = "hunyuan_vl"
registry.register(
    registry.Family(
        name="hunyuan_vl",
        processor_types=("HunYuanVLImageProcessor",),
        model_types={"hunyuan_vl": "HunYuanVLImageProcessor"},
        build=_build,
        kwargs=frozenset(
            {"min_pixels", "max_pixels", "patch_size", "temporal_patch_size", "merge_size"}
        ),
        processor_kwargs=frozenset({"cat_extra_token"}),
        processor_classes={"HunYuanVLProcessor": "hunyuan_vl"},
        hf_pil=f"{_HF}.image_processing_pil_hunyuan_vl.HunYuanVLImageProcessorPil",
        hf_torchvision=f"{_HF}.image_processing_hunyuan_vl.HunYuanVLImageProcessor",
        call_settings=call_over_legacy_pixels,
    )
)

# tencent/HunyuanOCR (the checkpoint transformers' HunYuanVL configs name). No verbatim copy of
# its preprocessor file was found. transformers' own comment in HunYuanVLImageProcessor.resize
# says the config has resample=1 (LANCZOS); the pixel bounds 512*512 / 2048*2048, patch 16,
# merge 2 and the CLIP constants are the class defaults and what candle's HunyuanOCR example
# hard-codes for this checkpoint; temporal_patch_size 1 is the class default (unconfirmed).
registry.register_builtin(
    "tencent/HunyuanOCR",
    "hunyuan_vl",
    {
        "min_pixels": 512 * 512,
        "max_pixels": 2048 * 2048,
        "patch_size": 16,
        "temporal_patch_size": 1,
        "merge_size": 2,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_std": list(OPENAI_CLIP_STD),
        "resample": 1,
        "image_processor_type": "HunYuanVLImageProcessor",
        "processor_class": "HunYuanVLProcessor",
    },
)
