"""mixkit's diffusers processor reproduces diffusers' default attention on tiny SD1/SDXL UNets and a VAE."""

from __future__ import annotations

import pytest
import torch

from mixkit.attention import MixkitAttnProcessor, apply_to_diffusers, attention_backend

pytest.importorskip("diffusers")
from diffusers import AutoencoderKL, UNet2DConditionModel  # noqa: E402
from diffusers.models.attention_processor import Attention, AttnAddedKVProcessor, AttnProcessor2_0  # noqa: E402

BACKENDS = ["math", "sdpa"]


def _attention_modules(model):
    return [m for m in model.modules() if isinstance(m, Attention)]


def _sd1_inputs():
    gen = torch.Generator().manual_seed(0)
    sample = torch.randn(2, 4, 8, 8, generator=gen)
    context = torch.randn(2, 7, 32, generator=gen)
    padding = torch.ones(2, 7)
    padding[1, 4:] = 0  # second prompt is 4 tokens long: exercises diffusers' mask path
    return sample, context, padding


@pytest.fixture(scope="module")
def sd1_unet_and_reference(tiny_sd1_dir):
    unet = UNet2DConditionModel.from_pretrained(tiny_sd1_dir, subfolder="unet").eval()
    assert all(type(m.processor) is AttnProcessor2_0 for m in _attention_modules(unet))
    sample, context, padding = _sd1_inputs()
    with torch.no_grad():
        plain = unet(sample, 10, encoder_hidden_states=context).sample
        masked = unet(sample, 10, encoder_hidden_states=context, encoder_attention_mask=padding).sample
    assert not torch.allclose(plain, masked)  # the mask really changes the output
    count = apply_to_diffusers(unet)
    return unet, plain, masked, count


@pytest.mark.parametrize("backend", BACKENDS)
def test_sd1_unet_matches_diffusers_default_processor(sd1_unet_and_reference, backend):
    unet, plain, masked, count = sd1_unet_and_reference
    assert count == len(_attention_modules(unet)) > 0
    assert all(isinstance(m.processor, MixkitAttnProcessor) for m in _attention_modules(unet))
    sample, context, padding = _sd1_inputs()
    with torch.no_grad(), attention_backend(backend):
        out_plain = unet(sample, 10, encoder_hidden_states=context).sample
        out_masked = unet(sample, 10, encoder_hidden_states=context, encoder_attention_mask=padding).sample
    torch.testing.assert_close(out_plain, plain, rtol=0, atol=1e-5)
    torch.testing.assert_close(out_masked, masked, rtol=0, atol=1e-5)


def test_every_attention_module_asks_the_dispatcher(sd1_unet_and_reference, spy_backend):
    unet, _, _, count = sd1_unet_and_reference
    sample, context, padding = _sd1_inputs()
    with torch.no_grad(), attention_backend("spy"):
        unet(sample, 10, encoder_hidden_states=context, encoder_attention_mask=padding)
    assert len(spy_backend.calls) == count
    # cross-attention calls carry the padding mask, self-attention calls carry none
    assert {mask for _, mask in spy_backend.calls} == {None, "torch.float32"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_sdxl_unet_matches_diffusers_default_processor(tiny_sdxl_dir, backend):
    unet = UNet2DConditionModel.from_pretrained(tiny_sdxl_dir, subfolder="unet").eval()
    gen = torch.Generator().manual_seed(1)
    sample = torch.randn(2, 4, 8, 8, generator=gen)
    context = torch.randn(2, 7, 64, generator=gen)
    added = {"text_embeds": torch.randn(2, 32, generator=gen), "time_ids": torch.randn(2, 6, generator=gen)}
    with torch.no_grad():
        expected = unet(sample, 10, encoder_hidden_states=context, added_cond_kwargs=added).sample
        assert apply_to_diffusers(unet) == len(_attention_modules(unet))
        with attention_backend(backend):
            out = unet(sample, 10, encoder_hidden_states=context, added_cond_kwargs=added).sample
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vae_group_norm_residual_attention_matches(tiny_sd1_dir, backend):
    vae = AutoencoderKL.from_pretrained(tiny_sd1_dir, subfolder="vae").eval()
    attn = _attention_modules(vae)
    assert attn and all(m.group_norm is not None and m.residual_connection for m in attn)
    image = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = vae.decode(vae.encode(image).latent_dist.mean).sample
        apply_to_diffusers(vae)
        with attention_backend(backend):
            out = vae.decode(vae.encode(image).latent_dist.mean).sample
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-5)


def test_processor_honours_rescale_factor_and_unscaled_attention():
    # rescale_output_factor and scale_qk=False (scale 1.0, handled by diffusers' AttnProcessor) are
    # not used by the tiny SD models, so check them on a bare Attention module.
    torch.manual_seed(0)
    attn = Attention(query_dim=16, heads=2, dim_head=8, rescale_output_factor=2.0, scale_qk=False).eval()
    hidden = torch.randn(2, 5, 16)
    with torch.no_grad():
        expected = attn(hidden)
        apply_to_diffusers(attn)
        with attention_backend("math"):
            out = attn(hidden)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-5)


def test_processors_with_extra_behaviour_block_the_switch_and_nothing_changes():
    torch.manual_seed(0)
    model = torch.nn.ModuleDict({
        "plain": Attention(query_dim=16, heads=2, dim_head=8),
        "added_kv": Attention(query_dim=16, heads=2, dim_head=8, added_kv_proj_dim=16, processor=AttnAddedKVProcessor()),
    })
    with pytest.raises(ValueError, match=r"added_kv \(AttnAddedKVProcessor\).*Nothing was changed"):
        apply_to_diffusers(model)
    assert type(model["plain"].processor) is AttnProcessor2_0


def test_models_without_diffusers_attention_are_rejected():
    with pytest.raises(ValueError, match="no diffusers Attention module.*pipe.unet"):
        apply_to_diffusers(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="expects a torch.nn.Module"):
        apply_to_diffusers("unet")


@pytest.mark.parametrize("slice_size", [1, 2, 3, 8])
@pytest.mark.parametrize("mask_shape", [None, (2, 1, 1, 9), (2, 3, 5, 9), (1, 3, 1, 9)])
def test_sliced_processor_equals_one_call_and_asks_the_dispatcher(slice_size, mask_shape, spy_backend):
    from mixkit.attention import SlicedMixkitAttnProcessor, attention, attention_backend

    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 3, 5, 4, generator=gen), torch.randn(2, 3, 9, 4, generator=gen)
    v = torch.randn(2, 3, 9, 6, generator=gen)  # value head dim differs from the query's
    mask = None if mask_shape is None else torch.randn(*mask_shape, generator=gen)
    expected = attention(q, k, v, attn_mask=mask, scale=0.3, backend="math")
    with attention_backend("spy"):
        got = SlicedMixkitAttnProcessor(slice_size).attend(q, k, v, mask, 0.3)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
    rows = 2 * 3
    assert len(spy_backend.calls) == (1 if rows <= slice_size else -(-rows // slice_size))


@pytest.mark.parametrize("slice_size", [0, -1, 1.5, True])
def test_sliced_processor_refuses_bad_slice_sizes(slice_size):
    from mixkit.attention import SlicedMixkitAttnProcessor

    with pytest.raises(ValueError, match="slice_size must be a positive integer"):
        SlicedMixkitAttnProcessor(slice_size)
