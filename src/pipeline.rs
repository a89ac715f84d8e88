//! A batch of images → one output tensor: each image's jobs crop, resize, pad and
//! normalise it into its slots of the output, with no intermediate tensors.
//!
//! The Python layer decides every number (windows, sizes, fill colours, patch layout,
//! offsets, tables); this module only moves pixels, in parallel across images (the largest
//! first), and across the bands of a large image's resizes and patch rows.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::{Mutex, PoisonError};

use crate::alloc::{recycle, scratch, Buffer, Memory};
use crate::error::{invalid, TransformError};
pub use crate::image::Pad;
use crate::image::{pad_rgb, Rect};
use crate::resize::{
    self, check_part, on_canvas, recycle_rgb, resize_rgb, resize_source, resize_source_part, whole_then_part,
    Backend, Filter, Passes, Source,
};
use crate::torch_float::{
    resize_float_rgb, resize_float_source, resize_mapped_planes, resize_mapped_planes_and_windows, FloatMode,
};
use crate::torch_resize::{
    resize_torch_rgb, resize_torch_source, resize_torch_source_part, torch_passes, TorchMode,
};
use crate::transforms::{
    checked_len, crop_source_and_normalize, normalize_into_canvas, normalize_source_to_patches,
    normalize_to_hwc_patches, normalize_to_patches, normalize_to_strip, overlap, Normalize, Patches, Window,
};
use crate::workers;

/// How a job's source is resized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resize {
    /// Used as is.
    Keep,
    /// Pillow's `Image.resize` to (height, width), bit-exact.
    Pillow(Filter, (usize, usize)),
    /// torchvision's resize of a uint8 tensor to (height, width), with or without
    /// antialiasing.
    Torch(TorchMode, bool, (usize, usize)),
    /// torchvision's resize of the uint8 image as float32 without antialiasing, rounded half
    /// to even and clamped back to uint8 (Molmo2), as torch computes it on one thread or
    /// several.
    TorchFloat(FloatMode, bool, (usize, usize)),
}

impl Resize {
    /// `src` (`size`, HWC RGB) resized into `dst`, which holds the target size's pixels
    /// (`size`'s for [`Resize::Keep`]).
    ///
    /// # Errors
    ///
    /// The kernels' errors for mismatched buffers or sizes.
    pub fn run(self, src: &[u8], size: (usize, usize), dst: &mut [u8]) -> Result<(), TransformError> {
        match self {
            Resize::Keep => {
                if src.len() != dst.len() {
                    return Err(invalid("dst", "the source's length", dst.len()));
                }
                dst.copy_from_slice(src);
                Ok(())
            }
            Resize::Pillow(filter, to) => resize_rgb(src, size, dst, to, filter),
            Resize::Torch(mode, antialias, to) => resize_torch_rgb(src, size, dst, to, mode, antialias),
            Resize::TorchFloat(mode, one_thread, to) => {
                resize_float_rgb(src, size, dst, to, mode, one_thread)
            }
        }
    }

    /// [`Resize::run`] from any [`Source`], read where it is (RGBX and grayscale rows
    /// included, see [`Source`]).
    ///
    /// # Errors
    /// As [`Resize::run`].
    pub fn run_source(self, src: Source<'_>, dst: &mut [u8]) -> Result<(), TransformError> {
        match self {
            Resize::Keep => self.run_part(src, None, resize::whole(src.size()), dst),
            Resize::Pillow(filter, to) => resize_source(src, dst, to, filter),
            Resize::Torch(mode, antialias, to) => resize_torch_source(src, dst, to, mode, antialias),
            Resize::TorchFloat(mode, one_thread, to) => resize_float_source(src, dst, to, mode, one_thread),
        }
    }

    /// The size of `size`'s pixels once resized.
    fn output_size(self, size: (usize, usize)) -> (usize, usize) {
        match self {
            Resize::Keep => size,
            Resize::Pillow(_, to) | Resize::Torch(_, _, to) | Resize::TorchFloat(_, _, to) => to,
        }
    }

    /// Whether [`Resize::run_part`] computes only the part's pixels (the separable
    /// convolutions), rather than cropping them from the whole result.
    fn computes_parts(self) -> bool {
        match self {
            Resize::Pillow(filter, _) => filter.convolution().is_some(),
            Resize::Torch(mode, ..) => mode != TorchMode::NearestExact,
            Resize::Keep | Resize::TorchFloat(..) => false,
        }
    }

    /// The passes [`Resize::run_part`] runs for `part` of the resize of `size`'s pixels,
    /// where it runs a horizontal pass, then a vertical one (see [`resize::resize_together`]).
    ///
    /// # Errors
    /// As [`Resize::run`].
    fn passes(self, size: (usize, usize), part: Rect) -> Result<Option<Passes>, TransformError> {
        match self {
            Resize::Pillow(filter, to) => resize::convolve_passes(size, to, part, filter, Backend::Auto),
            Resize::Torch(mode, antialias, to) => {
                torch_passes(size, to, part, mode, antialias, Backend::Auto)
            }
            Resize::Keep | Resize::TorchFloat(..) => Ok(None),
        }
    }

    /// `part` of [`Resize::run_source`]'s result into `dst`, which holds exactly `part`: the
    /// same bytes as cropping the whole result. Pillow's and torchvision's uint8 resizes
    /// compute only `part` along each axis they resize. With `paste`, of `src` pasted on
    /// that canvas: Pillow's and torchvision's uint8 resizes read it a few rows at a time
    /// where their horizontal pass runs first (see [`resize::separable`]).
    ///
    /// # Errors
    /// As [`Resize::run`], a `part` outside the result, or `src` outside the canvas.
    pub fn run_part(
        self,
        src: Source<'_>,
        paste: Option<Pad>,
        part: Rect,
        dst: &mut [u8],
    ) -> Result<(), TransformError> {
        match self {
            Resize::Pillow(filter, to) => {
                resize_source_part(src, paste, dst, to, part, filter, Backend::Auto)
            }
            Resize::Torch(mode, antialias, to) => {
                resize_torch_source_part(src, paste, dst, to, part, mode, antialias, Backend::Auto)
            }
            Resize::Keep | Resize::TorchFloat(..) if paste.is_some() => {
                on_canvas(src, paste, |canvas| self.run_part(canvas, None, part, dst))
            }
            Resize::Keep => {
                check_part(dst, src.size(), part)?;
                src.write_rgb_part(part, dst);
                Ok(())
            }
            Resize::TorchFloat(.., to) => whole_then_part(dst, to, part, |full| self.run_source(src, full)),
        }
    }
}

/// Where a job's normalised pixels go in its slot of the output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Qwen-VL patch rows.
    Patches(Patches),
    /// One CHW tensor per window, back to back (a crop, a padded canvas, or tiles).
    Windows(Vec<Window>),
    /// Channel-last patch rows of each window, back to back (`SigLIP` 2, Gemma 4, Molmo2).
    HwcPatches {
        /// Side of a square patch.
        patch_size: usize,
        /// Windows, sides multiples of `patch_size` (past the pixels: the outside value).
        windows: Vec<Window>,
    },
    /// The pixels' CHW planes at the top-left of a larger CHW canvas whose rows are `row`
    /// values apart and planes `plane` apart, the rest of the canvas zero (Pixtral's and
    /// Idefics2's padding after normalising).
    Canvas {
        /// Values from one canvas row to the next.
        row: usize,
        /// Values from one canvas plane to the next.
        plane: usize,
    },
    /// MiniCPM-V's patch strip: `3 * patch_size` rows `stride` values apart, this image's
    /// patches filling the next `h / patch_size * w` values of each.
    Strip {
        /// Side of a square patch.
        patch_size: usize,
        /// Values from one strip row to the next (the whole batch's strip length).
        stride: usize,
    },
    /// The normalised pixels resized to `size` = (height, width) by torch's float32 kernel
    /// for `mode` without antialiasing, as one CHW tensor: torchvision's resize of the
    /// normalised image (Phi-4-multimodal's global view). Float32 outputs only.
    Resized {
        /// The interpolation.
        mode: FloatMode,
        /// As torch computes it on one thread (see [`crate::torch_float`]).
        one_thread: bool,
        /// The output (height, width).
        size: (usize, usize),
    },
}

/// An element type of [`run_batch`]'s output: float32 values, or bit patterns and indices
/// that only table lookups produce (bfloat16 or float16 bits as `u16`, `u8` pixels).
pub trait Element: bytemuck::Pod + Send + Sync {
    /// The float32 tables and output of a layout that computes on the normalised values
    /// ([`Layout::Resized`]); `None` for element types other than `f32`.
    fn as_float32<'a>(
        norm: &'a Normalize<Self>,
        dst: &'a mut [Self],
    ) -> Option<(&'a Normalize<f32>, &'a mut [f32])>;
}

impl Element for f32 {
    fn as_float32<'a>(
        norm: &'a Normalize<f32>,
        dst: &'a mut [f32],
    ) -> Option<(&'a Normalize<f32>, &'a mut [f32])> {
        Some((norm, dst))
    }
}

impl Element for u16 {
    fn as_float32<'a>(
        _: &'a Normalize<u16>,
        _: &'a mut [u16],
    ) -> Option<(&'a Normalize<f32>, &'a mut [f32])> {
        None
    }
}

impl Element for u8 {
    fn as_float32<'a>(_: &'a Normalize<u8>, _: &'a mut [u8]) -> Option<(&'a Normalize<f32>, &'a mut [f32])> {
        None
    }
}

/// An input image: HWC u8 pixels, `channels` bytes each (3: RGB, 4: Pillow's RGBX
/// layout, 1: grayscale), rows back to back in `pixels` or, when `rows` is given, one slice
/// per row (see [`Source::rows`]). A resize that starts with a horizontal pass reads RGB
/// and RGBX in place; anything else packs the image into RGB once, on the batch's threads.
#[derive(Clone, Copy, Debug)]
pub struct Image<'a> {
    /// The pixels, rows back to back (empty when `rows` is given).
    pub pixels: &'a [u8],
    /// One slice per row instead, each running to the end of its memory block.
    pub rows: Option<&'a [&'a [u8]]>,
    /// Bytes per pixel: 1, 3 or 4.
    pub channels: usize,
    /// (height, width).
    pub size: (usize, usize),
}

impl<'a> Image<'a> {
    /// The pixels as a resize source.
    ///
    /// # Errors
    /// A channel count, size or buffer length that do not agree.
    pub fn source(&self) -> Result<Source<'a>, TransformError> {
        match self.rows {
            Some(rows) => Source::rows(rows, self.channels, self.size),
            None => Source::packed(self.pixels, self.channels, self.size),
        }
    }
}

/// Pixels of their own and their (height, width).
type Owned = (Vec<u8>, (usize, usize));

/// What [`Job::prepare`] returns: its pixels, if it changed them, and where they start.
type Prepared = (Option<Owned>, (usize, usize));

/// An image's index and its jobs in order, each with the output ranges it writes.
type Group<'d, T> = (usize, Vec<(usize, Vec<&'d mut [T]>)>);

/// Each job's output ranges, with their places in its layout.
type Slots<'d, T> = Vec<Vec<(usize, &'d mut [T])>>;

/// One piece of work on an image: take the input image or an earlier job's pixels,
/// crop, resize, pad (all u8 RGB), then normalise a layout into `offset..` of the output.
///
/// A job without a layout only prepares pixels for later jobs of the same image
/// (a resize chain: Idefics3 resizes the resized image again).
#[derive(Clone, Debug)]
pub struct Job {
    /// Index of the input image.
    pub image: usize,
    /// An earlier job of the same image whose pixels this job starts from; `None`: the image.
    pub source: Option<usize>,
    /// A window of the source, inside it, cut before resizing.
    pub crop: Option<Rect>,
    /// The resize.
    pub resize: Resize,
    /// A canvas the pixels are pasted on after the resize.
    pub pad: Option<Pad>,
    /// What is written to the output, if anything.
    pub layout: Option<Layout>,
    /// First output value this job writes.
    pub offset: usize,
    /// Which of the batch's normalisation tables the job's values come from.
    pub table: usize,
    /// A video's temporal group: the input images of time slots 1.., each cropped, resized
    /// and padded like `image`, whose size they share (patch layouts only; empty for a
    /// still image, which fills every time slot).
    pub frames: Vec<usize>,
}

impl Job {
    /// (height, width) of this job's pixels, from its source's size.
    ///
    /// # Errors
    /// A crop outside the source, an empty resize target, or a pad canvas too small.
    pub fn pixel_size(&self, source: (usize, usize)) -> Result<(usize, usize), TransformError> {
        let mut size = source;
        if let Some(rect) = self.crop {
            check_crop(rect, size)?;
            size = (rect.height, rect.width);
        }
        if let Resize::Pillow(_, to) | Resize::Torch(_, _, to) | Resize::TorchFloat(_, _, to) = self.resize {
            if to.0 == 0 || to.1 == 0 {
                return Err(invalid("jobs", "a non-empty resize target", format!("{to:?}")));
            }
            size = to;
        }
        if let Some(pad) = &self.pad {
            pad.check(size)?;
            size = pad.size;
        }
        checked_len("jobs", &[size.0, size.1, 3])?;
        Ok(size)
    }

    /// The output ranges this job writes for pixels of `size`, as `(start, length)` from
    /// its `offset`, in the order its layout fills them (one range for most layouts).
    ///
    /// # Errors
    /// Sizes whose product overflows, or a canvas or strip its pixels do not fit.
    pub fn segments(&self, size: (usize, usize)) -> Result<Vec<(usize, usize)>, TransformError> {
        let overflow = || TransformError::Overflow {
            arg: "jobs",
            what: "the total output length".into(),
        };
        let total = |windows: &[Window]| {
            windows.iter().try_fold(0usize, |acc, w| {
                acc.checked_add(checked_len("jobs", &[3, w.height, w.width])?)
                    .ok_or_else(overflow)
            })
        };
        let (h, w) = size;
        let len = match &self.layout {
            None => return Ok(Vec::new()),
            Some(Layout::Patches(p)) => checked_len(
                "jobs",
                &[h / p.patch_size.max(1), w / p.patch_size.max(1), p.row_len()?],
            )?,
            Some(Layout::Windows(windows) | Layout::HwcPatches { windows, .. }) => total(windows)?,
            Some(Layout::Resized { size: (rh, rw), .. }) => {
                if *rh == 0 || *rw == 0 {
                    return Err(invalid(
                        "jobs",
                        "a non-empty resize target",
                        format!("{:?}", (rh, rw)),
                    ));
                }
                checked_len("jobs", &[3, *rh, *rw])?
            }
            Some(Layout::Canvas { row, plane }) => {
                let (row, plane) = (*row, *plane);
                // Every pixel row must fit its canvas row, and every plane its plane.
                if w > row || checked_len("jobs", &[h, row])? > plane {
                    return Err(invalid(
                        "jobs",
                        format!("a canvas of rows {row} and planes {plane} apart holding the pixels"),
                        format!("{size:?}"),
                    ));
                }
                checked_len("jobs", &[3, plane])?
            }
            Some(Layout::Strip { patch_size, stride }) => {
                let (patch_size, stride) = (*patch_size, *stride);
                let run = (h / patch_size.max(1)).checked_mul(w).ok_or_else(overflow)?;
                if run > stride {
                    return Err(invalid(
                        "jobs",
                        format!("strip rows of at least {run} values"),
                        stride,
                    ));
                }
                checked_len("jobs", &[3, patch_size, stride])?;
                return Ok((0..3 * patch_size).map(|r| (r * stride, run)).collect());
            }
        };
        Ok(vec![(0, len)])
    }

    /// Crop, resize and pad `src`, or `src` pasted on `paste`'s canvas (a pad job before
    /// this one, left unwritten): `None` when nothing changes it (the caller then reads
    /// `src` packed to RGB). A resize reads a pasted image where it is; a crop, or a job
    /// without a resize, reads the canvas written first. Unless `whole`, a resize that ends
    /// the job may compute only the part its windows read; the second value is where those
    /// pixels start in the job's (height, width) ((0, 0) for all of them).
    fn prepare(&self, src: Source<'_>, paste: Option<Pad>, whole: bool) -> Result<Prepared, TransformError> {
        let mut size = paste.map_or(src.size(), |pad| pad.size);
        let mut owned: Option<Vec<u8>> = None;
        let mut origin = (0, 0);
        let crops = self.crop.is_some_and(|rect| (rect.height, rect.width) != size);
        let resizes = matches!(
            self.resize,
            Resize::Pillow(_, to) | Resize::Torch(_, _, to) | Resize::TorchFloat(_, _, to) if to != size
        );
        let mut paste = paste;
        if let Some(pad) = paste.filter(|_| crops || !resizes) {
            // Written in full by the pad.
            let mut canvas = scratch("jobs", checked_len("jobs", &[size.0, size.1, 3])?)?;
            pad_rgb(src, pad.size, pad.at, pad.fill, &mut canvas)?;
            (owned, paste) = (Some(canvas), None);
        }
        if let Some(rect) = self.crop.filter(|_| crops) {
            check_crop(rect, size)?;
            let mut out = scratch("jobs", checked_len("jobs", &[rect.height, rect.width, 3])?)?;
            match &owned {
                Some(canvas) => Source::packed(canvas, 3, size)?.write_rgb_part(rect, &mut out),
                None => src.write_rgb_part(rect, &mut out),
            }
            if let Some(canvas) = owned.replace(out) {
                recycle(Buffer::U8(canvas));
            }
            size = (rect.height, rect.width);
        }
        match self.resize {
            // Pillow and torchvision return the input unchanged for an unchanged size.
            Resize::Pillow(_, to) | Resize::Torch(_, _, to) | Resize::TorchFloat(_, _, to) if to != size => {
                let part = self.resize_part(size, to, whole);
                // Written in full by the resize before anything reads it.
                let mut out = scratch("jobs", checked_len("jobs", &[part.height, part.width, 3])?)?;
                match &owned {
                    Some(pixels) => {
                        let pixels = Source::packed(pixels, 3, size)?;
                        self.resize.run_part(pixels, None, part, &mut out)?;
                    }
                    None => self.resize.run_part(src, paste, part, &mut out)?,
                }
                if let Some(cropped) = owned.replace(out) {
                    recycle(Buffer::U8(cropped));
                }
                (size, origin) = ((part.height, part.width), (part.top, part.left));
            }
            _ => {}
        }
        Ok((self.pad_pixels(src, owned, size)?, origin))
    }

    /// The last step of [`Job::prepare`]: its pixels (`owned`, else `src`, of `size`)
    /// pasted on the job's canvas, if it has one of another size.
    fn pad_pixels(
        &self,
        src: Source<'_>,
        mut owned: Option<Vec<u8>>,
        mut size: (usize, usize),
    ) -> Result<Option<Owned>, TransformError> {
        if let Some(Pad {
            size: canvas,
            at,
            fill,
        }) = self.pad
        {
            if canvas != size {
                // Written in full by the pad.
                let mut out = scratch("jobs", checked_len("jobs", &[canvas.0, canvas.1, 3])?)?;
                match &owned {
                    Some(pixels) => pad_rgb(Source::packed(pixels, 3, size)?, canvas, at, fill, &mut out)?,
                    None => pad_rgb(src, canvas, at, fill, &mut out)?,
                }
                if let Some(resized) = owned.replace(out) {
                    recycle(Buffer::U8(resized));
                }
                size = canvas;
            }
        }
        Ok(owned.map(|v| (v, size)))
    }

    /// The part of its resize from `size` to `to` that [`Job::prepare`] computes: all of
    /// it when the pixels are kept `whole` or padded after, else the part its windows read
    /// (see [`Job::read_part`]).
    fn resize_part(&self, size: (usize, usize), to: (usize, usize), whole: bool) -> Rect {
        match self.read_part(size, to) {
            Some(part) if !whole && self.pad.is_none() && self.resize.computes_parts() => part,
            _ => resize::whole(to),
        }
    }

    /// The pad of a job that pads the input image (of `size`) itself, uncropped and
    /// unresized, which its layout may then read where it is.
    fn input_pad(&self, size: (usize, usize)) -> Option<Pad> {
        let unchanged = self.source.is_none()
            && self.crop.is_none()
            && self.frames.is_empty()
            && self.resize.output_size(size) == size;
        self.pad.filter(|_| unchanged)
    }

    /// The canvas and patches of a job whose patch rows read the input image (of `size`)
    /// where it is, unresized, on a canvas (Kimi-VL's pad to whole merge groups): only the
    /// canvas's margins are filled, and no canvas is written.
    fn pasted_patches(&self, size: (usize, usize)) -> Option<(Pad, Patches)> {
        match (self.input_pad(size)?, &self.layout) {
            (pad, Some(Layout::Patches(p))) => Some((pad, *p)),
            _ => None,
        }
    }

    /// The canvas and source window of a job whose one window is the whole canvas of its
    /// pad, read from the input image where it is, unresized (Fuyu's pad to 1080x1920): the
    /// window reaches past the pixels, where the core writes the fill's normalised values,
    /// and no canvas is written.
    fn pasted_window(&self, size: (usize, usize)) -> Option<(Pad, Window)> {
        let pad = self.input_pad(size)?;
        let (height, width) = pad.size;
        let whole = Window {
            top: 0,
            left: 0,
            height,
            width,
        };
        if !matches!(&self.layout, Some(Layout::Windows(windows)) if windows[..] == [whole]) {
            return None;
        }
        let back = |v: usize| isize::try_from(v).ok().map(|v| -v);
        Some((
            pad,
            Window {
                top: back(pad.at.0)?,
                left: back(pad.at.1)?,
                height,
                width,
            },
        ))
    }

    /// The crop of a job that only cuts its pixels from its source (of `size`; one frame,
    /// no resize to another size, no pad) for a canvas or windows, which read it where it
    /// is: Idefics2's quarters of the image, LLaVA-OneVision's and Ovis2's tiles of theirs.
    fn crop_in_place(&self, size: (usize, usize)) -> Option<Rect> {
        let rect = self.crop?;
        let kept = (rect.height, rect.width);
        let unresized = match self.resize {
            Resize::Keep => true,
            Resize::Pillow(_, to) | Resize::Torch(_, _, to) | Resize::TorchFloat(_, _, to) => to == kept,
        };
        let read = matches!(self.layout, Some(Layout::Canvas { .. } | Layout::Windows(_)));
        (kept != size && unresized && self.pad.is_none() && self.frames.is_empty() && read).then_some(rect)
    }

    /// A video's further frames (`self.frames` of `images`), prepared as the first one was.
    fn further_frames<'i>(&self, images: &[Image<'i>]) -> Result<Vec<Cow<'i, [u8]>>, TransformError> {
        self.frames
            .iter()
            .map(|&f| {
                let frame = images[f].source()?;
                Ok(match self.prepare(frame, None, true)?.0 {
                    Some((v, _)) => Cow::Owned(v),
                    None => frame.to_rgb()?,
                })
            })
            .collect()
    }

    /// The smallest part of a resize from `from` to `to` that holds every pixel this job's
    /// windows read, spanning each axis the resize keeps (see [`resize::part_fits`]);
    /// `None` for other layouts or windows that read nothing.
    fn read_part(&self, from: (usize, usize), to: (usize, usize)) -> Option<Rect> {
        let Some(Layout::Windows(windows)) = &self.layout else {
            return None;
        };
        let ([from_h, from_w], [to_h, to_w]) = ([from.0, from.1], [to.0, to.1]);
        // The image rows (or columns) the windows read along one axis.
        let span = |kept: bool, len: usize, window: fn(&Window) -> (isize, usize)| {
            if kept {
                return Some(0..len);
            }
            windows
                .iter()
                .map(|w| {
                    let (start, count) = window(w);
                    let inside = overlap(start, count, len);
                    let first = (start + inside.start as isize) as usize;
                    first..first + inside.len()
                })
                .filter(|r| !r.is_empty())
                .reduce(|a, b| a.start.min(b.start)..a.end.max(b.end))
        };
        let rows = span(from_h == to_h, to_h, |w| (w.top, w.height))?;
        let cols = span(from_w == to_w, to_w, |w| (w.left, w.width))?;
        Some(Rect {
            top: rows.start,
            left: cols.start,
            height: rows.len(),
            width: cols.len(),
        })
    }

    /// Whether `next` (job `k`) writes windows inside the pixels (of `size`) this job
    /// resizes as float32 ([`Layout::Resized`]), with the same table, and nothing reads them
    /// after: the two then run together ([`Job::write_with_windows`]).
    fn pairs_with(&self, next: &Job, size: (usize, usize), read_later: &HashSet<usize>, k: usize) -> bool {
        matches!(self.layout, Some(Layout::Resized { .. }))
            && self.frames.is_empty()
            && matches!(&next.layout, Some(Layout::Windows(w)) if w.iter().all(|w| w.lies_in(size)))
            && next.source == self.source
            && next.crop.is_none()
            && matches!(next.resize, Resize::Keep)
            && next.pad.is_none()
            && next.frames.is_empty()
            && next.table == self.table
            && !read_later.contains(&k)
    }

    /// This job's [`Layout::Resized`] of `pixels` (HWC RGB of `size`) into `dst`, and the
    /// windows `next` writes of them into `next_dst`, each pixel looked up once for both
    /// (see [`crate::torch_float::resize_mapped_planes_and_windows`]).
    fn write_with_windows<T: Element>(
        &self,
        pixels: &[u8],
        size: (usize, usize),
        norm: &Normalize<T>,
        dst: &mut [&mut [T]],
        next: &Job,
        next_dst: &mut [&mut [T]],
    ) -> Result<(), TransformError> {
        let (
            Some(Layout::Resized {
                mode,
                one_thread,
                size: to,
            }),
            Some(Layout::Windows(windows)),
            [dst],
            [next_dst],
        ) = (&self.layout, &next.layout, dst, next_dst)
        else {
            return Err(invalid("jobs", "a float resize, then windows", "other layouts"));
        };
        let (f32_norm, dst) = T::as_float32(norm, dst).ok_or_else(not_float32)?;
        let (_, next_dst) = T::as_float32(norm, next_dst).ok_or_else(not_float32)?;
        resize_mapped_planes_and_windows(
            pixels,
            size,
            f32_norm,
            dst,
            *to,
            *mode,
            *one_thread,
            windows,
            next_dst,
        )
    }

    /// Writes this job's layout of `pixels` (HWC RGB of `size`, starting at `origin` of the
    /// job's pixels, see [`Job::prepare`]) into its output ranges `dst` (see [`Job::segments`]).
    fn write<T: Element>(
        &self,
        frames: &[&[u8]],
        size: (usize, usize),
        origin: (usize, usize),
        norm: &Normalize<T>,
        dst: &mut [&mut [T]],
        memory: Memory,
    ) -> Result<(), TransformError> {
        let pixels = frames[0];
        match (&self.layout, dst) {
            (None, _) => Ok(()),
            (Some(Layout::Patches(p)), [dst]) => normalize_to_patches(frames, size, *p, norm, dst, memory),
            (Some(Layout::Windows(windows)), [dst]) => {
                let moved: Vec<Window> = windows
                    .iter()
                    .map(|w| Window {
                        // Saturating: a window far outside stays outside (fuzz finding).
                        top: w.top.saturating_sub_unsigned(origin.0),
                        left: w.left.saturating_sub_unsigned(origin.1),
                        ..*w
                    })
                    .collect();
                crop_windows(Source::packed(pixels, 3, size)?, &moved, norm, dst)
            }
            (Some(Layout::HwcPatches { patch_size, windows }), [dst]) => {
                normalize_to_hwc_patches(pixels, size, windows, *patch_size, norm, dst)
            }
            (Some(Layout::Canvas { row, plane }), [dst]) => {
                normalize_into_canvas(Source::packed(pixels, 3, size)?, norm, (*row, *plane), dst)
            }
            (Some(Layout::Strip { patch_size, .. }), dst) => {
                normalize_to_strip(pixels, size, *patch_size, norm, dst)
            }
            (
                Some(Layout::Resized {
                    mode,
                    one_thread,
                    size: to,
                }),
                [dst],
            ) => {
                let (norm, dst) = T::as_float32(norm, dst).ok_or_else(not_float32)?;
                resize_mapped_planes(pixels, size, norm, dst, *to, *mode, *one_thread)
            }
            (Some(_), dst) => Err(invalid("out", "one output range", dst.len())),
        }
    }
}

/// A job's pixels while its image's jobs run.
enum Pixels {
    /// The packed input image.
    Input,
    /// Pixels of its own, and their size.
    Owned(Vec<u8>, (usize, usize)),
    /// The same pixels as an earlier job's.
    Same(usize),
    /// The pixels of an earlier job (or the input, `None`) pasted on a canvas, left
    /// unwritten: every job reading them resizes them (see [`Job::prepare`]).
    Pasted(Option<usize>, Pad),
}

/// Runs `jobs` on `images` into `dst`, whose lines are where `memory` says, on at most
/// `threads` threads of the process's worker pool (built with `pool_threads` threads if this
/// is the first parallel call; see [`crate::workers`]).
///
/// Each job writes its own ranges of `dst` (see [`Job::segments`]), disjoint from every
/// other job's, with the values of table `norms[job.table]`; values no job writes are left
/// as they are (a zeroed output stays zero: HF's zero padding across a batch). An image's
/// jobs run in order on one thread; images run in parallel, the largest first, and so do
/// the bands of a large resize or patch layout.
///
/// # Errors
/// A job that reads a missing image, table or later job, overlapping or out-of-range
/// outputs, or a job that fails (the failure of the first such image in `images`).
pub fn run_batch<T: Element>(
    images: &[Image<'_>],
    jobs: &[Job],
    norms: &[Normalize<T>],
    dst: &mut [T],
    memory: Memory,
    threads: usize,
    pool_threads: usize,
) -> Result<(), TransformError> {
    let ranges = output_ranges(images, jobs, norms.len(), dst.len())?;
    let slots = split_output(dst, ranges, jobs.len())?;
    // One group per image, its jobs in order.
    let mut groups: Vec<Group<'_, T>> = Vec::new();
    let mut group_of = HashMap::new();
    for (j, mut slot) in slots.into_iter().enumerate() {
        let g = *group_of.entry(jobs[j].image).or_insert_with(|| {
            groups.push((jobs[j].image, Vec::new()));
            groups.len() - 1
        });
        // In the layout's order (the output's order differs for a strip's rows).
        slot.sort_unstable_by_key(|&(k, _)| k);
        groups[g].1.push((j, slot.into_iter().map(|(_, s)| s).collect()));
    }
    // The largest images first (input pixels plus output values), so that the last task to
    // finish is a short one: a 12 MP image taken last kept one thread busy while the
    // other waited.
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&g| {
        let (image, group) = &groups[g];
        let (h, w) = images[*image].size;
        let written: usize = group.iter().flat_map(|(_, slot)| slot).map(|s| s.len()).sum();
        std::cmp::Reverse(h.saturating_mul(w).saturating_add(written))
    });
    // Each task takes its group once; the results are read in image order, so the error
    // reported does not depend on the threads.
    let tasks: Vec<Mutex<Option<Group<'_, T>>>> = groups.into_iter().map(|g| Mutex::new(Some(g))).collect();
    let results: Vec<Mutex<Result<(), TransformError>>> = tasks.iter().map(|_| Mutex::new(Ok(()))).collect();
    workers::run(threads, pool_threads, tasks.len(), &|i| {
        let g = order[i];
        let taken = tasks[g].lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some((image, group)) = taken {
            *results[g].lock().unwrap_or_else(PoisonError::into_inner) =
                run_image(images, image, jobs, group, norms, memory);
        }
    });
    results
        .into_iter()
        .try_for_each(|r| r.into_inner().unwrap_or_else(PoisonError::into_inner))
}

/// The output ranges `jobs` write, as `(start, end, job, k)` with `k` the range's place in
/// the job's layout, every job checked against `images`, `tables` tables and an output of
/// `out_len` values (overlaps are [`split_output`]'s to find).
fn output_ranges(
    images: &[Image<'_>],
    jobs: &[Job],
    tables: usize,
    out_len: usize,
) -> Result<Vec<(usize, usize, usize, usize)>, TransformError> {
    // Sizes first, so every range is known (and checked) before any pixel work.
    let mut sizes = Vec::with_capacity(jobs.len());
    let mut ranges = Vec::with_capacity(jobs.len());
    for (j, job) in jobs.iter().enumerate() {
        let image = images.get(job.image).ok_or_else(|| {
            invalid(
                "jobs",
                format!("an image index below {}", images.len()),
                job.image,
            )
        })?;
        let source = match job.source {
            None => image.size,
            Some(k) if k < j && jobs[k].image == job.image => sizes[k],
            Some(k) => {
                return Err(invalid(
                    "jobs",
                    format!("an earlier job of image {} as source", job.image),
                    k,
                ))
            }
        };
        let size = job.pixel_size(source)?;
        if !job.frames.is_empty() {
            let patches = matches!(job.layout, Some(Layout::Patches(p)) if p.temporal_patch_size == job.frames.len() + 1);
            let same = job
                .frames
                .iter()
                .all(|&f| images.get(f).is_some_and(|i| i.size == image.size));
            if job.source.is_some() || !patches || !same {
                return Err(invalid(
                    "jobs",
                    "video frames of the image's size, one per further time slot of a patch layout",
                    format!("frames {:?}", job.frames),
                ));
            }
        }
        if job.table >= tables {
            return Err(invalid(
                "jobs",
                format!("a table index below {tables}"),
                job.table,
            ));
        }
        for (k, (start, len)) in job.segments(size)?.into_iter().enumerate() {
            let end = job
                .offset
                .checked_add(start)
                .and_then(|s| s.checked_add(len))
                .filter(|&end| end <= out_len)
                .ok_or_else(|| {
                    invalid(
                        "jobs",
                        format!("outputs inside the {out_len} output values"),
                        format!("{len} values at {} + {start}", job.offset),
                    )
                })?;
            if len > 0 {
                ranges.push((end - len, end, j, k));
            }
        }
        sizes.push(size);
    }
    Ok(ranges)
}

/// The parts of an output of `len` values that no job of the batch writes (left as they
/// are by [`run_batch`]: zero in a fresh output), every job checked as there.
///
/// # Errors
/// As [`run_batch`]'s checks before any pixel work.
pub fn unwritten(
    images: &[Image<'_>],
    jobs: &[Job],
    tables: usize,
    len: usize,
) -> Result<Vec<Range<usize>>, TransformError> {
    let mut ranges = output_ranges(images, jobs, tables, len)?;
    ranges.sort_unstable();
    let mut gaps = Vec::new();
    let mut at = 0;
    for (start, end, _, _) in ranges {
        if start > at {
            gaps.push(at..start);
        }
        at = at.max(end);
    }
    if at < len {
        gaps.push(at..len);
    }
    Ok(gaps)
}

/// `dst` cut into the ranges of each of `jobs` jobs, given as `(start, end, job, k)` with
/// `k` the range's place in the job's layout, or an error for ranges that overlap.
fn split_output<T>(
    dst: &mut [T],
    mut ranges: Vec<(usize, usize, usize, usize)>,
    jobs: usize,
) -> Result<Slots<'_, T>, TransformError> {
    ranges.sort_unstable();
    let mut slots: Slots<'_, T> = (0..jobs).map(|_| Vec::new()).collect();
    let mut rest = dst;
    let mut at = 0;
    for (start, end, j, k) in ranges {
        if start < at {
            return Err(invalid(
                "jobs",
                "outputs that do not overlap",
                format!("job {j} writing at {start}"),
            ));
        }
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(start - at);
        let (slot, tail) = tail.split_at_mut(end - start);
        slots[j].push((k, slot));
        (rest, at) = (tail, end);
    }
    Ok(slots)
}

/// One image's jobs, in order: the image is packed into RGB once, when a job first needs
/// it packed (a first resize reads it in place); each job's pixels are kept while a later
/// job of the image may read them.
fn run_image<T: Element>(
    images: &[Image<'_>],
    index: usize,
    jobs: &[Job],
    group: Vec<(usize, Vec<&mut [T]>)>,
    norms: &[Normalize<T>],
    memory: Memory,
) -> Result<(), TransformError> {
    let image = &images[index];
    let input = image.source()?;
    let mut rgb: Option<Cow<'_, [u8]>> = None;
    let mut pixels: HashMap<usize, Pixels> = HashMap::new();
    let read_later: HashSet<usize> = group.iter().filter_map(|&(j, _)| jobs[j].source).collect();
    let pasted = pasted_pads(jobs, &group, &read_later);
    let mut together = prepare_together(input, jobs, &group, &read_later)?;
    let mut group = group.into_iter().peekable();
    while let Some((j, mut slot)) = group.next() {
        let (job, norm) = (&jobs[j], &norms[jobs[j].table]);
        if let (true, Some(pad)) = (pasted.contains(&j), job.pad) {
            pixels.insert(j, Pixels::Pasted(job.source, pad));
            continue;
        }
        if !read_later.contains(&j) {
            let src = source_of(&pixels, input, job.source)?;
            if write_in_place(job, (input, image.size), src, norm, &mut slot, memory)? {
                continue;
            }
        }
        // Pixels a later job reads are kept whole.
        let whole = read_later.contains(&j);
        let (prepared, origin) = if let Some(prepared) = together.remove(&j) {
            prepared
        } else if job.source.is_none() {
            job.prepare(input, None, whole)?
        } else if let Some(Pixels::Pasted(of, pad)) = job.source.and_then(|k| pixels.get(&k)) {
            let (of, pad) = (*of, *pad);
            if reads_input(&pixels, of) {
                // The input image, read where it is.
                job.prepare(input, Some(pad), whole)?
            } else {
                let (src, size) = resolve(&pixels, (rgb.as_deref().unwrap_or_default(), image.size), of);
                job.prepare(Source::packed(src, 3, size)?, Some(pad), whole)?
            }
        } else {
            if reads_input(&pixels, job.source) && rgb.is_none() {
                rgb = Some(input.to_rgb()?);
            }
            let (src, size) = resolve(
                &pixels,
                (rgb.as_deref().unwrap_or_default(), image.size),
                job.source,
            );
            job.prepare(Source::packed(src, 3, size)?, None, whole)?
        };
        // Patch rows, windows and canvases of the unchanged input read it where it is (a
        // Pillow image at a size the model keeps needs no packed copy).
        let in_place = prepared.is_none()
            && job.source.is_none()
            && job.frames.is_empty()
            && rgb.is_none()
            && input.as_rgb().is_none()
            && matches!(
                job.layout,
                Some(Layout::Patches(_) | Layout::Windows(_) | Layout::Canvas { .. })
            );
        if in_place {
            write_input(job, input, norm, &mut slot, memory)?;
        } else if !slot.is_empty() {
            if prepared.is_none() && reads_input(&pixels, job.source) && rgb.is_none() {
                rgb = Some(input.to_rgb()?);
            }
            let (first, size): (&[u8], _) = match &prepared {
                Some((v, size)) => (v, *size),
                None => resolve(
                    &pixels,
                    (rgb.as_deref().unwrap_or_default(), image.size),
                    job.source,
                ),
            };
            let others = job.further_frames(images)?;
            let frames: Vec<&[u8]> = std::iter::once(first)
                .chain(others.iter().map(|f| &**f))
                .collect();
            // Windows of the same pixels larger than the cache, the next job, are written as its
            // float resize reads them (Phi-4-multimodal's global view and crops of its canvas).
            let pairs = |(k, crops): &(usize, Vec<&mut [T]>)| {
                origin == (0, 0) && streamed(crops) && job.pairs_with(&jobs[*k], size, &read_later, *k)
            };
            if let Some((k, mut crops)) = group.next_if(pairs) {
                job.write_with_windows(first, size, norm, &mut slot, &jobs[k], &mut crops)?;
            } else {
                job.write(&frames, size, origin, norm, &mut slot, memory)?;
            }
            others.into_iter().for_each(recycle_rgb);
        }
        if read_later.contains(&j) {
            if prepared.is_none() && reads_input(&pixels, job.source) && rgb.is_none() {
                rgb = Some(input.to_rgb()?);
            }
            let kept = match (prepared, job.source) {
                (Some((v, size)), _) => Pixels::Owned(v, size),
                (None, None) => Pixels::Input,
                (None, Some(k)) => Pixels::Same(k),
            };
            pixels.insert(j, kept);
        } else if let Some((v, _)) = prepared {
            // The pool serves the next call's buffers of this size: only `scratch` buffers
            // (written in full before they are read) are ever taken from it.
            recycle(Buffer::U8(v));
        }
    }
    recycle_pixels(pixels, rgb);
    Ok(())
}

/// Writes `job`'s layout (patch rows, windows or a canvas) of the unchanged input image,
/// read where it is (a Pillow image at a size the model keeps needs no packed copy).
fn write_input<T: Element>(
    job: &Job,
    input: Source<'_>,
    norm: &Normalize<T>,
    slot: &mut [&mut [T]],
    memory: Memory,
) -> Result<(), TransformError> {
    match (&job.layout, slot) {
        (Some(Layout::Canvas { row, plane }), [dst]) => {
            normalize_into_canvas(input, norm, (*row, *plane), dst)
        }
        (Some(Layout::Patches(p)), [dst]) => normalize_source_to_patches(input, None, *p, norm, dst, memory),
        (Some(Layout::Windows(windows)), [dst]) => crop_windows(input, windows, norm, dst),
        (_, dst) => Err(invalid("out", "one output range", dst.len())),
    }
}

/// The error of a float resize layout ([`Layout::Resized`]) given tables of another type.
fn not_float32() -> TransformError {
    invalid(
        "tables",
        "float32 tables for a float resize layout",
        "another dtype",
    )
}

/// Whether a job's output ranges are larger than the cache: the windows of a float resize's
/// pixels are then written as it reads them ([`Job::write_with_windows`]). Smaller, they
/// are written apart, their values staying in cache. On a 2-vCPU Zen 4 EPYC (7 interleaved
/// rounds), Phi-4-multimodal's torchvision processor took 7.26 -> 6.44 ms a call at
/// 1920x1080 (15 crops, 34 MB) and 10.52 -> 9.99 ms at 12 MP (12 crops, 29 MB); at 640x480
/// (4 crops, 9.6 MB) written together it took as long streamed (1.88 ms, 5 rounds) and
/// longer through the cache (2.03 -> 2.36 ms).
fn streamed<T>(ranges: &[&mut [T]]) -> bool {
    #[cfg(target_arch = "x86_64")]
    return ranges.iter().map(|r| size_of_val(&**r)).sum::<usize>() >= crate::stream::STREAM_PAST_CACHE_BYTES;
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = ranges;
        false
    }
}

/// Bytes of a Pillow image's RGBX pixels from which [`prepare_together`] runs its resizes
/// together: smaller images stay in the last-level cache between two resizes, where packing
/// a few rows at a time for all of them costs more than it saves (on a 2-vCPU Zen 4 EPYC with
/// 32 MB of L3, 7-9-round A/B: Llama 4's and `InternVL3`'s 1920x1080 images 2.4% slower
/// together, 1536x2048 ones up to 5% faster).
const TOGETHER_BYTES: usize = 12 << 20;

/// What [`Job::prepare`] returns for the jobs of `group` that resize the input image (no
/// crop or further frames; a pad after), where two or more of them do, from a grayscale
/// image or a Pillow image of at least [`TOGETHER_BYTES`]: their resizes run
/// together (see [`resize::resize_together`]), each source row read from memory and packed
/// to RGB once for all of them. (Each resize alone packs a grayscale image whole.)
///
/// Tilers resize an image to their canvas and to a thumbnail. On a 2-vCPU Zen 4 EPYC (5-round
/// A/B), 12 MP PIL images took 11.91 -> 10.75 ms through Llama 4's torchvision processor,
/// 21.1 -> 20.4 ms through `InternVL3`'s Pillow one and 12.3 -> 11.6 ms through LFM2-VL's
/// (its passes read RGBX rows where they are); grayscale 1920x1080 ones 5.87 -> 4.51 ms
/// (Llama 4). An array's rows are fetched ahead by each pass already: together, 12 MP arrays
/// moved by -2.8% to +1.6% (7 rounds), so they run one resize at a time.
///
/// # Errors
/// A resize's errors, or [`TransformError::OutOfMemory`].
fn prepare_together<S>(
    input: Source<'_>,
    jobs: &[Job],
    group: &[(usize, S)],
    read_later: &HashSet<usize>,
) -> Result<HashMap<usize, Prepared>, TransformError> {
    let size = input.size();
    let together = match input.channels() {
        3 => false,
        4 => size.0.saturating_mul(size.1).saturating_mul(4) >= TOGETHER_BYTES,
        _ => true,
    };
    let mut resizes = Vec::new();
    if together {
        for &(j, _) in group {
            let job = &jobs[j];
            let to = job.resize.output_size(size);
            if job.source.is_some() || job.crop.is_some() || !job.frames.is_empty() || to == size {
                continue;
            }
            let part = job.resize_part(size, to, read_later.contains(&j));
            if let Some(passes) = job.resize.passes(size, part)? {
                resizes.push((j, part, passes));
            }
        }
    }
    if resizes.len() < 2 {
        return Ok(HashMap::new());
    }
    let mut outs = Vec::with_capacity(resizes.len());
    for (_, part, _) in &resizes {
        // Written in full by the resizes.
        outs.push(scratch(
            "jobs",
            checked_len("jobs", &[part.height, part.width, 3])?,
        )?);
    }
    let (keys, passes): (Vec<_>, Vec<_>) = resizes.into_iter().map(|(j, part, p)| ((j, part), p)).unzip();
    let mut run: Vec<(Passes, &mut [u8])> = passes
        .into_iter()
        .zip(outs.iter_mut().map(|o| &mut o[..]))
        .collect();
    resize::resize_together(input, &mut run)?;
    drop(run);
    keys.into_iter()
        .zip(outs)
        .map(|((j, part), out)| {
            let pixels = jobs[j].pad_pixels(input, Some(out), (part.height, part.width))?;
            Ok((j, (pixels, (part.top, part.left))))
        })
        .collect()
}

/// Gives the pool the buffers an image's jobs kept to the end, as each job's own: the
/// pixels kept for later jobs (a 12 MP image padded to a square: a 49 MB canvas, whose
/// page faults took a fifth of LLaVA-1.5's call when it was freed instead), and the input
/// packed to RGB (a Pillow image at a size a view keeps: 36 MB at 12 MP, whose page faults
/// took a tenth of Inkling's call).
fn recycle_pixels(pixels: HashMap<usize, Pixels>, rgb: Option<Cow<'_, [u8]>>) {
    for kept in pixels.into_values() {
        if let Pixels::Owned(v, _) = kept {
            recycle(Buffer::U8(v));
        }
    }
    rgb.into_iter().for_each(recycle_rgb);
}

/// Writes a job whose layout reads its pixels where they are, with no canvas or copy,
/// where it can: [`write_pasted`] for a job that pads the input (of `size`), or the crop of
/// a job that only crops `src`, its source ([`Job::crop_in_place`]); whether it did.
fn write_in_place<T: Element>(
    job: &Job,
    (input, size): (Source<'_>, (usize, usize)),
    src: Option<Source<'_>>,
    norm: &Normalize<T>,
    slot: &mut [&mut [T]],
    memory: Memory,
) -> Result<bool, TransformError> {
    if let [dst] = slot {
        if write_pasted(job, input, size, norm, dst, memory)? {
            return Ok(true);
        }
    }
    let crop = |src: Source<'_>| job.crop_in_place(src.size()).filter(|_| !slot.is_empty());
    let Some((src, rect)) = src.and_then(|src| Some((src, crop(src)?))) else {
        return Ok(false);
    };
    check_crop(rect, src.size())?;
    let cropped = src.crop(rect)?;
    match (&job.layout, slot) {
        (Some(Layout::Windows(windows)), [dst]) => crop_windows(cropped, windows, norm, dst)?,
        (Some(Layout::Canvas { row, plane }), [dst]) => {
            normalize_into_canvas(cropped, norm, (*row, *plane), dst)?;
        }
        (_, dst) => return Err(invalid("out", "one output range", dst.len())),
    }
    Ok(true)
}

/// Writes a job that pads the unresized input (`src`, of `size`) into `dst` without a
/// canvas, where its layout allows ([`Job::pasted_patches`], [`Job::pasted_window`]);
/// whether it did.
fn write_pasted<T: Element>(
    job: &Job,
    src: Source<'_>,
    size: (usize, usize),
    norm: &Normalize<T>,
    dst: &mut [T],
    memory: Memory,
) -> Result<bool, TransformError> {
    if let Some((pad, p)) = job.pasted_patches(size) {
        normalize_source_to_patches(src, Some(pad), p, norm, dst, memory)?;
    } else if let Some((pad, window)) = job.pasted_window(size) {
        let fill = std::array::from_fn(|c| norm.tables()[c][usize::from(pad.fill[c])]);
        crop_windows(src, &[window], &norm.clone().with_outside(fill), dst)?;
    } else {
        return Ok(false);
    }
    Ok(true)
}

/// The jobs of `group` (one image's) that only pad pixels which later jobs read, every
/// reader starting with a uint8 resize: left unwritten, each reader resizes the pasted
/// pixels band by band (see [`resize::separable`]).
fn pasted_pads<S>(jobs: &[Job], group: &[(usize, S)], read_later: &HashSet<usize>) -> HashSet<usize> {
    let readers_resize = |j: usize| {
        group
            .iter()
            .map(|&(k, _)| &jobs[k])
            .filter(|k| k.source == Some(j))
            .all(|k| {
                k.crop.is_none()
                    && k.frames.is_empty()
                    && matches!(k.resize, Resize::Pillow(..) | Resize::Torch(..))
            })
    };
    read_later
        .iter()
        .copied()
        .filter(|&j| {
            let job = &jobs[j];
            let pad_only = job.crop.is_none() && job.resize == Resize::Keep && job.layout.is_none();
            pad_only && job.pad.is_some() && job.frames.is_empty() && readers_resize(j)
        })
        .collect()
}

/// A job's crop `rect` lies inside its source of `size`.
fn check_crop(rect: Rect, size: (usize, usize)) -> Result<(), TransformError> {
    if rect.fits(size) {
        return Ok(());
    }
    Err(invalid(
        "jobs",
        format!("a crop inside the source of size {size:?}"),
        format!("{rect:?}"),
    ))
}

/// [`Layout::Windows`]: each of `windows` of `src`, normalised, back to back in `dst`.
fn crop_windows<T: Element>(
    src: Source<'_>,
    windows: &[Window],
    norm: &Normalize<T>,
    dst: &mut [T],
) -> Result<(), TransformError> {
    let mut rest = dst;
    for window in windows {
        let (head, tail) = rest.split_at_mut(3 * window.height * window.width);
        crop_source_and_normalize(src, *window, norm, head)?;
        rest = tail;
    }
    Ok(())
}

/// What `source` (a job, or the input image when `None`) left for later jobs, past jobs
/// that keep an earlier one's pixels: never [`Pixels::Same`]; `None` for the input image.
fn kept(pixels: &HashMap<usize, Pixels>, mut source: Option<usize>) -> Option<&Pixels> {
    loop {
        match source.map(|k| &pixels[&k]) {
            Some(Pixels::Same(k)) => source = Some(*k),
            found => return found,
        }
    }
}

/// Whether `source` (a job, or the input image when `None`) resolves to the input image.
fn reads_input(pixels: &HashMap<usize, Pixels>, source: Option<usize>) -> bool {
    matches!(kept(pixels, source), None | Some(Pixels::Input))
}

/// The pixels `source` (a job, or the input image when `None`) left for later jobs, read
/// where they are (the input image as given); `None` for pixels pasted on a canvas left
/// unwritten.
fn source_of<'p>(
    pixels: &'p HashMap<usize, Pixels>,
    input: Source<'p>,
    source: Option<usize>,
) -> Result<Option<Source<'p>>, TransformError> {
    Ok(match kept(pixels, source) {
        None | Some(Pixels::Input) => Some(input),
        Some(Pixels::Owned(v, size)) => Some(Source::packed(v, 3, *size)?),
        Some(Pixels::Same(_) | Pixels::Pasted(..)) => None,
    })
}

/// The pixels `source` (a job, or the input image when `None`) left for later jobs.
fn resolve<'p>(
    pixels: &'p HashMap<usize, Pixels>,
    input: (&'p [u8], (usize, usize)),
    source: Option<usize>,
) -> (&'p [u8], (usize, usize)) {
    match kept(pixels, source) {
        None | Some(Pixels::Input) => input,
        Some(Pixels::Owned(v, size)) => (v, *size),
        Some(Pixels::Same(_) | Pixels::Pasted(..)) => {
            unreachable!("a job reading pasted pixels resizes them (run_image)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(h: usize, w: usize, seed: usize) -> Vec<u8> {
        (0..h * w * 3)
            .map(|i| ((i * 31 + seed * 17) % 251) as u8)
            .collect()
    }

    fn job(image: usize, resize: Resize, layout: Layout, offset: usize) -> Job {
        Job {
            image,
            source: None,
            crop: None,
            resize,
            pad: None,
            layout: Some(layout),
            offset,
            table: 0,
            frames: Vec::new(),
        }
    }

    /// Values a single-range job writes for pixels of `size`.
    fn output_len(job: &Job, size: (usize, usize)) -> usize {
        job.segments(size).unwrap().iter().map(|&(_, len)| len).sum()
    }

    fn window(top: isize, left: isize, height: usize, width: usize) -> Window {
        Window {
            top,
            left,
            height,
            width,
        }
    }

    /// [`run_batch`] into used memory (large outputs streamed) on a pool of 4 threads.
    fn batch<T: Element>(
        images: &[Image<'_>],
        jobs: &[Job],
        norms: &[Normalize<T>],
        dst: &mut [T],
        threads: usize,
    ) -> Result<(), TransformError> {
        run_batch(images, jobs, norms, dst, Memory::Used, threads, 4)
    }

    const PATCHES: Patches = Patches {
        patch_size: 2,
        temporal_patch_size: 2,
        merge_size: 2,
        time_major: false,
    };

    /// Runs one job alone on its own pixels: what the batch must reproduce.
    fn alone(src: &[u8], size: (usize, usize), job: &Job, norm: &Normalize<f32>) -> Vec<f32> {
        let (pixels, psize) = job
            .prepare(Source::packed(src, 3, size).unwrap(), None, true)
            .unwrap()
            .0
            .unwrap_or_else(|| (src.to_vec(), size));
        let mut out = vec![f32::NAN; output_len(job, psize)];
        job.write(&[&pixels], psize, (0, 0), norm, &mut [&mut out[..]], Memory::Used)
            .unwrap();
        out
    }

    #[test]
    fn batch_equals_jobs_run_one_by_one_for_any_thread_count() {
        let norm = Normalize::new([0.5; 3], [0.25; 3], 1.0 / 255.0).unwrap();
        let data: Vec<(Vec<u8>, (usize, usize))> = [(30, 40), (17, 9), (56, 28), (5, 5)]
            .iter()
            .enumerate()
            .map(|(i, &(h, w))| (pattern(h, w, i), (h, w)))
            .collect();
        let images: Vec<Image<'_>> = data
            .iter()
            .map(|(pixels, size)| Image {
                pixels,
                channels: 3,
                rows: None,
                size: *size,
            })
            .collect();
        let mut jobs = Vec::new();
        let mut offset = 0;
        for (i, (_, size)) in data.iter().enumerate() {
            let resize = if i % 2 == 0 {
                Resize::Pillow(Filter::Bicubic, (8, 12))
            } else {
                Resize::Torch(TorchMode::Bicubic, true, (12, 8))
            };
            let layout = if i < 2 {
                Layout::Patches(PATCHES)
            } else {
                Layout::Windows(vec![window(0, 0, 4, 4), window(4, 4, 4, 4), window(-2, 5, 6, 9)])
            };
            let j = job(i, resize, layout, offset);
            offset += output_len(&j, j.pixel_size(*size).unwrap());
            jobs.push(j);
        }
        let serial: Vec<f32> = jobs
            .iter()
            .flat_map(|j| alone(&data[j.image].0, data[j.image].1, j, &norm))
            .collect();
        for threads in [1, 2, 3, 8] {
            let mut out = vec![f32::NAN; offset];
            batch(&images, &jobs, std::slice::from_ref(&norm), &mut out, threads).unwrap();
            assert_eq!(out, serial, "threads={threads}");
        }
        // Outputs must fit and must not overlap; a gap is left as it was.
        assert!(batch(
            &images,
            &jobs,
            std::slice::from_ref(&norm),
            &mut vec![0f32; offset - 1],
            2
        )
        .is_err());
        let mut gapped = jobs.clone();
        gapped[3].offset += 5;
        let mut out = vec![7f32; offset + 5];
        batch(&images, &gapped, std::slice::from_ref(&norm), &mut out, 2).unwrap();
        assert_eq!(out[jobs[3].offset..jobs[3].offset + 5], [7.0; 5]);
        assert_eq!(out[jobs[3].offset + 5..], serial[jobs[3].offset..]);
        gapped[3].offset = jobs[3].offset - 1;
        assert!(batch(
            &images,
            &gapped,
            std::slice::from_ref(&norm),
            &mut vec![0f32; offset],
            2
        )
        .is_err());
    }

    #[test]
    fn windows_far_outside_a_resized_part_read_the_outside_value() {
        // Fuzz finding: the resize computes only the part the windows read, and moving a
        // window near isize::MIN to that part's origin overflowed.
        let norm = Normalize::new([0.5; 3], [0.25; 3], 1.0 / 255.0).unwrap();
        let src = pattern(20, 30, 0);
        let windows = vec![window(4, 6, 4, 4), window(isize::MIN + 1, isize::MIN + 1, 2, 2)];
        let resize = Resize::Pillow(Filter::Bilinear, (16, 24));
        let job = job(0, resize, Layout::Windows(windows), 0);
        let want = alone(&src, (20, 30), &job, &norm);
        let image = Image {
            pixels: &src,
            channels: 3,
            rows: None,
            size: (20, 30),
        };
        let mut out = vec![f32::NAN; want.len()];
        batch(&[image], &[job], std::slice::from_ref(&norm), &mut out, 1).unwrap();
        assert!(out.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    #[test]
    fn a_pad_read_by_resizes_equals_its_canvas_resized() {
        // A pad job read only by resizes is never written whole: each reader resizes the
        // pasted pixels band by band (RGBX input read in place), for a landscape image padded
        // above and below and a portrait one padded left and right; a reader that crops
        // first reads the canvas written whole.
        let norm = Normalize::new([0.1, 0.2, 0.3], [0.5, 0.6, 0.7], 1.0 / 255.0).unwrap();
        for (size, canvas, at) in [((30, 50), (50, 50), (10, 0)), ((50, 30), (50, 50), (0, 10))] {
            let src = pattern(size.0, size.1, 3);
            let rgbx: Vec<u8> = src.chunks_exact(3).flat_map(|p| [p[0], p[1], p[2], 77]).collect();
            let pad = Pad {
                size: canvas,
                at,
                fill: [9, 8, 7],
            };
            let first = Job {
                pad: Some(pad),
                layout: None,
                ..job(0, Resize::Keep, Layout::Patches(PATCHES), 0)
            };
            let readers = [
                job(
                    0,
                    Resize::Pillow(Filter::Bicubic, (20, 24)),
                    Layout::Patches(PATCHES),
                    0,
                ),
                job(
                    0,
                    Resize::Torch(TorchMode::Bilinear, true, (16, 18)),
                    Layout::Windows(vec![window(2, 3, 12, 12)]),
                    0,
                ),
                Job {
                    crop: Some(Rect {
                        top: 4,
                        left: 6,
                        height: 40,
                        width: 30,
                    }),
                    ..job(
                        0,
                        Resize::Pillow(Filter::Lanczos, (12, 8)),
                        Layout::Patches(PATCHES),
                        0,
                    )
                },
            ];
            let mut padded = vec![0; canvas.0 * canvas.1 * 3];
            pad_rgb(
                Source::packed(&src, 3, size).unwrap(),
                canvas,
                at,
                pad.fill,
                &mut padded,
            )
            .unwrap();
            for crops in [false, true] {
                let mut jobs = vec![first.clone()];
                let mut want = Vec::new();
                for reader in readers.iter().filter(|r| r.crop.is_some() == crops) {
                    let len = want.len();
                    want.extend(alone(&padded, canvas, reader, &norm));
                    jobs.push(Job {
                        source: Some(0),
                        offset: len,
                        ..reader.clone()
                    });
                }
                for (pixels, channels) in [(&src, 3), (&rgbx, 4)] {
                    let image = Image {
                        pixels,
                        channels,
                        rows: None,
                        size,
                    };
                    let mut out = vec![f32::NAN; want.len()];
                    batch(&[image], &jobs, std::slice::from_ref(&norm), &mut out, 1).unwrap();
                    assert!(
                        out.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{size:?} on {canvas:?}, {channels} channels, crops {crops}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_window_over_a_whole_pad_equals_the_padded_canvas_cut() {
        // The canvas's one window reads the input where it is (RGB, or RGBX rows), the fill
        // written as its normalised values: the same as normalising the padded canvas.
        let norm = Normalize::new([0.1, 0.2, 0.3], [0.5, 0.6, 0.7], 1.0 / 255.0).unwrap();
        let src = pattern(7, 9, 2);
        let rgbx: Vec<u8> = src.chunks_exact(3).flat_map(|p| [p[0], p[1], p[2], 99]).collect();
        for at in [(0, 0), (2, 3), (5, 7)] {
            let pad = Pad {
                size: (12, 16),
                at,
                fill: [1, 200, 37],
            };
            let plain = job(0, Resize::Keep, Layout::Windows(vec![window(0, 0, 12, 16)]), 0);
            let mut padded = vec![0; 12 * 16 * 3];
            pad_rgb(
                Source::packed(&src, 3, (7, 9)).unwrap(),
                (12, 16),
                at,
                pad.fill,
                &mut padded,
            )
            .unwrap();
            let want = alone(&padded, (12, 16), &plain, &norm);
            let padding = Job {
                pad: Some(pad),
                ..plain
            };
            assert!(padding.pasted_window((7, 9)).is_some());
            for (pixels, channels) in [(&src, 3), (&rgbx, 4)] {
                let image = Image {
                    pixels,
                    channels,
                    rows: None,
                    size: (7, 9),
                };
                let mut out = vec![f32::NAN; want.len()];
                let jobs = std::slice::from_ref(&padding);
                batch(&[image], jobs, std::slice::from_ref(&norm), &mut out, 1).unwrap();
                assert_eq!(out, want, "at {at:?}, {channels} channels");
            }
        }
    }

    #[test]
    fn chains_crops_and_pads_equal_the_steps_done_by_hand() {
        let norm = Normalize::new([0.1, 0.2, 0.3], [0.5, 0.6, 0.7], 1.0 / 255.0).unwrap();
        let src = pattern(40, 60, 1);
        let image = Image {
            pixels: &src,
            channels: 3,
            rows: None,
            size: (40, 60),
        };
        let rect = Rect {
            top: 5,
            left: 10,
            height: 30,
            width: 21,
        };
        let windows = Layout::Windows(vec![window(0, 0, 16, 16), window(16, 0, 16, 16)]);
        // Job 0 only prepares: crop, resize, pad. Job 1 reads it and resizes again; job 2
        // reads it and cuts windows.
        let first = Job {
            crop: Some(rect),
            pad: Some(Pad {
                size: (32, 20),
                at: (3, 2),
                fill: [9, 8, 7],
            }),
            layout: None,
            ..job(
                0,
                Resize::Pillow(Filter::Lanczos, (25, 17)),
                Layout::Patches(PATCHES),
                0,
            )
        };
        let second = Job {
            source: Some(0),
            ..job(
                0,
                Resize::Pillow(Filter::Bilinear, (8, 12)),
                Layout::Patches(PATCHES),
                0,
            )
        };
        let third = Job {
            source: Some(0),
            ..job(0, Resize::Keep, windows.clone(), 0)
        };
        let second_len = output_len(&second, (8, 12));
        let third = Job {
            offset: second_len,
            ..third
        };
        let jobs = [first.clone(), second.clone(), third.clone()];
        let mut cropped = vec![0; 30 * 21 * 3];
        crate::image::crop_rgb(&src, (40, 60), rect, &mut cropped).unwrap();
        let mut resized = vec![0; 25 * 17 * 3];
        resize_rgb(&cropped, (30, 21), &mut resized, (25, 17), Filter::Lanczos).unwrap();
        let mut padded = vec![0; 32 * 20 * 3];
        let resized = Source::packed(&resized, 3, (25, 17)).unwrap();
        pad_rgb(resized, (32, 20), (3, 2), [9, 8, 7], &mut padded).unwrap();
        let mut want = alone(&padded, (32, 20), &second, &norm);
        want.extend(alone(&padded, (32, 20), &third, &norm));
        for threads in [1, 2] {
            let mut out = vec![f32::NAN; want.len()];
            batch(&[image], &jobs, std::slice::from_ref(&norm), &mut out, threads).unwrap();
            assert_eq!(out, want);
        }
        // A source must be an earlier job of the same image.
        let mut bad = jobs.clone();
        bad[1].source = Some(2);
        assert!(batch(
            &[image],
            &bad,
            std::slice::from_ref(&norm),
            &mut vec![0f32; want.len()],
            1
        )
        .is_err());
        // A crop must lie inside its source.
        bad = jobs.clone();
        bad[0].crop = Some(Rect { top: 20, ..rect });
        assert!(batch(
            &[image],
            &bad,
            std::slice::from_ref(&norm),
            &mut vec![0f32; want.len()],
            1
        )
        .is_err());
    }

    #[test]
    fn video_frames_fill_their_time_slots() {
        let norm = Normalize::new([0.5; 3], [0.25; 3], 1.0 / 255.0).unwrap();
        let data: Vec<Vec<u8>> = (0..3).map(|i| pattern(30, 40, i)).collect();
        let images: Vec<Image<'_>> = data
            .iter()
            .map(|pixels| Image {
                pixels,
                channels: 3,
                rows: None,
                size: (30, 40),
            })
            .collect();
        let resize = Resize::Pillow(Filter::Bicubic, (8, 12));
        let video = Job {
            frames: vec![1, 2],
            ..job(
                0,
                resize,
                Layout::Patches(Patches {
                    temporal_patch_size: 3,
                    ..PATCHES
                }),
                0,
            )
        };
        let resized: Vec<Vec<u8>> = data
            .iter()
            .map(|src| {
                let mut out = vec![0; 8 * 12 * 3];
                resize_rgb(src, (30, 40), &mut out, (8, 12), Filter::Bicubic).unwrap();
                out
            })
            .collect();
        let refs: Vec<&[u8]> = resized.iter().map(Vec::as_slice).collect();
        let p = Patches {
            temporal_patch_size: 3,
            ..PATCHES
        };
        let mut want = vec![0f32; output_len(&video, (8, 12))];
        normalize_to_patches(&refs, (8, 12), p, &norm, &mut want, Memory::Used).unwrap();
        for threads in [1, 2] {
            let mut out = vec![f32::NAN; want.len()];
            batch(
                &images,
                std::slice::from_ref(&video),
                std::slice::from_ref(&norm),
                &mut out,
                threads,
            )
            .unwrap();
            assert_eq!(out, want);
        }
        // Frames must fill exactly the further time slots, with the image's size.
        let wrong = Job {
            frames: vec![1],
            ..video.clone()
        };
        assert!(batch(
            &images,
            &[wrong],
            std::slice::from_ref(&norm),
            &mut vec![0f32; want.len()],
            1
        )
        .is_err());
    }

    #[test]
    fn a_large_image_split_into_bands_is_unchanged() {
        let norm = Normalize::new([0.0; 3], [1.0; 3], 1.0).unwrap();
        let src = pattern(700, 500, 3);
        let image = Image {
            pixels: &src,
            channels: 3,
            rows: None,
            size: (700, 500),
        };
        for (resize, (h, w)) in [
            (Resize::Pillow(Filter::Bicubic, (300, 650)), (300, 650)),
            (Resize::Pillow(Filter::Lanczos, (1000, 200)), (1000, 200)),
            (Resize::Pillow(Filter::Bilinear, (240, 500)), (240, 500)),
            (Resize::Pillow(Filter::Hamming, (700, 260)), (700, 260)),
        ] {
            let jobs = [job(0, resize, Layout::Windows(vec![window(0, 0, h, w)]), 0)];
            let mut one = vec![0f32; 3 * h * w];
            let mut four = vec![0f32; 3 * h * w];
            batch(&[image], &jobs, std::slice::from_ref(&norm), &mut one, 1).unwrap();
            batch(&[image], &jobs, std::slice::from_ref(&norm), &mut four, 4).unwrap();
            assert_eq!(one, four, "{resize:?}");
        }
    }

    #[test]
    fn patch_rows_split_among_threads_are_unchanged() {
        // Bands of merge groups split among a team: streamed (outputs of 1 MB and more) or
        // copied, read in place or from a resize.
        let norm = Normalize::new([0.5; 3], [0.25; 3], 1.0 / 255.0).unwrap();
        let src = pattern(700, 504, 5);
        let image = Image {
            pixels: &src,
            channels: 3,
            rows: None,
            size: (700, 504),
        };
        let patches = Patches {
            patch_size: 14,
            ..PATCHES
        };
        for (resize, (h, w)) in [
            (Resize::Keep, (700, 504)),
            (Resize::Pillow(Filter::Bicubic, (560, 448)), (560, 448)),
            (Resize::Torch(TorchMode::Bilinear, true, (112, 140)), (112, 140)),
        ] {
            let jobs = [job(0, resize, Layout::Patches(patches), 0)];
            let len = output_len(&jobs[0], (h, w));
            let mut one = vec![f32::NAN; len];
            let mut four = vec![f32::NAN; len];
            batch(&[image], &jobs, std::slice::from_ref(&norm), &mut one, 1).unwrap();
            batch(&[image], &jobs, std::slice::from_ref(&norm), &mut four, 4).unwrap();
            assert_eq!(one, alone(&src, (700, 504), &jobs[0], &norm), "{resize:?}");
            assert_eq!(one, four, "{resize:?}");
        }
    }

    /// Runs `jobs` on a 32x44 image as RGB, RGBX and grayscale pixels, back to back and in
    /// Pillow's blocks of rows, and checks that RGBX and grayscale give what RGB does.
    fn check_packed_like_rgb(jobs: &[Job]) {
        let norm = Normalize::new([0.5; 3], [0.25; 3], 1.0 / 255.0).unwrap();
        let rgb = pattern(32, 44, 7);
        let rgbx: Vec<u8> = rgb
            .chunks_exact(3)
            .flat_map(|p| [p[0], p[1], p[2], 255])
            .collect();
        let gray: Vec<u8> = rgb.iter().step_by(3).copied().collect();
        let gray_rgb: Vec<u8> = gray.iter().flat_map(|&v| [v, v, v]).collect();
        // Rows in blocks of 7, as Pillow keeps a large image: each slice runs to its block's end.
        let rows_of = |pixels: &[u8], c: usize| -> Vec<Vec<u8>> {
            pixels.chunks(7 * 44 * c).map(<[u8]>::to_vec).collect()
        };
        let (rgbx_blocks, gray_blocks) = (rows_of(&rgbx, 4), rows_of(&gray, 1));
        let slices = |blocks: &[Vec<u8>], c: usize| -> Vec<Vec<u8>> {
            blocks
                .iter()
                .flat_map(|b| (0..b.len() / (44 * c)).map(move |r| b[r * 44 * c..].to_vec()))
                .collect()
        };
        let (rgbx_rows, gray_rows) = (slices(&rgbx_blocks, 4), slices(&gray_blocks, 1));
        let run = |pixels: &[u8], rows: Option<&[&[u8]]>, channels| {
            let image = Image {
                pixels,
                channels,
                rows,
                size: (32, 44),
            };
            let sizes = jobs.iter().scan((32, 44), |size, j| {
                *size = j.pixel_size(*size).unwrap();
                Some(*size)
            });
            let len = jobs.iter().zip(sizes).map(|(j, size)| output_len(j, size)).sum();
            let mut out = vec![0f32; len];
            batch(&[image], jobs, std::slice::from_ref(&norm), &mut out, 1).unwrap();
            out
        };
        let want = run(&rgb, None, 3);
        let rgbx_rows: Vec<&[u8]> = rgbx_rows.iter().map(Vec::as_slice).collect();
        let gray_rows: Vec<&[u8]> = gray_rows.iter().map(Vec::as_slice).collect();
        assert_eq!(run(&rgbx, None, 4), want);
        assert_eq!(run(&[], Some(&rgbx_rows), 4), want);
        let want = run(&gray_rgb, None, 3);
        assert_eq!(run(&gray, None, 1), want);
        assert_eq!(run(&[], Some(&gray_rows), 1), want);
    }

    #[test]
    fn rgbx_and_gray_sources_are_packed_like_rgb() {
        let pillow = Resize::Pillow(Filter::Bicubic, (20, 60));
        let torch = Resize::Torch(TorchMode::Bicubic, true, (12, 17));
        let mut cropped = job(0, pillow, Layout::Patches(PATCHES), 0);
        cropped.crop = Some(Rect {
            top: 3,
            left: 5,
            height: 20,
            width: 30,
        });
        let mut padded = job(0, torch, Layout::Windows(vec![window(0, 0, 14, 20)]), 0);
        padded.pad = Some(Pad {
            size: (14, 20),
            at: (1, 2),
            fill: [1, 2, 3],
        });
        // A first job without a layout, then one reading the input through it.
        let mut chained = job(0, Resize::Keep, Layout::Windows(vec![window(2, 3, 8, 9)]), 0);
        chained.source = Some(0);
        // Resizes of the input run together from a grayscale image (a part; a pad after).
        let together = vec![
            job(
                0,
                Resize::Pillow(Filter::Bilinear, (40, 30)),
                Layout::Windows(vec![window(0, 0, 40, 30)]),
                0,
            ),
            job(0, torch, Layout::Windows(vec![window(1, 2, 8, 9)]), 3 * 40 * 30),
            Job {
                offset: 3 * (40 * 30 + 8 * 9),
                ..padded.clone()
            },
        ];
        let batches = [
            // The input as it is: patch rows and canvases read RGBX and grayscale in place.
            vec![job(0, Resize::Keep, Layout::Patches(PATCHES), 0)],
            vec![job(
                0,
                Resize::Keep,
                Layout::Canvas {
                    row: 44,
                    plane: 32 * 44,
                },
                0,
            )],
            vec![job(0, pillow, Layout::Patches(PATCHES), 0)],
            vec![job(
                0,
                Resize::TorchFloat(FloatMode::Bilinear, true, (20, 30)),
                Layout::Windows(vec![window(0, 0, 20, 30)]),
                0,
            )],
            vec![job(0, torch, Layout::Windows(vec![window(0, 0, 12, 17)]), 0)],
            vec![cropped],
            vec![padded],
            vec![
                Job {
                    layout: None,
                    ..job(0, Resize::Keep, Layout::Patches(PATCHES), 0)
                },
                chained,
            ],
            together,
        ];
        for jobs in &batches {
            check_packed_like_rgb(jobs);
        }
    }

    /// The normalised value of channel `c` of pixel (y, x) of an HWC image of width `w`.
    fn value(src: &[u8], w: usize, (y, x, c): (usize, usize, usize), norm: &Normalize<f32>) -> f32 {
        let mut one = [0f32; 3];
        let px = &src[(y * w + x) * 3..(y * w + x + 1) * 3];
        crate::transforms::crop_and_normalize(px, (1, 1), window(0, 0, 1, 1), norm, &mut one).unwrap();
        one[c]
    }

    const FILL: f32 = -7.0;

    fn norms() -> [Normalize<f32>; 2] {
        [
            Normalize::new([0.5; 3], [0.25; 3], 1.0 / 255.0).unwrap(),
            Normalize::new([0.1, 0.2, 0.3], [0.7, 0.8, 0.9], 1.0 / 255.0).unwrap(),
        ]
    }

    /// `layout` of a 12x8 image with table `table`, run on 1 and 2 threads into `len`
    /// values pre-filled with `FILL`: both results, checked equal.
    fn run_layout(layout: Layout, table: usize, len: usize) -> (Vec<u8>, Vec<f32>) {
        let src = pattern(12, 8, 5);
        let image = Image {
            pixels: &src,
            channels: 3,
            rows: None,
            size: (12, 8),
        };
        let one_job = [Job {
            table,
            ..job(0, Resize::Keep, layout, 0)
        }];
        let mut outs = [1, 2].map(|threads| {
            let mut out = vec![FILL; len];
            batch(&[image], &one_job, &norms(), &mut out, threads).unwrap();
            out
        });
        assert_eq!(outs[0], outs[1]);
        (src, std::mem::take(&mut outs[0]))
    }

    /// Phi-4-multimodal's graph: job 0 resizes `from` to `resized` and pads it to `canvas`
    /// (no output), job 1 resizes its normalised canvas in float32, job 2 cuts the canvas
    /// into its two halves: the outputs of each job written alone, on one and two threads.
    fn resized_and_windows(from: (usize, usize), resized: (usize, usize), canvas: (usize, usize)) {
        let norm = norms()[1].clone();
        let src = pattern(from.0, from.1, 3);
        let image = Image {
            pixels: &src,
            channels: 3,
            rows: None,
            size: from,
        };
        let canvas_job = Job {
            pad: Some(Pad {
                size: canvas,
                at: (0, 0),
                fill: [255, 255, 255],
            }),
            layout: None,
            ..job(
                0,
                Resize::Torch(TorchMode::Bilinear, true, resized),
                Layout::Patches(PATCHES),
                0,
            )
        };
        let layout = Layout::Resized {
            mode: FloatMode::Bicubic,
            one_thread: false,
            size: (8, 8),
        };
        let global = Job {
            source: Some(0),
            ..job(0, Resize::Keep, layout, 0)
        };
        let (h, half) = (canvas.0, canvas.1 / 2);
        let halves = vec![window(0, 0, h, half), window(0, half as isize, h, half)];
        let tiles = Job {
            source: Some(0),
            ..job(0, Resize::Keep, Layout::Windows(halves), 3 * 64)
        };
        let (pixels, size) = canvas_job
            .prepare(Source::packed(&src, 3, from).unwrap(), None, true)
            .unwrap()
            .0
            .unwrap();
        assert_eq!(size, canvas);
        let mut want = vec![0f32; 3 * 64];
        resize_mapped_planes(&pixels, size, &norm, &mut want, (8, 8), FloatMode::Bicubic, false).unwrap();
        want.extend(alone(&pixels, size, &tiles, &norm));
        let jobs = [canvas_job, global, tiles];
        for threads in [1, 2] {
            let mut out = vec![f32::NAN; want.len()];
            batch(&[image], &jobs, std::slice::from_ref(&norm), &mut out, threads).unwrap();
            assert_eq!(out, want);
        }
        // The float layout computes values: tables of bits or pixels cannot give them.
        let bits = Normalize::from_tables([[0u16; 256]; 3]);
        let err = batch(
            &[image],
            &jobs,
            std::slice::from_ref(&bits),
            &mut vec![0u16; want.len()],
            1,
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("tables"), "{err}");
    }

    #[test]
    fn a_resized_layout_resizes_the_normalised_pixels_of_its_source() {
        resized_and_windows((30, 41), (17, 32), (24, 32));
        // Windows larger than the cache are written as the float resize reads the rows.
        #[cfg(target_arch = "x86_64")]
        assert!(streamed(&[&mut vec![0f32; 3 * 1200 * 1200][..]]));
        resized_and_windows((700, 900), (933, 1200), (1200, 1200));
    }

    #[test]
    fn a_torch_float_resize_rounds_its_float_values() {
        let src = pattern(19, 23, 2);
        let image = Image {
            pixels: &src,
            channels: 3,
            rows: None,
            size: (19, 23),
        };
        let identity = Normalize::from_tables([std::array::from_fn(|x| x as u8); 3]);
        for one_thread in [false, true] {
            let resize = Resize::TorchFloat(FloatMode::Bilinear, one_thread, (40, 100));
            let jobs = [job(
                0,
                resize,
                Layout::HwcPatches {
                    patch_size: 20,
                    windows: vec![window(0, 0, 40, 100)],
                },
                0,
            )];
            let mut want = vec![0u8; 40 * 100 * 3];
            resize_float_rgb(
                &src,
                (19, 23),
                &mut want,
                (40, 100),
                FloatMode::Bilinear,
                one_thread,
            )
            .unwrap();
            let mut out = vec![0u8; want.len()];
            batch(&[image], &jobs, std::slice::from_ref(&identity), &mut out, 2).unwrap();
            // Patch rows of 20x20 windows: compare the first patch's first line.
            assert_eq!(out[..60], want[..60]);
            assert_eq!(out[60..120], want[100 * 3..100 * 3 + 60]);
        }
    }

    #[test]
    fn hwc_patches_are_channel_last_rows_of_each_window() {
        let (p, w) = (4, 8);
        let windows = vec![window(0, 0, 8, 8), window(4, 4, 8, 4)];
        let len = 3 * (64 + 32);
        let layout = Layout::HwcPatches {
            patch_size: p,
            windows: windows.clone(),
        };
        let (src, got) = run_layout(layout, 1, len);
        let mut want = Vec::new();
        for win in &windows {
            let (top, left) = (win.top as usize, win.left as usize);
            for patch in 0..(win.height / p) * (win.width / p) {
                let (py, px) = (patch / (win.width / p), patch % (win.width / p));
                for (y, x, c) in (0..p).flat_map(|y| (0..p).flat_map(move |x| (0..3).map(move |c| (y, x, c))))
                {
                    want.push(value(
                        &src,
                        w,
                        (top + py * p + y, left + px * p + x, c),
                        &norms()[1],
                    ));
                }
            }
        }
        assert_eq!(got, want);
    }

    #[test]
    fn a_canvas_holds_the_planes_at_its_top_left_and_zeros() {
        // Planes of whole rows, and planes with part of a row after them.
        for (row, plane) in [(10, 140), (9, 113)] {
            let (src, got) = run_layout(Layout::Canvas { row, plane }, 0, 3 * plane + 2);
            let want: Vec<f32> = (0..3 * plane)
                .map(|i| {
                    let (c, y, x) = (i / plane, i % plane / row, i % plane % row);
                    if y < 12 && x < 8 {
                        value(&src, 8, (y, x, c), &norms()[0])
                    } else {
                        0.0
                    }
                })
                .chain([FILL; 2])
                .collect();
            assert_eq!(got, want, "rows {row} and planes {plane} apart");
        }
    }

    #[test]
    fn a_strip_runs_the_patches_along_its_rows() {
        let (p, stride, w) = (4, 40, 8);
        let run = 12 / p * w;
        let (src, got) = run_layout(
            Layout::Strip {
                patch_size: p,
                stride,
            },
            0,
            3 * p * stride,
        );
        let want: Vec<f32> = (0..3 * p * stride)
            .map(|i| {
                let (c, ky, col) = (i / (p * stride), i % (p * stride) / stride, i % stride);
                let (l, kx) = (col / p, col % p);
                if col < run {
                    value(
                        &src,
                        w,
                        ((l / (w / p)) * p + ky, (l % (w / p)) * p + kx, c),
                        &norms()[0],
                    )
                } else {
                    FILL
                }
            })
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn strips_of_several_images_interleave_and_bad_jobs_are_refused() {
        let (p, w) = (4, 8);
        let src = pattern(12, w, 5);
        let image = Image {
            pixels: &src,
            channels: 3,
            rows: None,
            size: (12, w),
        };
        let run = 12 / p * w;
        let pair = Layout::Strip {
            patch_size: p,
            stride: 2 * run,
        };
        let first = job(0, Resize::Keep, pair.clone(), 0);
        let second = job(0, Resize::Keep, pair.clone(), run);
        let mut both = vec![0f32; 3 * p * 2 * run];
        batch(&[image], &[first.clone(), second], &norms(), &mut both, 2).unwrap();
        let mut alone = vec![0f32; 3 * p * run];
        let single = job(
            0,
            Resize::Keep,
            Layout::Strip {
                patch_size: p,
                stride: run,
            },
            0,
        );
        batch(&[image], std::slice::from_ref(&single), &norms(), &mut alone, 1).unwrap();
        for (row, values) in both.chunks_exact(2 * run).zip(alone.chunks_exact(run)) {
            assert_eq!(row, [values, values].concat());
        }
        // Overlapping strips, a missing table, a canvas too small.
        let clash = job(0, Resize::Keep, pair, run - 1);
        assert!(batch(&[image], &[first, clash], &norms(), &mut both, 1).is_err());
        let bad_table = Job { table: 2, ..single };
        assert!(batch(&[image], &[bad_table], &norms(), &mut alone, 1).is_err());
        let small = job(0, Resize::Keep, Layout::Canvas { row: 7, plane: 140 }, 0);
        assert!(batch(&[image], &[small], &norms(), &mut vec![0f32; 420], 1).is_err());
    }
}
