"""ToMe installed on a tiny UNet: exact at ratio 0, equal to tomesd's patch, removable."""

import copy

import pytest
import torch
from diffusers import UNet2DConditionModel

from pipelines.approx.tome_unet import (TokenMergingSettings, apply_token_merging, remove_token_merging,
                                        token_merging_state)


@pytest.fixture(scope="module")
def unet(tiny_sd1_dir):
    return UNet2DConditionModel.from_pretrained(tiny_sd1_dir, subfolder="unet").eval()


@pytest.fixture(scope="module")
def inputs():
    generator = torch.Generator().manual_seed(0)
    return torch.randn(2, 4, 16, 12, generator=generator), torch.randn(2, 77, 32, generator=generator)


def run(unet, inputs, t=500):
    with torch.no_grad():
        return unet(inputs[0], t, inputs[1]).sample


def test_ratio_zero_equals_the_plain_unet_exactly(unet, inputs):
    reference = run(unet, inputs)
    apply_token_merging(unet, TokenMergingSettings(0.0))
    try:
        assert torch.equal(run(unet, inputs), reference)
        assert token_merging_state(unet).merged_layers == 0
    finally:
        remove_token_merging(unet)


def test_matches_tomesd_patch_on_the_same_unet(unet, inputs):
    tomesd = pytest.importorskip("tomesd", reason="tomesd is the oracle (test extra)")
    theirs_unet = copy.deepcopy(unet)
    tomesd.apply_patch(theirs_unet, ratio=0.5, use_rand=False)  # tomesd defaults: max_downsample 1, stride 2
    apply_token_merging(unet, TokenMergingSettings(0.5, random_destinations=False))
    try:
        ours, theirs = run(unet, inputs), run(theirs_unet, inputs)
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)
    finally:
        remove_token_merging(unet)


def test_merges_only_full_resolution_self_attention_and_changes_output_moderately(unet, inputs):
    reference = run(unet, inputs)
    wrapped = apply_token_merging(unet, TokenMergingSettings(0.5))
    try:
        state = token_merging_state(unet)
        first = run(unet, inputs)
        # tiny SD1 UNet: 4 transformer blocks, 3 at full latent resolution (1 down, 2 up), 1 in the mid block
        assert wrapped == 4 and state.merged_layers == 3
        assert not torch.equal(first, reference)
        relative = (first - reference).norm() / reference.norm()
        assert 0 < relative < 0.2
        assert torch.equal(run(unet, inputs), first)  # seeded by the timestep: reproducible
    finally:
        remove_token_merging(unet)


def test_remove_restores_the_original_processors(unet, inputs):
    before = dict(unet.attn_processors)
    reference = run(unet, inputs)
    apply_token_merging(unet, TokenMergingSettings(0.6))
    assert any(type(p).__name__ == "TokenMergingAttnProcessor" for p in unet.attn_processors.values())
    apply_token_merging(unet, TokenMergingSettings(0.3))  # a second install replaces the first
    assert remove_token_merging(unet) is True
    assert dict(unet.attn_processors) == before
    assert torch.equal(run(unet, inputs), reference)
    assert remove_token_merging(unet) is False


@pytest.mark.parametrize("ratio", [-0.1, 0.8, float("nan"), "0.5", True])
def test_bad_ratio_is_refused(ratio):
    with pytest.raises(ValueError, match=r"ToMe ratio must be a number in \[0, 0.75\]"):
        TokenMergingSettings(ratio)


def test_an_error_half_way_through_installing_leaves_the_unet_as_it_was(unet, inputs, monkeypatch):
    from pipelines.approx import tome_unet

    before, reference, made = dict(unet.attn_processors), run(unet, inputs), []
    real = tome_unet.TokenMergingAttnProcessor

    def failing_third(inner, state):
        if len(made) == 2:
            raise KeyboardInterrupt  # the user stops the server while ToMe is being installed
        made.append(real(inner, state))
        return made[-1]

    monkeypatch.setattr(tome_unet, "TokenMergingAttnProcessor", failing_third)
    with pytest.raises(KeyboardInterrupt):
        apply_token_merging(unet, TokenMergingSettings(0.5))
    assert len(made) == 2 and token_merging_state(unet) is None
    assert dict(unet.attn_processors) == before
    assert not any(module._forward_pre_hooks for module in unet.modules())
    assert torch.equal(run(unet, inputs), reference)
