"""The shapes world: a procedural, exactly-captioned image dataset that mixkit's tiny models learn.

Each sample is one or two shapes in named colours, sizes and positions on a plain background, with
an exact caption (plain or rich, see `shapes_captions`). Sample `i` of seed `s` depends on (s, i)
only, so any slice of a dataset can be regenerated without the rest, and the same seed gives the
same images on every machine. A held-out set of (shape, colour, background) combinations can be
kept out of the training split, so an evaluation can ask for prompts the model never saw.

`write_kohya_folder` writes the layout kohya's trainers (and mixkit's) read:
`<folder>/<repeats>_<concept>/<name>.png` next to `<name>.txt`, plus `manifest.jsonl` with every
sample's attributes.
"""

from __future__ import annotations

import itertools
import json
import os
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, Literal

from PIL import Image

from mixkit.data.shapes_captions import CAPTION_STYLES, caption_scene
from mixkit.data.shapes_render import render_scene
from mixkit.data.shapes_vocab import (
    BASE_COLOURS,
    BASE_SHAPES,
    COLOURS,
    POSITIONS,
    RELATIONS,
    SHAPES,
    SIZES,
    Scene,
    ShapeSpec,
)
from mixkit.io.atomic import atomic_output_folder, check_new_output_folder

Split = Literal["train", "held_out", "all"]
SPLITS: tuple[str, ...] = ("train", "held_out", "all")
CaptionMode = Literal["plain", "rich", "mixed"]
Combination = tuple[str, str, str]  # (shape, colour, background)


@dataclass(frozen=True)
class WorldConfig:
    """Which words the world draws from and how; round-trips through JSON (`to_dict` / `from_dict`)."""

    shapes: tuple[str, ...] = BASE_SHAPES
    colours: tuple[str, ...] = BASE_COLOURS
    backgrounds: tuple[str, ...] = BASE_COLOURS
    sizes: tuple[str, ...] = SIZES
    positions: tuple[str, ...] = POSITIONS
    relations: tuple[str, ...] = RELATIONS
    two_shape_fraction: float = 0.3
    caption_mode: CaptionMode = "mixed"
    jitter: float = 0.03
    held_out: tuple[Combination, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return {key: [list(v) for v in value] if key == "held_out" else (list(value) if isinstance(value, tuple) else value)
                for key, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict) -> "WorldConfig":
        known = {name for name in cls.__dataclass_fields__}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown world config keys {unknown}; valid: {sorted(known)}")
        values = {key: (tuple(tuple(c) for c in value) if key == "held_out" else
                        tuple(value) if isinstance(value, list) else value) for key, value in data.items()}
        config = cls(**values)
        check_world_config(config)
        return config


def check_world_config(config: WorldConfig) -> None:
    """Raise ValueError naming the first setting outside the world's vocabulary or range."""
    for name, allowed in (("shapes", SHAPES), ("colours", COLOURS), ("backgrounds", COLOURS), ("sizes", SIZES),
                          ("positions", POSITIONS), ("relations", RELATIONS)):
        values = getattr(config, name)
        if not values:
            raise ValueError(f"world config {name} must not be empty; valid entries: {', '.join(allowed)}")
        bad = [v for v in values if v not in allowed]
        if bad:
            raise ValueError(f"world config {name} has unknown entries {bad}; valid: {', '.join(allowed)}")
    if len(set(config.colours) | set(config.backgrounds)) < 2:
        raise ValueError("the world needs at least two distinct colours (a shape never has its background's colour)")
    if not 0.0 <= config.two_shape_fraction <= 1.0:
        raise ValueError(f"two_shape_fraction must be in [0, 1], got {config.two_shape_fraction!r}")
    if config.caption_mode not in ("plain", "rich", "mixed"):
        raise ValueError(f"caption_mode must be 'plain', 'rich' or 'mixed', got {config.caption_mode!r}")
    if not 0.0 <= config.jitter <= 0.05:
        raise ValueError(f"jitter must be in [0, 0.05], got {config.jitter!r}")
    drawable = set(all_combinations(config))
    for combination in config.held_out:
        if len(combination) != 3 or tuple(combination) not in drawable:
            raise ValueError(f"held-out combination {combination!r} is not a (shape, colour, background) "
                             "of this world with colour != background")


def all_combinations(config: WorldConfig) -> list[Combination]:
    """Every (shape, colour, background) the world can draw, in a fixed order."""
    return [(s, c, b) for s, c, b in itertools.product(config.shapes, config.colours, config.backgrounds) if c != b]


def with_held_out(config: WorldConfig, fraction: float = 0.1, seed: int = 0) -> WorldConfig:
    """A copy of `config` holding out a seeded `fraction` of its (shape, colour, background) combinations.

    Each shape, colour and background still appears in training through other combinations, so an
    evaluation on the held-out prompts measures composition, not unseen words.
    """
    if not 0.0 < fraction < 0.5:
        raise ValueError(f"held-out fraction must be in (0, 0.5), got {fraction!r}")
    combinations = all_combinations(config)
    rng = random.Random(f"held-out:{seed}")
    chosen = sorted(rng.sample(combinations, max(1, round(fraction * len(combinations)))))
    return WorldConfig(**{**asdict(config), "held_out": tuple(chosen)})


@dataclass(frozen=True)
class ShapesSample:
    """One generated sample: its scene, caption and the seed that reproduces its jitter."""

    index: int
    scene: Scene
    caption: str
    jitter_seed: str

    def render(self, size: int = 64, config: WorldConfig | None = None, supersample: int = 4) -> Image.Image:
        jitter = (config or WorldConfig()).jitter
        return render_scene(self.scene, size, supersample=supersample, jitter=jitter, jitter_seed=self.jitter_seed)


def sample_scene(rng: random.Random, config: WorldConfig, split: Split = "train") -> Scene:
    """Draw one fully specified scene; "train" avoids held-out combinations, "held_out" uses only them."""
    held = set(config.held_out)
    if split == "held_out":
        if not held:
            raise ValueError("the world config holds nothing out; build it with with_held_out(config, fraction)")
        shape, colour, background = rng.choice(sorted(held))
        return Scene((ShapeSpec(shape, colour, rng.choice(config.sizes), rng.choice(config.positions)),), background)
    for _ in range(1000):
        background = rng.choice(config.backgrounds)
        colours = [c for c in config.colours if c != background]
        if not colours:
            continue
        if rng.random() < config.two_shape_fraction:
            objects = tuple(ShapeSpec(rng.choice(config.shapes), rng.choice(colours), rng.choice(config.sizes))
                            for _ in range(2))
            scene = Scene(objects, background, rng.choice(config.relations))
        else:
            scene = Scene((ShapeSpec(rng.choice(config.shapes), rng.choice(colours), rng.choice(config.sizes),
                                     rng.choice(config.positions)),), background)
        if split == "all" or not any((o.shape, o.colour, background) in held for o in scene.objects):
            return scene
    raise ValueError("could not draw a training scene outside the held-out combinations in 1000 tries; "
                     "hold out fewer combinations")


def generate_samples(count: int, seed: int = 0, config: WorldConfig | None = None, split: Split = "train",
                     start: int = 0) -> list[ShapesSample]:
    """Samples `start .. start+count-1` of the world with this seed, config and split."""
    config = config or WorldConfig()
    check_generate_inputs(count, seed, config, split, start)
    return list(_iter_samples(count, seed, config, split, start))


def check_generate_inputs(count: object, seed: object, config: WorldConfig, split: object, start: object = 0) -> None:
    for name, value in (("count", count), ("seed", seed), ("start", start)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if not isinstance(config, WorldConfig):
        raise TypeError(f"config must be a WorldConfig, got {type(config).__name__}")
    check_world_config(config)


def _iter_samples(count: int, seed: int, config: WorldConfig, split: str, start: int) -> Iterator[ShapesSample]:
    for index in range(start, start + count):
        # A string seed is hashed with SHA-512 by `random`, identical on every platform and run.
        rng = random.Random(f"shapes:{seed}:{split}:{index}")
        scene = sample_scene(rng, config, split)  # type: ignore[arg-type]
        style = config.caption_mode if config.caption_mode != "mixed" else rng.choice(CAPTION_STYLES)
        yield ShapesSample(index, scene, caption_scene(scene, style), f"{seed}:{split}:{index}")


def write_kohya_folder(folder: str | os.PathLike, count: int, *, seed: int = 0, size: int = 64,
                       config: WorldConfig | None = None, split: Split = "train", repeats: int = 1,
                       concept: str = "shapes") -> Path:
    """Write `count` samples as `<folder>/<repeats>_<concept>/NNNNNN.png` + `.txt` and `<folder>/manifest.jsonl`.

    The folder is built under a temporary name and renamed when complete, so an error or interrupt
    never leaves a half-written dataset. `world.json` records the config, seed and size used.
    """
    config = config or WorldConfig()
    check_generate_inputs(count, seed, config, split)
    if count == 0:
        raise ValueError("count must be at least 1 to write a dataset")
    if not isinstance(repeats, int) or not 1 <= repeats <= 1000:
        raise ValueError(f"repeats must be an integer in [1, 1000], got {repeats!r}")
    if not isinstance(concept, str) or not concept or any(ch in concept for ch in "/\\") or concept.startswith("."):
        raise ValueError(f"concept must be a plain folder-name word, got {concept!r}")
    if not isinstance(size, int) or not 8 <= size <= 4096:
        raise ValueError(f"image size must be an integer in [8, 4096], got {size!r}")
    target = Path(folder).expanduser().absolute()
    check_new_output_folder(target, "The dataset folder")
    with atomic_output_folder(target) as staging:
        images = staging / f"{repeats}_{concept}"
        images.mkdir()
        with open(staging / "manifest.jsonl", "w", encoding="utf-8") as manifest:
            for sample in _iter_samples(count, seed, config, split, 0):
                name = f"{sample.index:06d}"
                sample.render(size, config).save(images / f"{name}.png")
                (images / f"{name}.txt").write_text(sample.caption + "\n", encoding="utf-8")
                record = {"image": f"{images.name}/{name}.png", "caption": sample.caption, "repeats": repeats,
                          "index": sample.index,
                          "jitter_seed": sample.jitter_seed, **sample.scene.to_dict()}
                manifest.write(json.dumps(record) + "\n")
        info = {"seed": seed, "size": size, "count": count, "split": split, "repeats": repeats,
                "concept": concept, "config": config.to_dict()}
        (staging / "world.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return target


def read_manifest(folder: str | os.PathLike) -> list[dict]:
    """The records of a folder written by `write_kohya_folder`, scenes parsed back into `Scene`s."""
    path = Path(folder) / "manifest.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{str(path)!r} not found; write the dataset with write_kohya_folder or "
                                "`mixkit world make`")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            record = json.loads(line)
            record["scene"] = Scene.from_dict(record)
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{str(path)!r} line {number} is not a shapes-world record ({error})") from None
        records.append(record)
    return records
