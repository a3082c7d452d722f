"""The img2img tab's Interrogate CLIP button writes the same text into the prompt box as the HTTP API answers."""

from __future__ import annotations

import gradio as gr
import pytest

from mixkit.data.shapes_render import render_scene
from mixkit.data.shapes_vocab import Scene, ShapeSpec

from .ui_blocks import handler, model_less_ui


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    with model_less_ui(tmp_path_factory.mktemp("ui-interrogate")) as built_ui:
        yield built_ui


def test_the_button_fills_the_prompt_with_the_caption_and_ranked_terms(built):
    from webui.interrogation import submit_interrogation

    state, blocks = built
    image = render_scene(Scene((ShapeSpec("square", "green", "medium", "left"),), "white"), 64)
    click = handler(blocks, "interrogate", "click")
    assert [block.elem_id for block in click.outputs] == ["img2img_prompt"]
    answer = click.fn({"background": image.convert("RGBA"), "layers": [], "composite": image})
    assert answer == submit_interrogation(state, image).future.result()
    assert ", square, green, " in answer


def test_without_an_image_the_button_says_what_to_do(built):
    _, blocks = built
    with pytest.raises(gr.Error, match="Drop an image into the img2img editor first"):
        handler(blocks, "interrogate", "click").fn(None)


def test_a_bad_skip_setting_is_shown_not_queued(built, monkeypatch):
    state, blocks = built
    submitted = []
    monkeypatch.setattr(state.worker, "submit", lambda *args, **kwargs: submitted.append(args))
    state.options.apply({"interrogate_clip_skip_categories": ["artists"]})
    try:
        image = render_scene(Scene((ShapeSpec("star", "red", "small", "center"),), "black"), 64)
        with pytest.raises(gr.Error, match=r"names \['artists'\]"):
            handler(blocks, "interrogate", "click").fn({"background": image, "layers": [], "composite": image})
    finally:
        state.options.apply({"interrogate_clip_skip_categories": []})
    assert submitted == []
