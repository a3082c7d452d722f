"""The img2img tab's Image CFG Scale slider: A1111's range and default, served visible only while an
instruct-pix2pix checkpoint is loaded, read into Img2ImgParams, and filled by a pasted infotext."""

from __future__ import annotations

import pytest

from pipelines.params import GenerationLimits, Txt2ImgParams
from webui.ui.generate_tab import img2img_params
from webui.ui.image_cfg_controls import infotext_image_cfg_values
from webui.ui.paste_infotext import infotext_to_form_values

from .test_ui_inpaint_controls import fields
from .ui_blocks import component, handler, page_props

BASE = Txt2ImgParams(prompt="make it red", steps=1, width=64, height=64, seed=5, sampler="Euler")


@pytest.fixture(scope="module")
def built(request, tmp_path_factory):
    """model folder fixture name -> (blocks, state) of a UI on that model, loaded."""
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    made, states = {}, []

    def build(name: str):
        if name not in made:
            root = tmp_path_factory.mktemp(f"ui-{name}")
            state = ServerState(ServerConfig(models=[str(request.getfixturevalue(name))], output_dir=str(root / "out")))
            state.load_initial_model()
            states.append(state)
            made[name] = build_ui(state), state
        return made[name]

    yield build
    for state in states:
        state.close()


def test_the_slider_has_a1111s_range_and_default_and_shows_for_an_instruct_pix2pix_model(built):
    blocks, _ = built("tiny_ip2p_dir")
    slider = component(blocks, "img2img_image_cfg_scale")
    assert (slider.value, slider.minimum, slider.maximum, slider.step) == (1.5, 0, 3, 0.05)
    assert page_props(blocks, "img2img_image_cfg_scale")["visible"] is True


def test_the_slider_is_hidden_for_a_text_to_image_model(built):
    blocks, _ = built("tiny_sd1_dir")
    assert page_props(blocks, "img2img_image_cfg_scale")["visible"] is False


def test_the_slider_value_reaches_the_params():
    assert img2img_params(BASE, fields(image_cfg_scale=2.25)).image_cfg_scale == 2.25


def test_a_pasted_infotext_fills_the_slider_and_names_a_value_it_cannot_take():
    text = "make it red\nSteps: 4, Sampler: Euler, CFG scale: 7, Image CFG scale: 1.25, Seed: 1, Size: 64x64, RNG: CPU"
    values, notes = infotext_to_form_values(text, GenerationLimits(), ["Euler"], ["Automatic"], inpaint_fields=True)
    assert values["image_cfg_scale"] == 1.25 and notes == []
    assert infotext_image_cfg_values({"Image CFG scale": "7"}) == (
        {}, ["Image CFG scale: '7' is not a number in [0, 3]; kept the current value."])
    assert infotext_image_cfg_values({}) == ({}, [])  # a missing key keeps the slider's value, as A1111's paste


def test_the_paste_button_fills_the_slider_and_a_checkpoint_load_updates_its_visibility(built):
    blocks, state = built("tiny_ip2p_dir")
    slider = component(blocks, "img2img_image_cfg_scale")
    assert any(output._id == slider._id for output in handler(blocks, "img2img_paste", "click").outputs)
    change = handler(blocks, "settings_checkpoint", "change")
    assert [output._id for output in change.outputs] == [slider._id]
    assert change.fn()["visible"] is True
    state.holder.unload()  # no model in memory: nothing says it is instruct-pix2pix
    assert change.fn()["visible"] is False
