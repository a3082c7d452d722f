"""A unit's effective region mask (sd-webui-controlnet 1.1.4xx): its residuals, after the weight, times the mask's
first channel / 255 resized bilinearly to each residual (`ControlParams.apply_effective_region_mask`, hook.py)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from pipelines.controlnet import ControlNetTextToImage, ControlNetUnit, controlnet_unet_extra
from pipelines.controlnet import prepare_control_images
from pipelines.controlnet.region_mask import apply_region_mask, region_mask_tensor

from .tiny_images import noise_picture

SMALL = dict(prompt="a red circle", seed=3, width=64, height=64, steps=2, sampler="Euler")


@pytest.fixture(scope="module")
def control_image():
    return noise_picture(0)


def left_half(size=(16, 16)) -> Image.Image:
    mask = Image.new("RGB", size, "black")
    mask.paste((255, 0, 0), (0, 0, size[0] // 2, size[1]))  # only the first channel counts
    return mask


def test_the_mask_is_the_first_channel_over_255_resized_bilinearly():
    mask = region_mask_tensor(left_half((4, 2)))
    assert mask.tolist() == [[[[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]]]]
    residual = torch.ones(2, 3, 2, 8)
    out = apply_region_mask(residual, mask)
    expected = torch.nn.functional.interpolate(mask, size=(2, 8), mode="bilinear")
    assert torch.equal(out, residual * expected)
    assert out[0, 0, 0].tolist() == [1.0, 1.0, 1.0, 0.75, 0.25, 0.0, 0.0, 0.0]


def test_every_residual_of_every_row_is_masked_after_the_weight(controlnet, control_image):
    region = left_half()
    plain_unit = ControlNetUnit(controlnet, control_image, weight=0.6)
    masked_unit = ControlNetUnit(controlnet, control_image, weight=0.6, effective_region_mask=region)
    cond = SimpleNamespace(embeds=torch.randn(2, 77, 32, generator=torch.Generator().manual_seed(0)), pooled=None,
                           uncond_rows=[0], cond_rows=[[(1, 1.0)]])
    sample = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(1))
    t = torch.tensor(400)
    with torch.inference_mode():
        plain = controlnet_unet_extra(prepare_control_images([plain_unit], 64, 64), 4)(sample, t, cond, 0, [0, 0])
        masked = controlnet_unet_extra(prepare_control_images([masked_unit], 64, 64), 4)(sample, t, cond, 0, [0, 0])
    mask = region_mask_tensor(region)
    for ours, full in zip([*masked["down_block_additional_residuals"], masked["mid_block_additional_residual"]],
                          [*plain["down_block_additional_residuals"], plain["mid_block_additional_residual"]]):
        resized = torch.nn.functional.interpolate(mask, size=full.shape[-2:], mode="bilinear")
        assert torch.equal(ours, full * resized)
        assert torch.count_nonzero(ours[..., full.shape[-1] // 2 + 1:]) == 0  # the right half lost its control


def test_a_black_region_is_exactly_no_control_and_a_half_region_is_neither(tiny_sd1_dir, controlnet, control_image):
    pipe = ControlNetTextToImage.from_pretrained(tiny_sd1_dir)
    plain = np.asarray(pipe(**SMALL).images[0])
    black = ControlNetUnit(controlnet, control_image, effective_region_mask=Image.new("L", (8, 8), 0))
    assert np.array_equal(np.asarray(pipe(controlnets=[black], **SMALL).images[0]), plain)
    full = np.asarray(pipe(controlnets=[ControlNetUnit(controlnet, control_image)], **SMALL).images[0])
    half = ControlNetUnit(controlnet, control_image, effective_region_mask=left_half())
    halved = np.asarray(pipe(controlnets=[half], **SMALL).images[0])
    assert not np.array_equal(halved, plain) and not np.array_equal(halved, full)


def test_a_region_mask_that_is_not_an_image_is_refused_before_running(tiny_sd1_dir, controlnet, control_image):
    pipe = ControlNetTextToImage.from_pretrained(tiny_sd1_dir)
    unit = ControlNetUnit(controlnet, control_image, effective_region_mask=np.ones((8, 8)))
    with pytest.raises(TypeError, match="ControlNet 0: effective_region_mask must be a PIL image"):
        pipe(controlnets=[unit], **SMALL)
