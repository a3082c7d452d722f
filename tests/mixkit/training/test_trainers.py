"""The trainer registry and the `mixkit train` command built on it (run through its own parser)."""

from __future__ import annotations

import argparse
import json

import pytest

from mixkit.errors import UnknownNameError
from mixkit.training.trainers import TRAINERS
from webui.cli import train as train_cli


def _run(argv):
    parser = argparse.ArgumentParser()
    train_cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["train", *argv])
    return args.func(args)


@pytest.mark.parametrize("name", TRAINERS.names())
def test_every_trainer_loads_a_config_class_with_check(name):
    config_cls, train = TRAINERS.get(name).load()
    assert callable(train) and hasattr(config_cls, "check") and hasattr(config_cls, "to_json")


def test_unknown_trainer_lists_valid_names():
    with pytest.raises(UnknownNameError, match="sd-lora"):
        _run(["dreamfusion"])


def test_config_file_plus_overrides(tmp_path, capsys):
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"model": "m", "dataset": "d", "output": "o.safetensors", "rank": 8}))
    assert _run(["sd-lora", "--config", str(config), "--set", "learning_rate=3e-4", "--set", "network=locon",
                 "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["rank"], printed["learning_rate"], printed["network"]) == (8, 3e-4, "locon")


@pytest.mark.parametrize("argv, message", [
    (["--set", "model=m", "--set", "dataset=d"], "missing required setting"),
    (["--set", "model=m", "--set", "dataset=d", "--set", "output=o", "--set", "rnak=4"], "unknown setting.*rnak"),
    (["--set", "model=m", "--set", "dataset=d", "--set", "output=o", "--set", "rank=0"], "rank must be a positive"),
    (["--set", "oops"], "KEY=VALUE"),
])
def test_bad_cli_settings(argv, message):
    with pytest.raises(ValueError, match=message):
        _run(["sd-lora", *argv, "--print-config"])


def test_cli_trains_and_reports(tiny_sd1_dir, colour_dataset, tmp_path, capsys):
    output = tmp_path / "cli.safetensors"
    assert _run(["sd-lora", "--set", f"model={tiny_sd1_dir}", "--set", f"dataset={colour_dataset}",
                 "--set", f"output={output}", "--set", "resolution=32", "--set", "max_steps=1"]) == 0
    assert output.is_file() and f"wrote {output}" in capsys.readouterr().out


def test_mixed_precision_auto_picks_bf16_only_where_it_is_fast():
    from mixkit.training.accelerator_setup import resolve_mixed_precision

    assert resolve_mixed_precision("auto", cuda=False, cpu_bf16=True) == "bf16"  # AVX512-BF16 / AMX CPU
    assert resolve_mixed_precision("auto", cuda=False, cpu_bf16=False) == "no"  # emulated bf16 is slower than fp32
    assert resolve_mixed_precision("auto", cuda=True, cuda_bf16=True) == "bf16"
    assert resolve_mixed_precision("auto", cuda=True, cuda_bf16=False) == "fp16"
    assert resolve_mixed_precision("fp16", cuda=False, cpu_bf16=True) == "fp16"  # explicit values are kept


def test_cli_trains_an_embedding_from_a_kohya_config(tiny_sd1_dir, colour_dataset, tmp_path, capsys):
    """`mixkit train ti` takes the same flags as `sd-lora` and a kohya train_textual_inversion.py config file as it
    is: the file goes to <output_dir>/<token_string>.safetensors, as kohya names it without output_name."""
    config = tmp_path / "ti.toml"
    config.write_text(f"""
[model_arguments]
pretrained_model_name_or_path = "{tiny_sd1_dir}"
[dataset_arguments]
train_data_dir = "{colour_dataset}"
resolution = "32,32"
train_batch_size = 3
[training_arguments]
output_dir = "{tmp_path / 'out'}"
token_string = "zqx"
init_word = "red"
num_vectors_per_token = 2
use_object_template = true
max_train_steps = 2
learning_rate = 0.005
save_model_as = "safetensors"
mixed_precision = "no"
""", encoding="utf-8")
    assert _run(["ti", "--config", str(config), "--set", "seed=5"]) == 0
    output = tmp_path / "out" / "zqx.safetensors"
    assert output.is_file() and f"wrote {output}" in capsys.readouterr().out
    from safetensors.torch import load_file

    assert load_file(output)["emb_params"].shape[0] == 2


def test_kohya_ti_config_with_save_model_as_pt_writes_a1111_pt(tmp_path, capsys):
    """kohya's textual-inversion trainers default to .pt: save_model_as names the suffix of <output_dir>/<name>."""
    config = tmp_path / "ti.toml"
    config.write_text(f'pretrained_model_name_or_path = "m"\ntrain_data_dir = "d"\noutput_dir = "{tmp_path}"\n'
                      'token_string = "zqx"\nsave_model_as = "pt"\n', encoding="utf-8")
    assert _run(["ti", "--config", str(config), "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["output"] == str(tmp_path / "zqx.pt")
    with pytest.raises(ValueError, match="save_model_as 'ckpt' must be 'safetensors' or 'pt'"):
        _run(["ti", "--config", str(config), "--set", "save_model_as=ckpt", "--print-config"])
    with pytest.raises(ValueError, match="mixkit writes .safetensors only"):  # the LoRA trainer keeps refusing it
        _run(["sd-lora", "--config", str(config), "--print-config"])


def test_kohya_ti_config_without_save_model_as_writes_pt_as_kohya(tmp_path, capsys):
    """kohya's train_textual_inversion.py declares --save_model_as with default "pt", so a config that leaves it out
    gets <output_dir>/<token_string>.pt; the LoRA trainer's default stays .safetensors, and an output given directly
    keeps its own suffix."""
    config = tmp_path / "ti.toml"
    config.write_text(f'pretrained_model_name_or_path = "m"\ntrain_data_dir = "d"\noutput_dir = "{tmp_path}"\n'
                      'token_string = "zqx"\n', encoding="utf-8")
    assert _run(["ti", "--config", str(config), "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["output"] == str(tmp_path / "zqx.pt") and printed["save_model_as"] is None
    assert _run(["ti", "--config", str(config), "--set", f"output={tmp_path / 'x.safetensors'}", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["output"] == str(tmp_path / "x.safetensors")
    lora = tmp_path / "lora.toml"
    lora.write_text(f'pretrained_model_name_or_path = "m"\ntrain_data_dir = "d"\noutput_dir = "{tmp_path}"\n',
                    encoding="utf-8")
    assert _run(["sd-lora", "--config", str(lora), "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["output"] == str(tmp_path / "last.safetensors")
