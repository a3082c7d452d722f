"""A1111's "DPM++ 3M SDE" (k-diffusion `sample_dpmpp_3m_sde`) with its seeded Brownian-tree noise, at any eta.

diffusers' DPMSolverMultistepScheduler has a third-order "sde-dpmsolver++" too, but its update is not
k-diffusion's (catalog.py), so this runs k-diffusion's own: DPM-Solver++(3M) in log sigma (Lu et al. 2022), first
order on the first step, second order on the second, third from then on, with the step's decay damped to
exp(-(1 + eta) h) and Brownian noise of std sigma_next * sqrt(1 - exp(-2 eta h)) added (eta 0: no noise, the
deterministic DPM-Solver++(3M)). The step to sigma 0 returns the denoised estimate, as k-diffusion's.

The update is a pure function on sigma-space tensors; the scheduler keeps EulerDiscreteScheduler's plumbing
(every schedule type, `scale_model_input`, img2img's `add_noise`) and, as A1111's sampler, takes its noise from
one Brownian tree per image over the schedule's positive sigmas (`seed_brownian_noise`).
"""

from __future__ import annotations

import torch
from diffusers import EulerDiscreteScheduler
from diffusers.schedulers.scheduling_dpmsolver_sde import BrownianTreeNoiseSampler
from diffusers.schedulers.scheduling_euler_discrete import EulerDiscreteSchedulerOutput

from pipelines.samplers.sigma_steps import predicted_original


def dpmpp_3m_sde_update(sample, denoised, sigma, sigma_next, eta: float, history: list, noise=None):
    """k-diffusion's DPM-Solver++(3M) SDE step from `sigma` to `sigma_next > 0`; returns (x_next, h).

    `history` holds the earlier steps' (denoised, h), the latest first (empty on the first step, one entry on the
    second); `noise` is the step's Brownian increment already scaled by s_noise (unused at eta 0).
    """
    h = torch.log(sigma / sigma_next)
    h_eta = h * (eta + 1)
    x = torch.exp(-h_eta) * sample - torch.expm1(-h_eta) * denoised
    phi_2 = torch.expm1(-h_eta) / h_eta + 1
    if len(history) >= 2:
        (denoised_1, h_1), (denoised_2, h_2) = history[:2]
        r0, r1 = h_1 / h, h_2 / h
        d1_0 = (denoised - denoised_1) / r0
        d1_1 = (denoised_1 - denoised_2) / r1
        d1 = d1_0 + (d1_0 - d1_1) * r0 / (r0 + r1)
        d2 = (d1_0 - d1_1) / (r0 + r1)
        phi_3 = phi_2 / h_eta - 0.5
        x = x + phi_2 * d1 - phi_3 * d2
    elif history:
        denoised_1, h_1 = history[0]
        x = x + phi_2 * (denoised - denoised_1) / (h_1 / h)
    if eta:
        x = x + noise * sigma_next * (-torch.expm1(-2 * h * eta)).sqrt()
    return x, h


class BrownianDPMSolverPlusPlus3MSDEScheduler(EulerDiscreteScheduler):
    """DPM-Solver++(3M) SDE on EulerDiscreteScheduler's sigmas, noise from a Brownian tree seeded per image."""

    noise_sampler_seed = None  # [seed] per image (seed_brownian_noise); None: torch's global RNG, not reproducible
    noise_sampler = None
    eta = 1.0  # A1111's "Eta" (eta_ancestral), which it passes to sample_dpmpp_3m_sde
    s_noise = 1.0  # A1111's "Sigma noise": scales the Brownian increment

    def set_timesteps(self, *args, **kwargs):
        super().set_timesteps(*args, **kwargs)
        self.noise_sampler = None
        self._history: list = []

    def step(self, model_output, timestep, sample, return_dict: bool = True, **_):
        if self.step_index is None:
            self._init_step_index(timestep)
        sample = sample.to(torch.float32)
        sigma, sigma_next = self.sigmas[self.step_index], self.sigmas[self.step_index + 1]
        denoised = predicted_original(model_output.to(torch.float32), sample, sigma, self.config.prediction_type)
        if sigma_next == 0:
            prev_sample = denoised  # k-diffusion's last step
        else:
            noise = None
            if self.eta:
                if self.noise_sampler is None:
                    positive = self.sigmas[self.sigmas > 0]
                    self.noise_sampler = BrownianTreeNoiseSampler(sample, positive.min(), positive.max(),
                                                                  self.noise_sampler_seed)
                noise = self.noise_sampler(sigma, sigma_next) * self.s_noise
            prev_sample, h = dpmpp_3m_sde_update(sample, denoised, sigma, sigma_next, self.eta, self._history, noise)
            self._history = [(denoised, h), *self._history[:1]]
        self._step_index += 1
        prev_sample, denoised = prev_sample.to(model_output.dtype), denoised.to(model_output.dtype)
        if not return_dict:
            return prev_sample, denoised
        return EulerDiscreteSchedulerOutput(prev_sample=prev_sample, pred_original_sample=denoised)
