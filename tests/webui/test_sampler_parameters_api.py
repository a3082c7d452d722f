"""A1111's Sampler parameters over the HTTP API: Settings (`/sdapi/v1/options`), `override_settings`, the
request's `s_churn` / `s_tmin` / `s_tmax` / `s_noise` fields and an `infotext`'s keys ("Sigma churn",
"Schedule rho" ...), in that order of precedence; bad values refused naming the setting.

A1111 1.10 reference: `shared_options.py` options s_churn, s_tmin, s_tmax, s_noise, sigma_min, sigma_max, rho,
always_discard_next_to_last_sigma (infotext keys "Sigma churn", ..., "Schedule rho", "Discard penultimate sigma");
`Api.apply_infotext` turns an infotext's keys into override_settings.
"""

from __future__ import annotations

import base64
import io
import json

import pytest
from PIL import Image

from pipelines.params import GenerationLimits
from pipelines.sampler_parameters import SamplerParameters
from webui.api_convert import to_txt2img_params
from webui.api_infotext import apply_infotext
from webui.api_requests import Txt2ImgRequest

BASE = ("a red circle\nSteps: 4, Sampler: {sampler}, Schedule type: {schedule}, CFG scale: 7, Seed: 1, Size: 64x64, "
        "RNG: CPU")


def _parameters(body: dict, settings: dict | None = None) -> SamplerParameters:
    request = apply_infotext(Txt2ImgRequest(**body))
    params = to_txt2img_params(request, limits=GenerationLimits(), lora_names=None,
                               sampler_options=settings)
    return params.sampler_parameters


def test_the_requests_churn_fields_reach_the_pipeline():
    got = _parameters({"sampler_name": "Euler", "s_churn": 0.5, "s_tmin": 0.1, "s_tmax": 10, "s_noise": 1.01})
    assert got == SamplerParameters(s_churn=0.5, s_tmin=0.1, s_tmax=10.0, s_noise=1.01)


def test_override_settings_take_every_sampler_parameter():
    overrides = {"sigma_min": 0.1, "sigma_max": 10, "rho": 5, "always_discard_next_to_last_sigma": True, "s_churn": 1}
    got = _parameters({"sampler_name": "Euler", "override_settings": overrides})
    assert got == SamplerParameters(sigma_min=0.1, sigma_max=10.0, rho=5.0, always_discard_next_to_last_sigma=True,
                                    s_churn=1.0)


@pytest.mark.parametrize("keys, expected", [
    ("Sigma churn: 0.5, Sigma tmin: 0.2, Sigma tmax: 8, Sigma noise: 0.99",
     SamplerParameters(s_churn=0.5, s_tmin=0.2, s_tmax=8.0, s_noise=0.99)),
    ("Schedule min sigma: 0.1, Schedule max sigma: 10, Schedule rho: 5",
     SamplerParameters(sigma_min=0.1, sigma_max=10.0, rho=5.0)),
    ("Discard penultimate sigma: True", SamplerParameters(always_discard_next_to_last_sigma=True)),
    ("Noise Schedule: Zero Terminal SNR, Downcast alphas_cumprod: True, Pad conds: True, Pad conds v0: True",
     SamplerParameters(sd_noise_schedule="Zero Terminal SNR", use_downcasted_alpha_bar=True, pad_cond_uncond=True,
                       pad_cond_uncond_v0=True)),
    ("UniPC variant: bh2, UniPC skip type: logSNR, UniPC order: 2, UniPC lower order final: False",
     SamplerParameters(uni_pc_variant="bh2", uni_pc_skip_type="logSNR", uni_pc_order=2,
                       uni_pc_lower_order_final=False)),
    ("Beta schedule alpha: 0.3, Beta schedule beta: 0.8", SamplerParameters(beta_dist_alpha=0.3, beta_dist_beta=0.8)),
    ("Beta scheduler alpha: 0.3", SamplerParameters(beta_dist_alpha=0.3)),  # the option's own infotext name
])
def test_an_infotexts_keys_become_the_settings(keys, expected):
    assert _parameters({"infotext": BASE.format(sampler="Euler", schedule="Karras") + ", " + keys}) == expected


def test_settings_then_override_settings_then_the_request_field():
    settings = {"s_churn": 0.2, "s_noise": 0.95, "rho": 3.0}
    assert _parameters({"sampler_name": "Euler"}, settings) == SamplerParameters(s_churn=0.2, s_noise=0.95, rho=3.0)
    overridden = _parameters({"sampler_name": "Euler", "override_settings": {"s_churn": 0.4}}, settings)
    assert overridden == SamplerParameters(s_churn=0.4, s_noise=0.95, rho=3.0)
    field = _parameters({"sampler_name": "Euler", "override_settings": {"s_churn": 0.4}, "s_churn": 0.6}, settings)
    assert field.s_churn == 0.6
    # the request's own field wins over its infotext, as every field does
    text = BASE.format(sampler="Euler", schedule="Karras") + ", Sigma churn: 0.5"
    assert _parameters({"infotext": text, "s_churn": 0.7}).s_churn == 0.7


@pytest.mark.parametrize("body, message", [
    ({"s_churn": -1}, r"s_churn must be a number in \[0, 100\]"),
    ({"override_settings": {"rho": -2}}, r"rho must be a number in \[0, 100\]"),
    ({"override_settings": {"sigma_min": 5, "sigma_max": 1}}, r"sigma_min \(5\) must be below sigma_max \(1\)"),
    ({"infotext": BASE.format(sampler="Euler", schedule="Karras") + ", Sigma churn: lots"},
     r"s_churn must be a number, got 'lots'"),
    ({"sampler_name": "LCM", "override_settings": {"always_discard_next_to_last_sigma": True}},
     r"LCM and schedule type 'Automatic'"),
    ({"override_settings": {"sd_noise_schedule": "zero"}}, r"sd_noise_schedule must be one of 'Default'"),
    ({"override_settings": {"uni_pc_order": 0}}, r"uni_pc_order must be a whole number in \[1, 50\]"),
    ({"infotext": BASE.format(sampler="UniPC", schedule="Automatic") + ", UniPC order: x"},
     r"uni_pc_order must be a whole number, got 'x'"),
])
def test_bad_values_are_refused_naming_the_setting(body, message):
    with pytest.raises(ValueError, match=message):
        _parameters({"sampler_name": "Euler", **body})


# --- over HTTP


def test_over_http_the_field_the_infotext_and_the_setting_give_one_image(client):
    small = {"prompt": "a red circle", "steps": 4, "width": 64, "height": 64, "seed": 3, "sampler_name": "Euler",
             "scheduler": "Karras"}
    plain = client.post("/sdapi/v1/txt2img", json=small)
    field = client.post("/sdapi/v1/txt2img", json={**small, "s_churn": 1.5})
    assert plain.status_code == field.status_code == 200
    assert field.json()["images"] != plain.json()["images"]
    info = field.json()["info"]
    assert "Sigma churn: 1.5" in info
    text = BASE.format(sampler="Euler", schedule="Karras").replace("Seed: 1", "Seed: 3") + ", Sigma churn: 1.5"
    pasted = client.post("/sdapi/v1/txt2img", json={"infotext": text})
    assert pasted.status_code == 200 and pasted.json()["images"] == field.json()["images"]
    assert client.post("/sdapi/v1/options", json={"s_churn": 1.5}).status_code == 200
    try:
        setting = client.post("/sdapi/v1/txt2img", json=small)
        assert setting.json()["images"] == field.json()["images"]
    finally:
        assert client.post("/sdapi/v1/options", json={"s_churn": 0.0}).status_code == 200
    refused = client.post("/sdapi/v1/options", json={"s_churn": -1})
    assert refused.status_code in (400, 422) and "s_churn" in refused.text


HUGE = 1e30  # a value a careless or hostile client sends: beyond it, churn and noise overflow to NaN images


@pytest.mark.parametrize("path, body, fragment", [
    ("/sdapi/v1/txt2img", {"s_churn": HUGE}, "s_churn must be a number in [0, 100]"),
    ("/sdapi/v1/txt2img", {"s_noise": 1.2}, "s_noise must be a number in [0, 1.1]"),
    ("/sdapi/v1/txt2img", {"s_tmin": HUGE}, "s_tmin must be a number in [0, 10]"),
    ("/sdapi/v1/txt2img", {"s_tmax": 1000}, "s_tmax must be a number in [0, 999]"),
    ("/sdapi/v1/txt2img", {"eta": HUGE}, "eta must be a number in [0, 1]"),
    ("/sdapi/v1/txt2img", {"override_settings": {"rho": HUGE}}, "rho must be a number in [0, 100]"),
    ("/sdapi/v1/txt2img", {"override_settings": {"sigma_max": HUGE}}, "sigma_max must be a number in [0, 5000]"),
    ("/sdapi/v1/txt2img", {"override_settings": {"beta_dist_alpha": 50}}, "beta_dist_alpha must be a number in [0.01, 1]"),
    ("/sdapi/v1/txt2img", {"override_settings": {"uni_pc_order": 10**9}}, "uni_pc_order must be a whole number in [1, 50]"),
    ("/sdapi/v1/img2img", {"initial_noise_multiplier": HUGE}, "initial_noise_multiplier must be a number in [0, 1.5]"),
    ("/sdapi/v1/img2img", {"override_settings": {"img2img_extra_noise": 2}},
     "img2img_extra_noise must be a number in [0, 1]"),
])
def test_over_http_values_beyond_a1111s_ranges_are_a_422_naming_value_and_range(client, path, body, fragment):
    small = {"prompt": "a red circle", "steps": 2, "width": 64, "height": 64, "sampler_name": "Euler"}
    if path.endswith("img2img"):
        buffer = io.BytesIO()
        Image.new("RGB", (64, 64), "red").save(buffer, format="PNG")
        small["init_images"] = [base64.b64encode(buffer.getvalue()).decode()]
    response = client.post(path, json={**small, **body})
    assert response.status_code == 422, response.text
    assert fragment in response.text


@pytest.mark.parametrize("option, value, fragment", [
    ("s_churn", HUGE, "s_churn must be a number in [0, 100]"),
    ("s_noise", 5, "s_noise must be a number in [0, 1.1]"),
    ("initial_noise_multiplier", HUGE, "initial_noise_multiplier must be a number in [0, 1.5]"),
])
def test_options_beyond_a1111s_ranges_are_refused_and_change_nothing(client, option, value, fragment):
    before = client.get("/sdapi/v1/options").json()[option]
    refused = client.post("/sdapi/v1/options", json={option: value})
    assert refused.status_code == 422 and fragment in refused.text
    assert client.get("/sdapi/v1/options").json()[option] == before


@pytest.mark.parametrize("sampler, overrides, written", [
    ("Euler", {"sd_noise_schedule": "Zero Terminal SNR"}, "Noise Schedule: Zero Terminal SNR"),
    ("UniPC", {"uni_pc_variant": "bh2", "uni_pc_order": 2}, "UniPC variant: bh2, UniPC order: 2"),
])
def test_over_http_an_override_is_written_and_its_infotext_gives_the_same_image(client, sampler, overrides, written):
    small = {"prompt": "a red circle", "steps": 4, "width": 64, "height": 64, "seed": 3, "sampler_name": sampler}
    plain = client.post("/sdapi/v1/txt2img", json=small)
    changed = client.post("/sdapi/v1/txt2img", json={**small, "override_settings": overrides})
    assert plain.status_code == changed.status_code == 200
    assert changed.json()["images"] != plain.json()["images"]
    info = changed.json()["info"]
    assert written in info
    infotext = json.loads(info)["infotexts"][0]
    pasted = client.post("/sdapi/v1/txt2img", json={"infotext": infotext})
    assert pasted.status_code == 200 and pasted.json()["images"] == changed.json()["images"]


def test_hires_fix_refuses_extra_noise_its_pass_would_not_add():
    with pytest.raises(ValueError, match=r"img2img_extra_noise=0\.2 .* hires-fix pass"):
        _parameters({"sampler_name": "Euler", "enable_hr": True, "hr_scale": 2, "denoising_strength": 0.5,
                     "override_settings": {"img2img_extra_noise": 0.2}})


def test_the_settings_tab_applies_the_sampler_parameters(tmp_path):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui
    from webui.ui.sampler_parameter_settings import CHECKBOXES, RADIOS, SLIDERS, WHOLE_SLIDERS

    from .ui_blocks import handler

    (tmp_path / "models").mkdir()
    state = ServerState(ServerConfig(models_dir=str(tmp_path / "models"), output_dir=str(tmp_path / "out")))
    form = [*SLIDERS, *WHOLE_SLIDERS, *RADIOS, *CHECKBOXES]  # the handler's inputs, in order
    try:
        apply = handler(build_ui(state), "settings_apply_sampler_parameters", "click")
        values = {"sigma_min": 0.1, "sigma_max": 10.0, "rho": 5.0, "s_churn": 0.5, "s_tmin": 0.0, "s_tmax": 0.0,
                  "s_noise": 1.0, "initial_noise_multiplier": 0.9, "img2img_extra_noise": 0.1,
                  "beta_dist_alpha": 0.4, "beta_dist_beta": 0.6, "uni_pc_order": 2, "uni_pc_variant": "bh2",
                  "uni_pc_skip_type": "logSNR", "sd_noise_schedule": "Zero Terminal SNR",
                  "always_discard_next_to_last_sigma": True, "sgm_noise_multiplier": False,
                  "uni_pc_lower_order_final": False, "pad_cond_uncond": True, "pad_cond_uncond_v0": False,
                  "use_downcasted_alpha_bar": True, "inpainting_mask_weight": 0.4,
                  "hires_fix_refiner_pass": "both passes", "refiner_switch_by_sample_steps": True,
                  "use_old_scheduling": True, "tiling": True, "token_merging_ratio_hr": 0.25}
        assert set(values) == set(form)
        apply.fn(*(values[key] for key in form))
        assert {key: state.options.get(key) for key in values} == values
        assert state.options.sampler_params("Euler")["sampler_parameters"] == SamplerParameters(
            sigma_min=0.1, sigma_max=10.0, rho=5.0, s_churn=0.5, always_discard_next_to_last_sigma=True,
            beta_dist_alpha=0.4, uni_pc_order=2, uni_pc_variant="bh2", uni_pc_skip_type="logSNR",
            sd_noise_schedule="Zero Terminal SNR", uni_pc_lower_order_final=False, pad_cond_uncond=True,
            use_downcasted_alpha_bar=True)
        assert state.options.sampler_params("Euler")["inpainting_mask_weight"] == 0.4
        assert state.options.sampler_params("Euler")["tiling"] is True
        assert state.options.sampler_params("Euler")["refiner_switch_by_sample_steps"] is True
        assert state.options.sampler_params("Euler")["use_old_scheduling"] is True
        with pytest.raises(Exception, match=r"token_merging_ratio_hr .*ToMe ratio must be a number in \[0, 0.75\]"):
            apply.fn(*({**values, "token_merging_ratio_hr": 0.9}[key] for key in form))
        with pytest.raises(Exception, match="hires_fix_refiner_pass must be one of"):
            apply.fn(*({**values, "hires_fix_refiner_pass": "third pass"}[key] for key in form))
        with pytest.raises(Exception, match="sigma_min"):
            apply.fn(*({**values, "sigma_min": 20.0, "sigma_max": 10.0}[key] for key in form))
    finally:
        state.close()
