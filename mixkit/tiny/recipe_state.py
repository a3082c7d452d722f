"""Resume states of the mixkit-tiny recipes: an interrupted 30-minute run continues where it stopped.

A recipe's loop draws every random number from one seeded generator, so a state holding the weights, the EMA, the
optimizer, that generator and the global RNGs (plus the curve and clock so far) continues bit for bit: a run
stopped at step N and resumed ends with the same weights as one that never stopped. States go to `<output>-state/`
(kohya's `-state` folders), one self-contained `step-*.pt` file each (the shared `mixkit.training.training_state`
layout and atomic writes), and only the newest is kept: a tiny-sd state is ~100 MB.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from mixkit.io.atomic import atomic_output_path
from mixkit.tiny.recipe_common import RecipeClock
from mixkit.training.training_state import (
    CHECKPOINT_NAME,
    CheckpointMismatchError,
    architecture_fingerprint,
    capture_rng_states,
    checkpoint_path,
    latest_checkpoint,
    read_state_file,
    restore_rng_states,
)

STATE_FORMAT = "mixkit-recipe-state/1"
# Settings a resumed run may change: where it writes and how it reports, never what it trains.
FREE_SETTINGS = ("output", "threads", "eval_every", "eval_images", "checkpoint_every", "resume_from")


def state_folder(output: str) -> Path:
    """Where a recipe writing `output` keeps its resume states."""
    return Path(f"{str(output).rstrip('/')}-state")


def check_resume_settings(recipe) -> None:
    """`checkpoint_every` >= 0 and a `resume_from` that holds a state, before any work."""
    if isinstance(recipe.checkpoint_every, bool) or not isinstance(recipe.checkpoint_every, int) \
            or recipe.checkpoint_every < 0:
        raise ValueError(f"checkpoint_every must be an integer >= 0 (0: no resume states), "
                         f"got {recipe.checkpoint_every!r}")
    if recipe.resume_from:
        state_file(recipe.resume_from)


def state_file(source: str) -> Path:
    """The state a `resume_from` names: a step-*.pt file, or the newest in a state folder."""
    path = Path(source).expanduser()
    if path.is_dir():
        found = latest_checkpoint(path)
        if found is None:
            raise FileNotFoundError(f"resume_from {source!r} holds no resume state (step-*.pt); a recipe writes them "
                                    "to <output>-state when checkpoint_every or --stop-at-step is set")
        return found
    if not path.is_file():
        raise FileNotFoundError(f"resume_from {source!r} does not exist; name a <output>-state folder or a step-*.pt "
                                "file in it")
    return path


@dataclass
class RecipeState:
    """A state read back (`read_recipe_state`): where the run stopped and what it had; `restore_recipe_state`
    puts it into the rebuilt run."""

    step: int
    raw: dict  # the file's contents, for `restore_recipe_state`
    curve: list[dict]
    metrics: dict
    extra: dict  # what the recipe itself keeps (tiny-sd: its autoencoder's config and metrics)
    tensors: dict[str, torch.Tensor]  # the recipe's own tensors (tiny-sd: the autoencoder it trained)
    clock: RecipeClock
    path: Path


def fingerprint(name: str, modules: dict[str, torch.nn.Module]) -> str:
    """Parameter names and shapes of the trained modules: a state resumes only the same architecture."""
    return architecture_fingerprint(_weights(modules), {"recipe": name})


def save_recipe_state(folder: Path, *, name: str, recipe, step: int, modules: dict[str, torch.nn.Module],
                      ema, optimizer, generator: torch.Generator, curve: list[dict], metrics: dict,
                      clock: RecipeClock, extra: dict | None = None,
                      tensors: dict[str, torch.Tensor] | None = None) -> Path:
    """Write the state after `step` atomically, then drop older ones (a failed write leaves them all)."""
    state = {
        "format": STATE_FORMAT, "recipe": name, "step": step, "fingerprint": fingerprint(name, modules),
        "settings": json.dumps(dataclasses.asdict(recipe), default=str),
        "weights": {key: value.detach().clone() for key, value in _weights(modules).items()},
        "ema": ema.state_dict() if ema is not None else {}, "optimizer": optimizer.state_dict(), "generator": generator.get_state(),
        "rng": capture_rng_states(), "curve": json.dumps(curve), "metrics": json.dumps(metrics),
        "extra": json.dumps(extra or {}), "tensors": {k: v.detach().clone() for k, v in (tensors or {}).items()},
        "wall_seconds": clock.wall(), "cpu_seconds": clock.cpu(),
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = checkpoint_path(folder, step)
    with atomic_output_path(path) as temp:
        torch.save(state, temp)
    for older in folder.iterdir():
        if CHECKPOINT_NAME.match(older.name) and older != path:
            older.unlink()
    return path


def changed_settings(saved: dict, recipe) -> list[str]:
    """What differs between a state's saved settings and `recipe`'s, except the `FREE_SETTINGS`, as readable lines."""
    now = json.loads(json.dumps(dataclasses.asdict(recipe), default=str))
    return [f"{key}: {saved.get(key)!r} in the state, {value!r} now" for key, value in now.items()
            if key not in FREE_SETTINGS and saved.get(key) != value]


def read_recipe_state(source: str, *, name: str, recipe, total_steps: int) -> RecipeState:
    """Read a state and check it continues this run: the same recipe and settings, steps left of `total_steps`."""
    path = state_file(source)
    state = read_state_file(path, STATE_FORMAT, "recipe state")
    if state["recipe"] != name:
        raise CheckpointMismatchError(f"{path} is a state of the {state['recipe']} recipe, not {name}; resume it "
                                      f"with `mixkit train recipe {state['recipe']}`.")
    changed = changed_settings(json.loads(state["settings"]), recipe)
    if changed:
        raise CheckpointMismatchError(
            f"{path} continues a run with other settings ({'; '.join(changed)}). Resume with the settings it was "
            f"started with (only {', '.join(FREE_SETTINGS)} may change), or continue from a finished output with "
            "init_from instead.")
    if state["step"] >= total_steps:
        raise CheckpointMismatchError(f"{path} was saved at step {state['step']}, the run's last step; its output "
                                      "was written then (rerun without resume_from to train again).")
    clock = RecipeClock(wall_start=time.perf_counter() - state["wall_seconds"],
                        cpu_start=time.process_time() - state["cpu_seconds"])
    return RecipeState(step=state["step"], raw=state, curve=json.loads(state["curve"]),
                       metrics=json.loads(state["metrics"]), extra=json.loads(state["extra"]),
                       tensors=state["tensors"], clock=clock, path=path)


def restore_recipe_state(state: RecipeState, *, name: str, modules: dict[str, torch.nn.Module], ema, optimizer,
                         generator: torch.Generator) -> None:
    """Put a state into the rebuilt run's modules, EMA, optimizer and RNGs (after every module is built: their
    seeded inits draw from the global RNG this restores)."""
    raw = state.raw
    if raw["fingerprint"] != fingerprint(name, modules):
        raise CheckpointMismatchError(f"{state.path} holds weights of another architecture than this run builds; "
                                      "resume with the same clip / init_from folders it was started with.")
    with torch.no_grad():
        for key, value in _weights(modules).items():
            value.copy_(raw["weights"][key])
    if ema is not None:
        ema.load_state_dict(raw["ema"])
    optimizer.load_state_dict(raw["optimizer"])
    generator.set_state(raw["generator"])
    restore_rng_states(raw["rng"])


def _weights(modules: dict[str, torch.nn.Module]) -> dict[str, torch.Tensor]:
    return {f"{prefix}.{key}": value for prefix, module in modules.items()
            for key, value in module.state_dict(keep_vars=True).items()}
