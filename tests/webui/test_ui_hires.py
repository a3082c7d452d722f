"""Hires. fix controls of the txt2img tab: same conversion and checks as the API, and a real two-pass run."""

from __future__ import annotations

import pytest

from pipelines.params import GenerationLimits, Txt2ImgParams
from webui.api_convert import to_txt2img_params
from webui.api_requests import Txt2ImgRequest
from webui.ui.hires_controls import HIRES_FIELDS, hires_upscaler_names, with_hires

LIMITS = GenerationLimits(max_side=1024, max_steps=77)
BASE = Txt2ImgParams(prompt="a cube", steps=1, width=32, height=32, seed=5, sampler="Euler")


def form(**changes) -> list:
    values = {"enable_hr": True, "hr_upscaler": "Latent", "hr_scale": 2.0, "hr_second_pass_steps": 0.0,
              "hr_resize_x": 0.0, "hr_resize_y": 0.0, "denoising_strength": 0.7, "hr_prompt": "",
              "hr_negative_prompt": "", "hr_sampler_name": "Use same sampler", "hr_scheduler": "Use same scheduler",
              **changes}
    return [values[name] for name in HIRES_FIELDS]


def default_settings_eta(sampler: str):
    """The Settings eta a hires sampler gets at the default Settings (the API's without Settings), as generate_tab
    passes `hires_eta` from its Settings."""
    from webui.options import sampler_option_params

    return sampler_option_params(sampler, {})["eta"]


def test_hires_off_keeps_the_params():
    assert with_hires(BASE, form(enable_hr=False), LIMITS) is BASE


def test_hires_form_equals_the_api_conversion():
    ui = with_hires(BASE, form(hr_upscaler="Lanczos", hr_scale=1.5, hr_second_pass_steps=3.0, denoising_strength=0.4),
                    LIMITS, hires_eta=default_settings_eta)
    api = to_txt2img_params(Txt2ImgRequest(prompt="a cube", steps=1, width=32, height=32, seed=5, sampler_name="Euler",
                                           enable_hr=True, hr_upscaler="Lanczos", hr_scale=1.5, hr_second_pass_steps=3,
                                           denoising_strength=0.4), limits=LIMITS, lora_names=None)
    assert ui == api
    assert (ui.hr_upscaler, ui.hr_scale, ui.hr_second_pass_steps, ui.denoising_strength) == ("Lanczos", 1.5, 3, 0.4)
    assert isinstance(ui.hr_second_pass_steps, int)
    assert hires_upscaler_names()[0] == "Latent" and "Lanczos" in hires_upscaler_names()


@pytest.mark.parametrize("changes, fragment", [({"hr_scale": 9.0}, "hr_scale"), ({"hr_upscaler": "ESRGAN"}, "ESRGAN"),
                                               ({"hr_second_pass_steps": 78.0}, "hr_second_pass_steps"),
                                               ({"hr_resize_x": 4096.0}, "target size 4096x4096"),
                                               ({"hr_sampler_name": "Eular"}, "hr_sampler_name='Eular'")])
def test_hires_form_errors_name_the_field(changes, fragment):
    with pytest.raises(ValueError, match=fragment):
        with_hires(BASE, form(**changes), LIMITS)


def test_hires_from_the_form_runs_two_passes_at_the_target_size(tiny_sd1_dir, tmp_path):
    from webui.config import ServerConfig
    from webui.server_state import ServerState

    state = ServerState(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path / "out"), ui=False))
    try:
        state.load_initial_model()
        params = with_hires(BASE, form(hr_resize_x=48.0), LIMITS)
        state.check_params("txt2img", params)
        outcome = state.submit_generation("txt2img", params, save=False).future.result(120)
    finally:
        state.close()
    image = outcome.result.images[0]
    assert image.size == (48, 48)
    assert "Hires resize: 48x0" in outcome.result.infotexts[0] and "Size: 32x32" in outcome.result.infotexts[0]


def test_a_clip_skip_beyond_the_loaded_models_layers_is_refused_before_queueing(tiny_sd1_dir, tmp_path):
    # The UI slider goes to 12; the tiny text encoder has fewer layers, and the job used to fail in the queue.
    from dataclasses import replace

    from webui.config import ServerConfig
    from webui.server_state import ServerState

    state = ServerState(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path / "out"), ui=False))
    try:
        state.load_initial_model()
        layers = state.holder.txt2img().model.text_encoders[0].config.num_hidden_layers
        state.check_params("txt2img", replace(BASE, clip_skip=layers))
        with pytest.raises(ValueError, match=f"clip_skip {layers + 1} is more than .* layers \\({layers}\\)"):
            state.check_params("txt2img", replace(BASE, clip_skip=layers + 1))
    finally:
        state.close()


def parsed(**keys) -> dict:
    from pipelines.infotext import build_infotext, parse_infotext

    return parse_infotext(build_infotext("a cube", "", {"Steps": 20, "Sampler": "Euler", "Seed": 1, "Size": "64x64", **keys}))


def test_an_infotexts_hires_recipe_fills_the_controls():
    from webui.ui.hires_controls import infotext_hires_values

    values, notes = infotext_hires_values(parsed(**{"Denoising strength": 0.45, "Hires upscale": 1.5, "Hires steps": 10,
                                                    "Hires upscaler": "Latent"}), LIMITS, hires_upscaler_names())
    assert values == {"enable_hr": True, "hr_scale": 1.5, "hr_second_pass_steps": 10, "hr_resize_x": 0, "hr_resize_y": 0,
                      "hr_upscaler": "Latent", "hr_prompt": "", "hr_negative_prompt": "",
                      "hr_sampler_name": "Use same sampler", "hr_scheduler": "Use same scheduler"} and notes == []
    assert set(values) <= set(HIRES_FIELDS)
    values, notes = infotext_hires_values(parsed(**{"Denoising strength": 0.3, "Hires resize": "640x0",
                                                    "Hires upscaler": "SwinIR_4x"}), LIMITS, hires_upscaler_names())
    assert values == {"enable_hr": True, "hr_second_pass_steps": 0, "hr_resize_x": 640, "hr_resize_y": 0, "hr_prompt": "",
                      "hr_negative_prompt": "", "hr_sampler_name": "Use same sampler",
                      "hr_scheduler": "Use same scheduler"}
    assert len(notes) == 1 and notes[0].startswith("Hires upscaler 'SwinIR_4x' is not available here")


def test_an_infotexts_other_a1111_upscaler_name_selects_the_entry_it_stands_for(tmp_path):
    # A1111 lists a DAT download as "DAT x2" and as "DAT_x2"; an infotext naming either selects the one dropdown entry
    from mixkit.testing.tiny_upscalers import TINY_DAT, save_upscaler, tiny_upscaler
    from pipelines.model_upscale import register_model_upscalers
    from pipelines.upscale import UPSCALERS
    from webui.ui.hires_controls import infotext_hires_values

    save_upscaler(tiny_upscaler(TINY_DAT), tmp_path / "DAT_x2.pth", "dat")
    register_model_upscalers(tmp_path)
    try:
        for named in ("DAT_x2", "DAT x2"):
            values, notes = infotext_hires_values(parsed(**{"Denoising strength": 0.3, "Hires upscale": 2,
                                                            "Hires upscaler": named}), LIMITS, hires_upscaler_names())
            assert values["hr_upscaler"] == "DAT x2" and notes == []
        assert "DAT_x2" not in hires_upscaler_names()  # the dropdown offers the entry once
    finally:
        UPSCALERS.unregister("DAT x2")


def test_an_infotext_without_a_hires_recipe_unticks_hires_fix():
    # A1111 (modules/ui.py, txt2img_paste_fields): PasteField(enable_hr, lambda d: "Denoising strength" in d and
    # ("Hires upscale" in d or "Hires upscaler" in d or "Hires resize-1" in d)): False without a recipe, so
    # Generate makes the pasted image, not an upscaled one.
    from webui.ui.hires_controls import infotext_hires_values

    off = {"enable_hr": False, "hr_prompt": "", "hr_negative_prompt": ""}  # A1111 fills "" for missing hires prompts
    assert infotext_hires_values(parsed(**{"Denoising strength": 0.45}), LIMITS, hires_upscaler_names()) == (off, [])
    assert infotext_hires_values(parsed(), LIMITS, hires_upscaler_names()) == (off, [])
    values, notes = infotext_hires_values(parsed(**{"Hires upscale": 2}), LIMITS, hires_upscaler_names())
    assert values == off and "no Denoising strength" in notes[0]
    values, notes = infotext_hires_values(parsed(**{"Denoising strength": 0.5, "Hires upscale": 20, "Hires steps": 78,
                                                    "Hires sampler": "Hoon"}), LIMITS, hires_upscaler_names())
    assert values == {"enable_hr": True, "hr_resize_x": 0, "hr_resize_y": 0, "hr_prompt": "", "hr_negative_prompt": ""}
    assert [n.split(":")[0] for n in notes] == ["Hires sampler", "Hires upscale", "Hires steps"]


@pytest.mark.parametrize("keys, dropdowns", [
    ({}, ("Use same sampler", "Use same scheduler")),  # A1111's defaults for missing keys
    ({"Hires sampler": "Heun"}, ("Heun", "Use same scheduler")),
    ({"Hires sampler": "k_dpmpp_2m"}, ("DPM++ 2M", "Use same scheduler")),  # an alias selects its sampler
    ({"Hires sampler": "DPM++ 2M Karras"}, ("DPM++ 2M", "Karras")),  # a pre-1.9 name fills both
    ({"Hires schedule type": "karras"}, ("Use same sampler", "Karras")),
    ({"Hires sampler": "Euler a", "Hires schedule type": "Uniform"}, ("Euler a", "Uniform")),
])
def test_a_pasted_hires_sampler_and_schedule_fill_their_dropdowns(keys, dropdowns):
    from webui.ui.hires_controls import infotext_hires_values

    base = {"Sampler": "DPM++ 2M", "Schedule type": "Karras", "Denoising strength": 0.5, "Hires upscale": 2}
    values, notes = infotext_hires_values(parsed(**base, **keys), LIMITS, hires_upscaler_names())
    assert (values["hr_sampler_name"], values["hr_scheduler"]) == dropdowns and notes == []


def test_the_hires_dropdowns_translate_as_the_api_does():
    ui = with_hires(BASE, form(hr_sampler_name="DPM++ 2M", hr_scheduler="Exponential"), LIMITS,
                    hires_eta=default_settings_eta)
    api = to_txt2img_params(Txt2ImgRequest(prompt="a cube", steps=1, width=32, height=32, seed=5, sampler_name="Euler",
                                           enable_hr=True, hr_upscaler="Latent", hr_sampler_name="DPM++ 2M",
                                           hr_scheduler="Exponential",
                                           denoising_strength=0.7), limits=LIMITS, lora_names=None)
    assert ui == api and (ui.hr_sampler, ui.hr_schedule_type) == ("DPM++ 2M", "Exponential")
    assert with_hires(BASE, form(hr_sampler_name="Euler"), LIMITS) == with_hires(BASE, form(), LIMITS)
    from webui.ui.hires_controls import hires_sampler_choices

    samplers, schedules = hires_sampler_choices()
    assert (samplers[0], schedules[0]) == ("Use same sampler", "Use same scheduler")
    assert {"Euler", "DPM++ 2M", "DDIM"} <= set(samplers) and {"Karras", "Exponential"} <= set(schedules)


def test_the_hires_panel_has_a1111s_sampler_and_schedule_dropdowns(tmp_path):
    # A1111 1.10 (modules/ui.py): elem_id "hr_sampler" / "hr_scheduler", "Use same ..." first and selected
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui
    from webui.ui.hires_controls import hires_sampler_choices

    from .ui_blocks import component

    (tmp_path / "models").mkdir()
    state = ServerState(ServerConfig(models_dir=str(tmp_path / "models"), output_dir=str(tmp_path / "out")))
    try:
        blocks = build_ui(state)
        samplers, schedules = hires_sampler_choices()
        for elem_id, label, choices in (("hr_sampler", "Hires sampling method", samplers),
                                        ("hr_scheduler", "Hires schedule type", schedules)):
            dropdown = component(blocks, elem_id)
            assert dropdown.label == label and dropdown.value == choices[0]
            assert [choice[0] for choice in dropdown.choices] == choices
    finally:
        state.close()


def test_settings_token_merging_ratio_for_high_res_reaches_the_hires_params(tmp_path):
    """A1111's Settings > Optimizations "Token merging ratio for high-res pass": read by every hires-fix generation of
    the txt2img tab (the API reads it too, then override_settings)."""
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.generate_tab import form_params

    (tmp_path / "models").mkdir()
    state = ServerState(ServerConfig(models_dir=str(tmp_path / "models"), output_dir=str(tmp_path / "out")))
    try:
        main = ["a", "", "Euler", "Automatic", 4, 7, 64, 64, 1, 1, 1, 1]
        hires_on = [True, "Latent", 2, 0, 0, 0, 0.7, "", "", "Use same sampler", "Use same scheduler"]
        refiner_off = [False, "None", 0.8, "None"]
        assert form_params(state, "txt2img", main, [], [*hires_on, *refiner_off]).token_merging_ratio_hr == 0.0
        state.options.apply(state.options.check_update({"token_merging_ratio_hr": 0.5}))
        assert form_params(state, "txt2img", main, [], [*hires_on, *refiner_off]).token_merging_ratio_hr == 0.5
        plain = form_params(state, "txt2img", main, [], [False, *hires_on[1:], *refiner_off])
        assert not hasattr(plain, "token_merging_ratio_hr")  # no hires fix: nothing reads it
        with pytest.raises(ValueError, match=r"token_merging_ratio_hr .*ToMe ratio must be a number in \[0, 0.75\]"):
            state.options.check_update({"token_merging_ratio_hr": 0.8})
    finally:
        state.close()
