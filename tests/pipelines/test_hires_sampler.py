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
    # Euler a's Automatic is the model's own schedule, "Uniform", which differs from the first pass's Karras. A1111
    # 1.10 records nothing for the model's own schedule, and its paste ("Use same scheduler") would then run Karras:
    # the one case where mixkit writes the resolved label anyway, so the paste (here or in A1111) runs what ran
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


@pytest.mark.parametrize("first, hires_fields, schedule_key", [
    # A1111's get_sigmas records a schedule only when it runs one of its schedule functions: a timestep sampler
    # (DDIM, PLMS, UniPC) records none, and a paste of no key runs it the same
    (("DPM++ 2M", "Karras"), dict(hr_sampler="DDIM"), None),
    (("DPM++ 2M", "Karras"), dict(hr_sampler="UniPC", hr_schedule_type="Exponential"), None),
    # Euler a on Automatic first records nothing, so any named hires schedule is new to the infotext
    (("Euler a", "Automatic"), dict(hr_sampler="DPM++ 2M"), "Karras"),
    (("Euler a", "Automatic"), dict(hr_sampler="Euler", hr_schedule_type="Uniform"), "Uniform"),
    # both on the model's own schedule: nothing recorded either side
    (("Euler a", "Automatic"), dict(hr_sampler="Euler"), None),
    # the first pass's recorded schedule named again: not written
    (("DPM++ 2M", "Karras"), dict(hr_sampler="Euler", hr_schedule_type="Karras"), None),
    (("Euler", "Karras"), dict(hr_sampler="DPM++ 2M"), None),
    # an old-style name names its schedule
    (("Euler", "Automatic"), dict(hr_sampler="Euler Karras"), "Karras"),
    # the exception: A1111 would record nothing and its paste would run the first pass's Karras
    (("Euler", "Karras"), dict(hr_sampler="Euler a", hr_schedule_type="Automatic"), "Uniform"),
])
def test_hires_schedule_type_is_written_by_a1111s_get_sigmas_rule(first, hires_fields, schedule_key):
    params = HiresParams(sampler=first[0], schedule_type=first[1], **hires_fields)
    assert hires_sampler_infotext(params)["Hires schedule type"] == schedule_key


def test_a_paste_of_what_was_written_runs_the_same_hires_pass():
    """Each case's infotext keys, read back, resolve to the sampler and schedule that ran (A1111's paste: a missing
    key is the first pass's requested sampler / schedule)."""
    from pipelines.samplers import resolve_sampler

    cases = [HiresParams(sampler=s, schedule_type=t, hr_sampler=h, hr_schedule_type=ht) for s, t, h, ht in [
        ("DPM++ 2M", "Karras", "DDIM", None), ("Euler a", "Automatic", "Euler", None),
        ("Euler", "Karras", "Euler a", "Automatic"), ("DPM++ 2M", "Karras", "Euler", "Karras"),
        ("Euler a", "Automatic", "DPM++ 2M", None), ("Euler", "Automatic", "Euler Karras", None)]]
    for params in cases:
        written = {key: value for key, value in hires_sampler_infotext(params).items() if value is not None}
        sampler, schedule = hires_sampler_from_infotext(written)
        pasted = replace(params, hr_sampler=sampler, hr_schedule_type=schedule)
        ran, again = resolve_sampler(*hires_sampler_names(params)), resolve_sampler(*hires_sampler_names(pasted))
        assert (ran[0].name, ran[1]) == (again[0].name, again[1]), params


def test_the_hires_samplers_own_eta_is_written_under_its_kinds_key(hires):
    ddim = hires(**{**BASE, "sampler": "Euler a", "eta": 0.5}, hr_sampler="DDIM", hr_eta=0.25)
    # A1111's DDIM writes `Eta DDIM` when it starts, next to the first pass's `Eta` (Euler a's)
    assert parse_infotext(ddim.infotexts[0], defaults=False)["Eta"] == "0.5"
    assert parse_infotext(ddim.infotexts[0], defaults=False)["Eta DDIM"] == "0.25"
    assert ddim.infotexts[0].split("\n")[1].split(", Model hash: ")[0] == (
        "Steps: 3, Sampler: Euler a, Schedule type: Uniform, CFG scale: 7, Seed: 21, Size: 32x32")
    assert ddim.infotexts[0].split("\n")[1].split(", Version: ")[0].endswith(
        "Denoising strength: 0.6, Eta: 0.5, RNG: CPU, Hires upscale: 2, Hires steps: 3, Hires upscaler: Latent, "
        "Hires sampler: DDIM, Eta DDIM: 0.25")
    # the same kind: the hires sampler's value replaces the first pass's, as A1111's second write does
    same_kind = parse_infotext(hires(**{**BASE, "sampler": "Euler a", "eta": 0.5}, hr_sampler="DPM2 a",
                                     hr_eta=0.75).infotexts[0], defaults=False)
    assert same_kind["Eta"] == "0.75"
    # at the hires sampler's default nothing is written for it: the first pass's value stays
    default = parse_infotext(hires(**{**BASE, "sampler": "Euler a", "eta": 0.5}, hr_sampler="DDIM",
                                   hr_eta=0.0).infotexts[0], defaults=False)
    assert (default["Eta"], "Eta DDIM" in default) == ("0.5", False)


def test_settings_eta_gives_a_hires_sampler_its_kinds_eta_unless_hr_eta_is_set():
    from pipelines.hires_sampler import SettingsEta, hires_eta

    settings = SettingsEta(ancestral=0.75, ddim=0.25)
    assert hires_eta(HiresParams(sampler="Euler a", eta=0.75, hr_sampler="DDIM", settings_eta=settings)) == 0.25
    assert hires_eta(HiresParams(sampler="DDIM", eta=0.25, hr_sampler="Euler a", settings_eta=settings)) == 0.75
    assert hires_eta(HiresParams(sampler="Euler a", hr_sampler="DPM++ 2M", settings_eta=settings)) is None
    assert hires_eta(HiresParams(sampler="Euler a", eta=0.5, hr_sampler="DDIM", hr_eta=0.1,
                                 settings_eta=settings)) == 0.1
    assert hires_eta(HiresParams(sampler="Euler a", eta=0.5, settings_eta=settings)) == 0.5  # no hires sampler
    assert hires_eta(HiresParams(sampler="Euler a", eta=0.5, hr_sampler="DDIM")) == 0.5  # no Settings: p.eta
    with pytest.raises(ValueError, match=r"SettingsEta.ddim \(A1111's eta_ddim\) must be a number in \[0, 1\]"):
        SettingsEta(ddim=1.5)


@pytest.mark.parametrize("change, message", [
    (dict(hr_sampler="Eular"), "Eular.*Euler a"),  # the registry's list of valid names
    (dict(hr_schedule_type="Karas"), "Karas"),
    (dict(hr_sampler="DDIM", hr_eta=2.0), r"eta must be a number in \[0, 1\]"),
    (dict(hr_sampler="DPM++ 2M Karras", hr_schedule_type="Exponential"), "already implies schedule type"),
    (dict(hr_sampler=3), "hr_sampler must be a sampler name"),
    (dict(hr_sampler="DDIM", settings_eta=(0.5, 0.5)), "settings_eta must be a SettingsEta"),
])
def test_bad_hires_samplers_are_refused_before_any_pass(hires, change, message, monkeypatch):
    fail_if_called(monkeypatch, hires.model.unet)
    with pytest.raises((TypeError, ValueError), match=message):
        hires(**BASE, **change)
