//! Antialiased bilinear resize of interleaved RGB `u8` images, bit-exact with
//! torchvision's `resize(..., BILINEAR, antialias=True)` of a `uint8` tensor on
//! an x86 CPU with AVX2 (`ATen` `_upsample_bilinear2d_aa`, uint8 fixed-point path).
//!
//! What `ATen` does, and so what this module does:
//!
//! * Per axis, `scale = in / out` (f64). The triangle filter has support
//!   `max(scale, 1)`; output `i` has centre `scale * (i + 0.5)`, first tap
//!   `max(trunc(centre - support + 0.5), 0)`, end `min(trunc(centre + support + 0.5), in)`,
//!   raw weights `tri((tap - centre + 0.5) / max(scale, 1))`, normalised by their
//!   sum, all in f64.
//! * The f64 weights become `i16` fixed point: the precision `p` is the largest
//!   value in `0..=22` with `trunc(0.5 + w_max * 2^(p + 1)) < 2^15` not yet
//!   violated (see `axis_coeffs`), each weight is `trunc(0.5 + w * 2^p)`.
//!   The weights are at most 1, so `p >= 14`.
//! * A pass computes `(2^(p-1) + sum(w_k * x_k)) >> p` in integers and
//!   saturates to `0..=255`.
//! * The horizontal pass runs first (into a `u8` buffer), then the vertical one;
//!   a pass whose size does not change is skipped (it would be the identity),
//!   and equal sizes copy the input.
//!
//! That is Pillow's arithmetic with `p` in place of its 22 fractional bits,
//! so the passes are [`crate::resize`]'s (AVX2 when the CPU has it, scalar
//! otherwise, same bytes, split into row bands on a rayon pool) fed with
//! `ATen`'s tables. On one thread that takes 3024x4032 -> 1008x1344 from
//! 33 ms to 10.6 ms, -> 336x336 from 23 ms to 6.2 ms.

use crate::error::TransformError;
use crate::resize::{check_buffers, separable, Backend, Coeffs, Kernel};

/// Channels of the interleaved images handled here.
const CHANNELS: usize = 3;

/// `ATen`'s fixed-point taps for resizing an axis of `in_size` samples to
/// `out_size` samples, as a table for the passes of [`crate::resize`], whose
/// sums, rounding term `2^(p-1)`, shift `p` and saturation are `ATen`'s.
///
/// `ATen` pads every window to `2 * ceil(support) + 1` taps with zeros; the
/// table keeps each window's own length, which leaves every sum unchanged.
fn axis_coeffs(arg: &'static str, in_size: usize, out_size: usize) -> Result<Coeffs, TransformError> {
    let scale = in_size as f64 / out_size as f64;
    let (support, invscale) = if scale >= 1.0 {
        (scale, 1.0 / scale)
    } else {
        (1.0, 1.0)
    };

    // Every output's first tap and f64 weights, normalised; `windows[i]` is
    // (first tap, range of its weights in `float_weights`).
    let mut windows = Vec::with_capacity(out_size);
    let mut float_weights = Vec::new();
    for i in 0..out_size {
        let center = scale * (i as f64 + 0.5);
        // `as i64` truncates toward zero like the C++ cast.
        let lo = ((center - support + 0.5) as i64).max(0);
        let hi = ((center + support + 0.5) as i64).min(in_size as i64);
        let n = (hi - lo).max(0) as usize;
        let lo = lo as usize;
        let begin = float_weights.len();
        float_weights.extend((0..n).map(|j| {
            let x = (((j + lo) as f64 - center + 0.5) * invscale).abs();
            if x < 1.0 {
                1.0 - x
            } else {
                0.0
            }
        }));
        let row = &mut float_weights[begin..];
        let sum = row.iter().fold(0.0f64, |acc, &w| acc + w);
        if sum != 0.0 {
            for w in row {
                *w /= sum;
            }
        }
        windows.push((lo, begin..begin + n));
    }

    // ATen takes the maximum over its zero-padded table; the padding cannot
    // raise it since the weights are non-negative and some are positive.
    let w_max = float_weights.iter().copied().fold(0.0, f64::max);
    // The largest precision in 0..=22 whose doubled weights still fit an i16.
    // The normalised weights are at most 1, so p >= 14 and the rounding term
    // 2^(p-1) is a whole number.
    let mut precision = 0u32;
    while precision < 22 {
        let next = (0.5 + w_max * f64::from(1u32 << (precision + 1))) as i64;
        if next >= 1 << 15 {
            break;
        }
        precision += 1;
    }
    let unit = f64::from(1u32 << precision);
    let mut coeffs = Coeffs::with_precision(precision);
    for (lo, range) in windows {
        coeffs.push(
            lo,
            float_weights[range].iter().map(|&v| {
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

/// Resize HWC u8 RGB (height, width) -> (height, width) like torchvision's antialiased bilinear resize of a uint8 tensor on CPU.
///
/// `src` holds `src_size.0 * src_size.1` interleaved RGB pixels, row-major;
/// `dst` must hold exactly `dst_size.0 * dst_size.1` of them and is fully
/// overwritten. All four sizes must be at least 1.
///
/// # Errors
///
/// [`TransformError::InvalidArgument`] when a size is zero or a buffer length
/// does not match its size; [`TransformError::Overflow`] when a byte count or
/// the fixed-point sums would not fit.
pub fn resize_bilinear_antialias_rgb(
    src: &[u8],
    src_size: (usize, usize),
    dst: &mut [u8],
    dst_size: (usize, usize),
) -> Result<(), TransformError> {
    resize_bilinear_antialias_rgb_with(src, src_size, dst, dst_size, Backend::Auto)
}

/// [`resize_bilinear_antialias_rgb`] on a chosen [`Backend`]; every backend
/// gives the same bytes.
///
/// # Errors
///
/// As [`resize_bilinear_antialias_rgb`], plus
/// [`TransformError::InvalidArgument`] when `backend` is not supported by
/// this CPU.
pub fn resize_bilinear_antialias_rgb_with(
    src: &[u8],
    src_size: (usize, usize),
    dst: &mut [u8],
    dst_size: (usize, usize),
    backend: Backend,
) -> Result<(), TransformError> {
    check_buffers(src, src_size, dst, dst_size)?;
    let (in_h, in_w) = src_size;
    let (out_h, out_w) = dst_size;
    let kernel = Kernel::select(backend)?;

    // ATen skips the pass of an axis whose size is unchanged (equal sizes
    // copy the input) and runs the horizontal pass first.
    let horizontal = (in_w != out_w)
        .then(|| axis_coeffs("dst_size", in_w, out_w))
        .transpose()?;
    let vertical = (in_h != out_h)
        .then(|| axis_coeffs("dst_size", in_h, out_h))
        .transpose()?;
    if horizontal.is_some() && vertical.is_some() {
        // The intermediate holds at most `in_h` rows of the output width.
        in_h.checked_mul(out_w * CHANNELS)
            .ok_or_else(|| overflow("dst_size", "intermediate buffer size"))?;
    }
    separable(kernel, src, src_size, dst, horizontal, vertical, false);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;

    fn run(src: &[u8], s: (usize, usize), d: (usize, usize)) -> Vec<u8> {
        let mut out = vec![0u8; d.0 * d.1 * 3];
        resize_bilinear_antialias_rgb(src, s, &mut out, d).unwrap();
        out
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
        let w = axis_coeffs("t", 5, 5).unwrap();
        assert_eq!(w.precision(), 14);
        assert_eq!(w.taps(0), (0, &[16384, 0][..]));
        assert_eq!(w.taps(4), (4, &[16384][..]));
        // 4 -> 2: support 2, taps 3/7, 3/7, 1/7 -> w_max * 2^17 >= 2^15 -> precision 16.
        let w = axis_coeffs("t", 4, 2).unwrap();
        assert_eq!(w.precision(), 16);
        assert_eq!(w.taps(0), (0, &[28087, 28087, 9362][..]));
        assert_eq!(w.taps(1), (1, &[9362, 28087, 28087][..]));
    }

    #[test]
    fn every_backend_matches_scalar() {
        let mut backends = vec![Backend::Scalar];
        if Kernel::select(Backend::Avx2).is_ok() {
            backends.push(Backend::Avx2);
        }
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for case in 0..400 {
            // Tiny sizes, sizes around the SIMD block widths, and large
            // downscales whose windows span many 4-tap groups.
            let size = |rng: &mut Rng| match case % 4 {
                0 => 1 + rng.below(4),
                1 | 2 => 1 + rng.below(80),
                _ => 1 + rng.below(400),
            };
            let (h, w) = (size(&mut rng), size(&mut rng));
            let (mut h2, mut w2) = (size(&mut rng), size(&mut rng));
            // Some cases keep one axis, skipping its pass.
            if case % 7 == 0 {
                h2 = h;
            }
            if case % 11 == 0 {
                w2 = w;
            }
            let src: Vec<u8> = (0..h * w * 3).map(|_| rng.below(256) as u8).collect();
            let mut want = vec![0; h2 * w2 * 3];
            resize_bilinear_antialias_rgb_with(&src, (h, w), &mut want, (h2, w2), Backend::Scalar).unwrap();
            for &backend in &backends {
                let mut got = vec![0; want.len()];
                resize_bilinear_antialias_rgb_with(&src, (h, w), &mut got, (h2, w2), backend).unwrap();
                assert_eq!(got, want, "({h}, {w}) -> ({h2}, {w2}) on {backend:?}");
            }
        }
    }

    #[test]
    fn rejects_zero_sizes() {
        let mut out = [0u8; 3];
        let e = resize_bilinear_antialias_rgb(&[], (0, 1), &mut out, (1, 1)).unwrap_err();
        assert!(matches!(
            e,
            TransformError::InvalidArgument { arg: "src_size", .. }
        ));
        let e = resize_bilinear_antialias_rgb(&[1, 2, 3], (1, 1), &mut [], (1, 0)).unwrap_err();
        assert!(matches!(
            e,
            TransformError::InvalidArgument { arg: "dst_size", .. }
        ));
    }

    #[test]
    fn rejects_wrong_buffer_lengths() {
        let mut out = [0u8; 12];
        let e = resize_bilinear_antialias_rgb(&[0; 5], (1, 2), &mut out, (2, 2)).unwrap_err();
        assert_eq!(e.to_string(), "src: expected 6 bytes for 1x2x3, got 5 bytes");
        let e = resize_bilinear_antialias_rgb(&[0; 6], (1, 2), &mut out[..11], (2, 2)).unwrap_err();
        assert!(matches!(e, TransformError::InvalidArgument { arg: "dst", .. }));
    }

    #[test]
    fn rejects_overflowing_sizes() {
        let mut out = [0u8; 3];
        let e = resize_bilinear_antialias_rgb(&[], (usize::MAX, 2), &mut out, (1, 1)).unwrap_err();
        assert!(matches!(e, TransformError::Overflow { arg: "src_size", .. }));
    }
}
