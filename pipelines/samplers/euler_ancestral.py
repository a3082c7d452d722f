"""A1111's "Euler a" (k-diffusion `sample_euler_ancestral`, eta 1 by default) on any sigma schedule.

diffusers' EulerAncestralDiscreteScheduler has no Karras/Exponential switch (0.42), yet "Euler a"
with Karras is a common Civitai pairing that A1111 runs. EulerDiscreteScheduler has every
schedule switch; only its update differs. This step splits each move sigma -> sigma_next into a
deterministic Euler step down to sigma_down and fresh noise of std sigma_up, with
sigma_up^2 + sigma_down^2 = sigma_next^2 (Song et al. 2021's ancestral sampling in sigma space,
as in k-diffusion's `get_ancestral_step`). The noise is one `sampler_noise` draw per step from the
image's generator, the draw order of diffusers' own ancestral Euler, so "Uniform" images are
unchanged by the switch.
"""

from __future__ import annotations

import torch
from diffusers import EulerDiscreteScheduler
from diffusers.schedulers.scheduling_euler_discrete import EulerDiscreteSchedulerOutput

from pipelines.samplers.noise import sampler_noise
from pipelines.samplers.sigma_steps import ancestral_split, predicted_original


class EulerAncestralAnyScheduleScheduler(EulerDiscreteScheduler):
    """Euler ancestral steps over EulerDiscreteScheduler's sigmas (Karras, Exponential, custom ...)."""

    eta = 1.0  # A1111's "Eta" (eta_ancestral); the noise is drawn at any eta, as k-diffusion does

    def step(self, model_output, timestep, sample, generator=None, return_dict: bool = True):
        if self.step_index is None:
            self._init_step_index(timestep)
        # Upcast as diffusers' Euler does: fp16 latents lose the small noise increments otherwise.
        sample = sample.to(torch.float32)
        sigma, sigma_next = self.sigmas[self.step_index], self.sigmas[self.step_index + 1]
        denoised = predicted_original(model_output, sample, sigma, self.config.prediction_type)
        sigma_down, sigma_up = ancestral_split(sigma, sigma_next, self.eta)
        derivative = (sample - denoised) / sigma
        prev_sample = sample + derivative * (sigma_down - sigma)
        noise = sampler_noise(model_output.shape, generator, model_output.device, model_output.dtype)
        prev_sample = (prev_sample + noise * sigma_up).to(model_output.dtype)
        self._step_index += 1
        if not return_dict:
            return prev_sample, denoised
        return EulerDiscreteSchedulerOutput(prev_sample=prev_sample, pred_original_sample=denoised)
