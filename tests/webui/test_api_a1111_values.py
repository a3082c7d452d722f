"""Values A1111's clients send that mean "off" or "the same", and what A1111 answers with: accepted, and answered
in A1111's own terms (found by driving the server with webuiapi and curl as a client would)."""

from __future__ import annotations

import re

import pytest

from pipelines.params import GenerationLimits
from webui.api_convert import to_txt2img_params
from webui.api_response import generation_info
from webui.api_requests import Txt2ImgRequest
from webui.options import ServerOptions

SMALL = dict(steps=4, width=64, height=64, seed=1)


def _params(**fields):
    return to_txt2img_params(Txt2ImgRequest(**{**SMALL, **fields}), limits=GenerationLimits(), lora_names={"shiny"})


def test_disable_extra_networks_takes_the_tags_out_and_applies_nothing():
    assert _params(prompt="a cat <lora:shiny:1>").prompt == "a cat <lora:shiny:1>"  # applied by the pipeline
    assert _params(prompt="a cat <lora:shiny:1>", disable_extra_networks=True).prompt == "a cat "
    # An unknown name is no error when nothing will be applied.
    assert _params(prompt="a cat <lora:nope:1>", disable_extra_networks=True).prompt == "a cat "


def test_hires_fields_at_a1111s_same_as_first_pass_values_are_accepted():
    same = dict(enable_hr=True, hr_scale=2.0, hr_sampler_name="Use same sampler", hr_scheduler="Use same scheduler",
                hr_checkpoint_name="Use same checkpoint", prompt="a cat", hr_prompt="a cat", negative_prompt="dog",
                hr_negative_prompt="dog")
    assert _params(**same).hr_scale == 2.0
    with pytest.raises(ValueError, match="Not supported by this server: hr_checkpoint_name="):
        _params(**{**same, "hr_checkpoint_name": "other"})
    assert _params(**{**same, "hr_sampler_name": "DPM++ 2M"}).hr_sampler == "DPM++ 2M"  # A1111's hires sampler, run
    assert _params(**{**same, "hr_prompt": "a dog"}).hr_prompt == "a dog"  # A1111's hires prompt, now run


def test_null_script_fields_mean_none():
    assert _params(alwayson_scripts=None, script_args=None).steps == 4


def test_the_info_json_names_the_sampler_schedule_and_vae_as_the_infotext_does():
    class Result:
        images, seeds, infotexts, interrupted = [object()], [1], ["x"], False

    for sampler, scheduler in (("k_dpmpp_2m", None), ("DPM++ 2M Karras", None), ("DPM++ 2M", "karras")):
        params = _params(sampler_name=sampler, **({"scheduler": scheduler} if scheduler else {}))
        info = generation_info(params, Result(), model_name="m", model_hash=None, job_timestamp="t",
                               vae_name="tinyvae", vae_hash="abcd")
        assert (info["sampler_name"], info["scheduler"]) == ("DPM++ 2M", "Karras"), sampler
        assert (info["sd_vae_name"], info["sd_vae_hash"]) == ("tinyvae", "abcd")


def test_options_posted_back_whole_keep_their_read_only_keys(tmp_path):
    options = ServerOptions(str(tmp_path / "out"), 5)
    snapshot = options.snapshot("mixkit-tiny-sd")
    changed = {**snapshot, "CLIP_stop_at_last_layers": 2}  # GET, change one key, POST everything back
    assert options.check_update(changed)["CLIP_stop_at_last_layers"] == 2
    assert "samples_format" not in options.check_update(changed)
    with pytest.raises(ValueError, match="Option 'samples_format' cannot be set over the API \\(fixed on this server"):
        options.check_update({"samples_format": "jpg"})


def test_errors_name_the_fields_as_the_request_does():
    with pytest.raises(ValueError, match=r"^n_iter must be") as error:
        _params(n_iter=0)
    assert "batch_count" not in str(error.value)
    with pytest.raises(ValueError, match=r"CLIP_stop_at_last_layers \(clip skip\) must be"):
        _params(override_settings={"CLIP_stop_at_last_layers": 40})


def test_info_says_whether_the_model_took_inpainting_conditioning():
    # A1111's Processed.is_using_inpainting_conditioning: true for an inpainting (9-channel) model, txt2img included
    from pipelines.generation import GenerationResult

    params = _params()
    for flag in (True, False):
        result = GenerationResult(images=[object()], seeds=[1], infotexts=["x"], inpainting_conditioning=flag)
        info = generation_info(params, result, model_name="m", model_hash=None, job_timestamp="t")
        assert info["is_using_inpainting_conditioning"] is flag


def test_the_inpainting_mask_weight_comes_from_settings_override_or_infotext():
    # A1111's Settings > img2img "Inpainting conditioning mask strength"; its infotext key "Conditional mask weight"
    from webui.api_infotext import apply_infotext

    assert _params().inpainting_mask_weight == 1.0
    assert _params(override_settings={"inpainting_mask_weight": 0.5}).inpainting_mask_weight == 0.5
    options = ServerOptions("out", 0)
    options.apply(options.check_update({"inpainting_mask_weight": 0.25}))
    settings = dict(sampler_options=options.sampler_options())
    assert to_txt2img_params(Txt2ImgRequest(**SMALL), limits=GenerationLimits(), lora_names=None,
                             **settings).inpainting_mask_weight == 0.25
    pasted = apply_infotext(Txt2ImgRequest(infotext="a cat\nSteps: 4, Sampler: Euler, Conditional mask weight: 0.3"))
    assert to_txt2img_params(pasted, limits=GenerationLimits(), lora_names=None).inpainting_mask_weight == 0.3
    with pytest.raises(ValueError, match=r"inpainting_mask_weight must be a number in \[0, 1\]"):
        _params(override_settings={"inpainting_mask_weight": 1.5})
    with pytest.raises(ValueError, match=r"inpainting_mask_weight must be a number in \[0, 1\]"):
        options.check_update({"inpainting_mask_weight": -1})

@pytest.mark.parametrize("scripts", [
    # A1111's ScriptBuiltinUI scripts: its API skips their setup (setup_for_ui_only), so their args change nothing
    {"Refiner": {"args": [False, "", 0.8]}}, {"Seed": {"args": [-1, False, -1, 0, 0, 0]}},
    {"Sampler": {"args": [20, "Euler a", "Automatic"]}}, {"refiner": {"args": [True, "other", 0.5]}},
    {"Soft Inpainting": {"args": [False]}}, {"soft inpainting": {"args": []}}, {"Extra options": {"args": []}},
    {"hypertile": {"args": []}}, {"Comments": {"args": []}},
])
def test_a1111_builtin_always_on_scripts_asking_for_nothing_are_accepted(scripts):
    params = _params(alwayson_scripts=scripts, sampler_name="Euler")
    assert (params.steps, params.seed, params.sampler, params.refiner) == (4, 1, "Euler", None)


@pytest.mark.parametrize("scripts, fragment", [
    ({"Soft Inpainting": {"args": [True, 1, 0.5, 4, 0, 0.5, 2]}}, "alwayson_scripts.'Soft Inpainting' switched on"),
    ({"ADetailer": {"args": []}}, "alwayson_scripts.'ADetailer' (not a script of this server)"),
    ({"Seed": [1, 2]}, "alwayson_scripts.'Seed' (its value must be"),
])
def test_always_on_scripts_this_server_cannot_run_are_refused_by_name(scripts, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        _params(alwayson_scripts=scripts)
