//! Large buffers: zeroed by the allocator, offered huge pages, and an error instead of an
//! abort when memory runs out.

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
        advise_huge_pages(raw, layout.size());
        #[allow(clippy::cast_ptr_alignment, reason = "the layout is T's, so is its alignment")]
        let ptr = raw.cast::<T>();
        Ok(Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)).into_vec())
    }
}

/// Asks Linux to back the 2 MiB-aligned interior of a fresh buffer with huge pages.
///
/// Outputs are written once, straight after allocation, so their first-touch page
/// faults are a large share of the work: 4 KiB pages cost a fault per 1024 float32
/// values. Only advice: where transparent huge pages are off, nothing changes.
#[cfg(target_os = "linux")]
pub fn advise_huge_pages(ptr: *mut u8, size: usize) {
    const HUGE: usize = 2 << 20;
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize + size) / HUGE * HUGE;
    if end > start {
        // SAFETY: [start, end) lies inside an allocation the caller owns; MADV_HUGEPAGE
        // changes how it is backed, never its contents.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

/// Asks nothing where transparent huge pages do not exist.
#[cfg(not(target_os = "linux"))]
pub fn advise_huge_pages(_ptr: *mut u8, _size: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

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
}
