"""`mixkit.prompts.emphasis`: A1111's "Original" mode on the strided chunk slices the encoder hands it."""

import torch

from mixkit.prompts.emphasis import EMPHASIS_MODES


def test_original_with_every_weight_one_returns_a_near_zero_mean_slice_unchanged():
    # The encoder passes z[:, index] of a [B, chunks, 77, D] batch; summed in its strided order the mean of a
    # zero-mean-ish chunk differed from the (contiguous) product's in the last bits: 1.5e-9 / 0.0 = inf.
    generator = torch.Generator().manual_seed(0)
    batch = torch.randn(2, 2, 77, 32, generator=generator)
    batch = batch - batch.mean(dim=(2, 3), keepdim=True)  # each chunk's mean ~0, as a fresh layer norm gives
    z = batch[:, 1]
    assert not z.is_contiguous()
    out = EMPHASIS_MODES.get("Original").apply(z, torch.ones(2, 77))
    assert torch.isfinite(out).all() and torch.equal(out, z)


def test_original_restores_the_mean_a_weight_shifted():
    z = torch.full((1, 77, 4), 2.0)
    weights = torch.ones(1, 77)
    weights[0, 5] = 3.0
    out = EMPHASIS_MODES.get("Original").apply(z, weights)
    torch.testing.assert_close(out.mean(), z.mean())
    assert out[0, 5, 0] / out[0, 0, 0] == 3.0
