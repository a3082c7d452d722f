"""Rendering of shapes-world scenes: colours, positions, sizes and anti-aliasing at any image size."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mixkit.data.shapes_render import render_scene
from mixkit.data.shapes_vocab import COLOUR_RGB, POSITION_CENTRE, SHAPES, SIZE_RADIUS, Scene, ShapeSpec


def _mask(image, colour):
    """Pixels within a small distance of `colour` (interior of the shape, not its blended edge)."""
    pixels = np.asarray(image).astype(int)
    return np.abs(pixels - np.array(COLOUR_RGB[colour])).sum(-1) < 10


@pytest.mark.parametrize("size", [17, 64, 200])
def test_any_size_with_background_corners_and_shape_centre(size):
    image = render_scene(Scene((ShapeSpec("circle", "red", "large", "center"),), "blue"), size)
    assert image.size == (size, size) and image.mode == "RGB"
    pixels = np.asarray(image)
    assert tuple(pixels[0, 0]) == COLOUR_RGB["blue"] == tuple(pixels[-1, -1])
    assert tuple(pixels[size // 2, size // 2]) == COLOUR_RGB["red"]


@pytest.mark.parametrize("position", list(POSITION_CENTRE))
def test_shape_centroid_is_at_its_named_position(position):
    image = render_scene(Scene((ShapeSpec("square", "yellow", "small", position),), "black"), 128)
    ys, xs = np.nonzero(_mask(image, "yellow"))
    expected_x, expected_y = POSITION_CENTRE[position]
    assert abs(xs.mean() + 0.5 - expected_x * 128) < 1.0
    assert abs(ys.mean() + 0.5 - expected_y * 128) < 1.0


@pytest.mark.parametrize("size_name", list(SIZE_RADIUS))
def test_circle_area_matches_its_radius(size_name):
    image = render_scene(Scene((ShapeSpec("circle", "white", size_name, "center"),), "black"), 256)
    # Coverage (mean brightness) counts anti-aliased edge pixels fractionally. PIL rasterises on
    # integer pixels with an inclusive bounding box, up to one supersampled pixel of radius: 2%.
    coverage = (np.asarray(image)[..., 0].astype(float) - 15) / (250 - 15)
    expected = math.pi * (SIZE_RADIUS[size_name] * 256) ** 2
    assert coverage.sum() == pytest.approx(expected, rel=0.02)


def test_supersampling_blends_edges_and_plain_rendering_does_not():
    scene = Scene((ShapeSpec("star", "white", "large", "center"),), "black")
    hard = np.asarray(render_scene(scene, 64, supersample=1))
    soft = np.asarray(render_scene(scene, 64, supersample=4))
    assert len(np.unique(hard.reshape(-1, 3), axis=0)) == 2
    assert len(np.unique(soft.reshape(-1, 3), axis=0)) > 8


def test_every_shape_is_distinct_and_two_shapes_are_placed_by_relation():
    images = [np.asarray(render_scene(Scene((ShapeSpec(s, "white", "large", "center"),), "black"), 64)) for s in SHAPES]
    for i in range(len(images)):
        for j in range(i + 1, len(images)):
            assert not np.array_equal(images[i], images[j]), (SHAPES[i], SHAPES[j])
    pair = Scene((ShapeSpec("circle", "red", "medium"), ShapeSpec("square", "green", "medium")), "white", "right of")
    image = render_scene(pair, 100)
    assert np.nonzero(_mask(image, "red"))[1].mean() > 50 > np.nonzero(_mask(image, "green"))[1].mean()
    below = render_scene(Scene(pair.objects, "white", "below"), 100)
    assert np.nonzero(_mask(below, "red"))[0].mean() > 50 > np.nonzero(_mask(below, "green"))[0].mean()


def test_jitter_is_seeded_and_bounded():
    scene = Scene((ShapeSpec("circle", "red", "medium", "center"),), "blue")
    a = np.asarray(render_scene(scene, 64, jitter=0.03, jitter_seed="x"))
    b = np.asarray(render_scene(scene, 64, jitter=0.03, jitter_seed="x"))
    c = np.asarray(render_scene(scene, 64, jitter=0.03, jitter_seed="y"))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    with pytest.raises(ValueError, match="jitter must be in"):
        render_scene(scene, 64, jitter=0.2)


@pytest.mark.parametrize("scene, kwargs, fragment", [
    (Scene((ShapeSpec("circle", "red", "small", "left"),), "blue"), {"size": 4}, "image size"),
    (Scene((ShapeSpec("circle", "red", None, "left"),), "blue"), {}, "without a size"),
    (Scene((ShapeSpec("circle", "red", "small"),), "blue"), {}, "without a position"),
    (Scene((ShapeSpec("circle", "red", "small"), ShapeSpec("star", "red", "small")), "blue"), {}, "without a relation"),
    (Scene((ShapeSpec("circle", "blue", "small", "left"),), "blue"), {}, "invisible"),
])
def test_render_rejects_underspecified_scenes(scene, kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        render_scene(scene, **kwargs)
