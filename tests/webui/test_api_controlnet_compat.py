"""sd-webui-controlnet API compatibility: old unit keys, unknown keys, control modes, module aliases, model names.

References (sd-webui-controlnet): `scripts/external_code.py` `to_processing_unit` renames old keys
(`ext_compat_keys`: guessmode -> guess_mode, guidance -> guidance_end, lowvram -> low_vram, input_image -> image);
`scripts/enums.py` / `external_code.ControlMode` has three modes (0 Balanced, 1 My prompt is more important,
2 ControlNet is more important); `preprocessor_aliases` maps "depth" to depth_midas; the model list shows
"name [hash]" and a request may name a model either way.
"""

from __future__ import annotations

import logging

import pytest

from webui.api_controlnet import build_units, parse_units
from webui.controlnet_models import ControlNetModels


class Catalog:
    def resolve(self, name):
        return str(name)


def unit(**fields):
    specs = parse_units([{"model": "tiny_canny", "module": "none", **fields}], models=Catalog(), max_units=4,
                        max_pixels=10**6, max_bytes=10**7)
    return specs[0]


def test_old_guidance_key_sets_guidance_end():
    assert unit(guidance=0.3).guidance_end == 0.3
    assert unit().guidance_end == 1.0


def test_old_guessmode_key_means_controlnet_is_more_important():
    assert (unit(guessmode=True).guess_mode, unit(guessmode=True).soft_injection) == (True, False)
    assert unit(guessmode=False).guess_mode is False
    with pytest.raises(ValueError, match="guess_mode true means control_mode"):
        unit(guessmode=True, control_mode="Balanced")


def test_lowvram_is_accepted_and_logged_as_without_effect(caplog):
    with caplog.at_level(logging.INFO, logger="webui.api_controlnet"):
        assert unit(lowvram=True).weight == 1.0
    assert "low_vram has no effect here" in caplog.text
    unit(low_vram=False)


@pytest.mark.parametrize("key", ["weigth", "guidance_ending", "Module"])
def test_unknown_or_misspelt_keys_are_refused_naming_the_key_and_the_valid_ones(key):
    with pytest.raises(ValueError) as error:
        unit(**{key: 0.1})
    message = str(error.value)
    assert f"unknown key {key!r}" in message and "weight" in message and "guidance_end" in message


def test_an_old_key_with_its_new_name_is_refused():
    with pytest.raises(ValueError, match="'guidance' and 'guidance_end' are the same field"):
        unit(guidance=0.3, guidance_end=0.5)


@pytest.mark.parametrize("mode", [1, "My prompt is more important", "my prompt is more important"])
def test_my_prompt_is_more_important_is_soft_injection(mode):
    spec = unit(control_mode=mode)
    assert (spec.guess_mode, spec.soft_injection) == (False, True)
    assert (unit(control_mode=2).guess_mode, unit(control_mode=2).soft_injection) == (True, False)
    assert (unit(control_mode=0).guess_mode, unit(control_mode=0).soft_injection) == (False, False)


def test_soft_injection_reaches_the_pipeline_unit():
    class Models:
        def load(self, name, base_unet):
            return object()

    built = build_units([unit(control_mode=1)], Models(), base_unet=None)
    assert built[0].soft_injection is True and built[0].guess_mode is False


def test_depth_module_alias_is_depth_midas():
    assert unit(module="depth").preprocessor == "depth_midas"


def test_webuiapi_unit_keys_are_all_read():
    """The keys webuiapi's ControlNetUnit.to_dict sends (current and old clients) are accepted."""
    from webui.api_controlnet import UNIT_KEYS

    sent = {"image", "mask", "module", "model", "weight", "resize_mode", "low_vram", "processor_res", "threshold_a",
            "threshold_b", "guidance_start", "guidance_end", "control_mode", "pixel_perfect", "hr_option", "enabled"}
    assert sent <= UNIT_KEYS


@pytest.fixture()
def folder(tmp_path):
    for name in ("canny [fp16].safetensors", "depth.safetensors"):
        (tmp_path / name).write_bytes(b"")
    return tmp_path


@pytest.mark.parametrize("requested, resolved", [
    ("canny [fp16]", "canny [fp16]"),  # the name /controlnet/model_list shows
    ("canny [fp16] [a1b2c3d4]", "canny [fp16]"),  # the extension's "name [hash]" form of it
    ("depth", "depth"),
    ("depth [a1b2c3d4]", "depth"),
])
def test_model_names_with_brackets_are_selectable(folder, requested, resolved):
    models = ControlNetModels(folder)
    assert "canny [fp16]" in models.names()
    assert models.resolve(requested) == resolved


@pytest.mark.parametrize("requested", ["canny", "canny [fp32]", "../canny [fp16]"])
def test_unlisted_names_are_still_refused(folder, requested):
    with pytest.raises(ValueError, match="Unknown ControlNet model"):
        ControlNetModels(folder).resolve(requested)


def test_an_empty_new_key_next_to_its_old_name_is_not_a_conflict():
    assert unit(guidance=0.4, guidance_end=None).guidance_end == 0.4


@pytest.mark.parametrize("field, value", [("resize_mode", True), ("resize_mode", False), ("control_mode", True)])
def test_a_boolean_enum_field_is_refused_not_read_as_0_or_1(field, value):
    """JSON true is an int in Python; resize_mode true used to run "Crop and Resize" (1), false "Just Resize" (0)."""
    with pytest.raises(ValueError, match=f"{field} {value} is not one of"):
        unit(**{field: value})
    assert unit(resize_mode=1).resize_mode == "crop and resize" and unit(resize_mode=0).resize_mode == "just resize"


def test_weight_above_the_ui_slider_is_taken_as_the_extensions_api_takes_it():
    assert unit(weight=3).weight == 3.0 and unit(weight=0).weight == 0.0
    for bad in (-1, float("inf"), "2", True):
        with pytest.raises(ValueError, match="weight must be a finite number >= 0"):
            unit(weight=bad)


def test_unknown_module_message_lists_every_accepted_name_with_the_extensions_aliases():
    with pytest.raises(ValueError) as error:
        unit(module="openpose")
    message = str(error.value)
    assert "unknown module 'openpose'" in message and "canny" in message and "tile_resample" in message
    assert "inpaint_only" in message and "'inpaint_global_harmonious' for inpaint" in message
    assert "'depth' for depth_midas" in message and "'invert (from white bg & black line)' for invert" in message


def test_lineart_standard_and_scribble_xdog_take_the_extensions_names_and_slider():
    from pipelines.preprocessors import PREPROCESSORS
    from webui.api_controlnet_routes import module_detail

    assert unit(module="lineart_standard (from white bg & black line)").preprocessor == "lineart_standard"
    assert unit(module="scribble_xdog", threshold_a=-1).preprocessor == "scribble_xdog"
    assert module_detail(PREPROCESSORS.get("scribble_xdog"))["sliders"][1:] == [
        {"name": "XDoG Threshold", "value": 32, "min": 1, "max": 64}]
