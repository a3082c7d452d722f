"""PiSSA starts (`init_lora_weights="pissa"`): the principal factors and residual against peft's own PiSSA, the
Kohya file of a trained adapter against peft's merged weight, the network leaving the model's outputs and tensors
as they were, and a tiny run whose file, loaded through the community-LoRA loader, gives the trained network."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from mixkit.io import read_safetensors_metadata
from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training.lora_network import LoraNetwork
from mixkit.training.pissa import kohya_factors, principal_factors, residual_weight
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora
from tests.mixkit.training.model_outputs import unet_and_text_outputs

peft = pytest.importorskip("peft", reason="peft is the PiSSA oracle (a test dependency)")


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(12, 20)


def _peft_pissa(rank: int, alpha: float):
    torch.manual_seed(0)
    block = _Block()
    original = block.proj.weight.detach().clone()
    config = peft.LoraConfig(r=rank, lora_alpha=alpha, init_lora_weights="pissa", target_modules=["proj"])
    return original, peft.get_peft_model(block, config)


@pytest.mark.parametrize("rank, alpha", [(4, 4.0), (3, 1.0), (5, 10.0)])
def test_principal_factors_and_residual_are_peft_pissas(rank, alpha):
    original, model = _peft_pissa(rank, alpha)
    layer = model.base_model.model.proj
    down, up = principal_factors(original, rank, alpha / rank)
    torch.testing.assert_close(down, layer.lora_A["default"].weight, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(up, layer.lora_B["default"].weight, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(residual_weight(original, down, up, alpha / rank), layer.base_layer.weight,
                               rtol=1e-5, atol=1e-6)


def test_the_kohya_file_of_a_trained_adapter_is_peft_merged_change():
    """After "training" (the factors moved), original weight + the Kohya file's change = peft's merged weight."""
    rank, alpha = 4, 4.0
    original, model = _peft_pissa(rank, alpha)
    layer = model.base_model.model.proj
    down0, up0 = principal_factors(original, rank, alpha / rank)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        layer.lora_A["default"].weight.add_(0.05 * torch.randn(rank, 12, generator=generator))
        layer.lora_B["default"].weight.add_(0.05 * torch.randn(20, rank, generator=generator))
    down, up = layer.lora_A["default"].weight.detach().clone(), layer.lora_B["default"].weight.detach().clone()
    file_down, file_up, file_alpha = kohya_factors(down, up, down0, up0, alpha / rank)
    assert file_down.shape == (2 * rank, 12) and file_up.shape == (20, 2 * rank) and file_alpha == 2 * rank
    merged = model.merge_and_unload().proj.weight.detach()
    torch.testing.assert_close(original + file_alpha / (2 * rank) * file_up @ file_down, merged, rtol=1e-5, atol=1e-6)


def test_a_convolution_is_factored_over_its_flattened_kernels():
    torch.manual_seed(2)
    weight = torch.randn(6, 5, 3, 3)
    down, up = principal_factors(weight, 5, 0.5)
    assert down.shape == (5, 5, 3, 3) and up.shape == (6, 5, 1, 1)
    best = torch.linalg.svd(weight.flatten(1), full_matrices=False)
    product = 0.5 * up.flatten(1) @ down.flatten(1)
    assert torch.allclose(torch.linalg.matrix_norm(weight.flatten(1) - product), best.S[5:].norm(), rtol=1e-4)
    file_down, file_up, alpha = kohya_factors(down * 1.1, up, down, up, 0.5)
    # rank 10 asked, the flattened kernel (6 x 45) has rank 6 at most: the file keeps what exists
    assert file_down.shape == (6, 5, 3, 3) and file_up.shape == (6, 6, 1, 1) and alpha == 6.0
    torch.testing.assert_close(file_up.flatten(1) @ file_down.flatten(1), 0.1 * product, rtol=1e-4, atol=1e-6)


def test_a_rank_above_the_layer_is_refused():
    with pytest.raises(ValueError, match=r"PiSSA needs a rank between 1 and the layer's smaller side 4 "
                                         r"\(weight \[4, 9\]\), got 5; lower the rank"):
        principal_factors(torch.randn(4, 9), 5, 1.0)


def _network(model) -> LoraNetwork:
    return LoraNetwork(model.unet, model.text_encoders, rank=2, alpha=2.0, conv_rank=2, conv_alpha=1.0,
                       train_text_encoder=True, initialisation="pissa")


def test_attached_pissa_starts_at_the_base_model_and_detaching_gives_back_the_same_tensors(tiny_sd1_dir):
    model = load_diffusion_model(tiny_sd1_dir)
    before = unet_and_text_outputs(model)
    weights = {name: (p, p.data) for name, p in model.unet.named_parameters()}
    network = _network(model).attach().eval()
    moved = [n for n, (p, data) in weights.items() if p.data.data_ptr() != data.data_ptr()]
    assert moved and all(n.endswith(".weight") for n in moved)  # the adapted layers hold their residuals
    for got, want in zip(unet_and_text_outputs(model), before):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    with network.disabled():
        assert all(p.data.data_ptr() == data.data_ptr() for p, data in weights.values())
        assert all(torch.equal(got, want) for got, want in zip(unet_and_text_outputs(model), before))
    network.detach()
    assert all(p.data.data_ptr() == data.data_ptr() for p, data in weights.values())
    assert all(torch.equal(got, want) for got, want in zip(unet_and_text_outputs(model), before))


def test_pissa_networks_refuse_what_would_change_the_base_model(tiny_sd1_dir):
    model = load_diffusion_model(tiny_sd1_dir)
    with pytest.raises(ValueError, match="PiSSA adapters carry the layer's principal part"):
        LoraNetwork(model.unet, [], rank=2, alpha=2.0, initialisation="pissa", dora=True)
    with pytest.raises(ValueError, match=r"initialisation 'olora' is not one of \['kaiming', 'pissa'\]"):
        LoraNetwork(model.unet, [], rank=2, alpha=2.0, initialisation="olora")
    with pytest.raises(ValueError, match="train PiSSA without scale_weight_norms"):
        LoraNetwork(model.unet, [], rank=2, alpha=2.0, initialisation="pissa").apply_max_norm(1.0)


@pytest.mark.parametrize("overrides, named", [
    ({"dora_wd": True}, "dora_wd"), ({"rank_dropout": 0.1, "network_dropout": 0.1}, "network_dropout, rank_dropout"),
    ({"scale_weight_norms": 1.0}, "scale_weight_norms"), ({"network_weights": "a.safetensors"}, "network_weights")])
def test_the_config_refuses_pissa_with_settings_that_change_the_base_model(overrides, named):
    config = SDLoraTrainingConfig(model="m", dataset="d", output="o.safetensors", init_lora_weights="pissa",
                                  **overrides)
    with pytest.raises(ValueError, match=f"init_lora_weights='pissa' cannot be combined with {named}: "):
        config.check()


def test_the_config_names_the_initialisations():
    with pytest.raises(ValueError, match=r"init_lora_weights must be one of \['kaiming', 'pissa'\] .* got 'gaussian'"):
        SDLoraTrainingConfig(model="m", dataset="d", output="o.safetensors", init_lora_weights="gaussian").check()


@pytest.fixture(scope="module")
def pissa_run(tiny_sd1_dir, colour_dataset, tmp_path_factory):
    output = tmp_path_factory.mktemp("pissa") / "pissa.safetensors"
    model = load_diffusion_model(tiny_sd1_dir)
    before = {k: v.clone() for k, v in model.unet.state_dict().items()}
    config = SDLoraTrainingConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset), output=str(output),
                                  resolution=32, batch_size=2, max_steps=3, learning_rate=1e-2, seed=3,
                                  train_text_encoder=True, network="locon", rank=2, alpha=2.0, conv_rank=2,
                                  conv_alpha=1.0, init_lora_weights="pissa")
    result = train_sd_lora(config, model=model)
    return result, model, before


def test_a_run_gives_the_callers_model_back_bit_for_bit(pissa_run):
    _, model, before = pissa_run
    after = model.unet.state_dict()
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)


def test_the_file_is_a_kohya_lora_of_twice_the_rank_with_metadata_saying_so(pissa_run):
    result = pissa_run[0]
    tensors = load_file(result.output)
    downs = [k for k in tensors if k.endswith(".lora_down.weight")]
    assert downs and all(tensors[k].shape[0] <= 4 for k in downs) and any(tensors[k].shape[0] == 4 for k in downs)
    assert all(float(tensors[k.replace("lora_down.weight", "alpha")]) == tensors[k].shape[0] for k in downs)
    metadata = read_safetensors_metadata(result.output)
    assert (metadata["ss_network_dim"], metadata["ss_network_alpha"]) == ("4", "4.0")
    assert json.loads(metadata["ss_network_args"]) == {"conv_dim": "4", "conv_alpha": "4.0"}
    assert json.loads(metadata["mixkit_training_config"])["init_lora_weights"] == "pissa"


@pytest.mark.parametrize("mode", ["merge", "runtime"])
def test_an_exported_network_through_the_community_loader_gives_itsunet_and_text_outputs(tiny_sd1_dir, tmp_path, mode):
    """Moved factors (as training moves them) on UNet, LoCon and text-encoder layers: the exported Kohya file through
    the loader gives the attached network's outputs, which differ from the base model's."""
    from safetensors.torch import save_file

    from mixkit.lora import LoraRequest, apply_loras

    trained = load_diffusion_model(tiny_sd1_dir)
    base = unet_and_text_outputs(trained)
    network = _network(trained)
    generator = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for parameter in network.parameters():
            parameter.mul_(1 + 0.3 * torch.randn(parameter.shape, generator=generator))
    network.attach().eval()
    expected = unet_and_text_outputs(trained)
    save_file(network.kohya_state_dict(), tmp_path / "pissa.safetensors")
    network.detach()

    loaded = load_diffusion_model(tiny_sd1_dir)
    apply_loras(loaded.unet, loaded.text_encoders, [LoraRequest(str(tmp_path / "pissa.safetensors"))], mode=mode)
    for got, want, before in zip(unet_and_text_outputs(loaded), expected, base):
        assert (want - before).abs().max() > 1e-3
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_the_run_changed_the_model(pissa_run, tiny_sd1_dir):
    from mixkit.lora import LoraRequest, apply_loras

    base = unet_and_text_outputs(load_diffusion_model(tiny_sd1_dir))
    loaded = load_diffusion_model(tiny_sd1_dir)
    apply_loras(loaded.unet, loaded.text_encoders, [LoraRequest(str(pissa_run[0].output))], mode="merge")
    assert all((got - before).abs().max() > 1e-4 for got, before in zip(unet_and_text_outputs(loaded), base))
