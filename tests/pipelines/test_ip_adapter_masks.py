"""IP-Adapter attention masks (`ip_adapter_mask`, diffusers' `ip_adapter_masks`): one mask per adapter image."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from .ip_adapter_helpers import SMALL, pixels, reference, unet_as_found
from .tiny_images import box_mask

BLACK = Image.new("L", (64, 64), 0)
WHITE = Image.new("L", (64, 64), 255)
LEFT, RIGHT = box_mask((0, 0, 32, 64)), box_mask((32, 0, 64, 64))


def test_a_black_mask_is_no_adapter_there(ip_pipe, adapter_file, second_adapter):
    two = dict(SMALL, ip_adapter=[str(adapter_file), str(second_adapter)],
               ip_adapter_image=[reference(0), reference(1)])
    # the masked adapter adds scale * (its attention * 0): exactly what skipping it (scale 0) leaves
    second_off = pixels(ip_pipe(**two, ip_adapter_scale=[1.0, 0.0]))
    assert np.array_equal(pixels(ip_pipe(**two, ip_adapter_mask=[None, BLACK])), second_off)
    plain = pixels(ip_pipe(**SMALL))
    one = dict(SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0))
    assert np.abs(pixels(ip_pipe(**one, ip_adapter_mask=BLACK)) - plain).max() <= 1  # text attention: other kernel


def test_a_white_mask_is_the_unmasked_adapter(ip_pipe, adapter_file):
    one = dict(SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0))
    # one image: the per-image path diffusers takes with a mask is the same attention
    assert np.abs(pixels(ip_pipe(**one, ip_adapter_mask=WHITE)) - pixels(ip_pipe(**one))).max() <= 1


def test_left_and_right_references(ip_pipe, adapter_file, second_adapter):
    """One reference on the left, another on the right: the picture is neither's alone, and a half mask changes
    the half it covers more than the other."""
    processors = dict(ip_pipe.model.unet.attn_processors)
    two = dict(SMALL, ip_adapter=[str(adapter_file), str(second_adapter)],
               ip_adapter_image=[reference(0), reference(1)])
    split = pixels(ip_pipe(**two, ip_adapter_mask=[LEFT, RIGHT]))
    first_only = pixels(ip_pipe(**two, ip_adapter_mask=[WHITE, BLACK]))
    second_only = pixels(ip_pipe(**two, ip_adapter_mask=[BLACK, WHITE]))
    assert np.abs(split - first_only).mean() > 1 and np.abs(split - second_only).mean() > 1
    plain = pixels(ip_pipe(**SMALL))
    left = np.abs(pixels(ip_pipe(**dict(SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0)),
                                 ip_adapter_mask=LEFT)) - plain)
    assert left[:, :32].mean() > left[:, 32:].mean()
    unet_as_found(ip_pipe, processors)


def test_one_mask_per_image_of_an_adapter(ip_pipe, adapter_file):
    images = dict(SMALL, ip_adapter=str(adapter_file), ip_adapter_image=[reference(0), reference(1)])
    only_first = pixels(ip_pipe(**images, ip_adapter_mask=[WHITE, BLACK]))
    first_alone = pixels(ip_pipe(**dict(images, ip_adapter_image=reference(0)), ip_adapter_mask=WHITE))
    # the same math; the image projection ran on a batch of two instead of one (other matmul blocking)
    assert np.abs(only_first - first_alone).max() <= 1
    # the nested per-adapter form means the same; a bigger mask of the same shape is resized
    big_white = WHITE.resize((128, 128))
    assert np.array_equal(pixels(ip_pipe(**images, ip_adapter_mask=[[big_white, BLACK]])), only_first)


def test_masks_with_precomputed_embeds_and_on_a_wide_picture(ip_pipe, adapter_file):
    embeds = ip_pipe.encode_ip_adapter_image([reference(0), reference(1)], ip_adapter=str(adapter_file))
    wide = dict(SMALL, width=96, ip_adapter=str(adapter_file), ip_adapter_image_embeds=embeds)
    masks = [box_mask((0, 0, 48, 64), 96).crop((0, 0, 96, 64)), Image.new("L", (48, 32), 255)]
    result = ip_pipe(**wide, ip_adapter_mask=masks)
    assert result.images[0].size == (96, 64)
    assert not np.array_equal(pixels(result), pixels(ip_pipe(**wide)))


def test_bad_masks_are_named(ip_pipe, adapter_file, second_adapter):
    processors = dict(ip_pipe.model.unet.attn_processors)
    one = dict(ip_adapter=str(adapter_file), ip_adapter_image=reference(0))
    two = dict(ip_adapter=[str(adapter_file), str(second_adapter)], ip_adapter_image=[reference(0), reference(1)])
    cases = [
        (dict(one, ip_adapter_mask=[WHITE, BLACK]), ValueError, "entry 0 has 2 masks for the 1 reference images"),
        (dict(two, ip_adapter_mask=[WHITE]), ValueError, "1 entries for 2 IP-Adapters"),
        (dict(one, ip_adapter_mask=Image.new("L", (64, 32))), ValueError,
         "entry 0 is 64x32, whose aspect ratio is not the output's 64x64"),
        (dict(one, ip_adapter_mask="mask.png"), TypeError, "ip_adapter_mask must be a PIL image or a list"),
        (dict(two, ip_adapter_mask=[None, "mask.png"]), TypeError, "entry 1 must be None, a PIL image"),
        (dict(ip_adapter_mask=WHITE), ValueError, "ip_adapter_mask was given without ip_adapter"),
    ]
    for keywords, error, message in cases:
        with pytest.raises(error, match=message):
            ip_pipe(**SMALL, **keywords)
        unet_as_found(ip_pipe, processors)
