"""The LoRA file's precision (kohya's save_precision) and comment: half-size files that load through the community
loader and change the model as the float32 file does, to half precision."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from mixkit.io import read_safetensors_metadata
from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training.kohya_export import cast_for_saving
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora


def test_weights_take_the_precision_and_alphas_stay_float32():
    tensors = {"m.lora_down.weight": torch.tensor([[1 / 3]]), "m.lora_up.weight": torch.tensor([[0.1]]),
               "m.alpha": torch.tensor(0.3)}
    for precision, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16), ("float", torch.float32)):
        cast = cast_for_saving(tensors, precision)
        assert cast["m.lora_down.weight"].dtype == cast["m.lora_up.weight"].dtype == dtype
        assert cast["m.alpha"].dtype == torch.float32 and cast["m.alpha"].item() == tensors["m.alpha"].item()
        assert torch.equal(cast["m.lora_down.weight"], tensors["m.lora_down.weight"].to(dtype))


def test_a_half_precision_file_loads_and_acts_as_the_float_file(tiny_sd1_dir, colour_dataset, tmp_path):
    from mixkit.lora import LoraRequest, apply_loras

    def run(name, **overrides):
        config = SDLoraTrainingConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset),
                                      output=str(tmp_path / f"{name}.safetensors"), resolution=32, batch_size=2,
                                      max_steps=2, learning_rate=1e-2, rank=2, alpha=2.0, seed=1,
                                      train_text_encoder=True, **overrides)
        return train_sd_lora(config).output

    full = run("full")
    half = run("half", save_precision="fp16", training_comment="trigger: sks")
    a, b = load_file(full), load_file(half)
    assert a.keys() == b.keys()
    for key in a:
        expected = a[key] if key.endswith(".alpha") else a[key].half()
        assert b[key].dtype == expected.dtype and torch.equal(b[key], expected)
    weights = [key for key in a if not key.endswith(".alpha")]
    assert 2 * sum(b[k].nbytes for k in weights) == sum(a[k].nbytes for k in weights)
    assert read_safetensors_metadata(half)["ss_training_comment"] == "trigger: sks"

    merged = []
    for path in (full, half):
        model = load_diffusion_model(tiny_sd1_dir)
        apply_loras(model.unet, model.text_encoders, [LoraRequest(str(path))], mode="merge")
        merged.append(dict(model.unet.state_dict()))
    base = load_diffusion_model(tiny_sd1_dir).unet.state_dict()
    changed = [k for k in base if not torch.equal(merged[0][k], base[k])]
    assert changed
    for key in changed:
        delta_full, delta_half = merged[0][key] - base[key], merged[1][key] - base[key]
        assert torch.allclose(delta_half, delta_full, rtol=1e-2, atol=1e-3 * delta_full.abs().max().item())


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="Unknown save precision 'half'. Valid names: 'float', 'fp16', 'bf16'"):
        SDLoraTrainingConfig(model="m", dataset="d", output="o.safetensors", save_precision="half").check()

