"""A1111's "DPM++ SDE" at any eta (k-diffusion `sample_dpmpp_sde(eta=...)`).

diffusers' DPMSolverSDEScheduler is k-diffusion's DPM-Solver++ (stochastic) with r = 1/2 and the Brownian
tree, at eta 1 only: both half steps (to the log-sigma midpoint, then from the step's start to its end
through the midpoint's estimate) split their target sigma into an ancestral (sigma_down, sigma_up) pair
with eta fixed at 1. At another eta this class takes the same two half steps with k-diffusion's split at
that eta (`ancestral_split`); the model is still called at the same two sigmas, so the timesteps diffusers
precomputes stand. At eta 1 the step is diffusers' own.
"""

from __future__ import annotations

from diffusers import DPMSolverSDEScheduler
from diffusers.schedulers.scheduling_dpmsolver_sde import BrownianTreeNoiseSampler, DPMSolverSDESchedulerOutput

from pipelines.samplers.sigma_steps import ancestral_split, predicted_original


class DPMSolverSDEEtaScheduler(DPMSolverSDEScheduler):
    """DPMSolverSDEScheduler with A1111's eta (its "Eta" setting, eta_ancestral): noise eta * sigma_up(eta 1)."""

    eta = 1.0
    s_noise = 1.0  # A1111's "Sigma noise" (k-diffusion's s_noise), for `run_sampler`, which passes no s_noise

    def step(self, model_output, timestep, sample, return_dict: bool = True, s_noise: float = 1.0):
        if s_noise == 1.0:
            s_noise = self.s_noise
        if self.eta == 1.0:
            return super().step(model_output, timestep, sample, return_dict=return_dict, s_noise=s_noise)
        if self.step_index is None:
            self._init_step_index(timestep)
        if self.noise_sampler is None:
            positive = self.sigmas[self.sigmas > 0]
            self.noise_sampler = BrownianTreeNoiseSampler(sample, positive.min().item(), positive.max().item(),
                                                          self.noise_sampler_seed)
        first_half = self.state_in_first_order
        index = self.step_index if first_half else self.step_index - 1
        sigma, sigma_next = self.sigmas[index], self.sigmas[index + 1]
        midpoint = (sigma * sigma_next).sqrt()  # k-diffusion's s = t + h / 2 in t = -log sigma
        denoised = predicted_original(model_output, sample, sigma if first_half else midpoint,
                                      self.config.prediction_type)
        if sigma_next == 0:
            prev_sample = sample + (sample - denoised) / sigma * (sigma_next - sigma)  # k-diffusion's Euler to 0
        else:
            target = midpoint if first_half else sigma_next
            start = sample if first_half else self.sample
            sigma_down, sigma_up = ancestral_split(sigma, target, self.eta)
            prev_sample = (sigma_down / sigma) * start - (sigma_down / sigma - 1) * denoised
            prev_sample = prev_sample + self.noise_sampler(sigma, target) * s_noise * sigma_up
            self.sample, self.mid_point_sigma = (sample, midpoint) if first_half else (None, None)
        self._step_index += 1
        if not return_dict:
            return prev_sample, denoised
        return DPMSolverSDESchedulerOutput(prev_sample=prev_sample, pred_original_sample=denoised)
