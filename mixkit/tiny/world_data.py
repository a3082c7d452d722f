"""Shapes-world training data held in memory as tensors, for the mixkit-tiny recipes.

The recipes train for minutes on a CPU; decoding PNGs from disk every step would cost more than
the model. Samples are rendered once into a uint8 tensor and cached on disk keyed by everything
that decides them, so a second recipe (or a rerun) reuses the same images.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mixkit.data.shapes import ShapesSample, WorldConfig, generate_samples
from mixkit.data.shapes_captions import CAPTION_STYLES, caption_scene
from mixkit.data.shapes_vocab import Scene


@dataclass
class WorldTensors:
    """`images` uint8 (N, 3, S, S); `captions[i]` and `scenes[i]` describe image i."""

    images: torch.Tensor
    captions: list[str]
    scenes: list[Scene]

    def __len__(self) -> int:
        return len(self.captions)

    def float_images(self, indices: torch.Tensor) -> torch.Tensor:
        """Images at `indices` scaled to [-1, 1] (the range diffusers' VAEs expect)."""
        return self.images[indices].float().div(127.5).sub(1.0)


def default_cache_dir() -> Path:
    from mixkit.io.cache_root import WORLD_TENSORS_FOLDER, cache_root

    return cache_root() / WORLD_TENSORS_FOLDER


def render_world(count: int, seed: int, world: WorldConfig, size: int = 64, split: str = "train",
                 cache_dir: str | Path | None = None) -> WorldTensors:
    """Samples 0..count-1 of the world as tensors, from the disk cache when they were rendered before."""
    samples = generate_samples(count, seed, world, split=split)  # type: ignore[arg-type]
    return _cached_render(samples, world, size, [count, seed, world.to_dict(), size, split], cache_dir)


@dataclass
class ShapeVariants:
    """Every shape variant of a set of scenes: `tensors` holds variant `k` of scene `i` at row `i * S + k`
    (S = number of the world's shapes, variant k uses `world.shapes[k]` for the first object);
    `valid[i, k]` is False where that variant would be a held-out combination (its row is a placeholder)."""

    tensors: WorldTensors
    valid: torch.Tensor

    @property
    def variants(self) -> int:
        return self.valid.shape[1]


def render_shape_variants(count: int, seed: int, world: WorldConfig, size: int = 64,
                          cache_dir: str | Path | None = None) -> ShapeVariants:
    """Training samples 0..count-1, each drawn once with every shape of the world as its first shape.

    Same colours, size, position, jitter and caption style: only the shape word and the drawn shape
    differ between the variants of a scene. Put together in one contrastive batch, the variants are
    negatives that only shape tells apart, so the loss contains a shape classification on both towers;
    with random batches colour, background and position already separate almost every pair, and a
    CLIP trained that way reads shape barely above chance (tiny-clip v1: 46% of single-shape images
    matched their own caption over the same caption with another shape).
    """
    held = set(world.held_out)
    rows, valid = [], []
    for sample in generate_samples(count, seed, world):
        first = sample.scene.objects[0]
        for shape in world.shapes:
            ok = (shape, first.colour, sample.scene.background) not in held or shape == first.shape
            rows.append(with_first_shape(sample, shape if ok else first.shape))
            valid.append(ok)
    tensors = _cached_render(rows, world, size, ["shape-variants", count, seed, world.to_dict(), size], cache_dir)
    return ShapeVariants(tensors, torch.tensor(valid).view(count, len(world.shapes)))


def with_first_shape(sample: ShapesSample, shape: str) -> ShapesSample:
    """`sample` with its first object's shape replaced, captioned in the same style."""
    first = sample.scene.objects[0]
    scene = dataclasses.replace(sample.scene, objects=(dataclasses.replace(first, shape=shape), *sample.scene.objects[1:]))
    return ShapesSample(sample.index, scene, caption_scene(scene, caption_style(sample.scene, sample.caption)),
                        sample.jitter_seed)


def caption_style(scene: Scene, caption: str) -> str:
    """Which of the caption styles wrote `caption` for `scene` (samples do not store it)."""
    return next(style for style in CAPTION_STYLES if caption_scene(scene, style) == caption)


def _cached_render(samples: list[ShapesSample], world: WorldConfig, size: int, key_parts: list,
                   cache_dir: str | Path | None) -> WorldTensors:
    key = hashlib.sha256(json.dumps(key_parts, sort_keys=True).encode()).hexdigest()[:16]
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = folder / f"world-{key}.npz"
    if path.is_file():
        images = torch.from_numpy(np.load(path)["images"])
    else:
        images = torch.from_numpy(np.stack([np.asarray(s.render(size, world)) for s in samples])).permute(0, 3, 1, 2).contiguous()
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial.npz")
        np.savez(partial, images=images.numpy())
        os.replace(partial, path)
    return WorldTensors(images, [s.caption for s in samples], [s.scene for s in samples])
