"""A1111's "DPM++ 2M SDE" (and its Heun variant) with k-diffusion's Brownian-tree noise.

diffusers' multistep DPM-Solver++ SDE draws fresh Gaussian noise at every step; k-diffusion (and so
A1111) takes the increments of a Brownian tree seeded with the image's seed, over sigma in
[sigma_min, sigma_max] of the schedule. The two give different (equally valid) images; only the tree
reproduces A1111's. diffusers' `step` accepts the noise as `variance_noise`, so this subclass feeds
it the tree's normalised increment between the step's sigmas (diffusers' own k-diffusion port,
`BrownianTreeNoiseSampler`, as its DPM++ SDE uses), and nothing at the last step to sigma 0, where
k-diffusion adds none either. Seed it per image with `seed_brownian_noise`.
"""

from __future__ import annotations

import torch
from diffusers import DPMSolverMultistepScheduler
from diffusers.schedulers.scheduling_dpmsolver_sde import BrownianTreeNoiseSampler


class BrownianDPMSolverMultistepScheduler(DPMSolverMultistepScheduler):
    """DPMSolverMultistepScheduler whose SDE noise comes from a seeded Brownian tree, as k-diffusion's."""

    noise_sampler_seed = None  # [seed] per image (seed_brownian_noise); None: torch's global RNG, not reproducible
    noise_sampler = None

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
        return super().step(model_output, timestep, sample, generator=generator, variance_noise=variance_noise,
                            return_dict=return_dict)
