//! `image::to_rgb_oriented`: Pillow's RGBX / RGB / L pixel buffers → oriented HWC RGB, the
//! kernel behind `_native.rgb_from_arrow` and the packing of Arrow inputs in `run_batch`.
//!
//! Arbitrary sizes (1 and primes included, extreme aspect ratios), channel counts (valid
//! 1/3/4 and invalid ones), all 8 EXIF orientations plus out-of-range tags, and buffers
//! whose lengths may not match. Checks: `Ok` exactly for valid arguments, and the pixels
//! against a reference built from Pillow's elementary transposes (flip left-right, flip
//! top-bottom, transpose), with RGBX and L unpacked by hand.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use mmfast::image::{to_rgb_oriented, Orientation};
use mmfast_fuzz::{size, Fill};

/// How a buffer's length or a size is made wrong, if at all.
#[derive(Debug, Arbitrary)]
enum Lie {
    Exact,
    Short(u8),
    Long(u8),
    ZeroHeight,
    ZeroWidth,
}

#[derive(Debug, Arbitrary)]
struct Input {
    #[arbitrary(with = |u: &mut Unstructured| size(u, 512, 1 << 16))]
    size: (usize, usize),
    /// 0: L, 1: RGB, 2: RGBX; anything else is taken modulo 8 (0, 2, 5, 6, 7 are invalid).
    channels: u8,
    /// An EXIF tag: 1..=8 most of the time, anything else means upright.
    tag: i64,
    src: Lie,
    dst: Lie,
    fill: Fill,
}

/// HWC RGB of `(h, w)` → the same mirrored left-right.
fn flip_lr(img: &[u8], (h, w): (usize, usize)) -> Vec<u8> {
    let mut out = vec![0; img.len()];
    for y in 0..h {
        for x in 0..w {
            let (d, s) = ((y * w + x) * 3, (y * w + (w - 1 - x)) * 3);
            out[d..d + 3].copy_from_slice(&img[s..s + 3]);
        }
    }
    out
}

/// HWC RGB of `(h, w)` → the same upside down.
fn flip_tb(img: &[u8], (h, w): (usize, usize)) -> Vec<u8> {
    img.chunks_exact(w * 3).rev().take(h).flatten().copied().collect()
}

/// HWC RGB of `(h, w)` → its transpose, of `(w, h)`.
fn transpose(img: &[u8], (h, w): (usize, usize)) -> Vec<u8> {
    let mut out = vec![0; img.len()];
    for y in 0..h {
        for x in 0..w {
            let (d, s) = ((x * h + y) * 3, (y * w + x) * 3);
            out[d..d + 3].copy_from_slice(&img[s..s + 3]);
        }
    }
    out
}

/// `Image.transpose` for the EXIF orientation, composed from the three elementary moves.
fn reference(rgb: &[u8], size: (usize, usize), orientation: Orientation) -> Vec<u8> {
    let swapped = (size.1, size.0);
    match orientation {
        Orientation::Identity => rgb.to_vec(),
        Orientation::MirrorX => flip_lr(rgb, size),
        Orientation::MirrorY => flip_tb(rgb, size),
        Orientation::Rotate180 => flip_tb(&flip_lr(rgb, size), size),
        Orientation::Transpose => transpose(rgb, size),
        // ROTATE_270 (clockwise): transpose, then mirror left-right.
        Orientation::Rotate270 => flip_lr(&transpose(rgb, size), swapped),
        // ROTATE_90 (counter-clockwise): transpose, then upside down.
        Orientation::Rotate90 => flip_tb(&transpose(rgb, size), swapped),
        Orientation::Transverse => flip_tb(&flip_lr(&transpose(rgb, size), swapped), swapped),
    }
}

fn apply(lie: &Lie, len: usize) -> usize {
    match *lie {
        Lie::Short(d) => len.saturating_sub(usize::from(d) + 1),
        Lie::Long(d) => len + usize::from(d) + 1,
        _ => len,
    }
}

fuzz_target!(|input: Input| {
    let Input {
        size: (mut h, mut w),
        channels,
        tag,
        src,
        dst,
        fill,
    } = input;
    let tag = if tag.unsigned_abs() % 4 == 0 {
        tag
    } else {
        1 + tag.rem_euclid(8)
    };
    let orientation = Orientation::from_exif(tag);
    assert_eq!(
        orientation == Orientation::Identity,
        !(2..=8).contains(&tag),
        "tag {tag}"
    );
    let channels = match channels {
        0 => 1,
        1 => 3,
        2 => 4,
        c => usize::from(c % 8),
    };
    for lie in [&src, &dst] {
        match lie {
            Lie::ZeroHeight => h = 0,
            Lie::ZeroWidth => w = 0,
            _ => {}
        }
    }
    let pixels = fill.bytes(apply(&src, h * w * channels));
    let mut out = vec![0xA5; apply(&dst, h * w * 3)];
    let result = to_rgb_oriented(&pixels, channels, (h, w), orientation, &mut out);
    let valid = h > 0
        && w > 0
        && matches!(channels, 1 | 3 | 4)
        && pixels.len() == h * w * channels
        && out.len() == h * w * 3;
    assert_eq!(result.is_ok(), valid, "{result:?}");
    if !valid {
        return;
    }
    let rgb: Vec<u8> = match channels {
        1 => pixels.iter().flat_map(|&v| [v, v, v]).collect(),
        3 => pixels.clone(),
        _ => pixels.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect(),
    };
    assert!(
        out == reference(&rgb, (h, w), orientation),
        "{orientation:?} of ({h}, {w}) with {channels} channels"
    );
    let swapped = matches!(tag, 5..=8);
    assert_eq!(
        orientation.oriented_size((h, w)),
        if swapped { (w, h) } else { (h, w) }
    );
});
