//! Writing a large output in order, 4-byte values a line at a time, with non-temporal
//! stores: any line through AVX-512 where the CPU has it, else lines of 14 or 16 values
//! through SSE2 ([`stream_line`], [`stream_pair`]); and rows of any bytes ([`stream_copy`]).
//!
//! A patch layout's output (Qwen's: 7.4 MB for a 640x480 image, 290 MB at 12 MP) is written
//! once and read by the model, not by this process: ordinary stores first read each cache
//! line they fill into the cache, then write it back. Streaming stores write whole aligned
//! 64-byte lines straight to memory. The lines a caller writes (14 or 16 values, say) do not
//! match the output's cache lines, so [`Lines`] packs them into aligned 16-value chunks,
//! carrying the remainder of each line into the next chunk.
//!
//! On the 2-vCPU Intel Xeon (AVX-512) this was measured on, writing 7.4 MB in 64-byte lines
//! took 0.31 ms streamed, against 0.33 ms with ordinary stores when the buffer was in cache
//! and 0.40-0.52 ms when it was not. On a 2-vCPU AMD EPYC (Zen 1, AVX2) ordinary stores
//! cost more: a plain 7.4 MB write took 0.65-0.97 ms, 0.32-0.53 ms streamed.

use std::arch::x86_64::{
    __m512i, _mm512_mask_storeu_epi32, _mm512_maskz_loadu_epi32, _mm512_permutex2var_epi32,
    _mm512_permutexvar_epi32, _mm512_setzero_si512, _mm512_stream_si512, _mm_loadl_epi64, _mm_loadu_si128,
    _mm_sfence, _mm_stream_si128, _mm_unpacklo_epi64,
};

/// Outputs smaller than this are written with ordinary stores: they are fresh zeroed
/// allocations (see [`crate::alloc::output`]), whose lines the zeroing has just brought into
/// the cache. Larger ones come from the pool of freed outputs, where streaming wins: at
/// 640x480, Hy4's 3.7 MB output took 0.62 -> 0.51 ms a call and Qwen3-VL's 1.2 MB at 224x224
/// 0.36 -> 0.29 ms, while streaming Qwen2.5-VL's 0.9 MB (zeroed) output at 168x224 took
/// 0.18 -> 0.34 ms. On a 2-vCPU Zen 5 EPYC (32 MB L3), ordinary stores win only while the
/// pooled buffer is still in cache, when the caller freed the previous output at once:
/// Qwen3-VL's 7.4 MB at 640x480 took 0.224 ms a call against 0.259 ms streamed. A caller
/// holding its last eight outputs (a server keeps them until the model reads them) gets
/// cold buffers back, and there they took 0.376 ms against 0.260 ms streamed (Hy4: 0.244
/// against 0.177 ms; Qwen2.5-VL: 0.531 against 0.434 ms). Measured again on another day
/// (7 interleaved rounds), ordinary stores in [`Lines`] lost even with the output freed at
/// once: Qwen3-VL 0.346 against 0.330 ms, Kimi-K2.5's 25 MB at 1920x1080 1.70 against
/// 1.43 ms.
pub(crate) const STREAM_MIN_BYTES: usize = crate::alloc::POOL_MIN_BYTES;

/// Outputs at least this large (more than a last-level cache holds) are streamed by the
/// table lookup of channel-last patches. On a 2-vCPU Zen 5 EPYC (32 MB L3) streaming took
/// Inkling's 50 MB output at 1920x1080 from 6.8 to 3.5 ms a call and its 295 MB at 12 MP
/// from 39.9 to 25.3 ms, but its 7.8 MB at 640x480 from 0.32 to 0.40 ms and Gemma 4's 7.7 MB
/// at 1920x1080 from 1.33 to 1.70 ms.
pub(crate) const STREAM_PAST_CACHE_BYTES: usize = 32 << 20;

/// Copies a line of 64 bytes (16 4-byte values) into `dst`, which starts 16-byte aligned,
/// with SSE2's streaming stores (any x86-64 CPU): a patch line of 16 values where
/// [`Lines`] cannot run, no packing needed, as every line of an aligned output starts
/// aligned. The caller [`fence`]s before the output is read. On a 2-vCPU AMD EPYC (Zen 1)
/// copying Qwen3-VL's 640x480 output from its planar scratch took 0.31 ms against
/// 0.76-0.89 ms with `memcpy` (a C loop of the same copies).
///
/// # Panics
/// `dst` or `src` is not 64 bytes, or `dst` is not 16-byte aligned.
#[inline]
pub(crate) fn stream_line<T: bytemuck::Pod>(dst: &mut [T], src: &[T]) {
    let (dst, src) = (
        bytemuck::cast_slice_mut::<T, u8>(dst),
        bytemuck::cast_slice::<T, u8>(src),
    );
    assert!(
        dst.len() == 64 && src.len() == 64 && (dst.as_ptr() as usize).is_multiple_of(16),
        "64 bytes into 16-byte aligned memory"
    );
    for i in (0..64).step_by(16) {
        // SAFETY: bytes i..i + 16 lie inside both, as checked; `dst`'s are 16-byte aligned.
        unsafe {
            _mm_stream_si128(
                dst.as_mut_ptr().add(i).cast(),
                _mm_loadu_si128(src.as_ptr().add(i).cast()),
            );
        }
    }
}

/// Copies two lines of 56 bytes (14 4-byte values each) into `dst`, which starts 16-byte
/// aligned, with SSE2's streaming stores: [`stream_line`] for a patch size of 14 (Qwen2.5-VL's),
/// whose lines start 16-byte aligned only every other line, so two lines go together, seven
/// 16-byte stores, the fourth holding the end of the first and the start of the second.
///
/// # Panics
/// `dst` is not 112 bytes or not 16-byte aligned, or a line is not 56 bytes.
#[inline]
pub(crate) fn stream_pair<T: bytemuck::Pod>(dst: &mut [T], first: &[T], second: &[T]) {
    let dst = bytemuck::cast_slice_mut::<T, u8>(dst);
    let (a, b) = (
        bytemuck::cast_slice::<T, u8>(first),
        bytemuck::cast_slice::<T, u8>(second),
    );
    assert!(
        dst.len() == 112 && a.len() == 56 && b.len() == 56 && (dst.as_ptr() as usize).is_multiple_of(16),
        "two lines of 56 bytes into 112 bytes of 16-byte aligned memory"
    );
    let to = dst.as_mut_ptr();
    // SAFETY: every load reads bytes inside `a` or `b` (0..48 and 48..56 of `a`, 0..8 and
    // 8..56 of `b`), every store 16 bytes inside `dst` at a multiple of 16, as checked.
    unsafe {
        for i in (0..48).step_by(16) {
            _mm_stream_si128(to.add(i).cast(), _mm_loadu_si128(a.as_ptr().add(i).cast()));
            _mm_stream_si128(
                to.add(64 + i).cast(),
                _mm_loadu_si128(b.as_ptr().add(8 + i).cast()),
            );
        }
        let (end, start) = (
            _mm_loadl_epi64(a.as_ptr().add(48).cast()),
            _mm_loadl_epi64(b.as_ptr().cast()),
        );
        _mm_stream_si128(to.add(48).cast(), _mm_unpacklo_epi64(end, start));
    }
}

/// Copies `src` into `dst` (of the same length) with SSE2's streaming stores for its
/// 16-byte aligned part and ordinary ones for the ends: rows of any length at any offset.
/// The caller [`fence`]s before the output is read.
///
/// # Panics
/// `dst` and `src` differ in length.
pub(crate) fn stream_copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "dst and src of one length");
    let head = dst.as_ptr().align_offset(16).min(dst.len());
    let body = (dst.len() - head) / 16 * 16;
    dst[..head].copy_from_slice(&src[..head]);
    for i in (head..head + body).step_by(16) {
        // SAFETY: bytes i..i + 16 lie inside both slices (i + 16 <= head + body <= len), and
        // `dst`'s are 16-byte aligned from `head` on.
        unsafe {
            _mm_stream_si128(
                dst.as_mut_ptr().add(i).cast(),
                _mm_loadu_si128(src.as_ptr().add(i).cast()),
            );
        }
    }
    dst[head + body..].copy_from_slice(&src[head + body..]);
}

/// Orders the streaming stores made so far before later stores (SSE's `sfence`).
pub(crate) fn fence() {
    // SAFETY: SSE is part of x86-64.
    unsafe { _mm_sfence() };
}

/// Whether [`Lines`] can run on this CPU.
pub(crate) fn detected() -> bool {
    is_x86_feature_detected!("avx512f")
}

/// Per count `n` of values carried: lane `i` of the merge takes the carried value `i`
/// for `i < n`, else value `i - n` of the new line (indices 16.. name the second operand).
const MERGE: [[u32; 16]; 16] = {
    let mut index = [[0u32; 16]; 16];
    let mut n = 0;
    while n < 16 {
        let mut i = 0;
        while i < 16 {
            index[n][i] = if i < n { i as u32 } else { (16 + i - n) as u32 };
            i += 1;
        }
        n += 1;
    }
    index
};

/// Per count `s` of a line's values already written: lane `i` takes value `i + s`
/// (lanes past the line's end hold values that are never written).
const REST: [[u32; 16]; 17] = {
    let mut index = [[0u32; 16]; 17];
    let mut s = 0;
    while s <= 16 {
        let mut i = 0;
        while i < 16 {
            index[s][i] = ((i + s) % 16) as u32;
            i += 1;
        }
        s += 1;
    }
    index
};

/// A sequential writer of 4-byte values into one buffer: each aligned 64-byte chunk
/// the values fill is streamed once; the partial chunks at the two ends of the buffer
/// are written with masked ordinary stores. Must be [`Lines::finish`]ed.
pub(crate) struct Lines<'a> {
    out: &'a mut [u32],
    /// Index in `out` of the next value.
    at: usize,
    /// Values not yet stored, lanes `0..carried` of `carry`: those of `out[at -
    /// carried..at]`, from the start of an aligned chunk.
    carry: __m512i,
    carried: usize,
    /// Lanes of the first chunk before `out`'s start (carried but never stored), until
    /// that chunk is stored.
    skip: usize,
}

impl<'a> Lines<'a> {
    /// A writer that fills `out` from its start.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn new(out: &'a mut [u32]) -> Lines<'a> {
        let skip = (out.as_ptr() as usize / 4) % 16;
        Lines {
            out,
            at: 0,
            carry: _mm512_setzero_si512(),
            carried: skip,
            skip,
        }
    }

    /// Appends `line`, at most 16 values.
    ///
    /// # Panics
    /// `line` is longer, or runs past the end of the output.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) unsafe fn push(&mut self, line: &[u32]) {
        let p = line.len();
        assert!(p <= 16, "a line of at most 16 values");
        // SAFETY: the mask reads the line's `p` values; the caller guarantees AVX-512F.
        unsafe {
            let v = _mm512_maskz_loadu_epi32(((1u32 << p) - 1) as u16, line.as_ptr().cast());
            self.push_vector(v, p);
        }
    }

    /// Appends the first `p` (at most 16) values of `v`.
    ///
    /// # Panics
    /// `p` is larger, or the values run past the end of the output.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) unsafe fn push_vector(&mut self, v: __m512i, p: usize) {
        let n = self.carried;
        assert!(
            p <= 16 && self.at + p <= self.out.len(),
            "a line of at most 16 values inside the output"
        );
        let merged = _mm512_permutex2var_epi32(self.carry, index(&MERGE[n]), v);
        self.at += p;
        if n + p < 16 {
            self.carry = merged;
            self.carried = n + p;
            return;
        }
        // The chunk out[at - p - n..][..16]; its first `skip` lanes lie before `out`.
        let chunk = self.out.as_mut_ptr().wrapping_add(self.at - p).wrapping_sub(n);
        // SAFETY: the chunk ends inside `out` (at - p - n + 16 <= at), and starts inside
        // it past the `skip` masked-off lanes; a chunk stored in full is 64-byte aligned.
        unsafe {
            if self.skip > 0 {
                _mm512_mask_storeu_epi32(chunk.cast(), u16::MAX << self.skip, merged);
                self.skip = 0;
            } else {
                _mm512_stream_si512(chunk.cast(), merged);
            }
            self.carry = _mm512_permutexvar_epi32(index(&REST[16 - n]), v);
        }
        self.carried = n + p - 16;
    }

    /// Stores the carried values and orders the streamed stores before later ones.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn finish(self) {
        let n = self.carried;
        let keep = ((1u32 << n) - 1) as u16 & (u16::MAX << self.skip);
        let chunk = self.out.as_mut_ptr().wrapping_add(self.at).wrapping_sub(n);
        // SAFETY: lanes skip..n are out[at - n + skip..at].
        unsafe { _mm512_mask_storeu_epi32(chunk.cast(), keep, self.carry) };
        _mm_sfence();
    }
}

/// A table of 16 lane indices as a vector.
#[target_feature(enable = "avx512f")]
#[inline]
fn index(lanes: &[u32; 16]) -> __m512i {
    // SAFETY: 64 bytes, read unaligned.
    unsafe { lanes.as_ptr().cast::<__m512i>().read_unaligned() }
}

#[cfg(test)]
mod tests {
    use super::{detected, Lines};
    use crate::testing::Rng;

    /// Lines of `lens` values pushed into `len` values starting `start` values into a
    /// buffer with guard values around them: the same values as copying the lines in
    /// order, and the guards untouched.
    fn check(start: usize, len: usize, lens: &mut dyn Iterator<Item = usize>) {
        const GUARD: u32 = 0xdead_beef;
        let mut buffer = vec![GUARD; start + len + 32];
        let source: Vec<u32> = (0..len as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
        let mut lines = Vec::new();
        let mut at = 0;
        while at < len {
            let p = lens.next().expect("a line length").min(len - at);
            lines.push(&source[at..at + p]);
            at += p;
        }
        // SAFETY: only where the CPU has AVX-512F.
        unsafe {
            let mut writer = Lines::new(&mut buffer[start..start + len]);
            for line in &lines {
                writer.push(line);
            }
            writer.finish();
        }
        assert!(
            buffer[..start].iter().all(|&v| v == GUARD),
            "start {start} len {len}"
        );
        assert_eq!(buffer[start..start + len], source[..], "start {start} len {len}");
        assert!(
            buffer[start + len..].iter().all(|&v| v == GUARD),
            "start {start} len {len}"
        );
    }

    #[test]
    fn lines_land_in_order_at_every_alignment() {
        if !detected() {
            return;
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for start in 0..16 {
            for len in [0, 1, 5, 15, 16, 17, 31, 33, 14 * 6, 16 * 9, 1000] {
                for p in [1, 3, 14, 15, 16] {
                    check(start, len, &mut std::iter::repeat(p));
                }
                check(start, len, &mut std::iter::from_fn(|| Some(rng.below(17))));
            }
        }
    }

    #[test]
    fn a_line_past_the_end_panics() {
        if !detected() {
            return;
        }
        let result = std::panic::catch_unwind(|| {
            let mut out = vec![0u32; 20];
            // SAFETY: AVX-512F was detected.
            unsafe {
                let mut writer = Lines::new(&mut out);
                writer.push(&[1; 16]);
                writer.push(&[2; 5]);
            }
        });
        assert!(result.is_err());
    }
}
