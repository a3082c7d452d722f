"""make_scheduler: the right diffusers class and config, the model's betas and prediction type kept."""

from __future__ import annotations

import json

import diffusers
import pytest
import torch

from pipelines.samplers import SAMPLERS, make_scheduler
from pipelines.samplers.factory import scheduler_class_of

from .kdiffusion_reference import SD2_V_SCHEDULER_CONFIG, SD15_SCHEDULER_CONFIG, alphas_cumprod, uniform_sigmas
from .sampling_loop import CONFIGS, fresh_scheduler

# Same cases as test_sampling.py, so each scheduler is built once per session (see fresh_scheduler).
CASES = [
    (name, schedule, "sd15-eps") for name in SAMPLERS.names() for schedule in SAMPLERS.get(name).schedule_types
] + [(name, "Automatic", "sd2-v") for name in SAMPLERS.names()]


@pytest.mark.parametrize("sampler, schedule, config_name", CASES)
def test_scheduler_keeps_model_betas_and_prediction_type(sampler, schedule, config_name):
    base = CONFIGS[config_name]
    scheduler = fresh_scheduler(sampler, schedule, config_name)
    # A schedule diffusers lacks runs on a subclass of the sampler's class (custom_sigmas.py).
    assert scheduler_class_of(SAMPLERS.get(sampler)) in type(scheduler).__mro__[:2]
    assert scheduler.config.prediction_type == base.get("prediction_type", "epsilon")
    torch.testing.assert_close(scheduler.alphas_cumprod.double(), alphas_cumprod(base), rtol=1e-6, atol=0)


@pytest.mark.parametrize(
    "sampler, expected",
    [
        ("Euler a", {}),
        ("DPM++ 2M", {"algorithm_type": "dpmsolver++", "solver_order": 2, "use_karras_sigmas": True, "lower_order_final": False}),
        ("DPM++ 2M SDE", {"algorithm_type": "sde-dpmsolver++", "solver_order": 2, "use_exponential_sigmas": False}),
        ("DPM++ 2M SDE Heun", {"algorithm_type": "sde-dpmsolver++", "solver_type": "heun"}),
        ("DPM2", {"use_karras_sigmas": True, "timestep_spacing": "linspace"}),
        ("DDIM", {"set_alpha_to_one": False, "clip_sample": False, "thresholding": False}),
        ("PLMS", {"set_alpha_to_one": False, "clip_sample": False}),
        ("UniPC", {"solver_type": "bh1", "solver_order": 3}),
        ("Euler", {"timestep_spacing": "linspace", "final_sigmas_type": "zero"}),
    ],
)
def test_sampler_config_matches_a1111(sampler, expected):
    config = fresh_scheduler(sampler).config
    assert {key: config[key] for key in expected} == expected


def test_schedule_flags_of_the_model_config_do_not_leak():
    exponential_model = {**SD15_SCHEDULER_CONFIG, "use_exponential_sigmas": True, "timestep_spacing": "leading"}
    scheduler = make_scheduler("Euler", exponential_model, "Uniform")
    assert scheduler.config.use_exponential_sigmas is False
    scheduler.set_timesteps(10)
    torch.testing.assert_close(scheduler.sigmas.double(), uniform_sigmas(SD15_SCHEDULER_CONFIG, 10), rtol=1e-5, atol=1e-6)


def test_accepts_a_live_scheduler_config_and_returns_a_fresh_scheduler():
    model_scheduler = diffusers.DDIMScheduler.from_config(SD2_V_SCHEDULER_CONFIG)
    first = make_scheduler("Euler a", model_scheduler.config)
    second = make_scheduler("Euler a", model_scheduler.config)
    assert first is not second
    assert first.config.prediction_type == "v_prediction"
    assert type(model_scheduler) is diffusers.DDIMScheduler


def test_builds_from_a_saved_scheduler_config_json(tmp_path):
    # What a diffusers model folder holds in scheduler/scheduler_config.json (SD 2.x 768-v).
    diffusers.DDIMScheduler.from_config(SD2_V_SCHEDULER_CONFIG).save_config(tmp_path)
    config = json.loads((tmp_path / "scheduler_config.json").read_text())
    assert config["_class_name"] == "DDIMScheduler"
    for sampler in ("Euler a", "DPM++ 2M", "UniPC", "LCM"):
        assert make_scheduler(sampler, config).config.prediction_type == "v_prediction"


def test_non_mapping_config_is_a_type_error():
    with pytest.raises(TypeError, match="base_scheduler_config"):
        make_scheduler("Euler", ["beta_start", 0.00085])


def test_zero_snr_model_refuses_a_sampler_that_would_ignore_it():
    zero_snr = {**SD15_SCHEDULER_CONFIG, "rescale_betas_zero_snr": True}
    with pytest.raises(ValueError, match="rescale_betas_zero_snr") as info:
        make_scheduler("Heun", zero_snr)
    assert "'Euler'" in str(info.value) or "Euler" in str(info.value)
    assert make_scheduler("Euler", zero_snr).config.rescale_betas_zero_snr is True


def test_missing_optional_package_names_it(monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torchsde" else real_find_spec(name, *a))
    with pytest.raises(ImportError, match=r"'torchsde'.*pip install torchsde"):
        make_scheduler("DPM++ SDE", SD15_SCHEDULER_CONFIG)
