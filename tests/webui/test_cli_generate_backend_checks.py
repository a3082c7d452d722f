"""`mixkit generate --backend openvino`: a preset or LoRAs it cannot run are refused before the model loads, in flag terms.

README: `--backend` and `--lora` are checked before the model loads; a clash between flags needs no model, and
refusing it after the load (and, for LoRAs, after converting the graphs) cost a full load and an export.
"""

import pytest
import torch
from safetensors.torch import save_file

from webui.cli import main

ARGS = ["--width", "64", "--height", "64", "--steps", "2", "--seed", "5"]


def _refused(tiny_sd1_dir, tmp_path, capsys, *extra) -> str:
    out = tmp_path / "out"
    code = main(["generate", *extra[:1], "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, *extra[1:]])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert not any(line.startswith("Loaded ") for line in err), err  # refused before the model load
    assert not out.exists() or not any(out.glob("*.png"))
    return err[-1]


def test_a_preset_openvino_cannot_honour_is_refused_before_loading(tiny_sd1_dir, tmp_path, capsys):
    message = _refused(tiny_sd1_dir, tmp_path, capsys, "a cube", "--preset", "low-memory", "--backend", "openvino")
    assert message.startswith("mixkit: error: --preset low-memory: backend 'openvino' ")
    assert "cannot honour ['attention_slicing', 'vae_slicing', 'weight_storage', 'page_out_idle']" in message
    assert message.endswith("use --preset exact or fast with --backend openvino, or use --backend torch")


def test_preset_and_vae_tiling_on_openvino_are_named_together(tiny_sd1_dir, tmp_path, capsys):
    message = _refused(tiny_sd1_dir, tmp_path, capsys, "a cube", "--preset", "low-memory", "--vae-tiling",
                       "--backend", "openvino")
    assert message.startswith("mixkit: error: --vae-tiling with --preset low-memory: backend 'openvino' ")
    assert "'vae_tiling'" in message and "leave out --vae-tiling, or use --preset exact or fast" in message


@pytest.fixture
def lora_dir(tmp_path):
    folder = tmp_path / "loras"
    folder.mkdir()
    save_file({"lora_unet_x.lora_down.weight": torch.zeros(1, 1)}, folder / "style.safetensors")
    return folder


def test_a_lora_flag_on_openvino_is_refused_before_loading(tiny_sd1_dir, tmp_path, capsys, lora_dir):
    message = _refused(tiny_sd1_dir, tmp_path, capsys, "a cube", "--backend", "openvino",
                       "--lora", "style:0.8", "--lora-dir", str(lora_dir))
    assert message == ("mixkit: error: --lora style:0.8: LoRAs cannot be applied on --backend openvino, whose graphs "
                       "are compiled with fixed weights; use --backend torch (or torch.compile) for LoRAs")


def test_a_lora_prompt_tag_on_openvino_is_refused_before_loading(tiny_sd1_dir, tmp_path, capsys, lora_dir):
    message = _refused(tiny_sd1_dir, tmp_path, capsys, "a cube <lora:style:0.5>", "--backend", "openvino",
                       "--lora-dir", str(lora_dir))
    assert message.startswith("mixkit: error: prompt tag '<lora:style:0.5>': LoRAs cannot be applied on --backend "
                              "openvino")


def test_a_refiner_with_a_preset_is_refused_before_loading(tiny_sd1_dir, tmp_path, capsys):
    """The pipeline refuses a refiner path on an optimised model (pipelines.refiner_optimization); the CLI, which
    only has paths, says so before the load."""
    import shutil

    refiner = tmp_path / "refiner"  # a whole diffusers folder (an empty one is refused by the folder check first)
    shutil.copytree(tiny_sd1_dir, refiner)
    message = _refused(tiny_sd1_dir, tmp_path, capsys, "a cube", "--preset", "low-memory", "--refiner", str(refiner))
    assert message == (f"mixkit: error: --refiner {refiner} with --preset low-memory: the refiner would run "
                       "unoptimised while the infotext labels the image with the base model's optimisation; leave out "
                       "--refiner, or use it with --preset exact --backend torch")
