"""Ray Data: a dataset of images to model inputs, one row per image.

:class:`Preprocess` is a callable class for ``Dataset.map_batches``: each Ray actor builds its
:class:`~mmfast.ImageProcessor` once, runs each batch of images through one native call (with
the GIL released) and splits the outputs back into one row per image, the other columns passing
through. :func:`preprocess_files` makes such a dataset from a folder of image files.

Only :func:`preprocess_files` imports Ray (``pip install 'mmfast[ray]'``); :class:`Preprocess`
itself is a plain callable on a dict of NumPy arrays.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from mmfast.cli import BF16_SUFFIX, image_files, npz_arrays
from mmfast.errors import MmfastError
from mmfast.models import ImagePlan
from mmfast.models.config import MAX_INT, is_int_in
from mmfast.processors import (
    ON_ERROR,
    BatchInput,
    Dtype,
    ImageProcessor,
    check_image_dtype,
    check_threads,
    prepare_batch,
    relabelled,
    run_plans,
)

if TYPE_CHECKING:
    import ray.data

__all__ = ["Preprocess", "preprocess_files"]

logger = logging.getLogger(__name__)

# Outputs a padded layout zero-pads along their second axis to the batch's longest image.
PADDED_KEYS = frozenset(
    {
        "pixel_values",
        "pixel_attention_mask",
        "pixel_rows_mask",
        # Phi-4-multimodal's crops and their masks, padded to the batch's most crops.
        "image_pixel_values",
        "image_attention_mask",
    }
)
PADDED_LAYOUTS = ("pad_images", "pad_samples")
# Outputs that belong to the whole batch, not to an image: the uint8 output's value table.
SHARED_KEYS = frozenset({"pixel_lut"})

Columns = dict[str, NDArray[Any] | list[NDArray[Any]]]


class Preprocess:
    """A ``Dataset.map_batches`` callable: the images in ``column`` to ``model``'s inputs,
    one row per image, equal bit for bit to what :class:`~mmfast.ImageProcessor` returns for
    that image alone.

    ::

        ds = ray.data.read_binary_files("s3://bucket/photos/", include_paths=True)
        ds = ds.map_batches(
            mmfast.ray.Preprocess,
            fn_constructor_args=("Qwen/Qwen2-VL-7B-Instruct",),
            batch_size=16,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=4),
        )

    ``column`` holds encoded images (bytes, as ``read_binary_files`` gives them), file paths
    (absolute: an actor resolves them in its own working directory), or uint8 (H, W, 3) /
    (H, W) arrays (the ``image`` column of ``ray.data.read_images``); bytes and paths are
    decoded with EXIF orientation, like ``transformers.image_utils.load_image``. The column is
    replaced by the model's outputs (``pixel_values``, ``image_grid_thw``, ...), unless it
    holds paths, which stay to name the rows; every other column passes through. Each row
    holds its image's part of the batch: what ``proc([[image]])`` returns, without the leading
    batch axis. Where the model concatenates the images' rows (Qwen, GLM, PaddleOCR, Kimi,
    InternVL, Aya, Gemma 3, Llama 4, LFM2-VL, Command A Vision, Ovis2) a row's
    ``pixel_values`` are its own patches, tiles or crops (and LFM2-VL's per-crop masks and
    shapes its crops'), DeepSeek-OCR-2's ``pixel_values_local`` its own tiles; MiniCPM-V's
    one strip for the batch is cut into each image's part (with its ``target_sizes`` rows);
    zero-padded layouts (LLaVA-NeXT and OneVision, Idefics3 and SmolVLM, Granite for Docling)
    lose their padding (Llama 3.2 Vision keeps HF's own padding to ``max_image_tiles``). A
    bfloat16 output is stored as its uint16 bits under ``"<name>.bfloat16_bits"``,
    as Arrow has no bfloat16: ``bits.view(ml_dtypes.bfloat16)`` or
    ``torch.from_numpy(bits).view(torch.bfloat16)`` turns it back. With ``dtype="uint8"``
    every row carries the (3, 256) ``pixel_lut``.

    ``model``, ``backend``, ``dtype`` and ``overrides`` are those of
    :meth:`ImageProcessor.from_pretrained` and its call; ``model`` must be readable on every
    node. ``threads`` are each call's threads (1: the actors are the parallelism; pass
    ``num_cpus=threads`` to ``map_batches`` when raising it). Leave the read tasks a CPU: on
    2 CPUs, 2 actors after ``read_binary_files`` had no row after 120 s (Ray 2.60;
    :func:`preprocess_files` avoids this).

    ``on_error="skip"`` (the default, so that one corrupt file does not fail a long job)
    drops an image that cannot be used (undecodable, too large, missing, a size the model
    refuses) and logs a warning on the ``mmfast.ray`` logger, naming it by its path when the
    batch has one; ``"raise"`` raises its error, named the same way. Batches must be dicts of
    NumPy arrays (``batch_format="numpy"``).
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        column: str = "bytes",
        backend: str | None = None,
        dtype: Dtype | None = None,
        threads: int = 1,
        on_error: str = "skip",
        **overrides: Any,
    ) -> None:
        self.threads = check_threads(threads)
        if on_error not in ON_ERROR:
            raise MmfastError(f"on_error: expected 'raise' or 'skip', got {on_error!r}")
        self.column = column
        self.dtype = dtype
        self.on_error = on_error
        self.processor = ImageProcessor.from_pretrained(model, backend=backend, **overrides)
        check_image_dtype(self.processor.config, dtype)

    def __repr__(self) -> str:
        return f"Preprocess({self.processor.config!r}, column={self.column!r})"

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """One batch (a dict of equal-length columns) to the rows of its usable images."""
        if not isinstance(batch, Mapping):
            raise MmfastError(
                "batch: expected a dict of NumPy arrays (map_batches(..., batch_format='numpy')), "
                f"got {type(batch).__qualname__}"
            )
        if self.column not in batch:
            raise MmfastError(
                f"column: expected one of the batch's columns ({', '.join(batch)}), "
                f"got {self.column!r}"
            )
        images = batch[self.column]
        prepared = prepare_batch([[image] for image in images], self.processor.config, self.threads)
        kept: list[int] = []
        inputs: list[BatchInput] = []
        plans: list[ImagePlan] = []
        for row, result in enumerate(prepared):
            if isinstance(result, BaseException):
                message = f"{self._name(batch, row)}: {result}"
                if self.on_error == "raise":
                    raise relabelled(result, message) from result
                logger.warning("skipped %s", message)
                continue
            kept.append(row)
            inputs.append(result[0])
            plans.append(result[1])
        # Paths stay to name the rows; encoded images and pixels give way to the outputs.
        paths = all(isinstance(image, (str, os.PathLike)) for image in images)
        passed = {
            key: values if len(kept) == len(images) else np.asarray(values)[kept]
            for key, values in batch.items()
            if key != self.column or paths
        }
        if not kept:
            return passed
        outputs = self._run(inputs, plans)
        clash = sorted(passed.keys() & outputs.keys())
        if clash:
            raise MmfastError(
                f"batch: expected no column named like an output of the model, got {clash}; "
                "rename or drop it before preprocessing"
            )
        return passed | outputs

    def _run(self, inputs: list[BatchInput], plans: list[ImagePlan]) -> Columns:
        """The images' outputs in one native call, split per image (:func:`split_rows`)."""
        config = self.processor.config
        # Outputs of different shapes (do_resize=False, say) cannot share a stacked batch, and
        # a family whose images' outputs depend on the others (a canvas as large as the
        # largest, a count over the batch) must see each image alone: a row is that image's
        # own output.
        ragged = len({p.output_shapes["pixel_values"] for p in plans}) > 1
        alone = config.batch_shapes_images
        if len(plans) > 1 and (alone or (config.layout() == "stack" and ragged)):
            parts = [self._run([i], [p]) for i, p in zip(inputs, plans, strict=True)]
            return {key: [row for part in parts for row in part[key]] for key in parts[0]}
        feature = run_plans(config, inputs, plans, [1] * len(plans), self.threads, self.dtype)
        # A strip (MiniCPM-V) is cut along its last axis, the images' strip lengths.
        axis = -1 if config.layout() == "strip" else 0
        rows = [plan.output_shapes["pixel_values"][axis] for plan in plans]
        # Each image's entries of the counted outputs: its rows of a pixel output (its plan),
        # else the counting output's value for it.
        counted = {
            key: (
                [plan.output_shapes[count][0] for plan in plans]
                if count in config.pixel_keys
                else [int(n) for n in feature[count]]
            )
            for key, count in config.counted_outputs.items()
            if key in feature
        }
        columns = split_rows(feature, rows, config.layout(), counted)
        for key in config.batch_dependent:
            # Each image's own entry, as a batch of that image alone holds it.
            columns[key] = [config.batch_outputs([plan], [1])[key] for plan in plans]
        return columns

    def _name(self, batch: Mapping[str, Any], row: int) -> str:
        """The row's ``path`` (its image if that is a path), else its place in the batch."""
        image = batch[self.column][row]
        if isinstance(image, (str, os.PathLike)):
            return os.fsdecode(image)
        if "path" in batch:
            return str(batch["path"][row])
        return f"{self.column}[{row}] of a batch without a 'path' column"


def split_rows(
    outputs: Mapping[str, NDArray[Any]],
    rows: Sequence[int],
    layout: str,
    counted: Mapping[str, Sequence[int]] | None = None,
) -> Columns:
    """A batch's outputs as columns of one entry per image, in order.

    ``rows`` is each image's length along ``pixel_values``' first axis (its
    ``plan.output_shapes``; its last axis for a strip), ``layout`` the config's
    (:meth:`ModelConfig.layout`): ``"concat"`` ``pixel_values`` is cut at those lengths, and so
    is a uint8 output's ``pixel_rows_mask``; ``"strip"``
    (MiniCPM-V) cuts the one strip into each image's (3, patch_size, length) and
    ``target_sizes`` into each image's views (``num_patches_per_image``); padded layouts
    (``"pad_images"``, ``"pad_samples"`` with one image a sample) lose the padding of the
    keys in ``PADDED_KEYS``; a 0-d output (one image's, run alone: Aria's ``num_crops``) is
    its row; ``counted`` gives each image's entries of the outputs
    :attr:`~mmfast.models.base.ModelConfig.counted_outputs` names (LFM2-VL's per-crop masks,
    DeepSeek-OCR-2's tiles): an array is cut at them (an image without any gets an empty
    array; a batch without any has no such column), a list padded per image (Step-3.7's
    ``patch_newline_masks``) loses its padding; every other output already has an entry per
    image along its first axis. Outputs are first made arrays as ``mmfast preprocess --out``
    writes them (:func:`mmfast.cli.npz_arrays`: Idefics3's nested ``rows`` and ``cols`` lists
    become int64 arrays, bfloat16 becomes uint16 bits under ``BF16_SUFFIX``). A column whose
    entries share one shape stays one array; ragged ones become lists of arrays.
    """
    columns: Columns = {}
    counted = counted or {}
    for key, value in npz_arrays(outputs).items():
        name = key.removesuffix(BF16_SUFFIX)
        if name in counted:
            counts = counted[name]
            if isinstance(outputs[name], list):  # padded per image
                columns[key] = [v[:n] for v, n in zip(value, counts, strict=True)]
            else:
                columns[key] = np.split(value, np.cumsum(counts)[:-1])
        elif name in SHARED_KEYS or np.ndim(value) == 0:
            columns[key] = np.repeat(value[None], len(rows), axis=0)
        elif layout == "concat" and name in ("pixel_values", "pixel_rows_mask"):
            columns[key] = np.split(value, np.cumsum(rows)[:-1])
        elif name == "pixel_values" and layout == "strip":
            columns[key] = np.split(value[0], np.cumsum(rows)[:-1], axis=-1)
        elif name == "target_sizes" and layout == "strip":
            views = np.asarray(outputs["num_patches_per_image"])
            columns[key] = np.split(value, np.cumsum(views)[:-1])
        elif name in PADDED_KEYS and layout in PADDED_LAYOUTS and min(rows) < value.shape[1]:
            columns[key] = [v[:n] for v, n in zip(value, rows, strict=True)]
        else:
            columns[key] = value
    return columns


def preprocess_files(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    model: str | os.PathLike[str],
    *,
    workers: int | None = None,
    batch_size: int = 16,
    threads: int = 1,
    **kwargs: Any,
) -> ray.data.Dataset:
    """A dataset of image files preprocessed for ``model``: a ``path`` column (absolute) and
    the outputs of :class:`Preprocess`, one row per image.

    ``paths`` are files or folders, as ``mmfast preprocess`` takes them: a folder stands for
    its image files (by the extensions Pillow registers, sorted, not recursive). They are
    listed here and read by the actors themselves, so every node must see them (a local or
    shared file system; for object stores, use ``ray.data.read_binary_files`` and
    :class:`Preprocess`). ``workers`` actors (default: Ray's autoscaling pool) each run
    ``batch_size`` images a call on ``threads`` threads, reserving that many CPUs.
    ``kwargs`` go to :class:`Preprocess` (``dtype``, ``backend``, ``on_error``, overrides).
    Lazy, like every Ray dataset: nothing is read until it is consumed.
    """
    check_threads(threads)
    if not is_int_in(batch_size, 1, MAX_INT):
        raise MmfastError(f"batch_size: expected a positive integer, got {batch_size!r}")
    if workers is not None and not is_int_in(workers, 1, MAX_INT):
        raise MmfastError(f"workers: expected None or a positive integer, got {workers!r}")
    import ray.data

    names = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    # Absolute: an actor resolves a path in its own working directory (the driver's at
    # ray.init, on the driver's node), where a relative one went missing, every image skipped.
    listed = image_files([os.fspath(name) for name in names], videos=False)
    files = [os.path.abspath(file) for file in listed]
    # Not ray.data.read_binary_files: its read tasks claim a CPU each, and on 2 CPUs with 2
    # actors they waited forever (still none after 120 s, Ray 2.60); claiming no CPU, they took
    # 11 worker processes and 5.3 s for 16 small JPEGs, against 7 and 3.7 s here. The driver
    # only lists the files: the actors read them, so no image bytes enter the object store.
    return ray.data.from_items([{"path": file} for file in files]).map_batches(
        Preprocess,
        fn_constructor_args=(os.fspath(model),),
        fn_constructor_kwargs={"column": "path", "threads": threads, **kwargs},
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=workers),  # None: from 1 actor up, as needed
        num_cpus=threads,
    )
