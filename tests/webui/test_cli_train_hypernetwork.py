"""`mixkit train hypernetwork-create` / `mixkit train hypernetwork`: A1111's Create and Train hypernetwork from the
command line, with --set or kohya-style --name value flags; bad settings are one-line errors with the rule."""

from __future__ import annotations

import json

import torch

from mixkit.hypernetworks import load_hypernetwork
from webui.cli import main


def test_create_writes_an_a1111_file_mixkit_loads(tmp_path, capsys):
    output = tmp_path / "anime.pt"
    assert main(["train", "hypernetwork-create", "--output", str(output), "--layer_structure", "1, 1.5, 1",
                 "--activation_func", "leakyrelu", "--weight_init", "KaimingUniform", "--enable_sizes", "768", "320",
                 "--add_layer_norm", "--use_dropout", "--dropout_structure", "0, 0.3, 0"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {output}"
    data = torch.load(output, weights_only=True)
    assert (data["layer_structure"], data["activation_func"], data["weight_initialization"], data["is_layer_norm"],
            data["use_dropout"], data["dropout_structure"], data["step"], data["name"]) == (
        [1.0, 1.5, 1.0], "leakyrelu", "KaimingUniform", True, True, [0.0, 0.3, 0.0], 0, "anime")
    hypernetwork = load_hypernetwork(output)
    assert hypernetwork.widths == [320, 768] and hypernetwork.activation_func == "leakyrelu"


def test_create_keeps_an_existing_file_unless_told(tmp_path, capsys):
    output = tmp_path / "style.pt"
    assert main(["train", "hypernetwork-create", "--set", f"output={output}", "--set", "seed=1"]) == 0
    first = output.read_bytes()
    assert main(["train", "hypernetwork-create", "--set", f"output={output}", "--set", "seed=2"]) == 2
    assert "exists; set overwrite=true" in capsys.readouterr().err
    assert output.read_bytes() == first
    assert main(["train", "hypernetwork-create", "--set", f"output={output}", "--set", "seed=2", "--overwrite"]) == 0
    assert output.read_bytes() != first


def test_bad_shapes_are_one_line_errors_naming_the_rule(tmp_path, capsys):
    output = tmp_path / "x.pt"
    assert main(["train", "hypernetwork-create", "--output", str(output), "--layer_structure", "1, 2"]) == 2
    assert "layer_structure '1, 2' must start and end with 1" in capsys.readouterr().err
    assert main(["train", "hypernetwork-create", "--output", str(output), "--activation_func", "relux"]) == 2
    err = capsys.readouterr().err
    assert "activation_func 'relux' is not one A1111 knows; choose one of linear, relu, leakyrelu" in err
    assert main(["train", "hypernetwork-create", "--output", str(output), "--weight_init", "he"]) == 2
    assert "choose one of Normal, KaimingUniform, KaimingNormal, XavierUniform, XavierNormal" in capsys.readouterr().err
    assert not output.exists()


def test_train_reads_its_settings_and_a1111s_learn_rate(tmp_path, capsys):
    argv = ["train", "hypernetwork", "--set", "model=m", "--set", "dataset=d", "--set", f"output={tmp_path / 'h.pt'}",
            "--learning_rate_schedule", "5e-5:100, 5e-6:1500", "--layer_structure", "1, 2, 2, 1", "--print-config"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["learning_rate_schedule"], printed["layer_structure"], printed["learning_rate"]) == (
        "5e-5:100, 5e-6:1500", "1, 2, 2, 1", 1e-5)
    assert main(argv[:-1] + ["--learning_rate_schedule", "5e-5:100, 5e-6:50"]) == 2
    assert "steps must increase" in capsys.readouterr().err


def test_save_optimizer_state_is_a1111s_switch_and_checked(tmp_path, capsys):
    argv = ["train", "hypernetwork", "--set", "model=m", "--set", "dataset=d", "--set", f"output={tmp_path / 'h.pt'}",
            "--print-config"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["save_optimizer_state"] is False  # A1111's default: off
    assert main(argv[:-1] + ["--save_optimizer_state", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["save_optimizer_state"] is True
    assert main(argv[:-1] + ["--set", "save_optimizer_state=1"]) == 2
    assert "save_optimizer_state must be true or false, got 1" in capsys.readouterr().err


def test_the_trainers_are_listed(capsys):
    assert main(["train", "hypernet", "--print-config"]) == 2
    err = capsys.readouterr().err
    assert "hypernetwork" in err and "hypernetwork-create" in err
