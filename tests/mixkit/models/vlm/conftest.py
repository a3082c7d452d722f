"""Tiny vision-language checkpoints saved once per session, loaded back through `load_vlm`."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image


@pytest.fixture(scope="session")
def tiny_clip_dir(tmp_path_factory):
    from mixkit.testing.tiny_vlm import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("tiny-clip"), seed=0)


@pytest.fixture(scope="session")
def tiny_blip2_opt_dir(tmp_path_factory):
    from mixkit.testing.tiny_vlm import build_tiny_blip2

    return build_tiny_blip2(tmp_path_factory.mktemp("tiny-blip2-opt"), seed=0, language_model="opt")


@pytest.fixture(scope="session")
def tiny_blip2_t5_dir(tmp_path_factory):
    from mixkit.testing.tiny_vlm import build_tiny_blip2

    return build_tiny_blip2(tmp_path_factory.mktemp("tiny-blip2-t5"), seed=0, language_model="t5")


@pytest.fixture(scope="session")
def photos():
    """Four random RGB images of different sizes, as a user would pass them."""
    rng = np.random.default_rng(0)
    sizes = [(40, 50), (30, 30), (64, 20), (33, 47)]
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in sizes]
