"""network_weights (kohya's --network_weights): a LoRA run starts from an existing kohya file's adapters, SD 1.x and
SDXL (SGM layout); a file that does not fit the run is refused before any adapter touches the model."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training.lora_network import LoraNetwork
from mixkit.training.network_weights import load_network_weights
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora


def _config(model, dataset, output, **overrides) -> SDLoraTrainingConfig:
    settings = dict(model=str(model), dataset=str(dataset), output=str(output), resolution=32, batch_size=2,
                    max_steps=2, learning_rate=1e-2, rank=2, alpha=2.0, seed=5, train_text_encoder=True)
    return SDLoraTrainingConfig(**{**settings, **overrides})


@pytest.fixture(scope="module")
def trained(tiny_sd1_dir, colour_dataset, tmp_path_factory):
    output = tmp_path_factory.mktemp("start") / "first.safetensors"
    return train_sd_lora(_config(tiny_sd1_dir, colour_dataset, output)).output


def _hooks(model) -> int:
    return sum(len(m._forward_hooks) for root in [model.unet, *model.text_encoders] for m in root.modules())


def test_a_run_starts_from_the_files_adapters(trained, tiny_sd1_dir, colour_dataset, tmp_path):
    first = load_file(trained)
    # A learning rate of 1e-12 moves Adam's weights by about 1e-12: the file written is the file started from.
    settings = dict(learning_rate=1e-12, max_steps=1, seed=9)
    continued = load_file(train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "c.safetensors",
                                                network_weights=str(trained), **settings)).output)
    fresh = load_file(train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "f.safetensors",
                                            **settings)).output)
    assert continued.keys() == first.keys()
    assert all(torch.allclose(continued[k], first[k], rtol=0, atol=1e-9) for k in first)
    ups = [k for k in first if k.endswith("lora_up.weight")]
    assert all(fresh[k].abs().max() < 1e-9 < first[k].abs().max() for k in ups)


def test_an_sdxl_file_in_the_sgm_layout_loads_back(tiny_sdxl_dir, colour_dataset, tmp_path):
    first = train_sd_lora(_config(tiny_sdxl_dir, colour_dataset, tmp_path / "xl.safetensors", max_steps=1,
                                  train_text_encoder=False))
    assert any(k.startswith("lora_unet_input_blocks_") for k in load_file(first.output))  # SGM names
    continued = train_sd_lora(_config(tiny_sdxl_dir, colour_dataset, tmp_path / "xl2.safetensors", max_steps=1,
                                      train_text_encoder=False, learning_rate=1e-12,
                                      network_weights=str(first.output)))
    a, b = load_file(first.output), load_file(continued.output)
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], rtol=0, atol=1e-9) for k in a)


def test_modules_the_file_lacks_start_fresh(tiny_sd1_dir, trained):
    model = load_diffusion_model(tiny_sd1_dir)
    first = load_file(trained)
    only_kv = {k: v for k, v in first.items() if k.split(".")[0].endswith(("attn2_to_k", "attn2_to_v"))}
    assert only_kv and len(only_kv) < len(first)
    torch.manual_seed(0)
    network = LoraNetwork(model.unet, model.text_encoders, rank=2, alpha=2.0, train_text_encoder=True)
    path = trained.with_name("kv.safetensors")
    save_file(only_kv, path)
    assert load_network_weights(network, path) == len(only_kv) // 3
    state = network.kohya_state_dict()
    assert all(torch.equal(state[k], v) for k, v in only_kv.items())
    assert all(state[k].abs().max() == 0 for k in state if k.endswith("lora_up.weight") and k not in only_kv)


def _variant(trained, tmp_path, name, change):
    tensors = load_file(trained)
    change(tensors)
    path = tmp_path / f"{name}.safetensors"
    save_file(tensors, path)
    return path


@pytest.mark.parametrize("name, overrides, change, message", [
    ("rank", dict(rank=4), lambda t: None, r"has rank 2 at lora_\w+, this run 4; set rank: 2"),
    ("alpha", dict(alpha=1.0), lambda t: None, r"has alpha 2 at lora_\w+, this run 1; set the alpha"),
    ("te", dict(train_text_encoder=False), lambda t: None, r"adapts lora_te_\w+, which this run's network does not; "
                                                           r"set train_text_encoder: true"),
    ("unet", dict(train_unet=False), lambda t: None, r"adapts lora_unet_\w+, which this run's network does not; "
                                                      r"set train_unet: true \(this run trains the text encoder's"),
    ("loha", {}, lambda t: t.update({"lora_unet_x.hada_w1_a": torch.zeros(1)}), "is not a kohya LoRA/LoCon file"),
    ("words", {}, lambda t: t.update({"bundle_emb.sks.string_to_param.*": torch.zeros(1, 8)}),
     "carries trained word vectors"),
    ("half", {}, lambda t: t.pop(next(k for k in t if k.endswith(".alpha"))), r"lacks lora_\w+\.alpha"),
])
def test_a_file_that_does_not_fit_is_refused_and_the_model_is_untouched(trained, tiny_sd1_dir, colour_dataset,
                                                                       tmp_path, name, overrides, change, message):
    path = _variant(trained, tmp_path, name, change)
    model = load_diffusion_model(tiny_sd1_dir)
    with pytest.raises(ValueError, match=message) as error:
        train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "out.safetensors", network_weights=str(path),
                              **overrides), model=model)
    assert str(path) in str(error.value)
    assert _hooks(model) == 0 and not (tmp_path / "out.safetensors").exists()


def test_a_missing_or_broken_file_is_refused_before_loading(trained, tiny_sd1_dir, colour_dataset, tmp_path):
    with pytest.raises(FileNotFoundError, match="network_weights 'nope.safetensors' is not a file"):
        train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "o.safetensors",
                              network_weights="nope.safetensors"))
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(trained.read_bytes()[:200])
    with pytest.raises(Exception, match="truncated"):
        train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "o.safetensors", network_weights=str(broken)))
    with pytest.raises(ValueError, match="network_weights must be the path of a kohya LoRA file"):
        _config(tiny_sd1_dir, colour_dataset, tmp_path / "o.safetensors", network_weights="").check()
