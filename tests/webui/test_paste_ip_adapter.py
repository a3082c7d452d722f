"""Pasting an infotext with image prompts fills the form's ControlNet units (`webui.ui.paste_ip_adapter` and the
IP-Adapter modules of `webui.ui.paste_infotext.infotext_controlnet_values`): the extension's `ControlNet N` units with
an IP-Adapter module, and mixkit's own `IP-Adapter` / `IP-Adapter Guidance` keys."""

from __future__ import annotations

from pipelines.params import GenerationLimits
from webui.ui.paste_infotext import infotext_to_form_values

HEAD = 'a box\nSteps: 2, Sampler: DPM++ 2M, Schedule type: Karras, Seed: 1, Size: 64x64, RNG: CPU, '
EXTENSION_UNIT = ('ControlNet 0: "Module: ip-adapter_clip_sd15, Model: ip-adapter_sd15 [a1b2c3d4], Weight: 0.6, '
                  'Resize Mode: Crop and Resize, Processor Res: 512, Guidance Start: 0.2, Guidance End: 0.8, '
                  'Pixel Perfect: False, Control Mode: Balanced"')
CANNY_UNIT = ('ControlNet 0: "Module: canny, Model: tiny_canny, Weight: 1, Resize Mode: Crop and Resize, '
              'Guidance Start: 0.0, Guidance End: 1.0, Pixel Perfect: False, Control Mode: Balanced"')
MODELS = {"ip-adapter_sd15 [a1b2c3d4]": "ip-adapter_sd15", "ip-adapter_sd15": "ip-adapter_sd15",
          "tiny_canny": "tiny_canny"}


def paste(text: str, units: int = 3):
    values, notes = infotext_to_form_values(text, GenerationLimits(), ["DPM++ 2M"], ["Karras"], controlnet_units=units,
                                            controlnet_model_of=MODELS.get)
    return {name: value for name, value in values.items() if name.startswith("controlnet_")}, notes


def test_the_extensions_ip_adapter_unit_fills_the_unit_with_its_module():
    values, notes = paste(HEAD + EXTENSION_UNIT)
    assert values == {"controlnet_0_enabled": True, "controlnet_0_preprocessor": "ip-adapter_clip_sd15",
                      "controlnet_0_model": "ip-adapter_sd15", "controlnet_0_weight": 0.6, "controlnet_0_start": 0.2,
                      "controlnet_0_end": 0.8, "controlnet_0_resize_mode": "Crop and Resize",
                      "controlnet_0_processor_res": 512, "controlnet_0_pixel_perfect": False,
                      "controlnet_0_control_mode": "Balanced"}
    assert notes == ["ControlNet 0: ControlNet Unit 0 is enabled and filled from the infotext, but no infotext holds "
                     "its reference picture; add it as the unit's control image (in img2img an empty one takes the "
                     "init image)."]


def test_mixkits_ip_adapter_keys_fill_the_units_after_the_controlnet_ones():
    text = (HEAD + CANNY_UNIT + ', IP-Adapter: "ip-adapter_sd15: 0.6, ip-adapter-plus_sd15: 0.4", '
            'IP-Adapter Guidance: "0.2-0.8, 0-1"')
    values, notes = paste(text)
    assert values["controlnet_0_preprocessor"] == "canny"
    assert {name: value for name, value in values.items() if name[11] in "12"} == {
        "controlnet_1_enabled": True, "controlnet_1_preprocessor": "ip-adapter-auto",
        "controlnet_1_model": "ip-adapter_sd15", "controlnet_1_weight": 0.6, "controlnet_1_start": 0.2,
        "controlnet_1_end": 0.8, "controlnet_1_control_mode": "Balanced",
        "controlnet_2_enabled": True, "controlnet_2_preprocessor": "ip-adapter-auto", "controlnet_2_weight": 0.4,
        "controlnet_2_start": 0.0, "controlnet_2_end": 1.0, "controlnet_2_control_mode": "Balanced"}
    assert notes[1:] == [
        "IP-Adapter ip-adapter_sd15: 0.6: ControlNet Unit 1 is enabled as this IP-Adapter (ip-adapter-auto), but no "
        "infotext holds its reference picture; add it as the unit's control image (in img2img an empty one takes the "
        "init image).",
        "IP-Adapter ip-adapter-plus_sd15: 0.4: ControlNet Unit 2 is enabled as this IP-Adapter (ip-adapter-auto), but "
        "no infotext holds its reference picture; add it as the unit's control image (in img2img an empty one takes "
        "the init image). Not available here, so not set: model 'ip-adapter-plus_sd15' (put the file in the "
        "ControlNet folder)."]


def test_adapters_beyond_the_forms_units_are_named():
    values, notes = paste(HEAD + CANNY_UNIT + ', IP-Adapter: "ip-adapter_sd15: 0.6"', units=1)
    assert not any(name.startswith("controlnet_1") for name in values)
    assert notes[-1] == ("IP-Adapter ip-adapter_sd15: 0.6: this form has no ControlNet Unit 1 left for it (the "
                         "infotext's ControlNet units come first); the image cannot be reproduced without that image "
                         "prompt.")


def test_a_window_list_of_the_wrong_length_is_a_note_not_a_guess():
    values, notes = paste(HEAD + 'IP-Adapter: "ip-adapter_sd15: 0.6", IP-Adapter Guidance: "0.2-0.8, 0-1"')
    assert values == {}
    assert notes == ["IP-Adapter: not read (IP-Adapter Guidance infotext has 2 windows for the 1 adapters of "
                     "IP-Adapter; it needs one per adapter (in '0.2-0.8, 0-1')); set the IP-Adapter units by hand."]


def test_a_face_module_is_left_out_and_named():
    values, notes = paste(HEAD + EXTENSION_UNIT.replace("ip-adapter_clip_sd15", "ip-adapter_face_id_plus"))
    assert "controlnet_0_preprocessor" not in values and values["controlnet_0_model"] == "ip-adapter_sd15"
    assert "Not available here, so not set: module 'ip-adapter_face_id_plus'." in notes[0]
