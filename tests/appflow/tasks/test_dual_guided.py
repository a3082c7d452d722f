"""The weighted image blend behind dual text-and-image guided generation."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from appflow.tasks.dual_guided import blend_images


def test_equal_weights_average_and_weights_are_normalised():
    black, white = Image.new("RGB", (4, 3), (0, 0, 0)), Image.new("RGB", (8, 8), (255, 255, 255))
    assert blend_images([black, white]).size == (4, 3)
    assert np.asarray(blend_images([black, white])).max() == 128  # 127.5, rounded half to even
    assert np.asarray(blend_images([black, white], [3, 1]))[0, 0, 0] == 64  # 255 / 4 = 63.75
    assert np.asarray(blend_images([black, white], [0, 2]))[0, 0, 0] == 255


@pytest.mark.parametrize("weights", [[1], [1, -1], [0, 0], [1, True]])
def test_bad_weights_are_refused(weights):
    image = Image.new("RGB", (2, 2))
    with pytest.raises(ValueError, match="image_weights must be 2 non-negative numbers"):
        blend_images([image, image], weights)
