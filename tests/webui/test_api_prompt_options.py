"""A1111's `emphasis` and `comma_padding_backtrack` options over the API: Settings (`/sdapi/v1/options`) then a
request's `override_settings`, as A1111's `override_settings` applies any option for one request."""

import pytest

from pipelines.params import GenerationLimits
from webui.api_convert import to_txt2img_params
from webui.api_requests import Txt2ImgRequest
from webui.options import ServerOptions


def params(prompt_options=None, **fields):
    return to_txt2img_params(Txt2ImgRequest(prompt="a (b:1.2)", **fields), limits=GenerationLimits(), lora_names=None,
                             prompt_options=prompt_options)


def test_defaults_settings_and_overrides():
    assert (params().emphasis, params().comma_padding_backtrack) == ("Original", 20)
    assert params({"emphasis": "No norm", "comma_padding_backtrack": 5}).emphasis == "No norm"
    chosen = params({"emphasis": "No norm"}, override_settings={"emphasis": "Ignore", "comma_padding_backtrack": 0})
    assert (chosen.emphasis, chosen.comma_padding_backtrack) == ("Ignore", 0)


@pytest.mark.parametrize("overrides, message", [
    ({"emphasis": "Loud"}, "Unknown emphasis mode 'Loud'"),
    ({"comma_padding_backtrack": 80}, "comma_padding_backtrack must be an int in 0..74"),
])
def test_bad_override_values_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        params(override_settings=overrides)


def test_the_settings_hold_and_check_them(tmp_path):
    options = ServerOptions(str(tmp_path), 0)
    # A1111's defaults: Emphasis mode Original, Prompt word wrap length limit 20, Clip skip SDXL off
    assert options.prompt_options() == {"emphasis": "Original", "comma_padding_backtrack": 20, "sdxl_clip_l_skip": False}
    assert options.check_update({"emphasis": "no norm"}) == {"emphasis": "No norm"}
    with pytest.raises(ValueError, match="comma_padding_backtrack"):
        options.check_update({"comma_padding_backtrack": True})
    with pytest.raises(ValueError, match="sdxl_clip_l_skip must be true or false"):
        options.check_update({"sdxl_clip_l_skip": 1})


def test_a_pasted_emphasis_goes_to_override_settings():
    from webui.api_infotext import apply_infotext

    text = "a (b:1.2)\nSteps: 2, Sampler: Euler, CFG scale: 5, Seed: 1, Size: 64x64, Emphasis: No norm"
    request = apply_infotext(Txt2ImgRequest(infotext=text))
    assert request.override_settings["emphasis"] == "No norm"
    chosen = to_txt2img_params(request, limits=GenerationLimits(), lora_names=None)
    assert chosen.emphasis == "No norm"
