"""Reading a checkpoint's config the way transformers 5.24 does, and choosing its family.

:func:`load_config` takes a built-in id, a checkpoint directory or a JSON file, applies keyword
overrides like HF's ``from_pretrained``, picks the family the way AutoImageProcessor picks the
class (``image_processor_type``, else ``model_type``) and lets the family build its config from
:class:`Fields`, which apply HF's defaults and name the offending field in every error.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, TypeAlias

from mmfast.errors import MmfastError, UnsupportedModelError
from mmfast.models import registry
from mmfast.models.base import (
    BOX,
    DEFAULT_RESCALE,
    HAMMING,
    RESAMPLE_CODES,
    RGB,
    TORCH_RESAMPLE,
    ModelConfig,
    Normalization,
    VideoConfig,
)
from mmfast.models.registry import Family

__all__ = [
    "BACKENDS",
    "Fields",
    "Source",
    "load_config",
    "load_video_config",
    "supported_models",
    "with_backend",
]

JsonDict: TypeAlias = dict[str, Any]


def supported_models() -> list[str]:
    """The built-in model ids :func:`load_config` accepts without a local file."""
    return list(registry.BUILTINS)


# transformers.processing_utils.ImagesKwargs: what every image processor accepts.
IMAGES_KWARGS: Final = frozenset(
    {
        "do_convert_rgb",
        "do_resize",
        "size",
        "default_to_square",
        "crop_size",
        "resample",
        "do_rescale",
        "rescale_factor",
        "do_normalize",
        "image_mean",
        "image_std",
        "do_pad",
        "pad_size",
        "do_center_crop",
        "data_format",
        "input_data_format",
        "device",
        "return_tensors",
        "disable_grouping",
        "image_seq_length",
    }
)
# image_processing_utils.VALID_SIZE_DICT_KEYS
VALID_SIZE_KEYS: Final = (
    frozenset({"height", "width"}),
    frozenset({"shortest_edge"}),
    frozenset({"shortest_edge", "longest_edge"}),
    frozenset({"longest_edge"}),
    frozenset({"max_height", "max_width"}),
    frozenset({"min_pixels", "max_pixels"}),
)


@dataclass(frozen=True)
class Source:
    """A checkpoint's config files as read: ``origin`` names them in error messages."""

    origin: str
    model_id: str | None
    model_type: str | None
    preprocessor: JsonDict
    processor: JsonDict
    # The video processor's settings where they are not ``preprocessor``: its own (nested or
    # in their file), or preprocessor_config.json beside a nested image block.
    video: JsonDict | None = None


def read_json(path: Path) -> JsonDict:
    """A JSON object from ``path``, or :class:`MmfastError` naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    # ValueError: malformed JSON, or an integer of more than 4300 digits; RecursionError:
    # arrays or objects nested thousands deep.
    except (OSError, ValueError, RecursionError) as exc:
        raise MmfastError(f"{path}: cannot read JSON config: {exc}") from exc
    if not isinstance(data, dict):
        raise MmfastError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def read_source(name_or_path: str | os.PathLike[str] | Source) -> Source:
    """A built-in id, a checkpoint directory or a JSON file, read as transformers reads it; or
    a copy of a source read before (a processor builds each call's settings from the files it
    was loaded from, whatever has become of them since)."""
    if isinstance(name_or_path, Source):
        return copy.deepcopy(name_or_path)
    key = os.fspath(name_or_path)
    path = Path(key)
    # A local folder or file of a built-in's name wins, as transformers reads a local path
    # before the hub (``--local-dir`` downloads lay checkpoints out under their ids).
    builtin = None if path.exists() else registry.BUILTINS.get(key)
    if builtin is not None:
        return Source(
            origin=key,
            model_id=key,
            model_type=builtin.model_type,
            preprocessor=copy.deepcopy(dict(builtin.preprocessor)),
            processor=copy.deepcopy(dict(builtin.processor)),
            video=None if builtin.video is None else copy.deepcopy(dict(builtin.video)),
        )
    if path.is_file():
        return Source(str(path), None, None, read_json(path), {})
    if path.is_dir():
        processor = {}
        if (path / "processor_config.json").is_file():
            processor = read_json(path / "processor_config.json")
        legacy = path / "preprocessor_config.json"
        # transformers 5 saves the image processor nested in processor_config.json, and reads
        # that block (unless null) before preprocessor_config.json (older saves left beside it).
        nested = processor.get("image_processor")
        if nested is not None:
            preprocessor = nested
            if not isinstance(preprocessor, dict):
                raise MmfastError(
                    f"{path / 'processor_config.json'}: image_processor: expected an object, "
                    f"got {preprocessor!r}"
                )
        elif legacy.is_file():
            preprocessor = read_json(legacy)
        else:
            raise MmfastError(f"{path}: no preprocessor_config.json in this directory")
        model_type = None
        if (path / "config.json").is_file():
            model_type = read_json(path / "config.json").get("model_type")
            if model_type is not None and not isinstance(model_type, str):
                raise MmfastError(
                    f"{path / 'config.json'}: model_type: expected a string, got {model_type!r}"
                )
        # AutoVideoProcessor's order: nested in processor_config.json, then its own file, then
        # preprocessor_config.json (not the nested image block).
        video = processor.get("video_processor")
        if not isinstance(video, dict) and (path / "video_preprocessor_config.json").is_file():
            video = read_json(path / "video_preprocessor_config.json")
        if not isinstance(video, dict) and nested is not None and legacy.is_file():
            video = read_json(legacy)
        video = video if isinstance(video, dict) else None
        return Source(str(path), None, model_type, preprocessor, processor, video)
    raise UnsupportedModelError(
        f"model {key!r} is neither a built-in id nor an existing directory or JSON file; "
        f"built-in ids: {', '.join(registry.BUILTINS)}"
    )


def select_family(source: Source) -> tuple[Family, str]:
    """(family, image_processor_type), as AutoImageProcessor picks the class."""
    processor_type = source.preprocessor.get("image_processor_type")
    auto_map = source.preprocessor.get("auto_map")
    remote = auto_map.get("AutoImageProcessor") if isinstance(auto_map, dict) else None
    if processor_type is None and isinstance(remote, str):
        # A checkpoint with its own processor class (loaded with trust_remote_code).
        processor_type = remote.rsplit(".", 1)[-1]
    if processor_type is None:
        # AutoImageProcessor's fallback for configs written by feature extractors.
        extractor = source.preprocessor.get("feature_extractor_type")
        if isinstance(extractor, str):
            processor_type = extractor.replace("FeatureExtractor", "ImageProcessor")
    if processor_type is not None:
        if not isinstance(processor_type, str):
            raise MmfastError(
                f"{source.origin}: image_processor_type: expected a string, got {processor_type!r}"
            )
        family = registry.by_processor_type(processor_type.removesuffix("Fast").removesuffix("Pil"))
        if family is None:
            raise UnsupportedModelError(
                f"{source.origin}: image_processor_type {processor_type!r} is not supported; "
                f"supported: {registry.supported_processor_types()}"
            )
        return family, processor_type
    found = registry.by_model_type(source.model_type or "")
    if found is None:
        raise UnsupportedModelError(
            f"{source.origin}: no image_processor_type and model_type {source.model_type!r} "
            f"has no supported processor; supported processors: "
            f"{registry.supported_processor_types()}; model types: "
            f"{registry.supported_model_types()}"
        )
    return found


# The largest side, count or pixel budget a config may give: far above any real processor's,
# and small enough that the arithmetic on it stays in int64 and usize.
MAX_INT: Final = 2**31 - 1
# The most tiles a tiling config may ask for (Llama 4 and InternVL use 16 and 12): their
# geometry enumerates every grid up to it.
MAX_TILES: Final = 1024


def is_int_in(value: object, low: int, high: int) -> bool:
    """An int (not a bool: JSON true/false parse as bool) from ``low`` to ``high``."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


# The largest float32 and its smallest subnormal: a float64 up to half of it rounds to 0.
FLOAT32_MAX: Final = 3.4028234663852886e38
FLOAT32_TINY: Final = 1.401298464324817e-45


def is_finite_number(value: object) -> bool:
    # JSON true/false parse as bool, a subclass of int; a config meaning 1 would say 1.
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class Fields:
    """Reads processor kwargs with HF's rule that a missing or null value means the class
    default, and names the offending field in every error."""

    def __init__(self, origin: str, values: Mapping[str, Any]) -> None:
        self._origin = origin
        self._values = values

    def nested(self, name: str, values: Mapping[str, Any]) -> Fields:
        """Fields of a nested block, named ``name`` in errors."""
        return Fields(f"{self._origin}: {name}", values)

    def with_values(self, **values: Any) -> Fields:
        """The same fields with ``values`` replacing the config's."""
        return Fields(self._origin, {**self._values, **values})

    def error(self, name: str, expected: str, got: object) -> MmfastError:
        return MmfastError(f"{self._origin}: {name}: expected {expected}, got {got!r}")

    def raw(self, name: str) -> Any:
        return self._values.get(name)

    def given(self, name: str) -> bool:
        """Whether the config names ``name`` at all, null included: where transformers stores a
        file's null over a class default that is not None (``from_dict`` sets it), or a null
        means something of its own (PI0's null ``pad_size``: pad to the batch's largest)."""
        return name in self._values

    def flag(self, name: str, default: bool) -> bool:
        value = self._values.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(name, "true or false", value)
        return value

    def convert_rgb(self) -> bool:
        """``do_convert_rgb``. An explicit null is not the class default: HF stores None over
        it, which reads as off."""
        if "do_convert_rgb" in self._values and self._values["do_convert_rgb"] is None:
            return False
        return self.flag("do_convert_rgb", True)

    def positive_int(self, name: str, default: int, maximum: int = MAX_INT) -> int:
        return self.int_in(name, default, 1, maximum)

    def int_in(self, name: str, default: int, low: int, high: int) -> int:
        value = self._values.get(name)
        if value is None:
            return default
        if not is_int_in(value, low, high):
            raise self.error(name, f"an integer from {low} to {high}", value)
        return int(value)

    def number(self, name: str, default: float) -> float:
        value = self._values.get(name)
        if value is None:
            return default
        if not is_finite_number(value):
            raise self.error(name, "a finite number", value)
        return float(value)

    def rgb(self, name: str, default: RGB, nonzero: bool = False) -> RGB:
        """A per-channel value; a single number applies to all three channels, as in HF."""
        value = self._values.get(name)
        if value is None:
            return default
        items = [value] * 3 if is_finite_number(value) else value
        if not isinstance(items, list | tuple) or len(items) != 3:
            raise self.error(name, "a number or a list of 3 numbers (one per RGB channel)", value)
        for item in items:
            # Normalised in float32: a value past its range is inf there, one under its
            # smallest subnormal 0.
            if not is_finite_number(item) or abs(item) > FLOAT32_MAX:
                raise self.error(name, "finite numbers (in float32 too)", value)
            if nonzero and abs(item) <= FLOAT32_TINY / 2:
                raise self.error(
                    name, "non-zero values, in float32 too (normalisation divides by them)", value
                )
        return (float(items[0]), float(items[1]), float(items[2]))

    def resample(self, default: int) -> int:
        value = self._values.get("resample")
        if value is None:
            return default
        if not isinstance(value, int) or isinstance(value, bool) or value not in RESAMPLE_CODES:
            raise self.error("resample", "a PIL resampling code 0-5", value)
        return value

    def torch_resample(self, default: int) -> int:
        """``resample`` for a class transformers has only with torchvision (every video
        class; Apertus 1.5, MiniMax-M3, Muse Glimmer): box and hamming have no torch filter."""
        code = self.resample(default)
        if code in (BOX, HAMMING):
            raise self.error("resample", TORCH_RESAMPLE, code)
        return code

    def size_dict(self, name: str, value: object, default_to_square: bool) -> dict[str, int]:
        """Mirrors ``image_processing_utils.get_size_dict``: an int is a square or a shortest
        edge (per ``default_to_square``), a pair is (height, width), a dict is checked against
        the valid key sets."""
        if isinstance(value, int) and not isinstance(value, bool):
            size = (
                {"height": value, "width": value} if default_to_square else {"shortest_edge": value}
            )
        elif isinstance(value, list | tuple) and len(value) == 2:
            size = {"height": value[0], "width": value[1]}
        elif isinstance(value, dict):
            size = dict(value)
        else:
            raise self.error(name, "an int, a [height, width] pair or a size dict", value)
        if frozenset(size) not in VALID_SIZE_KEYS:
            valid = " or ".join("{" + ", ".join(sorted(keys)) + "}" for keys in VALID_SIZE_KEYS)
            raise self.error(name, f"a size dict with keys {valid}", value)
        for key, item in size.items():
            if not is_int_in(item, 1, MAX_INT):
                raise self.error(f"{name}.{key}", f"an integer from 1 to {MAX_INT}", item)
        return size

    def normalization(self, mean: RGB, std: RGB) -> Normalization:
        return Normalization(
            do_rescale=self.flag("do_rescale", True),
            rescale_factor=self.number("rescale_factor", DEFAULT_RESCALE),
            do_normalize=self.flag("do_normalize", True),
            image_mean=self.rgb("image_mean", mean),
            image_std=self.rgb("image_std", std, nonzero=True),
        )


BACKENDS: Final = ("pil", "torchvision")


def load_config(
    name_or_path: str | os.PathLike[str] | Source,
    *,
    backend: str | None = None,
    call: Mapping[str, Any] | None = None,
    **overrides: Any,
) -> ModelConfig:
    """Load a model's image-processing config.

    ``backend`` is the transformers class the outputs match: ``"pil"`` (``XImageProcessorPil``)
    or ``"torchvision"`` (``XImageProcessor``, what ``AutoImageProcessor`` gives where
    torchvision is installed); by default the PIL class, or the torchvision class of a
    family transformers has only as a torchvision class (PI0, PP-FormulaNet, Kimi-K2.5's).

    ``name_or_path`` is a built-in id (see :func:`supported_models`), a directory holding
    ``preprocessor_config.json`` (plus, optionally, ``processor_config.json`` for the token
    count and ``config.json`` for ``model_type``), or a path to such a JSON file.

    The image kwargs the model's HF processor passes on every call (InternVL's
    ``crop_to_patches=True``, LLaVA-NeXT's ``do_pad=True``, Gemma 3's pan-and-scan
    defaults, ...) replace the file's values, as they do in transformers. ``overrides`` behave
    like keyword arguments to HF's ``from_pretrained`` and win over both: they replace the
    config's keys before the processor is built, so the processor's own precedence still holds
    (for Qwen, a ``min_pixels``/``max_pixels`` in the config or overrides beats ``size``), and
    None means "class default", but for a switch (``do_*``), which None turns off as in
    transformers. Processor-level keys (``patch_size`` for LLaVA / Llama 4,
    ``pixel_shuffle_ratio``, ``num_additional_image_tokens``, ``vision_feature_select_strategy``)
    go to the processor config. An unknown override key raises :class:`MmfastError`.

    ``call`` holds keyword arguments given to one call, applied last as transformers'
    ``preprocess`` applies them over the instance's settings (Qwen: a call's ``size``
    replaces the instance's, min/max pixels included; see ``Family.call_settings``).

    Raises :class:`UnsupportedModelError` for an unknown model or processor type and
    :class:`MmfastError`, naming the field, for a malformed config.
    """
    source = read_source(name_or_path)
    family, processor_type = select_family(source)
    # The model's processor passes its image defaults on every call, over the file's values.
    model_type = registry.model_type_of(source.preprocessor, source.model_type)
    defaults = registry.processor_defaults(
        family, source.preprocessor, source.processor, model_type
    )
    nulls = [key for key, value in source.preprocessor.items() if value is None]
    preprocessor = {**source.preprocessor, **null_switches(source.preprocessor), **defaults}
    processor = dict(source.processor)
    # A switch given as None is off, as transformers stores it (from_pretrained) or reads it
    # (a call) over the instance's value.
    overrides = {**overrides, **null_switches(overrides)}
    if call is not None and not family.call_none_is_instance:
        call = {**call, **null_switches(call)}
    for key, value in overrides.items():
        if key in family.processor_kwargs:
            processor[key] = value
        elif key in IMAGES_KWARGS | family.kwargs | family.init_kwargs:
            preprocessor[key] = value
        else:
            valid = sorted(
                IMAGES_KWARGS | family.kwargs | family.init_kwargs | family.processor_kwargs
            )
            raise MmfastError(
                f"override {key!r} is not a {processor_type} argument; valid: {', '.join(valid)}"
            )
    for key in call or {}:
        if key not in IMAGES_KWARGS | family.kwargs:
            valid = sorted(IMAGES_KWARGS | family.kwargs)
            raise MmfastError(
                f"{key}: not a {processor_type} argument for a call; valid: {', '.join(valid)}"
            )
    if family.construct is not None:
        preprocessor = family.construct(preprocessor)
    if call and backend == "torchvision":
        # What the torchvision class reads from its instance whatever a call says.
        call = {k: v for k, v in call.items() if k not in family.instance_settings}
    if call:
        merge = family.call_settings or (lambda values, given: {**values, **given})
        preprocessor = merge(preprocessor, call)
    config = family.build(
        source,
        processor_type,
        Fields(source.origin, preprocessor),
        Fields(f"{source.origin} (processor)", processor),
    )
    for key in nulls:
        switch = NEEDED_BY.get(key)
        if preprocessor.get(key) is None and switch is not None and getattr(config, switch, False):
            raise MmfastError(
                f"{source.origin}: {key}: expected a value while {switch} is on, got null "
                "(transformers keeps the null and refuses it)"
            )
    return with_backend(config, family.backends[0] if backend is None else backend, family)


def null_switches(values: Mapping[str, Any]) -> dict[str, bool]:
    """The switches (``do_*``) a file or keyword arguments set to null, as False: transformers
    keeps a null (``from_dict`` stores it over the class default, a call's replaces the
    instance's) and reads it as off."""
    return {key: False for key, value in values.items() if value is None and key[:3] == "do_"}


# The values transformers' preprocess checks for, by the switch that needs them
# (validate_preprocess_arguments): a file's null there is refused while the switch is on.
NEEDED_BY: Final = {
    "resample": "do_resize",
    "rescale_factor": "do_rescale",
    "image_mean": "do_normalize",
    "image_std": "do_normalize",
}


def with_backend(config: ModelConfig, backend: str, family: Family | None = None) -> ModelConfig:
    """``config`` matching transformers' ``backend`` class, or :class:`MmfastError`."""
    if backend not in BACKENDS:
        raise MmfastError(f"backend: expected 'pil' or 'torchvision', got {backend!r}")
    if family is not None and backend not in family.backends:
        raise MmfastError(
            f"backend: {config.image_processor_type} has no {backend} class in transformers "
            f"(its reference is {family.backends[0]!r})"
        )
    resample = getattr(config, "resample", None)
    if backend == "torchvision" and resample in (BOX, HAMMING):
        raise MmfastError(
            f"resample: expected {TORCH_RESAMPLE} with backend 'torchvision', got {resample}"
        )
    if config.backend == backend:
        return config
    changed: ModelConfig = replace(config, backend=backend)  # type: ignore[type-var]
    return changed


def load_video_config(
    name_or_path: str | os.PathLike[str] | Source, **overrides: Any
) -> VideoConfig:
    """Load a model's video-processing config, as ``AutoVideoProcessor`` would.

    The checkpoint's video settings (nested in ``processor_config.json`` or in
    ``video_preprocessor_config.json``), else its ``preprocessor_config.json``, which
    transformers falls back to; the class from ``video_processor_type``, else the model type.
    Raises :class:`UnsupportedModelError` for a model without a supported video processor.
    """
    source = read_source(name_or_path)
    values = dict(source.video if source.video is not None else source.preprocessor)
    values.update(null_switches(values))
    processor_type = values.get("video_processor_type")
    if processor_type is not None and not isinstance(processor_type, str):
        raise MmfastError(
            f"{source.origin}: video_processor_type: expected a string, got {processor_type!r}"
        )
    image_type = values.get("image_processor_type")
    if processor_type is None and isinstance(image_type, str):
        # AutoVideoProcessor reads an image processor's file as a video processor of the
        # same name (GLM-4.6V's Glm46VImageProcessor: Glm46VVideoProcessor) where transformers
        # has such a class, before it looks at the model type.
        inferred = image_type.replace("ImageProcessor", "VideoProcessor")
        if inferred in registry.VIDEO_FAMILIES:
            processor_type = inferred
    model_type = registry.model_type_of(values, source.model_type)
    family = registry.video_family(processor_type, model_type)
    if family is None:
        supported = ", ".join(registry.VIDEO_FAMILIES)
        raise UnsupportedModelError(
            f"{source.origin}: no supported video processor (video_processor_type "
            f"{processor_type!r}, model type {model_type!r}); supported: {supported}"
        )
    # A switch given as None is off, as transformers stores it, but where the class reads a
    # None as its default.
    off = null_switches({k: v for k, v in overrides.items() if k not in family.none_is_default})
    for key, value in overrides.items():
        if key not in VIDEOS_KWARGS | family.kwargs | family.processor_kwargs:
            valid = ", ".join(sorted(VIDEOS_KWARGS | family.kwargs | family.processor_kwargs))
            raise MmfastError(
                f"override {key!r} is not a {family.processor_type} argument; valid: {valid}"
            )
        values[key] = off.get(key, value)
    for key in family.processor_kwargs:
        if key in source.processor and key not in values:
            values[key] = source.processor[key]
    return family.build(source.model_id, Fields(f"{source.origin} (video)", values))


# transformers.processing_utils.VideosKwargs: what every video processor accepts.
VIDEOS_KWARGS: Final = frozenset(
    {
        "do_convert_rgb",
        "do_resize",
        "size",
        "default_to_square",
        "resample",
        "do_rescale",
        "rescale_factor",
        "do_normalize",
        "image_mean",
        "image_std",
        "do_center_crop",
        "crop_size",
        "do_pad",
        "do_sample_frames",
        "fps",
        "num_frames",
        "video_metadata",
        "return_metadata",
        "data_format",
        "input_data_format",
        "device",
        "return_tensors",
    }
)
