"""hr_sampler_name / hr_scheduler over the API: names that resolve to what the first pass runs are "the same" (the
params equal a request without them); others run the hires pass with that sampler / schedule; unknown ones are 422.

A1111 reference (1.10): `processing.StableDiffusionProcessingTxt2Img.sample_hr_pass` runs the hires pass with
`self.hr_sampler_name or self.sampler_name`; `init` writes "Hires sampler" only `if self.hr_sampler_name is not None
and self.hr_sampler_name != self.sampler_name`, and sets `hr_scheduler = scheduler` when it is None;
`sd_samplers_kdiffusion.get_sigmas` takes `(p.hr_scheduler if p.is_hr_pass else p.scheduler) or 'Automatic'` and
reads "Automatic" as the sampler's own default schedule (`self.config.options.get('scheduler')`), so "Automatic" is
the first pass's schedule only when that resolves to the same one.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from pipelines.hires import HiresParams
from pipelines.hires_sampler import SettingsEta, hires_eta
from pipelines.params import GenerationLimits
from webui.api_convert import to_txt2img_params
from webui.api_infotext import apply_infotext
from webui.api_requests import Txt2ImgRequest

HIRES = dict(enable_hr=True, hr_scale=2.0, hr_second_pass_steps=3, denoising_strength=0.5, steps=4, width=64,
             height=64, seed=1)


def _params(**fields):
    request = apply_infotext(Txt2ImgRequest(**{**HIRES, **fields}))
    return to_txt2img_params(request, limits=GenerationLimits(), lora_names=None)


@pytest.mark.parametrize("fields", [
    {"sampler_name": "Euler", "hr_sampler_name": "Euler"},
    {"sampler_name": "Euler", "hr_sampler_name": "k_euler"},  # an alias of the same sampler
    {"sampler_name": "DPM++ 2M", "scheduler": "Karras", "hr_scheduler": "Karras"},
    {"sampler_name": "DPM++ 2M", "hr_scheduler": "Karras"},  # DPM++ 2M's Automatic is Karras
    {"sampler_name": "DPM++ 2M", "scheduler": "Karras", "hr_scheduler": "Automatic"},
    {"hr_scheduler": "Automatic"},  # A1111's API defaults: Euler, Automatic
    {"sampler_name": "DPM++ 2M", "hr_sampler_name": "DPM++ 2M Karras"},  # pre-1.9 name, same sampler and schedule
    {"sampler_name": "DDIM", "hr_scheduler": "Karras"},  # A1111's timestep samplers ignore the schedule type
    {"sampler_name": "Euler", "hr_sampler_name": "Use same sampler", "hr_scheduler": "Use same scheduler"},
], ids=lambda fields: ",".join(f"{k}={v}" for k, v in fields.items()))
def test_hires_sampler_and_schedule_naming_the_first_pass_are_accepted(fields):
    params = _params(**fields)
    first = {k: v for k, v in fields.items() if k in ("sampler_name", "scheduler")}
    assert isinstance(params, HiresParams)
    assert params == _params(**first)  # exactly the run without them


@pytest.mark.parametrize(("fields", "hires"), [
    ({"sampler_name": "Euler", "hr_sampler_name": "DPM++ 2M"}, ("DPM++ 2M", None)),
    ({"sampler_name": "Euler", "hr_scheduler": "Karras"}, (None, "Karras")),
    ({"sampler_name": "DPM++ 2M", "scheduler": "Exponential", "hr_scheduler": "Automatic"}, (None, "Automatic")),
    ({"sampler_name": "DPM++ 2M", "hr_sampler_name": "DPM++ 2M Exponential"}, ("DPM++ 2M Exponential", None)),
    ({"sampler_name": "Euler", "hr_sampler_name": "k_dpmpp_2m", "hr_scheduler": "Use same scheduler"},
     ("k_dpmpp_2m", None)),
    ({"sampler_name": "Euler", "hr_sampler_name": "", "hr_scheduler": "Exponential"}, (None, "Exponential")),
], ids=["other-sampler", "other-schedule", "automatic-is-another-schedule", "old-name-other-schedule", "alias",
        "empty-is-same"])
def test_another_hires_sampler_or_schedule_is_run(fields, hires):
    params = _params(**fields)
    assert (params.hr_sampler, params.hr_schedule_type) == hires
    first = {k: v for k, v in fields.items() if k in ("sampler_name", "scheduler")}
    assert params == replace(_params(**first), hr_sampler=hires[0], hr_schedule_type=hires[1], hr_eta=params.hr_eta)


@pytest.mark.parametrize(("fields", "expected"), [
    ({"hr_scheduler": "Sideways"}, "hr_scheduler='Sideways' (infotext: Hires sampler / Hires schedule type): Unknown "
                                   "schedule type 'Sideways'"),
    ({"hr_sampler_name": "Eular"}, "hr_sampler_name='Eular' (infotext: Hires sampler / Hires schedule type): "),
    ({"hr_sampler_name": "DPM++ 2M Karras", "hr_scheduler": "Exponential"}, "already implies schedule type"),
], ids=["unknown-schedule", "unknown-sampler", "conflicting"])
def test_an_unknown_hires_sampler_or_schedule_is_refused_listing_the_valid_ones(fields, expected):
    with pytest.raises(ValueError) as refused:
        _params(**fields)
    assert expected in str(refused.value) and "'Use same sampler'" in str(refused.value)
    if "Eular" in expected:
        assert "Euler a" in str(refused.value)  # the registry's valid names


def test_the_hires_sampler_takes_its_own_kinds_eta_from_settings_unless_the_request_sends_eta():
    options = {"eta_ddim": 0.25, "eta_ancestral": 0.75}

    def params(**fields):
        return to_txt2img_params(Txt2ImgRequest(**{**HIRES, **fields}), limits=GenerationLimits(), lora_names=None,
                                 sampler_options=options)

    ddim = params(sampler_name="Euler a", hr_sampler_name="DDIM")
    assert (ddim.eta, ddim.hr_eta) == (0.75, 0.25)  # A1111: eta_ancestral for Euler a, eta_ddim for the DDIM pass
    assert hires_eta(ddim) == 0.25
    assert params(sampler_name="Euler a", hr_sampler_name="DPM++ 2M").hr_eta is None  # no eta: DPM++ 2M has none
    sent = params(sampler_name="Euler a", hr_sampler_name="DDIM", eta=0.5)
    assert (sent.eta, sent.hr_eta, hires_eta(sent)) == (0.5, None, 0.5)  # A1111's p.eta holds for both passes
    # both Settings etas travel with the params, for a hires sampler an X/Y/Z cell picks; none when eta was sent
    assert ddim.settings_eta == SettingsEta(ancestral=0.75, ddim=0.25) and sent.settings_eta is None
    overridden = to_txt2img_params(Txt2ImgRequest(**HIRES, sampler_name="Euler a", hr_sampler_name="DDIM",
                                                  override_settings={"eta_ddim": 0.5}),
                                   limits=GenerationLimits(), lora_names=None, sampler_options=options)
    assert (overridden.hr_eta, overridden.settings_eta) == (0.5, SettingsEta(ancestral=0.75, ddim=0.5))


@pytest.mark.parametrize("keys, expected", [
    # one key and no hires sampler: the request's eta (both passes run that sampler)
    ("Sampler: Euler a, Eta: 0.5", dict(eta=0.5, overrides={})),
    # a hires sampler of its own: each written eta is its kind's Settings eta, as A1111's paste reads them
    ("Sampler: Euler a, Eta: 0.5, Hires sampler: DDIM, Eta DDIM: 0.25",
     dict(eta=None, overrides={"eta_ancestral": 0.5, "eta_ddim": 0.25})),
    ("Sampler: Euler a, Eta: 0.5, Hires sampler: DDIM", dict(eta=None, overrides={"eta_ancestral": 0.5})),
])
def test_an_infotexts_eta_keys_are_read_by_kind_when_the_hires_sampler_differs(keys, expected):
    text = ("a cat\nSteps: 4, " + keys + ", CFG scale: 7, Seed: 1, Size: 64x64, Denoising strength: 0.5, "
            "Hires upscale: 2, Hires steps: 3, Hires upscaler: Latent")
    pasted = apply_infotext(Txt2ImgRequest(infotext=text))
    assert (pasted.eta, {k: v for k, v in (pasted.override_settings or {}).items() if k.startswith("eta")}) == (
        expected["eta"], expected["overrides"])
    if expected["eta"] is None:  # what the two passes then run: the first its Eta, the DDIM pass its Eta DDIM
        params = to_txt2img_params(pasted, limits=GenerationLimits(), lora_names=None)
        assert (params.eta, hires_eta(params)) == (0.5, expected["overrides"].get("eta_ddim", 0.0))


def test_an_infotexts_hires_sampler_and_schedule_type_are_read_and_run():
    text = ("a cat\nSteps: 4, Sampler: Euler, Schedule type: Automatic, CFG scale: 7, Seed: 1, Size: 64x64, "
            "Denoising strength: 0.5, Hires upscale: 2, Hires steps: 3, Hires upscaler: Latent")
    pasted = apply_infotext(Txt2ImgRequest(infotext=text + ", Hires sampler: DPM++ 2M, Hires schedule type: Karras"))
    assert (pasted.hr_sampler_name, pasted.hr_scheduler) == ("DPM++ 2M", "Karras")
    params = to_txt2img_params(pasted, limits=GenerationLimits(), lora_names=None)
    assert (params.hr_sampler, params.hr_schedule_type) == ("DPM++ 2M", "Karras")
    same = apply_infotext(Txt2ImgRequest(infotext=text + ", Hires schedule type: Uniform, Hires sampler: Euler"))
    plain = apply_infotext(Txt2ImgRequest(infotext=text))
    assert (to_txt2img_params(same, limits=GenerationLimits(), lora_names=None)
            == to_txt2img_params(plain, limits=GenerationLimits(), lora_names=None))


def test_without_hires_fix_the_hires_fields_are_not_looked_at():
    # A1111 sends its hires fields with every txt2img request, hires fix on or not.
    plain = to_txt2img_params(Txt2ImgRequest(steps=4, width=64, height=64, hr_sampler_name="DPM++ 2M"),
                              limits=GenerationLimits(), lora_names=None)
    assert not isinstance(plain, HiresParams)


def test_over_http_the_hires_sampler_runs_and_is_in_the_infotext_and_an_unknown_one_is_422(client):
    body = {**HIRES, "steps": 2, "hr_second_pass_steps": 2, "width": 32, "height": 32, "sampler_name": "Euler",
            "prompt": "a cat"}
    same = client.post("/sdapi/v1/txt2img", json={**body, "hr_sampler_name": "Use same sampler"})
    own = client.post("/sdapi/v1/txt2img", json={**body, "hr_sampler_name": "DPM++ 2M", "hr_scheduler": "Karras"})
    assert same.status_code == own.status_code == 200
    info = json.loads(own.json()["info"])["infotexts"][0]
    assert "Hires sampler: DPM++ 2M, Hires schedule type: Karras" in info
    assert "Hires sampler" not in json.loads(same.json()["info"])["infotexts"][0]
    assert own.json()["images"][0] != same.json()["images"][0]
    refused = client.post("/sdapi/v1/txt2img", json={**body, "hr_sampler_name": "Eular"})
    assert refused.status_code == 422 and "hr_sampler_name='Eular'" in refused.json()["detail"]
