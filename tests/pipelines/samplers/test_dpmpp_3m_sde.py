"""A1111's "DPM++ 3M SDE" against k-diffusion's `sample_dpmpp_3m_sde` (kdiffusion_oracle.py), with the Brownian tree
A1111 passes it."""

from __future__ import annotations

import pytest
import torch
from diffusers.schedulers.scheduling_dpmsolver_sde import BrownianTreeNoiseSampler

from pipelines.samplers import list_samplers, resolve_sampler

from .kdiffusion_oracle import (
    get_sigmas_exponential,
    get_sigmas_karras,
    k_denoiser,
    model_sigma_range,
    sample_dpmpp_3m_sde,
)
from .kdiffusion_reference import GaussianDataModel, SD15_SCHEDULER_CONFIG
from .sampling_loop import fresh_scheduler, run_sampler

SEED = 1234


def kl_optimal(n: int, sigma_min: float, sigma_max: float) -> torch.Tensor:
    """A1111's `kl_optimal`: n + 1 sigmas uniform in arctan(sigma), ending at sigma_min (no 0)."""
    ramp = torch.arange(n + 1) / n
    return torch.tan(ramp * torch.tensor(sigma_min).arctan() + (1 - ramp) * torch.tensor(sigma_max).arctan())


SCHEDULES = {"Exponential": get_sigmas_exponential, "Karras": get_sigmas_karras, "KL Optimal": kl_optimal}


def a1111_sigmas(schedule: str, steps: int) -> torch.Tensor:
    """A1111's `get_sigmas` for DPM++ 3M SDE: steps + 1 sigmas over the model's range, the penultimate dropped."""
    sigma_min, sigma_max = model_sigma_range()
    sigmas = SCHEDULES[schedule](steps + 1, sigma_min, sigma_max)
    return torch.cat([sigmas[:-2], sigmas[-1:]])


def _both(schedule: str, steps: int, eta: float = 1.0, s_noise: float = 1.0):
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3))
    sigmas = a1111_sigmas(schedule, steps)
    x = latents * sigmas[0]
    tree = BrownianTreeNoiseSampler(x, sigmas[sigmas > 0].min(), sigmas.max(), seed=[SEED])
    expected = sample_dpmpp_3m_sde(k_denoiser(), x, sigmas, tree, eta=eta, s_noise=s_noise)
    scheduler = fresh_scheduler("DPM++ 3M SDE", schedule)
    scheduler.eta, scheduler.s_noise = eta, s_noise
    got = run_sampler(scheduler, GaussianDataModel(SD15_SCHEDULER_CONFIG), latents, steps, seeds=[SEED])
    return scheduler, got, expected


@pytest.mark.parametrize("schedule", ["Exponential", "Karras"])
@pytest.mark.parametrize("steps", [2, 3, 10])
def test_matches_k_diffusion_with_a1111s_brownian_tree(schedule, steps):
    scheduler, got, expected = _both(schedule, steps)
    torch.testing.assert_close(scheduler.sigmas.double(), a1111_sigmas(schedule, steps).double(), rtol=1e-6, atol=0)
    # float32 on both sides; the toy model's t(sigma) is mixkit's float64 interpolation vs k-diffusion's float32, and
    # the tree answers a query a rounding apart slightly differently: measured up to 1.3e-4 (Karras, 10 steps)
    torch.testing.assert_close(got, expected, rtol=0, atol=5e-4)


def test_kl_optimal_ends_noisy_as_in_k_diffusion():
    """KL Optimal ends at sigma_min and the penultimate sigma is dropped: the last step, 0.17 -> 0.029 at 20 steps, is
    a long third-order SDE step with no denoising after it, which leaves the result far more spread than the data
    (std 1.29 on the toy model, test_sampling.py): k-diffusion's own does exactly that."""
    _, got, expected = _both("KL Optimal", 20)
    assert expected.std() > 1.0
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-3)  # measured 4e-4 on values up to 6


@pytest.mark.parametrize("eta, s_noise", [(0.0, 1.0), (0.5, 1.0), (1.0, 0.7)])
def test_eta_and_s_noise_as_k_diffusion(eta, s_noise):
    _, got, expected = _both("Exponential", 8, eta, s_noise)
    torch.testing.assert_close(got, expected, rtol=0, atol=5e-4)


def test_the_seed_picks_the_tree_and_eta_0_draws_none():
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3))
    model = GaussianDataModel(SD15_SCHEDULER_CONFIG)
    runs = {}
    for eta in (0.0, 1.0):
        for seed in (1, 2):
            scheduler = fresh_scheduler("DPM++ 3M SDE")
            scheduler.eta = eta
            runs[eta, seed] = run_sampler(scheduler, model, latents, 6, seeds=[seed])
    assert torch.equal(runs[0.0, 1], runs[0.0, 2])
    assert (runs[1.0, 1] - runs[1.0, 2]).abs().max() > 0.05


def test_registered_as_a1111_lists_it():
    spec, schedule = resolve_sampler("k_dpmpp_3m_sde")
    assert (spec.name, schedule) == ("DPM++ 3M SDE", "Exponential")
    assert resolve_sampler("DPM++ 3M SDE Karras")[1] == "Karras"  # pre-1.9 name
    assert resolve_sampler("k_dpmpp_3m_sde_ka")[1] == "Karras"
    item = {item["name"]: item for item in list_samplers()}["DPM++ 3M SDE"]
    assert item["aliases"] == ["k_dpmpp_3m_sde"]
    # A1111 1.10: {'scheduler': 'exponential', 'discard_next_to_last_sigma': True, "brownian_noise": True}
    assert {key: item["options"][key] for key in ("scheduler", "discard_next_to_last_sigma", "brownian_noise")} == {
        "scheduler": "exponential", "discard_next_to_last_sigma": True, "brownian_noise": True}


def test_a_batch_row_is_the_image_of_its_own_seed():
    """One tree per image: row 1 of a batch seeded [7, 8] is bit for bit the image seeded 8 alone. The tree spans the
    float32 sigmas step() queries, as k-diffusion's; torchsde still warns "Should have ta>=t0" when it rounds that
    range's ends to 6 decimals past a query (k-diffusion and A1111 print the same), and answers the rounded query."""
    latents = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(3))
    model = GaussianDataModel(SD15_SCHEDULER_CONFIG)
    both = run_sampler(fresh_scheduler("DPM++ 3M SDE"), model, latents, 6, seeds=[7, 8])
    alone = run_sampler(fresh_scheduler("DPM++ 3M SDE"), model, latents[1:], 6, seeds=[8])
    assert torch.equal(both[1], alone[0])
