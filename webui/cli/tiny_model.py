"""`mixkit tiny-model DIR`: write a tiny random-weight SD model folder, for smoke tests offline.

Its images are noise-like (the weights are random): it proves the installation and every code
path (loading, samplers, infotext, LoRA) without downloading gigabytes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


# Written beside the model: which --family and --seed made it, so a re-run with other options is refused, not ignored.
RECIPE_FILE = "mixkit_tiny_model.json"
DEFAULT_FAMILY, DEFAULT_SEED = "sd1", 0


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("tiny-model", help="write a tiny random-weight SD model (offline smoke tests)",
                              description=__doc__.splitlines()[0])
    p.add_argument("folder", help="where to write the diffusers folder (a folder that already holds the same tiny "
                                  "model is left as it is)")
    p.add_argument("--family", choices=["sd1", "sd2", "sdxl"], default=None, help=f"default: {DEFAULT_FAMILY}")
    p.add_argument("--seed", type=int, default=None, help=f"default: {DEFAULT_SEED}")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mixkit.io.atomic import check_new_output_folder
    from mixkit.testing.tiny_models import build_tiny_sd1, build_tiny_sdxl

    folder = Path(args.folder)
    family = args.family or DEFAULT_FAMILY
    seed = DEFAULT_SEED if args.seed is None else args.seed
    if (folder / "model_index.json").is_file():
        check_same_model(folder, args.family, args.seed)
        print(folder)  # already there: keeps the README's one-line demo re-runnable
        return 0
    check_new_output_folder(folder, "The model folder")  # also a file of that name, which iterdir() crashed on
    if family == "sdxl":
        build_tiny_sdxl(folder, seed=seed)
    else:
        sd2 = family == "sd2"
        build_tiny_sd1(folder, seed=seed, sd2=sd2, prediction_type="v_prediction" if sd2 else "epsilon")
    (folder / RECIPE_FILE).write_text(json.dumps({"family": family, "seed": seed}) + "\n", encoding="utf-8")
    print(folder)
    return 0


def check_same_model(folder: Path, family: str | None, seed: int | None) -> None:
    """A folder that already holds a model is kept only when it is what was asked for: the options given
    (family, seed) match what made it. Without options any model there is accepted (a re-run of the same line)."""
    if family is None and seed is None:
        return
    made = existing_recipe(folder)
    asked = {"family": family, "seed": seed}
    differ = [f"--{key} {asked[key]} (it was made with {made.get(key, 'an unknown ' + key)})"
              for key in ("family", "seed") if asked[key] is not None and made.get(key) != asked[key]]
    if differ:
        raise ValueError(f"{folder} already holds a model, not the one asked for: {'; '.join(differ)}. tiny-model "
                         "never overwrites a model; choose a new folder, or remove this one first")


def existing_recipe(folder: Path) -> dict:
    """{"family", "seed"} of a tiny model folder: its recipe file, else the family read from its configs (a folder
    written before the recipe file existed, or any diffusers folder; its seed is then unknown)."""
    try:
        recipe = json.loads((folder / RECIPE_FILE).read_text(encoding="utf-8"))
        if isinstance(recipe, dict):
            return recipe
    except (OSError, ValueError):
        pass
    try:
        pipeline = json.loads((folder / "model_index.json").read_text(encoding="utf-8")).get("_class_name", "")
        scheduler = json.loads((folder / "scheduler" / "scheduler_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, AttributeError):
        return {}
    if "XL" in pipeline:
        return {"family": "sdxl"}
    return {"family": "sd2" if scheduler.get("prediction_type") == "v_prediction" else "sd1"}
