"""Shapes-world training data held in memory as tensors, for the mixkit-tiny recipes.

The recipes train for minutes on a CPU; decoding PNGs from disk every step would cost more than
the model. Samples are rendered once into a uint8 tensor and cached on disk keyed by everything
that decides them, so a second recipe (or a rerun) reuses the same images.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mixkit.data.shapes import WorldConfig, generate_samples
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
    return Path(os.environ.get("MIXKIT_CACHE", Path.home() / ".cache" / "mixkit")) / "world_tensors"


def render_world(count: int, seed: int, world: WorldConfig, size: int = 64, split: str = "train",
                 cache_dir: str | Path | None = None) -> WorldTensors:
    """Samples 0..count-1 of the world as tensors, from the disk cache when they were rendered before."""
    key = hashlib.sha256(json.dumps([count, seed, world.to_dict(), size, split], sort_keys=True).encode()).hexdigest()[:16]
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = folder / f"world-{key}.npz"
    samples = generate_samples(count, seed, world, split=split)  # type: ignore[arg-type]
    if path.is_file():
        images = torch.from_numpy(np.load(path)["images"])
    else:
        images = torch.from_numpy(np.stack([np.asarray(s.render(size, world)) for s in samples])).permute(0, 3, 1, 2).contiguous()
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial.npz")
        np.savez(partial, images=images.numpy())
        os.replace(partial, path)
    return WorldTensors(images, [s.caption for s in samples], [s.scene for s in samples])
