//! u8 RGB image kernels: Pillow's pixel buffers to oriented HWC RGB, RGBA composited by a
//! table, crops and padding.

use std::ops::Range;

use crate::error::{invalid, TransformError};
use crate::resize::{pack_rgbx, Source};
use crate::transforms::checked_len;

/// An EXIF orientation (tag 0x0112), as Pillow's `ImageOps.exif_transpose` applies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Orientation {
    /// 1: stored upright.
    Identity,
    /// 2: `FLIP_LEFT_RIGHT`.
    MirrorX,
    /// 3: `ROTATE_180`.
    Rotate180,
    /// 4: `FLIP_TOP_BOTTOM`.
    MirrorY,
    /// 5: `TRANSPOSE` (mirror about the main diagonal).
    Transpose,
    /// 6: `ROTATE_270` (90 degrees clockwise).
    Rotate270,
    /// 7: `TRANSVERSE` (mirror about the anti-diagonal).
    Transverse,
    /// 8: `ROTATE_90` (90 degrees counter-clockwise).
    Rotate90,
}

impl Orientation {
    /// The orientation for an EXIF tag value; values outside 1..=8 mean upright, as in Pillow.
    #[must_use]
    pub fn from_exif(tag: i64) -> Self {
        match tag {
            2 => Self::MirrorX,
            3 => Self::Rotate180,
            4 => Self::MirrorY,
            5 => Self::Transpose,
            6 => Self::Rotate270,
            7 => Self::Transverse,
            8 => Self::Rotate90,
            _ => Self::Identity,
        }
    }

    /// Whether height and width swap.
    #[must_use]
    pub fn swaps_axes(self) -> bool {
        matches!(
            self,
            Self::Transpose | Self::Rotate270 | Self::Transverse | Self::Rotate90
        )
    }

    /// The (height, width) of an image of `size` once oriented.
    #[must_use]
    pub fn oriented_size(self, (h, w): (usize, usize)) -> (usize, usize) {
        if self.swaps_axes() {
            (w, h)
        } else {
            (h, w)
        }
    }
}

/// Pixels of `src` (`channels` bytes each, rows contiguous, `size` = (height, width))
/// → oriented HWC RGB in `dst`, in one pass.
///
/// `channels` is 4 for Pillow's RGB/RGBX layout (the fourth byte is padding and is
/// dropped), 3 for packed RGB, or 1 for grayscale `L`, whose value is repeated into
/// R, G and B exactly as Pillow's `convert("RGB")` does.
///
/// # Errors
/// An empty image, an unsupported `channels`, or lengths that do not match.
pub fn to_rgb_oriented(
    src: &[u8],
    channels: usize,
    size: (usize, usize),
    orientation: Orientation,
    dst: &mut [u8],
) -> Result<(), TransformError> {
    let (h, w) = size;
    if h == 0 || w == 0 {
        return Err(invalid("image", "a non-empty image", format!("size ({h}, {w})")));
    }
    if !matches!(channels, 1 | 3 | 4) {
        return Err(invalid("channels", "1, 3 or 4 bytes per pixel", channels));
    }
    let src_len = checked_len("image", &[h, w, channels])?;
    if src.len() != src_len {
        return Err(invalid(
            "image",
            format!("{src_len} bytes for size ({h}, {w})"),
            src.len(),
        ));
    }
    if dst.len() != h * w * 3 {
        return Err(invalid("out", format!("{} bytes", h * w * 3), dst.len()));
    }
    let orient = match channels {
        1 => oriented::<1>,
        3 => oriented::<3>,
        _ => oriented::<4>,
    };
    orient(src, size, orientation, dst);
    Ok(())
}

/// [`to_rgb_oriented`] on pixels of `C` bytes, its arguments checked.
fn oriented<const C: usize>(src: &[u8], (h, w): (usize, usize), orientation: Orientation, dst: &mut [u8]) {
    if !orientation.swaps_axes() {
        // Each output row is a source row, in order or reversed.
        let flipped = matches!(orientation, Orientation::Rotate180 | Orientation::MirrorY);
        let mirrored = matches!(orientation, Orientation::MirrorX | Orientation::Rotate180);
        for (y, out_row) in dst.chunks_exact_mut(w * 3).enumerate() {
            let sy = if flipped { h - 1 - y } else { y };
            let row = &src[sy * w * C..(sy + 1) * w * C];
            if mirrored {
                reversed::<C>(row, out_row, !flipped);
            } else {
                crate::resize::row_to_rgb(row, C, out_row);
            }
        }
        return;
    }
    // Output row y is source column `w - 1 - y` (Transverse, Rotate90) or `y`, read from
    // source row `h - 1 - x` (Rotate270, Transverse) or `x` for output column x.
    let mirrored = matches!(orientation, Orientation::Transverse | Orientation::Rotate90);
    let upward = matches!(orientation, Orientation::Rotate270 | Orientation::Transverse);
    swapped::<C>(src, (h, w), mirrored, upward, dst);
}

/// The RGB of the `C`-byte pixel at byte `at` of `src` (a grey value repeated).
#[inline(always)]
#[allow(clippy::inline_always)] // Inlined into the copy loops, whose codegen it decides.
fn rgb<const C: usize>(src: &[u8], at: usize) -> [u8; 3] {
    let pixel: &[u8; C] = src[at..at + C].try_into().expect("C bytes");
    std::array::from_fn(|i| pixel[if C == 1 { 0 } else { i }])
}

/// `row`'s pixels of `C` bytes reversed into `out` as RGB, read from its first byte to its
/// last when `forward`, else from its last to its first, as the caller goes through the
/// rows: memory read one way took 11.5 ms for a 12 MP image in one Pillow block (RGBX)
/// rotated 180 degrees, 13.4-14.6 ms turning back at each row (10.4 ms upright, 22-28 ms
/// through the orientation's index arithmetic pixel by pixel), on a 2-vCPU Zen 4 EPYC.
/// Whole blocks of sixteen pixels are reversed by one byte permute each where the CPU has
/// AVX-512 VBMI ([`crate::resize::reversed_blocks`]): `decode_image` of a 12 MP JPEG with
/// orientation 3 took 45.5-46.2 -> 39.5-40.4 ms, with orientation 2 46.5-47.3 -> 41.0-41.3
/// ms (upright: 37-38 ms). Elsewhere, blocks of eight by one word permute where it has
/// AVX2 ([`avx2::reversed_blocks`]): with the AVX-512 blocks turned off on that machine,
/// orientation 3 took 36.4-36.5 -> 32.5 ms, orientation 2 40.1-40.3 -> 33.9-34.0 ms, a grey
/// JPEG with orientation 3 23.2 -> 17.5-17.8 ms (upright: 32.5 and 17.5-17.9 ms), as much as
/// the AVX-512 blocks take.
fn reversed<const C: usize>(row: &[u8], out: &mut [u8], forward: bool) {
    let w = out.len() / 3;
    let done = match crate::resize::reversed_blocks(row, C, out, forward) {
        // SAFETY: AVX2 was detected.
        #[cfg(target_arch = "x86_64")]
        0 if avx2::detected() => unsafe { avx2::reversed_blocks::<C>(row, out, forward) },
        done => done,
    };
    let mut copy = |x: usize| {
        let px: &mut [u8; 3] = (&mut out[3 * x..3 * x + 3]).try_into().expect("3 bytes");
        *px = rgb::<C>(row, (w - 1 - x) * C);
    };
    if forward {
        (done..w).rev().for_each(&mut copy);
    } else {
        (done..w).for_each(&mut copy);
    }
}

/// [`to_rgb_oriented`] for the orientations that swap the axes, on pixels of `C` bytes:
/// output row y is source column `w - 1 - y` when `mirrored`, else `y`, and output column
/// x reads source row `h - 1 - x` when `upward`, else `x`. Copied in square tiles, which
/// keep a tile's source rows and output rows in the cache: pixel by pixel along output
/// rows, each read from another source row, took 40-42 ms for a 12 MP image in one
/// Pillow block (RGBX) on a 2-vCPU Zen 4 EPYC, against 10.4 ms upright; tiles of 16, 32,
/// 64, 128 and 256 pixels took 23.0-24.0, 21.5-22.3, 17.6-18.1, 19.4-20.2 and 18.4-19.1 ms
/// (this loop, with its pixels' size a constant, 17.4-19.0 ms in tiles of 64). Where the
/// CPU has AVX2, a tile's blocks of 8x8 pixels are transposed in vectors
/// ([`avx2::turned_tile`]), its last rows and columns under eight pixel by pixel. Without
/// them, tiles of 128 are not slower than 64 here: `decode_image` of a 12 MP JPEG with
/// orientation 6 took 44.7-45.6 ms against 47.9-48.6 ms (34.8-35.1 ms with them).
fn swapped<const C: usize>(src: &[u8], (h, w): (usize, usize), mirrored: bool, upward: bool, dst: &mut [u8]) {
    let (oh, ow) = (w, h);
    #[cfg(target_arch = "x86_64")]
    let vector = avx2::detected();
    let copy = |ys: Range<usize>, xs: Range<usize>, dst: &mut [u8]| {
        for y in ys {
            let c = if mirrored { w - 1 - y } else { y };
            let out = &mut dst[(y * ow + xs.start) * 3..(y * ow + xs.end) * 3];
            for (x, px) in xs.clone().zip(out.chunks_exact_mut(3)) {
                let r = if upward { h - 1 - x } else { x };
                px.copy_from_slice(&rgb::<C>(src, (r * w + c) * C));
            }
        }
    };
    for y0 in (0..oh).step_by(TILE) {
        for x0 in (0..ow).step_by(TILE) {
            let (y1, x1) = ((y0 + TILE).min(oh), (x0 + TILE).min(ow));
            #[cfg(target_arch = "x86_64")]
            if vector {
                // SAFETY: AVX2 was detected, `src` holds (h, w) pixels of C bytes and `dst`
                // (w, h) of 3, and the tile lies in the output.
                let (yb, xb) =
                    unsafe { avx2::turned_tile::<C>(src, (h, w), (mirrored, upward), dst, (y0..y1, x0..x1)) };
                // The tile's last rows and columns under eight.
                copy(yb..y1, x0..x1, dst);
                copy(y0..yb, xb..x1, dst);
                continue;
            }
            copy(y0..y1, x0..x1, dst);
        }
    }
}

/// Side, in pixels, of the tiles in which [`to_rgb_oriented`] rotates and transposes.
const TILE: usize = 128;

/// RGBA pixels (`src`, 4 bytes each: Pillow's RGBA rows read where they are, or an array)
/// composited into packed HWC RGB in `dst`: colour value `c` over alpha `a` becomes
/// `table[(a << 8) | c]`, the table a composite such as transformers' `convert_to_rgb` (each
/// output value a function of one colour value and its alpha, as every composite onto one
/// opaque colour is). Pillow's CMYK to RGB has the same shape, each value a function of its
/// own and the pixel's K (its fourth byte), and runs here too. With `gray`, a pixel's first
/// byte stands for its three colour values: Pillow's LA pixels (L in byte 0, alpha in byte
/// 3, bytes 1 and 2 not read), whose `convert("RGBA")` repeats L.
///
/// Where the table is a [`Formula`]'s (Pillow's composite onto white, which the table of
/// transformers' PIL class is, Pillow's CMYK conversion, or alpha dropped), sixteen pixels
/// at a time are computed in 16-bit lanes with AVX-512, eight with AVX2, instead of looked
/// up one value at a time: LLaVA-1.5 on a 12 MP PIL image with its top third translucent
/// took 16.6-17.1 -> 8.3-8.7 ms (AVX2: 9.1-9.2 ms) on one thread of a 2-vCPU Zen 4 EPYC
/// (an RGB one: 7.1-8.0 ms), on the same pixels as an opaque array 13.1-13.4 -> 7.9-8.5 ms
/// (AVX2: 8.6-8.7 ms). Elsewhere, where the table keeps every opaque colour as it is (onto
/// white, every composite mmfast is given does), runs of sixteen opaque RGBA pixels are
/// packed as Pillow's RGB rows are, by vector permutes: a screenshot's alpha band is mostly
/// opaque.
///
/// # Errors
/// Pixels that are not 4 bytes each, a table that is not 65,536 values, or a `dst` that is
/// not `3 * height * width` bytes.
pub fn composite_rgba(
    src: &Source<'_>,
    table: &[u8],
    gray: bool,
    dst: &mut [u8],
) -> Result<(), TransformError> {
    if src.channels() != 4 {
        return Err(invalid("image", "RGBA pixels (4 bytes each)", src.channels()));
    }
    let table: &[u8; 1 << 16] = table.try_into().map_err(|_| {
        invalid(
            "table",
            "65536 values, at (fourth byte << 8) | value",
            table.len(),
        )
    })?;
    let (h, w) = src.size();
    if dst.len() != checked_len("image", &[h, w, 3])? {
        return Err(invalid("out", format!("{} bytes", h * w * 3), dst.len()));
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(formula) = [Formula::OntoWhite, Formula::Cmyk, Formula::Plain]
        .into_iter()
        .find(|f| table == f.table())
    {
        // RGBA pixels to packed RGB, on a CPU with the kernel's features.
        type Row = unsafe fn(&[u8], &mut [u8], Formula, bool);
        let kernel: Option<Row> = if avx512::detected() {
            Some(avx512::computed)
        } else if avx2::detected() {
            Some(avx2::computed)
        } else {
            None
        };
        if let Some(kernel) = kernel {
            for (y, out) in dst.chunks_exact_mut(w * 3).enumerate() {
                // SAFETY: the kernel's CPU features were detected.
                unsafe { kernel(src.row(y), out, formula, gray) };
            }
            return Ok(());
        }
    }
    let (alphas, _) = table.as_chunks::<256>();
    let keeps_opaque = !gray && (0..=255u8).all(|c| alphas[255][usize::from(c)] == c);
    for (y, out) in dst.chunks_exact_mut(w * 3).enumerate() {
        let row = src.row(y);
        // Pixels `opaque..x` are a run of whole opaque blocks, packed when it ends.
        let mut opaque = 0;
        for x in (0..w).step_by(16).chain([w]) {
            let block = x..(x + 16).min(w);
            let pixels = &row[4 * block.start..4 * block.end];
            if keeps_opaque && !block.is_empty() && pixels.chunks_exact(4).all(|p| p[3] == 255) {
                continue;
            }
            if opaque < x {
                pack_rgbx(&row[4 * opaque..4 * x], &mut out[3 * opaque..3 * x]);
            }
            for (p, o) in pixels.chunks_exact(4).zip(out[3 * x..].chunks_exact_mut(3)) {
                // The 256 values of the pixel's alpha, indexed by bytes (no bounds checks).
                let values = &alphas[usize::from(p[3])];
                let colour = if gray { [p[0]; 3] } else { [p[0], p[1], p[2]] };
                o.copy_from_slice(&colour.map(|c| values[usize::from(c)]));
            }
            opaque = block.end;
        }
    }
    Ok(())
}

/// Palette indices (`src`, 1 byte each: a P Pillow image's rows read where they are) as
/// packed HWC RGB in `dst`: index `i` becomes `palette[3 * i..3 * i + 3]`, sixty-four
/// indices a step where the CPU has AVX-512 VBMI.
///
/// # Errors
/// Pixels that are not 1 byte each, a palette that is not 768 values, or a `dst` that is
/// not `3 * height * width` bytes.
pub fn palette_rgb(src: &Source<'_>, palette: &[u8], dst: &mut [u8]) -> Result<(), TransformError> {
    if src.channels() != 1 {
        return Err(invalid("image", "palette indices (1 byte each)", src.channels()));
    }
    if palette.len() != 768 {
        return Err(invalid(
            "palette",
            "768 values, the RGB of each index",
            palette.len(),
        ));
    }
    let (h, w) = src.size();
    if dst.len() != checked_len("image", &[h, w, 3])? {
        return Err(invalid("out", format!("{} bytes", h * w * 3), dst.len()));
    }
    let (colours, _) = palette.as_chunks::<3>();
    #[cfg(target_arch = "x86_64")]
    if avx512::detected() {
        let planes: [[u8; 256]; 3] = std::array::from_fn(|c| std::array::from_fn(|i| colours[i][c]));
        for (y, out) in dst.chunks_exact_mut(w * 3).enumerate() {
            // SAFETY: AVX-512F, BW and VBMI were detected.
            unsafe { avx512::palette_rgb(&src.row(y)[..w], &planes, out) };
        }
        return Ok(());
    }
    let words: [[u8; 4]; 256] = std::array::from_fn(|i| {
        let [r, g, b] = colours[i];
        [r, g, b, 0]
    });
    for (y, out) in dst.chunks_exact_mut(w * 3).enumerate() {
        palette_row(&src.row(y)[..w], &words, out);
    }
    Ok(())
}

/// [`palette_rgb`] of one row of indices into its packed RGB `out` (three bytes an index),
/// by the colours as 4-byte words: each pixel one 4-byte store that the next pixel's
/// overwrites past its three bytes.
fn palette_row(row: &[u8], words: &[[u8; 4]; 256], out: &mut [u8]) {
    let Some((&last, row)) = row.split_last() else {
        return;
    };
    for (x, &i) in row.iter().enumerate() {
        out[3 * x..3 * x + 4].copy_from_slice(&words[usize::from(i)]);
    }
    out[3 * row.len()..].copy_from_slice(&words[usize::from(last)][..3]);
}

/// Colour value `c` over alpha `a` composited onto opaque white by Pillow's
/// `alpha_composite` (`AlphaComposite.c`, 7 fractional bits): over white its `coef1` is
/// `128 * a`, so the value is `SHIFTFORDIV255(128 * u) >> 7` = `(257 * u) >> 16` for
/// `u = c * a + 255 * (255 - a) + 128`, which a 16-bit lane holds (at most 65,153).
#[allow(clippy::cast_possible_truncation)] // at most 255
const fn onto_white(c: u8, a: u8) -> u8 {
    let (c, a) = (c as u32, a as u32);
    (((c * a + 255 * (255 - a) + 128) * 257) >> 16) as u8
}

/// Value `c` of a CMYK pixel whose K is `k`, converted to RGB by Pillow (`cmyk2rgb` in
/// `Convert.c`): `nk - MULDIV255(c, nk)` for `nk = 255 - k`, where `MULDIV255(c, nk)` is
/// `(t + (t >> 8)) >> 8` for `t = c * nk + 128` (at most 65,153, so a 16-bit lane holds
/// it, and `t + (t >> 8)` too).
#[allow(clippy::cast_possible_truncation)] // at most 255
const fn cmyk_rgb(c: u8, k: u8) -> u8 {
    let nk = 255 - k as u32;
    let t = c as u32 * nk + 128;
    (nk - ((t + (t >> 8)) >> 8)) as u8
}

/// A conversion of 4-byte pixels whose every output value is a function of one value and
/// the pixel's fourth byte, which the vector kernels compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Formula {
    /// [`onto_white`]: RGBA composited onto white.
    OntoWhite,
    /// [`cmyk_rgb`]: CMYK converted to RGB.
    Cmyk,
    /// The value as it is, the fourth byte dropped (`convert("RGB")` of RGBA or LA).
    Plain,
}

impl Formula {
    /// The output for `value` of a pixel whose fourth byte is `fourth`.
    const fn value(self, value: u8, fourth: u8) -> u8 {
        match self {
            Formula::OntoWhite => onto_white(value, fourth),
            Formula::Cmyk => cmyk_rgb(value, fourth),
            Formula::Plain => value,
        }
    }

    /// The formula's value of every pair, at `(fourth << 8) | value`.
    fn table(self) -> &'static [u8; 1 << 16] {
        match self {
            Formula::OntoWhite => &ONTO_WHITE,
            Formula::Cmyk => &CMYK_RGB,
            Formula::Plain => &PLAIN,
        }
    }
}

/// `formula` of every pair, at `(fourth << 8) | value` (for the statics below: evaluated
/// when compiling, never on a stack).
#[allow(clippy::cast_possible_truncation)] // bytes of an index below 65,536
#[allow(clippy::large_stack_arrays)]
const fn pairs(formula: Formula) -> [u8; 1 << 16] {
    let mut table = [0; 1 << 16];
    let mut i = 0;
    while i < table.len() {
        table[i] = formula.value(i as u8, (i >> 8) as u8);
        i += 1;
    }
    table
}

static ONTO_WHITE: [u8; 1 << 16] = pairs(Formula::OntoWhite);
static CMYK_RGB: [u8; 1 << 16] = pairs(Formula::Cmyk);
static PLAIN: [u8; 1 << 16] = pairs(Formula::Plain);

/// Whether every pixel of `src` (RGBA, 4 bytes each) has alpha 255, read up to the end of
/// the first row with one that does not: the AND of each row's words (alpha is the high
/// byte), sixteen words a step in sixteen lanes, which vectorises with SSE2 alone (a `min`
/// of `u32`s needs SSE4.1: folded by `min`, 1920x1080 took 0.34 ms, 0.10 ms by `&`).
#[must_use]
pub fn opaque(src: &Source<'_>) -> bool {
    let word = |p: &[u8]| u32::from_le_bytes([p[0], p[1], p[2], p[3]]);
    (0..src.size().0).all(|y| {
        let (blocks, rest) = src.row(y).as_chunks::<64>();
        let lanes = blocks.iter().fold([u32::MAX; 16], |mut lanes, block| {
            for (lane, p) in lanes.iter_mut().zip(block.chunks_exact(4)) {
                *lane &= word(p);
            }
            lanes
        });
        let all = rest
            .chunks_exact(4)
            .map(word)
            .chain(lanes)
            .fold(u32::MAX, |a, b| a & b);
        all >= 0xff00_0000
    })
}

/// A rectangle inside an image: rows `top..top + height`, columns `left..left + width`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    /// First row.
    pub top: usize,
    /// First column.
    pub left: usize,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
}

impl Rect {
    /// Whether the rectangle is non-empty and lies inside an image of `size` = (height, width).
    #[must_use]
    pub fn fits(&self, (h, w): (usize, usize)) -> bool {
        self.height > 0
            && self.width > 0
            && self.top.checked_add(self.height).is_some_and(|b| b <= h)
            && self.left.checked_add(self.width).is_some_and(|r| r <= w)
    }
}

/// `rect` of an HWC RGB image of `size` = (height, width), copied into `dst`
/// (`3 * rect.height * rect.width` bytes, HWC RGB).
///
/// # Errors
/// An empty rectangle, one that reaches past the image, or lengths that do not match.
pub fn crop_rgb(src: &[u8], size: (usize, usize), rect: Rect, dst: &mut [u8]) -> Result<(), TransformError> {
    let (h, w) = size;
    if src.len() != checked_len("image", &[h, w, 3])? {
        return Err(invalid("image", format!("{} bytes", h * w * 3), src.len()));
    }
    if !rect.fits(size) {
        return Err(invalid(
            "crop",
            format!("a non-empty window inside ({h}, {w})"),
            format!("{rect:?}"),
        ));
    }
    if dst.len() != rect.height * rect.width * 3 {
        return Err(invalid(
            "out",
            format!("{} bytes", rect.height * rect.width * 3),
            dst.len(),
        ));
    }
    for (y, row) in dst.chunks_exact_mut(rect.width * 3).enumerate() {
        let at = ((rect.top + y) * w + rect.left) * 3;
        row.copy_from_slice(&src[at..at + rect.width * 3]);
    }
    Ok(())
}

/// A canvas of `size` = (height, width) filled with the RGB colour `fill`, the pixels
/// pasted at `at` = (top, left).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pad {
    /// The canvas (height, width).
    pub size: (usize, usize),
    /// Where the pixels' top-left corner goes: (top, left).
    pub at: (usize, usize),
    /// The canvas colour.
    pub fill: [u8; 3],
}

impl Pad {
    /// Checks that pixels of `size` = (height, width) fit the canvas at `at`.
    ///
    /// # Errors
    /// Pixels that reach past the canvas.
    pub fn check(&self, (h, w): (usize, usize)) -> Result<(), TransformError> {
        let fits = self.at.0.checked_add(h).is_some_and(|b| b <= self.size.0)
            && self.at.1.checked_add(w).is_some_and(|r| r <= self.size.1);
        if fits {
            return Ok(());
        }
        Err(invalid(
            "pad",
            format!("a canvas holding ({h}, {w}) at {:?}", self.at),
            format!("canvas {:?}", self.size),
        ))
    }

    /// Canvas rows `rows` with `src` pasted (which [`Pad::check`] accepted), packed RGB into
    /// `dst`, which holds exactly those rows.
    ///
    /// # Panics
    /// When `dst` holds another length.
    pub(crate) fn write_rows(&self, src: Source<'_>, rows: Range<usize>, dst: &mut [u8]) {
        let ((h, w), (top, left)) = (src.size(), self.at);
        assert_eq!(dst.len(), rows.len() * self.size.1 * 3, "dst holds the rows");
        for (y, row) in rows.zip(dst.chunks_exact_mut(self.size.1 * 3)) {
            if (top..top + h).contains(&y) {
                let (before, rest) = row.split_at_mut(left * 3);
                let (image, after) = rest.split_at_mut(w * 3);
                let line = Rect {
                    top: y - top,
                    left: 0,
                    height: 1,
                    width: w,
                };
                src.write_rgb_part(line, image);
                fill_rgb(before, self.fill);
                fill_rgb(after, self.fill);
            } else {
                fill_rgb(row, self.fill);
            }
        }
    }
}

/// An image (any [`Source`] layout, read where it is) pasted at `at` = (top, left) of a
/// `canvas` = (height, width) of HWC RGB filled with the RGB colour `fill`, written to `dst`
/// (`3 * height * width` bytes, every one written).
///
/// # Errors
/// An image that does not fit the canvas at `at`, or lengths that do not match.
pub fn pad_rgb(
    src: Source<'_>,
    canvas: (usize, usize),
    at: (usize, usize),
    fill: [u8; 3],
    dst: &mut [u8],
) -> Result<(), TransformError> {
    let pad = Pad {
        size: canvas,
        at,
        fill,
    };
    pad.check(src.size())?;
    if dst.len() != checked_len("pad", &[canvas.0, canvas.1, 3])? {
        return Err(invalid(
            "out",
            format!("{} bytes", canvas.0 * canvas.1 * 3),
            dst.len(),
        ));
    }
    pad.write_rows(src, 0..canvas.0, dst);
    Ok(())
}

/// `dst` (whole pixels) filled with the colour `fill`: one pixel written, then the filled
/// part copied after itself, doubling (a 4032-pixel row in 13 copies, not 4032 stores).
fn fill_rgb(dst: &mut [u8], fill: [u8; 3]) {
    let Some(first) = dst.get_mut(..3) else {
        return;
    };
    first.copy_from_slice(&fill);
    let mut done = 3;
    while done < dst.len() {
        let n = done.min(dst.len() - done);
        dst.copy_within(..n, done);
        done += n;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi16, _mm256_and_si256, _mm256_castsi256_si128, _mm256_cmpeq_epi8,
        _mm256_extracti128_si256, _mm256_loadu_si256, _mm256_maskload_epi32, _mm256_movemask_epi8,
        _mm256_mulhi_epu16, _mm256_mullo_epi16, _mm256_packus_epi16, _mm256_permute2x128_si256,
        _mm256_permutevar8x32_epi32, _mm256_set1_epi16, _mm256_set1_epi32, _mm256_setr_epi32,
        _mm256_setr_epi8, _mm256_setzero_si256, _mm256_shuffle_epi8, _mm256_srli_epi16, _mm256_storeu_si256,
        _mm256_sub_epi16, _mm256_unpackhi_epi32, _mm256_unpackhi_epi64, _mm256_unpackhi_epi8,
        _mm256_unpacklo_epi32, _mm256_unpacklo_epi64, _mm256_unpacklo_epi8, _mm_loadl_epi64, _mm_loadu_si128,
        _mm_prefetch, _mm_setr_epi8, _mm_setzero_si128, _mm_shuffle_epi8, _mm_storel_epi64, _mm_storeu_si128,
        _mm_unpackhi_epi16, _mm_unpackhi_epi32, _mm_unpacklo_epi16, _mm_unpacklo_epi32, _mm_unpacklo_epi8,
        _MM_HINT_T0,
    };
    use std::ops::Range;

    use super::{pack_rgbx, Formula, TILE};
    use crate::resize::avx2::packed_rgb;

    pub(super) fn detected() -> bool {
        is_x86_feature_detected!("avx2")
    }

    /// The whole blocks of eight by eight output pixels of the tile (output rows `ys`,
    /// columns `xs`) of [`super::swapped`] (`src`'s (h, w) pixels of `C` bytes, 1, 3 or 4,
    /// turned into `dst`'s (w, h) RGB pixels, as `mirrored` and `upward` say), each by
    /// [`turned_block`] ([`turned_grey_block`] for grey). Returns where those blocks end;
    /// the rows and columns under eight are the caller's. Before each block but those of a
    /// row's last tile, the cache line at the start of each of its source runs and output
    /// runs a tile on is asked for (a hint): the source rows a tile reads are a row apart,
    /// which the CPU does not fetch ahead by itself. A 12 MP JPEG with orientation 6 took
    /// 46.5 -> 43 ms through `decode_image` with the source runs asked for, 40.5 with the
    /// output runs too, 38-39 in tiles of 128 pixels rather than 64 (upright: 35 ms).
    ///
    /// # Safety
    /// The CPU must support AVX2, `src` must hold `h * w * C` bytes and `dst` `h * w * 3`,
    /// and `ys` and `xs` must lie within `..w` and `..h`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn turned_tile<const C: usize>(
        src: &[u8],
        (h, w): (usize, usize),
        (mirrored, upward): (bool, bool),
        dst: &mut [u8],
        (ys, xs): (Range<usize>, Range<usize>),
    ) -> (usize, usize) {
        let ow = h;
        let (yb, xb) = (ys.start + ys.len() / 8 * 8, xs.start + xs.len() / 8 * 8);
        for by in (ys.start..yb).step_by(8) {
            // Source columns c(by)..=c(by + 7), lowest first.
            let column = if mirrored { w - 8 - by } else { by };
            for bx in (xs.start..xb).step_by(8) {
                let rows = std::array::from_fn(|i| {
                    let r = if upward { h - 1 - bx - i } else { bx + i };
                    (r * w + column) * C
                });
                let outs = std::array::from_fn(|j| {
                    let y = if mirrored { by + 7 - j } else { by + j };
                    (y * ow + bx) * 3
                });
                if bx + TILE + 8 <= ow {
                    // The same block a tile on: source rows TILE on, output columns too.
                    let ahead = TILE * w * C;
                    for (&at, &to) in rows.iter().zip(&outs) {
                        let at = if upward { at - ahead } else { at + ahead };
                        // SAFETY: the block a tile on lies in the image, as the test says.
                        unsafe {
                            _mm_prefetch::<_MM_HINT_T0>(src.as_ptr().add(at).cast());
                            _mm_prefetch::<_MM_HINT_T0>(dst.as_ptr().add(to + 3 * TILE).cast());
                        }
                    }
                }
                // SAFETY: each of the 8 source runs of 8 pixels (rows r, columns
                // `column..column + 8`) lies in `src`, and each of the 8 output runs (rows
                // by..by + 8, columns bx..bx + 8) in `dst`, as the block lies in the tile.
                unsafe {
                    if C == 1 {
                        turned_grey_block(src, rows, dst, outs);
                    } else {
                        turned_block::<C>(src, rows, dst, outs);
                    }
                }
            }
        }
        (yb, xb)
    }

    /// [`turned_block`] for grey pixels, each value repeated into R, G and B: eight runs of
    /// eight bytes transposed by three rounds of unpacks, then each output run spread to 24
    /// bytes by two byte shuffles. A 12 MP grey JPEG with orientation 6 took 30.1-30.3 ->
    /// 19.4-19.7 ms through `decode_image` (upright: 17.5-17.7 ms).
    ///
    /// # Safety
    /// The CPU must support AVX2, and every run must lie in its slice: `rows[i] + 8 <=
    /// src.len()`, `outs[j] + 24 <= dst.len()`.
    #[target_feature(enable = "avx2")]
    unsafe fn turned_grey_block(src: &[u8], rows: [usize; 8], dst: &mut [u8], outs: [usize; 8]) {
        // Output byte i of a column's 24 is its value i / 3; the column in bytes 0-7 or 8-15.
        const fn spread(half: usize, from: usize) -> [u8; 16] {
            let mut index = [0u8; 16];
            let mut i = 0;
            while i < 16 {
                index[i] = (8 * half + (from + i) / 3) as u8;
                i += 1;
            }
            index
        }
        const SPREAD: [[[u8; 16]; 2]; 2] = [[spread(0, 0), spread(0, 16)], [spread(1, 0), spread(1, 16)]];
        debug_assert!(rows.iter().all(|&r| r + 8 <= src.len()));
        debug_assert!(outs.iter().all(|&o| o + 24 <= dst.len()));
        let mut r = [_mm_setzero_si128(); 8];
        for (v, &at) in r.iter_mut().zip(&rows) {
            // SAFETY: the run's 8 bytes lie in `src` (the caller's promise).
            *v = unsafe { _mm_loadl_epi64(src.as_ptr().add(at).cast()) };
        }
        // Bytes (i, j) of rows i: pairs of rows, then quads, then all eight side by side,
        // columns 2k and 2k + 1 the halves of vector k.
        let t = [
            _mm_unpacklo_epi8(r[0], r[1]),
            _mm_unpacklo_epi8(r[2], r[3]),
            _mm_unpacklo_epi8(r[4], r[5]),
            _mm_unpacklo_epi8(r[6], r[7]),
        ];
        let u = [
            _mm_unpacklo_epi16(t[0], t[1]),
            _mm_unpackhi_epi16(t[0], t[1]),
            _mm_unpacklo_epi16(t[2], t[3]),
            _mm_unpackhi_epi16(t[2], t[3]),
        ];
        let columns = [
            _mm_unpacklo_epi32(u[0], u[2]),
            _mm_unpackhi_epi32(u[0], u[2]),
            _mm_unpacklo_epi32(u[1], u[3]),
            _mm_unpackhi_epi32(u[1], u[3]),
        ];
        for (j, &at) in outs.iter().enumerate() {
            let v = columns[j / 2];
            // SAFETY: 16 bytes each; the run's 24 bytes lie in `dst` (the caller's promise).
            unsafe {
                let [first, rest] = SPREAD[j % 2].map(|index| _mm_loadu_si128(index.as_ptr().cast()));
                let to = dst.as_mut_ptr().add(at);
                _mm_storeu_si128(to.cast(), _mm_shuffle_epi8(v, first));
                _mm_storel_epi64(to.add(16).cast(), _mm_shuffle_epi8(v, rest));
            }
        }
    }

    /// Eight runs of eight source pixels of `C` bytes (RGB, or RGBX whose fourth byte is
    /// dropped) from byte offsets `rows` of `src` → eight runs of eight packed RGB pixels at
    /// byte offsets `outs` of `dst`, transposed: output run j's pixel i is source run i's
    /// pixel j. The runs are eight 4-byte words each (RGB widened to RGBX first), transposed
    /// by three rounds of unpacks and lane swaps, then packed to RGB.
    ///
    /// # Safety
    /// The CPU must support AVX2, `C` must be 3 or 4, and every run must lie in its slice:
    /// `rows[i] + 8 * C <= src.len()`, `outs[j] + 24 <= dst.len()`.
    #[target_feature(enable = "avx2")]
    unsafe fn turned_block<const C: usize>(src: &[u8], rows: [usize; 8], dst: &mut [u8], outs: [usize; 8]) {
        debug_assert!(C == 3 || C == 4);
        debug_assert!(rows.iter().all(|&r| r + 8 * C <= src.len()));
        debug_assert!(outs.iter().all(|&o| o + 24 <= dst.len()));
        let mut r = [_mm256_setzero_si256(); 8];
        for (v, &at) in r.iter_mut().zip(&rows) {
            // SAFETY: the run's 8 pixels lie in `src` (the caller's promise).
            *v = unsafe { words::<C>(src.as_ptr().add(at)) };
        }
        // Words (i, j) of rows i: pairs, then quads of rows side by side in each lane, then
        // the lanes of rows 0-3 and 4-7 joined, column j a vector.
        let t = [
            _mm256_unpacklo_epi32(r[0], r[1]),
            _mm256_unpackhi_epi32(r[0], r[1]),
            _mm256_unpacklo_epi32(r[2], r[3]),
            _mm256_unpackhi_epi32(r[2], r[3]),
            _mm256_unpacklo_epi32(r[4], r[5]),
            _mm256_unpackhi_epi32(r[4], r[5]),
            _mm256_unpacklo_epi32(r[6], r[7]),
            _mm256_unpackhi_epi32(r[6], r[7]),
        ];
        let u = [
            _mm256_unpacklo_epi64(t[0], t[2]),
            _mm256_unpackhi_epi64(t[0], t[2]),
            _mm256_unpacklo_epi64(t[1], t[3]),
            _mm256_unpackhi_epi64(t[1], t[3]),
            _mm256_unpacklo_epi64(t[4], t[6]),
            _mm256_unpackhi_epi64(t[4], t[6]),
            _mm256_unpacklo_epi64(t[5], t[7]),
            _mm256_unpackhi_epi64(t[5], t[7]),
        ];
        let columns = [
            _mm256_permute2x128_si256::<0x20>(u[0], u[4]),
            _mm256_permute2x128_si256::<0x20>(u[1], u[5]),
            _mm256_permute2x128_si256::<0x20>(u[2], u[6]),
            _mm256_permute2x128_si256::<0x20>(u[3], u[7]),
            _mm256_permute2x128_si256::<0x31>(u[0], u[4]),
            _mm256_permute2x128_si256::<0x31>(u[1], u[5]),
            _mm256_permute2x128_si256::<0x31>(u[2], u[6]),
            _mm256_permute2x128_si256::<0x31>(u[3], u[7]),
        ];
        for (&v, &at) in columns.iter().zip(&outs) {
            // SAFETY: the run's 24 bytes lie in `dst` (the caller's promise).
            unsafe { store_rgb(v, dst.as_mut_ptr().add(at)) };
        }
    }

    /// Eight pixels of `C` bytes at `at` (RGBX, or RGB read as six words under a mask) as
    /// eight 4-byte words, pixels 0-3 in the low lane; an RGB pixel's fourth byte is 0.
    ///
    /// # Safety
    /// The CPU must support AVX2, `C` must be 3 or 4, and `8 * C` bytes from `at` readable.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn words<const C: usize>(at: *const u8) -> __m256i {
        if C == 4 {
            // SAFETY: 32 bytes readable (the caller's promise).
            return unsafe { _mm256_loadu_si256(at.cast()) };
        }
        let z = -1;
        // Words 0-2 to the low lane and 3-5 to the high, then each pixel to a word.
        let halves = _mm256_setr_epi32(0, 1, 2, 0, 3, 4, 5, 0);
        let widen = _mm256_setr_epi8(
            0, 1, 2, z, 3, 4, 5, z, 6, 7, 8, z, 9, 10, 11, z, //
            0, 1, 2, z, 3, 4, 5, z, 6, 7, 8, z, 9, 10, 11, z,
        );
        // SAFETY: 24 bytes readable (the caller's promise); the masked words are not read.
        let v = unsafe { _mm256_maskload_epi32(at.cast(), _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0)) };
        _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(v, halves), widen)
    }

    /// Eight RGBX words (pixels 0-3 in the low lane) stored as 24 bytes of packed RGB at
    /// `to`, exactly.
    ///
    /// # Safety
    /// The CPU must support AVX2, and 24 bytes from `to` must be writable.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn store_rgb(v: __m256i, to: *mut u8) {
        // SAFETY: AVX2, as this function needs; 24 bytes writable (the caller's promise):
        // 16, then 8.
        unsafe {
            let v = packed_rgb(v);
            _mm_storeu_si128(to.cast(), _mm256_castsi256_si128(v));
            _mm_storel_epi64(to.add(16).cast(), _mm256_extracti128_si256::<1>(v));
        }
    }

    /// [`super::reversed`]'s blocks of eight pixels where the CPU has AVX2 and not AVX-512
    /// VBMI: the first whole blocks of eight pixels of `out` (RGB) as `row`'s pixels of `C`
    /// bytes in reverse order, written from the last block when `forward` (reading `row`
    /// from its start), else from the first; returns the pixels written. A block is eight
    /// words ([`words`]) reversed by one permute and packed ([`store_rgb`]), or for grey
    /// eight bytes spread to 24 in reverse by two byte shuffles.
    ///
    /// # Safety
    /// The CPU must support AVX2, and `C` must be 1, 3 or 4.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn reversed_blocks<const C: usize>(row: &[u8], out: &mut [u8], forward: bool) -> usize {
        let z = -1;
        // Output byte i of a grey block's 24 is its pixel 7 - i / 3.
        let grey = [
            _mm_setr_epi8(7, 7, 7, 6, 6, 6, 5, 5, 5, 4, 4, 4, 3, 3, 3, 2),
            _mm_setr_epi8(2, 2, 1, 1, 1, 0, 0, 0, z, z, z, z, z, z, z, z),
        ];
        let backwards = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
        let w = (out.len() / 3).min(row.len() / C);
        let blocks = w / 8;
        for b in 0..blocks {
            let j = if forward { blocks - 1 - b } else { b };
            // Output pixels 8j..8j + 8 are input pixels w - 8j - 8..w - 8j, reversed: 8 * C
            // bytes read and 24 written, inside both slices as `w` bounds them.
            unsafe {
                let at = row.as_ptr().add((w - 8 * j - 8) * C);
                let to = out.as_mut_ptr().add(24 * j);
                if C == 1 {
                    let v = _mm_loadl_epi64(at.cast());
                    _mm_storeu_si128(to.cast(), _mm_shuffle_epi8(v, grey[0]));
                    _mm_storel_epi64(to.add(16).cast(), _mm_shuffle_epi8(v, grey[1]));
                } else {
                    store_rgb(_mm256_permutevar8x32_epi32(words::<C>(at), backwards), to);
                }
            }
        }
        8 * blocks
    }

    /// `formula` of 4-byte pixels `row` into packed RGB `out` (with `gray`, each pixel's
    /// first byte for its three values): eight pixels a vector as the AVX-512 kernel
    /// computes sixteen, into RGBX words sixty-four pixels at a time, then packed by
    /// [`pack_rgbx`]; the last pixels under eight by the scalar formula.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn computed(row: &[u8], out: &mut [u8], formula: Formula, gray: bool) {
        // Byte 3 of each pixel to its four bytes, and byte 0 to its first three
        // (`_mm256_shuffle_epi8` reads within each 16-byte lane).
        const SPREAD: [[u8; 32]; 2] = {
            let mut index = [[0u8; 32]; 2];
            let mut i = 0;
            while i < 32 {
                index[0][i] = (i & 0b1100) as u8 | 3;
                index[1][i] = (i & 0b1100) as u8 | if i % 4 == 3 { 3 } else { 0 };
                i += 1;
            }
            index
        };
        let pixels = (row.len() / 4).min(out.len() / 3);
        let whole = pixels / 8 * 8;
        // SAFETY: 32 bytes are a valid `__m256i`.
        let [alpha_at, gray_at] =
            SPREAD.map(|index| unsafe { std::mem::transmute::<[u8; 32], __m256i>(index) });
        let zero = _mm256_setzero_si256();
        let alphas = _mm256_set1_epi32(0xff00_0000_u32.cast_signed());
        let (k128, k255, k257) = (
            _mm256_set1_epi16(128),
            _mm256_set1_epi16(255),
            _mm256_set1_epi16(257),
        );
        let mut rgbx = [0u8; 256];
        for start in (0..whole).step_by(64) {
            let n = (whole - start).min(64);
            for (i, to) in rgbx[..4 * n].chunks_exact_mut(32).enumerate() {
                // SAFETY: pixels start + 8i..start + 8i + 8 lie in `row` (below `whole`),
                // and `to` is 32 bytes.
                unsafe {
                    let mut v = _mm256_loadu_si256(row.as_ptr().add(4 * (start + 8 * i)).cast());
                    if gray {
                        v = _mm256_shuffle_epi8(v, gray_at);
                    }
                    let opaque =
                        _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_and_si256(v, alphas), alphas)) == -1;
                    if !(formula == Formula::Plain || opaque && formula == Formula::OntoWhite) {
                        let a = _mm256_shuffle_epi8(v, alpha_at);
                        let value = |c, a| match formula {
                            Formula::OntoWhite => {
                                let u = _mm256_add_epi16(
                                    _mm256_mullo_epi16(c, a),
                                    _mm256_mullo_epi16(_mm256_sub_epi16(k255, a), k255),
                                );
                                _mm256_mulhi_epu16(_mm256_add_epi16(u, k128), k257)
                            }
                            Formula::Cmyk => {
                                let nk = _mm256_sub_epi16(k255, a);
                                let t = _mm256_add_epi16(_mm256_mullo_epi16(c, nk), k128);
                                let t = _mm256_add_epi16(t, _mm256_srli_epi16::<8>(t));
                                _mm256_sub_epi16(nk, _mm256_srli_epi16::<8>(t))
                            }
                            Formula::Plain => c,
                        };
                        v = _mm256_packus_epi16(
                            value(_mm256_unpacklo_epi8(v, zero), _mm256_unpacklo_epi8(a, zero)),
                            value(_mm256_unpackhi_epi8(v, zero), _mm256_unpackhi_epi8(a, zero)),
                        );
                    }
                    _mm256_storeu_si256(to.as_mut_ptr().cast(), v);
                }
            }
            pack_rgbx(&rgbx[..4 * n], &mut out[3 * start..3 * (start + n)]);
        }
        for (p, o) in row[4 * whole..4 * pixels]
            .chunks_exact(4)
            .zip(out[3 * whole..].chunks_exact_mut(3))
        {
            o.copy_from_slice(&[0, 1, 2].map(|c| formula.value(p[if gray { 0 } else { c }], p[3])));
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::{
        __m512i, _mm512_add_epi16, _mm512_loadu_si512, _mm512_mask_blend_epi8, _mm512_mask_cmpneq_epu8_mask,
        _mm512_mask_permutexvar_epi8, _mm512_mask_storeu_epi8, _mm512_maskz_loadu_epi8, _mm512_movepi8_mask,
        _mm512_mulhi_epu16, _mm512_mullo_epi16, _mm512_packus_epi16, _mm512_permutex2var_epi8,
        _mm512_permutexvar_epi8, _mm512_set1_epi16, _mm512_set1_epi8, _mm512_setzero_si512,
        _mm512_shuffle_epi8, _mm512_srli_epi16, _mm512_sub_epi16, _mm512_unpackhi_epi8, _mm512_unpacklo_epi8,
    };

    use super::Formula;

    pub(super) fn detected() -> bool {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vbmi")
    }

    /// The byte each of 64 lanes takes: for `Pack`, byte `i % 3` of pixel `i / 3` (RGBX
    /// pixels packed to RGB); else within its 16-byte lane, byte 3 of lane `i`'s pixel for
    /// `Alpha` (a pixel's alpha spread over its four bytes), byte 0 for `Gray` but byte 3
    /// for the fourth (an LA pixel's L over its three colour bytes).
    const fn indices(kind: Index) -> __m512i {
        let mut index = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            index[i] = match kind {
                Index::Pack => i / 3 * 4 + i % 3,
                Index::Alpha => (i & 0b1100) | 3,
                Index::Gray => (i & 0b1100) | if i % 4 == 3 { 3 } else { 0 },
            } as u8;
            i += 1;
        }
        // SAFETY: 64 bytes are a valid `__m512i`.
        unsafe { std::mem::transmute::<[u8; 64], __m512i>(index) }
    }

    /// What [`indices`] gives.
    #[derive(Clone, Copy)]
    enum Index {
        Pack,
        Alpha,
        Gray,
    }

    /// `formula` of 4-byte pixels `row` into packed RGB `out` (with `gray`, each pixel's
    /// first byte for its three values), sixteen a step: each pixel's fourth byte spread
    /// over it, both widened to 16-bit lanes, the formula computed there and narrowed back,
    /// then the RGB bytes permuted together. Onto white, a block whose alphas are all 255
    /// is only permuted (an opaque colour stays), as is every block of `Formula::Plain`.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn computed(row: &[u8], out: &mut [u8], formula: Formula, gray: bool) {
        const ALPHA: __m512i = indices(Index::Alpha);
        const GRAY: __m512i = indices(Index::Gray);
        const PACK: __m512i = indices(Index::Pack);
        const ALPHAS: u64 = 0x8888_8888_8888_8888;
        let pixels = (row.len() / 4).min(out.len() / 3);
        let zero = _mm512_setzero_si512();
        let (k128, k255, k257) = (
            _mm512_set1_epi16(128),
            _mm512_set1_epi16(255),
            _mm512_set1_epi16(257),
        );
        for x in (0..pixels).step_by(16) {
            let n = (pixels - x).min(16);
            let (read, written) = (u64::MAX >> (64 - 4 * n), u64::MAX >> (64 - 3 * n));
            // SAFETY: the masks read the 4n bytes of pixels x..x + n from `row` and write
            // their 3n bytes into `out`, both inside as `pixels` bounds them.
            unsafe {
                let mut v = _mm512_maskz_loadu_epi8(read, row.as_ptr().add(4 * x).cast());
                if gray {
                    v = _mm512_shuffle_epi8(v, GRAY);
                }
                let opaque = _mm512_mask_cmpneq_epu8_mask(read & ALPHAS, v, _mm512_set1_epi8(-1)) == 0;
                if !(formula == Formula::Plain || opaque && formula == Formula::OntoWhite) {
                    let a = _mm512_shuffle_epi8(v, ALPHA);
                    let value = |c, a| match formula {
                        Formula::OntoWhite => {
                            let u = _mm512_add_epi16(
                                _mm512_mullo_epi16(c, a),
                                _mm512_mullo_epi16(_mm512_sub_epi16(k255, a), k255),
                            );
                            _mm512_mulhi_epu16(_mm512_add_epi16(u, k128), k257)
                        }
                        Formula::Cmyk => {
                            let nk = _mm512_sub_epi16(k255, a);
                            let t = _mm512_add_epi16(_mm512_mullo_epi16(c, nk), k128);
                            let t = _mm512_add_epi16(t, _mm512_srli_epi16::<8>(t));
                            _mm512_sub_epi16(nk, _mm512_srli_epi16::<8>(t))
                        }
                        Formula::Plain => c,
                    };
                    v = _mm512_packus_epi16(
                        value(_mm512_unpacklo_epi8(v, zero), _mm512_unpacklo_epi8(a, zero)),
                        value(_mm512_unpackhi_epi8(v, zero), _mm512_unpackhi_epi8(a, zero)),
                    );
                }
                let rgb = _mm512_permutexvar_epi8(PACK, v);
                _mm512_mask_storeu_epi8(out.as_mut_ptr().add(3 * x).cast(), written, rgb);
            }
        }
    }

    /// For output vector `j` of 64 packed RGB bytes from three 64-byte planes: the byte
    /// each lane takes from red (0..64) or green (64..128), the byte it takes from blue,
    /// and the lanes that take blue.
    const fn interleave(j: usize) -> ([u8; 64], [u8; 64], u64) {
        let (mut red_green, mut blue, mut lanes) = ([0u8; 64], [0u8; 64], 0u64);
        let mut i = 0;
        while i < 64 {
            let (pixel, channel) = ((64 * j + i) / 3, (64 * j + i) % 3);
            #[allow(clippy::cast_possible_truncation)] // pixels below 64
            match channel {
                0 => red_green[i] = pixel as u8,
                1 => red_green[i] = 64 + pixel as u8,
                _ => {
                    blue[i] = pixel as u8;
                    lanes |= 1 << i;
                }
            }
            i += 1;
        }
        (red_green, blue, lanes)
    }

    /// [`super::palette_rgb`] of the indices `row` into packed RGB `out`, sixty-four a step:
    /// each channel's 256 colours held in four registers and looked up by two two-source
    /// byte permutes (indices below 128, then the rest) and a blend, then the three planes
    /// interleaved by two permutes for each 64 bytes written.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn palette_rgb(row: &[u8], planes: &[[u8; 256]; 3], out: &mut [u8]) {
        const INTERLEAVE: [([u8; 64], [u8; 64], u64); 3] = [interleave(0), interleave(1), interleave(2)];
        // SAFETY: each plane holds 256 bytes, four loads of 64.
        let tables = planes.map(|plane| {
            [0, 64, 128, 192].map(|at| unsafe { _mm512_loadu_si512(plane.as_ptr().add(at).cast()) })
        });
        // SAFETY: 64 bytes are a valid `__m512i`.
        let index = |bytes: [u8; 64]| unsafe { std::mem::transmute::<[u8; 64], __m512i>(bytes) };
        let interleave = INTERLEAVE.map(|(red_green, blue, lanes)| (index(red_green), index(blue), lanes));
        let pixels = row.len().min(out.len() / 3);
        for x in (0..pixels).step_by(64) {
            let n = (pixels - x).min(64);
            // SAFETY: the masks read the n indices from `row` and write their 3n bytes into
            // `out`, both inside as `pixels` bounds them.
            unsafe {
                let indices = _mm512_maskz_loadu_epi8(u64::MAX >> (64 - n), row.as_ptr().add(x).cast());
                let high = _mm512_movepi8_mask(indices);
                let [r, g, b] = tables.map(|t| {
                    let low = _mm512_permutex2var_epi8(t[0], indices, t[1]);
                    _mm512_mask_blend_epi8(high, low, _mm512_permutex2var_epi8(t[2], indices, t[3]))
                });
                for (j, &(red_green, blue, lanes)) in interleave.iter().enumerate() {
                    let written = (3 * n).saturating_sub(64 * j).min(64);
                    if written == 0 {
                        break;
                    }
                    let v = _mm512_permutex2var_epi8(r, red_green, g);
                    let v = _mm512_mask_permutexvar_epi8(v, lanes, blue, b);
                    let to = out.as_mut_ptr().add(3 * x + 64 * j);
                    _mm512_mask_storeu_epi8(to.cast(), u64::MAX >> (64 - written), v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2x3 RGBX image whose pixel (y, x) has R = 10y + x.
    fn rgbx() -> Vec<u8> {
        (0..2)
            .flat_map(|y| (0..3).flat_map(move |x| [10 * y + x, 100, 200, 255]))
            .collect()
    }

    fn red_plane(orientation: Orientation) -> Vec<u8> {
        let mut out = vec![0; 18];
        to_rgb_oriented(&rgbx(), 4, (2, 3), orientation, &mut out).unwrap();
        assert!(out.chunks_exact(3).all(|p| p[1] == 100 && p[2] == 200));
        out.iter().step_by(3).copied().collect()
    }

    /// Pillow's `alpha_composite` onto opaque white, in its integers (`AlphaComposite.c`).
    fn onto_white(c: u32, a: u32) -> u8 {
        if a == 0 {
            return 255;
        }
        let shift_div_255 = |v: u32| ((v >> 8) + v) >> 8;
        let coef1 = a * 255 * 255 * 128 / (a * 255 + 255 * (255 - a));
        let coef2 = 255 * 128 - coef1;
        (shift_div_255(c * coef1 + 255 * coef2 + (0x80 << 7)) >> 7) as u8
    }

    /// Pillow's CMYK to RGB (`cmyk2rgb`, `Convert.c`), in its integers.
    fn cmyk(c: u32, k: u32) -> u8 {
        let muldiv255 = |a: u32, b: u32| {
            let t = a * b + 128;
            ((t >> 8) + t) >> 8
        };
        let nk = 255 - k;
        (nk - muldiv255(c, nk)).clamp(0, 255) as u8
    }

    #[test]
    fn formulas_are_pillows_in_its_own_integers() {
        let pillow: Vec<u8> = (0..1u32 << 16).map(|i| onto_white(i & 255, i >> 8)).collect();
        assert_eq!(pillow, ONTO_WHITE);
        let pillow: Vec<u8> = (0..1u32 << 16).map(|i| cmyk(i & 255, i >> 8)).collect();
        assert_eq!(pillow, CMYK_RGB);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_kernels_compute_each_formula() {
        type Row = unsafe fn(&[u8], &mut [u8], Formula, bool);
        let kernels: [(bool, Row); 2] = [
            (avx2::detected(), avx2::computed),
            (avx512::detected(), avx512::computed),
        ];
        // Widths around blocks of 8, 16 and 64 pixels; alternating runs of opaque and
        // translucent pixels, every alpha among them.
        for w in [1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 130, 300] {
            let rgba: Vec<u8> = (0..w)
                .flat_map(|x| {
                    let alpha = if x / 8 % 2 == 0 { 255 } else { (x * 29) as u8 };
                    [(x * 7) as u8, (x * 31 + 5) as u8, (x * x) as u8, alpha]
                })
                .collect();
            let formulas = [
                (Formula::OntoWhite, onto_white as fn(u32, u32) -> u8),
                (Formula::Cmyk, cmyk),
                (Formula::Plain, |v, _| v as u8),
            ];
            // With `gray`, bytes 1 and 2 (here unlike byte 0) are not read.
            for ((formula, pillow), gray) in formulas.into_iter().flat_map(|f| [(f, false), (f, true)]) {
                let want: Vec<u8> = rgba
                    .chunks_exact(4)
                    .flat_map(|p| {
                        (0..3).map(move |c| pillow(p[if gray { 0 } else { c }].into(), p[3].into()))
                    })
                    .collect();
                for (i, &(detected, kernel)) in kernels.iter().enumerate() {
                    if detected {
                        // Bytes past the output are left alone.
                        let mut got = vec![9; 3 * w + 5];
                        // SAFETY: the kernel's features were detected.
                        unsafe { kernel(&rgba, &mut got[..3 * w], formula, gray) };
                        assert_eq!(
                            got[..3 * w],
                            want,
                            "{formula:?}, gray {gray}, kernel {i}, width {w}"
                        );
                        assert!(got[3 * w..].iter().all(|&v| v == 9));
                    }
                }
            }
        }
    }

    #[test]
    fn composites_rgba_by_its_table_with_opaque_runs_packed() {
        // Onto white and CMYK, computed in vectors where the CPU has AVX2; the same white
        // table but for one value (colour 0 over alpha 0), looked up.
        let white = ONTO_WHITE.to_vec();
        let mut other = white.clone();
        other[0] = 254;
        let (cmyk, plain) = (CMYK_RGB.to_vec(), PLAIN.to_vec());
        // Widths around the 16-pixel blocks; rows opaque, opaque but for one pixel, of
        // every alpha in turn, transparent and nearly opaque; packed and as rows with bytes
        // after.
        for w in [1, 15, 16, 17, 33, 64, 70] {
            let h = 5;
            let mut rgba = Vec::with_capacity(h * w * 4);
            for y in 0..h {
                for x in 0..w {
                    let c = [(7 * x + y) as u8, (31 * x + 3 * y) as u8, (x * y) as u8];
                    let alpha = match y {
                        0 => 255,
                        1 if x == w / 2 => (x * 37) as u8,
                        2 => (x * 53 + 1) as u8,
                        3 => 0,
                        _ => 254,
                    };
                    rgba.extend(c.into_iter().chain([alpha]));
                }
            }
            for (table, gray) in [&white, &other, &cmyk, &plain]
                .into_iter()
                .flat_map(|t| [(t, false), (t, true)])
            {
                let want: Vec<u8> = rgba
                    .chunks_exact(4)
                    .flat_map(|p| {
                        (0..3).map(move |c| {
                            table[usize::from(p[3]) << 8 | usize::from(p[if gray { 0 } else { c }])]
                        })
                    })
                    .collect();
                let mut got = vec![0; h * w * 3];
                let packed = Source::packed(&rgba, 4, (h, w)).unwrap();
                composite_rgba(&packed, table, gray, &mut got).unwrap();
                assert_eq!(got, want, "width {w}, gray {gray}, packed");
                let rows: Vec<&[u8]> = (0..h).map(|y| &rgba[y * w * 4..]).collect();
                got.fill(0);
                composite_rgba(&Source::rows(&rows, 4, (h, w)).unwrap(), table, gray, &mut got).unwrap();
                assert_eq!(got, want, "width {w}, gray {gray}, rows");
            }
        }
        // A table that changes opaque colours is read for opaque pixels too.
        let dark: Vec<u8> = (0..1u32 << 16).map(|i| ((i & 255) / 2) as u8).collect();
        let mut got = vec![0; 3 * 20];
        composite_rgba(
            &Source::packed(&[200, 200, 200, 255].repeat(20), 4, (1, 20)).unwrap(),
            &dark,
            false,
            &mut got,
        )
        .unwrap();
        assert!(got.iter().all(|&v| v == 100));
    }

    #[test]
    fn palette_indices_become_their_colours() {
        let palette: Vec<u8> = (0..768).map(|v| (v * 7 % 251) as u8).collect();
        let words: [[u8; 4]; 256] =
            std::array::from_fn(|i| [palette[3 * i], palette[3 * i + 1], palette[3 * i + 2], 0]);
        // Widths around the 64 indices of a vector step; every index, the high half's too.
        for w in [1, 2, 63, 64, 65, 128, 200] {
            let h = 3;
            let indices: Vec<u8> = (0..h * w).map(|i| (i * 37 + i / w) as u8).collect();
            let want: Vec<u8> = indices
                .iter()
                .flat_map(|&i| palette[3 * usize::from(i)..][..3].to_vec())
                .collect();
            let mut got = vec![0; h * w * 3];
            palette_rgb(&Source::packed(&indices, 1, (h, w)).unwrap(), &palette, &mut got).unwrap();
            assert_eq!(got, want, "width {w}");
            let mut scalar = vec![9; w * 3];
            palette_row(&indices[..w], &words, &mut scalar);
            assert_eq!(scalar, want[..w * 3], "width {w}, scalar");
        }
        let indices = Source::packed(&[0; 4], 1, (2, 2)).unwrap();
        assert!(palette_rgb(&indices, &palette[..767], &mut [0; 12]).is_err());
        assert!(palette_rgb(&indices, &palette, &mut [0; 11]).is_err());
        let rgb = Source::packed(&[0; 12], 3, (2, 2)).unwrap();
        assert!(palette_rgb(&rgb, &palette, &mut [0; 12]).is_err());
    }

    #[test]
    fn opaque_only_when_every_alpha_is_255() {
        for w in [1, 3, 16, 17, 40] {
            let mut rgba = vec![255; 3 * w * 4];
            let rows: Vec<&[u8]> = (0..3).map(|y| &rgba[y * w * 4..]).collect();
            assert!(opaque(&Source::rows(&rows, 4, (3, w)).unwrap()));
            for at in [3, 4 * w + 4 * (w / 2) + 3, 12 * w - 1] {
                for alpha in [0, 254] {
                    rgba[at] = alpha;
                    assert!(!opaque(&Source::packed(&rgba, 4, (3, w)).unwrap()), "{w} {at}");
                    rgba[at] = 255;
                }
            }
            // Colour bytes of 0 change nothing.
            rgba.iter_mut()
                .enumerate()
                .filter(|(i, _)| i % 4 != 3)
                .for_each(|(_, v)| *v = 0);
            assert!(opaque(&Source::packed(&rgba, 4, (3, w)).unwrap()));
        }
    }

    #[test]
    fn composite_refuses_other_pixels_tables_and_outputs() {
        let table = vec![0; 1 << 16];
        let rgb = Source::packed(&[0; 12], 3, (2, 2)).unwrap();
        assert!(composite_rgba(&rgb, &table, false, &mut [0; 12]).is_err());
        let rgba = Source::packed(&[0; 16], 4, (2, 2)).unwrap();
        assert!(composite_rgba(&rgba, &table[..256], false, &mut [0; 12]).is_err());
        assert!(composite_rgba(&rgba, &table, false, &mut [0; 11]).is_err());
    }

    #[test]
    fn every_orientation_matches_pillow_transpose() {
        // Expected red planes, row-major, from Pillow's Image.transpose on the same 3x2 image.
        let cases = [
            (Orientation::Identity, vec![0, 1, 2, 10, 11, 12]),
            (Orientation::MirrorX, vec![2, 1, 0, 12, 11, 10]),
            (Orientation::Rotate180, vec![12, 11, 10, 2, 1, 0]),
            (Orientation::MirrorY, vec![10, 11, 12, 0, 1, 2]),
            (Orientation::Transpose, vec![0, 10, 1, 11, 2, 12]),
            (Orientation::Rotate270, vec![10, 0, 11, 1, 12, 2]),
            (Orientation::Transverse, vec![12, 2, 11, 1, 10, 0]),
            (Orientation::Rotate90, vec![2, 12, 1, 11, 0, 10]),
        ];
        for (orientation, want) in cases {
            assert_eq!(red_plane(orientation), want, "{orientation:?}");
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx2_reverses_rows_in_blocks_of_eight() {
        // The vectors of a CPU with AVX2 and not AVX-512 VBMI (this one may take the
        // AVX-512 blocks in `reversed`).
        fn check<const C: usize>(n: usize, forward: bool) {
            #[allow(clippy::cast_possible_truncation)] // byte values, wrapping on purpose
            let row: Vec<u8> = (0..n * C).map(|i| (i * 7 + i / 251) as u8).collect();
            let want: Vec<u8> = (0..n).rev().flat_map(|x| rgb::<C>(&row, x * C)).collect();
            let mut out = vec![0; 3 * n];
            // SAFETY: AVX2 was detected.
            let done = unsafe { avx2::reversed_blocks::<C>(&row, &mut out, forward) };
            assert_eq!(done, n / 8 * 8);
            assert_eq!(out[..3 * done], want[..3 * done], "{C} bytes, {n} pixels");
        }
        if !avx2::detected() {
            return;
        }
        for n in (0..70).chain([1000, 4031]) {
            for forward in [false, true] {
                check::<1>(n, forward);
                check::<3>(n, forward);
                check::<4>(n, forward);
            }
        }
    }

    #[test]
    fn orientations_cross_tiles_as_the_index_arithmetic_says() {
        // Source (row, column) of output pixel (y, x), as `ImageOps.exif_transpose` maps it.
        let source = |o: Orientation, (h, w): (usize, usize), y: usize, x: usize| match o {
            Orientation::Identity => (y, x),
            Orientation::MirrorX => (y, w - 1 - x),
            Orientation::Rotate180 => (h - 1 - y, w - 1 - x),
            Orientation::MirrorY => (h - 1 - y, x),
            Orientation::Transpose => (x, y),
            Orientation::Rotate270 => (h - 1 - x, y),
            Orientation::Transverse => (h - 1 - x, w - 1 - y),
            Orientation::Rotate90 => (x, w - 1 - y),
        };
        for (h, w) in [
            (1, 1),
            (1, 130),
            (67, 130),
            (130, 67),
            (2 * TILE, TILE),
            (TILE + 1, 3),
        ] {
            for channels in [1, 3, 4] {
                #[allow(clippy::cast_possible_truncation)] // byte values, wrapping on purpose
                let src: Vec<u8> = (0..h * w * channels).map(|i| (i * 7 + i / 251) as u8).collect();
                for tag in 1..=8 {
                    let o = Orientation::from_exif(tag);
                    let (oh, ow) = o.oriented_size((h, w));
                    let mut out = vec![0; h * w * 3];
                    to_rgb_oriented(&src, channels, (h, w), o, &mut out).unwrap();
                    for (i, px) in out.chunks_exact(3).enumerate() {
                        let (sy, sx) = source(o, (h, w), i / ow, i % ow);
                        let at = (sy * w + sx) * channels;
                        let want: [u8; 3] =
                            std::array::from_fn(|c| src[at + if channels == 1 { 0 } else { c }]);
                        assert_eq!(
                            px, want,
                            "{o:?} {channels} bytes, ({h}, {w}) -> ({oh}, {ow}), pixel {i}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn grayscale_repeats_into_three_channels() {
        let mut out = vec![0; 6];
        to_rgb_oriented(&[7, 9], 1, (1, 2), Orientation::MirrorX, &mut out).unwrap();
        assert_eq!(out, [9, 9, 9, 7, 7, 7]);
    }

    #[test]
    fn crop_and_pad_place_pixels() {
        // 2x3 image whose pixel (y, x) is (10y + x, 1, 2).
        let src: Vec<u8> = (0..2u8)
            .flat_map(|y| (0..3u8).flat_map(move |x| [10 * y + x, 1, 2]))
            .collect();
        let mut crop = vec![0; 6];
        let rect = Rect {
            top: 1,
            left: 1,
            height: 1,
            width: 2,
        };
        crop_rgb(&src, (2, 3), rect, &mut crop).unwrap();
        assert_eq!(crop, [11, 1, 2, 12, 1, 2]);
        let mut canvas = vec![0; 3 * 3 * 4];
        let crop_src = Source::packed(&crop, 3, (1, 2)).unwrap();
        pad_rgb(crop_src, (3, 4), (1, 2), [7, 8, 9], &mut canvas).unwrap();
        let red: Vec<u8> = canvas.iter().step_by(3).copied().collect();
        assert_eq!(red, [7, 7, 7, 7, 7, 7, 11, 12, 7, 7, 7, 7]);
        assert!(crop_rgb(
            &src,
            (2, 3),
            Rect {
                top: 1,
                left: 2,
                height: 1,
                width: 2
            },
            &mut crop
        )
        .is_err());
        let crop_src = Source::packed(&crop, 3, (1, 2)).unwrap();
        assert!(pad_rgb(crop_src, (3, 3), (0, 2), [0; 3], &mut canvas[..27]).is_err());
        let rgbx = rgbx();
        let mut from_rgbx = vec![0; 3 * 3 * 4];
        pad_rgb(
            Source::packed(&rgbx, 4, (2, 3)).unwrap(),
            (3, 4),
            (1, 1),
            [7, 8, 9],
            &mut from_rgbx,
        )
        .unwrap();
        let red: Vec<u8> = from_rgbx.iter().step_by(3).copied().collect();
        assert_eq!(red, [7, 7, 7, 7, 7, 0, 1, 2, 7, 10, 11, 12]);
    }

    #[test]
    fn bad_arguments_are_errors() {
        let mut out = vec![0; 6];
        assert!(to_rgb_oriented(&[0; 8], 4, (1, 2), Orientation::Identity, &mut out[..5]).is_err());
        assert!(to_rgb_oriented(&[0; 7], 4, (1, 2), Orientation::Identity, &mut out).is_err());
        assert!(to_rgb_oriented(&[0; 4], 2, (1, 2), Orientation::Identity, &mut out).is_err());
        assert!(to_rgb_oriented(&[], 4, (0, 2), Orientation::Identity, &mut out).is_err());
    }
}
