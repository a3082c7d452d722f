"""InstructPix2Pix (ip2p) checkpoints in img2img: the input image as extra UNet channels, and Image CFG scale.

An ip2p UNet takes 8 input channels: the noisy latents and the input image's latents (Brooks et al. 2022,
"InstructPix2Pix: Learning to Follow Image Editing Instructions"). The image latents are the VAE posterior's mean,
*unscaled* (A1111's `edit_image_conditioning`: `encode_first_stage(image).mode()`, without the scale factor; diffusers'
`prepare_image_latents` does the same), and they are the init image as the model saw it (resized, cropped, filled).

Guidance is three-way (the paper's eq. 3; A1111's `combine_denoised_for_edit_model`, diffusers'
StableDiffusionInstructPix2PixPipeline):

    uncond + cfg * (cond - image_cond) + image_cfg * (image_cond - uncond)

where `cond` has the prompt and the image, `image_cond` the negative prompt and the image, `uncond` the negative
prompt and zeros for the image. Written around the ordinary CFG with the image on every row,
`image_cond + cfg * (cond - image_cond)`, this is that plus `(image_cfg - 1) * (image_cond - uncond)`: mixkit's usual
combination (AND parts and their weights included, which A1111's three-chunk split cannot take) plus one more
UNet pass per image, for the negative prompt without the image. At image_cfg 1 that term is zero and the pass is
skipped, as A1111 does (`is_edit_model` is False at 1.0). None is A1111's API default: no Image CFG scale at all,
which runs as 1 and is not recorded.

Denoising strength is img2img's own: A1111 has no ip2p special case, and its wiki advises strength 1.0 (with Euler a)
to reproduce the original repository, which starts from pure noise.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

INSTRUCT_PIX2PIX_UNET_CHANNELS = 8  # 4 noisy latent + 4 input-image latent
DEFAULT_IMAGE_CFG_SCALE = 1.5  # A1111's slider and diffusers' image_guidance_scale
INFOTEXT_KEY = "Image CFG scale"


def is_instruct_pix2pix_unet(unet) -> bool:
    """Whether `unet` is an ip2p UNet (8 input channels), read from its config as the inpainting check reads 9."""
    return getattr(getattr(unet, "config", None), "in_channels", 4) == INSTRUCT_PIX2PIX_UNET_CHANNELS


def check_image_cfg_scale(value: Any, high: float) -> float | None:
    """image_cfg_scale as a Python float (or None: A1111's API default); raise ValueError naming a bad value."""
    if value is None:
        return None
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value <= high:
        raise ValueError(f"image_cfg_scale must be a number in [0, {high:g}] (A1111's slider: 0 to 3, default "
                         f"{DEFAULT_IMAGE_CFG_SCALE}), or None, got {value!r}.")
    # numpy's float32(1.3) would print as 1.2999999523 in the infotext; its shortest decimal is what was written
    return float(str(value)) if type(value).__module__ == "numpy" else float(value)


def refuse_text_to_image(model, task: str = "txt2img") -> None:
    """Refuse txt2img (and its hires fix) with an ip2p checkpoint: it edits an input image and has nothing to start
    from. A1111 fails there deep inside the UNet (its txt2img feeds the 5 inpainting channels to the 8-channel conv);
    this says so before any work."""
    if is_instruct_pix2pix_unet(model.unet):
        raise ValueError(f"{model.name!r} is an instruct-pix2pix checkpoint (its UNet takes 8 input channels: the "
                         f"latents and an input image's); {task} has no input image for it. Use img2img with the "
                         "image to edit and an instruction as the prompt, or load a text-to-image checkpoint.")


def image_conditioning(vae, init_latents):
    """The ip2p UNet's image channels from img2img's init latents (`encode_images`: the posterior mean, shifted and
    scaled): the same mean unscaled, as A1111 and diffusers feed it. Undoing the scale saves a second VAE encode;
    it holds for latent-upscaled init latents too, the bilinear resize being linear."""
    shift = getattr(vae.config, "shift_factor", None) or 0.0
    return init_latents / vae.config.scaling_factor + shift


def image_cfg_infotext(model, image_cfg_scale: float | None) -> dict[str, Any]:
    """A1111's `Image CFG scale` key: written for ip2p checkpoints only (its img2img sets the value to None for any
    other model), and not when the API left it out."""
    if image_cfg_scale is None or not is_instruct_pix2pix_unet(model.unet):
        return {}
    return {INFOTEXT_KEY: image_cfg_scale}


@dataclass(frozen=True)
class ImageGuidance:
    """The image half of ip2p's guidance for one batch: `scale` is Image CFG scale (never 1 or None here: there the
    ordinary CFG is the whole formula), `channels` how many trailing input channels are the image's."""

    scale: float
    channels: int = 4

    def image_free_input(self, model_input):
        """The negative rows' input with the image channels zeroed: the paper's "no image" condition."""
        free = model_input.clone()
        free[:, -self.channels:] = 0
        return free

    def guided(self, guided, with_image, without_image):
        """Ordinary CFG's result plus (image_cfg - 1) * (image_cond - uncond); [B, ...] each."""
        return guided + (self.scale - 1.0) * (with_image - without_image)


def image_guidance_for(model, image_cfg_scale: float | None) -> ImageGuidance | None:
    """The batch's ImageGuidance, or None where the ordinary CFG is the whole formula (another UNet, or 1 / None)."""
    if not is_instruct_pix2pix_unet(model.unet) or image_cfg_scale is None or image_cfg_scale == 1.0:
        return None
    return ImageGuidance(scale=image_cfg_scale, channels=INSTRUCT_PIX2PIX_UNET_CHANNELS - 4)
