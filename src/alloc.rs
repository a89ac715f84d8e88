//! Large buffers: zeroed by the allocator, offered huge pages, and an error instead of an
//! abort when memory runs out; and a small pool of freed output buffers, reused.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, TryLockError};

use crate::error::TransformError;

/// A zeroed buffer of `len` values, or [`TransformError::OutOfMemory`] naming `arg`
/// (a plain `vec!` aborts the process when the allocation fails).
///
/// Zeroed by the allocator (`calloc`), which takes fresh pages from the OS already
/// zero, where `vec.resize(len, 0)` would write every byte once more before the
/// kernel writes it again. Large buffers are also offered transparent huge pages.
///
/// # Errors
/// The byte count overflows or the allocator cannot provide it.
pub fn zeroed<T: bytemuck::Zeroable>(arg: &'static str, len: usize) -> Result<Vec<T>, TransformError> {
    let oom = || TransformError::OutOfMemory {
        arg,
        bytes: len.saturating_mul(size_of::<T>()),
    };
    let layout = std::alloc::Layout::array::<T>(len).map_err(|_| oom())?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the layout has a non-zero size; a non-null pointer from the global
    // allocator with exactly this layout, all bytes zero (a valid `T` by `Zeroable`),
    // is what a `Box<[T]>` of `len` values requires.
    unsafe {
        let raw = std::alloc::alloc_zeroed(layout);
        if raw.is_null() {
            return Err(oom());
        }
        let _ = advise_huge_pages(raw, layout.size());
        #[allow(clippy::cast_ptr_alignment, reason = "the layout is T's, so is its alignment")]
        let ptr = raw.cast::<T>();
        Ok(Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)).into_vec())
    }
}

/// An empty vector with room for `len` values, or [`TransformError::OutOfMemory`] naming
/// `arg`: tables and copies sized by the caller's arguments grow no further than that, where
/// growing a plain `Vec` past what the allocator gives aborts the process.
///
/// # Errors
/// The allocator cannot provide `len` values.
pub fn with_capacity<T>(arg: &'static str, len: usize) -> Result<Vec<T>, TransformError> {
    let mut values = Vec::new();
    values
        .try_reserve_exact(len)
        .map_err(|_| TransformError::OutOfMemory {
            arg,
            bytes: len.saturating_mul(size_of::<T>()),
        })?;
    Ok(values)
}

/// Asks Linux to back the 2 MiB-aligned interior of a fresh buffer with huge pages, and
/// returns the bytes it was asked for (0 when none, or when the advice was refused).
///
/// Outputs are written once, straight after allocation, so their first-touch page
/// faults are a large share of the work: 4 KiB pages cost a fault per 1024 float32
/// values. Only advice: where transparent huge pages are off, nothing changes.
#[cfg(target_os = "linux")]
#[must_use]
pub fn advise_huge_pages(ptr: *const u8, size: usize) -> usize {
    const HUGE: usize = 2 << 20;
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize + size) / HUGE * HUGE;
    if end <= start {
        return 0;
    }
    // SAFETY: [start, end) lies inside an allocation the caller holds; MADV_HUGEPAGE
    // changes how it is backed, never its contents.
    let refused = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    if refused == 0 {
        end - start
    } else {
        0
    }
}

/// Asks nothing where transparent huge pages do not exist.
#[cfg(not(target_os = "linux"))]
#[must_use]
pub fn advise_huge_pages(_ptr: *const u8, _size: usize) -> usize {
    0
}

/// A freed output buffer of one of the output element types.
#[derive(Debug)]
pub enum Buffer {
    /// float32 values.
    F32(Vec<f32>),
    /// bfloat16 or float16 bits.
    U16(Vec<u16>),
    /// uint8 pixels.
    U8(Vec<u8>),
    /// int64 attention masks.
    I64(Vec<i64>),
}

impl Buffer {
    fn bytes(&self) -> usize {
        match self {
            Buffer::F32(v) => v.capacity() * 4,
            Buffer::U16(v) => v.capacity() * 2,
            Buffer::U8(v) => v.capacity(),
            Buffer::I64(v) => v.capacity() * 8,
        }
    }
}

/// An output element type the pool keeps buffers of.
pub trait Pooled: bytemuck::Zeroable + Copy + Sized {
    /// `values` as a pooled buffer.
    fn into_buffer(values: Vec<Self>) -> Buffer;
    /// The values of `buffer` if it holds this type.
    fn from_buffer(buffer: &mut Buffer) -> Option<&mut Vec<Self>>;
}

macro_rules! pooled {
    ($t:ty, $variant:ident) => {
        impl Pooled for $t {
            fn into_buffer(values: Vec<Self>) -> Buffer {
                Buffer::$variant(values)
            }
            fn from_buffer(buffer: &mut Buffer) -> Option<&mut Vec<Self>> {
                match buffer {
                    Buffer::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}
pooled!(f32, F32);
pooled!(u16, U16);
pooled!(u8, U8);
pooled!(i64, I64);

/// Outputs under this size are not pooled: the allocator serves them cheaply.
pub const POOL_MIN_BYTES: usize = 1 << 20;
/// Scratch buffers (see [`scratch`]) under this size are not pooled.
const SCRATCH_MIN_BYTES: usize = 64 << 10;
/// At most this many freed outputs and scratch buffers are kept (a call's output and the
/// buffers of each image's resizes, for a batch of 16 images) ...
const POOL_BUFFERS: usize = 32;
/// ... holding at most [`pool_limit`] bytes, by default this many: room for one 12 MP
/// Qwen output (292 MB), which a call then reuses instead of zeroing fresh pages (Qwen2.5-VL
/// torchvision at 4032x3024: 139-150 ms a call with 256 MB, 41-45 ms with 512 MB).
const DEFAULT_POOL_BYTES: usize = 512 << 20;
static POOL_BYTES: AtomicUsize = AtomicUsize::new(DEFAULT_POOL_BYTES);

/// The bytes of freed buffers the pool may hold.
#[must_use]
fn pool_limit() -> usize {
    POOL_BYTES.load(Ordering::SeqCst)
}

/// Lets the pool hold up to `bytes` of freed buffers (0 keeps none), and frees what it holds
/// past that. A buffer larger than the limit is never kept: a batch whose output is larger
/// than the limit gets fresh memory, and its page faults, on every call.
pub fn set_pool_limit(bytes: usize) {
    POOL_BYTES.store(bytes, Ordering::SeqCst);
    // Where the pool is busy now, the next buffer given back evicts ([`recycle`]).
    EVICT_PENDING.store(true, Ordering::SeqCst);
    // Freed outside the lock.
    drop(with_pool(evict));
}

/// Set by a new limit until an eviction has run under it.
static EVICT_PENDING: AtomicBool = AtomicBool::new(false);

/// Takes the oldest buffers out of `pool` until it is within its bounds.
fn evict(pool: &mut Vec<Buffer>) -> Vec<Buffer> {
    EVICT_PENDING.store(false, Ordering::SeqCst);
    let mut evicted = Vec::new();
    while pool.len() > POOL_BUFFERS || pool.iter().map(Buffer::bytes).sum::<usize>() > pool_limit() {
        evicted.push(pool.remove(0));
    }
    evicted
}

/// Freed outputs, newest last, and the process that owns them.
static POOL: Mutex<(u32, Vec<Buffer>)> = Mutex::new((0, Vec::new()));

/// Runs `f` on this process's pool, or returns `None` when the pool is busy or its lock
/// was left taken (never waits: a child forked while another thread held the lock must
/// not block, it only does without the pool).
fn with_pool<R>(f: impl FnOnce(&mut Vec<Buffer>) -> R) -> Option<R> {
    let mut guard = match POOL.try_lock() {
        Ok(guard) => guard,
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(TryLockError::WouldBlock) => return None,
    };
    let pid = std::process::id();
    if guard.0 != pid {
        // A forked child: its copy of the parent's buffers is its own memory, so dropping
        // them is safe, but they are no use to it.
        *guard = (pid, Vec::new());
    }
    Some(f(&mut guard.1))
}

/// A buffer of `len` values for an output, and whether it is all zeros.
///
/// Outputs of [`POOL_MIN_BYTES`] or more come from the pool of freed outputs when one
/// there has room for `len` values without wasting more than a quarter of it; it then still
/// holds its last values (`false`), which the caller overwrites or zeroes. Otherwise the
/// buffer is [`zeroed`] (`true`). Reusing a buffer saves the zeroing a fresh allocation
/// costs (a `memset`, or page faults for buffers glibc maps fresh each time, over 32 MB)
/// wherever the output is written in full.
///
/// # Errors
/// As [`zeroed`].
pub fn output<T: Pooled>(arg: &'static str, len: usize) -> Result<(Vec<T>, bool), TransformError> {
    take(arg, len, POOL_MIN_BYTES)
}

/// Where the cache lines of an output's memory are before a kernel writes it, which decides
/// whether a large patch output is streamed to memory (see `transforms::normalize_to_patches`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// A fresh buffer whose lines are in the cache, or come into it as they are first
    /// written: ordinary stores then write them once. Streaming stores would first write
    /// the zeroed lines back to memory, then their own.
    Fresh,
    /// Lines most likely out of the cache: a freed output from the pool (a server holds its
    /// outputs until the model reads them), or a fresh buffer zeroed past the cache. Large
    /// outputs are streamed, as ordinary stores would read every line first. One freed at
    /// once is still in the cache, but ordinary stores into it took as long (each buffer's
    /// last write and free tracked, 640x480 on the Zen 4 VM: Qwen3-VL 0.296 against 0.299 ms
    /// streamed, Qwen2-VL 0.624 against 0.628 ms): the gather and the lookup bound the call.
    Used,
}

impl Memory {
    /// The memory of an output of `bytes` bytes that [`output`] gave, `zeroed` or not.
    ///
    /// A fresh buffer of less than 16 MiB (half the 32 MB last-level cache of the EPYCs this
    /// was measured on) was zeroed by `calloc` just now and is still in it, or is fresh
    /// pages. With glibc's malloc, one larger than its largest mapping threshold (32 MiB on
    /// 64-bit) is always a fresh mapping, each page zeroed by the kernel as it is first
    /// written, so in cache when written. Between the two, glibc may serve it from its heap
    /// and zero it with a `memset` that leaves its lines in memory. (Other allocators and
    /// caches only change the speed, never the values.)
    ///
    /// On a 2-vCPU Zen 4 EPYC (32 MB L3), fresh outputs (pool of 0 MB, one thread), Qwen3-VL
    /// with ordinary stores against streamed: 0.49 -> 0.40 ms at 640x480 (7.4 MB), 1.37 ->
    /// 1.30-1.35 ms at 816x612 (12 MB), 1.82 -> 2.21-2.37 ms at 1056x792 (20 MB) and 2.63-2.75
    /// -> 3.30-3.68 ms at 1248x936 (28 MB), then 5.54-5.82 -> 4.75-4.90 ms at 1408x1056
    /// (36 MB) and 51 -> 46 ms at 4032x3024 (291 MB). Qwen2-VL: 1.00 -> 0.83 ms at 640x480,
    /// 41.3-41.5 -> 39.1-39.2 ms at 4032x3024.
    #[must_use]
    pub fn of(bytes: usize, zeroed: bool) -> Memory {
        if zeroed && !(HEAP_ZEROED_BYTES..=MAPPED_PAST_BYTES).contains(&bytes) {
            Memory::Fresh
        } else {
            Memory::Used
        }
    }
}

/// See [`Memory::of`]: fresh buffers from this size ...
const HEAP_ZEROED_BYTES: usize = 16 << 20;
/// ... up to this one may come zeroed out of the cache (glibc's `DEFAULT_MMAP_THRESHOLD_MAX`).
const MAPPED_PAST_BYTES: usize = 32 << 20;

/// A buffer of `len` bytes for pixels that its user writes in full before reading any (a
/// resize's output or band): a freed one from the pool when one fits, still holding its
/// old bytes, else a zeroed one. Reusing it saves the `memset` (or the page faults) a
/// fresh allocation costs on every call; give it back with [`recycle`].
///
/// # Errors
/// As [`zeroed`].
pub fn scratch(arg: &'static str, len: usize) -> Result<Vec<u8>, TransformError> {
    take(arg, len, SCRATCH_MIN_BYTES).map(|(values, _)| values)
}

/// [`output`] with buffers of `min_bytes` or more taken from the pool.
fn take<T: Pooled>(
    arg: &'static str,
    len: usize,
    min_bytes: usize,
) -> Result<(Vec<T>, bool), TransformError> {
    if len.saturating_mul(size_of::<T>()) >= min_bytes {
        let fits = |b: &mut Buffer| {
            T::from_buffer(b).is_some_and(|v| v.capacity() >= len && v.capacity() - len <= len / 4)
        };
        let taken = with_pool(|pool| {
            let i = pool.iter_mut().rposition(fits)?;
            Some(pool.remove(i))
        })
        .flatten();
        if let Some(values) = taken.and_then(|mut b| T::from_buffer(&mut b).map(std::mem::take)) {
            let mut values = values;
            // Within the capacity: no reallocation, only the values past the old length.
            values.resize(len, T::zeroed());
            return Ok((values, false));
        }
    }
    Ok((zeroed(arg, len)?, true))
}

/// Gives a freed output or scratch buffer back to the pool (dropped instead when it is
/// small, the pool is busy, or it would hold too much; the oldest buffers go first). Also
/// evicts for a limit lowered while the pool was busy.
pub fn recycle(buffer: Buffer) {
    let bytes = buffer.bytes();
    if !(SCRATCH_MIN_BYTES..=pool_limit()).contains(&bytes) {
        drop(buffer);
        if EVICT_PENDING.load(Ordering::SeqCst) {
            drop(with_pool(evict));
        }
        return;
    }
    let evicted = with_pool(|pool| {
        pool.push(buffer);
        evict(pool)
    });
    // Freed outside the lock.
    drop(evicted);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_hands_back_freed_outputs_of_a_fitting_size() {
        let len = POOL_MIN_BYTES / 4 + 1000;
        let (mut a, fresh) = output::<f32>("x", len).unwrap();
        assert!(fresh && a.iter().all(|&v| v.to_bits() == 0));
        a.fill(7.0);
        let ptr = a.as_ptr();
        recycle(f32::into_buffer(a));
        // Another type, or a size too small or too large for it, gets a fresh buffer.
        assert!(output::<u16>("x", len * 2).unwrap().1);
        assert!(output::<f32>("x", len * 2).unwrap().1);
        assert!(output::<f32>("x", len / 2).unwrap().1);
        // A little smaller: the same memory, its old values kept.
        let (b, fresh) = output::<f32>("x", len - 10).unwrap();
        assert!(
            !fresh
                && b.as_ptr() == ptr
                && b.len() == len - 10
                && b.iter().all(|&v| v.to_bits() == 7f32.to_bits())
        );
        recycle(f32::into_buffer(b));
        // Larger, within the capacity: the new tail is zero.
        let (c, fresh) = output::<f32>("x", len).unwrap();
        assert!(!fresh && c.as_ptr() == ptr && c[len - 10..].iter().all(|&v| v.to_bits() == 0));
        // Small outputs are never kept; the pool holds at most POOL_BUFFERS.
        recycle(u8::into_buffer(vec![1; 100]));
        assert!(output::<u8>("x", 100).unwrap().1);
        for _ in 0..POOL_BUFFERS + 2 {
            recycle(u8::into_buffer(vec![1; POOL_MIN_BYTES]));
        }
        assert!(with_pool(|pool| pool.len()).unwrap() <= POOL_BUFFERS);
        // A limit of 0 empties the pool and keeps nothing; a larger one keeps buffers again.
        set_pool_limit(0);
        assert_eq!(with_pool(|pool| pool.len()), Some(0));
        recycle(u8::into_buffer(vec![1; POOL_MIN_BYTES]));
        assert!(output::<u8>("x", POOL_MIN_BYTES).unwrap().1);
        set_pool_limit(DEFAULT_POOL_BYTES);
        recycle(u8::into_buffer(vec![1; POOL_MIN_BYTES]));
        assert!(!output::<u8>("x", POOL_MIN_BYTES).unwrap().1);
        // A limit lowered while the pool is busy evicts at the next buffer given back, even
        // one the new limit does not keep (0 kept what it held for good).
        recycle(u8::into_buffer(vec![1; POOL_MIN_BYTES]));
        {
            let _busy = POOL.lock().unwrap();
            set_pool_limit(0);
        }
        recycle(u8::into_buffer(vec![1; 100]));
        assert_eq!(with_pool(|pool| pool.len()), Some(0));
        set_pool_limit(DEFAULT_POOL_BYTES);
    }

    #[test]
    fn zeroed_buffers_and_refusals() {
        assert_eq!(zeroed::<f32>("x", 5).unwrap(), vec![0.0; 5]);
        assert!(zeroed::<u8>("x", 0).unwrap().is_empty());
        // Fuzz-style sizes the allocator cannot give: an error, never an abort.
        for len in [usize::MAX, isize::MAX as usize, 1 << 60] {
            let err = zeroed::<u8>("jobs", len).unwrap_err();
            assert!(
                matches!(err, TransformError::OutOfMemory { arg: "jobs", .. }),
                "{err}"
            );
        }
    }

    #[test]
    fn fresh_memory_is_told_apart_from_memory_zeroed_out_of_cache() {
        // Fresh below half the cache and past glibc's mapping threshold; a pooled buffer
        // (not zeroed) never.
        for (mb, want) in [
            (1, Memory::Fresh),
            (15, Memory::Fresh),
            (16, Memory::Used),
            (32, Memory::Used),
            (33, Memory::Fresh),
            (1300, Memory::Fresh),
        ] {
            assert_eq!(Memory::of(mb << 20, true), want, "{mb} MB");
            assert_eq!(Memory::of(mb << 20, false), Memory::Used, "{mb} MB");
        }
    }
}
