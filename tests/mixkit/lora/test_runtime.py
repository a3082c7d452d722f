"""Runtime LoRA patches on convolutions follow the layer's padding mode (A1111's Tiling pads circularly), so a
patched layer gives what a layer holding the merged weights gives, at the edges too."""

import pytest
import torch
from torch import nn

from mixkit.lora.runtime import BypassBranch, RuntimePatch, can_bypass, install_patch


def _conv(padding_mode: str) -> nn.Conv2d:
    torch.manual_seed(0)
    return nn.Conv2d(3, 4, 3, padding=1, padding_mode=padding_mode)


@pytest.mark.parametrize("padding_mode", ["zeros", "circular", "reflect"])
def test_a_dense_change_matches_the_merged_layer_at_the_edges(padding_mode):
    conv = _conv(padding_mode)
    change = torch.randn(4, 3, 3, 3, generator=torch.Generator().manual_seed(1)) * 0.1
    merged = _conv(padding_mode)
    with torch.no_grad():
        merged.weight += change
    x = torch.randn(1, 3, 6, 7, generator=torch.Generator().manual_seed(2))
    undo = install_patch(conv, RuntimePatch(weight_change=change))
    try:
        assert torch.allclose(conv(x), merged(x), atol=1e-5)
    finally:
        undo()


@pytest.mark.parametrize("with_mid", [False, True])
def test_a_low_rank_branch_on_a_circular_conv_matches_its_merged_weights(with_mid):
    conv = _conv("circular")
    assert can_bypass(conv)  # the padding mode is followed at each call
    g = torch.Generator().manual_seed(3)
    if with_mid:  # LoCon with a Tucker core: 1x1 down, kxk mid, 1x1 up
        down, mid = torch.randn(2, 3, generator=g), torch.randn(2, 2, 3, 3, generator=g)
        up = torch.randn(4, 2, generator=g)
        merged_change = torch.einsum("or,rskl,si->oikl", up, mid, down)
    else:  # LoCon: kxk down, 1x1 up
        down, mid, up = torch.randn(2, 3, 3, 3, generator=g), None, torch.randn(4, 2, generator=g)
        merged_change = torch.einsum("or,rikl->oikl", up, down)
    merged = _conv("circular")
    with torch.no_grad():
        merged.weight += 0.5 * merged_change
    x = torch.randn(1, 3, 5, 6, generator=torch.Generator().manual_seed(4))
    undo = install_patch(conv, RuntimePatch(branches=[BypassBranch(down, up, mid, 0.5)]))
    try:
        assert torch.allclose(conv(x), merged(x), atol=1e-5)
    finally:
        undo()


def _linear_and_inputs():
    torch.manual_seed(0)
    layer = nn.Linear(3, 4)
    x = torch.randn(2, 3, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        return layer, x, layer(x)


def test_two_patches_undone_first_applied_first_leave_the_other_and_then_nothing():
    layer, x, base = _linear_and_inputs()
    change = torch.ones(4)
    undo_first = install_patch(layer, RuntimePatch(bias_change=change))
    undo_second = install_patch(layer, RuntimePatch(bias_change=2 * change))
    with torch.no_grad():
        undo_first()  # from under the second: the second stays, the first does not come back later
        assert torch.equal(layer(x), base + 2 * change)
        undo_second()
        assert torch.equal(layer(x), base)
    assert "forward" not in layer.__dict__


def test_undo_after_someone_else_put_the_forward_back_changes_nothing():
    layer, x, base = _linear_and_inputs()
    undo = install_patch(layer, RuntimePatch(bias_change=torch.ones(4)))
    del layer.forward  # a helper restoring the class's forward
    undo()  # used to raise AttributeError
    assert "forward" not in layer.__dict__
    with torch.no_grad():
        assert torch.equal(layer(x), base)
