"""The Script dropdown and X/Y/Z plot's controls on txt2img / img2img (webui/ui/script_controls.py,
webui/ui/script_xyz.py), driven through the built Blocks' own handlers on a tiny model."""

from __future__ import annotations

import gradio as gr
import pytest
from PIL import Image

from pipelines.infotext import parse_infotext

from . import script_ui
from .script_ui import script_choice
from .ui_blocks import built_ui, component, handler


@pytest.fixture(scope="module")
def built(tiny_sd1_dir, tmp_path_factory):
    with built_ui(tiny_sd1_dir, tmp_path_factory.mktemp("ui-xyz")) as pair:
        yield pair


def generate(blocks, script=None, **changes):
    """txt2img Generate's last output; fields named xyz_* go to the plot's controls."""
    return script_ui.generate(blocks, "xyz_", script or "None", **changes)


def test_both_tabs_have_the_script_dropdown_defaulting_to_none(built):
    _, blocks = built
    for kind, titles in (("txt2img", ["None", "X/Y/Z plot"]), ("img2img", ["None", "X/Y/Z plot", "Loopback"])):
        dropdown = component(blocks, f"{kind}_script")
        choices = [choice[0] for choice in dropdown.choices]
        assert dropdown.value == "None" and choices[:2] == ["None", "X/Y/Z plot"]
        assert all(title in choices for title in titles) and ("Loopback" in choices) == (kind == "img2img")
    assert component(blocks, "img2img_outpaint_method") is not None  # the Outpaint controls stay


def test_generate_with_the_plot_shows_its_grid_then_the_sub_images(built):
    _, blocks = built
    last = generate(blocks, prompt="a red cat", steps=1, width=64, height=64, seed=4, sampler="Euler", script="X/Y/Z plot",
                    xyz_x_type="Steps", xyz_x_values="1, 2", xyz_include_lone_images=True)
    gallery, infotexts = last[2], last[4]
    assert len(gallery) == 3
    with Image.open(gallery[0][0]) as grid:
        assert grid.width == 128 and grid.height > 64  # two cells, X labels on top
    assert parse_infotext(infotexts[0])["X Type"] == "Steps"
    assert [parse_infotext(text)["Steps"] for text in infotexts[1:]] == ["1", "2"]


def test_the_script_state_follows_the_controls(built):
    _, blocks = built
    assert script_choice(blocks, script="None", xyz_x_type="Steps", xyz_x_values="1") is None
    title, args = script_choice(blocks, script="X/Y/Z plot", xyz_x_type="Steps", xyz_x_values="1-3",
                                xyz_margin_size=12.0)
    assert title == "X/Y/Z plot" and len(args) == 18
    assert args[:2] == ["Steps", "1-3"] and args[3] == "Nothing" and args[16] == 12


def test_bad_values_are_refused_naming_the_slot(built):
    _, blocks = built
    with pytest.raises(gr.Error, match="script_args x_values: Steps takes whole numbers: 'ten'"):
        generate(blocks, prompt="a cat", steps=1, width=64, height=64, script="X/Y/Z plot", xyz_x_type="Steps",
                 xyz_x_values="ten")


def test_a_dropdown_axis_shows_its_values_and_fill_lists_them_all(built):
    from pipelines.samplers import list_samplers

    _, blocks = built
    axis_type = component(blocks, "txt2img_xyz_x_type")
    (select,) = [f for f in blocks.fns.values() if (axis_type._id, "change") in [tuple(t) for t in f.targets]
                 and len(f.outputs) == 3]  # the other change handler keeps the script State
    fill_button, values, dropdown = select.fn("Sampler", "Euler, Nope", [], False)
    assert fill_button["visible"] and not values["visible"] and dropdown["visible"]
    assert dropdown["value"] == ["Euler"]  # typed values move over where they are valid
    fill = handler(blocks, "txt2img_xyz_x_fill", "click")
    _, filled = fill.fn("Sampler", False)
    assert filled["value"] == [sampler["name"] for sampler in list_samplers()]
    text, _ = fill.fn("Sampler", True)  # text mode: one CSV line
    assert text["value"].startswith(list_samplers()[0]["name"])
    fill_button, values, _ = select.fn("Steps", "", [], False)
    assert not fill_button["visible"] and values["visible"]


def test_a_cleared_axis_type_is_nothing(built):
    """Clearing a type dropdown sent None to its handlers (a KeyError); it is read as Nothing, there and in the plot."""
    from webui.ui.script_xyz import axis_choices, xyz_script_args

    state, blocks = built
    assert axis_choices(None, state) is None
    axis_type = component(blocks, "txt2img_xyz_x_type")
    (select,) = [f for f in blocks.fns.values() if (axis_type._id, "change") in [tuple(t) for t in f.targets]
                 and len(f.outputs) == 3]
    fill_button, values, dropdown = select.fn(None, "1, 2", [], False)
    assert not fill_button["visible"] and values["visible"] and values["value"] == "1, 2" and not dropdown["visible"]
    assert handler(blocks, "txt2img_xyz_x_fill", "click").fn(None, False) == (gr.update(), gr.update())
    args = xyz_script_args([None, "1, 2", [], "Steps", "1", [], None, "", [], True, False, False, False,
                            False, False, False, 12.0, False])
    assert (args[0], args[3], args[6], args[16]) == ("Nothing", "Steps", "Nothing", 12)
