"""A1111's "Restart" sampler (its `modules/sd_samplers_extra.py` `restart_sampler`), as a diffusers scheduler.

Restart sampling (Xu et al. 2023, "Restart Sampling for Improving Generative Processes") alternates Heun steps
down the schedule with "restarts": at sigma ~0.1 it adds fresh noise back up to sigma ~2 and walks down again.
A1111's rule: below 20 steps none, the walk is plain Heun (Euler on the step to 0); from 20 steps one restart of 9
steps, from 36 steps two of steps // 4; the main schedule is then re-planned as Karras between the schedule's
first and last positive sigma with the restart steps taken out, so that every run takes exactly `steps` Heun steps
(2 * steps - 1 model calls), whatever the schedule type. The restart noise comes from the image's generator
(A1111's `randn_like`, its per-image RNG), in the draw order of A1111's loop.

The plan is computed in float32, as A1111's torch code computes it: whether a step starts above the sigma the
last one ended at (then noise is added) is decided by those float32 values.
"""

from __future__ import annotations

import torch

from pipelines.samplers.noise import sampler_noise
from pipelines.samplers.planned_walk import PlannedWalkScheduler

RESTART_FROM = 0.1  # the sigma a restart starts from (the nearest schedule sigma) ...
RESTART_TO = 2.0  # ... and the sigma it jumps back up to (idem), A1111's restart_list {0.1: [..., 2]}


def karras_sigmas_float32(n: int, sigma_min: float, sigma_max: float, rho: float = 7.0) -> torch.Tensor:
    """Karras et al. 2022 eq. 5 in float32 with a final 0, as k-diffusion's `get_sigmas_karras` computes it."""
    ramp = torch.linspace(0, 1, n)
    low, high = sigma_min ** (1 / rho), sigma_max ** (1 / rho)
    return torch.cat([(high + ramp * (low - high)) ** rho, torch.zeros(1)])


def restart_steps(sigmas: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """A1111's `restart_sampler` walk over `sigmas` (ending at 0): its Heun steps as (from, to) sigma pairs."""
    sigmas = sigmas.to(torch.float32)
    steps = len(sigmas) - 1
    if steps < 20:
        return list(zip(sigmas[:-1], sigmas[1:]))
    restart_length, restart_times = (steps // 4, 2) if steps >= 36 else (9, 1)
    sigmas = karras_sigmas_float32(steps - restart_length * restart_times, float(sigmas[-2]), float(sigmas[0]))
    pairs = list(zip(sigmas[:-1], sigmas[1:]))
    bottom = int(torch.argmin((sigmas - RESTART_FROM).abs()))
    top = int(torch.argmin((sigmas - RESTART_TO).abs()))
    if 0 < bottom and top < bottom:
        segment = karras_sigmas_float32(restart_length + 1, float(sigmas[bottom]), float(sigmas[top]))[:-1]
        # inserted after the step that ends at sigmas[bottom], `restart_times` times
        pairs[bottom:bottom] = list(zip(segment[:-1], segment[1:])) * restart_times
    return pairs


class RestartScheduler(PlannedWalkScheduler):
    """A1111's Restart: Heun steps over `restart_steps`, fresh noise where a step starts above the last one's end."""

    def plan(self, sigmas: torch.Tensor, img2img: bool) -> torch.Tensor:
        self._pairs = restart_steps(sigmas)
        # (step, stage): stage 0 at the step's start, stage 1 at its end (none on a step to 0: Euler there)
        self._calls = [(k, stage) for k, (_, end) in enumerate(self._pairs) for stage in ((0, 1) if end > 0 else (0,))]
        self._heun_start = None
        return torch.stack([self._pairs[k][stage] for k, stage in self._calls])

    def advance(self, sample, denoised, index: int, generator):
        k, stage = self._calls[index]
        start_sigma, end_sigma = self._pairs[k]
        step = end_sigma - start_sigma
        if stage == 0:
            derivative = (sample - denoised) / start_sigma
            x = sample + derivative * step
            if end_sigma > 0:  # Heun: the model is called again at the step's end
                self._heun_start = (sample, derivative)
                return x
        else:
            start, derivative = self._heun_start
            x = start + (derivative + (sample - denoised) / end_sigma) / 2 * step
        if k + 1 < len(self._pairs) and end_sigma < self._pairs[k + 1][0]:  # a restart: noise back up
            next_sigma = self._pairs[k + 1][0]
            noise = sampler_noise(x.shape, generator=generator, device=x.device, dtype=torch.float32)
            x = x + noise * (next_sigma**2 - end_sigma**2) ** 0.5
        return x
