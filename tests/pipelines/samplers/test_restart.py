"""A1111's "Restart" against its `restart_sampler` (restated in kdiffusion_oracle.py)."""

from __future__ import annotations

import pytest
import torch
from pipelines.samplers import list_samplers, resolve_sampler
from pipelines.samplers.restart import restart_steps

from .kdiffusion_oracle import get_sigmas_exponential, get_sigmas_karras, k_denoiser, model_sigma_range, restart_sampler
from .kdiffusion_reference import GaussianDataModel, SD15_SCHEDULER_CONFIG
from .sampling_loop import fresh_scheduler, img2img_inputs, run_img2img, run_sampler

SCHEDULES = {"Karras": get_sigmas_karras, "Exponential": get_sigmas_exponential}


def a1111_sigmas(schedule: str, steps: int) -> torch.Tensor:
    return SCHEDULES[schedule](steps, *model_sigma_range())


@pytest.mark.parametrize("steps, jumps", [(19, 0), (20, 1), (35, 1), (36, 2), (40, 2)])
def test_the_walk_takes_steps_heun_steps_and_restarts_from_20(steps, jumps):
    pairs = restart_steps(a1111_sigmas("Karras", steps))
    assert len(pairs) == steps  # A1111's progress counts `steps`; the model is called 2 * steps - 1 times
    assert sum(1 for (start, _), (_, end) in zip(pairs[1:], pairs) if start > end) == jumps  # noise back up
    assert float(pairs[-1][1]) == 0.0


@pytest.mark.parametrize("schedule", ["Karras", "Exponential"])
@pytest.mark.parametrize("steps", [6, 21, 36])
def test_matches_a1111s_restart_sampler_with_the_same_noise(schedule, steps):
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3))
    sigmas = a1111_sigmas(schedule, steps)
    expected = restart_sampler(k_denoiser(), latents * sigmas[0], sigmas, torch.Generator().manual_seed(9))
    scheduler = fresh_scheduler("Restart", schedule)
    got = run_sampler(scheduler, GaussianDataModel(SD15_SCHEDULER_CONFIG), latents, steps,
                      generator=torch.Generator().manual_seed(9))
    assert len(scheduler.timesteps) == 2 * steps - 1
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)  # measured: 1e-6
    other = run_sampler(fresh_scheduler("Restart", schedule), GaussianDataModel(SD15_SCHEDULER_CONFIG), latents,
                        steps, generator=torch.Generator().manual_seed(10))
    assert torch.equal(other, got) == (steps < 20)  # restart noise only where it restarts


def test_img2img_replans_the_walk_over_a1111s_tail():
    """A1111 hands restart_sampler sigmas[steps - t_enc - 1:]: 25 steps at strength 0.8 restart over a 21-step tail."""
    steps, t_enc = 25, 20
    sigmas = a1111_sigmas("Karras", steps)
    tail = sigmas[steps - t_enc - 1:]
    init, noise = img2img_inputs()
    expected = restart_sampler(k_denoiser(), init + noise * tail[0], tail, torch.Generator().manual_seed(9))
    scheduler = fresh_scheduler("Restart", "Karras")
    got = run_img2img(scheduler, GaussianDataModel(SD15_SCHEDULER_CONFIG), init, noise, steps, t_enc,
                      torch.Generator().manual_seed(9))
    assert len(scheduler.timesteps) == 2 * (t_enc + 1) - 1
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


def test_registered_as_a1111_lists_it():
    assert resolve_sampler("restart") == resolve_sampler("Restart", "Karras")
    item = {item["name"]: item for item in list_samplers()}["Restart"]
    assert item["aliases"] == ["restart"]
    # A1111 1.10: ('Restart', restart_sampler, ['restart'], {'scheduler': 'karras', "second_order": True})
    assert item["options"]["scheduler"] == "karras" and item["options"]["second_order"] is True
    assert "discard_next_to_last_sigma" not in item["options"] and "brownian_noise" not in item["options"]
