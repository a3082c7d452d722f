"""kohya's command-line options pasted after `mixkit train`: read as kohya's argparse reads them (`--name=value`,
`--name value`, `--name v1 v2` lists, bare switches) and translated like the same names in a --config file. They
used to end in argparse's bare "unrecognized arguments"."""

from __future__ import annotations

import json

import pytest

from webui.cli import main
from webui.cli.train import kohya_flags


def _printed_config(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_kohya_flags_read_as_kohyas_argparse_reads_them():
    assert kohya_flags(["--network_dim=16", "--enable_bucket", "--network_args", "conv_dim=4", "conv_alpha=2",
                        "--resolution", "512,512", "--learning_rate", "1e-4"]) == [
        "network_dim=16", "enable_bucket=true", 'network_args=["conv_dim=4", "conv_alpha=2"]', "resolution=512,512",
        "learning_rate=1e-4"]


def test_a_kohya_command_line_becomes_the_same_config_as_its_toml(tmp_path, capsys):
    toml = tmp_path / "run.toml"
    toml.write_text('pretrained_model_name_or_path = "m"\ntrain_data_dir = "d"\noutput_dir = "out"\n'
                    'output_name = "x"\nnetwork_dim = 8\nmax_train_steps = 5\n', encoding="utf-8")
    flags = ["--network_dim", "16", "--network_args", "conv_dim=4", "rank_dropout=0.1", "--network_train_unet_only",
             "--resolution=64,64"]
    from_flags = _printed_config(capsys, ["train", "sd-lora", "--config_file", str(toml), *flags, "--print-config"])
    toml.write_text(toml.read_text(encoding="utf-8").replace("network_dim = 8", "network_dim = 16")
                    + 'network_args = ["conv_dim=4", "rank_dropout=0.1"]\nnetwork_train_unet_only = true\n'
                      'resolution = "64,64"\n', encoding="utf-8")
    assert from_flags == _printed_config(capsys, ["train", "sd-lora", "--config", str(toml), "--print-config"])
    assert (from_flags["rank"], from_flags["conv_rank"], from_flags["network"], from_flags["train_text_encoder"],
            from_flags["resolution"], from_flags["output"]) == (16, 4, "locon", False, 64, "out/x.safetensors")


def test_other_commands_still_refuse_unknown_flags(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["samplers", "--network_dim", "4"])
    assert exit_info.value.code == 2 and "unrecognized arguments: --network_dim 4" in capsys.readouterr().err


def test_a_stray_word_and_two_config_files_are_one_line_errors(tmp_path, capsys):
    assert main(["train", "sd-lora", "--print-config", "--network_dim", "4", "--", "x"]) == 2
    assert "unexpected argument '--'" in capsys.readouterr().err
    assert main(["train", "sd-lora", "--config", "a.toml", "--config_file", "b.toml"]) == 2
    assert "--config or kohya's --config_file" in capsys.readouterr().err


def test_a_kohya_command_line_trains_the_text_encoder_unless_told_not_to_as_kohya(tmp_path, capsys):
    """kohya's train_network.py trains the text encoder's adapters unless --network_train_unet_only, as a kohya
    file does here; a file's own network_train_unet_only is not undone by flags that leave it out."""
    base = ["train", "sd-lora", "--pretrained_model_name_or_path=m", "--train_data_dir=d", "--output_dir=o"]
    assert _printed_config(capsys, [*base, "--print-config"])["train_text_encoder"] is True
    assert _printed_config(capsys, [*base, "--network_train_unet_only", "--print-config"])["train_text_encoder"] is False
    toml = tmp_path / "run.toml"
    toml.write_text("network_train_unet_only = true\n", encoding="utf-8")
    assert _printed_config(capsys, [*base, "--config_file", str(toml), "--print-config"])["train_text_encoder"] is False
    # mixkit's own --set names keep mixkit's default (the UNet only)
    assert _printed_config(capsys, ["train", "sd-lora", "--set", "model=m", "--set", "dataset=d", "--set",
                                    "output=o.safetensors", "--print-config"])["train_text_encoder"] is False


def test_a_mistyped_flag_is_named_as_typed(capsys):
    assert main(["train", "sd-lora", "--set", "model=m", "--network_dimm", "4", "--print-config"]) == 2
    assert "unknown setting(s) network_dimm (from --network_dimm) for SDLoraTrainingConfig" in capsys.readouterr().err
