"""Image resizing the way the WebUI's img2img does it (pure functions on PIL images)."""

from __future__ import annotations

RESIZE_MODES = ("just resize", "crop and resize", "resize and fill")


def check_resize_mode(mode: str) -> str:
    folded = mode.strip().lower() if isinstance(mode, str) else mode
    if folded not in RESIZE_MODES:
        raise ValueError(f"Unknown resize mode {mode!r}; valid ones: {', '.join(RESIZE_MODES)}.")
    return folded


def resize_image(image, width: int, height: int, mode: str = "just resize"):
    """Bring `image` to width x height: stretch, cover-and-crop, or fit-and-fill with stretched edges."""
    from PIL import Image

    mode = check_resize_mode(mode)
    lanczos = Image.Resampling.LANCZOS
    if mode == "just resize" or image.size == (width, height):
        return image.resize((width, height), lanczos)
    src_w, src_h = image.size
    if mode == "crop and resize":
        scale = max(width / src_w, height / src_h)
        new_w, new_h = max(width, round(src_w * scale)), max(height, round(src_h * scale))
        resized = image.resize((new_w, new_h), lanczos)
        left, top = (new_w - width) // 2, (new_h - height) // 2
        return resized.crop((left, top, left + width, top + height))
    # resize and fill: fit inside, then fill the bands by stretching the image's border rows/columns. Each band is
    # filled on its own: when the free space is odd the far band is one pixel wider, and when it is one pixel in
    # all, only the far band exists (A1111 fills both sides too, never leaving the canvas's black).
    scale = min(width / src_w, height / src_h)
    new_w, new_h = min(width, max(1, round(src_w * scale))), min(height, max(1, round(src_h * scale)))
    resized = image.resize((new_w, new_h), lanczos)
    canvas = Image.new(image.mode, (width, height))
    left, top = (width - new_w) // 2, (height - new_h) // 2
    right, bottom = width - left - new_w, height - top - new_h
    canvas.paste(resized, (left, top))
    if top > 0:
        canvas.paste(resized.crop((0, 0, new_w, 1)).resize((new_w, top)), (left, 0))
    if bottom > 0:
        canvas.paste(resized.crop((0, new_h - 1, new_w, new_h)).resize((new_w, bottom)), (left, top + new_h))
    if left > 0:
        canvas.paste(resized.crop((0, 0, 1, new_h)).resize((left, new_h)), (0, top))
    if right > 0:
        canvas.paste(resized.crop((new_w - 1, 0, new_w, new_h)).resize((right, new_h)), (left + new_w, top))
    return canvas


def normalize_init_image(image):
    """An init image as every img2img path uses it: upright, 8-bit RGB, transparency composited on white.

    This is A1111's `fix_image` (EXIF orientation) and `images.flatten` (on its default white
    img2img background), and the same function the web API decodes uploads with
    (`mixkit.io.images.load_image`), so the Python API, the HTTP API and `outpaint` see the same
    pixels. 16-bit images are scaled to 8 bits rather than clipped (a mid-grey `I;16` stays grey).
    """
    from mixkit.io.images import load_image

    return load_image(image, max_pixels=max(1, image.width * image.height))


def to_model_pixels(images):
    """PIL RGB images -> float tensor [B, 3, H, W] in [-1, 1], the VAE's input range."""
    import numpy as np
    import torch

    arrays = [np.asarray(image.convert("RGB"), dtype=np.float32) / 127.5 - 1.0 for image in images]
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()
