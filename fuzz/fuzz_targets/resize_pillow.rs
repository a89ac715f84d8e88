//! `resize::resize_rgb` (Pillow's `Image.resize`, every filter), the kernel behind
//! `_native.resize(kernel="pillow")` and the batch pipeline's Pillow resizes.
//!
//! Arbitrary source and target sizes (1, primes, extreme aspect ratios, up and down,
//! one axis only), and buffers or sizes that may be wrong. Checks: `Ok` exactly for valid
//! arguments; the AVX2 and AVX-512 backends byte-equal to the scalar one; an unchanged size
//! copies; a constant image stays that constant; and, for the filters without negative
//! lobes (box, bilinear, hamming) and nearest, every output value lies within its channel's
//! input range.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use mmfast::resize::{resize_rgb, resize_rgb_with, Backend, Filter};
use mmfast_fuzz::{channel_range, size, Fill, Lie};

#[derive(Debug, Arbitrary)]
struct Input {
    #[arbitrary(with = |u: &mut Unstructured| size(u, 512, 1 << 16))]
    from: (usize, usize),
    #[arbitrary(with = |u: &mut Unstructured| size(u, 512, 1 << 16))]
    to: (usize, usize),
    /// Index into `Filter::ALL`.
    filter: u8,
    /// Keep the source height or width for a one-axis resize.
    keep_axis: Option<bool>,
    fill: Fill,
    lie: Lie,
}

fuzz_target!(|input: Input| {
    let Input {
        from,
        mut to,
        filter,
        keep_axis,
        fill,
        lie,
    } = input;
    let filter = Filter::ALL[usize::from(filter) % Filter::ALL.len()];
    match keep_axis {
        Some(true) => to.0 = from.0,
        Some(false) => to.1 = from.1,
        None => {}
    }
    let mistake = lie.apply(from, to);
    let (from, to, src_len, dst_len) = (mistake.from, mistake.to, mistake.src_len, mistake.dst_len);
    let src = fill.bytes(src_len);
    let mut dst = vec![0xA5; dst_len];
    let result = resize_rgb(&src, from, &mut dst, to, filter);
    match (&lie, &result) {
        (Lie::None, Ok(())) => {}
        _ if lie.refused(&result) => return,
        _ => panic!("{lie:?} {filter:?} {from:?} -> {to:?}: {result:?}"),
    }
    if from == to {
        assert!(dst == src, "an unchanged size must copy");
    }
    // Every backend gives the bytes of the portable one.
    let mut scalar = vec![0x5A; dst_len];
    resize_rgb_with(&src, from, &mut scalar, to, filter, Backend::Scalar).unwrap();
    assert!(dst == scalar, "Auto != Scalar: {filter:?} {from:?} -> {to:?}");
    for backend in [Backend::Avx2, Backend::Avx512] {
        if let Ok(()) = resize_rgb_with(&src, from, &mut scalar, to, filter, backend) {
            assert!(
                dst == scalar,
                "{backend:?} != Scalar: {filter:?} {from:?} -> {to:?}"
            );
        }
    }
    if let Fill::Constant(v) = fill {
        assert!(
            dst.iter().all(|&x| x == v),
            "constant {v} not kept: {filter:?} {from:?} -> {to:?}"
        );
    }
    if matches!(
        filter,
        Filter::Nearest | Filter::Box | Filter::Bilinear | Filter::Hamming
    ) {
        for c in 0..3 {
            let (lo, hi) = channel_range(&src, c);
            let (out_lo, out_hi) = channel_range(&dst, c);
            assert!(
                lo <= out_lo && out_hi <= hi,
                "{filter:?} {from:?} -> {to:?}: channel {c} in {lo}..={hi} gave {out_lo}..={out_hi}"
            );
        }
    }
});
