//! Pixel kernels: normalise, de-interleave, pad, serialise.
//!
//! Pure Rust with no Python types: every kernel takes slices and `(height, width)`
//! pairs, writes into a destination the caller allocated and returns
//! `Result<(), TransformError>`.

use std::borrow::Cow;
use std::ops::Range;

use crate::affine::Affine;
use crate::alloc::Memory;
use crate::error::{invalid, TransformError};
use crate::image::Pad;
use crate::lookup::Lookup;
use crate::resize::{by_bands, Source};
#[cfg(target_arch = "x86_64")]
use crate::stream;

/// Pixels per block in the de-interleave loop. Fixed-size blocks let the compiler
/// drop bounds checks and unroll the stride-3 gather; in the gateway profile this
/// took `build_planar_tensor` from 21.9% to 5.0% of CPU.
const BLOCK: usize = 8;

/// Per-channel map of a u8 value to its normalised f32, as a 256-entry table per channel.
///
/// Each entry is computed the way transformers' PIL backend does it, so the
/// results are bit-identical: `v = float32(float64(x) * rescale_factor)`, then
/// `(v - float32(mean[c])) / float32(std[c])` in float32.
///
/// The element type `T` is what the tables hold and the kernels write: `f32`, or
/// `u16` bfloat16 bit patterns for models whose reference computes in bfloat16.
#[derive(Clone, Debug)]
pub struct Normalize<T = f32> {
    tables: [[T; 256]; 3],
    /// The value of positions outside the pixels (a window reaching past them): the
    /// normalised value of black unless the caller names another.
    outside: [T; 3],
    /// The same tables for the vector lookup, where the CPU has it.
    lookup: Option<Lookup>,
    /// Float32 tables that are transformers' arithmetic, computed where the CPU has AVX2 and
    /// FMA (see [`Affine`]): planes (before the lookup, which they outrun with AVX-512), and
    /// channel-last runs.
    affine: Option<Affine>,
}

impl Normalize<f32> {
    /// Builds the tables; `mean` and `std` are per RGB channel.
    ///
    /// # Errors
    /// A `std` that is zero once rounded to float32, or any value that is not finite
    /// (in float64, or once rounded to float32).
    pub fn new(mean: [f64; 3], std: [f64; 3], rescale_factor: f64) -> Result<Self, TransformError> {
        if !rescale_factor.is_finite() {
            return Err(invalid("rescale_factor", "a finite float", rescale_factor));
        }
        let mut tables = [[0f32; 256]; 3];
        for (c, table) in tables.iter_mut().enumerate() {
            // transformers builds `np.array(mean, dtype=image.dtype)`: the float32 rounding
            // happens before the subtraction, so a finite float64 can still overflow here.
            let m = mean[c] as f32;
            let s = std[c] as f32;
            if !m.is_finite() {
                return Err(invalid("mean", "finite float32 values", format!("{mean:?}")));
            }
            if !s.is_finite() || s == 0.0 {
                return Err(invalid(
                    "std",
                    "finite, non-zero float32 values",
                    format!("{std:?}"),
                ));
            }
            for (x, entry) in table.iter_mut().enumerate() {
                let v = (x as f64 * rescale_factor) as f32;
                *entry = (v - m) / s;
            }
        }
        Ok(Self::from_tables(tables))
    }
}

impl<T: bytemuck::Pod> Normalize<T> {
    /// Tables computed elsewhere: `tables[c][x]` is the output for value `x` in channel `c`.
    #[must_use]
    pub fn from_tables(tables: [[T; 256]; 3]) -> Self {
        let outside = [tables[0][0], tables[1][0], tables[2][0]];
        let lookup = Lookup::new(&tables);
        let affine = bytemuck::try_cast_slice::<T, f32>(tables.as_flattened())
            .ok()
            .and_then(Affine::find);
        Self {
            tables,
            outside,
            lookup,
            affine,
        }
    }

    /// The tables: `tables()[c][x]` is the output for value `x` in channel `c`.
    #[must_use]
    pub fn tables(&self) -> &[[T; 256]; 3] {
        &self.tables
    }

    /// The same tables, with `outside` (per channel) as the value of positions outside the
    /// pixels instead of the normalised value of black: Inkling pads with -1 on the 0-255
    /// scale before normalising, a value no byte has.
    #[must_use]
    pub fn with_outside(self, outside: [T; 3]) -> Self {
        Self { outside, ..self }
    }

    /// The normalised value of black (pixel value 0) for each channel.
    #[must_use]
    pub fn black(&self) -> [T; 3] {
        [self.tables[0][0], self.tables[1][0], self.tables[2][0]]
    }

    /// The value of positions outside the pixels, per channel: the padding value (the
    /// normalised value of black unless [`Normalize::with_outside`] named another).
    #[must_use]
    pub fn outside(&self) -> [T; 3] {
        self.outside
    }

    /// Normalises `src` (interleaved RGB, 3 bytes per pixel) into three planar runs of
    /// `src.len() / 3` values each. The caller guarantees the lengths match.
    fn run(&self, src: &[u8], r: &mut [T], g: &mut [T], b: &mut [T]) {
        let done = self.vector(src, 3, r, g, b);
        let (src, r, g, b) = (&src[3 * done..], &mut r[done..], &mut g[done..], &mut b[done..]);
        let [tr, tg, tb] = &self.tables;
        let blocks = src.chunks_exact(3 * BLOCK);
        let tail = blocks.remainder();
        let mut r_blocks = r.chunks_exact_mut(BLOCK);
        let mut g_blocks = g.chunks_exact_mut(BLOCK);
        let mut b_blocks = b.chunks_exact_mut(BLOCK);
        for (((px, rb), gb), bb) in blocks.zip(&mut r_blocks).zip(&mut g_blocks).zip(&mut b_blocks) {
            for i in 0..BLOCK {
                rb[i] = tr[usize::from(px[3 * i])];
                gb[i] = tg[usize::from(px[3 * i + 1])];
                bb[i] = tb[usize::from(px[3 * i + 2])];
            }
        }
        let rest = r_blocks
            .into_remainder()
            .iter_mut()
            .zip(g_blocks.into_remainder())
            .zip(b_blocks.into_remainder());
        for (px, ((rv, gv), bv)) in tail.chunks_exact(3).zip(rest) {
            *rv = tr[usize::from(px[0])];
            *gv = tg[usize::from(px[1])];
            *bv = tb[usize::from(px[2])];
        }
    }

    /// The first pixels of `src` (of `channels` bytes) written into `r`, `g` and `b` by a
    /// vector path ([`Affine`] for float32 tables of its arithmetic, else [`Lookup`]): how
    /// many, 0 on a CPU with neither.
    fn vector(&self, src: &[u8], channels: usize, r: &mut [T], g: &mut [T], b: &mut [T]) -> usize {
        if let Some(affine) = &self.affine {
            let cast = bytemuck::try_cast_slice_mut::<T, f32>;
            if let (Ok(r), Ok(g), Ok(b)) = (cast(r), cast(g), cast(b)) {
                return affine.run(src, channels, r, g, b);
            }
        }
        if let Some(lookup) = &self.lookup {
            return lookup.run(src, channels, r, g, b);
        }
        0
    }

    /// [`Normalize::run`] from pixels of `channels` bytes: 3 (RGB), 4 (RGBX, the fourth
    /// byte unread) or 1 (grayscale, its value in every channel).
    pub(crate) fn run_pixels(&self, src: &[u8], channels: usize, r: &mut [T], g: &mut [T], b: &mut [T]) {
        if channels == 3 {
            return self.run(src, r, g, b);
        }
        let done = self.vector(src, channels, r, g, b);
        let (src, r, g, b) = (
            &src[channels * done..],
            &mut r[done..],
            &mut g[done..],
            &mut b[done..],
        );
        let [tr, tg, tb] = &self.tables;
        match channels {
            4 => {
                for (px, ((rv, gv), bv)) in src
                    .chunks_exact(4)
                    .zip(r.iter_mut().zip(g.iter_mut()).zip(b.iter_mut()))
                {
                    *rv = tr[usize::from(px[0])];
                    *gv = tg[usize::from(px[1])];
                    *bv = tb[usize::from(px[2])];
                }
            }
            _ => {
                for (&v, ((rv, gv), bv)) in src.iter().zip(r.iter_mut().zip(g.iter_mut()).zip(b.iter_mut())) {
                    let v = usize::from(v);
                    (*rv, *gv, *bv) = (tr[v], tg[v], tb[v]);
                }
            }
        }
    }

    /// Normalises runs of interleaved RGB `src` into each of the `copies` equal parts of
    /// `dst`, interleaved the same way: run `(from, to, len)` (whole pixels) writes
    /// `part[to..to + len]` ([`Lookup`] 64 values at a time where the CPU has it, streamed
    /// with `stream`; the caller then fences). The caller guarantees that the parts are not
    /// empty and the runs lie inside `src` and a part.
    ///
    /// The values are computed instead where the tables are [`Affine`] (streamed where every
    /// run is whole aligned blocks: patches of 16 pixels): the lookup picks each value's
    /// channel among three lookups (a patch line's values alternate channels), the
    /// arithmetic takes eight values in a handful of operations. On a 2-vCPU Zen 4 EPYC,
    /// Cosmos3 Edge's 640x480 runs (19,200 of 48 values) took 137 us against 294 us looked
    /// up.
    fn run_interleaved(
        &self,
        src: &[u8],
        dst: &mut [T],
        runs: &[(usize, usize, usize)],
        copies: usize,
        stream: bool,
    ) {
        if let Some(affine) = &self.affine {
            let tables = bytemuck::try_cast_slice::<T, f32>(self.tables.as_flattened());
            if let (Ok(tables), Ok(dst)) = (tables, bytemuck::try_cast_slice_mut::<T, f32>(dst)) {
                if !stream && copies == 1 {
                    return affine.run_interleaved(tables, src, dst, runs);
                }
                if stream && affine.stream_interleaved(src, dst, runs, copies) {
                    return;
                }
            }
        }
        if let Some(lookup) = &self.lookup {
            return lookup.run_interleaved(src, dst, runs, copies, stream);
        }
        let [tr, tg, tb] = &self.tables;
        for part in dst.chunks_exact_mut(dst.len() / copies) {
            for &(from, to, len) in runs {
                for (px, out) in src[from..from + len]
                    .chunks_exact(3)
                    .zip(part[to..to + len].chunks_exact_mut(3))
                {
                    out[0] = tr[usize::from(px[0])];
                    out[1] = tg[usize::from(px[1])];
                    out[2] = tb[usize::from(px[2])];
                }
            }
        }
    }
}

/// `a * b * ...`, or an overflow error naming `arg`.
///
/// The product of the non-zero sides must also fit in `isize`, as numpy and ndarray need
/// for every shape (even one with a zero side).
///
/// # Errors
/// The product does not fit in `usize`, or the non-zero sides' product not in `isize`.
pub fn checked_len(arg: &'static str, dims: &[usize]) -> Result<usize, TransformError> {
    dims.iter()
        .filter(|&&d| d != 0)
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| isize::try_from(n).is_ok())
        .map(|n| if dims.contains(&0) { 0 } else { n })
        .ok_or_else(|| TransformError::Overflow {
            arg,
            what: format!("the element count of shape {dims:?}"),
        })
}

fn check_image(src: &[u8], size: (usize, usize)) -> Result<(), TransformError> {
    let (h, w) = size;
    if h == 0 || w == 0 {
        return Err(invalid(
            "image",
            "a non-empty image",
            format!("shape ({h}, {w}, 3)"),
        ));
    }
    let len = checked_len("image", &[h, w, 3])?;
    if src.len() != len {
        return Err(invalid(
            "image",
            format!("{len} bytes for shape ({h}, {w}, 3)"),
            src.len(),
        ));
    }
    Ok(())
}

fn check_out<T>(dst: &[T], len: usize) -> Result<(), TransformError> {
    if dst.len() == len {
        Ok(())
    } else {
        Err(invalid("out", format!("{len} values"), dst.len()))
    }
}

/// HWC u8 RGB of `size` = (height, width) → CHW f32 planes, normalised in the same pass.
///
/// `dst` holds `3 * height * width` values: the R plane, then G, then B.
///
/// # Errors
/// An empty image, or `src`/`dst` lengths that do not match `size`.
///
/// ```
/// use mmfast::transforms::{deinterleave_rgb_to_planes, Normalize};
/// let norm = Normalize::new([0.0; 3], [1.0; 3], 1.0).unwrap();
/// let mut planes = [0f32; 6];
/// deinterleave_rgb_to_planes(&[1, 2, 3, 4, 5, 6], (1, 2), &norm, &mut planes).unwrap();
/// assert_eq!(planes, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
/// ```
pub fn deinterleave_rgb_to_planes<T: bytemuck::Pod>(
    src: &[u8],
    size: (usize, usize),
    norm: &Normalize<T>,
    dst: &mut [T],
) -> Result<(), TransformError> {
    check_image(src, size)?;
    let n = size.0 * size.1;
    check_out(dst, 3 * n)?;
    let (r, gb) = dst.split_at_mut(n);
    let (g, b) = gb.split_at_mut(n);
    // One contiguous run: rows need no separate handling when there is no padding.
    norm.run(src, r, g, b);
    Ok(())
}

/// HWC u8 RGB of `size` → CHW f32 of `canvas` = (height, width), image at the top-left.
///
/// Everything outside the image is the normalised value of black. Each output value
/// is written once, straight into `dst`: there is no padded intermediate image.
///
/// # Errors
/// An empty image, a canvas smaller than the image on either axis, or lengths that do
/// not match.
pub fn pad_and_normalize_to_tensor<T: bytemuck::Pod>(
    src: &[u8],
    size: (usize, usize),
    canvas: (usize, usize),
    norm: &Normalize<T>,
    dst: &mut [T],
) -> Result<(), TransformError> {
    let (h, w) = size;
    let (ch, cw) = canvas;
    if ch < h || cw < w {
        return Err(invalid(
            "canvas_size",
            format!("at least the image size ({h}, {w})"),
            format!("({ch}, {cw})"),
        ));
    }
    checked_len("canvas_size", &[3, ch, cw])?;
    let window = Window {
        top: 0,
        left: 0,
        height: ch,
        width: cw,
    };
    crop_and_normalize(src, size, window, norm, dst)
}

/// A window in image coordinates; it may start above/left of the image or reach past it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// First row, in image rows (negative: above the image).
    pub top: isize,
    /// First column, in image columns (negative: left of the image).
    pub left: isize,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
}

impl Window {
    /// Whether the window is not empty and lies inside an image of `(height, width)`.
    #[must_use]
    pub fn lies_in(&self, (height, width): (usize, usize)) -> bool {
        let within = |start: isize, count: usize, len: usize| {
            count > 0
                && start >= 0
                && start
                    .unsigned_abs()
                    .checked_add(count)
                    .is_some_and(|end| end <= len)
        };
        within(self.top, self.height, height) && within(self.left, self.width, width)
    }
}

/// The part of `0..len` that `start..start + count` overlaps, relative to `start`.
pub(crate) fn overlap(start: isize, count: usize, len: usize) -> Range<usize> {
    let shift = start.unsigned_abs();
    let (lo, hi) = if start < 0 {
        (shift, len.saturating_add(shift))
    } else {
        (0, len.saturating_sub(shift))
    };
    let lo = lo.min(count);
    lo..hi.clamp(lo, count)
}

/// HWC u8 RGB of `size` → the CHW tensor of `window`, normalised.
///
/// Output pixel (y, x) is image pixel (top + y, left + x) where that lies in the image
/// and the outside value ([`Normalize::outside`], the normalised value of black unless
/// named) elsewhere: HF's centre crop (zero-padded when the crop is larger), Llama 4's
/// pad-to-canvas and each of its tiles are all this one kernel. Each output value is
/// written once.
///
/// # Errors
/// An empty image or window, or lengths that do not match.
pub fn crop_and_normalize<T: bytemuck::Pod>(
    src: &[u8],
    size: (usize, usize),
    window: Window,
    norm: &Normalize<T>,
    dst: &mut [T],
) -> Result<(), TransformError> {
    check_image(src, size)?;
    crop_source_and_normalize(Source::packed(src, 3, size)?, window, norm, dst)
}

/// [`crop_and_normalize`] of an image read where it is: RGB, Pillow's RGBX or grayscale,
/// rows back to back or one by one (see [`Source`]); the same values as from its packed RGB
/// pixels.
///
/// # Errors
/// As [`crop_and_normalize`].
pub fn crop_source_and_normalize<T: bytemuck::Pod>(
    src: Source<'_>,
    window: Window,
    norm: &Normalize<T>,
    dst: &mut [T],
) -> Result<(), TransformError> {
    let (h, w) = src.size();
    let c = src.channels();
    let (wh, ww) = (window.height, window.width);
    if wh == 0 || ww == 0 {
        return Err(invalid("window", "a non-empty window", format!("({wh}, {ww})")));
    }
    let plane = checked_len("window", &[wh, ww])?;
    check_out(dst, checked_len("window", &[3, plane])?)?;
    let black = norm.outside();
    let rows_in = overlap(window.top, wh, h);
    let cols_in = overlap(window.left, ww, w);
    let (r, gb) = dst.split_at_mut(plane);
    let (g, b) = gb.split_at_mut(plane);
    let rows = r
        .chunks_exact_mut(ww)
        .zip(g.chunks_exact_mut(ww))
        .zip(b.chunks_exact_mut(ww));
    for (y, ((r_row, g_row), b_row)) in rows.enumerate() {
        if !rows_in.contains(&y) || cols_in.is_empty() {
            for (row, value) in [r_row, g_row, b_row].into_iter().zip(black) {
                row.fill(value);
            }
            continue;
        }
        let sy = (window.top + y as isize) as usize;
        let sx = (window.left + cols_in.start as isize) as usize;
        let px = &src.row(sy)[sx * c..(sx + cols_in.len()) * c];
        let cols = cols_in.clone();
        norm.run_pixels(
            px,
            c,
            &mut r_row[cols.clone()],
            &mut g_row[cols.clone()],
            &mut b_row[cols],
        );
        for (row, value) in [r_row, g_row, b_row].into_iter().zip(black) {
            row[..cols_in.start].fill(value);
            row[cols_in.end..].fill(value);
        }
    }
    Ok(())
}

/// HWC u8 RGB of `size` → channel-last patch rows of `windows`, normalised.
///
/// Each window (sides multiples of `patch_size`) is cut into `patch_size` squares in
/// raster order; a row holds its square's pixels row by row, channels interleaved:
/// (y, x, c). This is `SigLIP` 2's and Gemma 4's `convert_image_to_patches`
/// (`reshape(C, nh, p, nw, p).permute(1, 3, 2, 4, 0)`), read straight from the image:
/// each line of a row is one run of `3 * patch_size` bytes. A window may reach past the
/// image, whose positions there take the outside value ([`Normalize::outside`]): Inkling's
/// patches of an image padded to whole patches. Windows follow each other in `dst`.
///
/// # Errors
/// A window that is not a whole number of patches, or lengths that do not match.
pub fn normalize_to_hwc_patches<T: bytemuck::Pod>(
    src: &[u8],
    size: (usize, usize),
    windows: &[Window],
    patch_size: usize,
    norm: &Normalize<T>,
    dst: &mut [T],
) -> Result<(), TransformError> {
    check_image(src, size)?;
    let (h, w) = size;
    let p = patch_size;
    let mut total = 0usize;
    for window in windows {
        if p == 0 || window.height % p != 0 || window.width % p != 0 {
            return Err(invalid(
                "windows",
                format!("windows whose sides are multiples of patch_size {p}"),
                format!("{window:?}"),
            ));
        }
        total = total
            .checked_add(checked_len("windows", &[3, window.height, window.width])?)
            .ok_or_else(|| invalid("windows", "a total that fits in memory", windows.len()))?;
    }
    check_out(dst, total)?;
    // An output of half the cache or more (Cosmos3 Edge's 24 MB at 1920x1080, Inkling's
    // 295 MB at 12 MP) is written once and read by the model: streamed.
    #[cfg(target_arch = "x86_64")]
    let stream = size_of_val(dst) >= stream::STREAM_PAST_CACHE_BYTES;
    #[cfg(not(target_arch = "x86_64"))]
    let stream = false;
    let outside = norm.outside();
    let (mut runs, mut edges) = (Vec::new(), Vec::new());
    let mut start = 0;
    for copies in windows.chunk_by(|a, b| a == b) {
        let window = &copies[0];
        let len = 3 * window.height * window.width;
        if len == 0 {
            continue;
        }
        let out = &mut dst[start..start + copies.len() * len];
        start += out.len();
        // Equal windows in a row (Inkling's two time slots of each square) are written
        // from one lookup when streamed, and copied from the first in the cache.
        let lookups = if stream { copies.len() } else { 1 };
        let (looked_up, copied) = out.split_at_mut(lookups * len);
        // Line y of patch (py, px), in that order, is the next 3 * p output values: one run
        // of the image's bytes, the outside value past the image (`edges` holds the lines of
        // the patches that reach past it, each with its columns inside). The runs of each
        // row of patches are normalised together while they are in cache: gathering a whole
        // window's first (19,200 runs, 460 KB, for Cosmos3 Edge at 640x480) cost more.
        edges.clear();
        let mut to = 0;
        for py in 0..window.height / p {
            runs.clear();
            // Saturated: a patch past isize::MAX is past the image all the same.
            let top = window.top.saturating_add((py * p) as isize);
            let rows = overlap(top, p, h);
            for px in 0..window.width / p {
                let left = window.left.saturating_add((px * p) as isize);
                let cols = overlap(left, p, w);
                if !rows.is_empty() && !cols.is_empty() {
                    // The patch's first line inside the image, and the lines below it.
                    let first =
                        (top + rows.start as isize) as usize * w + (left + cols.start as isize) as usize;
                    runs.extend(rows.clone().map(|y| {
                        let at = 3 * (first + (y - rows.start) * w);
                        (at, to + 3 * (p * y + cols.start), 3 * cols.len())
                    }));
                }
                if rows.len() < p || cols.len() < p {
                    edges.extend((0..p).map(|y| {
                        let inside = if rows.contains(&y) { cols.clone() } else { 0..0 };
                        (to + 3 * p * y, inside)
                    }));
                }
                to += 3 * p * p;
            }
            norm.run_interleaved(src, looked_up, &runs, lookups, stream);
        }
        for part in looked_up.chunks_exact_mut(len) {
            for (to, cols) in &edges {
                let line = &mut part[*to..to + 3 * p];
                let (before, after) = line.split_at_mut(3 * cols.start);
                let after = &mut after[3 * cols.len()..];
                for pixel in before.chunks_exact_mut(3).chain(after.chunks_exact_mut(3)) {
                    pixel.copy_from_slice(&outside);
                }
            }
        }
        for part in copied.chunks_exact_mut(len) {
            part.copy_from_slice(&looked_up[..len]);
        }
    }
    #[cfg(target_arch = "x86_64")]
    if stream {
        stream::fence();
    }
    Ok(())
}

/// An image (RGB, Pillow's RGBX or grayscale rows, read where they are: see [`Source`]) →
/// a CHW canvas of three planes `plane` values long, whose rows are `row` values apart: the
/// image's normalised planes at its top-left, zero everywhere else (Pixtral's and Idefics2's
/// zero padding after normalising). `dst` is the canvas, `3 * plane` values.
///
/// A canvas of at least [`stream::STREAM_MIN_BYTES`] (from the pool of freed outputs, not
/// zeroed) with zeros to write is written whole in runs of [`CANVAS_BLOCK_BYTES`] a plane:
/// normalised into a buffer that stays in cache, then streamed to memory with its zeros.
/// Streaming each row into the three planes in turn would leave the cache line at a row's
/// end, shared with the plane's next row (the output is 16-byte aligned, not 64), to be
/// written in two parts, which streaming stores write as partial lines. On a 2-vCPU Zen 5
/// EPYC, Idefics2's five 480x640 frames (a 640x480 image split in four, torchvision) took
/// 1.26 -> 0.99 ms a call, and 1.71 -> 1.09 ms for a caller holding its last eight outputs,
/// against the rows normalised with ordinary stores and the zeros filled after them. A
/// canvas the image fills is still written with ordinary stores, faster while the caller
/// frees each output at once (Emu3 at 640x480: 0.12 ms, 0.18 ms streamed).
///
/// # Errors
/// An image that does not fit the canvas, or a `dst` that is not the canvas.
pub fn normalize_into_canvas<T: bytemuck::Pod>(
    src: Source<'_>,
    norm: &Normalize<T>,
    (row, plane): (usize, usize),
    dst: &mut [T],
) -> Result<(), TransformError> {
    let (h, w) = src.size();
    if w > row || h.checked_mul(row).is_none_or(|n| n > plane) || Some(dst.len()) != plane.checked_mul(3) {
        return Err(invalid(
            "out",
            format!("a canvas of 3 planes of {plane} values holding {h} rows of {w} values {row} apart"),
            format!("{} values", dst.len()),
        ));
    }
    let (r, gb) = dst.split_at_mut(plane);
    let (g, b) = gb.split_at_mut(plane);
    #[cfg(target_arch = "x86_64")]
    if 3 * size_of_val(r) >= stream::STREAM_MIN_BYTES && (w < row || h * row < plane) {
        stream_canvas(src, norm, row, [r, g, b]);
        return Ok(());
    }
    let rows = r.chunks_mut(row).zip(g.chunks_mut(row)).zip(b.chunks_mut(row));
    for (y, ((r, g), b)) in rows.enumerate() {
        let from = if y < h {
            norm.run_pixels(src.row(y), src.channels(), &mut r[..w], &mut g[..w], &mut b[..w]);
            w
        } else {
            0
        };
        for line in [r, g, b] {
            line[from..].fill(T::zeroed());
        }
    }
    Ok(())
}

/// Bytes of each plane [`normalize_into_canvas`] normalises into its buffer before
/// streaming them: 96 KiB for the three, in L2. Idefics2 at 640x480 took 1.05x as long
/// with 8 KiB, 1.06x with 128 KiB (0.96x and 1.04x at 1920x1080).
#[cfg(target_arch = "x86_64")]
const CANVAS_BLOCK_BYTES: usize = 32 << 10;

/// [`normalize_into_canvas`]'s streamed writes: `planes` (each whole) hold the image's
/// rows, `row` values apart, then zeros; the caller checked that they fit.
#[cfg(target_arch = "x86_64")]
fn stream_canvas<T: bytemuck::Pod>(
    src: Source<'_>,
    norm: &Normalize<T>,
    row: usize,
    mut planes: [&mut [T]; 3],
) {
    let (h, w) = src.size();
    let rows = (CANVAS_BLOCK_BYTES / (row * size_of::<T>())).clamp(1, h);
    let block = rows * row;
    // Each plane's run of `rows` rows, zero past every row's `w` values.
    let mut buffer = vec![T::zeroed(); 3 * block];
    for top in (0..h).step_by(rows) {
        let n = rows.min(h - top);
        let (r, gb) = buffer.split_at_mut(block);
        let (g, b) = gb.split_at_mut(block);
        let lines = r
            .chunks_exact_mut(row)
            .zip(g.chunks_exact_mut(row))
            .zip(b.chunks_exact_mut(row));
        for (k, ((r, g), b)) in lines.take(n).enumerate() {
            norm.run_pixels(
                src.row(top + k),
                src.channels(),
                &mut r[..w],
                &mut g[..w],
                &mut b[..w],
            );
        }
        for (plane, values) in planes.iter_mut().zip(buffer.chunks_exact(block)) {
            stream::stream_copy(
                bytemuck::cast_slice_mut(&mut plane[top * row..(top + n) * row]),
                bytemuck::cast_slice(&values[..n * row]),
            );
        }
    }
    buffer.fill(T::zeroed());
    for plane in &mut planes {
        for run in plane[h * row..].chunks_mut(block) {
            let zeros = &buffer[..run.len()];
            stream::stream_copy(bytemuck::cast_slice_mut(run), bytemuck::cast_slice(zeros));
        }
    }
    stream::fence();
}

/// HWC u8 RGB of `size` → MiniCPM-V's patch strip, normalised: the image cut into
/// `patch_size` squares in raster order, square `l` filling columns `l * patch_size..` of
/// each of the strip's `3 * patch_size` rows (channel, y): value `[c, ky, l * p + kx]` is
/// pixel `(py * p + ky, px * p + kx)`, channel `c`.
///
/// `dst` holds this image's part of each strip row, in order: the strip of a batch runs
/// every image's patches one after the other along its rows.
///
/// # Errors
/// Sides that are not multiples of `patch_size`, or slices that do not match.
pub fn normalize_to_strip<T: bytemuck::Pod>(
    src: &[u8],
    size: (usize, usize),
    patch_size: usize,
    norm: &Normalize<T>,
    dst: &mut [&mut [T]],
) -> Result<(), TransformError> {
    check_image(src, size)?;
    let (h, w) = size;
    let p = patch_size;
    if p == 0 || h % p != 0 || w % p != 0 {
        return Err(invalid(
            "size",
            format!("sides that are multiples of patch_size {p}"),
            format!("({h}, {w})"),
        ));
    }
    if dst.len() != 3 * p || dst.iter().any(|line| line.len() != h / p * w) {
        return Err(invalid(
            "out",
            format!("{} rows of {} values", 3 * p, h / p * w),
            dst.len(),
        ));
    }
    // One image row at a time, normalised straight into its place in the strip rows of
    // (channel, y % p): its `w / p` patch lines lie there side by side, in order.
    let (r, gb) = dst.split_at_mut(p);
    let (g, b) = gb.split_at_mut(p);
    for y in 0..h {
        let (py, ky) = (y / p, y % p);
        let at = py * w..(py + 1) * w;
        norm.run(
            &src[y * w * 3..(y + 1) * w * 3],
            &mut r[ky][at.clone()],
            &mut g[ky][at.clone()],
            &mut b[ky][at],
        );
    }
    Ok(())
}

/// Qwen-VL's patch layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Patches {
    /// Side of a square patch, in pixels.
    pub patch_size: usize,
    /// Copies of a still image along time inside each patch row.
    pub temporal_patch_size: usize,
    /// Side of the square group of patches merged into one token.
    pub merge_size: usize,
    /// Rows laid out (time, channel, y, x), Muse Glimmer's, instead of Qwen-VL's
    /// (channel, time, y, x).
    pub time_major: bool,
}

impl Patches {
    /// Values per output row: `3 * temporal_patch_size * patch_size²`.
    ///
    /// # Errors
    /// The product overflows.
    pub fn row_len(&self) -> Result<usize, TransformError> {
        let (p, t) = (self.patch_size, self.temporal_patch_size);
        checked_len("patches", &[3, t, p, p])
    }
}

/// HWC u8 RGB frames → Qwen-VL `pixel_values` rows, normalised band by band.
///
/// The frames (all of `size`) are cut into `patch_size` squares; rows are ordered by merge
/// group (row-major), then by patch within the group (row-major), and each row holds
/// (channel, time, y, x): time slot `i` reads `frames[i]`, or the one frame of a still
/// image, repeated `temporal_patch_size` times. This is HF's `patchify` reshape/transpose,
/// without the intermediate CHW tensor (only one band of `patch_size * merge_size`
/// normalised rows per frame, or a part of its columns, is held at a time).
///
/// A large output is streamed to memory where `memory` is [`Memory::Used`], and written
/// with ordinary stores into [`Memory::Fresh`] memory, whose lines are in the cache.
///
/// # Errors
/// Sides that are not multiples of `patch_size * merge_size`, a frame count other than 1 or
/// `temporal_patch_size`, or lengths that do not match.
pub fn normalize_to_patches<T: bytemuck::Pod + Send + Sync>(
    frames: &[&[u8]],
    size: (usize, usize),
    patches: Patches,
    norm: &Normalize<T>,
    dst: &mut [T],
    memory: Memory,
) -> Result<(), TransformError> {
    for frame in frames {
        check_image(frame, size)?;
    }
    let (h, w) = size;
    let Patches {
        patch_size: p,
        temporal_patch_size: t,
        merge_size: m,
        ..
    } = patches;
    let unit = checked_len("patches", &[p, m])?;
    if p == 0 || t == 0 || m == 0 || h % unit != 0 || w % unit != 0 {
        return Err(invalid(
            "size",
            format!("sides that are multiples of patch_size * merge_size = {unit}"),
            format!("({h}, {w})"),
        ));
    }
    if frames.len() != 1 && frames.len() != t {
        return Err(invalid(
            "frames",
            format!("1 or temporal_patch_size = {t} frames"),
            frames.len(),
        ));
    }
    let sources = frames
        .iter()
        .map(|frame| Source::packed(frame, 3, size))
        .collect::<Result<Vec<_>, _>>()?;
    let direct = Some(&sources[..]);
    patches_by_band(
        frames.len(),
        size,
        patches,
        norm,
        dst,
        memory,
        direct,
        |f, rows, cols, r, g, b| {
            if cols.len() == w {
                // Whole rows, back to back: one run.
                let (start, end) = (rows.start * w * 3, rows.end * w * 3);
                return norm.run(&frames[f][start..end], r, g, b);
            }
            let lines = r
                .chunks_exact_mut(cols.len())
                .zip(g.chunks_exact_mut(cols.len()))
                .zip(b.chunks_exact_mut(cols.len()));
            for (y, ((r, g), b)) in rows.zip(lines) {
                norm.run(
                    &frames[f][3 * (y * w + cols.start)..3 * (y * w + cols.end)],
                    r,
                    g,
                    b,
                );
            }
        },
    )
}

/// [`normalize_to_patches`] of one still frame read where it is: RGB, Pillow's RGBX or
/// grayscale, rows back to back or one by one (see [`Source`]); the same values as from its
/// packed RGB pixels, without packing them first (a 12 MP Pillow image that needs no resize
/// would otherwise be copied once more, 36 MB). With `pad`, of the frame pasted on that
/// canvas, whose colour only the margins are filled with (no canvas is written).
///
/// # Errors
/// As [`normalize_to_patches`], or a frame that does not fit the canvas.
pub fn normalize_source_to_patches<T: bytemuck::Pod + Send + Sync>(
    src: Source<'_>,
    pad: Option<Pad>,
    patches: Patches,
    norm: &Normalize<T>,
    dst: &mut [T],
    memory: Memory,
) -> Result<(), TransformError> {
    let (ih, iw) = src.size();
    let Pad {
        size: (h, w),
        at: (top, left),
        fill,
    } = pad.unwrap_or(Pad {
        size: (ih, iw),
        at: (0, 0),
        fill: [0; 3],
    });
    pad.map_or(Ok(()), |pad| pad.check((ih, iw)))?;
    let unit = checked_len("patches", &[patches.patch_size, patches.merge_size])?;
    if unit == 0 || patches.temporal_patch_size == 0 || h % unit != 0 || w % unit != 0 {
        return Err(invalid(
            "size",
            format!("sides that are multiples of patch_size * merge_size = {unit}"),
            format!("({h}, {w})"),
        ));
    }
    let tables = norm.tables();
    let margin: [T; 3] = std::array::from_fn(|c| tables[c][usize::from(fill[c])]);
    let inside = top..top + ih;
    let frames = [src];
    let direct = ((ih, iw) == (h, w)).then_some(&frames[..]);
    let channels = src.channels();
    patches_by_band(
        1,
        (h, w),
        patches,
        norm,
        dst,
        memory,
        direct,
        |_, rows, cols, r, g, b| {
            // Columns that are the image's whole rows, in rows back to back: one run.
            if cols == (left..left + iw) && inside.contains(&rows.start) && rows.end <= inside.end {
                if let Some(run) = src.run_of(rows.start - top..rows.end - top) {
                    norm.run_pixels(run, channels, r, g, b);
                    return;
                }
            }
            // The image's columns inside these, counted from the first of these.
            let (from, to) = (
                left.clamp(cols.start, cols.end) - cols.start,
                (left + iw).clamp(cols.start, cols.end) - cols.start,
            );
            let lines = r
                .chunks_exact_mut(cols.len())
                .zip(g.chunks_exact_mut(cols.len()))
                .zip(b.chunks_exact_mut(cols.len()));
            for (y, ((r, g), b)) in rows.zip(lines) {
                let mut planes = [r, g, b];
                if inside.contains(&y) {
                    for (plane, value) in planes.iter_mut().zip(margin) {
                        plane[..from].fill(value);
                        plane[to..].fill(value);
                    }
                    if from < to {
                        let [r, g, b] = planes.map(|plane| &mut plane[from..to]);
                        let x = cols.start + from - left;
                        let row = &src.row(y - top)[channels * x..channels * (x + to - from)];
                        norm.run_pixels(row, channels, r, g, b);
                    }
                } else {
                    for (plane, value) in planes.iter_mut().zip(margin) {
                        plane.fill(value);
                    }
                }
            }
        },
    )
}

/// The band loop of [`normalize_to_patches`] for `frames` frames of `size` (its checks done
/// by the caller): `fill(frame, rows, cols, r, g, b)` normalises columns `cols` of image
/// rows `rows` of a frame into three planes of `rows.len() * cols.len()` values. `direct`,
/// when given, holds the frames themselves, which [`stream_rows`] reads where they are RGB
/// or RGBX. `memory` is where `dst`'s lines are (see [`normalize_to_patches`]).
///
/// Inside a team the bands are split among its members (see [`by_bands`]), each with a
/// scratch of its own: a 12 MP image that needs no resize is written on every thread of the
/// call, not on one.
#[allow(clippy::too_many_arguments)]
fn patches_by_band<T: bytemuck::Pod + Send + Sync>(
    frames: usize,
    (h, w): (usize, usize),
    patches: Patches,
    norm: &Normalize<T>,
    dst: &mut [T],
    memory: Memory,
    direct: Option<&[Source<'_>]>,
    fill: impl Fn(usize, Range<usize>, Range<usize>, &mut [T], &mut [T], &mut [T]) + Sync,
) -> Result<(), TransformError> {
    let (p, m) = (patches.patch_size, patches.merge_size);
    let unit = p * m;
    let (gh, gw) = (h / p, w / p);
    let row_len = patches.row_len()?;
    check_out(dst, checked_len("size", &[gh, gw, row_len])?)?;
    if dst.is_empty() {
        return Ok(());
    }
    // One band of merge groups at a time, a part of its columns at a time: the part's `p * m`
    // image rows of each frame are normalised into planar scratch, then each patch row of the
    // part is gathered, its lines in output order.
    let parts = band_parts(w, unit, size_of::<T>());
    let band_out = (gw / m) * m * m * row_len;
    // A large output written once and read by the model, not by this process, in lines of
    // 14 or 16 4-byte values (the patch sizes models use): streamed, through AVX-512 where
    // the CPU has it, else (into 16-byte aligned memory) a line or two at a time. Not into
    // fresh memory, whose lines the zeroing brings into the cache (see `Memory::of`).
    #[cfg(target_arch = "x86_64")]
    let large = size_of::<T>() == 4 && memory == Memory::Used && size_of_val(dst) >= stream::STREAM_MIN_BYTES;
    #[cfg(target_arch = "x86_64")]
    let streamed = large && matches!(p, 14 | 16) && stream::detected();
    #[cfg(target_arch = "x86_64")]
    let lines_streamed =
        large && !streamed && matches!(p, 14 | 16) && (dst.as_ptr() as usize).is_multiple_of(16);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (direct, memory);
    #[cfg(target_arch = "x86_64")]
    let lookup = norm.lookup.as_ref().filter(|_| {
        streamed && p == 16 && direct.is_some_and(|d| d.iter().all(|f| matches!(f.channels(), 3 | 4)))
    });
    // At least two bands (56 image rows for Qwen's 28) to a member.
    by_bands(0..h / unit, dst, band_out, 2, |bands, out| {
        #[cfg(target_arch = "x86_64")]
        if let (Some(lookup), Some(frames)) = (lookup, direct) {
            // SAFETY: a `Lookup` exists only where AVX-512 VBMI (and so F and BW) was detected.
            unsafe { stream_rows(bands, frames, lookup, gw, patches, out) };
            return;
        }
        // Room for the widest part, the first.
        let mut planes = vec![norm.black()[0]; frames * 3 * unit * parts[0].len()];
        // Normalises columns `cols` of band `bh` into the planes: how many values they take.
        let fill_part = |bh: usize, cols: &Range<usize>, planes: &mut [T]| {
            let len = unit * cols.len();
            for (f, scratch) in planes.chunks_exact_mut(3 * len).take(frames).enumerate() {
                let (r, gb) = scratch.split_at_mut(len);
                let (g, b) = gb.split_at_mut(len);
                fill(f, bh * unit..(bh + 1) * unit, cols.clone(), r, g, b);
            }
            frames * 3 * len
        };
        #[cfg(target_arch = "x86_64")]
        if streamed {
            let planes = &mut planes;
            // SAFETY: AVX-512F was detected.
            unsafe {
                if p == 14 {
                    stream_bands::<T, 14>(bands, &parts, planes, patches, out, fill_part);
                } else {
                    stream_bands::<T, 16>(bands, &parts, planes, patches, out, fill_part);
                }
            }
            return;
        }
        for (bh, band_out) in bands.zip(out.chunks_exact_mut(band_out)) {
            let mut rest = band_out;
            for cols in &parts {
                let (part_out, after) = rest.split_at_mut(cols.len() / p * m * row_len);
                rest = after;
                let len = fill_part(bh, cols, &mut planes);
                let planes = &planes[..len];
                let size = (cols.len(), cols.len() / p);
                // Fixed-size copies for the patch sizes models use: a memcpy call per 14-value
                // line cost more than the copy (13.9 ms against 8.8 ms for a 1920x1080 image).
                match p {
                    #[cfg(target_arch = "x86_64")]
                    14 if lines_streamed => stream_pairs(planes, size, patches, part_out),
                    14 => copy_band(planes, size, patches, part_out, copy_array::<T, 14>),
                    #[cfg(target_arch = "x86_64")]
                    16 if lines_streamed => copy_band(planes, size, patches, part_out, stream::stream_line),
                    16 => copy_band(planes, size, patches, part_out, copy_array::<T, 16>),
                    _ => copy_band(planes, size, patches, part_out, <[T]>::copy_from_slice),
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        if lines_streamed {
            stream::fence();
        }
    });
    Ok(())
}

/// How [`patches_by_band`] splits a band `w` pixels wide into parts of whole merge groups
/// (`unit` pixels wide), for values of `bytes` bytes: a band whose planes of one frame fit a
/// core's own cache (within [`WHOLE_BAND_BYTES`]) is one part; a wider one, parts of the most
/// merge groups whose planes of one frame fit within [`PART_BYTES`] (at least one), the last
/// part the rest. The first part is the widest, which the caller's scratch is sized for.
///
/// The planes of a whole band of a wide image, normalised and then gathered, left the core's
/// cache between the two; a part's stay in it. On a 2-vCPU Zen 4 EPYC (1 MB of L2 a core),
/// Qwen2-VL's call (one thread) on a 4032x3024 image that needs no resize (1.35 MB of
/// planes a band) took 21.0 -> 16.7 ms with parts of 64 KB, against 18.2 ms with parts of
/// 256 KB, 17.9 ms of 128 KB, 17.2 ms of 32 KB and 26.5 ms of 16 KB (one merge group: rows
/// too short); at 1932x1092 3.25 -> 2.87 ms and at 1288x924 (433 KB of planes a band)
/// 1.84 -> 1.67 ms. Narrower bands lost a little split: 0.85 -> 0.89 ms at 924x700
/// (310 KB), 0.405 -> 0.415 ms at 644x476 (216 KB), so they stay whole. The bounds are a
/// frame's: with the bounds on both frames of a video's temporal patch, 16 frames of
/// Qwen2-VL at 644x364 took 3.8 -> 4.5 ms a call (parts of 84 columns), and 3.7 ms so.
fn band_parts(w: usize, unit: usize, bytes: usize) -> Vec<Range<usize>> {
    let (groups, group_bytes) = (w / unit, 3 * unit * unit * bytes);
    let per = if groups * group_bytes <= WHOLE_BAND_BYTES {
        w
    } else {
        (PART_BYTES / group_bytes).max(1) * unit
    };
    (0..w).step_by(per).map(|x| x..(x + per).min(w)).collect()
}

/// See [`band_parts`].
const WHOLE_BAND_BYTES: usize = 384 << 10;
/// See [`band_parts`].
const PART_BYTES: usize = 64 << 10;

/// [`gather_band`] into `band_out` with ordinary stores, each line copied by `copy_line`
/// (generic, so that the fixed-size copies inline).
fn copy_band<T: bytemuck::Pod>(
    planes: &[T],
    (w, gw): (usize, usize),
    patches: Patches,
    band_out: &mut [T],
    copy_line: impl Fn(&mut [T], &[T]),
) {
    let mut out = band_out.chunks_exact_mut(patches.patch_size);
    gather_band(planes, w, gw, patches, |line| {
        copy_line(out.next().expect("a line per line"), line);
    });
}

/// [`gather_band`] into `band_out` two 14-value lines at a time, streamed (see
/// [`stream::stream_pair`]; a band has an even number of lines, `3 * t * 14` a patch row).
#[cfg(target_arch = "x86_64")]
fn stream_pairs<T: bytemuck::Pod>(
    planes: &[T],
    (w, gw): (usize, usize),
    patches: Patches,
    band_out: &mut [T],
) {
    let mut out = band_out.chunks_exact_mut(2 * patches.patch_size);
    let mut first = None;
    gather_band(planes, w, gw, patches, |line| match first.take() {
        None => first = Some(line),
        Some(a) => stream::stream_pair(out.next().expect("a place per two lines"), a, line),
    });
    assert!(first.is_none(), "an even number of lines");
}

/// The band loop of [`patches_by_band`] for a large output of 4-byte values (`T` is then
/// `f32`, whose bits are only moved here) and patches of `P` pixels: each band's lines
/// streamed to memory in order.
///
/// # Safety
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn stream_bands<T: bytemuck::Pod, const P: usize>(
    bands: Range<usize>,
    parts: &[Range<usize>],
    planes: &mut [T],
    patches: Patches,
    dst: &mut [T],
    fill_part: impl Fn(usize, &Range<usize>, &mut [T]) -> usize,
) {
    // SAFETY: the caller guarantees AVX-512F.
    let mut lines = unsafe { stream::Lines::<P>::new(bytemuck::cast_slice_mut(dst)) };
    for bh in bands {
        for cols in parts {
            let len = fill_part(bh, cols, planes);
            // SAFETY: as above.
            gather_band(
                bytemuck::cast_slice::<T, u32>(&planes[..len]),
                cols.len(),
                cols.len() / P,
                patches,
                |line| unsafe { lines.push(line) },
            );
        }
    }
    // SAFETY: as above.
    unsafe { lines.finish() };
}

/// The band loop of [`patches_by_band`] for a large output of 4-byte values and patches of
/// 16 pixels, from frames of RGB or RGBX pixels read where they are: each block's lines
/// looked up from its rows' pixels straight into the streamed output
/// ([`Lookup::push_block`]). Streaming is bound by memory, the lookup by the core: a band
/// normalised into planes between two bands' stores left memory idle meanwhile, and the
/// planes were stored and read back. On a 2-vCPU Zen 5 EPYC (11-round A/B), Qwen3-VL
/// took 0.263 -> 0.198 ms at 640x480 and 2.42 -> 1.87 ms at 1920x1080. Patches of 14
/// (Qwen2.5-VL's) took longer this way, 0.42 -> 0.46 ms at 640x480, and keep the planes.
///
/// # Safety
/// The CPU must support AVX-512F, BW and VBMI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn stream_rows<T: bytemuck::Pod>(
    bands: Range<usize>,
    frames: &[Source<'_>],
    lookup: &Lookup,
    gw: usize,
    patches: Patches,
    dst: &mut [T],
) {
    let unit = 16 * patches.merge_size;
    // SAFETY: the caller guarantees AVX-512F.
    let mut lines = unsafe { stream::Lines::<16>::new(bytemuck::cast_slice_mut(dst)) };
    // The band's rows of each frame, found once a band.
    let mut rows: Vec<&[u8]> = Vec::with_capacity(frames.len() * unit);
    for bh in bands {
        rows.clear();
        for frame in frames {
            rows.extend((bh * unit..(bh + 1) * unit).map(|y| frame.row(y)));
        }
        band_blocks(gw, patches, |y0, x0, c, i| {
            let f = i % frames.len();
            let bytes = frames[f].channels();
            let block = rows[f * unit + y0..][..16].try_into().expect("16 rows");
            lookup.push_block(&mut lines, block, x0 * bytes, bytes, c);
        });
    }
    // SAFETY: as above.
    unsafe { lines.finish() };
}

/// `dst.copy_from_slice(src)` for slices of exactly `N` values, inlined as moves.
fn copy_array<T: Copy, const N: usize>(dst: &mut [T], src: &[T]) {
    let dst: &mut [T; N] = dst.try_into().expect("N values");
    *dst = src.try_into().expect("N values");
}

/// The patch rows of one band, `gw` patches wide, from its planar scratch (per frame,
/// `3 * p * m` rows of `w` values each): each `p`-value line of the band's output in
/// order, given to `line`. One frame's scratch fills every time slot; otherwise slot `i`
/// reads frame `i`'s.
#[inline(always)]
#[allow(clippy::inline_always)] // Inlined into `stream_bands`, so `Lines::push` inlines there.
fn gather_band<'a, T: bytemuck::Pod>(
    planes: &'a [T],
    w: usize,
    gw: usize,
    patches: Patches,
    mut line: impl FnMut(&'a [T]),
) {
    let p = patches.patch_size;
    let band_len = p * patches.merge_size * w;
    let frames = planes.len() / (3 * band_len);
    band_blocks(gw, patches, |y0, x0, c, i| {
        let plane = &planes[((i % frames) * 3 + c) * band_len..][..band_len];
        for y in 0..p {
            let at = (y0 + y) * w + x0;
            line(&plane[at..at + p]);
        }
    });
}

/// The `p * p` blocks of one band's patch rows, `gw` patches wide, in output order:
/// `block(y0, x0, c, i)` for channel `c` of time slot `i` of the patch whose pixels are
/// rows `y0..y0 + p` (counted from the band's top) and columns `x0..x0 + p`.
#[inline(always)]
#[allow(clippy::inline_always)] // Inlined into the band loops, as their line writes are.
fn band_blocks(gw: usize, patches: Patches, mut block: impl FnMut(usize, usize, usize, usize)) {
    let Patches {
        patch_size: p,
        temporal_patch_size: t,
        merge_size: m,
        time_major,
    } = patches;
    for k in 0..(gw / m) * m * m {
        // Row k of the band is patch (mh, mw) of merge group bw, both row-major.
        let (bw, within) = (k / (m * m), k % (m * m));
        let (y0, x0) = ((within / m) * p, (bw * m + within % m) * p);
        // The row's `p * p` blocks in order: channel c, time i at block c * t + i, or
        // i * 3 + c when time-major; a still image's one frame fills every time slot.
        for b in 0..3 * t {
            let (c, i) = if time_major {
                (b % 3, b / 3)
            } else {
                (b / t, b % t)
            };
            block(y0, x0, c, i);
        }
    }
}

/// An attention mask of padded frames into `dst`: `areas.len()` frames of `height` rows of
/// `width` values, frame `k` 1 on the first `areas[k].1` values of its first `areas[k].0`
/// rows and 0 elsewhere (Idefics2's and Idefics3's `pixel_attention_mask`, int64). A large
/// mask is written with streaming stores: it follows an output that has just filled the
/// cache, and its lines would otherwise be read from memory before being written. On a
/// 2-vCPU Zen 5 EPYC, an Idefics2 call (torchvision) took 1.96 -> 1.30 ms at 640x480 (a
/// 12 MB mask) and 3.70 -> 3.44 ms at 1920x1080 (22 MB) against numpy filling the mask.
///
/// # Errors
/// [`TransformError::InvalidArgument`] for an area larger than a frame or a `dst` that does
/// not hold the frames, [`TransformError::Overflow`] for a frame whose size does not fit.
pub fn area_mask(
    dst: &mut [i64],
    (height, width): (usize, usize),
    areas: &[(usize, usize)],
) -> Result<(), TransformError> {
    if let Some(&(h, w)) = areas.iter().find(|&&(h, w)| h > height || w > width) {
        return Err(invalid(
            "areas",
            format!("areas inside a frame of {height}x{width}"),
            format!("an area of {h}x{w}"),
        ));
    }
    let frame = checked_len("areas", &[height, width])?;
    if Some(dst.len()) != areas.len().checked_mul(frame) {
        return Err(invalid(
            "dst",
            format!("{} frames of {height}x{width} values", areas.len()),
            format!("{} values", dst.len()),
        ));
    }
    if frame == 0 {
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    let streamed = size_of_val(dst) >= stream::STREAM_MIN_BYTES;
    let mut ones = vec![0i64; width];
    let zeros = vec![0i64; width];
    for (out, &(h, w)) in dst.chunks_exact_mut(frame).zip(areas) {
        ones[..w].fill(1);
        ones[w..].fill(0);
        for (y, row) in out.chunks_exact_mut(width).enumerate() {
            let from = if y < h { &ones } else { &zeros };
            #[cfg(target_arch = "x86_64")]
            if streamed {
                stream::stream_copy(bytemuck::cast_slice_mut(row), bytemuck::cast_slice(from));
                continue;
            }
            row.copy_from_slice(from);
        }
    }
    #[cfg(target_arch = "x86_64")]
    if streamed {
        stream::fence();
    }
    Ok(())
}

/// f32 values → their little-endian bytes, C order.
///
/// Borrowed without a copy on little-endian targets (`bytemuck::cast_slice`); the
/// element-by-element `to_le_bytes` loop it replaces was 31% of the gateway's CPU.
#[cfg(target_endian = "little")]
#[must_use]
pub fn f32_as_le_bytes(values: &[f32]) -> Cow<'_, [u8]> {
    Cow::Borrowed(bytemuck::cast_slice(values))
}

/// f32 values → their little-endian bytes, C order (byte-swapped copy on big-endian targets).
#[cfg(target_endian = "big")]
#[must_use]
pub fn f32_as_le_bytes(values: &[f32]) -> Cow<'_, [u8]> {
    Cow::Owned(values.iter().flat_map(|v| v.to_le_bytes()).collect())
}

/// Little-endian f32 bytes → `dst`, the inverse of [`f32_as_le_bytes`].
///
/// # Errors
/// `src.len()` is not `4 * dst.len()`.
pub fn f32_from_le_bytes(src: &[u8], dst: &mut [f32]) -> Result<(), TransformError> {
    if Some(src.len()) != dst.len().checked_mul(4) {
        return Err(invalid(
            "data",
            format!(
                "{} bytes ({} float32 values)",
                dst.len().saturating_mul(4),
                dst.len()
            ),
            format!("{} bytes", src.len()),
        ));
    }
    #[cfg(target_endian = "little")]
    bytemuck::cast_slice_mut::<f32, u8>(dst).copy_from_slice(src);
    #[cfg(target_endian = "big")]
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(4)) {
        *d = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::pad_rgb;

    const CLIP_MEAN: [f64; 3] = [0.481_454_66, 0.457_827_5, 0.408_210_73];
    const CLIP_STD: [f64; 3] = [0.268_629_54, 0.261_302_58, 0.275_777_11];

    /// The plain per-pixel arithmetic the tables must reproduce.
    fn scalar(x: u8, c: usize, mean: [f64; 3], std: [f64; 3], rescale: f64) -> f32 {
        ((f64::from(x) * rescale) as f32 - mean[c] as f32) / std[c] as f32
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 37 % 256) as u8).collect()
    }

    #[test]
    fn hwc_patches_past_the_image_take_the_outside_value() {
        let tables = [[0f32; 256]; 3].map(|_| std::array::from_fn(|x| x as f32));
        let norm = Normalize::from_tables(tables).with_outside([-1.0, -2.0, -3.0]);
        assert_eq!(norm.black().map(f32::to_bits), [0f32.to_bits(); 3]);
        // Patches of 2, and the sizes with fixed-size line copies (14 and 16), on the same
        // geometry scaled by k: windows inside, reaching past the bottom-right, before the
        // top-left (by whole patches and by half a patch), and outside.
        for k in [1, 7, 8] {
            let (h, w, p) = (3 * k, 5 * k, 2 * k);
            let src = pattern(h * w * 3);
            let ki = k as isize;
            for (top, left, wh, ww) in [
                (0, 0, 2 * k, 4 * k),
                (0, 2 * ki, 4 * k, 4 * k),
                (-2 * ki, -ki, 4 * k, 2 * k),
                (-ki, 0, 4 * k, 4 * k),
                (4 * ki, 6 * ki, 2 * k, 2 * k),
            ] {
                let window = Window {
                    top,
                    left,
                    height: wh,
                    width: ww,
                };
                let mut dst = vec![f32::NAN; 3 * wh * ww];
                normalize_to_hwc_patches(&src, (h, w), &[window], p, &norm, &mut dst).unwrap();
                let mut i = 0;
                for (py, px, y, x) in (0..wh / p).flat_map(|py| {
                    (0..ww / p)
                        .flat_map(move |px| (0..p).flat_map(move |y| (0..p).map(move |x| (py, px, y, x))))
                }) {
                    let (sy, sx) = (top + (py * p + y) as isize, left + (px * p + x) as isize);
                    let inside = (0..h as isize).contains(&sy) && (0..w as isize).contains(&sx);
                    for c in 0..3 {
                        let want = if inside {
                            f32::from(src[(sy as usize * w + sx as usize) * 3 + c])
                        } else {
                            -1.0 - c as f32
                        };
                        assert_eq!(dst[i].to_bits(), want.to_bits(), "p {p}, {window:?}, value {i}");
                        i += 1;
                    }
                }
            }
        }
        let (h, w) = (3, 5);
        let src = pattern(h * w * 3);
        let window = Window {
            top: -1,
            left: 3,
            height: 3,
            width: 3,
        };
        let mut dst = vec![f32::NAN; 27];
        crop_and_normalize(&src, (h, w), window, &norm, &mut dst).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&dst[..3]), bits(&[-1.0; 3])); // red plane, first row: above the image
        assert_eq!(bits(&dst[3..4]), bits(&[f32::from(src[3 * 3])]));
    }

    #[test]
    fn tables_match_scalar_arithmetic_for_every_value() {
        let norm = Normalize::new(CLIP_MEAN, CLIP_STD, 1.0 / 255.0).unwrap();
        for c in 0..3 {
            for x in 0..=255u8 {
                let want = scalar(x, c, CLIP_MEAN, CLIP_STD, 1.0 / 255.0);
                assert_eq!(norm.tables[c][usize::from(x)].to_bits(), want.to_bits());
            }
        }
    }

    /// The scalar loops, which run where the CPU has neither AVX-512 VBMI nor AVX2 and FMA,
    /// against the tables on pixels of 1, 3 and 4 bytes and lengths around both block sizes.
    #[test]
    fn scalar_loops_write_the_table_entries() {
        let mut norm = Normalize::new(CLIP_MEAN, CLIP_STD, 1.0 / 255.0).unwrap();
        norm.lookup = None;
        norm.affine = None;
        for channels in [1, 3, 4] {
            for n in [0, 1, 7, 8, 9, 63, 64, 65, 130] {
                let src = pattern(n * channels);
                let mut planes = vec![vec![f32::NAN; n]; 3];
                let [r, g, b] = &mut planes[..] else {
                    unreachable!()
                };
                norm.run_pixels(&src, channels, r, g, b);
                for (c, plane) in planes.iter().enumerate() {
                    for (i, v) in plane.iter().enumerate() {
                        let x = src[i * channels + if channels == 1 { 0 } else { c }];
                        let want = norm.tables()[c][usize::from(x)];
                        assert_eq!(
                            v.to_bits(),
                            want.to_bits(),
                            "channels {channels}, {i} of {n}, c {c}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn deinterleave_block_tails_for_widths_1_to_17() {
        let norm = Normalize::new(CLIP_MEAN, CLIP_STD, 1.0 / 255.0).unwrap();
        for w in 1..=17 {
            for h in [1, 2, 3] {
                let src = pattern(h * w * 3);
                let mut dst = vec![f32::NAN; 3 * h * w];
                deinterleave_rgb_to_planes(&src, (h, w), &norm, &mut dst).unwrap();
                for (p, px) in src.chunks_exact(3).enumerate() {
                    for c in 0..3 {
                        let want = scalar(px[c], c, CLIP_MEAN, CLIP_STD, 1.0 / 255.0);
                        assert_eq!(
                            dst[c * h * w + p].to_bits(),
                            want.to_bits(),
                            "w={w} h={h} p={p} c={c}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn pad_places_image_top_left_and_black_elsewhere() {
        let mean = [0.5; 3];
        let std = [0.5; 3];
        let norm = Normalize::new(mean, std, 1.0 / 255.0).unwrap();
        for (h, w, ch, cw) in [
            (1, 1, 1, 1),
            (2, 3, 2, 3),
            (2, 3, 5, 3),
            (2, 3, 2, 11),
            (3, 9, 4, 17),
            (1, 1, 3, 2),
        ] {
            let src = pattern(h * w * 3);
            let mut dst = vec![f32::NAN; 3 * ch * cw];
            pad_and_normalize_to_tensor(&src, (h, w), (ch, cw), &norm, &mut dst).unwrap();
            for c in 0..3 {
                for y in 0..ch {
                    for x in 0..cw {
                        let got = dst[(c * ch + y) * cw + x];
                        let px = if y < h && x < w {
                            src[(y * w + x) * 3 + c]
                        } else {
                            0
                        };
                        assert_eq!(got.to_bits(), scalar(px, c, mean, std, 1.0 / 255.0).to_bits());
                    }
                }
            }
        }
    }

    #[test]
    fn pad_equal_to_image_size_is_deinterleave() {
        let norm = Normalize::new(CLIP_MEAN, CLIP_STD, 1.0 / 255.0).unwrap();
        let src = pattern(5 * 13 * 3);
        let mut padded = vec![0f32; 3 * 5 * 13];
        let mut planes = vec![0f32; 3 * 5 * 13];
        pad_and_normalize_to_tensor(&src, (5, 13), (5, 13), &norm, &mut padded).unwrap();
        deinterleave_rgb_to_planes(&src, (5, 13), &norm, &mut planes).unwrap();
        assert_eq!(padded, planes);
    }

    #[test]
    fn crop_reads_inside_and_pads_black_outside() {
        let mean = [0.1, 0.2, 0.3];
        let std = [0.5, 0.6, 0.7];
        let norm = Normalize::new(mean, std, 1.0 / 255.0).unwrap();
        let (h, w) = (5, 7);
        let src = pattern(h * w * 3);
        for (top, left, wh, ww) in [
            (0, 0, 5, 7),
            (1, 2, 3, 3),
            (-2, -3, 9, 13),
            (3, 5, 4, 4),
            (-1, 6, 2, 9),
            (6, 0, 2, 2),
            // Fuzz finding: offsets this far out overflowed the overlap arithmetic.
            (isize::MIN, isize::MAX, 2, 3),
            (isize::MAX, isize::MIN, 3, 2),
        ] {
            let window = Window {
                top,
                left,
                height: wh,
                width: ww,
            };
            let mut dst = vec![f32::NAN; 3 * wh * ww];
            crop_and_normalize(&src, (h, w), window, &norm, &mut dst).unwrap();
            for c in 0..3 {
                for y in 0..wh {
                    for x in 0..ww {
                        let sy = top.checked_add(y as isize).and_then(|v| usize::try_from(v).ok());
                        let sx = left.checked_add(x as isize).and_then(|v| usize::try_from(v).ok());
                        let px = match (sy, sx) {
                            (Some(sy), Some(sx)) if sy < h && sx < w => src[(sy * w + sx) * 3 + c],
                            _ => 0,
                        };
                        let want = scalar(px, c, mean, std, 1.0 / 255.0);
                        assert_eq!(dst[(c * wh + y) * ww + x].to_bits(), want.to_bits(), "{window:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn patches_of_a_source_on_a_canvas_equal_those_of_the_canvas() {
        let norm = &Normalize::new([0.48, 0.46, 0.41], [0.27, 0.26, 0.28], 1.0 / 255.0).unwrap();
        let (h, w) = (56, 84);
        let src = pattern(h * w * 3);
        let (rgbx, gray, gray_rgb) = rgbx_and_gray(&src);
        for p in [
            Patches {
                patch_size: 14,
                temporal_patch_size: 2,
                merge_size: 2,
                time_major: false,
            },
            Patches {
                patch_size: 7,
                temporal_patch_size: 3,
                merge_size: 1,
                time_major: true,
            },
        ] {
            let unit = p.patch_size * p.merge_size;
            for (pixels, c, rgb) in [(&src, 3, &src), (&rgbx, 4, &src), (&gray, 1, &gray_rgb)] {
                // Each row running to the end of the memory block, as Pillow's do.
                let rows: Vec<&[u8]> = (0..h).map(|y| &pixels[y * w * c..]).collect();
                for source in [
                    Source::packed(pixels, c, (h, w)).unwrap(),
                    Source::rows(&rows, c, (h, w)).unwrap(),
                ] {
                    // At the top-left with rows as wide (read as one run), and inside the
                    // canvas with margins on every side.
                    for (canvas, at) in [((h + unit, w), (0, 0)), ((h + unit, w + 2 * unit), (unit - 1, 1))] {
                        let pad = Pad {
                            size: canvas,
                            at,
                            fill: [7, 200, 33],
                        };
                        let mut pasted = vec![0u8; canvas.0 * canvas.1 * 3];
                        let packed = Source::packed(rgb, 3, (h, w)).unwrap();
                        pad_rgb(packed, canvas, at, pad.fill, &mut pasted).unwrap();
                        let want = naive_patches(&[&pasted], canvas, p, norm);
                        let mut got = vec![f32::NAN; want.len()];
                        normalize_source_to_patches(source, Some(pad), p, norm, &mut got, Memory::Used)
                            .unwrap();
                        assert_eq!(got, want, "{p:?} c={c} on {canvas:?} at {at:?}");
                    }
                    let outside = Pad {
                        size: (h, w),
                        at: (1, 0),
                        fill: [0; 3],
                    };
                    let err =
                        normalize_source_to_patches(source, Some(outside), p, norm, &mut [], Memory::Used)
                            .unwrap_err();
                    assert!(err.to_string().contains("pad"), "{err}");
                }
            }
        }
    }

    #[test]
    fn wide_bands_split_into_parts_are_unchanged() {
        // Bands wide enough to be normalised a part of their columns at a time (parts of 168
        // columns here): parts wholly in a margin, across an edge of the image, inside it, and
        // exactly its columns (an image one part wide); one frame and two; RGB, RGBX and
        // grayscale pixels, packed and row by row; outputs written with ordinary stores
        // (28 rows) and streamed (56 rows).
        let norm = &Normalize::new([0.48, 0.46, 0.41], [0.27, 0.26, 0.28], 1.0 / 255.0).unwrap();
        for time_major in [false, true] {
            let p = Patches {
                patch_size: 14,
                temporal_patch_size: 2,
                merge_size: 2,
                time_major,
            };
            for (h, w) in [(28, 1232), (56, 1288)] {
                let parts = band_parts(w, 28, 4);
                assert!(parts.len() > 2 && parts[0].len() == 168, "{w}: {parts:?}");
                assert!(parts
                    .windows(2)
                    .all(|p| p[0].end == p[1].start && p[0].len() % 28 == 0));
                assert_eq!((parts[0].start, parts[parts.len() - 1].end), (0, w));
                let frames: Vec<Vec<u8>> = (0..2)
                    .map(|i| pattern(h * w * 3 + 5 * i)[5 * i..].to_vec())
                    .collect();
                let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
                for refs in [&refs[..1], &refs[..]] {
                    let want = naive_patches(refs, (h, w), p, norm);
                    let mut got = vec![f32::NAN; want.len()];
                    normalize_to_patches(refs, (h, w), p, norm, &mut got, Memory::Used).unwrap();
                    assert!(got == want, "{p:?} {h}x{w}, {} frames", refs.len());
                }
                for (ih, iw) in [(h - 14, 500), (h, 168)] {
                    let image = pattern(ih * iw * 3);
                    let (rgbx, gray, gray_rgb) = rgbx_and_gray(&image);
                    for left in [0, 28, 168, 190, w - iw] {
                        let pad = Pad {
                            size: (h, w),
                            at: (h - ih, left),
                            fill: [7, 200, 33],
                        };
                        for (pixels, c, rgb) in
                            [(&image, 3, &image), (&rgbx, 4, &image), (&gray, 1, &gray_rgb)]
                        {
                            let mut pasted = vec![0u8; h * w * 3];
                            let packed = Source::packed(rgb, 3, (ih, iw)).unwrap();
                            pad_rgb(packed, (h, w), pad.at, pad.fill, &mut pasted).unwrap();
                            let want = naive_patches(&[&pasted], (h, w), p, norm);
                            let rows: Vec<&[u8]> = pixels.chunks_exact(iw * c).collect();
                            for source in [
                                Source::packed(pixels, c, (ih, iw)).unwrap(),
                                Source::rows(&rows, c, (ih, iw)).unwrap(),
                            ] {
                                let mut got = vec![f32::NAN; want.len()];
                                normalize_source_to_patches(
                                    source,
                                    Some(pad),
                                    p,
                                    norm,
                                    &mut got,
                                    Memory::Used,
                                )
                                .unwrap();
                                assert!(got == want, "{p:?} {h}x{w}, {ih}x{iw} at {left}, c={c}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// RGB pixels as Pillow's RGBX (the fourth byte 9), their red bytes as grayscale, and that
    /// grayscale as RGB.
    fn rgbx_and_gray(rgb: &[u8]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let rgbx = rgb
            .chunks_exact(3)
            .flat_map(|px| [px[0], px[1], px[2], 9])
            .collect();
        let gray: Vec<u8> = rgb.iter().step_by(3).copied().collect();
        let gray_rgb = gray.iter().flat_map(|&v| [v; 3]).collect();
        (rgbx, gray, gray_rgb)
    }

    /// HF's patchify index arithmetic, written out per element.
    fn naive_patches(frames: &[&[u8]], (h, w): (usize, usize), p: Patches, norm: &Normalize) -> Vec<f32> {
        let (ps, t, m) = (p.patch_size, p.temporal_patch_size, p.merge_size);
        let (gh, gw) = (h / ps, w / ps);
        let mut out = vec![0f32; gh * gw * p.row_len().unwrap()];
        for bh in 0..gh / m {
            for bw in 0..gw / m {
                for mh in 0..m {
                    for mw in 0..m {
                        let row = ((bh * (gw / m) + bw) * m + mh) * m + mw;
                        for c in 0..3 {
                            for ti in 0..t {
                                for y in 0..ps {
                                    for x in 0..ps {
                                        let (sy, sx) = ((bh * m + mh) * ps + y, (bw * m + mw) * ps + x);
                                        let block = if p.time_major { ti * 3 + c } else { c * t + ti };
                                        let col = (block * ps + y) * ps + x;
                                        let src = frames[ti % frames.len()];
                                        out[row * p.row_len().unwrap() + col] =
                                            norm.tables[c][usize::from(src[(sy * w + sx) * 3 + c])];
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn patches_follow_hf_patchify_order() {
        // transformers' tables, Pillow backend's and torchvision's, found computable where the
        // CPU has AVX2 and FMA (planes are computed where it lacks AVX-512 VBMI too), and
        // tables of other arithmetic, looked up.
        let pil = Normalize::new(CLIP_MEAN, CLIP_STD, 1.0 / 255.0).unwrap();
        let torch = Normalize::new(CLIP_MEAN.map(|m| m * 255.0), CLIP_STD.map(|s| s * 255.0), 1.0).unwrap();
        let other = Normalize::from_tables(std::array::from_fn(|c| {
            std::array::from_fn(|x| (x * x + c) as f32 / 65025.0)
        }));
        #[cfg(target_arch = "x86_64")]
        {
            let computed = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
            assert_eq!(
                (pil.affine.is_some(), torch.affine.is_some()),
                (computed, computed)
            );
        }
        assert!(other.affine.is_none());
        patches_of(&pil);
        patches_of(&torch);
        patches_of(&other);
    }

    /// `normalize_into_canvas` of an (h, w) pattern with tables `value(c, x)` into a canvas
    /// of rows `row` apart and planes `plane` apart, at `offset` values into a buffer of
    /// `junk`, checked value by value (the canvas's zeros included) and for the buffer
    /// around it left as it was.
    fn check_canvas<T: bytemuck::Pod + PartialEq + std::fmt::Debug>(
        (h, w, row, plane): (usize, usize, usize, usize),
        offset: usize,
        value: impl Fn(usize, u8) -> T,
        junk: T,
    ) {
        let norm = Normalize::from_tables(std::array::from_fn(|c| {
            std::array::from_fn(|x| value(c, x as u8))
        }));
        let src = pattern(h * w * 3);
        let rgbx: Vec<u8> = src
            .chunks_exact(3)
            .flat_map(|px| [px[0], px[1], px[2], 9])
            .collect();
        let rows: Vec<&[u8]> = (0..h).map(|y| &rgbx[y * w * 4..]).collect();
        let want: Vec<T> = (0..3 * plane)
            .map(|i| {
                let (c, y, x) = (i / plane, i % plane / row, i % plane % row);
                if y < h && x < w {
                    value(c, src[(y * w + x) * 3 + c])
                } else {
                    T::zeroed()
                }
            })
            .collect();
        for source in [
            Source::packed(&src, 3, (h, w)).unwrap(),
            Source::rows(&rows, 4, (h, w)).unwrap(),
        ] {
            let mut buffer = vec![junk; 3 * plane + 32];
            let dst = &mut buffer[offset..offset + 3 * plane];
            normalize_into_canvas(source, &norm, (row, plane), dst).unwrap();
            let c = source.channels();
            assert!(
                *dst == want[..],
                "{h}x{w} on rows {row}, planes {plane}, offset {offset}, {c} bytes a pixel"
            );
            assert!(buffer[..offset]
                .iter()
                .chain(&buffer[offset + 3 * plane..])
                .all(|&v| v == junk));
        }
    }

    #[test]
    fn canvases_hold_the_image_at_the_top_left_and_zeros() {
        // Canvases of at least STREAM_MIN_BYTES in float32 with padding, streamed on x86-64:
        // Idefics2's frame of a quarter of a 640x480 image resized to 378x378, planes ending
        // in part of a row, rows longer than a block of the stream (one row a block). With
        // ordinary stores: the frame the whole image fills, and small canvases.
        let f32s = |c: usize, x: u8| (c * 1000 + usize::from(x)) as f32;
        let u16s = |c: usize, x: u8| (c * 300 + usize::from(x) + 1) as u16;
        for (shape, offset) in [
            ((378, 378, 640, 480 * 640), 0),
            ((480, 640, 640, 480 * 640), 3),
            ((378, 378, 640, 480 * 640), 15),
            ((100, 301, 1001, 100 * 1001 + 7), 1),
            ((3, 9000, 9001, 12 * 9001), 2),
            ((12, 8, 10, 140), 5),
            ((1, 1, 1, 1), 0),
        ] {
            check_canvas(shape, offset, f32s, -7.0);
            check_canvas(shape, offset, u16s, 0xffff);
        }
        let norm = Normalize::from_tables([[0f32; 256]; 3]);
        let src = pattern(4 * 5 * 3);
        let image = Source::packed(&src, 3, (4, 5)).unwrap();
        for (row, plane, len) in [(4, 20, 60), (5, 19, 57), (5, 20, 59)] {
            let mut dst = vec![0f32; len];
            assert!(normalize_into_canvas(image, &norm, (row, plane), &mut dst).is_err());
        }
    }

    #[test]
    fn large_patches_are_streamed_in_order() {
        // Outputs of at least STREAM_MIN_BYTES in used memory are streamed where the CPU has
        // AVX-512F, and lines of 14 or 16 values into 16-byte aligned outputs elsewhere; in
        // fresh memory, and below that size, they are copied with ordinary stores. Qwen2.5-VL's
        // and Qwen3-VL's sizes for a 640x480 image, a two-frame clip, and outputs starting at
        // several 4-byte offsets of a cache line (the buffer's start is 16-byte aligned, as
        // glibc aligns every allocation). With AVX-512 VBMI, streamed 16-pixel patches are
        // looked up from the frames' rows instead.
        let norm = Normalize::new(CLIP_MEAN, CLIP_STD, 1.0 / 255.0).unwrap();
        let cases = [
            (14, (476, 644), 1, 0),
            (16, (480, 640), 2, 3),
            (16, (448, 640), 1, 15),
            (16, (480, 640), 1, 0),
            (16, (448, 640), 2, 4),
            (14, (476, 644), 2, 8),
        ];
        for ((p, (h, w), frames, offset), memory) in cases
            .into_iter()
            .flat_map(|case| [(case, Memory::Used), (case, Memory::Fresh)])
        {
            let p = Patches {
                patch_size: p,
                temporal_patch_size: 2,
                merge_size: 2,
                time_major: frames == 2,
            };
            let len = (h / p.patch_size) * (w / p.patch_size) * p.row_len().unwrap();
            #[cfg(target_arch = "x86_64")]
            assert!(len * 4 >= stream::STREAM_MIN_BYTES);
            let sources: Vec<Vec<u8>> = (0..frames)
                .map(|f| pattern(h * w * 3 + f)[f..].to_vec())
                .collect();
            let sources: Vec<&[u8]> = sources.iter().map(Vec::as_slice).collect();
            let mut buffer = vec![f32::NAN; len + 32];
            let dst = &mut buffer[offset..offset + len];
            normalize_to_patches(&sources, (h, w), p, &norm, dst, memory).unwrap();
            let want = naive_patches(&sources, (h, w), p, &norm);
            assert!(*dst == want[..], "{p:?} {h}x{w} offset {offset}, {memory:?}");
            if frames == 1 {
                // Read in place: packed RGB, and Pillow's RGBX rows (each running to the end
                // of its block), which 16-pixel patches look up straight into the output.
                let rgbx: Vec<u8> = sources[0]
                    .chunks_exact(3)
                    .flat_map(|px| [px[0], px[1], px[2], 9])
                    .collect();
                let rows: Vec<&[u8]> = (0..h).map(|y| &rgbx[y * w * 4..]).collect();
                for source in [
                    Source::packed(sources[0], 3, (h, w)).unwrap(),
                    Source::rows(&rows, 4, (h, w)).unwrap(),
                ] {
                    dst.fill(f32::NAN);
                    normalize_source_to_patches(source, None, p, &norm, dst, memory).unwrap();
                    let c = source.channels();
                    assert!(
                        *dst == want[..],
                        "{p:?} {h}x{w} offset {offset}, {c} bytes a pixel, {memory:?}"
                    );
                }
            }
            assert!(buffer[..offset]
                .iter()
                .chain(&buffer[offset + len..])
                .all(|v| v.is_nan()));
        }
    }

    fn patches_of(norm: &Normalize) {
        for (p, (h, w)) in [
            (
                Patches {
                    patch_size: 2,
                    temporal_patch_size: 2,
                    merge_size: 2,
                    time_major: false,
                },
                (4, 8),
            ),
            (
                Patches {
                    patch_size: 3,
                    temporal_patch_size: 1,
                    merge_size: 1,
                    time_major: false,
                },
                (6, 3),
            ),
            (
                Patches {
                    patch_size: 2,
                    temporal_patch_size: 3,
                    merge_size: 3,
                    time_major: true,
                },
                (12, 6),
            ),
            (
                Patches {
                    patch_size: 14,
                    temporal_patch_size: 2,
                    merge_size: 2,
                    time_major: false,
                },
                (28, 56),
            ),
            (
                Patches {
                    patch_size: 16,
                    temporal_patch_size: 2,
                    merge_size: 2,
                    time_major: false,
                },
                (64, 32),
            ),
            (
                Patches {
                    patch_size: 14,
                    temporal_patch_size: 2,
                    merge_size: 1,
                    time_major: true,
                },
                (28, 42),
            ),
        ] {
            let src = pattern(h * w * 3);
            let mut dst = vec![f32::NAN; (h / p.patch_size) * (w / p.patch_size) * p.row_len().unwrap()];
            normalize_to_patches(&[&src], (h, w), p, norm, &mut dst, Memory::Used).unwrap();
            assert_eq!(dst, naive_patches(&[&src], (h, w), p, norm), "{p:?} {h}x{w}");
            // Read in place: RGBX (random X bytes), grayscale, and rows one by one.
            let rgbx: Vec<u8> = src
                .chunks_exact(3)
                .enumerate()
                .flat_map(|(i, px)| [px[0], px[1], px[2], (i * 89) as u8])
                .collect();
            let gray: Vec<u8> = src.iter().step_by(3).copied().collect();
            let gray_rgb: Vec<u8> = gray.iter().flat_map(|&v| [v; 3]).collect();
            for (pixels, c, want) in [(&src, 3, &src), (&rgbx, 4, &src), (&gray, 1, &gray_rgb)] {
                let want = naive_patches(&[want], (h, w), p, norm);
                let rows: Vec<&[u8]> = pixels.chunks_exact(w * c).collect();
                for source in [
                    Source::packed(pixels, c, (h, w)).unwrap(),
                    Source::rows(&rows, c, (h, w)).unwrap(),
                ] {
                    let mut got = vec![f32::NAN; want.len()];
                    normalize_source_to_patches(source, None, p, norm, &mut got, Memory::Used).unwrap();
                    assert_eq!(got, want, "{p:?} {h}x{w} c={c}");
                }
            }
            // A video's temporal group: one frame per time slot.
            let frames: Vec<Vec<u8>> = (0..p.temporal_patch_size)
                .map(|i| pattern(h * w * 3 + 7 * i)[7 * i..].to_vec())
                .collect();
            let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            normalize_to_patches(&refs, (h, w), p, norm, &mut dst, Memory::Used).unwrap();
            assert_eq!(dst, naive_patches(&refs, (h, w), p, norm), "{p:?} {h}x{w} video");
        }
        let p = Patches {
            patch_size: 14,
            temporal_patch_size: 2,
            merge_size: 2,
            time_major: false,
        };
        let err = normalize_to_patches(&[&pattern(27 * 28 * 3)], (27, 28), p, norm, &mut [], Memory::Used)
            .unwrap_err();
        assert!(err.to_string().starts_with("size"));
    }

    #[test]
    fn argument_errors_name_the_argument() {
        let norm = Normalize::new([0.0; 3], [1.0; 3], 1.0).unwrap();
        let mut dst = vec![0f32; 12];
        let cases: [(Result<(), TransformError>, &str); 6] = [
            (deinterleave_rgb_to_planes(&[], (0, 4), &norm, &mut dst), "image"),
            (
                deinterleave_rgb_to_planes(&[0; 11], (2, 2), &norm, &mut dst),
                "image",
            ),
            (
                deinterleave_rgb_to_planes(&[0; 12], (2, 2), &norm, &mut dst[..11]),
                "out",
            ),
            (
                pad_and_normalize_to_tensor(&[0; 12], (2, 2), (1, 4), &norm, &mut dst),
                "canvas_size",
            ),
            (
                pad_and_normalize_to_tensor(&[0; 12], (2, 2), (usize::MAX, 4), &norm, &mut dst),
                "canvas_size",
            ),
            (f32_from_le_bytes(&[0; 7], &mut dst[..2]), "data"),
        ];
        for (result, arg) in cases {
            let err = result.unwrap_err();
            assert!(err.to_string().starts_with(arg), "{err}");
        }
        assert!(Normalize::new([0.0; 3], [1.0, 0.0, 1.0], 1.0).is_err());
        assert!(Normalize::new([0.0; 3], [1.0, 1e-300, 1.0], 1.0).is_err());
        assert!(Normalize::new([f64::NAN, 0.0, 0.0], [1.0; 3], 1.0).is_err());
        assert!(Normalize::new([1e300, 0.0, 0.0], [1.0; 3], 1.0).is_err());
        assert!(Normalize::new([0.0; 3], [1.0; 3], f64::INFINITY).is_err());
    }

    #[test]
    fn serialisation_round_trips_and_matches_to_le_bytes() {
        let values: Vec<f32> = (0..1001).map(|i| (i as f32 - 500.0) / 7.0).collect();
        let bytes = f32_as_le_bytes(&values);
        let reference: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(&*bytes, &reference[..]);
        let mut back = vec![0f32; values.len()];
        f32_from_le_bytes(&bytes, &mut back).unwrap();
        assert_eq!(back, values);
    }

    #[test]
    fn repeated_hwc_windows_equal_each_written_alone() {
        let norm = Normalize::new(CLIP_MEAN, CLIP_STD, 1.0 / 255.0).unwrap();
        let (h, w, p) = (9, 13, 4);
        let src = pattern(h * w * 3);
        let [a, b] = [(0, 0), (-2, 7)].map(|(top, left)| Window {
            top,
            left,
            height: 8,
            width: 8,
        });
        // A few windows, and enough of them for an output that is streamed.
        let few = [a, a, b, b, b, a, b];
        let many = few.repeat(stream::STREAM_PAST_CACHE_BYTES / (4 * 3 * 64) / few.len() + 1);
        for windows in [&few[..], &many] {
            let mut got = vec![f32::NAN; windows.len() * 3 * 64];
            normalize_to_hwc_patches(&src, (h, w), windows, p, &norm, &mut got).unwrap();
            for (window, got) in windows.iter().zip(got.chunks_exact(3 * 64)) {
                let mut want = vec![f32::NAN; 3 * 64];
                normalize_to_hwc_patches(&src, (h, w), &[*window], p, &norm, &mut want).unwrap();
                let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{window:?} of {} windows", windows.len());
            }
        }
    }

    #[test]
    fn hwc_patches_past_the_ends_of_isize_are_outside() {
        let norm = Normalize::new([0.5; 3], [0.25; 3], 1.0 / 255.0).unwrap();
        let src = vec![7u8; 2 * 2 * 3];
        for (top, left) in [(0, isize::MAX), (isize::MAX - 1, 0), (isize::MIN, isize::MAX - 2)] {
            let window = Window {
                top,
                left,
                height: 2,
                width: 4,
            };
            let mut dst = vec![f32::NAN; 3 * 8];
            normalize_to_hwc_patches(&src, (2, 2), &[window], 2, &norm, &mut dst).unwrap();
            assert!(
                dst.iter().all(|v| v.to_bits() == (-2.0f32).to_bits()),
                "{window:?}: {dst:?}"
            );
        }
    }

    #[test]
    fn area_masks_mark_each_frames_area() {
        // Small masks and ones large enough to be streamed, with odd widths (rows that
        // start off 16-byte alignment).
        for (height, width, areas) in [
            (3, 5, vec![(2, 3), (0, 0), (3, 5)]),
            (1, 1, vec![(1, 1), (0, 1), (1, 0)]),
            (301, 217, vec![(300, 1), (301, 217), (0, 0), (17, 216)]),
        ] {
            let mut got = vec![7i64; areas.len() * height * width];
            area_mask(&mut got, (height, width), &areas).unwrap();
            let want: Vec<i64> = areas
                .iter()
                .flat_map(|&(h, w)| {
                    (0..height * width).map(move |i| i64::from(i / width < h && i % width < w))
                })
                .collect();
            assert_eq!(got, want, "{height}x{width} {areas:?}");
        }
        let mut none: Vec<i64> = Vec::new();
        area_mask(&mut none, (0, 4), &[(0, 4), (0, 0)]).unwrap();
        let mut dst = vec![0i64; 12];
        assert!(area_mask(&mut dst, (2, 3), &[(3, 1), (0, 0)]).is_err());
        assert!(area_mask(&mut dst, (2, 3), &[(2, 3)]).is_err());
        assert!(area_mask(&mut none, (usize::MAX, 2), &[]).is_err());
    }

    #[test]
    fn checked_len_reports_overflow() {
        assert_eq!(checked_len("shape", &[2, 3, 4]).unwrap(), 24);
        assert_eq!(checked_len("shape", &[]).unwrap(), 1);
        assert!(checked_len("shape", &[usize::MAX, 2]).is_err());
        // Fuzz finding: a zero side hid an overflow that ndarray and NumPy refuse.
        assert_eq!(checked_len("shape", &[0, 1 << 20]).unwrap(), 0);
        assert!(checked_len("shape", &[0, usize::MAX, 2]).is_err());
        assert!(checked_len("shape", &[0, isize::MAX as usize + 1]).is_err());
    }

    #[test]
    fn absurd_patch_sizes_are_errors() {
        // Fuzz finding: the patch row length and the merge unit multiplied unchecked.
        let norm = Normalize::new(CLIP_MEAN, CLIP_STD, 1.0 / 255.0).unwrap();
        let huge = 1usize << 40;
        let patches = |patch_size, merge_size| Patches {
            patch_size,
            temporal_patch_size: 2,
            merge_size,
            time_major: false,
        };
        assert!(patches(huge, 1).row_len().is_err());
        let src = pattern(4 * 4 * 3);
        for (p, m) in [(huge, huge), (1 << 33, 1 << 33)] {
            let err = normalize_to_patches(&[&src], (4, 4), patches(p, m), &norm, &mut [], Memory::Used)
                .unwrap_err();
            assert!(
                matches!(err, TransformError::Overflow { arg: "patches", .. }),
                "{err}"
            );
        }
    }
}
