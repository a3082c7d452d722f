"""Reading one image input of an app: a PIL image, a file path, an http(s) URL or a numpy array.

Every form goes through `mixkit.io.images.load_image`, so the same picture gives the same pixels
however it is passed: upright (EXIF orientation applied), transparency composited on white, the
pixel cap enforced on what is still to be decoded (files, bytes, URLs), not on pixels already in
memory. (A PIL image used to skip this and lose its alpha to black in the tasks' `convert("RGB")`;
diffusers' `load_image` normalises PIL inputs too.) URLs are fetched because PaddleMIX's examples
pass them (`image="https://…/mugs.png"`); offline, the error says so.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

URL_SCHEMES = ("http://", "https://")
URL_TIMEOUT_SECONDS = 30
MAX_URL_BYTES = 64 * 1024 * 1024
"""64 MiB: more than any photo; a server sending more is refused rather than read into memory."""


def is_image_url(value: Any) -> bool:
    return isinstance(value, str) and value.lower().startswith(URL_SCHEMES)


def fetch_image_bytes(url: str, *, timeout: float = URL_TIMEOUT_SECONDS, max_bytes: int = MAX_URL_BYTES) -> bytes:
    """The body of an http(s) URL; ValueError naming the URL and what to do when it cannot be fetched."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={"User-Agent": "mixkit-appflow"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (http/https only, checked)
            body = response.read(max_bytes + 1)
    except urllib.error.HTTPError as error:
        raise ValueError(f"image URL {url!r} answered HTTP {error.code} ({error.reason}); check the URL") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise ValueError(f"image URL {url!r} could not be fetched ({reason}); without network access download the "
                         "image elsewhere and pass its file path or a PIL image") from None
    if len(body) > max_bytes:
        raise ValueError(f"image URL {url!r} sent more than {max_bytes:,} bytes; download it yourself if you trust it")
    return body


def _pixel_cap(value: Any) -> int:
    """The default cap for what is still to be decoded (a path, bytes, a lazily opened `Image.open` with its tiles
    pending); none for pixels already in memory, which diffusers' load_image and transformers' processors take at
    any size and refusing protects nothing (the captioner resizes them to 224 px anyway)."""
    from PIL import Image

    from mixkit.io.images import DEFAULT_MAX_PIXELS

    if isinstance(value, Image.Image) and not getattr(value, "tile", None):
        return max(DEFAULT_MAX_PIXELS, value.width * value.height)
    if type(value).__module__ == "numpy" and getattr(value, "ndim", 0) >= 2:
        return max(DEFAULT_MAX_PIXELS, int(value.shape[0]) * int(value.shape[1]))
    return DEFAULT_MAX_PIXELS


SOURCE_PATH_KEY = "appflow_source_path"
"""`image.info` key holding the file an image input was read from (LabelMe's `imagePath` defaults to its name)."""


def read_image_input(value: Any, where: str) -> Any:
    """One image input as an upright 8-bit RGB PIL image; ValueError naming `where` when it is not one.

    A value that is none of the image forms is returned unchanged, for the port check to name its type. An image
    read from a file keeps that file's path in `image.info[SOURCE_PATH_KEY]`."""
    from PIL import Image

    from mixkit.io.images import load_image

    image = _read(value, where, load_image)
    if isinstance(image, Image.Image) and isinstance(value, (str, os.PathLike)) and not is_image_url(value):
        image.info[SOURCE_PATH_KEY] = os.fspath(value)
    return image


def read_mask_input(value: Any, where: str) -> Any:
    """One inpainting mask input as an 8-bit greyscale image (white = repaint), read as A1111 reads masks: a mask
    with transparency carries its strokes in the alpha channel (A1111's canvas: opaque strokes on a transparent
    layer), any other mask is its grey levels (`pipelines.inpaint_mask.binary_mask`).

    The same forms, cap and errors as `read_image_input`, but never flattened on white first: that turned a
    transparent mask into "repaint everything", so the whole picture was repainted instead of the strokes."""
    from mixkit.io.images import open_image
    from pipelines.inpaint_mask import binary_mask

    return _read(value, where, lambda source, max_pixels: binary_mask(open_image(source, max_pixels=max_pixels)))


def _read(value: Any, where: str, reader: Any) -> Any:
    """`reader(source, max_pixels=...)` on one image input of any form, its errors naming `where`."""
    from PIL import Image

    from mixkit.io.images import ImageTooLargeError

    if isinstance(value, Image.Image) and min(value.size) <= 0:
        # An empty image would fail deep inside a model (a division by its size).
        raise ValueError(f"{where} is an empty {value.size[0]}x{value.size[1]} image; pass an image at least 1 pixel "
                         "wide and high.")
    if is_image_url(value):
        try:
            value = fetch_image_bytes(value)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
    elif isinstance(value, os.PathLike):
        value = Path(value)
    elif not (isinstance(value, (str, bytes, Image.Image)) or type(value).__module__ == "numpy"):
        return value
    try:
        return reader(value, max_pixels=_pixel_cap(value))
    except ImageTooLargeError as error:
        # AppFlow has no max_pixels option: a file the user trusts is opened and decoded by the user instead
        advice = str(error).split(";")[0]
        raise ValueError(f"{where}: {advice}; downscale it, or if you trust it, open and decode it yourself "
                         "(image = Image.open(path); image.load()) and pass the PIL image: pixels already in memory "
                         "are not capped.") from None
    except (OSError, ValueError, TypeError) as error:
        raise ValueError(f"{where}: {error}") from None
