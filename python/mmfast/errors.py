"""The exceptions mmfast raises.

Pure Python, so :mod:`mmfast.reference` can raise the same errors without the
compiled core. The native module raises these very classes.
"""

__all__ = [
    "ImageDecodeError",
    "ImageTooLargeError",
    "MmfastError",
    "UnsupportedModelError",
    "VideoDecodeError",
]


class MmfastError(ValueError):
    """Base class: an argument or input mmfast cannot process.

    The message names the argument, what was expected and what came in.
    """


class ImageDecodeError(MmfastError):
    """Image bytes that are corrupt, truncated or in an unsupported format."""


class ImageTooLargeError(MmfastError):
    """An image whose width x height exceeds ``max_pixels``; raised before pixels are allocated."""


class UnsupportedModelError(MmfastError):
    """A model id or ``image_processor_type`` mmfast has no processor for."""


class VideoDecodeError(MmfastError):
    """A video file that is corrupt, truncated, has no video stream or cannot be sampled."""
