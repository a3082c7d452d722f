"""A1111 1.10's DDIM and PLMS (modules/sd_samplers_timesteps*.py), restated in float64 as the oracle.

Written from A1111's algorithm, not from mixkit's code: grid = range(0, 1000, 1000 // steps) + 1
clipped to 999; the loop visits grid indices len-1 .. 1, stepping each to the grid point below;
PLMS's first step is improved Euler (a second call at the point below, the two estimates averaged),
then Adams-Bashforth of order 2, 3, 4. img2img keeps grid[:t_enc] and noises to grid[t_enc].
`model(x, t)` returns epsilon.
"""

from __future__ import annotations

import torch


def grid(steps: int) -> list[int]:
    return [min(t + 1, 999) for t in range(0, 1000, 1000 // steps)]


def _step(x, e, a, a_prev):
    pred_x0 = (x - (1 - a) ** 0.5 * e) / a**0.5
    return a_prev**0.5 * pred_x0 + (1 - a_prev) ** 0.5 * e


def ddim(model, x: torch.Tensor, timesteps: list[int], alphas: torch.Tensor, calls: list | None = None,
         eta: float = 0.0, generator: torch.Generator | None = None, renoise_model=None):
    """With `eta` > 0, noise of std eta * sqrt((1 - a_prev) / (1 - a) * (1 - a / a_prev)) drawn in float32 each step.

    `renoise_model`: A1111's ddim_cfgpp, whose direction term takes this (the uncond) noise instead of `model`'s."""
    for index in range(len(timesteps) - 1, 0, -1):
        t = timesteps[index]
        if calls is not None:
            calls.append(t)
        a, a_prev = float(alphas[t]), float(alphas[timesteps[index - 1]])
        e = model(x, t)
        sigma = eta * ((1 - a_prev) / (1 - a) * (1 - a / a_prev)) ** 0.5
        pred_x0 = (x - (1 - a) ** 0.5 * e) / a**0.5
        direction = e if renoise_model is None else renoise_model(x, t)
        x = a_prev**0.5 * pred_x0 + (1 - a_prev - sigma**2) ** 0.5 * direction
        if eta:
            x = x + sigma * torch.randn(x.shape, generator=generator, dtype=torch.float32).double()
    return x


def plms(model, x: torch.Tensor, timesteps: list[int], alphas: torch.Tensor, calls: list | None = None):
    old = []

    def call(x_in, t):
        if calls is not None:
            calls.append(t)
        return model(x_in, t)

    for index in range(len(timesteps) - 1, 0, -1):
        t, t_next = timesteps[index], timesteps[index - 1]
        a, a_prev = float(alphas[t]), float(alphas[t_next])
        e = call(x, t)
        if not old:
            e_next = call(_step(x, e, a, a_prev), t_next)
            e_used = (e + e_next) / 2
        elif len(old) == 1:
            e_used = (3 * e - old[-1]) / 2
        elif len(old) == 2:
            e_used = (23 * e - 16 * old[-1] + 5 * old[-2]) / 12
        else:
            e_used = (55 * e - 59 * old[-1] + 37 * old[-2] - 9 * old[-3]) / 24
        x = _step(x, e_used, a, a_prev)
        old = (old + [e])[-3:]
    return x


def img2img_start(init: torch.Tensor, noise: torch.Tensor, steps: int, t_enc: int, alphas: torch.Tensor):
    """(noised latents, the timesteps the sampler walks) for A1111's img2img with DDIM/PLMS."""
    full = grid(steps)
    a = float(alphas[full[t_enc]])
    return init * a**0.5 + noise * (1 - a) ** 0.5, full[:t_enc]
