"""Which VAE decodes an image the refiner finished: the refiner checkpoint's, unless a VAE was chosen for every one.

A1111's refiner is a checkpoint switch (`sd_models.reload_model_weights` in `apply_refiner`), and the decode after
sampling (`decode_latent_batch(p.sd_model, ...)`) uses the model loaded then: the refiner, with the VAE
`sd_vae.resolve_vae` gives it. That is the `sd_vae` setting when it is not "Automatic" (a chosen file goes with
every checkpoint; "None" is the refiner's built-in VAE), else the `<refiner>.vae.*` file next to it, else its own.
So here the refiner's VAE decodes, unless the base model's VAE is such a choice (`VAE_SETTING_KEY` in its extras:
`vae=` at load, or the web UI's `sd_vae`), which then decodes for the refiner too.

Only that decode changes. A hires fix's pixel upscale decodes the first pass with the refiner's VAE when the refiner
finished it, and encodes the upscaled image with the base model's (A1111 reloads the base checkpoint in between);
img2img's and inpainting's encodes all come before the switch. The infotext's `VAE` / `VAE hash` stay the base
model's: A1111 reads them once, before sampling.
"""

from __future__ import annotations

import contextlib

from mixkit.models.diffusion import DiffusionModel
from mixkit.models.diffusion.loading import BUILT_IN_VAE, VAE_SETTING_KEY


def vae_chosen_for_every_checkpoint(model: DiffusionModel) -> bool:
    """Whether `model`'s VAE is a file chosen for whatever checkpoint runs (A1111's `sd_vae` other than "Automatic"
    and "None"), rather than the one that came with the checkpoint."""
    return model.extras.get(VAE_SETTING_KEY) not in (None, BUILT_IN_VAE)


def refiner_load_options(base: DiffusionModel) -> dict:
    """`load_diffusion_model` options for a refiner loaded from a path: A1111's "None" keeps its built-in VAE even
    where a `<refiner>.vae.*` file lies next to it."""
    return {"vae_near_checkpoint": False} if base.extras.get(VAE_SETTING_KEY) == BUILT_IN_VAE else {}


@contextlib.contextmanager
def refined_image_vae(base: DiffusionModel, refiner: DiffusionModel):
    """Yields the VAE that decodes the refiner's latents, on the device the base model's VAE decodes on (a refiner
    waits on the CPU while the base model holds the accelerator), and puts it back where it was afterwards."""
    vae = base.vae if vae_chosen_for_every_checkpoint(base) else refiner.vae
    home, device = vae.device, base.vae.device
    if home != device:
        vae.to(device)
    try:
        yield vae
    finally:
        if home != device:
            vae.to(home)
