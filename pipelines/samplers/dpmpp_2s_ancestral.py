"""A1111's "DPM++ 2S a" (k-diffusion `sample_dpmpp_2s_ancestral`) as a diffusers scheduler.

diffusers has no ancestral single-step DPM-Solver++ (its DPMSolverSinglestepScheduler adds no
noise). KDPM2AncestralDiscreteScheduler already holds everything this sampler needs: per step
sigma, the ancestral split (sigma_down, sigma_up) and the midpoint sqrt(sigma * sigma_down),
with its model timesteps interleaved. Only the two updates differ: DPM2 a takes Euler steps in
sigma, DPM-Solver++(2S) takes exponential-integrator steps in log-sigma (Lu et al. 2022, alg. 1
with r = 1/2), which is what `step` below does. The protocol is unchanged, so it runs in the
standard diffusers loop and accepts per-image generators.
"""

from __future__ import annotations

import torch
from diffusers.schedulers.scheduling_k_dpm_2_ancestral_discrete import KDPM2AncestralDiscreteSchedulerOutput

from pipelines.samplers.dpm2_ancestral import KDPM2AncestralEtaScheduler
from pipelines.samplers.noise import sampler_noise
from pipelines.samplers.sigma_steps import predicted_original


class DPMSolverPlusPlus2SAncestralScheduler(KDPM2AncestralEtaScheduler):
    """DPM-Solver++(2S) with ancestral noise (A1111's eta, 1 by default), on KDPM2 Ancestral's schedule."""

    def step(self, model_output, timestep, sample, generator=None, return_dict: bool = True):
        if self.step_index is None:
            self._init_step_index(timestep)
        first_stage = self.state_in_first_order
        # Evaluations alternate sigma_i, midpoint_i; the second stage reads the entries of its step.
        index = self.step_index if first_stage else self.step_index - 1
        sigma, sigma_mid = self.sigmas[index], self.sigmas_interpol[index]
        sigma_up, sigma_down = self.sigmas_up[index], self.sigmas_down[index]
        denoised = predicted_original(
            model_output, sample, sigma if first_stage else sigma_mid, self.config.prediction_type
        )
        if first_stage and sigma_down == 0:
            prev_sample = denoised  # last step: k-diffusion takes an Euler step to sigma 0
        elif first_stage:
            h = torch.log(sigma / sigma_down)
            self.sample = sample
            prev_sample = (sigma_mid / sigma) * sample - torch.expm1(-h / 2) * denoised
        else:
            h = torch.log(sigma / sigma_down)
            start, self.sample = self.sample, None
            prev_sample = (sigma_down / sigma) * start - torch.expm1(-h) * denoised
            noise = sampler_noise(model_output.shape, generator, model_output.device, model_output.dtype)
            prev_sample = prev_sample + noise * sigma_up
        self._step_index += 1
        if not return_dict:
            return prev_sample, denoised
        return KDPM2AncestralDiscreteSchedulerOutput(prev_sample=prev_sample, pred_original_sample=denoised)
