"""Oracles for A1111's DPM++ 3M SDE, DPM fast and Restart: k-diffusion's samplers and A1111's model wrapper,
restated from their source in plain torch, float32 as they compute.

k-diffusion itself cannot be a test dependency: its package imports torchvision and CLIP at import time, and
pip's torchvision moves torch off the version mixkit pins. These restatements were checked against the installed
k-diffusion 0.1.1.post1 (`sample_dpmpp_3m_sde`, `sample_dpm_fast`, `DiscreteEpsDDPMDenoiser`,
`get_sigmas_karras` / `_exponential`) on the cases the tests run: equal to 1e-6 or better.

`k_denoiser` is A1111's `CompVisDenoiser` around the exactly solvable `GaussianDataModel`: it calls the model on
x / sqrt(sigma^2 + 1) at k-diffusion's t(sigma), unquantised (A1111 with "Enable quantization in K samplers" off,
as mixkit's sigma-space samplers call the model), so a mixkit scheduler and a k-diffusion sampler see the same
model. `restart_sampler` restates A1111 1.10's `modules/sd_samplers_extra.py`, which is not part of k-diffusion.
"""

from __future__ import annotations

import math

import torch

from pipelines.samplers import make_scheduler

from .kdiffusion_reference import SD15_SCHEDULER_CONFIG, GaussianDataModel


def model_alphas_cumprod(config: dict = SD15_SCHEDULER_CONFIG) -> torch.Tensor:
    """The float32 alphas_cumprod mixkit's schedulers hold (diffusers'), so that both sides share the schedule."""
    return make_scheduler("Euler", config).alphas_cumprod.clone()


class KDenoiser:
    """k-diffusion's `DiscreteEpsDDPMDenoiser` (unquantised): D(x, sigma) = x - sigma * eps(x * c_in, t(sigma))."""

    def __init__(self, config: dict = SD15_SCHEDULER_CONFIG) -> None:
        alphas = model_alphas_cumprod(config)
        self.sigmas = ((1 - alphas) / alphas) ** 0.5
        self.log_sigmas = self.sigmas.log()
        self.model = GaussianDataModel(config)

    def sigma_to_t(self, sigma: torch.Tensor) -> torch.Tensor:
        """k-diffusion's `DiscreteSchedule.sigma_to_t`: the timestep, linear in log sigma between its neighbours."""
        log_sigma = sigma.log()
        above = (log_sigma - self.log_sigmas[:, None]).ge(0).cumsum(dim=0).argmax(dim=0)
        low = above.clamp(max=len(self.log_sigmas) - 2)
        w = ((self.log_sigmas[low] - log_sigma) / (self.log_sigmas[low] - self.log_sigmas[low + 1])).clamp(0, 1)
        return (1 - w) * low + w * (low + 1)

    def __call__(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        c_in = 1 / (sigma**2 + 1) ** 0.5
        return x - sigma * self.model(x * c_in, self.sigma_to_t(sigma))


def k_denoiser(config: dict = SD15_SCHEDULER_CONFIG) -> KDenoiser:
    return KDenoiser(config)


def model_sigma_range(config: dict = SD15_SCHEDULER_CONFIG) -> tuple[float, float]:
    """(sigma_min, sigma_max) as A1111 reads them: `model_wrap.sigmas[0].item()`, `model_wrap.sigmas[-1].item()`."""
    sigmas = KDenoiser(config).sigmas
    return sigmas[0].item(), sigmas[-1].item()


def get_sigmas_karras(n: int, sigma_min: float, sigma_max: float, rho: float = 7.0) -> torch.Tensor:
    ramp = torch.linspace(0, 1, n)
    low, high = sigma_min ** (1 / rho), sigma_max ** (1 / rho)
    return torch.cat([(high + ramp * (low - high)) ** rho, torch.zeros(1)])


def get_sigmas_exponential(n: int, sigma_min: float, sigma_max: float) -> torch.Tensor:
    return torch.cat([torch.linspace(math.log(sigma_max), math.log(sigma_min), n).exp(), torch.zeros(1)])


def sample_dpmpp_3m_sde(model, x, sigmas, noise_sampler, eta: float = 1.0, s_noise: float = 1.0):
    """k-diffusion's `sample_dpmpp_3m_sde`: DPM-Solver++(3M) SDE, orders 1, 2, then 3; x = D on the step to 0."""
    ones = x.new_ones([x.shape[0]])
    old = []  # (denoised, h) of the earlier steps, the latest first
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        if sigmas[i + 1] == 0:
            x = denoised
            continue
        h = sigmas[i].log() - sigmas[i + 1].log()
        h_eta = h * (eta + 1)
        x = torch.exp(-h_eta) * x - torch.expm1(-h_eta) * denoised
        phi_2 = torch.expm1(-h_eta) / h_eta + 1
        if len(old) >= 2:
            r0, r1 = old[0][1] / h, old[1][1] / h
            d1_0, d1_1 = (denoised - old[0][0]) / r0, (old[0][0] - old[1][0]) / r1
            d1 = d1_0 + (d1_0 - d1_1) * r0 / (r0 + r1)
            d2 = (d1_0 - d1_1) / (r0 + r1)
            x = x + phi_2 * d1 - (phi_2 / h_eta - 0.5) * d2
        elif old:
            x = x + phi_2 * (denoised - old[0][0]) / (old[0][1] / h)
        if eta:
            x = x + noise_sampler(sigmas[i], sigmas[i + 1]) * sigmas[i + 1] * (-torch.expm1(-2 * h * eta)).sqrt() * s_noise
        old = [(denoised, h), *old[:1]]
    return x


def sample_dpm_fast(model, x, sigma_min: float, sigma_max: float, n: int, noise_sampler, eta: float = 0.0,
                    s_noise: float = 1.0):
    """k-diffusion's `sample_dpm_fast` (its `DPMSolver.dpm_solver_fast`), in t = -log(sigma)."""
    def sigma(t):
        return torch.exp(-t)

    def eps(x, t):
        return (x - model(x, sigma(t) * x.new_ones([x.shape[0]]))) / sigma(t)

    t_start, t_end = -torch.tensor(sigma_max).log(), -torch.tensor(sigma_min).log()
    m = math.floor(n / 3) + 1
    ts = torch.linspace(float(t_start), float(t_end), m + 1)
    orders = [3] * (m - 2) + [2, 1] if n % 3 == 0 else [3] * (m - 1) + [n % 3]
    for i, order in enumerate(orders):
        t, t_next = ts[i], ts[i + 1]
        target, sigma_up = t_next, 0.0
        if eta:
            s, s_next = sigma(t), sigma(t_next)
            up = torch.minimum(s_next, eta * (s_next**2 * (s**2 - s_next**2) / s**2) ** 0.5)
            target = torch.minimum(t_end, -((s_next**2 - up**2) ** 0.5).log())
            sigma_up = (s_next**2 - sigma(target) ** 2) ** 0.5
        h = target - t
        e = eps(x, t)
        if order == 1:
            x_next = x - sigma(target) * torch.expm1(h) * e
        elif order == 2:
            s1 = t + h / 2
            e1 = eps(x - sigma(s1) * torch.expm1(h / 2) * e, s1)
            x_next = x - sigma(target) * torch.expm1(h) * e - sigma(target) * torch.expm1(h) * (e1 - e)
        else:
            s1, s2 = t + h / 3, t + 2 * h / 3
            e1 = eps(x - sigma(s1) * torch.expm1(h / 3) * e, s1)
            u2 = (x - sigma(s2) * torch.expm1(2 * h / 3) * e
                  - sigma(s2) * 2 * (torch.expm1(2 * h / 3) / (2 * h / 3) - 1) * (e1 - e))
            e2 = eps(u2, s2)
            x_next = x - sigma(target) * torch.expm1(h) * e - sigma(target) * 1.5 * (torch.expm1(h) / h - 1) * (e2 - e)
        x = x_next + sigma_up * s_noise * noise_sampler(sigma(t), sigma(t_next))
    return x


def restart_sampler(model, x, sigmas, generator: torch.Generator):
    """A1111 1.10's `restart_sampler` (default restart list, s_noise 1); its `randn_like` draws from `generator`,
    as A1111's per-image RNG does."""
    sigmas = sigmas.float()
    steps = len(sigmas) - 1
    restarts = None
    if steps >= 20:
        length, times = (steps // 4, 2) if steps >= 36 else (9, 1)
        sigmas = get_sigmas_karras(steps - length * times, sigmas[-2].item(), sigmas[0].item())
        restarts = (length + 1, times)
    walk = []
    bottom = int(torch.argmin((sigmas - 0.1).abs()))
    for i in range(len(sigmas) - 1):
        walk.append((sigmas[i], sigmas[i + 1]))
        if restarts is not None and i + 1 == bottom:
            top = int(torch.argmin((sigmas - 2).abs()))
            if top < bottom:
                segment = get_sigmas_karras(restarts[0], sigmas[bottom].item(), sigmas[top].item())[:-1]
                walk.extend(list(zip(segment[:-1], segment[1:])) * restarts[1])
    ones = x.new_ones([x.shape[0]])
    last = None
    for start, end in walk:
        if last is not None and last < start:
            x = x + torch.randn(x.shape, generator=generator) * (start**2 - last**2) ** 0.5
        d = (x - model(x, start * ones)) / start
        if end == 0:
            x = x + d * (end - start)
        else:
            x_2 = x + d * (end - start)
            x = x + (d + (x_2 - model(x_2, end * ones)) / end) / 2 * (end - start)
        last = end
    return x
