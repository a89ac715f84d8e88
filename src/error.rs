//! The one error type of the pixel kernels.

use thiserror::Error;

/// Why a kernel refused its input.
///
/// Every message names the argument, what was expected and what came in, so
/// the Python layer can pass it on unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TransformError {
    /// An argument has the wrong shape, length or value.
    #[error("{arg}: expected {expected}, got {got}")]
    InvalidArgument {
        /// The argument's name, as the Python caller wrote it.
        arg: &'static str,
        /// What the argument must be.
        expected: String,
        /// What came in.
        got: String,
    },
    /// A size whose element or byte count does not fit in memory addressing.
    #[error("{arg}: {what} overflows the address space")]
    Overflow {
        /// The argument's name, as the Python caller wrote it.
        arg: &'static str,
        /// The quantity that overflowed.
        what: String,
    },
    /// A buffer the allocator could not provide.
    #[error("{arg}: cannot allocate {bytes} bytes")]
    OutOfMemory {
        /// The argument whose size asked for it.
        arg: &'static str,
        /// The size asked for.
        bytes: usize,
    },
}

/// Shorthand for [`TransformError::InvalidArgument`].
pub(crate) fn invalid(arg: &'static str, expected: impl Into<String>, got: impl ToString) -> TransformError {
    TransformError::InvalidArgument {
        arg,
        expected: expected.into(),
        got: got.to_string(),
    }
}
