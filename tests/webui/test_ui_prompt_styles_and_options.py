"""The web UI's prompt features the API already had: the Styles multi-select and its 📋 button, Hires prompts,
and the Settings' Emphasis mode / Prompt word wrap length limit. Driven through the built Blocks' own handlers;
images are compared bit for bit with `POST /sdapi/v1/txt2img` on the same server state.

A1111 1.10 references: modules/ui_prompt_styles.py (the "Styles" dropdown; `materialize_styles` writes the styles
into the prompt boxes and returns `gr.update(value=[])` for the dropdown), modules/processing.py (styles merged
into all_prompts and all_hr_prompts before generating), modules/ui.py (`PasteField(hr_prompt, "Hires prompt")`),
modules/infotext_utils.py (a missing "Hires prompt" reads as ""; a missing "Emphasis" as "Original" when the prompt
uses weights), modules/shared_options.py ("Emphasis mode", "Prompt word wrap length limit" 0..74, default 20).
"""

from __future__ import annotations

import base64
import io
import json
from types import SimpleNamespace

import gradio as gr
import httpx
import pytest
from PIL import Image

from pipelines.infotext import build_infotext
from pipelines.params import GenerationLimits

from .ui_blocks import component, handler, model_less_ui

LIMITS = GenerationLimits(max_side=256, max_steps=20)
STYLES_CSV = ('name,prompt,negative_prompt\n'
              'Photo,"photo of {prompt}, sharp",blurry\n'
              'Warm,"warm light",\n')
FIRST_PASS = {"prompt": "a cube", "negative_prompt": "ugly", "sampler_name": "Euler", "scheduler": "Automatic",
              "steps": 2, "cfg_scale": 5.0, "width": 64, "height": 64, "seed": 11, "batch_size": 1, "n_iter": 1}


@pytest.fixture(scope="module")
def served(tiny_sd1_dir, tmp_path_factory, serving):
    """(state, blocks, API url): one server state with a tiny model and a styles file, its UI and its HTTP API."""
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-prompt-styles")
    (root / "styles.csv").write_text(STYLES_CSV, encoding="utf-8")
    state = ServerState(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "out"), limits=LIMITS, ui=False,
                                     styles_file=str(root / "styles.csv")))
    with serving(state) as running:
        yield state, build_ui(state), running.url


@pytest.fixture(scope="module")
def without_styles(tmp_path_factory):
    with model_less_ui(tmp_path_factory.mktemp("ui-no-styles")) as built_ui:
        yield built_ui


def form_values(blocks, elem_id: str, **changes) -> list:
    """The inputs of `elem_id`'s click as a fresh page sends them, with `changes` (by elem_id suffix) applied."""
    fn = handler(blocks, elem_id, "click")
    kind = elem_id.split("_", 1)[0]
    values = []
    for block in fn.inputs:
        name = (block.elem_id or "").removeprefix(f"{kind}_")
        values.append(changes.pop(name) if name in changes else block.value)
    assert not changes, f"no such inputs: {changes}"
    return values


def ui_generate(blocks, **changes) -> tuple[Image.Image, str]:
    """Press txt2img's Generate and wait: (first gallery image, its infotext)."""
    fn = handler(blocks, "txt2img_generate", "click")
    updates = list(fn.fn(SimpleNamespace(session_hash="styles-test"), *form_values(blocks, "txt2img_generate", **changes)))
    gallery, infotext = updates[-1][2], updates[-1][3]
    with Image.open(gallery[0][0]) as image:
        return image.convert("RGB"), infotext


def api_generate(url: str, **fields) -> tuple[Image.Image, str]:
    response = httpx.post(url + "/sdapi/v1/txt2img", json={**FIRST_PASS, **fields}, timeout=300)
    assert response.status_code == 200, response.text
    body = response.json()
    with Image.open(io.BytesIO(base64.b64decode(body["images"][0]))) as image:
        return image.convert("RGB"), json.loads(body["info"])["infotexts"][0]


UI_FIRST_PASS = {"prompt": "a cube", "negative_prompt": "ugly", "sampler": "Euler", "schedule_type": "Automatic",
                 "steps": 2, "cfg_scale": 5.0, "width": 64, "height": 64, "seed": 11, "batch_size": 1, "batch_count": 1}


def test_the_styles_dropdown_lists_the_styles_file(served):
    _, blocks, _ = served
    for kind in ("txt2img", "img2img"):
        dropdown = component(blocks, f"{kind}_styles")
        assert dropdown.multiselect and dropdown.label == "Styles" and dropdown.value == []
        assert [choice[0] for choice in dropdown.choices] == ["Photo", "Warm"]  # the file's order, as A1111 lists them
        assert component(blocks, f"{kind}_styles_apply").visible


def test_without_a_styles_file_the_control_says_so(without_styles):
    _, blocks = without_styles
    dropdown = component(blocks, "txt2img_styles")
    assert dropdown.choices == [] and dropdown.interactive is False
    assert dropdown.label == "Styles (this server has no styles file; start it with --styles-file styles.csv)"
    assert component(blocks, "txt2img_styles_apply").visible is False
    with pytest.raises(gr.Error, match="no styles file; start it with --styles-file"):
        list(handler(blocks, "txt2img_generate", "click").fn(
            SimpleNamespace(session_hash="x"), *form_values(blocks, "txt2img_generate", styles=["Photo"])))


def test_the_apply_button_writes_the_styles_into_the_prompts_and_clears_the_choice(served):
    # A1111's materialize_styles: apply_styles_to_prompt / apply_negative_styles_to_prompt, then the dropdown to [].
    # "{prompt}" is replaced by the prompt; a style without it is appended after ", "; an empty one adds nothing.
    _, blocks, _ = served
    apply = handler(blocks, "img2img_styles_apply", "click")
    assert apply.fn("a cube", "ugly", ["Photo", "Warm"]) == ("photo of a cube, sharp, warm light", "ugly, blurry", [])
    assert [block.elem_id for block in apply.outputs] == ["img2img_prompt", "img2img_negative_prompt", "img2img_styles"]
    assert apply.fn("a cube", "", []) == ("a cube", "", [])
    with pytest.raises(gr.Error, match=r"unknown style\(s\) \['Foto'\]"):
        apply.fn("a cube", "", ["Foto"])


def test_the_refresh_button_rereads_the_styles_file(served):
    # A1111's refresh_styles: the dropdown's choices from the file as it is now (a style added while the server runs).
    from pathlib import Path

    state, blocks, _ = served
    path = Path(state.config.styles_file)
    try:
        path.write_text(STYLES_CSV + 'Night,"{prompt} at night",\n', encoding="utf-8")
        update = handler(blocks, "txt2img_styles_refresh", "click").fn()
        assert update.choices == [("Photo", "Photo"), ("Warm", "Warm"), ("Night", "Night")] and update.label == "Styles"
    finally:
        path.write_text(STYLES_CSV, encoding="utf-8")


def test_ui_styles_give_the_apis_image(served):
    _, blocks, url = served
    ui_image, ui_text = ui_generate(blocks, **UI_FIRST_PASS, styles=["Photo", "Warm"])
    api_image, api_text = api_generate(url, styles=["Photo", "Warm"])
    assert ui_text.startswith("photo of a cube, sharp, warm light\nNegative prompt: ugly, blurry\n")
    assert ui_text == api_text and ui_image.tobytes() == api_image.tobytes()
    plain_image, _ = ui_generate(blocks, **UI_FIRST_PASS)
    assert plain_image.tobytes() != ui_image.tobytes()  # the styles did change the image


def test_ui_hires_prompts_give_the_apis_image(served):
    # A1111 styles the hires prompts too (all_hr_prompts); an empty hires negative prompt is the first pass's, styled.
    _, blocks, url = served
    hires = {"enable_hr": True, "hr_upscaler": "Latent", "hr_scale": 1.5, "hires_steps": 2, "hr_denoising": 0.6,
             "hr_prompt": "a red sphere", "hr_negative_prompt": ""}
    ui_image, ui_text = ui_generate(blocks, **UI_FIRST_PASS, **hires, styles=["Photo"])
    api_image, api_text = api_generate(url, enable_hr=True, hr_upscaler="Latent", hr_scale=1.5, hr_second_pass_steps=2,
                                       denoising_strength=0.6, hr_prompt="a red sphere", styles=["Photo"])
    assert ui_image.size == (96, 96) and 'Hires prompt: "photo of a red sphere, sharp"' in ui_text
    assert ui_text == api_text and ui_image.tobytes() == api_image.tobytes()
    same_prompt_image, same_text = ui_generate(blocks, **UI_FIRST_PASS, **{**hires, "hr_prompt": ""}, styles=["Photo"])
    assert "Hires prompt" not in same_text and same_prompt_image.tobytes() != ui_image.tobytes()


def test_the_prompt_options_are_settings(served):
    # A1111: Settings > Stable Diffusion: "Emphasis mode" (Original/No norm/Ignore/None) and "Prompt word wrap length
    # limit" (comma_padding_backtrack, 0..74, default 20).
    state, blocks, _ = served
    emphasis, comma = component(blocks, "settings_emphasis"), component(blocks, "settings_comma_padding_backtrack")
    assert emphasis.choices == [(name, name) for name in ("Original", "No norm", "Ignore", "None")]
    assert (emphasis.value, comma.value, comma.minimum, comma.maximum) == ("Original", 20, 0, 74)
    apply = handler(blocks, "settings_apply", "click")
    inputs = [block.elem_id for block in apply.inputs]
    values = [block.value for block in apply.inputs]
    values[inputs.index("settings_emphasis")] = "No norm"
    values[inputs.index("settings_comma_padding_backtrack")] = 5.0
    values[inputs.index("settings_sdxl_clip_l_skip")] = True  # A1111's "Clip skip SDXL", a checkbox there too
    try:
        assert apply.fn(*values) == "Settings applied."
        assert state.options.prompt_options() == {"emphasis": "No norm", "comma_padding_backtrack": 5,
                                                  "sdxl_clip_l_skip": True}
        values[inputs.index("settings_comma_padding_backtrack")] = 80.0
        with pytest.raises(gr.Error, match="comma_padding_backtrack must be an int in 0..74"):
            apply.fn(*values)
    finally:
        state.options.apply({"emphasis": "Original", "comma_padding_backtrack": 20, "sdxl_clip_l_skip": False})


def test_ui_generations_use_the_prompt_options_as_the_api_does(served):
    # The UI built its params without the Settings' emphasis / comma_padding_backtrack: a UI image ignored them.
    state, blocks, url = served
    state.options.apply({"emphasis": "No norm", "comma_padding_backtrack": 5})
    try:
        ui_image, ui_text = ui_generate(blocks, **{**UI_FIRST_PASS, "prompt": "a (cube:1.2)"})
        api_image, api_text = api_generate(url, prompt="a (cube:1.2)")
    finally:
        state.options.apply({"emphasis": "Original", "comma_padding_backtrack": 20})
    assert "Emphasis: No norm" in ui_text
    assert ui_text == api_text and ui_image.tobytes() == api_image.tobytes()
    original_image, _ = ui_generate(blocks, **{**UI_FIRST_PASS, "prompt": "a (cube:1.2)"})
    assert original_image.tobytes() != ui_image.tobytes()


def png_info_send(blocks, text: str) -> dict:
    fn = handler(blocks, "pnginfo_send_to_txt2img", "click")
    sent = {}
    for block, update in zip(fn.outputs, fn.fn(text, None)):
        if isinstance(update, dict) and update.get("__type__") == "update" and "value" not in update:
            continue
        sent[block.elem_id or type(block).__name__] = update.get("value", update) if isinstance(update, dict) else update
    return sent


def test_png_info_fills_the_hires_prompts(without_styles):
    _, blocks = without_styles
    keys = {"Steps": 20, "Sampler": "Euler", "CFG scale": 7, "Seed": 1, "Size": "64x64", "Denoising strength": 0.5,
            "Hires upscale": 2, "Hires upscaler": "Latent", "Hires prompt": "a dog, detailed",
            "Hires negative prompt": "blurry", "RNG": "CPU"}
    sent = png_info_send(blocks, build_infotext("a cat", "", keys))
    assert (sent["txt2img_hr_prompt"], sent["txt2img_hr_negative_prompt"]) == ("a dog, detailed", "blurry")
    assert sent["pnginfo_notes"] == ""  # no "has no such control" note any more
    del keys["Hires prompt"], keys["Hires negative prompt"]
    sent = png_info_send(blocks, build_infotext("a cat", "", keys))  # A1111 reads missing ones as "": boxes cleared
    assert (sent["txt2img_hr_prompt"], sent["txt2img_hr_negative_prompt"]) == ("", "")


@pytest.mark.parametrize("prompt, emphasis, setting, noted", [
    ("a (cat:1.2)", "No norm", "Original", "Emphasis: No norm"),
    ("a (cat:1.2)", "No norm", "No norm", None),
    ("a (cat:1.2)", None, "Ignore", "Emphasis: Original"),  # A1111 reads a weighted prompt without the key as Original
    ("a cat", None, "Ignore", None),  # no weights: the mode does not matter, A1111 adds no key
])
def test_a_pasted_emphasis_is_noted_when_the_settings_differ(prompt, emphasis, setting, noted):
    from webui.ui.paste_infotext import infotext_to_form_values

    keys = {"Steps": 20, "Sampler": "Euler", "CFG scale": 7, "Seed": 1, "Size": "64x64", "RNG": "CPU"}
    if emphasis:
        keys["Emphasis"] = emphasis
    _, notes = infotext_to_form_values(build_infotext(prompt, "", keys), GenerationLimits(), ["Euler"], ["Automatic"],
                                       current_emphasis=setting)
    if noted is None:
        assert notes == []
    else:
        assert notes == [f"{noted}: the image was encoded with this Emphasis mode, a setting here (Settings > Stable "
                         f"Diffusion: prompt options, now {setting}), not a form field; set it there to reproduce "
                         "the image."]


def img2img_tab_values():
    """The img2img tab's own inputs (`IMG2IMG_FIELDS` order, then the Refiner accordion's, off) for a plain img2img
    of a black 64x64 image."""
    from webui.ui.generate_tab import IMG2IMG_FIELDS

    own = {"editor": {"background": Image.new("RGB", (64, 64)), "layers": [], "composite": None}, "mode": "img2img",
           "resize_mode": "just resize", "denoising_strength": 0.5, "mask_blur": 4, "inpainting_fill": "original",
           "only_masked": False, "only_masked_padding": 32, "mask_mode": "Inpaint masked", "mask_upload": None,
           "outpaint_pixels": 128, "outpaint_fill": "fill", "outpaint_sides": ["left"],
           "outpaint_method": "Poor man's outpainting", "outpaint_falloff": 1.0, "outpaint_color_variation": 0.05,
           "soft_inpainting": False, "si_mask_blend_power": 1, "si_mask_blend_scale": 0.5,
           "si_inpaint_detail_preservation": 4, "si_composite_mask_influence": 0,
           "si_composite_difference_threshold": 0.5, "si_composite_difference_contrast": 2, "image_cfg_scale": 1.5}
    return [own[name] for name in IMG2IMG_FIELDS] + [False, "None", 0.8, None]


def test_img2img_merges_the_styles_too(served):
    from webui.ui.generate_tab import form_params

    state, _, _ = served
    form = ["a cube", "ugly", "Euler", "Automatic", 2, 5.0, 64, 64, 11, 1, 1, 1]
    params = form_params(state, "img2img", form, ["Warm", "Photo"], img2img_tab_values())
    assert (params.prompt, params.negative_prompt) == ("photo of a cube, warm light, sharp", "ugly, blurry")


def test_img2img_takes_exact_steps_from_the_img2img_fix_steps_setting(served):
    # A1111's Settings "With img2img, do exactly the amount of steps the slider specifies" (img2img_fix_steps).
    from webui.ui.generate_tab import form_params

    state, _, _ = served
    form = ["a cube", "", "Euler", "Automatic", 2, 5.0, 64, 64, 11, 1, 1, 1]
    assert form_params(state, "img2img", form, [], img2img_tab_values()).exact_steps is False
    state.options.apply({"img2img_fix_steps": True})
    try:
        assert form_params(state, "img2img", form, [], img2img_tab_values()).exact_steps is True
    finally:
        state.options.apply({"img2img_fix_steps": False})


def test_the_ui_takes_the_sampler_parameters_and_img2img_noise_settings(served):
    # A1111's Settings > Sampler parameters and Settings > img2img noise apply to every UI generation, as to the API.
    from pipelines.sampler_parameters import SamplerParameters
    from webui.ui.generate_tab import form_params

    state, _, _ = served
    form = ["a cube", "", "Euler", "Automatic", 2, 5.0, 64, 64, 11, 1, 1, 1]
    state.options.apply({"s_churn": 0.5, "initial_noise_multiplier": 0.9, "img2img_extra_noise": 0.1})
    try:
        params = form_params(state, "img2img", form, [], img2img_tab_values())
        assert params.sampler_parameters == SamplerParameters(s_churn=0.5)
        assert (params.initial_noise_multiplier, params.img2img_extra_noise) == (0.9, 0.1)
    finally:
        state.options.apply({"s_churn": 0.0, "initial_noise_multiplier": 1.0, "img2img_extra_noise": 0.0})
