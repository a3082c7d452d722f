"""A1111's "UniPC": diffusers' UniPC update on A1111's time grid, with A1111's img2img start.

The update is the one A1111's vendored `uni_pc` module runs (the same UniPC algorithm: data prediction,
bh1/bh2, order 3 with warm-up, the order lowered towards the end, no corrector after the last step). What
differs is *where* it is evaluated. A1111 (sd_samplers_timesteps_impl.unipc) runs `len(timestep_grid(steps))`
steps (30 asked: 31, as its DDIM grid), time-uniform in its continuous time t from 1 down to 1/1000, and calls
the model at t_input = 1000 (t - 1/1000), which is rarely an integer (999, 966.8, ...); its noise level there is
the training schedule's log alpha interpolated linearly between whole timesteps. diffusers' class takes `steps`
integer timesteps. img2img (A1111's `sample_img2img`) noises the init latents to grid[t_enc] and runs t_enc steps
from t_input = grid[t_enc - 1] (its own off-by-one, as DDIM's, kept so its images reproduce).
"""

from __future__ import annotations

import numpy as np
import torch
from diffusers import UniPCMultistepScheduler

from pipelines.samplers.a1111_timesteps import timestep_grid


def unipc_model_times(start: float, steps: int, num_train_timesteps: int = 1000) -> np.ndarray:
    """A1111's model-input times for `steps` time-uniform UniPC steps from model time `start` down to 0: steps + 1
    values, the last being where the walk ends (no model call there)."""
    total = float(num_train_timesteps)
    continuous = np.linspace(start / total + 1 / total, 1 / total, steps + 1)
    return (continuous - 1 / total) * total


def sigmas_at_model_times(times: np.ndarray, alphas_cumprod: np.ndarray) -> np.ndarray:
    """k-diffusion sigmas at fractional model times: log alpha interpolated linearly between whole timesteps, as
    uni_pc's NoiseScheduleVP('discrete') does."""
    log_alpha = np.interp(times, np.arange(len(alphas_cumprod)), 0.5 * np.log(alphas_cumprod))
    alpha_squared = np.exp(2 * log_alpha)
    return np.sqrt((1 - alpha_squared) / alpha_squared)


class A1111UniPCScheduler(UniPCMultistepScheduler):
    """UniPCMultistepScheduler walking A1111's grid; `noise_timestep` is where img2img noises its init latents."""

    def set_timesteps(self, num_inference_steps: int | None = None, device=None, **_):
        self.full_grid = timestep_grid(num_inference_steps, self.config.num_train_timesteps)
        self.noise_timestep = int(self.full_grid[-1])
        self._walk(float(self.config.num_train_timesteps - 1), len(self.full_grid), device)

    def set_img2img_start(self, t_enc: int, device=None) -> None:
        """A1111's img2img part of the grid `set_timesteps` made: t_enc steps from grid[t_enc - 1], the latents
        noised to grid[t_enc]. `t_enc` is A1111's `int(min(strength, 0.999) * steps)` (steps - 1 with exact steps).
        """
        full = self.full_grid
        self.noise_timestep = int(full[min(t_enc, len(full) - 1)])
        if t_enc == 0:  # no step at all (A1111 itself fails here): the noised init latents are the result
            self.timesteps = self.timesteps[:0]
            return
        self._walk(float(full[t_enc - 1]), t_enc, device)

    def _walk(self, start: float, steps: int, device) -> None:
        super().set_timesteps(steps, device=device)  # resets the multistep state for `steps` steps
        times = unipc_model_times(start, steps, self.config.num_train_timesteps)
        sigmas = sigmas_at_model_times(times, self.alphas_cumprod.double().numpy())
        self.sigmas = torch.from_numpy(sigmas.astype(np.float32))
        self.timesteps = torch.from_numpy(times[:-1].astype(np.float32)).to(device)

    @property
    def run_steps(self) -> int:
        """The steps this walk makes (txt2img: the grid's length, 31 for 30 asked; img2img: t_enc), which progress
        counts, as A1111's `launch_sampling(len(timesteps))` does."""
        return len(self.timesteps)

    def add_noise(self, original_samples, noise, timesteps):
        """A1111's img2img noising at a whole timestep t: sqrt(alphas_cumprod[t]) x0 + sqrt(1 - alphas_cumprod[t]) n."""
        alpha = self.alphas_cumprod.to(original_samples.device, torch.float64)[timesteps.long()]
        alpha = alpha.reshape(-1, *([1] * (original_samples.dim() - 1)))
        noised = alpha.sqrt() * original_samples.double() + (1 - alpha).sqrt() * noise.double()
        return noised.to(original_samples.dtype)
