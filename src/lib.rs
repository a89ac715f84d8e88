//! mmfast: image → tensor kernels for vision-language models, bit-exact with
//! transformers and Pillow.
//!
//! The kernels live in pure-Rust modules; this file holds only the `PyO3` bindings
//! (`mmfast._native`), compiled with the `python` feature.

mod affine;
pub mod alloc;
mod cache;
pub mod decode;
pub mod error;
pub mod image;
mod lookup;
pub mod pipeline;
pub mod resize;
#[cfg(target_arch = "x86_64")]
mod stream;
#[cfg(test)]
mod testing;
pub mod torch_float;
pub mod torch_resize;
pub mod transforms;
pub mod workers;

#[cfg(feature = "python")]
impl From<error::TransformError> for pyo3::PyErr {
    fn from(err: error::TransformError) -> Self {
        match err {
            error::TransformError::OutOfMemory { .. } => {
                pyo3::exceptions::PyMemoryError::new_err(err.to_string())
            }
            _ => _native::MmfastError::new_err(err.to_string()),
        }
    }
}

/// The compiled core behind the `mmfast` package. Validation and allocation happen
/// with the GIL held; all pixel work runs inside one `detach` (GIL released, panics caught).
#[cfg(feature = "python")]
#[pyo3::pymodule]
mod _native {
    use std::ffi::{c_char, c_void, CStr};

    use ndarray::{Array, ArrayView, ArrayView3, CowArray, Dimension, Ix3, IxDyn};
    use numpy::{
        IntoPyArray, PyArray1, PyArray3, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
    };
    use pyo3::exceptions::PyMemoryError;
    use pyo3::prelude::*;
    use pyo3::types::{PyBytes, PyCapsule, PyCapsuleMethods};

    use crate::alloc;
    use crate::decode;
    use crate::error::{invalid, TransformError};
    use crate::image::{self, Orientation, Rect};
    use crate::pipeline::{self, Image, Job, Layout, Pad, Resize};
    use crate::resize::{Filter, Source};
    use crate::torch_float::{self, FloatMode};
    use crate::torch_resize::TorchMode;
    use crate::transforms::{self, Normalize, Patches, Window};

    pyo3::import_exception!(mmfast.errors, MmfastError);

    fn fail(arg: &'static str, expected: impl Into<String>, got: impl ToString) -> PyErr {
        invalid(arg, expected, got).into()
    }

    /// The element count of an array of `T` and `shape` that numpy can hold, or an error
    /// naming `shape`: at most 32 dimensions (rust-numpy's limit), and a byte size of the
    /// non-zero sides that fits `isize`, as numpy's byte strides must (even for an empty
    /// array: a (0, 2**61) float32 array would get an overflowed stride and crash).
    fn array_len<T>(shape: &[usize]) -> PyResult<usize> {
        const MAX_NDIM: usize = 32;
        if shape.len() > MAX_NDIM {
            return Err(fail(
                "shape",
                format!("at most {MAX_NDIM} dimensions"),
                format!("{} dimensions", shape.len()),
            ));
        }
        let len = transforms::checked_len("shape", shape)?;
        let extent: usize = shape.iter().filter(|&&d| d != 0).product();
        if extent
            .checked_mul(size_of::<T>())
            .is_none_or(|n| isize::try_from(n).is_err())
        {
            return Err(crate::error::TransformError::Overflow {
                arg: "shape",
                what: format!("the byte size of shape {shape:?}"),
            }
            .into());
        }
        Ok(len)
    }

    /// `work` with the GIL released. A panic in it, which would be a bug in the core,
    /// comes back as `MmfastError` rather than unwinding into Python as `PanicException`.
    fn detach<T: Send>(py: Python<'_>, work: impl FnOnce() -> T + Send) -> PyResult<T> {
        py.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)))
            .map_err(|payload| {
                let what = payload
                    .downcast_ref::<&str>()
                    .map(ToString::to_string)
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                MmfastError::new_err(format!(
                    "internal error in mmfast's core (please report it): {what}"
                ))
            })
    }

    /// What came in, for an error message: dtype and shape of an array, else the type.
    fn describe(obj: &Bound<'_, PyAny>) -> String {
        match obj.cast::<PyUntypedArray>() {
            Ok(arr) => {
                // Python's tuple spelling, as the user wrote the shape.
                let dims: Vec<String> = arr.shape().iter().map(ToString::to_string).collect();
                let trailing = if dims.len() == 1 { "," } else { "" };
                format!(
                    "an array of dtype {} with shape ({}{trailing})",
                    arr.dtype(),
                    dims.join(", ")
                )
            }
            Err(_) => obj
                .get_type()
                .qualname()
                .map_or_else(|_| "an object".to_owned(), |name| name.to_string()),
        }
    }

    /// An (H, W, 3) uint8 image: borrowed in place when C-contiguous, else copied once.
    fn rgb_image<'py>(image: &'py Bound<'py, PyAny>) -> PyResult<CowArray<'py, u8, Ix3>> {
        let expected = "a numpy.ndarray of dtype uint8 and shape (height, width, 3)";
        let arr = image
            .cast::<PyArray3<u8>>()
            .map_err(|_| fail("image", expected, describe(image)))?;
        let shape = arr.shape();
        if shape[2] != 3 || shape[0] == 0 || shape[1] == 0 {
            return Err(fail("image", format!("{expected}, non-empty"), describe(image)));
        }
        // SAFETY: the view lives no longer than `image`, which the caller keeps alive;
        // like every NumPy consumer we rely on the caller not mutating it during the call.
        let view: ArrayView3<'py, u8> = unsafe { arr.as_array() };
        standard_layout("image", view)
    }

    /// `view` in place when C-contiguous, else copied once into a buffer from the fallible
    /// allocator: a strided view (a `np.broadcast_to` result) can stand for far more values
    /// than its memory holds, and `as_standard_layout` aborts when the copy cannot be made.
    fn standard_layout<'a, T: Copy, D: Dimension>(
        arg: &'static str,
        view: ArrayView<'a, T, D>,
    ) -> PyResult<CowArray<'a, T, D>> {
        if view.is_standard_layout() {
            return Ok(view.into());
        }
        let mut values = alloc::with_capacity(arg, view.len())?;
        values.extend(view.iter().copied());
        let owned = Array::from_shape_vec(view.raw_dim(), values).expect("one value per element");
        Ok(owned.into())
    }

    /// `obj` converted to `T`, or an error saying what `arg` expected and what came in.
    fn extract<'py, T: FromPyObjectOwned<'py>>(
        arg: &'static str,
        expected: &str,
        obj: &Bound<'py, PyAny>,
    ) -> PyResult<T> {
        obj.extract().map_err(|_| {
            fail(
                arg,
                expected,
                obj.repr().map_or_else(|_| describe(obj), |r| r.to_string()),
            )
        })
    }

    /// A sequence of three floats, one per RGB channel.
    fn triple(arg: &'static str, obj: &Bound<'_, PyAny>) -> PyResult<[f64; 3]> {
        let values: Vec<f64> = extract(arg, "a sequence of 3 floats (one per RGB channel)", obj)?;
        <[f64; 3]>::try_from(values.as_slice()).map_err(|_| {
            fail(
                arg,
                "3 values (one per RGB channel)",
                format!("{} values", values.len()),
            )
        })
    }

    /// A `(height, width)` pair of non-negative integers.
    fn size_pair(arg: &'static str, obj: &Bound<'_, PyAny>) -> PyResult<(usize, usize)> {
        let pair: Vec<usize> = extract(arg, "a (height, width) pair of non-negative integers", obj)?;
        match pair[..] {
            [h, w] => Ok((h, w)),
            _ => Err(fail(
                arg,
                "a (height, width) pair",
                format!("{} values", pair.len()),
            )),
        }
    }

    /// Allocate ``megabytes`` the way outputs are allocated, touch every page, free them.
    ///
    /// The first writes to memory a process has never used wait while the kernel provides
    /// and zeroes the pages; this pays that once, up front. The GIL is released.
    #[pyfunction]
    fn warmup(py: Python<'_>, megabytes: usize) -> PyResult<()> {
        let len = megabytes
            .checked_mul(1 << 20)
            .ok_or_else(|| fail("megabytes", "a size that fits in memory", megabytes))?;
        let mut buffer = alloc::zeroed::<u8>("megabytes", len)?;
        detach(py, || {
            for page in buffer.chunks_mut(4096) {
                // SAFETY: `page` is a non-empty slice of the buffer, so its first byte is
                // valid for writes; volatile so that the store, and the fault, happen.
                unsafe { std::ptr::write_volatile(page.as_mut_ptr(), 1) };
            }
        })
    }

    /// Resize as the Pillow of major version ``major`` does (mmfast.image passes the installed
    /// one's at import): Pillow 13 changed the order of the two passes.
    #[pyfunction]
    fn follow_pillow(major: u32) {
        crate::resize::follow_pillow(major);
    }

    /// Let the pool of freed output and scratch buffers hold up to ``megabytes`` (0 keeps
    /// none), freeing what it holds past that.
    #[pyfunction]
    fn set_buffer_pool(py: Python<'_>, megabytes: usize) -> PyResult<()> {
        let bytes = megabytes
            .checked_mul(1 << 20)
            .ok_or_else(|| fail("megabytes", "a size that fits in memory", megabytes))?;
        detach(py, || alloc::set_pool_limit(bytes))
    }

    /// Split an HWC uint8 RGB image into normalised CHW float32 planes.
    ///
    /// Each value is ``(float32(float64(x) * rescale_factor) - float32(mean[c])) / float32(std[c])``
    /// computed in float32: bit-identical to transformers' ``rescale`` then ``normalize``.
    /// Defaults rescale by 1/255 and do not normalise.
    ///
    /// ``image`` is an (H, W, 3) uint8 array, read in place when C-contiguous and
    /// copied once otherwise. The work runs with the GIL released; do not mutate
    /// ``image`` from another thread meanwhile. Returns a new (3, H, W) float32 array.
    /// Raises ``MmfastError`` for a wrong dtype, shape or parameter.
    #[pyfunction]
    #[pyo3(
        signature = (image, mean = None, std = None, rescale_factor = None),
        text_signature = "(image, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0), rescale_factor=0.00392156862745098)"
    )]
    fn deinterleave_rgb_to_planes<'py>(
        py: Python<'py>,
        image: &Bound<'py, PyAny>,
        mean: Option<&Bound<'py, PyAny>>,
        std: Option<&Bound<'py, PyAny>>,
        rescale_factor: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let norm = normalize(mean, std, rescale_factor)?;
        let src = rgb_image(image)?;
        let (h, w) = (src.shape()[0], src.shape()[1]);
        // Every value is written: a pooled buffer's old values do not show.
        let (mut out, _) = alloc::output::<f32>("image", 3 * h * w)?;
        let pixels = src.as_slice().expect("standard layout");
        detach(py, || {
            transforms::deinterleave_rgb_to_planes(pixels, (h, w), &norm, &mut out)
        })??;
        into_chw(py, out, (h, w))
    }

    /// Normalise an HWC uint8 RGB image onto a CHW float32 canvas, image at the top-left.
    ///
    /// ``canvas_size`` is ``(height, width)``, at least the image size. Everything
    /// outside the image holds the normalised value of black (pixel value 0). The
    /// tensor is written directly, with no padded intermediate image; the GIL is
    /// released. Input rules and arithmetic as for ``deinterleave_rgb_to_planes``.
    /// Returns a new (3, height, width) float32 array.
    #[pyfunction]
    #[pyo3(
        signature = (image, canvas_size, mean = None, std = None, rescale_factor = None),
        text_signature = "(image, canvas_size, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0), rescale_factor=0.00392156862745098)"
    )]
    fn pad_and_normalize_to_tensor<'py>(
        py: Python<'py>,
        image: &Bound<'py, PyAny>,
        canvas_size: &Bound<'py, PyAny>,
        mean: Option<&Bound<'py, PyAny>>,
        std: Option<&Bound<'py, PyAny>>,
        rescale_factor: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let norm = normalize(mean, std, rescale_factor)?;
        let src = rgb_image(image)?;
        let (h, w) = (src.shape()[0], src.shape()[1]);
        let canvas = size_pair("canvas_size", canvas_size)?;
        if canvas.0 < h || canvas.1 < w {
            return Err(fail(
                "canvas_size",
                format!("at least the image size ({h}, {w})"),
                format!("{canvas:?}"),
            ));
        }
        let len = transforms::checked_len("canvas_size", &[3, canvas.0, canvas.1])?;
        // Every value is written, the margin with black's: a pooled buffer's do not show.
        let (mut out, _) = alloc::output::<f32>("canvas_size", len)?;
        let pixels = src.as_slice().expect("standard layout");
        detach(py, || {
            transforms::pad_and_normalize_to_tensor(pixels, (h, w), canvas, &norm, &mut out)
        })??;
        into_chw(py, out, canvas)
    }

    /// The normalisation tables; `None` means the documented default (rescale by 1/255 only).
    fn normalize(
        mean: Option<&Bound<'_, PyAny>>,
        std: Option<&Bound<'_, PyAny>>,
        rescale_factor: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Normalize> {
        let mean = mean.map_or(Ok([0.0; 3]), |m| triple("mean", m))?;
        let std = std.map_or(Ok([1.0; 3]), |s| triple("std", s))?;
        let rescale = rescale_factor.map_or(Ok(1.0 / 255.0), |r| extract("rescale_factor", "a float", r))?;
        Ok(Normalize::new(mean, std, rescale)?)
    }

    /// `values` as a (3, h, w) array whose memory, once freed, serves a later output (see
    /// [`into_output`]).
    fn into_chw(
        py: Python<'_>,
        values: Vec<f32>,
        (h, w): (usize, usize),
    ) -> PyResult<Bound<'_, PyArrayDyn<f32>>> {
        assert_eq!(values.len(), 3 * h * w, "the kernel filled 3 * h * w values");
        into_output(py, values, &[3, h, w])
    }

    /// Serialise a float32 array to C-order little-endian bytes.
    ///
    /// Equal to ``np.ascontiguousarray(tensor, dtype="<f4").tobytes()``: one copy, made
    /// with the GIL released (non-contiguous input is made contiguous first).
    /// Other dtypes raise ``MmfastError`` rather than being cast silently.
    #[pyfunction]
    fn serialize_pixel_values<'py>(
        py: Python<'py>,
        tensor: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let arr = tensor
            .cast::<PyArrayDyn<f32>>()
            .map_err(|_| fail("tensor", "a numpy.ndarray of dtype float32", describe(tensor)))?;
        // SAFETY: as in `rgb_image`, the view does not outlive `tensor`.
        let values = standard_layout("tensor", unsafe { arr.as_array() })?;
        let bytes = transforms::f32_as_le_bytes(values.as_slice().expect("standard layout"));
        let len = bytes.len();
        let py_len = pyo3::ffi::Py_ssize_t::try_from(len).map_err(|_| {
            PyMemoryError::new_err(format!("tensor: {len} bytes do not fit in a bytes object"))
        })?;
        // SAFETY: `PyBytes_FromStringAndSize(NULL, len)` returns a new bytes object whose
        // `len` bytes are uninitialised and not yet visible to any other code; they are
        // all written below before the object is returned.
        unsafe {
            let ptr = pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), py_len);
            let out = Bound::from_owned_ptr_or_err(py, ptr)?.cast_into_unchecked::<PyBytes>();
            let buf = pyo3::ffi::PyBytes_AsString(ptr).cast::<u8>();
            let _ = alloc::advise_huge_pages(buf, len);
            let dst = std::slice::from_raw_parts_mut(buf, len);
            detach(py, || dst.copy_from_slice(&bytes))?;
            Ok(out)
        }
    }

    /// Read little-endian float32 bytes back into a new, writable float32 array of ``shape``.
    ///
    /// The inverse of ``serialize_pixel_values``. ``len(data)`` must be exactly
    /// ``4 * prod(shape)``.
    #[pyfunction]
    fn deserialize_pixel_values<'py>(
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        shape: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let data = data
            .cast::<PyBytes>()
            .map_err(|_| fail("data", "bytes", describe(data)))?
            .as_bytes();
        let dims: Vec<usize> = extract("shape", "a sequence of non-negative integers", shape)?;
        let len = array_len::<f32>(&dims)?;
        if Some(data.len()) != len.checked_mul(4) {
            return Err(fail(
                "data",
                format!(
                    "{} bytes for shape {dims:?} (4 per float32)",
                    len.saturating_mul(4)
                ),
                format!("{} bytes", data.len()),
            ));
        }
        let mut out = alloc::zeroed::<f32>("shape", len)?;
        detach(py, || transforms::f32_from_le_bytes(data, &mut out))??;
        Ok(Array::from_shape_vec(IxDyn(&dims), out)
            .expect("length checked above")
            .into_pyarray(py))
    }

    /// The Arrow C data interface's `ArrowSchema` (a stable C ABI).
    #[repr(C)]
    struct ArrowSchema {
        format: *const c_char,
        name: *const c_char,
        metadata: *const c_char,
        flags: i64,
        n_children: i64,
        children: *mut *mut ArrowSchema,
        dictionary: *mut ArrowSchema,
        release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
        private_data: *mut c_void,
    }

    /// The Arrow C data interface's `ArrowArray` (a stable C ABI).
    #[repr(C)]
    struct ArrowArray {
        length: i64,
        null_count: i64,
        offset: i64,
        n_buffers: i64,
        n_children: i64,
        buffers: *mut *const c_void,
        children: *mut *mut ArrowArray,
        dictionary: *mut ArrowArray,
        release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
        private_data: *mut c_void,
    }

    /// The pixel bytes Pillow exports through `__arrow_c_array__`, and bytes per pixel.
    ///
    /// Pillow exports 4-byte modes (RGB is stored as RGBX) as a fixed-size list `+w:4`
    /// of `C` (uint8), and 1-byte modes as plain `C`; either way one element per pixel.
    ///
    /// # Safety
    /// The returned slice borrows memory owned by `array_capsule`, which must outlive it.
    unsafe fn arrow_pixels<'a>(
        schema_capsule: &Bound<'_, PyCapsule>,
        array_capsule: &'a Bound<'_, PyCapsule>,
        pixels: usize,
    ) -> PyResult<(&'a [u8], usize)> {
        let bad = |why: &str| fail("image", "Pillow's Arrow export of an RGB or L image", why);
        let schema = schema_capsule
            .pointer_checked(Some(c"arrow_schema"))?
            .cast::<ArrowSchema>();
        let array = array_capsule
            .pointer_checked(Some(c"arrow_array"))?
            .cast::<ArrowArray>();
        // SAFETY: both capsules hold live Arrow structures by their names' contract.
        let (schema, array) = unsafe { (schema.as_ref(), array.as_ref()) };
        // SAFETY: `format` is a NUL-terminated string by the Arrow spec.
        let format = unsafe { CStr::from_ptr(schema.format) }.to_bytes();
        let (channels, data) = match format {
            b"+w:4" if array.n_children == 1 => {
                // SAFETY: `n_children` == 1 so `children[0]` is a valid child array.
                let child = unsafe { &**array.children };
                (4, child)
            }
            b"C" => (1, array),
            other => return Err(bad(&format!("Arrow format {:?}", String::from_utf8_lossy(other)))),
        };
        if data.n_buffers != 2
            || data.offset != 0
            || usize::try_from(data.length).ok() != Some(pixels * channels)
        {
            return Err(bad("an unexpected buffer layout"));
        }
        // SAFETY: buffer 1 of a primitive array is its data: `length` uint8 values.
        let ptr = unsafe { *data.buffers.add(1) }.cast::<u8>();
        if ptr.is_null() {
            return Err(bad("a null data buffer"));
        }
        // SAFETY: as above; the memory lives as long as the array capsule.
        Ok((
            unsafe { std::slice::from_raw_parts(ptr, pixels * channels) },
            channels,
        ))
    }

    /// The head of Pillow's `ImagingMemoryInstance` (`libImaging/Imaging.h`, Pillow 12 and
    /// 13), as far as the row pointers and the fields that check them.
    #[repr(C)]
    struct ImagingHead {
        mode: i32,
        kind: i32,
        depth: i32,
        bands: i32,
        xsize: i32,
        ysize: i32,
        palette: *mut c_void,
        image8: *mut *mut u8,
        image32: *mut *mut i32,
        image: *mut *mut u8,
        block: *mut u8,
        blocks: *mut c_void,
        pixelsize: i32,
        linesize: i32,
    }

    /// The modes whose rows [`pillow_rows`] reads.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Mode {
        Rgb,
        Rgba,
        L,
        /// Palette indices, one byte each as L's values.
        P,
        /// Four bytes as RGBA's, the fourth K.
        Cmyk,
        /// Four bytes: L first, alpha fourth (the two between are not read).
        La,
    }

    impl Mode {
        /// What an image of this mode is, for messages.
        fn describe(self) -> &'static str {
            match self {
                Mode::Rgb => "an RGB image",
                Mode::Rgba => "an RGBA image",
                Mode::L => "an L image",
                Mode::P => "a P image",
                Mode::Cmyk => "a CMYK image",
                Mode::La => "an LA image",
            }
        }
    }

    /// The rows of an RGB, RGBA, L, P, CMYK or LA Pillow image read in place through
    /// ``Image.getim()``, each slice running to the end of the memory block holding it, bytes
    /// per pixel, and the mode (whether an RGBA image's fourth byte is alpha rather than an
    /// RGB image's padding, a P image's byte an index rather than an L image's value).
    ///
    /// `core` is the image's core object (``image.im``): the capsule must be its struct
    /// (``core.ptr``), and its mode, RGB, RGBA, L, P, CMYK or LA, tells alpha from padding
    /// (RGBX or YCbCr have the same pixel layout) and indices from values. The struct layout is
    /// Pillow's; every field read is checked against what the image must hold (its size,
    /// uint8 type, a pixel size and band count of its mode, the line size, and the 8- or
    /// 32-bit row table equal to the raw one) before a row pointer is followed, and Python
    /// enables this path only after a probe image read back equal (`mmfast.image`), so a
    /// Pillow with another layout falls back to a copy.
    ///
    /// # Safety
    /// `capsule` must belong to a Pillow image core that outlives the returned slices and
    /// is not changed meanwhile.
    unsafe fn pillow_rows<'a>(
        capsule: &Bound<'_, PyCapsule>,
        (h, w): (usize, usize),
        core: &Bound<'_, PyAny>,
    ) -> PyResult<(Vec<&'a [u8]>, usize, Mode)> {
        let bad = |why: &str| {
            fail(
                "image",
                "an RGB, RGBA, L, P, CMYK or LA Pillow image (Image.getim())",
                why,
            )
        };
        let ptr = capsule.pointer_checked(Some(c"Pillow Imaging"))?;
        let own = core
            .getattr("ptr")
            .ok()
            .and_then(|p| p.cast_into::<PyCapsule>().ok())
            .and_then(|p| p.pointer_checked(Some(c"Pillow Imaging")).ok());
        if own != Some(ptr) {
            return Err(bad("a capsule that is not its core's"));
        }
        let mode = core
            .getattr("mode")
            .and_then(|m| m.extract::<String>())
            .map_err(|_| bad("a core without a mode"))?;
        let (kind, bands) = match mode.as_str() {
            "RGB" => (Mode::Rgb, 3),
            "RGBA" => (Mode::Rgba, 4),
            "L" => (Mode::L, 1),
            "P" => (Mode::P, 1),
            "CMYK" => (Mode::Cmyk, 4),
            "LA" => (Mode::La, 2),
            other => return Err(bad(&format!("mode {other}"))),
        };
        let ptr = ptr.cast::<ImagingHead>();
        // SAFETY: the capsule holds a live Imaging struct by its name's contract; only its
        // head, which every Pillow 12 or 13 image has, is read.
        let head = unsafe { ptr.as_ref() };
        let (channels, rows) = match (head.pixelsize, head.bands) {
            (4, 2..=4) if head.image32.cast::<*mut u8>() == head.image => (4, head.image),
            (1, 1) if head.image8 == head.image => (1, head.image),
            _ => {
                return Err(bad(
                    "a pixel layout other than RGB's, RGBA's, L's, P's, CMYK's or LA's",
                ))
            }
        };
        if head.bands != bands {
            return Err(bad(&format!("{} bands in a {mode} image", head.bands)));
        }
        if usize::try_from(head.xsize).ok() != Some(w)
            || usize::try_from(head.ysize).ok() != Some(h)
            || head.kind != 0
            || usize::try_from(head.linesize).ok() != w.checked_mul(channels)
            || rows.is_null()
        {
            return Err(bad("a header that does not match its size"));
        }
        let line = w * channels;
        // SAFETY: `image` points to `ysize` row pointers of `linesize` bytes each.
        let starts = unsafe { std::slice::from_raw_parts(rows.cast_const(), h) };
        if starts.iter().any(|p| p.is_null()) {
            return Err(bad("a missing row"));
        }
        // Rows that follow each other in memory belong to one block: each row's slice runs
        // to the end of its block, so vector loads past a row's end stay inside it.
        let mut ends = vec![0usize; h];
        for y in (0..h).rev() {
            let start = starts[y] as usize;
            ends[y] = if y + 1 < h && starts[y + 1] as usize == start + line {
                ends[y + 1]
            } else {
                start + line
            };
        }
        Ok((
            starts
                .iter()
                .zip(ends)
                // SAFETY: [start, end) is one or more consecutive rows of one block.
                .map(|(&p, end)| unsafe { std::slice::from_raw_parts(p.cast_const(), end - p as usize) })
                .collect(),
            channels,
            kind,
        ))
    }

    /// A Pillow image's rows (see [`pillow_rows`]), its (height, width) and its mode.
    type PillowRows<'a> = (Vec<&'a [u8]>, (usize, usize), Mode);

    /// The rows, size and mode of a Pillow image given as ``(getim() capsule, (height,
    /// width), image.im)`` (see [`pillow_rows`]), where its mode is one of `modes` (`what`
    /// names them for the message, "an RGBA Pillow image"); `None` where `image` is no such
    /// tuple.
    ///
    /// # Safety
    /// As [`pillow_rows`]'s: the tuple holds the image core that owns the rows, which must
    /// outlive them unchanged.
    unsafe fn rows_in<'a>(
        image: &Bound<'_, PyAny>,
        modes: &[Mode],
        what: &str,
    ) -> PyResult<Option<PillowRows<'a>>> {
        let Ok((capsule, size, core)) =
            image.extract::<(Bound<'_, PyCapsule>, (usize, usize), Bound<'_, PyAny>)>()
        else {
            return Ok(None);
        };
        // SAFETY: as the caller guarantees.
        let (rows, _, mode) = unsafe { pillow_rows(&capsule, size, &core)? };
        if !modes.contains(&mode) {
            return Err(fail("image", what, mode.describe()));
        }
        Ok(Some((rows, size, mode)))
    }

    /// Oriented (H, W, 3) uint8 RGB of an RGB or L Pillow image (or an RGBA one, its alpha
    /// dropped as ``convert("RGB")`` drops it) read in place through its ``getim()``
    /// capsule (``image`` is ``(capsule, (height, width), image.im)``), its rows in one
    /// block or several, oriented as ``rgb_composited`` orients; the probe ``mmfast.image``
    /// checks the layout with before batches read images this way.
    #[pyfunction]
    #[pyo3(signature = (image, orientation = 1))]
    fn rgb_from_pillow<'py>(
        py: Python<'py>,
        image: &Bound<'py, PyAny>,
        orientation: i64,
    ) -> PyResult<Bound<'py, PyArray3<u8>>> {
        let input = Input::new(image)?;
        let pixels = input.pixels()?;
        let source = pixels.source()?;
        oriented_rgb(py, &source, orientation, |out| {
            source.write_rgb(out);
            Ok(())
        })
    }

    /// Oriented (H, W, 3) uint8 RGB of RGBA pixels composited by ``table`` (65,536 uint8
    /// values, at ``(alpha << 8) | colour``; see ``image::composite_rgba``): an RGBA Pillow
    /// image's rows read in place (``image`` as for ``rgb_from_pillow``), or an (H, W, 4)
    /// uint8 array; an LA image's rows as the RGBA pixels its ``convert("RGBA")`` gives (L
    /// repeated); or a CMYK image's rows converted by a table at ``(k << 8) | value``. One
    /// pass with the GIL released, and a second to orient (``orientation`` an EXIF
    /// orientation, 1..8, others upright).
    #[pyfunction]
    fn rgb_composited<'py>(
        py: Python<'py>,
        image: &Bound<'py, PyAny>,
        table: &Bound<'py, PyAny>,
        orientation: i64,
    ) -> PyResult<Bound<'py, PyArray3<u8>>> {
        let table = contiguous_u8("table", table, 65536)?;
        let table = table.as_slice().expect("contiguous");
        let rows;
        let array;
        // SAFETY: the tuple `image`, alive for this call, holds the image core that owns the
        // rows, which must not change during the call.
        let modes = [Mode::Rgba, Mode::Cmyk, Mode::La];
        let pillow = unsafe { rows_in(image, &modes, "an RGBA, CMYK or LA Pillow image")? };
        let gray = pillow.as_ref().is_some_and(|(_, _, mode)| *mode == Mode::La);
        let source = if let Some((pillow_rows, size, _)) = pillow {
            rows = pillow_rows;
            Source::rows(&rows, 4, size)?
        } else {
            let expected =
                "an RGBA Pillow image's rows, or a numpy.ndarray of dtype uint8 and shape (height, width, 4)";
            let arr = image
                .cast::<PyArray3<u8>>()
                .map_err(|_| fail("image", expected, describe(image)))?;
            if arr.shape()[2] != 4 {
                return Err(fail("image", expected, describe(image)));
            }
            // SAFETY: the view lives no longer than `image`, alive for this call; like
            // every NumPy consumer we rely on the caller not mutating it meanwhile.
            array = standard_layout("image", unsafe { arr.as_array() })?;
            let (h, w) = (array.shape()[0], array.shape()[1]);
            Source::packed(array.as_slice().expect("standard layout"), 4, (h, w))?
        };
        oriented_rgb(py, &source, orientation, |out| {
            image::composite_rgba(&source, table, gray, out)
        })
    }

    /// Oriented (H, W, 3) uint8 RGB of a P Pillow image (``image`` as for
    /// ``rgb_from_pillow``): its indices read in place and looked up in ``palette`` (768
    /// uint8 values, the RGB of each index; see ``image::palette_rgb``), oriented as
    /// ``rgb_composited`` orients.
    #[pyfunction]
    fn rgb_from_palette<'py>(
        py: Python<'py>,
        image: &Bound<'py, PyAny>,
        palette: &Bound<'py, PyAny>,
        orientation: i64,
    ) -> PyResult<Bound<'py, PyArray3<u8>>> {
        let palette = contiguous_u8("palette", palette, 768)?;
        let palette = palette.as_slice().expect("contiguous");
        // SAFETY: the tuple holds the image core that owns the rows, alive for this call.
        let (rows, size, _) = unsafe { rows_in(image, &[Mode::P], "a P Pillow image")? }
            .ok_or_else(|| fail("image", "a P Pillow image's rows", describe(image)))?;
        let source = Source::rows(&rows, 1, size)?;
        oriented_rgb(py, &source, orientation, |out| {
            image::palette_rgb(&source, palette, out)
        })
    }

    /// `values` as a contiguous 1-D uint8 array, `arg` named if it is not one (its length,
    /// `len` expected, is the kernel's to check).
    fn contiguous_u8<'py>(
        arg: &'static str,
        values: &Bound<'py, PyAny>,
        len: usize,
    ) -> PyResult<numpy::PyReadonlyArray1<'py, u8>> {
        let expected = format!("a numpy.ndarray of dtype uint8 and shape ({len},)");
        let array = values
            .cast::<PyArray1<u8>>()
            .map_err(|_| fail(arg, expected, describe(values)))?
            .readonly();
        if array.as_slice().is_err() {
            return Err(fail(arg, "a contiguous array", "a strided one"));
        }
        Ok(array)
    }

    /// (H, W, 3) uint8 RGB that `write` makes of `source`'s pixels, upright, into
    /// `orientation`'s (an EXIF orientation, 1..8, others upright) by [`oriented_with`];
    /// the GIL released throughout.
    fn oriented_rgb<'py>(
        py: Python<'py>,
        source: &Source<'_>,
        orientation: i64,
        write: impl Fn(&mut [u8]) -> Result<(), TransformError> + Sync,
    ) -> PyResult<Bound<'py, PyArray3<u8>>> {
        let size = source.size();
        let orientation = Orientation::from_exif(orientation);
        let out = detach(py, || oriented_with("image", size, orientation, &write))??;
        let (oh, ow) = orientation.oriented_size(size);
        let out = into_output(py, out, &[oh, ow, 3])?;
        Ok(out.cast_into::<PyArray3<u8>>().expect("three dimensions"))
    }

    /// The (H, W, 3) RGB that `write` makes, upright, of an image of `size`, in a pooled
    /// output, turned to `orientation` by a second pass over a scratch copy where it is not
    /// upright; `arg` is named by the errors.
    fn oriented_with(
        arg: &'static str,
        (h, w): (usize, usize),
        orientation: Orientation,
        write: impl FnOnce(&mut [u8]) -> Result<(), TransformError>,
    ) -> Result<Vec<u8>, TransformError> {
        let len = transforms::checked_len(arg, &[h, w, 3])?;
        // Every byte is written: a pooled buffer's old bytes do not show.
        let (mut out, _) = alloc::output::<u8>(arg, len)?;
        if orientation == Orientation::Identity {
            write(&mut out)?;
        } else {
            let mut upright = alloc::scratch(arg, len)?;
            write(&mut upright)?;
            image::to_rgb_oriented(&upright, 3, (h, w), orientation, &mut out)?;
            alloc::recycle(alloc::Buffer::U8(upright));
        }
        Ok(out)
    }

    /// Whether every pixel of an RGBA Pillow image (``image`` as for ``rgb_from_pillow``) is
    /// opaque (alpha 255), read in place with the GIL released up to the end of the first
    /// row with one that is not.
    #[pyfunction]
    fn opaque(py: Python<'_>, image: &Bound<'_, PyAny>) -> PyResult<bool> {
        // SAFETY: the tuple holds the image core that owns the rows, alive for this call.
        let (rows, size, _) = unsafe { rows_in(image, &[Mode::Rgba], "an RGBA Pillow image")? }
            .ok_or_else(|| fail("image", "an RGBA Pillow image's rows", describe(image)))?;
        let source = Source::rows(&rows, 4, size)?;
        detach(py, || image::opaque(&source))
    }

    /// Asks for huge pages behind the memory blocks of a Pillow image of a mode
    /// [`pillow_rows`] reads (``image`` as for ``rgb_from_pillow``, its core's ``ptr`` in
    /// place of ``getim()`` so nothing is loaded), and returns the bytes asked for: for a
    /// block fresh from
    /// ``Image.core.new_block`` that a decoder is about to fill, where 4 KiB pages cost a
    /// page fault per 1,024 pixels.
    #[pyfunction]
    fn advise_huge_pages(image: &Bound<'_, PyAny>) -> PyResult<usize> {
        let (capsule, size, core) = image
            .extract::<(Bound<'_, PyCapsule>, (usize, usize), Bound<'_, PyAny>)>()
            .map_err(|_| {
                fail(
                    "image",
                    "(capsule, (height, width), core) of a Pillow image",
                    describe(image),
                )
            })?;
        // SAFETY: the tuple holds the image core that owns the rows, alive for this call.
        let (rows, channels, _) = unsafe { pillow_rows(&capsule, size, &core)? };
        let line = size.1 * channels;
        let mut advised = 0;
        let mut y = 0;
        // Each row's slice runs to the end of its block: one call a block.
        while let Some(block) = rows.get(y).filter(|_| line > 0) {
            advised += alloc::advise_huge_pages(block.as_ptr(), block.len());
            y += block.len() / line;
        }
        Ok(advised)
    }

    /// Oriented (H, W, 3) uint8 RGB of the PNG file ``data`` (bytes), its alpha dropped as
    /// ``convert("RGB")`` drops it, or with ``table`` an RGBA file's pixels composited by it
    /// (as ``rgb_composited``), and grey repeated, decoded in Rust with the GIL released
    /// where that gives Pillow's pixels (see ``decode::decode_png``); None for a file of
    /// more than ``max_pixels`` pixels or one to leave to Pillow. ``orientation`` as for
    /// ``rgb_from_arrow``.
    #[pyfunction]
    #[pyo3(signature = (data, orientation, max_pixels, table = None))]
    fn rgb_from_png<'py>(
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        orientation: i64,
        max_pixels: usize,
        table: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyArray3<u8>>>> {
        let data = data
            .cast::<PyBytes>()
            .map_err(|_| fail("data", "bytes", describe(data)))?
            .as_bytes();
        let table = table.map(|t| contiguous_u8("table", t, 65536)).transpose()?;
        let table = table.as_ref().map(|t| t.as_slice().expect("contiguous"));
        let orientation = Orientation::from_exif(orientation);
        let decoded = detach(py, || {
            let (mut out, mut upright) = (Vec::new(), Vec::new());
            let slots = (&mut out, &mut upright);
            let shape = decode::decode_png(data, PNG_DECODER_BYTES, move |(h, w, c)| {
                let len = transforms::checked_len("data", &[h, w, c]).ok()?;
                if h.checked_mul(w)? > max_pixels {
                    return None;
                }
                // Packed RGB upright is the output itself.
                let slot = if c == 3 && orientation == Orientation::Identity {
                    *slots.0 = alloc::output::<u8>("data", len).ok()?.0;
                    slots.0
                } else {
                    *slots.1 = alloc::scratch("data", len).ok()?;
                    slots.1
                };
                Some(slot.as_mut_slice())
            });
            let converted = shape.map(|(h, w, c)| {
                match table {
                    _ if upright.is_empty() => {}
                    Some(table) if c == 4 => {
                        let rgba = Source::packed(&upright, 4, (h, w))?;
                        out = oriented_with("data", (h, w), orientation, |rgb| {
                            image::composite_rgba(&rgba, table, false, rgb)
                        })?;
                    }
                    _ => {
                        // Every byte is written: a pooled buffer's old bytes do not show.
                        out = alloc::output::<u8>("data", h * w * 3)?.0;
                        image::to_rgb_oriented(&upright, c, (h, w), orientation, &mut out)?;
                    }
                }
                Ok::<_, TransformError>(orientation.oriented_size((h, w)))
            });
            alloc::recycle(alloc::Buffer::U8(upright));
            match converted {
                Some(Ok(size)) => Ok(Some((out, size))),
                Some(Err(err)) => Err(err),
                None => {
                    alloc::recycle(alloc::Buffer::U8(out));
                    Ok(None)
                }
            }
        })??;
        decoded
            .map(|(out, (h, w))| {
                let out = into_output(py, out, &[h, w, 3])?;
                Ok(out.cast_into::<PyArray3<u8>>().expect("three dimensions"))
            })
            .transpose()
    }

    /// The pixels of the PNG file ``data`` (bytes) as it stores them: (H, W, C) uint8 with
    /// C 3 (RGB), 4 (RGBA) or 1 (grey), decoded in Rust with the GIL released where that
    /// gives Pillow's pixels (see ``decode::decode_png``), for Pillow to take as a loaded
    /// image's; None for a file of more than ``max_pixels`` pixels or one to leave to Pillow.
    #[pyfunction]
    fn png_pixels<'py>(
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        max_pixels: usize,
    ) -> PyResult<Option<Bound<'py, PyArray3<u8>>>> {
        let data = data
            .cast::<PyBytes>()
            .map_err(|_| fail("data", "bytes", describe(data)))?
            .as_bytes();
        let decoded = detach(py, || {
            let mut out = Vec::new();
            let slot = &mut out;
            let shape = decode::decode_png(data, PNG_DECODER_BYTES, move |(h, w, c)| {
                let len = transforms::checked_len("data", &[h, w, c]).ok()?;
                if h.checked_mul(w)? > max_pixels {
                    return None;
                }
                // Every byte is written: a pooled buffer's old bytes do not show.
                *slot = alloc::output::<u8>("data", len).ok()?.0;
                Some(slot.as_mut_slice())
            });
            if shape.is_none() {
                alloc::recycle(alloc::Buffer::U8(std::mem::take(&mut out)));
            }
            Ok::<_, TransformError>(shape.map(|shape| (out, shape)))
        })??;
        decoded
            .map(|(out, (h, w, c))| {
                let out = into_output(py, out, &[h, w, c])?;
                Ok(out.cast_into::<PyArray3<u8>>().expect("three dimensions"))
            })
            .transpose()
    }

    /// What [`rgb_from_png`]'s decoder may allocate besides the pixels: its window, and the
    /// text chunks before the pixels, each of which Pillow has already read within its own
    /// limit (``PngImagePlugin.MAX_TEXT_CHUNK``, 1 MiB).
    const PNG_DECODER_BYTES: usize = 64 << 20;

    /// Oriented (H, W, 3) uint8 RGB from a Pillow image's Arrow export (RGB or L mode).
    ///
    /// ``capsules`` is ``image.__arrow_c_array__()``, ``size`` the image's ``(height,
    /// width)`` and ``orientation`` an EXIF orientation (1..8, others mean upright).
    /// Pillow's pixel memory is read in place, once, with the GIL released.
    #[pyfunction]
    fn rgb_from_arrow<'py>(
        py: Python<'py>,
        capsules: (Bound<'py, PyCapsule>, Bound<'py, PyCapsule>),
        size: &Bound<'py, PyAny>,
        orientation: i64,
    ) -> PyResult<Bound<'py, PyArray3<u8>>> {
        let (h, w) = size_pair("size", size)?;
        let pixels = transforms::checked_len("size", &[h, w])?;
        // SAFETY: `capsules` outlives `src`, which is dropped at the end of this function.
        let (src, channels) = unsafe { arrow_pixels(&capsules.0, &capsules.1, pixels)? };
        let orientation = Orientation::from_exif(orientation);
        let (oh, ow) = orientation.oriented_size((h, w));
        // Every byte is written: a pooled buffer's old bytes do not show.
        let (mut out, _) = alloc::output::<u8>("size", pixels * 3)?;
        detach(py, || {
            image::to_rgb_oriented(src, channels, (h, w), orientation, &mut out)
        })??;
        let out = into_output(py, out, &[oh, ow, 3])?;
        Ok(out.cast_into::<PyArray3<u8>>().expect("three dimensions"))
    }

    /// One job tuple from Python: `(image_index, source_job, crop, resize, pad, layout,
    /// offset, frames, table)`, each optional part `None` or:
    /// crop `(top, left, height, width)`; resize `(kind, filter, (height, width))`;
    /// pad `((height, width), (top, left), (r, g, b))`; layout `(kind, params)`; frames the
    /// image indices of a video's further time slots (empty for a still image); table the
    /// index of the normalisation table its values come from.
    type JobSpec<'py> = (
        usize,
        Option<usize>,
        Option<(usize, usize, usize, usize)>,
        Option<(String, i64, (usize, usize))>,
        Option<((usize, usize), (usize, usize), (u8, u8, u8))>,
        Option<(String, Bound<'py, PyAny>)>,
        usize,
        Vec<usize>,
        usize,
    );

    /// A batch input: an (H, W, 3) uint8 array, a Pillow image's Arrow export as
    /// `(schema_capsule, array_capsule, (height, width))`, or its rows as
    /// `(getim_capsule, (height, width), image.im)` (the core object kept alive by the
    /// tuple), all read in place. An RGBA image's rows are read as RGB, the alpha ignored:
    /// Python hands them over where that is its reference's conversion (`convert("RGB")`,
    /// or a composite of pixels all opaque).
    enum Input<'py> {
        Array(CowArray<'py, u8, Ix3>),
        Arrow(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>, (usize, usize)),
        Rows(Vec<&'py [u8]>, usize, (usize, usize)),
    }

    impl<'py> Input<'py> {
        fn new(image: &'py Bound<'py, PyAny>) -> PyResult<Self> {
            if let Ok((schema, array, size)) =
                image.extract::<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>, (usize, usize))>()
            {
                return Ok(Self::Arrow(schema, array, size));
            }
            if let Ok((capsule, size, core)) =
                image.extract::<(Bound<'py, PyCapsule>, (usize, usize), Bound<'py, PyAny>)>()
            {
                // SAFETY: the tuple `image`, borrowed for 'py, holds the image core that owns
                // the rows; like arrays, images must not change during the call.
                let (rows, channels, mode) = unsafe { pillow_rows(&capsule, size, &core)? };
                if !matches!(mode, Mode::Rgb | Mode::Rgba | Mode::L) {
                    return Err(fail("image", "an RGB, RGBA or L Pillow image", mode.describe()));
                }
                return Ok(Self::Rows(rows, channels, size));
            }
            Ok(Self::Array(rgb_image(image)?))
        }

        /// The pixels, their (height, width) and bytes per pixel.
        fn pixels(&self) -> PyResult<Image<'_>> {
            match self {
                Self::Array(a) => Ok(Image {
                    pixels: a.as_slice().expect("standard layout"),
                    rows: None,
                    channels: 3,
                    size: (a.shape()[0], a.shape()[1]),
                }),
                Self::Rows(rows, channels, size) => Ok(Image {
                    pixels: &[],
                    rows: Some(rows),
                    channels: *channels,
                    size: *size,
                }),
                Self::Arrow(schema, array, (h, w)) => {
                    let count = transforms::checked_len("size", &[*h, *w])?;
                    // SAFETY: the slice borrows `self`, which holds the array capsule.
                    let (pixels, channels) = unsafe { arrow_pixels(schema, array, count)? };
                    Ok(Image {
                        pixels,
                        rows: None,
                        channels,
                        size: (*h, *w),
                    })
                }
            }
        }
    }

    /// torch's float interpolation for a PIL filter code, or an error naming `arg`.
    fn float_mode(arg: &'static str, filter: i64) -> PyResult<FloatMode> {
        FloatMode::from_pil_code(filter).ok_or_else(|| {
            fail(
                arg,
                "a PIL filter code torch resizes floats with without antialiasing (0, 2 or 3)",
                filter,
            )
        })
    }

    /// A resize by kernel name ("pillow", "torch", "torch-noaa" or "torch-float") and PIL
    /// filter code.
    fn resize_kind(arg: &'static str, kind: &str, filter: i64, to: (usize, usize)) -> PyResult<Resize> {
        Ok(match kind {
            "pillow" => Resize::Pillow(
                Filter::from_pil_code(filter).ok_or_else(|| fail(arg, "a PIL filter code 0..5", filter))?,
                to,
            ),
            "torch" | "torch-noaa" => Resize::Torch(
                TorchMode::from_pil_code(filter).ok_or_else(|| {
                    fail(
                        arg,
                        "a PIL filter code torchvision maps to a tensor mode (0..3)",
                        filter,
                    )
                })?,
                kind == "torch",
                to,
            ),
            "torch-float" | "torch-float-1" => {
                Resize::TorchFloat(float_mode(arg, filter)?, kind == "torch-float-1", to)
            }
            other => {
                return Err(fail(
                    arg,
                    "resize 'pillow', 'torch', 'torch-noaa', 'torch-float' or 'torch-float-1'",
                    other,
                ))
            }
        })
    }

    /// `(top, left, height, width)` tuples as windows.
    fn windows(params: &Bound<'_, PyAny>, expected: &str) -> PyResult<Vec<Window>> {
        let boxes: Vec<(isize, isize, usize, usize)> = extract("jobs", expected, params)?;
        Ok(boxes
            .into_iter()
            .map(|(top, left, height, width)| Window {
                top,
                left,
                height,
                width,
            })
            .collect())
    }

    fn parse_job(spec: &JobSpec<'_>) -> PyResult<Job> {
        let (image, source, crop, resize, pad, layout, offset, frames, table) = spec;
        let resize = match resize {
            None => Resize::Keep,
            Some((kind, filter, to)) => resize_kind("jobs", kind, *filter, *to)?,
        };
        let layout = match layout {
            None => None,
            Some((kind, params)) => Some(match kind.as_str() {
                "patches" => {
                    let (patch_size, temporal_patch_size, merge_size, time_major) = extract(
                        "jobs",
                        "(patch_size, temporal_patch_size, merge_size, time_major)",
                        params,
                    )?;
                    Layout::Patches(Patches {
                        patch_size,
                        temporal_patch_size,
                        merge_size,
                        time_major,
                    })
                }
                "windows" => Layout::Windows(windows(params, "a list of (top, left, height, width)")?),
                "hwc_patches" => {
                    let (patch_size, boxes): (usize, Bound<'_, PyAny>) =
                        extract("jobs", "(patch_size, [(top, left, height, width), ...])", params)?;
                    Layout::HwcPatches {
                        patch_size,
                        windows: windows(&boxes, "a list of (top, left, height, width)")?,
                    }
                }
                "canvas" => {
                    let (row, plane) = extract("jobs", "(row, plane) strides", params)?;
                    Layout::Canvas { row, plane }
                }
                "strip" => {
                    let (patch_size, stride) = extract("jobs", "(patch_size, stride)", params)?;
                    Layout::Strip { patch_size, stride }
                }
                "resized" => {
                    let (filter, size, one_thread): (i64, (usize, usize), bool) = extract(
                        "jobs",
                        "(PIL filter code, (height, width), one torch thread)",
                        params,
                    )?;
                    Layout::Resized {
                        mode: float_mode("jobs", filter)?,
                        one_thread,
                        size,
                    }
                }
                other => {
                    return Err(fail(
                        "jobs",
                        "layout 'patches', 'windows', 'hwc_patches', 'canvas', 'strip' or 'resized'",
                        other,
                    ))
                }
            }),
        };
        Ok(Job {
            image: *image,
            source: *source,
            crop: crop.map(|(top, left, height, width)| Rect {
                top,
                left,
                height,
                width,
            }),
            resize,
            pad: pad.map(|(size, at, (r, g, b))| Pad {
                size,
                at,
                fill: [r, g, b],
            }),
            layout,
            offset: *offset,
            table: *table,
            frames: frames.clone(),
        })
    }

    /// The memory of an output array from the pool (see `alloc::output`): its base object,
    /// which gives the buffer back to the pool once numpy has let go of the array.
    #[pyclass(module = "mmfast._native", frozen)]
    struct PooledOutput {
        buffer: std::sync::Mutex<Option<alloc::Buffer>>,
    }

    impl Drop for PooledOutput {
        fn drop(&mut self) {
            let buffer = self
                .buffer
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            if let Some(buffer) = buffer {
                alloc::recycle(buffer);
            }
        }
    }

    /// `values` as an array of `shape`: owned by numpy when small, else viewed through a
    /// [`PooledOutput`] so that its memory serves a later output.
    fn into_output<'py, T: numpy::Element + alloc::Pooled>(
        py: Python<'py>,
        values: Vec<T>,
        shape: &[usize],
    ) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
        if values.len() * size_of::<T>() < alloc::POOL_MIN_BYTES {
            return Ok(Array::from_shape_vec(IxDyn(shape), values)
                .expect("length checked by run_batch")
                .into_pyarray(py));
        }
        // SAFETY: `values` holds exactly prod(shape) initialised values (run_batch checked the
        // length); moving the Vec into the container moves only its handle, never the heap
        // memory the view points to, and the container is the array's base: the memory lives,
        // unchanged in place, until NumPy drops the array and with it the container.
        let view = unsafe { ndarray::ArrayViewD::from_shape_ptr(IxDyn(shape), values.as_ptr()) };
        let container = Bound::new(
            py,
            PooledOutput {
                buffer: std::sync::Mutex::new(Some(T::into_buffer(values))),
            },
        )?;
        // SAFETY: as above: `container` owns the memory `view` points to and becomes the
        // array's base.
        Ok(unsafe { PyArrayDyn::borrow_from_array(&view, container.into_any()) })
    }

    fn run_typed<'py, T: numpy::Element + pipeline::Element + alloc::Pooled>(
        py: Python<'py>,
        images: &[Image<'_>],
        jobs: &[Job],
        tables: &Bound<'py, PyAny>,
        shape: &[usize],
        threads: (usize, usize),
    ) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
        let expected = "a (3, 256) or (k, 3, 256) array, or 257 values a row";
        let tables = tables
            .cast::<PyArrayDyn<T>>()
            .map_err(|_| fail("tables", expected, describe(tables)))?
            .readonly();
        let tables = tables.as_array();
        // A 257th value per row is the channel's value outside the pixels (the normalised
        // value of black without it).
        let (k, n) = match tables.shape() {
            &[3, n @ (256 | 257)] => (1, n),
            &[k, 3, n @ (256 | 257)] if k > 0 => (k, n),
            other => return Err(fail("tables", expected, format!("{other:?}"))),
        };
        let tables = tables
            .to_shape((k, 3, n))
            .expect("the element count checked above");
        let norms: Vec<Normalize<T>> = (0..k)
            .map(|t| {
                let mut lut = [[tables[[t, 0, 0]]; 256]; 3];
                for (c, row) in lut.iter_mut().enumerate() {
                    for (x, v) in row.iter_mut().enumerate() {
                        *v = tables[[t, c, x]];
                    }
                }
                let norm = Normalize::from_tables(lut);
                if n == 257 {
                    norm.with_outside(std::array::from_fn(|c| tables[[t, c, 256]]))
                } else {
                    norm
                }
            })
            .collect();
        let len = array_len::<T>(shape)?;
        // A pooled buffer holds old values: zero what no job writes (HF's zero padding).
        let gaps = pipeline::unwritten(images, jobs, norms.len(), len)?;
        let (mut out, zeroed) = alloc::output::<T>("shape", len)?;
        let memory = alloc::Memory::of(size_of_val(&out[..]), zeroed);
        detach(py, || {
            if !zeroed {
                for gap in gaps {
                    out[gap].fill(T::zeroed());
                }
            }
            pipeline::run_batch(images, jobs, &norms, &mut out, memory, threads.0, threads.1)
        })??;
        into_output(py, out, shape)
    }

    /// Run a batch of jobs into a new array of ``shape`` with the GIL released once
    /// (internal: see ``mmfast.processors``).
    ///
    /// ``images`` are (H, W, 3) uint8 arrays, Pillow Arrow exports
    /// ``(schema_capsule, array_capsule, (height, width))`` of RGB or L images, or Pillow
    /// images' rows ``(getim_capsule, (height, width), image.im)`` of RGB, L or RGBA images
    /// (the alpha ignored), read in place. Each job (see ``JobSpec``) takes one of them or an earlier job's pixels,
    /// crops, resizes and pads it, and writes its layout at its offset into the output,
    /// whose dtype is that of ``tables`` (float32, uint16 bfloat16 bits or uint8), (3, 256)
    /// or (k, 3, 256): ``tables[t, c, x]`` is the output for value ``x`` in channel ``c``
    /// of a job whose table is ``t`` (with 257 values a row, ``tables[t, c, 256]`` is the
    /// value of positions outside the pixels, the normalised value of black otherwise).
    /// Values no job writes are zero. Images run in parallel on at most ``threads`` threads of the
    /// process's worker pool, the calling thread included; the first call that needs the
    /// pool builds it with ``pool_threads`` threads (later values are ignored; a forked
    /// child builds its own).
    #[pyfunction]
    fn run_batch<'py>(
        py: Python<'py>,
        images: Vec<Bound<'py, PyAny>>,
        jobs: Vec<JobSpec<'py>>,
        tables: &Bound<'py, PyAny>,
        shape: &Bound<'py, PyAny>,
        threads: usize,
        pool_threads: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let threads = (threads, pool_threads);
        let inputs = images.iter().map(Input::new).collect::<PyResult<Vec<_>>>()?;
        let images = inputs.iter().map(Input::pixels).collect::<PyResult<Vec<_>>>()?;
        let jobs = jobs.iter().map(parse_job).collect::<PyResult<Vec<_>>>()?;
        let shape: Vec<usize> = extract("shape", "a sequence of non-negative integers", shape)?;
        Ok(if tables.cast::<PyArrayDyn<u16>>().is_ok() {
            run_typed::<u16>(py, &images, &jobs, tables, &shape, threads)?.into_any()
        } else if tables.cast::<PyArrayDyn<u8>>().is_ok() {
            run_typed::<u8>(py, &images, &jobs, tables, &shape, threads)?.into_any()
        } else {
            run_typed::<f32>(py, &images, &jobs, tables, &shape, threads)?.into_any()
        })
    }

    /// A new int64 attention mask of ``shape`` = (..., height, width): frame ``k`` of the
    /// leading axes (C order) 1 on the first ``areas[k] = (h, w)`` rows and columns, 0
    /// elsewhere. Written with the GIL released, streamed to memory when large; a large
    /// mask's memory comes from the pool of freed outputs.
    #[pyfunction]
    fn area_mask<'py>(
        py: Python<'py>,
        shape: &Bound<'py, PyAny>,
        areas: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<i64>>> {
        let shape: Vec<usize> = extract("shape", "a sequence of non-negative integers", shape)?;
        let areas: Vec<(usize, usize)> = extract("areas", "a sequence of (height, width) pairs", areas)?;
        let [lead @ .., height, width] = shape.as_slice() else {
            return Err(fail(
                "shape",
                "at least two dimensions (..., height, width)",
                format!("{shape:?}"),
            ));
        };
        let len = array_len::<i64>(&shape)?;
        let frames: usize = lead.iter().product();
        if areas.len() != frames {
            return Err(fail(
                "areas",
                format!("one (height, width) per frame of shape {shape:?} ({frames})"),
                format!("{} areas", areas.len()),
            ));
        }
        let (mut out, _) = alloc::output::<i64>("shape", len)?;
        detach(py, || transforms::area_mask(&mut out, (*height, *width), &areas))??;
        into_output(py, out, &shape)
    }

    /// Resize (3, H, W) float32 planes to ``size`` = (height, width) like
    /// ``torch.nn.functional.interpolate`` of the (1, 3, H, W) tensor with ``align_corners=False``
    /// and no antialiasing, bit for bit (torch 2.15 on x86-64; the kernel of
    /// Phi-4-multimodal's global view). ``resample`` is a PIL code: 0 (nearest-exact), 2
    /// (bilinear) or 3 (bicubic); ``one_thread``: as torch computes it on one thread (its
    /// bilinear kernel then takes another loop). An unchanged size returns a copy, as
    /// torchvision's ``resize`` returns the image. The GIL is released. Returns a new (3, h,
    /// w) array.
    #[pyfunction]
    #[pyo3(signature = (planes, size, resample, one_thread = false))]
    fn resize_float<'py>(
        py: Python<'py>,
        planes: &Bound<'py, PyAny>,
        size: &Bound<'py, PyAny>,
        resample: i64,
        one_thread: bool,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let expected = "a numpy.ndarray of dtype float32 and shape (3, height, width)";
        let arr = planes
            .cast::<PyArray3<f32>>()
            .map_err(|_| fail("planes", expected, describe(planes)))?;
        let shape = arr.shape();
        if shape[0] != 3 || shape[1] == 0 || shape[2] == 0 {
            return Err(fail("planes", format!("{expected}, non-empty"), describe(planes)));
        }
        let from = (shape[1], shape[2]);
        let to = size_pair("size", size)?;
        if to.0 == 0 || to.1 == 0 {
            return Err(fail("size", "a positive (height, width)", format!("{to:?}")));
        }
        let mode = float_mode("resample", resample)?;
        // SAFETY: as in `rgb_image`, the view does not outlive `planes`.
        let src = standard_layout("planes", unsafe { arr.as_array() })?;
        let values = src.as_slice().expect("standard layout");
        let mut out = alloc::zeroed::<f32>("size", transforms::checked_len("size", &[3, to.0, to.1])?)?;
        detach(py, || {
            torch_float::resize_planes(values, from, &mut out, to, mode, one_thread)
        })??;
        into_chw(py, out, to)
    }

    /// Resize an (H, W, 3) uint8 RGB image to ``size`` = (height, width).
    ///
    /// ``kernel="pillow"``: bit-identical to ``PIL.Image.resize`` with the same filter (of
    /// Pillow 13, or of the Pillow ``follow_pillow`` names). ``"torch"`` / ``"torch-noaa"``:
    /// torchvision's ``resize`` of the uint8 CHW tensor with the interpolation transformers
    /// maps the filter to, with or without antialiasing. ``"torch-float"``: torchvision's ``resize`` of the image as float32
    /// without antialiasing, rounded half to even and clamped back (Molmo2's resize;
    /// nearest, bilinear or bicubic), ``"torch-float-1"`` the same as torch computes it on
    /// one thread. ``resample`` is a name ("nearest", "bilinear",
    /// "bicubic", "lanczos", "box", "hamming") or a PIL code 0..5. The GIL is released; the
    /// input is read in place when C-contiguous.
    #[pyfunction]
    #[pyo3(
        signature = (image, size, resample = None, kernel = "pillow"),
        text_signature = "(image, size, resample='bicubic', kernel='pillow')"
    )]
    fn resize<'py>(
        py: Python<'py>,
        image: &Bound<'py, PyAny>,
        size: &Bound<'py, PyAny>,
        resample: Option<&Bound<'py, PyAny>>,
        kernel: &str,
    ) -> PyResult<Bound<'py, PyArray3<u8>>> {
        let expected =
            "one of 'nearest', 'bilinear', 'bicubic', 'lanczos', 'box', 'hamming' or a PIL code 0..5";
        let code = match resample {
            None => Some(3),
            Some(r) => r.extract::<i64>().ok().or_else(|| {
                let filter = Filter::from_name(&r.extract::<String>().ok()?.to_lowercase())?;
                (0..6).find(|&code| Filter::from_pil_code(code) == Some(filter))
            }),
        }
        .ok_or_else(|| {
            let got = resample.map_or_else(String::new, |r| {
                r.repr().map_or_else(|_| describe(r), |s| s.to_string())
            });
            fail("resample", expected, got)
        })?;
        let src = rgb_image(image)?;
        let from = (src.shape()[0], src.shape()[1]);
        let to = size_pair("size", size)?;
        if to.0 == 0 || to.1 == 0 {
            return Err(fail("size", "a positive (height, width)", format!("{to:?}")));
        }
        if !matches!(
            kernel,
            "pillow" | "torch" | "torch-noaa" | "torch-float" | "torch-float-1"
        ) {
            return Err(fail(
                "kernel",
                "'pillow', 'torch', 'torch-noaa', 'torch-float' or 'torch-float-1'",
                kernel,
            ));
        }
        let resize = resize_kind("resample", kernel, code, to)?;
        let mut out = alloc::zeroed::<u8>("size", transforms::checked_len("size", &[to.0, to.1, 3])?)?;
        let pixels = src.as_slice().expect("standard layout");
        detach(py, || resize.run(pixels, from, &mut out))??;
        Ok(Array::from_shape_vec((to.0, to.1, 3), out)
            .expect("the kernel filled h * w * 3 bytes")
            .into_pyarray(py))
    }
}
