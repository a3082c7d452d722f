"""A1111's own "DDIM" and "PLMS": its timestep grid, its step count and its img2img start.

diffusers' DDIM/PNDM with "leading" spacing walk `steps` timesteps `k * (1000 // steps) + 1` from
the bottom and finish with a step to alphas_cumprod[0]. A1111 1.10 (sd_samplers_timesteps) takes the
grid `range(0, 1000, 1000 // steps) + 1` (clipped to 999), evaluates the model at every grid point
but the lowest, top first, and stops *at* the lowest (t = 1). Where 1000 is not a multiple of the
step count the two start far apart (30 steps: t 991 here and in A1111, 958 in diffusers) and the
images differ visibly; where it is, A1111 makes one model call fewer. img2img noises the init
latents to grid[t_enc] and then evaluates from grid[t_enc - 1] (A1111's own off-by-one, kept so that
an img2img made there is reproduced here).

The update rules are pure functions; the two scheduler classes only keep the walk's state so that
mixkit's denoising loop (and its per-image generators, progress and prompt schedules) drive them
like any diffusers scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from diffusers import DDIMScheduler

from pipelines.samplers.noise import sampler_noise


def timestep_grid(steps: int, num_train_timesteps: int = 1000) -> np.ndarray:
    """A1111's ascending timestep grid for `steps` steps (its `get_timesteps`)."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}.")
    stride = max(1, num_train_timesteps // steps)
    return np.clip(np.arange(0, num_train_timesteps, stride) + 1, 0, num_train_timesteps - 1)


def ddim_update(x, eps, alpha, alpha_prev, sigma: float = 0.0, noise=None, direction_eps=None):
    """One DDIM step from cumulative alpha `alpha` to `alpha_prev`: (x_prev, predicted x0).

    `sigma` is eta's stochastic part (0 for A1111's default eta 0); `noise` is then needed. `direction_eps` is the
    noise the step renoises with (default: `eps`; CFG++ passes the unconditional prediction, ddim_cfgpp.py).
    """
    pred_x0 = (x - (1.0 - alpha) ** 0.5 * eps) / alpha**0.5
    direction = eps if direction_eps is None else direction_eps
    x_prev = alpha_prev**0.5 * pred_x0 + (1.0 - alpha_prev - sigma**2) ** 0.5 * direction
    if sigma:
        x_prev = x_prev + sigma * noise
    return x_prev, pred_x0


def ddim_sigma(eta: float, alpha: float, alpha_prev: float) -> float:
    """DDIM's noise scale for `eta` (Song et al., eq. 16), as A1111 computes it."""
    return eta * ((1.0 - alpha_prev) / (1.0 - alpha) * (1.0 - alpha / alpha_prev)) ** 0.5


def plms_eps(e_t, history: list):
    """The pseudo linear multistep noise estimate from `e_t` and up to three earlier ones (oldest first)."""
    if len(history) == 1:
        return (3 * e_t - history[-1]) / 2
    if len(history) == 2:
        return (23 * e_t - 16 * history[-1] + 5 * history[-2]) / 12
    if len(history) >= 3:
        return (55 * e_t - 59 * history[-1] + 37 * history[-2] - 9 * history[-3]) / 24
    return e_t


def as_epsilon(model_output, sample, alpha: float, prediction_type: str):
    """The model output as a noise prediction, whatever the model predicts (A1111's V denoiser for v)."""
    if prediction_type == "epsilon":
        return model_output
    if prediction_type == "v_prediction":
        return alpha**0.5 * model_output + (1.0 - alpha) ** 0.5 * sample
    if prediction_type == "sample":
        return (sample - alpha**0.5 * model_output) / (1.0 - alpha) ** 0.5
    raise ValueError(f"prediction_type must be epsilon, v_prediction or sample, got {prediction_type!r}.")


@dataclass
class TimestepStepOutput:
    prev_sample: torch.Tensor
    pred_original_sample: torch.Tensor


class A1111DDIMScheduler(DDIMScheduler):
    """A1111's DDIM (eta 0 unless set): model calls at grid[-1] ... grid[1], ending at grid[0] = 1.

    Inherits the model's betas, `add_noise` and unit `init_noise_sigma` from DDIMScheduler; only the
    grid and the step are A1111's. `noise_timestep` is where img2img noises its init latents.
    """

    eta = 0.0  # A1111's "Eta DDIM" (eta_ddim)

    def set_timesteps(self, num_inference_steps: int, device=None, **_):
        self.num_inference_steps = num_inference_steps
        self._use_grid(timestep_grid(num_inference_steps, self.config.num_train_timesteps), device)
        self.noise_timestep = int(self.grid[-1])

    def set_img2img_start(self, t_enc: int, device=None) -> None:
        """Keep A1111's img2img part of the grid set by `set_timesteps`; `noise_timestep` is where to noise to.

        `t_enc` is A1111's `int(min(strength, 0.999) * steps)` (or steps - 1 with exact steps).
        """
        full = self.full_grid
        noise_at = int(full[min(t_enc, len(full) - 1)])
        self._use_grid(full[:t_enc], device, keep_full=True)
        self.noise_timestep = noise_at

    def _use_grid(self, grid: np.ndarray, device, keep_full: bool = False) -> None:
        if not keep_full:
            self.full_grid = grid
        self.grid = grid
        self.timesteps = torch.from_numpy(self._evaluations(grid).copy()).to(device=device, dtype=torch.long)
        self._calls = 0
        self._reset_walk()

    def _evaluations(self, grid: np.ndarray) -> np.ndarray:
        return grid[:0:-1]

    def _reset_walk(self) -> None:
        pass

    def set_begin_index(self, begin_index: int = 0):
        """The walk always starts at the first listed call; img2img re-lists it with `set_img2img_start`."""

    def scale_model_input(self, sample, timestep=None):
        return sample

    def _alphas(self, index: int) -> tuple[float, float]:
        """Cumulative alphas of grid[index] and of the grid point below it, in float64 as A1111 does."""
        alphas = self.alphas_cumprod.double()
        return float(alphas[int(self.grid[index])]), float(alphas[int(self.grid[max(index - 1, 0)])])

    def _direction_eps(self, sample, index: int, **_):
        """The noise DDIM renoises with, when not the guided prediction's (None): CFG++'s (ddim_cfgpp.py)."""
        return None

    def _eps(self, model_output, sample, index: int):
        alpha = float(self.alphas_cumprod.double()[int(self.grid[index])])
        return as_epsilon(model_output, sample, alpha, self.config.prediction_type)

    def step(self, model_output, timestep, sample, eta: float | None = None, generator=None, return_dict: bool = True,
             **kwargs):
        index = len(self.grid) - 1 - self._calls
        self._calls += 1
        alpha, alpha_prev = self._alphas(index)
        eta = self.eta if eta is None else eta
        sigma = ddim_sigma(eta, alpha, alpha_prev) if eta else 0.0
        noise = None
        if sigma:
            noise = sampler_noise(sample.shape, generator=generator, device=sample.device, dtype=sample.dtype)
        direction = self._direction_eps(sample, index, **kwargs)
        x_prev, pred_x0 = ddim_update(sample, self._eps(model_output, sample, index), alpha, alpha_prev, sigma, noise,
                                      direction)
        output = TimestepStepOutput(prev_sample=x_prev.to(sample.dtype), pred_original_sample=pred_x0.to(sample.dtype))
        return output if return_dict else (output.prev_sample,)


class A1111PLMSScheduler(A1111DDIMScheduler):  # no eta: A1111's PLMS has none
    """A1111's PLMS: DDIM's walk with Adams-Bashforth noise estimates.

    Its first step is improved Euler: the model is called again at the grid point below on the
    Euler result and the two estimates are averaged, so that grid point is listed twice.
    """

    def _evaluations(self, grid: np.ndarray) -> np.ndarray:
        calls = grid[:0:-1]
        return np.concatenate([calls[:1], grid[-2:-1], calls[1:]]) if len(calls) else calls

    def _reset_walk(self) -> None:
        self._history: list = []
        self._first: tuple | None = None

    def step(self, model_output, timestep, sample, return_dict: bool = True, **_):
        if self._first is not None:  # the improved-Euler correction of the first step
            e_t, start = self._first
            self._first = None
            index = len(self.grid) - 1
            e_next = self._eps(model_output, sample, index - 1)
            x_prev, pred_x0 = ddim_update(start, (e_t + e_next) / 2, *self._alphas(index))
            self._history.append(e_t)
            self._calls = 1
        else:
            index = len(self.grid) - 1 - self._calls
            e_t = self._eps(model_output, sample, index)
            if not self._history:
                x_prev, pred_x0 = ddim_update(sample, e_t, *self._alphas(index))
                self._first = (e_t, sample)
            else:
                x_prev, pred_x0 = ddim_update(sample, plms_eps(e_t, self._history), *self._alphas(index))
                self._history = (self._history + [e_t])[-3:]
                self._calls += 1
        output = TimestepStepOutput(prev_sample=x_prev.to(sample.dtype), pred_original_sample=pred_x0.to(sample.dtype))
        return output if return_dict else (output.prev_sample,)
