"""A1111's `token_merging_ratio_hr` over the API: a Setting (`/sdapi/v1/options`), then `override_settings`, where an
infotext's `Token merging ratio hr` goes; the hires pass runs with it and the server's model is left unpatched."""

from __future__ import annotations

import json

import pytest

from pipelines.approx.labels import OptimizationLabels
from pipelines.params import GenerationLimits
from webui.api_convert import to_txt2img_params
from webui.api_infotext import apply_infotext
from webui.api_requests import Txt2ImgRequest

HIRES = dict(enable_hr=True, hr_scale=1.5, hr_second_pass_steps=2, denoising_strength=0.5, steps=2, width=32,
             height=32, seed=1, sampler_name="Euler")
TEXT = ("a red circle\nSteps: 2, Sampler: Euler, CFG scale: 7, Seed: 1, Size: 32x32, Denoising strength: 0.5, "
        "Hires upscale: 1.5, Hires steps: 2, Hires upscaler: Latent")


def _params(request: Txt2ImgRequest, settings: dict | None = None):
    return to_txt2img_params(request, limits=GenerationLimits(), lora_names=None, sampler_options=settings)


def test_the_ratio_comes_from_settings_then_override_settings():
    assert _params(Txt2ImgRequest(**HIRES)).token_merging_ratio_hr == 0.0
    assert _params(Txt2ImgRequest(**HIRES), {"token_merging_ratio_hr": 0.25}).token_merging_ratio_hr == 0.25
    overridden = Txt2ImgRequest(**HIRES, override_settings={"token_merging_ratio_hr": 0.5})
    assert _params(overridden, {"token_merging_ratio_hr": 0.25}).token_merging_ratio_hr == 0.5


@pytest.mark.parametrize("value", [0.8, -1, "half", True])
def test_a_bad_ratio_is_refused_naming_the_option(value):
    with pytest.raises(ValueError, match=r"token_merging_ratio_hr \(Token merging ratio for high-res pass; 0 = the "
                                         r"first pass's\): ToMe ratio must be a number in \[0, 0.75\]"):
        _params(Txt2ImgRequest(**HIRES, override_settings={"token_merging_ratio_hr": value}))


def test_an_infotexts_ratio_goes_to_override_settings_and_is_run():
    pasted = apply_infotext(Txt2ImgRequest(infotext=TEXT + ", Token merging ratio hr: 0.3"))
    assert pasted.override_settings["token_merging_ratio_hr"] == 0.3
    assert _params(pasted).token_merging_ratio_hr == 0.3
    # a request's own override wins, as for every infotext setting
    sent = apply_infotext(Txt2ImgRequest(infotext=TEXT + ", Token merging ratio hr: 0.3",
                                         override_settings={"token_merging_ratio_hr": 0.5}))
    assert _params(sent).token_merging_ratio_hr == 0.5
    # the hires ratio is no approximation the server must already run; the first pass's still is
    with pytest.raises(ValueError, match="records ToMe ratio 0.3, but this server runs the exact model"):
        apply_infotext(Txt2ImgRequest(infotext=TEXT + ", Token merging ratio: 0.3"))
    running = apply_infotext(Txt2ImgRequest(infotext=TEXT + ", Token merging ratio: 0.3, Token merging ratio hr: 0.3"),
                             running_labels=OptimizationLabels(tome=0.3))
    assert running.override_settings["token_merging_ratio_hr"] == 0.3


def test_over_http_the_hires_pass_merges_and_the_model_is_left_unpatched(server, client):
    from pipelines.approx.tome_unet import token_merging_state

    body = {**HIRES, "prompt": "a red circle"}
    plain = client.post("/sdapi/v1/txt2img", json=body)
    merged = client.post("/sdapi/v1/txt2img", json={**body, "override_settings": {"token_merging_ratio_hr": 0.5}})
    assert plain.status_code == merged.status_code == 200
    info = json.loads(merged.json()["info"])["infotexts"][0]
    assert "Token merging ratio hr: 0.5" in info and "Token merging ratio:" not in info
    assert "Token merging ratio" not in json.loads(plain.json()["info"])["infotexts"][0]
    assert merged.json()["images"][0] != plain.json()["images"][0]
    assert token_merging_state(server.state.holder.txt2img().model.unet) is None
    # the Setting, through /sdapi/v1/options, and the infotext pasted back: the same image
    assert client.post("/sdapi/v1/options", json={"token_merging_ratio_hr": 0.5}).status_code == 200
    try:
        assert client.get("/sdapi/v1/options").json()["token_merging_ratio_hr"] == 0.5
        by_setting = client.post("/sdapi/v1/txt2img", json=body)
        assert by_setting.json()["images"][0] == merged.json()["images"][0]
    finally:
        client.post("/sdapi/v1/options", json={"token_merging_ratio_hr": 0})
    pasted = client.post("/sdapi/v1/txt2img", json={"infotext": info, "prompt": "a red circle"})
    assert pasted.status_code == 200, pasted.text
    assert pasted.json()["images"][0] == merged.json()["images"][0]
    refused = client.post("/sdapi/v1/options", json={"token_merging_ratio_hr": 0.9})
    assert refused.status_code == 422 and "token_merging_ratio_hr" in refused.json()["detail"]
