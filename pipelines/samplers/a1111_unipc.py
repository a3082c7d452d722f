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


SKIP_TYPES = ("time_uniform", "time_quadratic", "logSNR")


def unipc_model_times(start: float, steps: int, num_train_timesteps: int = 1000, skip_type: str = "time_uniform",
                      alphas_cumprod: np.ndarray | None = None) -> np.ndarray:
    """A1111's model-input times for `steps` UniPC steps from model time `start` down to 0: steps + 1 values, the
    last being where the walk ends (no model call there).

    uni_pc's `get_time_steps` spaces its continuous time t (model time / 1000 + 1/1000) from t_T down to t_0 =
    1/1000 uniformly in t ("time_uniform", A1111's default), in sqrt(t) ("time_quadratic") or in the half log-SNR
    lambda(t) of the schedule ("logSNR", which needs `alphas_cumprod`)."""
    total = float(num_train_timesteps)
    t_start, t_end = start / total + 1 / total, 1 / total
    if skip_type == "time_uniform":
        continuous = np.linspace(t_start, t_end, steps + 1)
    elif skip_type == "time_quadratic":
        continuous = np.linspace(np.sqrt(t_start), np.sqrt(t_end), steps + 1) ** 2
    elif skip_type == "logSNR":
        continuous = _logsnr_times(t_start, t_end, steps, np.asarray(alphas_cumprod, dtype=np.float64))
    else:
        raise ValueError(f"uni_pc_skip_type must be one of {', '.join(SKIP_TYPES)}, got {skip_type!r}.")
    return (continuous - 1 / total) * total


def _logsnr_times(t_start: float, t_end: float, steps: int, alphas_cumprod: np.ndarray) -> np.ndarray:
    """Continuous times evenly spaced in lambda = log(alpha_t / sigma_t), as uni_pc's NoiseScheduleVP('discrete')
    computes it: log alpha_t interpolated linearly over t_k = (k + 1) / N, and inverted the same way."""
    grid = np.arange(1, len(alphas_cumprod) + 1) / len(alphas_cumprod)
    log_alphas = 0.5 * np.log(alphas_cumprod)

    def half_log_snr(t: float) -> float:
        log_alpha = np.interp(t, grid, log_alphas)
        return log_alpha - 0.5 * np.log(1.0 - np.exp(2.0 * log_alpha))

    lambdas = np.linspace(half_log_snr(t_start), half_log_snr(t_end), steps + 1)
    log_alpha_at = -0.5 * np.logaddexp(0.0, -2.0 * lambdas)
    return np.interp(log_alpha_at, log_alphas[::-1], grid[::-1])


def sigmas_at_model_times(times: np.ndarray, alphas_cumprod: np.ndarray) -> np.ndarray:
    """k-diffusion sigmas at fractional model times: log alpha interpolated linearly between whole timesteps, as
    uni_pc's NoiseScheduleVP('discrete') does."""
    log_alpha = np.interp(times, np.arange(len(alphas_cumprod)), 0.5 * np.log(alphas_cumprod))
    alpha_squared = np.exp(2 * log_alpha)
    return np.sqrt((1 - alpha_squared) / alpha_squared)


class A1111UniPCScheduler(UniPCMultistepScheduler):
    """UniPCMultistepScheduler walking A1111's grid; `noise_timestep` is where img2img noises its init latents.

    A1111's "UniPC variant" bh1 / bh2 and "UniPC order" are diffusers' `solver_type` / `solver_order` (the same
    B(h) functions and multistep update), set by `a1111_config`; its variant vary_coeff is `unipc_vary_coeff.py`'s
    update in diffusers' predictor / corrector slots. "UniPC skip type" is `skip_type`, and "UniPC lower order
    final" is `a1111_lower_order_final`, kept off diffusers' own switch, which also caps the warm-up steps' orders
    where A1111's warm-up does not (orders above 3 on short walks); `use_a1111_options` sets those three.
    """

    skip_type = "time_uniform"
    a1111_lower_order_final = True
    vary_coeff = False
    _this_order = 1

    @staticmethod
    def a1111_config(parameters) -> dict:
        """Constructor config for A1111's UniPC settings (`SamplerParameters`); vary_coeff replaces bh1's update."""
        variant = "bh1" if parameters.uni_pc_variant == "vary_coeff" else parameters.uni_pc_variant
        return {"solver_type": variant, "solver_order": parameters.uni_pc_order, "lower_order_final": False}

    def use_a1111_options(self, parameters) -> None:
        """The settings read during the walk: skip type, lower order final, vary_coeff."""
        self.skip_type = parameters.uni_pc_skip_type
        self.a1111_lower_order_final = parameters.uni_pc_lower_order_final
        self.vary_coeff = parameters.uni_pc_variant == "vary_coeff"

    def multistep_uni_p_bh_update(self, model_output=None, *args, sample=None, order=None, **kwargs):
        if not self.vary_coeff:
            return super().multistep_uni_p_bh_update(model_output, *args, sample=sample, order=order, **kwargs)
        return self._vary_coeff_step(self.step_index + 1, self.step_index, sample, order)

    def multistep_uni_c_bh_update(self, this_model_output=None, *args, last_sample=None, this_sample=None,
                                  order=None, **kwargs):
        if not self.vary_coeff:
            return super().multistep_uni_c_bh_update(this_model_output, *args, last_sample=last_sample,
                                                     this_sample=this_sample, order=order, **kwargs)
        return self._vary_coeff_step(self.step_index, self.step_index - 1, last_sample, order, this_model_output)

    def _vary_coeff_step(self, to_index: int, from_index: int, sample, order: int, model_t=None):
        """vary_coeff from sigmas[from_index] to sigmas[to_index] with the model outputs kept so far (the newest is
        at from_index, the one before at from_index - 1, ...), as diffusers' bh updates index them."""
        from pipelines.samplers.unipc_vary_coeff import vary_coeff_update

        def vp(index: int):
            alpha, sigma = self._sigma_to_alpha_sigma_t(self.sigmas[index].to(sample.device))
            return alpha, sigma, torch.log(alpha) - torch.log(sigma)

        alpha_t, sigma_t, lambda_t = vp(to_index)
        _, sigma_s0, lambda_s0 = vp(from_index)
        h = lambda_t - lambda_s0
        newest = self.model_outputs[-1]
        rks, differences = [], []
        for i in range(1, order):
            ratio = (vp(from_index - i)[2] - lambda_s0) / h
            rks.append(ratio)
            differences.append((self.model_outputs[-(i + 1)] - newest) / ratio)
        rks = torch.stack([*rks, torch.ones_like(h)])
        return vary_coeff_update(sample, newest, differences, rks, h, alpha_t, sigma_t, sigma_s0, model_t)

    @property
    def this_order(self) -> int:
        return self._this_order

    @this_order.setter
    def this_order(self, order: int) -> None:
        # diffusers sets min(solver_order, steps taken + 1): the warm-up's 1, 2, ... then the full order. A1111's
        # `sample_multistep` lowers the order of its last steps to the steps left (after its warm-up; a walk shorter
        # than the order, which A1111 refuses, is capped as diffusers caps it).
        steps = len(self.timesteps) if self.timesteps is not None else 0
        if self.a1111_lower_order_final and steps and self.step_index is not None \
                and (order == self.config.solver_order or steps < self.config.solver_order):
            order = min(order, steps - self.step_index)
        self._this_order = order

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
        alphas = self.alphas_cumprod.double().numpy()
        times = unipc_model_times(start, steps, self.config.num_train_timesteps, self.skip_type, alphas)
        sigmas = sigmas_at_model_times(times, alphas)
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
