"""A control map on its own (sd-webui-controlnet's "Run preprocessor", `/controlnet/detect`)."""

from __future__ import annotations

import math

import pytest
from PIL import Image, ImageDraw

from pipelines.controlnet.detect import detect_control_map
from pipelines.controlnet.resolution import detect_at_resolution
from pipelines.preprocessors import run_preprocessor


def picture(size=(96, 64)) -> Image.Image:
    image = Image.new("RGB", size, "black")
    ImageDraw.Draw(image).rectangle((20, 12, 70, 50), outline="white", width=3)
    return image


def test_resolution_preprocessors_detect_at_processor_res_as_a_unit_does():
    detected = detect_control_map(picture(), "canny", processor_res=128)
    assert detected.size == (192, 128)  # short side 64 -> 128, the long side scaled with it
    unit_way = detect_at_resolution(lambda p: run_preprocessor("canny", p), picture(), 128)
    assert detected.tobytes() == unit_way.tobytes()


def test_preprocessors_without_resolution_keep_the_pictures_size():
    detected = detect_control_map(picture(), "invert", processor_res=1024)
    assert detected.size == (96, 64) and detected.tobytes() == run_preprocessor("invert", picture()).tobytes()


def test_thresholds_reach_the_preprocessor():
    grey = Image.new("RGB", (64, 64), (100, 100, 100))
    assert detect_control_map(grey, "threshold", threshold_a=10).getextrema() == ((255, 255),) * 3  # 100 > 10
    assert detect_control_map(grey, "threshold", threshold_a=200).getextrema() == ((0, 0),) * 3
    assert detect_control_map(picture(), "threshold").tobytes() == \
        detect_control_map(picture(), "threshold", threshold_a=127).tobytes()  # None: the preprocessor's default


@pytest.mark.parametrize("keywords, words", [
    ({"processor_res": 32}, ["processor_res", "[64, 2048]", "32"]),
    ({"processor_res": 100.5}, ["processor_res", "100.5"]),
    ({"processor_res": True}, ["processor_res"]),
    ({"threshold_a": -3}, ["threshold_a", "Canny Low Threshold", "-3"]),
    ({"threshold_b": math.nan}, ["threshold_b", "nan"]),
    ({"threshold_a": "100"}, ["threshold_a", "'100'"]),
])
def test_bad_values_are_refused_naming_them(keywords, words):
    with pytest.raises(ValueError) as error:
        detect_control_map(picture(), "canny", **keywords)
    assert all(word in str(error.value) for word in words), str(error.value)


def test_unknown_preprocessor_lists_the_valid_ones():
    with pytest.raises(KeyError) as error:
        detect_control_map(picture(), "cany")
    assert "canny" in str(error.value) and "tile_resample" in str(error.value)


def test_not_an_image_is_refused():
    with pytest.raises(TypeError, match="PIL image"):
        detect_control_map("picture.png", "canny")
