"""`<hypernet:...>` tags with ControlNet units: as A1111's attention hijack reaches every CrossAttention, the
hypernetworks act in the ControlNet's attentions as well as the UNet's, for the call only."""

from __future__ import annotations

import numpy as np
import pytest

from mixkit.hypernetworks import HypernetworkApplication, HypernetworkLibrary, apply_hypernetworks
from mixkit.testing.tiny_hypernetwork import write_a1111_hypernetwork
from pipelines.controlnet import ControlNetImageToImage, ControlNetTextToImage, ControlNetUnit

from .tiny_images import noise_picture

SMALL = dict(negative_prompt="blurry", seed=3, width=64, height=64, steps=3, sampler="Euler")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("hypernetworks")
    write_a1111_hypernetwork(root / "anime.pt", widths=(32, 64), seed=0, scale=2.0)
    return root


@pytest.fixture(scope="module")
def pipe(sd1_pipe, folder):
    return ControlNetTextToImage.from_pipeline(sd1_pipe, hypernetwork_dir=folder)


def pixels(result) -> np.ndarray:
    return np.asarray(result.images[0]).astype(int)


def patched(module) -> set[str]:
    return {name for name, child in module.named_modules() if "forward" in child.__dict__}


def test_the_tag_acts_in_the_controlnet_as_in_the_unet(pipe, controlnet, folder):
    units = [ControlNetUnit(controlnet, noise_picture(0), weight=1.0)]
    before_unet, before_controlnet = patched(pipe.model.unet), patched(controlnet)
    tagged = pixels(pipe(prompt="a red circle <hypernet:anime:1>", controlnets=units, **SMALL))
    assert (patched(pipe.model.unet), patched(controlnet)) == (before_unet, before_controlnet)  # call only

    # the oracle: the same file put by hand on both models, the prompt without its tag
    applications = [HypernetworkApplication(HypernetworkLibrary(folder).load("anime"), 1.0)]
    with apply_hypernetworks(pipe.model.unet, applications), apply_hypernetworks(controlnet, applications):
        by_hand = pixels(pipe(prompt="a red circle", controlnets=units, **SMALL))
    assert np.array_equal(tagged, by_hand)
    with apply_hypernetworks(pipe.model.unet, applications):  # the UNet alone is not what the tag does
        unet_only = pixels(pipe(prompt="a red circle", controlnets=units, **SMALL))
    assert np.abs(tagged - unet_only).max() > 0
    plain = pixels(pipe(prompt="a red circle", controlnets=units, **SMALL))
    assert np.abs(tagged - plain).max() > 0 and np.array_equal(plain, pixels(pipe(prompt="a red circle",
                                                                                     controlnets=units, **SMALL)))


def test_one_controlnet_in_two_units_is_wrapped_once_and_img2img_applies_it_too(sd1_pipe, controlnet, folder):
    pipe = ControlNetImageToImage.from_pipeline(sd1_pipe, hypernetwork_dir=folder)
    units = [ControlNetUnit(controlnet, noise_picture(0), weight=0.5), ControlNetUnit(controlnet, noise_picture(1),
                                                                                      weight=0.5)]
    settings = dict(init_images=[noise_picture(2)], denoising_strength=0.6, **SMALL)
    tagged = pixels(pipe(prompt="a red circle <hypernet:anime:1>", controlnets=units, **settings))
    applications = [HypernetworkApplication(HypernetworkLibrary(folder).load("anime"), 1.0)]
    with apply_hypernetworks(pipe.model.unet, applications), apply_hypernetworks(controlnet, applications):
        by_hand = pixels(pipe(prompt="a red circle", controlnets=units, **settings))
    assert np.array_equal(tagged, by_hand)
    assert patched(controlnet) == set()
