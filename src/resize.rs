//! Pillow-exact resizing of 8-bit RGB images.
//!
//! The convolution filters reproduce Pillow 13's `Resample.c`: taps are built
//! in `f64`, normalised, rounded to 22-bit fixed point and summed in `i32`.
//! The two passes are separable and the first one's output is clipped to `u8`,
//! so their order matters: like Pillow 13, the horizontal pass runs first
//! (over only the source rows the vertical pass will read) unless the height
//! loses more than twice as many pixels as the width; like Pillow 12 and older
//! (see [`follow_pillow`]), it always runs first. A pass whose axis keeps
//! its size is skipped. `Filter::Nearest` is not a convolution in Pillow: it
//! follows the affine nearest-neighbour path (`ImagingScaleAffine`) instead.
//!
//! Both passes work on a range of rows and only borrow their taps, so a caller
//! can split either of them across threads.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::alloc::{recycle, scratch, with_capacity, zeroed, Buffer};
use crate::cache::{cached, Cache};
use crate::error::{invalid, TransformError};
use crate::image::{crop_rgb, pad_rgb, Pad, Rect};
use crate::transforms::checked_len;
use crate::workers;

/// The pixels a resize reads: `size` = (height, width) HWC rows of `channels` bytes a
/// pixel (3: RGB; 4: Pillow's RGBX, whose fourth byte is never read; 1: grayscale), either
/// back to back or one slice per row (Pillow keeps an image over 16 MiB in several blocks).
///
/// The horizontal pass reads RGB and RGBX rows where they are, so a Pillow image costs no
/// packing copy when its resize starts with that pass, and grey rows too where its AVX-512
/// planar or eight-taps-a-lane blocks take the table; every other pass reads packed RGB
/// and gets a copy first. torch's float resizes ([`crate::torch_float`]) read every layout
/// where it is.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    rows: Rows<'a>,
    channels: usize,
    size: (usize, usize),
    /// Where the pixels start in `rows`: their first row, and their first byte in each row
    /// (not zero for a crop, see [`Source::crop`]).
    at: (usize, usize),
    /// Rows the horizontal pass fetches into the cache while it reads these: row `y` of
    /// them while it reads row `y` (see [`resize_together`]); else the next row.
    ahead: Option<&'a Source<'a>>,
}

#[derive(Clone, Copy, Debug)]
enum Rows<'a> {
    /// Rows the given number of bytes apart, from the first byte.
    Packed(&'a [u8], usize),
    /// One slice per row, from its first byte to the end of the memory run holding it.
    Each(&'a [&'a [u8]]),
}

impl<'a> Source<'a> {
    /// Rows back to back: `pixels` holds exactly `h * w * channels` bytes.
    ///
    /// # Errors
    /// An empty size, a channel count other than 1, 3 or 4, or a length that does not match.
    pub fn packed(pixels: &'a [u8], channels: usize, size: (usize, usize)) -> Result<Self, TransformError> {
        let row = Self::row_len(channels, size)?;
        let len = row
            .checked_mul(size.0)
            .ok_or_else(|| invalid("size", "a size whose byte count fits", format!("{size:?}")))?;
        if pixels.len() != len {
            return Err(invalid(
                "image",
                format!("{len} bytes for size {size:?} and {channels} channels"),
                pixels.len(),
            ));
        }
        Ok(Self {
            rows: Rows::Packed(pixels, row),
            channels,
            size,
            at: (0, 0),
            ahead: None,
        })
    }

    /// One slice per row, each from the row's first byte to the end of the memory that
    /// can be read with it (at least one row: `w * channels` bytes). The horizontal pass's
    /// vector loads may read past a row within its slice, into bytes its taps ignore.
    ///
    /// # Errors
    /// As [`Source::packed`], or a row count or row slice too short.
    pub fn rows(rows: &'a [&'a [u8]], channels: usize, size: (usize, usize)) -> Result<Self, TransformError> {
        let row = Self::row_len(channels, size)?;
        if rows.len() != size.0 || rows.iter().any(|r| r.len() < row) {
            return Err(invalid(
                "image",
                format!("{} rows of at least {row} bytes", size.0),
                format!("{} rows", rows.len()),
            ));
        }
        Ok(Self {
            rows: Rows::Each(rows),
            channels,
            size,
            at: (0, 0),
            ahead: None,
        })
    }

    fn row_len(channels: usize, (h, w): (usize, usize)) -> Result<usize, TransformError> {
        if !matches!(channels, 1 | 3 | 4) {
            return Err(invalid("channels", "1, 3 or 4 bytes per pixel", channels));
        }
        if h == 0 || w == 0 {
            return Err(invalid("size", "nonzero height and width", format!("({h}, {w})")));
        }
        w.checked_mul(channels)
            .ok_or_else(|| invalid("size", "a size whose byte count fits", format!("({h}, {w})")))
    }

    /// (height, width).
    #[must_use]
    pub fn size(&self) -> (usize, usize) {
        self.size
    }

    /// Bytes per pixel.
    #[must_use]
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// The pixels of `part` only, read where they are: rows that keep the bytes after
    /// each (see [`Source::rows`]), so a resize reads a crop as it reads the whole image.
    ///
    /// # Errors
    /// `part` is empty or does not fit the image.
    pub fn crop(&self, part: Rect) -> Result<Self, TransformError> {
        if !part.fits(self.size) {
            return Err(invalid(
                "crop",
                format!("a part of an image of size {:?}", self.size),
                format!("{part:?}"),
            ));
        }
        Ok(Self {
            size: (part.height, part.width),
            at: (self.at.0 + part.top, self.at.1 + part.left * self.channels),
            ..*self
        })
    }

    /// Row `y` and the bytes after it in the same memory run.
    fn tail(&self, y: usize) -> &'a [u8] {
        let (top, skip) = self.at;
        match self.rows {
            Rows::Packed(p, stride) => &p[(top + y) * stride + skip..],
            Rows::Each(rows) => &rows[top + y][skip..],
        }
    }

    /// Row `y`'s bytes.
    #[must_use]
    pub fn row(&self, y: usize) -> &'a [u8] {
        &self.tail(y)[..self.size.1 * self.channels]
    }

    /// Rows `rows` back to back in one slice, when they lie so in memory (always for
    /// packed pixels; for rows one by one, when each starts where the one before ends).
    ///
    /// # Panics
    /// When `rows` reaches past the image's last row.
    #[must_use]
    pub fn run_of(&self, rows: Range<usize>) -> Option<&'a [u8]> {
        let row_len = self.size.1 * self.channels;
        let first = self.tail(rows.start);
        let len = rows.len() * row_len;
        let next_to = |y: usize| self.tail(y).as_ptr() == self.tail(y - 1)[row_len..].as_ptr();
        (first.len() >= len && (rows.start + 1..rows.end).all(next_to)).then(|| &first[..len])
    }

    /// The pixels, if they already are packed RGB.
    #[must_use]
    pub fn as_rgb(&self) -> Option<&'a [u8]> {
        match self.rows {
            Rows::Packed(..) if self.channels == 3 => self.run_of(0..self.size.0),
            _ => None,
        }
    }

    /// The pixels as packed HWC RGB into `dst` (`h * w * 3` bytes); grayscale repeats
    /// its value into R, G and B.
    ///
    /// # Panics
    /// When `dst` has another length.
    pub fn write_rgb(&self, dst: &mut [u8]) {
        self.write_rgb_part(whole(self.size), dst);
    }

    /// [`Source::write_rgb`] of the pixels of `part` only (a crop read where it is).
    ///
    /// # Panics
    /// When `part` does not fit the image or `dst` does not hold its packed RGB pixels.
    pub fn write_rgb_part(&self, part: Rect, dst: &mut [u8]) {
        assert!(part.fits(self.size), "{part:?} inside {:?}", self.size);
        assert_eq!(
            dst.len(),
            part.height * part.width * 3,
            "dst holds the packed RGB pixels"
        );
        let c = self.channels;
        for (y, out) in dst.chunks_exact_mut(part.width * 3).enumerate() {
            row_to_rgb(
                &self.row(part.top + y)[part.left * c..(part.left + part.width) * c],
                c,
                out,
            );
        }
    }

    /// The pixels as packed HWC RGB: borrowed when they already are, else copied once into
    /// a [`scratch`] buffer (to [`recycle_rgb`] when done with it).
    ///
    /// # Errors
    /// [`TransformError::OutOfMemory`] when the copy cannot be allocated.
    pub fn to_rgb(&self) -> Result<Cow<'a, [u8]>, TransformError> {
        if let Some(rgb) = self.as_rgb() {
            return Ok(Cow::Borrowed(rgb));
        }
        let mut out = scratch("image", self.size.0 * self.size.1 * 3)?;
        self.write_rgb(&mut out);
        Ok(Cow::Owned(out))
    }
}

/// Gives the pool the copy [`Source::to_rgb`] made, if it made one.
pub(crate) fn recycle_rgb(rgb: Cow<'_, [u8]>) {
    if let Cow::Owned(copy) = rgb {
        recycle(Buffer::U8(copy));
    }
}

/// A row of `channels`-byte pixels (3: RGB, 4: RGBX, 1: grey, repeated) → packed RGB
/// (`out` holds three bytes for each pixel of `row`). Reading a 1920x1080 Pillow image's
/// Arrow export (RGBX) took 0.90-0.95 -> 0.21-0.22 ms with [`pack_rgbx`] instead of a copy
/// a pixel at a time, `decode_image` of a 12 MP JPEG 39.5-39.8 -> 33.4-34.4 ms.
pub(crate) fn row_to_rgb(row: &[u8], channels: usize, out: &mut [u8]) {
    match channels {
        3 => out.copy_from_slice(row),
        4 => pack_rgbx(row, out),
        _ => grey_rgb(row, out),
    }
}

/// The first pixels of `out` (RGB), in whole blocks of sixteen, as the pixels of `row`
/// (`channels` bytes each: 4 RGBX, 3 RGB, 1 grey, repeated) in reverse order, a byte
/// permute a block where the CPU has AVX-512 VBMI; the blocks are written from the last,
/// reading `row` from its start, when `forward`, else from the first. Returns the pixels
/// written (none without AVX-512 VBMI), the rest the caller's.
pub(crate) fn reversed_blocks(row: &[u8], channels: usize, out: &mut [u8], forward: bool) -> usize {
    #[cfg(target_arch = "x86_64")]
    if Kernel::avx512().is_some() {
        // SAFETY: AVX-512 (F, BW, VL, VBMI, VNNI) was detected.
        return unsafe { avx512::reversed_blocks(row, channels, out, forward) };
    }
    0
}

/// Grey pixels → RGB, each value three times (`out` holds three bytes for each of `row`),
/// sixty-four pixels three byte permutes where the CPU has AVX-512 VBMI, sixteen three
/// shuffles where it has AVX2. Against a loop filling each pixel's three bytes (2-round
/// A/B, one thread): Gemma 3's call on an L PIL image, whose rows are repeated to RGB for
/// its resize, took 10.2-10.3 -> 7.6-8.4 ms at 12 MP and 2.2-2.4 -> 1.7-1.75 ms at
/// 1920x1080, LLaVA-1.5's 9.8 -> 7.3-7.8 ms at 12 MP; `decode_image` of a grey 12 MP JPEG
/// 20.7-20.9 -> 17.8-18.1 ms, `pil_to_rgb` of the L image 4.05 -> 1.4-1.5 ms.
pub(crate) fn grey_rgb(row: &[u8], out: &mut [u8]) {
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    match Kernel::avx512().or_else(Kernel::avx2) {
        // SAFETY: AVX-512 (F, BW, VL, VBMI, VNNI) was detected.
        Some(Kernel::Avx512) => done = unsafe { avx512::grey_rgb(row, out) },
        // SAFETY: AVX2 was detected.
        Some(Kernel::Avx2) => done = unsafe { avx2::grey_rgb(row, out) },
        _ => {}
    }
    for (o, &p) in out[3 * done..].chunks_exact_mut(3).zip(&row[done..]) {
        o.fill(p);
    }
}

/// RGBX pixels → packed RGB (`out` holds three bytes for each four of `row`), sixteen
/// pixels a byte permute where the CPU has AVX-512 VBMI, eight a shuffle where it has AVX2.
pub(crate) fn pack_rgbx(row: &[u8], out: &mut [u8]) {
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    match Kernel::avx512().or_else(Kernel::avx2) {
        // SAFETY: AVX-512 (F, BW, VL, VBMI, VNNI) was detected.
        Some(Kernel::Avx512) => done = unsafe { avx512::pack_rgbx(row, out) },
        // SAFETY: AVX2 was detected.
        Some(Kernel::Avx2) => done = unsafe { avx2::pack_rgbx(row, out) },
        _ => {}
    }
    for (o, p) in out[3 * done..]
        .chunks_exact_mut(3)
        .zip(row[4 * done..].chunks_exact(4))
    {
        o.copy_from_slice(&p[..3]);
    }
}

/// A filter's weight as a function of the distance from the sample centre.
type Weight = fn(f64) -> f64;

/// Fractional bits of Pillow's fixed-point taps: 32 bits minus 8 for the
/// pixel and 2 for the overshoot of filters with negative lobes.
const PRECISION_BITS: u32 = 22;

/// Pillow's resampling filters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Filter {
    /// Nearest neighbour (`Image.Resampling.NEAREST`).
    Nearest,
    /// Box average (`Image.Resampling.BOX`).
    Box,
    /// Triangle filter (`Image.Resampling.BILINEAR`).
    Bilinear,
    /// Hamming-windowed sinc of radius 1 (`Image.Resampling.HAMMING`).
    Hamming,
    /// Keys cubic with a = -0.5 (`Image.Resampling.BICUBIC`).
    Bicubic,
    /// Lanczos of radius 3 (`Image.Resampling.LANCZOS`).
    Lanczos,
}

impl Filter {
    /// Every filter.
    pub const ALL: [Filter; 6] = [
        Filter::Nearest,
        Filter::Box,
        Filter::Bilinear,
        Filter::Hamming,
        Filter::Bicubic,
        Filter::Lanczos,
    ];

    /// The filter for a PIL resampling code (`NEAREST=0`, `LANCZOS=1`,
    /// `BILINEAR=2`, `BICUBIC=3`, `BOX=4`, `HAMMING=5`).
    #[must_use]
    pub fn from_pil_code(code: i64) -> Option<Filter> {
        match code {
            0 => Some(Filter::Nearest),
            1 => Some(Filter::Lanczos),
            2 => Some(Filter::Bilinear),
            3 => Some(Filter::Bicubic),
            4 => Some(Filter::Box),
            5 => Some(Filter::Hamming),
            _ => None,
        }
    }

    /// The filter for a lowercase name such as `"bicubic"`.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Filter> {
        Filter::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The lowercase name accepted by [`Filter::from_name`].
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Filter::Nearest => "nearest",
            Filter::Box => "box",
            Filter::Bilinear => "bilinear",
            Filter::Hamming => "hamming",
            Filter::Bicubic => "bicubic",
            Filter::Lanczos => "lanczos",
        }
    }

    /// Support radius at scale 1 and weight function, or `None` for nearest
    /// neighbour, which Pillow does not treat as a convolution.
    pub(crate) fn convolution(self) -> Option<(f64, Weight)> {
        match self {
            Filter::Nearest => None,
            Filter::Box => Some((0.5, box_weight)),
            Filter::Bilinear => Some((1.0, bilinear_weight)),
            Filter::Hamming => Some((1.0, hamming_weight)),
            Filter::Bicubic => Some((2.0, bicubic_weight)),
            Filter::Lanczos => Some((3.0, lanczos_weight)),
        }
    }
}

/// Which implementation runs; `Auto` picks AVX-512 (with AVX2) when the CPU has both, else
/// AVX2 when it has that (detected at run time), else scalar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The fastest backend this CPU supports.
    Auto,
    /// Portable code, the reference the SIMD backends must match bit for bit.
    Scalar,
    /// AVX2 on x86-64; an error where the CPU lacks it.
    Avx2,
    /// AVX-512 (F, BW, VL, VBMI and VNNI) and AVX2 on x86-64; an error where the CPU lacks
    /// either.
    Avx512,
}

/// Resize an HWC u8 RGB image (rows contiguous, 3 bytes per pixel) of
/// `src_size` = (height, width) into `dst` of `dst_size` = (height, width);
/// bit-identical to
/// `np.asarray(PIL.Image.fromarray(src).resize((w, h), resample=filter))`
/// with Pillow 13.
///
/// # Errors
///
/// [`TransformError::InvalidArgument`] for a zero size or a buffer whose
/// length does not match its size, [`TransformError::Overflow`] for a size
/// whose byte count does not fit in `usize`.
pub fn resize_rgb(
    src: &[u8],
    src_size: (usize, usize),
    dst: &mut [u8],
    dst_size: (usize, usize),
    filter: Filter,
) -> Result<(), TransformError> {
    resize_rgb_with(src, src_size, dst, dst_size, filter, Backend::Auto)
}

/// [`resize_rgb`] on a chosen [`Backend`].
///
/// # Errors
///
/// As [`resize_rgb`], plus [`TransformError::InvalidArgument`] when
/// `backend` is not supported by this CPU.
pub fn resize_rgb_with(
    src: &[u8],
    src_size: (usize, usize),
    dst: &mut [u8],
    dst_size: (usize, usize),
    filter: Filter,
    backend: Backend,
) -> Result<(), TransformError> {
    check_buffers(src, src_size, dst, dst_size)?;
    resize_source_with(Source::packed(src, 3, src_size)?, dst, dst_size, filter, backend)
}

/// [`resize_rgb`] from any [`Source`] (RGBX or grayscale, packed or row by row): the
/// same bytes as resizing its packed RGB pixels.
///
/// # Errors
/// As [`resize_rgb`].
pub fn resize_source(
    src: Source<'_>,
    dst: &mut [u8],
    dst_size: (usize, usize),
    filter: Filter,
) -> Result<(), TransformError> {
    resize_source_with(src, dst, dst_size, filter, Backend::Auto)
}

/// [`resize_source`] on a chosen [`Backend`].
///
/// # Errors
/// As [`resize_rgb_with`].
pub fn resize_source_with(
    src: Source<'_>,
    dst: &mut [u8],
    dst_size: (usize, usize),
    filter: Filter,
    backend: Backend,
) -> Result<(), TransformError> {
    resize_source_part(src, None, dst, dst_size, whole(dst_size), filter, backend)
}

/// `part` of [`resize_source_with`]'s result (of `dst_size`) into `dst`, which holds
/// exactly `part`: the same bytes as cropping the whole result. The two passes compute only
/// `part`'s pixels along each axis they resize. With `paste`, the resize reads `src` pasted
/// on that canvas (see [`separable`]).
///
/// # Errors
/// As [`resize_rgb_with`], a `part` outside `dst_size`, or `src` outside the canvas.
pub(crate) fn resize_source_part(
    src: Source<'_>,
    paste: Option<Pad>,
    dst: &mut [u8],
    dst_size: (usize, usize),
    part: Rect,
    filter: Filter,
    backend: Backend,
) -> Result<(), TransformError> {
    check_part(dst, dst_size, part)?;
    let kernel = Kernel::select(backend)?;
    let src_size = paste.map_or(src.size(), |pad| pad.size);
    match filter.convolution() {
        Some((support, weight)) if src_size != dst_size && part_fits(src_size, dst_size, part) => {
            convolve(kernel, src, paste, dst, dst_size, part, filter, support, weight)
        }
        _ if paste.is_some() => on_canvas(src, paste, |canvas| {
            resize_source_part(canvas, None, dst, dst_size, part, filter, backend)
        }),
        convolution => whole_then_part(dst, dst_size, part, |full| match convolution {
            // Image.resize returns a copy before any filter runs.
            _ if src_size == dst_size => {
                src.write_rgb(full);
                Ok(())
            }
            None => {
                let rgb = src.to_rgb()?;
                nearest(&rgb, src_size, full, dst_size);
                recycle_rgb(rgb);
                Ok(())
            }
            Some((support, weight)) => convolve(
                kernel,
                src,
                None,
                full,
                dst_size,
                whole(dst_size),
                filter,
                support,
                weight,
            ),
        }),
    }
}

/// Runs `resize` on `src`, or, with `paste`, on the canvas it describes with `src` pasted,
/// written whole first into a pooled buffer (given back after).
///
/// # Errors
/// What `resize` returns, `src` outside the canvas, or [`TransformError::OutOfMemory`].
pub(crate) fn on_canvas(
    src: Source<'_>,
    paste: Option<Pad>,
    resize: impl FnOnce(Source<'_>) -> Result<(), TransformError>,
) -> Result<(), TransformError> {
    let Some(pad) = paste else {
        return resize(src);
    };
    // Written in full by the pad.
    let mut canvas = scratch("pad", checked_len("pad", &[pad.size.0, pad.size.1, 3])?)?;
    pad_rgb(src, pad.size, pad.at, pad.fill, &mut canvas)?;
    let done = resize(Source::packed(&canvas, 3, pad.size)?);
    recycle(Buffer::U8(canvas));
    done
}

/// All of an image of `size` = (height, width).
pub(crate) fn whole((height, width): (usize, usize)) -> Rect {
    Rect {
        top: 0,
        left: 0,
        height,
        width,
    }
}

/// Checks that `part` is a non-empty part of an image of `size` and `dst` holds exactly its
/// RGB pixels.
pub(crate) fn check_part(dst: &[u8], size: (usize, usize), part: Rect) -> Result<(), TransformError> {
    rgb_len("dst_size", size)?;
    if !part.fits(size) {
        return Err(invalid(
            "part",
            format!("a part of an image of size {size:?}"),
            format!("{part:?}"),
        ));
    }
    let len = rgb_len("part", (part.height, part.width))?;
    if dst.len() != len {
        return Err(invalid(
            "dst",
            format!("{len} bytes for {}x{}x3", part.height, part.width),
            format!("{} bytes", dst.len()),
        ));
    }
    Ok(())
}

/// Whether [`separable`] computes `part` of a resize from `from` to `to` by itself: an
/// axis whose size is unchanged has no pass that could skip outputs, so `part` must span it.
pub(crate) fn part_fits(from: (usize, usize), to: (usize, usize), part: Rect) -> bool {
    (to.0 != from.0 || (part.top == 0 && part.height == to.0))
        && (to.1 != from.1 || (part.left == 0 && part.width == to.1))
}

/// `part` of the whole image `run` writes (of `size`, into the buffer it is given): in
/// place when `part` is all of it, else through a buffer of the whole.
///
/// # Errors
/// What `run` returns, or [`TransformError::OutOfMemory`].
pub(crate) fn whole_then_part(
    dst: &mut [u8],
    size: (usize, usize),
    part: Rect,
    run: impl FnOnce(&mut [u8]) -> Result<(), TransformError>,
) -> Result<(), TransformError> {
    if part == whole(size) {
        return run(dst);
    }
    let mut full = zeroed("dst_size", rgb_len("dst_size", size)?)?;
    run(&mut full)?;
    crop_rgb(&full, size, part, dst)
}

/// Checks that `src` and `dst` are non-empty RGB images of exactly their sizes.
pub(crate) fn check_buffers(
    src: &[u8],
    src_size: (usize, usize),
    dst: &[u8],
    dst_size: (usize, usize),
) -> Result<(), TransformError> {
    for (arg, buf, size, size_arg) in [
        ("src", src, src_size, "src_size"),
        ("dst", dst, dst_size, "dst_size"),
    ] {
        let len = rgb_len(size_arg, size)?;
        if buf.len() != len {
            return Err(invalid(
                arg,
                format!("{len} bytes for {}x{}x3", size.0, size.1),
                format!("{} bytes", buf.len()),
            ));
        }
    }
    Ok(())
}

/// Byte count of an RGB image of `(height, width)`, refusing empty images.
fn rgb_len(arg: &'static str, (h, w): (usize, usize)) -> Result<usize, TransformError> {
    if h == 0 || w == 0 {
        return Err(invalid(arg, "nonzero height and width", format!("({h}, {w})")));
    }
    h.checked_mul(w)
        .and_then(|n| n.checked_mul(3))
        .ok_or_else(|| TransformError::Overflow {
            arg,
            what: format!("{h}x{w}x3 bytes"),
        })
}

/// The implementation actually run, resolved from a [`Backend`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    Scalar,
    /// Only ever constructed after AVX2 was detected on this CPU.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// The AVX-512 passes, with AVX2 for the rest; only ever constructed after both were
    /// detected.
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Kernel {
    pub(crate) fn select(backend: Backend) -> Result<Kernel, TransformError> {
        let unsupported = |name| {
            invalid(
                "backend",
                "a backend this CPU supports",
                format!("{name} on this CPU"),
            )
        };
        match backend {
            Backend::Scalar => Ok(Kernel::Scalar),
            Backend::Auto => Ok(Kernel::avx512().or_else(Kernel::avx2).unwrap_or(Kernel::Scalar)),
            Backend::Avx2 => Kernel::avx2().ok_or_else(|| unsupported("Avx2")),
            Backend::Avx512 => Kernel::avx512().ok_or_else(|| unsupported("Avx512")),
        }
    }

    fn avx512() -> Option<Kernel> {
        #[cfg(target_arch = "x86_64")]
        if Kernel::avx2().is_some() && avx512::detected() {
            return Some(Kernel::Avx512);
        }
        None
    }

    fn avx2() -> Option<Kernel> {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            return Some(Kernel::Avx2);
        }
        None
    }
}

// Pillow's weight functions, with its operation order so every double rounds
// the same way.

fn box_weight(x: f64) -> f64 {
    if x > -0.5 && x <= 0.5 {
        1.0
    } else {
        0.0
    }
}

fn bilinear_weight(x: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 {
        1.0 - x
    } else {
        0.0
    }
}

fn hamming_weight(x: f64) -> f64 {
    let x = x.abs();
    if x == 0.0 {
        1.0
    } else if x >= 1.0 {
        0.0
    } else {
        let x = x * std::f64::consts::PI;
        // Pillow writes these constants as C floats, so they are widened from f32.
        x.sin() / x * (f64::from(0.54_f32) + f64::from(0.46_f32) * x.cos())
    }
}

fn bicubic_weight(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
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

fn lanczos_weight(x: f64) -> f64 {
    if (-3.0..3.0).contains(&x) {
        sinc(x) * sinc(x / 3.0)
    } else {
        0.0
    }
}

/// Fixed-point taps of one axis: output index `i` is
/// `(rounding + sum over j of taps(i).1[j] * input[taps(i).0 + j]) >> precision`,
/// saturated to `u8`, with `rounding = 2^(precision - 1)` (half up).
///
/// Pillow's taps have [`PRECISION_BITS`] fractional bits; other tables
/// (torchvision's, in [`crate::torch_resize`]) bring their own precision.
pub(crate) struct Coeffs {
    first: Vec<usize>,
    /// `offsets[i]..offsets[i + 1]` indexes the taps of output `i` in `k`.
    offsets: Vec<usize>,
    k: Vec<i32>,
    /// Fractional bits of the taps: the right shift that ends every sum.
    precision: u32,
}

impl Coeffs {
    /// A table with no outputs yet, whose taps have `precision` fractional
    /// bits (at most 30, so the rounding term is an `i32`), with room for `outputs` outputs
    /// of `taps` taps at most.
    ///
    /// # Errors
    /// [`TransformError::OutOfMemory`] naming `arg` (the size the table is for) where the
    /// allocator cannot provide that room.
    pub(crate) fn with_capacity(
        arg: &'static str,
        precision: u32,
        outputs: usize,
        taps: usize,
    ) -> Result<Coeffs, TransformError> {
        assert!(precision <= 30, "fixed-point precision {precision} > 30");
        let mut offsets = with_capacity(arg, outputs.saturating_add(1))?;
        offsets.push(0);
        Ok(Coeffs {
            first: with_capacity(arg, outputs)?,
            offsets,
            k: with_capacity(arg, outputs.saturating_mul(taps))?,
            precision,
        })
    }

    /// Appends the next output: input `first + j` weighted by `taps[j]`.
    pub(crate) fn push(&mut self, first: usize, taps: impl IntoIterator<Item = i32>) {
        self.k.extend(taps);
        self.first.push(first);
        self.offsets.push(self.k.len());
    }

    /// Starting value of every sum: half of the last unit, so the final
    /// shift rounds half up (0 for precision 0, where nothing is dropped).
    fn rounding(&self) -> i32 {
        (1 << self.precision) >> 1
    }

    /// Drops the fraction of a sum (flooring) and saturates: Pillow's `clip8`.
    fn clip8(&self, sum: i32) -> u8 {
        (sum >> self.precision).clamp(0, 255) as u8
    }

    /// Pillow's `precompute_coeffs` followed by `normalize_coeffs_8bpc`, for
    /// the whole input axis (`box` = 0..`in_size`).
    ///
    /// # Errors
    /// As [`Coeffs::with_capacity`].
    fn new(in_size: usize, out_size: usize, support: f64, weight: Weight) -> Result<Coeffs, TransformError> {
        // The box edge is a C float in Pillow, so sizes pass through f32.
        let scale = f64::from(in_size as f32) / out_size as f64;
        let filterscale = scale.max(1.0);
        let support = support * filterscale;
        let ss = 1.0 / filterscale;
        // Pillow's `ksize`: no window is wider.
        let ksize = (support.ceil() as usize).saturating_mul(2).saturating_add(1);
        let mut coeffs = Coeffs::with_capacity("dst_size", PRECISION_BITS, out_size, ksize)?;
        let mut w = Vec::new();
        for xx in 0..out_size {
            let center = (xx as f64 + 0.5) * scale;
            // `as` truncates toward zero like C's (int) cast, and saturates
            // negative values to the 0 Pillow clamps them to.
            let xmin = (center - support + 0.5) as usize;
            let xmax = ((center + support + 0.5) as usize).min(in_size);
            w.clear();
            w.extend((xmin..xmax).map(|x| weight((x as f64 - center + 0.5) * ss)));
            let ww: f64 = w.iter().fold(0.0, |acc, &v| acc + v);
            coeffs.push(
                xmin,
                w.iter().map(|&v| {
                    let v = if ww == 0.0 { v } else { v / ww };
                    let scaled = v * f64::from(1 << PRECISION_BITS);
                    if v < 0.0 {
                        (-0.5 + scaled) as i32
                    } else {
                        (0.5 + scaled) as i32
                    }
                }),
            );
        }
        Ok(coeffs)
    }

    pub(crate) fn out_len(&self) -> usize {
        self.first.len()
    }

    /// Fractional bits of the taps.
    pub(crate) fn precision(&self) -> u32 {
        self.precision
    }

    /// First input index and taps of output `i`.
    pub(crate) fn taps(&self, i: usize) -> (usize, &[i32]) {
        (self.first[i], &self.k[self.offsets[i]..self.offsets[i + 1]])
    }

    /// The table of outputs `outputs` only (output `i` of the part is output
    /// `outputs.start + i` here).
    ///
    /// # Errors
    /// As [`Coeffs::with_capacity`].
    fn part(&self, arg: &'static str, outputs: Range<usize>) -> Result<Coeffs, TransformError> {
        let taps = self.offsets[outputs.start]..self.offsets[outputs.end];
        let mut first = with_capacity(arg, outputs.len())?;
        first.extend_from_slice(&self.first[outputs.clone()]);
        let mut offsets = with_capacity(arg, outputs.len() + 1)?;
        offsets.extend(
            self.offsets[outputs.start..=outputs.end]
                .iter()
                .map(|o| o - taps.start),
        );
        let mut k = with_capacity(arg, taps.len())?;
        k.extend_from_slice(&self.k[taps]);
        Ok(Coeffs {
            first,
            offsets,
            k,
            precision: self.precision,
        })
    }

    /// Input indices read by any output; both ends are monotone in the output.
    fn input_span(&self) -> Range<usize> {
        self.inputs_of(0..self.out_len())
    }

    /// The inputs that outputs `outputs` (not empty) read: both ends of the windows grow
    /// with the output.
    pub(crate) fn inputs_of(&self, outputs: Range<usize>) -> Range<usize> {
        let (first, k) = self.taps(outputs.end - 1);
        self.taps(outputs.start).0..first + k.len()
    }
}

/// Two-pass convolution in Pillow's order: usually horizontal over only the
/// source rows the vertical pass reads, then vertical; vertical then
/// horizontal when the height shrinks much more than the width.
#[allow(clippy::too_many_arguments)]
fn convolve(
    kernel: Kernel,
    src: Source<'_>,
    paste: Option<Pad>,
    dst: &mut [u8],
    (h2, w2): (usize, usize),
    part: Rect,
    filter: Filter,
    support: f64,
    weight: Weight,
) -> Result<(), TransformError> {
    let size = paste.map_or(src.size(), |pad| pad.size);
    let make = |n: usize, n2: usize| Coeffs::new(n, n2, support, weight);
    separable(
        kernel,
        src,
        paste,
        dst,
        (h2, w2),
        part,
        Taps::Pillow(filter),
        &make,
        vertical_first(size, (h2, w2)),
    )
}

/// Whether resizes run their passes in Pillow 13's order (the default), else in the order
/// of Pillow 12 and older (see [`vertical_first`]).
static PILLOW_13_ORDER: AtomicBool = AtomicBool::new(true);

/// Runs the passes in the order of the Pillow whose major version is `major`, so that
/// resizes equal the installed Pillow's: it changed in Pillow 13.
pub fn follow_pillow(major: u32) {
    PILLOW_13_ORDER.store(major >= 13, Ordering::Relaxed);
}

/// Whether the vertical pass runs first from `(h, w)` to `(h2, w2)`: in Pillow 13, when the
/// height loses more than twice as many pixels as the width; never in Pillow 12 and older.
/// The order changes the clipped intermediate and therefore the result.
fn vertical_first((h, w): (usize, usize), (h2, w2): (usize, usize)) -> bool {
    // With d = w - w2 (maybe negative), Pillow tests h - h2 > 2 * d in int.
    PILLOW_13_ORDER.load(Ordering::Relaxed) && h > h2 && (w2 >= w || (h - h2 - 1) / 2 >= w - w2)
}

/// [`resize_source_part`]'s passes for `part` of a resize from `size` to `dst_size`, where
/// it runs the horizontal one first, then the vertical one (see [`Passes::new`]).
///
/// # Errors
/// As [`resize_rgb_with`].
pub(crate) fn convolve_passes(
    size: (usize, usize),
    dst_size: (usize, usize),
    part: Rect,
    filter: Filter,
    backend: Backend,
) -> Result<Option<Passes>, TransformError> {
    let Some((support, weight)) = filter.convolution() else {
        return Ok(None);
    };
    let make = |n: usize, n2: usize| Coeffs::new(n, n2, support, weight);
    Passes::new(
        Kernel::select(backend)?,
        Taps::Pillow(filter),
        &make,
        size,
        dst_size,
        part,
        vertical_first(size, dst_size),
    )
}

/// What a table of taps is built for, besides its two sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Taps {
    /// Pillow's filter.
    Pillow(Filter),
    /// torchvision's mode and antialiasing.
    Torch(crate::torch_resize::TorchMode, bool),
}

/// A table's key: what it was built from, its two sizes and the outputs it keeps (tables
/// are kept: building them took about 25 us of a 64x48 image's 0.3 ms through LLaVA-1.5,
/// perf on a 2-core VM).
type Key<K> = (K, Taps, usize, usize, (usize, usize));

static HORIZONTAL_TABLES: Cache<Key<Kernel>, Horizontal> = Mutex::new(Vec::new());
static VERTICAL_TABLES: Cache<Key<()>, Coeffs> = Mutex::new(Vec::new());

/// A resize's horizontal and vertical tables, where it has those passes.
type Tables = (Option<Arc<Horizontal>>, Option<Arc<Coeffs>>);

/// The tables of [`separable`]'s passes from `(h, w)` computing `part` of the
/// `(full_h, full_w)` resize, from the cache or made by `make`: the horizontal one (none
/// where the width is kept) and the vertical one (none where the height is kept).
fn tables(
    kernel: Kernel,
    taps: Taps,
    make: &dyn Fn(usize, usize) -> Result<Coeffs, TransformError>,
    (h, w): (usize, usize),
    (full_h, full_w): (usize, usize),
    part: Rect,
) -> Result<Tables, TransformError> {
    let (rows, cols) = (
        part.top..part.top + part.height,
        part.left..part.left + part.width,
    );
    let horizontal = (full_w != w)
        .then(|| {
            let key = (kernel, taps, w, full_w, (cols.start, cols.end));
            cached(&HORIZONTAL_TABLES, key, || {
                Ok(Horizontal::new(
                    kernel,
                    make(w, full_w)?.part("dst_size", cols.clone())?,
                ))
            })
        })
        .transpose()?;
    let vertical = (full_h != h)
        .then(|| {
            let key = ((), taps, h, full_h, (rows.start, rows.end));
            cached(&VERTICAL_TABLES, key, || {
                make(h, full_h)?.part("dst_size", rows.clone())
            })
        })
        .transpose()?;
    Ok((horizontal, vertical))
}

/// A resize that [`separable`] runs as a horizontal pass, then a vertical one: what
/// [`resize_together`] takes of each resize it runs.
pub(crate) struct Passes {
    kernel: Kernel,
    /// The source's (height, width).
    size: (usize, usize),
    horizontal: Arc<Horizontal>,
    vertical: Arc<Coeffs>,
}

impl Passes {
    /// [`separable`]'s passes from an image of `size` computing `part` of the `full`
    /// resize, where both run, the horizontal one first, and `part` is one they compute
    /// (see [`part_fits`]); `None` for any other resize or part.
    ///
    /// # Errors
    /// What `make` returns.
    pub(crate) fn new(
        kernel: Kernel,
        taps: Taps,
        make: &dyn Fn(usize, usize) -> Result<Coeffs, TransformError>,
        size: (usize, usize),
        full: (usize, usize),
        part: Rect,
        vertical_first: bool,
    ) -> Result<Option<Passes>, TransformError> {
        if vertical_first || size.0 == full.0 || size.1 == full.1 || !part.fits(full) {
            return Ok(None);
        }
        let (horizontal, vertical) = tables(kernel, taps, make, size, full, part)?;
        Ok(horizontal.zip(vertical).map(|(horizontal, vertical)| Passes {
            kernel,
            size,
            horizontal,
            vertical,
        }))
    }

    /// Bytes of an output row.
    fn stride(&self) -> usize {
        self.horizontal.coeffs().out_len() * 3
    }
}

/// Runs each of `resizes` (its passes and its output, which holds exactly its part) on
/// `src`, each source row read from memory once for all of them: eight rows at a time,
/// resampled by each horizontal pass into its band. Grayscale rows where some horizontal
/// pass does not read them in place, and RGBX rows where some would pack them, are packed
/// to RGB once into a buffer that stays in cache, the next eight fetched into L2 by the
/// first pass while it reads these. (Llama 4's two resizes of a 12 MP PIL image took
/// 10.75-10.81 ms through its processor at two to sixteen rows at a time, on a 2-vCPU Zen 4
/// EPYC; 11.56 ms packed without that fetch.)
///
/// On one thread, each vertical pass reads its band back a strip of output rows at a time,
/// while the rows are still in L2 (as [`horizontal_then_vertical`] does for one resize); a
/// team takes the horizontal passes in bands of source rows, then each vertical pass in
/// bands of its output rows.
///
/// # Errors
/// An output of another length than its part, passes built for another size than `src`'s,
/// or [`TransformError::OutOfMemory`] when a band cannot be allocated.
pub(crate) fn resize_together(
    src: Source<'_>,
    resizes: &mut [(Passes, &mut [u8])],
) -> Result<(), TransformError> {
    let (h, w) = src.size();
    for (passes, dst) in resizes.iter() {
        let len = passes.vertical.out_len() * passes.stride();
        if (dst.len(), passes.size) != (len, (h, w)) {
            return Err(invalid(
                "resizes",
                format!("outputs of {len} bytes from {:?} pixels", passes.size),
                format!("{} bytes from {:?}", dst.len(), (h, w)),
            ));
        }
    }
    let spans: Vec<Range<usize>> = resizes.iter().map(|(p, _)| p.vertical.input_span()).collect();
    let mut bands = Vec::with_capacity(resizes.len());
    for ((passes, _), span) in resizes.iter().zip(&spans) {
        bands.push(scratch(
            "dst_size",
            checked_len("dst_size", &[span.len(), passes.stride()])?,
        )?);
    }
    let (passes, mut dsts): (Vec<&Passes>, Vec<&mut [u8]>) =
        resizes.iter_mut().map(|(p, d)| (&*p, &mut **d)).unzip();
    let rows =
        spans.iter().map(|s| s.start).min().unwrap_or(0)..spans.iter().map(|s| s.end).max().unwrap_or(0);
    let members = workers::team_size();
    if members == 1 {
        // The fewest output rows each vertical pass runs at once (those that add about
        // `STRIP_BYTES` of band rows), and those it has written.
        let strips: Vec<usize> = passes
            .iter()
            .zip(&bands)
            .map(|(p, band)| (STRIP_BYTES * p.vertical.out_len() / band.len()).max(1))
            .collect();
        let mut written = vec![0; passes.len()];
        let mut slices: Vec<&mut [u8]> = bands.iter_mut().map(|b| &mut b[..]).collect();
        horizontal_together(
            src,
            &passes,
            &spans,
            rows.clone(),
            &mut slices,
            |i, bands, end| {
                // The output rows whose inputs are all resampled, once a strip's worth (all
                // that are left after the last rows).
                let (p, dst) = (passes[i], &mut *dsts[i]);
                let (vertical, stride) = (&p.vertical, p.stride());
                let mut ready = written[i];
                while ready < vertical.out_len() && vertical.inputs_of(ready..ready + 1).end <= end {
                    ready += 1;
                }
                if ready - written[i] >= strips[i] || (ready > written[i] && end == rows.end) {
                    let out = &mut dst[written[i] * stride..ready * stride];
                    let band = &bands[i][..];
                    vertical_rows(
                        p.kernel,
                        band,
                        spans[i].start,
                        stride,
                        vertical,
                        written[i]..ready,
                        out,
                    );
                    written[i] = ready;
                }
            },
        );
    } else {
        // Bands of source rows as `by_bands` cuts them, each resize's band cut alike.
        let band = band_len(rows.len(), MIN_BAND);
        let starts: Vec<usize> = rows.clone().step_by(band).collect();
        let mut parts: Vec<Vec<&mut [u8]>> = starts.iter().map(|_| Vec::new()).collect();
        for ((p, span), mut rest) in passes
            .iter()
            .zip(&spans)
            .zip(bands.iter_mut().map(|b| &mut b[..]))
        {
            for (k, &start) in starts.iter().enumerate() {
                let inside = start.max(span.start)..(start + band).min(rows.end).min(span.end);
                let (part, tail) = std::mem::take(&mut rest).split_at_mut(inside.len() * p.stride());
                parts[k].push(part);
                rest = tail;
            }
        }
        let parts: Vec<Mutex<Vec<&mut [u8]>>> = parts.into_iter().map(Mutex::new).collect();
        workers::bands(starts.len(), &|k| {
            let mut slices = parts[k].lock().unwrap_or_else(PoisonError::into_inner);
            let band_rows = starts[k]..(starts[k] + band).min(rows.end);
            horizontal_together(src, &passes, &spans, band_rows, &mut slices, |_, _, _| {});
        });
        for ((p, dst), (resampled, span)) in passes.iter().zip(dsts.iter_mut()).zip(bands.iter().zip(&spans))
        {
            let (vertical, stride) = (&p.vertical, p.stride());
            by_bands(0..vertical.out_len(), dst, stride, MIN_BAND, |out_rows, chunk| {
                vertical_rows(p.kernel, resampled, span.start, stride, vertical, out_rows, chunk);
            });
        }
    }
    for band in bands {
        recycle(Buffer::U8(band));
    }
    Ok(())
}

/// The horizontal passes of [`resize_together`] over source rows `rows` of `src`: eight at a
/// time, packed once where they must be, each resampled by every pass in `passes` whose
/// vertical pass reads it (its `spans`) into `bands` (each holding that pass's rows of
/// `rows` in its span, in order), then `after(i, bands, end)` for each pass `i` once the
/// rows before `end` are resampled.
fn horizontal_together(
    src: Source<'_>,
    passes: &[&Passes],
    spans: &[Range<usize>],
    rows: Range<usize>,
    bands: &mut [&mut [u8]],
    mut after: impl FnMut(usize, &[&mut [u8]], usize),
) {
    const ROWS: usize = 8;
    let w = src.size().1;
    let pack = passes.iter().any(|p| p.horizontal.packs(src.channels()));
    let part = |top: usize, bottom: usize| Rect {
        top,
        left: 0,
        height: bottom - top,
        width: w,
    };
    let mut packed = Vec::new();
    for start in rows.clone().step_by(ROWS) {
        let end = (start + ROWS).min(rows.end);
        // The rows the passes read, the row of `src` they start at, and the rows to fetch.
        let (mut chunk, mut base, mut ahead) = (src, 0, None);
        if pack {
            packed.resize((end - start) * w * 3, 0);
            src.write_rgb_part(part(start, end), &mut packed);
            chunk = Source::packed(&packed, 3, (end - start, w)).expect("the buffer holds the packed rows");
            base = start;
            if end < rows.end {
                ahead = src.crop(part(end, (end + ROWS).min(rows.end))).ok();
            }
        }
        let mut first_pass = Some(Source {
            ahead: ahead.as_ref(),
            ..chunk
        });
        for (i, (p, span)) in passes.iter().zip(spans).enumerate() {
            let stride = p.stride();
            // This pass's rows of `rows` start at `from` in its band.
            let from = rows.start.max(span.start);
            let inside = start.max(span.start)..end.min(span.end);
            if !inside.is_empty() {
                let out = &mut bands[i][(inside.start - from) * stride..(inside.end - from) * stride];
                let rows = first_pass.take().unwrap_or(chunk);
                p.horizontal
                    .run(&rows, inside.start - base..inside.end - base, out);
            }
            after(i, bands, end);
        }
    }
}

/// Runs two separable passes from `src` into `dst`, `part` of the `(h2, w2)` resize,
/// each with the table `make(in, out)` builds for its axis (kept for later resizes of the
/// same sizes, part and `taps`); an axis whose size is unchanged is skipped (both: a copy
/// of `src`), and `part` must then span it.
///
/// Every output pixel depends only on its own taps, so `part` holds the bytes the whole
/// resize has there: a centre crop of the result costs only its own pixels.
/// The horizontal pass runs first unless `vertical_first`; it then covers
/// only the source rows the vertical pass reads, which changes no byte. It reads RGB and
/// RGBX rows in place, and so does a vertical first pass followed by a horizontal one
/// (RGBX rows when they lie in one memory run); any other first pass reads `src` packed to
/// RGB first.
///
/// With `paste`, the resize reads `src` pasted on that canvas (a pad before the resize). A
/// first horizontal pass then reads the canvas a few rows at a time, written into a buffer
/// that stays in cache, so that the canvas is never written whole (a 12 MP image padded to a
/// square: 49 MB); any other first pass reads the whole canvas, written first.
///
/// # Errors
/// What `make` returns, [`TransformError::OutOfMemory`] when a buffer cannot be
/// allocated, or `src` outside the canvas.
#[allow(clippy::too_many_arguments)]
pub(crate) fn separable(
    kernel: Kernel,
    src: Source<'_>,
    paste: Option<Pad>,
    dst: &mut [u8],
    (full_h, full_w): (usize, usize),
    part: Rect,
    taps: Taps,
    make: &dyn Fn(usize, usize) -> Result<Coeffs, TransformError>,
    vertical_first: bool,
) -> Result<(), TransformError> {
    if let Some(pad) = paste {
        pad.check(src.size())?;
    }
    let (h, w) = paste.map_or(src.size(), |pad| pad.size);
    let (rows, cols) = (
        part.top..part.top + part.height,
        part.left..part.left + part.width,
    );
    debug_assert!(rows.end <= full_h && cols.end <= full_w);
    debug_assert!((full_w != w || cols == (0..w)) && (full_h != h || rows == (0..h)));
    let (h2, w2) = (rows.len(), cols.len());
    let (horizontal, vertical) = tables(kernel, taps, make, (h, w), (full_h, full_w), part)?;
    let horizontal_first = horizontal.is_some() && !(vertical.is_some() && vertical_first);
    if paste.is_some() && !horizontal_first {
        return on_canvas(src, paste, |canvas| {
            separable(
                kernel,
                canvas,
                None,
                dst,
                (full_h, full_w),
                part,
                taps,
                make,
                vertical_first,
            )
        });
    }
    // A vertical first pass over RGBX rows in one memory run reads them where they are: it
    // resamples all four bytes of a pixel alike, and the horizontal pass after it never
    // reads the fourth.
    let rgbx = (!horizontal_first && horizontal.is_some() && src.channels() == 4)
        .then(|| src.run_of(0..h))
        .flatten();
    let vertical_only = horizontal.is_none() && vertical.is_some();
    // A pasted image is read row by row into its bands, whatever its layout.
    // The horizontal pass reads RGB and RGBX rows, and grey ones where it does not pack them.
    let reads_src = src.channels() != 1 || horizontal.as_deref().is_some_and(|plan| !plan.packs(1));
    let packed = if (horizontal_first && (reads_src || paste.is_some())) || rgbx.is_some() || vertical_only {
        None
    } else {
        Some(src.to_rgb()?)
    };
    let src = match &packed {
        Some(packed) => Source::packed(packed, 3, (h, w))?,
        None => src,
    };
    let rgb = || src.as_rgb().expect("packed above");
    let vertical_pass = |coeffs: &Coeffs, band: &[u8], band_first: usize, stride: usize, out: &mut [u8]| {
        by_bands(0..coeffs.out_len(), out, stride, MIN_BAND, |rows, chunk| {
            vertical_rows(kernel, band, band_first, stride, coeffs, rows, chunk);
        });
    };
    let horizontal_pass = |plan: &Horizontal, src: &Source<'_>, rows: Range<usize>, out: &mut [u8]| {
        by_bands(rows, out, w2 * 3, MIN_BAND, |rows, chunk| match paste {
            Some(pad) => pasted_rows(plan, src, pad, rows, chunk),
            None => plan.run(src, rows, chunk),
        });
    };
    match (horizontal.as_deref(), vertical.as_deref()) {
        (None, None) => dst.copy_from_slice(rgb()),
        // No horizontal pass: the vertical one reads packed RGB rows where they are.
        (None, Some(vertical)) => match src.as_rgb() {
            Some(rgb) => vertical_pass(vertical, rgb, 0, w * 3, dst),
            None => by_bands(0..vertical.out_len(), dst, w * 3, MIN_BAND, |rows, chunk| {
                vertical_from_rows(kernel, &src, vertical, rows, chunk);
            }),
        },
        (Some(plan), None) => horizontal_pass(plan, &src, 0..h, dst),
        (Some(plan), Some(vertical)) if vertical_first => {
            let (pixels, c) = rgbx.map_or_else(|| (rgb(), 3), |rgbx| (rgbx, 4));
            // Every band byte is written by the first pass before the second reads it.
            let mut band = scratch("dst_size", h2 * w * c)?;
            vertical_pass(vertical, pixels, 0, w * c, &mut band);
            horizontal_pass(plan, &Source::packed(&band, c, (h2, w))?, 0..h2, dst);
            recycle(Buffer::U8(band));
        }
        (Some(plan), Some(vertical)) => {
            horizontal_then_vertical(kernel, vertical, w2 * 3, dst, |rows, out| {
                horizontal_pass(plan, &src, rows, out);
            })?;
        }
    }
    // (An error above drops the copy instead.)
    packed.into_iter().for_each(recycle_rgb);
    Ok(())
}

/// The horizontal pass (`horizontal`, of source rows into rows of `stride` bytes) of the
/// band of rows the `vertical` pass reads, then that pass, into `dst`.
///
/// On one thread, a band larger than L2 is written and read a strip of output rows at a
/// time, the band rows each strip adds resampled just before it, so that the vertical pass
/// reads them back from cache, not memory. A team takes each pass whole, in bands: strips
/// would hand out twice as many, each smaller (LLaVA-1.5 and Aya Vision at 12 MP on two
/// threads took 1.10x as long in strips).
///
/// # Errors
/// [`TransformError::OutOfMemory`] when the band cannot be allocated.
fn horizontal_then_vertical(
    kernel: Kernel,
    vertical: &Coeffs,
    stride: usize,
    dst: &mut [u8],
    horizontal: impl Fn(Range<usize>, &mut [u8]),
) -> Result<(), TransformError> {
    let band_rows = vertical.input_span();
    let mut band = scratch("dst_size", band_rows.len() * stride)?;
    let band_first = band_rows.start;
    let out_len = vertical.out_len();
    let strip = if workers::team_size() == 1 && band.len() > 4 * STRIP_BYTES {
        STRIP_BYTES * out_len / band.len()
    } else {
        out_len
    }
    .max(1);
    let mut done = band_first;
    for (first, out) in (0..out_len).step_by(strip).zip(dst.chunks_mut(strip * stride)) {
        let rows = first..first + out.len() / stride;
        let end = vertical.inputs_of(rows.clone()).end;
        horizontal(
            done..end,
            &mut band[(done - band_first) * stride..(end - band_first) * stride],
        );
        done = end;
        by_bands(rows, out, stride, MIN_BAND, |rows, chunk| {
            vertical_rows(kernel, &band, band_first, stride, vertical, rows, chunk);
        });
    }
    recycle(Buffer::U8(band));
    Ok(())
}

/// [`Horizontal::run`] of canvas rows `rows` of `src` pasted as `pad` says: a few rows at a
/// time, written packed into a buffer that stays in cache, then resampled; rows of an RGB
/// or RGBX image as wide as the canvas are read where they are.
fn pasted_rows(plan: &Horizontal, src: &Source<'_>, pad: Pad, rows: Range<usize>, out: &mut [u8]) {
    const ROWS: usize = 8;
    if rows.is_empty() {
        return;
    }
    let ((h, w), top) = (src.size(), pad.at.0);
    let in_place = w == pad.size.1 && matches!(src.channels(), 3 | 4);
    let row_out = out.len() / rows.len();
    let mut band = Vec::new();
    for (first, chunk) in rows.step_by(ROWS).zip(out.chunks_mut(ROWS * row_out)) {
        let n = chunk.len() / row_out;
        if in_place && first >= top && first + n <= top + h {
            plan.run(src, first - top..first - top + n, chunk);
            continue;
        }
        band.resize(n * pad.size.1 * 3, 0);
        pad.write_rows(*src, first..first + n, &mut band);
        let packed = Source::packed(&band, 3, (n, pad.size.1)).expect("the band holds n canvas rows");
        plan.run(&packed, 0..n, chunk);
    }
}

/// The vertical pass of output rows `rows` into `out` from RGBX or grayscale rows: a few
/// output rows at a time, the source rows they read packed to RGB into a band that stays in
/// cache. (Packing a whole 1920x1080 Pillow image first took 1 ms of a 7-10 ms Qwen3-VL call:
/// 8 MB read and 6 MB written to memory, then read again.)
fn vertical_from_rows(kernel: Kernel, src: &Source<'_>, coeffs: &Coeffs, rows: Range<usize>, out: &mut [u8]) {
    const ROWS: usize = 32;
    let width = src.size().1;
    let stride = width * 3;
    let mut band = Vec::new();
    for (start, out) in rows.clone().step_by(ROWS).zip(out.chunks_mut(ROWS * stride)) {
        let rows = start..(start + ROWS).min(rows.end);
        let span = coeffs.inputs_of(rows.clone());
        band.resize(span.len() * stride, 0);
        let part = Rect {
            top: span.start,
            left: 0,
            height: span.len(),
            width,
        };
        src.write_rgb_part(part, &mut band);
        vertical_rows(kernel, &band, span.start, stride, coeffs, rows, out);
    }
}

/// Rows of a resize pass below which a band costs more to hand out than to compute.
pub(crate) const MIN_BAND: usize = 32;

/// Bytes of horizontally resampled rows a strip of the vertical pass adds, to be read back
/// while they are still in L2.
const STRIP_BYTES: usize = 256 << 10;

/// Runs `pass(rows, out_rows)` over the output `rows` (`row_len` values each), split
/// into bands of at least `min_band` rows that the members of the calling thread's team
/// take (see [`crate::workers::bands`]), or in one go outside a team.
///
/// Every output row depends only on its own inputs, so the split changes no byte.
pub(crate) fn by_bands<T: Send>(
    rows: Range<usize>,
    out: &mut [T],
    row_len: usize,
    min_band: usize,
    pass: impl Fn(Range<usize>, &mut [T]) + Sync,
) {
    let members = workers::team_size();
    if members == 1 || rows.len() < 2 * min_band {
        pass(rows, out);
        return;
    }
    let band = band_len(rows.len(), min_band);
    // One lock per band, each taken once, by the thread that runs it.
    let chunks: Vec<Mutex<&mut [T]>> = out.chunks_mut(band * row_len).map(Mutex::new).collect();
    workers::bands(chunks.len(), &|i| {
        let mut chunk = chunks[i].lock().unwrap_or_else(PoisonError::into_inner);
        let start = rows.start + i * band;
        pass(start..start + chunk.len() / row_len, &mut chunk);
    });
}

/// Rows of each band the members of the calling thread's team take of a pass over `rows`
/// rows: about four bands a member, of at least `min_band` rows.
pub(crate) fn band_len(rows: usize, min_band: usize) -> usize {
    rows.div_ceil(4 * workers::team_size()).max(min_band)
}

/// The horizontal pass, prepared once per resize for one kernel.
enum Horizontal {
    Scalar(Coeffs),
    #[cfg(target_arch = "x86_64")]
    Avx2(avx2::Horizontal),
    #[cfg(target_arch = "x86_64")]
    Avx512(avx512::Horizontal),
}

impl Horizontal {
    fn new(kernel: Kernel, coeffs: Coeffs) -> Horizontal {
        // The vector passes take taps that split into an i16 and an 11-bit part.
        #[cfg(target_arch = "x86_64")]
        let splits = coeffs.k.iter().all(|&k| avx2::splits(k));
        match kernel {
            // SAFETY: Kernel::Avx2 exists only once AVX2 was detected.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 if splits => Horizontal::Avx2(unsafe { avx2::Horizontal::new(coeffs) }),
            // SAFETY: Kernel::Avx512 exists only once AVX-512 was detected.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 if splits => Horizontal::Avx512(unsafe { avx512::Horizontal::new(coeffs) }),
            _ => Horizontal::Scalar(coeffs),
        }
    }

    /// Whether [`Horizontal::run`] needs `channels`-byte rows packed to RGB first (RGBX
    /// rows: where it would pack them a row at a time; grey rows: unless the AVX-512
    /// planar or eight-taps-a-lane blocks read them where they are).
    fn packs(&self, channels: usize) -> bool {
        match (self, channels) {
            (_, 3) => false,
            #[cfg(target_arch = "x86_64")]
            (Horizontal::Avx512(plan), c) => plan.packs(c),
            (_, c) => c == 1,
        }
    }

    /// The taps.
    fn coeffs(&self) -> &Coeffs {
        match self {
            Horizontal::Scalar(coeffs) => coeffs,
            #[cfg(target_arch = "x86_64")]
            Horizontal::Avx2(plan) => &plan.coeffs,
            #[cfg(target_arch = "x86_64")]
            Horizontal::Avx512(plan) => &plan.coeffs,
        }
    }

    /// Resamples source rows `rows` of `src` (RGB, RGBX, or grey where it does not
    /// [`Horizontal::packs`] them) into `out`, which holds exactly `rows.len()` output
    /// rows of packed RGB.
    fn run(&self, src: &Source<'_>, rows: Range<usize>, out: &mut [u8]) {
        debug_assert!(matches!(src.channels(), 3 | 4) || !self.packs(src.channels()));
        match self {
            Horizontal::Scalar(coeffs) => {
                let out_stride = coeffs.out_len() * 3;
                let c = src.channels();
                for (y, out_row) in rows.zip(out.chunks_exact_mut(out_stride)) {
                    let row = src.row(y);
                    for (x, px) in out_row.chunks_exact_mut(3).enumerate() {
                        let (first, k) = coeffs.taps(x);
                        px.copy_from_slice(&horizontal_pixel(&row[first * c..], c, k, coeffs));
                    }
                }
            }
            #[cfg(target_arch = "x86_64")]
            // SAFETY: this variant is built only by `Kernel::Avx2`, i.e. with AVX2.
            Horizontal::Avx2(plan) => unsafe { plan.run(src, rows, out) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: this variant is built only by `Kernel::Avx512`, i.e. with AVX-512.
            Horizontal::Avx512(plan) => unsafe { plan.run(src, rows, out) },
        }
    }
}

/// One output pixel of the horizontal pass with taps `k` of `coeffs`; `row`
/// starts at the first tap, `channels` (3 or 4) bytes a pixel.
fn horizontal_pixel(row: &[u8], channels: usize, k: &[i32], coeffs: &Coeffs) -> [u8; 3] {
    let mut sum = [coeffs.rounding(); 3];
    for (px, &k) in row.chunks_exact(channels).zip(k) {
        for (s, &p) in sum.iter_mut().zip(px) {
            // Wrapping like Pillow's C ints, so every backend agrees even on
            // pathological taps.
            *s = s.wrapping_add(i32::from(p).wrapping_mul(k));
        }
    }
    sum.map(|s| coeffs.clip8(s))
}

/// The integer vector operations of the SIMD vertical pass, on AVX2 (`__m256i`) and
/// AVX-512 (`__m512i`) registers, so that one [`vertical_blocks`] serves both.
///
/// # Safety
/// Every method needs its register's CPU features: AVX2, or AVX-512F and BW.
#[cfg(target_arch = "x86_64")]
trait Lanes: Copy {
    /// Bytes a register holds.
    const BYTES: usize;
    unsafe fn splat(v: i32) -> Self;
    unsafe fn load(at: *const u8) -> Self;
    unsafe fn store(self, at: *mut u8);
    /// Bytes interleaved with `b`'s, low then high half of each 128-bit lane.
    unsafe fn unpack8(self, b: Self) -> (Self, Self);
    unsafe fn madd16(self, k: Self) -> Self;
    /// `self` plus [`Lanes::madd16`] of `a` and `k`, wrapping.
    unsafe fn dot16(self, a: Self, k: Self) -> Self;
    unsafe fn add32(self, b: Self) -> Self;
    /// Shifted left by the low half of split taps.
    unsafe fn shl_lo(self) -> Self;
    unsafe fn sra32(self, shift: std::arch::x86_64::__m128i) -> Self;
    /// Four registers of `i32` packed to bytes with saturation, within each 128-bit lane.
    unsafe fn pack(s: [Self; 4]) -> Self;
    /// [`Lanes::pack`] with the bytes in the order of the four registers' values, the
    /// first register's first.
    unsafe fn pack_in_order(s: [Self; 4]) -> Self;
}

/// Implements [`Lanes`] for a register type with the intrinsics of its width.
#[cfg(target_arch = "x86_64")]
macro_rules! lanes {
    ($v:ty, $features:literal, $bytes:literal, $splat:ident, $load:ident, $store:ident,
     $lo:ident, $hi:ident, $madd:ident, |$acc:ident, $a:ident, $k:ident| $dot:expr, $add:ident, $slli:ident, $sra:ident, $packs:ident,
     $packus:ident, $packed:ident => $in_order:expr) => {
        impl Lanes for $v {
            const BYTES: usize = $bytes;
            #[target_feature(enable = $features)]
            unsafe fn splat(v: i32) -> Self {
                std::arch::x86_64::$splat(v)
            }
            #[target_feature(enable = $features)]
            unsafe fn load(at: *const u8) -> Self {
                // SAFETY: the caller guarantees the bytes are readable.
                unsafe { std::arch::x86_64::$load(at.cast()) }
            }
            #[target_feature(enable = $features)]
            unsafe fn store(self, at: *mut u8) {
                // SAFETY: the caller guarantees the bytes are writable.
                unsafe { std::arch::x86_64::$store(at.cast(), self) }
            }
            #[target_feature(enable = $features)]
            unsafe fn unpack8(self, b: Self) -> (Self, Self) {
                (
                    std::arch::x86_64::$lo(self, b),
                    std::arch::x86_64::$hi(self, b),
                )
            }
            #[target_feature(enable = $features)]
            unsafe fn madd16(self, k: Self) -> Self {
                std::arch::x86_64::$madd(self, k)
            }
            #[target_feature(enable = $features)]
            unsafe fn dot16(self, $a: Self, $k: Self) -> Self {
                let $acc = self;
                $dot
            }
            #[target_feature(enable = $features)]
            unsafe fn add32(self, b: Self) -> Self {
                std::arch::x86_64::$add(self, b)
            }
            #[target_feature(enable = $features)]
            unsafe fn shl_lo(self) -> Self {
                std::arch::x86_64::$slli::<{ avx2::LO_BITS as _ }>(self)
            }
            #[target_feature(enable = $features)]
            unsafe fn sra32(self, shift: std::arch::x86_64::__m128i) -> Self {
                std::arch::x86_64::$sra(self, shift)
            }
            #[target_feature(enable = $features)]
            unsafe fn pack([a, b, c, d]: [Self; 4]) -> Self {
                use std::arch::x86_64::{$packs, $packus};
                $packus($packs(a, b), $packs(c, d))
            }
            #[target_feature(enable = $features)]
            unsafe fn pack_in_order(s: [Self; 4]) -> Self {
                // Dword `j` of lane `l` holds register `j`'s values of lane `l`.
                // SAFETY: the caller guarantees the CPU features.
                let $packed = unsafe { Self::pack(s) };
                $in_order
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
lanes!(
    std::arch::x86_64::__m256i,
    "avx2",
    32,
    _mm256_set1_epi32,
    _mm256_loadu_si256,
    _mm256_storeu_si256,
    _mm256_unpacklo_epi8,
    _mm256_unpackhi_epi8,
    _mm256_madd_epi16,
    |acc, a, k| std::arch::x86_64::_mm256_add_epi32(acc, std::arch::x86_64::_mm256_madd_epi16(a, k)),
    _mm256_add_epi32,
    _mm256_slli_epi32,
    _mm256_sra_epi32,
    _mm256_packs_epi32,
    _mm256_packus_epi16,
    v => std::arch::x86_64::_mm256_permutevar8x32_epi32(v, std::arch::x86_64::_mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
);
#[cfg(target_arch = "x86_64")]
lanes!(
    std::arch::x86_64::__m512i,
    "avx512f,avx512bw,avx512vnni",
    64,
    _mm512_set1_epi32,
    _mm512_loadu_si512,
    _mm512_storeu_si512,
    _mm512_unpacklo_epi8,
    _mm512_unpackhi_epi8,
    _mm512_madd_epi16,
    |acc, a, k| std::arch::x86_64::_mm512_dpwssd_epi32(acc, a, k),
    _mm512_add_epi32,
    _mm512_slli_epi32,
    _mm512_sra_epi32,
    _mm512_packs_epi32,
    _mm512_packus_epi16,
    v => std::arch::x86_64::_mm512_permutexvar_epi32(
        std::arch::x86_64::_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
        v
    )
);

/// The SIMD vertical pass on registers `V`, `V::BYTES` bytes of a row at a time: for each
/// output row of `rows`, its taps as pairs of band rows (see [`avx2::row_pairs`]), each
/// pair's bytes interleaved to 16-bit (a, b) pairs that `madd` multiplies by the two taps.
/// The last block of a row overlaps the one before instead of falling back to scalar code
/// (it rewrites identical bytes). Rows narrower than a register, or whose taps do not split,
/// run the scalar row.
///
/// # Safety
/// The CPU must support `V`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::inline_always)] // Inlined into each SIMD caller, so `V`'s methods inline here.
unsafe fn vertical_blocks<V: Lanes>(
    band: &[u8],
    band_first: usize,
    stride: usize,
    coeffs: &Coeffs,
    rows: Range<usize>,
    out: &mut [u8],
) {
    // SAFETY (every block below): the caller guarantees the CPU features; `at + V::BYTES`
    // bytes lie inside each band row and `out_row`, all `stride` bytes long.
    unsafe {
        let rounding = V::splat(coeffs.rounding());
        // A register shift count: each table has its own precision.
        let shift = std::arch::x86_64::_mm_cvtsi32_si128(coeffs.precision() as i32);
        let zero = V::splat(0);
        let mut acc = Vec::new();
        let mut pairs: Vec<(&[u8], &[u8], V, V)> = Vec::new();
        for (y, out_row) in rows.zip(out.chunks_exact_mut(stride)) {
            let (first, k) = coeffs.taps(y);
            let first = first - band_first;
            if stride < V::BYTES || !k.iter().all(|&k| avx2::splits(k)) {
                acc.resize(stride, 0);
                vertical_row(band, stride, first, k, coeffs, &mut acc, out_row);
                continue;
            }
            let is_split = !avx2::whole(k);
            pairs.clear();
            pairs.extend(avx2::row_pairs(first, k).map(|(a, b, kh, kl)| {
                let (a, b) = (
                    &band[a * stride..(a + 1) * stride],
                    &band[b * stride..(b + 1) * stride],
                );
                (a, b, V::splat(kh), V::splat(kl))
            }));
            let mut x = 0;
            loop {
                let at = x.min(stride - V::BYTES);
                let mut hi = [zero; 4];
                let mut lo = [zero; 4];
                for &(ra, rb, kh, kl) in &pairs {
                    let (a, b) = (V::load(ra.as_ptr().add(at)), V::load(rb.as_ptr().add(at)));
                    // 16-bit (a, b) pairs of bytes 0-3, 4-7, 8-11 and 12-15 of each lane.
                    let (ab_lo, ab_hi) = a.unpack8(b);
                    let (q0, q1) = ab_lo.unpack8(zero);
                    let (q2, q3) = ab_hi.unpack8(zero);
                    for ((h, l), q) in hi.iter_mut().zip(&mut lo).zip([q0, q1, q2, q3]) {
                        *h = h.add32(q.madd16(kh));
                        if is_split {
                            *l = l.add32(q.madd16(kl));
                        }
                    }
                }
                // Whole taps: the sum is `hi` alone.
                let sums = [0, 1, 2, 3].map(|i| {
                    let sum = if is_split {
                        hi[i].shl_lo().add32(lo[i])
                    } else {
                        hi[i]
                    };
                    sum.add32(rounding).sra32(shift)
                });
                // Lane-wise packing undoes the lane-wise unpacking: the bytes come out in order.
                V::pack(sums).store(out_row.as_mut_ptr().add(at));
                if at + V::BYTES == stride {
                    break;
                }
                x += V::BYTES;
            }
        }
    }
}

/// The vertical pass of an enlarging table whose taps need the split (Pillow's), on
/// registers `V`: each band row (`band`, the first being row `band_first`) is interleaved
/// once with the next as 16-bit pairs, as each is read for several output rows, so every
/// two taps of an output take one multiply-add per split half (see [`avx2::row_pairs`])
/// without the unpacking [`vertical_blocks`] repeats per output row. The sums are the
/// scalar loop's wrapping `i32` sums.
///
/// # Safety
/// The CPU must support `V`'s features, rows of `stride` bytes must be at least `V::BYTES`,
/// and `band` must hold every row the taps of `rows` read.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::inline_always)] // Inlined into each SIMD caller, so `V`'s methods inline here.
unsafe fn vertical_rows_wide<V: Lanes>(
    band: &[u8],
    band_first: usize,
    stride: usize,
    coeffs: &Coeffs,
    rows: Range<usize>,
    out: &mut [u8],
) {
    // Pair row r: (row r, row r + 1) byte by byte; the last row pairs with zeros, which
    // only an odd last tap (whose partner tap is zero) reads.
    let zeros = vec![0; stride];
    let mut pairs = vec![0i16; band.len() * 2];
    for (r, line) in pairs.chunks_exact_mut(2 * stride).enumerate() {
        let next = band.get((r + 1) * stride..(r + 2) * stride).unwrap_or(&zeros);
        let row = band[r * stride..].iter().zip(next);
        for (pair, (&a, &b)) in line.chunks_exact_mut(2).zip(row) {
            pair.copy_from_slice(&[a.into(), b.into()]);
        }
    }
    let mut taps: Vec<(usize, V, V)> = Vec::new();
    // SAFETY (every block below): the caller guarantees the CPU features; `at + V::BYTES`
    // pairs lie inside each pair row (`2 * stride` values) and bytes inside `out_row`.
    unsafe {
        let rounding = V::splat(coeffs.rounding());
        let zero = V::splat(0);
        let shift = std::arch::x86_64::_mm_cvtsi32_si128(coeffs.precision() as i32);
        for (y, out_row) in rows.zip(out.chunks_exact_mut(stride)) {
            let (first, k) = coeffs.taps(y);
            taps.clear();
            taps.extend(
                avx2::row_pairs(first - band_first, k)
                    .map(|(a, _, kh, kl)| (a * 2 * stride, V::splat(kh), V::splat(kl))),
            );
            let mut x = 0;
            loop {
                // The last block overlaps the previous one; it rewrites identical bytes.
                let at = x.min(stride - V::BYTES);
                let mut hi = [zero; 4];
                let mut lo = [rounding; 4];
                for &(row, kh, kl) in &taps {
                    let line = pairs.as_ptr().add(row + 2 * at);
                    for i in 0..4 {
                        let p = V::load(line.add(V::BYTES / 2 * i).cast());
                        hi[i] = hi[i].dot16(p, kh);
                        lo[i] = lo[i].dot16(p, kl);
                    }
                }
                let sums = [0, 1, 2, 3].map(|i| hi[i].shl_lo().add32(lo[i]).sra32(shift));
                V::pack_in_order(sums).store(out_row.as_mut_ptr().add(at));
                if at + V::BYTES == stride {
                    break;
                }
                x += V::BYTES;
            }
        }
    }
}

/// Vertical pass for output rows `rows`, written to `out` (exactly
/// `rows.len()` rows of `stride` bytes). `band` holds consecutive input rows
/// of `stride` bytes, the first being input row `band_first`.
fn vertical_rows(
    kernel: Kernel,
    band: &[u8],
    band_first: usize,
    stride: usize,
    coeffs: &Coeffs,
    rows: Range<usize>,
    out: &mut [u8],
) {
    match kernel {
        Kernel::Scalar => {
            let mut acc = vec![0; stride];
            for (y, out_row) in rows.zip(out.chunks_exact_mut(stride)) {
                let (first, k) = coeffs.taps(y);
                vertical_row(band, stride, first - band_first, k, coeffs, &mut acc, out_row);
            }
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Kernel::Avx2 exists only once AVX2 was detected.
        Kernel::Avx2 => unsafe { avx2::vertical_rows(band, band_first, stride, coeffs, rows, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Kernel::Avx512 exists only once AVX2 and AVX-512 were detected.
        Kernel::Avx512 => unsafe { avx512::vertical_rows(band, band_first, stride, coeffs, rows, out) },
    }
}

/// One output row of the vertical pass from band rows `first..` with taps `k`
/// of `coeffs`, using `acc` (one `i32` per byte of a row) as scratch.
fn vertical_row(
    band: &[u8],
    stride: usize,
    first: usize,
    k: &[i32],
    coeffs: &Coeffs,
    acc: &mut [i32],
    out: &mut [u8],
) {
    acc.fill(coeffs.rounding());
    let lines = band[first * stride..].chunks_exact(stride);
    for (line, &k) in lines.zip(k) {
        for (a, &p) in acc.iter_mut().zip(line) {
            *a = a.wrapping_add(i32::from(p).wrapping_mul(k));
        }
    }
    for (o, &a) in out.iter_mut().zip(acc.iter()) {
        *o = coeffs.clip8(a);
    }
}

/// Pillow's `COORD`: truncate a non-negative source position, `None` when it
/// falls outside `0..size`.
fn coord(v: f64, size: usize) -> Option<usize> {
    if v < 0.0 {
        return None;
    }
    let i = v as usize;
    (i < size).then_some(i)
}

/// Pillow's `NEAREST` resize, which is `ImagingScaleAffine`: source positions
/// start at half a step and advance by repeated addition (not
/// multiplication), so the accumulated rounding is reproduced; positions
/// outside the source give black, as Pillow's fill does.
fn nearest(src: &[u8], (h, w): (usize, usize), dst: &mut [u8], (h2, w2): (usize, usize)) {
    let step_x = f64::from(w as f32) / w2 as f64;
    let step_y = f64::from(h as f32) / h2 as f64;
    let mut table = vec![0; w2];
    let mut valid = w2..0;
    let mut xo = step_x * 0.5;
    for (x, t) in table.iter_mut().enumerate() {
        if let Some(xi) = coord(xo, w) {
            valid.start = valid.start.min(x);
            valid.end = x + 1;
            *t = xi;
        }
        xo += step_x;
    }
    let mut yo = step_y * 0.5;
    for out_row in dst.chunks_exact_mut(w2 * 3) {
        out_row.fill(0);
        if let Some(yi) = coord(yo, h) {
            let row = &src[yi * w * 3..(yi + 1) * w * 3];
            for x in valid.clone() {
                let from = table[x] * 3;
                out_row[x * 3..x * 3 + 3].copy_from_slice(&row[from..from + 3]);
            }
        }
        yo += step_y;
    }
}

/// AVX2 twins of the two passes, bit-identical to the scalar code.
///
/// `madd_epi16` multiplies 16-bit pairs, but Pillow's taps have 22
/// fractional bits, so each tap `k` is split exactly into `hi * 2048 + lo`
/// with `0 <= lo < 2048`; the two halves are summed separately and recombined
/// in wrapping `i32`, which equals the scalar `i32` sum whenever that sum
/// fits. Tables whose taps all fit in `i16` (torchvision's, whose precision is
/// chosen for that) skip the split: one `madd_epi16` per tap pair, half the
/// multiplies, the same wrapping `i32` sum.
/// The rounding term and shift come from the table's own precision.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi32, _mm256_broadcastsi128_si256, _mm256_castsi256_si128,
        _mm256_extracti128_si256, _mm256_loadu_si256, _mm256_madd_epi16, _mm256_packs_epi32,
        _mm256_packus_epi16, _mm256_permute2x128_si256, _mm256_permutevar8x32_epi32, _mm256_set1_epi32,
        _mm256_setr_epi16, _mm256_setr_epi32, _mm256_setr_epi8, _mm256_setzero_si256, _mm256_shuffle_epi8,
        _mm256_slli_epi32, _mm256_sra_epi32, _mm256_storeu_si256, _mm_add_epi32, _mm_cvtsi128_si32,
        _mm_cvtsi32_si128, _mm_loadu_si128, _mm_packs_epi32, _mm_packus_epi16, _mm_setr_epi8,
        _mm_shuffle_epi8, _mm_sra_epi32, _mm_storeu_si128, _mm_unpacklo_epi32,
    };
    use std::ops::Range;

    use super::{horizontal_pixel, vertical_blocks, vertical_rows_wide, Coeffs, Source};

    pub(super) const LO_BITS: i32 = 11;

    /// Whether `k` splits into an `i16` high part and an 11-bit low part.
    pub(super) fn splits(k: i32) -> bool {
        i16::try_from(k >> LO_BITS).is_ok()
    }

    pub(super) fn split(k: i32) -> (i16, i16) {
        ((k >> LO_BITS) as i16, (k & ((1 << LO_BITS) - 1)) as i16)
    }

    /// Whether every tap fits in `i16` and needs no split.
    pub(super) fn whole(k: &[i32]) -> bool {
        k.iter().all(|&k| i16::try_from(k).is_ok())
    }

    /// `k` as an `i16`, for tables where [`whole`] holds (0 otherwise, never used).
    pub(super) fn narrow(k: i32) -> i16 {
        i16::try_from(k).unwrap_or(0)
    }

    /// Two `i16` taps packed as the pair `madd_epi16` multiplies together.
    pub(super) fn pair(a: i16, b: i16) -> i32 {
        (i32::from(b) << 16) | i32::from(a as u16)
    }

    /// Horizontal taps in groups of four: one vector holds taps 0,1 in the
    /// low lane and 2,3 in the high lane, each repeated for R, G and B and a
    /// zero fourth slot, matching the pixel shuffles of [`pixel_pairs`].
    /// Every output gets the same number of groups (zero-padded), so the
    /// group loop can be unrolled for the common counts.
    pub(super) struct Horizontal {
        pub(super) coeffs: Coeffs,
        groups: usize,
        /// Taps split into (hi, lo) halves; else whole `i16` taps in the first vector
        /// of each pair (the second unused).
        split: bool,
        /// Each output's first tap (a source pixel index).
        starts: Vec<usize>,
        /// `groups` (hi, lo) vector pairs per output pixel.
        vectors: Vec<[__m256i; 2]>,
    }

    /// Per lane, 16-bit pairs (p0, p1) of R, G, B then a zero pair, from
    /// four loaded pixels of `C` bytes (3: RGB, 4: RGBX): the low lane takes
    /// pixels 0 and 1, the high lane pixels 2 and 3.
    #[target_feature(enable = "avx2")]
    fn pixel_pairs<const C: usize>() -> __m256i {
        let z = -1;
        if C == 4 {
            _mm256_setr_epi8(
                0, z, 4, z, 1, z, 5, z, 2, z, 6, z, z, z, z, z, //
                8, z, 12, z, 9, z, 13, z, 10, z, 14, z, z, z, z, z,
            )
        } else {
            _mm256_setr_epi8(
                0, z, 3, z, 1, z, 4, z, 2, z, 5, z, z, z, z, z, //
                6, z, 9, z, 7, z, 10, z, 8, z, 11, z, z, z, z, z,
            )
        }
    }

    /// Bytes past a pixel's first tap that [`pixel_sum`] loads for `groups` groups of
    /// `C`-byte pixels: 16 bytes per group of four pixels, starting `4 * C` apart.
    const fn reach<const C: usize>(groups: usize) -> usize {
        4 * C * groups + 16 - 4 * C
    }

    /// Weighted sum of one output pixel as [R, G, B, 0] partial sums in each
    /// lane (add the lanes to finish), from pixels of `C` bytes.
    ///
    /// # Safety
    /// The CPU must support AVX2 and `bytes` must hold at least
    /// `reach::<C>(vectors.len())` bytes.
    #[target_feature(enable = "avx2")]
    unsafe fn pixel_sum<const C: usize, const SPLIT: bool>(
        bytes: &[u8],
        vectors: &[[__m256i; 2]],
        shuffle: __m256i,
    ) -> __m256i {
        debug_assert!(bytes.len() >= reach::<C>(vectors.len()));
        let mut hi = _mm256_setzero_si256();
        let mut lo = _mm256_setzero_si256();
        for (g, [kh, kl]) in vectors.iter().enumerate() {
            // SAFETY: bytes 4Cg .. 4Cg + 16 lie inside `bytes` by the
            // caller's contract.
            let p = unsafe { _mm_loadu_si128(bytes.as_ptr().add(4 * C * g).cast()) };
            let p = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(p), shuffle);
            hi = _mm256_add_epi32(hi, _mm256_madd_epi16(p, *kh));
            if SPLIT {
                lo = _mm256_add_epi32(lo, _mm256_madd_epi16(p, *kl));
            }
        }
        if SPLIT {
            _mm256_add_epi32(_mm256_slli_epi32::<LO_BITS>(hi), lo)
        } else {
            hi
        }
    }

    impl Horizontal {
        /// # Safety
        /// The CPU must support AVX2.
        #[target_feature(enable = "avx2")]
        pub(super) unsafe fn new(coeffs: Coeffs) -> Horizontal {
            let groups = (0..coeffs.out_len())
                .map(|i| coeffs.taps(i).1.len().div_ceil(4))
                .max()
                .unwrap_or(0);
            let split = !whole(&coeffs.k);
            let mut vectors = Vec::with_capacity(coeffs.out_len() * groups);
            for i in 0..coeffs.out_len() {
                let (_, k) = coeffs.taps(i);
                for g in 0..groups {
                    let tap = |j: usize| k.get(4 * g + j).copied().unwrap_or(0);
                    if split {
                        let t = |j: usize| super::avx2::split(tap(j));
                        let [(h0, l0), (h1, l1), (h2, l2), (h3, l3)] = [t(0), t(1), t(2), t(3)];
                        vectors.push([
                            _mm256_setr_epi16(h0, h1, h0, h1, h0, h1, 0, 0, h2, h3, h2, h3, h2, h3, 0, 0),
                            _mm256_setr_epi16(l0, l1, l0, l1, l0, l1, 0, 0, l2, l3, l2, l3, l2, l3, 0, 0),
                        ]);
                    } else {
                        let [k0, k1, k2, k3] = [0, 1, 2, 3].map(|j| narrow(tap(j)));
                        vectors.push([
                            _mm256_setr_epi16(k0, k1, k0, k1, k0, k1, 0, 0, k2, k3, k2, k3, k2, k3, 0, 0),
                            _mm256_setzero_si256(),
                        ]);
                    }
                }
            }
            let starts = (0..coeffs.out_len()).map(|i| coeffs.taps(i).0).collect();
            Horizontal {
                coeffs,
                groups,
                split,
                starts,
                vectors,
            }
        }

        /// # Safety
        /// The CPU must support AVX2.
        #[target_feature(enable = "avx2")]
        pub(super) unsafe fn run(&self, src: &Source<'_>, rows: Range<usize>, out: &mut [u8]) {
            // SAFETY: the caller guarantees AVX2.
            unsafe {
                match (src.channels() == 4, self.split) {
                    (true, true) => self.run_c::<4, true>(src, rows, out),
                    (true, false) => self.run_c::<4, false>(src, rows, out),
                    (false, true) => self.run_c::<3, true>(src, rows, out),
                    (false, false) => self.run_c::<3, false>(src, rows, out),
                }
            }
        }

        /// [`Horizontal::run`] for pixels of `C` bytes.
        ///
        /// # Safety
        /// The CPU must support AVX2.
        #[target_feature(enable = "avx2")]
        unsafe fn run_c<const C: usize, const SPLIT: bool>(
            &self,
            src: &Source<'_>,
            rows: Range<usize>,
            out: &mut [u8],
        ) {
            // SAFETY (all arms): the caller guarantees AVX2.
            unsafe {
                match self.groups {
                    1 => self.rows::<1, C, SPLIT>(src, rows, out),
                    2 => self.rows::<2, C, SPLIT>(src, rows, out),
                    3 => self.rows::<3, C, SPLIT>(src, rows, out),
                    4 => self.rows::<4, C, SPLIT>(src, rows, out),
                    5 => self.rows::<5, C, SPLIT>(src, rows, out),
                    6 => self.rows::<6, C, SPLIT>(src, rows, out),
                    _ => self.rows::<0, C, SPLIT>(src, rows, out),
                }
            }
        }

        /// [`Horizontal::run`] with `N` groups per pixel, or `self.groups`
        /// when `N` is 0, from pixels of `C` bytes. Pixels go four at a time so the lane reduction,
        /// rounding and packing are shared and the store is one 16-byte
        /// write; the row's tail goes one pixel at a time.
        ///
        /// # Safety
        /// The CPU must support AVX2.
        #[target_feature(enable = "avx2")]
        unsafe fn rows<const N: usize, const C: usize, const SPLIT: bool>(
            &self,
            src: &Source<'_>,
            rows: Range<usize>,
            out: &mut [u8],
        ) {
            let groups = if N == 0 { self.groups } else { N };
            // Loads reach this many bytes past a pixel's first tap.
            let reach = reach::<C>(groups);
            let shuffle = pixel_pairs::<C>();
            let rounding = _mm256_set1_epi32(self.coeffs.rounding());
            // The shift count is a register, not an immediate, because each
            // table has its own precision.
            let shift = _mm_cvtsi32_si128(self.coeffs.precision() as i32);
            // Keeps bytes 0-2 of each 4-byte pixel.
            let z = -1;
            let compact = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, z, z, z, z);
            let out_w = self.coeffs.out_len();
            for (y, out_row) in rows.zip(out.chunks_exact_mut(out_w * 3)) {
                // Loads may run past this row into the next ones: those bytes
                // meet zero taps, so only the end of the row's memory run bounds them.
                let row = src.tail(y);
                let mut x = 0;
                // Block of four needs its last pixel's loads in bounds (starts
                // only grow) and 16 writable bytes.
                while x + 4 <= out_w
                    && self.starts[x + 3] * C + reach <= row.len()
                    && x * 3 + 16 <= out_row.len()
                {
                    let mut sums = [_mm256_setzero_si256(); 4];
                    for (i, sum) in sums.iter_mut().enumerate() {
                        let vectors = &self.vectors[(x + i) * groups..(x + i + 1) * groups];
                        // SAFETY: AVX2 is guaranteed by the caller; `reach`
                        // bytes from this start are in bounds (checked for
                        // the largest start, x + 3).
                        *sum = unsafe {
                            pixel_sum::<C, SPLIT>(&row[self.starts[x + i] * C..], vectors, shuffle)
                        };
                    }
                    let [a, b, c, d] = sums;
                    // Lane halves added, giving [A | B] and [C | D].
                    let ab = _mm256_add_epi32(
                        _mm256_permute2x128_si256::<0x20>(a, b),
                        _mm256_permute2x128_si256::<0x31>(a, b),
                    );
                    let cd = _mm256_add_epi32(
                        _mm256_permute2x128_si256::<0x20>(c, d),
                        _mm256_permute2x128_si256::<0x31>(c, d),
                    );
                    let ab = _mm256_sra_epi32(_mm256_add_epi32(ab, rounding), shift);
                    let cd = _mm256_sra_epi32(_mm256_add_epi32(cd, rounding), shift);
                    // Bytes: low lane A C A C, high lane B D B D.
                    let v = _mm256_packus_epi16(_mm256_packs_epi32(ab, cd), _mm256_setzero_si256());
                    let v = _mm_unpacklo_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
                    let v = _mm_shuffle_epi8(v, compact);
                    let dst = &mut out_row[x * 3..x * 3 + 16];
                    // SAFETY: `dst` is exactly 16 bytes; its last 4 belong to
                    // the next pixel, which is written after this one.
                    unsafe { _mm_storeu_si128(dst.as_mut_ptr().cast(), v) };
                    x += 4;
                }
                for (x, px) in out_row.chunks_exact_mut(3).enumerate().skip(x) {
                    let start = self.starts[x] * C;
                    if start + reach > row.len() {
                        let (_, k) = self.coeffs.taps(x);
                        px.copy_from_slice(&horizontal_pixel(&row[start..], C, k, &self.coeffs));
                        continue;
                    }
                    let vectors = &self.vectors[x * groups..(x + 1) * groups];
                    // SAFETY: AVX2 is guaranteed by the caller; bounds were
                    // checked just above.
                    let sum = unsafe { pixel_sum::<C, SPLIT>(&row[start..], vectors, shuffle) };
                    let sum = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256::<1>(sum));
                    let v = _mm_sra_epi32(_mm_add_epi32(sum, _mm256_castsi256_si128(rounding)), shift);
                    let v = _mm_packus_epi16(_mm_packs_epi32(v, v), v);
                    px.copy_from_slice(&_mm_cvtsi128_si32(v).to_le_bytes()[..3]);
                }
            }
        }
    }

    /// The rows of the band that output rows `rows` read, when [`vertical_rows_wide`] is the
    /// pass for them: an enlarging table whose taps all split (each band row read for
    /// several outputs) on rows of at least 32 bytes, its widened rows at most
    /// [`WIDE_BYTES`].
    pub(super) fn wide_span(coeffs: &Coeffs, rows: &Range<usize>, stride: usize) -> Option<Range<usize>> {
        if rows.is_empty() {
            return None;
        }
        let span = coeffs.inputs_of(rows.clone());
        (stride >= 32
            && rows.len() > span.len()
            && !whole(&coeffs.k)
            && coeffs.k.iter().all(|&k| splits(k))
            && span.len() * stride <= WIDE_BYTES / 4)
            .then_some(span)
    }

    /// The taps of one output row as pairs of band rows (a, b) and the packed 16-bit tap
    /// pairs `madd_epi16` multiplies them by: (whole, 0), or the (hi, lo) halves of split
    /// taps. `k` are the taps of rows `first..`; an odd last tap pairs with itself under a
    /// zero tap.
    pub(super) fn row_pairs(first: usize, k: &[i32]) -> impl Iterator<Item = (usize, usize, i32, i32)> + '_ {
        let is_split = !whole(k);
        k.chunks(2).enumerate().map(move |(j, two)| {
            let a = first + 2 * j;
            let (b, kb) = two.get(1).map_or((a, 0), |&kb| (a + 1, kb));
            let (kh, kl) = if is_split {
                let ((ha, la), (hb, lb)) = (split(two[0]), split(kb));
                (pair(ha, hb), pair(la, lb))
            } else {
                (pair(narrow(two[0]), narrow(kb)), 0)
            };
            (a, b, kh, kl)
        })
    }

    /// AVX2 twin of [`super::vertical_rows`], 32 bytes of a row at a time.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn vertical_rows(
        band: &[u8],
        band_first: usize,
        stride: usize,
        coeffs: &Coeffs,
        rows: Range<usize>,
        out: &mut [u8],
    ) {
        if let Some(span) = wide_span(coeffs, &rows, stride) {
            let band = &band[(span.start - band_first) * stride..(span.end - band_first) * stride];
            // SAFETY: the caller guarantees AVX2.
            unsafe { vertical_rows_wide::<__m256i>(band, span.start, stride, coeffs, rows, out) };
            return;
        }
        // SAFETY: the caller guarantees AVX2.
        unsafe { vertical_blocks::<__m256i>(band, band_first, stride, coeffs, rows, out) };
    }

    /// Eight RGBX pixels (pixels 0-3 in the low lane) packed to RGB: their 24 bytes first,
    /// then 8 of nothing.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) unsafe fn packed_rgb(v: __m256i) -> __m256i {
        let z = -1;
        // Per 128-bit lane: bytes 0-2, 4-6, 8-10, 12-14 first, then nothing.
        let compact = _mm256_setr_epi8(
            0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, z, z, z, z, //
            0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, z, z, z, z,
        );
        // The two lanes' twelve bytes side by side.
        _mm256_permutevar8x32_epi32(
            _mm256_shuffle_epi8(v, compact),
            _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7),
        )
    }

    /// [`super::pack_rgbx`] for whole blocks of eight pixels while a 32-byte store fits in
    /// `out`; returns the pixels packed.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn pack_rgbx(row: &[u8], out: &mut [u8]) -> usize {
        let pixels = (row.len() / 4).min(out.len() / 3);
        let mut x = 0;
        // Each store writes 32 bytes, 8 past the block's 24: the next block rewrites them.
        while x + 8 <= pixels && 3 * x + 32 <= out.len() {
            // SAFETY: pixels x..x + 8 are 32 bytes inside `row`, and 32 bytes from 3x lie
            // inside `out`, as the loop checks.
            unsafe {
                let v = packed_rgb(_mm256_loadu_si256(row.as_ptr().add(4 * x).cast()));
                _mm256_storeu_si256(out.as_mut_ptr().add(3 * x).cast(), v);
            }
            x += 8;
        }
        x
    }

    /// [`super::grey_rgb`] for whole blocks of sixteen pixels; returns the pixels written.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn grey_rgb(row: &[u8], out: &mut [u8]) -> usize {
        // Byte `i` of output vector `k` is pixel `(16k + i) / 3`.
        let spread = [
            _mm_setr_epi8(0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5),
            _mm_setr_epi8(5, 5, 6, 6, 6, 7, 7, 7, 8, 8, 8, 9, 9, 9, 10, 10),
            _mm_setr_epi8(10, 11, 11, 11, 12, 12, 12, 13, 13, 13, 14, 14, 14, 15, 15, 15),
        ];
        let pixels = row.len().min(out.len() / 3);
        let mut x = 0;
        while x + 16 <= pixels {
            // SAFETY: pixels x..x + 16 are 16 bytes inside `row` and their 48 bytes lie
            // inside `out`, as `pixels` bounds them.
            unsafe {
                let v = _mm_loadu_si128(row.as_ptr().add(x).cast());
                for (k, index) in spread.into_iter().enumerate() {
                    _mm_storeu_si128(
                        out.as_mut_ptr().add(3 * x + 16 * k).cast(),
                        _mm_shuffle_epi8(v, index),
                    );
                }
            }
            x += 16;
        }
        x
    }

    /// Most bytes [`vertical_rows_wide`] widens at once (as two `i16` pairs, four bytes each).
    const WIDE_BYTES: usize = 8 << 20;
}

/// Test only: the pass with which the AVX-512 horizontal pass of `coeffs` reads grey rows
/// in place, if it does (see `avx512::Horizontal::grey_shape`).
#[cfg(test)]
pub(crate) fn grey_shape(coeffs: Coeffs) -> Option<(&'static str, usize, bool, usize)> {
    match Horizontal::new(Kernel::select(Backend::Avx512).ok()?, coeffs) {
        #[cfg(target_arch = "x86_64")]
        Horizontal::Avx512(plan) => plan.grey_shape(),
        _ => None,
    }
}

/// Test only: the (pixel bytes, tap pairs, split, far vectors) with which the AVX-512
/// horizontal pass of `coeffs` takes its planar blocks on `channels`-byte rows, if it does.
#[cfg(test)]
pub(crate) fn planar_shape(coeffs: Coeffs, channels: usize) -> Option<(usize, usize, bool, usize)> {
    match Horizontal::new(Kernel::select(Backend::Avx512).ok()?, coeffs) {
        #[cfg(target_arch = "x86_64")]
        Horizontal::Avx512(plan) => plan.planar_shape(channels),
        _ => None,
    }
}

/// Both passes with AVX-512 (F, BW, VL, VBMI and VNNI), for the same bytes as the AVX2 passes.
///
/// The horizontal pass holds four outputs a vector, one per 128-bit lane, each lane with its
/// own output's window, so a lane's sum is that output's whole sum: the cross-lane
/// reduction the AVX2 pass runs for every four outputs is gone. Where the four windows of
/// every block lie within 128 bytes (scales down to about 1/9 on RGBX rows, 1/13 on RGB,
/// RGBX rows between the two packed to RGB a row at a time), two loads and two byte
/// permutes fill all four lanes; otherwise each lane loads its own window. Loads that would
/// pass the end of a row's memory run are masked, so no output falls back to scalar code.
/// Tables of at most ten taps whose windows are close enough (scales down to about 1/3.7
/// on RGBX rows, 1/4.5 on RGB, RGBX rows between the two packed to RGB a row at a time)
/// take [`Planar`]'s blocks of sixteen outputs instead, one channel a vector: half the
/// permutes and multiplies per output, and on a 2-vCPU Xeon 640x480 -> 448x480 in 0.36 ms
/// against 0.76 ms (Pillow's taps), 1920 -> 1288 wide in 1.6 ms against 3.8 ms (torch's).
/// Other tables of more than eight taps whose windows are near enough take [`Octets`]'
/// blocks, four outputs a vector but one channel a vector and eight taps a lane, which read
/// each tap once.
/// The vertical pass is the AVX2 one, 64 bytes at a time; enlarging split tables add each
/// tap pair's products with one VNNI `dpwssd` instead of a multiply-add and an add.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::{
        __m128i, __m512i, _mm256_mask_storeu_epi8, _mm512_add_epi32, _mm512_broadcast_i32x4,
        _mm512_castsi128_si512, _mm512_castsi512_si256, _mm512_dpwssd_epi32, _mm512_inserti32x4,
        _mm512_loadu_si512, _mm512_madd_epi16, _mm512_mask_blend_epi8, _mm512_mask_permutexvar_epi8,
        _mm512_mask_storeu_epi8, _mm512_maskz_loadu_epi8, _mm512_maskz_permutex2var_epi8,
        _mm512_movepi8_mask, _mm512_or_si512, _mm512_packs_epi32, _mm512_packus_epi16,
        _mm512_permutex2var_epi8, _mm512_permutexvar_epi8, _mm512_set1_epi32, _mm512_setzero_si512,
        _mm512_shuffle_epi8, _mm512_slli_epi32, _mm512_sra_epi32, _mm512_storeu_si512, _mm512_unpackhi_epi32,
        _mm512_unpackhi_epi64, _mm512_unpacklo_epi32, _mm512_unpacklo_epi64, _mm_cvtsi32_si128,
        _mm_loadu_si128, _mm_maskz_loadu_epi8, _mm_prefetch, _mm_setr_epi16, _mm_setr_epi8, _MM_HINT_T0,
        _MM_HINT_T1,
    };
    use std::ops::Range;

    use super::avx2::{self, narrow, pair, split, whole, wide_span, LO_BITS};
    use super::{vertical_blocks, vertical_rows_wide, Coeffs, Source};

    /// Whether this CPU has the AVX-512 subsets the pass uses.
    pub(super) fn detected() -> bool {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512vbmi")
            && is_x86_feature_detected!("avx512vnni")
    }

    /// The taps of every block of four outputs of one table.
    pub(super) struct Horizontal {
        pub(super) coeffs: Coeffs,
        /// Groups of four taps per output (the most any output has; the rest zero).
        groups: usize,
        /// Taps split into (hi, lo) halves, else whole `i16` taps.
        split: bool,
        /// Each output's first tap (a source pixel index), the last one repeated up to a
        /// multiple of four.
        starts: Vec<usize>,
        /// For 3- and 4-byte pixels, per block, the byte permutes (taps 0, 1 then 2, 3) that
        /// take every lane's pairs from the 128 bytes at the block's first start; empty
        /// where some block's windows lie further apart.
        permutes: [Vec<__m512i>; 2],
        /// Per block, per group: the tap pairs (0, 1) then (2, 3), each output's pair in its
        /// lane, repeated for R, G and B with a zero fourth slot; split tables hold the high
        /// halves, then the low halves.
        vectors: Vec<__m512i>,
        /// The pass sixteen outputs a block, where the table allows it.
        planar: Option<Box<Planar>>,
        /// The pass one channel a vector and eight taps a lane, where the table allows it.
        octets: Option<Box<Octets>>,
    }

    /// Four outputs a block as in [`Horizontal`], but one channel a vector and eight taps a
    /// lane: each output's lane holds eight tap bytes of one channel as four 16-bit pairs,
    /// so one `madd` gives four outputs' sums of one channel over eight taps, and each lane's
    /// four partial sums are added once at the block's end. Its taps hold each value once,
    /// the same vector for R, G and B, where [`Horizontal`]'s repeat each pair for the three
    /// channels: a table of many taps then reads 64 bytes a block per eight taps (128 split)
    /// instead of 256 (512), from L1 instead of L2. For tables of more than eight taps whose
    /// four windows of every block lie within 128 bytes with a group's room (scales down to
    /// about 1/12 on RGB rows, 1/8 on RGBX, RGBX rows between the two packed to RGB).
    ///
    /// On a 2-vCPU Zen 5 EPYC, the horizontal pass of 4032x3024 to 364 wide (Aya Vision's
    /// 12 MP thumbnail, 46 taps) took 2.4 ms against 4.7 ms with torch's taps and 3.0 ms
    /// against 7.4 ms with Pillow's; to 1456 wide (its tiles, 13 taps), 4.1 against 5.8 ms
    /// and 5.0 against 7.6 ms. Groups of six taps rather than eight where that takes no more
    /// groups narrow the windows enough for RGBX rows at 1920 to 224 wide (17 or 18 taps,
    /// the last window of a block 25-26 pixels on): on a 2-vCPU Zen 4 EPYC, a 1920x1080 PIL
    /// image through UDOP's torchvision processor took 0.88 -> 0.735 ms (0.695 ms as an
    /// array), through its PIL-backend processor 1.15 -> 0.99 ms, read in place instead of
    /// packed.
    ///
    /// Grey rows are read where they are, one permute per group for the one channel, its
    /// sums stored as R, G and B: on a 2-vCPU Zen 4 EPYC (2-round A/B), a 12 MP L PIL
    /// image took 8.09-9.98 -> 4.00-4.13 ms through LLaVA-1.5's PIL-backend processor and
    /// 9.72-10.23 -> 4.82-6.38 ms through `SigLIP`'s, where rows were repeated to RGB first.
    pub(super) struct Octets {
        /// Groups of eight tap slots per output, enough for the most taps any output has:
        /// the fewest, or more where that brings each block's RGB windows within 128 bytes.
        groups: usize,
        /// Taps a group holds, its last slots zero: the fewest that keep `groups` (six for
        /// 17 or 18 taps in three groups), so that each window is as narrow as it can be.
        width: usize,
        /// For 3- and 4-byte pixels (`None` where some block's windows lie further apart),
        /// the byte permutes that take each output's `width` tap bytes of a channel into its
        /// lane's 16-bit slots (slots past a window read byte 0, against zero taps).
        permutes: [Option<Windows>; 2],
        /// The same for grey rows, read where they are: one channel.
        grey: Option<Windows>,
        /// Per block, per group: each output's `width` taps in its lane; split tables hold
        /// the high halves, then the low halves.
        taps: Vec<__m512i>,
    }

    /// [`Octets`]' permutes for one pixel size: per block, per channel, one from the 128
    /// bytes at the block's first tap, or, for split taps whose four windows lie further
    /// apart (`halves`), two: lanes 0 and 1 from the 128 bytes at output 0's first tap,
    /// lanes 2 and 3 from those at output 2's (scales down to about 1/34 on RGB rows, 1/24
    /// on RGBX).
    struct Windows {
        halves: bool,
        permutes: Vec<__m512i>,
    }

    /// The 16-bit slots' low bytes of lanes 0 and 1, then of lanes 2 and 3.
    const HALF_PAIRS: [u64; 2] = [0x5555_5555, 0x5555_5555 << 32];

    impl Octets {
        /// The pass of `coeffs` with its blocks' `starts`, or `None` for at most eight taps.
        fn new(coeffs: &Coeffs, starts: &[usize], split_taps: bool) -> Option<Octets> {
            let out_w = coeffs.out_len();
            let most = (0..out_w).map(|i| coeffs.taps(i).1.len()).max()?;
            if most <= 8 {
                return None;
            }
            let last = |x: usize| x.min(out_w - 1);
            // The permutes for `c`-byte pixels (grey: one channel) and `width` taps a group,
            // lanes read from one window or two.
            let windows = |c: usize, width: usize, halves: bool| {
                let channels = if c == 1 { 1 } else { 3 };
                let mut permutes = Vec::with_capacity(starts.len() / 4 * 2 * channels);
                for (b, s) in starts.chunks_exact(4).enumerate() {
                    for channel in 0..channels {
                        for first in (0..4).step_by(if halves { 2 } else { 4 }) {
                            let mut index = [0u8; 64];
                            for j in first..first + if halves { 2 } else { 4 } {
                                let (start, k) = coeffs.taps(last(4 * b + j));
                                for t in 0..k.len().min(width) {
                                    let at = (start + t - s[first]) * c + channel;
                                    index[16 * j + 2 * t] = u8::try_from(at).ok().filter(|&at| at < 128)?;
                                }
                            }
                            // SAFETY: 64 bytes are a valid `__m512i`.
                            permutes.push(unsafe { std::mem::transmute::<[u8; 64], __m512i>(index) });
                        }
                    }
                }
                Some(Windows { halves, permutes })
            };
            // Two windows a block pay for themselves only against split taps, whose
            // four-output blocks read twice as many tap vectors: for a 4032x3024 image,
            // PaliGemma 2 (to 224x224, Pillow's taps) took 7.1 -> 5.4 ms, SigLIP2 NaFlex (to
            // 288x224, torch's) 2.4 -> 3.1 ms.
            //
            // Where RGB windows are too far apart for one, more groups of fewer taps (up to
            // half as many groups again) may bring them within 128 bytes, which costs less
            // than two windows or the four-output blocks. On a 2-vCPU Zen 4 EPYC (5-round
            // A/B), 4032x3024 to 336x336 took 11.8 -> 8.4 ms with Pillow's bicubic taps (49:
            // nine groups of six, not seven of seven) and 4.11 -> 3.67 ms with torch's
            // bilinear (23: four groups of six, not three of eight); LLaVA-NeXT's 12 MP call
            // 21.5 -> 18.9 ms for a PIL image and 20.3 -> 16.7 ms for an array. Rows to 224
            // wide (scale 18) fit at no group count and keep two windows.
            let fewest = most.div_ceil(8);
            let groups = (fewest..=fewest + fewest / 2)
                .find(|&groups| windows(3, most.div_ceil(groups), false).is_some())
                .unwrap_or(fewest);
            let width = most.div_ceil(groups);
            let fitting =
                |c| windows(c, width, false).or_else(|| windows(c, width, true).filter(|_| split_taps));
            let (permutes, grey) = ([3, 4].map(fitting), fitting(1));
            if permutes.iter().chain([&grey]).all(Option::is_none) {
                return None;
            }
            let parts: &[fn(i32) -> i16] = if split_taps {
                &[|k| split(k).0, |k| split(k).1]
            } else {
                &[narrow]
            };
            let mut taps = Vec::with_capacity(starts.len() / 4 * groups * parts.len());
            for b in 0..starts.len() / 4 {
                for g in 0..groups {
                    for &part in parts {
                        let words: [i16; 32] = std::array::from_fn(|i| {
                            let (_, k) = coeffs.taps(last(4 * b + i / 8));
                            let t = i % 8;
                            let tap = (t < width).then(|| k.get(width * g + t)).flatten();
                            part(tap.copied().unwrap_or(0))
                        });
                        // SAFETY: 64 bytes are a valid `__m512i`.
                        taps.push(unsafe { std::mem::transmute::<[i16; 32], __m512i>(words) });
                    }
                }
            }
            Some(Octets {
                groups,
                width,
                permutes,
                grey,
                taps,
            })
        }
    }

    /// Sixteen outputs a block, one channel a register: each output's 32-bit lane holds
    /// the bytes of two adjacent taps as a 16-bit pair, so one `madd` gives sixteen outputs'
    /// sums of one channel for two taps, and a block takes three byte permutes (one per
    /// channel) per two taps, where [`Horizontal`]'s four-output blocks take two per four
    /// taps and four outputs. For tables of at most ten taps whose sixteen windows of
    /// every block lie within 256 bytes (bilinear scales down to about 1/3.7 on RGBX rows,
    /// 1/4.5 on RGB), for that pixel size. A table whose windows all lie within 128 bytes
    /// takes one two-source permute per channel and pair; a wider table takes, in every
    /// block, a second for the bytes past 128: one-source within 192 bytes, else
    /// two-source and a blend. On a 2-vCPU Zen 4 EPYC, where
    /// the four-output blocks (or, for nine and ten taps, eight taps a lane) ran before:
    /// the horizontal pass of a 4032x3024 image to 1344 wide took 6.5 -> 4.2 ms with
    /// torch's bilinear taps and 8.3 -> 4.9 ms with Pillow's, to 1800 wide 10.2 -> 7.1 ms
    /// (torch's bicubic) and 13.1 -> 8.7 ms (Pillow's); Llama 4's torchvision call on a
    /// 12 MP image 14.7 -> 12.4 ms. Windows of 256 bytes rather than 192 (3-round A/B, same
    /// machine): Llama 3.2 Vision's 12 MP PIL image (bilinear to 1120 wide, RGBX windows up
    /// to 252 bytes, read in place instead of packed to RGB) took 7.2-7.6 -> 6.4-6.5 ms
    /// through its Pillow-backend processor and 6.0-6.4 -> 5.3-5.5 ms through its
    /// torchvision one; Gemma 3's 12 MP array (bilinear to 896 wide, RGB windows up to 232
    /// bytes, no longer eight taps a lane) 7.9 -> 5.7 ms and its PIL image (packed) 8.3 ->
    /// 6.9 ms; Fuyu's 12 MP PIL image (to 1440 wide, read in place at 256 bytes instead of
    /// packed at 192) lost 2-3%, 7.7 -> 7.9 ms. (RGBX windows that reach more vectors than
    /// RGB ones are now packed in registers instead: see [`Planar::permutes`].)
    ///
    /// Grey rows are read where they are, one permute per pair for the one channel, its
    /// sums stored as R, G and B: on a 2-vCPU Zen 4 EPYC (2-round A/B), a 12 MP L PIL
    /// image took 7.20-7.33 -> 3.96-4.19 ms through Gemma 3's PIL-backend processor and
    /// 8.30-8.80 -> 4.62-5.08 ms through Llama 3.2 Vision's, where rows were repeated to RGB
    /// first.
    pub(super) struct Planar {
        /// Tap pairs per output (the most any output has; the rest zero).
        pairs: usize,
        /// Each block's first tap (a source pixel index).
        starts: Vec<usize>,
        /// For 3- and 4-byte pixels (`None` where some block's windows lie further apart,
        /// and for 4-byte pixels where they reach more vectors past the first two than
        /// 3-byte ones), per block, per channel, per pair: the byte permute that takes each
        /// output's two tap bytes from the 256 bytes at the block's first tap into its lane's
        /// 16-bit halves (zero taps past a window read byte 0): each index is a byte's offset.
        ///
        /// RGBX rows are then read as RGB, packed a block at a time in registers, which costs
        /// less than permutes over one more vector. On a 2-vCPU Zen 4 EPYC, in the 63 cells
        /// of `mmfast bench`'s models (PIL images) where RGBX pixels reach more vectors, a
        /// call took a median 0.95x as long (0.84x-1.04x, 3-7 interleaved rounds): e.g.
        /// Video-LLaVA at 640x480 0.258 -> 0.218 ms, Gemma 3 at 1920x1080 1.652 -> 1.561 ms
        /// and Hunyuan OCR at 12 MP 14.97 -> 13.38 ms (PIL backend).
        permutes: [Option<Vec<__m512i>>; 2],
        /// For 3- and 4-byte pixels, the 64-byte vectors past the first two that some
        /// permute reads a byte of: 0, 1 or 2.
        far: [usize; 2],
        /// For grey rows, read where they are: per block, per pair, the permute of the one
        /// channel, and the vectors it reads past the first two.
        grey: Option<(Vec<__m512i>, usize)>,
        /// Per block, per pair: each output's taps as the pair `madd` multiplies; split
        /// tables hold the high halves, then the low halves.
        taps: Vec<__m512i>,
    }

    /// The low byte of each 16-bit half of every 32-bit lane, which the permutes fill.
    const BYTE_PAIRS: u64 = 0x5555_5555_5555_5555;

    /// Where each byte of sixteen packed RGB outputs lies after
    /// `packus(packs(r, g), packs(b, 0))`: lane `l` holds outputs `4l..4l + 4`'s R, then G,
    /// then B bytes.
    const PLANAR_RGB: __m512i = rgb_bytes(16, true);

    impl Planar {
        /// The sixteen-output pass of `coeffs`, or `None` for more than ten taps.
        fn new(coeffs: &Coeffs, split_taps: bool) -> Option<Planar> {
            let out_w = coeffs.out_len();
            let pairs = (0..out_w).map(|i| coeffs.taps(i).1.len().div_ceil(2)).max()?;
            if !(1..=5).contains(&pairs) {
                return None;
            }
            let last = |x: usize| x.min(out_w - 1);
            let blocks = out_w.div_ceil(16);
            let starts: Vec<usize> = (0..blocks).map(|b| coeffs.taps(16 * b).0).collect();
            let parts: &[fn(i32) -> i16] = if split_taps {
                &[|k| split(k).0, |k| split(k).1]
            } else {
                &[narrow]
            };
            let vector = |lanes: [i32; 16]| {
                // SAFETY: 64 bytes are a valid `__m512i`.
                unsafe { std::mem::transmute::<[i32; 16], __m512i>(lanes) }
            };
            let mut taps = Vec::with_capacity(blocks * pairs * parts.len());
            for b in 0..blocks {
                for p in 0..pairs {
                    for &part in parts {
                        taps.push(vector(std::array::from_fn(|j| {
                            let (_, k) = coeffs.taps(last(16 * b + j));
                            let [t0, t1] = [2 * p, 2 * p + 1].map(|t| part(k.get(t).copied().unwrap_or(0)));
                            pair(t0, t1)
                        })));
                    }
                }
            }
            // The permutes of `c`-byte pixels for their first `channels` channels, and the
            // vectors past the first two that they read.
            let build = |c: usize, channels: usize| {
                let mut far = 0;
                let mut permutes = Vec::with_capacity(blocks * channels * pairs);
                for (b, &first) in starts.iter().enumerate() {
                    for channel in 0..channels {
                        for p in 0..pairs {
                            let mut index = [0u8; 64];
                            for j in 0..16 {
                                let (start, k) = coeffs.taps(last(16 * b + j));
                                for t in 0..2 {
                                    if 2 * p + t < k.len() {
                                        let at = (start + 2 * p + t - first) * c + channel;
                                        index[4 * j + 2 * t] = u8::try_from(at).ok()?;
                                        far = far.max((at / 64).saturating_sub(1));
                                    }
                                }
                            }
                            // SAFETY: 64 bytes are a valid `__m512i`.
                            permutes.push(unsafe { std::mem::transmute::<[u8; 64], __m512i>(index) });
                        }
                    }
                }
                Some((permutes, far))
            };
            let [rgb, mut rgbx] = [3, 4].map(|c| build(c, 3));
            if let (Some((_, far3)), Some((_, far4))) = (&rgb, &rgbx) {
                if far4 > far3 {
                    rgbx = None;
                }
            }
            let far = [&rgb, &rgbx].map(|built| built.as_ref().map_or(0, |&(_, far)| far));
            let permutes = [rgb, rgbx].map(|built| built.map(|(permutes, _)| permutes));
            Some(Planar {
                pairs,
                grey: build(1, 1),
                starts,
                permutes,
                far,
                taps,
            })
        }
    }

    /// Byte offsets, in a window whose pixel 0 (of `c` bytes) is at byte `at`, of the low
    /// bytes of its 16-bit pairs (t, t + 1) of R, G and B.
    fn pair_bytes(c: usize, at: usize, t: usize) -> [usize; 6] {
        let (a, b) = (at + t * c, at + (t + 1) * c);
        [a, b, a + 1, b + 1, a + 2, b + 2]
    }

    /// Byte positions of a 64-byte vector that [`pair_bytes`] fills: the low byte of each
    /// of the first six 16-bit slots of every lane. The rest are zero.
    const PAIR_SLOTS: u64 = 0x0555_0555_0555_0555;

    /// Where each byte of eight packed RGB outputs lies after `packus(packs(a, c), 0)` of
    /// blocks `a` and `c`: lane `j` holds output `j`'s [R, G, B, 0] then output `4 + j`'s.
    const PACKED_RGB: __m512i = rgb_bytes(8, false);

    /// The byte permute that gathers `outputs` packed RGB outputs from sums packed to bytes
    /// as [`PLANAR_RGB`] (`planar`) or [`PACKED_RGB`] describe.
    const fn rgb_bytes(outputs: usize, planar: bool) -> __m512i {
        let mut index = [0u8; 64];
        let mut i = 0;
        while i < 3 * outputs {
            let (out, channel) = (i / 3, i % 3);
            index[i] = if planar {
                16 * (out / 4) + 4 * channel + out % 4
            } else {
                16 * (out % 4) + 4 * (out / 4) + channel
            } as u8;
            i += 1;
        }
        // SAFETY: 64 bytes are a valid `__m512i`.
        unsafe { std::mem::transmute::<[u8; 64], __m512i>(index) }
    }

    /// Byte `i` of output vector `j` of packed RGB is byte `i % 3` of pixel `(64j + i) / 3`,
    /// which lies in RGBX vectors `j` and `j + 1` (bytes 0..128 of the pair) for `j` up to 2:
    /// the indices of their two-source byte permutes.
    const RGBX_RGB: [__m512i; 3] = {
        let mut blocks = [[0u8; 64]; 3];
        let mut j = 0;
        while j < 3 {
            let mut i = 0;
            while i < 64 {
                let o = 64 * j + i;
                blocks[j][i] = (o / 3 * 4 + o % 3 - 64 * j) as u8;
                i += 1;
            }
            j += 1;
        }
        // SAFETY: 64 bytes are a valid `__m512i`.
        unsafe { std::mem::transmute::<[[u8; 64]; 3], [__m512i; 3]>(blocks) }
    };

    /// [`super::pack_rgbx`] of every pixel: sixty-four at a time as three two-source byte
    /// permutes of four full loads into three full stores, then sixteen a masked permute;
    /// returns the pixels packed.
    ///
    /// On a 2-vCPU Zen 5 EPYC, sixteen a masked permute took 0.14 ms of Gemma 3's 1.18 ms
    /// for a 1920x1080 PIL image, most of it building the masks.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn pack_rgbx(row: &[u8], out: &mut [u8]) -> usize {
        let pixels = (row.len() / 4).min(out.len() / 3);
        let mut x = 0;
        while x + 64 <= pixels {
            // SAFETY: pixels x..x + 64 are the 256 bytes read and their 192 bytes written,
            // inside both slices as `pixels` bounds them.
            unsafe {
                let (src, dst) = (row.as_ptr().add(4 * x), out.as_mut_ptr().add(3 * x));
                let v: [__m512i; 4] = std::array::from_fn(|i| _mm512_loadu_si512(src.add(64 * i).cast()));
                for (j, index) in RGBX_RGB.into_iter().enumerate() {
                    _mm512_storeu_si512(
                        dst.add(64 * j).cast(),
                        _mm512_permutex2var_epi8(v[j], index, v[j + 1]),
                    );
                }
            }
            x += 64;
        }
        let index = RGBX_RGB[0];
        for x in (x..pixels).step_by(16) {
            let n = (pixels - x).min(16);
            // SAFETY: the masks read the 4n bytes of pixels x..x + n from `row` and write
            // their 3n bytes into `out`, both inside as `pixels` bounds them.
            unsafe {
                let v = _mm512_maskz_loadu_epi8(u64::MAX >> (64 - 4 * n), row.as_ptr().add(4 * x).cast());
                let v = _mm512_permutexvar_epi8(index, v);
                _mm512_mask_storeu_epi8(out.as_mut_ptr().add(3 * x).cast(), u64::MAX >> (64 - 3 * n), v);
            }
        }
        pixels
    }

    /// [`super::reversed_blocks`].
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn reversed_blocks(
        row: &[u8],
        channels: usize,
        out: &mut [u8],
        forward: bool,
    ) -> usize {
        // Byte `i` of a block's 48 output bytes is byte `i % 3` (grey: its one byte) of the
        // block's input pixel `15 - i / 3`, for pixels of 1, 3 and 4 bytes.
        const fn index(c: usize) -> [u8; 64] {
            let mut index = [0u8; 64];
            let mut i = 0;
            while i < 48 {
                index[i] = ((15 - i / 3) * c + if c == 1 { 0 } else { i % 3 }) as u8;
                i += 1;
            }
            index
        }
        const INDEX: [[u8; 64]; 3] = [index(1), index(3), index(4)];
        let table = match channels {
            1 => &INDEX[0],
            3 => &INDEX[1],
            _ => &INDEX[2],
        };
        // SAFETY: 64 bytes.
        let index = unsafe { _mm512_loadu_si512(table.as_ptr().cast()) };
        let w = (out.len() / 3).min(row.len() / channels);
        let blocks = w / 16;
        let load = u64::MAX >> (64 - 16 * channels);
        for b in 0..blocks {
            let j = if forward { blocks - 1 - b } else { b };
            // Output pixels 16j..16j + 16 are input pixels w - 16j - 16..w - 16j, reversed:
            // 16 * channels bytes read and 48 written, inside both slices as `w` bounds them.
            unsafe {
                let v = _mm512_maskz_loadu_epi8(load, row.as_ptr().add((w - 16 * j - 16) * channels).cast());
                let v = _mm512_permutexvar_epi8(index, v);
                _mm512_mask_storeu_epi8(out.as_mut_ptr().add(48 * j).cast(), u64::MAX >> 16, v);
            }
        }
        16 * blocks
    }

    /// [`super::grey_rgb`] of every pixel: sixty-four at a time as three byte permutes of
    /// one vector, the last under sixty-four twenty-one at a time with masks.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn grey_rgb(row: &[u8], out: &mut [u8]) -> usize {
        // Byte `i` of output vector `j` is pixel `(64j + i) / 3`.
        const SPREAD: [__m512i; 3] = {
            let mut spread = [[0u8; 64]; 3];
            let mut j = 0;
            while j < 3 {
                let mut i = 0;
                while i < 64 {
                    spread[j][i] = ((64 * j + i) / 3) as u8;
                    i += 1;
                }
                j += 1;
            }
            // SAFETY: 64 bytes are a valid `__m512i`.
            unsafe { std::mem::transmute::<[[u8; 64]; 3], [__m512i; 3]>(spread) }
        };
        let pixels = row.len().min(out.len() / 3);
        let mut x = 0;
        while x + 64 <= pixels {
            // SAFETY: pixels x..x + 64 are the 64 bytes read and their 192 bytes written,
            // inside both slices as `pixels` bounds them.
            unsafe {
                let v = _mm512_loadu_si512(row.as_ptr().add(x).cast());
                for (j, index) in SPREAD.into_iter().enumerate() {
                    _mm512_storeu_si512(
                        out.as_mut_ptr().add(3 * x + 64 * j).cast(),
                        _mm512_permutexvar_epi8(index, v),
                    );
                }
            }
            x += 64;
        }
        for x in (x..pixels).step_by(21) {
            let n = (pixels - x).min(21);
            // SAFETY: the masks read the n bytes of pixels x..x + n from `row` and write
            // their 3n bytes into `out`, both inside as `pixels` bounds them.
            unsafe {
                let v = _mm512_maskz_loadu_epi8(u64::MAX >> (64 - n), row.as_ptr().add(x).cast());
                let v = _mm512_permutexvar_epi8(SPREAD[0], v);
                _mm512_mask_storeu_epi8(out.as_mut_ptr().add(3 * x).cast(), u64::MAX >> (64 - 3 * n), v);
            }
        }
        pixels
    }

    /// Row `y` of `src` as a horizontal pass for `C`-byte pixels reads it: its memory run,
    /// or, where `C` is 3 and the rows are RGBX, the row's pixels in `span` (those the pass
    /// reads) packed to RGB into `packed`; with the pixels in `span` of the row to fetch
    /// ahead: the next source row (none after the last), or row `y` of the source's rows
    /// ahead where it has them.
    ///
    /// Packing a row waits on its reads from memory, unless the row was fetched while the
    /// one before was resampled. On a 2-vCPU Xeon, the time of a PIL image against the same
    /// pixels as an array, for torch's bicubic resize of 4032x3024 to 384x384: 1.24-1.30x
    /// with the rows read in place, 1.34-1.37x packed, 1.18-1.20x packed and fetched ahead;
    /// for Pillow's bilinear resize of 1920x1080 to 896x896 (the planar pass): 1.16x packed,
    /// 1.07x packed and fetched ahead. Rows read in place gain from it too: LLaVA-1.5's
    /// torchvision resize of 4032x3024 to 448x336 took 11.0 -> 9.3 ms for a PIL image and
    /// 10.5 -> 8.7 ms for an array. A crop packs and fetches only the pixels it reads: the
    /// 336 center columns of LLaVA-1.5's 448 (3060 of 4032 source pixels at 12 MP) took a
    /// PIL image 7.57 -> 7.18 ms (Pillow's bicubic) and 6.03 -> 5.57 ms (torchvision's)
    /// on a 2-vCPU Zen 4 EPYC (7-round A/B; arrays unchanged).
    fn packed_row<'a, const C: usize>(
        src: &Source<'a>,
        y: usize,
        span: &Range<usize>,
        packed: &'a mut Vec<u8>,
    ) -> (&'a [u8], Ahead<'a>) {
        let c = src.channels();
        let (row, to_l2) = match src.ahead {
            // Rows packed next (see `resize_together`).
            Some(ahead) if y < ahead.size().0 => {
                let c = ahead.channels();
                (&ahead.row(y)[span.start * c..span.end * c], true)
            }
            None if y + 1 < src.size().0 => {
                let row = &src.row(y + 1)[span.start * c..span.end * c];
                (row, 2 * row.len() > 16 << 10)
            }
            _ => (&[][..], false),
        };
        if C == c {
            return (src.tail(y), Ahead { row, to_l2 });
        }
        packed.resize(src.size().1 * 3, 0);
        super::pack_rgbx(
            &src.row(y)[span.start * 4..span.end * 4],
            &mut packed[span.start * 3..span.end * 3],
        );
        (packed, Ahead { row, to_l2 })
    }

    /// The source row a horizontal pass reads next, fetched while it resamples the current
    /// one: into the L1 cache where two rows fill at most half of a Zen 4 core's 32 KB,
    /// into L2 where they are longer. Packed first, 4032 pixels need the packed row (12 KB),
    /// the RGBX row just packed (16 KB) and the next one (16 KB); 1920 pixels under half
    /// that, and they were fetched into L2 too until a 1920x1080 PIL image through the
    /// torchvision processor of `PaliGemma` 2 (1920 -> 224 wide, 35 taps) took 1.46 ->
    /// 1.32-1.40 ms with them fetched into L1 (3-round A/B; 1.16-1.22 ms as an array), and
    /// through PI0's PIL-backend processor 1.40-1.42 -> 1.22-1.36 ms. On a 2-vCPU Zen 4 EPYC
    /// (9-round A/B), a 12 MP PIL image took 15.7 -> 14.8 ms through Llama 4's torchvision
    /// processor and 5.63 -> 5.38 ms through that of `siglip2-base-patch16-naflex` once
    /// packed rows were fetched into L2. Rows read in place, 4032 pixels long, gained as
    /// much (7 rounds, torchvision backends): UDOP took 5.62 -> 3.85 ms for a PIL image
    /// and 4.39 -> 3.70 ms for an array, `siglip2-base-patch16-naflex` 5.81 -> 4.28 ms for
    /// a PIL image, and for an array Llama 4 11.7 -> 10.0 ms, `InternVL3-8B-hf` 16.1 ->
    /// 14.9 ms, `llava-v1.6-mistral-7b-hf` 13.8 -> 13.2 ms; LLaVA-1.5, `SigLIP`, Gemma 3,
    /// `PaliGemma` 2, Idefics2, `SmolVLM2` and Aya Vision stayed within 1.5%. Fetching
    /// 1920-pixel rows into L2 as well moved two 1920x1080 PIL images apart, Llama 4's 5%
    /// faster and Gemma 3's 4% slower, so those stay in L1.
    struct Ahead<'a> {
        row: &'a [u8],
        to_l2: bool,
    }

    impl Ahead<'_> {
        /// Asks for the `i`th of `parts` equal runs of the row's cache lines to be brought
        /// into the cache (a hint, which reads nothing itself).
        #[target_feature(enable = "avx512f")]
        fn fetch(&self, i: usize, parts: usize) {
            let row = self.row;
            let lines = row.len().div_ceil(64).div_ceil(parts.max(1));
            for line in i * lines..((i + 1) * lines).min(row.len().div_ceil(64)) {
                let at = row[64 * line..].as_ptr().cast();
                // A prefetch never faults, and the address lies inside `row`.
                if self.to_l2 {
                    _mm_prefetch::<_MM_HINT_T1>(at);
                } else {
                    _mm_prefetch::<_MM_HINT_T0>(at);
                }
            }
        }
    }

    /// Four 128-bit lanes, lane `j` being `lane(j)`.
    #[target_feature(enable = "avx512f")]
    fn lanes(lane: impl Fn(usize) -> __m128i) -> __m512i {
        let v = _mm512_castsi128_si512(lane(0));
        let v = _mm512_inserti32x4::<1>(v, lane(1));
        let v = _mm512_inserti32x4::<2>(v, lane(2));
        _mm512_inserti32x4::<3>(v, lane(3))
    }

    /// The shuffle of pairs (t, t + 1) from a window of `c`-byte pixels loaded into each lane.
    #[target_feature(enable = "avx512f")]
    fn lane_pairs(c: usize, t: usize) -> __m512i {
        let z = -1;
        let [p0, p1, p2, p3, p4, p5] = pair_bytes(c, 0, t).map(|i| i as i8);
        _mm512_broadcast_i32x4(_mm_setr_epi8(
            p0, z, p1, z, p2, z, p3, z, p4, z, p5, z, z, z, z, z,
        ))
    }

    /// The 16 bytes at `off` of `run`, zero past its end.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VL.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn load16(run: &[u8], off: usize) -> __m128i {
        let at = run.as_ptr().wrapping_add(off);
        // SAFETY: in bounds, or masked to the bytes that are (masked-off bytes are not read).
        unsafe {
            if off + 16 <= run.len() {
                _mm_loadu_si128(at.cast())
            } else {
                let keep = (1u32 << run.len().saturating_sub(off)) - 1;
                _mm_maskz_loadu_epi8(keep as u16, at.cast())
            }
        }
    }

    /// The `2 + FAR` vectors of packed RGB that the RGBX pixels at byte `off` of `run` pack
    /// to, as [`load64`] would read them from the packed row (zero past its end; the rest
    /// zero): three RGBX vectors give two, four three, six four.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn packed_rgbx<const FAR: usize>(run: &[u8], off: usize) -> [__m512i; 4] {
        let zero = _mm512_setzero_si512();
        // SAFETY: the caller guarantees the CPU features; the loads are masked to `run`.
        unsafe {
            let rgbx = |k: usize| load64(run, off + 64 * k);
            let (a, b, c) = (rgbx(0), rgbx(1), rgbx(2));
            let pack = |lo, j: usize, hi| _mm512_permutex2var_epi8(lo, RGBX_RGB[j], hi);
            [
                pack(a, 0, b),
                pack(b, 1, c),
                if FAR > 0 { pack(c, 2, rgbx(3)) } else { zero },
                if FAR > 1 { pack(rgbx(4), 0, rgbx(5)) } else { zero },
            ]
        }
    }

    /// The 64 bytes at `off` of `run`, zero past its end.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and BW.
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn load64(run: &[u8], off: usize) -> __m512i {
        let at = run.as_ptr().wrapping_add(off);
        // SAFETY: in bounds, or masked to the bytes that are.
        unsafe {
            if off + 64 <= run.len() {
                _mm512_loadu_si512(at.cast())
            } else {
                let keep = u64::MAX
                    .checked_shr((64 - run.len().saturating_sub(off)) as u32)
                    .unwrap_or(0);
                _mm512_maskz_loadu_epi8(keep, at.cast())
            }
        }
    }

    /// The 128 bytes at `off` of `run` as two vectors: read whole when `inside` (the
    /// caller's promise that they lie in `run`), else masked to `run`, zero past its end.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and BW, and `inside` must hold if given.
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn load128(run: &[u8], off: usize, inside: bool) -> (__m512i, __m512i) {
        // SAFETY: the caller promises the 128 bytes lie in `run` when `inside`.
        unsafe {
            if inside {
                let at = run.as_ptr().add(off);
                (
                    _mm512_loadu_si512(at.cast()),
                    _mm512_loadu_si512(at.add(64).cast()),
                )
            } else {
                (load64(run, off), load64(run, off + 64))
            }
        }
    }

    /// [`super::avx2::vertical_rows`] 64 bytes of a row at a time, on rows of at least 64
    /// bytes; the AVX2 pass runs narrower rows and the enlarging split tables it widens.
    ///
    /// # Safety
    /// The CPU must support AVX2 and AVX-512F, BW, VL, VBMI and VNNI.
    #[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")]
    pub(super) unsafe fn vertical_rows(
        band: &[u8],
        band_first: usize,
        stride: usize,
        coeffs: &Coeffs,
        rows: Range<usize>,
        out: &mut [u8],
    ) {
        if stride < 64 {
            // SAFETY: the caller guarantees AVX2.
            unsafe { avx2::vertical_rows(band, band_first, stride, coeffs, rows, out) };
        } else if let Some(span) = wide_span(coeffs, &rows, stride) {
            let band = &band[(span.start - band_first) * stride..(span.end - band_first) * stride];
            // SAFETY: the caller guarantees AVX-512F and BW; rows are at least 64 bytes.
            unsafe { vertical_rows_wide::<__m512i>(band, span.start, stride, coeffs, rows, out) };
        } else {
            // SAFETY: the caller guarantees AVX-512F and BW.
            unsafe { vertical_blocks::<__m512i>(band, band_first, stride, coeffs, rows, out) };
        }
    }

    impl Horizontal {
        /// # Safety
        /// The CPU must support AVX-512F and BW.
        #[target_feature(enable = "avx512f,avx512bw")]
        pub(super) unsafe fn new(coeffs: Coeffs) -> Horizontal {
            let out_w = coeffs.out_len();
            let groups = (0..out_w)
                .map(|i| coeffs.taps(i).1.len().div_ceil(4))
                .max()
                .unwrap_or(0);
            let split_taps = !whole(&coeffs.k);
            let last = |x: usize| x.min(out_w.saturating_sub(1));
            let starts: Vec<usize> = (0..out_w.div_ceil(4) * 4)
                .map(|x| coeffs.taps(last(x)).0)
                .collect();
            let parts: &[fn(i32) -> i16] = if split_taps {
                &[|k| split(k).0, |k| split(k).1]
            } else {
                &[narrow]
            };
            let mut vectors = Vec::with_capacity(starts.len() / 4 * groups * 2 * parts.len());
            for block in (0..starts.len()).step_by(4) {
                for g in 0..groups {
                    for &part in parts {
                        for t in [4 * g, 4 * g + 2] {
                            vectors.push(lanes(|j| {
                                let (_, k) = coeffs.taps(last(block + j));
                                let [t0, t1] = [t, t + 1].map(|t| part(k.get(t).copied().unwrap_or(0)));
                                _mm_setr_epi16(t0, t1, t0, t1, t0, t1, 0, 0)
                            }));
                        }
                    }
                }
            }
            let permutes = [3, 4].map(|c| {
                // The last byte a permute reads is pair_bytes(c, (s3 - s0) * c, 2)[5].
                if !starts.chunks_exact(4).all(|s| (s[3] - s[0] + 3) * c + 2 < 128) {
                    return Vec::new();
                }
                let mut permutes = Vec::with_capacity(starts.len() / 2);
                for s in starts.chunks_exact(4) {
                    for t in [0, 2] {
                        // Bytes outside PAIR_SLOTS are zeroed by the permute's mask.
                        permutes.push(lanes(|j| {
                            let [p0, p1, p2, p3, p4, p5] =
                                pair_bytes(c, (s[j] - s[0]) * c, t).map(|i| i as i8);
                            _mm_setr_epi8(p0, 0, p1, 0, p2, 0, p3, 0, p4, 0, p5, 0, 0, 0, 0, 0)
                        }));
                    }
                }
                permutes
            });
            Horizontal {
                planar: Planar::new(&coeffs, split_taps).map(Box::new),
                octets: Octets::new(&coeffs, &starts, split_taps).map(Box::new),
                coeffs,
                groups,
                split: split_taps,
                starts,
                permutes,
                vectors,
            }
        }

        /// Resamples source rows `rows` of `src` (RGB, RGBX, or grey where
        /// [`Horizontal::packs`] says it reads them) into `out` (that many rows of packed
        /// RGB).
        ///
        /// # Safety
        /// The CPU must support AVX-512F, BW, VL, VBMI and VNNI.
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")]
        pub(super) unsafe fn run(&self, src: &Source<'_>, rows: Range<usize>, out: &mut [u8]) {
            if src.channels() == 1 {
                if let Some((planar, (permutes, far))) =
                    self.planar.as_ref().and_then(|p| Some((p, p.grey.as_ref()?)))
                {
                    let (permutes, far) = (&permutes[..], *far);
                    // SAFETY (both arms): the caller guarantees the CPU features.
                    unsafe {
                        if self.split {
                            self.planar_n::<1, 1, true>(planar, permutes, far, src, rows, out);
                        } else {
                            self.planar_n::<1, 1, false>(planar, permutes, far, src, rows, out);
                        }
                    }
                    return;
                }
                let (octets, windows) = self
                    .octets
                    .as_ref()
                    .and_then(|o| Some((o, o.grey.as_ref()?)))
                    .expect("grey rows only where the planar or eight-taps-a-lane pass reads them");
                // SAFETY (both arms): the caller guarantees the CPU features.
                unsafe {
                    if self.split {
                        self.octets_n::<1, true>(octets, windows, src, rows, out);
                    } else {
                        self.octets_n::<1, false>(octets, windows, src, rows, out);
                    }
                }
                return;
            }
            let c = self.pixel(src.channels());
            if let Some((planar, Some(permutes))) = self.planar.as_ref().map(|p| (p, &p.permutes[c - 3])) {
                let far = planar.far[c - 3];
                // SAFETY (all arms): the caller guarantees the CPU features.
                unsafe {
                    match (src.channels(), c, self.split) {
                        (4, 4, true) => self.planar_n::<4, 4, true>(planar, permutes, far, src, rows, out),
                        (4, 4, false) => self.planar_n::<4, 4, false>(planar, permutes, far, src, rows, out),
                        (4, _, true) => self.planar_n::<4, 3, true>(planar, permutes, far, src, rows, out),
                        (4, _, false) => self.planar_n::<4, 3, false>(planar, permutes, far, src, rows, out),
                        (_, _, true) => self.planar_n::<3, 3, true>(planar, permutes, far, src, rows, out),
                        (_, _, false) => self.planar_n::<3, 3, false>(planar, permutes, far, src, rows, out),
                    }
                }
                return;
            }
            if let Some((octets, Some(windows))) = self.octets.as_ref().map(|o| (o, &o.permutes[c - 3])) {
                // SAFETY (all arms): the caller guarantees the CPU features.
                unsafe {
                    match (c == 4, self.split) {
                        (true, true) => self.octets_n::<4, true>(octets, windows, src, rows, out),
                        (true, false) => self.octets_n::<4, false>(octets, windows, src, rows, out),
                        (false, true) => self.octets_n::<3, true>(octets, windows, src, rows, out),
                        (false, false) => self.octets_n::<3, false>(octets, windows, src, rows, out),
                    }
                }
                return;
            }
            let near = !self.permutes[c - 3].is_empty();
            // SAFETY (all arms): the caller guarantees the CPU features.
            unsafe {
                match (c == 4, self.split, near) {
                    (true, true, true) => self.rows_n::<4, true, true>(src, rows, out),
                    (true, true, false) => self.rows_n::<4, true, false>(src, rows, out),
                    (true, false, true) => self.rows_n::<4, false, true>(src, rows, out),
                    (true, false, false) => self.rows_n::<4, false, false>(src, rows, out),
                    (false, true, true) => self.rows_n::<3, true, true>(src, rows, out),
                    (false, true, false) => self.rows_n::<3, true, false>(src, rows, out),
                    (false, false, true) => self.rows_n::<3, false, true>(src, rows, out),
                    (false, false, false) => self.rows_n::<3, false, false>(src, rows, out),
                }
            }
        }

        /// The bytes a pixel [`Horizontal::run`] reads rows of `channels`-byte pixels (RGB
        /// or RGBX) as: 4 where it reads RGBX rows where they are, 3 where it packs them to
        /// RGB (or they are RGB), as the first of its passes that fits them needs:
        /// - the planar pass, where it has no permutes of 4-byte pixels ([`Planar::permutes`]:
        ///   it packs each block's RGBX pixels in registers, see [`Horizontal::packs`]);
        /// - the eight-taps-a-lane pass, with the fewer windows a block (one window before
        ///   two: `SigLIP`'s 12 MP PIL image took 6.95 ms in halves, 4.15 ms packed);
        /// - the four-output blocks, where 3-byte pixels lie near enough for their
        ///   one-window blocks and 4-byte ones do not.
        pub(super) fn pixel(&self, channels: usize) -> usize {
            let pixels = [channels, 3];
            if let Some(planar) = &self.planar {
                if let Some(c) = pixels.into_iter().find(|&c| planar.permutes[c - 3].is_some()) {
                    return c;
                }
            }
            if let Some(octets) = &self.octets {
                let fewest = pixels
                    .into_iter()
                    .filter_map(|c| octets.permutes[c - 3].as_ref().map(|windows| (c, windows.halves)))
                    .min_by_key(|&(_, halves)| halves);
                if let Some((c, _)) = fewest {
                    return c;
                }
            }
            pixels
                .into_iter()
                .find(|&c| !self.permutes[c - 3].is_empty())
                .unwrap_or(channels)
        }

        /// Whether [`Horizontal::run`] needs `channels`-byte rows packed to RGB before it
        /// resamples them: grey rows unless the planar or eight-taps-a-lane pass fits the
        /// table (they read them where they are, one channel for three); RGBX rows where
        /// [`Horizontal::pixel`] reads them as RGB, except in the planar pass, which packs
        /// the RGBX pixels of each block in registers as it loads them. On a 2-vCPU Zen 4
        /// EPYC (2-round A/B), a 12 MP PIL image through Gemma 3's torchvision processor
        /// (4000 -> 896 wide, ten taps) took 6.44-6.58 ms packed a row at a time, 5.30-5.51
        /// ms packed in registers (4.87-5.04 ms as an array).
        pub(super) fn packs(&self, channels: usize) -> bool {
            let planar = self.planar.as_ref();
            if channels == 1 {
                return planar.is_none_or(|p| p.grey.is_none())
                    && self.octets.as_ref().is_none_or(|o| o.grey.is_none());
            }
            self.pixel(channels) != channels && planar.is_none_or(|p| p.permutes[0].is_none())
        }

        /// Test only: the pass with which [`Horizontal::run`] reads grey rows in place, if
        /// it does: ("planar", tap pairs, split, far vectors) or ("octets", groups, split,
        /// two windows a block).
        #[cfg(test)]
        pub(super) fn grey_shape(&self) -> Option<(&'static str, usize, bool, usize)> {
            if let Some(planar) = &self.planar {
                if let Some((_, far)) = &planar.grey {
                    return Some(("planar", planar.pairs, self.split, *far));
                }
            }
            let octets = self.octets.as_ref()?;
            let windows = octets.grey.as_ref()?;
            Some(("octets", octets.groups, self.split, usize::from(windows.halves)))
        }

        /// Test only: the (pixel bytes, tap pairs, split, far vectors) with which
        /// [`Horizontal::run`] takes [`Horizontal::planar`] for `channels`-byte rows, if it does.
        #[cfg(test)]
        pub(super) fn planar_shape(&self, channels: usize) -> Option<(usize, usize, bool, usize)> {
            let c = self.pixel(channels);
            let planar = self.planar.as_ref()?;
            planar.permutes[c - 3].as_ref()?;
            Some((c, planar.pairs, self.split, planar.far[c - 3]))
        }

        /// [`Horizontal::planar`] with its tap pairs and `far` vectors unrolled.
        ///
        /// # Safety
        /// As [`Horizontal::run`].
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")]
        unsafe fn planar_n<const IN: usize, const C: usize, const SPLIT: bool>(
            &self,
            planar: &Planar,
            permutes: &[__m512i],
            far: usize,
            src: &Source<'_>,
            rows: Range<usize>,
            out: &mut [u8],
        ) {
            // SAFETY (all arms): the caller guarantees the CPU features.
            unsafe {
                match (planar.pairs, far) {
                    (1, 0) => self.planar::<1, IN, C, SPLIT, 0>(planar, permutes, src, rows, out),
                    (2, 0) => self.planar::<2, IN, C, SPLIT, 0>(planar, permutes, src, rows, out),
                    (3, 0) => self.planar::<3, IN, C, SPLIT, 0>(planar, permutes, src, rows, out),
                    (4, 0) => self.planar::<4, IN, C, SPLIT, 0>(planar, permutes, src, rows, out),
                    (_, 0) => self.planar::<5, IN, C, SPLIT, 0>(planar, permutes, src, rows, out),
                    (1, 1) => self.planar::<1, IN, C, SPLIT, 1>(planar, permutes, src, rows, out),
                    (2, 1) => self.planar::<2, IN, C, SPLIT, 1>(planar, permutes, src, rows, out),
                    (3, 1) => self.planar::<3, IN, C, SPLIT, 1>(planar, permutes, src, rows, out),
                    (4, 1) => self.planar::<4, IN, C, SPLIT, 1>(planar, permutes, src, rows, out),
                    (_, 1) => self.planar::<5, IN, C, SPLIT, 1>(planar, permutes, src, rows, out),
                    (1, _) => self.planar::<1, IN, C, SPLIT, 2>(planar, permutes, src, rows, out),
                    (2, _) => self.planar::<2, IN, C, SPLIT, 2>(planar, permutes, src, rows, out),
                    (3, _) => self.planar::<3, IN, C, SPLIT, 2>(planar, permutes, src, rows, out),
                    (4, _) => self.planar::<4, IN, C, SPLIT, 2>(planar, permutes, src, rows, out),
                    (_, _) => self.planar::<5, IN, C, SPLIT, 2>(planar, permutes, src, rows, out),
                }
            }
        }

        /// [`Horizontal::run`] with [`Planar`]'s blocks: `P` tap pairs, taps split when
        /// `SPLIT`, rows of `IN`-byte pixels, `permutes` those of `C`-byte pixels (RGBX
        /// pixels packed to RGB as a block loads them when `IN` is 4 and `C` is 3; grey
        /// pixels, one channel stored as R, G and B, when `C` is 1), reading `FAR` vectors
        /// of 64 bytes a block past the first two.
        ///
        /// # Safety
        /// As [`Horizontal::run`].
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")]
        unsafe fn planar<
            const P: usize,
            const IN: usize,
            const C: usize,
            const SPLIT: bool,
            const FAR: usize,
        >(
            &self,
            planar: &Planar,
            permutes: &[__m512i],
            src: &Source<'_>,
            rows: Range<usize>,
            out: &mut [u8],
        ) {
            let parts = if SPLIT { 2 } else { 1 };
            let rounding = _mm512_set1_epi32(self.coeffs.rounding());
            let shift = _mm_cvtsi32_si128(self.coeffs.precision() as i32);
            let zero = _mm512_setzero_si512();
            let out_w = self.coeffs.out_len();
            let channels = if C == 1 { 1 } else { 3 };
            let mut packed = Vec::new();
            let span = self.coeffs.input_span();
            for (y, out_row) in rows.zip(out.chunks_exact_mut(out_w * 3)) {
                // As in `rows`: loads past the row meet zero taps.
                let (run, next) = packed_row::<IN>(src, y, &span, &mut packed);
                for (b, &first) in planar.starts.iter().enumerate() {
                    next.fetch(b, planar.starts.len());
                    // SAFETY: the caller guarantees the CPU features; the loads are masked to
                    // `run`.
                    let [v, w, x, z] = unsafe {
                        if IN == C {
                            let at = first * C;
                            let far = |k: usize| {
                                if FAR >= k {
                                    load64(run, at + 64 + 64 * k)
                                } else {
                                    zero
                                }
                            };
                            [load64(run, at), load64(run, at + 64), far(1), far(2)]
                        } else {
                            packed_rgbx::<FAR>(run, 4 * first)
                        }
                    };
                    let taps = &planar.taps[b * P * parts..][..P * parts];
                    let permutes = &permutes[b * channels * P..][..channels * P];
                    let sum = |channel: usize| {
                        let mut hi = zero;
                        let mut lo = zero;
                        for p in 0..P {
                            let index = permutes[channel * P + p];
                            // An index past 127 (bit 7 set; only in pair slots) reads a byte
                            // of `x` by its low six bits (one vector past the first two), or
                            // of `x` and `z` by its low seven (two).
                            let far = _mm512_movepi8_mask(index);
                            let pairs = match FAR {
                                0 => _mm512_maskz_permutex2var_epi8(BYTE_PAIRS, v, index, w),
                                1 => _mm512_mask_permutexvar_epi8(
                                    _mm512_maskz_permutex2var_epi8(BYTE_PAIRS & !far, v, index, w),
                                    far,
                                    index,
                                    x,
                                ),
                                _ => _mm512_mask_blend_epi8(
                                    far,
                                    _mm512_maskz_permutex2var_epi8(BYTE_PAIRS, v, index, w),
                                    _mm512_permutex2var_epi8(x, index, z),
                                ),
                            };
                            hi = _mm512_add_epi32(hi, _mm512_madd_epi16(pairs, taps[p * parts]));
                            if SPLIT {
                                lo = _mm512_add_epi32(lo, _mm512_madd_epi16(pairs, taps[p * parts + 1]));
                            }
                        }
                        let sum = if SPLIT {
                            _mm512_add_epi32(_mm512_slli_epi32::<{ LO_BITS as u32 }>(hi), lo)
                        } else {
                            hi
                        };
                        _mm512_sra_epi32(_mm512_add_epi32(sum, rounding), shift)
                    };
                    let sums: [__m512i; 3] = if C == 1 {
                        [sum(0); 3]
                    } else {
                        std::array::from_fn(sum)
                    };
                    // Saturating packs clamp to 0..=255 as `clip8` does.
                    let v = _mm512_packus_epi16(
                        _mm512_packs_epi32(sums[0], sums[1]),
                        _mm512_packs_epi32(sums[2], zero),
                    );
                    let v = _mm512_permutexvar_epi8(PLANAR_RGB, v);
                    let n = (out_w - 16 * b).min(16);
                    // SAFETY: the mask writes only the 3n bytes of outputs 16b..16b + n.
                    unsafe {
                        _mm512_mask_storeu_epi8(
                            out_row.as_mut_ptr().add(48 * b).cast(),
                            (1 << (3 * n)) - 1,
                            v,
                        );
                    }
                }
            }
        }

        /// [`Horizontal::run`] for pixels of `C` bytes (RGBX rows packed to RGB first when
        /// `C` is 3), taps split when `SPLIT`, lanes filled by permutes when `NEAR`: the
        /// common group counts unrolled.
        ///
        /// # Safety
        /// As [`Horizontal::run`].
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")]
        unsafe fn rows_n<const C: usize, const SPLIT: bool, const NEAR: bool>(
            &self,
            src: &Source<'_>,
            rows: Range<usize>,
            out: &mut [u8],
        ) {
            // SAFETY (all arms): the caller guarantees the CPU features.
            unsafe {
                match self.groups {
                    1 => self.rows::<1, C, SPLIT, NEAR>(src, rows, out),
                    2 => self.rows::<2, C, SPLIT, NEAR>(src, rows, out),
                    3 => self.rows::<3, C, SPLIT, NEAR>(src, rows, out),
                    4 => self.rows::<4, C, SPLIT, NEAR>(src, rows, out),
                    _ => self.rows::<0, C, SPLIT, NEAR>(src, rows, out),
                }
            }
        }

        /// [`Horizontal::run`] with `N` groups per output, or `self.groups` when `N` is 0.
        ///
        /// # Safety
        /// As [`Horizontal::run`].
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")]
        unsafe fn rows<const N: usize, const C: usize, const SPLIT: bool, const NEAR: bool>(
            &self,
            src: &Source<'_>,
            rows: Range<usize>,
            out: &mut [u8],
        ) {
            let groups = if N == 0 { self.groups } else { N };
            let per_block = groups * if SPLIT { 4 } else { 2 };
            let (first, second) = (lane_pairs(C, 0), lane_pairs(C, 2));
            let rounding = _mm512_set1_epi32(self.coeffs.rounding());
            let shift = _mm_cvtsi32_si128(self.coeffs.precision() as i32);
            // Where the loads of block `b` end in a row's run.
            let reach = |b: usize| {
                let starts = &self.starts[4 * b..4 * b + 4];
                let end = if NEAR {
                    starts[0] * C + 128
                } else {
                    starts.iter().max().map_or(0, |&s| s * C) + 16
                };
                end + 4 * C * (groups - 1)
            };
            // The sums of block `b` (outputs 4b..4b + 4) of `run`, as `in_pairs` takes them.
            let block = |run: &[u8], b: usize, inside: bool| {
                let starts = &self.starts[4 * b..4 * b + 4];
                let mut hi = _mm512_setzero_si512();
                let mut lo = _mm512_setzero_si512();
                for (g, k) in self.vectors[b * per_block..][..per_block]
                    .chunks_exact(per_block / groups)
                    .enumerate()
                {
                    let off = 4 * C * g;
                    // SAFETY: the caller guarantees the CPU features; the loads lie inside
                    // `run` or are masked to it.
                    let (low, high) = unsafe {
                        if NEAR {
                            let (v, w) = load128(run, starts[0] * C + off, inside);
                            let p = &self.permutes[C - 3][2 * b..2 * b + 2];
                            (
                                _mm512_maskz_permutex2var_epi8(PAIR_SLOTS, v, p[0], w),
                                _mm512_maskz_permutex2var_epi8(PAIR_SLOTS, v, p[1], w),
                            )
                        } else {
                            let v = lanes(|j| {
                                let at = starts[j] * C + off;
                                if inside {
                                    _mm_loadu_si128(run.as_ptr().add(at).cast())
                                } else {
                                    load16(run, at)
                                }
                            });
                            (_mm512_shuffle_epi8(v, first), _mm512_shuffle_epi8(v, second))
                        }
                    };
                    hi = _mm512_add_epi32(hi, _mm512_madd_epi16(low, k[0]));
                    hi = _mm512_add_epi32(hi, _mm512_madd_epi16(high, k[1]));
                    if SPLIT {
                        lo = _mm512_add_epi32(lo, _mm512_madd_epi16(low, k[2]));
                        lo = _mm512_add_epi32(lo, _mm512_madd_epi16(high, k[3]));
                    }
                }
                let sum = if SPLIT {
                    _mm512_add_epi32(_mm512_slli_epi32::<{ LO_BITS as u32 }>(hi), lo)
                } else {
                    hi
                };
                _mm512_sra_epi32(_mm512_add_epi32(sum, rounding), shift)
            };
            // SAFETY: the caller guarantees the CPU features.
            unsafe { self.in_pairs::<C>(src, rows, out, reach, block) };
        }

        /// Every row of `rows` of `src` (RGBX rows packed to RGB first when `C` is 3) into
        /// `out`, two blocks of four outputs at a time, so that one pack and one permute give
        /// 24 bytes: `block(run, b, inside)` is block `b`'s sums over the row's memory run
        /// `run`, each lane's [R, G, B, 0] rounded and shifted, `inside` saying that its
        /// loads, which end at `reach(b)`, lie in `run` (starts only grow, so a pair's last
        /// block answers for both).
        ///
        /// # Safety
        /// As [`Horizontal::run`].
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")]
        unsafe fn in_pairs<const C: usize>(
            &self,
            src: &Source<'_>,
            rows: Range<usize>,
            out: &mut [u8],
            reach: impl Fn(usize) -> usize,
            block: impl Fn(&[u8], usize, bool) -> __m512i,
        ) {
            let out_w = self.coeffs.out_len();
            let blocks = out_w.div_ceil(4);
            let mut packed = Vec::new();
            let span = self.coeffs.input_span();
            for (y, out_row) in rows.zip(out.chunks_exact_mut(out_w * 3)) {
                // Loads may run past this row into the next ones: those bytes meet zero
                // taps, so only the end of the row's memory run bounds them.
                let (run, next) = packed_row::<C>(src, y, &span, &mut packed);
                for b in (0..blocks).step_by(2) {
                    next.fetch(b / 2, blocks.div_ceil(2));
                    let pair = |inside| {
                        let a = block(run, b, inside);
                        (
                            a,
                            if b + 1 < blocks {
                                block(run, b + 1, inside)
                            } else {
                                a
                            },
                        )
                    };
                    let (a, c) = if reach((b + 1).min(blocks - 1)) <= run.len() {
                        pair(true)
                    } else {
                        pair(false)
                    };
                    // Saturating packs clamp to 0..=255 as `clip8` does.
                    let v = _mm512_packus_epi16(_mm512_packs_epi32(a, c), _mm512_setzero_si512());
                    let v = _mm512_permutexvar_epi8(PACKED_RGB, v);
                    let n = (out_w - 4 * b).min(8);
                    // SAFETY: the mask writes only the 3n bytes of outputs 4b..4b + n.
                    unsafe {
                        _mm256_mask_storeu_epi8(
                            out_row.as_mut_ptr().add(12 * b).cast(),
                            (1 << (3 * n)) - 1,
                            _mm512_castsi512_si256(v),
                        );
                    }
                }
            }
        }

        /// [`Horizontal::octets`] with its common group counts unrolled (blocks of two
        /// windows have many taps).
        ///
        /// # Safety
        /// As [`Horizontal::run`].
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")]
        unsafe fn octets_n<const C: usize, const SPLIT: bool>(
            &self,
            octets: &Octets,
            windows: &Windows,
            src: &Source<'_>,
            rows: Range<usize>,
            out: &mut [u8],
        ) {
            let permutes = &windows.permutes;
            // SAFETY (all arms): the caller guarantees the CPU features.
            unsafe {
                match (windows.halves, octets.groups) {
                    (false, 2) => self.octets::<2, C, SPLIT, false>(octets, permutes, src, rows, out),
                    (false, 3) => self.octets::<3, C, SPLIT, false>(octets, permutes, src, rows, out),
                    (false, 4) => self.octets::<4, C, SPLIT, false>(octets, permutes, src, rows, out),
                    (false, _) => self.octets::<0, C, SPLIT, false>(octets, permutes, src, rows, out),
                    (true, _) => self.octets::<0, C, SPLIT, true>(octets, permutes, src, rows, out),
                }
            }
        }

        /// [`Horizontal::run`] with [`Octets`]' blocks: `G` groups of taps per output
        /// (`octets.groups` when `G` is 0), taps split when `SPLIT`, `permutes` those of
        /// `C`-byte pixels (RGBX rows packed to RGB first when `C` is 3; grey, one channel
        /// stored as R, G and B, when `C` is 1), two windows a block when `HALVES` (see
        /// [`Windows`]).
        ///
        /// # Safety
        /// As [`Horizontal::run`].
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")]
        unsafe fn octets<const G: usize, const C: usize, const SPLIT: bool, const HALVES: bool>(
            &self,
            octets: &Octets,
            permutes: &[__m512i],
            src: &Source<'_>,
            rows: Range<usize>,
            out: &mut [u8],
        ) {
            let groups = if G == 0 { octets.groups } else { G };
            let parts = if SPLIT { 2 } else { 1 };
            let channels = if C == 1 { 1 } else { 3 };
            let per_block = if HALVES { 2 * channels } else { channels };
            let rounding = _mm512_set1_epi32(self.coeffs.rounding());
            let shift = _mm_cvtsi32_si128(self.coeffs.precision() as i32);
            let zero = _mm512_setzero_si512();
            // The second window starts at output 2's first tap, past the first one's.
            let last_window = if HALVES { 2 } else { 0 };
            let step = octets.width * C;
            let reach = |b: usize| self.starts[4 * b + last_window] * C + step * (groups - 1) + 128;
            let block = |run: &[u8], b: usize, inside: bool| {
                let permutes = &permutes[per_block * b..per_block * (b + 1)];
                let taps = &octets.taps[b * groups * parts..][..groups * parts];
                let mut hi = [zero; 3];
                let mut lo = [zero; 3];
                for g in 0..groups {
                    // SAFETY: the caller guarantees the CPU features; `in_pairs` says whether
                    // the loads lie in `run`.
                    let (v, w) = unsafe { load128(run, self.starts[4 * b] * C + step * g, inside) };
                    let (v2, w2) = if HALVES {
                        // SAFETY: as above.
                        unsafe { load128(run, self.starts[4 * b + 2] * C + step * g, inside) }
                    } else {
                        (v, w)
                    };
                    for channel in 0..channels {
                        let pairs = if HALVES {
                            _mm512_or_si512(
                                _mm512_maskz_permutex2var_epi8(HALF_PAIRS[0], v, permutes[2 * channel], w),
                                _mm512_maskz_permutex2var_epi8(
                                    HALF_PAIRS[1],
                                    v2,
                                    permutes[2 * channel + 1],
                                    w2,
                                ),
                            )
                        } else {
                            _mm512_maskz_permutex2var_epi8(BYTE_PAIRS, v, permutes[channel], w)
                        };
                        // Split taps add their products with one VNNI `dpwssd` instead of a
                        // multiply-add and an add: on a 2-vCPU Zen 4 EPYC (7-round A/B),
                        // 4032x3024 to 336x336 with Pillow's bicubic taps took 8.45 -> 7.89 ms,
                        // 1920x1080 to 224x224 1.30 -> 1.20 ms. Whole taps keep the pair, whose
                        // multiplies wait on no sum: with `dpwssd`, 640x480 to 224x224 (torch's
                        // bicubic, two groups) took 0.226 -> 0.235 ms.
                        hi[channel] = if SPLIT {
                            _mm512_dpwssd_epi32(hi[channel], pairs, taps[g * parts])
                        } else {
                            _mm512_add_epi32(hi[channel], _mm512_madd_epi16(pairs, taps[g * parts]))
                        };
                        if SPLIT {
                            lo[channel] = _mm512_dpwssd_epi32(lo[channel], pairs, taps[g * parts + 1]);
                        }
                    }
                }
                let sum = |channel: usize| {
                    if SPLIT {
                        _mm512_add_epi32(_mm512_slli_epi32::<{ LO_BITS as u32 }>(hi[channel]), lo[channel])
                    } else {
                        hi[channel]
                    }
                };
                // Grey: its one channel as R, G and B.
                let sums: [__m512i; 3] = if C == 1 {
                    [sum(0); 3]
                } else {
                    std::array::from_fn(sum)
                };
                // Each lane's four partial sums of R, G and B added into its [R, G, B, 0]:
                // [r0 + r2, g0 + g2, r1 + r3, g1 + g3] and [b0 + b2, 0, b1 + b3, 0], then
                // their 64-bit halves.
                let [red, green, blue] = sums;
                let rg = _mm512_add_epi32(
                    _mm512_unpacklo_epi32(red, green),
                    _mm512_unpackhi_epi32(red, green),
                );
                let bz = _mm512_add_epi32(
                    _mm512_unpacklo_epi32(blue, zero),
                    _mm512_unpackhi_epi32(blue, zero),
                );
                let sum = _mm512_add_epi32(_mm512_unpacklo_epi64(rg, bz), _mm512_unpackhi_epi64(rg, bz));
                _mm512_sra_epi32(_mm512_add_epi32(sum, rounding), shift)
            };
            // SAFETY: the caller guarantees the CPU features.
            unsafe { self.in_pairs::<C>(src, rows, out, reach, block) };
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{resize_rgb, resize_rgb_with, resize_source_with, Backend, Coeffs, Filter, Kernel, Source};
    use crate::error::TransformError;
    use crate::image::{pad_rgb, Pad, Rect};
    use crate::testing::Rng;

    #[test]
    fn grey_rows_repeat_to_rgb_on_every_backend() {
        let mut rng = Rng(7);
        for n in (0..200).chain([1000, 4031]) {
            let row: Vec<u8> = (0..n).map(|_| rng.below(256) as u8).collect();
            let want: Vec<u8> = row.iter().flat_map(|&g| [g; 3]).collect();
            let mut out = vec![0; 3 * n];
            super::grey_rgb(&row, &mut out);
            assert_eq!(out, want, "{n} pixels");
            #[cfg(target_arch = "x86_64")]
            if Kernel::avx2().is_some() {
                // The vectors of the backend below the one this CPU takes.
                let mut out = vec![0; 3 * n];
                // SAFETY: AVX2 was detected.
                let done = unsafe { super::avx2::grey_rgb(&row, &mut out) };
                assert_eq!(done, n / 16 * 16);
                assert_eq!(out[..3 * done], want[..3 * done], "{n} pixels");
            }
        }
    }

    #[test]
    fn tables_the_allocator_cannot_give_are_errors() {
        // A plain `Vec` growing to 2^60 outputs aborted the process.
        let (support, weight) = Filter::Bicubic.convolution().expect("a convolution");
        let table = Coeffs::new(30, 1 << 60, support, weight);
        assert!(matches!(
            table,
            Err(TransformError::OutOfMemory { arg: "dst_size", .. })
        ));
        let table = Coeffs::new(30, 40, support, weight).expect("a small table");
        let part = table.part("dst_size", 10..40).expect("a part of it");
        assert_eq!(part.out_len(), 30);
        assert!((0..30).all(|i| part.taps(i) == table.taps(10 + i)));
    }

    /// `rgb` (rows of width `w`) in every layout a [`Source`] reads, with its fourth or only channel:
    /// packed RGB, RGBX and grayscale in one block, then in blocks of `block` rows
    /// (Pillow's large images), with 64 random bytes after each block and in each X byte
    /// (which no output may depend on).
    pub(crate) fn layouts(
        rgb: &[u8],
        gray: &[u8],
        w: usize,
        block: usize,
        rng: &mut Rng,
    ) -> Vec<(usize, Vec<Vec<u8>>)> {
        let rgbx: Vec<u8> = rgb
            .chunks_exact(3)
            .flat_map(|p| [p[0], p[1], p[2], rng.below(256) as u8])
            .collect();
        let blocks = |pixels: &[u8], c: usize, rng: &mut Rng| -> Vec<Vec<u8>> {
            pixels
                .chunks(block * w * c)
                .map(|b| {
                    let mut b = b.to_vec();
                    b.extend((0..64).map(|_| rng.below(256) as u8));
                    b
                })
                .collect()
        };
        let whole = |pixels: &[u8], rng: &mut Rng| {
            let mut b = pixels.to_vec();
            b.extend((0..64).map(|_| rng.below(256) as u8));
            vec![b]
        };
        vec![
            (3, whole(rgb, rng)),
            (4, whole(&rgbx, rng)),
            (1, whole(gray, rng)),
            (3, blocks(rgb, 3, rng)),
            (4, blocks(&rgbx, 4, rng)),
            (1, blocks(gray, 1, rng)),
        ]
    }

    /// Row slices of `blocks` (as [`layouts`] makes them), each to its block's end.
    pub(crate) fn row_slices(blocks: &[Vec<u8>], w: usize, c: usize) -> Vec<&[u8]> {
        blocks
            .iter()
            .flat_map(|b| {
                let rows = (b.len() - 64) / (w * c);
                (0..rows).map(move |r| &b[r * w * c..])
            })
            .collect()
    }

    /// Filter, source size, destination size, expected bytes.
    type Case = (Filter, (usize, usize), (usize, usize), &'static [u8]);

    /// The test image: byte `i` is `(37 * i + 11) % 256`.
    fn pattern(h: usize, w: usize) -> Vec<u8> {
        (0..h * w * 3).map(|i| ((i * 37 + 11) % 256) as u8).collect()
    }

    /// Expected bytes made once with Pillow 13.0.0, for (filter, src, dst) by
    /// `python -c "import numpy as np; from PIL import Image; a =
    /// ((np.arange(H*W*3)*37+11)%256).astype(np.uint8).reshape(H,W,3);
    /// print(np.asarray(Image.fromarray(a).resize((W2,H2),
    /// resample=CODE))).ravel().tolist())"`.
    #[rustfmt::skip]
    const PILLOW: &[Case] = &[
        (Filter::Bicubic, (4, 5), (3, 2), &[99, 92, 141, 163, 126, 97, 111, 159, 139, 121, 113, 153, 174, 131, 130, 130, 167, 122]),
        // Height loses more than twice what width does: vertical pass first.
        (Filter::Lanczos, (5, 4), (2, 3), &[108, 144, 98, 151, 99, 156, 114, 128, 118, 164, 109, 147, 135, 149, 140, 120, 168, 124]),
        (Filter::Bilinear, (3, 2), (4, 5), &[11, 48, 85, 22, 59, 96, 67, 104, 141, 111, 148, 185, 122, 159, 196, 150, 27, 64, 145, 38, 75, 126, 83, 120, 105, 127, 164, 101, 138, 175, 220, 97, 38, 206, 99, 49, 148, 105, 94, 89, 111, 138, 75, 112, 149, 199, 236, 17, 185, 222, 28, 127, 164, 73, 68, 105, 117, 54, 91, 128]),
        (Filter::Hamming, (4, 5), (2, 7), &[35, 72, 109, 108, 145, 176, 144, 167, 195, 124, 38, 75, 113, 137, 174, 146, 142, 137, 213, 127, 41, 116, 153, 190, 189, 145, 101, 211, 139, 66, 82, 119, 156, 181, 218, 145, 147, 181, 137, 58, 85, 122]),
        (Filter::Box, (4, 5), (3, 2), &[122, 74, 111, 144, 181, 90, 102, 139, 133, 145, 118, 155, 166, 117, 154, 145, 182, 91]),
        (Filter::Nearest, (4, 5), (3, 7), &[11, 48, 85, 122, 159, 196, 122, 159, 196, 233, 14, 51, 88, 125, 162, 88, 125, 162, 199, 236, 17, 97, 134, 171, 208, 245, 26, 208, 245, 26, 63, 100, 137, 174, 211, 248, 174, 211, 248, 29, 66, 103, 140, 177, 214, 251, 32, 69, 251, 32, 69, 106, 143, 180, 217, 254, 35, 217, 254, 35, 72, 109, 146]),
        (Filter::Bicubic, (5, 4), (2, 4), &[112, 157, 87, 124, 100, 137, 167, 115, 160, 90, 127, 103, 150, 98, 128, 165, 141, 178, 108, 153, 101, 131, 168, 144]),
        (Filter::Lanczos, (4, 5), (4, 2), &[105, 77, 129, 170, 142, 88, 83, 135, 172, 148, 94, 131, 141, 178, 110, 100, 137, 164, 184, 116, 143, 143, 170, 102]),
        (Filter::Bicubic, (1, 1), (2, 3), &[11, 48, 85, 11, 48, 85, 11, 48, 85, 11, 48, 85, 11, 48, 85, 11, 48, 85]),
        (Filter::Bilinear, (2, 9), (1, 1), &[130, 129, 133]),
    ];

    fn backends() -> Vec<Backend> {
        let mut all = vec![Backend::Scalar];
        for backend in [Backend::Avx2, Backend::Avx512] {
            if Kernel::select(backend).is_ok() {
                all.push(backend);
            }
        }
        all
    }

    #[test]
    fn matches_pillow_on_fixed_cases() {
        for &(filter, src_size, dst_size, want) in PILLOW {
            let src = pattern(src_size.0, src_size.1);
            for backend in backends() {
                let mut dst = vec![0; want.len()];
                resize_rgb_with(&src, src_size, &mut dst, dst_size, filter, backend).unwrap();
                assert_eq!(
                    dst, want,
                    "{filter:?} {src_size:?} -> {dst_size:?} on {backend:?}"
                );
            }
        }
    }

    #[test]
    fn same_size_copies() {
        let src = pattern(3, 4);
        let mut dst = vec![0; src.len()];
        resize_rgb(&src, (3, 4), &mut dst, (3, 4), Filter::Lanczos).unwrap();
        assert_eq!(dst, src);
    }

    #[test]
    fn filter_names_and_codes_round_trip() {
        use Filter::{Bicubic, Bilinear, Box, Hamming, Lanczos, Nearest};
        for filter in Filter::ALL {
            assert_eq!(Filter::from_name(filter.name()), Some(filter));
        }
        let by_code: Vec<_> = (0..6).map(|c| Filter::from_pil_code(c).unwrap()).collect();
        assert_eq!(by_code, [Nearest, Lanczos, Bilinear, Bicubic, Box, Hamming]);
        assert_eq!(Filter::from_pil_code(6), None);
        assert_eq!(Filter::from_name("Bicubic"), None);
    }

    #[test]
    fn rejects_bad_arguments() {
        let src = pattern(2, 2);
        let mut dst = vec![0; 12];
        let call = |src: &[u8], s, dst: &mut [u8], d| resize_rgb(src, s, dst, d, Filter::Bilinear);
        let arg_of = |r: Result<(), TransformError>| match r {
            Err(TransformError::InvalidArgument { arg, .. } | TransformError::Overflow { arg, .. }) => arg,
            other => panic!("expected an error, got {other:?}"),
        };
        assert_eq!(arg_of(call(&src, (0, 2), &mut dst, (2, 2))), "src_size");
        assert_eq!(arg_of(call(&src, (2, 2), &mut dst, (2, 0))), "dst_size");
        assert_eq!(arg_of(call(&src[1..], (2, 2), &mut dst, (2, 2))), "src");
        assert_eq!(arg_of(call(&src, (2, 2), &mut dst[1..], (2, 2))), "dst");
        assert_eq!(arg_of(call(&src, (usize::MAX, 2), &mut dst, (2, 2))), "src_size");
        assert!(matches!(
            call(&src, (usize::MAX / 2, 3), &mut dst, (2, 2)),
            Err(TransformError::Overflow { .. })
        ));
        let avx2 = resize_rgb_with(&src, (2, 2), &mut dst, (2, 2), Filter::Box, Backend::Avx2);
        if Kernel::select(Backend::Avx2).is_err() {
            assert_eq!(arg_of(avx2), "backend");
        } else {
            assert_eq!(avx2, Ok(()));
        }
    }

    #[test]
    fn every_backend_matches_scalar() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..300 {
            let size = |rng: &mut Rng| {
                if case % 10 == 0 {
                    1 + rng.below(3)
                } else {
                    1 + rng.below(90)
                }
            };
            let (h, w, h2, w2) = (size(&mut rng), size(&mut rng), size(&mut rng), size(&mut rng));
            let filter = Filter::ALL[case % Filter::ALL.len()];
            let src: Vec<u8> = (0..h * w * 3).map(|_| rng.below(256) as u8).collect();
            let mut want = vec![0; h2 * w2 * 3];
            resize_rgb_with(&src, (h, w), &mut want, (h2, w2), filter, Backend::Scalar).unwrap();
            for backend in backends() {
                let mut got = vec![0; want.len()];
                resize_rgb_with(&src, (h, w), &mut got, (h2, w2), filter, backend).unwrap();
                assert_eq!(got, want, "{filter:?} ({h}, {w}) -> ({h2}, {w2}) on {backend:?}");
                let part = random_part((h2, w2), &mut rng);
                let source = Source::packed(&src, 3, (h, w)).unwrap();
                check_part(&want, (h2, w2), part, |got| {
                    super::resize_source_part(source, None, got, (h2, w2), part, filter, backend)
                });
            }
            // An image pasted on a canvas of (h, w): the bytes of resizing the canvas.
            let (image, channels, size, pad, canvas) = pasted_case((h, w), &mut rng);
            let mut pasted = vec![0; h2 * w2 * 3];
            resize_rgb_with(&canvas, (h, w), &mut pasted, (h2, w2), filter, Backend::Scalar).unwrap();
            for backend in backends() {
                let part = random_part((h2, w2), &mut rng);
                let source = Source::packed(&image, channels, size).unwrap();
                check_part(&pasted, (h2, w2), part, |got| {
                    super::resize_source_part(source, Some(pad), got, (h2, w2), part, filter, backend)
                });
            }
        }
    }

    #[test]
    fn strips_of_a_large_band_match_whole_passes() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        // Bands of 1100 rows of 350 outputs (1.15 MB) go in strips on one thread; in a
        // team, each pass runs whole.
        let ((h, w), (h2, w2)) = ((1100, 900), (430, 350));
        let src: Vec<u8> = (0..h * w * 3).map(|_| rng.below(256) as u8).collect();
        for filter in [Filter::Bicubic, Filter::Bilinear, Filter::Lanczos] {
            for backend in backends() {
                let whole = std::sync::Mutex::new(vec![0; h2 * w2 * 3]);
                crate::workers::run(3, 4, 1, &|_| {
                    let mut out = whole.lock().unwrap();
                    resize_rgb_with(&src, (h, w), &mut out, (h2, w2), filter, backend).unwrap();
                });
                let want = whole.into_inner().unwrap();
                let mut got = vec![0; want.len()];
                resize_rgb_with(&src, (h, w), &mut got, (h2, w2), filter, backend).unwrap();
                assert_eq!(got, want, "{filter:?} on {backend:?}");
            }
        }
    }

    /// A random image (RGB, RGBX or grayscale: `channels` bytes a pixel, of `size`) pasted
    /// on a canvas of `canvas` size, the pad that pastes it, and the canvas written whole.
    pub(crate) fn pasted_case(
        canvas: (usize, usize),
        rng: &mut Rng,
    ) -> (Vec<u8>, usize, (usize, usize), Pad, Vec<u8>) {
        let (h, w) = (1 + rng.below(canvas.0), 1 + rng.below(canvas.1));
        let pad = Pad {
            size: canvas,
            at: (rng.below(canvas.0 - h + 1), rng.below(canvas.1 - w + 1)),
            fill: [0, 1, 2].map(|_| rng.below(256) as u8),
        };
        let channels = [1, 3, 4][rng.below(3)];
        let image: Vec<u8> = (0..h * w * channels).map(|_| rng.below(256) as u8).collect();
        let mut whole = vec![0; canvas.0 * canvas.1 * 3];
        let source = Source::packed(&image, channels, (h, w)).unwrap();
        pad_rgb(source, pad.size, pad.at, pad.fill, &mut whole).unwrap();
        (image, channels, (h, w), pad, whole)
    }

    /// A random non-empty part of an image of `size`.
    pub(crate) fn random_part((h, w): (usize, usize), rng: &mut Rng) -> Rect {
        let (top, left) = (rng.below(h), rng.below(w));
        Rect {
            top,
            left,
            height: 1 + rng.below(h - top),
            width: 1 + rng.below(w - left),
        }
    }

    /// `run` writes `part` of the resize whose whole result is `want` (of `size`): the
    /// bytes of `want` there.
    pub(crate) fn check_part(
        want: &[u8],
        size: (usize, usize),
        part: Rect,
        run: impl FnOnce(&mut [u8]) -> Result<(), TransformError>,
    ) {
        let mut cropped = vec![0; part.height * part.width * 3];
        crate::image::crop_rgb(want, size, part, &mut cropped).unwrap();
        let mut got = vec![0; cropped.len()];
        run(&mut got).unwrap();
        assert_eq!(got, cropped, "{part:?} of {size:?}");
    }

    /// `len` bytes that end where an unreadable page begins, so that any read past them
    /// faults.
    #[cfg(target_os = "linux")]
    pub(crate) struct Guarded {
        base: *mut libc::c_void,
        map: usize,
        len: usize,
    }

    #[cfg(target_os = "linux")]
    impl Guarded {
        pub(crate) fn new(bytes: &[u8]) -> Guarded {
            const PAGE: usize = 4096;
            let len = bytes.len();
            let map = len.div_ceil(PAGE) * PAGE + PAGE;
            // SAFETY: a fresh private anonymous mapping; its last page is made unreadable
            // and the bytes are copied to end just before it.
            unsafe {
                let base = libc::mmap(
                    std::ptr::null_mut(),
                    map,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert_ne!(base, libc::MAP_FAILED);
                assert_eq!(
                    libc::mprotect(base.cast::<u8>().add(map - PAGE).cast(), PAGE, libc::PROT_NONE),
                    0
                );
                let start = base.cast::<u8>().add(map - PAGE - len);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), start, len);
                Guarded { base, map, len }
            }
        }

        pub(crate) fn bytes(&self) -> &[u8] {
            // SAFETY: the `len` bytes before the guard page, written in `new`.
            unsafe {
                std::slice::from_raw_parts(self.base.cast::<u8>().add(self.map - 4096 - self.len), self.len)
            }
        }
    }

    #[cfg(target_os = "linux")]
    impl Drop for Guarded {
        fn drop(&mut self) {
            // SAFETY: the mapping made in `new`.
            unsafe { libc::munmap(self.base, self.map) };
        }
    }

    /// `check(source, channels)` for `rgb` (`size`) as packed RGB and as RGBX (random X
    /// bytes), each in one run and in rows one by one, every run and row ending where an
    /// unreadable page begins (so a read past it faults).
    #[cfg(target_os = "linux")]
    pub(crate) fn each_guarded_layout(
        rgb: &[u8],
        (h, w): (usize, usize),
        rng: &mut Rng,
        mut check: impl FnMut(Source<'_>, usize),
    ) {
        let rgbx: Vec<u8> = rgb
            .chunks_exact(3)
            .flat_map(|p| [p[0], p[1], p[2], rng.below(256) as u8])
            .collect();
        for (c, pixels) in [(3, rgb), (4, &rgbx[..])] {
            guarded_layouts(pixels, c, (h, w), |src| check(src, c));
        }
    }

    /// `pixels` (rows of width `w`, `c` bytes a pixel) back to back and one row a slice,
    /// each ending at an unreadable page.
    #[cfg(target_os = "linux")]
    pub(crate) fn guarded_layouts(
        pixels: &[u8],
        c: usize,
        (h, w): (usize, usize),
        mut check: impl FnMut(Source<'_>),
    ) {
        let guarded: Vec<Guarded> = pixels.chunks_exact(w * c).map(Guarded::new).collect();
        let rows: Vec<&[u8]> = guarded.iter().map(Guarded::bytes).collect();
        let whole = Guarded::new(pixels);
        check(Source::packed(whole.bytes(), c, (h, w)).unwrap());
        check(Source::rows(&rows, c, (h, w)).unwrap());
    }

    /// Random grey rows of `size` through `plan`, where it reads them in place (packed,
    /// and in rows each ending at an unreadable page): the bytes `scalar` gives their RGB.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn grey_rows_match_scalar(
        plan: &super::Horizontal,
        scalar: &super::Horizontal,
        (h, w): (usize, usize),
        rng: &mut Rng,
    ) {
        if plan.packs(1) {
            return;
        }
        let grey: Vec<u8> = (0..h * w).map(|_| rng.below(256) as u8).collect();
        let rgb: Vec<u8> = grey.iter().flat_map(|&g| [g; 3]).collect();
        let mut want = vec![0; h * scalar.coeffs().out_len() * 3];
        scalar.run(&Source::packed(&rgb, 3, (h, w)).unwrap(), 0..h, &mut want);
        guarded_layouts(&grey, 1, (h, w), |src| {
            let mut got = vec![0; want.len()];
            plan.run(&src, 0..h, &mut got);
            assert_eq!(got, want, "grey rows ({h}, {w})");
        });
    }

    /// Random tables of 1..=10 taps a window whose sixteen windows a block span up to about
    /// 90 pixels (so up to 256 bytes of RGB or RGBX and past), whole or split taps: the
    /// AVX-512 horizontal pass gives the scalar bytes on packed RGB and RGBX and on rows
    /// each ending at an unreadable page, and its planar blocks run every pixel size, pair
    /// count, split and reach (128, 192 or 256 bytes), RGBX rows packed in registers with
    /// both whole and split taps, and grey rows (the bytes of their RGB) with every pair
    /// count and split.
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn planar_blocks_of_every_reach_match_scalar() {
        let Ok(kernel) = Kernel::select(Backend::Avx512) else {
            return;
        };
        let mut rng = Rng(0x6a09_e667_f3bc_c908);
        let mut seen = std::collections::BTreeSet::new();
        let mut packed_rgbx = std::collections::BTreeSet::new();
        let mut greys = std::collections::BTreeSet::new();
        for case in 0..3000 {
            let split = case % 2 == 1;
            let precision = if split { 22 } else { 14 };
            let most = 1 + rng.below(10);
            let out_w = 1 + rng.below(if case % 5 == 0 { 20 } else { 70 });
            // Mean step between windows, in eighths of a pixel: up to 7 pixels.
            let step8 = rng.below(57);
            let mut windows: Vec<(usize, usize)> = Vec::with_capacity(out_w);
            let mut pos8 = 8 * rng.below(20);
            let (mut first, mut end) = (0, 0);
            for i in 0..out_w {
                if i > 0 {
                    pos8 += step8 + rng.below(9) - 4.min(step8);
                }
                first = (pos8 / 8).max(first);
                // Ends grow too, and each window holds 1..=most taps.
                let lo = end.max(first + 1);
                let hi = first + most;
                end = if lo >= hi { lo } else { lo + rng.below(hi - lo + 1) };
                windows.push((first, end - first));
            }
            let in_w = end + rng.below(40);
            let unit = 1i32 << precision;
            let taps: Vec<Vec<i32>> = windows
                .iter()
                .map(|&(_, n)| {
                    (0..n)
                        .map(|_| match rng.below(8) {
                            0 => 0,
                            1 => -(rng.below(unit as usize / 4) as i32),
                            _ => rng.below(unit as usize * 2 / n + 1) as i32,
                        })
                        .collect()
                })
                .collect();
            let table = || {
                let mut coeffs = Coeffs::with_capacity("dst_size", precision, out_w, most).unwrap();
                for (&(first, _), k) in windows.iter().zip(&taps) {
                    coeffs.push(first, k.iter().copied());
                }
                coeffs
            };
            let plan = super::Horizontal::new(kernel, table());
            let scalar = super::Horizontal::Scalar(table());
            let h = 1 + rng.below(3);
            let rgb: Vec<u8> = (0..h * in_w * 3).map(|_| rng.below(256) as u8).collect();
            let mut want = vec![0; h * out_w * 3];
            scalar.run(&Source::packed(&rgb, 3, (h, in_w)).unwrap(), 0..h, &mut want);
            if let super::Horizontal::Avx512(avx) = &plan {
                seen.extend([3, 4].into_iter().filter_map(|c| avx.planar_shape(c)));
                packed_rgbx.extend(avx.planar_shape(4).filter(|&(c, ..)| c == 3));
            }
            each_guarded_layout(&rgb, (h, in_w), &mut rng, |src, c| {
                let mut got = vec![0; want.len()];
                plan.run(&src, 0..h, &mut got);
                assert_eq!(
                    got, want,
                    "case {case} c={c} split={split} windows {windows:?} in {in_w}"
                );
            });
            // Grey rows, where the planar pass reads them: the bytes of their RGB.
            if let super::Horizontal::Avx512(avx) = &plan {
                greys.extend(
                    avx.grey_shape()
                        .filter(|&(pass, ..)| pass == "planar")
                        .map(|(_, pairs, split, far)| (pairs, split, far)),
                );
            }
            grey_rows_match_scalar(&plan, &scalar, (h, in_w), &mut rng);
        }
        // RGBX windows reach two vectors past the first two only where RGB ones reach fewer
        // (RGBX rows are then packed in registers).
        let missing: Vec<_> = [3, 4]
            .into_iter()
            .flat_map(|c| (1..=5).flat_map(move |p| [false, true].map(|s| (c, p, s))))
            .flat_map(|(c, p, s)| (0..if c == 4 { 2 } else { 3 }).map(move |far| (c, p, s, far)))
            .filter(|shape| !seen.contains(shape))
            .collect();
        assert!(missing.is_empty(), "planar shapes never run: {missing:?}");
        let missing: Vec<_> = (1..=5)
            .flat_map(|p| [false, true].map(|s| (p, s, 0)))
            .filter(|shape| !greys.contains(shape))
            .collect();
        assert!(missing.is_empty(), "grey planar shapes never run: {missing:?}");
        for split in [false, true] {
            assert!(
                packed_rgbx.iter().any(|&(.., s, _)| s == split),
                "RGBX rows never packed in registers (split {split}): {packed_rgbx:?}"
            );
        }
    }

    /// Grey images resized by Pillow's filters from 1/40 to 4x, read in place by the planar
    /// blocks (up to ten taps; one vector past the first two at the widest) or eight taps a
    /// lane (one window a block or two), packed and in rows each ending at an unreadable
    /// page: the bytes of their RGB on the scalar backend.
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn grey_rows_read_in_place_match_scalar() {
        if Kernel::select(Backend::Avx512).is_err() {
            return;
        }
        let mut rng = Rng(0x3c6e_f372_fe94_f82b);
        let mut seen = std::collections::BTreeSet::new();
        for case in 0..600 {
            let filter = Filter::ALL[case % Filter::ALL.len()];
            let (h, w) = (1 + rng.below(4), 20 + rng.below(900));
            // Scales 1/9 to 4x in eighths (box windows reach past 128 bytes near 1/9), or 1/40
            // to 4x.
            let w2 = if (case / Filter::ALL.len()).is_multiple_of(2) {
                w * (1 + rng.below(32)) / 72
            } else {
                w * (8 + rng.below(1273)) / 320
            }
            .max(1);
            let h2 = 1 + rng.below(4);
            let Some((support, weight)) = filter.convolution() else {
                continue;
            };
            let Some((pass, .., reach)) = super::grey_shape(Coeffs::new(w, w2, support, weight).unwrap())
            else {
                continue;
            };
            seen.insert((pass, reach));
            let grey: Vec<u8> = (0..h * w).map(|_| rng.below(256) as u8).collect();
            let rgb: Vec<u8> = grey.iter().flat_map(|&g| [g; 3]).collect();
            let mut want = vec![0; h2 * w2 * 3];
            resize_rgb_with(&rgb, (h, w), &mut want, (h2, w2), filter, Backend::Scalar).unwrap();
            guarded_layouts(&grey, 1, (h, w), |src| {
                let mut got = vec![0; want.len()];
                resize_source_with(src, &mut got, (h2, w2), filter, Backend::Avx512).unwrap();
                assert_eq!(got, want, "{filter:?} ({h}, {w}) -> ({h2}, {w2})");
            });
        }
        let every = [("octets", 0), ("octets", 1), ("planar", 0), ("planar", 1)];
        assert_eq!(seen, every.into(), "grey passes and their reaches");
    }

    /// Pillow's filters at the scales whose planar blocks reach past 192 bytes (RGB and
    /// RGBX, packed and in rows each ending at an unreadable page): the scalar bytes.
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn pillow_windows_past_192_bytes_match_scalar() {
        if Kernel::select(Backend::Avx512).is_err() {
            return;
        }
        let mut rng = Rng(0xbb67_ae85_84ca_a73b);
        let mut seen = std::collections::BTreeSet::new();
        for case in 0..400 {
            let filter = [
                Filter::Box,
                Filter::Bilinear,
                Filter::Hamming,
                Filter::Bicubic,
                Filter::Lanczos,
            ][case % 5];
            let (h, w) = (1 + rng.below(4), 100 + rng.below(600));
            // Scales 2 to 6.
            let w2 = (w * 8 / (16 + rng.below(33))).max(1);
            let h2 = if case % 2 == 0 { h } else { 1 + rng.below(4) };
            let (support, weight) = filter.convolution().unwrap();
            for c in [3, 4] {
                if let Some(shape) = super::planar_shape(Coeffs::new(w, w2, support, weight).unwrap(), c) {
                    seen.insert((c, shape));
                }
            }
            let rgb: Vec<u8> = (0..h * w * 3).map(|_| rng.below(256) as u8).collect();
            let mut want = vec![0; h2 * w2 * 3];
            resize_rgb_with(&rgb, (h, w), &mut want, (h2, w2), filter, Backend::Scalar).unwrap();
            each_guarded_layout(&rgb, (h, w), &mut rng, |src, c| {
                let mut got = vec![0; want.len()];
                resize_source_with(src, &mut got, (h2, w2), filter, Backend::Avx512).unwrap();
                assert_eq!(got, want, "{filter:?} c={c} ({h}, {w}) -> ({h2}, {w2})");
            });
        }
        // RGBX rows as RGB packed in registers: RGBX windows past 192 bytes reach more
        // vectors than RGB ones.
        for c in [3, 4] {
            assert!(
                seen.iter()
                    .any(|&(rows, (_, _, split, far))| rows == c && split && far == 2),
                "no planar blocks past 192 bytes for {c}-byte rows: {seen:?}"
            );
        }
    }

    #[test]
    fn every_source_layout_matches_packed_rgb() {
        let mut rng = Rng(0x51_7cc1_b727_220a);
        for case in 0..120 {
            let size = |rng: &mut Rng| 1 + rng.below(if case % 8 == 0 { 4 } else { 70 });
            let (h, w, h2, w2) = (size(&mut rng), size(&mut rng), size(&mut rng), size(&mut rng));
            // One case in four resizes only the height, up to 150 rows (several stretches
            // of rows packed at a time).
            // One case in eight narrows rows of hundreds of pixels about elevenfold: windows
            // near enough for one vector as RGB but not as RGBX (packed a row at a time).
            // Another twelvefold: RGB windows too far apart for one vector at the fewest
            // groups of taps, near enough at more groups of fewer taps. Another three and a
            // half fold: sixteen bilinear windows of RGBX reach past 192 bytes.
            let (w, w2) = match case % 8 {
                2 => {
                    let w = 300 + rng.below(300);
                    (w, w * 2 / 7)
                }
                3 => {
                    let w = 300 + rng.below(300);
                    (w, w / 11)
                }
                7 => {
                    let w2 = 25 + rng.below(25);
                    (12 * w2 + rng.below(3), w2)
                }
                _ => (w, w2),
            };
            let (h2, w2) = if case % 4 == 1 {
                (1 + rng.below(150), w)
            } else {
                (h2, w2)
            };
            let filter = Filter::ALL[case % Filter::ALL.len()];
            let gray: Vec<u8> = (0..h * w).map(|_| rng.below(256) as u8).collect();
            let rgb: Vec<u8> = (0..h * w * 3).map(|_| rng.below(256) as u8).collect();
            let block = 1 + rng.below(h);
            for (c, blocks) in layouts(&rgb, &gray, w, block, &mut rng) {
                let packed: Vec<u8> = if c == 1 {
                    gray.iter().flat_map(|&g| [g; 3]).collect()
                } else {
                    rgb.clone()
                };
                let mut want = vec![0; h2 * w2 * 3];
                resize_rgb_with(&packed, (h, w), &mut want, (h2, w2), filter, Backend::Scalar).unwrap();
                let rows = row_slices(&blocks, w, c);
                let sources = if blocks.len() == 1 && block == h {
                    vec![
                        Source::packed(&blocks[0][..h * w * c], c, (h, w)).unwrap(),
                        Source::rows(&rows, c, (h, w)).unwrap(),
                    ]
                } else {
                    vec![Source::rows(&rows, c, (h, w)).unwrap()]
                };
                for src in sources {
                    for backend in backends() {
                        let mut got = vec![0; want.len()];
                        resize_source_with(src, &mut got, (h2, w2), filter, backend).unwrap();
                        assert_eq!(
                            got, want,
                            "{filter:?} c={c} ({h}, {w}) -> ({h2}, {w2}) block {block} on {backend:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn crops_read_their_part_where_it_is() {
        let mut rng = Rng(0x0c20_9e11_5a7d_4b31);
        let part = |(h, w): (usize, usize), rng: &mut Rng| {
            let (top, left) = (rng.below(h), rng.below(w));
            let (height, width) = (1 + rng.below(h - top), 1 + rng.below(w - left));
            Rect {
                top,
                left,
                height,
                width,
            }
        };
        for case in 0..40 {
            let (h, w) = (
                1 + rng.below(30),
                1 + rng.below(if case % 4 == 0 { 400 } else { 40 }),
            );
            let gray: Vec<u8> = (0..h * w).map(|_| rng.below(256) as u8).collect();
            let rgb: Vec<u8> = (0..h * w * 3).map(|_| rng.below(256) as u8).collect();
            let block = 1 + rng.below(h);
            for (c, blocks) in layouts(&rgb, &gray, w, block, &mut rng) {
                let rows = row_slices(&blocks, w, c);
                let mut sources = vec![Source::rows(&rows, c, (h, w)).unwrap()];
                if blocks.len() == 1 {
                    sources.push(Source::packed(&blocks[0][..h * w * c], c, (h, w)).unwrap());
                }
                for src in sources {
                    // A crop, then a crop of that crop, each against the rows it cuts.
                    let outer = part((h, w), &mut rng);
                    let inner = part((outer.height, outer.width), &mut rng);
                    let cropped = src.crop(outer).unwrap();
                    let twice = cropped.crop(inner).unwrap();
                    let (top, left) = (outer.top + inner.top, outer.left + inner.left);
                    assert_eq!(twice.size(), (inner.height, inner.width));
                    for y in 0..inner.height {
                        let row = &src.row(top + y)[left * c..(left + inner.width) * c];
                        assert_eq!(twice.row(y), row, "c={c} {outer:?} {inner:?} row {y}");
                    }
                    let mut want = vec![0; outer.height * outer.width * 3];
                    src.write_rgb_part(outer, &mut want);
                    let mut got = vec![0; want.len()];
                    cropped.write_rgb(&mut got);
                    assert_eq!(got, want);
                    // Resizes read a crop's rows like any others (vector loads past their
                    // ends read the pixels beside them, which no tap uses).
                    let to = (1 + rng.below(20), 1 + rng.below(20));
                    let mut want_resized = vec![0; to.0 * to.1 * 3];
                    let packed = (outer.height, outer.width);
                    resize_rgb_with(
                        &want,
                        packed,
                        &mut want_resized,
                        to,
                        Filter::Bicubic,
                        Backend::Scalar,
                    )
                    .unwrap();
                    for backend in backends() {
                        let mut got = vec![0; want_resized.len()];
                        resize_source_with(cropped, &mut got, to, Filter::Bicubic, backend).unwrap();
                        assert_eq!(got, want_resized, "c={c} {outer:?} -> {to:?} on {backend:?}");
                    }
                    // Packed RGB only where the crop's rows lie back to back.
                    let packed_rows = src.as_rgb().is_some() && (outer.width == w || outer.height == 1);
                    assert_eq!(cropped.as_rgb(), packed_rows.then_some(&want[..]));
                    let past = Rect {
                        top: outer.top,
                        left: w - outer.width + 1,
                        ..outer
                    };
                    assert!(src.crop(past).is_err() && src.crop(Rect { height: 0, ..outer }).is_err());
                }
            }
        }
    }

    #[test]
    fn runs_of_rows_are_only_rows_back_to_back() {
        let px: Vec<u8> = (0..=255).collect();
        let packed = Source::packed(&px[..240], 4, (10, 6)).unwrap();
        assert_eq!(packed.run_of(2..5), Some(&px[48..120]));
        // Blocks of rows 0-3 and 4-9: a run within a block, none across them.
        let (a, b) = (&px[..96], px[100..].to_vec());
        let rows: Vec<&[u8]> = (0..10)
            .map(|y| if y < 4 { &a[y * 24..] } else { &b[(y - 4) * 24..] })
            .collect();
        let split = Source::rows(&rows, 4, (10, 6)).unwrap();
        assert_eq!(split.run_of(1..4), Some(&px[24..96]));
        assert_eq!(split.run_of(5..7), Some(&b[24..72]));
        assert_eq!(split.run_of(3..5), None);
        assert_eq!(split.run_of(4..4), Some(&b[..0]));
    }

    #[test]
    fn resizes_run_together_equal_each_run_alone() {
        use super::{convolve_passes, resize_source_part, resize_together, Passes};
        use crate::torch_resize::{resize_torch_source_part, torch_passes, TorchMode};
        let modes = [TorchMode::Bilinear, TorchMode::Bicubic, TorchMode::Lanczos];
        let mut rng = Rng(0x70_6e7e_c0de_5a11);
        for case in 0..16 {
            let size = |rng: &mut Rng| 1 + rng.below(90);
            // One case in four narrows rows of hundreds of pixels about twelvefold (RGBX
            // rows packed by that pass, see `every_source_layout_matches_packed_rgb`); one
            // in eight writes a band of over `STRIP_BYTES`, read back a strip at a time.
            let (h, w) = match case % 8 {
                3 | 7 => (size(&mut rng), 300 + rng.below(300)),
                5 => (100 + rng.below(20), 60 + rng.below(20)),
                _ => (size(&mut rng), size(&mut rng)),
            };
            let targets: Vec<(usize, usize)> = (0..2 + rng.below(2))
                .map(|k| match (case % 8, k) {
                    (3 | 7, 0) => (size(&mut rng), w / 12),
                    (5, 0) => (h + rng.below(100), 1000),
                    _ => (size(&mut rng), size(&mut rng)),
                })
                .collect();
            let gray: Vec<u8> = (0..h * w).map(|_| rng.below(256) as u8).collect();
            let rgb: Vec<u8> = (0..h * w * 3).map(|_| rng.below(256) as u8).collect();
            let block = 1 + rng.below(h);
            let torch = case % 2 == 0;
            let filter = Filter::ALL[case % Filter::ALL.len()];
            let mode = modes[case % modes.len()];
            let parts: Vec<Rect> = targets
                .iter()
                .map(|&to| {
                    if rng.below(2) == 0 {
                        super::whole(to)
                    } else {
                        random_part(to, &mut rng)
                    }
                })
                .collect();
            for backend in backends() {
                let passes = |to, part| {
                    if torch {
                        torch_passes((h, w), to, part, mode, true, backend)
                    } else {
                        convolve_passes((h, w), to, part, filter, backend)
                    }
                    .unwrap()
                };
                for (c, blocks) in layouts(&rgb, &gray, w, block, &mut rng) {
                    let rows = row_slices(&blocks, w, c);
                    let src = Source::rows(&rows, c, (h, w)).unwrap();
                    let kept: Vec<((usize, usize), Rect)> = targets
                        .iter()
                        .zip(&parts)
                        .map(|(&to, &part)| (to, part))
                        .filter(|&(to, part)| passes(to, part).is_some())
                        .collect();
                    let wanted: Vec<Vec<u8>> = kept
                        .iter()
                        .map(|&(to, part)| {
                            let mut want = vec![0; part.height * part.width * 3];
                            if torch {
                                resize_torch_source_part(src, None, &mut want, to, part, mode, true, backend)
                                    .unwrap();
                            } else {
                                resize_source_part(src, None, &mut want, to, part, filter, backend).unwrap();
                            }
                            want
                        })
                        .collect();
                    // On one thread, and in a team of three.
                    for team in [false, true] {
                        let mut outs: Vec<Vec<u8>> = wanted.iter().map(|want| vec![0; want.len()]).collect();
                        let run: Vec<(Passes, &mut [u8])> = kept
                            .iter()
                            .map(|&(to, part)| passes(to, part).unwrap())
                            .zip(outs.iter_mut().map(|o| &mut o[..]))
                            .collect();
                        let run = std::sync::Mutex::new(run);
                        let together = || resize_together(src, &mut run.lock().unwrap()).unwrap();
                        if team {
                            crate::workers::run(3, 4, 1, &|_| together());
                        } else {
                            together();
                        }
                        drop(run);
                        for (k, (got, want)) in outs.iter().zip(&wanted).enumerate() {
                            assert!(
                                got == want,
                                "resize {k} of {kept:?}, torch {torch}, c={c} ({h}, {w}) block {block} on \
                                 {backend:?}, team {team}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn resizes_run_together_refuse_other_sizes() {
        use super::resize_together;
        use crate::torch_resize::{torch_passes, TorchMode};
        let px = vec![0u8; 20 * 30 * 3];
        let src = Source::packed(&px, 3, (20, 30)).unwrap();
        let passes = |size| {
            torch_passes(
                size,
                (10, 10),
                super::whole((10, 10)),
                TorchMode::Bilinear,
                true,
                Backend::Auto,
            )
            .unwrap()
            .unwrap()
        };
        let mut out = vec![0u8; 300];
        assert!(resize_together(src, &mut [(passes((20, 30)), &mut out)]).is_ok());
        assert!(resize_together(src, &mut [(passes((20, 31)), &mut out)]).is_err());
        assert!(resize_together(src, &mut [(passes((20, 30)), &mut out[1..])]).is_err());
    }

    #[test]
    fn sources_refuse_what_does_not_fit() {
        let px = [0u8; 24];
        assert!(Source::packed(&px, 2, (2, 3)).is_err());
        assert!(Source::packed(&px[1..], 4, (2, 3)).is_err());
        assert!(Source::packed(&px, 4, (0, 3)).is_err());
        let rows = [&px[..12], &px[12..23]];
        assert!(Source::rows(&rows, 4, (2, 3)).is_err());
        assert!(Source::rows(&rows[..1], 4, (2, 3)).is_err());
        assert!(Source::rows(&[&px[..12], &px[12..]], 4, (2, 3)).is_ok());
    }
}
