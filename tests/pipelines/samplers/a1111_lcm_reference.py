"""A1111 1.10's "LCM" (modules/sd_samplers_lcm.py), restated in float64 as the oracle.

Written from A1111's algorithm, not from mixkit's code: a k-diffusion discrete denoiser whose 50
training sigmas are those of timesteps 19, 39, ..., 999; its `get_sigmas(n)` interpolates log sigma at
n evenly spaced points from the last index to the first, then appends 0; the model is called at the
distilled timestep nearest in log sigma (index * 20 + 19) on x / sqrt(sigma^2 + 1); the estimate
x - sigma * eps goes through LCM's boundary condition with the timestep scaled by 10; each step returns
that estimate plus fresh noise at the next sigma. `model(x, t)` returns epsilon.
"""

from __future__ import annotations

import math

import torch


def valid_sigmas(alphas: torch.Tensor) -> torch.Tensor:
    picked = torch.stack([alphas[999 - 20 * (49 - k)] for k in range(50)])
    return ((1 - picked) / picked).sqrt()


def get_sigmas(n: int, sigmas: torch.Tensor) -> torch.Tensor:
    log_sigmas = sigmas.log()
    out = []
    for t in torch.linspace(49, 0, n, dtype=torch.float64).tolist():
        low = min(int(math.floor(t)), 48)
        w = t - low
        out.append(math.exp((1 - w) * float(log_sigmas[low]) + w * float(log_sigmas[low + 1])))
    return torch.tensor(out + [0.0], dtype=torch.float64)


def model_timestep(sigma: float, sigmas: torch.Tensor) -> int:
    return int((math.log(sigma) - sigmas.log()).abs().argmin()) * 20 + 19


def denoise(model, x, sigma: float, sigmas: torch.Tensor, calls: list | None = None):
    t = model_timestep(sigma, sigmas)
    if calls is not None:
        calls.append(t)
    eps = model(x / (sigma**2 + 1) ** 0.5, t).double()
    raw = x - sigma * eps
    scaled = t * 10.0
    c_skip = 0.25 / (scaled**2 + 0.25)
    c_out = scaled / (scaled**2 + 0.25) ** 0.5
    return c_out * raw + c_skip * x


def sample_lcm(model, x, schedule: torch.Tensor, sigmas: torch.Tensor, calls: list | None = None,
               generator: torch.Generator | None = None):
    """`x` is already at schedule[0] (noise * sigma_max, or init + noise * sigma for img2img)."""
    for i in range(len(schedule) - 1):
        x = denoise(model, x, float(schedule[i]), sigmas, calls)
        if schedule[i + 1] > 0:
            x = x + float(schedule[i + 1]) * torch.randn(x.shape, generator=generator, dtype=torch.float32).double()
    return x
