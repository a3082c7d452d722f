"""World tensors for the recipes: the disk cache and the shape variants tiny-clip trains on."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from mixkit.data.shapes import WorldConfig, generate_samples, with_held_out
from mixkit.tiny.world_data import render_shape_variants, render_world, with_first_shape


@pytest.fixture()
def world():
    return with_held_out(WorldConfig(), 0.05, seed=0)


def test_render_world_reads_back_the_same_tensors_from_its_cache(tmp_path, world):
    first = render_world(6, 3, world, 32, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("world-*.npz"))) == 1
    again = render_world(6, 3, world, 32, cache_dir=tmp_path)
    assert torch.equal(first.images, again.images) and first.captions == again.captions
    assert first.images.shape == (6, 3, 32, 32) and first.images.dtype == torch.uint8


def test_each_scene_is_drawn_once_per_shape_and_only_the_shape_changes(tmp_path, world):
    count, shapes = 12, world.shapes
    variants = render_shape_variants(count, 5, world, 32, cache_dir=tmp_path)
    originals = render_world(count, 5, world, 32, cache_dir=tmp_path)
    assert variants.variants == len(shapes) and variants.valid.shape == (count, len(shapes))
    assert len(variants.tensors) == count * len(shapes)
    for i, sample in enumerate(generate_samples(count, 5, world)):
        own = shapes.index(sample.scene.objects[0].shape)
        row = i * len(shapes) + own  # the variant with the scene's own shape is the original, pixel for pixel
        assert torch.equal(variants.tensors.images[row], originals.images[i])
        assert variants.tensors.captions[row] == sample.caption
        for k, shape in enumerate(shapes):
            scene = variants.tensors.scenes[i * len(shapes) + k]
            caption = variants.tensors.captions[i * len(shapes) + k]
            if not variants.valid[i, k]:
                continue
            assert scene.objects[0].shape == shape
            assert scene.objects[1:] == sample.scene.objects[1:] and scene.background == sample.scene.background
            assert re.sub(r"\b(circle|square|triangle|star|cross)\b", "S", caption, count=1) == \
                re.sub(r"\b(circle|square|triangle|star|cross)\b", "S", sample.caption, count=1)


def test_variants_never_draw_a_held_out_combination(tmp_path):
    # Hold out a quarter of the combinations so some variants must be refused.
    world = with_held_out(WorldConfig(), 0.25, seed=1)
    held = set(world.held_out)
    variants = render_shape_variants(60, 2, world, 16, cache_dir=tmp_path)
    assert not variants.valid.all()
    for row, scene in enumerate(variants.tensors.scenes):
        if variants.valid.view(-1)[row]:
            first = scene.objects[0]
            assert (first.shape, first.colour, scene.background) not in held


def test_with_first_shape_keeps_the_caption_style():
    world = WorldConfig(caption_mode="rich")
    sample = generate_samples(1, 0, world)[0]
    other = next(s for s in world.shapes if s != sample.scene.objects[0].shape)
    changed = with_first_shape(sample, other)
    assert changed.caption.count(other) >= 1 and changed.jitter_seed == sample.jitter_seed
    assert len(changed.caption.split()) == len(sample.caption.split())
    assert not np.array_equal(np.asarray(changed.render(32, world)), np.asarray(sample.render(32, world)))
