//! `transforms::f32_from_le_bytes` / `f32_as_le_bytes`: `deserialize_pixel_values(data,
//! shape)` and `serialize_pixel_values(tensor)`, which take bytes and a shape from anywhere
//! (a cache, a queue, another process).
//!
//! Arbitrary bytes and shapes (empty, zero-sized, huge, overflowing). The harness mirrors
//! what `lib.rs`'s `deserialize_pixel_values` does around the kernel: `checked_len` of the
//! shape, the length check against `4 * len`, the kernel, then
//! `ndarray::Array::from_shape_vec(IxDyn(shape), values).expect(..)`. Checks: the kernel
//! refuses every length but `4 * dst.len()`; accepted bytes round-trip bit for bit
//! (NaN payloads included) and equal `f32::from_le_bytes` value by value; and the
//! bindings' final `expect` cannot fail.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mmfast::error::TransformError;
use mmfast::transforms::{checked_len, f32_as_le_bytes, f32_from_le_bytes};

/// One axis of a shape.
#[derive(Debug, Arbitrary)]
enum Dim {
    Small(u8),
    Zero,
    Huge(u64),
    Max,
    /// Just above `isize::MAX`: fits `usize`, not NumPy's or ndarray's `isize`.
    AboveIsize(u8),
}

impl Dim {
    fn len(&self) -> usize {
        match *self {
            Dim::Small(v) => usize::from(v % 17),
            Dim::Zero => 0,
            Dim::Huge(v) => v as usize,
            Dim::Max => usize::MAX,
            Dim::AboveIsize(v) => (isize::MAX as usize) + 1 + usize::from(v),
        }
    }
}

#[derive(Debug, Arbitrary)]
struct Input<'a> {
    dims: Vec<Dim>,
    /// Trim or extend the data to the shape's byte count (else take it as it comes).
    fit: Option<bool>,
    data: &'a [u8],
}

/// Whether NumPy (and ndarray) can hold an array of `dims`: its non-zero sides multiply
/// to at most `isize::MAX`.
fn numpy_holds(dims: &[usize]) -> bool {
    dims.iter()
        .filter(|&&d| d != 0)
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .is_some_and(|n| isize::try_from(n).is_ok())
}

fuzz_target!(|input: Input<'_>| {
    let dims: Vec<usize> = input.dims.iter().take(6).map(Dim::len).collect();
    let len = match checked_len("shape", &dims) {
        Ok(len) => len,
        Err(TransformError::Overflow { arg: "shape", .. }) => {
            // Only for shapes NumPy cannot hold (a zero side does not excuse the others).
            assert!(!numpy_holds(&dims), "{dims:?}");
            return;
        }
        Err(e) => panic!("checked_len: {e}"),
    };
    let mut data = input.data.to_vec();
    match (input.fit, len.checked_mul(4)) {
        (Some(true), Some(n)) if n <= 1 << 20 => data.resize(n, 0x7F),
        (Some(false), Some(n)) if n <= 1 << 20 => data.resize(n.saturating_sub(1), 0x7F),
        _ => {}
    }
    if Some(data.len()) != len.checked_mul(4) {
        // The bindings stop here with an error; the kernel must refuse such pairs too.
        let wrong = (data.len() / 4).min(1 << 18);
        let mut dst = vec![0f32; wrong + usize::from(data.len() % 4 == 0)];
        assert!(
            f32_from_le_bytes(&data, &mut dst).is_err(),
            "{} bytes into {}",
            data.len(),
            dst.len()
        );
        return;
    }
    let mut values = vec![0f32; len];
    f32_from_le_bytes(&data, &mut values).expect("4 bytes per value");
    for (v, b) in values.iter().zip(data.chunks_exact(4)) {
        assert_eq!(
            v.to_bits(),
            f32::from_le_bytes([b[0], b[1], b[2], b[3]]).to_bits()
        );
    }
    let back = f32_as_le_bytes(&values);
    assert!(*back == *data, "serialise(deserialise(bytes)) != bytes");
    // What `deserialize_pixel_values` does last (`run_batch` shapes its output the same way).
    let array = ndarray::Array::from_shape_vec(ndarray::IxDyn(&dims), values).expect("length checked above");
    assert_eq!(array.len(), len);
});
