"""A1111's own "LCM" (its sd_samplers_lcm: k-diffusion's sigma space over LCM's 50 distilled timesteps).

diffusers' LCMScheduler spaces the steps over the distilled timesteps 19, 39, ..., 999 from the top
("leading": 4 steps call the model at 999, 759, 499, 259). A1111 builds a k-diffusion denoiser whose
training sigmas are those 50 only, walks its usual sigma schedule over them (Automatic: log sigma
interpolated at evenly spaced points, 4 steps at 999, 679, 339, 19), quantises each sigma to the nearest
distilled timestep for the model call, applies LCM's boundary condition (timestep scaling 10) and adds
fresh noise at the next sigma. The two pick other timesteps at every step count, so the images differ;
this reproduces A1111's. Its schedule types apply over the 50 sigmas, as in A1111.

The update rules are pure functions; the scheduler class keeps EulerDiscreteScheduler's plumbing
(sigma-space samples, `scale_model_input`, img2img `add_noise`, per-image generators).
"""

from __future__ import annotations

import numpy as np
import torch
from diffusers import EulerDiscreteScheduler
from diffusers.schedulers.scheduling_euler_discrete import EulerDiscreteSchedulerOutput

from pipelines.samplers.noise import sampler_noise
from pipelines.samplers.sigma_steps import predicted_original
from pipelines.samplers.sigma_schedules import uniform_sigmas

ORIGINAL_STEPS = 50  # the distillation's timestep count ("LCM Original Timesteps", fixed at 50 in A1111)
TIMESTEP_SCALING = 10.0  # LCM's boundary-condition scaling, A1111's and diffusers' default
SIGMA_DATA = 0.5


def distilled_timesteps(num_train_timesteps: int = 1000, original_steps: int = ORIGINAL_STEPS) -> np.ndarray:
    """The timesteps an LCM was distilled on, ascending: k - 1, 2k - 1, ..., num_train_timesteps - 1."""
    skip = num_train_timesteps // original_steps
    return np.arange(1, original_steps + 1) * skip - 1


def distilled_sigmas(alphas_cumprod: np.ndarray, original_steps: int = ORIGINAL_STEPS) -> np.ndarray:
    """The training sigmas at the distilled timesteps, ascending (A1111's LCMCompVisDenoiser.sigmas)."""
    alphas = np.asarray(alphas_cumprod, dtype=np.float64)[distilled_timesteps(len(alphas_cumprod), original_steps)]
    return np.sqrt((1.0 - alphas) / alphas)


def quantised_timesteps(sigmas: np.ndarray, valid_sigmas: np.ndarray, num_train_timesteps: int = 1000) -> np.ndarray:
    """The distilled timestep nearest in log sigma to each sigma: what the model is called with."""
    skip = num_train_timesteps // len(valid_sigmas)
    nearest = np.abs(np.log(np.asarray(sigmas, dtype=np.float64))[:, None] - np.log(valid_sigmas)[None, :]).argmin(axis=1)
    return nearest * skip + (skip - 1)


def boundary_scalings(timestep: float, scaling: float = TIMESTEP_SCALING) -> tuple[float, float]:
    """LCM's consistency boundary condition (c_skip, c_out) at a model timestep (Song et al. 2023, as LCM uses it)."""
    scaled = float(timestep) * scaling
    c_skip = SIGMA_DATA**2 / (scaled**2 + SIGMA_DATA**2)
    c_out = scaled / (scaled**2 + SIGMA_DATA**2) ** 0.5
    return c_skip, c_out


def lcm_update(sample, denoised_raw, timestep: float, sigma_next: float, noise=None):
    """One A1111 LCM step in sigma space: the boundary-conditioned estimate, renoised to `sigma_next` (> 0)."""
    c_skip, c_out = boundary_scalings(timestep)
    denoised = c_out * denoised_raw + c_skip * sample
    return (denoised + sigma_next * noise if sigma_next > 0 else denoised), denoised


class A1111LCMScheduler(EulerDiscreteScheduler):
    """A1111's LCM: sigma schedule over the 50 distilled sigmas, quantised model timesteps, fresh noise each step."""

    def schedule_training_sigmas(self) -> np.ndarray:
        """The sigmas a schedule type is built over: the distilled ones (custom_sigmas.py reads this)."""
        return distilled_sigmas(self.alphas_cumprod.double().cpu().numpy())

    @property
    def init_noise_sigma(self):
        """A1111 starts k-diffusion samplers at noise * sigmas[0]."""
        return self.sigmas.max()

    def set_timesteps(self, num_inference_steps: int, device=None, **_):
        self.num_inference_steps = num_inference_steps
        valid = self.schedule_training_sigmas()
        if self.config.use_karras_sigmas:  # a schedule type other than Automatic (custom_sigmas.py's hook)
            sigmas = self._convert_to_karras(None, num_inference_steps)
            last = valid[0] if self.config.final_sigmas_type == "sigma_min" else 0.0
            sigmas = np.append(sigmas, last)
        else:
            sigmas = uniform_sigmas(num_inference_steps, valid)
        timesteps = quantised_timesteps(sigmas[:-1], valid, self.config.num_train_timesteps)
        self.sigmas = torch.from_numpy(sigmas.astype(np.float32))
        self.timesteps = torch.from_numpy(timesteps.astype(np.float32)).to(device=device)
        self._step_index = None
        self._begin_index = None

    def step(self, model_output, timestep, sample, generator=None, return_dict: bool = True, **_):
        if self.step_index is None:
            self._init_step_index(timestep)
        sample = sample.to(torch.float32)
        index = self.step_index
        sigma, sigma_next = self.sigmas[index], float(self.sigmas[index + 1])
        denoised_raw = predicted_original(model_output.to(torch.float32), sample, sigma, self.config.prediction_type)
        noise = None
        if sigma_next > 0:
            noise = sampler_noise(model_output.shape, generator, model_output.device, torch.float32)
        prev_sample, denoised = lcm_update(sample, denoised_raw, float(self.timesteps[index]), sigma_next, noise)
        self._step_index += 1
        prev_sample, denoised = prev_sample.to(model_output.dtype), denoised.to(model_output.dtype)
        if not return_dict:
            return prev_sample, denoised
        return EulerDiscreteSchedulerOutput(prev_sample=prev_sample, pred_original_sample=denoised)
