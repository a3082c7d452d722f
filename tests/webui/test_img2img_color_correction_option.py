"""A1111's `img2img_color_correction` ("Apply color correction to img2img results to match original colors") is a
setting (/sdapi/v1/options, the settings file, Settings in the UI) and an override_settings key, and becomes img2img's
`color_correction` (pipelines/color_correction.py); Loopback then matches every loop to the first init image.

A1111 reference: `shared_options.py`, section img2img: `"img2img_color_correction": OptionInfo(False, "Apply color
correction to img2img results to match original colors.")`, read in `StableDiffusionProcessingImg2Img.init` and in
scripts/loopback.py.
"""

from __future__ import annotations

import pytest
from PIL import Image

from pipelines.params import GenerationLimits
from webui.api_convert import RequestLimits, to_img2img_params
from webui.api_requests import Img2ImgRequest
from webui.base64_images import encode_png_base64
from webui.options import ServerOptions

KEY = "img2img_color_correction"


def _picture() -> str:
    picture = Image.new("RGB", (64, 64), (200, 120, 30))
    picture.paste((40, 90, 220), (8, 8, 40, 40))
    return encode_png_base64(picture)


def _img2img(sampler_options=None, **fields):
    request = Img2ImgRequest(init_images=[_picture()], width=64, height=64, steps=3, denoising_strength=0.5, **fields)
    return to_img2img_params(request, limits=GenerationLimits(), request_limits=RequestLimits(), lora_names=None,
                             sampler_options=sampler_options)


def test_the_setting_is_off_by_default_as_in_a1111(tmp_path):
    options = ServerOptions(str(tmp_path), 0)
    assert options.snapshot(None)[KEY] is False
    assert _img2img(options.sampler_options()).color_correction is False
    assert _img2img().color_correction is False


def test_the_setting_and_override_settings_turn_it_on_and_the_override_wins(tmp_path):
    options = ServerOptions(str(tmp_path), 0)
    options.apply(options.check_update({KEY: True}))
    assert _img2img(options.sampler_options()).color_correction is True
    assert _img2img(options.sampler_options(), override_settings={KEY: False}).color_correction is False
    assert _img2img(override_settings={KEY: True}).color_correction is True
    # A1111's Settings > Saving "Save a copy of image before applying color correction to img2img results"
    assert _img2img().save_images_before_color_correction is False
    before = _img2img(override_settings={KEY: True, "save_images_before_color_correction": True})
    assert before.save_images_before_color_correction is True


@pytest.mark.parametrize("key", [KEY, "save_images_before_color_correction"])
@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_value_that_is_not_a_boolean_is_refused_naming_the_key(tmp_path, key, value):
    with pytest.raises(ValueError, match=f"{key} must be true or false"):
        ServerOptions(str(tmp_path), 0).check_update({key: value})
    if value is not None:  # a null override is no override
        with pytest.raises(ValueError, match=f"{key} must be true or false"):
            _img2img(override_settings={key: value})


def test_the_setting_is_saved_and_read_back(tmp_path):
    path = str(tmp_path / "settings.json")
    options = ServerOptions(str(tmp_path), 0, settings_file=path)
    options.apply(options.check_update({KEY: True}))
    assert ServerOptions(str(tmp_path), 0, settings_file=path).get(KEY) is True


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("img2img_color_correction")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False)) as running:
        yield running


def _pixels(data: str) -> bytes:
    import base64
    import io

    with Image.open(io.BytesIO(base64.b64decode(data))) as image:
        return image.convert("RGB").tobytes()


BODY = {"prompt": "a box", "steps": 3, "seed": 5, "width": 64, "height": 64, "sampler_name": "Euler",
        "denoising_strength": 0.6}


def test_over_http_the_option_is_listed_settable_and_applied(client):
    assert client.get("/sdapi/v1/options").json()[KEY] is False

    def images(**extra) -> list[str]:
        response = client.post("/sdapi/v1/img2img", json={**BODY, "init_images": [_picture()], **extra})
        assert response.status_code == 200, response.text
        return response.json()["images"]

    plain = images()
    corrected = images(override_settings={KEY: True})
    assert corrected != plain
    assert client.post("/sdapi/v1/options", json={KEY: True}).status_code == 200
    try:
        assert client.get("/sdapi/v1/options").json()[KEY] is True
        assert images() == corrected
        # Loopback re-applies it at every loop: its loops differ from the uncorrected ones
        loops = images(script_name="Loopback", script_args=[2, 0.5, "Linear", "None"])
        plain_loops = images(script_name="Loopback", script_args=[2, 0.5, "Linear", "None"],
                             override_settings={KEY: False})
        assert len(loops) == len(plain_loops) == 3 and loops[1:] != plain_loops[1:]
        # the first loop is the plain call matched to the same (64x64, so unresized) init image; only its infotext
        # (Loopback's keys) differs
        assert _pixels(loops[1]) == _pixels(corrected[0])
    finally:
        assert client.post("/sdapi/v1/options", json={KEY: False}).status_code == 200
