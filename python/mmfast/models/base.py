"""What every model family shares: resampling codes, constants, the plan and config types.

An :class:`ImagePlan` is everything the pixel engine does to one image, in plain numbers; a
:class:`ModelConfig` (one subclass per family) turns an image size into a plan, the way the HF
processor it mirrors would.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Final, TypeAlias

import numpy as np
from numpy.typing import NDArray

from mmfast import _native, reference
from mmfast.errors import MmfastError
from mmfast.models.geometry import CropBox

__all__ = [
    "BICUBIC",
    "BILINEAR",
    "BOX",
    "DEFAULT_MAX_PIXELS",
    "DEFAULT_RESCALE",
    "HALF",
    "HAMMING",
    "IMAGENET_STANDARD_MEAN",
    "IMAGENET_STANDARD_STD",
    "LANCZOS",
    "NEAREST",
    "OPENAI_CLIP_MEAN",
    "OPENAI_CLIP_STD",
    "RESAMPLE_CODES",
    "RGB",
    "TORCH_RESAMPLE",
    "Canvas",
    "HwcPatches",
    "ImagePlan",
    "ModelConfig",
    "Normalization",
    "Output",
    "Pad",
    "PatchGrid",
    "Patchify",
    "Resize",
    "Resized",
    "Strip",
    "TileGrid",
    "VideoConfig",
    "VideoPlan",
    "View",
    "batch_layout_shape",
    "bfloat16_bits",
    "bfloat16_values",
    "check_image_size",
    "float32_tables",
    "frozen",
    "fused_tables",
    "fused_values",
    "identity_table",
    "plan_constants",
    "resizer",
    "sample_rows",
    "table_key",
]

RGB: TypeAlias = tuple[float, float, float]

# PIL.Image.Resampling codes, as stored in the "resample" field of preprocessor configs.
NEAREST: Final = 0
LANCZOS: Final = 1
BILINEAR: Final = 2
BICUBIC: Final = 3
BOX: Final = 4
HAMMING: Final = 5
RESAMPLE_CODES: Final = frozenset({NEAREST, LANCZOS, BILINEAR, BICUBIC, BOX, HAMMING})
# The codes transformers' torchvision backend can resize with: it maps BOX and HAMMING to
# interpolation modes that torch's interpolate rejects.
TORCH_RESAMPLE: Final = "0, 1, 2 or 3 (torchvision has no box or hamming filter)"

# transformers.image_utils.OPENAI_CLIP_MEAN / OPENAI_CLIP_STD: the class defaults of the Qwen2-VL
# and CLIP processors.
OPENAI_CLIP_MEAN: Final[RGB] = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD: Final[RGB] = (0.26862954, 0.26130258, 0.27577711)
# transformers.image_utils.IMAGENET_STANDARD_MEAN / _STD.
IMAGENET_STANDARD_MEAN: Final[RGB] = (0.5, 0.5, 0.5)
IMAGENET_STANDARD_STD: Final[RGB] = (0.5, 0.5, 0.5)
HALF: Final[RGB] = (0.5, 0.5, 0.5)
# Twice Pillow's Image.MAX_IMAGE_PIXELS: where Pillow itself refuses to open an image. Also the
# largest intermediate image a plan may ask the core for.
DEFAULT_MAX_PIXELS: Final = 178_956_970
# BaseImageProcessor.rescale_factor; the configs store it as 0.00392156862745098, the same double.
DEFAULT_RESCALE: Final = 1 / 255


@dataclass(frozen=True)
class PatchGrid:
    """Qwen-VL patchify parameters (``Qwen2VLImageProcessorPil.patchify``).

    A still image is one temporal patch (``grid_t == 1``): HF repeats the frame
    ``temporal_patch_size`` times inside each patch row.
    """

    patch_size: int
    temporal_patch_size: int
    merge_size: int
    grid_t: int
    grid_h: int
    grid_w: int

    @property
    def num_patches(self) -> int:
        """Rows of ``pixel_values`` for this image."""
        return self.grid_t * self.grid_h * self.grid_w


@dataclass(frozen=True)
class TileGrid:
    """Llama 4 tiling (``Llama4ImageProcessor._preprocess`` and ``Llama4Processor``).

    The padded canvas is cut into ``tiles_h`` x ``tiles_w`` tiles in row-major order. With more
    than one tile, a global tile follows: the *original* image resized straight to
    ``tile_size`` (distorting, same filter, no padding). ``tokens_per_tile`` is the number of
    ``<|patch|>`` tokens each tile (and the global view) stands for in the prompt.
    """

    tiles_h: int
    tiles_w: int
    tile_size: tuple[int, int]
    global_tile: bool
    tokens_per_tile: int

    @property
    def num_tiles(self) -> int:
        """Tiles in ``pixel_values`` for this image, global tile included."""
        return self.tiles_h * self.tiles_w + int(self.global_tile)


@dataclass(frozen=True)
class Resize:
    """A resize to ``size`` (height, width) with PIL filter code ``resample``: Pillow's
    ``Image.resize`` (``kernel="pillow"``), or torchvision's ``resize`` of a uint8 tensor with
    the interpolation transformers maps that code to (``kernel="torch"``: antialiased, as
    HF resizes; ``"torch-noaa"``: without antialiasing; ``"torch-float"``: of the image as
    float32 without antialiasing, rounded half to even and clamped back to uint8, as Molmo2
    resizes). An unchanged size leaves the pixels as they are."""

    size: tuple[int, int]
    resample: int
    kernel: str = "pillow"


def resizer(backend: str, size: tuple[int, int], resample: int) -> Resize:
    """The resize transformers' ``backend`` class runs: Pillow's, or torchvision's."""
    return Resize(size, resample, "pillow" if backend == "pil" else "torch")


def area_mask(shape: Sequence[int], areas: Sequence[tuple[int, int]]) -> NDArray[np.int64]:
    """An int64 attention mask of ``shape`` (..., height, width): each frame of the leading
    axes (C order) 1 on its ``(h, w)`` of ``areas`` (rows ``:h``, columns ``:w``), 0
    elsewhere, each value written once by the core with the GIL released (an ``np.zeros``
    mask filled after writes the area twice; numpy's fill of an ``np.empty`` one reads each
    line in before writing it: 0.6 ms of an Idefics2 call's 2.0 ms at 640x480)."""
    return _native.area_mask(tuple(shape), list(areas))


@dataclass(frozen=True)
class Pad:
    """The pixels pasted at (``top``, ``left``) of a ``size`` canvas filled with the uint8 RGB
    colour ``fill``, before normalising (so the fill is normalised like the image)."""

    size: tuple[int, int]
    top: int = 0
    left: int = 0
    fill: tuple[int, int, int] = (0, 0, 0)


@dataclass(frozen=True)
class Patchify:
    """Patch rows as Qwen-VL's ``patchify`` lays them out: ``patch_size`` squares ordered by
    ``merge_size`` group then within it (both row-major), each row (channel, time, y, x) with
    the still frame repeated ``temporal_patch_size`` times. ``merge_size=1`` is plain raster
    order (PaddleOCR-VL, Kimi); ``time_major`` rows are (time, channel, y, x) (Muse
    Glimmer)."""

    patch_size: int
    temporal_patch_size: int
    merge_size: int
    time_major: bool = False


@dataclass(frozen=True)
class HwcPatches:
    """Channel-last patch rows of ``windows`` of the view's pixels (each inside them, sides
    multiples of ``patch_size``), window after window: each window cut into ``patch_size``
    squares in raster order, a row holding its square's pixels row by row with the channels
    interleaved, (y, x, c). SigLIP 2's and Gemma 4's ``convert_image_to_patches``."""

    patch_size: int
    windows: tuple[CropBox, ...]


@dataclass(frozen=True)
class Canvas:
    """The view's CHW planes at the top-left of a (3, height, width) canvas of ``size``,
    whose other values stay zero: a pad after normalising (Pixtral, Idefics2)."""

    size: tuple[int, int]


@dataclass(frozen=True)
class Strip:
    """MiniCPM-V's patch strip: ``3 * patch_size`` rows ``stride`` values apart (the whole
    batch's strip length), channel then line of a patch; the view's ``patch_size`` squares,
    in raster order, fill the next ``height // patch_size * width`` values of each row."""

    patch_size: int
    stride: int


@dataclass(frozen=True)
class Resized:
    """The view's pixels normalised, then resized to ``size`` (height, width) by torch's
    float32 kernel for PIL filter code ``resample`` without antialiasing, as one CHW tensor:
    torchvision's ``resize`` of the normalised float image (Phi-4-multimodal's global view).
    Its values are computed, not looked up: pixel_values is float32 (bfloat16 and float16
    are its values rounded afterwards)."""

    size: tuple[int, int]
    resample: int


Output = Patchify | tuple[CropBox, ...] | HwcPatches | Canvas | Strip | Resized


@dataclass(frozen=True)
class View:
    """One piece of pixel work on an image, in the order the engine runs them.

    The pixels of the input image (``source=None``) or of an earlier view of the same image
    (``source=k``: view k's pixels after its crop, resize and pad) are cropped to ``crop``
    (inside them), resized, padded, then normalised into the image's output slot, after the
    previous views' values: as patch rows (:class:`Patchify`), as one CHW tensor per window
    (a :class:`~mmfast.models.geometry.CropBox` may reach past the pixels; outside them is the
    normalised value of black), as channel-last patch rows (:class:`HwcPatches`), on a zero
    canvas (:class:`Canvas`), along a strip (:class:`Strip`, whose rows other images
    share) or resized in float32 after normalising (:class:`Resized`). ``out=None``: the view
    only feeds later views. ``table`` picks the config's normalisation table for the view's
    values (families with one table use 0); ``output`` the pixel output it writes
    (:attr:`ModelConfig.pixel_keys`; 0 is ``pixel_values``), after the image's previous
    values in that output: how one image writes into several of HF's pixel arrays in one
    native call (see :meth:`ModelConfig.pixel_shapes`).
    """

    resize: Resize | None = None
    out: Output | None = None
    source: int | None = None
    crop: CropBox | None = None
    pad: Pad | None = None
    table: int = 0
    output: int = 0

    @property
    def windows(self) -> tuple[CropBox, ...]:
        """The windows this view writes (none for patch rows or no output)."""
        return self.out if isinstance(self.out, tuple) else ()


@dataclass(frozen=True)
class ImagePlan:
    """Everything the pixel engine does to one image, in HF's order.

    1. Convert to RGB if ``do_convert_rgb``.
    2. If ``do_resize``, resize to ``resize_size`` (height, width) with PIL filter ``resample``;
       otherwise ``resize_size`` is the input size.
    3. CLIP: cut ``crop`` (zero outside the image). Llama 4: paste at the top-left of a zero
       ``canvas_size`` canvas.
    4. ``x * rescale_factor`` then ``(x - image_mean) / image_std`` per channel, in
       ``compute_dtype``. A disabled step is expressed as factor 1.0 / mean 0 / std 1, and
       its flag is False so the engine may skip it.
    5. Qwen: patchify per ``patches``. Llama 4: split per ``tiles``.

    ``output_shapes`` gives the per-image shape of each output key (HF concatenates Qwen
    patches and stacks the rest along a leading batch axis). ``num_image_tokens`` is the number
    of tokens the model's processor puts in the prompt for this image. ``views`` is the same
    work as the engine runs it: each view's values follow the previous one's in this image's
    ``pixel_values``.
    """

    height: int
    width: int
    do_convert_rgb: bool
    do_resize: bool
    resize_size: tuple[int, int]
    resample: int
    crop: CropBox | None
    canvas_size: tuple[int, int] | None
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB
    compute_dtype: str
    patches: PatchGrid | None
    tiles: TileGrid | None
    output_shapes: Mapping[str, tuple[int, ...]]
    num_image_tokens: int
    views: tuple[View, ...]
    backend: str = field(default="pil", kw_only=True)


def batch_layout_shape(
    shapes: Sequence[tuple[int, ...]], layout: str, sample_sizes: Sequence[int]
) -> tuple[tuple[int, ...], list[int]]:
    """A batch's output shape from each item's output ``shapes``, and each item's first value
    in it.

    ``layout``: "concat" joins the items' outputs along their first axis, "stack" adds a batch
    axis, "pad_images" / "pad_samples" stack each item's (or each sample's, of
    ``sample_sizes`` items) rows, zero-padded to the longest, as HF pads across a batch.
    """
    stack = layout == "stack"
    if any(shape[not stack :] != shapes[0][not stack :] for shape in shapes):
        raise MmfastError(
            "images: this config gives images of different output sizes, which cannot be "
            "stacked; pass them one at a time"
        )
    sizes = [math.prod(shape) for shape in shapes]
    if stack:
        return (len(shapes), *shapes[0]), [0, *itertools.accumulate(sizes)][:-1]
    rest = shapes[0][1:]
    if layout == "concat":
        rows = sum(shape[0] for shape in shapes)
        return (rows, *rest), [0, *itertools.accumulate(sizes)][:-1]
    groups = [1] * len(shapes) if layout == "pad_images" else list(sample_sizes)
    starts = [0, *itertools.accumulate(groups)]
    group_rows = [sum(s[0] for s in shapes[a:b]) for a, b in itertools.pairwise(starts)]
    width = max(group_rows)
    row = math.prod(rest)
    offsets: list[int] = []
    for g, (a, b) in enumerate(itertools.pairwise(starts)):
        offsets += [g * width * row + o for o in itertools.accumulate([0, *sizes[a:b]])][:-1]
    return (len(groups), width, *rest), offsets


def sample_rows(plans: Sequence[ImagePlan], sample_sizes: Sequence[int]) -> list[int]:
    """Each sample's entries along ``pixel_values``' first axis (its plans' summed), for the
    samples of ``sample_sizes`` plans each, in order."""
    starts = itertools.pairwise([0, *itertools.accumulate(sample_sizes)])
    return [sum(p.output_shapes["pixel_values"][0] for p in plans[a:b]) for a, b in starts]


def check_image_size(height: int, width: int) -> None:
    """A plan's input size: two positive ints, else :class:`MmfastError`."""
    for name, side in (("height", height), ("width", width)):
        if not isinstance(side, int) or isinstance(side, bool) or side <= 0:
            raise MmfastError(f"image {name}: expected a positive int, got {side!r}")


@dataclass(frozen=True)
class Normalization:
    """HF's rescale/normalise settings, as a config reads them."""

    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB

    def fields(self) -> dict[str, Any]:
        """The five settings as the config fields of the same names."""
        return {
            "do_rescale": self.do_rescale,
            "rescale_factor": self.rescale_factor,
            "do_normalize": self.do_normalize,
            "image_mean": self.image_mean,
            "image_std": self.image_std,
        }

    def effective(self) -> tuple[float, RGB, RGB]:
        """(factor, mean, std) with disabled steps turned into identities."""
        factor = self.rescale_factor if self.do_rescale else 1.0
        if self.do_normalize:
            return factor, self.image_mean, self.image_std
        return factor, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)


def bfloat16_bits(values: NDArray[np.float32]) -> NDArray[np.uint16]:
    """float32 values rounded to bfloat16 as torch rounds them (``c10::BFloat16``): to nearest,
    ties to even, any NaN to 0x7FC0. The bit patterns, as uint16 (numpy has no bfloat16 of
    its own, and ml_dtypes costs up to a second to import)."""
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32)
    rounded = ((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), np.uint16(0x7FC0), rounded)


def bfloat16_values(bits: NDArray[np.uint16]) -> NDArray[np.float32]:
    """bfloat16 bit patterns widened to float32, exactly (a 16-bit shift)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def float32_tables(plan: ImagePlan) -> NDArray[np.float32]:
    """(3, 256): the normalised float32 value of every uint8 in each channel.

    Computed by :mod:`mmfast.reference`, i.e. transformers' own rescale-then-normalise
    arithmetic (``PilBackend.rescale`` and ``normalize``), so a table lookup is bit-exact by
    construction. Read-only, and made once per (mean, std, rescale factor): building it took
    30-50 us of a 64x48 image's 0.4 ms call.
    """
    return _float32_tables(*table_key(plan))


def table_key(plan: ImagePlan) -> tuple[tuple[float, ...], tuple[float, ...], float]:
    """``(mean, std, rescale factor)`` of ``plan`` as plain floats: what a cached table of
    normalised values is made once per."""
    return (
        tuple(map(float, plan.image_mean)),
        tuple(map(float, plan.image_std)),
        float(plan.rescale_factor),
    )


@functools.lru_cache(maxsize=64)
def _float32_tables(
    mean: tuple[float, ...], std: tuple[float, ...], rescale_factor: float
) -> NDArray[np.float32]:
    ramp = np.repeat(np.arange(256, dtype=np.uint8)[None, :, None], 3, axis=2)
    planes = reference.deinterleave_rgb_to_planes(ramp, mean, std, rescale_factor)
    return frozen(np.ascontiguousarray(planes.reshape(3, 256)))


def frozen(table: NDArray[Any]) -> NDArray[Any]:
    """``table`` made read-only, as every cached table is shared by all calls."""
    table.setflags(write=False)
    return table


@functools.cache
def identity_table() -> NDArray[np.uint8]:
    """(3, 256) uint8: every value to itself, where HF hands back the resized pixels
    (read-only, made once)."""
    return frozen(np.repeat(np.arange(256, dtype=np.uint8)[None, :], 3, axis=0))


def plan_constants(config: Any) -> dict[str, Any]:
    """The rescale/normalise fields of an :class:`ImagePlan` from a config's settings
    (``do_rescale``, ``rescale_factor``, ``do_normalize``, ``image_mean``, ``image_std``),
    with disabled steps turned into identities, and its ``backend``."""
    norm = Normalization(
        config.do_rescale,
        config.rescale_factor,
        config.do_normalize,
        config.image_mean,
        config.image_std,
    )
    factor, mean, std = norm.effective()
    return {
        "backend": config.backend,
        "do_rescale": norm.do_rescale,
        "rescale_factor": factor,
        "do_normalize": norm.do_normalize,
        "image_mean": mean,
        "image_std": std,
    }


def fused_tables(plan: Any) -> NDArray[Any]:
    """(3, 256): transformers' torchvision-backend arithmetic for every uint8 value.

    ``rescale_and_normalize`` on a uint8 tensor: with both steps, mean and std are scaled by
    ``1 / rescale_factor`` as float32 tensors and the image normalised in float32,
    ``(float32(x) - mean') / std'``; with one step, ``float32(x) * float32(rescale_factor)``
    or ``(float32(x) - mean) / std``; with neither, the uint8 value itself. ``plan`` is an
    :class:`ImagePlan` or a video config: anything with those five settings. Read-only, made
    once per setting (as :func:`float32_tables`).
    """
    if not (plan.do_rescale or plan.do_normalize):
        return identity_table()
    return _fused_tables(
        bool(plan.do_rescale),
        bool(plan.do_normalize),
        tuple(map(float, plan.image_mean)),
        tuple(map(float, plan.image_std)),
        float(plan.rescale_factor),
    )


@functools.lru_cache(maxsize=64)
def _fused_tables(
    do_rescale: bool,
    do_normalize: bool,
    image_mean: tuple[float, ...],
    image_std: tuple[float, ...],
    rescale_factor: float,
) -> NDArray[np.float32]:
    x = np.arange(256, dtype=np.float32)
    return frozen(_fused(x, do_rescale, do_normalize, image_mean, image_std, rescale_factor))


def fused_values(plan: Any, x: NDArray[np.float32]) -> NDArray[np.float32]:
    """(3, len(x)): :func:`fused_tables`' arithmetic on float32 values ``x`` of a float image
    (transformers' torchvision backend normalising a float tensor: Inkling's, padded with
    -1); with both steps off, the values themselves."""
    return _fused(
        x,
        bool(plan.do_rescale),
        bool(plan.do_normalize),
        tuple(map(float, plan.image_mean)),
        tuple(map(float, plan.image_std)),
        float(plan.rescale_factor),
    )


def _fused(
    x: NDArray[np.float32],
    do_rescale: bool,
    do_normalize: bool,
    image_mean: tuple[float, ...],
    image_std: tuple[float, ...],
    rescale_factor: float,
) -> NDArray[np.float32]:
    if not (do_rescale or do_normalize):
        return np.ascontiguousarray(np.stack([x] * 3), dtype=np.float32)
    mean = np.asarray(image_mean, np.float32)
    std = np.asarray(image_std, np.float32)
    if do_rescale and do_normalize:
        # A rescale factor of 0 gives NaN here, which the processor refuses.
        scale = np.float32(1.0 / rescale_factor if rescale_factor else math.inf)
        rows = [(x - m * scale) / (s * scale) for m, s in zip(mean, std, strict=True)]
    elif do_normalize:
        rows = [(x - m) / s for m, s in zip(mean, std, strict=True)]
    else:
        rows = [x * np.float32(rescale_factor)] * 3
    return np.ascontiguousarray(np.stack(rows), dtype=np.float32)


class ModelConfig:
    """A family's settings, read from a checkpoint config; subclasses are frozen dataclasses.

    :meth:`plan` mirrors the HF processor's ``_preprocess`` for one image size; the other
    methods say how a batch of plans becomes HF's outputs.
    """

    __slots__ = ()

    # Every family's config has these fields.
    model_id: str | None
    image_processor_type: str
    backend: str

    # How the images' pixel_values join: "concat" along the first axis of each image's
    # output shape (patch rows, tiles, crops), "stack" along a new first axis, or stacked per
    # image ("pad_images") or per sample ("pad_samples"), zero-padded to the longest; a family
    # that shapes its batch itself (finish_batch, batch_shape) names its own ("strip").
    batch_layout: ClassVar[str] = "concat"
    # Whether the HF processor reads a flat list of images as one sample (Idefics3, SmolVLM)
    # rather than one sample per image.
    flat_is_one_sample: ClassVar[bool] = False
    # Outputs whose first axis joins each image's own rows, with values that depend on the
    # images before it in the batch (Molmo2's image_token_pooling, offset by their patches):
    # one image's entry is what batch_outputs gives for its plan alone.
    batch_dependent: ClassVar[frozenset[str]] = frozenset()
    # What transformers returns for an output key with return_tensors=None, where it is not
    # the batched array (which "np" and "pt" give): "rows", the array's entries along its
    # first axis; "images", each image's rows; "ints", "tuples" and "lists", the entries as
    # Python ints, tuples or lists (nested lists of Python numbers: rows of an array); "sizes",
    # tuples from the PIL backend and ``torch.Size`` from torchvision (image shapes);
    # "samples", each sample's list of image arrays (rows of the first two axes); "int", a 0-d
    # array as a Python int (Aria's num_crops). The lists of these joined along the first axis
    # are the arrays.
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({})
    # The key HF gives the pixels under (Fuyu's images, Phi-4-multimodal's image_pixel_values;
    # the plans' output_shapes call them "pixel_values" whatever the key).
    output_key: ClassVar[str] = "pixel_values"
    # The dtype torch gives an output transformers builds from Python floats (float32), where
    # numpy gives float64: applied to those keys with return_tensors="pt" (Fuyu's
    # image_scale_factors).
    tensor_dtypes: ClassVar[Mapping[str, str]] = MappingProxyType({})
    # Whether dtype="uint8" (the pixels before rescaling and normalising, with pixel_lut) can
    # give the outputs: False where an image's output holds zeros written after normalising
    # (canvases), which no byte maps to; why not, for the refusal.
    raw_pixels: ClassVar[bool] = True
    raw_pixels_refusal: ClassVar[str] = (
        "it pads with values no byte maps to: zeros after normalising, or Inkling's -1"
    )
    # Whether an image's outputs depend on the other images of its batch: finish_batch pads
    # every image to the batch's largest canvas (Pixtral, Idefics2, Emu3, BLIP's do_pad), or
    # an output sums up the batch (Aria's num_crops, its largest crop count). mmfast.ray runs
    # such images one at a time, so that a row holds its image's own outputs.
    batch_shapes_images: ClassVar[bool] = False
    # Whether the PIL class pads samples with float32 zero entries (Idefics2, Idefics3): a
    # batch of samples of unequal rows is then float32 where its pixels are uint8 (numpy's
    # promotion as it stacks them).
    float_padding: ClassVar[bool] = False
    # Whether pixel_values' rows are channel-last patches ((y, x, c): Gemma 4, SigLIP 2,
    # LFM2-VL, Molmo2, Cosmos3 Edge), which normalize_uint8 is told.
    channels_last: ClassVar[bool] = False
    # The pixel outputs views write (View.output indexes them), filled by one native call
    # from the same tables, so a call's ``dtype`` applies to every one of them; their shapes
    # come from pixel_shapes. "pixel_values" is the plans' name for the first (HF's key is
    # output_key).
    pixel_keys: ClassVar[tuple[str, ...]] = ("pixel_values",)
    # HF's order of the output keys, where the pixel outputs do not simply come first.
    output_order: ClassVar[tuple[str, ...]] = ()
    # Outputs holding several entries per image (key -> what counts each image's entries: a
    # pixel key, whose rows each image's plan gives, or an output holding a count per image):
    # mmfast.ray cuts an array at those counts and drops the padding of a list padded per
    # image. LFM2-VL's per-crop masks follow pixel_values, DeepSeek-OCR-2's tiles
    # num_local_patches, Step-3.7's patch_newline_masks (a padded list) too.
    counted_outputs: ClassVar[Mapping[str, str]] = MappingProxyType({})
    # Keys transformers returns as torch tensors whatever return_tensors asks: the class sets
    # them on its BatchFeature after converting it (mmfast.hf follows).
    tensor_keys: ClassVar[frozenset[str]] = frozenset()
    # The keys the class's BatchFeature leaves unconverted (its skip_tensor_conversion, in its
    # order), which mmfast.hf's BatchFeature is given too.
    skip_tensor_conversion: ClassVar[tuple[str, ...]] = ()

    @property
    def pil_convert(self) -> str:
        """How the reference turns a PIL image into RGB: "hf" (transformers' convert_to_rgb,
        which composites transparency onto white), "rgb" (Pillow's convert("RGB")),
        "resize_then_rgb" (the first view's resize and pad run in the image's own mode, then
        convert("RGB")), or "checkerboard" (Inkling 2: an image with transparency data as
        RGBA onto a grey checkerboard, others convert("RGB"); RGBA arrays too)."""
        return "hf"

    def plan(self, height: int, width: int) -> ImagePlan:
        """What happens to an image of this size (sizes, windows, constants, shapes)."""
        raise NotImplementedError

    def layout(self) -> str:
        """:attr:`batch_layout`, for families whose layout follows a setting."""
        return self.batch_layout

    def plan_in_sample(self, height: int, width: int, sample_size: int) -> ImagePlan:
        """The plan of an image in a sample of ``sample_size`` images (LLaVA-OneVision treats
        the images of a multi-image prompt differently); by default :meth:`plan`."""
        return self.plan(height, width)

    def num_image_tokens(self, height: int, width: int) -> int:
        """Placeholder tokens the model's processor inserts for a (height, width) image."""
        return self.plan(height, width).num_image_tokens

    def tables(self, plan: ImagePlan) -> NDArray[Any]:
        """(3, 256) output value of each uint8 per channel, or (k, 3, 256) for a family whose
        views pick among k tables (:attr:`View.table`); its dtype is ``pixel_values``'
        (uint16 holds bfloat16 bits).

        The default is HF's PIL-backend float32 arithmetic (:func:`float32_tables`), a
        disabled step being an identity, or its torchvision backend's (:func:`fused_tables`),
        which leaves the uint8 pixels as they are when both steps are off.
        """
        return float32_tables(plan) if plan.backend == "pil" else fused_tables(plan)

    def batch_tables(self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]) -> NDArray[Any]:
        """The tables of a batch: its first plan's (:meth:`tables`), made float32 where uint8
        pixels meet :attr:`float_padding` in samples of unequal rows."""
        tables = self.tables(plans[0])
        if (
            self.float_padding
            and tables.dtype == np.uint8
            and len(set(sample_rows(plans, sample_sizes))) > 1
        ):
            return float32_tables(plans[0])
        return tables

    def finish_batch(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> Sequence[ImagePlan]:
        """The plans of a batch once all are known: a family whose layout depends on the
        other images (a canvas as large as the largest, a strip as long as all of them) fixes
        it here. By default the plans as they are."""
        return plans

    def batch_shape(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> tuple[tuple[int, ...], list[int]]:
        """The batch's ``pixel_values`` shape and each image's first value in it
        (:func:`batch_layout_shape` of :meth:`layout`)."""
        shapes = [plan.output_shapes["pixel_values"] for plan in plans]
        return batch_layout_shape(shapes, self.layout(), sample_sizes)

    def pixel_shapes(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, tuple[tuple[int, ...], list[int]]]:
        """Each pixel output of the batch (:attr:`pixel_keys`, in that order) -> its shape and
        each image's first value in it; a key left out is not an output of this batch (no
        view may write it). By default ``pixel_values`` as :meth:`batch_shape` says, and
        each further key the images' rows of it (their plans' ``output_shapes``) joined along
        the first axis, left out where no image has any, as transformers leaves out an empty
        list (DeepSeek-OCR-2's, UnlimitedOCR's and Step-3.7's local tiles)."""
        shapes = {"pixel_values": self.batch_shape(plans, sample_sizes)}
        for key in self.pixel_keys[1:]:
            parts = [plan.output_shapes[key] for plan in plans]
            if any(part[0] for part in parts):
                shapes[key] = batch_layout_shape(parts, "concat", sample_sizes)
        return shapes

    def batch_outputs(
        self, plans: Sequence[ImagePlan], sample_sizes: Sequence[int]
    ) -> dict[str, Any]:
        """The outputs after ``pixel_values``, in HF's key order (``sample_sizes``: the
        images of each sample)."""
        return {}

    def rows_mask(
        self, shape: tuple[int, ...], offsets: Sequence[int], plans: Sequence[ImagePlan]
    ) -> NDArray[np.bool_] | None:
        """``pixel_rows_mask`` of a uint8 output: True where the batch (of
        :meth:`batch_shape`'s ``shape`` and ``offsets``) holds an image's row, False on zero
        padding, which :func:`mmfast.reference.normalize_uint8` turns into 0.0; None when
        nothing is padded. By default the padded layouts': the axes before the images' row
        shape, (batch, rows), or (batch, images, rows) where images are padded within samples
        (Mllama's tiles); each image writes its output's first axis from its first value."""
        if self.layout() not in ("pad_images", "pad_samples"):
            return None
        lead = len(shape) - len(plans[0].output_shapes["pixel_values"]) + 1
        row = math.prod(shape[lead:])
        mask = np.zeros(shape[:lead], bool).reshape(-1)
        for offset, plan in zip(offsets, plans, strict=True):
            first = offset // row
            mask[first : first + plan.output_shapes["pixel_values"][0]] = True
        return mask.reshape(shape[:lead])


@dataclass(frozen=True)
class VideoPlan:
    """What happens to one clip of ``frames`` sampled frames of ``height`` x ``width``.

    ``views`` pairs each :class:`View` with the positions (among the sampled frames) of the
    frames it reads: one frame, or, for patch rows with time slots (a :class:`Patchify` with
    ``temporal_patch_size`` > 1), the frame of each slot. Each view writes after the previous
    one in the clip's output, or, with ``starts``, at its own value offset in it (zero-padded
    rows between views). A view's ``source`` names an earlier view of the same clip (its
    index in ``views``), whose pixels it reads instead of the frame's. ``output_shapes``
    gives the clip's shape of each output key; ``num_video_tokens`` is what the model's
    processor inserts for it.
    """

    height: int
    width: int
    frames: int
    views: tuple[tuple[tuple[int, ...], View], ...]
    output_shapes: Mapping[str, tuple[int, ...]]
    num_video_tokens: int
    starts: tuple[int, ...] | None = field(default=None, kw_only=True)


class VideoConfig:
    """A video family's settings, read from a checkpoint's video processor config; subclasses
    are frozen dataclasses. Every transformers video processor is a torchvision class.

    :meth:`sample` mirrors the class's ``sample_frames``, :meth:`plan` its ``_preprocess`` for
    one clip; the other methods say how the clips of a call become HF's outputs.
    """

    __slots__ = ()

    model_id: str | None
    video_processor_type: str
    do_sample_frames: bool
    do_rescale: bool
    rescale_factor: float
    do_normalize: bool
    image_mean: RGB
    image_std: RGB

    # The key of the pixels, and how clips join: as ModelConfig.batch_layout, or "clips": one
    # array per clip, stacked when they have one shape (BaseVideoProcessor's list of clips,
    # which transformers stacks for return_tensors "np" and "pt").
    output_key: ClassVar[str] = "pixel_values_videos"
    batch_layout: ClassVar[str] = "concat"
    # What transformers returns for an output key with return_tensors=None where it is not the
    # array (as ModelConfig.unbatched): "clips", each clip's entry along the first axis (or
    # its array, for the "clips" layout); "ints", the entries as Python ints.
    unbatched: ClassVar[Mapping[str, str]] = MappingProxyType({})
    # Outputs transformers returns as torch tensors whatever return_tensors asks for (tensors
    # it made itself, among skip_tensor_conversion).
    tensor_keys: ClassVar[frozenset[str]] = frozenset()
    # As ModelConfig.skip_tensor_conversion.
    skip_tensor_conversion: ClassVar[tuple[str, ...]] = ()
    # Whether dtype="uint8" can give the outputs (False where zeros written after
    # normalising pad them, which no byte maps to), and why not.
    raw_pixels: ClassVar[bool] = True
    raw_pixels_refusal: ClassVar[str] = (
        "they are padded with zeros after normalising, which no byte maps to"
    )

    def sample(self, metadata: Any, fps: float | None, num_frames: int | None) -> list[int]:
        """The frame indices the class's ``sample_frames`` keeps for a clip of ``metadata``
        (a :class:`~mmfast.video.VideoMetadata`), with a call's ``fps``/``num_frames``."""
        raise NotImplementedError

    def sampling(
        self, fps: float | None, num_frames: int | None
    ) -> tuple[float | None, int | None]:
        """How ``sample_frames`` starts in the classes that check its arguments: ``fps`` and
        ``num_frames`` are mutually exclusive, and then the instance's value stands in for
        a None (so a config's ``num_frames`` wins over a call's ``fps`` given beside a
        ``num_frames=None``)."""
        if fps is not None and num_frames is not None:
            raise MmfastError("fps, num_frames: expected one of them, got both")
        return (
            getattr(self, "fps", None) if fps is None else fps,
            getattr(self, "num_frames", None) if num_frames is None else num_frames,
        )

    def plan(self, frames: int, height: int, width: int) -> VideoPlan:
        """What happens to a clip of ``frames`` sampled frames of ``height`` x ``width``."""
        raise NotImplementedError

    def num_video_tokens(self, frames: int, height: int, width: int) -> int:
        """Placeholder tokens the model's processor inserts for such a clip."""
        return self.plan(frames, height, width).num_video_tokens

    def tables(self) -> NDArray[Any]:
        """(3, 256): the torchvision class's rescale/normalise arithmetic of every uint8."""
        return fused_tables(self)

    def layout(self) -> str:
        """:attr:`batch_layout`, for families whose layout follows a setting."""
        return self.batch_layout

    def finish_batch(self, plans: Sequence[VideoPlan]) -> Sequence[VideoPlan]:
        """The clips' plans once the whole call is known (a canvas as large as the largest
        frame, a strip as long as every view): by default as they are."""
        return plans

    def batch_shape(self, plans: Sequence[VideoPlan]) -> tuple[tuple[int, ...], list[int]]:
        """The call's pixel output shape and each clip's first value in it (the "clips"
        layout: one flat run of values, each clip's after the previous one's)."""
        shapes = [plan.output_shapes[self.output_key] for plan in plans]
        if self.layout() == "clips":
            sizes = [math.prod(shape) for shape in shapes]
            return (sum(sizes),), [0, *itertools.accumulate(sizes)][:-1]
        return batch_layout_shape(shapes, self.layout(), [1] * len(plans))

    def batch_outputs(self, plans: Sequence[VideoPlan]) -> dict[str, Any]:
        """The outputs after the pixels, in HF's key order."""
        return {}
