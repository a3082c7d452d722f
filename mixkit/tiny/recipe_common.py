"""What the mixkit-tiny recipes share: the base world, learning-rate schedule, timing and records."""

from __future__ import annotations

import json
import math
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from mixkit.data.shapes import WorldConfig, with_held_out
from mixkit.finite_numbers import is_finite_number

# The base world leaves out diamond, heart, orange and grey (the LoRA concepts of `mixkit eval tiny`)
# and holds out 5% of (shape, colour, background) combinations so evaluation prompts are unseen.
HELD_OUT_FRACTION = 0.05


def base_world() -> WorldConfig:
    return with_held_out(WorldConfig(), HELD_OUT_FRACTION, seed=0)


def resolve_tiny_clip(source: str) -> str:
    """The folder of the tiny CLIP a recipe builds on (a path or a shipped name), or an error saying how to make one."""
    from mixkit.io.sources import resolve_model_source

    try:
        return str(resolve_model_source(source))
    except FileNotFoundError:
        raise FileNotFoundError(f"tiny CLIP folder {source!r} not found; train it first with "
                                "`mixkit train recipe tiny-clip --set output=...` and pass --set clip=<folder> "
                                "(the default, mixkit-tiny-clip, is the shipped one)") from None


def warmup_cosine(step: int, total: int, warmup: int) -> float:
    """Learning-rate factor: linear warm-up, then cosine decay to 10% of the peak."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


@dataclass
class RecipeClock:
    """Wall and process CPU seconds since the recipe started (both go into the record)."""

    wall_start: float = field(default_factory=time.perf_counter)
    cpu_start: float = field(default_factory=time.process_time)

    def wall(self) -> float:
        return round(time.perf_counter() - self.wall_start, 1)

    def cpu(self) -> float:
        return round(time.process_time() - self.cpu_start, 1)


RECORD_FILE = "recipe_record.json"  # written next to every recipe output; marks a folder a rerun may replace


def earlier_record(folder: str) -> dict:
    """The recipe, metrics and time of a model a run builds on, so the record shows the whole chain.

    The earlier record's own "init" / "vae-from" entries come along (as `earlier`), so a run continued
    several times still names every run that led to it.
    """
    record = Path(folder) / RECORD_FILE
    if not record.is_file():
        return {}
    data = json.loads(record.read_text(encoding="utf-8"))
    earlier = [entry for entry in data.get("curve", []) if entry.get("stage") in ("init", "vae-from")]
    return {"model": data.get("model"), "recipe": data.get("recipe"), "metrics": data.get("metrics"),
            "wall_seconds": data.get("wall_seconds"), **({"earlier": earlier} if earlier else {})}


def check_recipe_types(recipe) -> None:
    """Each setting of the type its default has (a `--set learning_rate=abc` used to surface as "'>' not supported
    between 'str' and 'float'"), and `threads` >= 0 (-1 reached torch as a raw RuntimeError)."""
    import dataclasses

    for setting in dataclasses.fields(recipe):
        value, default = getattr(recipe, setting.name), setting.default
        if isinstance(default, bool):
            wrong, kind = not isinstance(value, bool), "true or false"
        elif isinstance(default, int):
            wrong, kind = isinstance(value, bool) or not isinstance(value, int), "an integer"
        elif isinstance(default, float):
            wrong = not is_finite_number(value)
            kind = "a finite number"
        else:
            continue
        if wrong:
            raise ValueError(f"{setting.name} must be {kind}, got {value!r}")
    if getattr(recipe, "threads", 0) < 0:
        raise ValueError(f"threads must be >= 0 (0: torch's default), got {recipe.threads}")


def check_recipe_output(output: str) -> Path:
    """The folder a recipe may write: new, empty, or an earlier output of a recipe (it holds recipe_record.json),
    which a rerun replaces whole. Anything else is refused before training: a recipe must never delete a
    user's files (an output of "." used to replace the working folder)."""
    from mixkit.io.atomic import check_new_output_folder

    if not isinstance(output, str) or not output.strip():
        raise ValueError(f"output must name the folder the recipe writes, like 'mixkit-tiny-sd', got {output!r}")
    path = Path(output).expanduser()
    if path.exists() and path.resolve() == Path.cwd().resolve():
        raise ValueError(f"output {output!r} is the current folder; name a new folder for the recipe to write")
    if path.is_dir() and (path / RECORD_FILE).is_file():
        return path  # an earlier recipe output: replaced only once the new one is complete
    check_new_output_folder(path, "The recipe's output")
    return path


def start_recipe(recipe) -> RecipeClock:
    """What every recipe does before any work: check its settings' types and ranges and that its output folder may be
    (re)written (never a user's folder, `output` set to the folder checked), then take its thread count; returns the
    clock that times the run."""
    check_recipe_types(recipe)
    recipe.check()
    # the folder checked is the folder written: "~/x" expanded once here, for the weights and the resume states alike
    recipe.output = str(check_recipe_output(recipe.output))
    if recipe.threads:
        torch.set_num_threads(recipe.threads)
    return RecipeClock()


def write_record(folder: Path, name: str, config, metrics: dict, curve: list[dict], clock: RecipeClock) -> Path:
    """`recipe_record.json`: how the weights were made and what they scored, next to the weights."""
    record = {
        "model": name,
        "recipe": asdict(config),
        "how_to_reproduce": f"mixkit train recipe {name} --set output=DIR",
        "metrics": metrics,
        "curve": curve,
        "wall_seconds": clock.wall(),
        "cpu_seconds": clock.cpu(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": f"{platform.machine()}, {os.cpu_count()} logical CPUs",
    }
    path = folder / "recipe_record.json"
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path
