"""The Extras tab's training-data accordions: several files per source saved under A1111's suffixes, shown in the
gallery; captions from the server's caption model in `.txt` files; bad settings refused before any work."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import numpy as np
import pytest
from PIL import Image

from mixkit.testing.tiny_deepbooru import crafted_deepbooru_state, save_deepbooru

from .ui_blocks import component, handler, model_less_ui

OFF = dict(split=False, threshold=0.5, overlap=0.2, focal=False, face=0.9, entropy=0.15, edges=0.5, debug=False,
           flip=False, flips=["Horizontal"], caption=False, captions=["BLIP"])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    with model_less_ui(tmp_path_factory.mktemp("ui-extras-training")) as built_ui:
        yield built_ui


def _tall():
    return Image.fromarray(np.arange(16 * 48 * 3, dtype=np.uint32).astype(np.uint8).reshape(48, 16, 3))


def run(blocks, image, mode=1, size=(16, 16), crop=False, upscaler="Nearest", **training):
    values = {**OFF, **training}
    return list(handler(blocks, "extras_generate", "click").fn(
        image, upscaler, 1.0, mode, *size, crop, 0.0, 0.0, 0.0, "", SimpleNamespace(session_hash=None),
        *values.values()))[-1]


def test_split_and_flip_save_every_picture_with_a1111s_suffixes(built):
    state, blocks = built
    state.options.apply({"samples_save": True})
    before = {p.name for p in state.output_dir.glob("*.png")}
    progress, result, gallery, sizes, info, _ = run(blocks, _tall(), split=True, flip=True, flips=["Vertical"])
    assert "Done: 8 image(s)" in progress  # several pictures: shown in the gallery
    written = sorted(p.name for p in state.output_dir.glob("*.png") if p.name not in before)
    counter = int(written[0][:5])
    assert written == [f"{counter:05d}.png"] + [f"{counter + n:05d}-{n}.png" for n in range(1, 8)]
    assert [path for path, _ in gallery] == [str(state.output_dir / name) for name in written]
    source = np.asarray(_tall())
    with Image.open(state.output_dir / written[1]) as flipped_top:  # the flip's first crop: the bottom, upside down
        assert (np.asarray(flipped_top.convert("RGB")) == source[::-1][:16]).all()
    assert sizes.split("; ")[0] == "16x48 -> 16x16"


def test_captions_come_from_the_servers_caption_model(built, monkeypatch):
    state, blocks = built
    state.options.apply({"samples_save": True})
    asked = []
    monkeypatch.setattr(state, "run_app", lambda app, inputs, options: asked.append(app) or {"text": " a cube "})
    progress, result, *_ = run(blocks, Image.new("RGB", (16, 16), (200, 10, 30)), mode=0, caption=True)
    assert asked == ["image2text_generation"]
    assert (state.output_dir / result).with_suffix(".txt").read_text(encoding="utf8") == "a cube"


def test_focal_crop_with_its_debug_image(built):
    state, blocks = built
    state.options.apply({"samples_save": True})
    progress, _, gallery, sizes, *_ = run(blocks, Image.new("RGB", (48, 16)), focal=True, debug=True)
    names = [path.split("/")[-1] for path, _ in gallery]
    assert len(names) == 2 and names[1].endswith("-focal-crop-debug.png")
    assert sizes == "48x16 -> 16x16; 48x16 -> 48x16"


@pytest.mark.parametrize("training, message", [(dict(threshold=2.0), "split_threshold must be"),
                                               (dict(caption=True, captions=["Deepbooru"]),
                                                "Caption: Deepbooru: DeepBooru is not set up on this server: start it "
                                                "with --deepdanbooru-models-path FOLDER")])
def test_bad_settings_are_refused_before_anything_is_queued(built, training, message):
    _, blocks = built
    with pytest.raises(gr.Error, match=message):
        run(blocks, _tall(), **training)


def test_the_page_puts_the_task_id_before_the_training_values(built):
    _, blocks = built
    event = handler(blocks, "extras_generate", "click")
    assert "return [...values.slice(0, 10), id, ...values.slice(11, 23)];" in event.js
    assert component(blocks, "postprocess_split_threshold").value == 0.5
    captions = component(blocks, "postprocess_caption_choices")
    assert captions.choices == [("BLIP", "BLIP")] and captions.value == ["BLIP"]
    assert "--deepdanbooru-models-path" in captions.info


@pytest.fixture(scope="module")
def with_deepbooru(tmp_path_factory):
    """A model-less UI whose server has a DeepDanbooru tagger (solo 0.881, 1girl 0.953, long_hair 0.622)."""
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-extras-deepbooru")
    (root / "models").mkdir()
    (root / "tagger").mkdir()
    save_deepbooru(root / "tagger" / "model-resnet_custom_v3.pt", crafted_deepbooru_state([2.0, 3.0, 0.5]),
                   ["solo", "1girl", "long_hair"])
    state = ServerState(ServerConfig(models_dir=str(root / "models"), output_dir=str(root / "out"),
                                     deepdanbooru_models_path=str(root / "tagger")))
    try:
        yield state, build_ui(state)
    finally:
        state.close()


def test_deepbooru_is_offered_and_chosen_as_a1111s_with_a_tagger(with_deepbooru):
    _, blocks = with_deepbooru
    captions = component(blocks, "postprocess_caption_choices")
    assert captions.choices == [("Deepbooru", "Deepbooru"), ("BLIP", "BLIP")] and captions.value == ["Deepbooru"]


def test_deepbooru_tags_then_the_blip_caption(with_deepbooru, monkeypatch):
    state, blocks = with_deepbooru
    state.options.apply({"samples_save": True})
    monkeypatch.setattr(state, "run_app", lambda app, inputs, options: {"text": " a cube "})
    _, result, *_ = run(blocks, Image.new("RGB", (16, 16), (200, 10, 30)), mode=0, caption=True,
                        captions=["BLIP", "Deepbooru"])
    assert (state.output_dir / result).with_suffix(".txt").read_text(encoding="utf8") == \
        "1girl, long hair, solo, a cube"


def test_a_batch_captioned_by_deepbooru_loads_the_tagger_once(with_deepbooru, monkeypatch, tmp_path):
    """"Upscale all" on three files with Caption: Deepbooru and interrogate_keep_models_in_memory off: one load of the
    tagger for the whole job (it used to be read again for every picture), dropped when the job ends."""
    from mixkit.interrogate import deepbooru

    state, blocks = with_deepbooru
    state.options.apply({"samples_save": True, "interrogate_keep_models_in_memory": False})
    loads, real = [], deepbooru.load_deepbooru
    monkeypatch.setattr(deepbooru, "load_deepbooru", lambda path, **kwargs: loads.append(path) or real(path, **kwargs))
    paths = []
    for number in range(3):
        paths.append(tmp_path / f"source{number}.png")
        Image.new("RGB", (16, 16), (60 * number, 10, 30)).save(paths[-1])
    values = {**OFF, "caption": True, "captions": ["Deepbooru"]}
    progress, *_ = list(handler(blocks, "extras_batch_generate", "click").fn(
        [str(path) for path in paths], "Nearest", 1.0, 1, 16, 16, False, 0.0, 0.0, 0.0, "",
        SimpleNamespace(session_hash=None), *values.values()))[-1]
    assert "Done: 3 image(s)" in progress
    assert len(loads) == 1 and state.deepbooru._loaded is None


@pytest.mark.parametrize("training, message", [
    (dict(focal=True), "Auto focal point crop: a 64x8000 picture would be resized to 512x64000"),
    (dict(split=True), "Split oversized images: a 64x8000 picture would be resized to 512"),
])
def test_a_resize_over_the_pixel_budget_is_refused_before_anything_is_queued(built, monkeypatch, training, message):
    """With the "None" upscaler and "Scale to", the size the steps get is the source's: a strip far from the target's
    aspect ratio would be resized to 32M pixels (over the 4096x4096 budget), refused now instead of failing inside
    the job."""
    state, blocks = built
    monkeypatch.setattr(state, "submit_upscale_batch", lambda *args, **kwargs: pytest.fail("a job was queued"))
    with pytest.raises(gr.Error, match=message):
        run(blocks, Image.new("RGB", (64, 8000)), mode=1, size=(512, 512), upscaler="None", **training)
