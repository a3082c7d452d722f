"""PNG Info paste of A1111 SDXL infotexts: what the form takes and what it notes."""

from pipelines.params import GenerationLimits
from webui.ui.paste_infotext import infotext_to_form_values

SDXL_TEXT = ("a lighthouse\nNegative prompt: lowres\nSteps: 30, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 7, "
             "Seed: 1234, Size: 1024x1024, Model hash: 31e35c80fc, Model: sd_xl_base_1.0, Clip skip: 2, RNG: CPU, "
             "Version: v1.10.1")
REFINER = ", Refiner: sd_xl_refiner_1.0 [7440042bbd], Refiner switch at: 0.8"
MODEL = "sd_xl_base_1.0 [31e35c80fc]"


def paste(text):
    return infotext_to_form_values(text, GenerationLimits(), ["DPM++ 2M"], ["Karras"], current_model=MODEL)


def test_sdxl_infotext_without_refiner_pastes_without_notes():
    values, notes = paste(SDXL_TEXT)
    assert notes == []
    # A1111 writes "Clip skip: 2" for SDXL too and ignores it there; mixkit does the same, so it is filled as is.
    assert values["clip_skip"] == 2 and values["steps"] == 30 and values["seed"] == 1234


def test_refiner_is_named_in_a_note_when_the_form_has_no_refiner_controls():
    values, notes = paste(SDXL_TEXT.replace(", Version", REFINER + ", Version"))
    assert notes == ["Refiner: the steps after Refiner switch at: 0.8 were sampled with "
                     "'sd_xl_refiner_1.0 [7440042bbd]'; this form has no Refiner controls, so the paste fills the "
                     "base model's pass only and the image will differ."]
    assert values == paste(SDXL_TEXT)[0]


def test_refiner_without_switch_point_is_still_noted():
    _, notes = paste(SDXL_TEXT.replace(", Version", ", Refiner: other_refiner, Version"))
    assert notes == ["Refiner: the last steps were sampled with 'other_refiner'; this form has no Refiner controls, so "
                     "the paste fills the base model's pass only and the image will differ."]


def test_eta_and_ensd_are_named_as_settings_not_dropped():
    _, notes = paste(SDXL_TEXT.replace(", Version", ", Eta: 0.5, ENSD: 31337, Version"))
    assert notes == ["Eta: 0.5, ENSD: 31337: these are Settings here (Settings > Sampler parameters), not form fields; "
                     "set them there to reproduce the image."]


LORA_TEXT = ('a cat <lora:civitai_ink:0.8> <lora:other:1>\nNegative prompt: <lora:civitai_ink:1>\nSteps: 20, '
             'Sampler: DPM++ 2M, Schedule type: Karras, Seed: 1, Size: 512x512, Lora hashes: "civitai_ink: 0123456789ab, other: ba9876543210", '
             'RNG: CPU')


def test_paste_relinks_lora_tags_to_local_files_by_hash_and_notes_the_missing_ones():
    local = {"0123456789ab": "styles/ink"}
    values, notes = infotext_to_form_values(LORA_TEXT, GenerationLimits(), ["DPM++ 2M"], ["Karras"],
                                            lora_name_of=local.get)
    # A1111's paste rewrites the prompt only (its Lora extension's infotext_pasted); the negative keeps its text.
    assert values["prompt"] == "a cat <lora:styles/ink:0.8> <lora:other:1>"
    assert values["negative_prompt"] == "<lora:civitai_ink:1>"
    assert notes == ["LoRA 'other' (hash ba9876543210): no local LoRA file has this hash; the tag is kept as written."]


def test_paste_without_a_lora_library_keeps_the_tags():
    values, notes = infotext_to_form_values(LORA_TEXT, GenerationLimits(), ["DPM++ 2M"], ["Karras"])
    assert values["prompt"] == "a cat <lora:civitai_ink:0.8> <lora:other:1>" and notes == []


def test_paste_relinks_through_a_real_library(tmp_path):
    import torch
    from safetensors.torch import save_file

    from mixkit.lora import LoraLibrary
    from mixkit.lora.lora_file import addnet_hash
    from mixkit.lora.relink import library_lookup

    (tmp_path / "styles").mkdir()
    path = tmp_path / "styles" / "ink_v2.safetensors"
    save_file({"lora_unet_x.lora_down.weight": torch.ones(2, 4), "lora_unet_x.lora_up.weight": torch.ones(4, 2)}, path)
    text = LORA_TEXT.replace("0123456789ab", addnet_hash(path)[:12])
    values, _ = infotext_to_form_values(text, GenerationLimits(), ["DPM++ 2M"], ["Karras"],
                                        lora_name_of=library_lookup(LoraLibrary(tmp_path)))
    assert values["prompt"] == "a cat <lora:styles/ink_v2:0.8> <lora:other:1>"


def test_the_model_note_accepts_the_loaded_checkpoint_under_any_of_its_a1111_ids():
    # The infotext's "Model" is A1111's name_for_extra (the stem); the server's title is "name.ext [hash]".
    text = "a cat\nSteps: 20, Sampler: DPM++ 2M, Schedule type: Karras, Seed: 1, Size: 512x512, Model: dreamy, RNG: CPU"
    title = "sub/dreamy.safetensors [0123456789]"
    aliases = frozenset({title, "sub/dreamy.safetensors", "dreamy", "sub_dreamy", "0123456789"})
    _, notes = infotext_to_form_values(text, GenerationLimits(), ["DPM++ 2M"], ["Karras"], current_model=title,
                                       current_model_aliases=aliases)
    assert notes == []
    _, notes = infotext_to_form_values(text.replace("dreamy", "other"), GenerationLimits(), ["DPM++ 2M"], ["Karras"],
                                       current_model=title, current_model_aliases=aliases)
    assert len(notes) == 1 and notes[0].startswith("Model: the image was made with 'other'")


CONTROLNET_TEXT = ('a box\nSteps: 2, Sampler: DPM++ 2M, Schedule type: Karras, Seed: 1, Size: 64x64, RNG: CPU, '
                   'ControlNet 0: "Module: canny, Model: tiny_canny, Weight: 1.5, Resize Mode: Crop and Resize, '
                   'Guidance Start: 0.0, Guidance End: 0.5, Pixel Perfect: False, Control Mode: Balanced", '
                   'ControlNet 1: "Module: none, Model: tiny_depth, Weight: 1, Resize Mode: Just Resize, '
                   'Guidance Start: 0.0, Guidance End: 1.0, Pixel Perfect: False, Control Mode: Balanced"')


def test_controlnet_units_the_form_lacks_are_named_in_the_notes():
    # sd-webui-controlnet writes `ControlNet N` per unit (scripts/infotext.py) and its paste fills the unit's
    # settings, never its control image; without units to fill, the paste must not look complete.
    values, notes = paste(CONTROLNET_TEXT)
    assert notes == [
        "ControlNet 0 (Module: canny, Model: tiny_canny, Weight: 1.5, Resize Mode: Crop and Resize, Guidance Start: "
        "0.0, Guidance End: 0.5, Pixel Perfect: False, Control Mode: Balanced): this form has no ControlNet Unit 0, "
        "and a unit's control image is not in the infotext; the image cannot be reproduced without that unit.",
        "ControlNet 1 (Module: none, Model: tiny_depth, Weight: 1, Resize Mode: Just Resize, Guidance Start: 0.0, "
        "Guidance End: 1.0, Pixel Perfect: False, Control Mode: Balanced): this form has no ControlNet Unit 1, and a "
        "unit's control image is not in the infotext; the image cannot be reproduced without that unit."]
    assert values["steps"] == 2 and not any(name.startswith("controlnet_") for name in values)


def test_controlnet_units_fill_the_forms_units_without_the_image():
    # The extension's `parse_unit` pastes enabled=True and every field but the image into the unit's widgets.
    values, notes = infotext_to_form_values(CONTROLNET_TEXT, GenerationLimits(), ["DPM++ 2M"], ["Karras"],
                                            controlnet_units=2, controlnet_model_of={"tiny_canny": "canny"}.get)
    assert {name: value for name, value in values.items() if name.startswith("controlnet_")} == {
        "controlnet_0_enabled": True, "controlnet_0_preprocessor": "canny", "controlnet_0_model": "canny",
        "controlnet_0_weight": 1.5, "controlnet_0_start": 0.0, "controlnet_0_end": 0.5,
        "controlnet_0_resize_mode": "Crop and Resize", "controlnet_0_pixel_perfect": False,
        "controlnet_0_control_mode": "Balanced",
        "controlnet_1_enabled": True, "controlnet_1_preprocessor": "none", "controlnet_1_weight": 1.0,
        "controlnet_1_start": 0.0, "controlnet_1_end": 1.0, "controlnet_1_resize_mode": "Just Resize",
        "controlnet_1_pixel_perfect": False, "controlnet_1_control_mode": "Balanced"}
    assert notes == [
        "ControlNet 0: ControlNet Unit 0 is enabled and filled from the infotext, but no infotext holds its control "
        "image; add it to the unit to reproduce the image.",
        "ControlNet 1: ControlNet Unit 1 is enabled and filled from the infotext, but no infotext holds its control "
        "image; add it to the unit to reproduce the image. Not available here, so not set: model 'tiny_depth'."]
    soft, _ = infotext_to_form_values(
        CONTROLNET_TEXT.replace("Weight: 1.5, Resize Mode: Crop and Resize,", "Weight: 1.5, Resize Mode: Resize and "
                                "Fill, Processor Res: 768, Threshold A: 50, Threshold B: 150,")
        .replace("Control Mode: Balanced\", ", "Control Mode: My prompt is more important\", ", 1),
        GenerationLimits(), ["DPM++ 2M"], ["Karras"], controlnet_units=2, controlnet_model_of={"tiny_canny": "canny"}.get)
    assert (soft["controlnet_0_resize_mode"], soft["controlnet_0_control_mode"], soft["controlnet_0_processor_res"],
            soft["controlnet_0_threshold_a"], soft["controlnet_0_threshold_b"]) == (
        "Resize and Fill", "My prompt is more important", 768, 50.0, 150.0)


def test_approximations_are_named_in_a_note():
    """The API refuses an infotext with approximations; the paste cannot reproduce them either, so it says so."""
    text = CONTROLNET_TEXT.split(", ControlNet 0")[0] + ", DeepCache: 3, Token merging ratio hr: 0.5"
    _, notes = infotext_to_form_values(text, GenerationLimits(), ["DPM++ 2M"], ["Karras"])
    # the hires pass's ToMe is a Setting here, as in A1111 (its paste sets it as an override)
    assert notes == ["Token merging ratio hr: 0.5: the hires pass merged that share of its tokens (ToMe); this is a "
                     "setting here ('Token merging ratio for high-res pass' in Settings > Sampler parameters), not a "
                     "form field: set it there to reproduce the image.",
                     "DeepCache (full UNet every 3 steps): approximations the image was made with; this server runs "
                     "its model without them, so the image will differ (`mixkit generate --infotext` reproduces "
                     "them)."]


def test_the_extensions_module_aliases_are_pasted_as_the_api_reads_them():
    text = CONTROLNET_TEXT.replace("Module: none", "Module: depth")
    values, _ = infotext_to_form_values(text, GenerationLimits(), ["DPM++ 2M"], ["Karras"], controlnet_units=2,
                                        controlnet_model_of={"tiny_canny": "canny"}.get)
    assert values["controlnet_1_preprocessor"] == "depth_midas"
