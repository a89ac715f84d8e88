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
    _mm512_setzero_si512, _mm512_stream_si512, _mm_loadl_epi64, _mm_loadu_si128, _mm_sfence,
    _mm_stream_si128, _mm_unpacklo_epi64,
};

/// Outputs smaller than this are written with ordinary stores: they are fresh zeroed
/// allocations (see [`crate::alloc::output`]), whose lines the zeroing has just brought into
/// the cache. Larger ones mostly come from the pool of freed outputs, where streaming wins
/// (fresh ones whose lines are in the cache are not streamed: see [`crate::alloc::Memory`]): at
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

/// Outputs at least this large (half a 32 MB last-level cache: beside the image and its
/// resized copy, more than stays in it) are streamed by the table lookup of channel-last
/// patches, and Phi-4-multimodal's crops are written with its global view (see
/// `pipeline::streamed`). On a 2-vCPU Zen 5 EPYC (32 MB L3) streaming took Inkling's 50 MB output at
/// 1920x1080 from 6.8 to 3.5 ms a call and its 295 MB at 12 MP from 39.9 to 25.3 ms, but its
/// 7.8 MB at 640x480 from 0.32 to 0.40 ms and Gemma 4's 7.7 MB at 1920x1080 from 1.33 to
/// 1.70 ms. On a 2-vCPU Zen 4 EPYC (32 MB L3; 9 interleaved rounds) it took the outputs of
/// 21-27 MB that a threshold of 32 MB left to ordinary stores faster too: Cosmos3 Edge's
/// 24 MB at 1920x1080 4.25 -> 3.24 ms (torchvision, array) and 4.54 -> 3.99 ms (PIL image,
/// Pillow backend), LFM2-VL's 27 MB 4.95 -> 4.65 ms and its 21 MB at 12 MP 11.42 -> 11.22 ms.
pub(crate) const STREAM_PAST_CACHE_BYTES: usize = 16 << 20;

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

/// A sequential writer of lines of `P` 4-byte values (1 to 16) into one buffer: each
/// aligned 64-byte chunk the lines fill is streamed once; the partial chunks at the two ends
/// of the buffer are written with masked ordinary stores. Must be [`Lines::finish`]ed.
///
/// A chunk is one permute of the values carried and the new line; what the chunk leaves of
/// the line stays where it is, in the line's own vector, and is carried as it is. Moving it
/// down took a second permute a line: on a 2-vCPU Zen 5 EPYC, patch lines of 14 values
/// (Qwen2.5-VL at 640x480, GLM-5.3-Flash and Kimi-K2.5 at 1920x1080) took 4-8% longer a
/// call so. The line length is a constant: for 16 values the count carried then is one
/// too, and the merge is chosen once (with the length a run-time value, Qwen3-VL's call
/// took 16-35% longer).
pub(crate) struct Lines<'a, const P: usize> {
    out: &'a mut [u32],
    /// Index in `out` of the next value.
    at: usize,
    /// The values of `out[at - carried..at]` not yet stored: lanes `0..carried` of `carry`
    /// when `carried >= P` (lines that completed no chunk, merged), else the last `carried`
    /// of the last line's values, lanes `P - carried..P`.
    carry: __m512i,
    carried: usize,
    /// Lanes of the first chunk before `out`'s start (carried but never stored), until
    /// that chunk is stored.
    skip: usize,
}

impl<'a, const P: usize> Lines<'a, P> {
    /// Per count `n` of values carried, the lanes of `carry` and of the new line (indices
    /// 16..) that make the next chunk.
    const MERGE: [[u32; 16]; 16] = {
        assert!(P >= 1 && P <= 16, "lines of 1 to 16 values");
        let mut index = [[0u32; 16]; 16];
        let mut n = 0;
        while n < 16 {
            let from = P.saturating_sub(n);
            let mut i = 0;
            while i < 16 {
                index[n][i] = (if i < n { from + i } else { 16 + i - n }) as u32;
                i += 1;
            }
            n += 1;
        }
        index
    };

    /// A writer that fills `out` from its start.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn new(out: &'a mut [u32]) -> Lines<'a, P> {
        let skip = (out.as_ptr() as usize / 4) % 16;
        Lines {
            out,
            at: 0,
            carry: _mm512_setzero_si512(),
            carried: skip,
            skip,
        }
    }

    /// Appends `line`, of `P` values.
    ///
    /// # Panics
    /// `line` is of another length, or runs past the end of the output.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) unsafe fn push(&mut self, line: &[u32]) {
        assert_eq!(line.len(), P, "a line of the writer's length");
        // SAFETY: the mask reads the line's `P` values; the caller guarantees AVX-512F.
        unsafe {
            let v = _mm512_maskz_loadu_epi32(((1u32 << P) - 1) as u16, line.as_ptr().cast());
            self.push_vector(v);
        }
    }

    /// Appends the first `P` values of `v`.
    ///
    /// # Panics
    /// The values run past the end of the output.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) unsafe fn push_vector(&mut self, v: __m512i) {
        let n = self.carried;
        assert!(self.at + P <= self.out.len(), "a line inside the output");
        let merged = _mm512_permutex2var_epi32(self.carry, index(&Self::MERGE[n]), v);
        self.at += P;
        if n + P < 16 {
            self.carry = merged;
            self.carried = n + P;
            return;
        }
        // The chunk out[at - P - n..][..16]; its first `skip` lanes lie before `out`.
        let chunk = self.out.as_mut_ptr().wrapping_add(self.at - P).wrapping_sub(n);
        // SAFETY: the chunk ends inside `out` (at - P - n + 16 <= at), and starts inside
        // it past the `skip` masked-off lanes; a chunk stored in full is 64-byte aligned.
        unsafe {
            if self.skip > 0 {
                _mm512_mask_storeu_epi32(chunk.cast(), u16::MAX << self.skip, merged);
                self.skip = 0;
            } else {
                _mm512_stream_si512(chunk.cast(), merged);
            }
        }
        self.carry = v;
        self.carried = n + P - 16;
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
        // SAFETY: lanes skip..n of the carried values, brought to the front, are
        // out[at - n + skip..at].
        unsafe {
            let values =
                _mm512_permutex2var_epi32(self.carry, index(&Self::MERGE[n]), _mm512_setzero_si512());
            _mm512_mask_storeu_epi32(chunk.cast(), keep, values);
        }
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

    /// `count` lines of `P` values pushed into a buffer, `start` values after a start
    /// aligned to 64 bytes, with guard values around them: the same values as copying the
    /// lines in order, and the guards untouched.
    fn check<const P: usize>(start: usize, count: usize) {
        const GUARD: u32 = 0xdead_beef;
        let len = P * count;
        let mut buffer = vec![GUARD; start + len + 48];
        let first = buffer.as_ptr().align_offset(64);
        let source: Vec<u32> = (0..len as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
        // SAFETY: only where the CPU has AVX-512F.
        unsafe {
            let mut writer = Lines::<P>::new(&mut buffer[first + start..first + start + len]);
            for line in source.chunks_exact(P) {
                writer.push(line);
            }
            writer.finish();
        }
        let at = first + start;
        let what = format!("start {start} p {P} count {count}");
        assert!(buffer[..at].iter().all(|&v| v == GUARD), "{what}");
        assert_eq!(buffer[at..at + len], source[..], "{what}");
        assert!(buffer[at + len..].iter().all(|&v| v == GUARD), "{what}");
    }

    #[test]
    fn lines_land_in_order_at_every_alignment() {
        if !detected() {
            return;
        }
        for start in 0..16 {
            for count in [0, 1, 2, 3, 7, 8, 9, 17, 70] {
                check::<1>(start, count);
                check::<3>(start, count);
                check::<7>(start, count);
                check::<13>(start, count);
                check::<14>(start, count);
                check::<15>(start, count);
                check::<16>(start, count);
            }
        }
    }

    #[test]
    fn a_line_past_the_end_or_of_another_length_panics() {
        if !detected() {
            return;
        }
        for (len, lines) in [(20, [16, 16]), (40, [16, 5])] {
            let result = std::panic::catch_unwind(|| {
                let mut out = vec![0u32; len];
                // SAFETY: AVX-512F was detected.
                unsafe {
                    let mut writer = Lines::<16>::new(&mut out);
                    for p in lines {
                        writer.push(&vec![1; p]);
                    }
                }
            });
            assert!(result.is_err(), "{lines:?} into {len}");
        }
    }
}
