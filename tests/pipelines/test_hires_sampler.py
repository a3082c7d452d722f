"""The hires pass's own sampler and schedule type (A1111's hr_sampler_name / hr_scheduler): what it runs, what
"same" means, the infotext keys and their round trip, and bad names refused before any pass."""

from dataclasses import replace

import numpy as np
import pytest

from pipelines.control import GenerationControl
from pipelines.hires import HiresFix, HiresParams, _SecondPass
from pipelines.hires_sampler import hires_sampler_from_infotext, hires_sampler_names, hires_sampler_infotext
from pipelines.infotext import parse_infotext

from .unet_spy import fail_if_called

BASE = dict(prompt="a castle", seed=21, width=32, height=32, steps=3, sampler="Euler", hr_scale=2.0,
            hr_upscaler="Latent", hr_second_pass_steps=3, denoising_strength=0.6)


@pytest.fixture(scope="module")
def hires(sd1_pipe):
    return HiresFix(sd1_pipe)


def pixels(result):
    return [np.asarray(image).astype(int) for image in result.images]


def second_pass_params(monkeypatch) -> list:
    """Record the Img2ImgParams every second pass runs with."""
    seen = []
    original = _SecondPass.__call__

    def spy(self, params, **kwargs):
        seen.append(params)
        return original(self, params, **kwargs)

    monkeypatch.setattr(_SecondPass, "__call__", spy)
    return seen


@pytest.mark.parametrize("same", [dict(), dict(hr_sampler="Euler"), dict(hr_schedule_type="Automatic"),
                                  dict(hr_sampler="k_euler", hr_schedule_type="Automatic")])
def test_the_first_pass_sampler_named_again_is_todays_output_exactly(hires, same):
    today = hires(**BASE)
    again = hires(**BASE, **same)
    assert all((a == b).all() for a, b in zip(pixels(today), pixels(again)))
    assert today.infotexts == again.infotexts  # no Hires sampler / Hires schedule type key
    assert "Hires sampler" not in today.infotexts[0] and "Hires schedule type" not in today.infotexts[0]


def test_a_hires_sampler_runs_the_second_pass_only_and_equals_that_pass_run_by_hand(hires, monkeypatch):
    calls = []
    original = HiresFix._second_pass

    def keep(self, params, *args):
        calls.append((params, args))
        return original(self, params, *args)

    monkeypatch.setattr(HiresFix, "_second_pass", keep)
    same = hires(**BASE)
    own = hires(**BASE, hr_sampler="DPM++ 2M", hr_schedule_type="Karras")
    assert not all((a == b).all() for a, b in zip(pixels(same), pixels(own)))
    # by hand: today's second-pass code fed the same first pass, with the first pass's sampler set to DPM++ 2M Karras
    params, (target, images, latents, seeds, _, _, first_pass) = calls[0]
    by_hand = original(hires, replace(params, sampler="DPM++ 2M", schedule_type="Karras"), target, images, latents,
                       seeds, None, GenerationControl(), first_pass)
    assert (pixels(by_hand)[0] == pixels(own)[0]).all()


def test_the_second_pass_gets_the_hires_sampler_schedule_and_eta(hires, monkeypatch):
    seen = second_pass_params(monkeypatch)
    hires(**BASE, hr_sampler="DDIM", hr_eta=0.5)
    hires(**BASE, hr_sampler="Euler a")  # eta None: the sampler's own default (1)
    hires(**{**BASE, "sampler": "DPM++ 2M", "schedule_type": "Exponential"}, hr_sampler="Euler")  # the first's schedule
    hires(**BASE, hr_sampler="DPM++ 2M Karras")  # an old-style name carries its schedule
    assert [(p.sampler, p.schedule_type, p.eta) for p in seen] == [
        ("DDIM", "Automatic", 0.5), ("Euler a", "Automatic", None), ("Euler", "Exponential", None),
        ("DPM++ 2M Karras", "Automatic", None)]


def test_the_infotext_names_what_differs_and_reads_back(hires):
    result = hires(**{**BASE, "sampler": "DPM++ 2M", "schedule_type": "Karras"}, hr_sampler="Euler a",
                   hr_schedule_type="Automatic")
    written = parse_infotext(result.infotexts[0])
    # Euler a's Automatic is the model's own schedule, "Uniform", which differs from the first pass's Karras: written
    # under its resolved label, as the first pass's "Schedule type" is (A1111 1.10 writes no key for the model's
    # own schedule, so its paste would run the first pass's Karras)
    assert (written["Sampler"], written["Schedule type"]) == ("DPM++ 2M", "Karras")
    assert (written["Hires sampler"], written["Hires schedule type"]) == ("Euler a", "Uniform")
    assert hires_sampler_from_infotext(written) == ("Euler a", "Uniform")
    pasted = hires(**{**BASE, "sampler": "DPM++ 2M", "schedule_type": "Karras"}, hr_sampler="Euler a",
                   hr_schedule_type="Uniform")
    assert all((a == b).all() for a, b in zip(pixels(result), pixels(pasted)))
    params = HiresParams(sampler="DPM++ 2M", schedule_type="Karras", hr_sampler="Euler a",
                         hr_schedule_type="Automatic")
    assert hires_sampler_names(params) == ("Euler a", "Automatic")
    only_schedule = hires(**BASE, hr_schedule_type="Karras")
    written = parse_infotext(only_schedule.infotexts[0])
    assert written["Hires sampler"] == "Use same sampler"  # A1111's default for a missing key
    assert written["Hires schedule type"] == "Karras"
    assert hires_sampler_from_infotext(written) == (None, "Karras")


def test_infotext_keys_follow_resolution_not_spelling():
    alias = HiresParams(sampler="Euler", hr_sampler="k_dpmpp_2m")  # DPM++ 2M's Automatic is Karras
    assert hires_sampler_infotext(alias) == {"Hires sampler": "DPM++ 2M", "Hires schedule type": "Karras"}
    same_schedule = HiresParams(sampler="DPM++ 2M", schedule_type="Karras", hr_sampler="DPM++ SDE")
    assert hires_sampler_infotext(same_schedule) == {"Hires sampler": "DPM++ SDE", "Hires schedule type": None}
    assert hires_sampler_infotext(HiresParams()) == {"Hires sampler": None, "Hires schedule type": None}


@pytest.mark.parametrize("change, message", [
    (dict(hr_sampler="Eular"), "Eular.*Euler a"),  # the registry's list of valid names
    (dict(hr_schedule_type="Karas"), "Karas"),
    (dict(hr_sampler="DDIM", hr_eta=2.0), r"eta must be a number in \[0, 1\]"),
    (dict(hr_sampler="DPM++ 2M Karras", hr_schedule_type="Exponential"), "already implies schedule type"),
    (dict(hr_sampler=3), "hr_sampler must be a sampler name"),
])
def test_bad_hires_samplers_are_refused_before_any_pass(hires, change, message, monkeypatch):
    fail_if_called(monkeypatch, hires.model.unet)
    with pytest.raises((TypeError, ValueError), match=message):
        hires(**BASE, **change)
