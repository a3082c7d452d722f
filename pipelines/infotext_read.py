"""Reading the A1111 infotext back from an image file.

A1111 stores it as the PNG text chunk `parameters` (tEXt or iTXt) and, for JPEG/WebP/AVIF, in the
EXIF `UserComment` tag written by piexif as "UNICODE\\0" + UTF-16 big-endian text.
"""

from __future__ import annotations

import os
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from pipelines.png import INFOTEXT_KEY

EXIF_IFD_POINTER = 0x8769  # the Exif sub-IFD, where UserComment lives
EXIF_USER_COMMENT = 0x9286
USER_COMMENT_PREFIX_SIZE = 8  # EXIF 2.3 table 9: an 8-byte character code, then the text


def decode_user_comment(data: bytes | str) -> str | None:
    """Decode an EXIF UserComment value; None when it is empty or in an unknown character code."""
    if isinstance(data, str):  # some writers store plain text instead of the prefixed form
        return data.rstrip("\x00") or None
    prefix, body = data[:USER_COMMENT_PREFIX_SIZE], data[USER_COMMENT_PREFIX_SIZE:]
    if prefix == b"UNICODE\x00":
        # piexif (used by A1111) writes big-endian; a few tools write the file's byte order.
        # ASCII-range text in big-endian starts with a zero byte, so that tells the two apart.
        encoding = "utf-16-le" if len(body) >= 2 and body[0] != 0 and body[1] == 0 else "utf-16-be"
        text = body.decode(encoding, errors="replace")
    elif prefix == b"ASCII\x00\x00\x00":
        text = body.decode("ascii", errors="replace")
    elif prefix == b"JIS\x00\x00\x00\x00\x00":
        text = body.decode("shift_jis", errors="replace")
    else:
        return None
    return text.rstrip("\x00") or None


def infotext_from_image(image: Image.Image) -> str | None:
    """The infotext of an opened image: PNG `parameters` chunk first, then EXIF UserComment."""
    text = image.info.get(INFOTEXT_KEY)
    if isinstance(text, str):
        return str(text)  # iTXt values are a str subclass carrying language tags
    user_comment = image.getexif().get_ifd(EXIF_IFD_POINTER).get(EXIF_USER_COMMENT)
    if isinstance(user_comment, (bytes, str)):
        return decode_user_comment(user_comment)
    return None


def read_infotext(source: str | os.PathLike | Image.Image) -> str | None:
    """The A1111 infotext stored in an image file (or opened image), or None if it has none.

    Raises FileNotFoundError for a missing file and ValueError for a folder or a file that is not
    a readable image, each naming the path.
    """
    if isinstance(source, Image.Image):
        return infotext_from_image(source)
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"source must be a path or a PIL image, got {type(source).__name__}")
    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"Image file {str(path)!r} does not exist.")
    if path.is_dir():
        raise ValueError(f"{str(path)!r} is a folder, not an image file.")
    try:
        with Image.open(path) as image:
            # PNG text chunks after the image data are only seen once the image is read.
            image.load()
            return infotext_from_image(image)
    except Image.DecompressionBombError as error:
        raise ValueError(f"Image file {str(path)!r} is refused by Pillow's decompression-bomb guard: {error}") from error
    except UnidentifiedImageError as error:
        raise ValueError(f"{str(path)!r} is not an image file Pillow can read (PNG, JPEG, WebP, ...).") from error
    except PermissionError as error:
        raise PermissionError(f"Cannot read image file {str(path)!r}: permission denied.") from error
    except (OSError, SyntaxError) as error:
        raise ValueError(f"Image file {str(path)!r} is damaged or truncated and cannot be read: {error}") from error
