"""A1111's "DPM++ 2M SDE" (and its Heun variant) with k-diffusion's Brownian-tree noise, at any eta.

diffusers' multistep DPM-Solver++ SDE draws fresh Gaussian noise at every step; k-diffusion (and so
A1111) takes the increments of a Brownian tree seeded with the image's seed, over sigma in
[sigma_min, sigma_max] of the schedule. The two give different (equally valid) images; only the tree
reproduces A1111's. diffusers' `step` accepts the noise as `variance_noise`, so this subclass feeds
it the tree's normalised increment between the step's sigmas (diffusers' own k-diffusion port,
`BrownianTreeNoiseSampler`, as its DPM++ SDE uses), and nothing at the last step to sigma 0, where
k-diffusion adds none either. Seed it per image with `seed_brownian_noise`.

diffusers' update is k-diffusion's at eta 1 only. A1111 passes its "Eta" setting to
`sample_dpmpp_2m_sde(eta=...)`, which damps the step's decay to exp(-eta h), its data weight to
1 - exp(-h - eta h) and its noise to sqrt(1 - exp(-2 eta h)) (eta 0: DPM++ 2M, no noise); at another
eta the two update methods below run those coefficients (`sde_dpmpp_update`), in diffusers' VP
scaling (x = alpha * x_k, so every k-diffusion term picks up alpha_t).
"""

from __future__ import annotations

import torch
from diffusers import DPMSolverMultistepScheduler
from diffusers.schedulers.scheduling_dpmsolver_sde import BrownianTreeNoiseSampler


def sde_dpmpp_update(sample, denoised, noise, sigma, sigma_next, eta: float, solver_type: str,
                     correction=None, h_ratio=None):
    """k-diffusion's DPM-Solver++(2M) SDE step from `sigma` to `sigma_next > 0` in k-diffusion's (VE) scaling.

    `correction` = denoised - previous denoised and `h_ratio` = h_last / h for the second-order term (None on
    the first step); `noise` is the Brownian increment (ignored at eta 0, as k-diffusion's `if eta:`).
    """
    h = torch.log(sigma / sigma_next)
    eta_h = eta * h
    data_weight = -torch.expm1(-h - eta_h)
    x = (sigma_next / sigma) * torch.exp(-eta_h) * sample + data_weight * denoised
    if correction is not None:
        if solver_type == "heun":
            x = x + (data_weight / (-h - eta_h) + 1) * (1 / h_ratio) * correction
        else:
            x = x + 0.5 * data_weight * (1 / h_ratio) * correction
    if eta:
        x = x + noise * sigma_next * (-torch.expm1(-2 * eta_h)).sqrt()
    return x


class BrownianDPMSolverMultistepScheduler(DPMSolverMultistepScheduler):
    """DPMSolverMultistepScheduler whose SDE noise comes from a seeded Brownian tree, as k-diffusion's."""

    noise_sampler_seed = None  # [seed] per image (seed_brownian_noise); None: torch's global RNG, not reproducible
    noise_sampler = None
    eta = 1.0  # A1111's "Eta" (eta_ancestral); 1: diffusers' own update
    s_noise = 1.0  # A1111's "Sigma noise": k-diffusion scales the Brownian increment by it

    def step(self, model_output, timestep, sample, generator=None, variance_noise=None, return_dict: bool = True):
        if variance_noise is None and self.config.algorithm_type in ("sde-dpmsolver", "sde-dpmsolver++"):
            if self.step_index is None:
                self._init_step_index(timestep)
            sigma, sigma_next = self.sigmas[self.step_index], self.sigmas[self.step_index + 1]
            if sigma_next > 0:
                if self.noise_sampler is None:
                    positive = self.sigmas[self.sigmas > 0]
                    self.noise_sampler = BrownianTreeNoiseSampler(
                        sample.to(torch.float32), positive.min(), positive.max(), self.noise_sampler_seed)
                variance_noise = self.noise_sampler(sigma, sigma_next)
            else:
                variance_noise = torch.zeros_like(sample, dtype=torch.float32)
            if self.s_noise != 1.0:
                variance_noise = variance_noise * self.s_noise
        return super().step(model_output, timestep, sample, generator=generator, variance_noise=variance_noise,
                            return_dict=return_dict)

    def _runs_own_eta(self) -> bool:
        return self.eta != 1.0 and self.config.algorithm_type == "sde-dpmsolver++"

    def _vp_update(self, sample, denoised, noise, correction=None, h_ratio=None):
        """The k-diffusion step on diffusers' VP-scaled sample: x_k = x / alpha_s in, alpha_t * x_k out."""
        sigma, sigma_next = self.sigmas[self.step_index], self.sigmas[self.step_index + 1]
        if sigma_next == 0:
            return denoised  # k-diffusion's last step: x = denoised (alpha = 1 at sigma 0)
        alpha_s, _ = self._sigma_to_alpha_sigma_t(sigma)
        alpha_t, _ = self._sigma_to_alpha_sigma_t(sigma_next)
        x = sde_dpmpp_update(sample / alpha_s, denoised, noise, sigma, sigma_next, self.eta, self.config.solver_type,
                             correction, h_ratio)
        return alpha_t * x

    def dpm_solver_first_order_update(self, model_output, *args, sample=None, noise=None, **kwargs):
        if not self._runs_own_eta():
            return super().dpm_solver_first_order_update(model_output, *args, sample=sample, noise=noise, **kwargs)
        return self._vp_update(sample, model_output, noise)

    def multistep_dpm_solver_second_order_update(self, model_output_list, *args, sample=None, noise=None, **kwargs):
        if not self._runs_own_eta():
            return super().multistep_dpm_solver_second_order_update(model_output_list, *args, sample=sample,
                                                                    noise=noise, **kwargs)
        sigma_last, sigma, sigma_next = (self.sigmas[self.step_index - 1], self.sigmas[self.step_index],
                                         self.sigmas[self.step_index + 1])
        h_ratio = torch.log(sigma_last / sigma) / torch.log(sigma / sigma_next) if sigma_next > 0 else None
        return self._vp_update(sample, model_output_list[-1], noise, model_output_list[-1] - model_output_list[-2],
                               h_ratio)
