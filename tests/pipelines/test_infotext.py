"""Infotext writing and parsing against A1111's layout (`create_infotext` / `parse_generation_parameters`).

The golden texts are shaped like infotexts pasted from Civitai and A1111 1.0-1.10; the expected
dicts are what A1111's parser returns for them (values as strings, `NxM` split into -1/-2).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pipelines.infotext import build_infotext, format_value, parse_infotext, quote_value, split_infotext, unquote_value
from pipelines.infotext_defaults import old_hires_fix_first_pass_size
from pipelines.infotext_samplers import sampler_and_schedule, split_sampler_name

BRIEF_EXAMPLE = (
    "masterpiece, best quality, a lighthouse on a cliff at dusk\n"
    "Negative prompt: lowres, blurry\n"
    "Steps: 20, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 7, Seed: 1234, Size: 512x768, "
    "Model hash: 6ce0161689, Model: v1-5-pruned-emaonly, Clip skip: 2, Version: mixkit 0.1.0"
)

# (infotext, exact parse_infotext(text, defaults=False) result)
GOLDEN = [
    (
        BRIEF_EXAMPLE,
        {"Prompt": "masterpiece, best quality, a lighthouse on a cliff at dusk", "Negative prompt": "lowres, blurry",
         "Steps": "20", "Sampler": "DPM++ 2M", "Schedule type": "Karras", "CFG scale": "7", "Seed": "1234",
         "Size-1": "512", "Size-2": "768", "Model hash": "6ce0161689", "Model": "v1-5-pruned-emaonly",
         "Clip skip": "2", "Version": "mixkit 0.1.0"},
    ),
    (  # the example in A1111's own docstring: 2022 layout, 8-hex model hash
        "girl with an artist's beret, determined, blue eyes, desert scene, ((eyeshadow)), (coquettish), detailed\n"
        "Negative prompt: ugly, fat, (((deformed))), [blurry], bad anatomy, (extra_limb)\n"
        "Steps: 20, Sampler: Euler a, CFG scale: 7, Seed: 965400086, Size: 512x512, Model hash: 45dee52b",
        {"Prompt": "girl with an artist's beret, determined, blue eyes, desert scene, ((eyeshadow)), (coquettish), detailed",
         "Negative prompt": "ugly, fat, (((deformed))), [blurry], bad anatomy, (extra_limb)", "Steps": "20",
         "Sampler": "Euler a", "CFG scale": "7", "Seed": "965400086", "Size-1": "512", "Size-2": "512",
         "Model hash": "45dee52b"},
    ),
    (  # early 2023 Civitai: old-style sampler with the schedule in its name, ENSD
        "1girl, solo, long hair, looking at viewer, smile, (masterpiece:1.2), <lora:add_detail:0.6>\n"
        "Negative prompt: EasyNegative, (worst quality, low quality:1.4), nsfw\n"
        "Steps: 28, Sampler: DPM++ 2M Karras, CFG scale: 7.5, Seed: 2969446932, Size: 512x768, "
        "Model hash: 7f96a1a9ca, Model: anything-v4.5-pruned, Clip skip: 2, ENSD: 31337",
        {"Prompt": "1girl, solo, long hair, looking at viewer, smile, (masterpiece:1.2), <lora:add_detail:0.6>",
         "Negative prompt": "EasyNegative, (worst quality, low quality:1.4), nsfw", "Steps": "28",
         "Sampler": "DPM++ 2M Karras", "CFG scale": "7.5", "Seed": "2969446932", "Size-1": "512", "Size-2": "768",
         "Model hash": "7f96a1a9ca", "Model": "anything-v4.5-pruned", "Clip skip": "2", "ENSD": "31337"},
    ),
    (  # hires fix, Lora and TI hashes as quoted lists, A1111 1.6 version tag
        "portrait of a knight, intricate armor, dramatic lighting <lora:more_details:0.5>\n"
        "Negative prompt: easynegative, bad-hands-5\n"
        "Steps: 25, Sampler: DPM++ SDE Karras, CFG scale: 6, Seed: 1083915631, Size: 512x768, "
        "Model hash: 4199bcdd14, Model: revAnimated_v122, Denoising strength: 0.45, Clip skip: 2, "
        "Hires upscale: 2, Hires steps: 15, Hires upscaler: 4x-UltraSharp, "
        'Lora hashes: "more_details: 3b8aa1d351ef", '
        'TI hashes: "easynegative: c74b4e810b03, bad-hands-5: aa7651be154c", Version: v1.6.0',
        {"Prompt": "portrait of a knight, intricate armor, dramatic lighting <lora:more_details:0.5>",
         "Negative prompt": "easynegative, bad-hands-5", "Steps": "25", "Sampler": "DPM++ SDE Karras",
         "CFG scale": "6", "Seed": "1083915631", "Size-1": "512", "Size-2": "768", "Model hash": "4199bcdd14",
         "Model": "revAnimated_v122", "Denoising strength": "0.45", "Clip skip": "2", "Hires upscale": "2",
         "Hires steps": "15", "Hires upscaler": "4x-UltraSharp", "Lora hashes": "more_details: 3b8aa1d351ef",
         "TI hashes": "easynegative: c74b4e810b03, bad-hands-5: aa7651be154c", "Version": "v1.6.0"},
    ),
    (  # Japanese prompt: non-Latin-1 text stays as it is
        "桜の木の下の少女, 着物, 夕焼け, 高品質\n"
        "Negative prompt: 低品質, ぼやけた\n"
        "Steps: 30, Sampler: Euler a, Schedule type: Automatic, CFG scale: 7, Seed: 42, Size: 768x512, "
        "Model hash: e6bb9ea85b, Model: 日本語モデル_v1, Version: v1.9.4",
        {"Prompt": "桜の木の下の少女, 着物, 夕焼け, 高品質", "Negative prompt": "低品質, ぼやけた", "Steps": "30",
         "Sampler": "Euler a", "Schedule type": "Automatic", "CFG scale": "7", "Seed": "42", "Size-1": "768",
         "Size-2": "512", "Model hash": "e6bb9ea85b", "Model": "日本語モデル_v1", "Version": "v1.9.4"},
    ),
    (  # multi-line prompt and multi-line negative prompt
        "a cozy cabin in the woods,\nsnow falling,\n\nwarm light from the windows\n"
        "Negative prompt: people,\ntext, watermark\n"
        "Steps: 20, Sampler: UniPC, CFG scale: 5.5, Seed: 7, Size: 640x448",
        {"Prompt": "a cozy cabin in the woods,\nsnow falling,\n\nwarm light from the windows",
         "Negative prompt": "people,\ntext, watermark", "Steps": "20", "Sampler": "UniPC", "CFG scale": "5.5",
         "Seed": "7", "Size-1": "640", "Size-2": "448"},
    ),
    (  # no negative prompt at all
        "a red apple on a wooden table, studio photo\n"
        "Steps: 8, Sampler: LCM, Schedule type: SGM Uniform, CFG scale: 1.5, Seed: 99, Size: 1024x1024, "
        "Model hash: 31e35c80fc, Model: sd_xl_base_1.0, Version: v1.10.1",
        {"Prompt": "a red apple on a wooden table, studio photo", "Negative prompt": "", "Steps": "8",
         "Sampler": "LCM", "Schedule type": "SGM Uniform", "CFG scale": "1.5", "Seed": "99", "Size-1": "1024",
         "Size-2": "1024", "Model hash": "31e35c80fc", "Model": "sd_xl_base_1.0", "Version": "v1.10.1"},
    ),
    (  # an empty "Negative prompt:" line (written by some tools)
        "a watercolor fox\nNegative prompt: \nSteps: 20, Sampler: Euler, CFG scale: 7, Seed: 1, Size: 512x512",
        {"Prompt": "a watercolor fox", "Negative prompt": "", "Steps": "20", "Sampler": "Euler", "CFG scale": "7",
         "Seed": "1", "Size-1": "512", "Size-2": "512"},
    ),
    (  # quoted values holding commas, colons, escaped quotes and a newline
        "a cat\nNegative prompt: dog\n"
        'Steps: 20, Sampler: Euler, CFG scale: 7, Seed: 5, Size: 512x512, Model: "my:model, v2", '
        'ADetailer prompt: "a \\"smiling\\" face,\\nclose-up", ADetailer model: face_yolov8n.pt, '
        'Wildcard prompt: "__color__ hair: long"',
        {"Prompt": "a cat", "Negative prompt": "dog", "Steps": "20", "Sampler": "Euler", "CFG scale": "7", "Seed": "5",
         "Size-1": "512", "Size-2": "512", "Model": "my:model, v2", "ADetailer prompt": 'a "smiling" face,\nclose-up',
         "ADetailer model": "face_yolov8n.pt", "Wildcard prompt": "__color__ hair: long"},
    ),
    (  # SDXL with refiner: values with brackets but no comma stay unquoted
        "cinematic photo of an astronaut riding a horse, 35mm\n"
        "Negative prompt: cartoon, painting\n"
        "Steps: 40, Sampler: DPM++ 2M SDE, Schedule type: Exponential, CFG scale: 4.5, Seed: 3735928559, "
        "Size: 832x1216, Model hash: 31e35c80fc, Model: sd_xl_base_1.0, VAE hash: 235745af8d, "
        "VAE: sdxl_vae.safetensors, Refiner: sd_xl_refiner_1.0 [7440042bbd], Refiner switch at: 0.8, Version: v1.7.0",
        {"Prompt": "cinematic photo of an astronaut riding a horse, 35mm", "Negative prompt": "cartoon, painting",
         "Steps": "40", "Sampler": "DPM++ 2M SDE", "Schedule type": "Exponential", "CFG scale": "4.5",
         "Seed": "3735928559", "Size-1": "832", "Size-2": "1216", "Model hash": "31e35c80fc",
         "Model": "sd_xl_base_1.0", "VAE hash": "235745af8d", "VAE": "sdxl_vae.safetensors",
         "Refiner": "sd_xl_refiner_1.0 [7440042bbd]", "Refiner switch at": "0.8", "Version": "v1.7.0"},
    ),
    (  # batch keys: variation seed and seed resize (an NxM value other than Size)
        "a castle in the clouds\n"
        "Steps: 20, Sampler: Euler a, CFG scale: 7, Seed: 1000, Size: 512x512, Model hash: cc6cb27103, "
        "Variation seed: 2000, Variation seed strength: 0.3, Seed resize from: 768x768",
        {"Prompt": "a castle in the clouds", "Negative prompt": "", "Steps": "20", "Sampler": "Euler a",
         "CFG scale": "7", "Seed": "1000", "Size-1": "512", "Size-2": "512", "Model hash": "cc6cb27103",
         "Variation seed": "2000", "Variation seed strength": "0.3", "Seed resize from-1": "768",
         "Seed resize from-2": "768"},
    ),
    (  # img2img-style keys and an extension's nested key-values (ControlNet), quoted as one value
        "a house, line art\nNegative prompt: color\n"
        "Steps: 20, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 7, Seed: 11, Size: 512x512, "
        "Denoising strength: 0.75, Mask blur: 4, "
        'ControlNet 0: "Module: canny, Model: control_v11p_sd15_canny [d14c016b], Weight: 1", Version: v1.10.1',
        {"Prompt": "a house, line art", "Negative prompt": "color", "Steps": "20", "Sampler": "DPM++ 2M",
         "Schedule type": "Karras", "CFG scale": "7", "Seed": "11", "Size-1": "512", "Size-2": "512",
         "Denoising strength": "0.75", "Mask blur": "4",
         "ControlNet 0": "Module: canny, Model: control_v11p_sd15_canny [d14c016b], Weight: 1", "Version": "v1.10.1"},
    ),
    (  # emoji prompt and a non-Latin-1 negative prompt
        "a cute robot 🤖 holding a sign \"héllo\"\nNegative prompt: текст\n"
        "Steps: 15, Sampler: DDIM, CFG scale: 9, Seed: 0, Size: 512x512",
        {"Prompt": 'a cute robot 🤖 holding a sign "héllo"', "Negative prompt": "текст", "Steps": "15",
         "Sampler": "DDIM", "CFG scale": "9", "Seed": "0", "Size-1": "512", "Size-2": "512"},
    ),
    (  # hypernetwork-era infotext (late 2022): keys written but not part of the prompt
        "a portrait in the style of an oil painting\n"
        "Steps: 30, Sampler: DPM2 a Karras, CFG scale: 11, Seed: 123456, Size: 512x640, Model hash: 925997e9, "
        "Hypernet: anime_3, Hypernet strength: 0.8, Clip skip: 2",
        {"Prompt": "a portrait in the style of an oil painting", "Negative prompt": "", "Steps": "30",
         "Sampler": "DPM2 a Karras", "CFG scale": "11", "Seed": "123456", "Size-1": "512", "Size-2": "640",
         "Model hash": "925997e9", "Hypernet": "anime_3", "Hypernet strength": "0.8", "Clip skip": "2"},
    ),
    (  # old hires fix (late 2022): "First pass size" with the final size in "Size"
        "epic landscape, mountains\nNegative prompt: blurry\n"
        "Steps: 20, Sampler: Euler a, CFG scale: 7, Seed: 77, Size: 1024x768, Model hash: 7460a6fa, "
        "Denoising strength: 0.7, First pass size: 0x0",
        {"Prompt": "epic landscape, mountains", "Negative prompt": "blurry", "Steps": "20", "Sampler": "Euler a",
         "CFG scale": "7", "Seed": "77", "Size-1": "1024", "Size-2": "768", "Model hash": "7460a6fa",
         "Denoising strength": "0.7", "First pass size-1": "0", "First pass size-2": "0"},
    ),
    (  # a last line with fewer than three key-values is part of the prompt, as in A1111
        "a poem about time\nSteps: 20, Sampler: Euler",
        {"Prompt": "a poem about time\nSteps: 20, Sampler: Euler", "Negative prompt": ""},
    ),
    (  # Windows line endings and surrounding whitespace, as pasted from a browser
        "  a lake at dawn  \r\nNegative prompt: fog \r\nSteps: 20, Sampler: Heun, CFG scale: 7, Seed: 3, Size: 512x512\r\n",
        {"Prompt": "a lake at dawn", "Negative prompt": "fog", "Steps": "20", "Sampler": "Heun", "CFG scale": "7",
         "Seed": "3", "Size-1": "512", "Size-2": "512"},
    ),
]


@pytest.mark.parametrize(("text", "expected"), GOLDEN, ids=[f"golden{i}" for i in range(len(GOLDEN))])
def test_parse_golden_infotexts_exactly(text, expected):
    parsed = parse_infotext(text, defaults=False)
    assert parsed == expected
    assert list(parsed) == list(expected)  # A1111's key order: prompt, negative prompt, then as written


REBUILDABLE = [text for text, _ in GOLDEN if "\r" not in text and "Negative prompt: \n" not in text
               and "a poem about time" not in text]


@pytest.mark.parametrize("text", REBUILDABLE, ids=[f"rebuild{i}" for i in range(len(REBUILDABLE))])
def test_rebuilding_a_golden_infotext_reproduces_it_character_for_character(text):
    assert build_infotext(*split_infotext(text)) == text


def test_brief_example_written_from_python_values():
    params = {"Steps": 20, "Sampler": "DPM++ 2M", "Schedule type": "Karras", "CFG scale": 7.0, "Seed": 1234,
              "Size": "512x768", "Model hash": "6ce0161689", "Model": "v1-5-pruned-emaonly", "VAE hash": None,
              "VAE": None, "Variation seed": None, "Denoising strength": None, "Clip skip": 2,
              "Lora hashes": "", "Version": "mixkit 0.1.0"}
    text = build_infotext("masterpiece, best quality, a lighthouse on a cliff at dusk", "lowres, blurry", params)
    assert text == BRIEF_EXAMPLE


def test_no_negative_prompt_line_when_negative_prompt_is_empty():
    text = build_infotext("a fox", "", {"Steps": 20, "Sampler": "Euler", "CFG scale": 7})
    assert text == "a fox\nSteps: 20, Sampler: Euler, CFG scale: 7"


def test_parse_with_defaults_matches_a1111_full_result():
    parsed = parse_infotext(GOLDEN[1][0])
    assert parsed == {
        **GOLDEN[1][1], "Clip skip": "1", "Hires resize-1": 0, "Hires resize-2": 0, "Hires sampler": "Use same sampler",
        "Hires checkpoint": "Use same checkpoint", "Hires prompt": "", "Hires negative prompt": "",
        "Mask mode": "Inpaint masked", "Masked content": "original", "Inpaint area": "Whole picture",
        "Masked area padding": 32, "RNG": "GPU", "Schedule type": "Automatic", "Schedule max sigma": 0,
        "Schedule min sigma": 0, "Schedule rho": 0, "VAE Encoder": "Full", "VAE Decoder": "Full", "FP8 weight": "Disable",
    }
    assert "Cache FP16 weight for LoRA" not in parsed


def test_defaults_never_override_written_values():
    parsed = parse_infotext(BRIEF_EXAMPLE)
    assert parsed["Clip skip"] == "2"
    assert parsed["Schedule type"] == "Karras"


@pytest.mark.parametrize(("sampler", "schedule"), [
    ("DPM++ 2M Karras", "Karras"), ("DPM++ SDE Karras", "Karras"), ("DPM2 a Karras", "Karras"),
    ("DPM++ 2M SDE Exponential", "Exponential"), ("Euler a", "Automatic"), ("DPM++ 2M", "Automatic"),
])
def test_old_style_sampler_name_implies_schedule_type(sampler, schedule):
    text = f"x\nSteps: 20, Sampler: {sampler}, CFG scale: 7, Seed: 1, Size: 512x512"
    parsed = parse_infotext(text)
    assert parsed["Sampler"] == sampler  # kept as written, as A1111's parser does
    assert parsed["Schedule type"] == schedule


def test_fp8_weight_brings_its_lora_cache_default():
    parsed = parse_infotext("x\nSteps: 20, Sampler: Euler, CFG scale: 7, FP8 weight: Enable for SDXL")
    assert parsed["FP8 weight"] == "Enable for SDXL"
    assert parsed["Cache FP16 weight for LoRA"] is False


def test_hypernet_key_is_turned_into_prompt_syntax():
    parsed = parse_infotext(GOLDEN[13][0])
    assert parsed["Prompt"] == "a portrait in the style of an oil painting<hypernet:anime_3:0.8>"


def test_old_hires_fix_first_pass_size_is_restored():
    parsed = parse_infotext(GOLDEN[14][0])
    # 1024x768 final: sqrt(512*512/(1024*768)) scales to 591.2x443.4, rounded up to multiples of 64
    assert (parsed["Size-1"], parsed["Size-2"]) == (640, 448)
    assert (parsed["Hires resize-1"], parsed["Hires resize-2"]) == (1024, 768)


def test_explicit_first_pass_size_is_used_as_is():
    parsed = parse_infotext("x\nSteps: 20, Sampler: Euler, CFG scale: 7, Size: 1024x1024, First pass size: 512x512")
    assert (parsed["Size-1"], parsed["Size-2"], parsed["Hires resize-1"], parsed["Hires resize-2"]) == (512, 512, 1024, 1024)


def test_old_hires_fix_first_pass_size_formula():
    assert old_hires_fix_first_pass_size(512, 512) == (512, 512)
    assert old_hires_fix_first_pass_size(1024, 1024) == (512, 512)
    assert old_hires_fix_first_pass_size(2048, 512) == (1024, 256)  # scale exactly 0.5


@pytest.mark.parametrize(("value", "expected"), [
    ("Euler a", "Euler a"),
    ("a, b", '"a, b"'),
    ("key: value", '"key: value"'),
    ("two\nlines", '"two\\nlines"'),
    ('say "hi"', 'say "hi"'),  # A1111 does not quote for quotes alone
    ("日本語, テキスト", '"日本語, テキスト"'),  # ensure_ascii=False, as A1111
    ('"quoted"', '"\\"quoted\\""'),  # would be JSON-decoded by the reader if written raw
    (" padded", '" padded"'),  # the reader strips leading whitespace
    ("sd_xl_refiner_1.0 [7440042bbd]", "sd_xl_refiner_1.0 [7440042bbd]"),
])
def test_quote_value(value, expected):
    assert quote_value(value) == expected
    assert unquote_value(quote_value(value)) == value


def test_quote_value_agrees_with_a1111_rule_whenever_a1111_round_trips():
    """A1111's `quote`: JSON-quote iff the value has ',', newline or ':'. We quote more only where A1111 breaks."""
    for value in ["plain", "a,b", "a:b", "a\nb", "x [abc]", 'in "middle" only', "1.5", "ümlaut", "emoji 🤖, ok"]:
        a1111 = json.dumps(value, ensure_ascii=False) if ("," in value or "\n" in value or ":" in value) else value
        assert quote_value(value) == a1111


def test_unquote_value_leaves_broken_json_alone():
    assert unquote_value('"unterminated \\"') == '"unterminated \\"'
    assert unquote_value('"') == '"'
    assert unquote_value("") == ""


@pytest.mark.parametrize(("value", "expected"), [
    (7.0, "7"), (7.5, "7.5"), (0.75, "0.75"), (0.7, "0.7"), (1.0, "1"), (2, "2"), (1e-05, "1e-05"),
    (True, "True"), (False, "False"), (3735928559, "3735928559"), ("512x768", "512x768"), (-1.25, "-1.25"),
    (np.int64(1234), "1234"), (np.float64(7.0), "7"), (np.float32(7.5), "7.5"), (np.uint32(5), "5"),
])
def test_format_value_like_a1111(value, expected):
    assert format_value(value) == expected


ROUND_TRIP_CASES = [
    ("a cat", "a dog", {"Steps": 20, "Sampler": "Euler a", "CFG scale": 7.5, "Seed": 1, "Size": "512x512"}),
    ("桜\n富士山, 夜", "", {"Steps": 1, "Sampler": "DPM++ 2M", "Schedule type": "Karras", "CFG scale": 1.0}),
    ("line one\n\nline three", "neg a,\nneg b", {
        "Steps": 30, "Sampler": "DPM++ 2M SDE", "CFG scale": 4.5, "Seed": 0, "Size": "1024x1024",
        "Model": "model: with, punctuation", "Denoising strength": 0.45, "Clip skip": 2,
        "Lora hashes": "a: 0123456789ab, b: ba9876543210", "TI hashes": "neg: c74b4e810b03",
        "Note": '"already quoted"', "Padded": "  spaces  ", "Tiling": True, "Version": "mixkit 0.1.0"}),
    ("", "only negative", {"Steps": 20, "Sampler": "Euler", "CFG scale": 7, "Emoji": "🤖"}),
]


@pytest.mark.parametrize(("prompt", "negative", "params"), ROUND_TRIP_CASES)
def test_write_then_read_round_trips(prompt, negative, params):
    text = build_infotext(prompt, negative, params)
    assert split_infotext(text) == (prompt, negative, {k: format_value(v) for k, v in params.items()})
    parsed = parse_infotext(text, defaults=False)
    assert parsed["Prompt"] == prompt and parsed["Negative prompt"] == negative
    if "Size" in params:
        width, height = params["Size"].split("x")
        assert (parsed["Size-1"], parsed["Size-2"]) == (width, height)


@pytest.mark.parametrize(("prompt", "negative", "params", "error", "fragment"), [
    (1, "", {"Steps": 1, "Sampler": "Euler", "CFG scale": 7}, TypeError, "prompt must be a str"),
    ("a", None, {"Steps": 1, "Sampler": "Euler", "CFG scale": 7}, TypeError, "negative_prompt must be a str"),
    ("a", "", [("Steps", 1)], TypeError, "params must be a mapping"),
    ("a", "", {"Steps": 1, "Sampler": "Euler", "CFG: scale": 7}, ValueError, "'CFG: scale' is not valid"),
    ("a", "", {"Steps": 1, "Sampler": "Euler", "X": 7}, ValueError, "'X' is not valid"),
    ("a", "", {"Steps": 1, "Sampler": "Euler", " lead": 7}, ValueError, "' lead' is not valid"),
    ("a", "", {"Steps": 1, "Sampler": "Euler", "Loras": ["a", "b"]}, TypeError, "'Loras' must be str, int"),
    ("a", "", {"Steps": 1, "Sampler": "Euler", "CFG scale": math.nan}, ValueError, "'CFG scale' is nan"),
    ("a", "", {"Steps": 1, "Sampler": "Euler", "Seed": None, "Model": ""}, ValueError, "at least 3 non-empty"),
    ("a\nNegative prompt: b", "", {"Steps": 1, "Sampler": "Euler", "CFG scale": 7}, ValueError,
     "prompt line 'Negative prompt: b' starts with"),
    ("a", "x\n Negative prompt: b", {"Steps": 1, "Sampler": "Euler", "CFG scale": 7}, ValueError,
     "negative_prompt line ' Negative prompt: b' starts with"),
    ("a", "", {"Steps": 1, "Sampler": "Euler", "CFG scale": math.inf}, ValueError, "'CFG scale' is inf"),
])
def test_build_infotext_rejects_bad_input_naming_the_value(prompt, negative, params, error, fragment):
    with pytest.raises(error, match=None) as caught:
        build_infotext(prompt, negative, params)
    assert fragment in str(caught.value)


def test_parse_rejects_non_text():
    with pytest.raises(TypeError, match="infotext must be a str"):
        parse_infotext(b"Steps: 20")


@pytest.mark.parametrize(("name", "expected"), [
    ("DPM++ 2M Karras", ("DPM++ 2M", "Karras")),
    ("DPM++ 2M SDE Heun Karras", ("DPM++ 2M SDE Heun", "Karras")),
    ("DPM++ 2M SDE Exponential", ("DPM++ 2M SDE", "Exponential")),
    ("Euler SGMUniform", ("Euler", "SGM Uniform")),
    ("Euler sgm_uniform", ("Euler", "SGM Uniform")),
    ("DPM++ 2M", ("DPM++ 2M", None)),
    ("DDIM", ("DDIM", None)),  # the name alone, not a suffix
    ("Euler a", ("Euler a", None)),
])
def test_split_sampler_name(name, expected):
    assert split_sampler_name(name) == expected


def test_sampler_and_schedule_like_a1111_paste():
    assert sampler_and_schedule({"Sampler": "DPM++ 2M Karras"}) == ("DPM++ 2M", "Karras")
    assert sampler_and_schedule({"Sampler": "DPM++ 2M", "Schedule type": "Exponential"}) == ("DPM++ 2M", "Exponential")
    assert sampler_and_schedule({"Sampler": "DPM++ 2M", "Schedule type": "karras"}) == ("DPM++ 2M", "Karras")
    # the suffix wins over the key, as in A1111's get_sampler_and_scheduler
    assert sampler_and_schedule({"Sampler": "Euler Karras", "Schedule type": "Exponential"}) == ("Euler", "Karras")
    assert sampler_and_schedule({"Sampler": "Euler", "Schedule type": "Nonsense"}) == ("Euler", "Automatic")
    assert sampler_and_schedule({}) == (None, "Automatic")


def test_param_pairs_are_exactly_a1111s_findall_pairs():
    import random

    from pipelines.infotext import PARAM_PATTERN, param_pairs

    rng = random.Random(0)
    alphabet = 'ab1 -/:,"\\\t\né_'
    for _ in range(20_000):
        line = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        assert param_pairs(line) == PARAM_PATTERN.findall(line), line


class _CountingPattern:
    """PARAM_PATTERN, counting the start positions tried: `findall` tries every position of its text."""

    def __init__(self, pattern):
        self.pattern, self.starts = pattern, 0

    def findall(self, text):
        self.starts += len(text) + 1
        return self.pattern.findall(text)

    def match(self, text, position=0):
        self.starts += 1
        return self.pattern.match(text, position)


@pytest.mark.parametrize("line", ["x" * 100_000, "word " * 20_000 + "Steps: 1", "a-" * 50_000])
def test_a_long_line_of_key_characters_is_scanned_once_not_from_every_position(monkeypatch, line):
    # Retrying A1111's pattern at each of 200,000 letters took minutes (one HTTP request's `infotext` froze the
    # server); after a failed key, no start inside the same run can succeed.
    import pipelines.infotext as infotext

    counting = _CountingPattern(infotext.PARAM_PATTERN)
    monkeypatch.setattr(infotext, "PARAM_PATTERN", counting)
    prompt, negative, params = split_infotext(line)
    assert (prompt, negative, params) == (line, "", {})
    assert counting.starts <= 3
