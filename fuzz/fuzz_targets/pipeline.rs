//! `pipeline::run_batch` with random plans: the one native call every processor makes.
//!
//! A plan has 1-4 input images (RGB, RGBX or L; sometimes with a pixel buffer of the wrong
//! length or an invalid channel count) and up to 6 jobs: any image index (sometimes
//! missing), a source job (sometimes later, of another image or missing), crops (usually
//! inside their source, sometimes reaching outside), Pillow or torch resizes (any filter,
//! or torch's float resizes rounded back, sometimes to an empty size), pads with fills
//! (sometimes too small), window or patch
//! layouts (windows may start above/left of the image or run past it; patch parameters are
//! usually small but sometimes absurd; channel-last patches of windows, a canvas with row
//! and plane strides, a strip whose rows other jobs share, the normalised pixels resized in
//! float32), offsets (usually back to back,
//! sometimes with gaps, overlaps or past the end), one of two tables (sometimes a missing
//! one), video frames, and 1-3 threads, into an output of a random length around what the
//! jobs need.
//!
//! It must return `Ok` or `Err`, never panic, never touch memory it does not own (the
//! address sanitizer watches) and, when `Ok`:
//! * write exactly its jobs' slots (the rest keeps a NaN sentinel, every slot value but a
//!   float resize's and a canvas's zeros is a table value),
//! * give the bytes of the same plan run on one thread, and
//! * give the values of a plain sequential reference built from the public kernels
//!   (`to_rgb_oriented`, `crop_rgb`, `resize_rgb`, `resize_torch_rgb`, `resize_float_rgb`,
//!   `pad_rgb`, `crop_and_normalize`, `normalize_to_patches`, `resize_mapped_planes`) run
//!   step by step with no shortcuts, and
//!   the channel-last, canvas and strip layouts written value by value from their
//!   definitions.
#![no_main]

use arbitrary::{Arbitrary, Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use mmfast::alloc::Memory;
use mmfast::error::TransformError;
use mmfast::image::{crop_rgb, pad_rgb, to_rgb_oriented, Orientation, Rect};
use mmfast::pipeline::{run_batch, Image, Job, Layout, Pad, Resize};
use mmfast::resize::{Filter, Source};
use mmfast::torch_float::{resize_mapped_planes, FloatMode};
use mmfast::torch_resize::TorchMode;
use mmfast::transforms::{crop_and_normalize, normalize_to_patches, Normalize, Patches, Window};
use mmfast_fuzz::{side, size, Fill};

/// Largest image side; 160 lets a resize reach the 64-row threshold of band splitting.
const MAX_SIDE: usize = 160;
/// Largest image area, so a plan of several images stays cheap under the sanitizer.
const MAX_AREA: usize = 1 << 14;
/// A value no table holds: what the output starts as.
const SENTINEL: u32 = 0x7FC0_DEAD;

#[derive(Debug)]
struct ImageSpec {
    pixels: Vec<u8>,
    channels: usize,
    size: (usize, usize),
    /// Whether `pixels` holds exactly `size` pixels of `channels` valid bytes.
    honest: bool,
}

#[derive(Debug)]
struct Plan {
    images: Vec<ImageSpec>,
    jobs: Vec<Job>,
    out_len: usize,
    threads: usize,
    /// Video plans share one image size, so frames are valid.
    video: bool,
}

/// Rare cases (mistakes, absurd values) come up about once in `1 / RARE` picks.
fn rare(u: &mut Unstructured<'_>) -> Result<bool> {
    Ok(u.ratio(1u8, 12u8)?)
}

fn image(u: &mut Unstructured<'_>, size_of_all: Option<(usize, usize)>) -> Result<ImageSpec> {
    let size = match size_of_all {
        Some(s) => s,
        None => size(u, MAX_SIDE, MAX_AREA)?,
    };
    let channels = match u.int_in_range(0u8..=9)? {
        0..=4 => 3,
        5..=6 => 4,
        7..=8 => 1,
        _ => *u.choose(&[0usize, 2, 5])?,
    };
    let mut len = size.0 * size.1 * channels;
    let mut honest = matches!(channels, 1 | 3 | 4);
    if rare(u)? {
        let delta: i8 = u.arbitrary()?;
        len = len.saturating_add_signed(isize::from(delta));
        honest &= delta == 0;
    }
    let fill: Fill = u.arbitrary()?;
    Ok(ImageSpec {
        pixels: fill.bytes(len),
        channels,
        size,
        honest,
    })
}

/// A (height, width) that is usually in range, sometimes empty or huge.
fn target(u: &mut Unstructured<'_>, source: (usize, usize)) -> Result<(usize, usize)> {
    if rare(u)? {
        return Ok(*u.choose(&[(0, 1), (1, 0), (0, 0), (usize::MAX, 1), (1 << 33, 1 << 33)])?);
    }
    Ok(match u.int_in_range(0u8..=5)? {
        0 => source,
        1 => (source.0, side(u, MAX_SIDE)?),
        2 => (side(u, MAX_SIDE)?, source.1),
        _ => size(u, MAX_SIDE, MAX_AREA)?,
    })
}

fn crop(u: &mut Unstructured<'_>, (h, w): (usize, usize)) -> Result<Rect> {
    if rare(u)? || h == 0 || w == 0 {
        // Anything, mostly reaching outside the source.
        let pick = |u: &mut Unstructured<'_>| -> Result<usize> {
            Ok(match u.int_in_range(0u8..=3)? {
                0 => usize::MAX - usize::from(u.arbitrary::<u8>()?),
                _ => usize::from(u.arbitrary::<u8>()?),
            })
        };
        return Ok(Rect {
            top: pick(u)?,
            left: pick(u)?,
            height: pick(u)?,
            width: pick(u)?,
        });
    }
    let top = u.int_in_range(0..=h - 1)?;
    let left = u.int_in_range(0..=w - 1)?;
    Ok(Rect {
        top,
        left,
        height: u.int_in_range(1..=h - top)?,
        width: u.int_in_range(1..=w - left)?,
    })
}

fn pad(u: &mut Unstructured<'_>, (h, w): (usize, usize)) -> Result<Pad> {
    let fill: [u8; 3] = u.arbitrary()?;
    if rare(u)? {
        let size = (
            usize::from(u.arbitrary::<u8>()?),
            usize::from(u.arbitrary::<u8>()?),
        );
        let at = if u.arbitrary()? {
            (usize::MAX, 0)
        } else {
            (
                usize::from(u.arbitrary::<u8>()?),
                usize::from(u.arbitrary::<u8>()?),
            )
        };
        return Ok(Pad { size, at, fill });
    }
    let extra = (u.int_in_range(0..=24)?, u.int_in_range(0..=24)?);
    let at = (u.int_in_range(0..=extra.0)?, u.int_in_range(0..=extra.1)?);
    Ok(Pad {
        size: (h + extra.0, w + extra.1),
        at,
        fill,
    })
}

fn patches(u: &mut Unstructured<'_>, frames: usize) -> Result<Patches> {
    if rare(u)? {
        // Absurd parameters: zeros and products that overflow.
        let pick = |u: &mut Unstructured<'_>| -> Result<usize> {
            Ok(match u.int_in_range(0u8..=4)? {
                0 => 0,
                1 => 1 << u.int_in_range(16..=63)?,
                2 => usize::MAX / u.int_in_range(1..=8)?,
                _ => u.int_in_range(1..=5)?,
            })
        };
        return Ok(Patches {
            patch_size: pick(u)?,
            temporal_patch_size: pick(u)?,
            merge_size: pick(u)?,
            time_major: u.arbitrary()?,
        });
    }
    Ok(Patches {
        patch_size: u.int_in_range(1..=5)?,
        temporal_patch_size: if frames > 1 {
            frames
        } else {
            u.int_in_range(1..=3)?
        },
        merge_size: u.int_in_range(1..=3)?,
        time_major: u.arbitrary()?,
    })
}

fn windows(u: &mut Unstructured<'_>, (h, w): (usize, usize)) -> Result<Vec<Window>> {
    let n = u.int_in_range(1..=4)?;
    (0..n)
        .map(|_| {
            if rare(u)? {
                let pick = |u: &mut Unstructured<'_>| -> Result<isize> {
                    Ok(*u.choose(&[isize::MIN, isize::MIN + 1, isize::MAX, -1, 0, 1 << 40])?)
                };
                return Ok(Window {
                    top: pick(u)?,
                    left: pick(u)?,
                    height: u.int_in_range(0..=3)?,
                    width: u.int_in_range(0..=3)?,
                });
            }
            let reach = |u: &mut Unstructured<'_>, len: usize| -> Result<isize> {
                // Capped: a rare crop may be absurdly large.
                u.int_in_range(-8..=len.min(1 << 20) as isize + 8)
            };
            Ok(Window {
                top: reach(u, h)?,
                left: reach(u, w)?,
                height: u.int_in_range(1..=h.clamp(1, 48) + 8)?,
                width: u.int_in_range(1..=w.clamp(1, 48) + 8)?,
            })
        })
        .collect()
}

impl<'a> Arbitrary<'a> for Plan {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let video = u.ratio(1u8, 5u8)?;
        let first = size(u, MAX_SIDE, MAX_AREA)?;
        let n_images = u.int_in_range(1..=4)?;
        let images = (0..n_images)
            .map(|_| image(u, video.then_some(first)))
            .collect::<Result<Vec<_>>>()?;
        let n_jobs = u.int_in_range(0..=6)?;
        let mut jobs: Vec<Job> = Vec::with_capacity(n_jobs);
        // Each job's pixel size where it is valid, to aim the next job's numbers.
        let mut sizes: Vec<Option<(usize, usize)>> = Vec::new();
        let mut end = 0usize;
        for j in 0..n_jobs {
            let mut image = u.int_in_range(0..=n_images - 1)?;
            if rare(u)? {
                image = n_images + usize::from(u.arbitrary::<u8>()?);
            }
            let mut source = None;
            if j > 0 && u.ratio(1u8, 3u8)? {
                let k = u.int_in_range(0..=j - 1)?;
                // A source must be an earlier job of the same image.
                image = jobs[k].image;
                source = Some(k);
            }
            if rare(u)? {
                source = Some(u.int_in_range(0..=j + 1)?);
            }
            let from = match source {
                None => images.get(image).map_or((1, 1), |i| i.size),
                Some(k) => sizes.get(k).copied().flatten().unwrap_or((1, 1)),
            };
            let crop = if u.ratio(1u8, 3u8)? {
                Some(crop(u, from)?)
            } else {
                None
            };
            let cropped = crop.map_or(from, |r| (r.height, r.width));
            let mut resize = match u.int_in_range(0u8..=4)? {
                0 => Resize::Keep,
                1 | 2 => {
                    let filter = Filter::ALL[u.int_in_range(0..=5)?];
                    Resize::Pillow(filter, target(u, cropped)?)
                }
                3 => Resize::TorchFloat(float_mode(u)?, u.arbitrary()?, target(u, cropped)?),
                _ => {
                    let mode = TorchMode::from_pil_code(u.int_in_range(0..=3)?).unwrap();
                    Resize::Torch(mode, u.arbitrary()?, target(u, cropped)?)
                }
            };
            let frames: Vec<usize> = if video && source.is_none() && u.ratio(1u8, 2u8)? {
                let n = u.int_in_range(1..=3)?;
                (0..n)
                    .map(|_| u.int_in_range(0..=n_images - 1))
                    .collect::<Result<_>>()?
            } else if rare(u)? {
                vec![usize::from(u.arbitrary::<u8>()?)]
            } else {
                Vec::new()
            };
            let layout = match u.int_in_range(0u8..=8)? {
                0 => None,
                8 => Some(Layout::Resized {
                    mode: float_mode(u)?,
                    one_thread: u.arbitrary()?,
                    size: target(u, cropped)?,
                }),
                5 => {
                    let p = u.int_in_range(1..=6)?;
                    let whole = (cropped.0 / p * p, cropped.1 / p * p);
                    let windows = if whole.0 > 0 && whole.1 > 0 && !rare(u)? {
                        (0..u.int_in_range(1..=3)?)
                            .map(|_| patch_window(u, whole, p))
                            .collect::<Result<_>>()?
                    } else {
                        windows(u, cropped)?
                    };
                    Some(Layout::HwcPatches {
                        patch_size: p,
                        windows,
                    })
                }
                6 => {
                    // Saturating: a rare crop may be absurdly large.
                    let row = cropped.1.saturating_add(usize::from(u.int_in_range(0u8..=3)?));
                    let plane = row
                        .saturating_mul(cropped.0)
                        .saturating_add(usize::from(u.int_in_range(0u8..=9)?));
                    let (row, plane) = if rare(u)? { (row / 2, plane) } else { (row, plane) };
                    Some(Layout::Canvas { row, plane })
                }
                7 => {
                    let p = u.int_in_range(1..=6)?;
                    let run = (cropped.0 / p).saturating_mul(cropped.1);
                    // Room for another image's part, or none (which a later job may claim).
                    let stride = run.saturating_add(usize::from(u.int_in_range(0u8..=40)?));
                    Some(Layout::Strip {
                        patch_size: p,
                        stride,
                    })
                }
                1 | 2 => {
                    let p = patches(u, frames.len() + 1)?;
                    // Usually aim the resize at sides the patch layout accepts.
                    let unit = p.patch_size.saturating_mul(p.merge_size);
                    if (1..=40).contains(&unit) && u.ratio(3u8, 4u8)? {
                        let snap = |v: usize| v.div_ceil(unit).max(1) * unit;
                        let to = (snap(cropped.0.min(MAX_SIDE)), snap(cropped.1.min(MAX_SIDE)));
                        if to.0 * to.1 <= MAX_AREA {
                            resize = match resize {
                                Resize::Torch(mode, aa, _) => Resize::Torch(mode, aa, to),
                                Resize::TorchFloat(mode, one, _) => Resize::TorchFloat(mode, one, to),
                                Resize::Pillow(filter, _) => Resize::Pillow(filter, to),
                                Resize::Keep => Resize::Pillow(Filter::Bicubic, to),
                            };
                        }
                    }
                    Some(Layout::Patches(p))
                }
                _ => None,
            };
            let mut job = Job {
                image,
                source,
                crop,
                resize,
                pad: None,
                layout,
                offset: 0,
                table: if rare(u)? { 2 } else { u.int_in_range(0..=1)? },
                frames,
            };
            let resized = job.pixel_size(from).ok();
            if u.ratio(1u8, 4u8)? {
                let mut canvas = pad(u, resized.unwrap_or((1, 1)))?;
                if let Some(Layout::Patches(p)) = &job.layout {
                    // Usually a canvas of whole merge groups, as Kimi-VL pads.
                    let unit = p.patch_size.saturating_mul(p.merge_size);
                    if (1..=40).contains(&unit) && !rare(u)? {
                        let snap = |v: usize| v.div_ceil(unit).max(1) * unit;
                        canvas.size = (snap(canvas.size.0), snap(canvas.size.1));
                    }
                }
                job.pad = Some(canvas);
            }
            let size = job.pixel_size(from).ok();
            if job.layout.is_none() && u.ratio(2u8, 3u8)? {
                job.layout = Some(Layout::Windows(match (job.pad, size) {
                    // Often a pad's whole canvas, as Fuyu cuts it.
                    (Some(_), Some((height, width))) if u.arbitrary()? => vec![Window {
                        top: 0,
                        left: 0,
                        height,
                        width,
                    }],
                    _ => windows(u, size.unwrap_or((1, 1)))?,
                }));
            }
            let len = size.and_then(|s| output_len(&job, s).ok());
            job.offset = match u.int_in_range(0u8..=11)? {
                0 => end.saturating_add(usize::from(u.arbitrary::<u8>()?)),
                1 => end.saturating_sub(usize::from(u.arbitrary::<u8>()?)),
                2 => *u.choose(&[usize::MAX, usize::MAX - 1, 1 << 40])?,
                _ => end,
            };
            let job_end = job.offset.saturating_add(len.unwrap_or(0));
            if job_end <= 1 << 22 {
                // Absurd offsets do not move the next job's.
                end = end.max(job_end);
            }
            sizes.push(size);
            jobs.push(job);
        }
        let out_len = match u.int_in_range(0u8..=9)? {
            0 => end.saturating_sub(usize::from(u.arbitrary::<u8>()?)),
            1 => end.saturating_add(usize::from(u.arbitrary::<u8>()?)),
            _ => end,
        }
        .min(1 << 22);
        Ok(Plan {
            images,
            jobs,
            out_len,
            threads: u.int_in_range(1..=3)?,
            video,
        })
    }
}

/// A float resize mode: nearest-exact, bilinear or bicubic.
fn float_mode(u: &mut Unstructured<'_>) -> Result<FloatMode> {
    Ok(*u.choose(&[FloatMode::NearestExact, FloatMode::Bilinear, FloatMode::Bicubic])?)
}

/// A window inside `(h, w)` (multiples of `p`) whose sides are multiples of `p`.
fn patch_window(u: &mut Unstructured<'_>, (h, w): (usize, usize), p: usize) -> Result<Window> {
    let top = u.int_in_range(0..=h / p - 1)? * p;
    let left = u.int_in_range(0..=w / p - 1)? * p;
    Ok(Window {
        top: top as isize,
        left: left as isize,
        height: u.int_in_range(1..=(h - top) / p)? * p,
        width: u.int_in_range(1..=(w - left) / p)? * p,
    })
}

/// Two tables, distinct per table, channel and value, so a swapped channel, pixel or table
/// shows: table `t` maps `x` in channel `c` to `t * 768 + c * 256 + x + 0.25`.
fn tables() -> [Normalize<f32>; 2] {
    [0, 1].map(|table| {
        let mut t = [[0f32; 256]; 3];
        for (c, row) in t.iter_mut().enumerate() {
            for (x, v) in row.iter_mut().enumerate() {
                *v = (table * 768 + c * 256 + x) as f32 + 0.25;
            }
        }
        Normalize::from_tables(t)
    })
}

/// The table value of channel `c` of pixel `(y, x)` of HWC `pixels` `w` wide.
fn value(table: usize, pixels: &[u8], w: usize, (y, x, c): (usize, usize, usize)) -> f32 {
    (table * 768 + c * 256 + usize::from(pixels[(y * w + x) * 3 + c])) as f32 + 0.25
}

/// `image` as packed RGB, by the public kernel.
fn pack(image: &Image<'_>) -> std::result::Result<Vec<u8>, TransformError> {
    if image.channels == 3 {
        return Ok(image.pixels.to_vec());
    }
    let mut out = vec![0; image.size.0 * image.size.1 * 3];
    to_rgb_oriented(
        image.pixels,
        image.channels,
        image.size,
        Orientation::Identity,
        &mut out,
    )?;
    Ok(out)
}

/// Crop, resize and pad with the public kernels, each step always run.
fn prepare(
    job: &Job,
    src: Vec<u8>,
    size: (usize, usize),
) -> std::result::Result<(Vec<u8>, (usize, usize)), TransformError> {
    let (mut pixels, mut size) = (src, size);
    if let Some(rect) = job.crop {
        let mut out = vec![0; rect.height * rect.width * 3];
        crop_rgb(&pixels, size, rect, &mut out)?;
        (pixels, size) = (out, (rect.height, rect.width));
    }
    if let Resize::Pillow(_, to) | Resize::Torch(_, _, to) | Resize::TorchFloat(_, _, to) = job.resize {
        let mut out = vec![0; to.0 * to.1 * 3];
        job.resize.run(&pixels, size, &mut out)?;
        (pixels, size) = (out, to);
    }
    if let Some(p) = job.pad {
        let mut out = vec![0; p.size.0 * p.size.1 * 3];
        pad_rgb(Source::packed(&pixels, 3, size)?, p.size, p.at, p.fill, &mut out)?;
        (pixels, size) = (out, p.size);
    }
    Ok((pixels, size))
}

/// The plan run job by job, in order, with the public kernels.
fn reference(
    images: &[Image<'_>],
    jobs: &[Job],
    norms: &[Normalize<f32>],
    out: &mut [f32],
) -> std::result::Result<(), TransformError> {
    let mut kept: Vec<(Vec<u8>, (usize, usize))> = Vec::new();
    for job in jobs {
        let image = &images[job.image];
        let (src, size) = match job.source {
            None => (pack(image)?, image.size),
            Some(k) => kept[k].clone(),
        };
        let (pixels, size) = prepare(job, src, size)?;
        let Some(layout) = &job.layout else {
            kept.push((pixels, size));
            continue;
        };
        let norm = &norms[job.table];
        let (h, w) = size;
        let len = output_len(job, size)?;
        match layout {
            Layout::HwcPatches {
                patch_size: p,
                windows,
            } => {
                let mut at = job.offset;
                for win in windows {
                    for patch in 0..(win.height / p) * (win.width / p) {
                        let (py, px) = (patch / (win.width / p), patch % (win.width / p));
                        for (y, x, c) in
                            (0..*p).flat_map(|y| (0..*p).flat_map(move |x| (0..3).map(move |c| (y, x, c))))
                        {
                            // Positions past the pixels take the value of black.
                            let sy = win
                                .top
                                .checked_add_unsigned(py * p + y)
                                .and_then(|v| usize::try_from(v).ok());
                            let sx = win
                                .left
                                .checked_add_unsigned(px * p + x)
                                .and_then(|v| usize::try_from(v).ok());
                            out[at] = match (sy, sx) {
                                (Some(sy), Some(sx)) if sy < h && sx < w => {
                                    value(job.table, &pixels, w, (sy, sx, c))
                                }
                                _ => (job.table * 768 + c * 256) as f32 + 0.25,
                            };
                            at += 1;
                        }
                    }
                }
                kept.push((pixels, size));
                continue;
            }
            Layout::Canvas { row, plane } => {
                out[job.offset..job.offset + 3 * plane].fill(0.0);
                for (c, y, x) in (0..3).flat_map(|c| (0..h).flat_map(move |y| (0..w).map(move |x| (c, y, x))))
                {
                    out[job.offset + c * plane + y * row + x] = value(job.table, &pixels, w, (y, x, c));
                }
                kept.push((pixels, size));
                continue;
            }
            Layout::Strip {
                patch_size: p,
                stride,
            } => {
                let n = (h / p) * (w / p);
                for (c, ky, l, kx) in (0..3).flat_map(|c| {
                    (0..*p)
                        .flat_map(move |ky| (0..n).flat_map(move |l| (0..*p).map(move |kx| (c, ky, l, kx))))
                }) {
                    let pixel = ((l / (w / p)) * p + ky, (l % (w / p)) * p + kx, c);
                    out[job.offset + (c * p + ky) * stride + l * p + kx] =
                        value(job.table, &pixels, w, pixel);
                }
                kept.push((pixels, size));
                continue;
            }
            _ => {}
        }
        let dst = &mut out[job.offset..job.offset + len];
        match layout {
            Layout::Windows(windows) => {
                let mut rest = dst;
                for w in windows {
                    let (head, tail) = rest.split_at_mut(3 * w.height * w.width);
                    if !head.is_empty() {
                        crop_and_normalize(&pixels, size, *w, norm, head)?;
                    }
                    rest = tail;
                }
            }
            Layout::Patches(p) => {
                let mut frames = vec![pixels.clone()];
                for &f in &job.frames {
                    frames.push(prepare(job, pack(&images[f])?, images[f].size)?.0);
                }
                let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
                if len > 0 {
                    normalize_to_patches(&refs, size, *p, norm, dst, Memory::Used)?;
                }
            }
            Layout::Resized {
                mode,
                one_thread,
                size: to,
            } => resize_mapped_planes(&pixels, size, norm, dst, *to, *mode, *one_thread)?,
            Layout::HwcPatches { .. } | Layout::Canvas { .. } | Layout::Strip { .. } => {
                unreachable!("written above")
            }
        }
        kept.push((pixels, size));
    }
    Ok(())
}

/// Values a job writes, in all its ranges.
fn output_len(job: &Job, size: (usize, usize)) -> std::result::Result<usize, TransformError> {
    Ok(job.segments(size)?.iter().map(|&(_, len)| len).sum())
}

fuzz_target!(|plan: Plan| {
    let images: Vec<Image<'_>> = plan
        .images
        .iter()
        .map(|i| Image {
            pixels: &i.pixels,
            rows: None,
            channels: i.channels,
            size: i.size,
        })
        .collect();
    let norms = tables();
    let sentinel = f32::from_bits(SENTINEL);
    let mut out = vec![sentinel; plan.out_len];
    let result = run_batch(
        &images,
        &plan.jobs,
        &norms,
        &mut out,
        Memory::Fresh,
        plan.threads,
        3,
    );
    if plan.threads > 1 {
        // On one thread, and writing as into used memory (streamed where large): the same.
        let mut serial = vec![sentinel; plan.out_len];
        let serial_result = run_batch(&images, &plan.jobs, &norms, &mut serial, Memory::Used, 1, 3);
        assert_eq!(
            result.is_ok(),
            serial_result.is_ok(),
            "{result:?} vs one thread: {serial_result:?}"
        );
        if result.is_ok() {
            let same = out.iter().zip(&serial).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{} threads differ from one", plan.threads);
        }
    }
    if result.is_err() {
        return;
    }
    // Exactly the jobs' slots are written, each with table values but a float resize's and
    // a canvas's zeros.
    let mut written = vec![false; plan.out_len];
    let mut computed = vec![false; plan.out_len];
    let mut padded = vec![false; plan.out_len];
    let mut source_sizes: Vec<(usize, usize)> = Vec::new();
    for job in &plan.jobs {
        let from = job.source.map_or(images[job.image].size, |k| source_sizes[k]);
        let size = job.pixel_size(from).expect("run_batch accepted it");
        source_sizes.push(size);
        for (start, len) in job.segments(size).expect("run_batch accepted it") {
            for w in &mut written[job.offset + start..job.offset + start + len] {
                assert!(!*w, "overlapping slots accepted");
                *w = true;
            }
            match job.layout {
                Some(Layout::Resized { .. }) => {
                    computed[job.offset + start..job.offset + start + len].fill(true)
                }
                Some(Layout::Canvas { .. }) => {
                    padded[job.offset + start..job.offset + start + len].fill(true)
                }
                _ => {}
            }
        }
    }
    for (i, (((v, w), floats), zero)) in out.iter().zip(&written).zip(&computed).zip(&padded).enumerate() {
        if *floats {
            assert!(v.is_finite(), "float resize value {i} = {v}");
        } else if *zero && *v == 0.0 {
            continue;
        } else if *w {
            assert!(
                v.is_finite() && (0.0..1536.0).contains(v) && v.fract() == 0.25,
                "slot value {i} = {v} is no table value"
            );
        } else {
            assert_eq!(v.to_bits(), SENTINEL, "value {i} outside every slot was written");
        }
    }
    // The plain sequential reference, on honest inputs (a job may leave a dishonest image's
    // pixels unread, which the batch rightly does not check).
    let honest = plan.images.iter().all(|i| i.honest);
    if honest {
        let mut want = vec![sentinel; plan.out_len];
        let r = reference(&images, &plan.jobs, &norms, &mut want);
        assert!(
            r.is_ok(),
            "run_batch accepted what the kernels refuse: {r:?} (video={})",
            plan.video
        );
        let same = out.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "run_batch differs from the step-by-step reference");
    }
});
