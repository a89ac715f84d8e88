//! `torch_float`: torch's float32 resizes without antialiasing, on HWC u8 images rounded back
//! (`resize_float_rgb`, Molmo2's resize), on bytes mapped through tables
//! (`resize_mapped_planes`, Phi-4-multimodal's global view, and with its crops:
//! `resize_mapped_planes_and_windows`) and on float planes (`resize_planes`), every mode, on
//! one torch thread or several.
//!
//! Arbitrary source and target sizes and argument mistakes, as for the other resize targets.
//! Checks: `Ok` exactly for valid arguments; the FMA path bit-equal to the scalar one (and
//! row bands on a team of workers to one pass); an unchanged size copies; the entry points
//! agree (mapped bytes equal the planes of the mapped values, also with the image's quarters
//! written as the resize reads its rows, which equal the planes' values; the u8 resize is
//! those values rounded half to even and clamped); the thread count changes only bilinear; a
//! constant image stays constant once rounded; and nearest and bilinear (convex weights)
//! stay within each channel's input range.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use mmfast::resize::Backend;
use mmfast::torch_float::{
    resize_float_rgb, resize_float_rgb_with, resize_mapped_planes, resize_mapped_planes_and_windows,
    resize_planes, resize_planes_with, FloatMode,
};
use mmfast::transforms::{Normalize, Window};
use mmfast::workers;
use mmfast_fuzz::{channel_range, size, Fill, Lie};

#[derive(Debug, Arbitrary)]
struct Input {
    #[arbitrary(with = |u: &mut Unstructured| size(u, 256, 1 << 14))]
    from: (usize, usize),
    #[arbitrary(with = |u: &mut Unstructured| size(u, 256, 1 << 14))]
    to: (usize, usize),
    /// 0: nearest-exact, 1: bilinear, 2: bicubic.
    mode: u8,
    one_thread: bool,
    keep_axis: Option<bool>,
    fill: Fill,
    lie: Lie,
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

fuzz_target!(|input: Input| {
    let Input {
        from,
        mut to,
        mode,
        one_thread,
        keep_axis,
        fill,
        lie,
    } = input;
    let mode = [FloatMode::NearestExact, FloatMode::Bilinear, FloatMode::Bicubic][usize::from(mode % 3)];
    match keep_axis {
        Some(true) => to.0 = from.0,
        Some(false) => to.1 = from.1,
        None => {}
    }
    let mistake = lie.apply(from, to);
    let src = fill.bytes(mistake.src_len);
    let mut dst = vec![0xA5; mistake.dst_len];
    let result = resize_float_rgb(&src, mistake.from, &mut dst, mistake.to, mode, one_thread);
    match (&lie, &result) {
        (Lie::None, Ok(())) => {}
        _ if lie.refused(&result) => return,
        _ => panic!("{lie:?} {mode:?} {from:?} -> {to:?}: {result:?}"),
    }
    let mut scalar = vec![0x5A; dst.len()];
    resize_float_rgb_with(&src, from, &mut scalar, to, mode, one_thread, Backend::Scalar).unwrap();
    assert!(dst == scalar, "Auto != Scalar: {mode:?} {from:?} -> {to:?}");
    if from == to {
        assert!(dst == src, "an unchanged size must copy");
    }

    // The same image as float planes, and its bytes mapped through tables.
    let (h, w) = from;
    let planes: Vec<f32> = (0..3 * h * w)
        .map(|i| f32::from(src[(i % (h * w)) * 3 + i / (h * w)]))
        .collect();
    let identity = Normalize::from_tables([std::array::from_fn(|x| x as f32); 3]);
    let out_len = 3 * to.0 * to.1;
    let mut from_planes = vec![f32::NAN; out_len];
    resize_planes(&planes, from, &mut from_planes, to, mode, one_thread).unwrap();
    let mut mapped = vec![f32::NAN; out_len];
    resize_mapped_planes(&src, from, &identity, &mut mapped, to, mode, one_thread).unwrap();
    assert!(
        bits(&mapped) == bits(&from_planes),
        "mapped bytes != their planes"
    );
    // The image's quarters written as the resize reads its rows (Phi-4-multimodal's crops of
    // its canvas): the same resize, and each quarter the planes' values.
    let halves = |n: usize| {
        [(0, n / 2), (n / 2, n - n / 2)]
            .into_iter()
            .filter(|&(_, len)| len > 0)
    };
    let quarters: Vec<Window> = halves(h)
        .flat_map(|(top, height)| {
            halves(w).map(move |(left, width)| Window {
                top: top as isize,
                left: left as isize,
                height,
                width,
            })
        })
        .collect();
    let plane = |c: usize, y: usize, x: usize| planes[(c * h + y) * w + x];
    let crops: Vec<f32> = quarters
        .iter()
        .flat_map(|q| {
            let (top, left) = (q.top as usize, q.left as usize);
            (0..3).flat_map(move |c| {
                (0..q.height).flat_map(move |y| (0..q.width).map(move |x| plane(c, top + y, left + x)))
            })
        })
        .collect();
    let mut with_quarters = vec![f32::NAN; out_len];
    let mut quartered = vec![f32::NAN; crops.len()];
    resize_mapped_planes_and_windows(
        &src,
        from,
        &identity,
        &mut with_quarters,
        to,
        mode,
        one_thread,
        &quarters,
        &mut quartered,
    )
    .unwrap();
    assert!(
        bits(&with_quarters) == bits(&from_planes) && bits(&quartered) == bits(&crops),
        "windows written with the resize differ"
    );
    let rounded: Vec<u8> = (0..out_len)
        .map(|i| {
            let v = from_planes[(i % 3) * to.0 * to.1 + i / 3];
            v.round_ties_even().clamp(0.0, 255.0) as u8
        })
        .collect();
    assert!(rounded == dst, "the u8 resize is not its planes rounded");
    let mut fma_free = vec![f32::NAN; out_len];
    resize_planes_with(
        &planes,
        from,
        &mut fma_free,
        to,
        mode,
        one_thread,
        Backend::Scalar,
    )
    .unwrap();
    assert!(bits(&fma_free) == bits(&from_planes), "planes: Auto != Scalar");
    // Row bands on a team of workers change nothing.
    workers::run(3, 3, 1, &|_| {
        let mut banded = vec![f32::NAN; out_len];
        resize_planes(&planes, from, &mut banded, to, mode, one_thread).unwrap();
        assert!(bits(&banded) == bits(&from_planes), "row bands differ");
    });
    if mode != FloatMode::Bilinear {
        let mut other = vec![f32::NAN; out_len];
        resize_planes(&planes, from, &mut other, to, mode, !one_thread).unwrap();
        assert!(
            bits(&other) == bits(&from_planes),
            "{mode:?} depends on torch's threads"
        );
    }

    if let Fill::Constant(v) = fill {
        assert!(
            dst.iter().all(|&x| x == v),
            "constant {v} not kept: {mode:?} {from:?} -> {to:?}"
        );
    }
    if mode != FloatMode::Bicubic {
        for c in 0..3 {
            let (lo, hi) = channel_range(&src, c);
            let (out_lo, out_hi) = channel_range(&dst, c);
            assert!(
                lo <= out_lo && out_hi <= hi,
                "{mode:?} {from:?} -> {to:?}: channel {c} in {lo}..={hi} gave {out_lo}..={out_hi}"
            );
        }
    }
});
