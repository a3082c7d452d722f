import pytest
import torch

from mixkit.runtime.fused_qkv import FusedQkvAttnProcessor, fuse_qkv


def _attention_modules(unet):
    from diffusers.models.attention_processor import Attention

    return [m for m in unet.modules() if isinstance(m, Attention)]


def test_fused_unet_matches_unfused(tiny_unet, unet_inputs):
    with torch.no_grad():
        expected = tiny_unet(*unet_inputs).sample
        count = fuse_qkv(tiny_unet)
        got = tiny_unet(*unet_inputs).sample
    modules = _attention_modules(tiny_unet)
    assert count == len(modules) > 0
    assert all(isinstance(m.processor, FusedQkvAttnProcessor) for m in modules)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_in_place_weight_merge_reaches_fused_layer(tiny_unet, unet_inputs):
    """LoRA 'merge' mode writes to_q/to_k/to_v in place; the fused GEMM must see it."""
    from diffusers.models.attention_processor import AttnProcessor2_0

    fuse_qkv(tiny_unet)
    attn = _attention_modules(tiny_unet)[0]
    with torch.no_grad():
        before = tiny_unet(*unet_inputs).sample
        attn.to_v.weight.add_(torch.randn(attn.to_v.weight.shape, generator=torch.Generator().manual_seed(1)))
        after = tiny_unet(*unet_inputs).sample
        tiny_unet.set_attn_processor(AttnProcessor2_0())  # diffusers' unfused reference on the same weights
        reference = tiny_unet(*unet_inputs).sample
    assert (after - before).abs().max() > 1e-3
    torch.testing.assert_close(after, reference, rtol=1e-5, atol=1e-5)


def test_runtime_patch_falls_back_to_unfused(tiny_unet, unet_inputs):
    """A patched forward (LoRA 'runtime' mode) on a projection must not be bypassed by the fused GEMM."""
    fuse_qkv(tiny_unet)
    attn = _attention_modules(tiny_unet)[0]
    original = attn.to_v.forward
    with torch.no_grad():
        plain = tiny_unet(*unet_inputs).sample
        attn.to_v.forward = lambda x: original(x) * 2.0
        patched = tiny_unet(*unet_inputs).sample
    assert (patched - plain).abs().max() > 1e-4


@pytest.mark.parametrize("put_back, fused_runs", [("its own forward", True), ("a wrapper", False)])
def test_own_forward_put_back_keeps_the_fused_gemm_and_a_wrapper_does_not(tiny_unet, unet_inputs, put_back,
                                                                           fused_runs):
    """`to_v.forward = saved` leaves the layer's own bound forward in `__dict__`: the plain call, so still fused; a
    wrapper computing the same is someone's patch, which the fused GEMM would bypass."""
    from diffusers.models.attention_processor import AttnProcessor2_0

    fuse_qkv(tiny_unet)
    attn = _attention_modules(tiny_unet)[0]
    fused = attn.to_qkv if getattr(attn, "to_qkv", None) is not None else attn.to_kv
    own = attn.to_v.forward
    attn.to_v.forward = own if put_back == "its own forward" else (lambda x: own(x))
    calls = []
    fused.register_forward_hook(lambda *_: calls.append(1))
    with torch.no_grad():
        got = tiny_unet(*unet_inputs).sample
        tiny_unet.set_attn_processor(AttnProcessor2_0())  # diffusers' unfused reference on the same weights
        reference = tiny_unet(*unet_inputs).sample
    assert bool(calls) is fused_runs
    torch.testing.assert_close(got, reference, rtol=1e-5, atol=1e-5)


def test_cast_after_fusing_stays_correct(tiny_unet, unet_inputs):
    """`.to()` replaces parameters and breaks the views; the processor must notice and run unfused."""
    with torch.no_grad():
        expected = tiny_unet(*unet_inputs).sample
        fuse_qkv(tiny_unet)
        tiny_unet.to(torch.float64).to(torch.float32)
        attn = _attention_modules(tiny_unet)[0]
        attn.to_q.weight.mul_(1.0)  # still its own tensor now
        got = tiny_unet(*unet_inputs).sample
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
