"""Cheap latent -> RGB previews for progress displays (no VAE call).

A 4x3 linear map from latent channels to RGB, fitted to each family's VAE; these are the
"Approx cheap" factors the WebUI uses for live previews.
"""

from __future__ import annotations

_SD_FACTORS = [[0.298, 0.207, 0.208], [0.187, 0.286, 0.173], [-0.158, 0.189, 0.264], [-0.184, -0.271, -0.473]]
_SDXL_FACTORS = [[0.3448, 0.4168, 0.4395], [-0.1953, -0.0290, 0.0250], [0.1074, 0.0886, -0.0163], [-0.3730, -0.2499, -0.2088]]


def latent_preview(latents, sdxl: bool = False) -> list:
    """PIL images at latent resolution (1/8 of the output size), one per batch entry."""
    import torch
    from PIL import Image

    factors = torch.tensor(_SDXL_FACTORS if sdxl else _SD_FACTORS, dtype=torch.float32)
    rgb = torch.einsum("bchw,cr->bhwr", latents.float().cpu(), factors)
    rgb = ((rgb + 1) / 2).clamp(0, 1).mul(255).round().to(torch.uint8).numpy()
    return [Image.fromarray(frame) for frame in rgb]
