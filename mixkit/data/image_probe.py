"""Check that an image decodes before training starts, so one bad file cannot stop a run mid-way."""

from __future__ import annotations

from pathlib import Path

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff")


def is_image_file(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES and not path.name.startswith(".")


def probe_image(path: Path) -> tuple[int, int] | str:
    """(width, height) if the image fully decodes, else the reason it does not (a string)."""
    from mixkit.io.images import InvalidImageError, load_image

    try:
        image = load_image(path)
    except (InvalidImageError, OSError, ValueError) as error:
        return str(error)
    return image.size
