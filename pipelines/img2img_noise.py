"""A1111's img2img noise settings: "Noise multiplier" (`initial_noise_multiplier`) and "Extra noise"
(`img2img_extra_noise`), both in Settings > img2img.

A1111's `StableDiffusionProcessingImg2Img.sample` multiplies the noise it draws by `initial_noise_multiplier`
before the init latents are noised with it. Its samplers' `sample_img2img` then add `img2img_extra_noise` times
that same noise on top: in k-diffusion's sigma space (x0 + sigma * noise) as it is, for its timestep samplers
(DDIM, PLMS, UniPC: sqrt(a) x0 + sqrt(1 - a) noise) times sqrt(alphas_cumprod[t]). Both are the same move in
sigma space, which this writes once for every diffusers scheduler: extra noise times the scheduler's own weight of
x0 in `add_noise` (1 in sigma space, sqrt(a_t) in variance-preserving space).
"""

from __future__ import annotations

from typing import Any

from mixkit.finite_numbers import is_finite_number


# option -> (lowest, highest): A1111's Settings > img2img sliders (shared_options.py). Beyond them the start latents
# are mostly noise of an unintended scale (a multiplier of 1e30 overflows to inf and the image to NaN), so a request
# cannot ask for more than A1111's own controls offer.
RANGES = {"initial_noise_multiplier": (0.0, 1.5), "img2img_extra_noise": (0.0, 1.0)}


def check_img2img_noise(initial_noise_multiplier: Any, img2img_extra_noise: Any) -> None:
    """Raise TypeError/ValueError naming the bad setting and its range (before any work)."""
    for name, value in (("initial_noise_multiplier", initial_noise_multiplier),
                        ("img2img_extra_noise", img2img_extra_noise)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number (A1111's Settings > img2img), got {value!r}.")
        low, high = RANGES[name]
        if not is_finite_number(value) or not low <= value <= high:
            raise ValueError(f"{name} must be a number in [{low:g}, {high:g}] (A1111's Settings > img2img slider; "
                             f"defaults: initial_noise_multiplier 1, img2img_extra_noise 0), got {value!r}.")


def noised_init(scheduler, init, noise, timestep, initial_noise_multiplier: float = 1.0,
                img2img_extra_noise: float = 0.0):
    """The init latents noised to `timestep` (a batch of one timestep per row) as A1111's img2img noises them."""
    if initial_noise_multiplier != 1.0:
        noise = noise * initial_noise_multiplier
    latents = scheduler.add_noise(init, noise, timestep)
    if img2img_extra_noise > 0:
        import torch

        one = torch.ones_like(init[:1, :1, :1, :1])
        x0_weight = scheduler.add_noise(one, torch.zeros_like(one), timestep[:1])  # 1, or sqrt(a_t)
        latents = latents + noise * (img2img_extra_noise * x0_weight)
    return latents


def img2img_noise_infotext(initial_noise_multiplier: float, img2img_extra_noise: float) -> dict[str, float]:
    """A1111's keys, written when not at their defaults ("Noise multiplier" != 1, "Extra noise" > 0)."""
    values: dict[str, float] = {}
    if initial_noise_multiplier != 1.0:
        values["Noise multiplier"] = initial_noise_multiplier
    if img2img_extra_noise > 0:
        values["Extra noise"] = img2img_extra_noise
    return values
