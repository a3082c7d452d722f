"""Pixels for a modular VLM: square bicubic resize, scale to [0, 1], normalise per channel.

This is BLIP / BLIP-2's eval transform (no crop: the whole image is squeezed to the square the
vision tower was trained on), so captions see everything in the picture whatever its aspect.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch


def images_to_pixel_values(
    images: Sequence, image_size: int, mean: Sequence[float], std: Sequence[float]
) -> torch.Tensor:
    """(N, 3, image_size, image_size) float32 pixel values for a list of PIL images."""
    from PIL import Image

    arrays = [
        np.asarray(image.convert("RGB").resize((image_size, image_size), Image.Resampling.BICUBIC), dtype=np.float32)
        for image in images
    ]
    pixels = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2) / 255.0
    mean_t = torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1)
    std_t = torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1)
    return (pixels - mean_t) / std_t
