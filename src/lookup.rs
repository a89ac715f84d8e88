//! Table lookups of interleaved pixels into planes (or interleaved values, or the lines of a
//! streamed patch output), 64 at a time with AVX-512 VBMI.
//!
//! [`crate::transforms::Normalize`] maps every byte of a pixel to its channel's table entry
//! (a float32, a bfloat16 bit pattern or a byte). One scalar load per value bounds that loop;
//! here the tables are held as byte planes (byte `k` of each of a channel's 256 entries) so
//! that `vpermi2b` looks up 64 values' byte `k` at once, and the bytes are interleaved back
//! into values by unpacks. The lookup copies table entries, so it gives the scalar loop's
//! bits whatever the tables hold.

#[cfg(target_arch = "x86_64")]
use crate::stream::Lines;

/// A channel's table as byte planes: `planes[k][x]` is byte `k` (little-endian) of entry `x`.
type Planes = [[u8; 256]; 4];

/// Tables of `width`-byte values (1, 2 or 4) prepared for [`Lookup::run`], on a CPU with
/// AVX-512 VBMI.
#[derive(Clone, Debug)]
pub(crate) struct Lookup {
    width: usize,
    channels: [Planes; 3],
    /// For pixels of 1, 3 and 4 bytes, each channel's [`gather`]: made
    /// once, as a row of an image is often the whole call.
    gathers: [[Gather; 3]; 3],
    /// For [`Lookup::run_interleaved`], by the channel of a block's first value: the lanes
    /// (of the 1-byte pixels' gather) holding channel 1's values, and those holding 2's.
    phases: [(u64, u64); 3],
    /// Whether the three channels' tables are the same (one lookup serves every channel).
    uniform: bool,
    /// For [`Lookup::push_block`], pixels of 3 and 4 bytes: each channel's [`row_gather`].
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    rows: [[Gather; 3]; 2],
}

/// The source byte each lane reads, and the lanes reading bytes 128 and on.
type Gather = ([u8; 64], u64);

impl Lookup {
    /// `tables` prepared for the vector lookup, or `None` when this CPU lacks AVX-512 VBMI
    /// (or `T` is wider than 4 bytes).
    pub(crate) fn new<T: bytemuck::Pod>(tables: &[[T; 256]; 3]) -> Option<Lookup> {
        let width = size_of::<T>();
        if !matches!(width, 1 | 2 | 4) || !vbmi::detected() {
            return None;
        }
        let mut channels = [[[0u8; 256]; 4]; 3];
        for (planes, table) in channels.iter_mut().zip(tables) {
            for (x, entry) in table.iter().enumerate() {
                for (k, &byte) in bytemuck::bytes_of(entry).iter().enumerate() {
                    planes[k][x] = byte;
                }
            }
        }
        let gathers = [1, 3, 4].map(|bytes| [0, 1, 2].map(|c| gather(bytes, c, width)));
        let lanes_of = |first: usize, c: usize| {
            (0..64).fold(0u64, |m, p| {
                m | u64::from((first + order(p, width)) % 3 == c) << p
            })
        };
        Some(Lookup {
            width,
            channels,
            gathers,
            phases: [0, 1, 2].map(|first| (lanes_of(first, 1), lanes_of(first, 2))),
            uniform: channels[1] == channels[0] && channels[2] == channels[0],
            rows: [3, 4].map(|bytes| [0, 1, 2].map(|c| row_gather(bytes, c))),
        })
    }

    /// Looks up the pixels of `src` (`channels` bytes a pixel: 3 for RGB, 4 for RGBX whose
    /// fourth byte is unread, 1 for grayscale, its value in every channel) into `r`, `g` and
    /// `b`, as many as `src` and the three planes hold, 64 at a time and the rest through
    /// masks. Returns the number of pixels written.
    pub(crate) fn run<T: bytemuck::Pod>(
        &self,
        src: &[u8],
        channels: usize,
        r: &mut [T],
        g: &mut [T],
        b: &mut [T],
    ) -> usize {
        assert_eq!(
            size_of::<T>(),
            self.width,
            "tables and planes of one element type"
        );
        assert!(matches!(channels, 1 | 3 | 4), "1, 3 or 4 bytes a pixel");
        let pixels = (src.len() / channels).min(r.len().min(g.len()).min(b.len()));
        let outs = [r, g, b].map(|plane| bytemuck::cast_slice_mut::<T, u8>(plane).as_mut_ptr());
        // SAFETY: `Lookup` exists only where AVX-512 VBMI was detected; `pixels` pixels lie
        // inside `src` and each plane, as computed above.
        unsafe { vbmi::run(self, src.as_ptr(), channels, outs, pixels) };
        pixels
    }

    /// Looks up runs of interleaved RGB bytes into `dst`, interleaved the same way: each
    /// run `(from, to, len)` (`from` a red byte) writes `dst[to..to + len]`, value `i` of
    /// the run from channel `i % 3`'s table. Many short runs go in one call: the tables
    /// are loaded once (a patch line is 42 or 48 values).
    ///
    /// `dst` is `copies` equal parts, the runs' `to` counted in the first: each value is
    /// written into every part from the one lookup (Inkling's two time slots of a square).
    /// With `stream`, whole blocks of values at 16-byte aligned addresses are written with
    /// streaming stores (see [`crate::stream`]); the caller fences before `dst` is read.
    ///
    /// # Panics
    /// When `dst` is not `copies` (at least one) equal parts, or a run reaches past `src` or
    /// the first part.
    pub(crate) fn run_interleaved<T: bytemuck::Pod>(
        &self,
        src: &[u8],
        dst: &mut [T],
        runs: &[(usize, usize, usize)],
        copies: usize,
        stream: bool,
    ) {
        assert_eq!(
            size_of::<T>(),
            self.width,
            "tables and values of one element type"
        );
        assert!(
            copies > 0 && dst.len().is_multiple_of(copies),
            "{} values in {copies} equal parts",
            dst.len()
        );
        let part = dst.len() / copies;
        let fits = |at: usize, len: usize, end: usize| at.checked_add(len).is_some_and(|e| e <= end);
        assert!(
            runs.iter()
                .all(|&(from, to, len)| fits(from, len, src.len()) && fits(to, len, part)),
            "runs inside src and the first part of dst"
        );
        let out = bytemuck::cast_slice_mut::<T, u8>(dst).as_mut_ptr();
        let writes = Writes {
            copies,
            apart: self.width * part,
            stream,
        };
        // SAFETY: `Lookup` exists only where AVX-512 VBMI was detected; every run lies
        // inside `src` and each part of `dst`, as checked above.
        unsafe { vbmi::run_interleaved(self, src.as_ptr(), out, runs, writes) };
    }

    /// Streams a 16-value line into `lines` for each of `rows`: channel `c` of the 16
    /// pixels from byte `start` of the row (`channels` bytes a pixel: 3 for RGB, 4 for
    /// RGBX), looked up in that channel's table, four rows a lookup. One call writes a
    /// channel of a 16-pixel patch straight from its pixels, with no planes stored and read
    /// back in between.
    ///
    /// # Panics
    /// When the tables are not of 4-byte values, `channels` is not 3 or 4, `c` is not a
    /// channel, or a row ends before its 16 pixels.
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn push_block(
        &self,
        lines: &mut Lines<'_, 16>,
        rows: &[&[u8]; 16],
        start: usize,
        channels: usize,
        c: usize,
    ) {
        assert!(
            self.width == 4
                && matches!(channels, 3 | 4)
                && c < 3
                && rows.iter().all(|row| row.len() >= start + 16 * channels),
            "rows of 16 pixels of 3 or 4 bytes into 4-byte values"
        );
        // SAFETY: `Lookup` exists only where AVX-512 VBMI was detected; each row holds the
        // 16 pixels read, as checked above.
        unsafe { vbmi::push_block(self, lines, rows, start, channels, c) };
    }
}

/// How looked-up values are written: into `copies` places `apart` bytes apart, with
/// streaming stores where whole and aligned when `stream`.
#[derive(Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct Writes {
    copies: usize,
    apart: usize,
    stream: bool,
}

/// The output index of lane `p` of a looked-up vector once `vbmi::store`'s unpacks, which
/// work within 128-bit lanes, have interleaved its bytes into `width`-byte values.
const fn order(p: usize, width: usize) -> usize {
    let (lane, within) = (p / 16, p % 16);
    match width {
        4 => 16 * (within / 4) + 4 * lane + within % 4,
        2 => 32 * (within / 8) + 8 * lane + within % 8,
        _ => p,
    }
}

/// For channel `c` of pixels of `channels` bytes: the source byte each lane reads (so
/// that lane `p` holds the pixel [`order`] sends it to) and the lanes reading bytes
/// 128 and on.
fn gather(channels: usize, c: usize, width: usize) -> Gather {
    let mut index = [0u8; 64];
    let mut high = 0u64;
    for (p, i) in index.iter_mut().enumerate() {
        let at = channels * order(p, width) + if channels == 1 { 0 } else { c };
        *i = at as u8;
        high |= u64::from(at >= 128) << p;
    }
    (index, high)
}

/// For channel `c` of four rows of 16 pixels of `channels` bytes, the first two rows in
/// one pair of registers and the last two in another (each row from a register's start):
/// the byte each lane reads from its pair (so that lane `p` holds the value [`order`] sends
/// it to, among 4-byte values: value `16 * j + x` is pixel `x` of row `j`) and the lanes
/// reading the second pair.
fn row_gather(channels: usize, c: usize) -> Gather {
    let mut index = [0u8; 64];
    let mut high = 0u64;
    for (p, i) in index.iter_mut().enumerate() {
        let (row, x) = (order(p, 4) / 16, order(p, 4) % 16);
        *i = (64 * (row % 2) + channels * x + c) as u8;
        high |= u64::from(row >= 2) << p;
    }
    (index, high)
}

#[cfg(target_arch = "x86_64")]
mod vbmi {
    use std::arch::x86_64::{
        __m512i, _mm512_castsi512_si128, _mm512_extracti32x4_epi32, _mm512_loadu_si512,
        _mm512_mask_blend_epi8, _mm512_mask_loadu_epi8, _mm512_mask_storeu_epi8, _mm512_maskz_loadu_epi8,
        _mm512_movepi8_mask, _mm512_permutex2var_epi8, _mm512_permutexvar_epi8, _mm512_setzero_si512,
        _mm512_storeu_si512, _mm512_unpackhi_epi16, _mm512_unpackhi_epi8, _mm512_unpacklo_epi16,
        _mm512_unpacklo_epi8, _mm_stream_si128,
    };

    use super::{Lines, Lookup, Writes};

    pub(super) fn detected() -> bool {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vbmi")
    }

    /// The 64 bytes of `planes` at `at..at + 64`.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn load(planes: &[u8; 256], at: usize) -> __m512i {
        // SAFETY: `at` is 0, 64, 128 or 192, so 64 bytes lie inside `planes`.
        unsafe { _mm512_loadu_si512(planes.as_ptr().add(at).cast()) }
    }

    /// Byte `x` of the 256-byte `plane` for each byte `x` of `index`.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn look_up(plane: &[u8; 256], index: __m512i) -> __m512i {
        // SAFETY: the caller guarantees the CPU features.
        unsafe { look_up_held(&[0, 64, 128, 192].map(|at| load(plane, at)), index) }
    }

    /// The bits of the 64 bytes from `start` that lie below `end`.
    fn mask(start: usize, end: usize) -> u64 {
        match end.saturating_sub(start) {
            n if n >= 64 => u64::MAX,
            n => (1 << n) - 1,
        }
    }

    /// One copy, ordinary stores.
    const ONCE: Writes = Writes {
        copies: 1,
        apart: 0,
        stream: false,
    };

    /// Writes `v` to the 64 bytes at `out` and each copy of them (see [`Writes`]), only
    /// those of `keep` when `MASKED`; with `stream`, all 64 with streaming stores where
    /// `out` is 16-byte aligned.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and BW, and the bytes written must be writable.
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn put<const MASKED: bool>(out: *mut u8, keep: u64, v: __m512i, writes: Writes) {
        // SAFETY: the caller guarantees the features and the bytes written.
        unsafe {
            put_once::<MASKED>(out, keep, v, writes.stream);
            for copy in 1..writes.copies {
                put_once::<MASKED>(out.add(copy * writes.apart), keep, v, writes.stream);
            }
        }
    }

    /// [`put`]'s write of one copy.
    ///
    /// # Safety
    /// As [`put`].
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn put_once<const MASKED: bool>(out: *mut u8, keep: u64, v: __m512i, stream: bool) {
        // SAFETY: the caller guarantees the features and the bytes written; masked-off
        // bytes are neither written nor touched; streaming stores' 16 bytes are aligned.
        unsafe {
            if MASKED {
                _mm512_mask_storeu_epi8(out.cast(), keep, v);
            } else if stream && (out as usize).is_multiple_of(16) {
                // Four 16-byte streaming stores: outputs come from `malloc`, 16-byte
                // aligned (a large one 16 bytes past a page), so 64-byte ones would not apply.
                _mm_stream_si128(out.cast(), _mm512_castsi512_si128(v));
                _mm_stream_si128(out.add(16).cast(), _mm512_extracti32x4_epi32::<1>(v));
                _mm_stream_si128(out.add(32).cast(), _mm512_extracti32x4_epi32::<2>(v));
                _mm_stream_si128(out.add(48).cast(), _mm512_extracti32x4_epi32::<3>(v));
            } else {
                _mm512_storeu_si512(out.cast(), v);
            }
        }
    }

    /// Writes 64 looked-up values, `width` bytes each, to `out` (only the first `n` when
    /// `MASKED`; see [`put`] for `writes`): `byte(k)` holds byte `k` of each lane's value.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI, and `out` must hold the bytes written.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn store<const MASKED: bool>(
        byte: impl Fn(usize) -> __m512i,
        width: usize,
        out: *mut u8,
        n: usize,
        writes: Writes,
    ) {
        let keep = |i: usize| mask(64 * i, n * width);
        // SAFETY: the caller guarantees the CPU features and the bytes written.
        unsafe {
            match width {
                4 => {
                    for (i, v) in widen([0, 1, 2, 3].map(byte)).into_iter().enumerate() {
                        put::<MASKED>(out.add(64 * i), keep(i), v, writes);
                    }
                }
                2 => {
                    let (b0, b1) = (byte(0), byte(1));
                    put::<MASKED>(out, keep(0), _mm512_unpacklo_epi8(b0, b1), writes);
                    put::<MASKED>(out.add(64), keep(1), _mm512_unpackhi_epi8(b0, b1), writes);
                }
                _ => put::<MASKED>(out, keep(0), byte(0), writes),
            }
        }
    }

    /// 64 4-byte values from their bytes (`bytes[k]` holds byte `k` of each), in four
    /// vectors of 16, value `16 * i + j` of [`order`] lane `j` of vector `i`.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn widen(bytes: [__m512i; 4]) -> [__m512i; 4] {
        let [b0, b1, b2, b3] = bytes;
        let (lo01, hi01) = (_mm512_unpacklo_epi8(b0, b1), _mm512_unpackhi_epi8(b0, b1));
        let (lo23, hi23) = (_mm512_unpacklo_epi8(b2, b3), _mm512_unpackhi_epi8(b2, b3));
        [
            _mm512_unpacklo_epi16(lo01, lo23),
            _mm512_unpackhi_epi16(lo01, lo23),
            _mm512_unpacklo_epi16(hi01, hi23),
            _mm512_unpackhi_epi16(hi01, hi23),
        ]
    }

    /// [`Lookup::push_block`], once checked.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI; each of `rows` must hold 16 pixels of
    /// `channels` (3 or 4) bytes from `start`; the lookup's values are 4 bytes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn push_block(
        lookup: &Lookup,
        lines: &mut Lines<'_, 16>,
        rows: &[&[u8]; 16],
        start: usize,
        channels: usize,
        c: usize,
    ) {
        let (index, high) = &lookup.rows[channels - 3][c];
        let planes = &lookup.channels[c];
        // SAFETY: the caller guarantees the features and the 16 pixels of each row from
        // `start`: 64 bytes of RGBX, or the 48 of RGB a masked load touches.
        unsafe {
            let index = _mm512_loadu_si512(index.as_ptr().cast());
            let load = |row: &[u8]| {
                let at = row.as_ptr().add(start);
                if channels == 4 {
                    _mm512_loadu_si512(at.cast())
                } else {
                    _mm512_maskz_loadu_epi8(mask(0, 48), at.cast())
                }
            };
            for four in rows.chunks_exact(4) {
                let values = _mm512_mask_blend_epi8(
                    *high,
                    _mm512_permutex2var_epi8(load(four[0]), index, load(four[1])),
                    _mm512_permutex2var_epi8(load(four[2]), index, load(four[3])),
                );
                for v in widen([0, 1, 2, 3].map(|k| look_up(&planes[k], values))) {
                    lines.push_vector(v);
                }
            }
        }
    }

    /// [`Lookup::run`] on `pixels` pixels: blocks of 64, then the rest through masks.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI (a [`Lookup`] exists only then), `src`
    /// must hold `channels * pixels` bytes and each of `outs` `width * pixels`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn run(
        lookup: &Lookup,
        src: *const u8,
        channels: usize,
        outs: [*mut u8; 3],
        pixels: usize,
    ) {
        for block in 0..pixels / 64 {
            // SAFETY: the caller guarantees the features and the lengths read and written.
            unsafe { run_block::<false>(lookup, src, channels, outs, 64 * block, 64) };
        }
        let done = pixels / 64 * 64;
        if done < pixels {
            // SAFETY: as above; the masks keep loads and stores inside the last pixels.
            unsafe { run_block::<true>(lookup, src, channels, outs, done, pixels - done) };
        }
    }

    /// Pixels `at..at + n` (`n` = 64 unless `MASKED`) of [`run`].
    ///
    /// # Safety
    /// As [`run`], for those pixels.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn run_block<const MASKED: bool>(
        lookup: &Lookup,
        src: *const u8,
        channels: usize,
        outs: [*mut u8; 3],
        at: usize,
        n: usize,
    ) {
        let width = lookup.width;
        let gathers = &lookup.gathers[match channels {
            1 => 0,
            3 => 1,
            _ => 2,
        }];
        // SAFETY: the caller guarantees the features and the lengths read and written; a
        // masked load touches only the bytes of its mask.
        unsafe {
            let px = src.add(channels * at);
            let v = |k: usize| {
                if MASKED {
                    _mm512_maskz_loadu_epi8(mask(64 * k, n * channels), px.add(64 * k).cast())
                } else {
                    _mm512_loadu_si512(px.add(64 * k).cast())
                }
            };
            let regs = match channels {
                4 => [v(0), v(1), v(2), v(3)],
                3 => [v(0), v(1), v(2), v(2)],
                _ => [v(0); 4],
            };
            for (c, (index, high)) in gathers.iter().enumerate() {
                let index = _mm512_loadu_si512(index.as_ptr().cast());
                // Each lane's source byte: lanes of bytes 0-127 from the first two
                // registers, the others from the last one or two (RGB's third register
                // reads bytes 128-191 by the low six bits, `at - 128`).
                let values = match channels {
                    1 => _mm512_permutexvar_epi8(index, regs[0]),
                    3 => _mm512_mask_blend_epi8(
                        *high,
                        _mm512_permutex2var_epi8(regs[0], index, regs[1]),
                        _mm512_permutexvar_epi8(index, regs[2]),
                    ),
                    _ => _mm512_mask_blend_epi8(
                        *high,
                        _mm512_permutex2var_epi8(regs[0], index, regs[1]),
                        _mm512_permutex2var_epi8(regs[2], index, regs[3]),
                    ),
                };
                let planes = &lookup.channels[c];
                store::<MASKED>(
                    |k| look_up(&planes[k], values),
                    width,
                    outs[c].add(width * at),
                    n,
                    ONCE,
                );
            }
        }
    }

    /// [`Lookup::run_interleaved`], the tables held in registers throughout. Runs that each
    /// start where the one before ends in `out`, those before the last whole pixels, form a
    /// chain written in blocks of 64 values (the last through masks), each block's bytes
    /// gathered from the runs it covers: a patch line (42 or 96 values) is not a multiple
    /// of the block, but a patch's lines follow each other in `out`.
    ///
    /// # Safety
    /// As [`run`], with every run inside `src` and `out` (`width` bytes a value).
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn run_interleaved(
        lookup: &Lookup,
        src: *const u8,
        out: *mut u8,
        runs: &[(usize, usize, usize)],
        writes: Writes,
    ) {
        // SAFETY (the loads): the caller guarantees the CPU features; `order` holds 64 bytes.
        let tables: [[[__m512i; 4]; 4]; 3] = std::array::from_fn(|c| {
            std::array::from_fn(|k| std::array::from_fn(|q| unsafe { load(&lookup.channels[c][k], 64 * q) }))
        });
        let order = unsafe { _mm512_loadu_si512(lookup.gathers[0][0].0.as_ptr().cast()) };
        let width = lookup.width;
        let mut rest = runs;
        while let Some(&(_, start, _)) = rest.first() {
            let links = rest
                .windows(2)
                .take_while(|pair| pair[1].1 == pair[0].1 + pair[0].2 && pair[0].2 % 3 == 0)
                .count();
            let (chain, after) = rest.split_at(links + 1);
            let (_, last_to, last_len) = chain[links];
            let end = last_to + last_len;
            // The first run the next block reads.
            let mut first = 0;
            for block in (start..end).step_by(64) {
                let n = (end - block).min(64);
                let mut bytes = _mm512_setzero_si512();
                for &(from, to, len) in &chain[first..] {
                    if to >= block + n {
                        break;
                    }
                    let lanes =
                        mask(0, (to + len).min(block + n) - block) & !mask(0, to.saturating_sub(block));
                    // Lane `l` reads byte `from + block + l - to` of `src`: the run's bytes
                    // from where the block meets it.
                    let at = src.wrapping_add(from + block).wrapping_sub(to);
                    // SAFETY: the caller guarantees the features; the lanes of `lanes` read
                    // bytes of this run, inside `src`, and a masked load touches no others.
                    bytes = unsafe { _mm512_mask_loadu_epi8(bytes, lanes, at.cast()) };
                    if to + len > block + n {
                        break;
                    }
                    first += 1;
                }
                // SAFETY: the caller guarantees the features and that the runs lie inside
                // `out`, where the chain's values follow each other; a masked block writes
                // only its first `n` values.
                unsafe {
                    let at = out.add(width * block);
                    let phase = (block - start) % 3;
                    if n == 64 {
                        interleaved_block::<false>(lookup, &tables, order, bytes, at, phase, 64, writes);
                    } else {
                        interleaved_block::<true>(lookup, &tables, order, bytes, at, phase, n, writes);
                    }
                }
            }
            rest = after;
        }
    }

    /// Byte `x` of the 256-byte plane held in `plane` for each byte `x` of `index`.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn look_up_held(plane: &[__m512i; 4], index: __m512i) -> __m512i {
        let low = _mm512_permutex2var_epi8(plane[0], index, plane[1]);
        let high = _mm512_permutex2var_epi8(plane[2], index, plane[3]);
        _mm512_mask_blend_epi8(_mm512_movepi8_mask(index), low, high)
    }

    /// The `n` values (64 unless `MASKED`) of `bytes`, written to `out` as [`put`] does
    /// with `writes`, the first of them of channel `first`: each lane looked up
    /// in its channel's planes (one lookup when they are all the same).
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI; `out` must hold `width * n` bytes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn interleaved_block<const MASKED: bool>(
        lookup: &Lookup,
        tables: &[[[__m512i; 4]; 4]; 3],
        order: __m512i,
        bytes: __m512i,
        out: *mut u8,
        first: usize,
        n: usize,
        writes: Writes,
    ) {
        let (ones, twos) = lookup.phases[first];
        let [red, green, blue] = tables;
        let values = _mm512_permutexvar_epi8(order, bytes);
        let byte = |k: usize| {
            // SAFETY: the caller guarantees the features.
            let v = unsafe { look_up_held(&red[k], values) };
            if lookup.uniform {
                return v;
            }
            // SAFETY: as above.
            unsafe {
                let v = _mm512_mask_blend_epi8(ones, v, look_up_held(&green[k], values));
                _mm512_mask_blend_epi8(twos, v, look_up_held(&blue[k], values))
            }
        };
        // SAFETY: the caller guarantees the features and the bytes written.
        unsafe { store::<MASKED>(byte, lookup.width, out, n, writes) };
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod vbmi {
    use super::{Lookup, Writes};

    pub(super) fn detected() -> bool {
        false
    }

    /// Never called: no [`Lookup`] exists off x86-64.
    pub(super) unsafe fn run(_: &Lookup, _: *const u8, _: usize, _: [*mut u8; 3], _: usize) {
        unreachable!("no Lookup off x86-64")
    }

    /// Never called: no [`Lookup`] exists off x86-64.
    pub(super) unsafe fn run_interleaved(
        _: &Lookup,
        _: *const u8,
        _: *mut u8,
        _: &[(usize, usize, usize)],
        _: Writes,
    ) {
        unreachable!("no Lookup off x86-64")
    }
}

#[cfg(test)]
mod tests {
    use super::Lookup;
    use crate::testing::Rng;

    /// Random tables of `T` and pixels of 1, 3 and 4 bytes, of lengths around the block
    /// size, into planes longer than the pixels: every value the lookup writes is its
    /// table's entry, and nothing past them changes.
    fn check<T: bytemuck::Pod + PartialEq + std::fmt::Debug>(rng: &mut Rng) {
        let mut tables = [[T::zeroed(); 256]; 3];
        for table in &mut tables {
            bytemuck::cast_slice_mut::<T, u8>(table).fill_with(|| rng.below(256) as u8);
        }
        let Some(lookup) = Lookup::new(&tables) else {
            eprintln!("no AVX-512 VBMI here: the scalar loop runs alone");
            return;
        };
        for channels in [1, 3, 4] {
            for pixels in [0, 1, 5, 21, 63, 64, 65, 128, 200, 640] {
                let src: Vec<u8> = (0..pixels * channels).map(|_| rng.below(256) as u8).collect();
                let mut planes = vec![vec![T::zeroed(); pixels + 70]; 3];
                let [r, g, b] = &mut planes[..] else {
                    unreachable!()
                };
                assert_eq!(lookup.run(&src, channels, r, g, b), pixels);
                for (c, plane) in planes.iter().enumerate() {
                    for (i, value) in plane.iter().enumerate() {
                        let want = match src.get(i * channels + if channels == 1 { 0 } else { c }) {
                            Some(&byte) if i < pixels => tables[c][usize::from(byte)],
                            _ => T::zeroed(),
                        };
                        assert_eq!(
                            *value, want,
                            "channels {channels}, pixel {i} of {pixels}, channel {c}"
                        );
                    }
                }
            }
        }
        // Runs of interleaved values: longer than a block (whose first value falls on each
        // channel in turn), split into pixel-sized runs, and written further on; with
        // distinct tables and with one for all three; into one part or several.
        let uniform = Lookup::new(&[tables[1]; 3]).expect("VBMI, as above");
        for (lookup, tables) in [(&lookup, tables), (&uniform, [tables[1]; 3])] {
            for values in [0usize, 1, 2, 3, 20, 63, 64, 65, 191, 192, 193, 640] {
                let src: Vec<u8> = (0..values).map(|_| rng.below(256) as u8).collect();
                let (a, b) = (values.min(3), values.saturating_sub(3).min(3));
                let split = [(0, 0, a), (a, a, b), (a + b, a + b, values - a - b)];
                for (runs, to) in [
                    (&[(0, 0, values)][..], 0),
                    (&split[..], 0),
                    (&[(0, 5, values)][..], 5),
                ] {
                    for (stream, copies) in [(false, 1), (true, 1), (false, 2), (true, 3)] {
                        let part = values + 70;
                        let mut dst = vec![T::zeroed(); copies * part];
                        lookup.run_interleaved(&src, &mut dst, runs, copies, stream);
                        for (i, value) in dst.iter().enumerate() {
                            let j = (i % part).checked_sub(to);
                            let want = match j.and_then(|j| src.get(j).map(|&v| (j, v))) {
                                Some((j, byte)) => tables[j % 3][usize::from(byte)],
                                None => T::zeroed(),
                            };
                            assert_eq!(
                                *value, want,
                                "value {i} of {values} x {copies} from {to}, runs {runs:?}"
                            );
                        }
                    }
                }
            }
            // Runs read from anywhere in `src`, most of them starting where the one before
            // ends in `dst` (chains gathered into whole blocks), of patch-line lengths and
            // others, some not whole pixels (which end a chain).
            let src: Vec<u8> = (0..3000).map(|_| rng.below(256) as u8).collect();
            for _ in 0..20 {
                let mut runs = Vec::new();
                let mut to = rng.below(4);
                for _ in 0..rng.below(40) {
                    let len = [0, 1, 3, 5, 42, 48, 64, 96, 129][rng.below(9)];
                    runs.push((rng.below(src.len() - len + 1), to, len));
                    to += len + if rng.below(4) == 0 { 1 + rng.below(4) } else { 0 };
                }
                let (part, copies) = (to + 70, 1 + rng.below(3));
                let mut dst = vec![T::zeroed(); copies * part];
                let mut want = dst.clone();
                for first in (0..want.len()).step_by(part) {
                    for &(from, at, len) in &runs {
                        for i in 0..len {
                            want[first + at + i] = tables[i % 3][usize::from(src[from + i])];
                        }
                    }
                }
                let stream = rng.below(2) == 0;
                lookup.run_interleaved(&src, &mut dst, &runs, copies, stream);
                assert_eq!(dst, want, "runs {runs:?} x {copies}, streamed: {stream}");
            }
        }
    }

    #[test]
    fn lookup_writes_table_entries_for_every_width() {
        let mut rng = Rng(7);
        for _ in 0..4 {
            check::<u32>(&mut rng);
            check::<u16>(&mut rng);
            check::<u8>(&mut rng);
        }
    }
}
