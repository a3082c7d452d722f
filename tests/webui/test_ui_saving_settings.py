"""Settings > Saving images (webui/ui/saving_settings.py): enable_pnginfo and save_txt at the server's values; Apply
sets the options, and the next UI generation's saved files, gallery files and grid follow them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pytest
from PIL import Image

from .test_ui_prompt_styles_and_options import UI_FIRST_PASS, form_values
from .ui_blocks import built_ui, component, handler


@pytest.fixture(scope="module")
def built(tiny_sd1_dir, tmp_path_factory):
    with built_ui(tiny_sd1_dir, tmp_path_factory.mktemp("ui-saving-settings")) as pair:
        yield pair


def generate(blocks, **changes) -> tuple[list[str], list[str]]:
    """Press txt2img's Generate; (gallery file paths, infotexts) of its result."""
    request = SimpleNamespace(session_hash="saving-settings", request=SimpleNamespace(scope={}))
    last = list(handler(blocks, "txt2img_generate", "click").fn(
        request, *form_values(blocks, "txt2img_generate", **{**UI_FIRST_PASS, **changes})))[-1]
    return [path for path, _ in last[2]], last[4]


def test_the_checkboxes_start_at_a1111s_defaults_and_apply_the_options(built):
    state, blocks = built
    assert [component(blocks, f"settings_{key}").value for key in ("enable_pnginfo", "save_txt")] == [True, False]
    apply = handler(blocks, "settings_apply_saving", "click")
    assert [block.elem_id for block in apply.inputs] == ["settings_enable_pnginfo", "settings_save_txt"]
    with pytest.raises(gr.Error, match="save_txt must be true or false, got 'false'"):
        apply.fn(True, "false")  # a Gradio client's string is refused, not read as True


def test_the_next_generation_follows_the_saving_settings(built):
    state, blocks = built
    apply = handler(blocks, "settings_apply_saving", "click").fn
    out = state.output_dir
    assert apply(False, True) == "Settings applied."
    try:
        paths, infotexts = generate(blocks, batch_size=2)
        assert len(paths) == 3 and paths[0].endswith(".png") and "grid-" in paths[0]  # the grid first
        for path, infotext in zip(paths, infotexts):
            with Image.open(path) as image:
                assert "parameters" not in image.info
            assert open(path[:-4] + ".txt", encoding="utf-8").read() == infotext + "\n"
        assert infotexts[1].startswith("a cube\n")  # the gallery's infotext box still has it
        state.options.apply({"samples_save": False, "grid_save": False})
        unsaved, texts = generate(blocks)
        with Image.open(unsaved[0]) as image:  # a file in Gradio's cache, for the gallery only: no chunk, no .txt
            assert "parameters" not in image.info and texts[0].startswith("a cube\n")
        assert [path.suffix for path in Path(unsaved[0]).parent.iterdir()] == [".png"]
    finally:
        state.options.apply({"enable_pnginfo": True, "save_txt": False, "samples_save": True, "grid_save": True})
    assert {p.suffix for p in out.iterdir()} == {".png", ".txt"}
    (path,), _ = generate(blocks)
    with Image.open(path) as image:
        assert image.info["parameters"].startswith("a cube\n")
    assert not Path(path).with_suffix(".txt").exists()


def test_the_grid_font_box_applies_the_font_option_and_refuses_a_bad_path(built, tmp_path):
    state, blocks = built
    assert component(blocks, "settings_font").value == ""
    apply = handler(blocks, "settings_apply_font", "click")
    assert [block.elem_id for block in apply.inputs] == ["settings_font"]
    missing = str(tmp_path / "Roboto.ttf")
    with pytest.raises(gr.Error, match="is not a file"):
        apply.fn(missing)
    assert state.options.get("font") == ""
    font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    if not Path(font).is_file():
        pytest.skip("DejaVu Sans is not installed here")
    try:
        assert apply.fn(font) == "Settings applied." and state.options.get("font") == font
    finally:
        apply.fn("")
    assert state.options.get("font") == ""
