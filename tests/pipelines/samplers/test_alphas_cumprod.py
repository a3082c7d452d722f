"""A1111's noise schedule "Zero Terminal SNR" and "Downcast alphas_cumprod" (pipelines/samplers/alphas_cumprod.py).

Oracles: diffusers' `rescale_zero_terminal_snr` (the same algorithm on betas, Lin et al. 2024 Algorithm 1), A1111's
`rescale_zero_terminal_snr_abar` restated in float64 from its formulas (sqrt shifted to end at 0, scaled to keep
the first value, squared, the last set to 4.8973451890853435e-08), and torch's own fp16 rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from diffusers.schedulers.scheduling_ddim import rescale_zero_terminal_snr as diffusers_rescale

from pipelines.sampler_parameters import SamplerParameters
from pipelines.samplers import make_scheduler
from pipelines.samplers.alphas_cumprod import (ZERO_TERMINAL_SNR_LAST_ALPHA, rescale_zero_terminal_snr,
                                               sampling_alphas_cumprod)

SD_CONFIG = {"num_train_timesteps": 1000, "beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear",
             "prediction_type": "epsilon"}


def _sd_alphas_cumprod() -> torch.Tensor:
    betas = torch.linspace(0.00085**0.5, 0.012**0.5, 1000, dtype=torch.float32) ** 2
    return torch.cumprod(1.0 - betas, dim=0)


def _a1111_rescaled_float64(alphas: np.ndarray) -> np.ndarray:
    root = np.sqrt(alphas.astype(np.float64))
    root = (root - root[-1]) * root[0] / (root[0] - root[-1])
    rescaled = root**2
    rescaled[-1] = 4.8973451890853435e-08
    return rescaled


def test_rescale_matches_a1111s_formula_and_keeps_the_first_value():
    alphas = _sd_alphas_cumprod()
    ours = rescale_zero_terminal_snr(alphas)
    assert ours.dtype == torch.float32
    np.testing.assert_allclose(ours.double().numpy(), _a1111_rescaled_float64(alphas.numpy()), rtol=2e-5, atol=1e-9)
    assert float(ours[0]) == pytest.approx(float(alphas[0]), rel=1e-6)
    assert float(ours[-1]) == np.float32(ZERO_TERMINAL_SNR_LAST_ALPHA)
    assert torch.all(ours[1:] < ours[:-1])  # still decreasing: every sigma below the next


def test_rescale_agrees_with_diffusers_on_every_value_but_the_last():
    betas = torch.linspace(0.00085**0.5, 0.012**0.5, 1000, dtype=torch.float32) ** 2
    expected = torch.cumprod(1.0 - diffusers_rescale(betas), dim=0)
    ours = rescale_zero_terminal_snr(torch.cumprod(1.0 - betas, dim=0))
    np.testing.assert_allclose(ours[:-1].numpy(), expected[:-1].numpy(), rtol=1e-4, atol=1e-7)
    assert float(expected[-1]) == 0.0  # diffusers ends at zero SNR exactly; A1111 keeps a finite sigma there
    assert (1 - float(ours[-1])) / float(ours[-1]) == pytest.approx(4518.9**2, rel=1e-3)


def test_downcast_rounds_to_fp16_and_rescales_in_fp16_as_a1111():
    alphas = _sd_alphas_cumprod()
    downcast = sampling_alphas_cumprod(alphas, downcast=True)
    assert torch.equal(downcast, alphas.half().float())
    assert not torch.equal(downcast, alphas)
    both = sampling_alphas_cumprod(alphas, downcast=True, zero_terminal_snr=True)
    assert torch.equal(both, rescale_zero_terminal_snr(alphas.half()).float())
    assert float(both[-1]) == 2.0**-24  # A1111's last value, stored into an fp16 tensor
    assert torch.equal(sampling_alphas_cumprod(alphas), alphas)


@pytest.mark.parametrize("sampler, schedule", [("Euler", "Automatic"), ("DPM++ 2M", "Karras"), ("DDIM", "Automatic"),
                                               ("UniPC", "Automatic"), ("Euler a", "Beta")])
def test_every_scheduler_walks_the_rescaled_schedule(sampler, schedule):
    plain = make_scheduler(sampler, SD_CONFIG, schedule)
    ztsnr = make_scheduler(sampler, SD_CONFIG, schedule, parameters=SamplerParameters(sd_noise_schedule="Zero Terminal SNR"))
    assert torch.equal(ztsnr.alphas_cumprod, rescale_zero_terminal_snr(plain.alphas_cumprod))
    for scheduler in (plain, ztsnr):
        scheduler.set_timesteps(10)
    if sampler in ("Euler", "DPM++ 2M", "Euler a"):  # k-diffusion samplers start at the model's sigma_max, ~4519
        sigma_max = float(((1 - ztsnr.alphas_cumprod[-1]) / ztsnr.alphas_cumprod[-1]) ** 0.5)
        assert float(ztsnr.sigmas[0]) == pytest.approx(sigma_max, rel=1e-5)
        assert float(plain.sigmas[0]) == pytest.approx(14.6146, rel=1e-4)


def test_the_default_leaves_the_models_alphas_cumprod_alone():
    for parameters in (None, SamplerParameters()):
        scheduler = make_scheduler("Euler", SD_CONFIG, parameters=parameters)
        assert torch.equal(scheduler.alphas_cumprod, _sd_alphas_cumprod())
