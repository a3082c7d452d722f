"""Pasting an infotext's `Script` and X/Y/Z keys into the Script dropdown and the plot's axis controls, as A1111's
paste fields do (webui/ui/paste_script_values.py, through the ↙️ paste button of webui/ui/send_to.py)."""

from __future__ import annotations

import pytest

from pipelines.infotext import parse_infotext
from webui.ui.paste_script_values import infotext_script_values

from .test_ui_send_to import outputs_by_id
from .ui_blocks import handler, model_less_ui

TITLES = ["Prompt matrix", "X/Y/Z plot"]
LABELS = ["Nothing", "Seed", "Steps", "CFG Scale", "Sampler"]
PLOT = ('a red cat\nSteps: 20, Sampler: Euler, CFG scale: 7, Seed: 5, Size: 64x64, Script: X/Y/Z plot, '
        'X Type: Steps, X Values: "10,20", Y Type: Sampler, Y Values: "Euler a,DPM++ 2M"')


def test_an_xyz_infotext_fills_the_script_and_its_axes():
    values, notes = infotext_script_values(parse_infotext(PLOT), TITLES, LABELS)
    assert values == {"script": "X/Y/Z plot", "xyz_x_type": "Steps", "xyz_x_values": "10,20",
                      "xyz_y_type": "Sampler", "xyz_y_values": "Euler a,DPM++ 2M", "xyz_z_type": "Nothing",
                      "xyz_z_values": ""} and notes == []


def test_a_plain_infotext_sets_the_script_back_to_none_as_a1111s():
    plain = "a red cat\nSteps: 20, Sampler: Euler, CFG scale: 7, Seed: 5, Size: 64x64"
    assert infotext_script_values(parse_infotext(plain), TITLES, LABELS) == ({"script": "None"}, [])


@pytest.mark.parametrize("text, values, note", [
    ("x\nSteps: 2, Seed: 1, Script: Loopback", {}, "Script 'Loopback' is not offered here"),
    ("x\nSteps: 2, Script: x/y/z PLOT, X Type: VAE, X Values: a", {"script": "X/Y/Z plot", "xyz_y_type": "Nothing",
                                                                   "xyz_y_values": "", "xyz_z_type": "Nothing",
                                                                   "xyz_z_values": ""},
     "X Type 'VAE' is not an X/Y/Z axis this server plots; the X axis is left as it is."),
])
def test_what_the_tab_lacks_is_named_and_left_alone(text, values, note):
    got, notes = infotext_script_values(parse_infotext(text), TITLES, LABELS)
    assert got == values and len(notes) == 1 and note in notes[0]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    with model_less_ui(tmp_path_factory.mktemp("ui-paste-scripts")) as built_ui:
        yield built_ui


def test_the_paste_button_fills_the_script_dropdown_and_the_axes(built):
    _, blocks = built
    fn = handler(blocks, "txt2img_paste", "click")
    sent = outputs_by_id(fn, fn.fn(PLOT, []))
    assert sent["txt2img_script"] == "X/Y/Z plot" and sent["txt2img_steps"] == 20
    assert (sent["txt2img_xyz_x_type"], sent["txt2img_xyz_x_values"]) == ("Steps", "10,20")
    assert (sent["txt2img_xyz_y_type"], sent["txt2img_xyz_y_values"]) == ("Sampler", "Euler a,DPM++ 2M")
    assert (sent["txt2img_xyz_z_type"], sent["txt2img_xyz_z_values"]) == ("Nothing", "")
    plain = outputs_by_id(fn, fn.fn("a cat\nSteps: 3, Sampler: Euler, CFG scale: 7, Seed: 1, Size: 64x64", []))
    assert plain["txt2img_script"] == "None" and "txt2img_xyz_x_type" not in plain


def test_img2img_takes_its_own_axes(built):
    _, blocks = built
    fn = handler(blocks, "img2img_paste", "click")
    text = "a cat\nSteps: 3, Sampler: Euler, Seed: 1, Size: 64x64, Script: X/Y/Z plot, X Type: Denoising, " \
           "X Values: \"0.3,0.6\""
    sent = outputs_by_id(fn, fn.fn(text, []))
    assert (sent["img2img_script"], sent["img2img_xyz_x_type"], sent["img2img_xyz_x_values"]) == (
        "X/Y/Z plot", "Denoising", "0.3,0.6")
