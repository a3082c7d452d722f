"""LCM walks A1111's own sigma schedule over the 50 distilled sigmas (checked in float64)."""

from __future__ import annotations

import pytest
import torch

from pipelines.generation import ResolvedSampler
from pipelines.img2img import img2img_steps, img2img_timesteps
from pipelines.samplers.lcm import boundary_scalings, distilled_timesteps

from . import a1111_lcm_reference as reference
from . import kdiffusion_reference
from .kdiffusion_reference import REFERENCE_SCHEDULES, SD15_SCHEDULER_CONFIG, GaussianDataModel, alphas_cumprod
from .sampling_loop import fresh_scheduler, run_sampler

SIGMAS = reference.valid_sigmas(alphas_cumprod(SD15_SCHEDULER_CONFIG))


def _recording_model():
    model = GaussianDataModel(SD15_SCHEDULER_CONFIG)
    calls = []

    def call(x, t):
        calls.append(int(t))
        return model(x, t)

    return call, calls


def test_four_steps_call_the_model_where_a1111_does():
    # diffusers' LCMScheduler ("leading" over the 50): 999, 759, 499, 259.
    scheduler = fresh_scheduler("LCM")
    scheduler.set_timesteps(4)
    assert scheduler.timesteps.tolist() == [999, 679, 339, 19]
    assert distilled_timesteps().tolist() == list(range(19, 1000, 20))


@pytest.mark.parametrize("steps", [1, 2, 4, 8, 13, 50, 70])
def test_txt2img_walk_matches_a1111(steps):
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    schedule = reference.get_sigmas(steps, SIGMAS)
    expected_calls = []
    expected = reference.sample_lcm(GaussianDataModel(SD15_SCHEDULER_CONFIG), latents * schedule[0], schedule, SIGMAS,
                                    expected_calls, generator=torch.Generator().manual_seed(4))
    model, calls = _recording_model()
    got = run_sampler(fresh_scheduler("LCM"), model, latents.float(), steps, generator=torch.Generator().manual_seed(4))
    assert calls == expected_calls
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=5e-4)


@pytest.mark.parametrize("steps, strength", [(8, 0.5), (4, 0.75), (6, 1.0)])
def test_img2img_starts_at_a1111s_sigma(steps, strength):
    init = torch.full((1, 4, 8, 8), 0.3, dtype=torch.float64)
    noise = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    t_enc = int(min(strength, 0.999) * steps)
    schedule = reference.get_sigmas(steps, SIGMAS)[steps - t_enc - 1:]
    expected_calls = []
    expected = reference.sample_lcm(GaussianDataModel(SD15_SCHEDULER_CONFIG), init + noise * schedule[0], schedule,
                                    SIGMAS, expected_calls, generator=torch.Generator().manual_seed(4))

    total, run = img2img_steps(steps, strength, False)
    scheduler = fresh_scheduler("LCM")
    scheduler.set_timesteps(total)
    begin, timesteps = img2img_timesteps(scheduler, total, run)
    scheduler.set_begin_index(begin)
    x = scheduler.add_noise(init.float(), noise.float(), timesteps[:1])
    model, calls = _recording_model()
    generator = torch.Generator().manual_seed(4)
    for t in timesteps:
        x = scheduler.step(model(scheduler.scale_model_input(x, t), t), t, x, generator=generator).prev_sample
    assert calls == expected_calls
    torch.testing.assert_close(x.double(), expected, rtol=0, atol=5e-4)


@pytest.mark.parametrize("schedule", sorted(REFERENCE_SCHEDULES))
@pytest.mark.parametrize("steps", [4, 10, 30])
def test_every_schedule_type_is_a1111s_over_the_distilled_sigmas(monkeypatch, schedule, steps):
    # A1111's schedule functions read the LCM denoiser's own 50 sigmas (its sigma_min/max, t <-> sigma, .sigmas).
    monkeypatch.setattr(kdiffusion_reference, "training_sigmas", lambda config: SIGMAS)
    expected = REFERENCE_SCHEDULES[schedule]({**SD15_SCHEDULER_CONFIG, "num_train_timesteps": 50}, steps)
    scheduler = fresh_scheduler("LCM", schedule)
    scheduler.set_timesteps(steps)
    torch.testing.assert_close(scheduler.sigmas.double(), expected, rtol=1e-5, atol=1e-6)
    assert scheduler.timesteps.tolist() == [reference.model_timestep(float(s), SIGMAS) for s in expected[:-1]]


def test_schedule_types_apply_over_the_distilled_sigmas():
    # A1111 runs its schedule functions on the LCM denoiser's sigma_min / sigma_max (timesteps 19 and 999).
    scheduler = fresh_scheduler("LCM", "Karras")
    scheduler.set_timesteps(4)
    low, high = float(SIGMAS[0]) ** (1 / 7), float(SIGMAS[-1]) ** (1 / 7)
    karras = [(high + i / 3 * (low - high)) ** 7 for i in range(4)]
    torch.testing.assert_close(scheduler.sigmas[:-1].double(), torch.tensor(karras, dtype=torch.float64), rtol=1e-5, atol=0)
    assert scheduler.timesteps.tolist() == [reference.model_timestep(s, SIGMAS) for s in karras]


def test_boundary_condition_is_lcms():
    c_skip, c_out = boundary_scalings(19)
    assert c_skip == pytest.approx(0.25 / (190**2 + 0.25)) and c_out == pytest.approx(190 / (190**2 + 0.25) ** 0.5)


def test_ensd_changes_lcm_as_in_a1111():
    # A1111's LCM draws its per-step noise from the image RNG, which ENSD reseeds.
    sampler = ResolvedSampler("LCM", "Automatic", dict(SD15_SCHEDULER_CONFIG))
    assert sampler.takes_seed_delta
