"""The alphas_cumprod a sampler walks: the model's, or A1111's Zero Terminal SNR / fp16-downcast versions of them.

A1111 1.10 (`sd_models.apply_alpha_schedule_override`, before every batch) starts from the model's float32
alphas_cumprod, rounds them to fp16 with "Downcast model alphas_cumprod to fp16 before sampling"
(`use_downcasted_alpha_bar`, how A1111 sampled before 1.8, kept to reproduce old seeds), then, with the noise
schedule "Zero Terminal SNR" (`sd_noise_schedule`), rescales them as Lin et al. 2024 ("Common Diffusion Noise
Schedules and Sampling Steps Are Flawed", Algorithm 1) do, in that order and in that dtype. Every sampler reads
them: the k-diffusion samplers' sigma table (sigma = sqrt((1 - a) / a), its schedules' sigma_max, the model
timestep of a sigma), DDIM, PLMS and UniPC directly. Here they replace the scheduler's own `alphas_cumprod`
before `set_timesteps`, which derives every sigma and timestep from that attribute in each mixkit and diffusers
scheduler class.

What is not reproduced: with the downcast, A1111's k-diffusion denoiser also *computes* its sigma table in fp16
from the rounded values; here the rounded values are used in the float32/float64 arithmetic of the rest of the
pipeline, which differs from it by fp16 rounding of the sigmas (about 1e-3 relative).
"""

from __future__ import annotations

import torch

# A1111's rescale ends at this alphas_cumprod instead of 0: sigma_max = sqrt((1 - a) / a) is then about 4519 rather
# than infinite, so the sigma table, its logarithms and the sigma -> timestep lookup stay finite.
ZERO_TERMINAL_SNR_LAST_ALPHA = 4.8973451890853435e-08


def rescale_zero_terminal_snr(alphas_cumprod: torch.Tensor) -> torch.Tensor:
    """alphas_cumprod rescaled to zero terminal SNR, computed in `alphas_cumprod`'s dtype as A1111 does.

    sqrt(alphas_cumprod) is shifted so that its last value is 0 and scaled so that its first is unchanged; the
    last alphas_cumprod is then set to `ZERO_TERMINAL_SNR_LAST_ALPHA` (in fp16, with the downcast, that rounds to
    2^-24). diffusers' `rescale_zero_terminal_snr` does the same on betas and keeps 0 at the end.
    """
    root = alphas_cumprod.sqrt()
    first, last = root[0].clone(), root[-1].clone()
    shifted = root - last
    rescaled = (shifted * (first / (first - last))) ** 2
    rescaled[-1] = ZERO_TERMINAL_SNR_LAST_ALPHA
    return rescaled


def sampling_alphas_cumprod(model_alphas_cumprod: torch.Tensor, *, zero_terminal_snr: bool = False,
                            downcast: bool = False) -> torch.Tensor:
    """The float32 alphas_cumprod a sampler walks for these settings (A1111's order: downcast, then rescale)."""
    alphas = model_alphas_cumprod.float()
    if downcast:
        alphas = alphas.half()
    if zero_terminal_snr:
        alphas = rescale_zero_terminal_snr(alphas)
    return alphas.float()


def use_alphas_cumprod(scheduler, parameters) -> None:
    """Give a fresh scheduler (before `set_timesteps`) the alphas_cumprod `parameters` (`SamplerParameters`) ask for.

    The scheduler's own `alphas_cumprod` (from the model's betas) is replaced, and so are the variance-preserving
    terms diffusers' DPM-Solver and UniPC classes precompute from it in `__init__`; the sigmas every class walks
    are derived from `alphas_cumprod` by `set_timesteps`, which comes after.
    """
    from pipelines.sampler_parameters import ZERO_TERMINAL_SNR

    alphas = sampling_alphas_cumprod(scheduler.alphas_cumprod,
                                     zero_terminal_snr=parameters.sd_noise_schedule == ZERO_TERMINAL_SNR,
                                     downcast=parameters.use_downcasted_alpha_bar)
    scheduler.alphas_cumprod = alphas
    if hasattr(scheduler, "alpha_t"):  # diffusers' DPM-Solver / UniPC: VP coefficients of the training timesteps
        scheduler.alpha_t = torch.sqrt(alphas)
        scheduler.sigma_t = torch.sqrt(1 - alphas)
        scheduler.lambda_t = torch.log(scheduler.alpha_t) - torch.log(scheduler.sigma_t)
