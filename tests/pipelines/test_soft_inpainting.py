"""Soft inpainting's math (pipelines/soft_inpainting.py) against values worked out by hand from A1111's formulas."""

import math

import numpy as np
import pytest
import torch

from pipelines.soft_inpainting import (
    SoftInpainting, check_soft_inpainting, difference_masks, gaussian_kernel, norm_preserving_blend, schedule_weight,
    smootherstep, weighted_histogram_filter,
)


def test_defaults_and_infotext_are_a1111s_in_its_order():
    assert list(SoftInpainting().infotext().items()) == [
        ("Soft inpainting enabled", True), ("Soft inpainting schedule bias", 1.0),
        ("Soft inpainting preservation strength", 0.5), ("Soft inpainting transition contrast boost", 4.0),
        ("Soft inpainting mask influence", 0.0), ("Soft inpainting difference threshold", 0.5),
        ("Soft inpainting difference contrast", 2.0)]


def test_check_converts_numbers_and_keeps_none():
    assert check_soft_inpainting(None) is None
    checked = check_soft_inpainting(SoftInpainting(mask_blend_power=np.float32(0.7), inpaint_detail_preservation=8))
    assert checked.mask_blend_power == 0.7 and type(checked.inpaint_detail_preservation) is float


@pytest.mark.parametrize("name, value", [("mask_blend_power", 8.5), ("mask_blend_scale", -0.1),
                                         ("inpaint_detail_preservation", 0.5), ("composite_mask_influence", 1.5),
                                         ("composite_difference_threshold", float("nan")),
                                         ("composite_difference_contrast", True),
                                         ("mask_blend_scale", 10**400), ("mask_blend_power", float("-inf"))])
def test_check_names_the_setting_out_of_range(name, value):
    with pytest.raises(ValueError, match=rf"soft_inpainting\.{name} \(.*\) must be a number in"):
        check_soft_inpainting(SoftInpainting(**{name: value}))


def test_check_refuses_other_types():
    with pytest.raises(TypeError, match="SoftInpainting or None, got dict"):
        check_soft_inpainting({"mask_blend_power": 1})


def test_from_args_takes_a1111s_script_arg_order():
    assert SoftInpainting.from_args([2, 1, 8, 0.5, 1, 4]) == SoftInpainting(2.0, 1.0, 8.0, 0.5, 1.0, 4.0)


def test_schedule_weight_is_repaint_to_sigma_power_times_scale():
    repaint = torch.tensor([0.0, 0.25, 1.0], dtype=torch.float64)
    settings = SoftInpainting(mask_blend_power=2.0, mask_blend_scale=0.5)
    # exponent 3 ** 2 * 0.5 = 4.5: 0.25 ** 4.5 = 2 ** -9
    assert schedule_weight(repaint, 3.0, settings).tolist() == [0.0, 2.0**-9, 1.0]
    # scale 0: exponent 0 and every cell, unmasked ones too, takes the denoised latents (torch's 0 ** 0 = 1)
    assert schedule_weight(repaint, 3.0, SoftInpainting(mask_blend_scale=0.0)).tolist() == [1.0, 1.0, 1.0]


def test_norm_preserving_blend_mixes_direction_linearly_and_length_as_a_power_mean():
    original = torch.tensor([3.0, 0.0], dtype=torch.float64).view(1, 2, 1, 1)
    current = torch.tensor([0.0, 4.0], dtype=torch.float64).view(1, 2, 1, 1)
    half = torch.full((1, 1, 1, 1), 0.5, dtype=torch.float64)
    # linear mix (1.5, 2), length 2.5; p=1 wants 0.5 * 3 + 0.5 * 4 = 3.5, p=2 wants sqrt(0.5 * 9 + 0.5 * 16)
    for p, length in ((1.0, 3.5), (2.0, math.sqrt(12.5))):
        blended = norm_preserving_blend(original, current, half, p).flatten().tolist()
        scale = length / (2.5 + 1e-5)
        assert blended == pytest.approx([1.5 * scale, 2.0 * scale], rel=1e-14)
    # weight 0: the original (up to the 1e-5 guard); weight 1: the current latents
    zero = norm_preserving_blend(original, current, torch.zeros_like(half), 4.0).flatten().tolist()
    assert zero == pytest.approx([3.0 * 3.0 / (3.0 + 1e-5), 0.0], rel=1e-14)


def test_norm_preserving_blend_keeps_a_float32_result():
    a, b = torch.ones(1, 4, 2, 2), torch.zeros(1, 4, 2, 2)
    assert norm_preserving_blend(a, b, torch.full((1, 1, 2, 2), 0.5), 4.0).dtype == torch.float32


def test_gaussian_kernel_is_one_at_the_centre_and_reaches_zero_beyond_the_radius():
    kernel = gaussian_kernel(1.5, 2)
    zero = math.exp(-9 / 2.25)
    assert kernel.shape == (5, 5) and kernel[2, 2] == 1.0
    assert kernel[0, 2].item() == pytest.approx((math.exp(-4 / 2.25) - zero) / (1 - zero), rel=1e-14)
    assert kernel[0, 0].item() == pytest.approx((math.exp(-8 / 2.25) - zero) / (1 - zero), rel=1e-14)
    assert torch.equal(kernel, kernel.T)


def test_weighted_histogram_filter_takes_the_weighted_window_of_sorted_values():
    image = torch.arange(1.0, 10.0, dtype=torch.float64).view(1, 3, 3)
    flat = torch.ones(3, 3, dtype=torch.float64)
    # centre: 9 values 1 thick; the window [2.25, 6.75] takes 3 and 7 for 0.75 each, 4, 5, 6 whole: 22.5 / 4.5
    assert weighted_histogram_filter(image, flat, 0.25, 0.75)[0, 1, 1].item() == 5.0
    # soft maximum: [8.1, 9] is thinner than 1, widened to [8.05, 9.05], pushed back inside the stack: [8, 9]
    top = weighted_histogram_filter(image, flat, 0.9, 1.0)
    assert top[0, 1, 1].item() == 9.0
    # corner: only the 4 cells inside (1, 2, 4, 5) count; [3.6, 4] widens to [3, 4]: the 5
    assert top[0, 0, 0].item() == 5.0
    assert top[0, 2, 2].item() == 9.0


def test_smootherstep_fixes_its_ends_and_middle():
    assert smootherstep(torch.tensor([0.0, 0.5, 1.0])).tolist() == [0.0, 0.5, 1.0]


def test_difference_masks_from_a_uniform_move():
    original = torch.zeros(1, 4, 6, 6, dtype=torch.float64)
    moved = original + 0.5  # every cell moved by a vector of length 1
    repaint = torch.ones(1, 1, 6, 6, dtype=torch.float64)
    settings = SoftInpainting()  # influence 0: half distance 0.5 * 0.5 / 0.50001 everywhere
    ratio = 1.0 / (0.5 * 0.5 / 0.50001)
    x = 1 / (1 + ratio**2)
    expected = 1 - x * x * x * (x * (6 * x - 15) + 10)
    assert difference_masks(original, moved, repaint, settings)[0].flatten().tolist() == pytest.approx(
        [expected] * 36, rel=1e-12)
    assert difference_masks(original, original, repaint, settings).abs().max().item() == 0.0


def test_mask_influence_one_follows_the_mask():
    original = torch.zeros(1, 4, 6, 6, dtype=torch.float64)
    moved = original + 0.01
    repaint = torch.zeros(1, 1, 6, 6, dtype=torch.float64)
    repaint[..., :3] = 1.0
    masks = difference_masks(original, moved, repaint, SoftInpainting(composite_mask_influence=1.0))[0]
    assert masks[:, :3].min().item() == 1.0  # threshold 0 where fully repainted: any change takes the result
    assert masks[:, 3:].max().item() < 1e-6  # threshold 50000 where not: the original
