"""Command-line strings -> typed app inputs, options and models (`appflow.command_values`), exact values."""

from __future__ import annotations

import json

import pytest

from appflow import describe_app
from appflow.command_values import (inputs_from_strings, models_from_strings, option_value, options_from_strings,
                                    read_inputs_json, split_assignments)


@pytest.fixture
def pictures(tmp_path):
    from PIL import Image

    for name in ("b.png", "a.jpg"):
        Image.new("RGB", (8, 8)).save(tmp_path / name)
    (tmp_path / "notes.txt").write_text("not an image")
    return tmp_path


def test_assignments_split_at_the_first_equals_sign_and_keep_the_rest_verbatim():
    assert split_assignments(["prompt=a=b, c", "x="], "--input") == [("prompt", "a=b, c"), ("x", "")]
    with pytest.raises(ValueError, match=r"--input 'prompt' must be NAME=VALUE"):
        split_assignments(["prompt"], "--input")
    with pytest.raises(ValueError, match="NAME=VALUE"):
        split_assignments(["=cat"], "--option")


@pytest.mark.parametrize("default, text, expected", [
    (20, "30", 30), (20, "7.5", 7.5), (7.0, "7", 7.0), (False, "yes", True), (True, "off", False),
    ("", "  spaced  ", "  spaced  "), ([], "a.safetensors:0.5", ["a.safetensors:0.5"]), ([], '["a", "b"]', ["a", "b"]),
    ({}, '{"k": 1}', {"k": 1}),
    (None, "auto", None), (None, "None", None), (None, "512", 512), (None, "7.5", 7.5), (None, "true", True),
    (None, "Euler a", "Euler a"), (None, "nan", float("nan")), (None, "[1, 2]", [1, 2]),
])
def test_an_option_is_typed_by_its_default(default, text, expected):
    value = option_value("--option x", text, default)
    if isinstance(expected, float) and expected != expected:
        assert value != value
    else:
        assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("default, text, message", [
    (20, "many", "takes a number, got 'many'"), (False, "maybe", "takes true or false"),
    ([], "[1", "takes JSON"), ({}, "[1]", "takes a JSON dict, got list"),
])
def test_an_option_of_the_wrong_type_names_the_flag(default, text, message):
    with pytest.raises(ValueError, match=r"--option x " + message.replace("[", r"\[").replace("(", r"\(")):
        option_value("--option x", text, default)


def test_options_are_canonical_collect_list_values_and_refuse_unknown_or_repeated_ones():
    description = describe_app("text2image_generation")
    given = [("guidance_scale", "6"), ("steps", "12"), ("loras", "a:0.5"), ("loras", "b"), ("sampler", "Euler a")]
    assert options_from_strings(description, given) == {"cfg_scale": 6, "steps": 12, "loras": ["a:0.5", "b"],
                                                         "sampler": "Euler a"}
    with pytest.raises(ValueError, match=r"App 'text2image_generation' has no option 'stepz'; its options: "
                                         r"batch_count, .*mixkit apps describe text2image_generation"):
        options_from_strings(description, [("stepz", "1")])
    with pytest.raises(ValueError, match="--option steps is given twice"):
        options_from_strings(description, [("steps", "1"), ("steps", "2")])
    with pytest.raises(ValueError, match="option 'cfg_scale' was also given as 'guidance_scale'"):
        options_from_strings(description, [("guidance_scale", "1"), ("cfg_scale", "2")])


def test_models_by_role_or_in_order_but_not_both():
    description = describe_app("openset_det_sam")
    assert models_from_strings(description, [("segmenter", "s")], []) == {"segmenter": "s"}
    assert models_from_strings(description, [], ["d", "s"]) == ["d", "s"]
    assert models_from_strings(description, [], []) is None
    with pytest.raises(ValueError, match="not both"):
        models_from_strings(description, [("segmenter", "s")], ["d"])
    with pytest.raises(ValueError, match=r"has no model role 'vae'; its roles: detector, segmenter"):
        models_from_strings(description, [("vae", "v")], [])
    with pytest.raises(ValueError, match=r"takes 2 model\(s\) \(detector, segmenter\), got 3"):
        models_from_strings(description, [], ["a", "b", "c"])


def test_image_inputs_are_checked_files_and_a_folder_gives_its_images_by_name(pictures):
    classify = describe_app("zero_shot_classification")  # image batches, labels is a list
    typed = inputs_from_strings(classify, [("image", str(pictures)), ("labels", "a cat"), ("labels", "a dog")])
    assert typed == {"image": [str(pictures / "a.jpg"), str(pictures / "b.png")], "labels": ["a cat", "a dog"]}
    one = inputs_from_strings(classify, [("image", str(pictures / "b.png")), ("labels", "x")])
    assert one == {"image": str(pictures / "b.png"), "labels": ["x"]}
    inpaint = describe_app("mask_guided_inpainting")
    with pytest.raises(ValueError, match=r"input 'mask' \(image\): .* is a folder; this input takes one image file"):
        inputs_from_strings(inpaint, [("image", str(pictures / "b.png")), ("mask", str(pictures)),
                                      ("inpaint_prompt", "x")])
    with pytest.raises(ValueError, match=r"input 'image' \(image\) takes one image, got 2"):
        inputs_from_strings(inpaint, [("image", "u"), ("image", "v"), ("mask", "m"), ("inpaint_prompt", "x")])
    with pytest.raises(ValueError, match=r"input 'image' \(image\): no image file 'missing.png'"):
        inputs_from_strings(inpaint, [("image", "missing.png"), ("mask", "m"), ("inpaint_prompt", "x")])
    blend = describe_app("dual_text_and_image_guided_generation")
    assert inputs_from_strings(blend, [("images", str(pictures / "b.png")), ("prompt", "p")])["images"] == \
        [str(pictures / "b.png")]


def test_inputs_json_aliases_required_and_unknown_inputs(pictures, tmp_path):
    captions = describe_app("image2text_generation")
    file = tmp_path / "inputs.json"
    file.write_text(json.dumps({"image": [str(pictures / "a.jpg"), str(pictures / "b.png")], "blip2_prompt": "a"}))
    typed = inputs_from_strings(captions, [("question", "what?")], read_inputs_json(file))
    assert typed == {"image": [str(pictures / "a.jpg"), str(pictures / "b.png")], "prompt": "a", "question": "what?"}
    with pytest.raises(ValueError, match="given both by --input and in --inputs-json"):
        inputs_from_strings(captions, [("prompt", "b")], read_inputs_json(file))
    with pytest.raises(ValueError, match=r"needs input 'image' \(image\): pass --input image=PATH"):
        inputs_from_strings(captions, [], None)
    with pytest.raises(ValueError, match=r"has no input\(s\) \['img'\]; its inputs: image \(image\), prompt \(text\?\)"):
        inputs_from_strings(captions, [("img", "x")], None)
    with pytest.raises(ValueError, match=r"input 'prompt' \(text\) takes text, got int"):
        inputs_from_strings(captions, [], {"image": str(pictures / "a.jpg"), "prompt": 3})
    file.write_text("[1]")
    with pytest.raises(ValueError, match="must hold a JSON object"):
        read_inputs_json(file)
    with pytest.raises(ValueError, match="--inputs-json: no file"):
        read_inputs_json(tmp_path / "nope.json")


def test_inputs_json_past_its_cap_or_nested_too_deeply_is_refused_without_reading_it_all(tmp_path, monkeypatch):
    import appflow.command_values as command_values

    monkeypatch.setattr(command_values, "MAX_INPUTS_JSON_CHARS", 16)
    file = tmp_path / "inputs.json"
    file.write_text(json.dumps({"prompt": "x" * 10}))  # 17 characters
    with pytest.raises(ValueError, match="holds more than 0 MB"):
        read_inputs_json(file)
    monkeypatch.setattr(command_values, "MAX_INPUTS_JSON_CHARS", 1024 * 1024)
    file.write_text("[" * 200_000)
    with pytest.raises(ValueError, match="nests its JSON too deeply"):
        read_inputs_json(file)
    file.write_text(json.dumps({"prompt": "x" * 10}))
    assert read_inputs_json(file) == {"prompt": "x" * 10}


def test_an_option_or_input_nested_too_deeply_is_refused_naming_the_flag():
    with pytest.raises(ValueError, match=r"--option loras takes JSON \(list\) nested less deeply"):
        option_value("--option loras", "[" * 100_000, [])
    with pytest.raises(ValueError, match="nested less deeply"):
        option_value("--option x", "[" * 100_000, None)

