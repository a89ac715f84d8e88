//! torch's float32 resizes without antialiasing: `F.interpolate(x, size, mode,
//! align_corners=False)` of a float32 NCHW tensor on an x86-64 CPU, bit-exact with torch
//! 2.15. torchvision's `resize` runs them for float images (Phi-4-multimodal's global view of
//! its normalised canvas) and for the float copy of a uint8 image that Molmo2 rounds back.
//!
//! torch computes in float32 and its CPU kernels are built by GCC 13, which contracts
//! `a * b + c` into fused multiply-adds (`-ffp-contract=fast`, the default for C++). Which
//! products it fused is part of the result; every formula below was measured against torch
//! 2.15's AVX-512 build (`tests/test_resize.py` compares them with torch on random float
//! images; the unit tests hold values torch computed):
//!
//! * `scale = f32(in) / f32(out)`; an output `i`'s source position is
//!   `fma(scale, i + 0.5, -0.5)` for bicubic and for the channels-last bilinear loop, but
//!   `scale * (i + 0.5) - 0.5`, rounded twice, for the generic bilinear loop (torch's build
//!   does not fuse it in that helper: its weights carry fewer low bits); bilinear clamps a
//!   negative position to 0.
//! * `index = min(floor(position), in - 1)`, `t = min(max(position - index, 0), 1)`.
//! * Bilinear: indices `index` and `min(index + 1, in - 1)`, weights `1 - t` and `t`; an axis
//!   whose size is unchanged takes its own index twice with weights 1 and 0.
//! * Bicubic (`A = -0.75`): indices `clamp(index - 1 + j, 0, in - 1)`, weights
//!   `[cc2(t + 1), cc1(t), cc1(1 - t), cc2((1 - t) + 1)]` with
//!   `cc1(x) = (fma(1.25, x, -2.25) * x) * x + 1` and
//!   `cc2(x) = fma(fma(-0.75, x, 3.75), x, -6) * x + 3` (the last step of each unfused).
//! * The generic loop (bicubic; bilinear when `out_h + out_w > 128`): each tap row's sum
//!   `fma(v0, w0, v1 * w1)`, then `fma(vj, wj, sum)` for the further taps, and the same sum
//!   over the rows' sums with the vertical weights. Evaluating it as a horizontal pass over
//!   the rows the vertical one reads gives the same values.
//! * The channels-last loop (bilinear when `out_h + out_w <= 128`, and for every size when
//!   torch runs on one thread: `torch.set_num_threads(1)`, a one-core CPU, `DataLoader`
//!   workers): weights `wy * wx`, then `fma(v11, w11, fma(v10, w10, fma(v00, w00, v01 *
//!   w01)))`. The functions below take `one_thread` to follow either; the two loops differ
//!   in the last bit of some values.
//! * Nearest-exact picks the pixels the uint8 kernel picks ([`crate::torch_resize`]).
//!
//! torchvision returns an image whose size does not change as it is, without interpolating.
//!
//! Rust never contracts on its own: the fused steps are `mul_add`. The scalar path calls
//! the C library's `fmaf` for them; the FMA path compiles the same code with the `avx2` and
//! `fma` target features (one instruction each, and the vertical sums vectorised, each lane
//! doing the scalar operations in the same order); where the CPU has AVX-512, the horizontal
//! sums take sixteen outputs a vector wherever an axis's taps are dense enough ([`Window`]).
//! Measured on one thread of the development VM (2 vCPUs shared with other jobs, load
//! average 7, release build, median of 15): Phi-4-multimodal's global view of a 1344x2240 canvas (bicubic to 448x448) 83.6 ms
//! scalar, 22.7 ms FMA (torch itself: 23 ms in the same conditions); Molmo2's 1080x1920 to
//! 644x1176 bilinear 71.5 ms scalar, 23.3 ms FMA (torch, with its float conversion and
//! rounding: 38 ms).

// The FMA path compiles the kernel's code into its `target_feature` function: the helpers
// must be inlined there (`#[inline(always)]`) for their `mul_add` to become one instruction.
#![allow(clippy::inline_always)]

use std::ops::Range;
use std::sync::{LazyLock, Mutex, PoisonError};

use crate::error::{invalid, TransformError};
use crate::resize::{band_len, by_bands, check_buffers, Backend, Kernel, Source, MIN_BAND};
use crate::torch_resize::nearest_exact_indices;
use crate::transforms::{checked_len, Normalize, Window as Crop};
use crate::workers;

/// Channels of the images handled here.
const CHANNELS: usize = 3;

/// torch's interpolation modes for float tensors without antialiasing, as transformers maps
/// PIL's NEAREST, BILINEAR and BICUBIC (LANCZOS needs antialiasing in torchvision).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatMode {
    /// `InterpolationMode.NEAREST_EXACT`.
    NearestExact,
    /// `InterpolationMode.BILINEAR`.
    Bilinear,
    /// `InterpolationMode.BICUBIC`.
    Bicubic,
}

impl FloatMode {
    /// The mode transformers' `pil_torch_interpolation_mapping` gives a PIL filter code;
    /// `None` for LANCZOS (torchvision refuses it without antialiasing), BOX and HAMMING.
    #[must_use]
    pub fn from_pil_code(code: i64) -> Option<FloatMode> {
        match code {
            0 => Some(FloatMode::NearestExact),
            2 => Some(FloatMode::Bilinear),
            3 => Some(FloatMode::Bicubic),
            _ => None,
        }
    }
}

/// One axis: each output's taps, source indices and weights in torch's order.
struct Taps<const N: usize> {
    index: Vec<[usize; N]>,
    weight: Vec<[f32; N]>,
}

/// C++'s `std::max(a, b)`: `a < b ? b : a` (Rust's `f32::max` may pick either zero).
fn cmax(a: f32, b: f32) -> f32 {
    if a < b {
        b
    } else {
        a
    }
}

/// C++'s `std::min(a, b)`: `b < a ? b : a`.
fn cmin(a: f32, b: f32) -> f32 {
    if b < a {
        b
    } else {
        a
    }
}

/// `area_pixel_compute_source_index` for `align_corners=False`, fused or not.
fn position(scale: f32, i: usize, fused: bool) -> f32 {
    let x = i as f32 + 0.5;
    if fused {
        scale.mul_add(x, -0.5)
    } else {
        scale * x - 0.5
    }
}

/// `guard_index_and_lambda`: the first tap's index and the fraction past it.
fn guard(position: f32, in_size: usize) -> (i64, f32) {
    let index = (position.floor() as i64).min(in_size as i64 - 1);
    (index, cmin(cmax(position - index as f32, 0.0), 1.0))
}

/// `HelperInterpLinear::compute_indices_weights` (`fused`: the channels-last loop's inline
/// copy of it).
fn linear_taps(in_size: usize, out_size: usize, fused: bool) -> Taps<2> {
    let scale = in_size as f32 / out_size as f32;
    let mut taps = Taps {
        index: Vec::with_capacity(out_size),
        weight: Vec::with_capacity(out_size),
    };
    for i in 0..out_size {
        if in_size == out_size {
            taps.index.push([i, i]);
            taps.weight.push([1.0, 0.0]);
            continue;
        }
        let mut pos = position(scale, i, fused);
        if pos < 0.0 {
            pos = 0.0;
        }
        let (first, t) = guard(pos, in_size);
        let first = first as usize;
        let second = if first < in_size - 1 { first + 1 } else { first };
        taps.index.push([first, second]);
        taps.weight.push([1.0 - t, t]);
    }
    taps
}

/// `cubic_convolution1` with `A = -0.75` as torch's build computes it.
fn cc1(x: f32) -> f32 {
    1.25f32.mul_add(x, -2.25) * x * x + 1.0
}

/// `cubic_convolution2` with `A = -0.75` as torch's build computes it.
fn cc2(x: f32) -> f32 {
    (-0.75f32).mul_add(x, 3.75).mul_add(x, -6.0) * x + 3.0
}

/// `HelperInterpCubic::compute_indices_weights`.
fn cubic_taps(in_size: usize, out_size: usize) -> Taps<4> {
    let scale = in_size as f32 / out_size as f32;
    let last = in_size as i64 - 1;
    let mut taps = Taps {
        index: Vec::with_capacity(out_size),
        weight: Vec::with_capacity(out_size),
    };
    for i in 0..out_size {
        let (first, t) = guard(position(scale, i, true), in_size);
        let x2 = 1.0 - t;
        taps.weight.push([cc2(t + 1.0), cc1(t), cc1(x2), cc2(x2 + 1.0)]);
        taps.index.push(std::array::from_fn(|j| {
            (first - 1 + j as i64).clamp(0, last) as usize
        }));
    }
    taps
}

/// The generic loop's sum of `N` taps: `fma(v0, w0, v1 * w1)`, then `fma(vj, wj, sum)`.
#[inline(always)]
fn chain<const N: usize>(v: &[f32; N], w: &[f32; N]) -> f32 {
    let mut acc = v[0].mul_add(w[0], v[1] * w[1]);
    for j in 2..N {
        acc = v[j].mul_add(w[j], acc);
    }
    acc
}

/// Float32 values of an image, by (row, column, channel).
trait Values: Sync {
    /// Row `y`'s values: `row(y)(x, c)`.
    fn row(&self, y: usize) -> impl Fn(usize, usize) -> f32 + '_;

    /// The image width.
    fn width(&self) -> usize;

    /// Row `y` as three planar runs of the image width (R, G, B) in `line`.
    fn line(&self, y: usize, line: &mut [f32]);
}

/// uint8 pixels of `C` bytes read where they are (RGB, Pillow's RGBX, or grayscale, whose
/// one byte is every channel's), each byte mapped through its channel's table; a row's line
/// is [`Normalize`]'s lookup (64 values at a time with AVX-512 VBMI).
struct Mapped<'a, const C: usize> {
    src: Source<'a>,
    norm: &'a Normalize,
}

/// The offset of channel `c`'s byte in a pixel of `C` bytes.
#[inline(always)]
const fn byte<const C: usize>(c: usize) -> usize {
    if C == 1 {
        0
    } else {
        c
    }
}

impl<'a> Mapped<'a, CHANNELS> {
    /// HWC u8 RGB `src` of `size`, mapped through `norm`.
    fn rgb(src: &'a [u8], size: (usize, usize), norm: &'a Normalize) -> Result<Self, TransformError> {
        if src.len() != check_size("src_size", size)? {
            return Err(invalid(
                "src",
                format!("{} bytes for {}x{}x3", size.0 * size.1 * 3, size.0, size.1),
                format!("{} bytes", src.len()),
            ));
        }
        Ok(Mapped {
            src: Source::packed(src, CHANNELS, size)?,
            norm,
        })
    }
}

impl<const C: usize> Values for Mapped<'_, C> {
    #[inline(always)]
    fn row(&self, y: usize) -> impl Fn(usize, usize) -> f32 + '_ {
        let (pixels, tables) = (self.src.row(y), self.norm.tables());
        move |x, c| tables[c][usize::from(pixels[x * C + byte::<C>(c)])]
    }

    fn width(&self) -> usize {
        self.src.size().1
    }

    #[inline(always)]
    fn line(&self, y: usize, line: &mut [f32]) {
        let (r, gb) = line.split_at_mut(self.width());
        let (g, b) = gb.split_at_mut(self.width());
        self.norm.run_pixels(self.src.row(y), C, r, g, b);
    }
}

/// [`Mapped`] values whose rows, as the resize reads them, are also written into windows of
/// the mapped image (each inside it), as three planes of its rows each, one after the
/// other: the normalised values looked up once for both. The windows' rows are streamed to
/// memory (x86-64): written through the cache, they would evict the resize's rows and
/// tables from it.
struct Tee<'a, const C: usize> {
    mapped: Mapped<'a, C>,
    windows: &'a [Crop],
    /// The windows' output, and the rows written into it.
    out: Mutex<(&'a mut [f32], Vec<bool>)>,
}

impl<const C: usize> Tee<'_, C> {
    /// Row `y` of the mapped image (its `line`) into every window it crosses in `out`.
    fn write_row(&self, y: usize, line: &[f32], out: &mut [f32]) {
        let width = self.mapped.width();
        let mut start = 0;
        for window in self.windows {
            let (top, left) = (window.top.unsigned_abs(), window.left.unsigned_abs());
            let plane = window.height * window.width;
            if (top..top + window.height).contains(&y) {
                for (c, run) in line.chunks_exact(width).enumerate() {
                    let at = start + c * plane + (y - top) * window.width;
                    let (to, from) = (&mut out[at..at + window.width], &run[left..left + window.width]);
                    #[cfg(target_arch = "x86_64")]
                    crate::stream::stream_copy(bytemuck::cast_slice_mut(to), bytemuck::cast_slice(from));
                    #[cfg(not(target_arch = "x86_64"))]
                    to.copy_from_slice(from);
                }
            }
            start += CHANNELS * plane;
        }
    }
}

impl<const C: usize> Values for Tee<'_, C> {
    #[inline(always)]
    fn row(&self, y: usize) -> impl Fn(usize, usize) -> f32 + '_ {
        self.mapped.row(y)
    }

    fn width(&self) -> usize {
        self.mapped.width()
    }

    fn line(&self, y: usize, line: &mut [f32]) {
        self.mapped.line(y, line);
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        let (out, written) = &mut *out;
        if !std::mem::replace(&mut written[y], true) {
            self.write_row(y, line, out);
            // The row's streaming stores ordered before this thread hands its band back.
            #[cfg(target_arch = "x86_64")]
            crate::stream::fence();
        }
    }
}

/// Tables mapping each byte to its float32 value, for [`Mapped`] reads of uint8 images.
static IDENTITY: LazyLock<Normalize> =
    LazyLock::new(|| Normalize::from_tables([std::array::from_fn(|x| x as f32); CHANNELS]));

/// CHW float32 planes.
struct Planes<'a> {
    data: &'a [f32],
    height: usize,
    width: usize,
}

impl Values for Planes<'_> {
    #[inline(always)]
    fn row(&self, y: usize) -> impl Fn(usize, usize) -> f32 + '_ {
        move |x, c| self.data[(c * self.height + y) * self.width + x]
    }

    fn width(&self) -> usize {
        self.width
    }

    #[inline(always)]
    fn line(&self, y: usize, line: &mut [f32]) {
        for (c, run) in line.chunks_exact_mut(self.width).enumerate() {
            let at = (c * self.height + y) * self.width;
            run.copy_from_slice(&self.data[at..at + self.width]);
        }
    }
}

/// A resize's taps, for the loop torch dispatches to.
enum Plan {
    Nearest { rows: Vec<usize>, cols: Vec<usize> },
    Linear { rows: Taps<2>, cols: Taps<2> },
    Cubic { rows: Taps<4>, cols: Taps<4> },
    ChannelsLast { rows: Taps<2>, cols: Taps<2> },
}

impl Plan {
    /// `upsample_bilinear2d_kernel_impl_float`'s choice of loop for a 3-channel
    /// channels-first image, on one thread or several, and the other modes' only loop.
    fn new(mode: FloatMode, one_thread: bool, (h, w): (usize, usize), (h2, w2): (usize, usize)) -> Plan {
        match mode {
            FloatMode::NearestExact => Plan::Nearest {
                rows: nearest_exact_indices(h, h2),
                cols: nearest_exact_indices(w, w2),
            },
            FloatMode::Bicubic => Plan::Cubic {
                rows: cubic_taps(h, h2),
                cols: cubic_taps(w, w2),
            },
            FloatMode::Bilinear if one_thread || h2 + w2 <= 128 => Plan::ChannelsLast {
                rows: linear_taps(h, h2, true),
                cols: linear_taps(w, w2, true),
            },
            FloatMode::Bilinear => Plan::Linear {
                rows: linear_taps(h, h2, false),
                cols: linear_taps(w, w2, false),
            },
        }
    }

    /// Output rows `rows`, each handed to `emit(row, values)` as three planar runs (R, G,
    /// B) of the output width.
    #[inline(always)]
    fn run<V: Values>(&self, src: &V, width: usize, rows: Range<usize>, emit: &mut dyn FnMut(usize, &[f32])) {
        let mut out = vec![0f32; CHANNELS * width];
        match self {
            Plan::Nearest { rows: sy, cols: sx } => {
                for oy in rows {
                    let row = src.row(sy[oy]);
                    for (c, plane) in out.chunks_exact_mut(width).enumerate() {
                        for (o, &x) in plane.iter_mut().zip(sx) {
                            *o = row(x, c);
                        }
                    }
                    emit(oy, &out);
                }
            }
            Plan::Linear { rows: ty, cols: tx } => {
                generic(src, ty, tx, rows, &mut out, emit, |line, o| {
                    horizontal(line, tx, o);
                });
            }
            Plan::Cubic { rows: ty, cols: tx } => {
                generic(src, ty, tx, rows, &mut out, emit, |line, o| {
                    horizontal(line, tx, o);
                });
            }
            Plan::ChannelsLast { rows: ty, cols: tx } => {
                for oy in rows {
                    let ([y0, y1], [h0, h1]) = (ty.index[oy], ty.weight[oy]);
                    let (top, bottom) = (src.row(y0), src.row(y1));
                    for (ox, (&[x0, x1], &[w0, w1])) in tx.index.iter().zip(&tx.weight).enumerate() {
                        let w = [h0 * w0, h0 * w1, h1 * w0, h1 * w1];
                        for c in 0..CHANNELS {
                            let corners = [top(x0, c), top(x1, c), bottom(x0, c), bottom(x1, c)];
                            out[c * width + ox] = corner_sum(corners, w);
                        }
                    }
                    emit(oy, &out);
                }
            }
        }
    }
}

/// The generic loop for output rows `rows`: the horizontal sums of the rows each output row
/// reads (kept while later rows read them; `horizontal(line, sums)`, [`horizontal`] or its
/// vector form), then their vertical sum.
#[inline(always)]
fn generic<const N: usize, V: Values>(
    src: &V,
    ty: &Taps<N>,
    tx: &Taps<N>,
    rows: Range<usize>,
    out: &mut [f32],
    emit: &mut dyn FnMut(usize, &[f32]),
    horizontal: impl Fn(&[f32], &mut [f32]),
) {
    let width = tx.index.len();
    // One source row as float32, read by the horizontal pass.
    let mut line = vec![0f32; CHANNELS * src.width()];
    // (source row, its horizontal sums): at most N rows are read per output row.
    let mut cache: Vec<(usize, Vec<f32>)> = Vec::with_capacity(N);
    for oy in rows {
        let needed = &ty.index[oy];
        let mut slots = [0usize; N];
        for (slot, &row) in slots.iter_mut().zip(needed) {
            *slot = if let Some(s) = cache.iter().position(|(r, _)| *r == row) {
                s
            } else {
                let s = if cache.len() < N {
                    cache.push((row, vec![0f32; CHANNELS * width]));
                    cache.len() - 1
                } else {
                    // A row this output row does not read: there is one, as it reads at
                    // most N rows and `row` is not cached.
                    cache
                        .iter()
                        .position(|(r, _)| !needed.contains(r))
                        .expect("a cached row no longer read")
                };
                cache[s].0 = row;
                src.line(row, &mut line);
                horizontal(&line, &mut cache[s].1);
                s
            };
        }
        // Slices of exactly the output's length: the loop below runs without bounds checks
        // and vectorises (each lane's operations are the scalar ones, in the same order).
        let n = out.len();
        let sums: [&[f32]; N] = std::array::from_fn(|j| &cache[slots[j]].1[..n]);
        let weights = &ty.weight[oy];
        for (i, o) in out.iter_mut().enumerate() {
            let v: [f32; N] = std::array::from_fn(|j| sums[j][i]);
            *o = chain(&v, weights);
        }
        emit(oy, out);
    }
}

/// A source row's horizontal sums (`line`: its three planar runs), three planar runs of the
/// output width.
#[inline(always)]
fn horizontal<const N: usize>(line: &[f32], tx: &Taps<N>, out: &mut [f32]) {
    let width = tx.index.len();
    let src_width = line.len() / CHANNELS;
    for (run, plane) in line.chunks_exact(src_width).zip(out.chunks_exact_mut(width)) {
        for ((o, index), weight) in plane.iter_mut().zip(&tx.index).zip(&tx.weight) {
            *o = tap_sum(run, index, weight);
        }
    }
}

/// One horizontal output: the values of `run` at `index` through [`chain`] with `weight`.
#[inline(always)]
fn tap_sum<const N: usize>(run: &[f32], index: &[usize; N], weight: &[f32; N]) -> f32 {
    let v: [f32; N] = std::array::from_fn(|j| run[index[j]]);
    chain(&v, weight)
}

/// One channels-last output from its four corners (top-left, top-right, bottom-left,
/// bottom-right) and their weights, in torch's order: the top pair fused, then each bottom
/// value fused in.
#[inline(always)]
fn corner_sum([t0, t1, b0, b1]: [f32; 4], [w00, w01, w10, w11]: [f32; 4]) -> f32 {
    let sum = t0.mul_add(w00, t1 * w01);
    let sum = b0.mul_add(w10, sum);
    b1.mul_add(w11, sum)
}

/// The code a [`Backend`] runs: the scalar path, the same code compiled with FMA, or that
/// with AVX-512's loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Scalar,
    /// Only ever constructed after AVX2 and FMA were detected on this CPU.
    #[cfg(target_arch = "x86_64")]
    Fma,
    /// Only ever constructed after AVX2, FMA and [`Backend::Avx512`]'s subsets were
    /// detected on this CPU.
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Path {
    fn select(backend: Backend) -> Result<Path, TransformError> {
        let unsupported = |needs: &str| {
            invalid(
                "backend",
                "a backend this CPU supports",
                format!("{backend:?} without {needs}"),
            )
        };
        match backend {
            Backend::Scalar => Ok(Path::Scalar),
            Backend::Auto => Ok(Path::avx512().or_else(Path::fma).unwrap_or(Path::Scalar)),
            Backend::Avx2 => Path::fma().ok_or_else(|| unsupported("AVX2 and FMA")),
            Backend::Avx512 => Path::avx512().ok_or_else(|| unsupported("AVX-512, AVX2 and FMA")),
        }
    }

    fn fma() -> Option<Path> {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Some(Path::Fma);
        }
        None
    }

    fn avx512() -> Option<Path> {
        #[cfg(target_arch = "x86_64")]
        if Path::fma().is_some() && Kernel::select(Backend::Avx512).is_ok() {
            return Some(Path::Avx512);
        }
        None
    }

    /// [`Plan::run`] on this path.
    fn run<V: Values>(
        self,
        plan: &Plan,
        src: &V,
        width: usize,
        rows: Range<usize>,
        emit: &mut dyn FnMut(usize, &[f32]),
    ) {
        match self {
            Path::Scalar => plan.run(src, width, rows, emit),
            // SAFETY: `Path::Fma` exists only on CPUs with AVX2 and FMA.
            #[cfg(target_arch = "x86_64")]
            Path::Fma => unsafe { run_fma(plan, src, width, rows, emit) },
            // SAFETY: `Path::Avx512` exists only on CPUs with AVX-512, AVX2 and FMA.
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => unsafe { run_avx512(plan, src, width, rows, emit) },
        }
    }

    /// Three planes of `line.len() / 3` values → their pixels' HWC bytes in `line`, each
    /// value [`round_clamp`]ed.
    fn round_into_pixels(self, planes: &[f32], line: &mut [u8]) {
        let width = line.len() / CHANNELS;
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if self != Path::Scalar {
            // SAFETY: `Path::Fma` and `Path::Avx512` exist only on CPUs with AVX2.
            done = unsafe { round_into_pixels_avx2(planes, line) };
        }
        let (r, gb) = planes.split_at(width);
        let (g, b) = gb.split_at(width);
        for (x, px) in line.chunks_exact_mut(CHANNELS).enumerate().skip(done) {
            px.copy_from_slice(&[r[x], g[x], b[x]].map(round_clamp));
        }
    }
}

/// [`Plan::run`] compiled with FMA (every `mul_add` one instruction), the generic loop and
/// the channels-last one (unless it narrows more than twofold) in their vector forms,
/// [`generic_fma`] and [`channels_last_fma`].
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_fma<V: Values>(
    plan: &Plan,
    src: &V,
    width: usize,
    rows: Range<usize>,
    emit: &mut dyn FnMut(usize, &[f32]),
) {
    // SAFETY (all arms): the caller guarantees AVX2 and FMA.
    match plan {
        // The vector loop reads whole source rows; narrowing more than twofold, the scalar
        // loop reads fewer values (Molmo2 at 4032x3024 on one thread: 18.6-20.1 ms a call
        // with it, 29.9-31.5 ms with the vector loop).
        Plan::ChannelsLast { rows: ty, cols: tx } if src.width() <= 2 * width => unsafe {
            channels_last_fma(src, ty, tx, rows, emit);
        },
        Plan::Linear { rows: ty, cols: tx } => unsafe { generic_fma(src, ty, tx, rows, emit) },
        Plan::Cubic { rows: ty, cols: tx } => unsafe { generic_fma(src, ty, tx, rows, emit) },
        Plan::Nearest { .. } | Plan::ChannelsLast { .. } => plan.run(src, width, rows, emit),
    }
}

/// [`generic`] with [`horizontal`] eight outputs of a channel a vector: each output's `N`
/// values read from the row's planar run by [`block_taps`], each lane running [`chain`]'s
/// multiply and FMAs in their order (the same bits). Phi-4-multimodal's bicubic global view
/// and Molmo2's resizes on several threads take it: float32 planes 896x896 to 448x448 took
/// 5.4-6.6 ms bicubic and 3.6-4.3 ms bilinear before, 3.7-4.3 and 2.5-2.6 ms after; a Phi-4
/// call at 640x480, 10.4-11.2 ms before, 8.9-9.4 ms after (on the Xeon). On a Zen 1 EPYC,
/// loading adjacent taps instead of gathering them took that call from 12.1 to 8.7 ms.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn generic_fma<const N: usize, V: Values>(
    src: &V,
    ty: &Taps<N>,
    tx: &Taps<N>,
    rows: Range<usize>,
    emit: &mut dyn FnMut(usize, &[f32]),
) {
    use std::arch::x86_64::{_mm256_fmadd_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_storeu_ps};
    let width = tx.index.len();
    let (index, weight) = columns(tx);
    let blocks = width / LANES * LANES;
    let adjacent = adjacent_blocks(&index, blocks);
    let row_sums = |line: &[f32], sums: &mut [f32]| {
        let src_width = line.len() / CHANNELS;
        for (run, plane) in line.chunks_exact(src_width).zip(sums.chunks_exact_mut(width)) {
            for (ox, &adjacent) in (0..blocks).step_by(LANES).zip(&adjacent) {
                // SAFETY: AVX2 and FMA are guaranteed by the caller; outputs ox..ox + 8 lie in
                // `index`, `weight` and `plane`, and every index is a column of `run`.
                unsafe {
                    let value = block_taps(run, &index, ox, adjacent);
                    let tap = |j: usize| _mm256_loadu_ps(weight[j][ox..].as_ptr());
                    let mut acc = _mm256_fmadd_ps(value[0], tap(0), _mm256_mul_ps(value[1], tap(1)));
                    for (j, &value) in value.iter().enumerate().skip(2) {
                        acc = _mm256_fmadd_ps(value, tap(j), acc);
                    }
                    _mm256_storeu_ps(plane[ox..].as_mut_ptr(), acc);
                }
            }
            let tail = tx.index[blocks..].iter().zip(&tx.weight[blocks..]);
            for (o, (index, weight)) in plane[blocks..].iter_mut().zip(tail) {
                *o = tap_sum(run, index, weight);
            }
        }
    };
    let mut out = vec![0f32; CHANNELS * width];
    generic(src, ty, tx, rows, &mut out, emit, row_sums);
}

/// Outputs a vector in the vector loops.
#[cfg(target_arch = "x86_64")]
const LANES: usize = 8;

/// Per block of [`LANES`] outputs (of the first `blocks`), whether each output's taps are
/// adjacent columns (`index[j] = index[0] + j`), as they are away from the edges, for
/// [`block_taps`].
#[cfg(target_arch = "x86_64")]
fn adjacent_blocks<const N: usize>(index: &[Vec<i32>; N], blocks: usize) -> Vec<bool> {
    (0..blocks)
        .step_by(LANES)
        .map(|ox| {
            (N == 2 || N == 4)
                && (ox..ox + LANES).all(|i| (1..N).all(|j| index[j][i] == index[0][i] + j as i32))
        })
        .collect()
}

/// Tap `j`'s values of outputs `ox..ox + 8` as vector `j`: with `adjacent` (see
/// [`adjacent_blocks`]), each output's `N` values in one load, the loads transposed;
/// otherwise gathered. AVX2's gather is microcoded on AMD's Zen (and slowed on Intel by
/// the Gather Data Sampling fix): on a 2-vCPU EPYC (Zen 1), the four gathers of the
/// bicubic row sums were 61% of the loop.
///
/// # Safety
/// The CPU must support AVX2; outputs `ox..ox + 8` must lie in `index`, each index a
/// column of `run`, and `adjacent` must be [`adjacent_blocks`]' answer for the block.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn block_taps<const N: usize>(
    run: &[f32],
    index: &[Vec<i32>; N],
    ox: usize,
    adjacent: bool,
) -> [std::arch::x86_64::__m256; N] {
    use std::arch::x86_64::{
        _mm256_i32gather_ps, _mm256_loadu_si256, _mm256_set_m128, _mm256_shuffle_ps, _mm256_unpackhi_ps,
        _mm256_unpacklo_ps, _mm_castpd_ps, _mm_load_sd, _mm_loadh_pd, _mm_loadu_ps,
    };
    let first = &index[0][ox..ox + LANES];
    let at = |k: usize| run[first[k] as usize..].as_ptr();
    // SAFETY (all blocks): AVX2 is guaranteed by the caller. Where the block is adjacent,
    // output k's taps are columns first[k]..first[k] + N of `run`: the loads read them.
    // Gathers read the columns the caller guarantees.
    unsafe {
        if adjacent && N == 4 {
            // Output k's four values, outputs 0-3 in the low lanes and 4-7 in the high.
            let [r0, r1, r2, r3] =
                [0, 1, 2, 3].map(|k| _mm256_set_m128(_mm_loadu_ps(at(k + 4)), _mm_loadu_ps(at(k))));
            let (t0, t1) = (_mm256_unpacklo_ps(r0, r1), _mm256_unpackhi_ps(r0, r1));
            let (t2, t3) = (_mm256_unpacklo_ps(r2, r3), _mm256_unpackhi_ps(r2, r3));
            let taps = [
                _mm256_shuffle_ps::<0x44>(t0, t2),
                _mm256_shuffle_ps::<0xEE>(t0, t2),
                _mm256_shuffle_ps::<0x44>(t1, t3),
                _mm256_shuffle_ps::<0xEE>(t1, t3),
            ];
            return std::array::from_fn(|j| taps[j]);
        }
        if adjacent && N == 2 {
            // Outputs k and k + 1's pairs in one 16-byte vector.
            let pairs = |k: usize| _mm_castpd_ps(_mm_loadh_pd(_mm_load_sd(at(k).cast()), at(k + 1).cast()));
            let (r0, r1) = (
                _mm256_set_m128(pairs(4), pairs(0)),
                _mm256_set_m128(pairs(6), pairs(2)),
            );
            let taps = [
                _mm256_shuffle_ps::<0x88>(r0, r1),
                _mm256_shuffle_ps::<0xDD>(r0, r1),
            ];
            return std::array::from_fn(|j| taps[j]);
        }
        std::array::from_fn(|j| {
            _mm256_i32gather_ps::<4>(run.as_ptr(), _mm256_loadu_si256(index[j][ox..].as_ptr().cast()))
        })
    }
}

/// `taps`' indices (as `i32`, for gathers) and weights, one run per tap.
fn columns<const N: usize>(taps: &Taps<N>) -> ([Vec<i32>; N], [Vec<f32>; N]) {
    (
        std::array::from_fn(|j| {
            taps.index
                .iter()
                .map(|i| i32::try_from(i[j]).expect("a column index fits i32"))
                .collect()
        }),
        std::array::from_fn(|j| taps.weight.iter().map(|w| w[j]).collect()),
    )
}

/// [`Plan::ChannelsLast`]'s loop over output rows `rows`: the two source rows an output row
/// reads as planar runs (each row read once while the next output rows still read it),
/// handed with the row's weights to `row(top, bottom, [h0, h1], out)`, which writes the
/// output row's three planar runs.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn channels_last_rows<V: Values>(
    src: &V,
    ty: &Taps<2>,
    width: usize,
    rows: Range<usize>,
    emit: &mut dyn FnMut(usize, &[f32]),
    mut row: impl FnMut(&[f32], &[f32], [f32; 2], &mut [f32]),
) {
    let src_width = src.width();
    let mut lines = [vec![0f32; CHANNELS * src_width], vec![0f32; CHANNELS * src_width]];
    // The source row each line holds.
    let mut held = [usize::MAX; 2];
    let mut out = vec![0f32; CHANNELS * width];
    for oy in rows {
        let [y0, y1] = ty.index[oy];
        // The lines of rows y0 and y1, read into a line the other one does not need.
        let mut slots = [0usize; 2];
        for (j, &row) in [y0, y1].iter().enumerate() {
            slots[j] = held.iter().position(|&r| r == row).unwrap_or_else(|| {
                let s = if j == 1 {
                    1 - slots[0]
                } else {
                    usize::from(held[0] == y1)
                };
                src.line(row, &mut lines[s]);
                held[s] = row;
                s
            });
        }
        row(&lines[slots[0]], &lines[slots[1]], ty.weight[oy], &mut out);
        emit(oy, &out);
    }
}

/// [`Plan::ChannelsLast`]'s loop eight outputs of a channel at a time
/// ([`channels_last_rows`]), the four values of each output read from the two rows by
/// [`block_taps`]. Every lane runs the scalar loop's multiplies and FMAs in its order, so
/// the bits are the same. Molmo2 at 640x480 on one thread (its 378x378 and 644x644
/// resizes): 7.2 ms a call in this loop before, 3.9 ms after (perf samples); the whole call
/// 13.0-14.0 ms before, 10.4-11.1 ms after (on the Xeon; on a Zen 1 EPYC, 10.4 -> 8.3 ms
/// without gathers).
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn channels_last_fma<V: Values>(
    src: &V,
    ty: &Taps<2>,
    tx: &Taps<2>,
    rows: Range<usize>,
    emit: &mut dyn FnMut(usize, &[f32]),
) {
    use std::arch::x86_64::{
        _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_set1_ps, _mm256_storeu_ps,
    };
    let width = tx.index.len();
    let src_width = src.width();
    let (index, weight) = columns(tx);
    let blocks = width / LANES * LANES;
    let adjacent = adjacent_blocks(&index, blocks);
    channels_last_rows(src, ty, width, rows, emit, |top, bottom, [h0, h1], out| {
        for (ox, &adjacent) in (0..blocks).step_by(LANES).zip(&adjacent) {
            // SAFETY: AVX2 and FMA are guaranteed by the caller; outputs ox..ox + 8 lie in
            // `index`, `weight` and each plane of `out`, and every index is a column of the
            // source, inside each plane of `top` and `bottom`.
            unsafe {
                let w0 = _mm256_loadu_ps(weight[0][ox..].as_ptr());
                let w1 = _mm256_loadu_ps(weight[1][ox..].as_ptr());
                let (h0, h1) = (_mm256_set1_ps(h0), _mm256_set1_ps(h1));
                let (w00, w01) = (_mm256_mul_ps(h0, w0), _mm256_mul_ps(h0, w1));
                let (w10, w11) = (_mm256_mul_ps(h1, w0), _mm256_mul_ps(h1, w1));
                for c in 0..CHANNELS {
                    let plane = c * src_width..(c + 1) * src_width;
                    let [t0, t1] = block_taps(&top[plane.clone()], &index, ox, adjacent);
                    let [b0, b1] = block_taps(&bottom[plane], &index, ox, adjacent);
                    let sum = _mm256_mul_ps(t1, w01);
                    let sum = _mm256_fmadd_ps(t0, w00, sum);
                    let sum = _mm256_fmadd_ps(b0, w10, sum);
                    let sum = _mm256_fmadd_ps(b1, w11, sum);
                    _mm256_storeu_ps(out[c * width + ox..].as_mut_ptr(), sum);
                }
            }
        }
        for ox in blocks..width {
            let ([x0, x1], [w0, w1]) = (tx.index[ox], tx.weight[ox]);
            let w = [h0 * w0, h0 * w1, h1 * w0, h1 * w1];
            for c in 0..CHANNELS {
                let (t, b) = (&top[c * src_width..], &bottom[c * src_width..]);
                out[c * width + ox] = corner_sum([t[x0], t[x1], b[x0], b[x1]], w);
            }
        }
    });
}

/// [`Plan::run`] with AVX-512's loops where they apply ([`generic_avx512`],
/// [`channels_last_avx512`], on the same terms as [`run_fma`]'s), else [`run_fma`] (the
/// scalar loops compiled for AVX-512 were slower: Molmo2 at 4032x3024 on one thread, 6.1 ->
/// 7.0 ms a call).
///
/// # Safety
/// The CPU must support AVX-512 (F, BW, VL), AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
unsafe fn run_avx512<V: Values>(
    plan: &Plan,
    src: &V,
    width: usize,
    rows: Range<usize>,
    emit: &mut dyn FnMut(usize, &[f32]),
) {
    // SAFETY (all arms): the caller guarantees AVX-512, AVX2 and FMA.
    match plan {
        Plan::ChannelsLast { rows: ty, cols: tx } if src.width() <= 2 * width => unsafe {
            channels_last_avx512(src, ty, tx, rows, emit);
        },
        Plan::Linear { rows: ty, cols: tx } => unsafe { generic_avx512(src, ty, tx, rows, emit) },
        Plan::Cubic { rows: ty, cols: tx } => unsafe { generic_avx512(src, ty, tx, rows, emit) },
        Plan::Nearest { .. } | Plan::ChannelsLast { .. } => unsafe { run_fma(plan, src, width, rows, emit) },
    }
}

/// Outputs a vector in the AVX-512 loops.
#[cfg(target_arch = "x86_64")]
const WIDE: usize = 16;

/// The outputs a [`Window`] must hold on average for the AVX-512 loops to take an axis;
/// sparser, the AVX2 loops are faster. On a 2-vCPU Zen 5 EPYC, bicubic float32 planes
/// (median of 5 interleaved runs, one thread): 896x896 to 448x448 (15 outputs a window)
/// 0.81 -> 0.67 ms, 1344x1344 to 448x448 (10) 1.87 -> 2.00 ms, 2240x2240 to 448x448 (6)
/// 3.56 -> 4.81 ms.
#[cfg(target_arch = "x86_64")]
const DENSE: usize = 12;

/// Up to [`WIDE`] consecutive outputs of one axis whose taps all lie in the `2 * WIDE`
/// columns from `base`: two loads of those columns and one two-source permute per tap give
/// the outputs' values, in place of a load per output and transposes (or gathers).
/// Narrowing twofold, 15 outputs share a window; fivefold, 6.
#[cfg(target_arch = "x86_64")]
struct Window<const N: usize> {
    /// The first output.
    start: usize,
    /// The first column.
    base: usize,
    /// The lanes of the outputs (the rest are computed from column `base` and not stored).
    lanes: u16,
    /// The lanes of each half of the columns that lie inside the source row.
    loads: [u16; 2],
    /// Tap `j` of each lane: its column's offset from `base`, and its weight.
    offset: [[i32; WIDE]; N],
    weight: [[f32; WIDE]; N],
}

/// `taps`' outputs as [`Window`]s, in order, for source rows of `in_size` columns.
#[cfg(target_arch = "x86_64")]
fn windows<const N: usize>(taps: &Taps<N>, in_size: usize) -> Vec<Window<N>> {
    let lanes = |n: usize| u16::try_from((1u32 << n.min(WIDE)) - 1).expect("at most 16 lanes");
    let span = |index: &[usize; N]| (index.iter().min().copied(), index.iter().max().copied());
    let mut windows = Vec::with_capacity(taps.index.len().div_ceil(WIDE));
    let mut start = 0;
    while start < taps.index.len() {
        let (Some(mut first), Some(mut last)) = span(&taps.index[start]) else {
            unreachable!("an output has taps")
        };
        let mut end = start + 1;
        while let Some(index) = taps.index.get(end).filter(|_| end - start < WIDE) {
            let (Some(lo), Some(hi)) = span(index) else {
                unreachable!("an output has taps")
            };
            if hi.max(last) - lo.min(first) >= 2 * WIDE {
                break;
            }
            (first, last) = (lo.min(first), hi.max(last));
            end += 1;
        }
        let mut window = Window {
            start,
            base: first,
            lanes: lanes(end - start),
            loads: [
                lanes(in_size - first),
                lanes((in_size - first).saturating_sub(WIDE)),
            ],
            offset: [[0; WIDE]; N],
            weight: [[0.0; WIDE]; N],
        };
        for (k, (index, weight)) in taps.index[start..end]
            .iter()
            .zip(&taps.weight[start..end])
            .enumerate()
        {
            for j in 0..N {
                window.offset[j][k] = i32::try_from(index[j] - first).expect("an offset under 32");
                window.weight[j][k] = weight[j];
            }
        }
        windows.push(window);
        start = end;
    }
    windows
}

#[cfg(target_arch = "x86_64")]
impl<const N: usize> Window<N> {
    /// Each tap's values in `run`, a source row of the `in_size` columns the window was made
    /// for, as vectors of the window's lanes.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `run` must be such a row.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn taps(&self, run: &[f32]) -> [std::arch::x86_64::__m512; N] {
        use std::arch::x86_64::{_mm512_loadu_si512, _mm512_maskz_loadu_ps, _mm512_permutex2var_ps};
        let inside = self.loads.map(|lanes| lanes.count_ones() as usize);
        debug_assert!(self.base + inside[0] + inside[1] <= run.len());
        let at = run.as_ptr().wrapping_add(self.base);
        // SAFETY: AVX-512F is guaranteed by the caller; the masked loads read only the
        // columns inside `run` (`loads`), and each offset picks one of the 32 loaded.
        unsafe {
            let lo = _mm512_maskz_loadu_ps(self.loads[0], at);
            let hi = _mm512_maskz_loadu_ps(self.loads[1], at.wrapping_add(WIDE));
            std::array::from_fn(|j| {
                _mm512_permutex2var_ps(lo, _mm512_loadu_si512(self.offset[j].as_ptr().cast()), hi)
            })
        }
    }

    /// Tap `j`'s weights.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn weight(&self, j: usize) -> std::arch::x86_64::__m512 {
        // SAFETY: AVX-512F is guaranteed by the caller; the row holds 16 weights.
        unsafe { std::arch::x86_64::_mm512_loadu_ps(self.weight[j].as_ptr()) }
    }

    /// The window's outputs from `sums` into `plane`, a planar run of the axis's outputs.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `plane` must hold the axis's outputs.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn store(&self, plane: &mut [f32], sums: std::arch::x86_64::__m512) {
        debug_assert!(self.start + self.lanes.count_ones() as usize <= plane.len());
        // SAFETY: AVX-512F is guaranteed by the caller; the masked store writes the
        // window's outputs, inside `plane`.
        unsafe {
            std::arch::x86_64::_mm512_mask_storeu_ps(plane.as_mut_ptr().add(self.start), self.lanes, sums);
        }
    }
}

/// [`generic`] with its horizontal sums sixteen outputs of a channel a vector, by
/// [`Window`]s, each lane running [`chain`]'s multiply and FMAs in their order (the same
/// bits); the vertical sums compiled for AVX-512.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn generic_avx512<const N: usize, V: Values>(
    src: &V,
    ty: &Taps<N>,
    tx: &Taps<N>,
    rows: Range<usize>,
    emit: &mut dyn FnMut(usize, &[f32]),
) {
    use std::arch::x86_64::{_mm512_fmadd_ps, _mm512_mul_ps};
    let width = tx.index.len();
    let windows = windows(tx, src.width());
    if windows.len() * DENSE > width {
        // SAFETY: the caller guarantees AVX2 and FMA.
        return unsafe { generic_fma(src, ty, tx, rows, emit) };
    }
    let row_sums = |line: &[f32], sums: &mut [f32]| {
        let src_width = line.len() / CHANNELS;
        for (run, plane) in line.chunks_exact(src_width).zip(sums.chunks_exact_mut(width)) {
            for window in &windows {
                // SAFETY: AVX-512F and FMA are guaranteed by the caller; `run` is a source
                // row and `plane` a run of the axis's outputs.
                unsafe {
                    let value = window.taps(run);
                    let mut acc = _mm512_fmadd_ps(
                        value[0],
                        window.weight(0),
                        _mm512_mul_ps(value[1], window.weight(1)),
                    );
                    for (j, &value) in value.iter().enumerate().skip(2) {
                        acc = _mm512_fmadd_ps(value, window.weight(j), acc);
                    }
                    window.store(plane, acc);
                }
            }
        }
    };
    let mut out = vec![0f32; CHANNELS * width];
    generic(src, ty, tx, rows, &mut out, emit, row_sums);
}

/// [`Plan::ChannelsLast`]'s loop sixteen outputs of a channel a vector
/// ([`channels_last_rows`]), each output's four values read from the two rows by
/// [`Window`]s; every lane runs the scalar loop's multiplies and FMAs in its order.
///
/// # Safety
/// The CPU must support AVX-512F and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn channels_last_avx512<V: Values>(
    src: &V,
    ty: &Taps<2>,
    tx: &Taps<2>,
    rows: Range<usize>,
    emit: &mut dyn FnMut(usize, &[f32]),
) {
    use std::arch::x86_64::{_mm512_fmadd_ps, _mm512_mul_ps, _mm512_set1_ps};
    let width = tx.index.len();
    let src_width = src.width();
    let windows = windows(tx, src_width);
    if windows.len() * DENSE > width {
        // SAFETY: the caller guarantees AVX2 and FMA.
        return unsafe { channels_last_fma(src, ty, tx, rows, emit) };
    }
    channels_last_rows(src, ty, width, rows, emit, |top, bottom, [h0, h1], out| {
        for window in &windows {
            // SAFETY: AVX-512F and FMA are guaranteed by the caller; each plane of `top`
            // and `bottom` is a source row, each plane of `out` a run of the outputs.
            unsafe {
                let (w0, w1) = (window.weight(0), window.weight(1));
                let (h0, h1) = (_mm512_set1_ps(h0), _mm512_set1_ps(h1));
                let (w00, w01) = (_mm512_mul_ps(h0, w0), _mm512_mul_ps(h0, w1));
                let (w10, w11) = (_mm512_mul_ps(h1, w0), _mm512_mul_ps(h1, w1));
                for c in 0..CHANNELS {
                    let plane = c * src_width..(c + 1) * src_width;
                    let [t0, t1] = window.taps(&top[plane.clone()]);
                    let [b0, b1] = window.taps(&bottom[plane]);
                    let sum = _mm512_mul_ps(t1, w01);
                    let sum = _mm512_fmadd_ps(t0, w00, sum);
                    let sum = _mm512_fmadd_ps(b0, w10, sum);
                    let sum = _mm512_fmadd_ps(b1, w11, sum);
                    window.store(&mut out[c * width..(c + 1) * width], sum);
                }
            }
        }
    });
}

fn check_size(arg: &'static str, (h, w): (usize, usize)) -> Result<usize, TransformError> {
    if h == 0 || w == 0 {
        return Err(invalid(arg, "nonzero height and width", format!("({h}, {w})")));
    }
    checked_len(arg, &[CHANNELS, h, w])
}

/// Checks that an output of `len` `unit` (bytes or values) holds an image of `dst_size`.
fn check_dst(len: usize, dst_size: (usize, usize), unit: &str) -> Result<(), TransformError> {
    let want = check_size("dst_size", dst_size)?;
    if len != want {
        let (h, w) = dst_size;
        return Err(invalid(
            "dst",
            format!("{want} {unit} for {h}x{w}x3"),
            format!("{len} {unit}"),
        ));
    }
    Ok(())
}

/// torch's `x.round().clamp(0, 255)` as a byte: rounding half to even commutes with a clamp
/// to integer bounds, and adding then subtracting 2^23 rounds a float32 in `0..=255` half
/// to even (one addition instead of a libm call on the scalar path).
#[inline(always)]
fn round_clamp(v: f32) -> u8 {
    const SHIFT: f32 = 8_388_608.0;
    ((v.clamp(0.0, 255.0) + SHIFT) - SHIFT) as u8
}

/// Resize HWC u8 RGB `src` of `src_size` = (height, width) into HWC u8 `dst` of
/// `dst_size` like torchvision's `resize(image.float(), size, mode, antialias=False)`
/// followed by `.round().clamp(0, 255).to(torch.uint8)` (Molmo2's resize): torch's float32
/// kernels, each value rounded half to even; `one_thread`: as torch computes it on one
/// thread (bilinear then always runs the channels-last loop).
///
/// # Errors
///
/// [`TransformError::InvalidArgument`] for a zero size or a buffer whose length does not
/// match its size, [`TransformError::Overflow`] for a size whose byte count does not fit.
pub fn resize_float_rgb(
    src: &[u8],
    src_size: (usize, usize),
    dst: &mut [u8],
    dst_size: (usize, usize),
    mode: FloatMode,
    one_thread: bool,
) -> Result<(), TransformError> {
    resize_float_rgb_with(src, src_size, dst, dst_size, mode, one_thread, Backend::Auto)
}

/// [`resize_float_rgb`] on a chosen [`Backend`] (`Avx2`: AVX2 and FMA); every backend gives
/// the same bytes.
///
/// # Errors
///
/// As [`resize_float_rgb`], plus [`TransformError::InvalidArgument`] when `backend` is not
/// supported by this CPU.
pub fn resize_float_rgb_with(
    src: &[u8],
    src_size: (usize, usize),
    dst: &mut [u8],
    dst_size: (usize, usize),
    mode: FloatMode,
    one_thread: bool,
    backend: Backend,
) -> Result<(), TransformError> {
    check_buffers(src, src_size, dst, dst_size)?;
    resize_float_source_with(
        Source::packed(src, CHANNELS, src_size)?,
        dst,
        dst_size,
        mode,
        one_thread,
        backend,
    )
}

/// [`resize_float_rgb`] of any [`Source`], read where it is: a Pillow image's RGBX or
/// grayscale rows need no packed copy first.
///
/// # Errors
///
/// As [`resize_float_rgb`].
pub fn resize_float_source(
    src: Source<'_>,
    dst: &mut [u8],
    dst_size: (usize, usize),
    mode: FloatMode,
    one_thread: bool,
) -> Result<(), TransformError> {
    resize_float_source_with(src, dst, dst_size, mode, one_thread, Backend::Auto)
}

/// [`resize_float_source`] on a chosen [`Backend`]; every backend gives the same bytes.
///
/// # Errors
///
/// As [`resize_float_rgb_with`].
pub fn resize_float_source_with(
    src: Source<'_>,
    dst: &mut [u8],
    dst_size: (usize, usize),
    mode: FloatMode,
    one_thread: bool,
    backend: Backend,
) -> Result<(), TransformError> {
    check_dst(dst.len(), dst_size, "bytes")?;
    let path = Path::select(backend)?;
    if src.size() == dst_size {
        src.write_rgb(dst);
        return Ok(());
    }
    let norm = &*IDENTITY;
    let plan = Plan::new(mode, one_thread, src.size(), dst_size);
    // The pixel size a constant in each loop: pixels are indexed without a multiply by a
    // variable.
    match src.channels() {
        1 => rounded_bytes(&Mapped::<1> { src, norm }, &plan, path, dst, dst_size),
        3 => rounded_bytes(&Mapped::<3> { src, norm }, &plan, path, dst, dst_size),
        _ => rounded_bytes(&Mapped::<4> { src, norm }, &plan, path, dst, dst_size),
    }
    Ok(())
}

/// `values` resized by `plan` into HWC bytes `dst` of `dst_size`, each value rounded half
/// to even and clamped, in row bands across the calling thread's team.
fn rounded_bytes<V: Values>(
    values: &V,
    plan: &Plan,
    path: Path,
    dst: &mut [u8],
    (height, width): (usize, usize),
) {
    by_bands(0..height, dst, width * CHANNELS, MIN_BAND, |rows, chunk| {
        let first = rows.start;
        path.run(plan, values, width, rows, &mut |oy, planes| {
            let line = &mut chunk[(oy - first) * width * CHANNELS..][..width * CHANNELS];
            path.round_into_pixels(planes, line);
        });
    });
}

/// [`Path::round_into_pixels`] eight pixels a block while a block's 16-byte stores (24
/// bytes, then 4 that the next block overwrites) fit in `line`; returns the pixels written.
/// Rounding half to even is `_mm256_round_ps`'s nearest mode, whatever MXCSR says; on a
/// 2-vCPU Zen 5 EPYC, the scalar loop, a channel at a time, was 31% of a Molmo2 call at
/// 640x480.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn round_into_pixels_avx2(planes: &[f32], line: &mut [u8]) -> usize {
    use std::arch::x86_64::{
        _mm256_castsi256_si128, _mm256_cvttps_epi32, _mm256_extracti128_si256, _mm256_loadu_ps,
        _mm256_max_ps, _mm256_min_ps, _mm256_packs_epi32, _mm256_packus_epi16, _mm256_round_ps,
        _mm256_set1_ps, _mm256_setr_epi8, _mm256_setzero_si256, _mm256_shuffle_epi8, _mm_storeu_si128,
        _MM_FROUND_NO_EXC, _MM_FROUND_TO_NEAREST_INT,
    };
    let width = line.len() / CHANNELS;
    let (zero, top) = (_mm256_set1_ps(0.0), _mm256_set1_ps(255.0));
    // After the packs each 128-bit lane holds its four pixels' R, then G, then B bytes.
    let z = -1;
    let order = _mm256_setr_epi8(
        0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, z, z, z, z, 0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, z, z, z, z,
    );
    let mut x = 0;
    while CHANNELS * (x + LANES) + 4 <= line.len() {
        // SAFETY: pixels x..x + 8 lie in each plane (`x + 8 <= width`); the stores write
        // bytes 3x..3x + 28 of `line`, inside it as the loop bounds them.
        unsafe {
            let [r, g, b] = [0, 1, 2].map(|c| {
                let v = _mm256_loadu_ps(planes[c * width + x..][..LANES].as_ptr());
                let v = _mm256_min_ps(_mm256_max_ps(v, zero), top);
                _mm256_cvttps_epi32(_mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v))
            });
            let bytes = _mm256_packus_epi16(
                _mm256_packs_epi32(r, g),
                _mm256_packs_epi32(b, _mm256_setzero_si256()),
            );
            let pixels = _mm256_shuffle_epi8(bytes, order);
            let at = line.as_mut_ptr().add(CHANNELS * x);
            _mm_storeu_si128(at.cast(), _mm256_castsi256_si128(pixels));
            _mm_storeu_si128(at.add(12).cast(), _mm256_extracti128_si256::<1>(pixels));
        }
        x += LANES;
    }
    x
}

/// HWC u8 RGB `src`, each byte mapped through its channel's table in `norm` (the
/// normalised value), resized like torch's interpolation of that float32 CHW image without
/// antialiasing (Phi-4-multimodal's global view of its normalised canvas), into CHW
/// float32 `dst` of `dst_size` (three planes). An unchanged size only maps the bytes.
///
/// # Errors
///
/// [`TransformError::InvalidArgument`] for a zero size or a buffer whose length does not
/// match its size, [`TransformError::Overflow`] for a size whose element count does not fit.
pub fn resize_mapped_planes(
    src: &[u8],
    src_size: (usize, usize),
    norm: &Normalize,
    dst: &mut [f32],
    dst_size: (usize, usize),
    mode: FloatMode,
    one_thread: bool,
) -> Result<(), TransformError> {
    resize_mapped_planes_with(
        src,
        src_size,
        norm,
        dst,
        dst_size,
        mode,
        one_thread,
        Backend::Auto,
    )
}

/// [`resize_mapped_planes`] on a chosen [`Backend`]; every backend gives the same bits.
///
/// # Errors
///
/// As [`resize_mapped_planes`], plus [`TransformError::InvalidArgument`] when `backend` is
/// not supported by this CPU.
#[allow(clippy::too_many_arguments)]
pub fn resize_mapped_planes_with(
    src: &[u8],
    src_size: (usize, usize),
    norm: &Normalize,
    dst: &mut [f32],
    dst_size: (usize, usize),
    mode: FloatMode,
    one_thread: bool,
    backend: Backend,
) -> Result<(), TransformError> {
    let values = Mapped::rgb(src, src_size, norm)?;
    resize_values(&values, src_size, dst, dst_size, (mode, one_thread), backend)
}

/// [`resize_mapped_planes`], and `windows` of the mapped image (each inside it) written into
/// `windows_dst` as [`crate::transforms::crop_source_and_normalize`] writes them, one after
/// the other: each row looked up once for both (Phi-4-multimodal's global view of its canvas
/// and its crops). The rows the resize reads are written as it reads them, the others after;
/// the windows' values are streamed (see [`Tee`]): for windows larger than the cache.
///
/// # Errors
///
/// As [`resize_mapped_planes`], and [`TransformError::InvalidArgument`] for a window that
/// is empty or not inside the image, or a `windows_dst` of another length than theirs.
#[allow(clippy::too_many_arguments)]
pub fn resize_mapped_planes_and_windows(
    src: &[u8],
    src_size: (usize, usize),
    norm: &Normalize,
    dst: &mut [f32],
    dst_size: (usize, usize),
    mode: FloatMode,
    one_thread: bool,
    windows: &[Crop],
    windows_dst: &mut [f32],
) -> Result<(), TransformError> {
    let (h, w) = src_size;
    if let Some(window) = windows.iter().find(|b| !b.lies_in(src_size)) {
        return Err(invalid(
            "windows",
            format!("non-empty windows inside the {h}x{w} image"),
            format!("{window:?}"),
        ));
    }
    // Inside the image, so the lengths cannot overflow.
    let len: usize = windows.iter().map(|b| CHANNELS * b.height * b.width).sum();
    if windows_dst.len() != len {
        return Err(invalid("windows_dst", format!("{len} values"), windows_dst.len()));
    }
    let values = Tee::<CHANNELS> {
        mapped: Mapped::rgb(src, src_size, norm)?,
        windows,
        out: Mutex::new((windows_dst, vec![false; h])),
    };
    resize_values(
        &values,
        src_size,
        dst,
        dst_size,
        (mode, one_thread),
        Backend::Auto,
    )?;
    let mut out = values.out.lock().unwrap_or_else(PoisonError::into_inner);
    let (out, written) = &mut *out;
    let mut line = vec![0f32; CHANNELS * w];
    for y in (0..h).filter(|&y| !written[y]) {
        values.mapped.line(y, &mut line);
        values.write_row(y, &line, out);
    }
    #[cfg(target_arch = "x86_64")]
    crate::stream::fence();
    Ok(())
}

/// CHW float32 planes `src` of `src_size` resized like `F.interpolate` of the (1, 3, H, W)
/// tensor without antialiasing (`align_corners=False`), into CHW float32 `dst` of `dst_size`.
/// An unchanged size copies (as torchvision's `resize` returns the image).
///
/// # Errors
///
/// [`TransformError::InvalidArgument`] for a zero size or a buffer whose length does not
/// match its size, [`TransformError::Overflow`] for a size whose element count does not fit.
pub fn resize_planes(
    src: &[f32],
    src_size: (usize, usize),
    dst: &mut [f32],
    dst_size: (usize, usize),
    mode: FloatMode,
    one_thread: bool,
) -> Result<(), TransformError> {
    resize_planes_with(src, src_size, dst, dst_size, mode, one_thread, Backend::Auto)
}

/// [`resize_planes`] on a chosen [`Backend`]; every backend gives the same bits.
///
/// # Errors
///
/// As [`resize_planes`], plus [`TransformError::InvalidArgument`] when `backend` is not
/// supported by this CPU.
pub fn resize_planes_with(
    src: &[f32],
    src_size: (usize, usize),
    dst: &mut [f32],
    dst_size: (usize, usize),
    mode: FloatMode,
    one_thread: bool,
    backend: Backend,
) -> Result<(), TransformError> {
    let len = check_size("src_size", src_size)?;
    if src.len() != len {
        return Err(invalid("src", format!("{len} values"), src.len()));
    }
    let values = Planes {
        data: src,
        height: src_size.0,
        width: src_size.1,
    };
    resize_values(&values, src_size, dst, dst_size, (mode, one_thread), backend)
}

/// `values` (of `src_size`) resized into CHW `dst`, in row bands across the calling
/// thread's team.
fn resize_values<V: Values>(
    values: &V,
    src_size: (usize, usize),
    dst: &mut [f32],
    dst_size: (usize, usize),
    (mode, one_thread): (FloatMode, bool),
    backend: Backend,
) -> Result<(), TransformError> {
    check_dst(dst.len(), dst_size, "values")?;
    let path = Path::select(backend)?;
    let (height, width) = dst_size;
    let plane = height * width;
    if src_size == dst_size {
        for (c, out) in dst.chunks_exact_mut(plane).enumerate() {
            for (y, line) in out.chunks_exact_mut(width).enumerate() {
                let row = values.row(y);
                for (x, o) in line.iter_mut().enumerate() {
                    *o = row(x, c);
                }
            }
        }
        return Ok(());
    }
    let plan = Plan::new(mode, one_thread, src_size, dst_size);
    // Bands of rows, each the same rows of the three planes.
    let band = if workers::team_size() == 1 {
        height
    } else {
        band_len(height, MIN_BAND)
    };
    let (r, gb) = dst.split_at_mut(plane);
    let (g, b) = gb.split_at_mut(plane);
    let bands: Vec<Mutex<[&mut [f32]; CHANNELS]>> = r
        .chunks_mut(band * width)
        .zip(g.chunks_mut(band * width))
        .zip(b.chunks_mut(band * width))
        .map(|((r, g), b)| Mutex::new([r, g, b]))
        .collect();
    let run_band = |i: usize| {
        let mut planes = bands[i].lock().unwrap_or_else(PoisonError::into_inner);
        let first = i * band;
        let rows = first..first + planes[0].len() / width;
        path.run(&plan, values, width, rows, &mut |oy, values| {
            for (out, run) in planes.iter_mut().zip(values.chunks_exact(width)) {
                out[(oy - first) * width..][..width].copy_from_slice(run);
            }
        });
    };
    if bands.len() == 1 {
        run_band(0);
    } else {
        workers::bands(bands.len(), &run_band);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;

    /// The backends this CPU runs.
    fn backends() -> Vec<Backend> {
        [Backend::Scalar, Backend::Avx2, Backend::Avx512]
            .into_iter()
            .filter(|&backend| Path::select(backend).is_ok())
            .collect()
    }

    /// A 6x5 float image, values spread around zero like normalised pixels.
    fn image() -> Vec<f32> {
        (0..3 * 6 * 5)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0)
            .collect()
    }

    fn planes(src: &[f32], from: (usize, usize), to: (usize, usize), mode: FloatMode) -> Vec<f32> {
        let mut out = vec![f32::NAN; 3 * to.0 * to.1];
        resize_planes(src, from, &mut out, to, mode, false).unwrap();
        out
    }

    // Expected bits below were produced by torch 2.15.0+cu132 on an x86-64 CPU with AVX-512
    // (`F.interpolate(torch.tensor(image).reshape(1, 3, 6, 5), size, mode=...,
    // align_corners=False)[0]`, default threads), printed with `.view(torch.int32)`.

    #[test]
    fn bicubic_matches_torch() {
        let got = planes(&image(), (6, 5), (4, 7), FloatMode::Bicubic);
        let bits: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
        assert_eq!(bits[..8], TORCH_BICUBIC[..8]);
        assert_eq!(bits, TORCH_BICUBIC);
    }

    #[test]
    fn bilinear_matches_torch_in_both_loops() {
        // 4 + 7 <= 128: the channels-last loop.
        let got = planes(&image(), (6, 5), (4, 7), FloatMode::Bilinear);
        let bits: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
        assert_eq!(bits, TORCH_BILINEAR_SMALL);
        // 9 + 130 > 128: the generic loop; the first and last values of each plane.
        let got = planes(&image(), (6, 5), (9, 130), FloatMode::Bilinear);
        let plane = 9 * 130;
        let bits: Vec<u32> = (0..3)
            .flat_map(|c| [got[c * plane], got[c * plane + 131], got[(c + 1) * plane - 1]])
            .map(f32::to_bits)
            .collect();
        assert_eq!(bits, TORCH_BILINEAR_WIDE);
        // The same size on one torch thread: the channels-last loop, one bit apart from the
        // generic loop at these positions (and at half the others).
        let one_thread = |one: bool| {
            let mut out = vec![f32::NAN; 3 * 9 * 130];
            resize_planes(&image(), (6, 5), &mut out, (9, 130), FloatMode::Bilinear, one).unwrap();
            [23, 1754, 3507].map(|i: usize| out[i].to_bits())
        };
        assert_eq!(one_thread(false), [0xc003_fb5d, 0xbf90_de6a, 0x3f25_a5a6]);
        assert_eq!(one_thread(true), [0xc003_fb5e, 0xbf90_de69, 0x3f25_a5a7]);
    }

    #[test]
    fn weights_follow_torch_arithmetic() {
        // 8 -> 5 output 1: position 1.9, t = 0.9000001: torch's first weight is
        // -0.006750345 (0xbbdd_3200), not the -0.006750107 of unfused float arithmetic.
        let taps = cubic_taps(8, 5);
        assert_eq!(taps.index[1], [0, 1, 2, 3]);
        assert_eq!(taps.weight[1][0].to_bits(), 0xbbdd_3200);
        // An integer scale gives exact weights: t = 0.5 for even factors, 0 for odd ones.
        let bits = |w: &[f32]| w.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&cubic_taps(896, 448).weight[7]),
            bits(&[-0.09375, 0.59375, 0.59375, -0.09375])
        );
        assert_eq!(
            bits(&cubic_taps(1344, 448).weight[7]),
            bits(&[0.0, 1.0, 0.0, 0.0])
        );
        assert_eq!(cubic_taps(1344, 448).index[0], [0, 1, 2, 3]);
        // Borders clamp their indices; an unchanged bilinear axis keeps its pixels.
        assert_eq!(cubic_taps(3, 7).index[0], [0, 0, 0, 1]);
        assert_eq!(cubic_taps(3, 7).index[6], [1, 2, 2, 2]);
        assert_eq!(linear_taps(5, 5, false).index[3], [3, 3]);
        assert_eq!(bits(&linear_taps(5, 5, true).weight[3]), bits(&[1.0, 0.0]));
        // The generic bilinear loop's positions are unfused: 39 -> 150 output 8.
        assert_eq!(linear_taps(39, 150, false).weight[8][1].to_bits(), 0x3f35_c290);
        assert_eq!(linear_taps(39, 150, true).weight[8][1].to_bits(), 0x3f35_c28e);
    }

    #[test]
    fn u8_resize_rounds_half_to_even_and_copies_unchanged_sizes() {
        // Two pixels 1 and 2 (and 4 and 7) upscaled 2x: the middle outputs are 1.25/1.75
        // and 4.75/6.25; 2x on a 1-wide axis leaves a half only at exact midpoints.
        let src = [1u8, 4, 10, 2, 7, 11];
        let mut dst = [0u8; 12];
        resize_float_rgb(&src, (1, 2), &mut dst, (1, 4), FloatMode::Bilinear, false).unwrap();
        assert_eq!(dst, [1, 4, 10, 1, 5, 10, 2, 6, 11, 2, 7, 11]);
        let mut same = [0u8; 6];
        resize_float_rgb(&src, (1, 2), &mut same, (1, 2), FloatMode::Bicubic, false).unwrap();
        assert_eq!(same, src);
        // 0.5 rounds to 0 and 2.5 to 2: (0, 1) and (2, 3) averaged by a 2 -> 1 resize.
        let mut half = [9u8; 3];
        resize_float_rgb(
            &[0, 2, 200, 1, 3, 201],
            (1, 2),
            &mut half,
            (1, 1),
            FloatMode::Bilinear,
            false,
        )
        .unwrap();
        assert_eq!(half, [0, 2, 200]);
        // Bicubic overshoots are clamped.
        let mut edge = [0u8; 3 * 6];
        resize_float_rgb(
            &[0, 0, 0, 255, 255, 255],
            (1, 2),
            &mut edge,
            (1, 6),
            FloatMode::Bicubic,
            false,
        )
        .unwrap();
        assert_eq!(edge[..3], [0, 0, 0]);
        assert_eq!(edge[15..], [255, 255, 255]);
    }

    #[test]
    fn mapped_planes_equal_planes_of_the_mapped_values() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let tables: [[f32; 256]; 3] =
            std::array::from_fn(|c| std::array::from_fn(|x| (x as f32 - 127.5 + c as f32) / 63.0));
        let norm = Normalize::from_tables(tables);
        for case in 0..60 {
            // Rows past 64 pixels: the vector lookup's whole blocks as well as its masked tail.
            let (h, w) = (1 + rng.below(40), 1 + rng.below(150));
            let (h2, w2) = (1 + rng.below(50), 1 + rng.below(50));
            let pixels: Vec<u8> = (0..h * w * 3).map(|_| rng.below(256) as u8).collect();
            let planes: Vec<f32> = (0..3 * h * w)
                .map(|i| {
                    let (c, p) = (i / (h * w), i % (h * w));
                    tables[c][usize::from(pixels[p * 3 + c])]
                })
                .collect();
            for mode in [FloatMode::NearestExact, FloatMode::Bilinear, FloatMode::Bicubic] {
                let mut a = vec![0f32; 3 * h2 * w2];
                let mut b = vec![1f32; 3 * h2 * w2];
                resize_mapped_planes(&pixels, (h, w), &norm, &mut a, (h2, w2), mode, false).unwrap();
                resize_planes(&planes, (h, w), &mut b, (h2, w2), mode, false).unwrap();
                assert_eq!(a, b, "case {case} {mode:?} ({h}, {w}) -> ({h2}, {w2})");
            }
        }
    }

    /// Windows written as the resize reads the rows (each row looked up once) equal the
    /// resize and each window written apart: rows the resize never reads (narrowing
    /// fivefold), windows that overlap, repeat or tile the image, on one thread and in a team
    /// of three.
    #[test]
    fn windows_written_with_a_resize_equal_each_written_apart() {
        use crate::transforms::crop_source_and_normalize;
        let mut rng = Rng(0x6a09_e667_f3bc_c908);
        let tables: [[f32; 256]; 3] =
            std::array::from_fn(|c| std::array::from_fn(|x| (x as f32 - 127.5 - c as f32) / 61.0));
        let norm = Normalize::from_tables(tables);
        for case in 0..40 {
            let (h, w) = (1 + rng.below(90), 1 + rng.below(150));
            let (h2, w2) = if case % 3 == 0 {
                (h.div_ceil(5), w.div_ceil(5))
            } else {
                (1 + rng.below(60), 1 + rng.below(60))
            };
            let pixels: Vec<u8> = (0..h * w * 3).map(|_| rng.below(256) as u8).collect();
            let mut windows: Vec<Crop> = (0..=rng.below(4))
                .map(|_| {
                    let (height, width) = (1 + rng.below(h), 1 + rng.below(w));
                    Crop {
                        top: rng.below(h - height + 1) as isize,
                        left: rng.below(w - width + 1) as isize,
                        height,
                        width,
                    }
                })
                .collect();
            windows.push(windows[0]);
            if case % 4 == 0 {
                // The image in tiles, as Phi-4-multimodal cuts its canvas.
                let halves = |n: usize| {
                    [(0, n / 2), (n / 2, n - n / 2)]
                        .into_iter()
                        .filter(|&(_, len)| len > 0)
                };
                windows = halves(h)
                    .flat_map(|(top, height)| {
                        halves(w).map(move |(left, width)| Crop {
                            top: top as isize,
                            left: left as isize,
                            height,
                            width,
                        })
                    })
                    .collect();
            }
            let len: usize = windows.iter().map(|b| 3 * b.height * b.width).sum();
            for (mode, one) in [
                (FloatMode::NearestExact, false),
                (FloatMode::Bilinear, case % 2 == 0),
                (FloatMode::Bicubic, false),
            ] {
                let mut want = vec![0f32; 3 * h2 * w2];
                resize_mapped_planes(&pixels, (h, w), &norm, &mut want, (h2, w2), mode, one).unwrap();
                let mut want_windows = vec![0f32; len];
                let mut rest = &mut want_windows[..];
                for window in &windows {
                    let (part, tail) = rest.split_at_mut(3 * window.height * window.width);
                    let src = Source::packed(&pixels, 3, (h, w)).unwrap();
                    crop_source_and_normalize(src, *window, &norm, part).unwrap();
                    rest = tail;
                }
                let run = || {
                    let (mut got, mut got_windows) = (vec![f32::NAN; want.len()], vec![f32::NAN; len]);
                    resize_mapped_planes_and_windows(
                        &pixels,
                        (h, w),
                        &norm,
                        &mut got,
                        (h2, w2),
                        mode,
                        one,
                        &windows,
                        &mut got_windows,
                    )
                    .unwrap();
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "case {case} {mode:?}");
                    assert_eq!(bits(&got_windows), bits(&want_windows), "case {case} {mode:?}");
                };
                run();
                workers::run(3, 4, 1, &|_| run());
            }
        }
    }

    #[test]
    fn windows_written_with_a_resize_are_refused_outside_the_image_or_output() {
        let norm = Normalize::from_tables([std::array::from_fn(|x| x as f32); 3]);
        let pixels = [7u8; 3 * 4 * 5];
        let (mut out, mut crops) = (vec![0f32; 3 * 4], vec![0f32; 3 * 4 * 5]);
        let whole = Crop {
            top: 0,
            left: 0,
            height: 4,
            width: 5,
        };
        let bicubic = FloatMode::Bicubic;
        for (window, len) in [
            (Crop { top: 1, ..whole }, 60),
            (Crop { left: -1, ..whole }, 60),
            (Crop { height: 0, ..whole }, 0),
            (whole, 59),
        ] {
            let err = resize_mapped_planes_and_windows(
                &pixels,
                (4, 5),
                &norm,
                &mut out,
                (2, 2),
                bicubic,
                false,
                &[window],
                &mut crops[..len],
            )
            .unwrap_err();
            assert!(
                matches!(err, TransformError::InvalidArgument { .. }),
                "{window:?}: {err}"
            );
        }
    }

    /// The scalar path, written out per output pixel from the formulas in the module
    /// documentation: what every path and the row cache must reproduce.
    fn naive(
        src: &[f32],
        (h, w): (usize, usize),
        (h2, w2): (usize, usize),
        mode: FloatMode,
        one_thread: bool,
    ) -> Vec<f32> {
        let at = |c: usize, y: usize, x: usize| src[(c * h + y) * w + x];
        let (ny, nx) = (nearest_exact_indices(h, h2), nearest_exact_indices(w, w2));
        let (cy, cx) = (cubic_taps(h, h2), cubic_taps(w, w2));
        let fused = one_thread || h2 + w2 <= 128;
        let (ly, lx) = (linear_taps(h, h2, fused), linear_taps(w, w2, fused));
        let mut out = vec![0f32; 3 * h2 * w2];
        for c in 0..3 {
            for oy in 0..h2 {
                for ox in 0..w2 {
                    out[(c * h2 + oy) * w2 + ox] = match mode {
                        FloatMode::NearestExact => at(c, ny[oy], nx[ox]),
                        FloatMode::Bicubic => {
                            let wx = cx.weight[ox];
                            let sums: [f32; 4] = std::array::from_fn(|k| {
                                let y = cy.index[oy][k];
                                let v: [f32; 4] = std::array::from_fn(|j| at(c, y, cx.index[ox][j]));
                                let s = v[0].mul_add(wx[0], v[1] * wx[1]);
                                let s = v[2].mul_add(wx[2], s);
                                v[3].mul_add(wx[3], s)
                            });
                            let wy = cy.weight[oy];
                            let s = sums[0].mul_add(wy[0], sums[1] * wy[1]);
                            let s = sums[2].mul_add(wy[2], s);
                            sums[3].mul_add(wy[3], s)
                        }
                        FloatMode::Bilinear => {
                            let ([y0, y1], [a0, a1]) = (ly.index[oy], ly.weight[oy]);
                            let ([x0, x1], [b0, b1]) = (lx.index[ox], lx.weight[ox]);
                            if fused {
                                let s = at(c, y0, x0).mul_add(a0 * b0, at(c, y0, x1) * (a0 * b1));
                                let s = at(c, y1, x0).mul_add(a1 * b0, s);
                                at(c, y1, x1).mul_add(a1 * b1, s)
                            } else {
                                let t0 = at(c, y0, x0).mul_add(b0, at(c, y0, x1) * b1);
                                let t1 = at(c, y1, x0).mul_add(b0, at(c, y1, x1) * b1);
                                t0.mul_add(a0, t1 * a1)
                            }
                        }
                    };
                }
            }
        }
        out
    }

    #[test]
    fn every_path_and_band_matches_the_per_pixel_formulas() {
        let backends = backends();
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for case in 0..90 {
            let size = |rng: &mut Rng| match case % 3 {
                0 => 1 + rng.below(5),
                1 => 1 + rng.below(40),
                _ => 1 + rng.below(160),
            };
            let (h, w) = (size(&mut rng), size(&mut rng));
            let (mut h2, mut w2) = (size(&mut rng), size(&mut rng));
            if case % 5 == 0 {
                h2 = h;
            }
            if case % 7 == 0 {
                w2 = w;
            }
            if (h2, w2) == (h, w) {
                w2 += 1;
            }
            let src: Vec<f32> = (0..3 * h * w)
                .map(|_| (rng.below(20001) as f32 - 10000.0) / 997.0)
                .collect();
            for (mode, one) in [
                (FloatMode::NearestExact, false),
                (FloatMode::Bilinear, false),
                (FloatMode::Bilinear, true),
                (FloatMode::Bicubic, case % 2 == 0),
            ] {
                let want = naive(&src, (h, w), (h2, w2), mode, one);
                for &backend in &backends {
                    let mut got = vec![f32::NAN; want.len()];
                    resize_planes_with(&src, (h, w), &mut got, (h2, w2), mode, one, backend).unwrap();
                    let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{mode:?} ({h}, {w}) -> ({h2}, {w2}) on {backend:?}");
                }
                // Row bands across a team of workers give the same bits.
                workers::run(3, 4, 1, &|_| {
                    let mut out = vec![f32::NAN; want.len()];
                    resize_planes(&src, (h, w), &mut out, (h2, w2), mode, one).unwrap();
                    assert!(out.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()));
                });
            }
        }
    }

    #[test]
    fn u8_paths_agree() {
        let backends = backends();
        let mut rng = Rng(7);
        for case in 0..60 {
            let (h, w) = (1 + rng.below(90), 1 + rng.below(90));
            let (h2, w2) = (1 + rng.below(300), 1 + rng.below(300));
            let src: Vec<u8> = (0..h * w * 3).map(|_| rng.below(256) as u8).collect();
            let mode = [FloatMode::NearestExact, FloatMode::Bilinear, FloatMode::Bicubic][case % 3];
            let floats: Vec<f32> = (0..3 * h * w)
                .map(|i| f32::from(src[(i % (h * w)) * 3 + i / (h * w)]))
                .collect();
            let want: Vec<u8> = {
                let planes = naive(&floats, (h, w), (h2, w2), mode, case % 2 == 0);
                (0..h2 * w2 * 3)
                    .map(|i| {
                        planes[(i % 3) * h2 * w2 + i / 3]
                            .round_ties_even()
                            .clamp(0.0, 255.0) as u8
                    })
                    .collect()
            };
            let one = case % 2 == 0;
            for &backend in &backends {
                let mut got = vec![0u8; want.len()];
                resize_float_rgb_with(&src, (h, w), &mut got, (h2, w2), mode, one, backend).unwrap();
                if (h, w) != (h2, w2) {
                    assert_eq!(got, want, "{mode:?} ({h}, {w}) -> ({h2}, {w2}) on {backend:?}");
                }
            }
            // RGBX, grayscale and Pillow's blocks of rows, read where they are: the bytes of
            // their packed RGB pixels.
            let gray: Vec<u8> = (0..h * w).map(|_| rng.below(256) as u8).collect();
            let block = 1 + rng.below(h);
            for (c, blocks) in crate::resize::tests::layouts(&src, &gray, w, block, &mut rng) {
                let packed: Vec<u8> = if c == 1 {
                    gray.iter().flat_map(|&g| [g; 3]).collect()
                } else {
                    src.clone()
                };
                let mut want = vec![0u8; h2 * w2 * 3];
                resize_float_rgb(&packed, (h, w), &mut want, (h2, w2), mode, one).unwrap();
                let rows = crate::resize::tests::row_slices(&blocks, w, c);
                let source = Source::rows(&rows, c, (h, w)).unwrap();
                for &backend in &backends {
                    let mut got = vec![0u8; want.len()];
                    resize_float_source_with(source, &mut got, (h2, w2), mode, one, backend).unwrap();
                    assert_eq!(
                        got, want,
                        "c={c} {mode:?} ({h}, {w}) -> ({h2}, {w2}) on {backend:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn pixels_round_alike_on_every_path() {
        let mut paths = vec![Path::Scalar];
        paths.extend(Path::fma());
        paths.extend(Path::avx512());
        let mut rng = Rng(11);
        for width in 1..40 {
            // Halves (ties), quarters and values past both ends of 0..=255.
            let planes: Vec<f32> = (0..3 * width)
                .map(|_| rng.below(1200) as f32 / 4.0 - 20.0)
                .collect();
            let want: Vec<u8> = (0..3 * width)
                .map(|i| round_clamp(planes[(i % 3) * width + i / 3]))
                .collect();
            for &path in &paths {
                let mut got = vec![0u8; 3 * width];
                path.round_into_pixels(&planes, &mut got);
                assert_eq!(got, want, "width {width} on {path:?}");
            }
        }
    }

    #[test]
    fn round_clamp_is_torchs_round_then_clamp() {
        let mut v = -3.0f32;
        while v < 260.0 {
            for x in [v, v.next_up(), v.next_down(), v + 0.5, v + 0.25] {
                assert_eq!(round_clamp(x), x.round_ties_even().clamp(0.0, 255.0) as u8, "{x}");
            }
            v += 0.125;
        }
        assert_eq!(
            [round_clamp(0.5), round_clamp(1.5), round_clamp(254.5)],
            [0, 2, 254]
        );
        assert_eq!([round_clamp(-1e30), round_clamp(1e30)], [0, 255]);
    }

    #[test]
    fn arguments_are_checked() {
        let mut out = [0f32; 12];
        let e = resize_planes(&[0.0; 12], (0, 4), &mut out, (2, 2), FloatMode::Bilinear, false).unwrap_err();
        assert!(matches!(
            e,
            TransformError::InvalidArgument { arg: "src_size", .. }
        ));
        let e = resize_planes(&[0.0; 11], (2, 2), &mut out, (2, 2), FloatMode::Bilinear, false).unwrap_err();
        assert!(matches!(e, TransformError::InvalidArgument { arg: "src", .. }));
        let e = resize_planes(
            &[0.0; 12],
            (2, 2),
            &mut out[..11],
            (2, 2),
            FloatMode::Bicubic,
            false,
        )
        .unwrap_err();
        assert!(matches!(e, TransformError::InvalidArgument { arg: "dst", .. }));
        let e = resize_planes(
            &[0.0; 12],
            (2, 2),
            &mut out,
            (usize::MAX, 2),
            FloatMode::Bicubic,
            false,
        )
        .unwrap_err();
        assert!(matches!(e, TransformError::Overflow { arg: "dst_size", .. }));
        let norm = Normalize::from_tables([[0f32; 256]; 3]);
        let e = resize_mapped_planes(
            &[0; 5],
            (1, 2),
            &norm,
            &mut out[..6],
            (1, 2),
            FloatMode::Bicubic,
            false,
        )
        .unwrap_err();
        assert!(matches!(e, TransformError::InvalidArgument { arg: "src", .. }));
        let mut bytes = [0u8; 3];
        let e =
            resize_float_rgb(&[0; 6], (1, 2), &mut bytes, (1, 0), FloatMode::Bilinear, false).unwrap_err();
        assert!(matches!(
            e,
            TransformError::InvalidArgument { arg: "dst_size", .. }
        ));
        assert_eq!(FloatMode::from_pil_code(1), None);
        assert_eq!(FloatMode::from_pil_code(3), Some(FloatMode::Bicubic));
    }

    const TORCH_BICUBIC: [u32; 84] = [
        0xbfed_0b33,
        0xbfc4_3f2c,
        0xbe3d_bd1d,
        0x3f9c_34b5,
        0xbf0e_459c,
        0xbf8d_4028,
        0xbe9a_e259,
        0x3fef_1606,
        0xbfba_8b0a,
        0xc03d_9313,
        0xbe95_2d2e,
        0x4005_c4b5,
        0x3ed3_7d29,
        0xc037_928c,
        0xbf04_7c9b,
        0x3fe7_f6cb,
        0x3fbf_4eed,
        0xc006_03c3,
        0xbf58_7be6,
        0x3fdb_f86c,
        0x4054_2a75,
        0xbffd_6e07,
        0xbf22_0d6d,
        0x3f6e_42d3,
        0x3f99_61e2,
        0xbf48_a97e,
        0xbf0f_7b4a,
        0x3f90_4fe9,
        0x4042_f39e,
        0x3eac_9e8e,
        0xbf3f_1a81,
        0x3f94_ad2d,
        0xbf1d_54ab,
        0xbf94_c7af,
        0xbeb9_0078,
        0x3fca_b780,
        0xbfcd_4bf3,
        0xc03f_e0b4,
        0xbeb3_4b4b,
        0x4002_00f1,
        0x3eb5_5f0b,
        0xc03b_5650,
        0xbf13_8bac,
        0x3fe0_6f45,
        0x3fb7_c766,
        0xc009_c787,
        0xbf67_8af4,
        0x3fd4_70e4,
        0x4050_66b2,
        0xc002_7ac9,
        0xbf31_1c7d,
        0x3f5f_33c3,
        0x3f91_da5a,
        0xbf57_b88b,
        0xbf1e_8a59,
        0x3f88_c862,
        0x403f_2fda,
        0x3e8e_8070,
        0xbf4e_298f,
        0x3f8d_25a5,
        0xbf2c_63bd,
        0xbf9c_4f38,
        0xbed7_1e99,
        0x3fc3_2ff9,
        0xbfd4_d37a,
        0xc043_a477,
        0xbed1_696a,
        0x3ffc_7a5a,
        0x3e97_40e8,
        0xc03f_1a15,
        0xbf22_9abb,
        0x3fd8_e7be,
        0x3fb0_3fe0,
        0xc00d_8b4b,
        0xbf76_9a06,
        0x3fcc_e95b,
        0x404c_a2ee,
        0xc006_3e8d,
        0xbf40_2b8c,
        0x3f50_24b6,
        0x3f8a_52d3,
        0xbf66_c79c,
        0xbf2d_9966,
        0x3f81_40da,
    ];
    const TORCH_BILINEAR_SMALL: [u32; 84] = [
        0xbfda_5a5a,
        0xbfa7_cc5e,
        0xbec9_248c,
        0x3f94_b4b5,
        0xbeee_ca44,
        0xbf52_4925,
        0xbeda_5a5b,
        0x3fa0_0000,
        0xbf66_b905,
        0xbff2_4923,
        0xbead_2d2e,
        0x3f9b_b291,
        0x3e66_2f4a,
        0xbff6_9696,
        0xbe80_0000,
        0x3f7e_62f6,
        0x3f59_d0a5,
        0xbfeb_4b4b,
        0xbe91_35be,
        0x3fa2_b067,
        0x4020_f0f1,
        0xbfe0_0000,
        0xbf01_9d09,
        0x3f1f_bb2a,
        0x3f8f_0f10,
        0xbf02_b06d,
        0xbe6a_7cc2,
        0x3f81_e1e2,
        0x402c_3c3c,
        0x3f0a_37ec,
        0xbee7_42a9,
        0x3f8d_2d2d,
        0xbf06_742f,
        0xbf61_5833,
        0xbef8_7879,
        0x3f98_7878,
        0xbf75_c814,
        0xbff9_d0ab,
        0xbecb_4b4c,
        0x3f94_2b09,
        0x3e29_f310,
        0xbffe_1e1e,
        0xbe9e_1e1f,
        0x3f6f_53e8,
        0x3f4a_c197,
        0xbff2_d2d2,
        0xbeaf_53dc,
        0x3f9b_28e0,
        0x401d_2d2d,
        0xbfe7_8788,
        0xbf10_ac19,
        0x3f10_ac1b,
        0x3f87_8788,
        0xbf11_bf7b,
        0xbe93_5c7f,
        0x3f74_b4b5,
        0x4028_7878,
        0x3ef6_51b9,
        0xbf02_b063,
        0x3f85_a5a6,
        0xbf15_833e,
        0xbf70_6743,
        0xbf0b_4b4c,
        0x3f90_f0f1,
        0xbf82_6b91,
        0xc000_ac19,
        0xbee9_696a,
        0x3f8c_a381,
        0x3ddb_6da2,
        0xc002_d2d3,
        0xbebc_3c3c,
        0x3f60_44d9,
        0x3f3b_b288,
        0xbffa_5a5a,
        0xbecd_71fa,
        0x3f93_a159,
        0x4019_6969,
        0xbfef_0f10,
        0xbf1f_bb28,
        0x3f01_9d0c,
        0x3f80_0000,
        0xbf20_ce8b,
        0xbeb1_7a9d,
        0x3f65_a5a6,
    ];
    const TORCH_BILINEAR_WIDE: [u32; 9] = [
        0xc03c_3c3c,
        0xbef0_f0f0,
        0x3f43_c3c4,
        0x403c_3c3c,
        0x401c_3c3c,
        0x3f34_b4b5,
        0x4038_7878,
        0x4018_7878,
        0x3f25_a5a6,
    ];
}
