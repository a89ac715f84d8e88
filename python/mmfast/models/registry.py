"""The families mmfast serves, and its built-in checkpoints; each family module registers itself.

A :class:`Family` names the HF image-processor classes it mirrors and the ``model_type`` values
AutoImageProcessor maps to them, lists the keyword arguments those classes accept, and builds
its :class:`~mmfast.models.base.ModelConfig` from a checkpoint's config. Adding a family is one
module that calls :func:`register` (and :func:`register_builtin` for its checkpoints).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mmfast.models.base import ModelConfig, VideoConfig
    from mmfast.models.config import Fields, Source

__all__ = [
    "BUILTINS",
    "FAMILIES",
    "INSTANCE_KEY",
    "Builtin",
    "Family",
    "by_model_type",
    "by_processor_type",
    "keep_instance",
    "processor_class",
    "register",
    "register_builtin",
    "register_video",
    "source_processor_class",
    "video_family",
]

Build = Callable[["Source", str, "Fields", "Fields"], "ModelConfig"]

# The settings key under which a family's ``instance_attributes`` reach its build: the values a
# transformers instance holds (put there by mmfast.hf, or by the family's call_settings from
# the settings the instance was built with), where they differ from a call's merged settings.
INSTANCE_KEY = "__instance__"


@dataclass(frozen=True)
class Family:
    """One HF image-processor family.

    ``processor_types``: base class names (``Fast``/``Pil`` spellings resolve to them).
    ``model_types``: AutoImageProcessor's fallback for configs without
    ``image_processor_type``, model type -> the class name it picks.
    ``kwargs``: the class's valid keyword arguments beyond transformers' common
    ``ImagesKwargs``; ``init_kwargs``: those its construction (a config file, or
    ``from_pretrained``) takes and a call does not (CLIP's ``use_square_size``, read by
    ``__init__``; transformers refuses it in a call); ``processor_kwargs``:
    ``processor_config.json`` keys the family reads (token counts).
    ``build(source, processor_type, preprocessor_fields, processor_fields)`` makes the
    config. ``hf_pil`` and ``hf_torchvision`` name transformers' classes for the
    family (``module.Class`` under ``transformers.models``), where they exist, for parity
    tests and the bench. ``processor_defaults``: HF processor class -> the image kwargs it
    passes on every call (its ``images_kwargs``), which win over the checkpoint's file; the
    checkpoint's processor is its ``processor_class``, else its model type's (from
    ``processor_classes``), else none (the image processor class's own defaults apply).
    ``backends``: the transformers backends mmfast matches for the family.
    ``processor_classes``: HF processor class -> model type, for configs read without
    ``config.json``. ``call_settings(values, call)`` puts a call's keyword arguments over a
    config's values as transformers' ``preprocess`` puts them over the instance's attributes
    (by default they replace the values they name). ``instance_settings``: settings the
    torchvision class reads from its instance, ignoring a call's value (DeepSeek-OCR-2's
    ``background_color``). ``instance_attributes``: attributes the
    class reads off the instance rather than from a call's settings (a colour fixed at
    construction): :mod:`mmfast.hf` passes the instance's own under :data:`INSTANCE_KEY`.
    ``ignored_kwargs``: common ``ImagesKwargs`` the class accepts but never reads (Step-3.7's
    ``do_resize``), which :mod:`mmfast.hf` takes with any value, None included.
    ``call_none_is_instance``: an old-style class whose ``preprocess`` reads a call's None as
    the instance's value (``x if x is not None else self.x``: Emu3, Video-LLaVA), where the
    others read a switch's None as off; its ``call_settings`` leaves such values out.
    ``construct(values)``: what the class's ``__init__`` makes of its settings (the file's
    and ``from_pretrained``'s) before any call puts its own over them (CLIP's
    ``use_square_size`` squares the size, and a call's ``size`` then replaces that).
    """

    name: str
    processor_types: tuple[str, ...]
    model_types: Mapping[str, str]
    build: Build
    kwargs: frozenset[str] = field(default_factory=frozenset)
    init_kwargs: frozenset[str] = field(default_factory=frozenset)
    processor_kwargs: frozenset[str] = field(default_factory=frozenset)
    hf_pil: str | None = None
    hf_torchvision: str | None = None
    processor_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    backends: tuple[str, ...] = ("pil", "torchvision")
    processor_classes: Mapping[str, str] = field(default_factory=dict)
    call_settings: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]] | None = None
    instance_settings: frozenset[str] = field(default_factory=frozenset)
    instance_attributes: tuple[str, ...] = ()
    ignored_kwargs: frozenset[str] = field(default_factory=frozenset)
    call_none_is_instance: bool = False
    construct: Callable[[dict[str, Any]], dict[str, Any]] | None = None


@dataclass(frozen=True)
class Builtin:
    """A checkpoint known without a local file: its ``model_type`` and config files."""

    model_type: str
    preprocessor: Mapping[str, Any]
    processor: Mapping[str, Any]
    video: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class VideoFamily:
    """One HF video-processor class: its name, the ``model_type`` values AutoVideoProcessor
    maps to it, its valid keyword arguments beyond ``VideosKwargs`` and how to build its
    config from fields. ``ignores``: the common ``VideosKwargs`` settings the class's
    ``_preprocess`` never reads (a value there changes nothing); ``none_is_default``: the
    settings whose None the class reads as the config's default. ``prepared``: settings whose
    work the class does while preparing the clips, before ``_preprocess`` (ERNIE's timestamps
    drawn on the frames), which ``mmfast.hf`` therefore reads as done: the values it builds
    the config with, transformers having applied them to the clips it hands on.
    ``processor_kwargs``: the ``processor_config.json`` keys the token count reads (the
    model's processor settings, such as its tokens per frame), which the config's fields then
    include.
    ``instance_settings``: settings the class reads from the instance whatever a call passes
    (``mmfast.hf`` takes them from the processor).
    """

    processor_type: str
    model_types: tuple[str, ...]
    build: Callable[[str | None, Fields], VideoConfig]
    kwargs: frozenset[str]
    ignores: frozenset[str] = frozenset()
    none_is_default: frozenset[str] = frozenset()
    prepared: Mapping[str, Any] = field(default_factory=dict)
    processor_kwargs: frozenset[str] = frozenset()
    instance_settings: frozenset[str] = frozenset()


FAMILIES: dict[str, Family] = {}
VIDEO_FAMILIES: dict[str, VideoFamily] = {}
PROCESSOR_MODEL_TYPES: dict[str, str] = {}
BUILTINS: dict[str, Builtin] = {}
_BY_PROCESSOR_TYPE: dict[str, Family] = {}
_BY_MODEL_TYPE: dict[str, Family] = {}


def keep_instance(*names: str) -> Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]:
    """A family's ``call_settings`` for a class that reads ``names`` off its instance: a call's
    values over the config's, with the config's own values of ``names`` kept under
    :data:`INSTANCE_KEY` (as :mod:`mmfast.hf` passes an instance's)."""

    def merge(values: Mapping[str, Any], call: Mapping[str, Any]) -> dict[str, Any]:
        instance = values.get(INSTANCE_KEY) or {name: values.get(name) for name in names}
        return {**values, **call, INSTANCE_KEY: instance}

    return merge


def register(family: Family) -> Family:
    """Adds ``family``; a processor type or model type claimed twice is a programming error."""
    for name in family.processor_types:
        if name in _BY_PROCESSOR_TYPE:
            raise RuntimeError(f"processor type {name} registered twice")
        _BY_PROCESSOR_TYPE[name] = family
    for model_type in family.model_types:
        if model_type in _BY_MODEL_TYPE:
            raise RuntimeError(f"model type {model_type} registered twice")
        _BY_MODEL_TYPE[model_type] = family
    FAMILIES[family.name] = family
    PROCESSOR_MODEL_TYPES.update(family.processor_classes)
    return family


def register_video(family: VideoFamily) -> VideoFamily:
    """Adds a video-processor family."""
    VIDEO_FAMILIES[family.processor_type] = family
    return family


def video_family(processor_type: str | None, model_type: str | None) -> VideoFamily | None:
    """The video family AutoVideoProcessor picks: by ``video_processor_type``, else by
    ``model_type``."""
    if processor_type is not None:
        return VIDEO_FAMILIES.get(processor_type.removesuffix("Fast"))
    return next((v for v in VIDEO_FAMILIES.values() if model_type in v.model_types), None)


def register_builtin(
    model_id: str,
    model_type: str,
    preprocessor: Mapping[str, Any],
    processor: Mapping[str, Any] | None = None,
    video: Mapping[str, Any] | None = None,
) -> None:
    """Adds a built-in checkpoint: its ``preprocessor_config.json`` (and
    ``processor_config.json``, and ``video_preprocessor_config.json`` where it has one) as
    found in a public copy; the caller's comment says where."""
    if model_id in BUILTINS:
        raise RuntimeError(f"built-in {model_id} registered twice")
    BUILTINS[model_id] = Builtin(model_type, preprocessor, processor or {}, video)


def model_type_of(values: Mapping[str, Any], model_type: str | None) -> str | None:
    """``model_type`` (from ``config.json``), else the one a config's ``processor_class``
    implies."""
    processor_class = values.get("processor_class")
    if model_type is not None or not isinstance(processor_class, str):
        return model_type
    return PROCESSOR_MODEL_TYPES.get(processor_class)


def processor_class(
    classes: Mapping[str, str],
    values: Mapping[str, Any],
    processor: Mapping[str, Any],
    model_type: str | None,
) -> str | None:
    """The checkpoint's HF processor class: ``processor_config.json``'s ``processor_class``,
    else the image config's (``values``), else the one ``classes`` (a family's
    ``processor_classes``) gives its model type (from ``config.json``, else implied by the
    image config); None for a checkpoint with neither."""
    for name in (processor.get("processor_class"), values.get("processor_class")):
        if isinstance(name, str):
            return name
    model_type = model_type_of(values, model_type)
    return next((p for p, m in classes.items() if m == model_type), None)


def source_processor_class(source: Source, classes: Mapping[str, str]) -> str | None:
    """:func:`processor_class` of a checkpoint's files."""
    return processor_class(classes, source.preprocessor, source.processor, source.model_type)


def processor_defaults(
    family: Family, values: Mapping[str, Any], processor: Mapping[str, Any], model_type: str | None
) -> Mapping[str, Any]:
    """The image kwargs the checkpoint's HF processor (:func:`processor_class`) passes on
    every call; none for a checkpoint without one."""
    name = processor_class(family.processor_classes, values, processor, model_type)
    return family.processor_defaults.get(name or "", {})


def builtin_processor_defaults(model_id: str, family: Family) -> Mapping[str, Any]:
    """:func:`processor_defaults` of a built-in checkpoint."""
    builtin = BUILTINS[model_id]
    return processor_defaults(family, builtin.preprocessor, builtin.processor, builtin.model_type)


def by_processor_type(base_name: str) -> Family | None:
    """The family of an ``image_processor_type`` without its ``Fast``/``Pil`` suffix."""
    return _BY_PROCESSOR_TYPE.get(base_name)


def family_of(image_processor_type: str) -> Family:
    """The family of a config's ``image_processor_type`` (registered by construction)."""
    family = by_processor_type(image_processor_type.removesuffix("Fast").removesuffix("Pil"))
    assert family is not None, image_processor_type
    return family


def by_model_type(model_type: str) -> tuple[Family, str] | None:
    """The family and class name AutoImageProcessor picks for a ``model_type``."""
    family = _BY_MODEL_TYPE.get(model_type)
    return None if family is None else (family, family.model_types[model_type])


def supported_processor_types() -> str:
    """The supported class names, for error messages."""
    names = ", ".join(sorted(_BY_PROCESSOR_TYPE))
    return f"{names} (each also spelled with a Fast or Pil suffix)"


def supported_model_types() -> str:
    """The model types with a fallback, for error messages."""
    return ", ".join(sorted(_BY_MODEL_TYPE))
