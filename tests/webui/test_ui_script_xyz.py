"""The Script dropdown and X/Y/Z plot's controls on txt2img / img2img (webui/ui/script_controls.py,
webui/ui/script_xyz.py), driven through the built Blocks' own handlers on a tiny model."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pytest
from PIL import Image

from pipelines.infotext import parse_infotext

from .ui_blocks import component, handler


@pytest.fixture(scope="module")
def built(tiny_sd1_dir, tmp_path_factory):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-xyz")
    state = ServerState(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "out"), ui=False))
    state.load_initial_model()
    try:
        yield state, build_ui(state)
    finally:
        state.close()


def form_values(blocks, **changes) -> list:
    """txt2img Generate's inputs as a fresh page sends them, `changes` by elem_id suffix."""
    values = []
    for block in handler(blocks, "txt2img_generate", "click").inputs:
        name = (block.elem_id or "").removeprefix("txt2img_")
        values.append(changes.pop(name) if name in changes else block.value)
    assert not changes, f"no such inputs: {changes}"
    return values


def generate(blocks, **changes):
    request = SimpleNamespace(session_hash="xyz-ui", request=SimpleNamespace(scope={}))
    return list(handler(blocks, "txt2img_generate", "click").fn(request, *form_values(blocks, **changes)))[-1]


def test_both_tabs_have_the_script_dropdown_defaulting_to_none(built):
    _, blocks = built
    for kind in ("txt2img", "img2img"):
        dropdown = component(blocks, f"{kind}_script")
        assert dropdown.value == "None" and [choice[0] for choice in dropdown.choices] == ["None", "X/Y/Z plot"]
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


def test_bad_values_are_refused_naming_the_slot(built):
    _, blocks = built
    with pytest.raises(gr.Error, match="script_args x_values: Steps takes whole numbers: 'ten'"):
        generate(blocks, prompt="a cat", steps=1, width=64, height=64, script="X/Y/Z plot", xyz_x_type="Steps",
                 xyz_x_values="ten")


def test_a_dropdown_axis_shows_its_values_and_fill_lists_them_all(built):
    from pipelines.samplers import list_samplers

    _, blocks = built
    select = handler(blocks, "txt2img_xyz_x_type", "change")
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
