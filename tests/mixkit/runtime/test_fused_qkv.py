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
