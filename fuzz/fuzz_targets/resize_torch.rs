//! `torch_resize::resize_torch_rgb` (torchvision's uint8 tensor resize, every `TorchMode`,
//! antialias on and off), the kernel behind `_native.resize(kernel="torch"|"torch-noaa")`
//! and the batch pipeline's torch resizes.
//!
//! Arbitrary source and target sizes, as for the Pillow target. Checks: `Ok` exactly for
//! valid arguments, except Lanczos without antialiasing, which torchvision refuses (so
//! torch and Pillow accept the same sizes); the AVX2 and AVX-512 backends byte-equal to the
//! scalar one;
//! an unchanged size copies; a constant image stays constant; and for nearest-exact and
//! bilinear (non-negative weights), every output value lies within its channel's input range.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use mmfast::error::TransformError;
use mmfast::resize::{resize_rgb, Backend, Filter};
use mmfast::torch_resize::{resize_torch_rgb, resize_torch_rgb_with, TorchMode};
use mmfast_fuzz::{channel_range, size, Fill, Lie};

#[derive(Debug, Arbitrary)]
struct Input {
    #[arbitrary(with = |u: &mut Unstructured| size(u, 512, 1 << 16))]
    from: (usize, usize),
    #[arbitrary(with = |u: &mut Unstructured| size(u, 512, 1 << 16))]
    to: (usize, usize),
    /// PIL code 0..=3, as transformers maps it to a torchvision mode.
    code: u8,
    antialias: bool,
    keep_axis: Option<bool>,
    fill: Fill,
    lie: Lie,
}

fuzz_target!(|input: Input| {
    let Input {
        from,
        mut to,
        code,
        antialias,
        keep_axis,
        fill,
        lie,
    } = input;
    let code = i64::from(code % 4);
    let mode = TorchMode::from_pil_code(code).expect("codes 0..=3 have a torch mode");
    match keep_axis {
        Some(true) => to.0 = from.0,
        Some(false) => to.1 = from.1,
        None => {}
    }
    let mistake = lie.apply(from, to);
    let (from, to, src_len, dst_len) = (mistake.from, mistake.to, mistake.src_len, mistake.dst_len);
    let src = fill.bytes(src_len);
    let mut dst = vec![0xA5; dst_len];
    let result = resize_torch_rgb(&src, from, &mut dst, to, mode, antialias);
    let refused = mode == TorchMode::Lanczos && !antialias && from != to;
    match (&lie, &result) {
        (Lie::None, Ok(())) if !refused => {}
        (Lie::None, Err(TransformError::InvalidArgument { arg: "mode", .. })) if refused => return,
        _ if lie.refused(&result) => return,
        _ => panic!("{lie:?} {mode:?} aa={antialias} {from:?} -> {to:?}: {result:?}"),
    }
    // Pillow accepts every size torch does (the sizes the Python layer hands either kernel).
    let filter = Filter::from_pil_code(code).unwrap();
    let mut pillow = vec![0; dst_len];
    resize_rgb(&src, from, &mut pillow, to, filter).unwrap();
    if from == to {
        assert!(dst == src, "an unchanged size must copy");
        assert!(pillow == src);
    }
    let mut scalar = vec![0x5A; dst_len];
    resize_torch_rgb_with(&src, from, &mut scalar, to, mode, antialias, Backend::Scalar).unwrap();
    assert!(
        dst == scalar,
        "Auto != Scalar: {mode:?} aa={antialias} {from:?} -> {to:?}"
    );
    for backend in [Backend::Avx2, Backend::Avx512] {
        if let Ok(()) = resize_torch_rgb_with(&src, from, &mut scalar, to, mode, antialias, backend) {
            assert!(
                dst == scalar,
                "{backend:?} != Scalar: {mode:?} aa={antialias} {from:?} -> {to:?}"
            );
        }
    }
    if let Fill::Constant(v) = fill {
        assert!(
            dst.iter().all(|&x| x == v),
            "constant {v} not kept: {mode:?} aa={antialias} {from:?} -> {to:?}: {:?}",
            &dst[..dst.len().min(24)]
        );
    }
    if matches!(mode, TorchMode::NearestExact | TorchMode::Bilinear) {
        for c in 0..3 {
            let (lo, hi) = channel_range(&src, c);
            let (out_lo, out_hi) = channel_range(&dst, c);
            assert!(
                lo <= out_lo && out_hi <= hi,
                "{mode:?} aa={antialias} {from:?} -> {to:?}: channel {c} in {lo}..={hi} gave {out_lo}..={out_hi}"
            );
        }
    }
});
