"""DeepCache on tiny SD1 and SDXL UNets: the shallow branch on a fresh cache equals the full UNet."""

import numpy as np
import pytest
import torch
from diffusers import UNet2DConditionModel

from pipelines.approx.deepcache import (DeepCacheSettings, apply_deepcache, deepcache_state, remove_deepcache,
                                        shallow_forward)
from pipelines.txt2img import TextToImage

CALL = dict(prompt="a red cube", negative_prompt="blurry", width=64, height=64, steps=9, seed=7, cfg_scale=7.0)


def unet_and_inputs(folder, sdxl: bool):
    unet = UNet2DConditionModel.from_pretrained(folder, subfolder="unet").eval()
    generator = torch.Generator().manual_seed(1)
    sample = torch.randn(2, 4, 16, 16, generator=generator)
    states = torch.randn(2, 77, unet.config.cross_attention_dim, generator=generator)
    kwargs = {}
    if sdxl:  # tiny SDXL: 32-d pooled text embedding + 6 time ids (8-d each) = 80 inputs
        kwargs["added_cond_kwargs"] = {"text_embeds": torch.randn(2, 32, generator=generator),
                                       "time_ids": torch.tensor([[64.0, 64, 0, 0, 64, 64]] * 2)}
    return unet, sample, states, kwargs


@pytest.fixture(scope="module", params=["sd1", "sdxl"])
def model(request, tiny_sd1_dir, tiny_sdxl_dir):
    folder = tiny_sdxl_dir if request.param == "sdxl" else tiny_sd1_dir
    return unet_and_inputs(folder, request.param == "sdxl")


@pytest.mark.parametrize("shallow_layers", [1, 2])
def test_shallow_branch_on_a_fresh_cache_equals_the_full_unet(model, shallow_layers):
    unet, sample, states, kwargs = model
    state = apply_deepcache(unet, DeepCacheSettings(interval=2, shallow_layers=shallow_layers))
    try:
        with torch.no_grad():
            full = unet(sample, 500, states, **kwargs).sample  # call 1: full, caches the deep feature
            cached = shallow_forward(unet, state.feature, shallow_layers, sample, 500, states, **kwargs).sample
            later = unet(sample, 499, states, **kwargs).sample  # call 2: served from the cache
        assert state.full_calls == 1 and state.cached_calls == 1
        assert torch.equal(cached, full)
        assert not torch.equal(later, full)  # a different timestep really went through the shallow branch
    finally:
        remove_deepcache(unet)


def test_controlnet_residuals_reach_the_shallow_branch(tiny_sd1_dir):
    unet, sample, states, _ = unet_and_inputs(tiny_sd1_dir, sdxl=False)
    generator = torch.Generator().manual_seed(2)
    residuals = tuple(torch.randn(shape, generator=generator) for shape in _skip_shapes(unet, sample, states))
    mid = torch.randn(2, 64, 8, 8, generator=generator)
    extra = dict(down_block_additional_residuals=residuals, mid_block_additional_residual=mid)
    state = apply_deepcache(unet, DeepCacheSettings(interval=3, shallow_layers=2))
    with torch.no_grad():
        plain = unet(sample, 500, states).sample
        state.reset()
        full = unet(sample, 500, states, **extra).sample
        cached = shallow_forward(unet, state.feature, 2, sample, 500, states, **extra).sample
    assert not torch.equal(full, plain)
    assert torch.equal(cached, full)


def _skip_shapes(unet, sample, states):
    """Shapes of the skip features a ControlNet adds to: conv_in's output, then every down layer's."""
    shapes = [unet.conv_in(sample).shape]
    handles = [block.register_forward_hook(lambda m, a, out: shapes.extend(s.shape for s in out[1]))
               for block in unet.down_blocks]
    with torch.no_grad():
        unet(sample, 500, states)
    for handle in handles:
        handle.remove()
    return shapes


def test_full_every_interval_calls_and_on_a_new_trajectory_or_shape(tiny_sd1_dir):
    unet, sample, states, _ = unet_and_inputs(tiny_sd1_dir, sdxl=False)
    state = apply_deepcache(unet, DeepCacheSettings(interval=3))
    pattern = []
    with torch.no_grad():
        for t in (900, 800, 700, 600, 500, 400, 300):
            before = state.full_calls
            unet(sample, t, states)
            pattern.append(state.full_calls > before)
        assert pattern == [True, False, False, True, False, False, True]
        unet(sample, 950, states)  # a higher timestep: the next image starts, cache reset
        unet(sample[:1], 940, states[:1])  # batch changed: the cached feature cannot serve it
        unet(sample[:1], 940, states[:1])  # repeated timestep (2nd-order sampler): same trajectory
    assert (state.full_calls, state.cached_calls) == (5, 5)


def test_interval_one_is_the_plain_pipeline_exactly(tiny_sd1_dir):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    reference = np.asarray(pipe(**CALL).images[0])
    state = apply_deepcache(pipe.model.unet, DeepCacheSettings(interval=1))
    assert np.array_equal(np.asarray(pipe(**CALL).images[0]), reference)
    assert state.cached_calls == 0 and state.full_calls == 9


def test_interval_three_skips_two_thirds_of_the_deep_passes_with_a_psnr_floor(tiny_sd1_dir):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    reference = np.asarray(pipe(**CALL).images[0]).astype(float)
    state = apply_deepcache(pipe.model.unet, DeepCacheSettings(interval=3))
    image = np.asarray(pipe(**CALL).images[0]).astype(float)
    assert (state.full_calls, state.cached_calls) == (3, 6)
    psnr = 10 * np.log10(255**2 / np.mean((image - reference) ** 2))
    # Measured 37.7 dB on this tiny random model (DPM++ 2M, 9 steps); the floor leaves room for BLAS differences.
    assert 30 < psnr < 60


def test_remove_restores_the_plain_forward(tiny_sd1_dir):
    unet, sample, states, _ = unet_and_inputs(tiny_sd1_dir, sdxl=False)
    with torch.no_grad():
        reference = unet(sample, 500, states).sample
        apply_deepcache(unet, DeepCacheSettings(interval=4))
        assert deepcache_state(unet) is not None and "forward" in unet.__dict__
        assert remove_deepcache(unet) is True
        assert "forward" not in unet.__dict__ and deepcache_state(unet) is None
        assert torch.equal(unet(sample, 500, states).sample, reference)
    assert remove_deepcache(unet) is False


@pytest.mark.parametrize("kwargs, match", [
    (dict(interval=0), r"interval must be an integer in \[1, 50\]"),
    (dict(interval=2.5), r"interval must be an integer"),
    (dict(interval=3, shallow_layers=0), r"shallow_layers must be an integer >= 1"),
])
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DeepCacheSettings(**kwargs)


def test_a_forward_put_back_as_its_bound_method_is_wrapped_and_a_foreign_one_refused(tiny_sd1_dir):
    unet, *_ = unet_and_inputs(tiny_sd1_dir, sdxl=False)
    own = unet.forward
    unet.forward = own  # a spy put back the way most code does: the class's forward, bound, in __dict__
    state = apply_deepcache(unet, DeepCacheSettings(interval=2))
    assert deepcache_state(unet) is state and remove_deepcache(unet) is True
    assert unet.__dict__["forward"] is own  # put back as found, not deleted
    del unet.forward

    def wrapper(*args, **kwargs):
        return type(unet).forward(unet, *args, **kwargs)

    unet.forward = wrapper
    with pytest.raises(ValueError, match=r"forward is already replaced \(by test_a_forward_put_back_as_its_bound_"
                                         r"method_is_wrapped_and_a_foreign_one_refused.<locals>.wrapper\).*del "
                                         r"unet.forward"):
        apply_deepcache(unet, DeepCacheSettings(interval=2))
    assert unet.__dict__["forward"] is wrapper and deepcache_state(unet) is None


def test_unsupported_unets_are_refused_and_left_alone(tiny_sd1_dir):
    unet, *_ = unet_and_inputs(tiny_sd1_dir, sdxl=False)
    with pytest.raises(ValueError, match="shallow_layers=3 exceeds the 2 layers"):
        apply_deepcache(unet, DeepCacheSettings(interval=2, shallow_layers=3))
    unet.__dict__["_mixkit_eager_forward"] = unet.forward  # what mixkit.runtime.compile leaves
    unet.__dict__["forward"] = unet.forward
    with pytest.raises(ValueError, match="cannot wrap a compiled UNet"):
        apply_deepcache(unet, DeepCacheSettings(interval=2))
    assert deepcache_state(unet) is None
    with pytest.raises(ValueError, match="needs a diffusers UNet2DConditionModel or the openvino backend.s UNet graph, got Linear"):
        apply_deepcache(torch.nn.Linear(2, 2), DeepCacheSettings(interval=2))


def test_matches_the_deepcache_authors_helper_on_a_diffusers_pipeline(tiny_sd1_dir):
    """Oracle: DeepCache's own `DeepCacheSDHelper` (cache_branch_id=0 = our shallow_layers=1)."""
    helper_module = pytest.importorskip("DeepCache.extension.deepcache", reason="DeepCache is the oracle (test extra)")
    from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(tiny_sd1_dir, safety_checker=None)
    pipe.set_progress_bar_config(disable=True)
    call = dict(prompt="a red cube", num_inference_steps=7, height=64, width=64, output_type="np")
    plain = pipe(**call, generator=torch.Generator().manual_seed(0)).images
    helper = helper_module.DeepCacheSDHelper(pipe=pipe)
    helper.set_params(cache_interval=3, cache_branch_id=0)
    helper.enable()
    theirs = pipe(**call, generator=torch.Generator().manual_seed(0)).images
    helper.disable()
    for module in pipe.unet.modules():  # the helper leaves its saved forwards as instance attributes
        module.__dict__.pop("forward", None)
    state = apply_deepcache(pipe.unet, DeepCacheSettings(interval=3, shallow_layers=1))
    ours = pipe(**call, generator=torch.Generator().manual_seed(0)).images
    assert (state.full_calls, state.cached_calls) == (3, 4)
    assert not np.array_equal(ours, plain)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
