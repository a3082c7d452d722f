"""Settings > Face restoration and the Extras tab's face sliders: the options they set and what the tab runs."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import numpy as np
import pytest
from PIL import Image

from mixkit.testing.tiny_face_restoration import template_landmarks
from tests.pipelines.face_stand_ins import registered_stand_ins

from .ui_blocks import component, handler, model_less_ui

FACE = ((8.0, 8.0, 56.0, 56.0), template_landmarks(8.0, 8.0, 48.0))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    with model_less_ui(tmp_path_factory.mktemp("ui-faces")) as built_ui:
        yield built_ui


def test_the_settings_panel_sets_a1111s_face_options(built):
    state, blocks = built
    assert component(blocks, "settings_face_restoration_model").value == "CodeFormer"  # A1111's defaults
    assert component(blocks, "settings_code_former_weight").value == 0.5
    apply = handler(blocks, "settings_apply_face_restoration", "click").fn
    try:
        assert apply(True, "GFPGAN", 0.3, True, True) == "Settings applied."
        assert [state.options.get(key) for key in ("face_restoration", "face_restoration_model", "code_former_weight",
                                                   "face_restoration_unload", "save_images_before_face_restoration")] \
            == [True, "GFPGAN", 0.3, True, True]
    finally:
        apply(False, "CodeFormer", 0.5, False, False)
    with pytest.raises(gr.Error, match="face_restoration_model must be one of"):
        apply(False, "RestoreFormer", 0.5, False, False)


def test_the_extras_tab_restores_faces_after_the_upscale(built, tmp_path):
    state, blocks = built
    state.options.apply({"samples_save": True})
    source = Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8))
    with registered_stand_ins(tmp_path / "models", [FACE], 64, 64) as stand_ins:
        *_, (progress, path, _, size, info, _) = handler(blocks, "extras_generate", "click").fn(
            source, "Nearest", 1.0, 0, 512, 512, True, 0.0, 1.0, 0.2, "", SimpleNamespace(session_hash=None))
    assert "Done: 1 image(s)" in progress
    assert info == ("Postprocess upscale by: 1.0, Postprocess upscaler: Nearest, CodeFormer visibility: 1.0, "
                    "CodeFormer weight: 0.2")
    with Image.open(path) as result:
        assert np.asarray(result.convert("RGB"))[32, 32].tolist() == [255, 0, 255]
    assert stand_ins.loaders["CodeFormer"].network.weights == [0.2]


def test_the_extras_tab_refuses_a_restorer_the_server_lacks(built):
    _, blocks = built
    run = handler(blocks, "extras_generate", "click").fn
    with pytest.raises(gr.Error, match="gfpgan_visibility=0.5: Face restoration model 'GFPGAN' is not available"):
        list(run(Image.new("RGB", (64, 64)), "Nearest", 1.0, 0, 512, 512, True, 0.5, 0.0, 0.0, "",
                 SimpleNamespace(session_hash=None)))


def test_the_web_ui_paste_names_the_face_restoration_setting():
    from pipelines.params import GenerationLimits
    from webui.ui.paste_infotext import infotext_to_form_values

    base = "a face\nSteps: 4, Sampler: Euler, CFG scale: 7, Seed: 1, Size: 64x64"
    _, notes = infotext_to_form_values(base + ", Face restoration: CodeFormer", GenerationLimits(), ["Euler"],
                                       ["Automatic"])
    assert any("Face restoration: CodeFormer" in note and "Settings > Face restoration" in note for note in notes)
    _, plain = infotext_to_form_values(base, GenerationLimits(), ["Euler"], ["Automatic"])
    assert not any("Face restoration" in note for note in plain)
