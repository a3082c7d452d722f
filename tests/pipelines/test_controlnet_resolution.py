"""sd-webui-controlnet's preprocessor resolution (pixel perfect, processor_res), the "only masked" crop of control
images, and ControlNet units guiding both hires-fix passes.

References (sd-webui-controlnet): `internal_controlnet/external_code.py` `pixel_perfect_resolution` (factor
min(H/h, W/w) for "Resize and Fill", else max; times the short side; np.round); `annotator/util.py`
`resize_image_with_pad` (short side to the resolution, sides rounded, edge padding to multiples of 64, cut off the
result); `scripts/controlnet.py` (the detected map is brought to each pass's size with `detectmap_proc`, once for
the first pass and once for the hires size; `detectmap_proc`'s own map resize, `pipelines.controlnet.map_fit`). A1111 `modules/processing.py`: an "only masked" crop goes in with
`images.resize_image(2, crop, width, height)` ("resize and fill").
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from pipelines.controlnet import ControlNetUnit, prepare_control_images, resize_controls
from pipelines.controlnet.resolution import (
    MAX_DETECT_PIXELS, check_detection_size, detect_at_resolution, pixel_perfect_resolution,
)
from pipelines.controlnet.map_fit import fit_control_map
from pipelines.preprocessors import run_preprocessor


def drawing(width: int = 100, height: int = 75) -> Image.Image:
    rng = np.random.default_rng(5)
    pixels = np.zeros((height, width, 3), dtype=np.uint8)
    for _ in range(6):  # solid rectangles: canny finds their edges at any scale
        x0, y0 = rng.integers(0, width - 20), rng.integers(0, height - 20)
        pixels[y0:y0 + rng.integers(8, 20), x0:x0 + rng.integers(8, 20)] = rng.integers(60, 255, 3)
    return Image.fromarray(pixels)


@pytest.mark.parametrize("size, target, mode, expected", [
    ((640, 480), (512, 512), "crop and resize", 512),   # max(512/480, 512/640) * 480
    ((640, 480), (512, 512), "resize and fill", 384),   # min(...) * 480
    ((640, 480), (512, 512), "just resize", 512),
    ((100, 75), (64, 64), "crop and resize", 64),
    ((512, 768), (768, 512), "crop and resize", 768),   # max(512/768, 768/512) * 512
    ((300, 200), (100, 100), "resize and fill", 67),    # 100/300 * 200 = 66.67
])
def test_pixel_perfect_resolution_is_the_extensions(size, target, mode, expected):
    assert pixel_perfect_resolution(size, *target, mode) == expected


def extension_canny_map(picture: Image.Image, resolution: int, width: int, height: int, mode: str) -> Image.Image:
    """The extension's order, restated: short side to `resolution`, pad to 64, canny, cut the pad, then fit."""
    factor = resolution / min(picture.size)
    size = (round(picture.width * factor), round(picture.height * factor))
    scaled = np.asarray(picture.resize(size, Image.Resampling.BICUBIC if factor > 1 else Image.Resampling.BOX))
    pad_h, pad_w = -size[1] % 64, -size[0] % 64
    padded = Image.fromarray(np.pad(scaled, [(0, pad_h), (0, pad_w), (0, 0)], mode="edge"))
    detected = run_preprocessor("canny", padded).crop((0, 0, *size))
    return fit_control_map(detected, width, height, mode)


@pytest.mark.parametrize("pixel_perfect, processor_res, resolution", [(False, 512, 512), (False, 160, 160),
                                                                     (True, 512, 64)])
def test_canny_runs_at_the_units_resolution_then_is_fitted(controlnet, pixel_perfect, processor_res, resolution):
    picture = drawing()
    unit = ControlNetUnit(controlnet, picture, preprocessor="canny", pixel_perfect=pixel_perfect,
                          processor_res=processor_res)
    control = prepare_control_images([unit], 64, 64)[0]
    expected = extension_canny_map(picture, resolution, 64, 64, "crop and resize")
    assert control.image.size == (64, 64)
    assert np.array_equal(np.asarray(control.image), np.asarray(expected))


def test_the_resolution_changes_the_map_and_none_keeps_the_generation_size_path(controlnet):
    picture = drawing()
    maps = {res: np.asarray(prepare_control_images(
        [ControlNetUnit(controlnet, picture, preprocessor="canny", processor_res=res)], 64, 64)[0].image)
        for res in (None, 512)}
    at_size = run_preprocessor("canny", fit_control_map(picture, 64, 64, "crop and resize"))
    assert np.array_equal(maps[None], np.asarray(at_size))
    assert not np.array_equal(maps[None], maps[512])


def test_a_preprocessor_without_resolution_ignores_it_as_in_the_extension(controlnet):
    picture = drawing()
    plain, pixel_perfect = (prepare_control_images([ControlNetUnit(controlnet, picture, preprocessor="invert",
                                                                   pixel_perfect=flag, processor_res=128)], 64, 64)[0]
                            for flag in (False, True))
    assert np.array_equal(np.asarray(plain.image), np.asarray(pixel_perfect.image))
    # as the extension: invert runs on the picture as given, then the map is fitted (QA: fitting the drawing first saw
    # a white page and never thinned its lines back)
    assert np.array_equal(np.asarray(plain.image), np.asarray(fit_control_map(picture.point(lambda v: 255 - v), 64, 64,
                                                                              "crop and resize")))


def test_detect_at_resolution_cuts_the_padding_off():
    seen = []

    def record(picture):
        seen.append(picture.size)
        return picture

    out = detect_at_resolution(record, drawing(100, 75), 100)  # 133 x 100, padded to 192 x 128
    assert seen == [(192, 128)] and out.size == (133, 100)


def test_an_extreme_aspect_picture_is_refused_before_it_is_scaled():
    """A 1 x 60,000 strip at resolution 64 would be scaled to 64 x 3,840,000 pixels (minutes of CPU, about 1 GB)."""
    def never(picture):
        raise AssertionError("the preprocessor must not run")

    with pytest.raises(ValueError) as refused:
        detect_at_resolution(never, Image.new("RGB", (1, 60_000)), 64)
    assert all(words in str(refused.value) for words in ("1x60000", "resolution 64", "64x3840000 = 245,760,000",
                                                          f"{MAX_DETECT_PIXELS:,}", "lower the preprocessor resolution"))


def test_the_detection_limit_is_exact():
    check_detection_size((64, 256), 2048)  # 2048 x 8192: exactly the limit passes
    with pytest.raises(ValueError, match="2048x8224"):
        check_detection_size((64, 257), 2048)  # one more row scales to 2048 x 8224


def test_pixel_perfect_cannot_get_around_the_detection_limit(controlnet):
    unit = ControlNetUnit(model=controlnet, image=Image.new("RGB", (1, 60_000)), preprocessor="canny", pixel_perfect=True,
                          resize_mode="crop and resize")
    with pytest.raises(ValueError, match="above the 16,777,216-pixel limit"):
        prepare_control_images([unit], 64, 64)  # covering 64 x 64: resolution 64, the strip scaled to 64 x 3,840,000


def test_infotext_records_pixel_perfect_and_the_processor_res(controlnet):
    from pipelines.controlnet import serialize_unit

    assert "Resize Mode: Crop and Resize, Processor Res: 256, Threshold A: 100" in serialize_unit(
        ControlNetUnit(controlnet, preprocessor="canny", processor_res=256, model_name="tiny"))
    text = serialize_unit(ControlNetUnit(controlnet, preprocessor="canny", pixel_perfect=True, processor_res=256,
                                         model_name="tiny"))
    assert "Pixel Perfect: True" in text and "Processor Res" not in text
    assert "Pixel Perfect: False" in serialize_unit(ControlNetUnit(controlnet, model_name="tiny"))


def test_infotext_of_a_unit_without_processor_res_records_the_generation_short_side(controlnet):
    """processor_res None preprocesses the picture fitted to the generation size; the infotext says so (the extension
    always writes "Processor Res"), so a paste, whose units default to 512, detects at that size again."""
    from pipelines.controlnet import serialize_unit

    unit = ControlNetUnit(controlnet, drawing(64, 64), preprocessor="canny", model_name="tiny")
    assert "Resize Mode: Crop and Resize, Processor Res: 48, Threshold A" in serialize_unit(unit, (80, 48))
    pasted = ControlNetUnit(controlnet, drawing(64, 64), preprocessor="canny", model_name="tiny", processor_res=64)
    assert "Processor Res: 64," in serialize_unit(unit, (64, 64))
    ours, again = prepare_control_images([unit, pasted], 64, 64)
    assert ours.image.tobytes() == again.image.tobytes()
    assert ours.image.tobytes() != prepare_control_images([ControlNetUnit(
        controlnet, drawing(64, 64), preprocessor="canny", processor_res=512)], 64, 64)[0].image.tobytes()


@pytest.mark.parametrize("change, message", [({"processor_res": 32}, r"processor_res must be an integer in \[64, 2048\]"),
                                             ({"processor_res": 64.0}, "processor_res must be an integer"),
                                             ({"pixel_perfect": "yes"}, "pixel_perfect must be True or False")])
def test_bad_resolution_fields_are_refused(controlnet, change, message):
    from pipelines.controlnet import ControlNetLimits, check_controlnet_units

    unit = ControlNetUnit(controlnet, drawing(), **change)
    config = controlnet.config
    unet_config = type("UnetConfig", (), {"cross_attention_dim": config.cross_attention_dim,
                                          "addition_embed_type": config.addition_embed_type,
                                          "block_out_channels": config.block_out_channels,
                                          "in_channels": config.in_channels})()
    with pytest.raises((ValueError, TypeError), match=message):
        check_controlnet_units([unit], unet_config, ControlNetLimits(), has_init_image=False)


def test_resize_controls_resizes_a_detected_map_and_refits_a_plain_picture(controlnet):
    picture = drawing()
    detected, plain = prepare_control_images([ControlNetUnit(controlnet, picture, preprocessor="canny", processor_res=128),
                                              ControlNetUnit(controlnet, picture, preprocessor="none")], 64, 64)
    big_detected, big_plain = resize_controls([detected, plain], 128, 96)
    assert big_detected.tensor.shape == (1, 3, 96, 128)
    assert np.array_equal(np.asarray(big_detected.image),
                          np.asarray(fit_control_map(detected.detected, 128, 96, "crop and resize")))
    assert np.array_equal(np.asarray(big_plain.image), np.asarray(fit_control_map(picture, 128, 96, "crop and resize")))


def test_invert_runs_before_the_map_is_fitted(controlnet):
    """A black-lines-on-white drawing for a lineart/scribble unit: the extension inverts the picture as given and then
    fits the white-on-black map (re-binarised, thinned); fitting the drawing first saw a white page and kept thick
    lines (QA finding)."""
    grid = np.full((200, 200, 3), 255, np.uint8)
    grid[::10] = 0
    grid[:, ::10] = 0
    picture = Image.fromarray(grid)
    made = prepare_control_images([ControlNetUnit(controlnet, picture, preprocessor="invert", resize_mode="just resize")],
                                  100, 100)[0].image
    inverted_first = fit_control_map(picture.point(lambda v: 255 - v), 100, 100, "just resize")
    fitted_first = fit_control_map(picture, 100, 100, "just resize").point(lambda v: 255 - v)
    assert np.array_equal(np.asarray(made), np.asarray(inverted_first))
    assert not np.array_equal(np.asarray(made), np.asarray(fitted_first))
