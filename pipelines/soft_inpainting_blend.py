"""Where Soft inpainting (pipelines/soft_inpainting.py) hooks into inpainting: the per-step blend and the composite.

A1111's extension replaces its model wrapper's blend (`on_mask_blend`) with the soft one, skips the blend of the
finished latents (`is_final_blend`), and swaps the paste-back mask for one made from the latent difference
(`post_sample`, `postprocess_maskoverlay`). `SoftMaskBlend` does the first two inside mixkit's `MaskBlend` hooks and
hands the finished latents to a callback, which `composite_masks` turns into the paste-back masks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from pipelines.inpaint_blend import MaskBlend, evaluation_alpha, output_denoising_to
from pipelines.soft_inpainting import (
    SoftInpainting, difference_masks, norm_preserving_blend, schedule_weight,
)

# A1111 blurs the upscaled difference mask with `ImageFilter.GaussianBlur(radius=4)` against aliasing
COMPOSITE_MASK_BLUR = 4


def denoised_from_output(output, model_input, alpha: float, prediction_type: str):
    """The clean-latent estimate a model output gives for `model_input` at cumulative alpha `alpha`
    (the inverse of `output_denoising_to`)."""
    if prediction_type == "epsilon":
        return (model_input - (1.0 - alpha) ** 0.5 * output) / alpha**0.5
    if prediction_type == "v_prediction":
        return alpha**0.5 * model_input - (1.0 - alpha) ** 0.5 * output
    raise ValueError(f"soft inpainting cannot blend a {prediction_type!r} model's output; epsilon and v_prediction "
                     "are supported")


def sigma_of(alpha: float) -> float:
    """The k-diffusion sigma of a variance-preserving noise level: sqrt((1 - a) / a)."""
    return ((1.0 - alpha) / alpha) ** 0.5


@dataclass
class SoftMaskBlend(MaskBlend):
    """MaskBlend with A1111's soft blend at every model call and no final blend; `on_finish(latents)` receives the
    finished latents (for the composite masks).

    A1111's timestep samplers (DDIM, PLMS, UniPC) hand its hook the timestep (e.g. 999) as `sigma`, which makes every
    partly masked cell all original; mixkit uses that timestep's k-diffusion sigma, as the other samplers get."""

    settings: SoftInpainting = None
    on_finish: Callable[[Any], None] | None = None

    def _blended(self, original, current, row: int, alpha: float):
        import torch

        repaint = self.repaint[row % len(self.repaint)][None].to(torch.float32)
        weight = schedule_weight(repaint, sigma_of(alpha), self.settings)
        blended = norm_preserving_blend(original.to(torch.float32), current.to(torch.float32), weight,
                                        self.settings.inpaint_detail_preservation)
        return blended.to(current.dtype)

    def model_input(self, scaled, row: int, sample=None, scheduler=None, timestep=None):
        if not self.before_denoising:
            return scaled
        alpha = evaluation_alpha(scheduler, scaled if sample is None else sample, scaled, timestep=timestep)
        return self._blended(self.init[row:row + 1].to(scaled), scaled, row, alpha)

    def guided_output(self, guided, sample, scaled, scheduler, row: int, timestep=None):
        if self.before_denoising:
            return guided
        import torch

        alpha = evaluation_alpha(scheduler, sample, scaled)
        model_input = scaled.to(torch.float32)
        denoised = denoised_from_output(guided.to(torch.float32), model_input, alpha, self.prediction_type)
        blended = self._blended(self.init[row:row + 1], denoised, row, alpha)
        return output_denoising_to(blended, model_input, alpha, self.prediction_type).to(guided)

    def final(self, latents):
        if self.on_finish is not None:
            self.on_finish(latents)
        return latents


def composite_masks(original, latents, repaint, settings: SoftInpainting, width: int, height: int) -> list:
    """One L-mode paste-back mask per image (255 = the result, 0 = the original) at width x height: the difference
    masks in 8 bits (truncated, as A1111's `astype(np.uint8)`), Lanczos-upscaled and blurred with radius 4."""
    import numpy as np
    from PIL import Image, ImageFilter

    masks = difference_masks(original, latents, repaint.to(original), settings)
    images = []
    for mask in masks:
        small = Image.fromarray((255.0 * mask.float().cpu().numpy()).astype(np.uint8), mode="L")
        large = small.resize((width, height), resample=Image.LANCZOS)
        images.append(large.filter(ImageFilter.GaussianBlur(radius=COMPOSITE_MASK_BLUR)))
    return images


def uncropped_mask(mask, original_size: tuple[int, int], crop) -> Any:
    """An "only masked" composite mask placed back on the whole picture (A1111's `uncrop`): fitted to the crop's
    box with "crop and resize" and black (the original) everywhere else."""
    from PIL import Image

    from pipelines.image_prep import resize_image

    placed = Image.new("L", original_size, 0)
    placed.paste(resize_image(mask, *crop.size, "crop and resize"), (crop.left, crop.top))
    return placed
