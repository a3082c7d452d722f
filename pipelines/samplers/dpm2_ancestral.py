"""A1111's "DPM2 a" at any eta (k-diffusion `sample_dpm_2_ancestral(eta=...)`).

diffusers' KDPM2AncestralDiscreteScheduler precomputes each step's ancestral split (sigma_down, sigma_up)
and the midpoint sqrt(sigma * sigma_down) at eta 1, with no eta switch. k-diffusion's split at eta is
`ancestral_split` (euler_ancestral.py); this class recomputes the three from its own schedule with it
after diffusers' `set_timesteps`, and the midpoints' model timesteps with them, so the steps (diffusers'
for DPM2 a, mixkit's for DPM++ 2S a, which inherits this) run k-diffusion's eta. At eta 1 nothing is
recomputed: the schedule is diffusers' own.
"""

from __future__ import annotations

import numpy as np
import torch
from diffusers import KDPM2AncestralDiscreteScheduler

from pipelines.samplers.noise import sampler_noise
from pipelines.samplers.sigma_steps import ancestral_split


def interleave(values: torch.Tensor) -> torch.Tensor:
    """KDPM2's layout of per-step values: the first, each later one twice, then the last again."""
    return torch.cat([values[:1], values[1:].repeat_interleave(2), values[-1:]])


class KDPM2AncestralEtaScheduler(KDPM2AncestralDiscreteScheduler):
    """KDPM2 Ancestral with A1111's eta (its "Eta" setting, eta_ancestral): noise std eta * sigma_up(eta 1)."""

    eta = 1.0
    s_noise = 1.0  # A1111's "Sigma noise": k-diffusion adds noise * s_noise * sigma_up, and sigma_up scales nothing else

    def set_timesteps(self, num_inference_steps: int | None = None, device=None, *args, **kwargs):
        super().set_timesteps(num_inference_steps, device, *args, **kwargs)
        if self.eta != 1.0:
            self._split_at_eta(self.eta)
        if self.s_noise != 1.0:
            self.sigmas_up = self.sigmas_up * self.s_noise

    def step(self, model_output, timestep, sample, generator=None, return_dict: bool = True):
        """diffusers' step; with an NV (Philox) generator, which diffusers' `randn_tensor` cannot draw from, its
        second-order call adds the Philox draw instead. diffusers' own draw is then made from a throwaway generator
        and scaled by a sigma_up of 0 (adding exactly nothing), so the update is otherwise diffusers' to the bit."""
        from pipelines.rng_source import is_philox

        if not is_philox(generator):
            return super().step(model_output, timestep, sample, generator=generator, return_dict=return_dict)
        if self.step_index is None:
            self._init_step_index(timestep)
        if self.state_in_first_order:  # the half step to the midpoint draws no noise
            return super().step(model_output, timestep, sample, return_dict=return_dict)
        index = self.step_index - 1
        sigma_up = self.sigmas_up[index].clone()
        self.sigmas_up[index] = 0.0
        try:
            output = super().step(model_output, timestep, sample, generator=torch.Generator("cpu"), return_dict=True)
        finally:
            self.sigmas_up[index] = sigma_up
        noise = sampler_noise(model_output.shape, generator, model_output.device, model_output.dtype)
        output.prev_sample = output.prev_sample + noise * sigma_up
        return output if return_dict else (output.prev_sample, output.pred_original_sample)

    def _split_at_eta(self, eta: float) -> None:
        # The schedule's own sigmas (ending at 0) and model timesteps, out of KDPM2's interleaved layout.
        sigmas = torch.cat([self.sigmas[:1], self.sigmas[1:-1:2]]).double()
        timesteps = self.timesteps[0::2]
        sigmas_next = torch.cat([sigmas[1:], sigmas.new_zeros(1)])
        sigmas_down, sigmas_up = ancestral_split(sigmas, sigmas_next, eta)
        sigmas_down[-1] = 0.0
        midpoints = (sigmas.log() + 0.5 * (sigmas_down.log() - sigmas.log())).exp()  # log-sigma midpoint
        midpoints[-2:] = 0.0
        midpoint_timesteps = torch.from_numpy(np.array(
            [self._sigma_to_t(sigma, self.log_sigmas.cpu().numpy()) for sigma in midpoints.float().numpy()]
        )).to(timesteps)
        self.sigmas_up = interleave(sigmas_up.float())
        self.sigmas_down = interleave(sigmas_down.float())
        self.sigmas_interpol = interleave(midpoints.float())
        pairs = torch.stack((midpoint_timesteps[:-2], timesteps[1:]), dim=-1).flatten()
        self.timesteps = torch.cat([timesteps[:1], pairs])
