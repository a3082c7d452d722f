"""k-diffusion's churn for Euler, Heun and DPM2 (Karras et al. 2022, Algorithm 2), A1111's "Sigma churn".

Before a step from sigma, k-diffusion's `sample_euler` / `sample_heun` / `sample_dpm_2` raise the noise level to
sigma_hat = sigma * (1 + gamma), gamma = min(s_churn / steps, sqrt(2) - 1) where s_tmin <= sigma <= s_tmax (else
0), by adding fresh noise of std s_noise * sqrt(sigma_hat^2 - sigma^2), and then run the whole step from sigma_hat:
the model is *evaluated* at sigma_hat. diffusers' `EulerDiscreteScheduler.step(s_churn=...)` adds the noise inside
`step`, after the model ran at sigma, which is another sampler. Here the churn happens before the model call
(`run_sampler` asks `churn_rows`), and the scheduler's current sigma is replaced by sigma_hat, so diffusers' own
input scaling and update (Euler's, Heun's and DPM2's first and second stage) then run from sigma_hat unchanged.
DPM2's midpoint, sqrt(sigma_hat * sigma_next), moves with it, as in k-diffusion. `steps` is the number of steps the
sampler walks (img2img: those after its start), as `len(sigmas) - 1` of the sigmas A1111 hands k-diffusion.
The noise comes from the image's generator; a gamma of 0 draws nothing, so steps outside [s_tmin, s_tmax] and
s_churn 0 are the plain sampler.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from pipelines.samplers.noise import sampler_noise
from pipelines.samplers.sigma_schedules import timestep_at


def churn_gamma(sigma: float, steps: int, s_churn: float, s_tmin: float, s_tmax: float) -> float:
    """k-diffusion's gamma for a step from `sigma` of a `steps`-step walk (0 outside [s_tmin, s_tmax])."""
    if not s_tmin <= sigma <= s_tmax:
        return 0.0
    return min(s_churn / steps, 2**0.5 - 1)


class ChurnMixin:
    """Churn for a diffusers Euler / Heun / KDPM2 scheduler class; `churn_parameters` set before sampling."""

    churn_parameters = None  # pipelines.sampler_parameters.SamplerParameters
    _churn_steps: int | None = None
    _churn_timesteps: dict | None = None

    def set_timesteps(self, *args, **kwargs):
        super().set_timesteps(*args, **kwargs)
        self._churn_steps, self._churn_timesteps = None, None  # a new walk: counted again at its first step

    def churn(self, sample: torch.Tensor, timestep, generator) -> torch.Tensor:
        """The sample raised to this step's sigma_hat (unchanged where gamma is 0 or mid-step)."""
        if self.step_index is None:
            self._init_step_index(timestep)
        second_order = hasattr(self, "state_in_first_order")
        if second_order and not self.state_in_first_order:
            return sample
        if self._churn_steps is None:  # the walk's length from where it starts (img2img: its begin index)
            left = len(self.timesteps) - self.step_index
            self._churn_steps = (left + 1) // 2 if second_order else left
            self._churn_timesteps = {}
        settings = self.churn_parameters
        sigma = self.sigmas[self.step_index]
        gamma = churn_gamma(float(sigma), self._churn_steps, settings.s_churn, settings.s_tmin, settings.tmax)
        if gamma <= 0:
            return sample
        sigma_hat = sigma * (gamma + 1)
        noise = sampler_noise(sample.shape, generator=generator, device=sample.device, dtype=sample.dtype)
        sample = sample + noise * settings.s_noise * (sigma_hat**2 - sigma**2) ** 0.5
        self.sigmas[self.step_index] = sigma_hat
        self._churn_timesteps[self.step_index] = self._model_timestep_at(float(sigma_hat))
        if hasattr(self, "sigmas_interpol"):  # DPM2: the midpoint between sigma_hat and the next sigma
            sigma_next = self.sigmas[self.step_index + 1]
            if sigma_next > 0:
                midpoint = sigma_hat.log().lerp(sigma_next.log(), 0.5).exp()
                self.sigmas_interpol[self.step_index + 1] = midpoint
                self._churn_timesteps[self.step_index + 1] = self._model_timestep_at(float(midpoint))
        return sample

    def model_timestep(self, timestep):
        """The timestep the UNet is called with now: t(sigma_hat) (or DPM2's moved midpoint) after churn."""
        moved = (self._churn_timesteps or {}).get(self.step_index)
        if moved is None:
            return timestep
        return torch.as_tensor(moved, dtype=torch.float32, device=getattr(timestep, "device", None))

    def _model_timestep_at(self, sigma: float) -> float:
        alphas = self.alphas_cumprod.double().cpu().numpy()
        return timestep_at(sigma, np.sqrt((1.0 - alphas) / alphas))


@functools.cache
def with_churn(scheduler_class: type, sampler_name: str) -> type:
    """`scheduler_class` (Euler, Heun or DPM2's, possibly with a custom sigma schedule) with churn."""
    from pipelines.sampler_parameters import CHURN_SAMPLERS

    if sampler_name not in CHURN_SAMPLERS:
        raise ValueError(f"s_churn applies to the samplers {', '.join(CHURN_SAMPLERS)} (k-diffusion's churn), not to "
                         f"{sampler_name!r}; set s_churn to 0 or pick one of them.")
    return type(f"{scheduler_class.__name__}WithChurn", (ChurnMixin, scheduler_class), {"__module__": __name__})


def churn_rows(schedulers: list, samples: list, timestep, generators: list) -> tuple[list, object]:
    """(samples after each image's churn, the timestep the UNet takes) for one model call of `run_sampler`.

    Every image's scheduler has the same sigmas, so gamma and the model timestep are the batch's; only the noise
    is per image. Schedulers without churn leave both as they are."""
    if not hasattr(schedulers[0], "churn"):
        return samples, timestep
    churned = [s.churn(sample, timestep, generator) for s, sample, generator in zip(schedulers, samples, generators)]
    return churned, schedulers[0].model_timestep(timestep)
