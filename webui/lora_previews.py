"""Preview images for LoRA cards, found the way A1111 finds them: an image next to the LoRA file.

For `style.safetensors` A1111 looks for `style.png`, `style.preview.png`, then the same with
`.jpg`, `.jpeg`, `.webp`. A request names a LoRA, never a file: the name is looked up among the
library's entries, and the image is used only if its real path (symlinks followed) is inside
the LoRA folder, so no request can make the server read a file anywhere else.
"""

from __future__ import annotations

from pathlib import Path

PREVIEW_ROUTE = "/mixkit/v1/lora-preview"  # ?name=<LoRA name>: serves the preview found here
PREVIEW_MEDIA_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp"}
PREVIEW_SUFFIXES = tuple(suffix for ext in PREVIEW_MEDIA_TYPES for suffix in (ext, f".preview{ext}"))
THUMBNAIL_SIDE = 256
MAX_PREVIEW_PIXELS = 4096 * 4096  # a preview larger than this is refused rather than decoded (decompression bombs)


def find_preview(lora_file: Path, folder: Path) -> Path | None:
    """The first preview image next to `lora_file` whose real path is inside `folder`, or None."""
    root = Path(folder).resolve()
    base = Path(lora_file)
    stem = base.name[: -len(base.suffix)] if base.suffix else base.name
    for suffix in PREVIEW_SUFFIXES:
        candidate = base.with_name(stem + suffix)
        if not candidate.is_file():
            continue
        real = candidate.resolve()
        if real.is_relative_to(root) and real.suffix.lower() in PREVIEW_MEDIA_TYPES:
            return real
    return None


def preview_url(name: str) -> str:
    from urllib.parse import quote

    return f"{PREVIEW_ROUTE}?name={quote(name, safe='')}"


def preview_for_name(library, name: object) -> Path | None:
    """The preview of the library entry whose relative name is exactly `name` (as `/sdapi/v1/loras` lists it)."""
    if library is None or not isinstance(name, str) or not name:
        return None
    for entry in library.entries():
        if entry.relative_name == name:
            return find_preview(entry.path, library.folder)
    return None


def load_thumbnail(path: Path, side: int = THUMBNAIL_SIDE):
    """An RGB thumbnail of a preview image (None if it is not a readable image or is too large to decode)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            if image.width * image.height > MAX_PREVIEW_PIXELS:
                return None
            image.draft("RGB", (side, side))  # JPEG: decode at reduced size
            thumbnail = image.convert("RGB")
    except (OSError, UnidentifiedImageError, Image.DecompressionBombError, ValueError):
        return None
    thumbnail.thumbnail((side, side))
    return thumbnail


def placeholder_image(name: str, side: int = THUMBNAIL_SIDE):
    """A plain card face for a LoRA without a preview: grey, with the name's first letter."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (side, side), (92, 96, 104))
    draw = ImageDraw.Draw(image)
    letter = (name.rsplit("/", 1)[-1][:1] or "?").upper()
    try:
        from PIL import ImageFont

        font = ImageFont.load_default(size=side // 2)
    except (TypeError, OSError):  # Pillow without scalable default font
        font = None
    draw.text((side / 2, side / 2), letter, fill=(220, 222, 226), anchor="mm", font=font)
    return image
