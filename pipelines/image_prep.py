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
    # resize and fill: fit inside, then fill the bands by stretching the image's border rows/columns
    scale = min(width / src_w, height / src_h)
    new_w, new_h = min(width, max(1, round(src_w * scale))), min(height, max(1, round(src_h * scale)))
    resized = image.resize((new_w, new_h), lanczos)
    canvas = Image.new(image.mode, (width, height))
    left, top = (width - new_w) // 2, (height - new_h) // 2
    canvas.paste(resized, (left, top))
    if top > 0:
        canvas.paste(resized.crop((0, 0, new_w, 1)).resize((new_w, top)), (left, 0))
        bottom = height - top - new_h
        if bottom > 0:
            canvas.paste(resized.crop((0, new_h - 1, new_w, new_h)).resize((new_w, bottom)), (left, top + new_h))
    if left > 0:
        canvas.paste(resized.crop((0, 0, 1, new_h)).resize((left, new_h)), (0, top))
        right = width - left - new_w
        if right > 0:
            canvas.paste(resized.crop((new_w - 1, 0, new_w, new_h)).resize((right, new_h)), (left + new_w, top))
    return canvas


def to_model_pixels(images):
    """PIL RGB images -> float tensor [B, 3, H, W] in [-1, 1], the VAE's input range."""
    import numpy as np
    import torch

    arrays = [np.asarray(image.convert("RGB"), dtype=np.float32) / 127.5 - 1.0 for image in images]
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()
