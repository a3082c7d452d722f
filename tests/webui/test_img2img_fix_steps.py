"""A1111's `img2img_fix_steps` ("With img2img, do exactly the amount of steps the slider specifies") is a setting
(/sdapi/v1/options, the settings file) and an override_settings key, and becomes img2img's `exact_steps`.

A1111 reference: `shared_options.py`, section img2img: `"img2img_fix_steps": OptionInfo(False, "With img2img, do
exactly the amount of steps the slider specifies.")`; `sd_samplers_common.setup_img2img_steps` reads it: with it,
`steps = int(requested / min(denoising_strength, 0.999))` and `t_enc = requested - 1`, otherwise `t_enc =
int(min(denoising_strength, 0.999) * steps)`. Hires fix always passes `steps` itself (`sample_hr_pass`), so it runs
exact steps whatever the setting.
"""

from __future__ import annotations

import json

import pytest
from PIL import Image

from pipelines.hires import HiresParams
from pipelines.img2img import img2img_steps
from pipelines.params import GenerationLimits
from webui.api_convert import RequestLimits, to_img2img_params, to_txt2img_params
from webui.api_requests import Img2ImgRequest, Txt2ImgRequest
from webui.base64_images import encode_png_base64
from webui.options import ServerOptions


def _picture() -> str:
    picture = Image.new("RGB", (64, 64), (30, 60, 200))
    picture.paste((240, 200, 20), (8, 8, 40, 40))
    return encode_png_base64(picture)


def _img2img(sampler_options=None, **fields):
    request = Img2ImgRequest(init_images=[_picture()], width=64, height=64, steps=10, denoising_strength=0.5, **fields)
    return to_img2img_params(request, limits=GenerationLimits(), request_limits=RequestLimits(), lora_names=None,
                             sampler_options=sampler_options)


def test_the_setting_is_off_by_default_as_in_a1111(tmp_path):
    options = ServerOptions(str(tmp_path), 0)
    assert options.snapshot(None)["img2img_fix_steps"] is False
    assert _img2img(options.sampler_options()).exact_steps is False
    assert _img2img().exact_steps is False


def test_the_setting_and_override_settings_turn_exact_steps_on_and_the_override_wins(tmp_path):
    options = ServerOptions(str(tmp_path), 0)
    options.apply(options.check_update({"img2img_fix_steps": True}))
    assert _img2img(options.sampler_options()).exact_steps is True
    assert _img2img(options.sampler_options(), override_settings={"img2img_fix_steps": False}).exact_steps is False
    assert _img2img(override_settings={"img2img_fix_steps": True}).exact_steps is True
    # What the flag then runs, A1111's formula: 10 steps at 0.5 -> all 10 over a 20-step schedule, not 6 of 10.
    assert img2img_steps(10, 0.5, True) == (20, 10) and img2img_steps(10, 0.5, False) == (10, 6)


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_value_that_is_not_a_boolean_is_refused_naming_the_key(tmp_path, value):
    with pytest.raises(ValueError, match="img2img_fix_steps must be true or false"):
        ServerOptions(str(tmp_path), 0).check_update({"img2img_fix_steps": value})
    if value is not None:  # a null override is no override
        with pytest.raises(ValueError, match="img2img_fix_steps must be true or false"):
            _img2img(override_settings={"img2img_fix_steps": value})


def test_the_setting_is_saved_and_read_back(tmp_path):
    path = str(tmp_path / "settings.json")
    options = ServerOptions(str(tmp_path), 0, settings_file=path)
    options.apply(options.check_update({"img2img_fix_steps": True}))
    assert ServerOptions(str(tmp_path), 0, settings_file=path).get("img2img_fix_steps") is True


def test_hires_fix_accepts_the_override_and_ignores_it():
    hires = to_txt2img_params(Txt2ImgRequest(enable_hr=True, steps=4, width=64, height=64, denoising_strength=0.5,
                                             override_settings={"img2img_fix_steps": False}),
                              limits=GenerationLimits(), lora_names=None)
    assert isinstance(hires, HiresParams) and not hasattr(hires, "exact_steps")  # its second pass is always exact


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("img2img_fix_steps")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False)) as running:
        yield running


def test_over_http_the_option_is_listed_settable_and_applied(client):
    assert client.get("/sdapi/v1/options").json()["img2img_fix_steps"] is False
    body = {"init_images": [_picture()], "prompt": "a box", "steps": 3, "seed": 5, "width": 64, "height": 64,
            "sampler_name": "Euler", "denoising_strength": 0.5}

    def image(**extra) -> str:
        response = client.post("/sdapi/v1/img2img", json={**body, **extra})
        assert response.status_code == 200, response.text
        assert json.loads(response.json()["info"])["infotexts"][0]  # generated
        return response.json()["images"][0]

    plain = image()
    exact = image(override_settings={"img2img_fix_steps": True})
    assert exact != plain  # 3 steps over a 6-step schedule, not 2 of 3
    assert client.post("/sdapi/v1/options", json={"img2img_fix_steps": True}).status_code == 200
    try:
        assert client.get("/sdapi/v1/options").json()["img2img_fix_steps"] is True
        assert image() == exact
    finally:
        assert client.post("/sdapi/v1/options", json={"img2img_fix_steps": False}).status_code == 200
