"""`/sdapi/v1/extra-single-image`'s metadata, as A1111's `run_postprocessing` keeps it.

The result PNG carries the source image's text chunks (its `parameters` too when the source held them in
EXIF, as a JPEG does) plus a `postprocessing` chunk naming what was done ("Postprocess upscale by: 2.0,
Postprocess upscaler: Lanczos"), so PNG Info on an upscaled image still shows how it was generated.
`html_info` is that postprocessing text as HTML.
"""

from __future__ import annotations

import base64
import html
import io

from pipelines.infotext import quote_value


def source_text_chunks(data: str, *, max_pixels: int, max_bytes: int) -> dict[str, str]:
    """The text chunks of the base64 source image, with its infotext under `parameters` wherever it was stored."""
    from webui.base64_images import decode_base64_png_info

    read = decode_base64_png_info("image", data, max_pixels=max_pixels, max_bytes=max_bytes)
    chunks = dict(read["items"])
    if read["infotext"]:
        chunks["parameters"] = read["infotext"]
    return chunks


def postprocessing_text(upscale_by: float, upscaler: str) -> str:
    """A1111's postprocessing infotext for an upscale by a factor (the factor written as the float it is)."""
    # str(float): A1111's request model holds the factor as a float, so 2 is written "2.0".
    values = {"Postprocess upscale by": str(float(upscale_by)), "Postprocess upscaler": upscaler}
    return ", ".join(f"{key}: {quote_value(value)}" for key, value in values.items())


def plaintext_to_html(text: str) -> str:
    """Text as one HTML paragraph, lines joined by <br>, as A1111's `html_info`."""
    return "<p>" + "<br>\n".join(html.escape(line) for line in text.split("\n")) + "</p>"


def encode_png_with_chunks(image, chunks: dict[str, str]) -> str:
    """Base64 PNG of the image holding every given text chunk (UTF-8 where needed)."""
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    for key, value in chunks.items():
        if value.isascii():
            info.add_text(key, value)
        else:
            info.add_itxt(key, value)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=info)
    return base64.b64encode(buffer.getvalue()).decode("ascii")
