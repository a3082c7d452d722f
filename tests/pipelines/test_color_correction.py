"""A1111's colour correction math: scikit-image's histogram matching, blendmodes' luminosity blend, the whole step."""

import numpy as np
import pytest
from PIL import Image

from pipelines.color_correction import (apply_color_correction, check_color_correction, color_correction_target,
                                        luminosity_blend, match_cumulative_cdf, match_histograms, to_8bit)


def test_cdf_matching_maps_each_value_to_the_template_value_at_its_quantile():
    # source quantiles 0.5, 0.75, 1 land exactly on template quantiles 0.5, 0.75, 1 (values 20, 30, 40)
    out = match_cumulative_cdf(np.array([0, 0, 1, 2]), np.array([10, 20, 30, 40]))
    assert out.tolist() == [20.0, 20.0, 30.0, 40.0]


def test_cdf_matching_interpolates_between_template_values_and_holds_the_ends():
    # template quantiles: 0 -> 0.5, 100 -> 1. Source quantiles 0.25 (below the first: held at 0), 0.5, 0.75, 1
    out = match_cumulative_cdf(np.array([4, 1, 3, 2]), np.array([100, 0]))
    assert out.tolist() == [100.0, 0.0, 50.0, 0.0]


def test_histograms_match_per_channel_and_truncate_to_the_image_dtype():
    image = np.zeros((1, 4, 2), np.uint8)
    image[0, :, 0] = [1, 2, 3, 4]
    image[0, :, 1] = [9, 9, 9, 9]
    reference = np.zeros((1, 2, 2), np.uint8)
    reference[0, :, 0] = [0, 101]  # 3's quantile 0.75 interpolates to 50.5: uint8 keeps 50 (truncation)
    reference[0, :, 1] = [7, 7]
    out = match_histograms(image, reference)
    assert out.dtype == np.uint8
    assert out[0, :, 0].tolist() == [0, 0, 50, 101]
    assert out[0, :, 1].tolist() == [7, 7, 7, 7]


def test_histogram_matching_refuses_channel_mismatch():
    with pytest.raises(ValueError, match="same C"):
        match_histograms(np.zeros((2, 2, 3), np.uint8), np.zeros((2, 2, 1), np.uint8))


def _skimage_uint8_restated(source, template):
    """scikit-image's other branch for unsigned input (bincount, zero counts dropped): an independent route."""
    source_counts = np.bincount(source.reshape(-1))
    template_counts = np.bincount(template.reshape(-1))
    template_values = np.nonzero(template_counts)[0]
    template_counts = template_counts[template_values]
    quantiles = np.cumsum(source_counts) / source.size
    values = np.interp(quantiles, np.cumsum(template_counts) / template.size, template_values)
    return values[source.reshape(-1)].reshape(source.shape)


def test_cdf_matching_agrees_with_scikit_images_bincount_branch():
    rng = np.random.default_rng(0)
    for _ in range(20):
        source = rng.integers(0, 40, (5, 7)).astype(np.uint8)
        template = rng.integers(10, 60, (3, 4)).astype(np.uint8)
        assert np.array_equal(match_cumulative_cdf(source, template), _skimage_uint8_restated(source, template))


def test_luminosity_blend_shifts_the_background_to_the_foregrounds_luma():
    background = np.array([[[0.2, 0.4, 0.6]]])
    foreground = np.array([[[0.5, 0.5, 0.5]]])
    out = luminosity_blend(background, foreground)
    delta = (0.299 * 0.5 + 0.587 * 0.5 + 0.114 * 0.5) - (0.299 * 0.2 + 0.587 * 0.4 + 0.114 * 0.6)
    assert np.allclose(out, [[[0.2 + delta, 0.4 + delta, 0.6 + delta]]], rtol=0, atol=1e-15)


def test_luminosity_blend_pulls_a_negative_channel_back_toward_the_luma():
    # background (0, .5, 1) has luma .4075; target .2 puts red at -.2075: scaled by L / (L - min) = .2 / .4075
    out = luminosity_blend(np.array([[[0.0, 0.5, 1.0]]]), np.array([[[0.2, 0.2, 0.2]]]))
    scale = 0.2 / 0.4075
    assert np.allclose(out, [[[0.0, 0.2 + 0.0925 * scale, 0.2 + 0.5925 * scale]]], rtol=0, atol=1e-12)


def test_luminosity_blend_pulls_a_channel_over_one_back_toward_the_luma():
    # background (1, .5, 0) luma .5925; target .8 puts red at 1.2075: scaled by (1 - L) / (max - L) = .2 / .4075
    out = luminosity_blend(np.array([[[1.0, 0.5, 0.0]]]), np.array([[[0.8, 0.8, 0.8]]]))
    scale = 0.2 / 0.4075
    assert np.allclose(out, [[[1.0, 0.8 - 0.0925 * scale, 0.8 - 0.5925 * scale]]], rtol=0, atol=1e-12)


def _blendmodes_set_lum_restated(background, foreground):
    """blendmodes' `_setLum(background, _lum(foreground))` pixel by pixel, as its loop runs (stale max included)."""
    def lum(c):
        return c[..., 0] * 0.299 + c[..., 1] * 0.587 + c[..., 2] * 0.114

    colours = background.copy()
    colours += (lum(foreground) - lum(background))[..., None]
    luma, low, high = lum(colours), colours.min(axis=2), colours.max(axis=2)
    for i in range(colours.shape[0]):
        for j in range(colours.shape[1]):
            level = luma[i, j]
            if low[i, j] < 0:
                colours[i, j] = level + (colours[i, j] - level) * level / (level - low[i, j])
            if high[i, j] > 1:
                colours[i, j] = level + (colours[i, j] - level) * (1 - level) / (high[i, j] - level)
    return colours


def test_luminosity_blend_agrees_with_blendmodes_loop_on_8bit_colours():
    rng = np.random.default_rng(1)
    background = rng.integers(0, 256, (16, 16, 3)) / 255
    foreground = rng.integers(0, 256, (16, 16, 3)) / 255
    background[0, :4] = [[1, 0, 0], [0, 0, 1], [1, 1, 1], [0, 0, 0]]  # saturated corners, both clip branches
    foreground[0, :4] = [[1, 1, 1], [0, 0, 0], [0, 0, 0], [1, 1, 1]]
    assert np.array_equal(luminosity_blend(background, foreground), _blendmodes_set_lum_restated(background, foreground))


def test_to_8bit_clips_and_rounds_half_to_even():
    assert to_8bit(np.array([-0.1, 0.0, 0.5, 1.0, 1.2])).tolist() == [0, 0, 128, 255, 255]


def test_a_flat_result_takes_the_flat_targets_colour_at_its_own_luma():
    import cv2

    target_rgb = np.full((2, 2, 3), (200, 40, 60), np.uint8)
    image = Image.new("RGB", (3, 3), (100, 100, 100))
    out = apply_color_correction(color_correction_target(Image.fromarray(target_rgb)), image)
    # every LAB value goes to the flat target's; back to RGB; then the grey's luma
    matched = cv2.cvtColor(cv2.cvtColor(target_rgb[:1, :1], cv2.COLOR_RGB2LAB), cv2.COLOR_LAB2RGB)[0, 0] / 255
    luma = lambda c: c[0] * 0.299 + c[1] * 0.587 + c[2] * 0.114  # noqa: E731
    expected = np.round((matched + (luma(np.full(3, 100 / 255)) - luma(matched))) * 255)
    assert out.mode == "RGB" and out.size == (3, 3)
    assert np.asarray(out)[1, 1].tolist() == expected.astype(int).tolist()
    assert np.asarray(out)[1, 1, 0] > 100 > np.asarray(out)[1, 1, 1]  # red again, as bright as the grey


def test_correcting_to_itself_only_loses_the_8bit_lab_round_trip():
    rng = np.random.default_rng(2)
    pixels = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
    assert np.array_equal(match_histograms(pixels, pixels), pixels)  # matching to itself is the identity
    out = np.asarray(apply_color_correction(color_correction_target(Image.fromarray(pixels)), Image.fromarray(pixels)))
    # what is left is OpenCV's 8-bit LAB (A1111's): a few levels in dark saturated colours, under one on average
    difference = np.abs(out.astype(int) - pixels.astype(int))
    assert difference.mean() < 1.0 and difference.max() <= 8


def test_target_is_8bit_lab_of_the_rgb_pixels():
    target = color_correction_target(Image.new("RGBA", (2, 1), (255, 255, 255, 255)))
    assert target.dtype == np.uint8 and target.shape == (1, 2, 3)
    assert target[0, 0].tolist() == [255, 128, 128]  # white: L 100 scaled to 255, a = b = 0 offset by 128


@pytest.mark.parametrize("value", [0, 1, "yes", None, np.zeros((2, 2, 3))])
def test_check_refuses_what_is_not_a_flag_or_an_image(value):
    with pytest.raises(TypeError, match="color_correction must be False, True"):
        check_color_correction(value)


def test_check_accepts_flags_and_images():
    image = Image.new("RGB", (2, 2))
    assert check_color_correction(True) is True and check_color_correction(False) is False
    assert check_color_correction(image) is image
    with pytest.raises(ValueError, match="empty 0x0 image"):
        check_color_correction(Image.new("RGB", (0, 0)))
