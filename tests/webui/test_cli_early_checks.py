"""`mixkit` flags refused before any model loads (one line, exit code 2, nothing written), a closed stdout pipe,
`train --config` shapes, `tiny-model` re-runs, `info --no-defaults`, and `cache` ages of empty folders."""

import json
import os
import subprocess
import sys

import pytest

from webui.cli import main


@pytest.fixture
def no_model_load(monkeypatch):
    """Fail the test if a command gets as far as loading a model: these errors must come first."""
    from pipelines.txt2img import TextToImage

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the flag check")

    monkeypatch.setattr(TextToImage, "from_pretrained", refuse)


def _one_line_error(capsys, code, *fragments):
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert err and err[-1].startswith("mixkit: error:") and "Traceback" not in "\n".join(err)
    for fragment in fragments:
        assert fragment in err[-1]


@pytest.mark.parametrize("extra, fragments", [
    (["--device", "bogus"], ["--device 'bogus' is not a device name"]),
    (["--device", "meta"], ["mixkit runs on"]),
    (["--lora", "{lora}:abc"], ["the weight 'abc' is not a number"]),
    (["--lora-dir", "{missing}"], ["LoRA folder", "does not exist or is not a folder"]),
    (["--backend", "bogus"], ["--backend", "Unknown execution backend 'bogus'"]),
    (["--vae", "{missing}"], ["VAE path", "--vae"]),
    (["x <lora:style:0.8>"], ["no LoRA folder is set", "--lora-dir"]),
])
def test_generate_flags_are_checked_before_the_model_loads(no_model_load, tmp_path, capsys, extra, fragments):
    lora = tmp_path / "my.safetensors"
    lora.write_bytes(b"")
    values = [v.format(lora=lora, missing=tmp_path / "nonexist") for v in extra]
    prompt = values.pop(0) if not values[0].startswith("--") else "x"
    out = tmp_path / "out"
    _one_line_error(capsys, main(["generate", prompt, "--steps", "2", "-o", str(out), *values]), *fragments)
    assert not out.exists()


def test_a_device_that_is_not_here_is_refused_with_cpu_as_the_way_out(no_model_load, tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    _one_line_error(capsys, main(["generate", "x", "--device", "cuda", "-o", str(tmp_path / "o")]), "--device cpu")


def test_eval_refuses_an_unknown_sampler_before_loading_anything(monkeypatch, capsys):
    import mixkit.models.vlm as vlm

    monkeypatch.setattr(vlm, "load_vlm", lambda *a, **k: pytest.fail("loaded the captioner first"))
    _one_line_error(capsys, main(["eval", "tiny", "--sampler", "bogus"]), "Unknown sampler 'bogus'")


def test_output_into_a_closed_pipe_exits_quietly():
    done = subprocess.run(f"{sys.executable} -m webui.cli samplers | true", shell=True, capture_output=True, text=True,
                          cwd=os.getcwd(), executable="/bin/bash")
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr


@pytest.mark.parametrize("content, kind", [("[1, 2]", "array"), ('"x"', "string"), ("null", "null")])
def test_train_config_that_is_not_an_object_is_one_line(tmp_path, capsys, content, kind):
    config = tmp_path / "list.json"
    config.write_text(content)
    _one_line_error(capsys, main(["train", "sd-lora", "--config", str(config)]), str(config), f"JSON {kind}",
                    "must hold a JSON object")


def test_tiny_model_rerun_with_other_options_is_refused_and_the_same_one_accepted(tmp_path, capsys):
    folder = tmp_path / "tm"
    assert main(["tiny-model", str(folder)]) == 0
    before = (folder / "model_index.json").read_text()
    assert main(["tiny-model", str(folder)]) == 0
    assert main(["tiny-model", str(folder), "--family", "sd1", "--seed", "0"]) == 0
    capsys.readouterr()
    _one_line_error(capsys, main(["tiny-model", str(folder), "--family", "sdxl", "--seed", "9"]),
                    "--family sdxl (it was made with sd1)", "--seed 9 (it was made with 0)")
    assert (folder / "model_index.json").read_text() == before


def test_info_no_defaults_without_json_is_refused(tmp_path, capsys):
    from PIL import Image, PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_text("parameters", "x\nSteps: 2, Sampler: Euler, Seed: 1")
    Image.new("RGB", (8, 8)).save(tmp_path / "a.png", pnginfo=info)
    _one_line_error(capsys, main(["info", str(tmp_path / "a.png"), "--no-defaults"]), "add --json")
    assert main(["info", str(tmp_path / "a.png"), "--no-defaults", "--json"]) == 0
    assert "Clip skip" not in json.loads(capsys.readouterr().out)


def test_an_empty_cache_folder_is_as_old_as_the_folder_not_the_epoch(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "c"))
    (tmp_path / "c" / "compile").mkdir(parents=True)
    assert main(["cache", "list"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("compile"))
    assert " 0.0 d" in line
    assert main(["cache", "clear", "all", "--older-than", "30"]) == 0
    assert "(0 entries)" in capsys.readouterr().err
    assert (tmp_path / "c" / "compile").is_dir()


def test_webui_refuses_a_device_that_is_not_here_before_loading(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    _one_line_error(capsys, main(["webui", "--device", "cuda:3", "--output-dir", str(tmp_path / "o")]), "--device cpu")


@pytest.mark.parametrize("extra, message", [
    (["--cfg", "200"], "--cfg must be in [0, 100.0], got 200.0."),
    (["--batch-size", "17"], "--batch-size must be in [1, 16], got 17."),
    (["--batch-count", "0"], "--batch-count must be in [1, 100], got 0."),
    (["--width", "65"], "--width must be a multiple of 8, got 65; try 64."),
    (["--clip-skip", "13"], "--clip-skip must be in [1, 12], got 13."),
    (["--ngms-all-steps"], "--ngms-all-steps (NGMS all steps) needs --ngms > 0"),
    (["--sigma-min", "3", "--sigma-max", "1"], "--sigma-min (3.0) must be below --sigma-max (1.0)"),
    (["--skip-early-cfg", "2"], "--skip-early-cfg must be a fraction of the steps in [0, 1]"),
])
def test_generate_range_errors_name_the_flag_not_the_python_field(no_model_load, tmp_path, capsys, extra, message):
    _one_line_error(capsys, main(["generate", "x", "--steps", "2", "-o", str(tmp_path / "o"), *extra]),
                    f"mixkit: error: {message}")


def test_eval_range_errors_name_the_flag(capsys):
    _one_line_error(capsys, main(["eval", "tiny", "--cfg", "200"]), "mixkit: error: --cfg must be in [0, 100.0]")


def test_the_python_api_keeps_naming_its_fields():
    from pipelines.params import GenerationLimits, Txt2ImgParams, check_txt2img_params

    with pytest.raises(ValueError, match=r"^cfg_scale must be in \[0, 100.0\], got 200.0.$"):
        check_txt2img_params(Txt2ImgParams(cfg_scale=200.0), GenerationLimits())


def test_cache_list_refuses_a_cache_root_that_is_a_file(tmp_path, capsys, monkeypatch):
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "afile"))
    _one_line_error(capsys, main(["cache", "list"]), f"MIXKIT_CACHE_DIR={tmp_path / 'afile'} is a file, not a folder")
