"""A 9-channel inpainting UNet's extra input taken from an inpaint unit, as sd-webui-controlnet builds it.

An inpainting checkpoint (sd-v1-5-inpainting and its merges) takes 4 more latent channels (the masked image) and a
mask channel besides the noisy latents. When such a UNet runs with an inpaint unit (`inpaint` / `inpaint_only`,
whose control carries a picture and a mask), the extension replaces those 5 channels at every model call by ones
made from the unit's control at the pass's size (scripts/hook.py, "Replace x_t to support inpaint models"): the mask
m = (mask > 0.5) max-pooled over each latent cell (8x8, stride 8), and the VAE encoding of the picture with the
masked pixels set to 0 (mid grey, in the VAE's [-1, 1]). With several inpaint units the last one's are used, as
there. This is what lets `inpaint_only` in txt2img, or a unit with its own picture and mask, inpaint with such a
checkpoint the way it was trained (mask and masked image), instead of its whole-image default; the ControlNet
itself still sees the 4 latent channels only (`residuals.controlnet_unet_extra`), as diffusers'
StableDiffusionControlNetInpaintPipeline and the extension feed it.
"""

from __future__ import annotations

import numpy as np


def unit_inpaint_channels(vae, control, factor: int):
    """[1, 5, h, w]: the unit's mask pooled to the latent grid, then its masked picture's latents (on the VAE's
    device). `control` is a prepared inpaint unit (`residuals.PreparedControl` with `mask` and `image` fitted to the
    pass's size); `factor` is the VAE's downsampling."""
    import torch

    from pipelines.image_prep import to_model_pixels
    from pipelines.vae_decode import encode_images

    masked = torch.from_numpy((control.mask.astype(np.float32) / 255.0 > 0.5).astype(np.float32))[None, None]
    pixels = to_model_pixels([control.image]) * (1.0 - masked)
    latents = encode_images(vae, pixels)
    pooled = torch.nn.functional.max_pool2d(masked, (factor, factor)).to(latents)
    return torch.cat([pooled, latents], dim=1)
