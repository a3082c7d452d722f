"""A1111's setting infotext keys this server cannot honour (Conditional mask weight, Hires refiner) are never
dropped: the API's `infotext` field refuses them with a 422
naming the key, as the same settings sent as request fields are refused, and accepts them where the value is what
runs here anyway; the web UI paste names each in a note.

A1111 reference (1.10): `shared_options.py` gives each option its infotext key (`'s_churn': OptionInfo(0.0, ...,
infotext='Sigma churn')`, `'uni_pc_variant': OptionInfo("bh1", ..., infotext='UniPC variant')`, `uni_pc_order` 3,
`uni_pc_lower_order_final` True, `'sgm_noise_multiplier': ... infotext='SGM noise multiplier'`, spelt 'SGM noise
multplier' in 1.6); `Api.apply_infotext` turns such keys into `override_settings` through
`infotext_utils.get_override_settings`. Sigma churn, Schedule rho, Discard penultimate sigma, the UniPC options,
Beta alpha/beta, Noise Schedule, Pad conds and Downcast alphas_cumprod run at any value
(tests/webui/test_sampler_parameters_api.py).
"""

from __future__ import annotations

import pytest

from pipelines.params import GenerationLimits
from webui.api_convert import to_txt2img_params
from webui.api_infotext import apply_infotext
from webui.api_requests import Txt2ImgRequest
from webui.fixed_settings import FIXED_BY_OPTION
from webui.ui.paste_infotext import infotext_to_form_values

BASE = ("a red circle\nSteps: 4, Sampler: {sampler}, Schedule type: Automatic, CFG scale: 7, Seed: 1, Size: 64x64, "
        "RNG: CPU")

# infotext key, a value A1111 writes when the setting is changed: one row per fixed setting (checked below), so a
# setting added to `webui.fixed_settings` without a refusal test fails here.
CHANGED = {
    "hires_fix_refiner_pass": ("Hires refiner", "first pass"),
}
# Values that are what this server runs anyway, so an infotext with them reproduces the image here.
AS_RUN = [
    ("Euler", "Sigma churn: 0, Sigma tmin: 0, Sigma tmax: 0, Sigma noise: 1"),
    ("UniPC", "UniPC variant: bh1, UniPC skip type: time_uniform, UniPC order: 3, UniPC lower order final: True"),
    ("Euler", "Discard penultimate sigma: False, SGM noise multiplier: False, SGM noise multplier: False"),
    ("Euler", "Schedule rho: 0, Schedule max sigma: 0, Schedule min sigma: 0, Noise Schedule: Default"),
    ("Euler", "Beta schedule alpha: 0.6, Beta schedule beta: 0.6, Pad conds: False, Downcast alphas_cumprod: False"),
    ("Euler", "Noise multiplier: 1, Extra noise: 0"),
    ("Euler", "Conditional mask weight: 1.0"),  # what every image of an inpainting model records
    ("Euler", "Hires refiner: second pass"),
]


def _params(body: dict):
    request = apply_infotext(Txt2ImgRequest(**body))
    return to_txt2img_params(request, limits=GenerationLimits(), lora_names=None, current_model="mixkit-tiny-sd")


def _paste_notes(text: str, sampler: str) -> list[str]:
    _, notes = infotext_to_form_values(text, GenerationLimits(), [sampler], ["Automatic"])
    return notes


def test_every_fixed_setting_has_a_changed_value_here():
    assert set(CHANGED) == set(FIXED_BY_OPTION)


@pytest.mark.parametrize("option", sorted(CHANGED))
def test_a_changed_sampler_setting_in_an_infotext_is_refused_naming_its_key(option):
    key, value = CHANGED[option]
    with pytest.raises(ValueError) as refused:
        _params({"infotext": BASE.format(sampler="Euler") + f", {key}: {value}"})
    message = str(refused.value)
    assert message.startswith("Not supported by this server: ")
    assert f"{option}={value!r}" in message and repr(key) in message and "remove the key" in message


@pytest.mark.parametrize("option", sorted(CHANGED))
def test_the_web_ui_paste_names_a_changed_sampler_setting_in_a_note(option):
    key, value = CHANGED[option]
    notes = _paste_notes(BASE.format(sampler="Euler") + f", {key}: {value}", "Euler")
    assert len(notes) == 1 and notes[0].startswith(f"{key}: {value}: ") and "the image will differ" in notes[0]


def test_a_fixed_setting_is_refused_while_a_setting_that_runs_is_taken():
    text = BASE.format(sampler="Euler") + ", Conditional mask weight: 0.5, Hires refiner: first pass"
    with pytest.raises(ValueError) as refused:
        _params({"infotext": text})
    assert "infotext key 'Hires refiner'" in str(refused.value) and "Conditional mask weight" not in str(refused.value)
    assert _params({"infotext": BASE.format(sampler="Euler") + ", Conditional mask weight: 0.5"}).inpainting_mask_weight == 0.5
    notes = _paste_notes(text, "Euler")
    assert any(note.startswith("Hires refiner: first pass: ") for note in notes)


@pytest.mark.parametrize(("sampler", "extra"), AS_RUN)
def test_values_this_server_runs_anyway_are_accepted_and_change_nothing(sampler, extra):
    text = BASE.format(sampler=sampler)
    assert _params({"infotext": f"{text}, {extra}"}) == _params({"infotext": text})
    assert _paste_notes(f"{text}, {extra}", sampler) == _paste_notes(text, sampler)


def test_the_requests_own_override_wins_over_the_infotexts_as_in_a1111():
    text = BASE.format(sampler="Euler") + ", Pad conds: True"
    params = _params({"infotext": text, "override_settings": {"pad_cond_uncond": False}})
    assert params == _params({"infotext": BASE.format(sampler="Euler")})


def test_override_settings_take_the_same_values_with_the_same_answer():
    assert _params({"override_settings": {"hires_fix_refiner_pass": "second pass"}})
    with pytest.raises(ValueError, match=r"hires_fix_refiner_pass='first pass' .*infotext key 'Hires refiner'"):
        _params({"override_settings": {"hires_fix_refiner_pass": "first pass"}})


# --- over HTTP: the 422 a client sees, and an accepted infotext giving the very same image


def test_the_api_answers_422_naming_the_key_and_runs_values_it_has(client):
    text = BASE.format(sampler="Euler")
    refused = client.post("/sdapi/v1/txt2img", json={"infotext": text + ", Hires refiner: first pass"})
    assert refused.status_code == 422 and "'Hires refiner'" in refused.json()["detail"]
    plain = client.post("/sdapi/v1/txt2img", json={"infotext": text})
    same = client.post("/sdapi/v1/txt2img", json={"infotext": text + ", Sigma churn: 0, SGM noise multiplier: False"})
    assert plain.status_code == same.status_code == 200
    assert same.json()["images"] == plain.json()["images"]
