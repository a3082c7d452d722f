"""New hypernetworks: initialised as A1111's create does, written in A1111's exact `.pt` format, read back by mixkit's
loader and library with the same outputs on a UNet, and continued with their step."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mixkit.hypernetworks import HypernetworkApplication, HypernetworkLibrary, apply_hypernetworks, load_hypernetwork
from mixkit.hypernetworks.create import TrainableHypernetwork
from mixkit.hypernetworks.shape import HypernetworkShape

A1111_KEYS = {"step", "name", "layer_structure", "activation_func", "is_layer_norm", "weight_initialization",
              "sd_checkpoint", "sd_checkpoint_name", "activate_output", "use_dropout", "dropout_structure",
              "last_layer_dropout", "optional_info"}


def _shape(**settings) -> HypernetworkShape:
    shape = HypernetworkShape(**{"enable_sizes": [32, 64], **settings})
    shape.check_shape()
    return shape


def test_the_file_has_a1111s_keys_and_values(tmp_path):
    shape = _shape(layer_structure="1, 2, 2, 1", activation_func="relu", weight_init="XavierNormal",
                   add_layer_norm=True, use_dropout=True, dropout_structure="0, 0.3, 0.1, 0")
    path = TrainableHypernetwork.new("style", shape, seed=1).save(tmp_path / "style.pt", step=7,
                                                                  sd_checkpoint_name="tiny")
    data = torch.load(path, weights_only=True)
    assert set(data) == A1111_KEYS | {32, 64}
    assert {key: data[key] for key in A1111_KEYS} == {
        "step": 7, "name": "style", "layer_structure": [1.0, 2.0, 2.0, 1.0], "activation_func": "relu",
        "is_layer_norm": True, "weight_initialization": "XavierNormal", "sd_checkpoint": None,
        "sd_checkpoint_name": "tiny", "activate_output": False, "use_dropout": True,
        "dropout_structure": [0.0, 0.3, 0.1, 0.0], "last_layer_dropout": True, "optional_info": None}
    key_state, value_state = data[32]
    # A1111's Sequential: Linear, ReLU, LayerNorm, Dropout(0.3) | Linear, ReLU, LayerNorm, Dropout(0.1) | Linear, LN
    assert list(key_state) == ["linear.0.weight", "linear.0.bias", "linear.2.weight", "linear.2.bias",
                               "linear.4.weight", "linear.4.bias", "linear.6.weight", "linear.6.bias",
                               "linear.8.weight", "linear.8.bias", "linear.9.weight", "linear.9.bias"]
    assert key_state["linear.0.weight"].shape == (64, 32) and key_state["linear.8.weight"].shape == (32, 64)
    assert not torch.equal(key_state["linear.0.weight"], value_state["linear.0.weight"])  # two separate MLPs
    assert all(t.dtype == torch.float32 for state in data[64] for t in state.values())


def test_normal_initialisation_is_a1111s():
    mlp = TrainableHypernetwork.new("n", _shape(add_layer_norm=True), seed=0).pairs["64"][0].linear
    linear, norm = mlp[0], mlp[1]
    assert isinstance(norm, nn.LayerNorm)
    assert torch.equal(linear.bias, torch.zeros_like(linear.bias)) and torch.equal(norm.bias, torch.zeros(128))
    assert 0.008 < linear.weight.std().item() < 0.012  # Normal(0, 0.01)
    assert 0.005 < norm.weight.std().item() < 0.015  # A1111 draws LayerNorm weights from Normal(0, 0.01) too


@pytest.mark.parametrize("weight_init, activation, expected_std", [
    ("KaimingNormal", "relu", (2 / 64) ** 0.5),  # kaiming on fan_in 64, relu gain sqrt(2)
    ("KaimingNormal", "leakyrelu", (2 / (1 + 0.01 ** 2) / 64) ** 0.5),
    ("XavierNormal", "relu", (2 / (64 + 128)) ** 0.5),
])
def test_other_initialisations_follow_the_activation(weight_init, activation, expected_std):
    hypernetwork = TrainableHypernetwork.new("k", _shape(weight_init=weight_init, activation_func=activation), seed=0)
    first = hypernetwork.pairs["64"][0].linear[0]
    assert abs(first.weight.std().item() - expected_std) / expected_std < 0.05
    assert torch.equal(first.bias, torch.zeros(128))


def test_the_same_seed_gives_the_same_network():
    a, b = (TrainableHypernetwork.new("s", _shape(), seed=5) for _ in range(2))
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    c = TrainableHypernetwork.new("s", _shape(), seed=6)
    assert not torch.equal(a.state_dict()["pairs.32.0.linear.0.weight"], c.state_dict()["pairs.32.0.linear.0.weight"])


def test_training_layers_have_real_dropout_where_the_loader_has_its_index():
    hypernetwork = TrainableHypernetwork.new("d", _shape(layer_structure="1, 2, 1", use_dropout=True,
                                                         dropout_structure="0, 0.25, 0"), seed=0)
    layers = list(hypernetwork.pairs["32"][0].linear)
    assert [type(layer) for layer in layers] == [nn.Linear, nn.Dropout, nn.Linear]
    assert layers[1].p == 0.25


def _perturbed(hypernetwork: TrainableHypernetwork) -> TrainableHypernetwork:
    """Weights large enough to change the UNet's output visibly (a freshly created network is nearly the identity)."""
    generator = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for parameter in hypernetwork.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    return hypernetwork.eval()


def _unet_output(unet) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    latents = torch.randn(1, 4, 8, 8, generator=generator)
    context = torch.randn(1, 7, 32, generator=generator)
    with torch.no_grad():
        return unet(latents, torch.tensor([500]), encoder_hidden_states=context).sample


def test_a_saved_file_gives_the_same_unet_output_through_the_library(sd1_model, tmp_path):
    unet = sd1_model.unet
    before = _unet_output(unet)
    hypernetwork = _perturbed(TrainableHypernetwork.new(
        "same", _shape(activation_func="tanh", add_layer_norm=True, use_dropout=True,
                       dropout_structure="0, 0.3, 0"), seed=0))
    hypernetwork.attach(unet)
    try:
        with_modules = _unet_output(unet)
    finally:
        hypernetwork.detach()
    assert torch.equal(_unet_output(unet), before)  # detached: the model is as it was
    assert not torch.allclose(with_modules, before, atol=1e-3)
    hypernetwork.save(tmp_path / "same.pt", step=3)
    loaded = HypernetworkLibrary(tmp_path).load("same")
    with apply_hypernetworks(unet, [HypernetworkApplication(loaded, 1.0)]):
        from_file = _unet_output(unet)
    torch.testing.assert_close(from_file, with_modules, rtol=0, atol=1e-6)
    assert loaded.metadata == {"name": "same", "step": 3}


def test_a_file_continues_with_its_layout_weights_and_step(tmp_path):
    shape = _shape(layer_structure="1, 3, 1", activation_func="elu", activate_output=True, weight_init="XavierUniform")
    original = _perturbed(TrainableHypernetwork.new("go", shape, seed=0))
    original.save(tmp_path / "go.pt", step=120)
    again = TrainableHypernetwork.from_file(tmp_path / "go.pt")
    assert again.step == 120 and again.name == "go" and again.widths == [32, 64]
    assert (again.shape.layer_structure, again.shape.activation_func, again.shape.activate_output,
            again.shape.weight_init) == ([1.0, 3.0, 1.0], "elu", True, "XavierUniform")
    assert all(torch.equal(a, b) for a, b in zip(original.state_dict().values(), again.state_dict().values()))
    again.save(tmp_path / "go2.pt", step=121)
    first, second = torch.load(tmp_path / "go.pt"), torch.load(tmp_path / "go2.pt")
    assert {k: v for k, v in first.items() if k not in (32, 64, "step")} == {
        k: v for k, v in second.items() if k not in (32, 64, "step")}


def test_a_failed_write_leaves_the_old_file(tmp_path, monkeypatch):
    hypernetwork = TrainableHypernetwork.new("keep", _shape(), seed=0)
    path = hypernetwork.save(tmp_path / "keep.pt", step=1)
    old = path.read_bytes()

    def broken_save(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError):
        hypernetwork.save(path, step=2)
    assert path.read_bytes() == old and [p.name for p in tmp_path.iterdir()] == ["keep.pt"]
    assert load_hypernetwork(path).metadata["step"] == 1
