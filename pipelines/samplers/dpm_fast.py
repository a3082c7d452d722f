"""A1111's "DPM fast" (k-diffusion `sample_dpm_fast`: DPM-Solver-Fast, Lu et al. 2022, fixed step size).

DPM-Solver-Fast spends exactly `n` model calls: floor(n / 3) + 1 steps evenly spaced in t = -log(sigma), of
order 3 but the last one or two (orders [3, ..., 3, n % 3], or [3, ..., 3, 2, 1] when 3 divides n). A step of order
k calls the model k times, at t, t + h / 3 and t + 2h / 3 (order 2: t and t + h / 2), and the steps work on the
noise estimate eps = (x - D(x)) / sigma. With eta (A1111 passes its "Eta" setting, 1 by default) each step aims
at k-diffusion's ancestral sigma_down and then adds noise of std s_noise * sigma_up from the image's generator
(A1111's `randn_like`); the walk ends *at* sigma_min, not at 0, as k-diffusion's does.

A1111 hands it no schedule: txt2img runs from the model's sigma_max to its sigma_min in `steps` calls (the schedule
type only sets the initial noise, x * sigmas[0]); img2img from sigma_sched[0] to sigma_sched[-2] (the tail's last
positive sigma) in len(sigma_sched) - 1 calls. The plan is computed in float32, as k-diffusion's torch code does.
Progress counts model calls, `steps` of them (k-diffusion's own bar counts the same); A1111's UI counter shows the
solver's step index instead, which ends near steps / 3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pipelines.samplers.noise import sampler_noise
from pipelines.samplers.planned_walk import PlannedWalkScheduler
from pipelines.samplers.sigma_steps import ancestral_split

# Where a step of each order calls the model, as fractions r of its log-sigma length h (k-diffusion's r1, r2).
STAGE_FRACTIONS = {1: (0.0,), 2: (0.0, 1 / 2), 3: (0.0, 1 / 3, 2 / 3)}


@dataclass(frozen=True)
class FastStep:
    """One DPM-Solver step from t to t_next (t = -log sigma) of `order`, then noise of std `sigma_up`."""

    order: int
    t: torch.Tensor
    t_next: torch.Tensor
    sigma_up: torch.Tensor | float

    @property
    def h(self) -> torch.Tensor:
        return self.t_next - self.t

    def call_sigmas(self) -> list[torch.Tensor]:
        return [torch.exp(-(self.t + r * self.h)) for r in STAGE_FRACTIONS[self.order]]


def dpm_fast_steps(sigma_min: float, sigma_max: float, n: int, eta: float) -> list[FastStep]:
    """k-diffusion's `dpm_solver_fast` plan: its steps for `n` model calls from sigma_max down to sigma_min."""
    t_start, t_end = -torch.tensor(sigma_max).log(), -torch.tensor(sigma_min).log()
    m = math.floor(n / 3) + 1
    ts = torch.linspace(float(t_start), float(t_end), m + 1)
    orders = [3] * (m - 2) + [2, 1] if n % 3 == 0 else [3] * (m - 1) + [n % 3]
    steps = []
    for i, order in enumerate(orders):
        t, t_next = ts[i], ts[i + 1]
        sigma_up = 0.0
        if eta:
            sigma_down, _ = ancestral_split(torch.exp(-t), torch.exp(-t_next), eta)
            aimed = torch.minimum(t_end, -sigma_down.log())
            sigma_up = (torch.exp(-t_next) ** 2 - torch.exp(-aimed) ** 2) ** 0.5
            t_next = aimed
        steps.append(FastStep(order, t, t_next, sigma_up))
    return steps


def dpm_solver_stage(order: int, stage: int, x, eps: list, step: FastStep):
    """What DPM-Solver-`order` computes after its `stage`-th noise estimate (eps[0..stage]) from x at step.t:
    the next stage's input, or, after the last stage, the sample at step.t_next (Lu et al. 2022, alg. 1-2)."""
    h, sigma_next = step.h, torch.exp(-step.t_next)
    if stage == order - 1:  # the step's result
        x_next = x - sigma_next * torch.expm1(h) * eps[0]
        if order == 2:
            r1 = STAGE_FRACTIONS[2][1]
            x_next = x_next - sigma_next / (2 * r1) * torch.expm1(h) * (eps[1] - eps[0])
        elif order == 3:
            r2 = STAGE_FRACTIONS[3][2]
            x_next = x_next - sigma_next / r2 * (torch.expm1(h) / h - 1) * (eps[2] - eps[0])
        return x_next
    r1 = STAGE_FRACTIONS[order][1]
    if stage == 0:
        return x - torch.exp(-(step.t + r1 * h)) * torch.expm1(r1 * h) * eps[0]
    r2 = STAGE_FRACTIONS[3][2]  # stage 1 of a third-order step: the input at t + r2 h
    sigma_2 = torch.exp(-(step.t + r2 * h))
    return (x - sigma_2 * torch.expm1(r2 * h) * eps[0]
            - sigma_2 * (r2 / r1) * (torch.expm1(r2 * h) / (r2 * h) - 1) * (eps[1] - eps[0]))


def a1111_dpm_sigma_range(scheduler, sigmas: torch.Tensor, img2img: bool) -> tuple[float, float, int]:
    """(sigma_min, sigma_max, n) A1111 hands DPM fast and DPM adaptive for the walk's schedule `sigmas`.

    img2img (`sample_img2img`): the tail's first and last positive sigma, n = its steps. txt2img (`sample`): the
    model's whole training range (its float32 sigmas), n = the step count, whatever the schedule type."""
    if img2img:
        return float(sigmas[-2]), float(sigmas[0]), len(sigmas) - 1
    alphas = scheduler.alphas_cumprod.to(torch.float32)
    training = ((1 - alphas) / alphas) ** 0.5
    return float(training[0]), float(training[-1]), scheduler.num_inference_steps


class DPMFastScheduler(PlannedWalkScheduler):
    """DPM-Solver-Fast over `dpm_fast_steps`, A1111's eta and s_noise; ends at sigma_min."""

    eta = 1.0  # A1111's "Eta" (eta_ancestral)
    s_noise = 1.0  # A1111's "Sigma noise"

    def plan(self, sigmas: torch.Tensor, img2img: bool) -> torch.Tensor:
        sigma_min, sigma_max, n = a1111_dpm_sigma_range(self, sigmas, img2img)
        self._steps = dpm_fast_steps(sigma_min, sigma_max, n, self.eta)
        self._calls = [(k, stage) for k, step in enumerate(self._steps) for stage in range(step.order)]
        self._start, self._eps = None, []
        return torch.stack([sigma for step in self._steps for sigma in step.call_sigmas()])

    def advance(self, sample, denoised, index: int, generator):
        k, stage = self._calls[index]
        step = self._steps[k]
        if stage == 0:
            self._start, self._eps = sample, []
        self._eps.append((sample - denoised) / self.sigmas[index])
        x = dpm_solver_stage(step.order, stage, self._start, self._eps, step)
        if stage == step.order - 1 and step.sigma_up > 0:
            # k-diffusion draws this noise at sigma_up 0 too (eta 0, the last step), where it changes nothing
            noise = sampler_noise(x.shape, generator=generator, device=x.device, dtype=torch.float32)
            x = x + noise * (step.sigma_up * self.s_noise)
        return x
