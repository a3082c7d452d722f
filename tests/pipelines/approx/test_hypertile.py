"""HyperTile installed for one generation: tiles that are an exact rearrangement, the same image for a seed, and a
model left as it was after the call, also after a failure."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipelines.approx.hypertile import HyperTileUNetProcessor, HyperTileVaeProcessor, _Run, hypertile_call
from pipelines.approx.hypertile_settings import HyperTile
from pipelines.approx.hypertile_tiles import merge_tokens, split_tokens

# 256 px: a 32 x 32 latent; with 128-px tiles (16 cells) each side is split into 2 or left whole at random
SMALL = dict(prompt="a red circle", width=256, height=256, steps=2, seed=3, sampler="Euler")
TILED = HyperTile(unet_max_tile=128)


class Identity:
    """An attention processor that returns its input, recording the shapes it saw."""

    def __init__(self):
        self.shapes = []

    def __call__(self, attn, hidden_states, **kwargs):
        self.shapes.append(tuple(hidden_states.shape))
        return hidden_states


def _processors(model):
    return {name: module.processor for name, module in model.unet.named_modules() if hasattr(module, "processor")} | \
        {f"vae.{name}": module.processor for name, module in model.vae.named_modules() if hasattr(module, "processor")}


def test_with_identity_attention_the_tiled_output_is_the_input():
    inner = Identity()
    run = _Run(seed=0)
    run.latent_size = (32, 48)
    processor = HyperTileUNetProcessor(inner, run, HyperTile(unet_max_tile=0, unet_swap_size=1), first_level=0)
    tokens = torch.randn(2, 32 * 48, 8, generator=torch.Generator().manual_seed(1))
    assert torch.equal(processor(None, tokens), tokens)
    assert inner.shapes == [(2 * 2 * 3, 16 * 16, 8)]  # swap size 1: always the most tiles, 16-cell tiles
    maps = torch.randn(1, 8, 32, 32, generator=torch.Generator().manual_seed(2))
    vae_inner = Identity()
    assert torch.equal(HyperTileVaeProcessor(vae_inner, run, HyperTile(vae_swap_size=1))(None, maps), maps)
    assert vae_inner.shapes == [(4, 8, 16, 16)]


def test_tiled_attention_is_each_tile_attending_to_itself_alone():
    from diffusers.models.attention_processor import Attention, AttnProcessor2_0

    torch.manual_seed(0)
    attention = Attention(query_dim=8, heads=2, dim_head=4).eval()
    run = _Run(seed=0)
    run.latent_size = (32, 32)
    processor = HyperTileUNetProcessor(AttnProcessor2_0(), run, HyperTile(unet_max_tile=128, unet_swap_size=1), 0)
    tokens = torch.randn(1, 32 * 32, 8)
    with torch.no_grad():
        tiled = processor(attention, tokens)
        separately = merge_tokens(torch.cat([AttnProcessor2_0()(attention, tile[None])
                                             for tile in split_tokens(tokens, 32, 32, 2, 2)]), 32, 32, 2, 2)
        whole = AttnProcessor2_0()(attention, tokens)
    torch.testing.assert_close(tiled, separately, rtol=0, atol=1e-6)
    assert (tiled - whole).abs().max() > 1e-3  # and that is not global attention


def test_a_tile_as_large_as_the_image_is_the_plain_unet_exactly(sd1_pipe):
    unet = sd1_pipe.model.unet
    generator = torch.Generator().manual_seed(0)
    sample, context = torch.randn(1, 4, 16, 16, generator=generator), torch.randn(1, 77, 32, generator=generator)
    with torch.no_grad():
        plain = unet(sample, 500, context).sample
        with hypertile_call(sd1_pipe.model, HyperTile(), seed=0) as run:  # 128 px: one 16-cell tile
            tiled = unet(sample, 500, context).sample
    assert torch.equal(tiled, plain) and run.tiled_calls == 0


def test_hypertile_changes_the_image_the_same_way_for_a_seed_and_is_removed(sd1_pipe):
    before = _processors(sd1_pipe.model)
    plain = np.asarray(sd1_pipe(**SMALL).images[0]).astype(int)
    first, again = (sd1_pipe(**SMALL, hypertile=TILED) for _ in range(2))
    tiled = np.asarray(first.images[0]).astype(int)
    assert np.abs(tiled - plain).max() > 0
    assert np.array_equal(tiled, np.asarray(again.images[0]))
    other_seed = np.asarray(sd1_pipe(**{**SMALL, "seed": 4}, hypertile=TILED).images[0]).astype(int)
    assert not np.array_equal(other_seed, tiled)
    assert _processors(sd1_pipe.model) == before
    assert np.array_equal(np.asarray(sd1_pipe(**SMALL).images[0]), plain)


def test_the_draws_are_seeded_with_the_first_image_seed(sd1_pipe, monkeypatch):
    import pipelines.approx.hypertile as module

    seeds = []
    original = module._Run.__init__

    def recording(self, seed):
        seeds.append(seed)
        original(self, seed)

    monkeypatch.setattr(module._Run, "__init__", recording)
    sd1_pipe(**{**SMALL, "seed": 11, "batch_size": 2}, hypertile=TILED)
    assert seeds == [11]


def test_a_failing_call_removes_hypertile(sd1_pipe, monkeypatch):
    import pipelines.base

    before = _processors(sd1_pipe.model)
    hooks = dict(sd1_pipe.model.unet._forward_pre_hooks)

    def broken(request):
        raise RuntimeError("sampler broke")

    monkeypatch.setattr(pipelines.base, "run_sampler", broken)
    with pytest.raises(RuntimeError, match="sampler broke"):
        sd1_pipe(**SMALL, hypertile=HyperTile(unet_max_tile=128, vae=True))
    assert _processors(sd1_pipe.model) == before
    assert dict(sd1_pipe.model.unet._forward_pre_hooks) == hooks


def test_the_vae_part_alone_changes_only_the_decode(sd1_pipe):
    plain = np.asarray(sd1_pipe(**SMALL).images[0]).astype(int)
    vae_only = sd1_pipe(**SMALL, hypertile=HyperTile(unet=False, vae=True, vae_swap_size=1))
    assert 0 < np.abs(np.asarray(vae_only.images[0]).astype(int) - plain).max()
    assert "Hypertile VAE: True" in vae_only.infotexts[0] and "Hypertile U-Net" not in vae_only.infotexts[0]


def test_the_infotext_records_it_and_reads_back(sd1_pipe):
    from pipelines.infotext import split_infotext

    settings = HyperTile(unet_max_tile=128, unet_swap_size=2, vae=True)
    infotext = sd1_pipe(**SMALL, hypertile=settings).infotexts[0]
    assert "Hypertile U-Net: True, Hypertile U-Net max tile size: 128, Hypertile U-Net swap size: 2, " \
           "Hypertile VAE: True" in infotext
    assert "max depth" not in infotext  # defaults are left out, as A1111 does
    assert HyperTile.from_infotext(split_infotext(infotext)[2]) == settings


def test_the_hires_second_pass_alone_is_tiled_and_recorded(sd1_pipe, monkeypatch):
    from pipelines.hires import HiresFix

    import pipelines.approx.hypertile as module

    calls = []
    original = module.check_hypertile_model
    monkeypatch.setattr(module, "check_hypertile_model", lambda model, settings: (calls.append(1), original(model,
                                                                                                          settings)))
    result = HiresFix(sd1_pipe)(prompt="a cat", width=128, height=128, steps=2, seed=1, sampler="Euler",
                                hr_scale=2, denoising_strength=0.5, hr_upscaler="Latent",
                                hypertile=HyperTile(unet=False, unet_hires=True, unet_max_tile=128))
    assert len(calls) == 1  # installed for the second pass only
    infotext = result.infotexts[0]
    assert "Hypertile U-Net second pass: True, Hypertile U-Net max tile size: 128" in infotext
    assert "Hypertile U-Net: True" not in infotext


def test_sdxl_tiles_from_its_first_attention_level(sdxl_pipe):
    from pipelines.approx.hypertile import _first_attention_level

    assert _first_attention_level(sdxl_pipe.model.unet) == 1
    # SDXL's first level is convolution only: at 512 px its first attention level has a 32 x 32 grid, 2 x 2 tiles
    large = {**SMALL, "width": 512, "height": 512, "steps": 1}
    plain = np.asarray(sdxl_pipe(**large).images[0]).astype(int)
    with_tiles = HyperTile(unet_max_tile=0, unet_swap_size=1)
    tiled = sdxl_pipe(**large, hypertile=with_tiles)
    assert np.abs(np.asarray(tiled.images[0]).astype(int) - plain).max() > 0


@pytest.mark.parametrize("change, message", [
    ("openvino", "denoiser is .*backend 'openvino'"),
    ("tome", "HyperTile and ToMe"),
    ("taesd", "TAESD decodes"),
])
def test_it_is_refused_where_it_cannot_apply_before_any_work(sd1_pipe, monkeypatch, change, message):
    import pipelines.base
    from pipelines.approx.labels import model_labels, set_model_labels
    from pipelines.approx.tome_unet import TokenMergingSettings, apply_token_merging, remove_token_merging

    model = sd1_pipe.model
    monkeypatch.setattr(pipelines.base, "run_sampler", lambda request: pytest.fail("sampled"))
    if change == "openvino":
        monkeypatch.setitem(model.extras, "execution_backend", "openvino")
    elif change == "taesd":
        labels = model_labels(model)
        set_model_labels(model, labels.with_approximations(taesd=True, deepcache=None, tome=None))
    before = _processors(model) if change != "tome" else None
    if change == "tome":
        apply_token_merging(model.unet, TokenMergingSettings(0.5))
        before = _processors(model)
    try:
        with pytest.raises(ValueError, match=message):
            sd1_pipe(**SMALL, hypertile=HyperTile(vae=change == "taesd", unet=change != "taesd"))
        assert _processors(model) == before
    finally:
        remove_token_merging(model.unet)
        if change == "taesd":
            set_model_labels(model, labels)
