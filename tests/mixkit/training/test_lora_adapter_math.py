"""The training adapter adds exactly `up(down(x)) * multiplier * alpha / rank`, whichever path computes it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mixkit.training.lora_network import LoraAdapter


@pytest.mark.parametrize("base, x", [(nn.Linear(6, 5), torch.randn(2, 7, 6)), (nn.Linear(6, 5), torch.randn(6)),
                                     (nn.Conv2d(6, 5, 1), torch.randn(2, 6, 3, 3)),
                                     (nn.Conv2d(6, 5, 3, padding=1), torch.randn(2, 6, 4, 4))])
def test_added_output_is_the_scaled_low_rank_product(base, x):
    torch.manual_seed(0)
    adapter = LoraAdapter(base, rank=3, alpha=1.5)
    nn.init.normal_(adapter.lora_up.weight)
    adapter.multiplier = 0.7
    out = base(x)
    expected = out + adapter.lora_up(adapter.lora_down(x)) * (0.7 * 1.5 / 3)
    torch.testing.assert_close(adapter.added_to(out, x), expected)
    torch.testing.assert_close(out + adapter(x), expected)


def test_fused_add_trains_the_same_gradients_as_the_plain_sum():
    torch.manual_seed(0)
    base, x = nn.Linear(6, 5), torch.randn(4, 6, requires_grad=True)
    adapter = LoraAdapter(base, rank=2, alpha=2.0)
    nn.init.normal_(adapter.lora_up.weight)
    grads = []
    for combine in (lambda out: adapter.added_to(out, x),
                    lambda out: out + adapter.lora_up(adapter.lora_down(x)) * (2.0 / 2)):
        adapter.zero_grad(set_to_none=True)
        x.grad = None
        combine(base(x)).square().sum().backward()
        grads.append([x.grad.clone(), adapter.lora_down.weight.grad.clone(), adapter.lora_up.weight.grad.clone()])
    for fused, plain in zip(*grads):
        torch.testing.assert_close(fused, plain)


@pytest.mark.parametrize("base, x", [(nn.Linear(6, 5), torch.randn(2, 7, 6)), (nn.Conv2d(6, 5, 1), torch.randn(2, 6, 3, 3))])
def test_kohya_dropouts_act_in_training_mode_only(base, x):
    torch.manual_seed(0)
    adapter = LoraAdapter(base, rank=4, alpha=4.0)
    nn.init.normal_(adapter.lora_up.weight)
    out = base(x)
    plain = adapter.added_to(out, x)
    adapter.dropout, adapter.rank_dropout, adapter.module_dropout = 0.5, 0.5, 0.5
    adapter.eval()
    torch.testing.assert_close(adapter.added_to(out, x), plain)  # eval: no dropout, no random draw
    adapter.train()
    adapter.dropout = adapter.module_dropout = 0.0
    # rank dropout: per sample, the kept rank channels scaled by 1 / (1 - p); replay the draw.
    torch.manual_seed(7)
    dropped = adapter.added_to(out, x)
    torch.manual_seed(7)
    keep = (torch.rand(x.shape[0], 4) > 0.5).float()
    hidden = adapter.lora_down(x)
    keep = keep.view(2, 1, 4) if isinstance(base, nn.Linear) else keep.view(2, 4, 1, 1)
    expected = out + adapter.lora_up(hidden * keep / 0.5) * (4.0 / 4)
    torch.testing.assert_close(dropped, expected)
    # module dropout: the whole adapter skipped for the call with probability p
    adapter.rank_dropout, adapter.module_dropout = 0.0, 0.999999
    torch.testing.assert_close(adapter.added_to(out, x), out)
    adapter.module_dropout, adapter.dropout = 0.0, 0.999999  # every hidden value dropped
    torch.testing.assert_close(adapter.added_to(out, x), out)


def test_max_norm_ratio_brings_the_change_to_the_bound():
    from mixkit.training.lora_network import max_norm_ratio

    up, down = torch.tensor([[3.0]]), torch.tensor([[4.0]])  # change 12 at scale 1
    assert max_norm_ratio(up, down, 1.0, 6.0) == 0.5 and max_norm_ratio(up, down, 0.25, 6.0) == 1.0
    conv_up, conv_down = torch.randn(5, 3, 1, 1), torch.randn(3, 6, 3, 3)
    ratio = max_norm_ratio(conv_up, conv_down, 0.5, 0.1)
    change = nn.functional.conv2d(conv_down.permute(1, 0, 2, 3), conv_up).permute(1, 0, 2, 3) * 0.5
    assert ratio == pytest.approx(0.1 / change.norm().item(), rel=1e-5)
