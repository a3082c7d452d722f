"""Latents -> PIL images through the model's VAE."""

from __future__ import annotations


def decode_latents(vae, latents) -> list:
    """Decode one image at a time: a 1024x1024 VAE decode alone needs several GB, and per-image
    decoding also makes image k independent of the batch it was made in."""
    import torch
    from PIL import Image

    scale = vae.config.scaling_factor
    shift = getattr(vae.config, "shift_factor", None) or 0.0
    images = []
    with torch.inference_mode():
        for latent in latents:
            z = latent.unsqueeze(0).to(device=vae.device, dtype=vae.dtype) / scale + shift
            pixels = vae.decode(z).sample.float()
            array = ((pixels[0] / 2 + 0.5).clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).cpu().numpy()
            images.append(Image.fromarray(array))
    return images


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
