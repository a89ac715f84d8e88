//! Helpers shared by the fuzz targets: bounded sizes, pixel fills and the argument
//! mistakes the resize targets make.

use arbitrary::{Result, Unstructured};
use mmfast::error::TransformError;

/// Sizes that catch off-by-ones: 1, small primes, powers of two and their neighbours,
/// the AVX2 block edges (4 pixels horizontally, 32 bytes vertically) and the 64-row
/// threshold above which a resize is split into bands.
const INTERESTING: [usize; 24] = [
    1, 2, 3, 4, 5, 7, 8, 10, 11, 13, 16, 17, 31, 32, 33, 63, 64, 65, 97, 127, 128, 257, 509, 512,
];

/// A side length in `1..=max`: usually small, sometimes an interesting value, rarely
/// anything up to `max`.
///
/// # Errors
/// Only when `u` cannot be read (never in practice: `Unstructured` yields zeros when empty).
pub fn side(u: &mut Unstructured<'_>, max: usize) -> Result<usize> {
    Ok(match u.int_in_range(0u8..=9)? {
        0..=4 => u.int_in_range(1..=max.min(24))?,
        5..=7 => {
            let fits: Vec<usize> = INTERESTING.iter().copied().filter(|&s| s <= max).collect();
            *u.choose(&fits)?
        }
        _ => u.int_in_range(1..=max)?,
    })
}

/// A (height, width) in `1..=max` each, with at most `area` pixels (the longer side is
/// shrunk), so that extreme aspect ratios stay cheap.
///
/// # Errors
/// As [`side`].
pub fn size(u: &mut Unstructured<'_>, max: usize, area: usize) -> Result<(usize, usize)> {
    let (mut h, mut w) = (side(u, max)?, side(u, max)?);
    while h * w > area {
        if h >= w {
            h = (h / 2).max(1);
        } else {
            w = (w / 2).max(1);
        }
    }
    Ok((h, w))
}

/// How a buffer's pixels are filled.
#[derive(Clone, Copy, Debug, arbitrary::Arbitrary)]
pub enum Fill {
    /// Every byte the same value.
    Constant(u8),
    /// `seed`-dependent pseudo-random bytes.
    Noise(u32),
    /// Only 0 and 255, a sharp checkerboard of period `1 + period % 7`: the worst case for
    /// filters with negative lobes (overshoot, clipping).
    Edges(u8),
}

impl Fill {
    /// `len` bytes of this fill.
    #[must_use]
    pub fn bytes(self, len: usize) -> Vec<u8> {
        match self {
            Fill::Constant(v) => vec![v; len],
            Fill::Noise(seed) => {
                let mut state = u64::from(seed) | 1;
                (0..len)
                    .map(|_| {
                        // xorshift64: fast, and every byte value occurs.
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        (state >> 24) as u8
                    })
                    .collect()
            }
            Fill::Edges(period) => {
                let period = 1 + usize::from(period % 7);
                (0..len)
                    .map(|i| if (i / 3 / period) % 2 == 0 { 0 } else { 255 })
                    .collect()
            }
        }
    }
}

/// A mistake in a resize's arguments, if any.
#[derive(Debug, arbitrary::Arbitrary)]
pub enum Lie {
    /// None: the arguments are valid.
    None,
    /// The source buffer's length moved by this much.
    SrcLen(i8),
    /// The destination buffer's length moved by this much.
    DstLen(i8),
    /// A source of zero height (true) or width.
    ZeroSrc(bool),
    /// A target of zero height (true) or width.
    ZeroDst(bool),
    /// A source size whose byte count overflows `usize`.
    HugeSrc,
}

impl Lie {
    /// The sizes and buffer lengths of a resize from `from` to `to` with this mistake.
    #[must_use]
    pub fn apply(&self, from: (usize, usize), to: (usize, usize)) -> Resize {
        let mut r = Resize {
            from,
            to,
            src_len: from.0 * from.1 * 3,
            dst_len: to.0 * to.1 * 3,
        };
        match *self {
            Lie::None => {}
            Lie::SrcLen(d) => r.src_len = adjust(r.src_len, d),
            Lie::DstLen(d) => r.dst_len = adjust(r.dst_len, d),
            Lie::ZeroSrc(height) => zero(&mut r.from, height),
            Lie::ZeroDst(height) => zero(&mut r.to, height),
            Lie::HugeSrc => r.from = (usize::MAX / 2, 3),
        }
        r
    }

    /// Whether `result` is the error this mistake must give (never for `Lie::None`).
    #[must_use]
    pub fn refused(&self, result: &std::result::Result<(), TransformError>) -> bool {
        matches!(
            (self, result),
            (
                Lie::SrcLen(_),
                Err(TransformError::InvalidArgument { arg: "src", .. })
            ) | (
                Lie::DstLen(_),
                Err(TransformError::InvalidArgument { arg: "dst", .. })
            ) | (
                Lie::ZeroSrc(_),
                Err(TransformError::InvalidArgument { arg: "src_size", .. })
            ) | (
                Lie::ZeroDst(_),
                Err(TransformError::InvalidArgument { arg: "dst_size", .. })
            ) | (
                Lie::HugeSrc,
                Err(TransformError::Overflow { arg: "src_size", .. })
            )
        )
    }
}

/// A resize's sizes and buffer lengths.
#[derive(Clone, Copy, Debug)]
pub struct Resize {
    /// Source (height, width).
    pub from: (usize, usize),
    /// Target (height, width).
    pub to: (usize, usize),
    /// Source buffer length.
    pub src_len: usize,
    /// Destination buffer length.
    pub dst_len: usize,
}

/// `len` moved by `delta` (never zero: zero is the matching length when it is).
fn adjust(len: usize, delta: i8) -> usize {
    let delta = if delta == 0 { 1 } else { delta };
    len.saturating_add_signed(isize::from(delta))
}

fn zero(size: &mut (usize, usize), height: bool) {
    if height {
        size.0 = 0;
    } else {
        size.1 = 0;
    }
}

/// (min, max) of channel `c` of packed RGB `pixels`.
#[must_use]
pub fn channel_range(pixels: &[u8], c: usize) -> (u8, u8) {
    let channel = pixels.iter().skip(c).step_by(3);
    (*channel.clone().min().unwrap(), *channel.max().unwrap())
}
