//! torchvision's resize of a uint8 image tensor on an x86 CPU with AVX2 or AVX512
//! (`torchvision.transforms.v2.functional.resize`, `ATen` `upsample_*` uint8 paths,
//! torch 2.14 / torchvision 0.29), bit-exact, on interleaved RGB `u8` images.
//!
//! Bilinear, bicubic and Lanczos share one fixed-point pipeline, so they are
//! [`crate::resize`]'s passes (AVX2 when the CPU has it, scalar otherwise, same bytes,
//! split into row bands on a rayon pool) fed with `ATen`'s tables:
//!
//! * Per axis, f64 weights: antialiased (Pillow's windows: `scale = in / out`, support
//!   `interp_size / 2 * max(scale, 1)`, centre `scale * (i + 0.5)`, first tap
//!   `max(trunc(centre - support + 0.5), 0)`, weights `filter((tap - centre + 0.5) /
//!   max(scale, 1))` normalised by their sum), or, without antialiasing, fixed
//!   `interp_size` taps around `scale * (i + 0.5) - 0.5` whose out-of-image taps pile onto
//!   the edge taps. Filters: triangle; Keys cubic with a = -0.5 antialiased, -0.75 not
//!   (in `ATen`'s association, which is not Pillow's); Lanczos-3.
//! * To `i16` fixed point with the largest precision `p` in `0..=22` that keeps twice the
//!   largest weight below `2^15`, each weight rounded half away from zero.
//! * A pass computes `(2^(p-1) + sum(w_k * x_k)) >> p` in integers and saturates to
//!   `0..=255`; the horizontal pass runs first, an axis whose size does not change is
//!   skipped, and equal sizes copy the input.
//!
//! Nearest-exact picks source pixels with float32 index arithmetic.
//! On one thread this takes 3024x4032 -> 1008x1344 bilinear from 33 ms (a per-pixel
//! port) to 10.6 ms, -> 336x336 from 23 ms to 6.2 ms.

use crate::alloc::with_capacity;
use crate::error::{invalid, TransformError};
use crate::image::{Pad, Rect};
use crate::resize::{
    check_buffers, check_part, on_canvas, part_fits, recycle_rgb, separable, whole, whole_then_part, Backend,
    Coeffs, Kernel, Passes, Source, Taps,
};

/// Channels of the interleaved images handled here.
const CHANNELS: usize = 3;

/// torchvision's interpolation modes for image tensors; transformers maps PIL's
/// NEAREST, LANCZOS, BILINEAR and BICUBIC to `NearestExact`, `Lanczos`, `Bilinear`
/// and `Bicubic`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TorchMode {
    /// `InterpolationMode.NEAREST_EXACT`: source index `floor((i + 0.5) * in / out)`, in
    /// `ATen`'s float32 arithmetic.
    NearestExact,
    /// `InterpolationMode.BILINEAR`.
    Bilinear,
    /// `InterpolationMode.BICUBIC`.
    Bicubic,
    /// `InterpolationMode.LANCZOS` (Lanczos-3; antialiased only).
    Lanczos,
}

impl TorchMode {
    /// The mode transformers' `pil_torch_interpolation_mapping` gives a PIL filter code;
    /// `None` for BOX and HAMMING, which torchvision cannot apply to tensors.
    #[must_use]
    pub fn from_pil_code(code: i64) -> Option<TorchMode> {
        match code {
            0 => Some(TorchMode::NearestExact),
            1 => Some(TorchMode::Lanczos),
            2 => Some(TorchMode::Bilinear),
            3 => Some(TorchMode::Bicubic),
            _ => None,
        }
    }
}

fn triangle(x: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 {
        1.0 - x
    } else {
        0.0
    }
}

/// `ATen`'s `cubic_convolution1`/`2`, in its association (`5a`, `8a`, `4a` as constants).
fn cubic(a: f64) -> impl Fn(f64) -> f64 {
    move |x: f64| {
        let x = x.abs();
        if x < 1.0 {
            ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        } else if x < 2.0 {
            ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        } else {
            0.0
        }
    }
}

fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        1.0
    } else {
        let x = x * std::f64::consts::PI;
        x.sin() / x
    }
}

fn lanczos3(x: f64) -> f64 {
    let x = x.abs();
    if x < 3.0 {
        sinc(x) * sinc(x / 3.0)
    } else {
        0.0
    }
}

/// Each output's first tap and f64 weights, the largest weight `ATen` sees, and the most
/// taps an output has.
struct Table {
    windows: Vec<(usize, std::ops::Range<usize>)>,
    weights: Vec<f64>,
    w_max: f64,
    widest: usize,
}

impl Table {
    /// No outputs yet, with room for `outputs` of `widest` taps at most.
    ///
    /// # Errors
    /// [`TransformError::OutOfMemory`] naming `arg` where the allocator cannot give it.
    fn with_capacity(arg: &'static str, outputs: usize, widest: usize) -> Result<Table, TransformError> {
        Ok(Table {
            windows: with_capacity(arg, outputs)?,
            weights: with_capacity(arg, outputs.saturating_mul(widest))?,
            w_max: 0.0,
            widest,
        })
    }
}

/// `_compute_indices_min_size_weights_aa`: Pillow-style normalised windows.
fn antialiased(
    arg: &'static str,
    in_size: usize,
    out_size: usize,
    interp_size: usize,
    filter: impl Fn(f64) -> f64,
) -> Result<Table, TransformError> {
    let scale = in_size as f64 / out_size as f64;
    let half = interp_size as f64 * 0.5;
    let (support, invscale) = if scale >= 1.0 {
        (half * scale, 1.0 / scale)
    } else {
        (half, 1.0)
    };
    // ATen pads every window to this many taps and clips longer ones to it.
    let widest = (support.ceil() as usize).saturating_mul(2).saturating_add(1);
    let mut table = Table::with_capacity(arg, out_size, widest)?;
    for i in 0..out_size {
        let center = scale * (i as f64 + 0.5);
        // `as i64` truncates toward zero like the C++ cast.
        let lo = ((center - support + 0.5) as i64).max(0);
        let hi = ((center + support + 0.5) as i64).min(in_size as i64);
        let n = ((hi - lo).max(0) as usize).min(widest);
        let lo = lo as usize;
        let begin = table.weights.len();
        table
            .weights
            .extend((0..n).map(|j| filter(((j + lo) as f64 - center + 0.5) * invscale)));
        let row = &mut table.weights[begin..];
        let sum = row.iter().fold(0.0f64, |acc, &w| acc + w);
        if sum != 0.0 {
            for w in row {
                *w /= sum;
                table.w_max = table.w_max.max(*w);
            }
        }
        table.windows.push((lo, begin..begin + n));
    }
    Ok(table)
}

/// `_compute_indices_min_size_weights` (no antialiasing): `interp_size` taps around the
/// source position, those past an edge added onto the edge tap, not renormalised.
fn fixed_taps(
    arg: &'static str,
    in_size: usize,
    out_size: usize,
    interp_size: usize,
    filter: impl Fn(f64) -> f64,
) -> Result<Table, TransformError> {
    let scale = in_size as f64 / out_size as f64;
    let half = interp_size / 2;
    let mut table = Table::with_capacity(arg, out_size, interp_size)?;
    for i in 0..out_size {
        let mut real = scale * (i as f64 + 0.5) - 0.5;
        if interp_size == 2 && real < 0.0 {
            real = 0.0;
        }
        // guard_index_and_lambda floors a float: the f64 position is rounded to f32 first.
        let idx = ((real as f32).floor() as i64).min(in_size as i64 - 1);
        let lambda = (real - idx as f64).clamp(0.0, 1.0);
        let lo_unclipped = idx - half as i64 + 1;
        let lo = lo_unclipped.max(0);
        let hi = (idx + half as i64 + 1).min(in_size as i64);
        let n = ((hi - lo).max(0) as usize).min(interp_size);
        let mut row = vec![0.0f64; interp_size];
        let mut w_index = 0usize;
        for j in 0..interp_size {
            row[j] = 0.0;
            let v = filter((j as f64 + 1.0 - half as f64) - lambda);
            let tap = lo_unclipped + j as i64;
            if tap <= 0 {
                w_index = 0;
            } else if tap >= in_size as i64 - 1 {
                w_index = n.saturating_sub(1);
            }
            row[w_index] += v;
            table.w_max = table.w_max.max(row[w_index]);
            w_index += 1;
        }
        let begin = table.weights.len();
        table.weights.extend_from_slice(&row[..n]);
        table.windows.push((lo.max(0) as usize, begin..begin + n));
    }
    Ok(table)
}

/// `ATen`'s fixed-point taps for resizing an axis of `in_size` samples to `out_size`,
/// as a table for the passes of [`crate::resize`], whose sums, rounding term
/// `2^(p-1)`, shift `p` and saturation are `ATen`'s. `ATen` pads windows with zero
/// taps; the table keeps each window's own length, which leaves every sum unchanged.
fn axis_coeffs(
    arg: &'static str,
    in_size: usize,
    out_size: usize,
    mode: TorchMode,
    antialias: bool,
) -> Result<Coeffs, TransformError> {
    let table = match (mode, antialias) {
        (TorchMode::Bilinear, true) => antialiased(arg, in_size, out_size, 2, triangle)?,
        (TorchMode::Bicubic, true) => antialiased(arg, in_size, out_size, 4, cubic(-0.5))?,
        (TorchMode::Lanczos, true) => antialiased(arg, in_size, out_size, 6, lanczos3)?,
        (TorchMode::Bilinear, false) => fixed_taps(arg, in_size, out_size, 2, triangle)?,
        (TorchMode::Bicubic, false) => fixed_taps(arg, in_size, out_size, 4, cubic(-0.75))?,
        _ => {
            return Err(invalid(
                "mode",
                "bilinear, bicubic or antialiased lanczos",
                format!("{mode:?}"),
            ))
        }
    };
    // The first precision in 0..=21 whose doubled largest weight no longer fits an i16,
    // else 22.
    let mut precision = 0u32;
    while precision < 22 {
        let next = (0.5 + table.w_max * f64::from(1u32 << (precision + 1))) as i64;
        if next >= 1 << 15 {
            break;
        }
        precision += 1;
    }
    let unit = f64::from(1u32 << precision);
    let mut coeffs = Coeffs::with_capacity(arg, precision, table.windows.len(), table.widest)?;
    for (lo, range) in table.windows {
        coeffs.push(
            lo,
            table.weights[range].iter().map(|&v| {
                // The C++ stores `(int)` of these into an int16_t.
                let r = if v < 0.0 {
                    (-0.5 + v * unit) as i32
                } else {
                    (0.5 + v * unit) as i32
                };
                i32::from(r as i16)
            }),
        );
    }

    // The sums run in i32 like ATen's; refuse tables whose worst case
    // (every tap at 255) would not fit.
    let bias = 1i64 << precision >> 1;
    for i in 0..coeffs.out_len() {
        let abs_sum: i64 = coeffs.taps(i).1.iter().map(|&w| i64::from(w).abs()).sum();
        if bias + 255 * abs_sum > i64::from(i32::MAX) {
            return Err(overflow(arg, "fixed-point accumulator"));
        }
    }
    Ok(coeffs)
}

fn overflow(arg: &'static str, what: &str) -> TransformError {
    TransformError::Overflow {
        arg,
        what: what.to_string(),
    }
}

/// Source index of each output for nearest-exact, in float32 as `ATen`'s CPU kernel
/// computes it: `t = max(f32(in / out) * (i + 0.5) - 0.5, 0)`, the multiply-add fused (its
/// x86 builds contract it), then `min(floor(t + 0.5), in - 1)`. Unfused, or without the
/// `- 0.5` and `+ 0.5`, an index that is whole in exact arithmetic can land a rounding
/// short: widening 4 pixels to 3402, output 850 reads pixel 1 in torch.
pub(crate) fn nearest_exact_indices(in_size: usize, out_size: usize) -> Vec<usize> {
    let scale = in_size as f32 / out_size as f32;
    (0..out_size)
        .map(|i| {
            let t = scale.mul_add(i as f32 + 0.5, -0.5).max(0.0);
            ((t + 0.5).floor() as usize).min(in_size - 1)
        })
        .collect()
}

/// Resize HWC u8 RGB `src` of `src_size` = (height, width) into `dst` of `dst_size` like
/// torchvision's `resize` of the uint8 CHW tensor with `mode` and `antialias` (ignored by
/// nearest-exact) on an x86 CPU.
///
/// `dst` must hold exactly `dst_size.0 * dst_size.1` pixels and is fully overwritten.
///
/// # Errors
///
/// [`TransformError::InvalidArgument`] when a size is zero, a buffer length does not match
/// its size, or for Lanczos without antialiasing (torchvision refuses it);
/// [`TransformError::Overflow`] when a byte count or the fixed-point sums would not fit.
pub fn resize_torch_rgb(
    src: &[u8],
    src_size: (usize, usize),
    dst: &mut [u8],
    dst_size: (usize, usize),
    mode: TorchMode,
    antialias: bool,
) -> Result<(), TransformError> {
    resize_torch_rgb_with(src, src_size, dst, dst_size, mode, antialias, Backend::Auto)
}

/// [`resize_torch_rgb`] on a chosen [`Backend`]; every backend gives the same bytes.
///
/// # Errors
///
/// As [`resize_torch_rgb`], plus [`TransformError::InvalidArgument`] when `backend` is not
/// supported by this CPU.
pub fn resize_torch_rgb_with(
    src: &[u8],
    src_size: (usize, usize),
    dst: &mut [u8],
    dst_size: (usize, usize),
    mode: TorchMode,
    antialias: bool,
    backend: Backend,
) -> Result<(), TransformError> {
    check_buffers(src, src_size, dst, dst_size)?;
    resize_torch_source_with(
        Source::packed(src, CHANNELS, src_size)?,
        dst,
        dst_size,
        mode,
        antialias,
        backend,
    )
}

/// [`resize_torch_rgb`] from any [`Source`] (RGBX or grayscale, packed or row by row):
/// the same bytes as resizing its packed RGB pixels.
///
/// # Errors
/// As [`resize_torch_rgb`].
pub fn resize_torch_source(
    src: Source<'_>,
    dst: &mut [u8],
    dst_size: (usize, usize),
    mode: TorchMode,
    antialias: bool,
) -> Result<(), TransformError> {
    resize_torch_source_with(src, dst, dst_size, mode, antialias, Backend::Auto)
}

/// [`resize_torch_source`] on a chosen [`Backend`].
///
/// # Errors
/// As [`resize_torch_rgb_with`].
pub fn resize_torch_source_with(
    src: Source<'_>,
    dst: &mut [u8],
    dst_size: (usize, usize),
    mode: TorchMode,
    antialias: bool,
    backend: Backend,
) -> Result<(), TransformError> {
    resize_torch_source_part(
        src,
        None,
        dst,
        dst_size,
        whole(dst_size),
        mode,
        antialias,
        backend,
    )
}

/// `part` of [`resize_torch_source_with`]'s result (of `dst_size`) into `dst`, which holds
/// exactly `part`: the same bytes as cropping the whole result (see
/// [`crate::resize::resize_source_part`]), of `src` pasted on `paste`'s canvas if given.
///
/// # Errors
/// As [`resize_torch_rgb_with`], a `part` outside `dst_size`, or `src` outside the canvas.
#[allow(clippy::too_many_arguments)]
pub(crate) fn resize_torch_source_part(
    src: Source<'_>,
    paste: Option<Pad>,
    dst: &mut [u8],
    dst_size: (usize, usize),
    part: Rect,
    mode: TorchMode,
    antialias: bool,
    backend: Backend,
) -> Result<(), TransformError> {
    check_part(dst, dst_size, part)?;
    let src_size = paste.map_or(src.size(), |pad| pad.size);
    let (in_h, in_w) = src_size;
    let (out_h, out_w) = dst_size;
    let kernel = Kernel::select(backend)?;
    if src_size == dst_size || mode == TorchMode::NearestExact || !part_fits(src_size, dst_size, part) {
        if paste.is_some() {
            return on_canvas(src, paste, |canvas| {
                resize_torch_source_part(canvas, None, dst, dst_size, part, mode, antialias, backend)
            });
        }
        return whole_then_part(dst, dst_size, part, |full| {
            if src_size == dst_size {
                src.write_rgb(full);
                return Ok(());
            }
            if mode != TorchMode::NearestExact {
                return resize_torch_source_part(
                    src,
                    None,
                    full,
                    dst_size,
                    whole(dst_size),
                    mode,
                    antialias,
                    backend,
                );
            }
            let src = src.to_rgb()?;
            let rows = nearest_exact_indices(in_h, out_h);
            let cols = nearest_exact_indices(in_w, out_w);
            for (row, &sy) in full.chunks_exact_mut(out_w * CHANNELS).zip(&rows) {
                let line = &src[sy * in_w * CHANNELS..(sy + 1) * in_w * CHANNELS];
                for (px, &sx) in row.chunks_exact_mut(CHANNELS).zip(&cols) {
                    px.copy_from_slice(&line[sx * CHANNELS..(sx + 1) * CHANNELS]);
                }
            }
            recycle_rgb(src);
            Ok(())
        });
    }
    // The horizontal pass runs first; an axis whose size is unchanged is skipped.
    if in_w != out_w && in_h != out_h {
        // The intermediate holds `in_h` rows of the output width.
        in_h.checked_mul(out_w * CHANNELS)
            .ok_or_else(|| overflow("dst_size", "intermediate buffer size"))?;
    }
    let make = |n: usize, n2: usize| axis_coeffs("dst_size", n, n2, mode, antialias);
    separable(
        kernel,
        src,
        paste,
        dst,
        dst_size,
        part,
        Taps::Torch(mode, antialias),
        &make,
        false,
    )
}

/// [`resize_torch_source_part`]'s passes for `part` of a resize from `size` to
/// `dst_size` (a horizontal pass, then a vertical one, where both run; see
/// [`Passes::new`]).
///
/// # Errors
/// As [`resize_torch_rgb_with`].
pub(crate) fn torch_passes(
    size: (usize, usize),
    dst_size: (usize, usize),
    part: Rect,
    mode: TorchMode,
    antialias: bool,
    backend: Backend,
) -> Result<Option<Passes>, TransformError> {
    if mode == TorchMode::NearestExact {
        return Ok(None);
    }
    let make = |n: usize, n2: usize| axis_coeffs("dst_size", n, n2, mode, antialias);
    Passes::new(
        Kernel::select(backend)?,
        Taps::Torch(mode, antialias),
        &make,
        size,
        dst_size,
        part,
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resize::tests::{check_part, random_part};
    use crate::testing::Rng;

    /// The modes torchvision's resize runs in: (mode, antialias).
    const MODES: [(TorchMode, bool); 5] = [
        (TorchMode::Bilinear, true),
        (TorchMode::Bicubic, true),
        (TorchMode::Lanczos, true),
        (TorchMode::Bilinear, false),
        (TorchMode::Bicubic, false),
    ];

    fn run(src: &[u8], s: (usize, usize), d: (usize, usize)) -> Vec<u8> {
        let mut out = vec![0u8; d.0 * d.1 * 3];
        resize_torch_rgb(src, s, &mut out, d, TorchMode::Bilinear, true).unwrap();
        out
    }

    #[test]
    fn tables_the_allocator_cannot_give_are_errors() {
        for antialias in [true, false] {
            let table = axis_coeffs("dst_size", 30, 1 << 60, TorchMode::Bicubic, antialias);
            assert!(matches!(
                table,
                Err(TransformError::OutOfMemory { arg: "dst_size", .. })
            ));
        }
    }

    // Expected values below were produced by torchvision 0.29.1 / torch 2.14.1
    // (`tvF.resize(uint8 CHW tensor, size, BILINEAR, antialias=True)`, x86 CPU).

    #[test]
    fn downscale_4x4_to_2x2() {
        let src: Vec<u8> = (0..48u8).map(|v| v * 5).collect();
        assert_eq!(
            run(&src, (4, 4), (2, 2)),
            [54, 59, 64, 77, 82, 87, 148, 153, 158, 171, 176, 181]
        );
    }

    #[test]
    fn upscale_2x2_to_3x3() {
        let src = [0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 0, 255];
        assert_eq!(
            run(&src, (2, 2), (3, 3)),
            [
                0, 0, 0, 128, 128, 128, 255, 255, 255, 128, 0, 0, 128, 64, 128, 128, 128, 255, 255, 0, 0,
                128, 0, 128, 0, 0, 255
            ]
        );
    }

    #[test]
    fn horizontal_only_and_vertical_only() {
        let src = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150];
        assert_eq!(run(&src, (1, 5), (1, 2)), [40, 50, 60, 100, 110, 120]);
        let tall = run(&src, (1, 5), (3, 5));
        for row in tall.chunks_exact(15) {
            assert_eq!(row, src);
        }
    }

    #[test]
    fn one_pixel_upscale_is_constant() {
        assert_eq!(run(&[7, 8, 9], (1, 1), (2, 3)), [7, 8, 9].repeat(6));
    }

    #[test]
    fn non_square_downscale_7x3_to_3x2() {
        let src: Vec<u8> = (0..63u32).map(|v| (v * 11 % 256) as u8).collect();
        assert_eq!(
            run(&src, (7, 3), (3, 2)),
            [97, 108, 119, 105, 116, 127, 123, 134, 135, 118, 129, 140, 133, 144, 86, 106, 117, 128]
        );
    }

    #[test]
    fn other_modes_match_torchvision() {
        // (mode, antialias, output size, expected bytes)
        type Case<'a> = (TorchMode, bool, (usize, usize), &'a [u8]);
        // Expected values from the same torchvision, on the 7x3 image of the test above.
        let src: Vec<u8> = (0..63u32).map(|v| (v * 11 % 256) as u8).collect();
        let cases: [Case<'_>; 4] = [
            (
                TorchMode::Bicubic,
                true,
                (3, 2),
                &[
                    93, 104, 116, 102, 113, 124, 132, 143, 146, 121, 132, 144, 130, 141, 79, 104, 115, 130,
                ],
            ),
            (
                TorchMode::Lanczos,
                true,
                (3, 2),
                &[
                    93, 104, 118, 100, 111, 122, 140, 151, 152, 123, 134, 146, 124, 135, 73, 102, 113, 133,
                ],
            ),
            (
                TorchMode::Bilinear,
                false,
                (3, 2),
                &[
                    74, 85, 96, 124, 135, 146, 49, 60, 71, 99, 110, 121, 152, 163, 46, 74, 85, 96,
                ],
            ),
            (
                TorchMode::NearestExact,
                true,
                (3, 5),
                &[
                    99, 110, 121, 99, 110, 121, 132, 143, 154, 165, 176, 187, 165, 176, 187, 41, 52, 63, 41,
                    52, 63, 74, 85, 96, 107, 118, 129, 107, 118, 129, 239, 250, 5, 239, 250, 5, 16, 27, 38,
                    49, 60, 71, 49, 60, 71,
                ],
            ),
        ];
        for (mode, antialias, size, want) in cases {
            let mut out = vec![0u8; size.0 * size.1 * 3];
            resize_torch_rgb(&src, (7, 3), &mut out, size, mode, antialias).unwrap();
            assert_eq!(out, want, "{mode:?} antialias={antialias}");
        }
        let mut out = vec![0u8; 18];
        assert!(resize_torch_rgb(&src, (7, 3), &mut out, (3, 2), TorchMode::Lanczos, false).is_err());
    }

    /// Indices torch 2.15 picks where the exact source position is whole but the float32
    /// scale times `i + 0.5` rounds below it: the fused multiply-add keeps them.
    #[test]
    fn nearest_exact_indices_match_aten_at_whole_positions() {
        for (in_size, out_size, i) in [(4, 3402, 850), (10, 705, 70), (8, 1588, 198)] {
            let indices = super::nearest_exact_indices(in_size, out_size);
            assert_eq!(indices[i - 1..=i + 1], [0, 1, 1], "{in_size} -> {out_size}");
        }
    }

    #[test]
    fn white_stays_white() {
        for &(s, d) in &[((7, 3), (3, 2)), ((5, 9), (11, 4)), ((13, 17), (2, 3))] {
            let src = vec![255u8; s.0 * s.1 * 3];
            assert!(run(&src, s, d).iter().all(|&v| v == 255));
        }
    }

    #[test]
    fn same_size_copies() {
        let src: Vec<u8> = (0..18u8).collect();
        assert_eq!(run(&src, (2, 3), (2, 3)), src);
    }

    #[test]
    fn weights_match_aten_precision() {
        // scale 1: identity taps, w_max = 1 -> precision 14.
        let w = axis_coeffs("t", 5, 5, TorchMode::Bilinear, true).unwrap();
        assert_eq!(w.precision(), 14);
        assert_eq!(w.taps(0), (0, &[16384, 0][..]));
        assert_eq!(w.taps(4), (4, &[16384][..]));
        // 4 -> 2: support 2, taps 3/7, 3/7, 1/7 -> w_max * 2^17 >= 2^15 -> precision 16.
        let w = axis_coeffs("t", 4, 2, TorchMode::Bilinear, true).unwrap();
        assert_eq!(w.precision(), 16);
        assert_eq!(w.taps(0), (0, &[28087, 28087, 9362][..]));
        assert_eq!(w.taps(1), (1, &[9362, 28087, 28087][..]));
    }

    #[test]
    fn every_backend_matches_scalar() {
        let mut backends = vec![Backend::Scalar];
        for backend in [Backend::Avx2, Backend::Avx512] {
            if Kernel::select(backend).is_ok() {
                backends.push(backend);
            }
        }
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for case in 0..400 {
            let (mode, aa) = MODES[case % MODES.len()];
            // Tiny sizes, sizes around the SIMD block widths, and large
            // downscales whose windows span many 4-tap groups.
            let size = |rng: &mut Rng| match case % 4 {
                0 => 1 + rng.below(4),
                1 | 2 => 1 + rng.below(80),
                _ => 1 + rng.below(400),
            };
            let (h, mut w) = (size(&mut rng), size(&mut rng));
            let (mut h2, mut w2) = (size(&mut rng), size(&mut rng));
            // Some cases keep one axis, skipping its pass.
            if case % 7 == 0 {
                h2 = h;
            }
            if case % 11 == 0 {
                w2 = w;
            }
            // Some narrow rows twelvefold: RGB windows too far apart for one vector at the
            // fewest groups of taps, near enough at more groups of fewer taps.
            if case % 13 == 5 {
                w2 = 25 + rng.below(25);
                w = 12 * w2 + rng.below(3);
            }
            let src: Vec<u8> = (0..h * w * 3).map(|_| rng.below(256) as u8).collect();
            let mut want = vec![0; h2 * w2 * 3];
            resize_torch_rgb_with(&src, (h, w), &mut want, (h2, w2), mode, aa, Backend::Scalar).unwrap();
            for &backend in &backends {
                let mut got = vec![0; want.len()];
                resize_torch_rgb_with(&src, (h, w), &mut got, (h2, w2), mode, aa, backend).unwrap();
                assert_eq!(got, want, "({h}, {w}) -> ({h2}, {w2}) on {backend:?}");
                let part = random_part((h2, w2), &mut rng);
                let source = Source::packed(&src, 3, (h, w)).unwrap();
                check_part(&want, (h2, w2), part, |got| {
                    resize_torch_source_part(source, None, got, (h2, w2), part, mode, aa, backend)
                });
            }
            // An image pasted on a canvas of (h, w): the bytes of resizing the canvas.
            let (image, channels, size, pad, canvas) = crate::resize::tests::pasted_case((h, w), &mut rng);
            let mut pasted = vec![0; h2 * w2 * 3];
            resize_torch_rgb_with(&canvas, (h, w), &mut pasted, (h2, w2), mode, aa, Backend::Scalar).unwrap();
            for &backend in &backends {
                let part = random_part((h2, w2), &mut rng);
                let source = Source::packed(&image, channels, size).unwrap();
                check_part(&pasted, (h2, w2), part, |got| {
                    resize_torch_source_part(source, Some(pad), got, (h2, w2), part, mode, aa, backend)
                });
            }
            // RGBX, grayscale and Pillow's blocks of rows: the bytes of packed RGB.
            if case % 3 == 0 {
                let gray: Vec<u8> = (0..h * w).map(|_| rng.below(256) as u8).collect();
                let block = 1 + rng.below(h);
                for (c, blocks) in crate::resize::tests::layouts(&src, &gray, w, block, &mut rng) {
                    let mut want = want.clone();
                    if c == 1 {
                        let packed: Vec<u8> = gray.iter().flat_map(|&g| [g; 3]).collect();
                        resize_torch_rgb_with(
                            &packed,
                            (h, w),
                            &mut want,
                            (h2, w2),
                            mode,
                            aa,
                            Backend::Scalar,
                        )
                        .unwrap();
                    }
                    let rows = crate::resize::tests::row_slices(&blocks, w, c);
                    for &backend in &backends {
                        let mut got = vec![0; want.len()];
                        let source = Source::rows(&rows, c, (h, w)).unwrap();
                        resize_torch_source_with(source, &mut got, (h2, w2), mode, aa, backend).unwrap();
                        assert_eq!(got, want, "c={c} ({h}, {w}) -> ({h2}, {w2}) on {backend:?}");
                    }
                }
            }
        }
    }

    /// torchvision's tables at the scales whose planar blocks reach past 192 bytes (RGB and
    /// RGBX, packed and in rows each ending at an unreadable page): the scalar bytes. Grey
    /// rows, read in place, up to 17x narrower without antialiasing (windows of 2 or 4
    /// taps reaching past 192 bytes): the bytes of their RGB.
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn windows_past_192_bytes_match_scalar() {
        use crate::resize::tests::{each_guarded_layout, guarded_layouts};
        if Kernel::select(Backend::Avx512).is_err() {
            return;
        }
        let mut rng = Rng(0x3c6e_f372_fe94_f82b);
        let (mut seen, mut greys) = (
            std::collections::BTreeSet::new(),
            std::collections::BTreeSet::new(),
        );
        for case in 0..400 {
            let (mode, aa) = MODES[case % MODES.len()];
            let (h, w) = (1 + rng.below(4), 100 + rng.below(600));
            // Scales 2 to 6, or (without antialiasing, whose windows keep their taps) to 12.
            let w2 = (w * 8 / (16 + rng.below(if aa { 33 } else { 81 }))).max(1);
            let h2 = if case % 2 == 0 { h } else { 1 + rng.below(4) };
            for c in [3, 4] {
                let coeffs = axis_coeffs("dst_size", w, w2, mode, aa).unwrap();
                if let Some(shape) = crate::resize::planar_shape(coeffs, c) {
                    seen.insert((c, shape));
                }
            }
            let rgb: Vec<u8> = (0..h * w * 3).map(|_| rng.below(256) as u8).collect();
            let mut want = vec![0; h2 * w2 * 3];
            resize_torch_rgb_with(&rgb, (h, w), &mut want, (h2, w2), mode, aa, Backend::Scalar).unwrap();
            each_guarded_layout(&rgb, (h, w), &mut rng, |src, c| {
                let mut got = vec![0; want.len()];
                resize_torch_source_with(src, &mut got, (h2, w2), mode, aa, Backend::Avx512).unwrap();
                assert_eq!(got, want, "{mode:?} aa={aa} c={c} ({h}, {w}) -> ({h2}, {w2})");
            });
            let w2 = (w * 8 / (16 + rng.below(if aa { 33 } else { 121 }))).max(1);
            let coeffs = axis_coeffs("dst_size", w, w2, mode, aa).unwrap();
            greys.extend(crate::resize::grey_shape(coeffs).map(|(pass, .., reach)| (pass, reach)));
            let grey: Vec<u8> = (0..h * w).map(|_| rng.below(256) as u8).collect();
            let rgb: Vec<u8> = grey.iter().flat_map(|&g| [g; 3]).collect();
            let mut want = vec![0; h2 * w2 * 3];
            resize_torch_rgb_with(&rgb, (h, w), &mut want, (h2, w2), mode, aa, Backend::Scalar).unwrap();
            guarded_layouts(&grey, 1, (h, w), |src| {
                let mut got = vec![0; want.len()];
                resize_torch_source_with(src, &mut got, (h2, w2), mode, aa, Backend::Avx512).unwrap();
                assert_eq!(got, want, "grey {mode:?} aa={aa} ({h}, {w}) -> ({h2}, {w2})");
            });
        }
        assert!(
            greys.contains(&("planar", 2)),
            "no grey planar blocks past 192 bytes: {greys:?}"
        );
        // RGBX rows as RGB packed in registers: RGBX windows past 192 bytes reach more
        // vectors than RGB ones.
        for c in [3, 4] {
            assert!(
                seen.iter()
                    .any(|&(rows, (_, _, split, far))| rows == c && !split && far == 2),
                "no planar blocks past 192 bytes for {c}-byte rows: {seen:?}"
            );
        }
    }

    #[test]
    fn rejects_zero_sizes() {
        let mut out = [0u8; 3];
        let e = resize_torch_rgb(&[], (0, 1), &mut out, (1, 1), TorchMode::Bilinear, true).unwrap_err();
        assert!(matches!(
            e,
            TransformError::InvalidArgument { arg: "src_size", .. }
        ));
        let e = resize_torch_rgb(&[1, 2, 3], (1, 1), &mut [], (1, 0), TorchMode::Bilinear, true).unwrap_err();
        assert!(matches!(
            e,
            TransformError::InvalidArgument { arg: "dst_size", .. }
        ));
    }

    #[test]
    fn rejects_wrong_buffer_lengths() {
        let mut out = [0u8; 12];
        let e = resize_torch_rgb(&[0; 5], (1, 2), &mut out, (2, 2), TorchMode::Bilinear, true).unwrap_err();
        assert_eq!(e.to_string(), "src: expected 6 bytes for 1x2x3, got 5 bytes");
        let e =
            resize_torch_rgb(&[0; 6], (1, 2), &mut out[..11], (2, 2), TorchMode::Bilinear, true).unwrap_err();
        assert!(matches!(e, TransformError::InvalidArgument { arg: "dst", .. }));
    }

    #[test]
    fn rejects_overflowing_sizes() {
        let mut out = [0u8; 3];
        let e =
            resize_torch_rgb(&[], (usize::MAX, 2), &mut out, (1, 1), TorchMode::Bilinear, true).unwrap_err();
        assert!(matches!(e, TransformError::Overflow { arg: "src_size", .. }));
    }
}
