"""A1111's eta for its SDE samplers (DPM++ SDE, DPM++ 2M SDE and its Heun variant): checked against k-diffusion's
samplers, restated in kdiffusion_reference.py, with the same seeded Brownian tree A1111 passes them."""

from __future__ import annotations

import pytest
import torch
from diffusers.schedulers.scheduling_dpmsolver_sde import BrownianTreeNoiseSampler

from .kdiffusion_reference import (
    REFERENCE_SCHEDULES,
    SD15_SCHEDULER_CONFIG,
    GaussianDataModel,
    sample_dpmpp_2m_sde,
    sample_dpmpp_sde,
)
from .sampling_loop import fresh_scheduler, run_sampler

SEED = 1234


def _mixkit_and_k_diffusion(sampler: str, schedule: str, steps: int, eta: float, reference):
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    sigmas = REFERENCE_SCHEDULES[schedule](SD15_SCHEDULER_CONFIG, steps)
    positive = sigmas[sigmas > 0].float()
    tree = BrownianTreeNoiseSampler(latents.float(), positive.min(), positive.max(), [SEED])
    expected = reference(latents * sigmas[0], sigmas, tree, eta)
    scheduler = fresh_scheduler(sampler, schedule)
    scheduler.eta = eta
    got = run_sampler(scheduler, GaussianDataModel(SD15_SCHEDULER_CONFIG), latents.float(), steps, seeds=[SEED])
    return got.double(), expected


@pytest.mark.parametrize("eta", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("sampler", ["DPM++ 2M SDE", "DPM++ 2M SDE Heun"])
def test_dpmpp_2m_sde_matches_k_diffusion_at_any_eta(sampler, eta):
    def reference(x, sigmas, tree, eta):
        return sample_dpmpp_2m_sde(x, sigmas, heun=sampler.endswith("Heun"), noise_sampler=tree, eta=eta)

    got, expected = _mixkit_and_k_diffusion(sampler, "Exponential", 10, eta, reference)
    # diffusers' rounded model timesteps, as at eta 1 (test_kdiffusion_oracle): measured below 3e-3
    torch.testing.assert_close(got, expected, rtol=0, atol=5e-3)


@pytest.mark.parametrize("eta", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("schedule", ["Karras", "Uniform"])
def test_dpmpp_sde_matches_k_diffusion_at_any_eta(schedule, eta):
    got, expected = _mixkit_and_k_diffusion("DPM++ SDE", schedule, 8, eta, sample_dpmpp_sde)
    # the toy model sees diffusers' fractional midpoint timesteps, interpolated linearly in alpha
    torch.testing.assert_close(got, expected, rtol=0, atol=5e-3)


@pytest.mark.parametrize("sampler", ["DPM++ SDE", "DPM++ 2M SDE"])
def test_eta_0_adds_no_brownian_noise(sampler):
    model = GaussianDataModel(SD15_SCHEDULER_CONFIG)
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3))
    runs = []
    for seed in (1, 2):
        scheduler = fresh_scheduler(sampler, "Karras")
        scheduler.eta = 0.0
        runs.append(run_sampler(scheduler, model, latents, 6, seeds=[seed]))
    torch.testing.assert_close(runs[0], runs[1], rtol=0, atol=0)


def test_dpmpp_2m_sde_at_eta_0_is_dpmpp_2m():
    # k-diffusion: at eta 0 the SDE update's coefficients are DPM-Solver++(2M)'s (midpoint solver type).
    model = GaussianDataModel(SD15_SCHEDULER_CONFIG)
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3))
    scheduler = fresh_scheduler("DPM++ 2M SDE", "Karras")
    scheduler.eta = 0.0
    sde = run_sampler(scheduler, model, latents, 8, seeds=[5])
    plain = run_sampler(fresh_scheduler("DPM++ 2M", "Karras"), model, latents, 8)
    torch.testing.assert_close(sde, plain, rtol=0, atol=1e-5)


@pytest.mark.parametrize("sampler", ["DPM++ SDE", "DPM++ 2M SDE Heun"])
def test_a_non_default_sde_eta_changes_the_image_and_is_recorded(sd1_pipe, sampler):
    call = dict(prompt="a red circle", seed=3, sampler=sampler, steps=4, width=64, height=64)
    default, changed = sd1_pipe(**call), sd1_pipe(**call, eta=0.5)
    assert "Eta: 0.5" in changed.infotexts[0] and "Eta" not in default.infotexts[0]
    assert changed.images[0].tobytes() != default.images[0].tobytes()
    assert sd1_pipe(**call, eta=1.0).images[0].tobytes() == default.images[0].tobytes()
