//! A batch of images → one output tensor: resize, then crop/pad/tile or patchify,
//! normalising on the way, each image written straight into its slot.
//!
//! The Python layer decides every number (sizes, windows, patch layout, tables);
//! this module only moves pixels, in parallel across images.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rayon::prelude::*;
use rayon::ThreadPool;

use crate::aa_resize::resize_bilinear_antialias_rgb;
use crate::error::{invalid, TransformError};
use crate::image::{to_rgb_oriented, Orientation};
use crate::resize::{resize_rgb, Filter};
use crate::transforms::{checked_len, crop_and_normalize, normalize_to_patches, Normalize, Patches, Window};

/// How an image is resized before its layout is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resize {
    /// Used as is.
    Keep,
    /// Pillow's `Image.resize` to (height, width), bit-exact.
    Pillow(Filter, (usize, usize)),
    /// torchvision's antialiased bilinear resize of a uint8 tensor to (height, width).
    TorchBilinearAntialias((usize, usize)),
}

/// Where an image's normalised pixels go in its slot of the output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Qwen-VL patch rows.
    Patches(Patches),
    /// One CHW tensor per window, back to back (a crop, a padded canvas, or tiles).
    Windows(Vec<Window>),
}

/// One image's work: its pixels (HWC, `size` = (height, width)), a resize and a layout.
#[derive(Clone, Debug)]
pub struct Job<'a> {
    /// HWC u8 pixels, rows contiguous, `channels` bytes each.
    pub src: &'a [u8],
    /// Bytes per pixel of `src`: 3 (RGB), 4 (Pillow's RGBX layout) or 1 (grayscale),
    /// packed into RGB by the job itself, so on the batch's threads.
    pub channels: usize,
    /// (height, width) of `src`.
    pub size: (usize, usize),
    /// The resize applied first.
    pub resize: Resize,
    /// The layout applied to the resized image.
    pub layout: Layout,
}

impl Job<'_> {
    /// (height, width) after the resize.
    #[must_use]
    pub fn resized_size(&self) -> (usize, usize) {
        match self.resize {
            Resize::Keep => self.size,
            Resize::Pillow(_, size) | Resize::TorchBilinearAntialias(size) => size,
        }
    }

    /// Number of output values this job writes.
    ///
    /// # Errors
    /// Sizes whose product overflows.
    pub fn output_len(&self) -> Result<usize, TransformError> {
        match &self.layout {
            Layout::Patches(p) => {
                let (h, w) = self.resized_size();
                checked_len(
                    "size",
                    &[h / p.patch_size.max(1), w / p.patch_size.max(1), p.row_len()],
                )
            }
            Layout::Windows(windows) => windows.iter().try_fold(0usize, |acc, w| {
                let len = checked_len("window", &[3, w.height, w.width])?;
                acc.checked_add(len).ok_or(TransformError::Overflow {
                    arg: "window",
                    what: "the total output length".into(),
                })
            }),
        }
    }

    /// Resizes, then writes the layout into `dst` (exactly [`Job::output_len`] values).
    ///
    /// # Errors
    /// Inconsistent sizes or lengths.
    pub fn run<T: Copy>(&self, norm: &Normalize<T>, dst: &mut [T]) -> Result<(), TransformError> {
        let size = self.resized_size();
        let rgb: Cow<'_, [u8]> = if self.channels == 3 {
            Cow::Borrowed(self.src)
        } else {
            let mut out = vec![0u8; checked_len("size", &[self.size.0, self.size.1, 3])?];
            to_rgb_oriented(
                self.src,
                self.channels,
                self.size,
                Orientation::Identity,
                &mut out,
            )?;
            Cow::Owned(out)
        };
        let pixels: Cow<'_, [u8]> = match self.resize {
            // Pillow returns a copy for an unchanged size: the same pixels.
            Resize::Keep => rgb,
            Resize::Pillow(_, to) | Resize::TorchBilinearAntialias(to) if to == self.size => rgb,
            Resize::Pillow(filter, to) => {
                let mut out = vec![0u8; checked_len("size", &[to.0, to.1, 3])?];
                resize_rgb(&rgb, self.size, &mut out, to, filter)?;
                Cow::Owned(out)
            }
            Resize::TorchBilinearAntialias(to) => {
                let mut out = vec![0u8; checked_len("size", &[to.0, to.1, 3])?];
                resize_bilinear_antialias_rgb(&rgb, self.size, &mut out, to)?;
                Cow::Owned(out)
            }
        };
        if dst.len() != self.output_len()? {
            return Err(invalid(
                "out",
                format!("{} values", self.output_len()?),
                dst.len(),
            ));
        }
        match &self.layout {
            Layout::Patches(p) => normalize_to_patches(&pixels, size, *p, norm, dst),
            Layout::Windows(windows) => {
                let mut rest = dst;
                for window in windows {
                    let (head, tail) = rest.split_at_mut(3 * window.height * window.width);
                    crop_and_normalize(&pixels, size, *window, norm, head)?;
                    rest = tail;
                }
                Ok(())
            }
        }
    }
}

/// Runs `jobs` into `dst`, back to back in order, on up to `threads` threads.
///
/// Each job writes its own disjoint slice of `dst`, so images run in parallel with no
/// per-image output tensors and no concatenation afterwards.
///
/// # Errors
/// `dst` is not exactly as long as all jobs' outputs together, or a job fails.
pub fn run_batch<T: Copy + Send + Sync>(
    jobs: &[Job<'_>],
    norm: &Normalize<T>,
    dst: &mut [T],
    threads: usize,
) -> Result<(), TransformError> {
    let mut slots = Vec::with_capacity(jobs.len());
    let mut rest = dst;
    for job in jobs {
        let len = job.output_len()?;
        if len > rest.len() {
            return Err(invalid("out", "room for every job's output", "a shorter buffer"));
        }
        let (head, tail) = rest.split_at_mut(len);
        slots.push(head);
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(invalid(
            "out",
            "exactly the jobs' total length",
            format!("{} values more", rest.len()),
        ));
    }
    if threads <= 1 || jobs.len() <= 1 {
        return jobs
            .iter()
            .zip(slots)
            .try_for_each(|(job, slot)| job.run(norm, slot));
    }
    // More workers than jobs would only idle (and bounds what a caller can ask for).
    pool(threads.min(jobs.len()))?.install(|| {
        jobs.par_iter()
            .zip(slots)
            .with_max_len(1)
            .try_for_each(|(job, slot)| job.run(norm, slot))
    })
}

/// The most workers a batch uses, whatever it asks for: beyond the cores they only
/// cost memory, and an unchecked count from a request must not spawn unbounded threads.
pub const MAX_THREADS: usize = 256;

/// A pool of `threads` workers, built once per thread count and kept: a server calls
/// this per request, and spawning threads each time would cost more than small images.
fn pool(threads: usize) -> Result<Arc<ThreadPool>, TransformError> {
    static POOLS: Mutex<Option<HashMap<usize, Arc<ThreadPool>>>> = Mutex::new(None);
    let mut pools = POOLS.lock().unwrap_or_else(PoisonError::into_inner);
    let pools = pools.get_or_insert_with(HashMap::new);
    if let Some(pool) = pools.get(&threads) {
        return Ok(Arc::clone(pool));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("mmfast-{i}"))
        .build()
        .map_err(|e| invalid("threads", "a thread pool", e))?;
    let pool = Arc::new(pool);
    pools.insert(threads, Arc::clone(&pool));
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(h: usize, w: usize, seed: usize) -> Vec<u8> {
        (0..h * w * 3)
            .map(|i| ((i * 31 + seed * 17) % 251) as u8)
            .collect()
    }

    #[test]
    fn batch_equals_jobs_run_one_by_one_for_any_thread_count() {
        let norm = Normalize::new([0.5; 3], [0.25; 3], 1.0 / 255.0).unwrap();
        let images: Vec<(Vec<u8>, (usize, usize))> = [(30, 40), (17, 9), (56, 28), (5, 5)]
            .iter()
            .enumerate()
            .map(|(i, &(h, w))| (image(h, w, i), (h, w)))
            .collect();
        let patches = Patches {
            patch_size: 2,
            temporal_patch_size: 2,
            merge_size: 2,
        };
        let jobs: Vec<Job<'_>> = images
            .iter()
            .enumerate()
            .map(|(i, (src, size))| Job {
                src,
                channels: 3,
                size: *size,
                resize: if i % 2 == 0 {
                    Resize::Pillow(Filter::Bicubic, (8, 12))
                } else {
                    Resize::TorchBilinearAntialias((12, 8))
                },
                layout: if i < 2 {
                    Layout::Patches(patches)
                } else {
                    Layout::Windows(vec![
                        Window {
                            top: 0,
                            left: 0,
                            height: 4,
                            width: 4,
                        },
                        Window {
                            top: 4,
                            left: 4,
                            height: 4,
                            width: 4,
                        },
                    ])
                },
            })
            .collect();
        let total: usize = jobs.iter().map(|j| j.output_len().unwrap()).sum();
        let mut serial = Vec::new();
        for job in &jobs {
            let mut out = vec![0f32; job.output_len().unwrap()];
            job.run(&norm, &mut out).unwrap();
            serial.extend(out);
        }
        for threads in [1, 2, 3, 8] {
            let mut out = vec![f32::NAN; total];
            run_batch(&jobs, &norm, &mut out, threads).unwrap();
            assert_eq!(out, serial, "threads={threads}");
        }
        assert!(run_batch(&jobs, &norm, &mut vec![0f32; total + 1], 2).is_err());
        assert!(run_batch(&jobs, &norm, &mut vec![0f32; total - 1], 2).is_err());
    }

    #[test]
    fn a_large_image_split_into_bands_is_unchanged() {
        let norm = Normalize::new([0.0; 3], [1.0; 3], 1.0).unwrap();
        let src = image(700, 500, 3);
        let window = |h, w| {
            Layout::Windows(vec![Window {
                top: 0,
                left: 0,
                height: h,
                width: w,
            }])
        };
        for (resize, (h, w)) in [
            (Resize::Pillow(Filter::Bicubic, (300, 650)), (300, 650)),
            (Resize::Pillow(Filter::Lanczos, (1000, 200)), (1000, 200)),
            (Resize::Pillow(Filter::Bilinear, (240, 500)), (240, 500)),
            (Resize::Pillow(Filter::Hamming, (700, 260)), (700, 260)),
        ] {
            let job = Job {
                src: &src,
                channels: 3,
                size: (700, 500),
                resize,
                layout: window(h, w),
            };
            let mut one = vec![0f32; job.output_len().unwrap()];
            let mut four = vec![0f32; job.output_len().unwrap()];
            run_batch(std::slice::from_ref(&job), &norm, &mut one, 1).unwrap();
            run_batch(std::slice::from_ref(&job), &norm, &mut four, 4).unwrap();
            assert_eq!(one, four, "{resize:?}");
        }
    }

    #[test]
    fn rgbx_and_gray_sources_are_packed_like_rgb() {
        let norm = Normalize::new([0.5; 3], [0.25; 3], 1.0 / 255.0).unwrap();
        let rgb = image(31, 45, 7);
        let rgbx: Vec<u8> = rgb
            .chunks_exact(3)
            .flat_map(|p| [p[0], p[1], p[2], 255])
            .collect();
        let gray: Vec<u8> = rgb.iter().step_by(3).copied().collect();
        let gray_rgb: Vec<u8> = gray.iter().flat_map(|&v| [v, v, v]).collect();
        let run = |src: &[u8], channels| {
            let job = Job {
                src,
                channels,
                size: (31, 45),
                resize: Resize::Pillow(Filter::Bicubic, (20, 60)),
                layout: Layout::Patches(Patches {
                    patch_size: 2,
                    temporal_patch_size: 2,
                    merge_size: 2,
                }),
            };
            let mut out = vec![0f32; job.output_len().unwrap()];
            job.run(&norm, &mut out).unwrap();
            out
        };
        assert_eq!(run(&rgbx, 4), run(&rgb, 3));
        assert_eq!(run(&gray, 1), run(&gray_rgb, 3));
    }
}
