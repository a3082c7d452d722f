"""A1111's "Schedule min/max sigma", "Schedule rho" and "Discard penultimate sigma" on the sigma schedules."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipelines.sampler_parameters import SamplerParameters
from pipelines.samplers import SCHEDULE_TYPES, make_scheduler

from .kdiffusion_reference import REFERENCE_SCHEDULES, SD15_SCHEDULER_CONFIG, ranged_schedule, training_sigmas

RANGED = ("Karras", "Exponential", "Polyexponential", "SGM Uniform", "KL Optimal", "Normal", "Beta")
UNRANGED = ("Uniform", "Align Your Steps", "Simple", "DDIM")  # A1111's functions that ignore the bounds


def _model_sigmas() -> np.ndarray:
    return training_sigmas(SD15_SCHEDULER_CONFIG).numpy()


def _walked(sampler: str, schedule: str, steps: int, parameters=None) -> torch.Tensor:
    scheduler = make_scheduler(sampler, SD15_SCHEDULER_CONFIG, schedule, parameters=parameters)
    scheduler.set_timesteps(steps)
    return scheduler.sigmas


@pytest.mark.parametrize("schedule", RANGED)
@pytest.mark.parametrize("sigma_min, sigma_max", [(0.1, 10.0), (0.5, 0.0), (0.0, 5.0)])
def test_ranged_schedule_functions_follow_a1111s_formulas(schedule, sigma_min, sigma_max):
    ours = SCHEDULE_TYPES.get(schedule).sigma_function
    model = _model_sigmas()
    kwargs = SamplerParameters(sigma_min=sigma_min, sigma_max=sigma_max).schedule_kwargs(SCHEDULE_TYPES.get(schedule))
    expected = ranged_schedule(schedule, SD15_SCHEDULER_CONFIG, 9, sigma_min or float(model[0]),
                               sigma_max or float(model[-1]))
    np.testing.assert_allclose(ours(9, model, False, **kwargs), expected.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("schedule, rho", [("Karras", 3.0), ("Karras", 9.5), ("Polyexponential", 2.0),
                                           ("Polyexponential", 0.5)])
def test_rho_changes_karras_and_polyexponential_as_k_diffusion(schedule, rho):
    parameters = SamplerParameters(rho=rho, sigma_min=0.05)
    kwargs = parameters.schedule_kwargs(SCHEDULE_TYPES.get(schedule))
    assert kwargs == {"rho": rho, "sigma_min": 0.05}
    expected = ranged_schedule(schedule, SD15_SCHEDULER_CONFIG, 12, 0.05, float(_model_sigmas()[-1]), rho)
    got = SCHEDULE_TYPES.get(schedule).sigma_function(12, _model_sigmas(), False, **kwargs)
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-9, atol=1e-12)
    walked = _walked("Euler", schedule, 12, parameters)  # the scheduler walks them (float32), then 0
    torch.testing.assert_close(walked.double(), expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize("schedule, rho", [("Karras", 7.0), ("Karras", 0.0), ("Polyexponential", 1.0),
                                           ("Exponential", 3.0), ("Uniform", 3.0)])
def test_rho_at_the_schedules_own_value_or_on_a_schedule_without_rho_is_not_applied(schedule, rho):
    # A1111: `scheduler.default_rho != -1 and opts.rho != 0 and opts.rho != scheduler.default_rho`
    assert SamplerParameters(rho=rho).schedule_kwargs(SCHEDULE_TYPES.get(schedule)) == {}


@pytest.mark.parametrize("sampler, schedule", [("Euler", "Karras"), ("DPM++ 2M", "Karras"), ("DPM2", "Karras"),
                                               ("Heun", "Exponential"), ("LMS", "SGM Uniform"), ("Euler", "Normal"),
                                               ("DPM++ 2M", "Polyexponential"), ("Euler a", "KL Optimal"),
                                               ("DPM++ 2M", "Beta")])
def test_defaults_walk_exactly_the_schedule_that_ran_before(sampler, schedule):
    before = _walked(sampler, schedule, 10)
    assert torch.equal(_walked(sampler, schedule, 10, SamplerParameters()), before)
    # A bound equal to the model's own float32 sigma is the default too (A1111: `opts.sigma_min != m_sigma_min`)
    alphas = make_scheduler(sampler, SD15_SCHEDULER_CONFIG, schedule).alphas_cumprod.double()
    model = ((1 - alphas) / alphas).sqrt().float()  # the model's float32 sigmas, as A1111's model_wrap.sigmas
    own_rho = max(SCHEDULE_TYPES.get(schedule).default_rho, 0.0)  # Karras 7, Polyexponential 1, others none
    same = SamplerParameters(sigma_min=model[0].item(), sigma_max=model[-1].item(), rho=own_rho)
    assert torch.equal(_walked(sampler, schedule, 10, same), before)


@pytest.mark.parametrize("schedule", UNRANGED)
def test_bounds_leave_the_schedules_a1111_builds_without_them_unchanged(schedule):
    parameters = SamplerParameters(sigma_min=0.3, sigma_max=8.0)
    assert parameters.schedule_kwargs(SCHEDULE_TYPES.get(schedule)) == {}
    assert torch.equal(_walked("Euler", schedule, 8, parameters), _walked("Euler", schedule, 8))


def test_bounds_reach_the_walk_of_a_multistep_sampler():
    parameters = SamplerParameters(sigma_min=0.1, sigma_max=10.0)
    expected = ranged_schedule("Karras", SD15_SCHEDULER_CONFIG, 6, 0.1, 10.0)
    torch.testing.assert_close(_walked("DPM++ 2M", "Karras", 6, parameters).double(), expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize("schedule", ["Karras", "Uniform", "Exponential"])
def test_always_discard_next_to_last_sigma_drops_it_for_any_sampler(schedule):
    # A1111's get_sigmas: steps + 1 sigmas, then torch.cat([sigmas[:-2], sigmas[-1:]])
    reference = REFERENCE_SCHEDULES[schedule](SD15_SCHEDULER_CONFIG, 9)
    expected = torch.cat([reference[:-2], reference[-1:]])
    got = _walked("Euler", schedule, 8, SamplerParameters(always_discard_next_to_last_sigma=True))
    # 1e-5: the model's range here comes from diffusers' float32 alphas_cumprod, the reference's from float64 betas
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-6)
    # DPM2 discards on its own; the setting changes nothing there
    dpm2 = _walked("DPM2", schedule, 8)
    assert torch.equal(_walked("DPM2", schedule, 8, SamplerParameters(always_discard_next_to_last_sigma=True)), dpm2)


def test_a_bound_outside_the_models_range_that_inverts_it_is_refused_before_sampling():
    with pytest.raises(ValueError, match=r"sigma_max 14\.6.* down to sigma_min 20"):
        _walked("Euler", "Karras", 8, SamplerParameters(sigma_min=20.0))
