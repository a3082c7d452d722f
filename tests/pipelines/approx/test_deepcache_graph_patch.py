"""DeepCache on a graph stand-in (the OpenVINO UNet) is a ForwardPatch on the stand-in's `forward`, which its call
goes through: it stacks with other patches and comes off in any order, leaving nothing behind.

The stand-in is the real `OpenVinoUNet` class with its compiled graphs replaced by exact fakes (no openvino
needed): the plain graph answers `sample + 1`, the DeepCache full graph the same output and the feature
`10 * sample`, the shallow graph `feature + sample`, so every call's answer says which graph ran."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from mixkit.forward_patches import ForwardPatch, install_forward_patch
from mixkit.runtime.openvino_unet import OpenVinoUNet, _Output
from pipelines.approx.deepcache import DeepCacheSettings, apply_deepcache, deepcache_state, remove_deepcache

from ...model_patches import model_patches

SAMPLE = torch.arange(4.0).reshape(1, 1, 2, 2)
STATES = torch.zeros(1, 77, 8)


class FakeBranch:
    """DeepCache's two halves as exact functions, recording which ran."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def full(self, sample, timestep, encoder_hidden_states, added_cond_kwargs=None, **kwargs):
        self.calls.append("full")
        return _Output(sample + 1), 10 * sample

    def shallow(self, feature, sample, timestep, encoder_hidden_states, added_cond_kwargs=None, **kwargs):
        self.calls.append("shallow")
        return _Output(feature + sample)


@pytest.fixture
def standin():
    """An `OpenVinoUNet` whose plain graph, full graph and one-layer shallow branch are fakes."""
    unet = object.__new__(OpenVinoUNet)  # no conversion: the compiled graphs are the fakes below
    unet.deepcache_layers = 2
    unet.plain_calls = 0

    def plain_graph(sample, timestep, encoder_hidden_states, added_cond_kwargs, kwargs):
        unet.plain_calls += 1
        return [sample + 1]

    unet.run_graph = plain_graph
    unet._branches = {1: FakeBranch()}
    return unet


def call(unet, timestep: float) -> torch.Tensor:
    return unet(SAMPLE, torch.tensor(timestep), STATES).sample


def doubled(unet):
    """Another patch on the stand-in's forward: doubles whatever is below it."""
    return install_forward_patch(unet, lambda below, *args, **kwargs: _Output(2 * below(*args, **kwargs).sample),
                                 "doubler")


def test_deepcache_is_a_forward_patch_and_runs_its_schedule(standin):
    branch = standin._branches[1]
    apply_deepcache(standin, DeepCacheSettings(interval=2))
    assert isinstance(standin.__dict__["forward"], ForwardPatch) and "call_hook" not in standin.__dict__
    outputs = [call(standin, t) for t in (900.0, 800.0, 700.0)]
    assert branch.calls == ["full", "shallow", "full"] and standin.plain_calls == 0
    torch.testing.assert_close(outputs[0], SAMPLE + 1, rtol=0, atol=0)
    torch.testing.assert_close(outputs[1], 11 * SAMPLE, rtol=0, atol=0)  # the cached feature plus the sample
    torch.testing.assert_close(outputs[2], SAMPLE + 1, rtol=0, atol=0)
    state = deepcache_state(standin)
    assert (state.full_calls, state.cached_calls) == (2, 1)
    assert remove_deepcache(standin)
    assert "forward" not in standin.__dict__ and deepcache_state(standin) is None
    torch.testing.assert_close(call(standin, 600.0), SAMPLE + 1, rtol=0, atol=0)
    assert standin.plain_calls == 1 and branch.calls == ["full", "shallow", "full"]


@pytest.mark.parametrize("first_off", ["deepcache", "doubler"])
def test_a_patch_stacked_on_deepcache_and_deepcache_come_off_in_either_order(standin, first_off):
    apply_deepcache(standin, DeepCacheSettings(interval=2))
    doubler = doubled(standin)
    torch.testing.assert_close(call(standin, 900.0), 2 * (SAMPLE + 1), rtol=0, atol=0)  # full, doubled
    torch.testing.assert_close(call(standin, 800.0), 2 * 11 * SAMPLE, rtol=0, atol=0)  # cached, doubled
    if first_off == "deepcache":
        assert remove_deepcache(standin)
        torch.testing.assert_close(call(standin, 700.0), 2 * (SAMPLE + 1), rtol=0, atol=0)  # the plain graph
        assert standin.plain_calls == 1
        doubler.remove()
    else:
        doubler.remove()
        torch.testing.assert_close(call(standin, 700.0), SAMPLE + 1, rtol=0, atol=0)  # DeepCache's full call
        assert standin.plain_calls == 0 and standin._branches[1].calls[-1] == "full"
        assert remove_deepcache(standin)
    assert "forward" not in standin.__dict__ and deepcache_state(standin) is None
    torch.testing.assert_close(call(standin, 600.0), SAMPLE + 1, rtol=0, atol=0)


def test_applying_deepcache_again_replaces_its_patch(standin):
    apply_deepcache(standin, DeepCacheSettings(interval=2))
    apply_deepcache(standin, DeepCacheSettings(interval=3))
    patch = standin.__dict__["forward"]
    assert isinstance(patch, ForwardPatch) and patch.below is None  # one DeepCache, on the graph's own forward
    assert deepcache_state(standin).settings.interval == 3
    assert remove_deepcache(standin) and "forward" not in standin.__dict__


def test_a_wrapper_already_on_the_forward_is_refused_changing_nothing(standin):
    doubler = doubled(standin)
    with pytest.raises(ValueError, match="DeepCache cannot wrap a UNet whose forward is already replaced"):
        apply_deepcache(standin, DeepCacheSettings(interval=2))
    assert standin.__dict__["forward"] is doubler and deepcache_state(standin) is None
    doubler.remove()
    assert "forward" not in standin.__dict__


def test_the_suites_leftover_check_sees_a_patch_on_a_stand_in(standin):
    model = SimpleNamespace(unet=standin, vae=None, text_encoders=[])
    assert model_patches(model) == {}
    apply_deepcache(standin, DeepCacheSettings(interval=2))
    assert [(where, kind) for where, kind, _ in model_patches(model)] == [("unet", "forward")]
    remove_deepcache(standin)
    assert model_patches(model) == {}
