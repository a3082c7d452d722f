"""Finding an image's caption, and what to do when it has none.

kohya's convention: `photo.png` is captioned by `photo<caption_extension>` next to it. kohya's
`--caption_extension` defaults to `.caption`; mixkit's to `.txt`, the extension tagging tools
(WD14 tagger, BLIP captioners in kohya_ss' GUI) write and mixkit always read, so existing mixkit
datasets keep their captions. Without a caption file, kohya falls back to the folder's concept
name with a warning; mixkit lets the user choose that, an empty caption, the file's name (A1111's), or a hard error, by name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from mixkit.errors import MixkitError
from mixkit.registry import Registry


class MissingCaptionError(MixkitError, ValueError):
    """An image has no caption file and the policy is 'error'."""


def caption_path(image: Path, extension: str = ".txt") -> Path:
    """Where `image`'s caption is: its name with the extension replaced (kohya: `splitext(path)[0] + extension`)."""
    return image.with_name(image.stem + extension)


def read_caption(image: Path, extension: str = ".txt") -> str | None:
    """The stripped first non-empty content of the caption file next to `image`, or None if absent."""
    source = caption_path(image, extension)
    if not source.is_file():
        return None
    text = source.read_text(encoding="utf-8", errors="replace").strip()
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
