"""`mixkit train blip2-stage1 | blip2-stage2 | minigpt4` through the CLI's main, chained as a user would run them."""

from __future__ import annotations

import json

import pytest
import torch

from mixkit.models.vlm.modular import VisionLanguageModel
from mixkit.testing.tiny_vlm_training import (
    build_tiny_chat_lm, build_tiny_modular_blip2, build_tiny_vision_tower, write_colour_captions, write_colour_vqa,
)
from webui.cli import main

QFORMER = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 37,
           "cross_attention_frequency": 1, "num_query_tokens": 4, "max_position_embeddings": 32}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-world")
    return {"root": root, "vision": build_tiny_vision_tower(root / "vision"),
            "blip2": build_tiny_modular_blip2(root / "blip2"), "lm": build_tiny_chat_lm(root / "chat-lm"),
            "captions": write_colour_captions(root / "captions"), "vqa": write_colour_vqa(root / "vqa")}


def _train(name, config_file, *overrides):
    return main(["train", name, "--config", str(config_file), *[a for o in overrides for a in ("--set", o)]])


def test_stage1_then_stage2_then_minigpt4(world, tmp_path, capsys):
    from mixkit.training.blip2_stage1_output import load_blip2_stage1

    stage1_config = tmp_path / "stage1.json"
    stage1_config.write_text(json.dumps({
        "dataset": str(world["captions"]), "output": str(tmp_path / "stage1"), "vision_model": str(world["vision"]),
        "tokenizer": str(world["blip2"] / "tokenizer"), "qformer": QFORMER, "embed_dim": 8, "batch_size": 4,
        "max_steps": 2}))
    assert _train("blip2-stage1", stage1_config) == 0
    assert f"wrote {tmp_path / 'stage1'}" in capsys.readouterr().out
    bridge, heads = load_blip2_stage1(tmp_path / "stage1")
    assert bridge.config.qformer.num_query_tokens == 4 and heads.lm_head.out_features > 300

    stage2_config = tmp_path / "stage2.json"
    stage2_config.write_text(json.dumps({"model": str(world["blip2"]), "dataset": str(world["vqa"]),
                                         "output": str(tmp_path / "stage2"), "batch_size": 4, "max_steps": 2}))
    assert _train("blip2-stage2", stage2_config, f"qformer_from={tmp_path / 'stage1'}",
                  "prompt=Question: {} Short answer:", "train_language_model=true") == 0
    stage2 = VisionLanguageModel.from_pretrained(tmp_path / "stage2")
    assert json.loads((tmp_path / "stage2" / "mixkit_training_config.json").read_text())["qformer_from"]
    task = json.loads((tmp_path / "stage2" / "config.json").read_text())
    assert (task["model_type"], task["vqa_template"], task["image_size"]) == ("mixkit-vlm", "Question: {} Short answer:", 30)

    minigpt4_config = tmp_path / "minigpt4.json"
    minigpt4_config.write_text(json.dumps({"blip2": str(tmp_path / "stage2"), "language_model": str(world["lm"]),
                                           "dataset": str(world["captions"]), "output": str(tmp_path / "minigpt4"),
                                           "batch_size": 4, "max_steps": 2}))
    assert _train("minigpt4", minigpt4_config) == 0
    minigpt4 = VisionLanguageModel.from_pretrained(tmp_path / "minigpt4")
    qformer_a, qformer_b = stage2.bridge.qformer.state_dict(), minigpt4.bridge.qformer.state_dict()
    assert all(torch.equal(qformer_a[k], qformer_b[k]) for k in qformer_a)  # MiniGPT-4 reuses the frozen Q-Former
    assert (tmp_path / "minigpt4" / "tokenizer").is_dir()


def test_stage1_cli_resume_matches_a_straight_run(world, tmp_path):
    from mixkit.training.blip2_stage1_output import load_blip2_stage1

    config = tmp_path / "stage1.json"
    config.write_text(json.dumps({"dataset": str(world["captions"]), "vision_model": str(world["blip2"]),
                                  "tokenizer": str(world["blip2"] / "tokenizer"), "qformer": QFORMER, "embed_dim": 8,
                                  "batch_size": 2, "max_steps": 3}))
    assert _train("blip2-stage1", config, f"output={tmp_path / 'a'}") == 0
    assert main(["train", "blip2-stage1", "--config", str(config), "--set", f"output={tmp_path / 'b'}",
                 "--stop-at-step", "1"]) == 0
    assert not (tmp_path / "b").exists() and (tmp_path / "b-checkpoints" / "step-00000001.pt").is_file()
    assert _train("blip2-stage1", config, f"output={tmp_path / 'b'}", f"resume_from={tmp_path / 'b-checkpoints'}") == 0
    (bridge_a, heads_a), (bridge_b, heads_b) = load_blip2_stage1(tmp_path / "a"), load_blip2_stage1(tmp_path / "b")
    for a, b in [(bridge_a.state_dict(), bridge_b.state_dict()), (heads_a.state_dict(), heads_b.state_dict())]:
        assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("name, overrides, message", [
    ("blip2-stage1", ["dataset=d", "output=o"], "blip2-stage1 needs \\['vision_model', 'tokenizer'\\]"),
    ("blip2-stage1", ["dataset=d", "qformer={\"hidden_sise\": 8}"], "qformer has unknown key\\(s\\) \\['hidden_sise'\\]"),
    ("blip2-stage2", ["model=m", "dataset=d", "output=o", "prompt=Q: {} {}"], "at most one"),
    ("minigpt4", ["dataset=d", "output=o"], "needs blip2"),
])
def test_user_errors_are_one_line(name, overrides, message, capsys):
    import re

    assert main(["train", name, *[a for o in overrides for a in ("--set", o)]]) == 2
    error = capsys.readouterr().err
    assert error.startswith("mixkit: error:") and re.search(message, error), error
