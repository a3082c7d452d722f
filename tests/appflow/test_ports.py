"""Port checks on runtime values: wrong kinds are TypeErrors, empty lists say they are empty."""

from __future__ import annotations

import pytest
from PIL import Image

from appflow import Appflow, ModelCache, register_port_type
from appflow.ports import check_value


@pytest.mark.parametrize("value", [[], ()])
def test_an_empty_images_list_is_refused_as_empty_saying_how_many_are_needed(value):
    with pytest.raises(ValueError, match=r"^where is an empty list; pass at least 1 image: a list of PIL images"):
        check_value("images", value, "where")


def test_images_of_the_wrong_kind_are_still_a_type_error():
    check_value("images", [Image.new("RGB", (2, 2))], "where")
    with pytest.raises(TypeError, match="expects images .* got list"):
        check_value("images", [3], "where")
    with pytest.raises(TypeError, match="got str"):
        check_value("images", "a.png", "where")


def test_list_ports_without_a_minimum_take_empty_lists():
    check_value("texts", [], "where")


def test_min_items_must_be_a_non_negative_int():
    with pytest.raises(ValueError, match="min_items of port type 'pairs' must be a non-negative int, got -1"):
        register_port_type("pairs", "a list of pairs", lambda v: True, min_items=-1)


def test_dual_guided_app_refuses_an_empty_images_list_before_loading():
    cache = ModelCache()
    flow = Appflow("dual_text_and_image_guided_generation", cache=cache)
    with pytest.raises(ValueError) as error:
        flow(images=[], prompt="a castle")
    assert str(error.value) == (
        "App 'dual_text_and_image_guided_generation': input 'images' (read by step 'generate') is an empty list; "
        "pass at least 1 image: a list of PIL images (or image file paths / URLs / numpy arrays).")
    assert cache.loads == 0
