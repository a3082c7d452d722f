"""Loopback's settings and denoising strength schedule (pipelines/scripts/loopback_config.py)."""

import math

import pytest

from pipelines.scripts.loopback_config import (LoopbackConfig, curve_progress, loop_strength, parse_script_args,
                                               script_args, strength_schedule)


def test_linear_schedule_moves_in_equal_steps_to_the_final_strength():
    assert strength_schedule(5, 0.75, 0.25, "Linear") == [0.75, 0.625, 0.5, 0.375, 0.25]
    assert strength_schedule(3, 0.0, 1.0, "Linear") == [0.0, 0.5, 1.0]


def test_aggressive_changes_early_and_lazy_late():
    aggressive = strength_schedule(3, 0.0, 1.0, "Aggressive")
    lazy = strength_schedule(3, 0.0, 1.0, "Lazy")
    assert aggressive[1] == pytest.approx(math.sqrt(0.5), abs=1e-15)  # sin(pi/4)
    assert lazy[1] == pytest.approx(1 - math.sqrt(0.5), abs=1e-15)  # 1 - cos(pi/4)
    # strength falling from 0.8 to 0.2 over 4 loops: Aggressive is below Linear, Lazy above, at every middle loop
    linear = strength_schedule(4, 0.8, 0.2, "Linear")
    for middle in (1, 2):
        assert strength_schedule(4, 0.8, 0.2, "Aggressive")[middle] < linear[middle] < \
            strength_schedule(4, 0.8, 0.2, "Lazy")[middle]


@pytest.mark.parametrize("curve, last", [("Aggressive", 0.35), ("Linear", 0.35),
                                         # cos(pi/2) is 6e-17 in floats, so Lazy ends a hair off, as in A1111
                                         ("Lazy", 0.35000000000000003)])
def test_every_curve_starts_at_the_call_strength_and_ends_at_the_final(curve, last):
    schedule = strength_schedule(6, 0.7, 0.35, curve)
    assert len(schedule) == 6 and schedule[0] == 0.7 and schedule[-1] == last
    assert curve_progress(curve, 0.0) == 0.0


def test_one_loop_runs_at_the_call_strength():
    assert strength_schedule(1, 0.6, 0.1, "Aggressive") == [0.6]
    assert loop_strength(1, 1, 0.6, 0.1, "Lazy") == 0.6  # A1111 asks for loop 1 after the only one


def test_config_defaults_are_a1111s_and_choices_take_any_case():
    assert LoopbackConfig() == LoopbackConfig(4, 0.5, "Linear", "None")
    config = parse_script_args([8.0, 1, "lazy", "clip"])
    assert (config.loops, config.final_denoising_strength, config.denoising_curve, config.append_interrogation) == (
        8, 1.0, "Lazy", "CLIP")
    assert parse_script_args([2, None]) == LoopbackConfig(loops=2)
    assert parse_script_args([2, 0.5, "Linear", "deepbooru"]).append_interrogation == "DeepBooru"
    assert LoopbackConfig(final_denoising_strength=0.25).infotext_keys() == {
        "Final denoising strength": 0.25, "Denoising curve": "Linear"}


@pytest.mark.parametrize("args, message", [
    ([0], "^Loopback: script_args loops must be a whole number from 1 to 32"),
    ([33], "from 1 to 32"),
    ([10 ** 400], "from 1 to 32"),  # a JSON int float() cannot hold: was an OverflowError (a 500)
    ([2.5], "got 2.5"),
    ([True], "got True"),
    ([4, 1.5], "^Loopback: script_args final_denoising_strength must be a number from 0 to 1, got 1.5"),
    ([4, -0.1], "got -0.1"),
    ([4, float("nan")], "got nan"),
    ([4, "0.5"], "got '0.5'"),
    ([4, 0.5, "Steep"], "^Loopback: script_args denoising_curve must be one of 'Aggressive', 'Linear', 'Lazy', got "
                        "'Steep'"),
    ([4, 0.5, "Linear", "BLIP"], "^Loopback: script_args append_interrogation must be one of 'None', 'CLIP', "
                                 "'DeepBooru'"),
    ([4, 0.5, "Linear", "None", 1], "at most 4 values"),
    ("4", "must be a list"),
])
def test_bad_script_args_are_refused_naming_the_slot(args, message):
    with pytest.raises(ValueError, match=message):
        parse_script_args(args)


@pytest.mark.parametrize("settings, message", [
    ({"loops": 40}, "Loopback: loops must be a whole number from 1 to 32 (A1111's Loops slider), got 40."),
    ({"final_denoising_strength": -1}, "Loopback: final_denoising_strength must be a number from 0 to 1, got -1."),
    ({"denoising_curve": "Steep"},
     "Loopback: denoising_curve must be one of 'Aggressive', 'Linear', 'Lazy', got 'Steep'."),
    ({"append_interrogation": "BLIP"},
     "Loopback: append_interrogation must be one of 'None', 'CLIP', 'DeepBooru', got 'BLIP'."),
])
def test_a_config_built_in_python_names_the_script_like_the_other_scripts_errors(settings, message):
    with pytest.raises(ValueError) as raised:
        LoopbackConfig(**settings)
    assert str(raised.value) == message


def test_txt2img_is_refused():
    with pytest.raises(ValueError, match="runs for img2img"):
        parse_script_args([], "txt2img")


def test_script_info_slots_are_a1111s():
    slots = [arg.info() for arg in script_args("img2img")]
    assert [(s["label"], s["value"], s["minimum"], s["maximum"], s["step"], s["choices"]) for s in slots] == [
        ("Loops", 4, 1, 32, 1, None), ("Final denoising strength", 0.5, 0, 1, 0.01, None),
        ("Denoising strength curve", "Linear", None, None, None, ["Aggressive", "Linear", "Lazy"]),
        ("Append interrogated prompt at each iteration", "None", None, None, None, ["None", "CLIP", "DeepBooru"])]
