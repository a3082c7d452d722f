"""Growing a tiny UNet (full-resolution cross-attention, deeper transformers) keeps its output bit for bit."""

from __future__ import annotations

import pytest
import torch

from mixkit.tiny.recipe_sd import build_tiny_unet
from mixkit.tiny.unet_growth import (grow_full_resolution_attention, grow_transformer_depth,
                                     has_full_resolution_attention, transformer_layers)


def _randomised(unet):
    """Trained-looking weights: diffusers zero-initialises some layers, which would hide a wrong mapping."""
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for parameter in unet.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.05)
    return unet.eval()


def _assert_same_output(unet, grown):
    """Both UNets give bit-identical outputs on random inputs; returns those inputs for further calls."""
    generator = torch.Generator().manual_seed(0)
    latents = torch.randn(2, 4, 8, 8, generator=generator)
    context = torch.randn(2, 5, 16, generator=generator)
    with torch.no_grad():
        before = unet(latents, torch.tensor([10, 900]), encoder_hidden_states=context).sample
        after = grown(latents, torch.tensor([10, 900]), encoder_hidden_states=context).sample
    assert torch.equal(before, after)
    return latents, context


def test_grown_unet_computes_exactly_what_the_trained_one_did():
    unet = _randomised(build_tiny_unet([32, 32], cross_attention_dim=16, sample_size=8, seed=0))
    assert not has_full_resolution_attention(unet.config)
    grown = grow_full_resolution_attention(unet, seed=1).eval()
    assert has_full_resolution_attention(grown.config)
    assert list(grown.config.down_block_types[1:]) == list(unet.config.down_block_types[1:])

    old, new = unet.state_dict(), grown.state_dict()
    assert all(torch.equal(old[key], new[key]) for key in old)  # every trained weight kept
    added = set(new) - set(old)
    assert added and all(k.startswith(("down_blocks.0.attentions.", "up_blocks.1.attentions.")) for k in added)

    latents, context = _assert_same_output(unet, grown)

    # and the new blocks are trainable: their output projection gets a gradient from the first step
    grown.train()
    grown(latents, torch.tensor([10, 900]), encoder_hidden_states=context).sample.square().mean().backward()
    assert grown.down_blocks[0].attentions[0].proj_out.weight.grad.abs().sum() > 0


def test_growing_twice_or_an_unknown_layout_is_refused_with_the_reason():
    unet = build_tiny_unet([32, 32], cross_attention_dim=16, sample_size=8, seed=0, full_resolution_attention=True)
    with pytest.raises(ValueError, match="has full-resolution attention already"):
        grow_full_resolution_attention(unet)
    plain = build_tiny_unet([32, 32], cross_attention_dim=16, sample_size=8, seed=0)
    plain.register_to_config(up_block_types=("CrossAttnUpBlock2D", "AttnUpBlock2D"))
    with pytest.raises(ValueError, match="can only grow"):
        grow_full_resolution_attention(plain)


@pytest.mark.parametrize("level", [0, 1])
def test_a_deeper_transformer_computes_exactly_what_the_trained_one_did(level):
    unet = _randomised(build_tiny_unet([32, 32], cross_attention_dim=16, sample_size=8, seed=0,
                                       full_resolution_attention=True))
    grown = grow_transformer_depth(unet, level=level, seed=1).eval()
    assert transformer_layers(grown.config) == ([2, 1] if level == 0 else [1, 2])
    up = 1 - level
    assert all(len(a.transformer_blocks) == 2 for a in grown.down_blocks[level].attentions + grown.up_blocks[up].attentions)
    old, new = unet.state_dict(), grown.state_dict()
    assert all(torch.equal(old[key], new[key]) for key in old)
    added = set(new) - set(old)
    assert added and all(".transformer_blocks.1." in k for k in added)
    assert {k.split(".attentions.")[0] for k in added} == {f"down_blocks.{level}", f"up_blocks.{up}"} | (
        {"mid_block"} if level == 1 else set())

    latents, context = _assert_same_output(unet, grown)

    grown.train()  # the zeroed outputs are where learning starts: they get a gradient on the first step
    grown(latents, torch.tensor([10, 900]), encoder_hidden_states=context).sample.square().mean().backward()
    new_block = grown.down_blocks[level].attentions[0].transformer_blocks[1]
    assert new_block.ff.net[-1].weight.grad.abs().sum() > 0

    deeper = grow_transformer_depth(grown, level=level)  # and again: a third block
    assert max(transformer_layers(deeper.config)) == 3


def test_deepening_a_level_without_attention_is_refused_with_the_way_out():
    plain = build_tiny_unet([32, 32], cross_attention_dim=16, sample_size=8, seed=0)
    with pytest.raises(ValueError, match="full_resolution_attention=true"):
        grow_transformer_depth(plain, level=0)
    with pytest.raises(ValueError, match="level must be an integer in"):
        grow_transformer_depth(plain, level=2)


def test_tiny_sd_recipe_refuses_deeper_16x16_transformers_without_16x16_attention():
    from mixkit.tiny.recipe_sd import TinySDRecipe

    with pytest.raises(ValueError, match="needs full_resolution_attention=true"):
        TinySDRecipe(full_resolution_transformer_layers=2).check()
    with pytest.raises(ValueError, match="full_resolution_transformer_layers must be a positive integer"):
        TinySDRecipe(full_resolution_attention=True, full_resolution_transformer_layers=0).check()
