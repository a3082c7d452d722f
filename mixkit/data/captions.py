"""Finding an image's caption, and what to do when it has none.

kohya's convention: `photo.png` is captioned by `photo<caption_extension>` next to it. kohya's
`--caption_extension` defaults to `.caption`; mixkit's to `.txt`, the extension tagging tools
(WD14 tagger, BLIP captioners in kohya_ss' GUI) write and mixkit always read, so existing mixkit
datasets keep their captions. Without a caption file, kohya falls back to the folder's concept
name with a warning; mixkit lets the user choose that, an empty caption, the file's name (A1111's), or a hard error, by name.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path
from typing import Callable

from mixkit.errors import MixkitError
from mixkit.registry import Registry


class MissingCaptionError(MixkitError, ValueError):
    """An image has no caption file and the policy is 'error'."""


class CaptionEncodingError(MixkitError, ValueError):
    """A caption file is neither UTF-8 nor marked (by a byte-order mark) as UTF-16 or UTF-32."""


# Byte-order marks and the encoding each announces; UTF-32's before UTF-16's, whose little-endian mark is a prefix
# of UTF-32's. Windows Notepad's "Unicode" is UTF-16 LE with a mark, its "UTF-8" (before 2019) UTF-8 with one.
_MARKED_ENCODINGS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                     (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def decode_caption(data: bytes, source: Path) -> str:
    """The text of a caption file: UTF-8, or the encoding its byte-order mark names (the mark itself dropped).

    Anything else is refused rather than guessed: decoding it as UTF-8 with replacement characters used to train
    a UTF-16 caption as "s\\x00k\\x00s\\x00..." and "café" in Latin-1 as "caf\\ufffd", silently (kohya stops at such
    a file too)."""
    encoding = next((name for mark, name in _MARKED_ENCODINGS if data.startswith(mark)), "utf-8")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        raise CaptionEncodingError(
            f"caption file {source} is not {encoding.upper().replace('-SIG', '')} text (byte {error.start} is "
            f"{data[error.start:error.start + 1]!r}: {error.reason}); captions are read as UTF-8 (UTF-16 with a "
            "byte-order mark too). Save it as UTF-8, e.g. `iconv -f latin1 -t utf-8`, and start the run again."
        ) from None


def caption_path(image: Path, extension: str = ".txt") -> Path:
    """Where `image`'s caption is: its name with the extension replaced (kohya: `splitext(path)[0] + extension`)."""
    return image.with_name(image.stem + extension)


def read_caption(image: Path, extension: str = ".txt") -> str | None:
    """The stripped first non-empty content of the caption file next to `image`, or None if absent."""
    source = caption_path(image, extension)
    if not source.is_file():
        return None
    text = decode_caption(source.read_bytes(), source).strip()
    # Several lines are several captions in some tools; kohya joins nothing and uses the first line.
    return text.splitlines()[0].strip() if text else ""


# (image, concept, caption extension) -> the caption to train with.
MissingCaptionPolicy = Callable[[Path, str, str], "str"]
MISSING_CAPTION_POLICIES: Registry[MissingCaptionPolicy] = Registry("missing caption policy")


@MISSING_CAPTION_POLICIES.register("folder_name")
def caption_from_folder(image: Path, concept: str, extension: str = ".txt") -> str:
    """Use the concept name (kohya's `10_sks dog` -> `sks dog`), as kohya does."""
    return concept


@MISSING_CAPTION_POLICIES.register("empty")
def caption_empty(image: Path, concept: str, extension: str = ".txt") -> str:
    """Train the image unconditionally (empty prompt)."""
    return ""


@MISSING_CAPTION_POLICIES.register("file_name")
def caption_from_file_name(image: Path, concept: str, extension: str = ".txt") -> str:
    """Use the image's file name without its extension and leading numbering (`003-a red ball.png` -> `a red ball`),
    as A1111's Train tab captions an image without a caption file (its `[filewords]`)."""
    return re.sub(r"^[-\d]+\s*", "", image.stem).strip()


@MISSING_CAPTION_POLICIES.register("error")
def caption_error(image: Path, concept: str, extension: str = ".txt") -> str:
    """Refuse: every image must have a caption file."""
    other = ".caption" if extension != ".caption" else ".txt"
    raise MissingCaptionError(
        f"{image} has no caption file {caption_path(image, extension).name!r} (caption_extension={extension!r}); "
        f"write one, set caption_extension to the extension your captions have (like {other!r}), or choose "
        f"missing_captions='folder_name' or 'empty' (valid: {', '.join(MISSING_CAPTION_POLICIES.names())})."
    )
