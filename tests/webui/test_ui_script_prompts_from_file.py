"""Prompts from file or textbox's controls under the Script dropdown (webui/ui/script_prompts_from_file.py): the
file upload fills the list, Generate runs every line; driven through the built Blocks' own handlers on a tiny model."""

from __future__ import annotations

import gradio as gr
import pytest

from pipelines.infotext import parse_infotext

from .script_ui import generate, script_choice
from .ui_blocks import built_ui
from .ui_blocks import component, handler


@pytest.fixture(scope="module")
def built(tiny_sd1_dir, tmp_path_factory):
    with built_ui(tiny_sd1_dir, tmp_path_factory.mktemp("ui-prompts_from_file")) as pair:
        yield pair


def test_the_script_state_holds_a1111s_args(built):
    _, blocks = built
    assert component(blocks, "img2img_prompts_from_file_prompt_position").value == "start"
    assert script_choice(blocks, script="Prompts from file or textbox", prompts_from_file_checkbox_iterate=True,
                         prompts_from_file_prompt_position="end", prompts_from_file_prompt_txt="a\nb") == [
        "Prompts from file or textbox", [True, False, "end", "a\nb", False]]


def test_an_uploaded_file_fills_the_list_line_by_line(built):
    _, blocks = built
    upload = handler(blocks, "txt2img_prompts_from_file_file", "upload")
    cleared, text = upload.fn("\ufeff a cat \r\n--prompt a dog --steps 2\n".encode("utf-8"))
    assert cleared is None and text["value"] == "a cat\n--prompt a dog --steps 2\n" and text["lines"] == 7
    with pytest.raises(gr.Error, match="not UTF-8 text"):
        upload.fn(b"a \xff cat")
    assert upload.fn(None)[1] == gr.update()


def test_generate_runs_every_line_with_its_infotext(built):
    _, blocks = built
    last = generate(blocks, "prompts_from_file_", prompt="photo", steps=1, width=64, height=64, seed=4,
                    sampler="Euler",
                    script="Prompts from file or textbox", prompts_from_file_checkbox_iterate=True,
                    prompts_from_file_prompt_txt="a cat\n--prompt a dog --steps 2")
    gallery, infotexts = last[2], last[4]
    assert len(gallery) == 2
    assert [(parse_infotext(t)["Prompt"], parse_infotext(t)["Steps"], parse_infotext(t)["Seed"]) for t in infotexts] \
        == [("a cat photo", "1", "4"), ("a dog photo", "2", "5")]


def test_a_bad_line_is_refused_naming_it(built):
    _, blocks = built
    with pytest.raises(gr.Error, match="line 2: unknown option --stepz"):
        generate(blocks, "prompts_from_file_", prompt="a cat", steps=1, width=64, height=64,
                 script="Prompts from file or textbox",
                 prompts_from_file_prompt_txt="a\n--stepz 2")
