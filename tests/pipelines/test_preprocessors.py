"""ControlNet preprocessors: canny against OpenCV (the implementation sd-webui-controlnet calls),
the simple maps by exact values, and clear errors for unknown names, bad thresholds and missing weights."""

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter

from mixkit.errors import UnknownNameError
from pipelines.preprocessors import PREPROCESSORS, PreprocessorWeightsMissing, canny_edges, run_preprocessor


def shapes_image(noise: int = 0) -> Image.Image:
    image = Image.new("RGB", (96, 80), (30, 40, 50))
    draw = ImageDraw.Draw(image)
    draw.ellipse((10, 10, 60, 50), fill=(200, 100, 30))
    draw.rectangle((50, 30, 90, 70), fill=(20, 220, 120))
    draw.line((0, 79, 95, 0), fill=(255, 255, 255), width=3)
    pixels = np.asarray(image.filter(ImageFilter.GaussianBlur(1.5))).astype(int)
    if noise:
        pixels = pixels + np.random.default_rng(0).integers(-noise, noise, pixels.shape)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


@pytest.mark.parametrize("low, high", [(100, 200), (50, 100), (10, 30)])
def test_canny_matches_opencv_on_clean_shapes(low, high):
    cv2 = pytest.importorskip("cv2")  # test extra: opencv-python-headless
    pixels = np.asarray(shapes_image())
    assert np.array_equal(canny_edges(pixels, low, high), cv2.Canny(pixels, low, high))
    grey = np.ascontiguousarray(pixels[..., 1])
    assert np.array_equal(canny_edges(grey, low, high), cv2.Canny(grey, low, high))


def test_canny_matches_opencv_on_noisy_colour_images():
    """Noise exercises ties in non-maximum suppression and the per-pixel choice of colour channel."""
    cv2 = pytest.importorskip("cv2")
    for pixels in (np.asarray(shapes_image(noise=20)), np.random.default_rng(1).integers(0, 255, (64, 64, 3), dtype=np.uint8)):
        theirs = cv2.Canny(pixels, 50, 100)
        assert (theirs > 0).sum() > 100
        assert np.array_equal(canny_edges(pixels, 50, 100), theirs)


def test_canny_preprocessor_gives_white_edges_on_black_rgb():
    out = run_preprocessor("canny", shapes_image())
    array = np.asarray(out)
    assert out.mode == "RGB" and out.size == (96, 80)
    assert set(np.unique(array)) == {0, 255}
    assert np.array_equal(array[..., 0], canny_edges(np.asarray(shapes_image()), 100, 200))


def test_simple_maps_have_exact_values():
    image = Image.fromarray(np.array([[[0, 0, 0], [100, 100, 100], [200, 200, 200]]], dtype=np.uint8))
    assert np.asarray(run_preprocessor("invert", image))[0, :, 0].tolist() == [255, 155, 55]
    # sd-webui-controlnet's threshold(): result[np.min(img, axis=2) > thr_a] = 255 (brighter pixels become white).
    assert np.asarray(run_preprocessor("threshold", image, threshold_a=150))[0, :, 0].tolist() == [0, 0, 255]
    assert np.array_equal(np.asarray(run_preprocessor("none", image)), np.asarray(image))
    coloured = Image.new("RGB", (4, 4), (255, 0, 0))
    mono = np.asarray(run_preprocessor("monochrome", coloured))
    assert (mono == mono[0, 0, 0]).all() and mono[0, 0, 0] == 76  # ITU-R 601 luma of pure red


def test_threshold_uses_the_channel_minimum_and_whitens_bright_pixels():
    """A white page with a black line gives a white page with a black line (the extension's map, not its negative),
    and a red pixel (min 50) stays black at level 127 although its luma (104) and its maximum (200) differ."""
    page = np.full((16, 16, 3), 255, np.uint8)
    page[6:8] = 0
    out = np.asarray(run_preprocessor("threshold", Image.fromarray(page)))
    assert (out[..., 0] == 255).sum() == 16 * 14 and (out[6:8] == 0).all()
    red = run_preprocessor("threshold", Image.new("RGB", (2, 2), (200, 50, 50)))
    assert (np.asarray(red) == 0).all()
    assert (np.asarray(run_preprocessor("threshold", Image.new("RGB", (2, 2), (200, 180, 128)))) == 255).all()


def test_tile_resample_below_1_1_returns_the_picture_unchanged():
    """sd-webui-controlnet's tile_resample: `if thr_a < 1.1: return img` (no resampling at all)."""
    detailed = Image.fromarray(np.random.default_rng(0).integers(0, 255, (32, 40, 3), dtype=np.uint8))
    for rate in (1.0, 1.05, 1.09):
        assert np.array_equal(np.asarray(run_preprocessor("tile_resample", detailed, threshold_a=rate)), np.asarray(detailed))
    assert not np.array_equal(np.asarray(run_preprocessor("tile_resample", detailed, threshold_a=1.1)), np.asarray(detailed))


def test_tile_resample_floors_the_small_size_and_averages_areas():
    """The extension shrinks to (int(W / rate), int(H / rate)) with INTER_AREA before its cubic map resize: 7x5 at rate
    2 goes through 3x2 (round() would give 4x2), and a uniform picture stays exactly uniform."""
    from pipelines.controlnet.map_fit import area_resize, cubic_resize

    flat = Image.new("RGB", (30, 20), (90, 120, 200))
    assert (np.asarray(run_preprocessor("tile_resample", flat, threshold_a=3.3)) == (90, 120, 200)).all()
    pixels = np.random.default_rng(2).integers(0, 255, (5, 7, 3), dtype=np.uint8)
    out = np.asarray(run_preprocessor("tile_resample", Image.fromarray(pixels), threshold_a=2.0))
    assert np.array_equal(out, cubic_resize(area_resize(pixels, 3, 2), 7, 5))
    assert not np.array_equal(out, cubic_resize(area_resize(pixels, 4, 2), 7, 5))


def test_tile_and_blur_keep_size_and_remove_detail():
    detailed = Image.fromarray(np.random.default_rng(0).integers(0, 255, (32, 32, 3), dtype=np.uint8))
    for name, option in (("tile_resample", 4.0), ("blur_gaussian", 3.0)):
        out = run_preprocessor(name, detailed, threshold_a=option)
        assert out.size == detailed.size
        assert np.asarray(out).astype(float).std() < 0.5 * np.asarray(detailed).astype(float).std()


def test_unknown_preprocessor_lists_valid_names():
    with pytest.raises(UnknownNameError) as error:
        run_preprocessor("cany", shapes_image())
    assert "'canny'" in str(error.value)
    assert {"none", "canny", "invert", "threshold", "tile_resample"} <= set(PREPROCESSORS.names())


@pytest.mark.parametrize("name, value, words", [
    ("canny", -1, ["threshold_a", "'Canny Low Threshold'", ">= 0", "-1"]),
    ("canny", float("nan"), ["threshold_a", "nan"]),
    ("canny", "100", ["threshold_a", "'100'"]),
    ("blur_gaussian", 0, ["threshold_a", "'Sigma'", "[0.01, 64.0]"]),
    ("blur_gaussian", 1e12, ["'Sigma'", "[0.01, 64.0]"]),  # PIL's GaussianBlur crashes the process on such a sigma
])
def test_thresholds_the_math_cannot_take_are_refused_naming_the_slider(name, value, words):
    with pytest.raises(ValueError) as error:
        run_preprocessor(name, shapes_image(), threshold_a=value)
    assert all(word in str(error.value) for word in words), str(error.value)


@pytest.mark.parametrize("low, high", [(0, 300), (0, 0), (255, 1000)])
def test_canny_takes_thresholds_outside_its_slider_as_opencv_does(low, high):
    """sd-webui-controlnet's API passes any threshold to cv2.Canny (its 1-255 range is only the UI slider's)."""
    pixels = np.asarray(shapes_image())
    out = np.asarray(run_preprocessor("canny", shapes_image(), threshold_a=low, threshold_b=high))[..., 0]
    assert np.array_equal(out, canny_edges(pixels, low, high))
    cv2 = pytest.importorskip("cv2")
    assert np.array_equal(out, cv2.Canny(pixels, low, high))


def test_tile_resample_takes_webuiapis_default_rate_of_64_as_the_extension_does():
    """webuiapi sends threshold_a=64; the extension's tile_resample shrinks to (int(W / 64), int(H / 64)) with it."""
    from pipelines.controlnet.map_fit import area_resize, cubic_resize

    pixels = np.random.default_rng(3).integers(0, 255, (130, 200, 3), dtype=np.uint8)
    out = np.asarray(run_preprocessor("tile_resample", Image.fromarray(pixels), threshold_a=64))
    assert np.array_equal(out, cubic_resize(area_resize(pixels, 200 // 64, 130 // 64), 200, 130))
    assert np.array_equal(np.asarray(run_preprocessor("tile_resample", Image.fromarray(pixels), threshold_a=0)), pixels)


def test_depth_without_cached_weights_names_the_model_id(monkeypatch, tmp_path):
    import huggingface_hub.constants

    from pipelines.preprocessors import depth

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    depth._depth_pipeline.cache_clear()
    with pytest.raises(PreprocessorWeightsMissing) as error:
        run_preprocessor("depth_anything", shapes_image())
    assert depth.DEPTH_MODELS["depth_anything"] in str(error.value)
    assert "huggingface-cli download" in str(error.value)
