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


def test_a_command_line_network_args_replaces_the_files_list_as_in_kohya(tmp_path, capsys):
    # kohya's read_config_from_file parses the command line over the file's values: a --network_args list replaces
    # the file's whole list, so the file's conv_dim (mixkit's LoCon) is gone, not merged with the new entries.
    toml = tmp_path / "run.toml"
    toml.write_text('pretrained_model_name_or_path = "m"\ntrain_data_dir = "d"\noutput_dir = "out"\n'
                    'network_args = ["conv_dim=2", "loraplus_lr_ratio=16"]\n', encoding="utf-8")
    from_file = _printed_config(capsys, ["train", "sd-lora", "--config_file", str(toml), "--print-config"])
    assert (from_file["network"], from_file["conv_rank"], from_file["loraplus_lr_ratio"]) == ("locon", 2, 16)
    replaced = _printed_config(capsys, ["train", "sd-lora", "--config_file", str(toml), "--print-config",
                                        "--network_args", "loraplus_unet_lr_ratio=8",
                                        "loraplus_text_encoder_lr_ratio=2"])
    assert (replaced["network"], replaced["conv_rank"], replaced["loraplus_lr_ratio"],
            replaced["loraplus_unet_lr_ratio"], replaced["loraplus_text_encoder_lr_ratio"]) == ("lora", 4, None, 8, 2)
    # (conv_rank 4 is the default again: the file's conv_dim=2 went with its list)
    # --set network_args=... is the command line too
    with_set = _printed_config(capsys, ["train", "sd-lora", "--config", str(toml), "--print-config",
                                        "--set", 'network_args=["rank_dropout=0.1"]'])
    assert (with_set["network"], with_set["loraplus_lr_ratio"], with_set["rank_dropout"]) == ("lora", None, 0.1)


def test_a_width_height_resolution_from_a_kohya_command_line_or_file(tmp_path, capsys):
    toml = tmp_path / "run.toml"
    toml.write_text('pretrained_model_name_or_path = "m"\ntrain_data_dir = "d"\noutput_dir = "out"\n'
                    'resolution = "512,768"\nlr_scheduler = "cosine"\nlr_scheduler_args = ["num_cycles=1.0"]\n',
                    encoding="utf-8")
    from_file = _printed_config(capsys, ["train", "sd-lora", "--config_file", str(toml), "--print-config"])
    assert (from_file["resolution"], from_file["lr_schedule"], from_file["lr_schedule_args"]) == \
        ([512, 768], "cosine", {"num_cycles": 1.0})
    square = _printed_config(capsys, ["train", "sd-lora", "--config_file", str(toml), "--print-config",
                                      "--resolution", "640,640"])
    assert square["resolution"] == 640
    assert main(["train", "sd-lora", "--config_file", str(toml), "--print-config", "--resolution", "512,770"]) == 2
    assert "each side must be positive and divisible by 8" in capsys.readouterr().err


def test_lycoris_dora_switch_on_a_kohya_command_line_and_as_a_setting(capsys):
    """LyCORIS's documented `--network_args "dora_wd=True"` (True, not JSON's true) and mixkit's own dora_wd key."""
    base = ["train", "sd-lora", "--set", "model=m", "--set", "dataset=d", "--set", "output=o.safetensors"]
    from_flags = _printed_config(capsys, [*base, "--network_args", "conv_dim=4", "dora_wd=True", "--print-config"])
    assert (from_flags["dora_wd"], from_flags["network"]) == (True, "locon")
    assert _printed_config(capsys, [*base, "--set", "dora_wd=true", "--print-config"])["dora_wd"] is True
    assert _printed_config(capsys, [*base, "--print-config"])["dora_wd"] is False


def test_lycoris_network_module_in_the_file_reads_network_args_from_the_command_line(capsys, tmp_path):
    """kohya's command line replaces the file's network_args; LyCORIS's options are read with the file's
    network_module wherever each was given."""
    toml = tmp_path / "run.toml"
    toml.write_text('pretrained_model_name_or_path = "m"\ntrain_data_dir = "d"\noutput_dir = "out"\nnetwork_dim = 8\n'
                    'network_alpha = 4\nnetwork_module = "lycoris.kohya"\nnetwork_args = ["algo=locon", "conv_dim=2"]\n',
                    encoding="utf-8")
    from_file = _printed_config(capsys, ["train", "sd-lora", "--config_file", str(toml), "--print-config"])
    assert [from_file[k] for k in ("network", "lycoris_preset", "conv_rank", "conv_alpha", "train_text_encoder")] == \
        ["locon", "full", 2, None, True]
    flags = _printed_config(capsys, ["train", "sd-lora", "--config_file", str(toml), "--print-config",
                                     "--network_args", "preset=unet-transformer-only", "dora_wd=True"])
    assert [flags[k] for k in ("network", "lycoris_preset", "conv_rank", "dora_wd", "train_text_encoder")] == \
        ["lora", "unet-transformer-only", None, True, False]
    assert main(["train", "sd-lora", "--config_file", str(toml), "--print-config", "--network_args",
                 "algo=loha"]) == 2
    assert "mixkit trains LyCORIS's algo lora and locon" in capsys.readouterr().err
