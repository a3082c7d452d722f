"""The text chunks (tEXt, zTXt, iTXt) and EXIF (eXIf) of a PNG, read from its bytes without decoding a pixel.

PIL only reads the chunks that come *after* the image data once every pixel is decoded
(`Image.load`), so a 25-megapixel photo would be decoded (and had to pass the pixel cap) just to
show its infotext. Walking the chunk list is cheap and needs no cap: A1111's png-info reads any
image PIL opens. Values are decoded as PIL's PngImagePlugin decodes them (tEXt/zTXt latin-1,
iTXt UTF-8, a later chunk with the same keyword wins) and compressed chunks obey PIL's
`MAX_TEXT_CHUNK` / `MAX_TEXT_MEMORY` limits, so `image.info` and this agree.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EXIF_HEADER = b"Exif\x00\x00"  # PIL's info["exif"] carries it; the eXIf chunk does not
_CHUNK_HEAD = struct.Struct(">I4s")
_CRC_BYTES = 4


class PngTextError(ValueError):
    """A text chunk that PIL would refuse too (too large once decompressed, or corrupt)."""


@dataclass
class PngText:
    texts: dict[str, str] = field(default_factory=dict)
    exif: bytes | None = None  # as PIL's info["exif"]: with the "Exif\0\0" header


def read_png_text(raw: bytes) -> PngText:
    """Every text chunk and the eXIf chunk of the PNG in `raw`; stops quietly at a truncated chunk, as PIL does."""
    from PIL.PngImagePlugin import MAX_TEXT_CHUNK, MAX_TEXT_MEMORY

    found = PngText()
    text_bytes = 0
    position = len(PNG_SIGNATURE) if raw.startswith(PNG_SIGNATURE) else len(raw)
    while position + _CHUNK_HEAD.size <= len(raw):
        length, kind = _CHUNK_HEAD.unpack_from(raw, position)
        start = position + _CHUNK_HEAD.size
        if kind == b"IEND" or start + length > len(raw):
            break
        data = raw[start:start + length]
        position = start + length + _CRC_BYTES
        if kind == b"eXIf":
            found.exif = EXIF_HEADER + data
            continue
        decoded = _text_chunk(kind, data, MAX_TEXT_CHUNK)
        if decoded is not None:
            keyword, value = decoded
            text_bytes += len(value)
            if MAX_TEXT_MEMORY and text_bytes > MAX_TEXT_MEMORY:
                raise PngTextError(f"its text chunks hold more than {MAX_TEXT_MEMORY:,} bytes (PIL's limit)")
            found.texts[keyword] = value
    return found


def _text_chunk(kind: bytes, data: bytes, max_chunk: int) -> tuple[str, str] | None:
    """(keyword, text) of a tEXt/zTXt/iTXt chunk; None for other chunks and for iTXt PIL would skip."""
    if kind == b"tEXt":
        keyword, _, value = data.partition(b"\0")
        return _latin1_keyword(keyword), value.decode("latin-1", "replace")
    if kind == b"zTXt":
        keyword, _, rest = data.partition(b"\0")
        if rest and rest[0] != 0:  # PIL refuses any compression method but 0 (zlib)
            raise PngTextError(f"its zTXt chunk {keyword[:80]!r} uses an unknown compression method")
        try:
            value = _inflate(keyword, rest[1:], max_chunk)
        except zlib.error as error:
            raise PngTextError(f"its zTXt chunk {keyword[:80]!r} could not be decompressed ({error})") from None
        return _latin1_keyword(keyword), value.decode("latin-1", "replace")
    if kind == b"iTXt":
        return _itxt(data, max_chunk)
    return None


def _itxt(data: bytes, max_chunk: int) -> tuple[str, str] | None:
    keyword, separator, rest = data.partition(b"\0")
    if not separator or len(rest) < 2:
        return None
    compressed, method, rest = rest[0], rest[1], rest[2:]
    parts = rest.split(b"\0", 2)
    if len(parts) != 3:
        return None
    value = parts[2]
    if compressed:
        if method != 0:
            return None
        try:
            value = _inflate(keyword, value, max_chunk)
        except zlib.error:
            return None  # PIL skips an iTXt chunk whose zlib stream is broken
    try:
        return keyword.decode("latin-1", "strict"), value.decode("utf-8", "strict")
    except UnicodeError:
        return None  # PIL skips an iTXt chunk that is not UTF-8


def _inflate(keyword: bytes, data: bytes, max_chunk: int) -> bytes:
    """zlib-decompress at most `max_chunk` bytes (raises zlib.error on a broken stream, PngTextError beyond)."""
    inflater = zlib.decompressobj()
    text = inflater.decompress(data, max_chunk)
    if inflater.unconsumed_tail:
        raise PngTextError(f"its compressed text chunk {keyword[:80]!r} decompresses to more than {max_chunk:,} bytes "
                           "(PIL's MAX_TEXT_CHUNK limit)")
    return text


def _latin1_keyword(keyword: bytes) -> str:
    return keyword.decode("latin-1", "strict")
