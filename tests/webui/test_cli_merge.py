"""`mixkit merge`: tiny SD1 single files merged end to end, loaded back through the single-file loader, generating."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from safetensors.torch import load_file

import webui.cli


@pytest.fixture
def cli(monkeypatch):
    monkeypatch.setattr(webui.cli, "SUBCOMMANDS", ["merge"])
    return webui.cli.main


@pytest.fixture
def models(single_file_checkpoints, tmp_path, monkeypatch):
    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "models"
    folder.mkdir()
    for name in ("sd1", "other"):
        shutil.copy(single_file_checkpoints / f"{name}.safetensors", folder)
    return folder


def generate(file, config_dir):
    from pipelines.txt2img import TextToImage

    pipe = TextToImage.from_pretrained(str(file), config_dir=str(config_dir))
    return np.asarray(pipe(prompt="a cat", steps=2, seed=3, width=64, height=64).images[0])


def test_weighted_sum_file_loads_back_and_generates(cli, models, tiny_sd1_dir, capsys):
    assert cli(["merge", "sd1.safetensors", "other.safetensors", "-m", "0.5", "--ckpt-dir", str(models)]) == 0
    written = models / "0.5(sd1) + 0.5(other).safetensors"
    assert capsys.readouterr().out.strip() == str(written)
    a, b, merged = (load_file(models / "sd1.safetensors"), load_file(models / "other.safetensors"),
                    load_file(written))
    key = "model.diffusion_model.out.2.weight"
    assert merged[key].equal(0.5 * a[key] + 0.5 * b[key])
    image = generate(written, tiny_sd1_dir)
    assert image.shape == (64, 64, 3)
    assert not np.array_equal(image, generate(models / "sd1.safetensors", tiny_sd1_dir))


def test_multiplier_zero_generates_exactly_as_a(cli, models, tiny_sd1_dir):
    assert cli(["merge", str(models / "sd1.safetensors"), str(models / "other.safetensors"), "-m", "0",
                "--name", "zero", "--format", "ckpt"]) == 0  # no --ckpt-dir: A's folder
    assert np.array_equal(generate(models / "zero.ckpt", tiny_sd1_dir),
                          generate(models / "sd1.safetensors", tiny_sd1_dir))


def test_add_difference_fp16_with_flags(cli, models):
    shutil.copy(models / "sd1.safetensors", models / "base.safetensors")
    (models / "other.yaml").write_text("x: 1\n")
    assert cli(["merge", "sd1.safetensors", "other.safetensors", "base.safetensors", "--method", "add-difference",
                "--multiplier", "1", "--fp16", "--ckpt-dir", str(models), "--discard-weights", "^first_stage_model",
                "--metadata-json", '{"author": "me"}', "--copy-config", "b"]) == 0
    written = models / "sd1 + 1.0(other - base).safetensors"
    merged, other = load_file(written), load_file(models / "other.safetensors")
    key = "model.diffusion_model.out.2.weight"
    assert merged[key].equal(other[key].half())  # sd1 + (other - sd1) = other, exactly in float32
    assert not any(name.startswith("first_stage_model") for name in merged)
    assert (models / "sd1 + 1.0(other - base).yaml").read_text() == "x: 1\n"
    from mixkit.io.safetensors_header import read_safetensors_metadata

    metadata = read_safetensors_metadata(written)
    assert metadata["author"] == "me" and json.loads(metadata["sd_merge_recipe"])["config_source"] == 1


@pytest.mark.parametrize("argv, message", [
    (["sd1.safetensors", "other.safetensors", "--method", "add-difference"], "requires a tertiary model"),
    (["sd1.safetensors", "other.safetensors", "-m", "2"], "from 0 to 1"),
    (["sd1.safetensors", "--method", "average"], "use one of: No interpolation, Weighted sum, Add difference"),
    (["sd1.safetensors", "other.safetensors", "sd1.safetensors"], "Weighted sum uses 2 model"),
    (["missing.safetensors", "other.safetensors"], "'missing.safetensors' not found"),
    (["sd1.safetensors", "other.safetensors", "--metadata-json", "[1]"], "must be a JSON object"),
    (["sd1.safetensors", "--method", "no-interpolation"], "would replace its input"),
])
def test_mistakes_are_one_line_errors_and_write_nothing(cli, models, capsys, argv, message):
    assert cli(["merge", *argv, "--ckpt-dir", str(models)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mixkit: error: ") and message in err
    assert sorted(path.name for path in models.iterdir()) == ["other.safetensors", "sd1.safetensors"]
