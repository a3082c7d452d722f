"""Union of SAM masks into one inpainting mask."""

from __future__ import annotations

import numpy as np
import torch

from appflow.tasks.masks import union_mask_image


def test_union_is_white_where_any_mask_is_set():
    masks = torch.zeros(2, 6, 7, dtype=torch.bool)
    masks[0, 1, 1] = True
    masks[1, 4, 5] = True
    image = union_mask_image(masks)
    assert image.mode == "L" and image.size == (7, 6)
    expected = np.zeros((6, 7), dtype=np.uint8)
    expected[1, 1] = expected[4, 5] = 255
    assert np.array_equal(np.asarray(image), expected)


def test_dilation_grows_the_mask_by_a_square_of_that_radius():
    masks = torch.zeros(1, 9, 9, dtype=torch.bool)
    masks[0, 4, 4] = True
    grown = np.asarray(union_mask_image(masks, dilate=2)) > 0
    expected = np.zeros((9, 9), dtype=bool)
    expected[2:7, 2:7] = True
    assert np.array_equal(grown, expected)


def test_no_masks_give_an_all_black_mask_of_the_image_size():
    image = union_mask_image(torch.zeros(0, 5, 4, dtype=torch.bool), dilate=3)
    assert image.size == (4, 5) and image.getbbox() is None
