"""The UNet spies leave the shared `sd1_pipe` exactly as they found it, also when the generation raises, and the
conftest's check sees what they used to leave (tests/pipelines/unet_spy.py, tests/model_patches.py).

The leak this guards against: spies put the saved bound method back as `unet.forward`, an instance attribute
DeepCache read as a compiled forward, so `apply_deepcache` on `sd1_pipe` refused ("cannot wrap a compiled UNet")
after any test that had spied on it, and passed when run alone."""

import pytest

from pipelines.approx.deepcache import DeepCacheSettings, apply_deepcache, remove_deepcache

from ..model_patches import model_patches, remove_patches
from .unet_spy import fail_if_called, recorded_unet_contexts, replace_forward_for_the_test, replaced_forward

SMALL = dict(prompt="a cat", width=64, height=64, steps=2, seed=1)


def test_deepcache_wraps_the_shared_unet_after_a_spy_ran_on_it(sd1_pipe):
    with recorded_unet_contexts(sd1_pipe) as seen:
        sd1_pipe(**SMALL)
    assert len(seen) == 2 and "forward" not in sd1_pipe.model.unet.__dict__
    state = apply_deepcache(sd1_pipe.model.unet, DeepCacheSettings(interval=2))
    try:
        assert state.full_calls == 0
    finally:
        assert remove_deepcache(sd1_pipe.model.unet) is True
    assert "forward" not in sd1_pipe.model.unet.__dict__


def test_a_spy_is_removed_when_the_generation_raises(sd1_pipe):
    def broken(*args, **kwargs):
        raise RuntimeError("the spied UNet failed")

    unet = sd1_pipe.model.unet
    with pytest.raises(RuntimeError, match="the spied UNet failed"), replaced_forward(unet, broken):
        sd1_pipe(**SMALL)
    assert "forward" not in unet.__dict__ and model_patches(sd1_pipe.model) == {}


def test_a_forward_that_was_already_replaced_is_put_back(sd1_pipe):
    unet = sd1_pipe.model.unet
    first = type(unet).forward.__get__(unet)
    unet.forward = first
    try:
        with replaced_forward(unet, lambda *a, **k: None):
            assert unet.forward is not first
        assert unet.__dict__["forward"] is first
    finally:
        del unet.forward


def test_the_monkeypatch_helpers_remove_what_they_added(sd1_pipe):
    unet = sd1_pipe.model.unet
    with pytest.MonkeyPatch.context() as monkeypatch:
        fail_if_called(monkeypatch, unet)
        with pytest.raises(pytest.fail.Exception, match="the UNet2DConditionModel ran"):
            sd1_pipe(**SMALL)
    assert "forward" not in unet.__dict__
    with pytest.MonkeyPatch.context() as monkeypatch:
        replace_forward_for_the_test(monkeypatch, unet, lambda *a, **k: None)
        assert "forward" in unet.__dict__
    assert "forward" not in unet.__dict__


def test_model_patches_sees_forwards_and_hooks_and_removes_them(sd1_pipe):
    model = sd1_pipe.model
    assert model_patches(model) == {}
    sd1_pipe(**SMALL)  # transformers' own output-capturing hooks, installed on first use, are not patches
    assert model_patches(model) == {}
    attention = model.unet.down_blocks[0].attentions[0]
    attention.forward = type(attention).forward.__get__(attention)
    model.text_encoders[0].register_forward_pre_hook(lambda *args: None)
    model.vae.decoder.register_forward_hook(lambda *args: None)
    left = model_patches(model)
    assert sorted((where, kind) for where, kind, _ in left) == [
        ("text_encoders[0]", "_forward_pre_hooks"), ("unet.down_blocks.0.attentions.0", "forward"),
        ("vae.decoder", "_forward_hooks")]
    remove_patches(left)
    assert model_patches(model) == {} and "forward" not in attention.__dict__
