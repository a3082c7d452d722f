"""A1111's "DPM adaptive" against golden vectors from k-diffusion 0.1.1.post1's own `sample_dpm_adaptive`.

dpm_adaptive_golden.json was written by running k-diffusion's sampling.py (the wheel from `pip download k-diffusion`,
not installed: see kdiffusion_oracle.py for why) on the toy denoiser `kdiffusion_oracle.k_denoiser()` and the inputs
built below, with noise from torch.Generator(noise_seed) drawn by `randn` as A1111's per-image RNG draws it. Each case
holds k-diffusion's model-call sigmas, its accepted/rejected attempts and its result (float32).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pipelines.samplers import list_samplers, resolve_sampler
from pipelines.samplers.dpm_adaptive import DPMAdaptiveWalk, StepSizeController

from .kdiffusion_oracle import get_sigmas_karras, k_denoiser, model_sigma_range
from .kdiffusion_reference import GaussianDataModel, SD15_SCHEDULER_CONFIG
from .sampling_loop import fresh_scheduler, run_sampler

GOLDEN = {case["name"]: case for case in json.loads((Path(__file__).with_name("dpm_adaptive_golden.json")).read_text())["cases"]}


def case_input(name: str) -> torch.Tensor:
    """The starting sample of golden case `name`, as the generator script built it."""
    sigma_min, sigma_max = model_sigma_range()
    if name == "batch2_eta0":
        return torch.randn(2, 4, 4, 4, generator=torch.Generator().manual_seed(4)) * sigma_max
    if name == "range_order2_eta0":
        return torch.full((1, 4, 4, 4), 0.3) + torch.randn(1, 4, 4, 4, generator=torch.Generator().manual_seed(5)) * 6.0
    return torch.randn(1, 4, 4, 4, generator=torch.Generator().manual_seed(3)) * sigma_max


def seeded_noise(shape, seed: int):
    generator = torch.Generator().manual_seed(seed)
    return lambda sigma, sigma_next: torch.randn(shape, generator=generator)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_walk_is_k_diffusions_bit_for_bit(name):
    case = GOLDEN[name]
    x = case_input(name)
    walk = DPMAdaptiveWalk(x, case["sigma_min"], case["sigma_max"], seeded_noise(x.shape, case["noise_seed"]),
                           **case["options"])
    denoiser, calls = k_denoiser(), []
    while not walk.finished:
        point, sigma = walk.call
        calls.append(float(sigma))
        walk.take(denoiser(point, sigma.reshape(1)))
    assert calls == case["calls"]
    assert (walk.accepted, walk.rejected) == (case["n_accept"], case["n_reject"]) and walk.rejected > 0
    assert torch.equal(walk.x, torch.tensor(case["result"]).reshape(x.shape))


@pytest.mark.parametrize("name", ["txt2img_eta1", "txt2img_eta0", "batch2_eta0"])
def test_scheduler_runs_as_a1111_calls_it(name):
    """A1111's `sample`: x * sigmas[0], then sample_dpm_adaptive(sigma_min, sigma_max of the model, eta); one
    scheduler walks the whole batch, its error the batch's."""
    case = GOLDEN[name]
    sigma_min, sigma_max = model_sigma_range()
    assert (case["sigma_min"], case["sigma_max"]) == (sigma_min, sigma_max)
    scheduler = fresh_scheduler("DPM adaptive")
    scheduler.eta = case["options"]["eta"]
    seen = []
    model = GaussianDataModel(SD15_SCHEDULER_CONFIG)
    x = case_input(name)
    got = run_sampler(scheduler, lambda sample, t: seen.append(t) or model(sample, t), x / sigma_max, 12,
                      generator=torch.Generator().manual_seed(case["noise_seed"]))
    assert len(seen) == len(case["calls"])  # the same accepted and rejected attempts
    # the model is called at mixkit's t(sigma) (float64 interpolation) where the oracle uses k-diffusion's float32 one
    torch.testing.assert_close(got, torch.tensor(case["result"]).reshape(x.shape), rtol=0, atol=5e-4)  # measured 1.7e-4


def test_img2img_walks_the_schedule_tails_sigma_range():
    """A1111's `sample_img2img`: sigma_max = sigma_sched[0], sigma_min = sigma_sched[-2], noise to sigma_sched[0]."""
    steps, t_enc = 12, 7
    tail = get_sigmas_karras(steps, *model_sigma_range())[steps - t_enc - 1:]
    scheduler = fresh_scheduler("DPM adaptive", "Karras")
    scheduler.set_timesteps(steps)
    scheduler.set_img2img_start(t_enc)
    assert (scheduler.sigma_min, scheduler.sigma_max) == pytest.approx((tail[-2].item(), tail[0].item()), rel=1e-6)
    init, noise = torch.full((1, 4, 4, 4), 0.3), torch.ones(1, 4, 4, 4)
    assert torch.allclose(scheduler.add_noise(init, noise, scheduler.timesteps[:1]), init + tail[0], atol=1e-5)


def test_step_size_controller_accepts_when_the_error_is_small_and_grows_h():
    controller = StepSizeController(0.05, order=3)
    assert controller.propose(0.1) is True and controller.h > 0.05
    h = controller.h
    assert controller.propose(50.0) is False and controller.h < h  # rejected: retried with a smaller step


def test_registered_as_a1111_lists_it():
    assert resolve_sampler("k_dpm_ad") == resolve_sampler("DPM adaptive", "Uniform")
    item = {item["name"]: item for item in list_samplers()}["DPM adaptive"]
    assert item["aliases"] == ["k_dpm_ad"]
    assert item["options"]["uses_ensd"] is True and "scheduler" not in item["options"]


def test_only_dpm_adaptive_decides_its_model_calls_as_it_walks():
    from pipelines.samplers import SAMPLERS
    from pipelines.samplers.dpm_adaptive import calls_depend_on_the_sample
    from pipelines.samplers.factory import scheduler_class_of

    names = [item["name"] for item in list_samplers()]
    walking = {name for name in names if calls_depend_on_the_sample(scheduler_class_of(SAMPLERS.get(name)))}
    assert "Euler" in names and walking == {"DPM adaptive"}
