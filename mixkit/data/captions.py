"""Finding an image's caption, and what to do when it has none.

kohya's convention: `photo.png` is captioned by `photo.txt` (or another extension, `.caption`)
next to it. Without one, kohya falls back to the folder's concept name with a warning; mixkit
lets the user choose that, an empty caption, or a hard error, by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from mixkit.errors import MixkitError
from mixkit.registry import Registry


class MissingCaptionError(MixkitError, ValueError):
    """An image has no caption file and the policy is 'error'."""


def read_caption(image: Path, extension: str = ".txt") -> str | None:
    """The stripped first non-empty content of the caption file next to `image`, or None if absent."""
    caption_file = image.with_suffix(extension)
    if not caption_file.is_file():
        return None
    text = caption_file.read_text(encoding="utf-8", errors="replace").strip()
    # Several lines are several captions in some tools; kohya joins nothing and uses the first line.
    return text.splitlines()[0].strip() if text else ""


MissingCaptionPolicy = Callable[[Path, str], "str"]
MISSING_CAPTION_POLICIES: Registry[MissingCaptionPolicy] = Registry("missing caption policy")


@MISSING_CAPTION_POLICIES.register("folder_name")
def caption_from_folder(image: Path, concept: str) -> str:
    """Use the concept name (kohya's `10_sks dog` -> `sks dog`), as kohya does."""
    return concept


@MISSING_CAPTION_POLICIES.register("empty")
def caption_empty(image: Path, concept: str) -> str:
    """Train the image unconditionally (empty prompt)."""
    return ""


@MISSING_CAPTION_POLICIES.register("error")
def caption_error(image: Path, concept: str) -> str:
    """Refuse: every image must have a caption file."""
    raise MissingCaptionError(
        f"{image} has no caption file {image.with_suffix('.txt').name!r}; write one, or choose "
        f"missing_captions='folder_name' or 'empty' (valid: {', '.join(MISSING_CAPTION_POLICIES.names())})."
    )
