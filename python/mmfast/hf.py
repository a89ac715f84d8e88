"""transformers drop-in: transformers' own image and video processors, with mmfast computing
the pixels.

For each transformers image-processor class mmfast matches bit for bit (``XImageProcessorPil``
and, where mmfast matches it too, the torchvision ``XImageProcessor``) and each video-processor
class, :func:`backed_class` makes a subclass, once, with the class's name and module. It keeps
everything of the original that serving code reads (``merge_size``, ``patch_size``,
``get_number_of_image_patches``, ``to_dict``, ``save_pretrained``, pickling and every
``isinstance`` answer) and replaces one step. For images: after transformers' ``preprocess``
has validated the call's keyword arguments and merged them with the instance's settings, an
:class:`mmfast.ImageProcessor` built from those settings (``backend="pil"`` for a PIL class,
``"torchvision"`` for a torchvision one; cached per settings) computes the outputs; inputs that
are not PIL images or plain (H, W, 3) uint8 arrays first go through the class's own input
preparation, so they are read exactly as transformers reads them. For videos: after
transformers has sampled, decoded and prepared the clips, mmfast computes ``_preprocess``.
Outputs come back as transformers' ``BatchFeature``, with the types transformers gives for the
call's ``return_tensors`` (``None``: its per-family arrays, tensors or lists).

Anything mmfast cannot reproduce exactly runs transformers' own code instead, so an output
never differs from transformers': float inputs, paths and URLs, ``data_format`` other than
channels-first, extra positional arguments or image-like inputs (segmentation maps, ...), a
device other than the CPU (unless ``MMFAST_HF_CUDA=cpu``), a setting mmfast does not read for
the class or one that is None where transformers and mmfast would not read it alike, a
method replaced on the instance or its class (a monkeypatch, which transformers calls), any
:class:`~mmfast.MmfastError` from building or running the processor (transformers then raises
or returns what it would have) and any other error inside mmfast (logged at WARNING).
:func:`stats` counts who computed each call, by class and reason; the ``mmfast.hf`` logger
says at INFO the first time a class computes on mmfast or falls back for a reason, and at
DEBUG why each call ran on transformers.

Ways in: :func:`wrap` a processor you already have; :func:`from_pretrained` as
``AutoImageProcessor.from_pretrained``; :func:`install`, after which every supported image
and video processor transformers loads (``AutoImageProcessor``, ``AutoVideoProcessor``,
``AutoProcessor``, a class's ``from_pretrained`` or ``from_dict``) is mmfast-backed; and
``MMFAST_HF_INSTALL=1`` (:func:`install_from_env`). transformers, numpy and Pillow are imported
only when one of these runs, so importing this module is cheap (the ``.pth`` hook does it at
every interpreter start when the variable is set).
"""

from __future__ import annotations

import enum
import functools
import importlib
import importlib.abc
import importlib.machinery
import itertools
import json
import logging
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Final, SupportsIndex, cast

from mmfast.errors import MmfastError, UnsupportedModelError

if TYPE_CHECKING:
    import numpy as np

    from mmfast.models.base import ModelConfig, VideoConfig
    from mmfast.models.registry import Family, VideoFamily
    from mmfast.processors import BatchFeature, ImageProcessor

__all__ = [
    "CUDA_ENV_VAR",
    "ENV_VAR",
    "MmfastBacked",
    "backed_class",
    "cuda_policy",
    "from_pretrained",
    "install",
    "install_from_env",
    "stats",
    "supported_classes",
    "uninstall",
    "wrap",
]

ENV_VAR = "MMFAST_HF_INSTALL"
"""The environment variable :func:`install_from_env` reads: ``1``, ``true``, ``yes`` or
``on`` install; ``0``, ``false``, ``no``, ``off`` or unset do nothing (any case)."""
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})

CUDA_ENV_VAR = "MMFAST_HF_CUDA"
"""How backed classes serve calls with a device other than the CPU (``device="cuda:0"``, as
SGLang passes on a GPU server): ``transformers`` (the default) runs transformers' own code on
that device, whose torchvision kernels no CPU result equals bit for bit; ``cpu`` computes on the
CPU with mmfast (the values transformers' torchvision class gives on the CPU) and moves the
outputs to the device."""
_CUDA_POLICIES = ("transformers", "cpu")

logger = logging.getLogger(__name__)

# Keyword arguments that say where and how outputs are returned, not what they hold: handled
# here (or by falling back), never read as settings.
_CALL_ONLY = frozenset(
    {"return_tensors", "data_format", "input_data_format", "device", "disable_grouping"}
)
# Settings transformers' classes default to None that mmfast reads as transformers runs them
# (off, or unused), given that the switch named here is off too (None: no switch). A None for
# any other setting falls back: transformers would run with None where mmfast reads its default.
_NONE_READS_AS_OFF: Final[Mapping[str, str | None]] = MappingProxyType(
    {
        "do_center_crop": None,
        "do_pad": None,
        "do_pan_and_scan": None,
        # Phi4MultimodalImageProcessor has no do_resize and never reads it; classes that
        # resize every image themselves (Aria's) leave it None.
        "do_resize": None,
        "image_seq_length": None,
        "rescale_image_frac": None,
        "pad_size": None,
        # Classes that size every image themselves (MiniCPM-V's, Gemma 4's, SigLIP 2's,
        # Aria's) or whose resize reads no size (MuseGlimmerImageProcessor's) leave size None.
        "size": None,
        "transform": None,  # IdeficsImageProcessor's replacement pipeline, unset
        "crop_size": "do_center_crop",
        # Classes that never resize (Inkling 2's) leave resample None.
        "resample": "do_resize",
        "pan_and_scan_min_crop_size": "do_pan_and_scan",
        "pan_and_scan_max_num_crops": "do_pan_and_scan",
        "pan_and_scan_min_ratio_to_activate": "do_pan_and_scan",
        # LayoutLMv3: Tesseract's settings, unused without OCR.
        "ocr_lang": "apply_ocr",
        "tesseract_config": "apply_ocr",
    }
)
# The module whose ImageProcessingMixin install() patches; install_from_env() waits for it.
_BASE_MODULE = "transformers.image_processing_base"
# The module whose VideoProcessorMixin install() patches too.
_VIDEO_MODULE = "transformers.video_processing_utils"

# transformers' backend classes; an image processor without one is old-style (its own
# NumPy preprocess).
_BACKENDS = frozenset({"PilBackend", "TorchvisionBackend"})

_lock = threading.RLock()


def _new_lock() -> None:
    """A forked child's lock: one a parent's thread held at the fork stays held in it."""
    global _lock
    _lock = threading.RLock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_new_lock)
_classes: dict[type, type] = {}
# A class's methods as they were when its backed class was made: (class, the size of its
# __dict__, its methods by name), for each class the backed class is made of.
_Methods = tuple[tuple[type, int, tuple[tuple[str, Any], ...]], ...]
# Each backed class's methods as it was made, their names, and the first made by a patch
# (see _replaced).
_defined: dict[type, tuple[_Methods, frozenset[str], str | None]] = {}
# Calls served, by class and by who computed them (see stats()).
_calls: Counter[tuple[str, str | None]] = Counter()
# The from_dict classmethods install() replaced, by module, while installed.
_original_from_dict: dict[str, Any] = {}


class _Fallback(Exception):
    """Why a call runs on transformers' own code: ``kind``, a short reason counted by
    :func:`stats`, and the message logged at DEBUG."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@functools.cache
def _supported() -> dict[str, tuple[Family, str, str]]:
    """transformers class name -> (family, image_processor_type, backend), for every class
    AutoImageProcessor maps a model type to and mmfast matches: the class of each backend
    (``<type>Pil`` for PIL, ``<type>`` for torchvision; an old-style NumPy class such as
    ``Emu3ImageProcessor`` is its model's PIL-backend class)."""
    from mmfast.models import registry

    auto = importlib.import_module("transformers.models.auto.image_processing_auto")
    slots = [
        (backend, name)
        for classes in auto.IMAGE_PROCESSOR_MAPPING_NAMES.values()
        for backend, name in classes.items()
        if name is not None
    ]
    # Deprecated aliases transformers still exports (Ernie4_5_VL_MoeImageProcessor): subclasses
    # that only warn, which checkpoints converted before a rename name. Its lazy module lists
    # every exported class without importing any.
    exported = getattr(importlib.import_module("transformers"), "_class_to_module", {})
    slots += [
        ("pil" if name.endswith("Pil") else "torchvision", name)
        for name, module in exported.items()
        if module.startswith("models.")
    ]
    table: dict[str, tuple[Family, str, str]] = {}
    for backend, class_name in slots:
        name = class_name.removesuffix("Pil")
        family = registry.by_processor_type(name)
        if family is not None and backend in family.backends:
            table.setdefault(class_name, (family, name, backend))
    return table


def _count(class_name: str, fallback: str | None) -> None:
    """Counts a call: computed by mmfast (``fallback`` None) or run on transformers' code, and
    says so at INFO the first time for each class and reason."""
    with _lock:
        _calls[class_name, fallback] += 1
        first = _calls[class_name, fallback] == 1
    if first and fallback is None:
        logger.info("%s: calls computed by mmfast", class_name)
    elif first:
        logger.info("%s: a call ran on transformers' code: %s", class_name, fallback)


def stats() -> dict[str, Any]:
    """The calls backed image processors have served in this process: ``{"mmfast": n,
    "transformers": m, "by_class": {class name: {"mmfast": n, reason: count, ...}}}``, where a
    reason says why a call ran on transformers' code (its details are logged at DEBUG)."""
    with _lock:
        calls = dict(_calls)
    by_class: dict[str, dict[str, int]] = {}
    for (name, fallback), count in sorted(calls.items(), key=lambda item: str(item[0])):
        by_class.setdefault(name, {})[fallback or "mmfast"] = count
    mmfast = sum(count for (_, fallback), count in calls.items() if fallback is None)
    return {"mmfast": mmfast, "transformers": sum(calls.values()) - mmfast, "by_class": by_class}


def cuda_policy() -> str:
    """:data:`CUDA_ENV_VAR`'s value: ``"transformers"`` (also when unset) or ``"cpu"``; an
    unknown value is warned about once and read as ``"transformers"``."""
    value = os.environ.get(CUDA_ENV_VAR, "transformers").strip().lower()
    if value in _CUDA_POLICIES:
        return value
    _warn_once(f"{CUDA_ENV_VAR}: expected one of {', '.join(_CUDA_POLICIES)}, got {value!r}")
    return "transformers"


@functools.cache
def _warn_once(message: str) -> None:
    logger.warning("%s", message)


@functools.cache
def _supported_videos() -> dict[str, VideoFamily]:
    """transformers video-processor class name -> its mmfast video family, for every class
    AutoVideoProcessor maps a model type to and mmfast matches (every transformers video
    processor is a torchvision class)."""
    from mmfast.models import registry

    auto = importlib.import_module("transformers.models.auto.video_processing_auto")
    names = {
        name
        for classes in auto.VIDEO_PROCESSOR_MAPPING_NAMES.values()
        for name in (classes.values() if isinstance(classes, dict) else [classes])
    }
    return {name: family for name, family in registry.VIDEO_FAMILIES.items() if name in names}


def supported_classes() -> list[str]:
    """Names of the transformers image- and video-processor classes mmfast can back."""
    return sorted({*_supported(), *_supported_videos()})


class MmfastBacked:
    """Base of the classes :func:`backed_class` makes: ``isinstance(x, MmfastBacked)`` tells
    whether an image processor runs on mmfast. Not meant to be subclassed directly."""

    # The transformers class this one extends.
    _mmfast_hf_class: ClassVar[type]

    def _preprocess_image_like_inputs(self, images: Any, *args: Any, **kwargs: Any) -> Any:
        """transformers' step after its argument handling: mmfast's outputs when they match
        transformers' exactly, else transformers' own code."""
        out = _served(self, lambda: _run(self, images, args, kwargs))
        if out is None:
            return cast("Any", super())._preprocess_image_like_inputs(images, *args, **kwargs)
        return out

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        """Pickled by the transformers class it extends (the backed class has that class's
        module and name, so pickle could not find it by them)."""
        return _unpickle, (self._mmfast_hf_class,), self.__dict__


class MmfastBackedLegacy(MmfastBacked):
    """Base of the backed old-style classes, whose own ``preprocess`` reads the call's
    arguments over the instance's settings (``Emu3ImageProcessor``)."""

    def preprocess(self, images: Any, *args: Any, **kwargs: Any) -> Any:
        """mmfast's outputs when they match transformers' exactly, else the class's own
        ``preprocess``."""
        out = _served(self, lambda: _run_legacy(self, images, args, kwargs))
        if out is None:
            return cast("Any", super()).preprocess(images, *args, **kwargs)
        return out


class MmfastBackedVideo(MmfastBacked):
    """Base of the video-processor classes :func:`backed_class` makes."""

    def _preprocess(self, videos: Any, **kwargs: Any) -> Any:
        """transformers' step after it has sampled, decoded and prepared the clips (TCHW
        tensors) and resolved the settings: mmfast's outputs when they match transformers'
        exactly, else transformers' own code."""
        out = _served(self, lambda: _run_video(self, videos, kwargs))
        if out is None:
            return cast("Any", super())._preprocess(videos=videos, **kwargs)
        return out


def _served(processor: MmfastBacked, compute: Callable[[], Any]) -> Any:
    """``compute()``, the call computed by mmfast, counted; None, counted with the reason,
    when the call must run on transformers' code (a :class:`_Fallback`, a method replaced
    since transformers defined it, or a bug in mmfast, which is logged as a warning:
    transformers' result, not an error)."""
    class_name = type(processor).__name__
    try:
        replaced = _replaced(processor)
        if replaced is not None:
            raise _Fallback("a replaced method", f"{replaced}, which mmfast would not call")
        out = compute()
    except _Fallback as reason:
        _count(class_name, reason.kind)
        logger.debug("%s: running transformers' code: %s", class_name, reason)
    except Exception as exc:
        _count(class_name, "an error in mmfast")
        logger.warning(
            "%s: mmfast failed where transformers runs (please report it); running "
            "transformers' code",
            class_name,
            exc_info=exc,
        )
    else:
        _count(class_name, None)
        return out
    return None


def _is_method(value: Any) -> bool:
    return callable(value) or isinstance(
        value, (classmethod, staticmethod, property, functools.partialmethod)
    )


# Where a backed class's methods come from: transformers, mmfast, and torch's decorators over
# transformers' methods (Llama 4's torch.compile'd rescale_and_normalize).
_OWN_PACKAGES = ("transformers", "mmfast", "torch")
# Classes whose methods load, save and describe a processor (install() replaces from_dict in
# two of them), or sample and decode clips before the step mmfast computes: none is called
# in that step.
_UNCHECKED = frozenset({"ImageProcessingMixin", "VideoProcessorMixin", "PushToHubMixin", "object"})


def _methods(backed: type) -> tuple[_Methods, frozenset[str], str | None]:
    """The methods of ``backed``'s classes, their names, and the first of them whose code is
    not from :data:`_OWN_PACKAGES` (a patch made before the class was backed), or None."""
    roots = tuple(
        os.path.dirname(module.__file__) + os.sep
        for name in _OWN_PACKAGES
        if (module := sys.modules.get(name)) is not None and module.__file__
    )
    defined = []
    foreign = None
    for cls in backed.__mro__:
        if cls.__name__ in _UNCHECKED:
            continue
        methods = tuple((n, v) for n, v in vars(cls).items() if _is_method(v))
        defined.append((cls, len(vars(cls)), methods))
        for name, value in methods:
            # What a wrapper or a static, class or partial method runs, and the file of its
            # code (a functools.wraps wrapper keeps the module of the function it wraps).
            for part in ("__func__", "fget", "func"):
                value = getattr(value, part, value)
            code = getattr(value, "__code__", None)
            origin = code.co_filename if code is not None else str(getattr(value, "__module__", ""))
            if foreign is None and not (
                origin.startswith(roots) or origin.partition(".")[0] in _OWN_PACKAGES
            ):
                foreign = f"{cls.__qualname__}.{name} from {origin}"
    names = frozenset(name for _, _, methods in defined for name, _ in methods)
    return tuple(defined), names, foreign


def _replaced(processor: MmfastBacked) -> str | None:
    """The first of the processor's methods that is no longer transformers' (nor mmfast's):
    one set on the instance, or on a class it is made of (a monkeypatch), or defined by a
    subclass of the backed class, which transformers' code would call; None when there is
    none."""
    backed = type(processor)
    methods = _defined.get(backed)
    if methods is None:
        return f"{backed.__qualname__}, a subclass of the backed class"
    defined, names, foreign = methods
    on_instance = names.intersection(vars(processor))
    if on_instance:
        return f"{min(on_instance)} set on the instance"
    for cls, size, kept in defined:
        now = vars(cls)
        for name, value in kept:
            if now.get(name) is not value:
                return f"{cls.__qualname__}.{name} replaced"
        if len(now) != size:  # something added: a method, or a plain attribute
            added = {n for n, v in now.items() if _is_method(v)} - {n for n, _ in kept}
            if added:
                return f"{cls.__qualname__}.{min(added)} added"
    return foreign


def _unpickle(hf_class: type) -> Any:
    """An empty instance of the backed class of ``hf_class``, for :meth:`__reduce_ex__`."""
    backed = backed_class(hf_class)
    return object.__new__(hf_class if backed is None else backed)


def backed_class(hf_class: type) -> type | None:
    """The mmfast-backed subclass of a transformers image-processor class, made once, with
    the class's name, qualified name and module (so that transformers' lookups by module,
    such as its ``<Name>Kwargs``, find what they find for the class itself); None for a class
    mmfast does not match (a subclass or remote-code class included) and for a class that is
    already backed."""
    if (
        issubclass(hf_class, MmfastBacked)
        or not hf_class.__module__.startswith("transformers.models.")
        or hf_class.__name__ not in {*_supported(), *_supported_videos()}
    ):
        return None
    with _lock:
        backed = _classes.get(hf_class)
        if backed is None:
            name = hf_class.__name__
            if name in _supported_videos():
                base: type = MmfastBackedVideo
            elif _BACKENDS.isdisjoint(c.__name__ for c in hf_class.__mro__):
                base = MmfastBackedLegacy
            else:
                base = MmfastBacked
            backed = type(
                name,
                (base, hf_class),
                {
                    "__module__": hf_class.__module__,
                    "__qualname__": hf_class.__qualname__,
                    "__doc__": f"transformers' {name}, with its outputs computed by mmfast.",
                    "_mmfast_hf_class": hf_class,
                },
            )
            _classes[hf_class] = backed
            _defined[backed] = _methods(backed)
    return backed


def __getattr__(name: str) -> type:
    """A backed class by its name, so that pickled image processors load in a new process."""
    if name in _supported():
        auto = importlib.import_module("transformers.models.auto.image_processing_auto")
        hf_class = auto.get_image_processor_class_from_name(name)
        backed = None if hf_class is None else backed_class(hf_class)
        if backed is not None:
            return backed
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _run(processor: MmfastBacked, images: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """The call on mmfast, as transformers' ``BatchFeature``; raises :class:`_Fallback`."""
    hf_class = type(processor)._mmfast_hf_class
    family, _, backend = _supported()[hf_class.__name__]
    # LLaVA-OneVision's preprocess passes the images it counted per sample; mmfast counts too.
    counts = args[0] if len(args) == 1 and family.name == "llava_onevision" else None
    if args and counts is None:
        raise _Fallback("positional arguments", f"{len(args)} positional arguments")
    return_tensors = _return_tensors(kwargs.get("return_tensors"))
    _check_data_format(kwargs.get("data_format"))
    device = kwargs.get("device")
    on_cpu = device is None or str(device) == "cpu"
    if not on_cpu and cuda_policy() == "transformers":
        raise _Fallback("device", f"device={device!r} (see {CUDA_ENV_VAR})")
    inputs = _inputs(processor, images, kwargs, counts)
    if backend == "torchvision":
        # Settings the class reads from the instance, whatever the call merged in.
        kwargs = {**kwargs, **{n: getattr(processor, n) for n in family.instance_settings}}
    settings = _settings(hf_class, family, kwargs, processor)
    proc = _processor(hf_class, settings)
    # transformers' Llama 4 class computes in bfloat16, which numpy cannot hold.
    bfloat16 = _computes_bfloat16(proc)
    if bfloat16 and return_tensors == "np":
        raise _Fallback("bfloat16 as numpy", "bfloat16 outputs with return_tensors='np'")
    out = _call(proc, inputs, dtype="bfloat16" if bfloat16 else None)
    if counts is not None and out["batch_num_images"].tolist() != list(counts):
        raise _Fallback("image counts", f"batch_num_images {list(counts)}")
    feature = _feature(hf_class, proc.config, out, return_tensors)
    return feature if on_cpu else feature.to(device)


def _run_legacy(
    processor: MmfastBacked, images: Any, args: Sequence[Any], kwargs: dict[str, Any]
) -> Any:
    """An old-style class's ``preprocess`` call on mmfast, as transformers' ``BatchFeature``:
    the instance's settings, with the call's arguments put over them as the class's
    ``preprocess`` puts them (its family's ``call_settings``); raises :class:`_Fallback`."""
    from mmfast.models.config import IMAGES_KWARGS

    hf_class = type(processor)._mmfast_hf_class
    family = _supported()[hf_class.__name__][0]
    if args:
        raise _Fallback("positional arguments", f"{len(args)} positional arguments")
    # preprocess reads a None argument as the instance's setting.
    call = {name: value for name, value in kwargs.items() if value is not None}
    return_tensors = _return_tensors(call.pop("return_tensors", None))
    _check_data_format(_plain(call.pop("data_format", "channels_first")))
    inputs = _inputs(processor, images, call, None)
    known = IMAGES_KWARGS | family.kwargs
    instance = {name: getattr(processor, name) for name in known if hasattr(processor, name)}
    unset = sorted(name for name, value in instance.items() if value is None)
    if unset:
        # The class reads an instance's None as it is (a do_resize of None: no resize), where
        # a config's null means the default.
        raise _Fallback("instance settings of None", ", ".join(unset))
    proc = _processor(hf_class, _settings(hf_class, family, instance, processor))
    arguments = {name: _plain(value) for name, value in call.items()}
    out = _call(proc, inputs, **arguments)
    # The outputs' form (key, lists) follows the call's config, not the instance's.
    config = proc._config_for(None, {k: v for k, v in arguments.items() if k in known})
    return _feature(hf_class, config, out, return_tensors)


def _return_tensors(value: Any) -> str | None:
    """A call's ``return_tensors``, if mmfast gives it; else :class:`_Fallback`."""
    if value not in (None, "np", "pt"):
        raise _Fallback("return_tensors", f"return_tensors={value!r}")
    return cast("str | None", value)


def _check_data_format(value: Any) -> None:
    if value is not None and value != "channels_first":
        raise _Fallback("data_format", f"data_format={value!r}")


def _call(proc: ImageProcessor, inputs: Any, **arguments: Any) -> BatchFeature:
    """``proc`` on the inputs :func:`_inputs` gave (channels-last); an image or setting mmfast
    refuses runs on transformers' code."""
    try:
        return proc(inputs, input_data_format="channels_last", **arguments)
    except MmfastError as exc:
        raise _Fallback("mmfast refused the call", str(exc)) from exc


def _feature(
    hf_class: type, config: ModelConfig, out: BatchFeature, return_tensors: str | None
) -> Any:
    """mmfast's outputs as the ``BatchFeature`` ``hf_class`` returns for ``return_tensors``."""
    # A torchvision class returns tensors even with return_tensors=None.
    if return_tensors is None:
        tensors = config.backend == "torchvision"
        data = unbatched(config, out)
    else:
        tensors = return_tensors == "pt"
        data = dict(out)
    if tensors:
        for key, dtype in config.tensor_dtypes.items():
            if key in data and not isinstance(data[key], list):
                data[key] = data[key].astype(dtype)
        data = _nested_map(_as_tensor, data)
    # Keys the class sets after its own conversion stay torch tensors (Step-3.7's local patches).
    late = config.tensor_keys & data.keys()
    data.update({key: _as_tensor(data[key]) for key in late})
    # transformers converts the arrays and leaves lists (Idefics3's rows and cols) as lists.
    feature_class = _feature_class(hf_class)
    arrays = {k: v for k, v in data.items() if not isinstance(v, list) and k not in late}
    feature = feature_class(data=arrays, tensor_type=return_tensors)
    return feature_class(
        {k: feature[k] if k in arrays else data[k] for k in data},
        skip_tensor_conversion=list(config.skip_tensor_conversion) or None,
    )


def _feature_class(hf_class: type) -> Any:
    """The ``BatchFeature`` class ``hf_class`` returns: the one the module of its
    ``_preprocess`` imports (image_processing_base's, or for VideoLLaMA3, GLM-Image and
    MiniMax-M3's video class feature_extraction_utils' base class)."""
    base = importlib.import_module(_BASE_MODULE)
    owner = next((k for k in hf_class.__mro__ if "_preprocess" in vars(k)), hf_class)
    feature = getattr(sys.modules.get(owner.__module__), "BatchFeature", None)
    if isinstance(feature, type) and issubclass(feature, base.BaseBatchFeature):
        return feature
    return base.BatchFeature


def unbatched(config: ModelConfig, outputs: BatchFeature) -> dict[str, Any]:
    """mmfast's outputs as transformers returns them with ``return_tensors=None`` (see
    :attr:`~mmfast.models.base.ModelConfig.unbatched`)."""
    data: dict[str, Any] = dict(outputs)
    for key, kind in config.unbatched.items():
        if key not in data:  # an output HF leaves out of this batch (pixel_values_local)
            continue
        value = data[key]
        if kind == "rows":
            data[key] = list(value)
        elif kind == "images":
            starts = [0, *itertools.accumulate(outputs.image_rows)]
            data[key] = [value[a:b] for a, b in itertools.pairwise(starts)]
        elif kind == "ints":
            data[key] = [int(v) for v in value]
        elif kind == "lists":
            data[key] = value.tolist()
        elif kind == "samples":
            data[key] = [list(sample) for sample in value]
        elif kind == "int":
            data[key] = int(value)
        elif kind == "sizes" and config.backend == "torchvision":
            size = importlib.import_module("torch").Size
            data[key] = [size(int(v) for v in row) for row in value]
        elif kind == "lists":
            data[key] = [[int(v) for v in row] for row in value]
        else:
            data[key] = [tuple(int(v) for v in row) for row in value]
    return data


def _as_tensor(value: Any) -> Any:
    """A torch tensor of an output array's memory (bfloat16 through its bits); anything else
    as it is."""
    import numpy as np

    if not isinstance(value, np.ndarray):
        return value
    torch = importlib.import_module("torch")
    if value.dtype.name == "bfloat16":
        return torch.from_numpy(value.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(value)


def _inputs(
    processor: MmfastBacked, images: Any, kwargs: dict[str, Any], counts: Sequence[int] | None
) -> Any:
    """The images for mmfast (HWC uint8 RGB arrays and PIL images), nested as transformers
    nests them; raises :class:`_Fallback` for inputs mmfast does not take.

    PIL images and unambiguous (H, W, 3) uint8 arrays go as they are. Anything else (torch
    tensors, channels-first, one- or four-channel arrays, 4-D batches, an
    ``input_data_format``) goes through the class's own ``_prepare_image_like_inputs``, so it
    is read exactly as transformers reads it; mmfast then takes the uint8 RGB pixels. Paths,
    URLs and other dtypes run on transformers.
    """
    if isinstance(images, (list, tuple)) and not images:
        raise _Fallback("no images", "no images")
    flat = _flat(images)
    if any(isinstance(image, (str, os.PathLike, bytes)) for image in flat):
        raise _Fallback("paths or URLs", "paths, URLs or bytes (transformers loads them)")
    if kwargs.get("input_data_format") is None and all(map(_plain_image, flat)):
        prepared = images
    elif isinstance(processor, MmfastBackedLegacy):
        raise _Fallback("input an old-style class reads", "not PIL images or HWC uint8 arrays")
    else:
        call = {**kwargs, "device": None}
        try:
            prepared = processor._prepare_image_like_inputs(images, **call)  # type: ignore[attr-defined]
        except Exception as exc:  # transformers refuses the input: let it say so
            raise _Fallback("input transformers refuses", repr(exc)) from exc
        # With a device named (the CPU, or another under MMFAST_HF_CUDA=cpu) transformers
        # computes from the images moved to it, so tensors elsewhere come to the CPU (SGLang
        # decodes JPEGs on the GPU); without one it computes where they are.
        to_cpu = kwargs.get("device") is not None
        prepared = _nested_map(functools.partial(_channels_last, to_cpu=to_cpu), prepared)
    if counts is not None:  # LLaVA-OneVision: the flat images of each sample
        # As transformers flattens them: one list (or tuple) per prompt (its processor's and
        # chat templates' way), or one flat list.
        flat_prepared = _flat(prepared)
        if len(flat_prepared) != sum(counts):
            # A 4-D batch transformers counts as one image (and fails on): mmfast would
            # have kept the first image alone.
            raise _Fallback(
                "image counts", f"{len(flat_prepared)} images for batch_num_images {list(counts)}"
            )
        starts = [0, *itertools.accumulate(counts)]
        prepared = [flat_prepared[a:b] for a, b in itertools.pairwise(starts)]
    return prepared


def _flat(images: Any) -> list[Any]:
    """The images of a call: one image, a list (or tuple) of them, or of such lists."""
    items = images if isinstance(images, (list, tuple)) else [images]
    return [i for item in items for i in (item if isinstance(item, (list, tuple)) else [item])]


def _plain_image(image: Any) -> bool:
    """A PIL image, or an (H, W, 3) uint8 array that transformers reads as channels-last."""
    import numpy as np
    from PIL import Image

    if isinstance(image, Image.Image):
        return True
    return (
        isinstance(image, np.ndarray)
        and image.dtype == np.uint8
        and image.ndim == 3
        and image.shape[2] == 3
        and image.shape[0] not in (1, 3, 4)
        and min(image.strides) >= 0
    )


def _nested_map(function: Callable[[Any], Any], value: Any) -> Any:
    """``function`` on every leaf of nested lists, tuples and dicts (a tuple subclass such as
    ``torch.Size`` is a leaf)."""
    if isinstance(value, list):
        return [_nested_map(function, item) for item in value]
    if type(value) is tuple:
        return tuple(_nested_map(function, item) for item in value)
    if isinstance(value, dict):
        return {key: _nested_map(function, item) for key, item in value.items()}
    return function(value)


def _channels_last(image: Any, to_cpu: bool = False) -> np.ndarray:
    """A prepared (channels-first) image as an (H, W, 3) uint8 view (a tensor off the CPU
    copied to it when ``to_cpu``); :class:`_Fallback` for what mmfast does not take (other
    dtypes, other channel counts, a tensor off the CPU otherwise)."""
    import numpy as np

    if not isinstance(image, np.ndarray) and image.device.type != "cpu":
        if not to_cpu:
            raise _Fallback("device", f"an image tensor on {image.device} and no device")
        image = image.cpu()
    if not isinstance(image, np.ndarray) and str(image.dtype) != "torch.uint8":
        raise _Fallback("not uint8 RGB", f"a prepared image tensor of dtype {image.dtype}")
    array = image if isinstance(image, np.ndarray) else image.numpy()
    if array.dtype != np.uint8 or array.ndim != 3 or array.shape[0] != 3:
        raise _Fallback(
            "not uint8 RGB", f"a prepared image of dtype {array.dtype} and shape {array.shape}"
        )
    return np.moveaxis(array, 0, -1)


# Video settings that only choose frames: transformers has sampled the clips already.
_SAMPLING = frozenset({"fps", "num_frames", "min_frames", "max_frames"})


def _run_video(processor: MmfastBacked, videos: Any, kwargs: dict[str, Any]) -> Any:
    """A video processor's call on mmfast, as transformers' ``BatchFeature``; raises
    :class:`_Fallback`."""
    import numpy as np

    from mmfast.models.config import VIDEOS_KWARGS
    from mmfast.processors import default_threads, run_videos

    hf_class = type(processor)._mmfast_hf_class
    family = _supported_videos()[hf_class.__name__]
    return_tensors = _return_tensors(kwargs.get("return_tensors"))
    clips = []
    for video in videos:
        if not isinstance(video, np.ndarray) and str(video.dtype) != "torch.uint8":
            raise _Fallback("not uint8 RGB", f"a prepared clip tensor of dtype {video.dtype}")
        frames = video if isinstance(video, np.ndarray) else video.numpy()
        if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[1] != 3:
            raise _Fallback(
                "not uint8 RGB", f"a prepared clip of dtype {frames.dtype} and shape {frames.shape}"
            )
        clips.append(np.moveaxis(frames, 1, -1))
    known = VIDEOS_KWARGS | family.kwargs
    values: dict[str, Any] = {}
    for name, value in kwargs.items():
        skip = name in family.ignores or (
            value is None and (name in _SAMPLING or name in family.none_is_default)
        )
        if name == "return_tensors" or skip:
            continue
        if name not in known:
            raise _Fallback(
                f"setting {name}", f"{name!r} is not a {hf_class.__name__} setting mmfast reads"
            )
        if value is None:
            raise _Fallback(f"{name}=None", f"{name}=None, which mmfast would read as its default")
        values[name] = _plain(value)
    # What transformers did while preparing the clips (ERNIE's timestamps) is done.
    values.update(family.prepared)
    for name in family.instance_settings:
        value = getattr(processor, name, None)
        if value is None:
            values.pop(name, None)  # the class default, as the config's
        else:
            values[name] = _plain(value)
    try:
        settings = json.dumps(values, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise _Fallback("unreadable setting", f"a setting mmfast cannot read: {exc}") from exc
    if values.get("resample") == LANCZOS_CODE and not _torch_lanczos():
        # transformers then resizes with bicubic instead (and says so in a warning).
        raise _Fallback("LANCZOS before torchvision 0.27", "LANCZOS with torchvision < 0.27")
    try:
        config = _video_config(hf_class, settings)
        out = run_videos(config, clips, default_threads(), None)
    except MmfastError as exc:
        raise _Fallback("mmfast refused the call", str(exc)) from exc
    data = _video_outputs(config, out, return_tensors)
    return _feature_class(hf_class)(
        data=data,
        tensor_type=return_tensors,
        skip_tensor_conversion=list(config.skip_tensor_conversion) or None,
    )


# PIL's LANCZOS code, which transformers' torchvision backend resizes with only from
# torchvision 0.27 (on the CPU, where mmfast's clips are).
LANCZOS_CODE = 1


@functools.cache
def _torch_lanczos() -> bool:
    utils = importlib.import_module("transformers.utils")
    return bool(utils.is_torchvision_greater_or_equal("0.27"))


def _video_outputs(config: VideoConfig, out: BatchFeature, return_tensors: str | None) -> Any:
    """mmfast's video outputs as transformers' ``_preprocess`` hands them to its
    ``BatchFeature``: with ``return_tensors=None`` the per-clip lists and Python ints it
    returns (:attr:`~mmfast.models.base.VideoConfig.unbatched`), torch tensors for arrays
    (every video processor is a torchvision class) and for the keys it always makes tensors
    (:attr:`~mmfast.models.base.VideoConfig.tensor_keys`); :class:`_Fallback` where
    transformers cannot stack the clips for ``np`` or ``pt`` (it raises)."""
    data: dict[str, Any] = dict(out)
    if return_tensors is None:
        starts = [0, *itertools.accumulate(out.image_rows)]
        for key, kind in config.unbatched.items():
            value = data[key]
            if kind == "ints":
                data[key] = [int(v) for v in value]
            elif isinstance(value, list):
                continue
            elif config.layout() == "concat":
                data[key] = [value[a:b] for a, b in itertools.pairwise(starts)]
            else:
                data[key] = list(value)
    elif isinstance(data[config.output_key], list):
        raise _Fallback("clips of different shapes", "clips of different shapes to stack")
    tensors = {k for k in data if return_tensors != "np" or k in config.tensor_keys}
    return {k: _nested_map(_as_tensor, v) if k in tensors else v for k, v in data.items()}


@functools.lru_cache(maxsize=128)
def _video_config(hf_class: type, settings: str) -> VideoConfig:
    """The mmfast video config equal to ``hf_class`` with ``settings``."""
    from mmfast.models.config import Fields

    origin = f"{hf_class.__name__} settings"
    family = _supported_videos()[hf_class.__name__]
    return family.build(None, Fields(origin, json.loads(settings)))


def _settings(hf_class: type, family: Family, kwargs: dict[str, Any], processor: Any = None) -> str:
    """The settings of a call, as transformers resolved them, in canonical JSON: the cache key
    of :func:`_processor` and the config it reads, with the ``processor``'s own values of the
    family's ``instance_attributes``. Raises :class:`_Fallback` for a setting mmfast does not
    read or reads differently."""
    from mmfast.models.config import IMAGES_KWARGS
    from mmfast.models.registry import INSTANCE_KEY

    known = IMAGES_KWARGS | family.kwargs
    values: dict[str, Any] = {}
    for name, value in kwargs.items():
        if name in _CALL_ONLY:
            continue
        # pad_size is read only by the families that name it among their kwargs (PI0).
        reads_pad_size = "pad_size" in family.kwargs
        if name not in known or (name == "pad_size" and value is not None and not reads_pad_size):
            raise _Fallback(
                f"setting {name}", f"{name!r} is not a {hf_class.__name__} setting mmfast reads"
            )
        if value is None and name in family.ignored_kwargs:
            continue
        if (
            value is None
            and name != "do_convert_rgb"
            and not _none_reads_as_off(hf_class, name, kwargs)
        ):
            raise _Fallback(f"{name}=None", f"{name}=None, which mmfast would read as its default")
        values[name] = _plain(value)
    if family.instance_attributes:
        values[INSTANCE_KEY] = {
            name: _plain(getattr(processor, name, None)) for name in family.instance_attributes
        }
    try:
        return json.dumps(values, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise _Fallback("unreadable setting", f"a setting mmfast cannot read: {exc}") from exc


def _none_reads_as_off(hf_class: type, name: str, kwargs: dict[str, Any]) -> bool:
    """Whether a None setting means the same to transformers and mmfast: the class default
    is None too, and the setting is off or unused (:data:`_NONE_READS_AS_OFF`)."""
    if getattr(hf_class, name, None) is not None or name not in _NONE_READS_AS_OFF:
        return False
    switch = _NONE_READS_AS_OFF[name]
    return switch is None or not kwargs.get(switch)


def _plain(value: Any) -> Any:
    """A setting as JSON data: ``SizeDict`` as a dict of its set keys, enums (PIL resampling
    codes) as their values, tuples as lists."""
    if isinstance(value, importlib.import_module("transformers.image_utils").SizeDict):
        return dict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


@functools.lru_cache(maxsize=128)
def _processor(hf_class: type, settings: str) -> ImageProcessor:
    """The mmfast processor equal to ``hf_class`` with ``settings`` (see :func:`_settings`).

    The settings are the image processor's own, so the family's ``processor_defaults`` (what
    a model's processor passes on each call) are not applied: the processor passes them.
    """
    from mmfast.models.config import Fields, Source, with_backend
    from mmfast.processors import ImageProcessor

    family, processor_type, backend = _supported()[hf_class.__name__]
    values = json.loads(settings)
    origin = f"{hf_class.__name__} settings"

    def build(slot: str | None = None, call: Mapping[str, Any] | None = None) -> ModelConfig:
        # A call's arguments (an old-style class's preprocess, such as Emu3's do_pad or
        # Video-LLaVA's return_legacy_image_output) go over the settings as the class puts
        # them (the family's call_settings).
        merged = values
        if call:
            merged = (family.call_settings or (lambda v, c: {**v, **c}))(values, call)
        config = family.build(
            Source(origin, None, None, merged, {}),
            processor_type,
            Fields(origin, merged),
            Fields(f"{origin} (processor)", {}),
        )
        return with_backend(config, slot or backend, family)

    try:
        config = build()
    except MmfastError as exc:  # a setting mmfast refuses or cannot compute exactly
        raise _Fallback("mmfast refused the settings", str(exc)) from exc
    return ImageProcessor(config, reload=lambda backend=None, call=None: build(backend, call))


def _computes_bfloat16(proc: ImageProcessor) -> bool:
    """Whether transformers' outputs for this config are bfloat16: Llama 4 rescaling and
    normalising (``Llama4ImageProcessor.rescale_and_normalize`` casts)."""
    from mmfast.models.llama4 import Llama4Config

    config = proc.config
    return isinstance(config, Llama4Config) and config.do_rescale and config.do_normalize


def wrap(obj: Any) -> Any:
    """Makes ``obj`` mmfast-backed in place and returns it: a transformers image or video
    processor, or a processor holding them as ``image_processor`` / ``video_processor``
    (each whose class mmfast matches). Their class becomes :func:`backed_class`'s; their
    settings and identity stay.

    Raises :class:`~mmfast.UnsupportedModelError` when none of them is of a class mmfast
    matches (:func:`supported_classes`).
    """
    parts = [obj]
    if not isinstance(obj, MmfastBacked) and _is_processor(obj):
        parts = [getattr(obj, name, None) for name in ("image_processor", "video_processor")]
    matched = False
    for part in parts:
        if isinstance(part, MmfastBacked):
            matched = True
        elif part is not None and (backed := backed_class(type(part))) is not None:
            part.__class__ = backed
            matched = True
    if not matched:
        raise UnsupportedModelError(
            f"wrap: expected a transformers image or video processor of a class mmfast "
            f"matches, or a processor holding one, got {_describe(obj)}; supported classes: "
            f"{', '.join(supported_classes())}"
        )
    return obj


def _is_processor(obj: Any) -> bool:
    processing_utils = sys.modules.get("transformers.processing_utils")
    return processing_utils is not None and isinstance(obj, processing_utils.ProcessorMixin)


def _describe(obj: Any) -> str:
    if _is_processor(obj):
        kind = type(getattr(obj, "image_processor", None)).__qualname__
        return f"a {type(obj).__qualname__} whose image processor is a {kind}"
    return f"a {type(obj).__qualname__}"


def from_pretrained(name_or_path: str | os.PathLike[str], **kwargs: Any) -> Any:
    """``transformers.AutoImageProcessor.from_pretrained(name_or_path, **kwargs)``, with the
    same arguments (``backend=``, ``revision=``, overrides, ...), made mmfast-backed by
    :func:`wrap`; with ``return_unused_kwargs=True`` the pair it returns.

    Raises :class:`~mmfast.UnsupportedModelError` when transformers loads a class mmfast does
    not match.
    """
    auto = importlib.import_module("transformers").AutoImageProcessor
    loaded = auto.from_pretrained(name_or_path, **kwargs)
    if isinstance(loaded, tuple):
        wrap(loaded[0])
        return loaded
    return wrap(loaded)


def install() -> None:
    """Makes every image and video processor transformers loads from now on mmfast-backed
    when its class is one mmfast matches; other classes load untouched. Idempotent.

    Two hooks: ``ImageProcessingMixin.from_dict`` and ``VideoProcessorMixin.from_dict``,
    through which every ``from_pretrained`` builds its instance (``AutoImageProcessor``,
    ``AutoVideoProcessor``, ``AutoProcessor`` and each processor class, which load theirs
    with them), are replaced by versions that build the backed subclass of the class they
    are called on; the video one as soon as transformers' video module is imported.
    Processors built by calling a class directly are not affected: :func:`wrap` them.
    """
    with _lock:
        _patch(_BASE_MODULE)
        video = sys.modules.get(_VIDEO_MODULE)
        if video is not None and hasattr(video, "VideoProcessorMixin"):
            _patch(_VIDEO_MODULE)
        else:
            _when_imported(_VIDEO_MODULE, lambda: _patch(_VIDEO_MODULE))


def _patch(module: str) -> None:
    """Replaces ``from_dict`` of ``module``'s mixin (importing it), once."""
    with _lock:
        if module in _original_from_dict:
            return
        mixin = _mixin(module)
        original = mixin.__dict__["from_dict"]

        # The dict passes as the caller passes it: by position, or by the name transformers
        # gives it (image_processor_dict, video_processor_dict).
        def from_dict(cls: type[Any], *args: Any, **kwargs: Any) -> Any:
            return original.__func__(backed_class(cls) or cls, *args, **kwargs)

        functools.update_wrapper(from_dict, original.__func__)
        mixin.from_dict = classmethod(from_dict)
        _original_from_dict[module] = original


def _mixin(module: str) -> Any:
    """The mixin whose ``from_dict`` :func:`install` replaces in ``module``."""
    name = "ImageProcessingMixin" if module == _BASE_MODULE else "VideoProcessorMixin"
    return getattr(importlib.import_module(module), name)


def _when_imported(module: str, then: Callable[[], None]) -> None:
    """Runs ``then`` right after ``module`` is first imported (once)."""
    with _lock:
        if not any(getattr(f, "module", None) == module for f in sys.meta_path):
            sys.meta_path.insert(0, _OnImport(module, then))


def uninstall() -> None:
    """Undoes :func:`install` (and a pending :func:`install_from_env`). Processors already
    loaded stay mmfast-backed."""
    with _lock:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _OnImport)]
        for module, original in _original_from_dict.items():
            _mixin(module).from_dict = original
        _original_from_dict.clear()


def install_from_env() -> bool:
    """:func:`install` when the environment variable ``MMFAST_HF_INSTALL`` says so (see
    :data:`ENV_VAR`); returns whether it did (or will). If transformers' image-processing
    module is not imported yet, the install runs right after its first import, so a process
    that never uses transformers never imports it.

    Another value is warned about once (the ``mmfast.hf`` logger) and read as off: the
    ``.pth`` hook runs this at every interpreter start, where an exception would print a
    traceback and stop nothing.
    """
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value in _FALSE:
        return False
    if value not in _TRUE:
        _warn_once(
            f"{ENV_VAR}: expected 1, true, yes or on (install) or 0, false, no or off (do not), "
            f"got {os.environ[ENV_VAR]!r}; not installing"
        )
        return False
    if _BASE_MODULE not in sys.modules:
        _when_imported(_BASE_MODULE, install)
        if _BASE_MODULE not in sys.modules:
            return True
    # Imported already, or by another thread while the finder went in (install() is idempotent).
    install()
    return True


class _OnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when ``module`` is first imported, it lets the other finders find
    it and makes the loader run ``then`` once the module has executed; then it leaves
    ``sys.meta_path``."""

    def __init__(self, module: str, then: Callable[[], None]) -> None:
        self.module = module
        self.then = then

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.module:
            return None
        with _lock:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            spec = None if find_spec is None else find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is not None:
            exec_module = loader.exec_module
            then = self.then

            def exec_then(module: ModuleType) -> None:
                exec_module(module)
                then()

            loader.exec_module = exec_then
        return cast("importlib.machinery.ModuleSpec", spec)
