"""Latents -> PIL images through the model's VAE."""

from __future__ import annotations


import logging

logger = logging.getLogger(__name__)


def decode_latents(vae, latents) -> list:
    """Decode one image at a time: a 1024x1024 VAE decode alone needs several GB, and per-image
    decoding also makes image k independent of the batch it was made in.

    A VAE loaded in half precision whose decode overflows (SDXL's original VAE in fp16, the one diffusers marks
    `force_upcast`) decodes that image again in float32, as A1111's "Automatically revert VAE to 32-bit floats"
    does, instead of returning a black image."""
    import torch
    from PIL import Image

    scale = vae.config.scaling_factor
    shift = getattr(vae.config, "shift_factor", None) or 0.0
    images = []
    with torch.inference_mode():
        for latent in latents:
            z = latent.unsqueeze(0).to(device=vae.device, dtype=vae.dtype) / scale + shift
            pixels = vae.decode(z).sample.float()
            if not torch.isfinite(pixels).all() and vae.dtype in (torch.float16, torch.bfloat16):
                pixels = _decode_in_float32(vae, latent.unsqueeze(0) / scale + shift)
            array = ((pixels[0] / 2 + 0.5).clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).cpu().numpy()
            images.append(Image.fromarray(array))
    return images


def _decode_in_float32(vae, z):
    """One decode with the VAE's weights in float32, then back in their dtype (the model is left as it was)."""
    import torch

    dtype = vae.dtype
    logger.warning("The VAE's %s decode gave NaN/inf (it overflows in half precision); decoding this image again "
                   "in float32. Load the model with dtype='float32' or a half-precision-safe VAE to avoid the "
                   "second decode.", str(dtype).replace("torch.", ""))
    try:
        vae.to(torch.float32)
        return vae.decode(z.to(device=vae.device, dtype=torch.float32)).sample.float()
    finally:
        vae.to(dtype)


def encode_images(vae, pixels):
    """Pixels in [-1, 1] -> scaled latents, using the posterior mean: deterministic, and it keeps
    each image's generator stream identical to text-to-image (noise first, then sampler noise)."""
    import torch

    scale = vae.config.scaling_factor
    shift = getattr(vae.config, "shift_factor", None) or 0.0
    latents = []
    with torch.inference_mode():
        for image in pixels:
            dist = vae.encode(image.unsqueeze(0).to(device=vae.device, dtype=vae.dtype)).latent_dist
            latents.append(((dist.mean - shift) * scale).float()[0])
    return torch.stack(latents)
