"""The img2img tab's Interrogate CLIP and Interrogate DeepBooru buttons write the same text into the prompt box as the
HTTP API answers."""

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


def test_the_deepbooru_button_without_a_folder_says_which_flag_to_start_with(built):
    _, blocks = built
    image = render_scene(Scene((ShapeSpec("star", "red", "small", "center"),), "black"), 64)
    click = handler(blocks, "deepbooru", "click")
    assert [block.elem_id for block in click.outputs] == ["img2img_prompt"]
    with pytest.raises(gr.Error, match="start it with --deepdanbooru-models-path FOLDER, the folder holding "
                                       "model-resnet_custom_v3.pt"):
        click.fn({"background": image, "layers": [], "composite": image})
    with pytest.raises(gr.Error, match="then press Interrogate DeepBooru"):
        click.fn(None)


def test_the_deepbooru_button_fills_the_prompt_with_the_tags(tmp_path):
    from mixkit.testing.tiny_deepbooru import crafted_deepbooru_state, save_deepbooru
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.interrogate_button import interrogate_editor_image

    save_deepbooru(tmp_path / "db" / "model-resnet_custom_v3.pt", crafted_deepbooru_state([1.0, -1.0, 0.0]),
                   ["blue_sky", "night", "star_(symbol)"])
    (tmp_path / "models").mkdir()
    state = ServerState(ServerConfig(models_dir=str(tmp_path / "models"), output_dir=str(tmp_path / "out"),
                                     deepdanbooru_models_path=str(tmp_path / "db")))
    try:
        image = render_scene(Scene((ShapeSpec("star", "red", "small", "center"),), "black"), 64).convert("RGBA")
        answer = interrogate_editor_image(state, {"background": image, "layers": [], "composite": image}, "deepbooru")
        assert answer == "blue sky, star \\(symbol\\)"  # 0.731 and exactly 0.5 kept, 0.269 under the threshold
        (tmp_path / "db" / "model-resnet_custom_v3.pt").unlink()
        with pytest.raises(gr.Error, match="No DeepDanbooru model in .*download model-resnet_custom_v3.pt"):
            interrogate_editor_image(state, {"background": image, "layers": [], "composite": image}, "deepbooru")
    finally:
        state.close()
