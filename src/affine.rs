//! Float32 tables that are transformers' normalisation arithmetic, computed instead of
//! looked up: 8 values at a time with AVX2 and FMA, 16 with AVX-512 (planes, where VBMI
//! permutes each channel's bytes out of the pixels).
//!
//! transformers normalises in float32: its torchvision backend as `(float32(x) - mean) / std`
//! per channel (mean and std already scaled by `1 / rescale_factor`), its Pillow backend as
//! `(float32(x / 255) - mean) / std`. Where a table holds exactly such values, the vector
//! arithmetic gives the same bits. On CPUs without AVX-512 VBMI (where [`crate::lookup`]
//! does the lookup), one scalar load per value was the cost of the table: on a Zen 3 EPYC
//! (AVX2), normalising a 640x32 band took 29 us looked up against 11 us computed for
//! torchvision's tables and 15.5 us for Pillow's (AVX2's gather was slower than the scalar
//! loads: 0.45 ms against 0.33-0.44 ms for a whole 640x480 image). A Qwen3-VL torchvision
//! call on a 640x480 image went from 0.85-0.95 ms to 0.66-0.99 ms (one thread, 2 s of calls
//! each, three interleaved rounds, on a noisy VM). Where the CPU has AVX-512 VBMI, sixteen
//! values a vector outran the VBMI lookup too (see [`Affine::run`]). The mean, std and
//! divisor are found from the table itself and then checked on all 256 entries of each
//! channel, so no caller has to say how its tables were made, and a table of any other
//! arithmetic is looked up.

use std::convert::Infallible;
use std::sync::Mutex;

use crate::cache::{cached, Cache};

/// Per-channel `mean` and `std`, and a `divisor` (none, or 255), whose float32
/// arithmetic [`value`] gives every entry of a table, on a CPU with AVX2 and FMA.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Affine {
    divisor: Option<f32>,
    mean: [f32; 3],
    std: [f32; 3],
}

/// A loop of [`Affine::run`] on `pixels` pixels: `(affine, src, outs, pixels)`.
type Kernel = unsafe fn(&Affine, *const u8, [*mut f32; 3], usize);

/// The divisors [`Affine::find`] tries: none (torchvision's tables), and 255, transformers'
/// Pillow-backend rescale (`float32(float64(x) * (1 / 255))`, which equals `x / 255`
/// correctly rounded for every byte).
const DIVISORS: [Option<f32>; 2] = [None, Some(255.0)];

/// How many float32 steps either side of the estimates [`fit`] tries. Over 20,000 random
/// (mean, std) pairs (mean in 0-1, std in 0.1-1.1, scaled by 255), 2 found every one and
/// 1 all but 63; a table of other arithmetic is refused within 46 entries.
const STEPS: i32 = 2;

/// What [`Affine::find`] found for the tables (as bits) it saw last.
static FOUND: Cache<[u32; 3 * 256], Option<Affine>> = Mutex::new(Vec::new());

impl Affine {
    /// The arithmetic of `tables` (channel `c`'s 256 values at `tables[256 * c..]`), or `None`
    /// when a channel is not [`value`] for a divisor of [`DIVISORS`] and any mean and std
    /// near those its end values imply, or the CPU lacks AVX2 or FMA. Kept for the last
    /// tables seen: a call's tables are those of the call before, and checking them took
    /// 6-11 us.
    pub(crate) fn find(tables: &[f32]) -> Option<Affine> {
        if tables.len() != 3 * 256 || !avx2::detected() {
            return None;
        }
        let key: [u32; 3 * 256] = std::array::from_fn(|i| tables[i].to_bits());
        let Ok(found) = cached(&FOUND, key, || {
            Ok::<_, Infallible>(DIVISORS.into_iter().find_map(|divisor| {
                let mut mean = [0f32; 3];
                let mut std = [0f32; 3];
                for (c, table) in tables.chunks_exact(256).enumerate() {
                    (mean[c], std[c]) = fit(table.try_into().expect("256 values"), divisor)?;
                }
                Some(Affine { divisor, mean, std })
            }))
        });
        *found
    }

    /// Writes the value of each of `src`'s pixels (`channels` bytes: 3 for RGB, 4 for RGBX
    /// whose fourth byte is unread, 1 for grayscale, its value in every channel) into `r`,
    /// `g` and `b`, as many as `src` and the three planes hold: 16 pixels at a time and the
    /// rest through masks with AVX-512 VBMI, else 8 at a time. Returns the number of pixels
    /// written (without AVX-512, the whole blocks of 8; the caller looks up the rest).
    ///
    /// The sixteen-value loop took 0.092-0.096 ns a value against the VBMI lookup's
    /// 0.096-0.123 ns on a 2-vCPU Zen 4 EPYC (rows of 644 and 1932 RGB pixels into planes
    /// in cache, and a 640x480 image), where the eight-value loop matched the lookup.
    pub(crate) fn run(
        &self,
        src: &[u8],
        channels: usize,
        r: &mut [f32],
        g: &mut [f32],
        b: &mut [f32],
    ) -> usize {
        self.run_on(avx512::detected(), src, channels, [r, g, b])
    }

    /// [`Affine::run`] sixteen values a vector when `wide` (the CPU has AVX-512 VBMI),
    /// else eight.
    fn run_on(&self, wide: bool, src: &[u8], channels: usize, planes: [&mut [f32]; 3]) -> usize {
        /// The loop for pixels of `C` bytes, `SCALED` with a divisor, 16 or 8 values a
        /// vector.
        fn pick<const C: usize, const SCALED: bool>(wide: bool) -> Kernel {
            if wide {
                avx512::run::<C, SCALED>
            } else {
                avx2::run::<C, SCALED>
            }
        }
        assert!(matches!(channels, 1 | 3 | 4), "1, 3 or 4 bytes a pixel");
        let kernel = match (channels, self.divisor.is_some()) {
            (1, false) => pick::<1, false>(wide),
            (3, false) => pick::<3, false>(wide),
            (_, false) => pick::<4, false>(wide),
            (1, true) => pick::<1, true>(wide),
            (3, true) => pick::<3, true>(wide),
            (_, true) => pick::<4, true>(wide),
        };
        let pixels = (src.len() / channels).min(planes.iter().map(|p| p.len()).min().unwrap_or(0));
        let pixels = if wide { pixels } else { pixels / 8 * 8 };
        let outs = planes.map(<[f32]>::as_mut_ptr);
        // SAFETY: an `Affine` exists only where AVX2 and FMA were detected, and the caller
        // detected AVX-512F, BW and VBMI for `wide`; `pixels` pixels lie inside `src` and
        // each plane, as computed above.
        unsafe { kernel(self, src.as_ptr(), outs, pixels) };
        pixels
    }

    /// Writes runs of interleaved RGB bytes into `dst`, interleaved the same way: each run
    /// `(from, to, len)` (`from` a red byte) writes `dst[to..to + len]`, value `i` of the
    /// run channel `i % 3`'s. Eight values at a time; the last `len % 8` of a run are
    /// entries of `tables` (channel `c`'s 256 at `tables[256 * c..]`), which these tables
    /// are (see [`Affine::find`]).
    ///
    /// # Panics
    /// When `tables` is not three tables, or a run reaches past `src` or `dst`.
    pub(crate) fn run_interleaved(
        &self,
        tables: &[f32],
        src: &[u8],
        dst: &mut [f32],
        runs: &[(usize, usize, usize)],
    ) {
        assert_eq!(tables.len(), 3 * 256, "three tables of 256 values");
        let len = dst.len();
        // SAFETY: an `Affine` exists only where AVX2 and FMA were detected; `dst` is one part.
        unsafe { self.interleaved::<false>(tables, src, dst, runs, (1, len)) };
    }

    /// [`Affine::run_interleaved`] into each of the `copies` equal parts of `dst` (the runs'
    /// `to` counted in the first) with streaming stores, which the caller fences
    /// (`crate::stream::fence`) before `dst` is read; or `false`, nothing written, unless
    /// every run is whole blocks of eight values at 16-byte aligned addresses of every part
    /// (streaming stores write only those, and a run's tail would leave part of a line).
    ///
    /// # Panics
    /// When `dst` is not `copies` (at least one) equal parts, or a run reaches past `src` or
    /// the first part.
    pub(crate) fn stream_interleaved(
        &self,
        src: &[u8],
        dst: &mut [f32],
        runs: &[(usize, usize, usize)],
        copies: usize,
    ) -> bool {
        assert!(
            copies > 0 && dst.len().is_multiple_of(copies),
            "{} values in {copies} equal parts",
            dst.len()
        );
        let part = dst.len() / copies;
        let base = dst.as_ptr() as usize;
        // Each run's blocks aligned in the first part, and the parts a multiple of 16 bytes
        // apart, so in every part.
        let aligned = |to: usize| (base + 4 * to).is_multiple_of(16);
        let apart = copies == 1 || (4 * part).is_multiple_of(16);
        if !(apart && runs.iter().all(|&(_, to, len)| len % 8 == 0 && aligned(to))) {
            return false;
        }
        // SAFETY: an `Affine` exists only where AVX2 and FMA were detected; `dst` is `copies`
        // parts of `part` values, every block of a run 16-byte aligned in each (checked
        // above), and no run has a tail for the (unused) tables.
        unsafe { self.interleaved::<true>(&[], src, dst, runs, (copies, part)) };
        true
    }

    /// The two above.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; `dst` must be `copies` parts of `part` values;
    /// with `STREAM`, every run's blocks 16-byte aligned in each part and no run a tail.
    unsafe fn interleaved<const STREAM: bool>(
        &self,
        tables: &[f32],
        src: &[u8],
        dst: &mut [f32],
        runs: &[(usize, usize, usize)],
        parts: (usize, usize),
    ) {
        // SAFETY: as the caller guarantees.
        unsafe {
            if self.divisor.is_some() {
                avx2::run_interleaved::<true, STREAM>(self, tables, src, dst, runs, parts);
            } else {
                avx2::run_interleaved::<false, STREAM>(self, tables, src, dst, runs, parts);
            }
        }
    }
}

/// `a / b` in float32 from `recip`, `1 / b` rounded: the product corrected by its residual,
/// two fused multiply-adds (Markstein's correction). It gave the correctly rounded quotient
/// for every table of 20,000 random (mean, std) pairs, torch's and Pillow's, and [`fit`]
/// checks it on every entry anyway; one `vdivps` cost more than the three operations.
fn divide(a: f32, b: f32, recip: f32) -> f32 {
    let q = a * recip;
    (-q).mul_add(b, a).mul_add(recip, q)
}

/// The value of byte `x`: `(x / divisor - mean) / std` in float32 (`x - mean` without a
/// divisor), each division as [`divide`] makes it. The scalar twin of the vector loop.
fn value(x: usize, divisor: Option<f32>, mean: f32, std: f32) -> f32 {
    let x = x as f32;
    let v = divisor.map_or(x, |d| divide(x, d, 1.0 / d));
    divide(v - mean, std, 1.0 / std)
}

/// The mean and std of one channel's table, if it is [`value`] of `divisor` and them. The
/// end values give estimates (`table[0] = -mean / std`, `table[255] - table[0] =
/// (255 / divisor) / std`, each off by a rounding or two); the float32 values up to [`STEPS`]
/// steps from them are checked on every entry, the ends and middle first, where a wrong pair
/// fails soonest.
fn fit(table: &[f32; 256], divisor: Option<f32>) -> Option<(f32, f32)> {
    let span = f64::from(table[255]) - f64::from(table[0]);
    let std = (f64::from(value(255, divisor, 0.0, 1.0)) / span) as f32;
    let mean = (-f64::from(table[0]) * f64::from(std)) as f32;
    if !(std.is_finite() && mean.is_finite()) || std == 0.0 {
        return None;
    }
    let order = [0, 255, 128, 1, 254].into_iter().chain(0..256);
    let offsets = || (-STEPS..=STEPS).map(|k| (k.abs(), k));
    let mut candidates: Vec<(i32, f32, f32)> = offsets()
        .flat_map(|(ds, s)| offsets().map(move |(dm, m)| (ds + dm, step(mean, m), step(std, s))))
        .collect();
    candidates.sort_by_key(|&(distance, _, _)| distance);
    candidates.into_iter().map(|(_, m, s)| (m, s)).find(|&(m, s)| {
        s != 0.0
            && order
                .clone()
                .all(|x| value(x, divisor, m, s).to_bits() == table[x].to_bits())
    })
}

/// The float32 `k` steps (representable values) from `v` along its bit pattern.
fn step(v: f32, k: i32) -> f32 {
    f32::from_bits(v.to_bits().wrapping_add_signed(k))
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::{
        __m128i, __m256, _mm256_castps256_ps128, _mm256_cvtepi32_ps, _mm256_cvtepu8_epi32,
        _mm256_extractf128_ps, _mm256_fmadd_ps, _mm256_fnmadd_ps, _mm256_mul_ps, _mm256_set1_ps,
        _mm256_setr_ps, _mm256_storeu_ps, _mm256_sub_ps, _mm_loadl_epi64, _mm_loadu_si128, _mm_or_si128,
        _mm_shuffle_epi8, _mm_stream_ps,
    };

    use super::Affine;

    pub(super) fn detected() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }

    /// [`super::divide`] of 8 values.
    #[target_feature(enable = "avx2,fma")]
    fn divide(a: __m256, b: __m256, recip: __m256) -> __m256 {
        let q = _mm256_mul_ps(a, recip);
        _mm256_fmadd_ps(_mm256_fnmadd_ps(q, b, a), recip, q)
    }

    /// For each channel of 8 pixels of `C` bytes loaded as two 16-byte registers (bytes 0-15
    /// and `8C - 16` on), the `pshufb` of each that moves the channel's 8 bytes to bytes 0-7
    /// (bytes a register does not hold are zeroed, so the two results are OR-ed).
    const fn shuffles<const C: usize>() -> [[[i8; 16]; 2]; 3] {
        let mut lanes = [[[-1i8; 16]; 2]; 3];
        let second = 8 * C - 16;
        let mut c = 0;
        while c < 3 {
            let mut p = 0;
            while p < 8 {
                let at = C * p + c;
                if at < 16 {
                    lanes[c][0][p] = at as i8;
                } else {
                    lanes[c][1][p] = (at - second) as i8;
                }
                p += 1;
            }
            c += 1;
        }
        lanes
    }

    /// [`Affine::run`] on `pixels` pixels (a multiple of 8) of `C` bytes; `SCALED`: with a
    /// divisor.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA (an [`Affine`] exists only then), `src` must hold
    /// `C * pixels` bytes and each of `outs` `pixels` values.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn run<const C: usize, const SCALED: bool>(
        affine: &Affine,
        src: *const u8,
        outs: [*mut f32; 3],
        pixels: usize,
    ) {
        let lanes = const {
            if C == 1 {
                [[[-1i8; 16]; 2]; 3]
            } else {
                shuffles::<C>()
            }
        };
        // SAFETY: 16 bytes of a constant array.
        let masks = lanes.map(|pair| pair.map(|v| unsafe { _mm_loadu_si128(v.as_ptr().cast()) }));
        let splat = |v: f32| (_mm256_set1_ps(v), _mm256_set1_ps(1.0 / v));
        let divisor = splat(affine.divisor.unwrap_or(1.0));
        let mean = affine.mean.map(|m| _mm256_set1_ps(m));
        let std = affine.std.map(splat);
        for at in (0..pixels).step_by(8) {
            // SAFETY: the caller guarantees `C * pixels` bytes of `src` and `pixels` values of
            // each plane; block `at` reads the bytes of pixels `at..at + 8` (two 16-byte loads
            // ending at its last byte, or 8 bytes for grayscale) and writes values
            // `at..at + 8`.
            unsafe {
                let px = src.add(C * at);
                let bytes: [__m128i; 3] = if C == 1 {
                    [_mm_loadl_epi64(px.cast()); 3]
                } else {
                    let first = _mm_loadu_si128(px.cast());
                    let second = _mm_loadu_si128(px.add(8 * C - 16).cast());
                    masks.map(|[a, b]| _mm_or_si128(_mm_shuffle_epi8(first, a), _mm_shuffle_epi8(second, b)))
                };
                for c in 0..3 {
                    let mut x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes[c]));
                    if SCALED {
                        x = divide(x, divisor.0, divisor.1);
                    }
                    let (s, recip) = std[c];
                    _mm256_storeu_ps(outs[c].add(at), divide(_mm256_sub_ps(x, mean[c]), s, recip));
                }
            }
        }
    }

    /// [`Affine::run_interleaved`] (`STREAM`: [`Affine::stream_interleaved`]) into each of
    /// `copies` parts of `part` values of `dst`; `SCALED`: with a divisor.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA (an [`Affine`] exists only then); `dst` must be
    /// `copies` parts of `part` values; with `STREAM`, every run's blocks must lie 16-byte
    /// aligned in each part and no run may have a tail.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn run_interleaved<const SCALED: bool, const STREAM: bool>(
        affine: &Affine,
        tables: &[f32],
        src: &[u8],
        dst: &mut [f32],
        runs: &[(usize, usize, usize)],
        (copies, part): (usize, usize),
    ) {
        debug_assert_eq!(dst.len(), copies * part);
        // By the channel of a block's first value `q`: lane `i` holds channel `(q + i) % 3`.
        let lanes = |v: [f32; 3]| {
            [0, 1, 2].map(|q| {
                let [a, b, c, d, e, f, g, h] = std::array::from_fn(|i| v[(q + i) % 3]);
                _mm256_setr_ps(a, b, c, d, e, f, g, h)
            })
        };
        let mean = lanes(affine.mean);
        let std = lanes(affine.std);
        let recip = lanes(affine.std.map(|s| 1.0 / s));
        let divisor = affine.divisor.unwrap_or(1.0);
        let divisor = (_mm256_set1_ps(divisor), _mm256_set1_ps(1.0 / divisor));
        // SAFETY: the caller guarantees the features, and `copies` parts `part` values apart
        // (aligned where streamed); the loop below passes blocks of eight bytes and values
        // inside a run it checked against the first part, from a pointer to all of `dst`.
        let block = |from: *const u8, to: *mut f32, q: usize| unsafe {
            let mut x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(from.cast())));
            if SCALED {
                x = divide(x, divisor.0, divisor.1);
            }
            let v = divide(_mm256_sub_ps(x, mean[q]), std[q], recip[q]);
            if STREAM {
                for copy in 0..copies {
                    let to = to.add(copy * part);
                    _mm_stream_ps(to, _mm256_castps256_ps128(v));
                    _mm_stream_ps(to.add(4), _mm256_extractf128_ps::<1>(v));
                }
            } else {
                _mm256_storeu_ps(to, v);
            }
        };
        // Pointers into the whole output: a streamed block is written into every part.
        let base = dst.as_mut_ptr();
        for &(from, to, len) in runs {
            let bytes = &src[from..from + len];
            assert!(
                to.checked_add(len).is_some_and(|end| end <= part),
                "run inside the first part"
            );
            // SAFETY: `to + len <= part <= dst.len()`, as checked above.
            let (at, out) = (bytes.as_ptr(), unsafe { base.add(to) });
            let mut i = 0;
            // SAFETY: blocks `i..i + 8` below `len` lie inside `bytes` and the run's values,
            // and so does each value `j < len` of the tail.
            unsafe {
                // Three blocks (24 values) at a time, whose first channels are then fixed.
                while i + 24 <= len {
                    block(at.add(i), out.add(i), 0);
                    block(at.add(i + 8), out.add(i + 8), 2);
                    block(at.add(i + 16), out.add(i + 16), 1);
                    i += 24;
                }
                while i + 8 <= len {
                    block(at.add(i), out.add(i), i % 3);
                    i += 8;
                }
                for j in i..len {
                    *out.add(j) = tables[256 * (j % 3) + usize::from(bytes[j])];
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::{
        __m512, _mm512_castsi512_si128, _mm512_cvtepi32_ps, _mm512_cvtepu8_epi32, _mm512_extracti32x4_epi32,
        _mm512_fmadd_ps, _mm512_fnmadd_ps, _mm512_loadu_si512, _mm512_mask_storeu_ps,
        _mm512_maskz_loadu_epi8, _mm512_mul_ps, _mm512_permutexvar_epi8, _mm512_set1_ps, _mm512_storeu_ps,
        _mm512_sub_ps,
    };

    use super::Affine;

    pub(super) fn detected() -> bool {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vbmi")
    }

    /// [`super::divide`] of 16 values.
    #[target_feature(enable = "avx512f")]
    fn divide(a: __m512, b: __m512, recip: __m512) -> __m512 {
        let q = _mm512_mul_ps(a, recip);
        _mm512_fmadd_ps(_mm512_fnmadd_ps(q, b, a), recip, q)
    }

    /// The byte permute that takes 16 pixels of `C` bytes (3 or 4) to their channels'
    /// lanes: bytes 0-15 red, 16-31 green, 32-47 blue.
    const fn channels<const C: usize>() -> [u8; 64] {
        let mut index = [0u8; 64];
        let mut i = 0;
        while i < 48 {
            index[i] = (C * (i % 16) + i / 16) as u8;
            i += 1;
        }
        index
    }

    /// [`Affine::run`] on `pixels` pixels of `C` bytes, the last `pixels % 16` through
    /// masks; `SCALED`: with a divisor.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI, `src` must hold `C * pixels` bytes and
    /// each of `outs` `pixels` values.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn run<const C: usize, const SCALED: bool>(
        affine: &Affine,
        src: *const u8,
        outs: [*mut f32; 3],
        pixels: usize,
    ) {
        let index = const { channels::<C>() };
        // SAFETY: 64 bytes of a constant array.
        let index = unsafe { _mm512_loadu_si512(index.as_ptr().cast()) };
        let splat = |v: f32| (_mm512_set1_ps(v), _mm512_set1_ps(1.0 / v));
        let divisor = splat(affine.divisor.unwrap_or(1.0));
        let mean = affine.mean.map(|m| _mm512_set1_ps(m));
        let std = affine.std.map(splat);
        // SAFETY: the caller guarantees `C * pixels` bytes of `src` and `pixels` values of
        // each plane; block `at` of `n` pixels reads their `n * C` bytes (a masked load) and
        // writes their values (a masked store unless all 16).
        let block = |at: usize, n: usize| unsafe {
            let v = _mm512_maskz_loadu_epi8(u64::MAX >> (64 - n * C), src.add(C * at).cast());
            let bytes = if C == 1 {
                [_mm512_castsi512_si128(v); 3]
            } else {
                let v = _mm512_permutexvar_epi8(index, v);
                [
                    _mm512_castsi512_si128(v),
                    _mm512_extracti32x4_epi32::<1>(v),
                    _mm512_extracti32x4_epi32::<2>(v),
                ]
            };
            for c in 0..3 {
                let mut x = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes[c]));
                if SCALED {
                    x = divide(x, divisor.0, divisor.1);
                }
                let (s, recip) = std[c];
                let v = divide(_mm512_sub_ps(x, mean[c]), s, recip);
                if n == 16 {
                    _mm512_storeu_ps(outs[c].add(at), v);
                } else {
                    _mm512_mask_storeu_ps(outs[c].add(at), (1 << n) - 1, v);
                }
            }
        };
        for at in (0..pixels / 16 * 16).step_by(16) {
            block(at, 16);
        }
        if !pixels.is_multiple_of(16) {
            block(pixels / 16 * 16, pixels % 16);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod avx2 {
    use super::Affine;

    pub(super) fn detected() -> bool {
        false
    }

    /// Never called: no [`Affine`] exists off x86-64.
    pub(super) unsafe fn run_interleaved<const SCALED: bool, const STREAM: bool>(
        _: &Affine,
        _: &[f32],
        _: &[u8],
        _: &mut [f32],
        _: &[(usize, usize, usize)],
        _: (usize, usize),
    ) {
        unreachable!("no Affine off x86-64")
    }

    /// Never called: no [`Affine`] exists off x86-64.
    pub(super) unsafe fn run<const C: usize, const SCALED: bool>(
        _: &Affine,
        _: *const u8,
        _: [*mut f32; 3],
        _: usize,
    ) {
        unreachable!("no Affine off x86-64")
    }
}

// Off x86-64 neither width is detected, and no `Affine` exists.
#[cfg(not(target_arch = "x86_64"))]
use self::avx2 as avx512;

#[cfg(test)]
mod tests {
    use super::{fit, value, Affine};
    use crate::testing::Rng;

    fn uniform(rng: &mut Rng) -> f32 {
        rng.below(1 << 20) as f32 / (1 << 20) as f32
    }

    /// transformers' tables for `mean` and `std`, with true divisions: torchvision's (mean
    /// and std scaled by 255 in float32, as it fuses them) or the Pillow backend's (the
    /// rescale in float64, rounded to float32, then normalised).
    fn tables(mean: [f32; 3], std: [f32; 3], torch: bool) -> Vec<f32> {
        (0..3)
            .flat_map(|c| {
                (0..256).map(move |x| {
                    if torch {
                        (x as f32 - mean[c] * 255.0) / (std[c] * 255.0)
                    } else {
                        ((f64::from(x) * (1.0 / 255.0)) as f32 - mean[c]) / std[c]
                    }
                })
            })
            .collect()
    }

    #[test]
    fn finds_transformers_tables_and_computes_their_values() {
        let mut rng = Rng(11);
        let clip = (
            [0.481_454_66, 0.457_827_5, 0.408_210_73],
            [0.268_629_54, 0.261_302_6, 0.275_777_1],
        );
        let mut cases = vec![clip, ([0.5; 3], [0.5; 3]), ([0.0; 3], [1.0; 3])];
        for _ in 0..100 {
            let mean = std::array::from_fn(|_| uniform(&mut rng));
            let std = std::array::from_fn(|_| 0.05 + uniform(&mut rng));
            cases.push((mean, std));
        }
        for ((mean, std), torch) in cases.into_iter().flat_map(|case| [(case, true), (case, false)]) {
            let tables = tables(mean, std, torch);
            let Some(affine) = Affine::find(&tables) else {
                assert!(
                    !super::avx2::detected(),
                    "{mean:?} {std:?} (torch: {torch}) not found"
                );
                eprintln!("no AVX2 and FMA here: tables are looked up");
                return;
            };
            let widths = [false, true]
                .into_iter()
                .filter(|&wide| !wide || super::avx512::detected());
            for (wide, channels) in widths.flat_map(|wide| [1, 3, 4].map(|c| (wide, c))) {
                for pixels in [0, 1, 7, 8, 9, 15, 16, 17, 23, 64, 641] {
                    let src: Vec<u8> = (0..pixels * channels).map(|_| rng.below(256) as u8).collect();
                    let mut planes = vec![vec![f32::NAN; pixels + 9]; 3];
                    let [r, g, b] = &mut planes[..] else {
                        unreachable!()
                    };
                    let done = affine.run_on(wide, &src, channels, [r, g, b]);
                    assert_eq!(done, if wide { pixels } else { pixels / 8 * 8 });
                    for (c, plane) in planes.iter().enumerate() {
                        for (i, v) in plane.iter().enumerate() {
                            let byte = src.get(i * channels + if channels == 1 { 0 } else { c });
                            match byte {
                                Some(&x) if i < done => assert_eq!(
                                    v.to_bits(),
                                    tables[256 * c + usize::from(x)].to_bits(),
                                    "wide {wide}, channels {channels}, pixel {i}, channel {c}"
                                ),
                                _ => assert!(v.is_nan(), "pixel {i} past the blocks was written"),
                            }
                        }
                    }
                }
            }
        }
    }

    fn bits(values: &[f32]) -> Vec<u32> {
        values.iter().map(|v| v.to_bits()).collect()
    }

    /// The bits of `len` values, NaN but where `runs` write their values from `tables`.
    fn interleaved(tables: &[f32], src: &[u8], runs: &[(usize, usize, usize)], len: usize) -> Vec<u32> {
        let mut want = vec![f32::NAN; len];
        for &(from, to, len) in runs {
            for i in 0..len {
                want[to + i] = tables[256 * (i % 3) + usize::from(src[from + i])];
            }
        }
        bits(&want)
    }

    #[test]
    fn computes_interleaved_runs_as_their_tables_give_them() {
        let mut rng = Rng(5);
        for (mean, std, torch) in [
            (
                [0.481_454_66, 0.457_827_5, 0.408_210_73],
                [0.268_629_54, 0.261_302_6, 0.275_777_1],
                true,
            ),
            ([0.5; 3], [0.5; 3], false),
            ([0.1, 0.7, 0.3], [0.9, 0.2, 0.6], false),
        ] {
            let tables = tables(mean, std, torch);
            let Some(affine) = Affine::find(&tables) else {
                eprintln!("no AVX2 and FMA here: tables are looked up");
                return;
            };
            let src: Vec<u8> = (0..3 * 500).map(|_| rng.below(256) as u8).collect();
            // Runs of whole pixels (patch lines of 14 and 16 among them, and tails of every
            // length), from anywhere in `src`, one after another in `dst` with gaps between.
            let mut runs = Vec::new();
            let mut to = 0;
            for len in (0..=33).chain([14, 16, 14, 16]).map(|pixels| 3 * pixels) {
                to += rng.below(5);
                runs.push((3 * rng.below(500 - len / 3 + 1), to, len));
                to += len;
            }
            let mut dst = vec![f32::NAN; to + 3];
            affine.run_interleaved(&tables, &src, &mut dst, &runs);
            assert_eq!(
                bits(&dst),
                interleaved(&tables, &src, &runs, to + 3),
                "mean {mean:?}, std {std:?}, torch {torch}"
            );
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn streams_interleaved_runs_of_whole_aligned_blocks_into_every_copy() {
        let mut rng = Rng(9);
        let tables = tables([0.1, 0.7, 0.3], [0.9, 0.2, 0.6], false);
        let Some(affine) = Affine::find(&tables) else {
            eprintln!("no AVX2 and FMA here: tables are looked up");
            return;
        };
        let src: Vec<u8> = (0..3 * 400).map(|_| rng.below(256) as u8).collect();
        // Patch lines of 16 pixels (48 values, 192 bytes) and of 8, after gaps of 4 values.
        let mut runs = Vec::new();
        let mut to = 0;
        for k in 0..20 {
            let len = if k % 3 == 0 { 24 } else { 48 };
            to += 4 * rng.below(3);
            runs.push((3 * rng.below(400 - len / 3 + 1), to, len));
            to += len;
        }
        let part = to + 4;
        for copies in [1, 2, 3] {
            let mut buffer = vec![f32::NAN; copies * part + 4];
            // The output starts 16-byte aligned, as a pooled output does.
            let skip = buffer.as_ptr().align_offset(16);
            let dst = &mut buffer[skip..skip + copies * part];
            assert!(affine.stream_interleaved(&src, dst, &runs, copies));
            crate::stream::fence();
            let want = interleaved(&tables, &src, &runs, part);
            for (copy, got) in dst.chunks_exact(part).enumerate() {
                assert_eq!(bits(got), want, "copy {copy} of {copies}");
            }
            // A run with a tail, or a block off the 16-byte grid, is left to the caller.
            for bad in [(0, 0, 45), (0, 2, 48)] {
                let before = bits(dst);
                assert!(!affine.stream_interleaved(&src, dst, &[bad], copies));
                assert_eq!(bits(dst), before, "{bad:?} wrote");
            }
        }
        // An output 8 bytes off the grid whose run starts 8 bytes on: aligned in the first
        // part, but parts of 50 values (200 bytes) leave the second's off the grid.
        let mut buffer = vec![f32::NAN; 2 * 50 + 8];
        let skip = buffer.as_ptr().align_offset(16) + 2;
        let dst = &mut buffer[skip..skip + 2 * 50];
        assert!(!affine.stream_interleaved(&src, dst, &[(0, 2, 48)], 2));
        assert!(dst.iter().all(|v| v.is_nan()));
        assert!(affine.stream_interleaved(&src, &mut dst[..50], &[(0, 2, 48)], 1));
    }

    #[test]
    fn an_interleaved_run_past_its_source_or_output_panics() {
        let tables = tables([0.5; 3], [0.5; 3], true);
        let Some(affine) = Affine::find(&tables) else {
            eprintln!("no AVX2 and FMA here: tables are looked up");
            return;
        };
        for (src, dst) in [(47, 48), (48, 47)] {
            let run = || affine.run_interleaved(&tables, &vec![0; src], &mut vec![0.0; dst], &[(0, 0, 48)]);
            assert!(
                std::panic::catch_unwind(run).is_err(),
                "{src} bytes into {dst} values"
            );
        }
    }

    #[test]
    fn refuses_tables_of_other_arithmetic() {
        let square: [f32; 256] = std::array::from_fn(|x| (x * x) as f32 / 65025.0);
        assert_eq!(fit(&square, None), None);
        assert_eq!(fit(&square, Some(255.0)), None);
        let mut flat = [0.5f32; 256];
        assert_eq!(fit(&flat, None), None);
        flat[255] = f32::INFINITY;
        assert_eq!(fit(&flat, None), None);
        let mut one_off: Vec<f32> = (0..256).map(|x| value(x, None, 127.5, 127.5)).collect();
        assert!(fit(one_off.as_slice().try_into().unwrap(), None).is_some());
        one_off[77] = f32::from_bits(one_off[77].to_bits() + 1);
        assert_eq!(fit(one_off.as_slice().try_into().unwrap(), None), None);
        assert_eq!(Affine::find(&one_off), None, "not three channels");
    }
}
