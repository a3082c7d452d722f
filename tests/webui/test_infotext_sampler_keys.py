"""A1111's setting infotext keys are never dropped: the API's `infotext` field puts them in `override_settings`, where
they run (Conditional mask weight, Hires refiner, the Sampler parameters), a value that is the default changes nothing,
and the web UI paste names a changed one in a note (they are Settings there).

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
from webui.ui.paste_infotext import infotext_to_form_values

BASE = ("a red circle\nSteps: 4, Sampler: {sampler}, Schedule type: Automatic, CFG scale: 7, Seed: 1, Size: 64x64, "
        "RNG: CPU")

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
    return to_txt2img_params(request, limits=GenerationLimits(), lora_names=None)


def _paste_notes(text: str, sampler: str) -> list[str]:
    _, notes = infotext_to_form_values(text, GenerationLimits(), [sampler], ["Automatic"])
    return notes


def test_hires_refiner_in_an_infotext_runs_and_the_paste_names_it():
    text = BASE.format(sampler="Euler") + ", Denoising strength: 0.5, Hires upscale: 2"
    assert _params({"infotext": text + ", Hires refiner: both passes"}).hires_fix_refiner_pass == "both passes"
    notes = _paste_notes(text + ", Hires refiner: first pass", "Euler")
    assert any(note.startswith("Hires refiner: first pass: ") and "Settings > Sampler parameters" in note
               for note in notes)
    assert not any(note.startswith("Hires refiner") for note in _paste_notes(text + ", Hires refiner: second pass",
                                                                            "Euler"))


def test_a_hires_refiner_value_a1111_lacks_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"hires_fix_refiner_pass must be one of .*got 'last pass'"):
        _params({"infotext": BASE.format(sampler="Euler") + ", Hires refiner: last pass"})


@pytest.mark.parametrize(("sampler", "extra"), AS_RUN)
def test_values_this_server_runs_anyway_are_accepted_and_change_nothing(sampler, extra):
    text = BASE.format(sampler=sampler)
    assert _params({"infotext": f"{text}, {extra}"}) == _params({"infotext": text})
    assert _paste_notes(f"{text}, {extra}", sampler) == _paste_notes(text, sampler)


def test_the_requests_own_override_wins_over_the_infotexts_as_in_a1111():
    text = BASE.format(sampler="Euler") + ", Pad conds: True"
    params = _params({"infotext": text, "override_settings": {"pad_cond_uncond": False}})
    assert params == _params({"infotext": BASE.format(sampler="Euler")})


# --- over HTTP: the 422 a client sees, and an accepted infotext giving the very same image


def test_the_api_answers_422_naming_the_key_and_runs_values_it_has(client):
    text = BASE.format(sampler="Euler")
    refused = client.post("/sdapi/v1/txt2img", json={"infotext": text + ", Hires refiner: last pass"})
    assert refused.status_code == 422 and "hires_fix_refiner_pass" in refused.json()["detail"]
    plain = client.post("/sdapi/v1/txt2img", json={"infotext": text})
    same = client.post("/sdapi/v1/txt2img", json={"infotext": text + ", Sigma churn: 0, SGM noise multiplier: False"})
    assert plain.status_code == same.status_code == 200
    assert same.json()["images"] == plain.json()["images"]
