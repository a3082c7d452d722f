"""The DoRA training adapter: exactly the base layer before training, and LyCORIS's DoRA (lycoris-lora, the format's
reference) in its outputs, its gradients and its rebuilt weight, on Linear, 1x1 and 3x3 convolutions."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mixkit.lora import deltas
from mixkit.training.dora_adapter import DoraAdapter
from mixkit.training.lora_network import LoraNetwork

LAYERS = [
    pytest.param(lambda: nn.Linear(6, 5), (2, 7, 6), id="linear"),
    pytest.param(lambda: nn.Linear(6, 5, bias=False), (3, 6), id="linear-no-bias"),
    pytest.param(lambda: nn.Conv2d(6, 5, 1), (2, 6, 3, 3), id="conv1x1"),
    pytest.param(lambda: nn.Conv2d(6, 5, 3, padding=1), (2, 6, 4, 4), id="conv3x3"),
    pytest.param(lambda: nn.Conv2d(6, 5, 3, stride=2, padding=1, bias=False), (2, 6, 5, 5), id="conv3x3-stride2"),
]


def _trained_like(make_layer, seed=0) -> tuple[nn.Module, DoraAdapter]:
    """A layer and an adapter with non-zero up and magnitudes away from the base norms, as after some training."""
    torch.manual_seed(seed)
    layer = make_layer()
    adapter = DoraAdapter(layer, rank=3, alpha=1.5)
    with torch.no_grad():
        adapter.lora_up.weight.normal_()
        adapter.dora_scale.mul_(torch.rand_like(adapter.dora_scale) + 0.5)
    return layer, adapter


@pytest.mark.parametrize("make_layer, shape", LAYERS)
def test_the_first_forward_is_exactly_the_base_layers(make_layer, shape):
    torch.manual_seed(0)
    layer, x = make_layer(), torch.randn(shape)
    adapter = DoraAdapter(layer, rank=3, alpha=1.5)
    out = layer(x)
    assert torch.equal(adapter.added_to(out, x), out)
    assert adapter.dora_scale.shape == (5, *([1] * (layer.weight.dim() - 1)))  # LyCORIS's [out, 1(, 1, 1)]


def _lycoris_module(layer: nn.Module, adapter: DoraAdapter):
    """LyCORIS's own LoCon module with DoRA (dora_wd=True) holding the adapter's tensors."""
    from lycoris.modules.locon import LoConModule

    state = {k: v.detach().clone() for k, v in adapter.state_dict().items()}
    with torch.no_grad():  # LyCORIS copies into its dora_scale parameter outside no_grad itself
        return LoConModule.make_module_from_state_dict("m", layer, state["lora_up.weight"], state["lora_down.weight"],
                                                       None, state["alpha"], state["dora_scale"])


@pytest.mark.parametrize("make_layer, shape", LAYERS)
def test_outputs_and_gradients_are_lycoris_doras(make_layer, shape):
    layer, adapter = _trained_like(make_layer)
    reference = _lycoris_module(layer, adapter)
    x = torch.randn(shape)
    ours = adapter.added_to(layer(x), x)
    theirs = reference(x)  # LyCORIS's training forward: base output plus the merged weight's change
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)

    target = torch.randn_like(ours)
    ((ours - target) ** 2).sum().backward()
    ((theirs - target) ** 2).sum().backward()
    for name in ("lora_up.weight", "lora_down.weight", "dora_scale"):
        mine = adapter.get_parameter(name).grad
        lycoris = reference.get_parameter(name).grad
        torch.testing.assert_close(mine, lycoris.reshape(mine.shape), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("make_layer, shape", LAYERS)
def test_the_files_tensors_rebuild_lycoris_weight(make_layer, shape):
    """Golden check of the export: LyCORIS's weight reconstruction from the saved tensors is the loader's, and both
    are the weight the adapter trained."""
    layer, adapter = _trained_like(make_layer)
    lycoris_weight = _lycoris_module(layer, adapter).get_merged_weight()[0]
    state = {k: v.detach() for k, v in adapter.state_dict().items()}
    weight = layer.weight.detach()
    change = deltas.lora_delta(state["lora_down.weight"], state["lora_up.weight"], None,
                               deltas.rank_scale(float(state["alpha"]), 3), weight.shape)
    loader_weight = deltas.dora_weight(weight + change, state["dora_scale"])
    torch.testing.assert_close(loader_weight, lycoris_weight, rtol=0, atol=1e-6)

    x = torch.randn(shape)
    run = nn.functional.linear if isinstance(layer, nn.Linear) else (
        lambda v, w, b: nn.functional.conv2d(v, w, b, layer.stride, layer.padding))
    with torch.no_grad():
        torch.testing.assert_close(adapter.added_to(layer(x), x), run(x, lycoris_weight, layer.bias),
                                   rtol=1e-5, atol=1e-6)


def test_the_multiplier_scales_the_change_as_a1111_applies_a_files_strength():
    layer, adapter = _trained_like(lambda: nn.Linear(6, 5))
    x = torch.randn(4, 6)
    with torch.no_grad():
        out, full = layer(x), adapter.added_to(layer(x), x)
        adapter.multiplier = 0.25
        torch.testing.assert_close(adapter.added_to(out, x), out + 0.25 * (full - out))


def test_under_bf16_autocast_the_output_keeps_the_base_dtype_and_the_norm_stays_float32():
    layer, adapter = _trained_like(lambda: nn.Linear(6, 5))
    x = torch.randn(4, 6)
    with torch.no_grad():
        exact = adapter.magnitude_ratio()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = layer(x)
            assert adapter.added_to(out, x).dtype == torch.bfloat16
            assert torch.equal(adapter.magnitude_ratio(), exact)


def test_the_network_builds_dora_adapters_and_trains_their_magnitudes(tiny_sd1_dir):
    from mixkit.models.diffusion.loading import load_diffusion_model

    model = load_diffusion_model(tiny_sd1_dir)
    network = LoraNetwork(model.unet, model.text_encoders, rank=2, alpha=2.0, conv_rank=2, conv_alpha=1.0,
                          train_text_encoder=True, dora=True)
    assert all(isinstance(a, DoraAdapter) for a in network.adapters.values())
    assert any(n.startswith("lora_te") for n in network.adapters)
    state = network.kohya_state_dict()
    assert {k.rpartition(".")[0] for k in state if k.endswith(".dora_scale")} == set(network.adapters)
    assert not any("_base" in k for k in state)  # the frozen layer is no part of the file
    magnitudes = {id(a.dora_scale) for a in network.adapters.values()}
    for ratio in (None, 16.0):
        groups = network.parameter_groups(1e-3, 5e-4, up_lr_ratio=ratio)
        trained = [id(p) for g in groups for p in g["params"]]
        assert magnitudes <= set(trained) and len(trained) == len(set(trained)) == len(list(network.parameters()))
        assert all(g["lr"] in (1e-3, 5e-4) for g in groups if magnitudes & {id(p) for p in g["params"]})
