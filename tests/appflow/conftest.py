"""Tiny AppFlow models, built once per session and loaded back through AppFlow's public path."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """Tiny models are slower with several threads on a shared, busy CPU (measured 20x here)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="module")
def shared_cache():
    """One model cache per test module, so each tiny model loads once per module."""
    from appflow import ModelCache

    return ModelCache()


@pytest.fixture(scope="session")
def tiny_dino_dir(tmp_path_factory):
    from mixkit.testing.tiny_appflow import build_tiny_grounding_dino

    return build_tiny_grounding_dino(tmp_path_factory.mktemp("tiny-dino"), seed=0)


@pytest.fixture(scope="session")
def tiny_sam_dir(tmp_path_factory):
    from mixkit.testing.tiny_appflow import build_tiny_sam

    return build_tiny_sam(tmp_path_factory.mktemp("tiny-sam"), seed=0)


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory):
    from mixkit.testing.tiny_appflow import build_tiny_causal_lm

    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm"), seed=0)


@pytest.fixture(scope="session")
def tiny_blip2_dir(tmp_path_factory):
    from mixkit.testing.tiny_vlm import build_tiny_blip2

    return build_tiny_blip2(tmp_path_factory.mktemp("tiny-blip2"), seed=0)


@pytest.fixture(scope="session")
def tiny_clip_dir(tmp_path_factory):
    from mixkit.testing.tiny_vlm import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("tiny-clip"), seed=0)


@pytest.fixture(scope="session")
def tiny_controlnet_dir(tmp_path_factory):
    from mixkit.testing.tiny_controlnet import build_tiny_controlnet

    return build_tiny_controlnet(tmp_path_factory.mktemp("tiny-controlnet"), seed=0)


@pytest.fixture(scope="session")
def tiny_x4_dir(tmp_path_factory):
    from mixkit.testing.tiny_controlnet import build_tiny_x4_upscaler

    return build_tiny_x4_upscaler(tmp_path_factory.mktemp("tiny-x4"), seed=0)


@pytest.fixture
def photo():
    """A 48x40 test picture: a red square on a blue background (not square, not a multiple of 8)."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (48, 40), (30, 60, 200))
    ImageDraw.Draw(image).rectangle((10, 8, 30, 28), fill=(220, 30, 30))
    return image


@pytest.fixture(scope="module")
def vlm(tiny_blip2_dir):
    """The tiny BLIP-2 through `load_vlm`, the by-hand side of the captioning tests."""
    from mixkit.models.vlm import load_vlm

    return load_vlm(tiny_blip2_dir)


@pytest.fixture(scope="module")
def captioner(tiny_blip2_dir, shared_cache):
    """`image2text_generation` on the tiny BLIP-2, six new tokens (what the captioning tests compare against)."""
    from appflow import Appflow

    return Appflow("image2text_generation", models=[tiny_blip2_dir], cache=shared_cache, max_new_tokens=6)


@pytest.fixture
def second():
    """A second picture for batch tests: a green box on white."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (64, 64), (255, 255, 255))
    ImageDraw.Draw(image).rectangle((10, 20, 40, 50), fill=(30, 160, 40))
    return image
