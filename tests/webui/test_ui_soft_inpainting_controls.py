"""The img2img tab's "Soft inpainting" accordion (webui/ui/soft_inpainting_controls.py): A1111's widgets, its values
reaching Img2ImgParams as the API's do, and a paste filling it from A1111's infotext keys."""

from __future__ import annotations

import pytest
from PIL import Image

from pipelines.params import GenerationLimits
from pipelines.soft_inpainting import SoftInpainting
from webui.ui.generate_tab import img2img_params
from webui.ui.paste_infotext import infotext_to_form_values
from webui.ui.soft_inpainting_controls import infotext_soft_inpainting_values, soft_inpainting_value

from .test_ui_inpaint_controls import BASE, SOFT_OFF, fields, stroke_layer
from .ui_blocks import component

TEXT = ("a cube\nSteps: 4, Sampler: Euler, Seed: 1, Size: 64x64, Denoising strength: 0.75, Mask blur: 16, "
        "Soft inpainting enabled: True, Soft inpainting schedule bias: 2, Soft inpainting preservation strength: 1.5, "
        "Soft inpainting transition contrast boost: 8, Soft inpainting mask influence: 0.25, "
        "Soft inpainting difference threshold: 1, Soft inpainting difference contrast: 4")


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-soft-inpainting")
    (root / "models").mkdir()
    state = ServerState(ServerConfig(models_dir=str(root / "models"), output_dir=str(root / "out")))
    yield build_ui(state)
    state.close()


def test_the_accordion_has_a1111s_checkbox_and_sliders(blocks):
    enabled = component(blocks, "soft_inpainting_enabled")
    assert (enabled.label, enabled.value) == ("Soft inpainting", False)
    sliders = [component(blocks, elem_id) for elem_id in (
        "mask_blend_power", "mask_blend_scale", "inpaint_detail_preservation", "composite_mask_influence",
        "composite_difference_threshold", "composite_difference_contrast")]
    assert [(s.label, s.value, s.minimum, s.maximum, s.step) for s in sliders] == [
        ("Schedule bias", 1, 0, 8, 0.1), ("Preservation strength", 0.5, 0, 8, 0.05),
        ("Transition contrast boost", 4, 1, 32, 0.5), ("Mask influence", 0, 0, 1, 0.05),
        ("Difference threshold", 0.5, 0, 8, 0.25), ("Difference contrast", 2, 0, 8, 0.25)]


def test_the_form_values_reach_the_params():
    editor = {"background": Image.new("RGB", (64, 64)), "layers": [stroke_layer()], "composite": None}
    assert img2img_params(BASE, fields(mode="inpaint", editor=editor)).soft_inpainting is None
    on = fields(mode="inpaint", editor=editor, soft_inpainting=True, si_mask_blend_power=2.5,
                si_composite_mask_influence=0.5)
    assert img2img_params(BASE, on).soft_inpainting == SoftInpainting(mask_blend_power=2.5,
                                                                      composite_mask_influence=0.5)
    assert soft_inpainting_value({**SOFT_OFF, "soft_inpainting": True}) == SoftInpainting()


def test_a_paste_fills_the_accordion_from_a1111s_keys():
    values, notes = infotext_to_form_values(TEXT, GenerationLimits(), ["Euler"], ["Automatic"], inpaint_fields=True)
    assert {name: values[name] for name in SOFT_OFF} == {
        "soft_inpainting": True, "si_mask_blend_power": 2.0, "si_mask_blend_scale": 1.5,
        "si_inpaint_detail_preservation": 8.0, "si_composite_mask_influence": 0.25,
        "si_composite_difference_threshold": 1.0, "si_composite_difference_contrast": 4.0}
    assert not [note for note in notes if "Soft inpainting" in note]
    # a txt2img form has no accordion to fill
    assert "soft_inpainting" not in infotext_to_form_values(TEXT, GenerationLimits(), ["Euler"], ["Automatic"])[0]


def test_missing_keys_keep_the_form_and_bad_ones_are_named():
    assert infotext_soft_inpainting_values({"Steps": "4"}) == ({}, [])
    values, notes = infotext_soft_inpainting_values({"Soft inpainting enabled": "True",
                                                     "Soft inpainting mask influence": "3",
                                                     "Soft inpainting schedule bias": "strong"})
    assert values == {"soft_inpainting": True}
    assert notes == ["Soft inpainting schedule bias: 'strong' is not a number in [0, 8]; kept the current value.",
                     "Soft inpainting mask influence: '3' is not a number in [0, 1]; kept the current value."]
