"""Images in API bodies: base64 in, base64 PNG (with infotext) out.

Decoding goes through `mixkit.io.images.load_image`, which reads the header and refuses an
image above the pixel cap before decoding it, so a tiny "decompression bomb" PNG cannot make the
server allocate gigabytes. A base64 field is only ever decoded, never treated as a path or URL.
"""

from __future__ import annotations

import base64
import binascii
import io

from mixkit.io.images import ImageTooLargeError, InvalidImageError, load_image


def base64_payload(field: str, data: object, *, max_bytes: int) -> bytes:
    """The bytes of a base64 image field (optionally a `data:image/...;base64,` URL).

    Whitespace anywhere is dropped first: MIME-style base64 (`base64.encodebytes`, the `base64` CLI, Java's MIME
    encoder) wraps lines every 76 characters, and A1111's `decode_base64_to_image` (a plain `base64.b64decode`)
    accepts it. Any other character outside the base64 alphabet is still refused, where A1111 would silently
    drop it.
    """
    if not isinstance(data, str) or not data.strip():
        raise ValueError(f"{field} must be a non-empty base64-encoded image string.")
    text = data.strip()
    if text.startswith("data:"):
        header, _, text = text.partition(",")
        if ";base64" not in header:
            raise ValueError(f"{field} is a data URL without ';base64'; send the image base64-encoded.")
    text = "".join(text.split())
    if len(text) > max_bytes * 4 // 3 + 4:
        raise ValueError(f"{field} is larger than the {max_bytes:,}-byte image limit; send a smaller image.")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{field} is not valid base64: it holds characters outside the base64 alphabet or is cut "
                         "short; send the PNG or JPEG bytes base64-encoded (line breaks are fine).") from None


def decode_base64_image(field: str, data: object, *, max_pixels: int, max_bytes: int):
    """An RGB PIL image from a base64 string (optionally a `data:image/...;base64,` URL)."""
    raw = base64_payload(field, data, max_bytes=max_bytes)
    try:
        return load_image(raw, max_pixels=max_pixels)
    except ImageTooLargeError:
        raise ValueError(too_many_pixels_message(field, raw, max_pixels)) from None
    except InvalidImageError as error:
        raise ValueError(f"{field}: {error}") from None
    except ValueError as error:  # PIL refusing a header chunk, e.g. a zTXt too large once decompressed
        raise ValueError(unreadable_message(field, error)) from None


def too_many_pixels_message(field: str, raw: bytes, max_pixels: int) -> str:
    """What an API client can do about an image above the server's cap (there is no request field to raise it)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(raw)) as image:  # the header already opened once; no pixels are decoded
            width, height = image.size
    except Image.DecompressionBombError as error:  # beyond PIL's own guard too
        return (f"{field}: {error}; it may be a decompression bomb and is refused (this server's cap for input "
                f"images is {max_pixels:,} pixels).")
    return (f"{field}: the image is {width}x{height} = {width * height:,} pixels, above this server's "
            f"{max_pixels:,}-pixel cap for input images; downscale it before sending it (the server's operator sets "
            "the cap with `mixkit webui --max-image-pixels`).")


def unreadable_message(field: str, error: BaseException) -> str:
    return (f"{field}: the image could not be read ({error}); it is corrupt or crafted. Re-save it with an "
            "ordinary image editor and send it again.")


def encode_png_base64(image, infotext: str | None = None) -> str:
    """Base64 of a PNG holding `infotext` in its `parameters` chunk, as A1111's API returns images."""
    from pipelines.png import infotext_png_info

    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=infotext_png_info(infotext) if infotext else None)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def decode_base64_png_info(field: str, data: object, *, max_bytes: int, max_pixels: int | None = None) -> dict:
    """The text chunks and A1111 infotext of a base64 image, read without decoding its pixels.

    A1111's png-info reads `image.info` of any image PIL opens (PIL's own decompression-bomb guard is the
    only size limit), so no pixel cap applies here unless `max_pixels` is given (the Extras route, which
    decodes the pixels next, passes its cap). A PNG's text chunks, including those after the image data,
    are read from its chunk list (`webui.png_text_chunks`).
    """
    from PIL import Image, UnidentifiedImageError

    raw = base64_payload(field, data, max_bytes=max_bytes)
    try:
        image = Image.open(io.BytesIO(raw))
    except Image.DecompressionBombError as error:
        raise ValueError(f"{field}: {error}; it may be a decompression bomb, and is refused.") from None
    except UnidentifiedImageError:
        raise ValueError(f"{field} is not an image PIL can read (A1111 clients send a base64-encoded PNG or JPEG).") from None
    except (OSError, SyntaxError, ValueError) as error:  # ValueError: a header text chunk PIL refuses
        raise ValueError(unreadable_message(field, error)) from None
    with image:
        if max_pixels is not None and image.width * image.height > max_pixels:
            raise ValueError(too_many_pixels_message(field, raw, max_pixels))
        try:
            infotext = _infotext_without_pixels(image, raw)
        except (OSError, SyntaxError, ValueError) as error:
            raise ValueError(unreadable_message(field, error)) from None
        items = {k: v for k, v in image.info.items() if isinstance(k, str) and isinstance(v, str)}
    return {"infotext": infotext, "items": items}


def _infotext_without_pixels(image, raw: bytes) -> str | None:
    """The infotext of an opened image, adding a PNG's text chunks (also those after the pixels) to `image.info`."""
    from pipelines.infotext_read import infotext_from_image
    from webui.png_text_chunks import read_png_text

    if image.format != "PNG":
        return infotext_from_image(image)  # JPEG/WebP EXIF is read with the header
    png = read_png_text(raw)
    image.info.update(png.texts)
    if png.exif is None:  # PIL's PNG getexif() would decode every pixel to look for a late eXIf chunk
        return png.texts.get("parameters")
    image.info["exif"] = png.exif
    return infotext_from_image(image)
