"""Outpainting mk2's fill: noise with the visible picture's spectrum and colours, deterministic from its seed, the
visible pixels untouched; and its bad inputs."""

import numpy as np
import pytest
from PIL import Image

from pipelines.matched_noise import matched_noise_fill
from pipelines.outpaint import keep_mask


@pytest.fixture(scope="module")
def canvas():
    """A 48x32 picture on a 64x48 black canvas, 8 pixels of new area on every side (1536 new, 1536 visible)."""
    rng = np.random.default_rng(7)
    picture = (rng.random((32, 48, 3)) * [255, 120, 60] + [0, 40, 20]).astype(np.uint8)
    picture[0, 0], picture[-1, -1] = (255, 255, 255), (0, 0, 0)  # the extremes, which the fill must reach exactly
    image = Image.new("RGB", (64, 48))
    image.paste(Image.fromarray(picture), (8, 8))
    return image, keep_mask(image.size, 8, 8, 8, 8, 0)


def test_same_seed_same_fill_another_seed_another(canvas):
    image, mask = canvas
    first = np.asarray(matched_noise_fill(image, mask, seed=3))
    assert np.array_equal(first, np.asarray(matched_noise_fill(image, mask, seed=3)))
    assert not np.array_equal(first, np.asarray(matched_noise_fill(image, mask, seed=4)))
    assert np.array_equal(np.asarray(matched_noise_fill(image, mask)), np.asarray(matched_noise_fill(image, mask,
                                                                                                     seed=0)))


def test_size_mode_and_the_visible_pixels_are_kept_bit_identical(canvas):
    image, mask = canvas
    out = matched_noise_fill(image, mask, falloff_exponent=0.3, color_variation=0.7)
    assert (out.size, out.mode) == ((64, 48), "RGB") and out is not image
    visible = np.asarray(mask) == 0
    assert np.array_equal(np.asarray(out)[visible], np.asarray(image)[visible])
    assert visible.sum() == 48 * 32


def test_the_fill_has_exactly_the_visible_colours_when_as_many_pixels_are_filled(canvas):
    # Rank matching onto as many reference values: per channel the fill is a permutation of the visible values, so
    # the mean, spread and histogram of each channel are the picture's exactly.
    image, mask = canvas
    out, m = np.asarray(matched_noise_fill(image, mask)), np.asarray(mask)
    source = np.asarray(image)
    for channel in range(3):
        assert np.array_equal(np.sort(out[m > 0, channel]), np.sort(source[m == 0, channel]))
    assert out[m > 0].std() > 10  # noise, not a flat colour


def test_with_fewer_filled_pixels_the_fill_spans_the_visible_range(canvas):
    image, _ = canvas
    mask = keep_mask(image.size, 8, 0, 0, 0, 0)  # only the left band: 384 filled pixels against 2688 visible
    out, m = np.asarray(matched_noise_fill(image, mask)), np.asarray(mask)
    visible = np.asarray(image)[m == 0]
    filled = out[m > 0]
    assert (filled.min(axis=0) == visible.min(axis=0)).all() and (filled.max(axis=0) == visible.max(axis=0)).all()
    # the black canvas the picture does not cover (right and bottom) is visible too: its share of zeros shows up
    assert abs(filled.mean() - visible.mean()) < 3


def test_the_fill_follows_the_pictures_structure(canvas):
    # Same noise, same colours: the fall-off exponent changes how much of the picture's spectrum the fill takes.
    image, mask = canvas
    m = np.asarray(mask) > 0
    smooth = np.asarray(matched_noise_fill(image, mask, falloff_exponent=4.0)).astype(float)
    detailed = np.asarray(matched_noise_fill(image, mask, falloff_exponent=0.0)).astype(float)

    def roughness(pixels):  # mean absolute difference of horizontal neighbours inside the top band
        return np.abs(np.diff(pixels[:8, 8:56], axis=1)).mean()

    assert not np.array_equal(smooth[m], detailed[m])
    assert roughness(detailed) > roughness(smooth)


def test_a_flat_picture_gives_a_flat_fill_of_its_colour():
    image = Image.new("RGB", (40, 24), (200, 90, 10))
    mask = Image.new("L", (40, 24), 0)
    mask.paste(255, (0, 0, 8, 24))
    assert (np.asarray(matched_noise_fill(image, mask)) == (200, 90, 10)).all()


def test_no_masked_pixel_returns_a_copy_of_the_image(canvas):
    image, _ = canvas
    out = matched_noise_fill(image, Image.new("L", image.size, 0))
    assert out is not image and out.tobytes() == image.tobytes()


def test_a_soft_mask_blends_fill_and_picture():
    image = Image.new("RGB", (16, 16), (100, 100, 100))
    image.paste((0, 0, 0), (0, 0, 4, 16))
    mask = Image.new("L", (16, 16), 0)
    mask.paste(255, (0, 0, 4, 16))
    mask.paste(128, (4, 0, 6, 16))  # half-filled: the fill (matched to 100) over the picture's 100 stays 100
    out = np.asarray(matched_noise_fill(image, mask))
    assert (out[:, 4:6] == 100).all() and (out[:, :4] == 100).all()


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(falloff_exponent=4.01), ValueError, r"falloff_exponent must be a number in \[0, 4\]"),
    (dict(falloff_exponent=-1), ValueError, "falloff_exponent must be"),
    (dict(color_variation=1.5), ValueError, r"color_variation must be a number in \[0, 1\]"),
    (dict(color_variation=True), ValueError, "color_variation must be"),
    (dict(seed=-1), ValueError, "seed must be a non-negative integer"),
    (dict(seed=1.0), ValueError, "seed must be"),
])
def test_bad_settings_are_refused(canvas, kwargs, error, message):
    image, mask = canvas
    with pytest.raises(error, match=message):
        matched_noise_fill(image, mask, **kwargs)


def test_bad_images_are_refused(canvas):
    image, mask = canvas
    with pytest.raises(TypeError, match="PIL images"):
        matched_noise_fill(np.asarray(image), mask)
    with pytest.raises(ValueError, match="mask is 10x10 but image is 64x48"):
        matched_noise_fill(image, Image.new("L", (10, 10)))
    with pytest.raises(ValueError, match="covers the whole image"):
        matched_noise_fill(image, Image.new("L", image.size, 255))
