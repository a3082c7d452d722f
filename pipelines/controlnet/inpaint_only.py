"""sd-webui-controlnet's `inpaint_only`: the inpaint ControlNet, and the unmasked area of its picture kept.

The extension keeps that area twice (scripts/hook.py "Post-processing for restore", scripts/controlnet.py
`inpaint_only_post_processing`):

- at every model call, whatever the unit's guidance window, the prediction of the clean latents is replaced by the
  picture's own latents (its VAE encoding) outside the mask: x0 = x0_pred * m + x0_picture * (1 - m), with m the
  mask max-pooled to the latent grid (10x10 windows, stride 8, padding 1, so it grows by about a latent cell), and
  the output is that of x0 mixed with the model's by the unit's weight clipped to [0, 1]. The extension does it on
  each row's epsilon with the DDPM coefficients at the rounded model timestep; the mix is affine in the output, so
  it is done here once on the guided output, for epsilon and v-prediction models alike.
- the finished image is blended onto the picture in pixels: y = m' * x + (1 - m') * picture, m' the mask dilated by
  a 7x7 square and box-blurred 7x7 (`control_net_inpaint_blur_sigma`, default 7). Pixels more than 6 px from the
  mask are the picture's own, to 8-bit rounding (here rounded to nearest; A1111 truncates).

In img2img with an inpaint mask A1111 already keeps the unmasked area, and the extension runs the unit as
`inpaint` ("A1111 inpaint and ControlNet inpaint duplicated. Falls back to inpaint_global_harmonious."); so does
`pipelines.controlnet.pipelines`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

INPAINT_ONLY = "inpaint_only"
PIXEL_BLEND_SIZE = 7  # the extension's control_net_inpaint_blur_sigma default: dilation and box-blur window
LATENT_POOL = dict(kernel_size=(10, 10), stride=(8, 8), padding=1)  # the hook's max_pool2d over the pixel mask


def latent_keep_share(mask: np.ndarray, weight: float):
    """[1, 1, h, w]: how much of the output is replaced by the picture's in each latent cell, weight * (1 - m)."""
    import torch

    pixels = torch.from_numpy(mask.astype(np.float32) / 255.0)[None, None]
    pooled = torch.nn.functional.max_pool2d(pixels, **LATENT_POOL)
    return min(1.0, max(0.0, float(weight))) * (1.0 - pooled)


@dataclass
class KeptPicture:
    """One inpaint_only unit's picture latents [1, C, h, w] and `latent_keep_share`."""

    latents: Any
    share: Any


@dataclass
class InpaintOnlyBlend:
    """The sampling loop's `mask_blend` for inpaint_only units (no A1111 inpaint mask in the call), one per batch."""

    kept: list  # KeptPicture, one per inpaint_only unit, applied in unit order as the extension's loop does
    prediction_type: str = "epsilon"

    def model_input(self, scaled, row: int, sample=None, scheduler=None, timestep=None):
        return scaled

    def guided_output(self, guided, sample, scaled, scheduler, row: int, timestep=None):
        """Image `row`'s guided output with the picture's latents kept outside each unit's mask."""
        import torch

        from pipelines.inpaint_blend import output_denoising_to

        times = torch.as_tensor(timestep).flatten()
        t = int(torch.round(times[row if times.numel() > 1 else 0].float()))
        alpha = float(scheduler.alphas_cumprod[t])
        for kept in self.kept:
            keep = output_denoising_to(kept.latents.to(scaled), scaled, alpha, self.prediction_type)
            share = kept.share.to(guided)
            guided = guided * (1 - share) + keep.to(guided) * share
        return guided

    def final(self, latents):
        return latents


def restore_unmasked_pixels(image, picture: np.ndarray, mask: np.ndarray):
    """The finished image (RGB PIL) blended onto the unit's fitted picture (HxWx3 uint8) outside its mask (HxW 0/255),
    as the extension's pixel post-processing; an image of another size is returned as is (the extension logs a
    resolution mismatch and skips)."""
    from PIL import Image

    if image.size != (picture.shape[1], picture.shape[0]):
        return image
    m = _box_blur(_dilate(mask.astype(np.float32) / 255.0, PIXEL_BLEND_SIZE), PIXEL_BLEND_SIZE)[..., None]
    x = np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
    y = np.clip(m * x.clip(0, 1) + (1 - m) * (picture.astype(np.float32) / 255.0), 0, 1)
    return Image.fromarray(np.rint(y * 255).astype(np.uint8))


def _dilate(values: np.ndarray, size: int) -> np.ndarray:
    """Maximum over a size x size square (OpenCV's dilate: the outside never raises it)."""
    half = size // 2
    padded = np.pad(values, half, mode="constant", constant_values=-np.inf)
    return np.lib.stride_tricks.sliding_window_view(padded, (size, size)).max(axis=(-2, -1))


def _box_blur(values: np.ndarray, size: int) -> np.ndarray:
    """Mean over a size x size square, borders mirrored without repeating the edge (OpenCV's blur, REFLECT_101)."""
    half = size // 2
    padded = np.pad(values, half, mode="reflect")
    return np.lib.stride_tricks.sliding_window_view(padded, (size, size)).mean(axis=(-2, -1), dtype=np.float64) \
        .astype(np.float32)
