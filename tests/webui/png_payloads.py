"""Reading the base64 PNGs the HTTP API returns, as a client does (requests are built with the server's own
`webui.base64_images.encode_png_base64`, which is what any client's PNG + base64 amounts to)."""

from __future__ import annotations

import base64
import io

from PIL import Image


def decode_png(data: str) -> Image.Image:
    """A response's base64 image, loaded with its text chunks."""
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    image.load()
    return image
