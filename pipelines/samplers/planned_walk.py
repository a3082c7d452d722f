"""k-diffusion samplers whose model calls are all known before sampling starts, run as diffusers schedulers.

A1111's "Restart" and "DPM fast" do not call the model once per sigma of the schedule: Restart takes Heun steps
over a re-planned schedule with extra segments that jump back up, DPM fast takes DPM-Solver steps of order 3 at
points evenly spaced in log sigma. Where they call the model depends on the schedule only, never on the sample,
so the whole list of calls is planned in `set_timesteps` and handed to diffusers' loop as `timesteps`, one per
call; `step` turns the model's output at one call into the sample for the next (`advance`).

The schedule type's sigmas come from EulerDiscreteScheduler (every A1111 schedule type and the penultimate-sigma
discard, custom_sigmas.py); img2img re-plans the walk over A1111's tail of them (`set_img2img_start`), since both
samplers plan from the sigmas they are handed. Model timesteps are k-diffusion's unquantised t(sigma), as for
mixkit's other sigma-space samplers.
"""

from __future__ import annotations

import numpy as np
import torch
from diffusers import EulerDiscreteScheduler
from diffusers.schedulers.scheduling_euler_discrete import EulerDiscreteSchedulerOutput

from pipelines.samplers.sigma_schedules import timestep_at
from pipelines.samplers.sigma_steps import predicted_original


class PlannedWalkScheduler(EulerDiscreteScheduler):
    """A sampler planned as a list of model-call sigmas (`plan`), stepped from one call to the next (`advance`)."""

    schedule: torch.Tensor | None = None  # the schedule type's sigmas for the requested steps (float64)

    def plan(self, sigmas: torch.Tensor, img2img: bool) -> torch.Tensor:
        """The sigmas of the model calls over `sigmas` (the walk's schedule); resets the walk's state."""
        raise NotImplementedError

    def advance(self, sample: torch.Tensor, denoised: torch.Tensor, index: int, generator) -> torch.Tensor:
        """The sample the model is called on next (or the result, after the last call), given call `index`'s
        denoised estimate of `sample`."""
        raise NotImplementedError

    def set_timesteps(self, num_inference_steps: int, device=None, **kwargs):
        super().set_timesteps(num_inference_steps, device=device, **kwargs)
        self.schedule = self.sigmas.to(torch.float64).cpu()
        self._use_walk(self.schedule, False, device)

    def set_img2img_start(self, t_enc: int, device=None) -> None:
        """A1111's img2img walk: over sigmas[steps - t_enc - 1:] (t_enc + 1 steps), from noise at its first sigma.

        `t_enc` is A1111's `int(min(strength, 0.999) * steps)` (steps - 1 with exact steps).
        """
        steps = len(self.schedule) - 1
        self._use_walk(self.schedule[steps - t_enc - 1:], True, device)

    def _use_walk(self, sigmas: torch.Tensor, img2img: bool, device) -> None:
        calls = self.plan(sigmas, img2img).to(torch.float64)
        alphas = self.alphas_cumprod.double().cpu().numpy()
        training_sigmas = np.sqrt((1.0 - alphas) / alphas)
        timesteps = [timestep_at(float(sigma), training_sigmas) for sigma in calls]
        # `sigmas[i]` is call i's sigma, which diffusers' `scale_model_input` divides by (sigma^2 + 1)^0.5.
        self.sigmas = torch.cat([calls, calls.new_zeros(1)]).to(torch.float32)
        self.timesteps = torch.tensor(timesteps, dtype=torch.float32, device=device)
        self.start_sigma = sigmas[0].to(torch.float32)  # img2img noises to it, whatever the walk's first call
        self._step_index = None

    @property
    def init_noise_sigma(self):
        """A1111 starts txt2img at noise * sigmas[0] of the schedule type (the walk may start elsewhere: DPM fast)."""
        return float(self.schedule[0]) if self.schedule is not None else float(self.sigmas.max())

    def set_begin_index(self, begin_index: int = 0):
        """The walk always starts at its first call; img2img re-plans it with `set_img2img_start`."""

    def _init_step_index(self, timestep):
        self._step_index = 0

    def add_noise(self, original_samples, noise, timesteps):
        """img2img's start, A1111's `x + noise * sigma_sched[0]` (the timesteps asked for are the walk's first)."""
        return original_samples + noise * self.start_sigma.to(original_samples)

    def step(self, model_output, timestep, sample, generator=None, return_dict: bool = True, **_):
        if self.step_index is None:
            self._init_step_index(timestep)
        index = self.step_index
        sample = sample.to(torch.float32)
        denoised = predicted_original(model_output.to(torch.float32), sample, self.sigmas[index],
                                      self.config.prediction_type)
        prev_sample = self.advance(sample, denoised, index, generator)
        self._step_index += 1
        prev_sample, denoised = prev_sample.to(model_output.dtype), denoised.to(model_output.dtype)
        if not return_dict:
            return prev_sample, denoised
        return EulerDiscreteSchedulerOutput(prev_sample=prev_sample, pred_original_sample=denoised)
