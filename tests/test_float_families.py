"""Phi-4-multimodal's and Molmo2's geometry against transformers' own functions, over many
sizes and settings (their pixels are compared in ``test_torchvision`` through the parity
table). transformers defines these classes only with torch and torchvision: without them the
tests skip."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mmfast import MmfastError
from mmfast.models import molmo2, phi4_multimodal

pytest.importorskip("torchvision")
torch = pytest.importorskip("torch")
hf_molmo2 = pytest.importorskip("transformers.models.molmo2.image_processing_molmo2")
hf_phi4 = pytest.importorskip(
    "transformers.models.phi4_multimodal.image_processing_phi4_multimodal"
)


@pytest.mark.parametrize(("patch", "max_crops"), [(266, 8), (266, 12), (14, 3), (1, 6), (50, 1)])
def test_select_tiling_matches_transformers(patch: int, max_crops: int) -> None:
    """float32 scales, the all-below-one argmax and the argmin over scales of at least one,
    ties to the first candidate, for sides from negative (images smaller than the margins)
    through zero to large."""
    sides = [-150, -1, 0, 1, 2, 13, 14, 15, 265, 266, 267, 531, 532, 533, 799, 1000, 2394, 5000]
    for height, width in itertools.product(sides, repeat=2):
        want = hf_molmo2.select_tiling(height, width, patch, max_crops)
        assert molmo2.select_tiling(height, width, patch, max_crops) == want, (height, width)


@pytest.mark.parametrize(
    ("tiling", "crop_patches", "margins", "pool"),
    [
        ((1, 1), 27, (4, 4), (2, 2)),
        ((2, 3), 27, (4, 4), (2, 2)),
        ((3, 1), 27, (2, 3), (3, 3)),
        ((2, 2), 4, (1, 1), (1, 2)),
        ((2, 2), 6, (0, 0), (2, 2)),
        ((1, 4), 9, (0, 2), (2, 3)),
    ],
)
def test_molmo2_pooling_matches_transformers(
    tiling: tuple[int, int], crop_patches: int, margins: tuple[int, int], pool: tuple[int, int]
) -> None:
    """The canvas's patch-index grid (interior margins dropped) and its pooling windows."""
    tiling_h, tiling_w = tiling
    grid = torch.arange(tiling_h * tiling_w * crop_patches**2, dtype=torch.int32).reshape(
        tiling_h, tiling_w, crop_patches, crop_patches
    )
    left, right = margins
    if left:
        grid[1:, :, :left, :] = -1
        grid[:, 1:, :, :left] = -1
    if right:
        grid[:-1, :, -right:, :] = -1
        grid[:, :-1, :, -right:] = -1
    flat = grid.permute(0, 2, 1, 3).reshape(-1)
    want = flat[flat >= 0].numpy()
    got = molmo2.overlap_patch_grid(tiling, crop_patches, margins)
    assert np.array_equal(got, want)
    window = crop_patches - left - right
    rows, cols = tiling_h * window + left + right, tiling_w * window + left + right
    want_pool, want_h, want_w = hf_molmo2.arange_for_pooling(
        torch.from_numpy(want.reshape(rows, cols)), *pool
    )
    got_pool, got_h, got_w = molmo2.arange_for_pooling(got.reshape(rows, cols), *pool)
    assert (got_h, got_w) == (want_h, want_w)
    assert got_pool.dtype == np.int32 and np.array_equal(got_pool, want_pool.numpy())


@pytest.mark.parametrize(
    ("size", "patch", "dynamic_hd"), [(448, 14, 36), (448, 14, 4), (224, 16, 9)]
)
def test_phi4_dynamic_preprocess_matches_transformers(
    size: int, patch: int, dynamic_hd: int
) -> None:
    """The grid, resize target, white canvas and attention mask of ``dynamic_preprocess``
    (on a small stand-in image: only its shape matters), extreme aspect ratios refused alike."""
    processor = hf_phi4.Phi4MultimodalImageProcessor()
    mask_size = size // patch
    sides = [1, 9, 10, 11, 100, 223, 224, 225, 447, 448, 449, 896, 1000, 3000]
    for height, width in itertools.product(sides, repeat=2):
        image = torch.zeros((3, height, width), dtype=torch.uint8)
        try:
            canvas, mask = processor.dynamic_preprocess(
                image, size, patch, mask_size, max_num=dynamic_hd
            )
        except ValueError:
            with pytest.raises(MmfastError, match="aspect ratio"):
                phi4_multimodal.dynamic_preprocess_geometry(
                    height, width, size, patch, mask_size, dynamic_hd
                )
            continue
        hd = phi4_multimodal.dynamic_preprocess_geometry(
            height, width, size, patch, mask_size, dynamic_hd
        )
        assert hd.canvas == tuple(canvas.shape[-2:]), (height, width)
        assert np.array_equal(hd.mask, mask.numpy()), (height, width)
        assert hd.grid == (canvas.shape[-1] // size, canvas.shape[-2] // size)
        # The resized image sits at the top-left of the white canvas.
        rows = int((canvas[0, :, 0] == 0).sum())
        cols = int((canvas[0, 0, :] == 0).sum())
        assert hd.resized == (rows, cols), (height, width)
