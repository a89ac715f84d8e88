"""transformers drop-in: transformers' own image processors, with mmfast computing the pixels.

For each transformers image-processor class mmfast matches bit for bit (``XImageProcessorPil``
and, where mmfast matches it too, the torchvision ``XImageProcessor``), :func:`backed_class`
makes a subclass, once. It keeps everything of the original that serving code reads
(``merge_size``, ``patch_size``, ``get_number_of_image_patches``, ``to_dict``,
``save_pretrained``, the class name and every ``isinstance`` answer) and replaces one step:
after transformers' ``preprocess`` has validated the call's keyword arguments and merged them
with the instance's settings, an :class:`mmfast.ImageProcessor` built from those settings
(``backend="pil"`` for a PIL class, ``"torchvision"`` for a torchvision one; cached per
settings) computes the outputs, returned as transformers' ``BatchFeature`` with
``return_tensors`` applied. Anything mmfast cannot reproduce exactly runs transformers' own code
instead, so an output never differs from transformers':

- ``return_tensors`` other than ``"np"`` or ``"pt"`` (``None`` returns per-family lists);
- inputs other than PIL images and uint8 (H, W, 3) arrays (torch tensors, float or (H, W)
  arrays, URLs and paths, channels-first or ambiguous arrays such as (3, W, 3), reversed
  views);
- ``input_data_format``, ``device``, a ``data_format`` other than channels-first, extra
  positional arguments or image-like inputs (segmentation maps, ...);
- a setting mmfast does not read for the class, or one that is None where transformers and
  mmfast would not both read it as off (``do_convert_rgb=None`` is off for both, as are the
  class defaults ``do_pad``, ``do_center_crop`` or ``do_pan_and_scan`` None, with their sizes);
- any :class:`~mmfast.MmfastError` from building or running the processor (an aspect ratio
  over 200, a PIL mode that is not RGB with ``do_convert_rgb`` off, ...): transformers then
  runs and raises or returns what it would have.

The ``mmfast.hf`` logger says at DEBUG level why a call ran on transformers.

Ways in: :func:`wrap` an image processor (or a processor holding one) you already have;
:func:`from_pretrained` as ``AutoImageProcessor.from_pretrained``; :func:`install`, after
which every supported image processor transformers loads (``AutoImageProcessor``,
``AutoProcessor``, a processor class's ``from_pretrained``, an image-processor class's
``from_pretrained`` or ``from_dict``) is mmfast-backed; and ``MMFAST_HF_INSTALL=1``
(:func:`install_from_env`). Qwen's video processors (``Qwen2VLVideoProcessor``,
``Qwen3VLVideoProcessor``) stay transformers'. transformers, numpy and Pillow are imported
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

    from mmfast.models.base import ModelConfig
    from mmfast.models.registry import Family
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
        "image_seq_length": None,
        "pad_size": None,
        "transform": None,  # IdeficsImageProcessor's replacement pipeline, unset
        "crop_size": "do_center_crop",
        "pan_and_scan_min_crop_size": "do_pan_and_scan",
        "pan_and_scan_max_num_crops": "do_pan_and_scan",
        "pan_and_scan_min_ratio_to_activate": "do_pan_and_scan",
    }
)
# The module whose ImageProcessingMixin install() patches; install_from_env() waits for it.
_BASE_MODULE = "transformers.image_processing_base"

_lock = threading.RLock()
_classes: dict[type, type] = {}
# Calls served, by class and by who computed them (see stats()).
_calls: Counter[tuple[str, str | None]] = Counter()
# The from_dict classmethod install() replaced, while installed.
_original_from_dict: Any = None


class _Fallback(Exception):
    """Why a call runs on transformers' own code: ``kind``, a short reason counted by
    :func:`stats`, and the message logged at DEBUG."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@functools.cache
def _supported() -> dict[str, tuple[Family, str, str]]:
    """transformers class name -> (family, image_processor_type, backend), for every class
    transformers has and mmfast matches: ``<type>Pil`` for the PIL backend, ``<type>`` for
    torchvision."""
    from mmfast.models import registry

    auto = importlib.import_module("transformers.models.auto.image_processing_auto")
    names = {
        name for classes in auto.IMAGE_PROCESSOR_MAPPING_NAMES.values() for name in classes.values()
    }
    table: dict[str, tuple[Family, str, str]] = {}
    for family in registry.FAMILIES.values():
        for name in family.processor_types:
            for backend, class_name in (("pil", name + "Pil"), ("torchvision", name)):
                if backend in family.backends and class_name in names:
                    table[class_name] = (family, name, backend)
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


def supported_classes() -> list[str]:
    """Names of the transformers image-processor classes mmfast can back."""
    return sorted(_supported())


class MmfastBacked:
    """Base of the classes :func:`backed_class` makes: ``isinstance(x, MmfastBacked)`` tells
    whether an image processor runs on mmfast. Not meant to be subclassed directly."""

    # The transformers class this one extends.
    _mmfast_hf_class: ClassVar[type]

    def _preprocess_image_like_inputs(self, images: Any, *args: Any, **kwargs: Any) -> Any:
        """transformers' step after its argument handling: mmfast's outputs when they match
        transformers' exactly, else transformers' own code."""
        name = type(self).__name__
        try:
            out = _run(self, images, args, kwargs)
        except _Fallback as reason:
            _count(name, reason.kind)
            logger.debug("%s: running transformers' code: %s", name, reason)
        except Exception as exc:  # a bug in mmfast: transformers' result, not an error
            _count(name, "an error in mmfast")
            logger.warning(
                "%s: mmfast failed where transformers runs (please report it); running "
                "transformers' code",
                name,
                exc_info=exc,
            )
        else:
            _count(name, None)
            return out
        return cast("Any", super())._preprocess_image_like_inputs(images, *args, **kwargs)

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        """Pickled by the transformers class it extends (the backed class has that class's
        module and name, so pickle could not find it by them)."""
        return _unpickle, (self._mmfast_hf_class,), self.__dict__


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
        or hf_class.__name__ not in _supported()
    ):
        return None
    with _lock:
        backed = _classes.get(hf_class)
        if backed is None:
            name = hf_class.__name__
            backed = type(
                name,
                (MmfastBacked, hf_class),
                {
                    "__module__": hf_class.__module__,
                    "__qualname__": hf_class.__qualname__,
                    "__doc__": f"transformers' {name}, with its outputs computed by mmfast.",
                    "_mmfast_hf_class": hf_class,
                },
            )
            _classes[hf_class] = backed
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
    return_tensors = kwargs.get("return_tensors")
    if return_tensors not in (None, "np", "pt"):
        raise _Fallback("return_tensors", f"return_tensors={return_tensors!r}")
    data_format = kwargs.get("data_format")
    if data_format is not None and data_format != "channels_first":
        raise _Fallback("data_format", f"data_format={data_format!r}")
    device = kwargs.get("device")
    on_cpu = device is None or str(device) == "cpu"
    if not on_cpu and cuda_policy() == "transformers":
        raise _Fallback("device", f"device={device!r} (see {CUDA_ENV_VAR})")
    inputs = _inputs(processor, images, kwargs, counts)
    settings = _settings(hf_class, family, kwargs, processor)
    proc = _processor(hf_class, settings)
    # transformers' Llama 4 class computes in bfloat16, which numpy cannot hold.
    bfloat16 = _computes_bfloat16(proc)
    if bfloat16 and return_tensors == "np":
        raise _Fallback("bfloat16 as numpy", "bfloat16 outputs with return_tensors='np'")
    try:
        out = proc(
            inputs, dtype="bfloat16" if bfloat16 else None, input_data_format="channels_last"
        )
    except MmfastError as exc:
        raise _Fallback("mmfast refused the call", str(exc)) from exc
    if counts is not None and out["batch_num_images"].tolist() != list(counts):
        raise _Fallback("image counts", f"batch_num_images {list(counts)}")
    # A torchvision class returns tensors even with return_tensors=None.
    tensors = backend == "torchvision" if return_tensors is None else return_tensors == "pt"
    data = unbatched(proc.config, out) if return_tensors is None else dict(out)
    if tensors:
        data = _nested_map(_as_tensor, data)
    # Keys the class sets after its own conversion stay torch tensors (Step-3.7's local patches).
    late = proc.config.torch_outputs & data.keys()
    data.update({key: _as_tensor(data[key]) for key in late})
    # transformers converts the arrays and leaves lists (Idefics3's rows and cols) as lists.
    base = importlib.import_module(_BASE_MODULE)
    arrays = {k: v for k, v in data.items() if not isinstance(v, list) and k not in late}
    feature = base.BatchFeature(data=arrays, tensor_type=return_tensors)
    feature = base.BatchFeature({k: feature[k] if k in arrays else data[k] for k in data})
    return feature if on_cpu else feature.to(device)


def unbatched(config: ModelConfig, outputs: BatchFeature) -> dict[str, Any]:
    """mmfast's outputs as transformers returns them with ``return_tensors=None`` (see
    :attr:`~mmfast.models.base.ModelConfig.unbatched`)."""
    data: dict[str, Any] = dict(outputs)
    for key, kind in config.unbatched.items():
        value = data[key]
        if kind == "rows":
            data[key] = list(value)
        elif kind == "images":
            starts = [0, *itertools.accumulate(outputs.image_rows)]
            data[key] = [value[a:b] for a, b in itertools.pairwise(starts)]
        elif kind == "ints":
            data[key] = [int(v) for v in value]
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
    structure = images if isinstance(images, (list, tuple)) else [images]
    if not structure:
        raise _Fallback("no images", "no images")
    flat = [i for item in structure for i in (item if isinstance(item, (list, tuple)) else [item])]
    if any(isinstance(image, (str, os.PathLike, bytes)) for image in flat):
        raise _Fallback("paths or URLs", "paths, URLs or bytes (transformers loads them)")
    if kwargs.get("input_data_format") is None and all(map(_plain_image, flat)):
        prepared = images
    else:
        call = {**kwargs, "device": None}
        try:
            prepared = processor._prepare_image_like_inputs(images, **call)  # type: ignore[attr-defined]
        except Exception as exc:  # transformers refuses the input: let it say so
            raise _Fallback("input transformers refuses", repr(exc)) from exc
        prepared = _nested_map(_channels_last, prepared)
    if counts is not None:  # LLaVA-OneVision: the flat images of each sample
        flat_prepared = prepared if isinstance(prepared, list) else [prepared]
        starts = [0, *itertools.accumulate(counts)]
        prepared = [flat_prepared[a:b] for a, b in itertools.pairwise(starts)]
    return prepared


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
    """``function`` on every leaf of nested lists, tuples and dicts."""
    if isinstance(value, list):
        return [_nested_map(function, item) for item in value]
    if isinstance(value, tuple):
        return tuple(_nested_map(function, item) for item in value)
    if isinstance(value, dict):
        return {key: _nested_map(function, item) for key, item in value.items()}
    return function(value)


def _channels_last(image: Any) -> np.ndarray:
    """A prepared (channels-first) image as an (H, W, 3) uint8 view; :class:`_Fallback`
    for what mmfast does not take (other dtypes, other channel counts)."""
    import numpy as np

    array = image if isinstance(image, np.ndarray) else image.numpy()
    if array.dtype != np.uint8 or array.ndim != 3 or array.shape[0] != 3:
        raise _Fallback(
            "not uint8 RGB", f"a prepared image of dtype {array.dtype} and shape {array.shape}"
        )
    return np.moveaxis(array, 0, -1)


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
        if name not in known or (name == "pad_size" and value is not None):
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
    config = family.build(
        Source(origin, None, None, values, {}),
        processor_type,
        Fields(origin, values),
        Fields(f"{origin} (processor)", {}),
    )
    return ImageProcessor(with_backend(config, backend, family))


def _computes_bfloat16(proc: ImageProcessor) -> bool:
    """Whether transformers' outputs for this config are bfloat16: Llama 4 rescaling and
    normalising (``Llama4ImageProcessor.rescale_and_normalize`` casts)."""
    from mmfast.models.llama4 import Llama4Config

    config = proc.config
    return isinstance(config, Llama4Config) and config.do_rescale and config.do_normalize


def wrap(obj: Any) -> Any:
    """Makes ``obj``, a transformers image processor or a processor holding one as
    ``image_processor``, mmfast-backed in place (its class becomes :func:`backed_class`'s; its
    settings and identity stay) and returns it.

    Raises :class:`~mmfast.UnsupportedModelError` when the image processor's class is not one
    mmfast matches (:func:`supported_classes`).
    """
    image_processor = obj
    if not isinstance(obj, MmfastBacked) and _is_processor(obj):
        image_processor = obj.image_processor
    if isinstance(image_processor, MmfastBacked):
        return obj
    backed = backed_class(type(image_processor))
    if backed is None:
        raise UnsupportedModelError(
            f"wrap: expected a transformers image processor of a class mmfast matches, or a "
            f"processor holding one, got {_describe(obj)}; supported classes: "
            f"{', '.join(supported_classes())}"
        )
    image_processor.__class__ = backed
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
    """Makes every image processor transformers loads from now on mmfast-backed when its
    class is one mmfast matches; other classes load untouched. Idempotent.

    One hook: ``ImageProcessingMixin.from_dict``, through which every ``from_pretrained``
    builds its instance (``AutoImageProcessor``, ``AutoProcessor`` and each processor class,
    which load their image processor with ``AutoImageProcessor``), is replaced by a version
    that builds the backed subclass of the class it is called on. Image processors built by
    calling a class directly are not affected: :func:`wrap` them.
    """
    global _original_from_dict
    mixin = importlib.import_module(_BASE_MODULE).ImageProcessingMixin
    with _lock:
        if _original_from_dict is not None:
            return
        original = mixin.__dict__["from_dict"]

        def from_dict(
            cls: type[Any], /, image_processor_dict: dict[str, Any], **kwargs: Any
        ) -> Any:
            return original.__func__(backed_class(cls) or cls, image_processor_dict, **kwargs)

        functools.update_wrapper(from_dict, original.__func__)
        mixin.from_dict = classmethod(from_dict)
        _original_from_dict = original


def uninstall() -> None:
    """Undoes :func:`install` (and a pending :func:`install_from_env`). Image processors
    already loaded stay mmfast-backed."""
    global _original_from_dict
    with _lock:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _InstallOnImport)]
        if _original_from_dict is None:
            return
        sys.modules[_BASE_MODULE].ImageProcessingMixin.from_dict = _original_from_dict
        _original_from_dict = None


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
        with _lock:
            if not any(isinstance(finder, _InstallOnImport) for finder in sys.meta_path):
                sys.meta_path.insert(0, _InstallOnImport())
        if _BASE_MODULE not in sys.modules:
            return True
    # Imported already, or by another thread while the finder went in (install() is idempotent).
    install()
    return True


class _InstallOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when transformers' image-processing module is first imported, it
    lets the other finders find it and makes the loader run :func:`install` once the module
    has executed; then it leaves ``sys.meta_path``."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _BASE_MODULE:
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

            def exec_then_install(module: ModuleType) -> None:
                exec_module(module)
                install()

            loader.exec_module = exec_then_install
        return cast("importlib.machinery.ModuleSpec", spec)
