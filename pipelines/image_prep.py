"""Image resizing the way the WebUI's img2img does it (pure functions on PIL images)."""

from __future__ import annotations

RESIZE_MODES = ("just resize", "crop and resize", "resize and fill")  # A1111's resize_mode 0, 1, 2: on pixels
# A1111's img2img resize_mode 3: the init image is not resized; it is VAE-encoded at its own size and its latents
# are stretched to the output size with the "Latent" upscale (bilinear), in `StableDiffusionProcessingImg2Img.init`.
LATENT_RESIZE_MODE = "just resize (latent upscale)"
IMG2IMG_RESIZE_MODES = (*RESIZE_MODES, LATENT_RESIZE_MODE)


def check_resize_mode(mode: str, allowed: tuple[str, ...] = RESIZE_MODES) -> str:
    """`mode` in A1111's lower case if it is one of `allowed` (the pixel modes unless told otherwise)."""
    folded = mode.strip().lower() if isinstance(mode, str) else mode
    if folded not in allowed:
        raise ValueError(f"Unknown resize mode {mode!r}; valid ones: {', '.join(allowed)}.")
    return folded


def resize_image(image, width: int, height: int, mode: str = "just resize"):
    """Bring `image` to width x height as A1111's `images.resize_image` does, pixel for pixel.

    "just resize" stretches; "crop and resize" covers the box and crops the overflow; "resize and fill"
    fits inside and fills the bands by stretching the image's edge rows or columns. A1111 floors the
    scaled side (`src * height // src_height`) and centres with `size // 2 - scaled // 2`; the same
    integers here make the result bit-identical to A1111's, so an A1111 request or infotext reproduces
    its image. Lanczos for the image itself (A1111's resampler when no img2img upscaler is set).
    """
    mode = check_resize_mode(mode)
    if mode == "just resize" or image.size == (width, height):
        return _lanczos(image, (width, height))
    if mode == "crop and resize":
        scaled = _scaled_size(image.size, width, height, cover=True)
        return _centred_on_canvas(_lanczos(image, scaled), image.mode, width, height)
    scaled = _scaled_size(image.size, width, height, cover=False)
    resized = _lanczos(image, scaled)
    return _fill_bands(_centred_on_canvas(resized, image.mode, width, height), resized, width, height)


def _lanczos(image, size):
    from PIL import Image

    return image.resize(size, Image.Resampling.LANCZOS)


def _stretched_edge(image, size, edge_box):
    from PIL import Image

    return image.resize(size, Image.Resampling.BICUBIC, box=edge_box)


def _scaled_size(size: tuple[int, int], width: int, height: int, *, cover: bool) -> tuple[int, int]:
    """The source scaled to cover (or fit inside) width x height: the matching side exact, the other floored as
    A1111's integer division (`w * height // h`), at least 1 pixel so an extreme aspect ratio still resizes."""
    src_w, src_h = size
    box_ratio, source_ratio = width / height, src_w / src_h
    # A1111's own comparisons: covering a wider box, or fitting in a narrower one, the width is exact
    width_exact = box_ratio > source_ratio if cover else box_ratio < source_ratio
    if width_exact:
        return width, max(1, src_h * width // src_w)
    return max(1, src_w * height // src_h), height


def _centred_on_canvas(resized, mode: str, width: int, height: int):
    """`resized` pasted on a black width x height canvas at A1111's offset (half the size minus half the image,
    each floored): the overflow of a covering image is cropped, a fitting one leaves bands."""
    from PIL import Image

    canvas = Image.new(mode, (width, height))
    canvas.paste(resized, (width // 2 - resized.width // 2, height // 2 - resized.height // 2))
    return canvas


def _fill_bands(canvas, resized, width: int, height: int):
    """A1111's fill for "resize and fill": each band is the image's edge stretched (a resize of the zero-height
    or zero-width box on that edge), both bands as wide as the near one (so an odd leftover leaves A1111's
    one black line on the far side, which a size that is a multiple of 8 never has).

    Bicubic, not Lanczos: A1111 resizes the bands without naming a filter, and Pillow's default is bicubic.
    """
    if resized.width == width and resized.height < height:
        band = height // 2 - resized.height // 2
        if band > 0:
            canvas.paste(_stretched_edge(resized, (width, band), (0, 0, width, 0)), (0, 0))
            edge = resized.height
            canvas.paste(_stretched_edge(resized, (width, band), (0, edge, width, edge)), (0, band + resized.height))
    elif resized.height == height and resized.width < width:
        band = width // 2 - resized.width // 2
        if band > 0:
            canvas.paste(_stretched_edge(resized, (band, height), (0, 0, 0, height)), (0, 0))
            edge = resized.width
            canvas.paste(_stretched_edge(resized, (band, height), (edge, 0, edge, height)), (band + resized.width, 0))
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
