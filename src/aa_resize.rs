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
//!   violated (see [`AxisWeights`]), each weight is `trunc(0.5 + w * 2^p)`.
//! * A pass computes `(2^(p-1) + sum(w_k * x_k)) >> p` in integers and
//!   saturates to `0..=255`.
//! * The horizontal pass runs first (into a `u8` buffer), then the vertical one;
//!   a pass whose size does not change is skipped (it would be the identity),
//!   and equal sizes copy the input.

use crate::error::{invalid, TransformError};

/// Channels of the interleaved images handled here.
const CHANNELS: usize = 3;

/// Fixed-point taps of one axis: for every output index, where its input
/// window starts and its integer weights.
///
/// Every window has the same length `taps = min(max_interp_size, in_size)`:
/// `ATen`'s variable-length windows are zero padded, and a window that would run
/// past the end is moved left with its weights shifted right (leading zeros),
/// which leaves every integer sum unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AxisWeights {
    /// First input index of each output's window (`start + taps <= in_size`).
    start: Vec<usize>,
    /// Window length shared by all outputs.
    taps: usize,
    /// `i16` weights widened to `i32`, `taps` per output.
    weights: Vec<i32>,
    /// Fixed-point precision `p`: a pass shifts its sums right by `p`.
    precision: u32,
}

impl AxisWeights {
    /// Taps for resizing an axis of `in_size` samples to `out_size` samples.
    fn new(arg: &'static str, in_size: usize, out_size: usize) -> Result<Self, TransformError> {
        let scale = in_size as f64 / out_size as f64;
        let (support, invscale) = if scale >= 1.0 {
            (scale, 1.0 / scale)
        } else {
            (1.0, 1.0)
        };
        let stride = (support.ceil() as usize)
            .checked_mul(2)
            .and_then(|v| v.checked_add(1))
            .ok_or_else(|| overflow(arg, "filter width"))?;
        let total = out_size
            .checked_mul(stride)
            .ok_or_else(|| overflow(arg, "weight table size"))?;

        let mut bounds = Vec::with_capacity(out_size);
        let mut float_weights = vec![0.0f64; total];
        for (i, row) in float_weights.chunks_exact_mut(stride).enumerate() {
            let center = scale * (i as f64 + 0.5);
            // `as i64` truncates toward zero like the C++ cast.
            let lo = ((center - support + 0.5) as i64).max(0);
            let hi = ((center + support + 0.5) as i64).min(in_size as i64);
            let n = (hi - lo).max(0) as usize;
            let lo = lo as usize;
            let mut sum = 0.0f64;
            for (j, w) in row.iter_mut().take(n).enumerate() {
                let x = (((j + lo) as f64 - center + 0.5) * invscale).abs();
                *w = if x < 1.0 { 1.0 - x } else { 0.0 };
                sum += *w;
            }
            if sum != 0.0 {
                for w in row.iter_mut().take(n) {
                    *w /= sum;
                }
            }
            bounds.push((lo, n));
        }

        let w_max = float_weights
            .iter()
            .copied()
            .fold(float_weights[0], |m, v| if m < v { v } else { m });
        let mut precision = 0u32;
        while precision < 22 {
            let next = (0.5 + w_max * f64::from(1u32 << (precision + 1))) as i64;
            if next >= 1 << 15 {
                break;
            }
            precision += 1;
        }
        let unit = f64::from(1u32 << precision);
        let taps = stride.min(in_size);
        let mut start = Vec::with_capacity(out_size);
        let mut weights = vec![0i32; out_size * taps];
        for ((&(lo, n), row), out) in bounds
            .iter()
            .zip(float_weights.chunks_exact(stride))
            .zip(weights.chunks_exact_mut(taps))
        {
            // n <= min(stride, in_size) = taps, so the window fits after the shift.
            let shift = (lo + taps).saturating_sub(in_size);
            start.push(lo - shift);
            for (&v, q) in row[..n].iter().zip(&mut out[shift..shift + n]) {
                // The C++ stores `(int)` of these into an int16_t.
                let r = if v < 0.0 {
                    (-0.5 + v * unit) as i32
                } else {
                    (0.5 + v * unit) as i32
                };
                *q = i32::from(r as i16);
            }
        }

        // The sums run in i32 like ATen's; refuse tables whose worst case
        // (every tap at 255) would not fit.
        let bias = 1i64 << (precision - 1);
        for row in weights.chunks_exact(taps) {
            let abs_sum: i64 = row.iter().map(|&w| i64::from(w).abs()).sum();
            if bias + 255 * abs_sum > i64::from(i32::MAX) {
                return Err(overflow(arg, "fixed-point accumulator"));
            }
        }

        Ok(Self {
            start,
            taps,
            weights,
            precision,
        })
    }

    /// Rounding bias added to every sum before the shift.
    fn bias(&self) -> i32 {
        1 << (self.precision - 1)
    }
}

fn overflow(arg: &'static str, what: &str) -> TransformError {
    TransformError::Overflow {
        arg,
        what: what.to_string(),
    }
}

/// `height * width * 3`, or an overflow error naming `arg`.
fn rgb_len(arg: &'static str, (height, width): (usize, usize)) -> Result<usize, TransformError> {
    height
        .checked_mul(width)
        .and_then(|v| v.checked_mul(CHANNELS))
        .ok_or_else(|| overflow(arg, "height * width * 3"))
}

#[inline]
fn to_u8(acc: i32, precision: u32) -> u8 {
    (acc >> precision).clamp(0, 255) as u8
}

/// Horizontal pass: `src` is `rows x in_w` RGB, `dst` is `rows x out_w` RGB.
fn horizontal(src: &[u8], in_w: usize, dst: &mut [u8], out_w: usize, wts: &AxisWeights) {
    match wts.taps {
        1 => horizontal_n::<1>(src, in_w, dst, out_w, wts),
        2 => horizontal_n::<2>(src, in_w, dst, out_w, wts),
        3 => horizontal_n::<3>(src, in_w, dst, out_w, wts),
        4 => horizontal_n::<4>(src, in_w, dst, out_w, wts),
        5 => horizontal_n::<5>(src, in_w, dst, out_w, wts),
        6 => horizontal_n::<6>(src, in_w, dst, out_w, wts),
        7 => horizontal_n::<7>(src, in_w, dst, out_w, wts),
        _ => horizontal_any(src, in_w, dst, out_w, wts),
    }
}

/// [`horizontal`] for windows of exactly `N` taps (unrolled by the compiler).
fn horizontal_n<const N: usize>(src: &[u8], in_w: usize, dst: &mut [u8], out_w: usize, wts: &AxisWeights) {
    let bias = wts.bias();
    let p = wts.precision;
    for (src_row, dst_row) in src
        .chunks_exact(in_w * CHANNELS)
        .zip(dst.chunks_exact_mut(out_w * CHANNELS))
    {
        for ((out, &lo), k) in dst_row
            .chunks_exact_mut(CHANNELS)
            .zip(&wts.start)
            .zip(wts.weights.chunks_exact(N))
        {
            let win = &src_row[lo * CHANNELS..(lo + N) * CHANNELS];
            let (mut r, mut g, mut b) = (bias, bias, bias);
            for t in 0..N {
                let w = k[t];
                r += w * i32::from(win[t * CHANNELS]);
                g += w * i32::from(win[t * CHANNELS + 1]);
                b += w * i32::from(win[t * CHANNELS + 2]);
            }
            out[0] = to_u8(r, p);
            out[1] = to_u8(g, p);
            out[2] = to_u8(b, p);
        }
    }
}

/// [`horizontal`] for any window length.
fn horizontal_any(src: &[u8], in_w: usize, dst: &mut [u8], out_w: usize, wts: &AxisWeights) {
    let bias = wts.bias();
    let p = wts.precision;
    let n = wts.taps;
    for (src_row, dst_row) in src
        .chunks_exact(in_w * CHANNELS)
        .zip(dst.chunks_exact_mut(out_w * CHANNELS))
    {
        for ((out, &lo), k) in dst_row
            .chunks_exact_mut(CHANNELS)
            .zip(&wts.start)
            .zip(wts.weights.chunks_exact(n))
        {
            let win = &src_row[lo * CHANNELS..(lo + n) * CHANNELS];
            let (mut r, mut g, mut b) = (bias, bias, bias);
            for (&w, px) in k.iter().zip(win.chunks_exact(CHANNELS)) {
                r += w * i32::from(px[0]);
                g += w * i32::from(px[1]);
                b += w * i32::from(px[2]);
            }
            out[0] = to_u8(r, p);
            out[1] = to_u8(g, p);
            out[2] = to_u8(b, p);
        }
    }
}

/// Vertical pass: `src` is `in_h x row_len` bytes, `dst` is `out_h x row_len`.
/// `acc` is scratch of `row_len` sums.
fn vertical(src: &[u8], row_len: usize, dst: &mut [u8], wts: &AxisWeights, acc: &mut [i32]) {
    let bias = wts.bias();
    let p = wts.precision;
    for (y, dst_row) in dst.chunks_exact_mut(row_len).enumerate() {
        let lo = wts.start[y];
        let k = &wts.weights[y * wts.taps..(y + 1) * wts.taps];
        acc.fill(bias);
        for (j, &w) in k.iter().enumerate() {
            if w == 0 {
                // Padding taps (and exact zeros) add nothing to the sum.
                continue;
            }
            let src_row = &src[(lo + j) * row_len..(lo + j + 1) * row_len];
            for (a, &v) in acc.iter_mut().zip(src_row) {
                *a += w * i32::from(v);
            }
        }
        for (d, &a) in dst_row.iter_mut().zip(acc.iter()) {
            *d = to_u8(a, p);
        }
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
    let (in_h, in_w) = src_size;
    let (out_h, out_w) = dst_size;
    if in_h == 0 || in_w == 0 {
        return Err(invalid(
            "src_size",
            "height and width of at least 1",
            format!("({in_h}, {in_w})"),
        ));
    }
    if out_h == 0 || out_w == 0 {
        return Err(invalid(
            "dst_size",
            "height and width of at least 1",
            format!("({out_h}, {out_w})"),
        ));
    }
    let src_len = rgb_len("src_size", src_size)?;
    let dst_len = rgb_len("dst_size", dst_size)?;
    if src.len() != src_len {
        return Err(invalid(
            "src",
            format!("{src_len} bytes ({in_h} x {in_w} x 3)"),
            src.len(),
        ));
    }
    if dst.len() != dst_len {
        return Err(invalid(
            "dst",
            format!("{dst_len} bytes ({out_h} x {out_w} x 3)"),
            dst.len(),
        ));
    }

    let need_h = in_w != out_w;
    let need_v = in_h != out_h;
    match (need_h, need_v) {
        (false, false) => dst.copy_from_slice(src),
        (true, false) => {
            let wx = AxisWeights::new("dst_size", in_w, out_w)?;
            horizontal(src, in_w, dst, out_w, &wx);
        }
        (false, true) => {
            let wy = AxisWeights::new("dst_size", in_h, out_h)?;
            let row_len = in_w * CHANNELS;
            let mut acc = vec![0i32; row_len];
            vertical(src, row_len, dst, &wy, &mut acc);
        }
        (true, true) => {
            let wx = AxisWeights::new("dst_size", in_w, out_w)?;
            let wy = AxisWeights::new("dst_size", in_h, out_h)?;
            let row_len = out_w * CHANNELS;
            let tmp_len = in_h
                .checked_mul(row_len)
                .ok_or_else(|| overflow("dst_size", "intermediate buffer size"))?;
            let mut tmp = vec![0u8; tmp_len];
            horizontal(src, in_w, &mut tmp, out_w, &wx);
            let mut acc = vec![0i32; row_len];
            vertical(&tmp, row_len, dst, &wy, &mut acc);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let w = AxisWeights::new("t", 5, 5).unwrap();
        assert_eq!(w.precision, 14);
        assert_eq!(w.taps, 3);
        assert_eq!(&w.weights[..3], &[16384, 0, 0]);
        assert_eq!(w.start[4], 2);
        assert_eq!(&w.weights[12..], &[0, 0, 16384]);
        // 4 -> 2: support 2, taps 3/7, 3/7, 1/7 -> w_max * 2^17 >= 2^15 -> precision 16.
        let w = AxisWeights::new("t", 4, 2).unwrap();
        assert_eq!(w.precision, 16);
        // ATen: starts [0, 1], 3 taps each; here windows of 4, the last moved left.
        assert_eq!(w.taps, 4);
        assert_eq!(w.start, [0, 0]);
        assert_eq!(w.weights, [28087, 28087, 9362, 0, 0, 9362, 28087, 28087]);
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
        assert_eq!(e.to_string(), "src: expected 6 bytes (1 x 2 x 3), got 5");
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
