"""`mixkit apps` and `python -m appflow list`: every app with inputs, outputs and default models.

(Kept under tests/appflow because the CLI module is a thin layer over `appflow.listing`.)
"""

from __future__ import annotations

import json

import pytest

import webui.cli
from appflow import APPS
from appflow.__main__ import main as appflow_main


@pytest.fixture
def cli(monkeypatch):
    monkeypatch.setattr(webui.cli, "SUBCOMMANDS", ["apps"])
    return webui.cli.main


def test_mixkit_apps_lists_every_app_with_inputs_outputs_and_default_models(cli, capsys):
    assert cli(["apps"]) == 0
    out = capsys.readouterr().out
    for name in APPS.names():
        assert f"\n{name}\n" in f"\n{out}"
    block = out.split("\n\nopenset_det_sam\n")[1].split("\n\n")[0]
    assert "inputs:  image: image, prompt: text" in block
    assert "outputs: result, labels, boxes, scores, seg_masks" in block
    assert "detector (grounding-dino): IDEA-Research/grounding-dino-tiny" in block
    assert "segmenter (sam): facebook/sam-vit-base" in block


def test_json_output_for_one_app_and_optional_inputs_are_marked(cli, capsys):
    assert cli(["apps", "image2text_generation", "--json"]) == 0
    [info] = json.loads(capsys.readouterr().out)
    assert info["inputs"] == {"image": "image", "prompt": "text?", "question": "text?"}
    assert info["models"]["captioner"]["kind"] == "vlm-generative"


def test_unknown_app_is_a_one_line_error_listing_the_apps(cli, capsys):
    assert cli(["apps", "qr_art"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mixkit: error: Unknown AppFlow app 'qr_art'") and "'qrcode_art'" in err
    assert err.count("\n") == 1


def test_python_m_appflow_list_prints_the_same_listing(cli, capsys):
    assert appflow_main(["list"]) == 0
    from_module = capsys.readouterr().out
    cli(["apps"])
    assert capsys.readouterr().out == from_module
    assert appflow_main(["list", "nope"]) == 2


def test_the_listing_shows_each_apps_options_with_defaults_and_aliases(cli, capsys):
    assert cli(["apps", "text2image_generation"]) == 0
    out = capsys.readouterr().out
    options = out.split("  options: ")[1].split("\n  also:")[0]
    for shown in ("negative_prompt=''", "steps=auto", "cfg_scale=auto", "seed=-1", "width=auto", "batch_size=1"):
        assert shown in options
    assert "also:    guidance_scale (= cfg_scale)" in out
    assert cli(["apps", "image2image_text_guided_upscaling", "--json"]) == 0
    [info] = json.loads(capsys.readouterr().out)
    assert info["options"]["cfg_scale"] == 9.0 and info["options"]["seed"] == -1  # as the other SD apps name them
    assert info["option_aliases"] == {"guidance_scale": "cfg_scale", "num_inference_steps": "steps"}
    assert appflow_main(["list", "inpainting"]) == 0  # PaddleMIX's name lists the app it opens
    out = capsys.readouterr().out
    assert out.startswith("text_guided_inpainting\n") and "  aliases: inpainting\n" in out
