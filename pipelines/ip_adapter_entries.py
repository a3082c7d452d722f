"""How a per-adapter IP-Adapter argument (reference images, masks) is given: one picture, a flat list of pictures
for a single adapter, or one entry per adapter. Shared by the image and the mask checks so both accept the same
shapes."""

from __future__ import annotations

from typing import Any


def is_pil_image(value: Any) -> bool:
    from PIL import Image

    return isinstance(value, Image.Image)


def entries_per_adapter(value: Any, adapters: int) -> list | None:
    """The argument as one entry per adapter (a flat list of pictures with one adapter is that adapter's entry);
    None when it is neither a picture nor a non-empty list, for the caller's own error. The count is the caller's
    to check, with its own words."""
    if is_pil_image(value):
        return [value]
    if isinstance(value, (list, tuple)) and value:
        entries = list(value)
        if adapters == 1 and all(is_pil_image(item) for item in entries):
            return [entries]  # several pictures for the one adapter
        return entries
    return None
