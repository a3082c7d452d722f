"""A1111's Sampler parameters (pipelines/sampler_parameters.py) through the txt2img pipeline: checked before any
work, unchanged images at their defaults, A1111's infotext keys where they change the image, read back."""

from __future__ import annotations

import math

import numpy as np
import torch
import pytest

from pipelines.infotext import parse_infotext
from pipelines.params import GenerationLimits, Txt2ImgParams, check_txt2img_params
from pipelines.sampler_parameters import (
    RANGES,
    SamplerParameters,
    check_sampler_parameters,
    from_infotext,
    parameters_from_values,
)
from pipelines.samplers import SAMPLERS, SCHEDULE_TYPES

SMALL = dict(prompt="a red circle", width=64, height=64, steps=4, seed=9)


def _check(sampler: str = "Euler", schedule: str = "Automatic", **settings) -> None:
    params = Txt2ImgParams(sampler=sampler, schedule_type=schedule, sampler_parameters=SamplerParameters(**settings))
    check_txt2img_params(params, GenerationLimits())


@pytest.mark.parametrize("settings, message", [
    ({"s_churn": -0.5}, r"s_churn must be a number in \[0, 100\] \(0 keeps .* got -0\.5"),
    ({"s_noise": math.nan}, r"s_noise must be a number in \[0, 1\.1\] .* got nan"),
    ({"rho": -1.0}, r"rho must be a number in \[0, 100\]"),
    ({"sigma_max": math.inf}, r"sigma_max must be a number in \[0, 5000\]"),
    ({"s_tmax": -math.inf}, r"s_tmax must be a number in \[0, 999\]"),
    # A1111's Settings sliders bound what a request may ask for (huge values overflow to NaN images)
    ({"s_churn": 100.5}, r"s_churn must be a number in \[0, 100\] .*A1111's Settings > Sampler parameters\), got 100\.5"),
    ({"s_tmin": 1e30}, r"s_tmin must be a number in \[0, 10\] .* got 1e\+30"),
    ({"s_tmax": 1000.0}, r"s_tmax must be a number in \[0, 999\] .* got 1000\.0"),
    ({"s_noise": 1.2}, r"s_noise must be a number in \[0, 1\.1\] .* got 1\.2"),
    ({"sigma_min": 5000.5}, r"sigma_min must be a number in \[0, 5000\] .* got 5000\.5"),
    ({"rho": 1e300}, r"rho must be a number in \[0, 100\]"),
    ({"beta_dist_alpha": 0.0}, r"beta_dist_alpha must be a number in \[0\.01, 1\] \(default 0\.6; .* got 0\.0"),
    ({"beta_dist_beta": 1e30}, r"beta_dist_beta must be a number in \[0\.01, 1\]"),
    ({"uni_pc_order": 51}, r"uni_pc_order must be a whole number in \[1, 50\] .* got 51"),
    ({"uni_pc_order": 0}, r"uni_pc_order must be a whole number in \[1, 50\]"),
    ({"sigma_min": 5.0, "sigma_max": 2.0}, r"sigma_min \(5\.0\) must be below sigma_max \(2\.0\)"),
    ({"sigma_min": 2.0, "sigma_max": 2.0}, r"sigma_min \(2\.0\) must be below sigma_max"),
    ({"s_tmin": 3.0, "s_tmax": 1.0}, r"s_tmin \(3\.0\) is above s_tmax \(1\.0\)"),
])
def test_bad_values_are_refused_naming_the_setting(settings, message):
    with pytest.raises(ValueError, match=message):
        _check(**settings)


def test_the_ends_of_each_range_are_taken():
    # alone at its top but sigma_min and s_tmin, which must stay below sigma_max / s_tmax: with them below
    for name in ("sigma_max", "rho", "s_churn", "s_tmax", "s_noise", "beta_dist_alpha", "beta_dist_beta"):
        _check(**{name: RANGES[name][1]})
    _check(beta_dist_alpha=0.01, beta_dist_beta=0.01)
    _check(sigma_min=4999.0, sigma_max=5000.0)
    _check(s_tmin=10.0, s_tmax=999.0)
    _check(sampler="UniPC", uni_pc_order=50)
    _check(sampler="UniPC", uni_pc_order=1)


@pytest.mark.parametrize("settings", [{"s_churn": True}, {"rho": "5"}, {"always_discard_next_to_last_sigma": 1}])
def test_wrong_types_are_refused(settings):
    with pytest.raises(TypeError, match=next(iter(settings))):
        _check(**settings)


def test_s_tmax_infinity_is_a1111s_zero():
    _check(s_tmax=math.inf, s_tmin=3.0)
    assert SamplerParameters(s_tmax=0.0).tmax == SamplerParameters(s_tmax=math.inf).tmax == math.inf


@pytest.mark.parametrize("sampler", ["DPM++ SDE", "DPM2 a", "DPM++ 2S a", "DPM++ 2M SDE"])
def test_s_noise_is_taken_and_recorded_by_the_samplers_a1111_passes_it_to(sampler):
    _check(sampler, s_noise=0.9)
    assert SamplerParameters(s_noise=0.9).infotext_values(SAMPLERS.get(sampler), SCHEDULE_TYPES.get("Karras")) == {
        "Sigma noise": 0.9}
    assert SamplerParameters(s_noise=0.9).infotext_values(SAMPLERS.get("Euler a"), SCHEDULE_TYPES.get("Karras")) == {}


def test_settings_a_sampler_does_not_read_are_accepted_as_in_a1111():
    _check("DPM++ 2M", s_churn=0.5, s_noise=0.9)  # A1111 passes churn to sample_euler / heun / dpm_2 only
    _check("DDIM", always_discard_next_to_last_sigma=True, sigma_min=0.5)  # timestep samplers take no sigmas
    with pytest.raises(ValueError, match="LCM and schedule type 'Automatic'"):
        _check("LCM", always_discard_next_to_last_sigma=True)


def test_the_python_api_refuses_a_bad_value_before_any_work(sd1_pipe):
    with pytest.raises(ValueError, match="s_churn must be"):
        sd1_pipe(**SMALL, sampler="Euler", sampler_parameters=SamplerParameters(s_churn=-1.0))


@pytest.mark.parametrize("sampler, schedule, settings", [
    ("Euler", "Automatic", {}),
    ("DPM++ 2M", "Karras", {"rho": 7.0}),  # Karras' own rho
    ("Euler", "Uniform", {"sigma_min": 0.3, "rho": 3.0}),  # A1111's uniform takes neither
    ("DPM++ 2M", "Automatic", {"s_churn": 0.8, "s_tmax": 5.0}),  # no churn in DPM++ 2M
    ("DPM2", "Karras", {"always_discard_next_to_last_sigma": True}),  # DPM2 discards anyway
])
def test_values_that_change_nothing_give_the_very_same_image(sd1_pipe, sampler, schedule, settings):
    plain = sd1_pipe(**SMALL, sampler=sampler, schedule_type=schedule)
    same = sd1_pipe(**SMALL, sampler=sampler, schedule_type=schedule, sampler_parameters=SamplerParameters(**settings))
    assert np.array_equal(np.asarray(plain.images[0]), np.asarray(same.images[0]))
    keys = ("Schedule", "Sigma", "Discard")
    assert [k for k in parse_infotext(same.infotexts[0], defaults=False) if k.startswith(keys)] == \
        [k for k in parse_infotext(plain.infotexts[0], defaults=False) if k.startswith(keys)]


def test_churn_outside_its_sigma_window_changes_nothing_but_is_recorded_as_a1111_does(sd1_pipe):
    plain = sd1_pipe(**SMALL, sampler="Euler", schedule_type="Karras")
    parameters = SamplerParameters(s_churn=0.5, s_tmax=0.01)  # no sigma in [0, 0.01] but the last: no step churns
    same = sd1_pipe(**SMALL, sampler="Euler", schedule_type="Karras", sampler_parameters=parameters)
    assert np.array_equal(np.asarray(plain.images[0]), np.asarray(same.images[0]))
    recorded = parse_infotext(same.infotexts[0], defaults=False)
    assert float(recorded["Sigma churn"]) == 0.5 and float(recorded["Sigma tmax"]) == 0.01


@pytest.mark.parametrize("sampler, schedule, settings, written", [
    ("Euler", "Automatic", {"s_churn": 1.0}, {"Sigma churn": "1"}),
    ("Heun", "Karras", {"s_churn": 2.0, "s_tmin": 0.1, "s_tmax": 10.0, "s_noise": 1.01},
     {"Sigma churn": "2", "Sigma tmin": "0.1", "Sigma tmax": "10", "Sigma noise": "1.01"}),
    ("DPM++ 2M SDE", "Karras", {"s_noise": 0.5}, {"Sigma noise": "0.5"}),
    ("DPM++ 2M", "Karras", {"sigma_min": 0.1, "sigma_max": 10.0, "rho": 5.0},
     {"Schedule min sigma": "0.1", "Schedule max sigma": "10", "Schedule rho": "5"}),
    ("Euler", "Exponential", {"always_discard_next_to_last_sigma": True}, {"Discard penultimate sigma": "True"}),
])
def test_a_changed_setting_changes_the_image_and_is_written_and_read_back(sd1_pipe, sampler, schedule, settings,
                                                                          written):
    parameters = SamplerParameters(**settings)
    plain = sd1_pipe(**SMALL, sampler=sampler, schedule_type=schedule)
    changed = sd1_pipe(**SMALL, sampler=sampler, schedule_type=schedule, sampler_parameters=parameters)
    assert not np.array_equal(np.asarray(plain.images[0]), np.asarray(changed.images[0]))
    recorded = parse_infotext(changed.infotexts[0], defaults=False)
    assert {key: recorded[key] for key in written} == written
    assert parameters_from_values(from_infotext(recorded)) == parameters
    again = sd1_pipe(**SMALL, sampler=sampler, schedule_type=schedule,
                     sampler_parameters=parameters_from_values(from_infotext(recorded)))
    assert np.array_equal(np.asarray(changed.images[0]), np.asarray(again.images[0]))


def test_churn_is_written_only_for_the_samplers_that_run_it():
    parameters = SamplerParameters(s_churn=0.5, s_noise=0.9, s_tmax=4.0)
    karras = SCHEDULE_TYPES.get("Karras")
    assert parameters.infotext_values(SAMPLERS.get("DPM++ 2M"), karras) == {}
    assert parameters.infotext_values(SAMPLERS.get("Euler"), karras) == {
        "Sigma churn": 0.5, "Sigma tmax": 4.0, "Sigma noise": 0.9}


def test_bounds_are_written_only_for_schedules_that_take_them():
    parameters = SamplerParameters(sigma_min=0.2, rho=3.0)
    euler = SAMPLERS.get("Euler")
    assert parameters.infotext_values(euler, SCHEDULE_TYPES.get("Uniform")) == {}
    assert parameters.infotext_values(euler, SCHEDULE_TYPES.get("Exponential")) == {"Schedule min sigma": 0.2}
    assert parameters.infotext_values(euler, SCHEDULE_TYPES.get("Polyexponential")) == {
        "Schedule min sigma": 0.2, "Schedule rho": 3.0}


def test_values_read_from_text_are_numbers_and_flags():
    assert parameters_from_values({"s_churn": "0.5", "always_discard_next_to_last_sigma": "True", "eta": 3}) == \
        SamplerParameters(s_churn=0.5, always_discard_next_to_last_sigma=True)
    with pytest.raises(ValueError, match="s_churn must be a number, got 'lots'"):
        parameters_from_values({"s_churn": "lots"})
    with pytest.raises(TypeError):
        check_sampler_parameters({"s_churn": 0.5})



@pytest.mark.parametrize("sampler, schedule", [("Euler", "Automatic"), ("DPM++ 2M", "Karras")])
def test_sgm_noise_multiplier_starts_from_sqrt_1_plus_sigma_max_squared(sd1_pipe, sampler, schedule):
    # A1111's KDiffusionSampler.sample: x * sqrt(1 + sigmas[0]^2) instead of x * sigmas[0]
    from pipelines.samplers import initial_noise_scale

    resolved = sd1_pipe.session.resolve_sampler(sampler, schedule, None, SamplerParameters(sgm_noise_multiplier=True))
    generators = [torch.Generator().manual_seed(9)]
    start = sd1_pipe._start_batch(Txt2ImgParams(**SMALL, sampler=sampler, schedule_type=schedule), None, resolved,
                                  generators, 0)
    plain = sd1_pipe.session.resolve_sampler(sampler, schedule, None)
    plain_start = sd1_pipe._start_batch(Txt2ImgParams(**SMALL, sampler=sampler, schedule_type=schedule), None, plain,
                                        [torch.Generator().manual_seed(9)], 0)
    sigma_max = float(start.schedulers[0].sigmas[0])
    factor = math.sqrt(1 + sigma_max**2) / sigma_max
    torch.testing.assert_close(start.latents, plain_start.latents * factor, rtol=1e-6, atol=0)
    if sampler == "Euler":  # k-diffusion's sigma-space start: exactly sqrt(1 + sigma_max^2) of unit noise
        assert initial_noise_scale(start.schedulers[0]) * factor == pytest.approx(math.sqrt(1 + sigma_max**2))
    result = sd1_pipe(**SMALL, sampler=sampler, schedule_type=schedule,
                      sampler_parameters=SamplerParameters(sgm_noise_multiplier=True))
    recorded = parse_infotext(result.infotexts[0], defaults=False)
    assert recorded["SGM noise multiplier"] == "True"
    assert parameters_from_values(from_infotext(recorded)) == SamplerParameters(sgm_noise_multiplier=True)
    assert from_infotext({"SGM noise multplier": "True"}) == {"sgm_noise_multiplier": "True"}  # A1111 1.6's spelling


def test_sgm_noise_multiplier_leaves_a1111s_timestep_samplers_alone(sd1_pipe):
    plain = sd1_pipe(**SMALL, sampler="DDIM")
    sgm = sd1_pipe(**SMALL, sampler="DDIM", sampler_parameters=SamplerParameters(sgm_noise_multiplier=True))
    assert np.array_equal(np.asarray(plain.images[0]), np.asarray(sgm.images[0]))
    assert "SGM noise multiplier" not in sgm.infotexts[0]
