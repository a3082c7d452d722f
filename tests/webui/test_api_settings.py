"""Settings over `/sdapi/v1/options` on a live server: sampler defaults for omitted fields, the performance preset."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
from PIL import Image

PROMPT = {"prompt": "a cube", "seed": 5}


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("settings")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False,
                              settings_file=str(root / "config.json"))) as running:
        yield running


def generate(client, **fields) -> tuple[np.ndarray, dict]:
    response = client.post("/sdapi/v1/txt2img", json={**PROMPT, **fields})
    assert response.status_code == 200, response.text
    body = response.json()
    image = Image.open(io.BytesIO(base64.b64decode(body["images"][0])))
    return np.asarray(image.convert("RGB"), dtype=np.int16), json.loads(body["info"])


def test_omitted_fields_take_settings_defaults_and_explicit_ones_win(client, server):
    options = client.get("/sdapi/v1/options").json()
    assert (options["default_steps"], options["default_sampler_name"], options["performance_preset"]) == (20, "DPM++ 2M", "exact")
    changes = {"default_sampler_name": "LMS", "default_scheduler": "Karras", "default_steps": 2,
               "default_cfg_scale": 3.5, "default_width": 64, "default_height": 48}
    assert client.post("/sdapi/v1/options", json=changes).status_code == 200
    assert {k: client.get("/sdapi/v1/options").json()[k] for k in changes} == changes
    saved = json.loads((server.state.output_dir.parent / "config.json").read_text())
    assert {k: saved[k] for k in changes} == changes

    image, info = generate(client)
    assert image.shape == (48, 64, 3)
    assert (info["sampler_name"], info["scheduler"], info["steps"], info["cfg_scale"]) == ("LMS", "Karras", 2, 3.5)
    assert "Steps: 2, Sampler: LMS, Schedule type: Karras, CFG scale: 3.5" in info["infotexts"][0]

    # Sent explicitly, even A1111's own default values win over Settings.
    image, info = generate(client, steps=1, sampler_name="Euler", scheduler="Automatic", cfg_scale=7.0, width=64, height=64)
    assert image.shape == (64, 64, 3) and (info["sampler_name"], info["steps"], info["cfg_scale"]) == ("Euler", 1, 7.0)


@pytest.mark.parametrize("changes, fragment", [
    ({"default_steps": 0}, "steps must be"),
    ({"default_sampler_name": "Nope"}, "is not a sampler name"),
    ({"default_width": 65}, "multiple of 8"),
    ({"performance_preset": "turbo"}, "performance_preset must be one of ['exact', 'fast', 'low-memory']"),
    ({"control_net_unit_count": 9}, "control_net_unit_count must be an integer in [1, 4]"),
    ({"s_min_uncond": -0.5}, "s_min_uncond (NGMS) must be a sigma in [0, 15.0]"),
    ({"skip_early_cond": 1.5}, "skip_early_cond must be a fraction of the steps in [0, 1]"),
    ({"s_min_uncond_all": 1}, "s_min_uncond_all (NGMS all steps) must be True or False"),
])
def test_bad_settings_are_refused_and_change_nothing(client, changes, fragment):
    before = client.get("/sdapi/v1/options").json()
    response = client.post("/sdapi/v1/options", json=changes)
    assert response.status_code == 422 and fragment in response.json()["detail"]
    assert client.get("/sdapi/v1/options").json() == before


@pytest.mark.parametrize("body, fragment", [
    ('{"s_tmax": Infinity}', "Option 's_tmax' is inf, which is not a JSON number; send a finite number (0 means infinity)."),
    ('{"sigma_max": NaN}', "Option 'sigma_max' is nan, which is not a JSON number"),
    ('{"default_cfg_scale": -Infinity}', "Option 'default_cfg_scale' is -inf"),
])
def test_a_non_finite_setting_is_refused_and_the_options_stay_readable(client, body, fragment):
    # s_tmax took Infinity (its Python value for "no limit"): every GET /options after it was a 500
    before = client.get("/sdapi/v1/options").json()
    response = client.post("/sdapi/v1/options", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422 and fragment in response.json()["detail"]
    after = client.get("/sdapi/v1/options")
    assert after.status_code == 200 and after.json() == before


def test_ngms_and_skip_early_cfg_come_from_settings_overrides_and_the_request_field(client):
    options = client.get("/sdapi/v1/options").json()
    assert (options["s_min_uncond"], options["s_min_uncond_all"], options["skip_early_cond"]) == (0.0, False, 0.0)
    small = {"steps": 2, "sampler_name": "Euler", "width": 64, "height": 64}
    try:
        assert client.post("/sdapi/v1/options", json={"s_min_uncond": 15.0, "s_min_uncond_all": True}).status_code == 200
        _, info = generate(client, **small)
        assert "NGMS: 15, NGMS all steps: True" in info["infotexts"][0]
        _, info = generate(client, s_min_uncond=2.5, **small)  # the request field wins over Settings
        assert "NGMS: 2.5, NGMS all steps: True" in info["infotexts"][0]
        _, info = generate(client, s_min_uncond=0.0, **small)  # 0 turns it off; "all steps" alone does nothing
        assert "NGMS" not in info["infotexts"][0]
        _, info = generate(client, override_settings={"skip_early_cond": 0.5, "s_min_uncond_all": False}, **small)
        assert "Skip Early CFG: 0.5, NGMS: 15," in info["infotexts"][0] and "all steps" not in info["infotexts"][0]
    finally:
        client.post("/sdapi/v1/options", json={"s_min_uncond": 0.0, "s_min_uncond_all": False, "skip_early_cond": 0.0})
    _, info = generate(client, **small)
    assert "NGMS" not in info["infotexts"][0] and "Skip Early CFG" not in info["infotexts"][0]


@pytest.mark.parametrize("fields, fragment", [
    ({"s_min_uncond": -1}, "s_min_uncond (NGMS) must be a sigma in [0, 15.0]"),
    ({"s_min_uncond": 99.0}, "s_min_uncond (NGMS) must be a sigma in [0, 15.0]"),
    ({"override_settings": {"skip_early_cond": 2}}, "skip_early_cond must be a fraction"),
    ({"override_settings": {"s_min_uncond_all": "yes"}, "s_min_uncond": 1.0}, "s_min_uncond_all"),
])
def test_bad_ngms_in_a_request_is_refused_by_name(client, fields, fragment):
    response = client.post("/sdapi/v1/txt2img", json={**PROMPT, "steps": 1, **fields})
    assert response.status_code == 422 and fragment in response.json()["detail"]


def test_preset_switch_reloads_the_model_and_back_to_exact_is_bit_identical(client, server):
    state = server.state
    small = {"steps": 2, "sampler_name": "Euler", "width": 64, "height": 64}
    exact_image, _ = generate(client, **small)
    exact_model = state.holder.txt2img().model
    assert client.post("/sdapi/v1/options", json={"performance_preset": "low-memory"}).status_code == 200
    pipe = state.holder.txt2img()
    assert pipe.model is not exact_model and pipe.optimization.preset == "low-memory"
    assert "attention slicing" in pipe.optimization.applied
    assert client.get("/sdapi/v1/options").json()["performance_preset"] == "low-memory"
    assert json.loads((state.output_dir.parent / "config.json").read_text())["performance_preset"] == "low-memory"
    sliced_image, _ = generate(client, **small)
    assert np.abs(sliced_image - exact_image).max() <= 2  # same fp32 math, sliced: equal up to rounding

    assert client.post("/sdapi/v1/options", json={"performance_preset": "exact"}).status_code == 200
    assert state.preset == "exact" and not hasattr(state.holder.txt2img(), "optimization")
    back_image, _ = generate(client, **small)
    assert np.array_equal(back_image, exact_image)


def test_a_preset_that_fails_to_apply_keeps_the_old_model(client, server, monkeypatch):
    state = server.state
    model = state.holder.txt2img().model

    def failing(pipe, preset):
        raise RuntimeError("no such kernel")

    monkeypatch.setattr(state.holder, "_optimizer", failing)
    response = client.post("/sdapi/v1/options", json={"performance_preset": "fast", "default_steps": 3})
    assert response.status_code == 422
    assert "no such kernel" in response.json()["detail"] and "still serving" in response.json()["detail"]
    assert state.holder.txt2img().model is model and state.preset == "exact"
    options = client.get("/sdapi/v1/options").json()
    assert options["performance_preset"] == "exact" and options["default_steps"] != 3  # the whole body was refused
