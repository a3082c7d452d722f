"""Per-image loss masks for masked training: which parts of a training image the loss should count.

A LoRA of a character or an object learns whatever its images share, backgrounds included; a mask
(white: learn, black: ignore, grey: in between) lets the loss look at the subject only. Two places
hold one, as in the trainers people use:
- a mask image beside the training image, named `<stem>-masklabel.png` (OneTrainer's convention; any
  image suffix), of the same pixel size; its red channel is the weight (kohya reads mask images so too);
- the training image's own alpha channel (kohya's `alpha_mask`): opaque is learned, transparent ignored.
A mask file wins over an alpha channel; an image with neither is learned whole.
"""

from __future__ import annotations

from pathlib import Path

from mixkit.data.image_probe import IMAGE_SUFFIXES

MASK_SUFFIX = "-masklabel"


class LossMaskError(ValueError):
    """A mask that cannot serve its image (unreadable, another size), found before training starts."""


def is_mask_file(path: Path) -> bool:
    """A `<stem>-masklabel.<image suffix>` file: a mask, never a training image of its own."""
    return path.stem.endswith(MASK_SUFFIX) and path.suffix.lower() in IMAGE_SUFFIXES


def mask_file_beside(image: Path) -> Path | None:
    """The image's `<stem>-masklabel.*` file if there is one (`.png` first, then the other image suffixes)."""
    for suffix in sorted(IMAGE_SUFFIXES, key=lambda s: s != ".png"):
        for candidate in (image.with_name(f"{image.stem}{MASK_SUFFIX}{suffix}"),
                          image.with_name(f"{image.stem}{MASK_SUFFIX}{suffix.upper()}")):
            if candidate.is_file():
                return candidate
    return None


def _has_alpha(image) -> bool:
    return image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info)


def has_alpha_channel(path: Path) -> bool:
    """Whether the image file carries transparency (read from its header, no pixel decoding)."""
    from PIL import Image

    with Image.open(path) as image:
        return _has_alpha(image)


def _weight_channel(mask):
    """The mask file's weight channel on the 0..255 scale: "L" (its red channel) for 8-bit files; "F" for 16-bit
    greyscale (0..65535 / 257, every grey level kept: Pillow's own conversion clips them to 255, so a 16-bit 50%
    grey mask would weigh as white) and float files (0..1 * 255)."""
    from PIL import Image
    import numpy as np

    if mask.mode in ("I;16", "I;16B", "I;16L", "I"):
        return Image.fromarray(np.asarray(mask, dtype=np.float32) / 257.0, mode="F")
    if mask.mode == "F":
        return Image.fromarray(np.asarray(mask, dtype=np.float32) * 255.0, mode="F")
    return mask.convert("RGB").getchannel("R")


def load_loss_mask(image_path: Path, mask_path: Path | None):
    """The mask of one training image as a `PIL.Image` whose values / 255 are the loss weights ("L", or "F" for a
    16-bit or float mask file, whose finer grey levels 8 bits would round), upright like `load_image`'s pixels;
    None when the image has neither a mask file nor an alpha channel (the whole image is learned)."""
    from PIL import Image, ImageOps

    source = mask_path if mask_path is not None else image_path
    try:
        with Image.open(source) as opened:
            if mask_path is None and not _has_alpha(opened):
                return None
            upright = ImageOps.exif_transpose(opened)
            if mask_path is not None:
                return _weight_channel(upright)
            return upright.convert("RGBA").getchannel("A")
    except OSError as error:
        raise LossMaskError(f"the loss mask {str(source)!r} cannot be read ({error}); fix or remove it") from None


def check_loss_masks(records: list) -> tuple[int, int]:
    """(images with a mask file, images masked by their alpha channel); raises LossMaskError for a mask file
    that does not decode or whose size differs from its image's, and when no image has a mask at all."""
    from PIL import Image, ImageOps

    files = alphas = 0
    for record in records:
        if record.mask is not None:
            try:
                with Image.open(record.mask) as opened:
                    opened.load()
                    size = ImageOps.exif_transpose(opened).size
            except OSError as error:
                raise LossMaskError(f"the loss mask {str(record.mask)!r} of {str(record.path)!r} cannot be read "
                                    f"({error}); fix or remove it") from None
            if size != (record.width, record.height):
                raise LossMaskError(
                    f"the loss mask {str(record.mask)!r} is {size[0]}x{size[1]} pixels but its image "
                    f"{str(record.path)!r} is {record.width}x{record.height}; a mask must have its image's size")
            files += 1
        elif has_alpha_channel(record.path):
            alphas += 1
    if not files and not alphas:
        raise LossMaskError(
            f"masked_loss is on but none of the {len(records)} training images has a mask: put a "
            f"'<name>{MASK_SUFFIX}.png' beside an image (white: learn, black: ignore), give the images an alpha "
            "channel, or turn masked_loss off")
    return files, alphas
