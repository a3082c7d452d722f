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


def encode_images(vae, pixels, generators):
    """Pixels in [-1, 1] -> scaled latents, sampling the posterior with each image's generator."""
    import torch

    scale = vae.config.scaling_factor
    shift = getattr(vae.config, "shift_factor", None) or 0.0
    latents = []
    with torch.inference_mode():
        for image, generator in zip(pixels, generators):
            dist = vae.encode(image.unsqueeze(0).to(device=vae.device, dtype=vae.dtype)).latent_dist
            latents.append(((dist.sample(generator=generator) - shift) * scale).float().cpu()[0])
    return torch.stack(latents)
