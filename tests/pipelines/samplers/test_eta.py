"""A1111's eta: ancestral samplers at eta 1 and DDIM at 0 by default, other values where mixkit can run them."""

from __future__ import annotations

import pytest
import torch

from pipelines.samplers import sampler_eta

from .kdiffusion_reference import (
    REFERENCE_SCHEDULES,
    SD15_SCHEDULER_CONFIG,
    GaussianDataModel,
    sample_dpm_2_ancestral,
    sample_dpmpp_2s_ancestral,
    sample_euler_ancestral,
)
from .sampling_loop import fresh_scheduler, run_sampler


def _latents():
    return torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)


def _against_k_diffusion(sampler: str, schedule: str, sigmas, reference, eta: float):
    """(mixkit's run at `eta`, k-diffusion's `reference` sampler over `sigmas`), the same latents and noise seed."""
    latents = _latents()
    expected = reference(latents * sigmas[0], sigmas, torch.Generator().manual_seed(9), eta=eta)
    scheduler = fresh_scheduler(sampler, schedule)
    scheduler.eta = eta
    got = run_sampler(scheduler, GaussianDataModel(SD15_SCHEDULER_CONFIG), latents.float(), 8,
                      generator=torch.Generator().manual_seed(9))
    return got.double(), expected


@pytest.mark.parametrize("eta", [0.0, 0.5, 1.0])
def test_euler_a_matches_k_diffusion_at_any_eta(eta):
    sigmas = REFERENCE_SCHEDULES["Karras"](SD15_SCHEDULER_CONFIG, 8)
    got, expected = _against_k_diffusion("Euler a", "Karras", sigmas, sample_euler_ancestral, eta)
    torch.testing.assert_close(got, expected, rtol=0, atol=2e-3)


def test_euler_a_at_eta_0_is_euler():
    scheduler = fresh_scheduler("Euler a", "Karras")
    scheduler.eta = 0.0
    model = GaussianDataModel(SD15_SCHEDULER_CONFIG)
    ancestral = run_sampler(scheduler, model, _latents().float(), 8, generator=torch.Generator().manual_seed(9))
    euler = run_sampler(fresh_scheduler("Euler", "Karras"), model, _latents().float(), 8)
    torch.testing.assert_close(ancestral, euler, rtol=0, atol=1e-5)


@pytest.mark.parametrize("eta", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("schedule", ["Karras", "Uniform"])
def test_dpmpp_2s_a_matches_k_diffusion_at_any_eta(eta, schedule):
    sigmas = REFERENCE_SCHEDULES[schedule](SD15_SCHEDULER_CONFIG, 8)
    got, expected = _against_k_diffusion("DPM++ 2S a", schedule, sigmas, sample_dpmpp_2s_ancestral, eta)
    # The toy model sees diffusers' fractional midpoint timesteps, interpolated linearly in alpha (as at eta 1).
    torch.testing.assert_close(got, expected, rtol=0, atol=2e-3)


@pytest.mark.parametrize("eta", [0.0, 0.5, 1.0])
def test_dpm2_a_matches_k_diffusion_at_any_eta(eta):
    # A1111's DPM2 a: Karras for steps + 1 without the next-to-last sigma (discard_next_to_last_sigma).
    longer = REFERENCE_SCHEDULES["Karras"](SD15_SCHEDULER_CONFIG, 9)
    sigmas = torch.cat([longer[:-2], longer[-1:]])
    got, expected = _against_k_diffusion("DPM2 a", "Karras", sigmas, sample_dpm_2_ancestral, eta)
    torch.testing.assert_close(got, expected, rtol=0, atol=2e-3)  # measured 7e-4 to 8e-4


def test_dpm2_a_at_eta_0_adds_no_noise():
    model = GaussianDataModel(SD15_SCHEDULER_CONFIG)
    runs = []
    for seed in (1, 2):
        scheduler = fresh_scheduler("DPM2 a", "Karras")
        scheduler.eta = 0.0
        runs.append(run_sampler(scheduler, model, _latents().float(), 6, generator=torch.Generator().manual_seed(seed)))
    torch.testing.assert_close(runs[0], runs[1], rtol=0, atol=0)


@pytest.mark.parametrize("sampler, eta, expected", [
    ("Euler a", None, 1.0), ("Euler a", 0, 0.0), ("Euler a", 0.25, 0.25), ("DDIM", None, 0.0), ("DDIM", 1, 1.0),
    ("DPM2 a", 1.0, 1.0), ("DPM2 a", 0.5, 0.5), ("DPM++ 2S a", 0, 0.0), ("DPM++ SDE", None, 1.0),
    ("DPM++ 2M SDE", 0.5, 0.5),
    ("DPM++ 2M", 0.0, None), ("Euler", 0.3, None), ("PLMS", 0.5, None),  # no eta: ignored, as A1111
])
def test_sampler_eta_resolves_as_a1111(sampler, eta, expected):
    assert sampler_eta(sampler, eta) == expected


@pytest.mark.parametrize("eta", [-0.1, 1.5, float("nan"), "0.5", True])
def test_bad_eta_is_refused(eta):
    with pytest.raises(ValueError, match="eta must be a number in"):
        sampler_eta("Euler a", eta)


@pytest.mark.parametrize("sampler, eta, key", [("Euler a", 0.5, "Eta: 0.5"), ("DDIM", 0.3, "Eta DDIM: 0.3")])
def test_a_non_default_eta_changes_the_image_and_is_recorded(sd1_pipe, sampler, eta, key):
    call = dict(prompt="a red circle", seed=3, sampler=sampler, steps=4, width=64, height=64)
    default = sd1_pipe(**call)
    changed = sd1_pipe(**call, eta=eta)
    assert key in changed.infotexts[0] and "Eta" not in default.infotexts[0]
    assert changed.images[0].tobytes() != default.images[0].tobytes()
    same = sd1_pipe(**call, eta=1.0 if sampler == "Euler a" else 0.0)  # the default, given explicitly
    assert same.images[0].tobytes() == default.images[0].tobytes() and "Eta" not in same.infotexts[0]


def test_eta_for_a_sampler_without_one_is_ignored_and_not_recorded(sd1_pipe):
    call = dict(prompt="a red circle", seed=3, sampler="DPM++ 2M", steps=4, width=64, height=64)
    assert sd1_pipe(**call, eta=0.0).images[0].tobytes() == sd1_pipe(**call).images[0].tobytes()


def test_ensd_redraws_the_ancestral_noise_from_seed_plus_delta_and_is_recorded(sd1_pipe):
    call = dict(prompt="a red circle", seed=3, sampler="Euler a", steps=4, width=64, height=64)
    plain, with_ensd = sd1_pipe(**call), sd1_pipe(**call, ensd=31337)
    assert "ENSD: 31337" in with_ensd.infotexts[0] and "ENSD" not in plain.infotexts[0]
    assert with_ensd.images[0].tobytes() != plain.images[0].tobytes()
    assert sd1_pipe(**call, ensd=31337).images[0].tobytes() == with_ensd.images[0].tobytes()  # reproducible


@pytest.mark.parametrize("sampler", ["DPM++ 2M", "DPM++ 2M SDE"])  # the SDE one: A1111's Brownian noise ignores ENSD
def test_ensd_leaves_deterministic_and_sde_samplers_alone_and_unrecorded(sd1_pipe, sampler):
    call = dict(prompt="a red circle", seed=3, sampler=sampler, steps=4, width=64, height=64)
    plain, with_ensd = sd1_pipe(**call), sd1_pipe(**call, ensd=31337)
    assert with_ensd.images[0].tobytes() == plain.images[0].tobytes() and "ENSD" not in with_ensd.infotexts[0]
    euler_a_eta0 = sd1_pipe(**{**call, "sampler": "Euler a"}, eta=0.0, ensd=31337)  # no noise drawn into the image
    assert "ENSD" not in euler_a_eta0.infotexts[0]


def test_ensd_changes_ddim_with_eta_as_a1111s_rng_does(sd1_pipe):
    call = dict(prompt="a red circle", seed=3, sampler="DDIM", steps=4, width=64, height=64, eta=0.5)
    with_ensd = sd1_pipe(**call, ensd=7)
    assert with_ensd.images[0].tobytes() != sd1_pipe(**call).images[0].tobytes()
    assert "ENSD: 7" in with_ensd.infotexts[0]  # recorded so the image can be reproduced from its infotext
    assert "ENSD" not in sd1_pipe(**{**call, "eta": 0.0}, ensd=7).infotexts[0]  # eta 0: no noise, nothing changes

