"""The sampler catalog: A1111 names, aliases, defaults and the API listing."""

from __future__ import annotations

import json

import pytest

from mixkit.errors import UnknownNameError
from pipelines.samplers import SAMPLERS, SCHEDULE_TYPES, find_sampler, list_samplers, resolve_sampler

A1111_REQUIRED = [
    "Euler", "Euler a", "Heun", "LMS", "DPM2", "DPM2 a", "DPM++ 2M", "DPM++ 2M SDE",
    "DPM++ SDE", "DPM++ 2S a", "DDIM", "PLMS", "UniPC", "LCM", "DPM++ 3M SDE", "Restart", "DPM fast",
]


@pytest.mark.parametrize("name", A1111_REQUIRED)
def test_a1111_sampler_is_registered(name):
    assert SAMPLERS.get(name).name == name


@pytest.mark.parametrize(
    "alias, canonical",
    [("k_euler_a", "Euler a"), ("k_euler_ancestral", "Euler a"), ("k_dpmpp_2m", "DPM++ 2M"),
     ("k_dpm_2_a", "DPM2 a"), ("k_dpmpp_2s_a", "DPM++ 2S a"), ("K_LMS", "LMS"), ("euler A", "Euler a"), ("ddim", "DDIM")],
)
def test_aliases_resolve_to_the_canonical_sampler(alias, canonical):
    assert find_sampler(alias).name == canonical
    assert resolve_sampler(alias)[0].name == canonical


@pytest.mark.parametrize(
    "old_name, sampler, schedule",
    [("DPM++ 2M Karras", "DPM++ 2M", "Karras"), ("DPM2 a Karras", "DPM2 a", "Karras"),
     ("LMS Karras", "LMS", "Karras"), ("DPM++ 2M SDE Exponential", "DPM++ 2M SDE", "Exponential"),
     ("Euler SGM Uniform", "Euler", "SGM Uniform"), ("k_dpmpp_2m_ka", "DPM++ 2M", "Karras"),
     ("k_dpmpp_sde_ka", "DPM++ SDE", "Karras"), ("DPM++ 2M SDE Heun", "DPM++ 2M SDE Heun", "Exponential"),
     ("DPM++ 2S a Karras", "DPM++ 2S a", "Karras"), ("k_dpmpp_2s_a_ka", "DPM++ 2S a", "Karras")],
)
def test_old_style_names_imply_their_schedule(old_name, sampler, schedule):
    spec, resolved = resolve_sampler(old_name)
    assert (spec.name, resolved) == (sampler, schedule)


def test_old_style_name_with_a_conflicting_schedule_type_is_refused():
    with pytest.raises(ValueError, match="already implies schedule type 'Karras'"):
        resolve_sampler("DPM++ 2M Karras", "Exponential")
    assert resolve_sampler("DPM++ 2M Karras", "Karras")[1] == "Karras"


@pytest.mark.parametrize(
    "name, automatic",
    # A1111 v1.10 sd_samplers_kdiffusion.py options["scheduler"]; others use the model's uniform steps.
    [("DPM++ 2M", "Karras"), ("DPM++ SDE", "Karras"), ("DPM++ 2M SDE", "Exponential"), ("DPM2", "Karras"),
     ("DPM2 a", "Karras"), ("DPM++ 2S a", "Karras"), ("Euler", "Uniform"), ("Euler a", "Uniform"), ("Heun", "Uniform"), ("LMS", "Uniform"),
     ("DDIM", "Automatic"), ("UniPC", "Automatic"), ("DPM++ 3M SDE", "Exponential"), ("Restart", "Karras"),
     ("DPM fast", "Uniform")],
)
def test_automatic_is_the_a1111_default(name, automatic):
    assert resolve_sampler(name, "Automatic")[1] == automatic
    assert resolve_sampler(name)[1] == automatic


def test_unknown_sampler_lists_valid_names():
    with pytest.raises(UnknownNameError) as info:
        resolve_sampler("Euler b")
    message = str(info.value)
    assert "'Euler b'" in message
    for name in SAMPLERS.names():
        assert repr(name) in message


def test_unknown_schedule_type_lists_valid_names():
    with pytest.raises(UnknownNameError, match="'Karras'"):
        resolve_sampler("Euler", "Karas")


@pytest.mark.parametrize("sampler, schedule", [("DDIM", "Karras"), ("UniPC", "Beta"), ("PLMS", "Uniform")])
def test_samplers_without_schedule_choice_ignore_the_schedule_type_as_a1111(sampler, schedule):
    # A1111's timestep samplers ignore "Schedule type": a pasted "DDIM, Schedule type: Karras" runs.
    assert resolve_sampler(sampler, schedule) == (SAMPLERS.get(sampler), "Automatic")
    assert resolve_sampler(f"{sampler} Karras") == (SAMPLERS.get(sampler), "Automatic")


def test_lcm_takes_schedule_types_as_a1111s_k_diffusion_lcm():
    assert resolve_sampler("LCM", "Karras") == (SAMPLERS.get("LCM"), "Karras")
    assert resolve_sampler("LCM") == (SAMPLERS.get("LCM"), "Automatic")


def test_an_unknown_schedule_type_lists_the_valid_ones():
    with pytest.raises(UnknownNameError, match="Karras"):
        resolve_sampler("DDIM", "Karas")


@pytest.mark.parametrize("sampler, steps", [("DDIM", 1000), ("PLMS", 1000), ("UniPC", 1000)])
def test_step_counts_a_sampler_cannot_run_are_refused_before_any_work(sampler, steps):
    from pipelines.samplers import check_sampler_steps

    check_sampler_steps(sampler, steps - 1)
    with pytest.raises(ValueError, match=f"runs at most {steps - 1} steps"):
        check_sampler_steps(sampler, steps)
    check_sampler_steps("Euler", 1000)
    check_sampler_steps("LCM", 1000)  # A1111's LCM interpolates its 50 sigmas; more steps repeat model timesteps


def test_schedule_types_accept_a1111_internal_names():
    assert resolve_sampler("Euler", "karras")[1] == "Karras"
    assert resolve_sampler("Euler", "sgm_uniform")[1] == "SGM Uniform"
    assert resolve_sampler("Euler", "SGMUniform")[1] == "SGM Uniform"


@pytest.mark.parametrize("name", SAMPLERS.names())
def test_spec_is_consistent(name):
    spec = SAMPLERS.get(name)
    assert spec.default_schedule in spec.schedule_types
    assert all(schedule in SCHEDULE_TYPES for schedule in spec.schedule_types)
    assert spec.stochastic == (spec.noise_source != "none")
    assert not spec.ancestral or spec.stochastic


def test_wrong_argument_types_raise_type_error():
    with pytest.raises(TypeError, match="sampler_name"):
        resolve_sampler(None)
    with pytest.raises(TypeError, match="schedule_type"):
        resolve_sampler("Euler", 3)


def test_list_samplers_is_shaped_like_the_a1111_api():
    items = list_samplers()
    json.dumps(items)
    assert [item["name"] for item in items] == SAMPLERS.names()
    by_name = {item["name"]: item for item in items}
    assert set(by_name["DPM++ 2M"]) == {"name", "aliases", "options"}
    assert by_name["DPM++ 2M"]["aliases"] == ["k_dpmpp_2m"]
    assert by_name["DPM++ 2M"]["options"]["scheduler"] == "karras"
    assert by_name["DPM++ 2M SDE"]["options"]["scheduler"] == "exponential"
    assert by_name["DPM++ SDE"]["options"]["brownian_noise"] is True
    assert by_name["Heun"]["options"]["second_order"] is True
    assert by_name["Euler a"]["options"]["uses_ensd"] is True
    assert by_name["DPM2"]["options"]["discard_next_to_last_sigma"] is True  # A1111's own option key
    assert [name for name, item in by_name.items() if "discard_next_to_last_sigma" in item["options"]] == [
        "DPM++ 3M SDE", "DPM2", "DPM2 a"]
    # A1111 1.10's order (its samplers_k_diffusion, then the timestep samplers)
    assert SAMPLERS.names() == ["DPM++ 2M", "DPM++ SDE", "DPM++ 2M SDE", "DPM++ 2M SDE Heun", "DPM++ 2S a",
                                "DPM++ 3M SDE", "Euler a", "Euler", "LMS", "Heun", "DPM2", "DPM2 a", "DPM fast",
                                "DPM adaptive", "Restart", "DDIM", "DDIM CFG++", "PLMS", "UniPC", "LCM"]
    assert "scheduler" not in by_name["Euler"]["options"]


@pytest.mark.parametrize("name, alias, options", [
    # A1111 1.10: ('DPM adaptive', 'sample_dpm_adaptive', ['k_dpm_ad'], {"uses_ensd": True}) and, in
    # sd_samplers_timesteps, ('DDIM CFG++', ddim_cfgpp, ['ddim_cfgpp'], {})
    ("DPM adaptive", "k_dpm_ad", {"uses_ensd": True}),
    ("DDIM CFG++", "ddim_cfgpp", {}),
])
def test_formerly_refused_samplers_are_listed_as_a1111_lists_them(name, alias, options):
    item = {item["name"]: item for item in list_samplers()}[name]
    assert item["aliases"] == [alias]
    assert {key: value for key, value in item["options"].items() if key not in ("schedule_types", "stochastic")} \
        == options
    assert resolve_sampler(alias)[0].name == name and resolve_sampler(name.lower())[0].name == name
