"""EMA against diffusers' EMAModel (the peer oracle) over several updates."""

import pytest
import torch

from mixkit.training.ema import EmaWeights, ema_decay


def test_decay_schedule():
    assert ema_decay(1, 0.999) == 0.0
    assert ema_decay(2, 0.999) == pytest.approx(2 / 11)
    assert ema_decay(10_000, 0.999) == 0.999


def test_matches_diffusers_ema_model():
    from diffusers.training_utils import EMAModel

    layer = torch.nn.Linear(3, 2)
    theirs = EMAModel(layer.parameters(), decay=0.9, use_ema_warmup=False)
    ours = EmaWeights(layer.parameters(), max_decay=0.9)
    generator = torch.Generator().manual_seed(0)
    for _ in range(6):
        with torch.no_grad():
            for p in layer.parameters():
                p.add_(torch.randn(p.shape, generator=generator))
        theirs.step(layer.parameters())
        ours.update(layer.parameters())
    for a, b in zip(theirs.shadow_params, ours.shadow):
        torch.testing.assert_close(a, b)
    restored = EmaWeights(layer.parameters(), max_decay=0.9)
    restored.load_state_dict(ours.state_dict())
    assert restored.updates == 6 and all(torch.equal(a, b) for a, b in zip(restored.shadow, ours.shadow))
    ours.copy_to(layer.parameters())
    assert torch.equal(layer.weight, ours.shadow[0])


def test_bad_decay():
    with pytest.raises(ValueError, match="decay"):
        EmaWeights([torch.nn.Parameter(torch.zeros(1))], max_decay=1.0)


def test_applied_to_swaps_the_averages_in_and_the_weights_back_also_on_errors():
    param = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    ema = EmaWeights([param], max_decay=0.5)
    with torch.no_grad():
        param.copy_(torch.tensor([3.0, 4.0]))
    with pytest.raises(RuntimeError, match="inside"):
        with ema.applied_to([param]):
            assert torch.equal(param.detach(), torch.tensor([1.0, 2.0]))
            raise RuntimeError("inside")
    assert torch.equal(param.detach(), torch.tensor([3.0, 4.0]))
