//! `transforms::Normalize::new` with untrusted mean / std / rescale factor (NaN, infinities,
//! zero, subnormals, values that overflow float32), and the kernels that write through it:
//! `deinterleave_rgb_to_planes` and `pad_and_normalize_to_tensor` (public in Python, with
//! the caller's mean/std/rescale_factor), `crop_and_normalize` and `normalize_to_patches`
//! (the batch layouts, here with arbitrary windows and patch parameters).
//!
//! Checks: `Normalize::new` accepts exactly a finite rescale factor and means/stds finite
//! (std non-zero) once rounded to float32, as documented; every output value is bit-equal
//! to transformers' arithmetic `(float32(float64(x) * rescale) - float32(mean)) /
//! float32(std)` of the right pixel (of black outside the image), laid out as HF's
//! reshape/transpose does it; and wrong lengths are refused.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use mmfast::alloc::Memory;
use mmfast::transforms::{
    crop_and_normalize, deinterleave_rgb_to_planes, normalize_to_patches, pad_and_normalize_to_tensor,
    Normalize, Patches, Window,
};
use mmfast_fuzz::{size, Fill};

/// A float64 parameter as Python could pass it.
#[derive(Debug, Arbitrary)]
enum Param {
    /// A usual value: k / 1000.
    Usual(i16),
    Special(u8),
    Bits(u64),
}

impl Param {
    fn value(&self) -> f64 {
        const SPECIAL: [f64; 14] = [
            0.0,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e-300, // zero once rounded to float32
            1e300,  // infinite once rounded to float32
            f32::MAX as f64 * 1.000_000_1,
            1e-45, // the smallest float32 subnormal
            f64::MIN_POSITIVE,
            f64::MAX,
            1.0 / 255.0,
            -1.0,
            255.0,
        ];
        match *self {
            Param::Usual(k) => f64::from(k) / 1000.0,
            Param::Special(i) => SPECIAL[usize::from(i) % SPECIAL.len()],
            Param::Bits(b) => f64::from_bits(b),
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Op {
    Planes,
    /// Canvas = image + extra (negative: smaller than the image, an error).
    Pad(i8, i8),
    Window {
        top: i16,
        left: i16,
        height: u8,
        width: u8,
    },
    /// Offsets at or near the ends of `isize`.
    FarWindow {
        top: u8,
        left: u8,
        height: u8,
        width: u8,
    },
    /// Patch parameters 1..=4 (`frames` 1 or `t`), snapped image sides.
    Patches {
        p: u8,
        t: u8,
        m: u8,
        time_major: bool,
        video: bool,
    },
    /// Arbitrary patch parameters.
    RawPatches {
        p: u64,
        t: u64,
        m: u64,
        time_major: bool,
    },
}

#[derive(Debug, Arbitrary)]
struct Input {
    mean: [Param; 3],
    std: [Param; 3],
    rescale: Param,
    #[arbitrary(with = |u: &mut Unstructured| size(u, 96, 1 << 12))]
    size: (usize, usize),
    fill: Fill,
    op: Op,
    /// Make the destination this much longer or shorter (0: exact).
    dst_delta: i8,
}

fn scalar(x: u8, c: usize, mean: [f64; 3], std: [f64; 3], rescale: f64) -> f32 {
    ((f64::from(x) * rescale) as f32 - mean[c] as f32) / std[c] as f32
}

/// The value expected at (c, y, x) of a window on the image: the pixel there, else black.
fn window_reference(
    src: &[u8],
    (h, w): (usize, usize),
    win: Window,
    f: impl Fn(u8, usize) -> f32,
) -> Vec<f32> {
    let mut out = Vec::with_capacity(3 * win.height * win.width);
    for c in 0..3 {
        for y in 0..win.height {
            for x in 0..win.width {
                let sy = win.top.checked_add(y as isize);
                let sx = win.left.checked_add(x as isize);
                let px = match (sy, sx) {
                    (Some(sy), Some(sx))
                        if (0..h as isize).contains(&sy) && (0..w as isize).contains(&sx) =>
                    {
                        src[(sy as usize * w + sx as usize) * 3 + c]
                    }
                    _ => 0,
                };
                out.push(f(px, c));
            }
        }
    }
    out
}

/// HF's patchify, index by index: rows by merge group, then patch within it; each row
/// (channel, time, y, x), time slot `i` reading frame `i` (or the only frame).
fn patches_reference(
    frames: &[Vec<u8>],
    (h, w): (usize, usize),
    p: Patches,
    f: impl Fn(u8, usize) -> f32,
) -> Vec<f32> {
    let (ps, t, m) = (p.patch_size, p.temporal_patch_size, p.merge_size);
    let (gh, gw) = (h / ps, w / ps);
    let mut out = Vec::with_capacity(gh * gw * 3 * t * ps * ps);
    for bh in 0..gh / m {
        for bw in 0..gw / m {
            for mh in 0..m {
                for mw in 0..m {
                    let blocks: Vec<(usize, usize)> = if p.time_major {
                        (0..t).flat_map(|ti| (0..3).map(move |c| (c, ti))).collect()
                    } else {
                        (0..3).flat_map(|c| (0..t).map(move |ti| (c, ti))).collect()
                    };
                    for (c, ti) in blocks {
                        let frame = &frames[ti % frames.len()];
                        for y in 0..ps {
                            for x in 0..ps {
                                let (sy, sx) = ((bh * m + mh) * ps + y, (bw * m + mw) * ps + x);
                                out.push(f(frame[(sy * w + sx) * 3 + c], c));
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

fn same(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn resized(len: usize, delta: i8) -> usize {
    len.saturating_add_signed(isize::from(delta))
}

const FAR: [isize; 8] = [
    isize::MIN,
    isize::MIN + 1,
    -isize::MAX + (1 << 40),
    -(1 << 40),
    -1,
    1 << 40,
    isize::MAX - 1,
    isize::MAX,
];

/// The window of a window operation.
fn window_of(op: &Op) -> Option<Window> {
    match *op {
        Op::FarWindow {
            top,
            left,
            height,
            width,
        } => Some(Window {
            top: FAR[usize::from(top) % FAR.len()],
            left: FAR[usize::from(left) % FAR.len()],
            height: usize::from(height % 8),
            width: usize::from(width % 8),
        }),
        Op::Window {
            top,
            left,
            height,
            width,
        } => Some(Window {
            top: isize::from(top % 128),
            left: isize::from(left % 128),
            height: usize::from(height % 128),
            width: usize::from(width % 128),
        }),
        _ => None,
    }
}

fuzz_target!(|input: Input| {
    let mean = input.mean.each_ref().map(Param::value);
    let std = input.std.each_ref().map(Param::value);
    let rescale = input.rescale.value();
    let result = Normalize::new(mean, std, rescale);
    let valid = rescale.is_finite()
        && mean.iter().all(|&m| (m as f32).is_finite())
        && std.iter().all(|&s| (s as f32).is_finite() && s as f32 != 0.0);
    assert_eq!(
        result.is_ok(),
        valid,
        "mean {mean:?} std {std:?} rescale {rescale:?}"
    );
    let Ok(norm) = result else { return };
    let f = |x: u8, c: usize| scalar(x, c, mean, std, rescale);
    let (h, w) = input.size;
    let src = input.fill.bytes(h * w * 3);
    let delta = input.dst_delta;
    match input.op {
        Op::Planes => {
            let mut dst = vec![f32::NAN; resized(3 * h * w, delta)];
            let r = deinterleave_rgb_to_planes(&src, (h, w), &norm, &mut dst);
            assert_eq!(r.is_ok(), delta == 0, "{r:?}");
            if delta == 0 {
                let window = Window {
                    top: 0,
                    left: 0,
                    height: h,
                    width: w,
                };
                assert!(same(&dst, &window_reference(&src, (h, w), window, f)));
            }
        }
        Op::Pad(eh, ew) => {
            let canvas = (
                h.saturating_add_signed(eh.into()),
                w.saturating_add_signed(ew.into()),
            );
            let mut dst = vec![f32::NAN; resized(3 * canvas.0 * canvas.1, delta)];
            let r = pad_and_normalize_to_tensor(&src, (h, w), canvas, &norm, &mut dst);
            let fits = canvas.0 >= h && canvas.1 >= w;
            assert_eq!(r.is_ok(), fits && delta == 0, "{r:?}");
            if r.is_ok() {
                let window = Window {
                    top: 0,
                    left: 0,
                    height: canvas.0,
                    width: canvas.1,
                };
                assert!(same(&dst, &window_reference(&src, (h, w), window, f)));
            }
        }
        Op::Window { .. } | Op::FarWindow { .. } => {
            let window = window_of(&input.op).unwrap();
            let mut dst = vec![f32::NAN; resized(3 * window.height * window.width, delta)];
            let r = crop_and_normalize(&src, (h, w), window, &norm, &mut dst);
            let ok = window.height > 0 && window.width > 0 && delta == 0;
            assert_eq!(r.is_ok(), ok, "{window:?}: {r:?}");
            if ok {
                assert!(
                    same(&dst, &window_reference(&src, (h, w), window, f)),
                    "{window:?}"
                );
            }
        }
        Op::Patches {
            p,
            t,
            m,
            time_major,
            video,
        } => {
            let p = Patches {
                patch_size: 1 + usize::from(p % 4),
                temporal_patch_size: 1 + usize::from(t % 4),
                merge_size: 1 + usize::from(m % 4),
                time_major,
            };
            let unit = p.patch_size * p.merge_size;
            // Usually sides the layout accepts, sometimes the image as it is.
            let size = if delta % 4 == 0 {
                (h / unit * unit, w / unit * unit)
            } else {
                (h, w)
            };
            let n = if video { p.temporal_patch_size } else { 1 };
            let frames: Vec<Vec<u8>> = (0..n)
                .map(|i| match input.fill {
                    Fill::Noise(seed) => Fill::Noise(seed.wrapping_add(i as u32)).bytes(size.0 * size.1 * 3),
                    fill => fill.bytes(size.0 * size.1 * 3),
                })
                .collect();
            let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            let len = (size.0 / p.patch_size) * (size.1 / p.patch_size) * p.row_len().unwrap();
            let mut dst = vec![f32::NAN; len];
            let r = normalize_to_patches(&refs, size, p, &norm, &mut dst, Memory::Used);
            let ok = size.0 > 0 && size.1 > 0 && size.0 % unit == 0 && size.1 % unit == 0;
            assert_eq!(r.is_ok(), ok, "{p:?} {size:?}: {r:?}");
            if ok {
                assert!(
                    same(&dst, &patches_reference(&frames, size, p, f)),
                    "{p:?} {size:?}"
                );
            }
        }
        Op::RawPatches { p, t, m, time_major } => {
            let p = Patches {
                patch_size: p as usize,
                temporal_patch_size: t as usize,
                merge_size: m as usize,
                time_major,
            };
            // Any destination length up to a small bound: only panics matter here.
            let mut dst = vec![f32::NAN; usize::from(delta.unsigned_abs()) * 12];
            let _ = normalize_to_patches(&[&src], (h, w), p, &norm, &mut dst, Memory::Used);
        }
    }
});
