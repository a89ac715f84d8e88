"""PI0: ``PI0ImageProcessor`` (transformers 5.24; torchvision only).

transformers' default torchvision pipeline with the class's defaults: each image resized to
the largest size that fits in ``size`` = {max_height, max_width} (224x224, aspect kept,
upscaling too; bicubic), rescaled and normalised with mean and std 0.5, then zero-padded
*after* normalising, at the bottom and right, to ``pad_size`` (224x224; the batch's largest
size when ``pad_size`` is null).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from mmfast.errors import MmfastError, UnsupportedModelError
from mmfast.models import registry
from mmfast.models.base import (
    BICUBIC,
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
    Canvas,
    ImagePlan,
    View,
    check_image_size,
    resizer,
)
from mmfast.models.config import Fields, Source
from mmfast.models.pil_backend import PilBackendConfig, pil_backend_fields

__all__ = ["PI0Config"]


@dataclass(frozen=True)
class PI0Config(PilBackendConfig):
    """Settings of ``PI0ImageProcessor``.

    ``pad_size`` is (height, width), or None: pad to the batch's largest image.
    ``num_image_tokens`` is ``image_seq_length``: ``PI0Processor`` puts that many ``<image>``
    tokens in the prompt for each camera image (the image processor's attribute, 256).
    """

    do_pad: bool
    pad_size: tuple[int, int] | None
    image_seq_length: int

    @property
    def raw_pixels(self) -> bool:  # type: ignore[override]
        """Padding is zeros after normalising: dtype="uint8" only without it."""
        return not self.do_pad

    def count_tokens(self, height: int, width: int) -> int:
        """``PI0Processor``: ``image_seq_length`` tokens per image."""
        return self.image_seq_length

    def plan(self, height: int, width: int) -> ImagePlan:
        """Mirrors ``TorchvisionBackend._preprocess``: resize, rescale and normalise, then
        ``pad`` onto a zero canvas of ``pad_size`` (of the image's own size until
        ``finish_batch`` knows the batch's largest)."""
        plan = super().plan(height, width)
        if not self.do_pad:
            return plan
        check_image_size(height, width)
        size = plan.resize_size
        canvas = self.pad_size or size
        if size[0] > canvas[0] or size[1] > canvas[1]:
            raise MmfastError(
                f"pad_size: an image resized to {size[0]}x{size[1]} does not fit in "
                f"pad_size {canvas[0]}x{canvas[1]} (transformers raises: negative padding)"
            )
        resize = resizer(self.backend, size, self.resample) if self.do_resize else None
        return with_canvas(replace(plan, views=(View(resize=resize, out=Canvas(canvas)),)), canvas)

    def finish_batch(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> Sequence[ImagePlan]:
        """With a null ``pad_size``, every canvas as large as the batch's largest image
        (``get_max_height_width``)."""
        if not self.do_pad or self.pad_size is not None:
            return plans
        height = max(plan.resize_size[0] for plan in plans)
        width = max(plan.resize_size[1] for plan in plans)
        return [
            with_canvas(
                replace(
                    plan, views=tuple(replace(v, out=Canvas((height, width))) for v in plan.views)
                ),
                (height, width),
            )
            for plan in plans
        ]


def with_canvas(plan: ImagePlan, canvas: tuple[int, int]) -> ImagePlan:
    """``plan`` writing a (3, *canvas) tensor."""
    shapes: Mapping[str, Any] = MappingProxyType({"pixel_values": (3, *canvas)})
    return replace(plan, canvas_size=canvas, output_shapes=shapes)


def _build(source: Source, processor_type: str, cfg: Fields, processor: Fields) -> PI0Config:
    """Mirrors ``PI0ImageProcessor``'s class attributes and ``_standardize_kwargs`` (an int
    ``pad_size`` is a square)."""
    fields = pil_backend_fields(
        cfg,
        size={"max_height": 224, "max_width": 224},
        default_to_square=False,
        resample=BICUBIC,
        mean=IMAGENET_STANDARD_MEAN,
        std=IMAGENET_STANDARD_STD,
        crop_size=None,
        pads=True,
    )
    do_pad = cfg.flag("do_pad", True)
    pad_size = None
    pad_value = cfg.raw("pad_size")
    if not cfg.given("pad_size") or pad_value is not None:
        pad = cfg.size_dict(
            "pad_size", {"height": 224, "width": 224} if pad_value is None else pad_value, True
        )
        if do_pad and set(pad) != {"height", "width"}:
            raise cfg.error("pad_size", "height and width", pad)
        pad_size = (pad.get("height", 0), pad.get("width", 0))
    if do_pad and fields["do_center_crop"]:
        raise UnsupportedModelError(
            f"{source.origin}: do_center_crop with do_pad: the crop is padded with black "
            "before normalising and the canvas with zeros after, which mmfast's engine "
            "does not combine in one image; turn one of them off"
        )
    return PI0Config(
        model_id=source.model_id,
        image_processor_type=processor_type,
        **fields,
        do_pad=do_pad,
        pad_size=pad_size,
        image_seq_length=cfg.positive_int("image_seq_length", 256),
    )


registry.register(
    registry.Family(
        name="pi0",
        processor_types=("PI0ImageProcessor",),
        model_types={"pi0": "PI0ImageProcessor"},
        build=_build,
        kwargs=frozenset({"pad_size"}),
        processor_classes={"PI0Processor": "pi0"},
        processor_defaults={"PI0Processor": {}},
        hf_pil=None,
        hf_torchvision="pi0.image_processing_pi0.PI0ImageProcessor",
        backends=("torchvision",),
    )
)

# lerobot/pi0_base (the checkpoint transformers' PI0 docs convert): no public copy of a
# transformers preprocessor_config.json for it was found (lerobot's own checkpoints carry
# their normalisation in a policy config). The values are PI0ImageProcessor's class
# defaults (224x224 max size, bicubic, mean/std 0.5, pad to 224x224, 256 image tokens),
# which transformers' conversion writes. Unconfirmed.
registry.register_builtin(
    "lerobot/pi0_base",
    "pi0",
    {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_pad": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(IMAGENET_STANDARD_MEAN),
        "image_processor_type": "PI0ImageProcessor",
        "image_seq_length": 256,
        "image_std": list(IMAGENET_STANDARD_STD),
        "pad_size": {"height": 224, "width": 224},
        "processor_class": "PI0Processor",
        "resample": BICUBIC,
        "rescale_factor": 0.00392156862745098,
        "size": {"max_height": 224, "max_width": 224},
    },
)
