"""Reading user images into plain 8-bit RGB, refusing files that are not safe or not images.

Models expect RGB pixels the right way up, but real files arrive as CMYK JPEGs, 16-bit PNGs,
palette GIFs, RGBA with transparency, or phone photos whose orientation lives in an EXIF tag.
Everything is normalised here once. Sizes are checked against our own pixel cap after reading
the header and before decoding, so a decompression bomb (a tiny file that decodes to gigabytes)
is refused without allocating its pixels.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Iterable

from mixkit.errors import MixkitError

DEFAULT_MAX_PIXELS = 64_000_000
"""64 megapixels: above any camera or generated image a VLM needs, far below a bomb."""

TRANSPARENT_BACKGROUND = (255, 255, 255)


class InvalidImageError(MixkitError, ValueError):
    """A file or object is not a readable image (not an image, truncated, unsupported)."""


class ImageTooLargeError(InvalidImageError):
    """An image has more pixels than the caller's cap; refused before decoding."""


def _describe(source: Any) -> str:
    if isinstance(source, (str, Path)):
        return f"image file {str(source)!r}"
    return f"image {type(source).__name__}"


def _open(source: Any, max_pixels: int):
    from PIL import Image, UnidentifiedImageError

    if isinstance(source, Image.Image):
        return source
    if isinstance(source, (bytes, bytearray)):
        stream: Any = io.BytesIO(source)
    elif isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"{_describe(source)} does not exist or is not a file; check the path")
        stream = path
    else:
        raise TypeError(
            f"expected an image path, bytes, PIL.Image or numpy array, got {type(source).__name__}"
        )
    try:
        return Image.open(stream)
    except Image.DecompressionBombError as error:
        raise ImageTooLargeError(
            f"{_describe(source)} declares more pixels than the {max_pixels:,}-pixel cap ({error}); "
            "it may be a decompression bomb. Pass a larger max_pixels only if you trust the file."
        ) from None
    except UnidentifiedImageError:
        raise InvalidImageError(
            f"{_describe(source)} is not an image format Pillow can read; pass a PNG, JPEG, WebP, GIF, BMP or TIFF file"
        ) from None
    except (OSError, SyntaxError) as error:
        raise InvalidImageError(f"{_describe(source)} has an unreadable header ({error}); it may be truncated or corrupt") from None
    except ValueError as error:  # e.g. a PNG text chunk above PngImagePlugin.MAX_TEXT_CHUNK once decompressed
        raise InvalidImageError(f"{_describe(source)} could not be read ({error}); it may be corrupt or crafted") from None


def _greyscale_to_8bit(image, sixteen_bit: bool, what: str):
    """A 16-bit, 32-bit integer or float greyscale image as mode L; InvalidImageError when its values fit no scale.

    16-bit sources (modes I;16*, or I from a 16-bit PNG in older Pillow) are scaled 0..65535 onto 0..255 instead of
    clipped (which turns them white). Other mode I images (a 32-bit TIFF, an int32 array, `convert("I")` of an 8- or
    16-bit image) are read as Pillow's `convert("L")` reads them when their values are 0..255, and as 16-bit when
    they go above 255 but not 65535; floats as numpy float arrays are, in [0, 1]. Other ranges are refused rather
    than clipped to white or black without a word.
    """
    import numpy as np
    from PIL import Image

    values = np.asarray(image, dtype=np.float64)
    low, high = (float(values.min()), float(values.max())) if np.isfinite(values).all() else (np.nan, np.nan)
    if image.mode.startswith("I") and (sixteen_bit or 0.0 <= low <= high <= 65535.0 and high > 255.0):
        return Image.fromarray(np.clip(np.rint(values / 257.0), 0, 255).astype("uint8"), mode="L")
    if image.mode == "F":
        if not 0.0 <= low <= high <= 1.0:
            raise InvalidImageError(
                f"{what} is a mode F (float) image with values from {low:g} to {high:g}; float images must be in "
                "[0, 1], as float arrays are. For 0..255 values (what convert('F') of an 8-bit image gives) pass "
                "image.convert('L'), which reads them as Pillow does; otherwise rescale to [0, 1]")
        return Image.fromarray(np.rint(values * 255.0).astype("uint8"), mode="L")
    if not 0.0 <= low <= high <= 255.0:
        raise InvalidImageError(
            f"{what} is a mode {image.mode} (32-bit integer) image with values from {low:g} to {high:g}, outside "
            "both 8-bit (0..255) and 16-bit (0..65535) ranges; rescale it into one of them, or pass "
            "image.convert('L') to clip to 0..255 as Pillow does")
    return Image.fromarray(values.astype("uint8"), mode="L")


def _to_8bit_rgb(image, sixteen_bit: bool, what: str):
    from PIL import Image

    if image.mode in ("I", "F") or image.mode.startswith("I;16"):
        image = _greyscale_to_8bit(image, sixteen_bit or image.mode.startswith("I;16"), what)
    if image.mode == "P":
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
    if image.mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, TRANSPARENT_BACKGROUND + (255,))
        image = Image.alpha_composite(background, rgba)
    return image.convert("RGB") if image.mode != "RGB" else image


def _from_array(array):
    """A PIL image from one (H, W[, C]) numpy array: integers as Pillow reads them, floats in [0, 1] scaled to 0..255.

    Floats are what diffusers returns for `output_type="np"`; they are scaled and rounded exactly as
    diffusers' own `numpy_to_pil` does, so a generated image survives the round trip unchanged.
    Floats outside [0, 1] are refused rather than clipped: they follow another convention ([-1, 1]
    as SD's VAE decodes, or 0..255 floats) that clipping would silently wash out.
    """
    import numpy as np
    from PIL import Image

    shape = tuple(array.shape)
    what = f"numpy array of shape {shape} and dtype {array.dtype}"
    if array.ndim not in (2, 3) or (array.ndim == 3 and shape[-1] not in (1, 2, 3, 4)) or array.size == 0:
        raise InvalidImageError(
            f"{what} is not one image; pass (H, W) or (H, W, C) with C in 1..4 (one image of a batch is "
            "images[0]; a channels-first (C, H, W) array is array.transpose(1, 2, 0))")
    if np.issubdtype(array.dtype, np.floating):
        if not np.isfinite(array).all():
            raise InvalidImageError(f"{what} contains NaN or infinite values; it is not an image")
        low, high = float(array.min()), float(array.max())
        if low < 0.0 or high > 1.0:
            raise InvalidImageError(
                f"{what} has values from {low:g} to {high:g}; float images must be in [0, 1] (diffusers' "
                "output_type='np'). Rescale [-1, 1] values with (array + 1) / 2, or pass 0..255 values as uint8")
        array = (array * 255).round().astype(np.uint8)
    if array.ndim == 3 and shape[-1] == 1:
        array = array[..., 0]  # Pillow has no (H, W, 1) mode; diffusers squeezes to greyscale too
    try:
        return Image.fromarray(array)
    except (TypeError, ValueError) as error:
        raise InvalidImageError(
            f"{what} is not an image Pillow can read ({error}); pass uint8 values 0..255 or floats in [0, 1]") from None


def open_image(source: Any, *, max_pixels: int = DEFAULT_MAX_PIXELS):
    """One image decoded as it is stored: its mode, transparency and EXIF orientation kept (what `load_image`
    reads before it turns the image upright 8-bit RGB).

    Same sources, pixel cap and errors as `load_image`. For what flattening would destroy: an inpainting mask
    carries its strokes in the alpha channel (A1111's canvas), which `load_image` composites on white.
    """
    if not isinstance(max_pixels, int) or max_pixels < 1:
        raise ValueError(f"max_pixels must be a positive int, got {max_pixels!r}")
    if type(source).__module__ == "numpy":
        source = _from_array(source)
    image = _open(source, max_pixels)
    width, height = image.size
    if width * height > max_pixels:
        raise ImageTooLargeError(
            f"{_describe(source)} is {width}x{height} = {width * height:,} pixels, above the {max_pixels:,}-pixel cap; "
            "downscale it or pass a larger max_pixels if you trust the file"
        )
    try:
        image.seek(0)
        image.load()
    except (OSError, SyntaxError, ValueError) as error:
        raise InvalidImageError(f"{_describe(source)} could not be decoded ({error}); it may be truncated or corrupt") from None
    return image


def load_image(source: Any, *, max_pixels: int = DEFAULT_MAX_PIXELS):
    """One image as an upright 8-bit RGB `PIL.Image`.

    `source` is a path, raw bytes, a `PIL.Image` or an (H, W[, C]) numpy array: uint8, or float in
    [0, 1] as diffusers returns with `output_type="np"`.
    Transparent pixels are composited on white; EXIF orientation is applied.
    """
    from PIL import ImageOps

    image = open_image(source, max_pixels=max_pixels)
    what = _describe(source)
    try:
        # before exif_transpose, whose copy drops `format`: Pillow < 10 opened 16-bit greyscale PNGs as mode I
        sixteen_bit = image.mode.startswith("I;16") or (image.mode == "I" and getattr(image, "format", None) == "PNG")
        image = ImageOps.exif_transpose(image)
        return _to_8bit_rgb(image, sixteen_bit, what)
    except InvalidImageError:
        raise
    except (OSError, SyntaxError, ValueError) as error:
        raise InvalidImageError(f"{what} could not be decoded ({error}); it may be truncated or corrupt") from None


def load_images(sources: Iterable[Any], *, max_pixels: int = DEFAULT_MAX_PIXELS) -> list:
    """Several images via `load_image`; a single path or image is accepted as a batch of one."""
    from PIL import Image

    if isinstance(sources, (str, Path, bytes, Image.Image)) or type(sources).__module__ == "numpy":
        sources = [sources]
    elif not isinstance(sources, Iterable):  # None: "'NoneType' object is not iterable" said nothing of images
        raise TypeError(f"expected an image (path, bytes, PIL.Image or numpy array) or a list of them, "
                        f"got {type(sources).__name__}")
    images = [load_image(source, max_pixels=max_pixels) for source in sources]
    if not images:
        raise ValueError("no images given: pass at least one image path or PIL.Image")
    return images
