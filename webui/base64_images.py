"""Images in API bodies: base64 in, base64 PNG (with infotext) out.

Decoding goes through `mixkit.io.images.load_image`, which reads the header and refuses an
image above the pixel cap before decoding it, so a tiny "decompression bomb" PNG cannot make the
server allocate gigabytes. A base64 field is only ever decoded, never treated as a path or URL.
"""

from __future__ import annotations

import base64
import binascii
import io

from mixkit.io.images import InvalidImageError, load_image


def decode_base64_image(field: str, data: object, *, max_pixels: int, max_bytes: int):
    """An RGB PIL image from a base64 string (optionally a `data:image/...;base64,` URL)."""
    if not isinstance(data, str) or not data.strip():
        raise ValueError(f"{field} must be a non-empty base64-encoded image string.")
    text = data.strip()
    if text.startswith("data:"):
        header, _, text = text.partition(",")
        if ";base64" not in header:
            raise ValueError(f"{field} is a data URL without ';base64'; send the image base64-encoded.")
    if len(text) > max_bytes * 4 // 3 + 4:
        raise ValueError(f"{field} is larger than the {max_bytes:,}-byte image limit; send a smaller image.")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{field} is not valid base64 (A1111 clients send a base64-encoded PNG or JPEG).") from None
    try:
        return load_image(raw, max_pixels=max_pixels)
    except InvalidImageError as error:
        raise ValueError(f"{field}: {error}") from None


def encode_png_base64(image, infotext: str | None = None) -> str:
    """Base64 of a PNG holding `infotext` in its `parameters` chunk, as A1111's API returns images."""
    from pipelines.png import infotext_png_info

    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=infotext_png_info(infotext) if infotext else None)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def decode_base64_png_info(field: str, data: object, *, max_pixels: int, max_bytes: int) -> dict:
    """The text chunks and A1111 infotext of a base64 image, without keeping its pixels.

    Pixels are decoded (text chunks after the image data are only read then), but only after the
    header's size passed the pixel cap.
    """
    from PIL import Image, UnidentifiedImageError

    from pipelines.infotext_read import infotext_from_image

    decode_base64_image(field, data, max_pixels=max_pixels, max_bytes=max_bytes)  # validates type, size and pixels
    text = data.strip()
    if text.startswith("data:"):
        text = text.partition(",")[2]
    try:
        with Image.open(io.BytesIO(base64.b64decode(text, validate=True))) as image:
            image.load()
            items = {k: v for k, v in image.info.items() if isinstance(k, str) and isinstance(v, str)}
            return {"infotext": infotext_from_image(image), "items": items}
    except (UnidentifiedImageError, OSError, SyntaxError) as error:
        raise ValueError(f"{field} could not be read as an image: {error}") from None
