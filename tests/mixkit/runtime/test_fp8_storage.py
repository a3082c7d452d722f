"""FP8 weight storage (mixkit/runtime/fp8_storage.py): linear and convolution layers store float8_e4m3fn, compute in
their own dtype, and get their very tensors back."""

import torch
from torch import nn

from mixkit.forward_patches import latest_forward_change
from mixkit.runtime.fp8_storage import fp8_storage_problem, restore_fp8, store_fp8
from mixkit.runtime.weight_storage import store_weights_in


def _layers(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Flatten(), nn.Linear(4 * 5 * 5, 6), nn.LayerNorm(6))


def _same_tensors(model: nn.Module, before: dict) -> bool:
    """Every parameter on the very storage it had (not a copy), with the values it had."""
    return all(param.data_ptr() == before[name][0] and param.dtype == before[name][1].dtype and
               torch.equal(param.data, before[name][1]) for name, param in model.named_parameters())


def _snapshot(model: nn.Module) -> dict:
    return {name: (param.data_ptr(), param.detach().clone()) for name, param in model.named_parameters()}


def _rounded(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to(torch.float8_e4m3fn).to(tensor.dtype)


def test_this_torch_stores_fp8_on_the_cpu():
    assert fp8_storage_problem([_layers()]) is None


def test_layers_compute_with_their_weights_rounded_to_fp8_and_get_their_own_back():
    model = _layers()
    x = torch.randn(2, 3, 5, 5)
    before = _snapshot(model)
    exact = model(x)
    conv, linear, norm = model[0], model[2], model[3]
    oracle = nn.functional.conv2d(x, _rounded(conv.weight.data), _rounded(conv.bias.data), padding=1).flatten(1)
    oracle = nn.functional.linear(oracle, _rounded(linear.weight.data), _rounded(linear.bias.data))
    oracle = nn.functional.layer_norm(oracle, (6,), norm.weight, norm.bias)

    storage = store_fp8([model])
    assert conv.weight.dtype == linear.bias.dtype == torch.float8_e4m3fn  # stored as FP8 between forwards
    assert norm.weight.dtype == torch.float32  # A1111 converts linear and convolution layers only
    merged = model(x)
    assert merged.dtype == torch.float32 and torch.equal(merged, oracle)
    assert not torch.equal(merged, exact)
    assert conv.weight.dtype == torch.float8_e4m3fn  # the upcast copy is dropped after the forward

    restore_fp8(storage)
    assert _same_tensors(model, before)
    assert torch.equal(model(x), exact)
    assert not any("forward" in layer.__dict__ or hasattr(layer, "_diffusers_hook") for layer in model)  # no hooks


def test_a_layer_the_low_memory_preset_stores_in_half_keeps_its_hook():
    model = _layers()
    store_weights_in(model, torch.float16, torch.float32)
    half = _snapshot(model)
    x = torch.randn(1, 3, 5, 5)
    preset = model(x)
    storage = store_fp8([model])
    assert model[2].weight.dtype == torch.float8_e4m3fn and model(x).dtype == torch.float32
    restore_fp8(storage)
    assert _same_tensors(model, half)
    assert torch.equal(model(x), preset)  # still float16 storage, float32 compute


def test_storing_and_restoring_each_stamp_a_forward_change():
    """The prompt encoder's cache key: text encodings made before FP8 (or during it) are not reused after."""
    model = _layers()
    start = latest_forward_change(model)
    storage = store_fp8([model])
    stored = latest_forward_change(model)
    restore_fp8(storage)
    assert start < stored < latest_forward_change(model)
