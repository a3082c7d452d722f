"""Loopback's controls under img2img's Script dropdown (webui/ui/script_loopback.py), driven through the built
Blocks' own handlers on the tiny model."""

from __future__ import annotations

import gradio as gr
import pytest
from PIL import Image

from pipelines.infotext import parse_infotext

from .script_ui import img2img_generate
from .script_ui import img2img_script_choice as script_choice
from .ui_blocks import built_ui, component


@pytest.fixture(scope="module")
def built(tiny_sd1_dir, tmp_path_factory):
    with built_ui(tiny_sd1_dir, tmp_path_factory.mktemp("ui-loopback")) as pair:
        yield pair


def generate(blocks, script_changes, **changes):
    """img2img Generate's last update, every input as a fresh page sends it with `changes`, the Script as chosen."""
    picture = Image.new("RGB", (64, 64), (200, 30, 30))
    return img2img_generate(blocks, "loopback-ui", script_changes, **{
        "prompt": "a red cat", "steps": 2, "width": 64, "height": 64, "seed": 4, "sampler": "Euler",
        "image": {"background": picture, "layers": [], "composite": picture}, **changes})


def test_loopback_is_offered_on_img2img_only_with_a1111s_defaults(built):
    _, blocks = built
    assert "Loopback" in [choice[0] for choice in component(blocks, "img2img_script").choices]
    assert "Loopback" not in [choice[0] for choice in component(blocks, "txt2img_script").choices]
    loops = component(blocks, "img2img_loopback_loops")
    assert (loops.value, loops.minimum, loops.maximum, loops.step) == (4, 1, 32, 1)
    assert script_choice(blocks, script="Loopback") == ["Loopback", [4, 0.5, "Linear", "None"]]
    assert script_choice(blocks, script="Loopback", loopback_loops=3.0, loopback_curve="Lazy")[1] == [
        3, 0.5, "Lazy", "None"]


def test_generate_shows_the_grid_then_each_loop(built):
    _, blocks = built
    last = generate(blocks, {"script": "Loopback", "loopback_loops": 2.0,
                             "loopback_final_denoising_strength": 0.25}, denoising_strength=0.75)
    gallery, infotexts = last[2], last[4]
    assert len(gallery) == 3
    with Image.open(gallery[0][0]) as grid:
        assert grid.size == (128, 64)
    assert [parse_infotext(text)["Denoising strength"] for text in infotexts[1:]] == ["0.75", "0.25"]


def test_deepbooru_is_refused_with_the_reason(built):
    state, blocks = built
    with pytest.raises(gr.Error, match="needs a DeepBooru tagger .* --deepdanbooru-models-path"):
        generate(blocks, {"script": "Loopback", "loopback_append_interrogation": "DeepBooru"})
    assert state.worker.queued == 0
