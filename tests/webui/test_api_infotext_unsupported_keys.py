"""An infotext posted to the API recording what this server does not run is refused (422), never dropped: A1111's
`Token merging ratio` and mixkit's approximation keys (DeepCache, TAESD decode ...) unless the server's model runs
the same ones."""

from __future__ import annotations

import pytest

from pipelines.approx.labels import OptimizationLabels
from pipelines.params import GenerationLimits
from webui.api_convert import to_txt2img_params
from webui.api_infotext import apply_infotext, check_approximation_keys
from webui.api_requests import Txt2ImgRequest

BASE = "a red circle\nSteps: 2, Sampler: Euler, CFG scale: 7, Seed: 1, Size: 64x64, Model: tiny"


def _convert(request: Txt2ImgRequest):
    return to_txt2img_params(request, limits=GenerationLimits(), lora_names=None)


def _params(text: str, **fields):
    return _convert(apply_infotext(Txt2ImgRequest(infotext=text, **fields)))


@pytest.mark.parametrize("key", ["Token merging ratio: 0.5", "DeepCache: 3", "VAE Decoder: TAESD"])
def test_approximations_the_server_does_not_run_are_refused(key):
    with pytest.raises(ValueError, match=r"server runs the exact model, no approximation, so the image would differ"):
        apply_infotext(Txt2ImgRequest(infotext=f"{BASE}, {key}"))


def test_the_servers_own_approximations_are_accepted():
    running = OptimizationLabels(deepcache=3)
    request = apply_infotext(Txt2ImgRequest(infotext=f"{BASE}, DeepCache: 3"), running_labels=running)
    assert request.steps == 2
    with pytest.raises(ValueError, match="records no approximation, but this server runs DeepCache"):
        check_approximation_keys({"Steps": "2"}, running)


def test_exact_labels_and_a1111s_full_decoder_pass():
    request = apply_infotext(Txt2ImgRequest(infotext=f'{BASE}, VAE Decoder: Full, Optimization: "fast, bf16"'))
    assert request.steps == 2


def test_clip_skip_sdxl_comes_from_settings_then_override_settings():
    """A1111's `sdxl_clip_l_skip` is a Setting (Settings > Stable Diffusion) that override_settings can set."""
    request = Txt2ImgRequest(prompt="a", steps=2)
    assert to_txt2img_params(request, limits=GenerationLimits(), lora_names=None).sdxl_clip_l_skip is False
    from webui.options import PROMPT_OPTION_DEFAULTS

    settings = {**PROMPT_OPTION_DEFAULTS, "sdxl_clip_l_skip": True}
    assert to_txt2img_params(request, limits=GenerationLimits(), lora_names=None,
                             prompt_options=settings).sdxl_clip_l_skip is True
    overridden = Txt2ImgRequest(prompt="a", steps=2, override_settings={"sdxl_clip_l_skip": False})
    assert to_txt2img_params(overridden, limits=GenerationLimits(), lora_names=None,
                             prompt_options=settings).sdxl_clip_l_skip is False
    with pytest.raises((TypeError, ValueError), match="sdxl_clip_l_skip must be True or False"):
        to_txt2img_params(Txt2ImgRequest(prompt="a", override_settings={"sdxl_clip_l_skip": "yes"}),
                          limits=GenerationLimits(), lora_names=None)
