"""A1111's `randn_source` (RNG source) through the HTTP API: override_settings, /sdapi/v1/options and the infotext."""

from __future__ import annotations

import json

from pipelines.infotext import parse_infotext

SMALL = {"prompt": "a cube", "steps": 2, "width": 64, "height": 64, "sampler_name": "Euler a", "cfg_scale": 5.0,
         "seed": 17}


def _txt2img(client, **body):
    response = client.post("/sdapi/v1/txt2img", json={**SMALL, **body})
    assert response.status_code == 200, response.text
    return response.json()


def _infotext(made) -> str:
    return json.loads(made["info"])["infotexts"][0]


def test_override_settings_nv_draws_nv_noise_and_records_it(client):
    cpu = _txt2img(client)
    nv = _txt2img(client, override_settings={"randn_source": "NV"})
    again = _txt2img(client, override_settings={"randn_source": "NV"})
    assert nv["images"] == again["images"] != cpu["images"]
    assert parse_infotext(_infotext(nv))["RNG"] == "NV" and parse_infotext(_infotext(cpu))["RNG"] == "CPU"


def test_the_options_endpoint_reports_sets_and_restores_the_source(client):
    assert client.get("/sdapi/v1/options").json()["randn_source"] == "CPU"  # mixkit's default; A1111's is GPU
    nv = _txt2img(client, override_settings={"randn_source": "NV"})
    try:
        assert client.post("/sdapi/v1/options", json={"randn_source": "NV"}).status_code == 200
        assert client.get("/sdapi/v1/options").json()["randn_source"] == "NV"
        assert _txt2img(client)["images"] == nv["images"]  # the setting now decides every request's noise
        cpu = _txt2img(client, override_settings={"randn_source": "CPU"})  # and a request's override wins
        assert parse_infotext(_infotext(cpu))["RNG"] == "CPU"
    finally:
        client.post("/sdapi/v1/options", json={"randn_source": "CPU"})
    assert client.get("/sdapi/v1/options").json()["randn_source"] == "CPU"


def test_the_infotext_field_reproduces_an_nv_image(client):
    made = _txt2img(client, override_settings={"randn_source": "NV"})
    pasted = client.post("/sdapi/v1/txt2img", json={"infotext": _infotext(made)})
    assert pasted.status_code == 200, pasted.text
    assert pasted.json()["images"] == made["images"]
    assert parse_infotext(_infotext(pasted.json()))["RNG"] == "NV"


def test_an_infotext_without_rng_leaves_the_servers_source(client):
    made = _txt2img(client)
    text = _infotext(made).replace(", RNG: CPU", "")
    assert "RNG" not in text
    pasted = client.post("/sdapi/v1/txt2img", json={"infotext": text}).json()
    assert pasted["images"] == made["images"]


def test_img2img_takes_the_override_too(client):
    import base64
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), "red").save(buffer, format="PNG")
    image = base64.b64encode(buffer.getvalue()).decode()
    response = client.post("/sdapi/v1/img2img", json={**SMALL, "init_images": [image],
                                                      "override_settings": {"randn_source": "NV"}})
    assert response.status_code == 200, response.text
    assert parse_infotext(_infotext(response.json()))["RNG"] == "NV"


def test_an_unknown_source_is_refused_naming_the_valid_ones(client):
    for send in (lambda: client.post("/sdapi/v1/options", json={"randn_source": "nv"}),
                 lambda: client.post("/sdapi/v1/txt2img",
                                     json={**SMALL, "override_settings": {"randn_source": "XPU"}})):
        response = send()
        assert response.status_code == 422, response.text
        assert "randn_source must be one of 'GPU', 'CPU', 'NV'" in response.text
    assert "did you mean 'NV'?" in client.post("/sdapi/v1/options", json={"randn_source": "nv"}).text
    assert client.get("/sdapi/v1/options").json()["randn_source"] == "CPU"
