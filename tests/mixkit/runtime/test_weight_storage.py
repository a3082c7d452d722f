"""Half-precision weight storage with float32 compute: same outputs, half the weight bytes, no drift."""

import pytest
import torch

from mixkit.runtime.config import PRESETS, RuntimeConfig
from mixkit.runtime.weight_storage import store_weights_in
from mixkit.testing.tiny_models import tiny_text_encoder


def round_to(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """The float32 module with every weight rounded through `dtype`: the oracle of storage in `dtype`."""
    with torch.no_grad():
        for tensor in list(module.parameters()) + list(module.buffers()):
            if tensor.is_floating_point():
                tensor.copy_(tensor.to(dtype).float())
    return module


def weight_bytes(module: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


@pytest.mark.parametrize("storage", [torch.float16, torch.bfloat16])
def test_unet_output_equals_float32_compute_on_rounded_weights(tiny_unet, unet_inputs, storage):
    import copy

    oracle = round_to(copy.deepcopy(tiny_unet), storage)
    full_bytes = weight_bytes(tiny_unet)
    hooked = store_weights_in(tiny_unet, storage, torch.float32)
    convs_and_linears = sum(isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)) for m in tiny_unet.modules())
    assert hooked == convs_and_linears
    assert tiny_unet.dtype == torch.float32  # diffusers reports the compute dtype
    assert tiny_unet.conv_in.weight.dtype == storage and tiny_unet.conv_norm_out.weight.dtype == torch.float32
    assert weight_bytes(tiny_unet) < 0.55 * full_bytes  # norms are float32; everything else halved
    with torch.no_grad():
        expected = oracle(*unet_inputs).sample
        before = {k: v.clone() for k, v in tiny_unet.state_dict().items()}
        first = tiny_unet(*unet_inputs).sample
        second = tiny_unet(*unet_inputs).sample
    assert first.dtype == torch.float32
    torch.testing.assert_close(first, expected, rtol=0, atol=0)  # same float32 math on the same values
    torch.testing.assert_close(second, first, rtol=0, atol=0)
    after = tiny_unet.state_dict()
    assert all(after[k].dtype == v.dtype and torch.equal(after[k], v) for k, v in before.items())  # no drift


def test_text_encoder_from_transformers_works_the_same():
    import copy

    encoder = tiny_text_encoder(seed=0).eval()
    oracle = round_to(copy.deepcopy(encoder), torch.float16)
    store_weights_in(encoder, torch.float16, torch.float32)
    ids = torch.tensor([[0, 5, 17, 99, 1]])
    with torch.no_grad():
        got = encoder(ids).last_hidden_state
        expected = oracle(ids).last_hidden_state
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert encoder.encoder.layers[0].mlp.fc1.weight.dtype == torch.float16
    assert encoder.final_layer_norm.weight.dtype == torch.float32


def test_stored_weights_are_never_reallocated(tiny_unet, unet_inputs):
    """Loaded weights are often memory-mapped: replacing them would hold the mapping and a copy at once."""
    half = tiny_unet.half()
    layers = [m for m in half.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    storage = [m.weight.data_ptr() for m in layers]
    store_weights_in(half, torch.float16, torch.float32)
    assert [m.weight.data_ptr() for m in layers] == storage  # already float16: nothing converted or copied
    with torch.no_grad():
        half(*unet_inputs)
    assert [m.weight.data_ptr() for m in layers] == storage  # ... and the forward put back the same tensors
    assert all(m.weight.dtype == torch.float16 for m in layers)


def test_low_memory_preset_stores_float16():
    assert PRESETS.get("low-memory").weight_storage == "float16"
    assert PRESETS.get("fast").weight_storage == PRESETS.get("exact").weight_storage == "float32"


@pytest.mark.parametrize("changes, match", [
    (dict(weight_storage="int8"), "weight_storage='int8'; allowed: float32, float16, bfloat16"),
    (dict(weight_storage="float16", unet_precision="auto"), "already computes in half precision"),
    (dict(weight_storage="float16", compile=True), "compile=True cannot keep"),
    (dict(weight_storage="bfloat16", fuse_qkv=True), "fuse_qkv=True cannot keep"),
])
def test_bad_combinations_are_refused(changes, match):
    with pytest.raises(ValueError, match=match):
        RuntimeConfig(**changes)


def test_runtime_lora_on_half_stored_weights_matches_float32(tiny_unet, unet_inputs, tmp_path):
    """A runtime (bypass) LoRA patch made while the weights are float16 runs in float32 with them."""
    import copy

    from mixkit.lora import LoraRequest, apply_loras
    from mixkit.testing.tiny_lora import write_attention_lora

    write_attention_lora(tiny_unet, tmp_path / "bypass.safetensors", projections=("to_q", "to_v"), scale=0.2)
    request = [LoraRequest(str(tmp_path / "bypass.safetensors"))]
    oracle = round_to(copy.deepcopy(tiny_unet), torch.float16)
    store_weights_in(tiny_unet, torch.float16, torch.float32)
    with torch.no_grad():
        plain = tiny_unet(*unet_inputs).sample
        with apply_loras(oracle, [], request, mode="runtime"):
            expected = oracle(*unet_inputs).sample
        with apply_loras(tiny_unet, [], request, mode="runtime"):
            got = tiny_unet(*unet_inputs).sample
        after = tiny_unet(*unet_inputs).sample
    assert got.dtype == torch.float32 and (got - plain).abs().max() > 1e-3  # the patch took part
    torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-3)  # factors rounded to float16 only
    torch.testing.assert_close(after, plain, rtol=0, atol=0)
