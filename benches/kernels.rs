//! Criterion benches of the kernels: the seed kernels against plain scalar versions of
//! the same work, the resizes against their AVX2 and scalar twins and the `image` crate.
//!
//! Run with `make bench-rust` (`cargo bench --no-default-features`).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use image::imageops::{self, FilterType};
use image::RgbImage;
use mmfast::resize::{resize_rgb_with, Backend, Filter};
use mmfast::torch_resize::{resize_torch_rgb_with, TorchMode};
use mmfast::transforms::{
    deinterleave_rgb_to_planes, f32_as_le_bytes, pad_and_normalize_to_tensor, Normalize,
};

const SIZES: [(usize, usize); 3] = [(480, 640), (1080, 1920), (3024, 4032)];
const MEAN: [f64; 3] = [0.481_454_66, 0.457_827_5, 0.408_210_73];
const STD: [f64; 3] = [0.268_629_54, 0.261_302_58, 0.275_777_11];

fn image(h: usize, w: usize) -> Vec<u8> {
    (0..h * w * 3)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// The per-pixel loop the block kernel replaced: index arithmetic and arithmetic per value.
fn scalar_planes(src: &[u8], (h, w): (usize, usize), dst: &mut [f32]) {
    let n = h * w;
    for p in 0..n {
        for c in 0..3 {
            let v = (f64::from(src[p * 3 + c]) / 255.0) as f32;
            dst[c * n + p] = (v - MEAN[c] as f32) / STD[c] as f32;
        }
    }
}

/// Padding through an intermediate padded image, as before the fused kernel.
fn scalar_pad(src: &[u8], (h, w): (usize, usize), (ch, cw): (usize, usize), dst: &mut [f32]) {
    let mut padded = vec![0u8; ch * cw * 3];
    for y in 0..h {
        padded[y * cw * 3..(y * cw + w) * 3].copy_from_slice(&src[y * w * 3..(y + 1) * w * 3]);
    }
    scalar_planes(&padded, (ch, cw), dst);
}

fn deinterleave(c: &mut Criterion) {
    let norm = Normalize::new(MEAN, STD, 1.0 / 255.0).unwrap();
    let mut group = c.benchmark_group("deinterleave_rgb_to_planes");
    for (h, w) in SIZES {
        let src = image(h, w);
        let mut dst = vec![0f32; 3 * h * w];
        group.throughput(Throughput::Elements((h * w) as u64));
        let id = format!("{w}x{h}");
        group.bench_with_input(BenchmarkId::new("mmfast", &id), &src, |b, src| {
            b.iter(|| deinterleave_rgb_to_planes(src, (h, w), &norm, &mut dst).unwrap());
        });
        group.bench_with_input(BenchmarkId::new("scalar", &id), &src, |b, src| {
            b.iter(|| scalar_planes(src, (h, w), &mut dst));
        });
    }
}

fn pad(c: &mut Criterion) {
    let norm = Normalize::new(MEAN, STD, 1.0 / 255.0).unwrap();
    let mut group = c.benchmark_group("pad_and_normalize_to_tensor");
    for (h, w) in SIZES {
        let src = image(h, w);
        let canvas = (h.div_ceil(336) * 336, w.div_ceil(336) * 336);
        let mut dst = vec![0f32; 3 * canvas.0 * canvas.1];
        group.throughput(Throughput::Elements((canvas.0 * canvas.1) as u64));
        let id = format!("{w}x{h}");
        group.bench_with_input(BenchmarkId::new("mmfast", &id), &src, |b, src| {
            b.iter(|| pad_and_normalize_to_tensor(src, (h, w), canvas, &norm, &mut dst).unwrap());
        });
        group.bench_with_input(BenchmarkId::new("scalar", &id), &src, |b, src| {
            b.iter(|| scalar_pad(src, (h, w), canvas, &mut dst));
        });
    }
}

fn serialise(c: &mut Criterion) {
    let mut group = c.benchmark_group("serialize_pixel_values");
    for (h, w) in SIZES {
        let values: Vec<f32> = image(h, w).iter().map(|&v| f32::from(v) / 255.0).collect();
        group.throughput(Throughput::Bytes((values.len() * 4) as u64));
        let id = format!("{w}x{h}");
        group.bench_with_input(BenchmarkId::new("mmfast", &id), &values, |b, v| {
            b.iter(|| f32_as_le_bytes(v).into_owned());
        });
        group.bench_with_input(BenchmarkId::new("scalar", &id), &values, |b, v| {
            b.iter(|| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>());
        });
    }
}

/// Pillow-exact resize (AVX2 and scalar twins) beside the `image` crate's resize.
///
/// The `image` crate is not bit-exact with Pillow (and computes in f32); it is here
/// as the outside reference point for speed, as the Pillow ratio is measured
/// by `mmfast bench`.
fn resize(c: &mut Criterion) {
    let mut group = c.benchmark_group("resize");
    let cases = [
        ((3024, 4032), (1148, 868), Filter::Bicubic, FilterType::CatmullRom),
        ((1080, 1920), (336, 336), Filter::Bilinear, FilterType::Triangle),
        ((480, 640), (756, 1036), Filter::Bicubic, FilterType::CatmullRom),
    ];
    for ((h, w), (h2, w2), filter, theirs) in cases {
        let src = image(h, w);
        let mut dst = vec![0u8; h2 * w2 * 3];
        let id = format!("{w}x{h}->{w2}x{h2}-{}", filter.name());
        for (name, backend) in backends() {
            group.bench_function(BenchmarkId::new(name, &id), |b| {
                b.iter(|| resize_rgb_with(&src, (h, w), &mut dst, (h2, w2), filter, backend).unwrap());
            });
        }
        let rgb = RgbImage::from_raw(w as u32, h as u32, src.clone()).unwrap();
        group.bench_function(BenchmarkId::new("image-crate", &id), |b| {
            b.iter(|| imageops::resize(&rgb, w2 as u32, h2 as u32, theirs));
        });
    }
    // torchvision's resizes: Llama 4's bilinear onto its 3x4-tile canvas of a 12 MP photo
    // and onto 5x3 tiles of a 1080p frame, the bicubic the torchvision backend uses for
    // most models, and Qwen2.5-VL's bicubic of a 640x480 image.
    let cases = [
        ((3024, 4032), (1008, 1344), TorchMode::Bilinear),
        ((3024, 4032), (1008, 1344), TorchMode::Bicubic),
        ((1080, 1920), (945, 1680), TorchMode::Bilinear),
        ((480, 640), (476, 644), TorchMode::Bicubic),
    ];
    for ((h, w), (h2, w2), mode) in cases {
        let src = image(h, w);
        let mut dst = vec![0u8; h2 * w2 * 3];
        let id = format!("torch-{mode:?}-aa/{w}x{h}->{w2}x{h2}");
        for (name, backend) in backends() {
            group.bench_function(BenchmarkId::new(name, &id), |b| {
                b.iter(|| {
                    resize_torch_rgb_with(&src, (h, w), &mut dst, (h2, w2), mode, true, backend).unwrap();
                });
            });
        }
    }
}

/// The resize backends compared that this CPU runs: the one `Auto` picks, its AVX2 twin (the
/// same code where the CPU lacks AVX-512) and scalar.
fn backends() -> Vec<(&'static str, Backend)> {
    let runs = |backend| resize_rgb_with(&[0; 3], (1, 1), &mut [0; 3], (1, 1), Filter::Box, backend).is_ok();
    [
        ("mmfast", Backend::Auto),
        ("mmfast-avx2", Backend::Avx2),
        ("mmfast-scalar", Backend::Scalar),
    ]
    .into_iter()
    .filter(|&(_, backend)| runs(backend))
    .collect()
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = deinterleave, pad, serialise, resize
}
criterion_main!(benches);
