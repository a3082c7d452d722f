"""What the IP-Adapter pipeline tests share besides fixtures (those are in conftest.py): the call size, reference
pictures, pixels of a result, and the check that a call left the UNet as it found it."""

from __future__ import annotations

import numpy as np
from PIL import Image

SMALL = dict(prompt="a cat", width=64, height=64, steps=4, seed=1)


def reference(seed: int) -> Image.Image:
    """A 40x40 noise picture (numpy RandomState(seed)) as the image prompt."""
    return Image.fromarray((np.random.RandomState(seed).rand(40, 40, 3) * 255).astype("uint8"))


def pixels(result, index: int = 0) -> np.ndarray:
    return np.asarray(result.images[index]).astype(int)


def unet_as_found(pipe, processors: dict) -> None:
    """The UNet carries no adapter layer or projection after a call, and its own processors are the same objects."""
    unet = pipe.model.unet
    assert unet.encoder_hid_proj is None
    assert unet.config.encoder_hid_dim_type is None
    now = unet.attn_processors
    assert now.keys() == processors.keys()
    assert all(now[name] is processors[name] for name in processors)
