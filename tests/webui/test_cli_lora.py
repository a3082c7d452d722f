"""`mixkit lora inspect|convert`, driven through a parser built from `webui.cli.lora.add_parser`."""

from __future__ import annotations

import argparse

import pytest

from webui.cli import lora as lora_cli


def _parse(argv):
    parser = argparse.ArgumentParser(prog="mixkit")
    lora_cli.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def _peer_file(tmp_path, folder, sdxl=False):
    from tests.mixkit.lora.conftest import _load, make_peer_lora

    model = _load(folder, sdxl=sdxl)
    return make_peer_lora(tmp_path, model, "lora", seed=51, per_module_alpha=True,
                          metadata={"ss_base_model_version": "sd_v1", "ss_tag_frequency": '{"1_a": {"cat": 3}}'}).path


def test_inspect_with_matching_model(tmp_path, tiny_sd1_dir, capsys):
    path = _peer_file(tmp_path, tiny_sd1_dir)
    args = _parse(["lora", "inspect", str(path), "--model", str(tiny_sd1_dir)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "kohya" in out and "LoRA/LoCon" in out and "cat (3)" in out
    assert "(per module)" in out  # per-module alphas
    assert "SD 1.x" in out and "modules matched" in out


def test_inspect_on_wrong_model_lists_problems(tmp_path, tiny_sd1_dir, tiny_sdxl_dir, capsys):
    path = _peer_file(tmp_path, tiny_sdxl_dir, sdxl=True)
    args = _parse(["lora", "inspect", str(path), "--model", str(tiny_sd1_dir)])
    assert args.func(args) == 1
    out = capsys.readouterr().out
    assert "base model:  SDXL" in out and "problem:" in out and "lora_te2_" in out


def test_convert_to_diffusers_and_back(tmp_path, tiny_sd1_dir, capsys):
    from mixkit.lora import load_lora

    path = _peer_file(tmp_path, tiny_sd1_dir)
    out = tmp_path / "conv" / "d.safetensors"
    args = _parse(["lora", "convert", str(path), "--to", "diffusers", "-o", str(out), "--model", str(tiny_sd1_dir)])
    assert args.func(args) == 0
    assert load_lora(out).format.name == "diffusers"
    back = tmp_path / "k.safetensors"
    args = _parse(["lora", "convert", str(out), "--to", "kohya", "-o", str(back)])
    assert args.func(args) == 0
    assert str(back) in capsys.readouterr().out


def test_bad_arguments(tmp_path, tiny_sd1_dir):
    with pytest.raises(SystemExit):
        _parse(["lora", "convert", "x.safetensors", "--to", "comfy", "-o", "y.safetensors"])
    args = _parse(["lora", "inspect", str(tmp_path / "missing.safetensors")])
    with pytest.raises(FileNotFoundError, match="LoRA file not found"):
        args.func(args)
    args = _parse(["lora", "inspect", str(tmp_path / "missing.safetensors"), "--model", str(tmp_path)])
    with pytest.raises(FileNotFoundError, match="not a diffusers model folder"):
        args.func(args)


def test_inspect_takes_the_models_generate_takes(tmp_path, capsys):
    # --model accepts what `mixkit generate --model` does: here the built-in name (was: a folder path only).
    from mixkit.testing.tiny_lora import write_attention_lora
    from webui.cli import main

    from mixkit.models.diffusion.loading import load_diffusion_model

    path = tmp_path / "ink.safetensors"
    write_attention_lora(load_diffusion_model("mixkit-tiny-sd").unet, path)
    assert main(["lora", "inspect", str(path), "--model", "mixkit-tiny-sd"]) == 0
    assert "ink.safetensors" in capsys.readouterr().out


def test_an_unwritable_output_is_a_one_line_error_not_a_traceback(tmp_path, tiny_sd1_dir, capsys):
    # CheckpointWriteError is an OSError, not one of the built-in user errors: the CLI still reports it in one line
    from webui.cli import main

    path = _peer_file(tmp_path, tiny_sd1_dir)
    taken = tmp_path / "taken.safetensors"
    taken.mkdir()
    assert main(["lora", "convert", str(path), "--to", "diffusers", "-o", str(taken), "--model", str(tiny_sd1_dir)]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]  # earlier lines: the peer LoRA's save progress bar
    assert error.startswith("mixkit: error: Cannot write") and "a folder with that name exists" in error
    assert list(taken.iterdir()) == []


def test_inspect_prints_how_the_file_was_trained(tmp_path, tiny_sd1_dir, capsys):
    """A file written by lycoris-lora's kohya network with kohya's metadata: module, algo, preset, dims, DoRA."""
    from tests.mixkit.lora.conftest import _load, make_kohya_lycoris_file

    path = make_kohya_lycoris_file(tmp_path / "lyco.safetensors", _load(tiny_sd1_dir, sdxl=False),
                                   {"algo": "lora", "preset": "attn-mlp", "dora_wd": "True"}, dim=4, alpha=1.0)
    args = _parse(["lora", "inspect", str(path)])
    assert args.func(args) == 0
    assert "trained as:  lycoris.kohya, algo lora, preset attn-mlp, dim 4, alpha 1, DoRA (dora_wd)\n" in \
        capsys.readouterr().out
