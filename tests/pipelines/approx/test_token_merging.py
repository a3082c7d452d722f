"""Bipartite soft matching against tomesd (the paper authors' implementation) as the oracle."""

import pytest
import torch

from pipelines.approx.token_merging import destination_mask, plan_token_merge, tokens_to_merge


@pytest.mark.parametrize("height, width", [(8, 8), (7, 9), (16, 12), (5, 4)])
@pytest.mark.parametrize("ratio", [0.3, 0.5, 0.75])
def test_merge_then_unmerge_matches_tomesd(height, width, ratio):
    tomesd_merge = pytest.importorskip("tomesd.merge", reason="tomesd is the oracle (test extra)")
    torch.manual_seed(height * 100 + width)
    x = torch.randn(2, height * width, 6)
    removed = tokens_to_merge(height * width, ratio)
    plan = plan_token_merge(x, height, width, removed)
    merge, unmerge = tomesd_merge.bipartite_soft_matching_random2d(x, width, height, 2, 2, removed, no_rand=True)
    ours, theirs = plan.merge(x), merge(x)
    assert ours.shape == theirs.shape == (2, height * width - plan.removed, 6)
    # The same groups and means; only the order of the merged tokens may differ.
    for row in range(2):
        assert torch.allclose(_sorted_rows(ours[row]), _sorted_rows(theirs[row]), atol=1e-6)
    # Unmerging a token-wise function of the merged tokens is order-independent: exactly equal.
    torch.testing.assert_close(plan.unmerge(ours.tanh()), unmerge(theirs.tanh()), rtol=0, atol=1e-6)


def test_zero_ratio_is_the_identity():
    x = torch.randn(2, 64, 4)
    plan = plan_token_merge(x, 8, 8, tokens_to_merge(64, 0.0))
    assert plan.removed == 0
    assert torch.equal(plan.unmerge(plan.merge(x)), x)


def test_each_token_gets_the_mean_of_its_group():
    torch.manual_seed(1)
    x = torch.randn(1, 36, 3)
    plan = plan_token_merge(x, 6, 6, 12)
    restored = plan.unmerge(plan.merge(x))[0]
    destinations = plan.destinations.tolist()
    for source, target in zip(plan.merged_sources[0].tolist(), plan.merged_into[0].tolist()):
        members = [destinations[target]] + [s for s, t in zip(plan.merged_sources[0].tolist(),
                                                               plan.merged_into[0].tolist()) if t == target]
        torch.testing.assert_close(restored[source], x[0, members].mean(0))
    for kept in plan.kept_sources[0].tolist():
        assert torch.equal(restored[kept], x[0, kept])


def test_identical_tokens_in_a_window_merge_without_loss():
    base = torch.randn(1, 4 * 4, 5)  # one value per 2x2 window, repeated over its four tokens
    grid = base.view(1, 4, 4, 5).repeat_interleave(2, 1).repeat_interleave(2, 2).reshape(1, 64, 5)
    plan = plan_token_merge(grid, 8, 8, 48)
    assert plan.removed == 48  # every source merges into its own window's destination
    torch.testing.assert_close(plan.unmerge(plan.merge(grid)), grid)


def test_destinations_one_per_full_window_and_removal_capped():
    mask = destination_mask(5, 7, 2, torch.full((2, 3), 3))
    assert int(mask.sum()) == 6  # 2x3 full windows; the odd last row and column are all sources
    assert mask.view(5, 7)[1, 1] and mask.view(5, 7)[3, 5] and not mask.view(5, 7)[4].any()
    plan = plan_token_merge(torch.randn(1, 35, 2), 5, 7, 1000)
    assert plan.removed == 35 - 6


def test_grid_size_mismatch_is_an_error():
    with pytest.raises(ValueError, match="metric has 10 tokens, but the grid is 3x3"):
        plan_token_merge(torch.randn(1, 10, 2), 3, 3, 2)


def _sorted_rows(tokens):
    order = sorted(range(tokens.shape[0]), key=lambda i: tokens[i].tolist())
    return tokens[order]
