"""Control maps fitted as sd-webui-controlnet's `detectmap_proc` / `high_quality_resize` fit them.

References (sd-webui-controlnet `scripts/controlnet.py` / `scripts/utils.py`): `high_quality_resize` picks
INTER_NEAREST for maps with 2 < colours < 200, INTER_AREA when shrinking, INTER_CUBIC otherwise; re-binarises
black/white maps with Otsu and, for one-pixel edge maps, runs `nake_nms` then `lvmin_thin`
(`scripts/lvminthin.py`); `detectmap_proc`'s OUTER_FIT ("resize and fill") fills the canvas with
`np.median(borders, axis=0)`. OpenCV, when installed (test extra), is the oracle for the OpenCV parts.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from pipelines.controlnet.map_fit import (
    area_resize, cubic_resize, fit_control_map, high_quality_resize, naked_nms, nearest_resize, otsu_threshold,
    thin_edges,
)
from pipelines.preprocessors.canny import canny_edges


def blurred_photo(h=96, w=128, seed=1) -> np.ndarray:
    from PIL import ImageFilter

    noise = Image.fromarray(np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8))
    return np.asarray(noise.filter(ImageFilter.GaussianBlur(3)))


def edge_map(h=96, w=128) -> np.ndarray:
    return np.stack([canny_edges(blurred_photo(h, w), 20, 40)] * 3, axis=2)


def test_resize_and_fill_bands_are_the_median_border_colour_not_stretched_edges():
    """The report's case: a black 128x64 map with a white line and a white column 0, fitted to 64x64."""
    pixels = np.zeros((64, 128, 3), np.uint8)
    pixels[32] = 255
    pixels[:, 0] = 255
    out = np.asarray(fit_control_map(Image.fromarray(pixels), 64, 64, "resize and fill"))
    assert (out[:16] == 0).all() and (out[48:] == 0).all()  # median of the border pixels: black
    grey = np.full((10, 20, 3), 200, np.uint8)
    grey[4:6, 8:12] = 0
    filled = np.asarray(fit_control_map(Image.fromarray(grey), 20, 20, "resize and fill"))
    assert (filled[:5] == 200).all() and (filled[15:] == 200).all()


def test_crop_and_resize_and_just_resize_keep_the_extension_geometry():
    pixels = np.zeros((40, 80, 3), np.uint8)
    pixels[:, 38:42] = (10, 200, 30)
    pixels[:, :4] = (200, 10, 10)  # three colours: nearest neighbour
    cropped = np.asarray(fit_control_map(Image.fromarray(pixels), 40, 40, "crop and resize"))
    assert np.array_equal(cropped, pixels[:, 20:60])  # k = 1: the centre cut, untouched
    stretched = np.asarray(fit_control_map(Image.fromarray(pixels), 40, 20, "just resize"))
    assert np.array_equal(stretched, pixels[::2, ::2])  # nearest: floor(x * 2)


def test_segmentation_palette_keeps_its_class_colours():
    """The report's case: a 3-colour map 64x64 -> 96x80 gave 17 colours with Lanczos; the extension keeps 3."""
    classes = np.random.default_rng(0).integers(0, 3, (8, 8))
    palette = np.array([[120, 120, 120], [180, 120, 120], [6, 230, 230]], np.uint8)
    seg = np.kron(palette[classes], np.ones((8, 8, 1), np.uint8)).astype(np.uint8)
    for mode in ("just resize", "crop and resize", "resize and fill"):
        out = np.asarray(fit_control_map(Image.fromarray(seg), 96, 80, mode))
        assert {tuple(c) for c in out.reshape(-1, 3)} <= {tuple(c) for c in palette}, mode


def test_edge_maps_stay_binary_one_pixel_lines():
    """The report's case: a canny map fitted to another size had 159 grey levels; the extension's has 2, thin."""
    edges = edge_map()
    for width, height in ((192, 144), (77, 51)):
        out = high_quality_resize(edges, width, height)
        assert set(np.unique(out)) == {0, 255}
        white = out[..., 0] > 0
        assert 0.02 < white.mean() < 0.2
        # one-pixel lines: no 2x2 block entirely white survives the thinning
        assert not (white[:-1, :-1] & white[1:, :-1] & white[:-1, 1:] & white[1:, 1:]).any()


def test_filled_binary_regions_are_rebinarised_not_thinned():
    blob = np.zeros((64, 64, 3), np.uint8)
    blob[10:40, 20:50] = 255
    out = high_quality_resize(blob, 100, 90)
    assert set(np.unique(out)) == {0, 255}
    assert abs((out[..., 0] > 0).mean() - (30 * 30) / (64 * 64)) < 0.02  # the region keeps its area


def test_photos_use_cubic_up_and_area_down():
    photo = blurred_photo()
    assert np.array_equal(high_quality_resize(photo, 160, 120), cubic_resize(photo, 160, 120))
    assert np.array_equal(high_quality_resize(photo, 64, 48), area_resize(photo, 64, 48))
    halves = area_resize(photo, 64, 48).astype(int)
    manual = photo.reshape(48, 2, 64, 2, 3).astype(float).mean(axis=(1, 3))
    assert np.abs(halves - manual).max() <= 0.5 + 1e-9


def test_otsu_level_on_a_two_level_histogram():
    grey = np.array([[10] * 6 + [200] * 4], np.uint8)
    assert otsu_threshold(grey) == 10  # the first level that splits the two classes best (OpenCV keeps the first)


def test_thinning_makes_a_thick_line_one_pixel_wide():
    thick = np.zeros((20, 30), np.uint8)
    thick[8:11, 3:27] = 255
    thin = thin_edges(thick, prune=False)
    assert (thin > 0).sum(axis=0)[6:24].tolist() == [1] * 18


@pytest.mark.parametrize("sizes", [((64, 64), (96, 80)), ((37, 53), (31, 100)), ((100, 60), (47, 33))])
def test_nearest_matches_opencv(sizes):
    cv2 = pytest.importorskip("cv2")  # test extra: opencv-python-headless
    (h, w), (height, width) = sizes
    pixels = (np.random.default_rng(0).integers(0, 5, (h, w, 3)) * 50).astype(np.uint8)
    assert np.array_equal(nearest_resize(pixels, width, height),
                          cv2.resize(pixels, (width, height), interpolation=cv2.INTER_NEAREST))


def test_otsu_nms_and_thinning_match_opencv():
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(0)
    for _ in range(5):
        grey = (rng.random((40, 50)) ** 3 * 255).astype(np.uint8)
        level, _ = cv2.threshold(grey, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
        assert otsu_threshold(grey) == level
    grey = (rng.random((60, 70)) * 255).astype(np.uint8)
    lines = [np.array([[0, 0, 0], [1, 1, 1], [0, 0, 0]], np.uint8)]
    lines += [lines[0].T.copy(), np.eye(3, dtype=np.uint8), np.fliplr(np.eye(3, dtype=np.uint8)).copy()]
    expected = np.zeros_like(grey)
    for line in lines:
        np.putmask(expected, cv2.dilate(grey, kernel=line) == grey, grey)
    assert np.array_equal(naked_nms(grey), expected)


def test_cubic_matches_opencv():
    cv2 = pytest.importorskip("cv2")
    photo = (np.random.default_rng(0).random((50, 60, 3)) * 255).astype(np.uint8)
    assert np.abs(cubic_resize(photo, 97, 83).astype(int)
                  - cv2.resize(photo, (97, 83), interpolation=cv2.INTER_CUBIC)).max() <= 1
    assert np.abs(area_resize(photo, 37, 29).astype(int)
                  - cv2.resize(photo, (37, 29), interpolation=cv2.INTER_AREA)).max() <= 1


def test_prepared_controls_are_fitted_as_control_maps():
    """The pipelines fit unit maps (and the img2img fallback) this way: a palette keeps its colours, an edge map stays
    binary, "resize and fill" bands are flat (A1111's img2img resize gave 17 colours, 159 grey levels, smeared bands)."""
    from pipelines.controlnet import ControlNetUnit, prepare_control_images

    palette = np.array([[120, 120, 120], [180, 120, 120], [6, 230, 230]], np.uint8)
    seg = Image.fromarray(np.kron(palette[np.random.default_rng(0).integers(0, 3, (8, 8))],
                                  np.ones((8, 8, 1), np.uint8)).astype(np.uint8))
    edges = Image.fromarray(edge_map(64, 128))
    units = [ControlNetUnit(model=None, image=seg, resize_mode="just resize"),
             ControlNetUnit(model=None, image=edges, resize_mode="resize and fill")]
    fitted_seg, fitted_edges = prepare_control_images(units, 96, 80)
    assert len(np.unique(np.asarray(fitted_seg.image).reshape(-1, 3), axis=0)) == 3
    out = np.asarray(fitted_edges.image)
    assert set(np.unique(out)) == {0, 255}
    assert (out[:16] == 0).all() and (out[64:] == 0).all()  # 128x64 fitted into 96x80: 48 rows of map, flat bands
    fallback = prepare_control_images([ControlNetUnit(model=None)], 96, 80, fallback_image=seg,
                                      fallback_resize_mode="crop and resize")[0]
    assert len(np.unique(np.asarray(fallback.image).reshape(-1, 3), axis=0)) == 3
