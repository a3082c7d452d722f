"""Prompt matrix's controls under the Script dropdown (webui/ui/script_prompt_matrix.py), driven through the built
Blocks' own handlers on a tiny model."""

from __future__ import annotations

import gradio as gr
import pytest
from PIL import Image

from pipelines.infotext import parse_infotext

from .script_ui import generate, script_choice
from .ui_blocks import built_ui
from .ui_blocks import component


@pytest.fixture(scope="module")
def built(tiny_sd1_dir, tmp_path_factory):
    with built_ui(tiny_sd1_dir, tmp_path_factory.mktemp("ui-prompt_matrix")) as pair:
        yield pair


def test_both_tabs_offer_the_matrix_with_a1111s_controls(built):
    _, blocks = built
    for kind in ("txt2img", "img2img"):
        assert "Prompt matrix" in [choice[0] for choice in component(blocks, f"{kind}_script").choices]
        assert component(blocks, f"{kind}_prompt_matrix_prompt_type").value == "positive"
        assert component(blocks, f"{kind}_prompt_matrix_variations_delimiter").value == "comma"


def test_the_script_state_holds_a1111s_five_args(built):
    _, blocks = built
    assert script_choice(blocks, script="Prompt matrix", prompt_matrix_different_seeds=True,
                         prompt_matrix_prompt_type="negative", prompt_matrix_margin_size=12.0) == [
        "Prompt matrix", [False, True, "negative", "comma", 12]]


def test_generate_shows_the_grid_then_every_combination(built):
    _, blocks = built
    last = generate(blocks, "prompt_matrix_", prompt="a cat|red", steps=1, width=64, height=64, seed=4,
                    sampler="Euler",
                    script="Prompt matrix", prompt_matrix_variations_delimiter="space")
    gallery, infotexts = last[2], last[4]
    assert len(gallery) == 3
    with Image.open(gallery[0][0]) as grid:
        assert grid.width == 128 and grid.height > 64  # two cells, "red" struck through / drawn above them
    assert [parse_infotext(text)["Prompt"] for text in infotexts] == ["a cat", "a cat", "a cat red"]


def test_too_many_parts_are_refused_with_the_cap(built):
    _, blocks = built
    with pytest.raises(gr.Error, match="the most is 9 parts"):
        generate(blocks, "prompt_matrix_", prompt="x" + "|p" * 10, steps=1, width=64, height=64,
                 script="Prompt matrix")
