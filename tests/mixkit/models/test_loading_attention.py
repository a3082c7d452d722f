"""`load_diffusion_model(attention=...)`: mixkit attention installed at load, outputs as before."""

import pytest
import torch

from mixkit.attention import MixkitAttnProcessor, attention_backend
from mixkit.errors import UnknownNameError
from mixkit.models.diffusion.loading import load_diffusion_model


class SpyKernel:
    """Records each call's q shape, then runs the reference kernel."""

    def __init__(self):
        self.calls = []

    def __call__(self, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        from mixkit.attention.math_attention import math_attention

        self.calls.append((tuple(q.shape), attn_mask is not None))
        return math_attention(q, k, v, attn_mask, dropout_p, is_causal, scale)


@pytest.fixture
def spy_calls(monkeypatch):
    from mixkit.attention import ATTENTION_BACKENDS, AttentionBackend

    kernel = SpyKernel()
    monkeypatch.setitem(ATTENTION_BACKENDS._entries, "spy", AttentionBackend(name="spy", fn=kernel, description="test spy"))
    return kernel


def _processor_types(module):
    return {type(p).__name__ for p in module.attn_processors.values()}


def _outputs(model):
    gen = torch.Generator().manual_seed(0)
    sample = torch.randn(1, 4, 8, 8, generator=gen)
    ids = model.tokenizers[0]("a red cube", padding="max_length", max_length=77, return_tensors="pt").input_ids
    with torch.no_grad():
        text = [e(input_ids=ids, output_hidden_states=True) for e in model.text_encoders]
        context = torch.cat([t.hidden_states[-2] for t in text], dim=-1)
        added = None
        if len(text) == 2:
            added = {"text_embeds": text[1].text_embeds, "time_ids": torch.tensor([[64.0, 64, 0, 0, 64, 64]])}
        noise = model.unet(sample, 500, context, added_cond_kwargs=added).sample
        pixels = model.vae.decode(sample).sample
    return [t.last_hidden_state for t in text] + [noise, pixels]


@pytest.mark.parametrize("fixture", ["tiny_sd1_dir", "tiny_sdxl_dir"])
def test_auto_installs_mixkit_attention_everywhere_and_keeps_outputs(request, fixture):
    folder = request.getfixturevalue(fixture)
    plain = load_diffusion_model(folder, attention="diffusers")
    routed = load_diffusion_model(folder)  # "auto" is the default
    assert _processor_types(routed.unet) == {"MixkitAttnProcessor"}
    assert _processor_types(routed.vae) == {"MixkitAttnProcessor"}
    assert "MixkitAttnProcessor" not in _processor_types(plain.unet) | _processor_types(plain.vae)
    for encoder in routed.text_encoders:
        assert encoder.config._attn_implementation == "mixkit"
    for encoder in plain.text_encoders:
        assert encoder.config._attn_implementation != "mixkit"
    assert routed.extras["attention"].startswith("attention=auto (unet: ")
    assert plain.extras["attention"] == "attention=diffusers (nothing switched)"
    for got, expected in zip(_outputs(routed), _outputs(plain)):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_installed_attention_follows_the_backend_switch(tiny_sd1_dir, spy_calls):
    model = load_diffusion_model(tiny_sd1_dir)
    with attention_backend("spy"):
        _outputs(model)
    shapes = {shape for shape, _ in spy_calls.calls}
    assert any(s[2] == 77 for s in shapes), "text encoder attention must reach the dispatcher"
    assert any(s[2] == 64 for s in shapes), "UNet/VAE attention on the 8x8 latent must reach the dispatcher"


def test_single_file_loads_get_the_same_attention(tiny_sd1_dir, tmp_path):
    from mixkit.models.diffusion import save_ldm_checkpoint

    checkpoint = tmp_path / "tiny.safetensors"
    save_ldm_checkpoint(load_diffusion_model(tiny_sd1_dir, attention="diffusers"), checkpoint)
    model = load_diffusion_model(checkpoint, config_dir=tiny_sd1_dir)
    assert isinstance(next(iter(model.unet.attn_processors.values())), MixkitAttnProcessor)
    assert model.text_encoders[0].config._attn_implementation == "mixkit"


def test_unknown_attention_mode_is_refused_before_loading(tmp_path):
    with pytest.raises(UnknownNameError, match="'auto', 'diffusers'"):
        load_diffusion_model(tmp_path / "does-not-matter", attention="fastest")
    with pytest.raises(TypeError, match="attention must be a name"):
        load_diffusion_model(tmp_path / "does-not-matter", attention=None)


def test_a_part_without_attention_is_left_alone_and_counted_as_zero():
    from diffusers import AutoencoderKL

    from mixkit.attention import install_attention

    vae = AutoencoderKL(block_out_channels=(8,), norm_num_groups=4, latent_channels=4, mid_block_add_attention=False)
    assert install_attention([("vae", vae)], "auto").switched == {"vae": 0}
