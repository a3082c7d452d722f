"""A1111's Tiling: circular padding in the UNet and VAE for one call, so the picture tiles seamlessly."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipelines.tiling import padded_convolutions, seamless_tiling

SMALL = dict(prompt="a red circle", width=64, height=64, steps=3, seed=3, sampler="Euler")


def _image(pipe, monkeypatch, shift: int, **kwargs) -> np.ndarray:
    """The picture made from the seed's initial noise rolled by `shift` latent pixels along both axes."""
    original = type(pipe)._initial_noise

    def rolled(self, params, generators, first_image):
        return torch.roll(original(self, params, generators, first_image), shifts=(shift, shift), dims=(2, 3))

    monkeypatch.setattr(type(pipe), "_initial_noise", rolled)
    return np.asarray(pipe(**SMALL, **kwargs).images[0]).astype(int)


def test_a_tiled_picture_moves_with_its_noise_around_the_edges(sd1_pipe, monkeypatch):
    """With every convolution padding circularly the whole model commutes with circular shifts: noise rolled by 4
    latent pixels gives the picture rolled by 32 pixels, edges wrapping into each other. Zero padding breaks that at
    the borders, so the same comparison without tiling differs clearly."""
    tiled, tiled_shifted = (_image(sd1_pipe, monkeypatch, shift, tiling=True) for shift in (0, 4))
    assert np.abs(np.roll(tiled, (32, 32), axis=(0, 1)) - tiled_shifted).max() <= 2
    plain, plain_shifted = (_image(sd1_pipe, monkeypatch, shift) for shift in (0, 4))
    assert np.abs(np.roll(plain, (32, 32), axis=(0, 1)) - plain_shifted).mean() > 4 * np.abs(
        np.roll(tiled, (32, 32), axis=(0, 1)) - tiled_shifted).mean()


def test_tiling_is_recorded_and_leaves_the_model_as_it_was(sd1_pipe):
    layers = padded_convolutions(sd1_pipe.model.unet, sd1_pipe.model.vae)
    assert layers and all(layer.padding_mode == "zeros" for layer in layers)
    tiled = sd1_pipe(**SMALL, tiling=True)
    assert "Tiling: True" in tiled.infotexts[0]
    assert tiled.infotexts[0].index("Tiling: True") > tiled.infotexts[0].index("Model: ")
    assert all(layer.padding_mode == "zeros" for layer in layers)
    plain = sd1_pipe(**SMALL)
    assert "Tiling" not in plain.infotexts[0]
    assert np.asarray(plain.images[0]).tolist() != np.asarray(tiled.images[0]).tolist()


def test_a_failing_call_switches_tiling_back(sd1_pipe, monkeypatch):
    import pipelines.base

    def broken(request):
        raise RuntimeError("sampler broke")

    monkeypatch.setattr(pipelines.base, "run_sampler", broken)
    with pytest.raises(RuntimeError, match="sampler broke"):
        sd1_pipe(**SMALL, tiling=True)
    assert all(layer.padding_mode == "zeros" for layer in padded_convolutions(sd1_pipe.model.unet, sd1_pipe.model.vae))


def test_only_padded_convolutions_change_and_enabled_false_changes_nothing():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Conv2d(4, 4, 1),
                                torch.nn.Conv2d(4, 4, 3, padding="same"), torch.nn.Conv2d(4, 4, 3, padding=1,
                                                                                        padding_mode="reflect"))
    with seamless_tiling(model, enabled=False):
        assert [layer.padding_mode for layer in model] == ["zeros", "zeros", "zeros", "reflect"]
    with seamless_tiling(model, None):
        assert [layer.padding_mode for layer in model] == ["circular", "zeros", "circular", "circular"]
        x = torch.randn(1, 3, 8, 8)
        rolled = model(torch.roll(x, 3, dims=3))
        torch.testing.assert_close(rolled, torch.roll(model(x), 3, dims=3), rtol=1e-5, atol=1e-5)
    assert [layer.padding_mode for layer in model] == ["zeros", "zeros", "zeros", "reflect"]


def test_tiling_must_be_a_bool(sd1_pipe):
    with pytest.raises(TypeError, match="tiling must be True or False"):
        sd1_pipe(**SMALL, tiling="yes")


def test_the_refiner_tiles_too_and_is_switched_back(base_pipe, refiner_model):
    seen = []
    layers = padded_convolutions(refiner_model.unet, refiner_model.vae)
    hook = refiner_model.unet.register_forward_pre_hook(lambda *_: seen.append({layer.padding_mode for layer in layers}))
    try:
        result = base_pipe(prompt="a red fox", width=64, height=64, seed=3, sampler="Euler", steps=4, tiling=True,
                           refiner=refiner_model, refiner_switch_at=0.6)
    finally:
        hook.remove()
    assert seen and all(modes == {"circular"} for modes in seen)
    assert "Tiling: True" in result.infotexts[0] and "Refiner: " in result.infotexts[0]
    assert {layer.padding_mode for layer in layers} == {"zeros"}
    assert {layer.padding_mode for layer in padded_convolutions(base_pipe.model.unet, base_pipe.model.vae)} == {"zeros"}


def test_a_backend_with_fixed_graphs_is_refused_before_any_work(sd1_pipe, monkeypatch):
    monkeypatch.setitem(sd1_pipe.model.extras, "execution_backend", "openvino")
    import pipelines.base

    monkeypatch.setattr(pipelines.base, "run_sampler", lambda request: pytest.fail("sampled"))
    with pytest.raises(ValueError, match="openvino backend has compiled.*backend='torch'"):
        sd1_pipe(**SMALL, tiling=True)
    assert {layer.padding_mode for layer in padded_convolutions(sd1_pipe.model.unet, sd1_pipe.model.vae)} == {"zeros"}


def test_hires_fix_encodes_its_upscaled_image_with_circular_padding_too(sd1_pipe):
    """A1111 keeps its circular padding for the whole call: hires fix's VAE encode of the pixel-upscaled picture
    pads circularly as well (zero padding there would put a seam back into the second pass's start)."""
    from pipelines.hires import HiresFix

    vae = sd1_pipe.model.vae
    layers = padded_convolutions(vae.encoder)
    seen = []
    hook = vae.encoder.register_forward_pre_hook(lambda *_: seen.append({layer.padding_mode for layer in layers}))
    try:
        result = HiresFix(sd1_pipe)(**{**SMALL, "width": 32, "height": 32, "steps": 2}, tiling=True, hr_scale=2.0,
                                    hr_upscaler="Lanczos", denoising_strength=0.5)
    finally:
        hook.remove()
    assert seen and all(modes == {"circular"} for modes in seen)
    assert "Tiling: True" in result.infotexts[0]
    assert {layer.padding_mode for layer in padded_convolutions(vae)} == {"zeros"}
