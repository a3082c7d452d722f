"""Resume states of the tiny-blip2 recipe: its long stage 2 continues from the stage-2 trainer's own states.

The stages before stage 2 (data, tower warm-up, stage 1) are pure functions of the recipe's settings and seed, so a
resumed run rebuilds them instead of storing them. What they produced is kept as a digest beside the states
(`recipe.json` in `<output>-state/`, with the settings) and compared on resume: a rebuild that came out different
(another torch build, another thread count's float sums) is refused rather than continued from other weights, which
would end in a model no unbroken run gives.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from mixkit.io.atomic import atomic_output_path
from mixkit.tiny.recipe_state import FREE_SETTINGS, changed_settings, state_file
from mixkit.training.training_state import CHECKPOINT_NAME, CheckpointMismatchError

RUN_FILE = "recipe.json"
RUN_FORMAT = "mixkit-tiny-blip2-run/1"


@dataclass
class Blip2Resume:
    """A stage-2 state to continue: its file, its step and the digest of the weights stage 2 started from."""

    path: Path
    step: int
    stage2_start: str


def stage2_start_digest(folders: list[Path]) -> str:
    """SHA-256 over the weight files (*.safetensors) stage 2 starts from, in a fixed order."""
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.safetensors")):
            digest.update(path.relative_to(folder).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def write_run_file(folder: Path, recipe, stage2_start: str) -> None:
    """Record the run's settings and stage-2 start next to its states (atomically)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"format": RUN_FORMAT, "recipe": "tiny-blip2", "stage2_start": stage2_start,
                       "settings": dataclasses.asdict(recipe)}, indent=2, default=str)
    with atomic_output_path(folder / RUN_FILE) as temp:
        Path(temp).write_text(text, encoding="utf-8")


def read_blip2_resume(source: str, recipe) -> Blip2Resume:
    """The state `resume_from` names, after checking it continues this run: a tiny-blip2 state, the same settings."""
    path = state_file(source)
    match = CHECKPOINT_NAME.match(path.name)
    run_file = path.parent / RUN_FILE
    if match is None or not run_file.is_file():
        raise FileNotFoundError(f"resume_from {source!r} is not a tiny-blip2 resume state (a step-*.pt beside "
                                f"{RUN_FILE}); name the <output>-state folder a run with checkpoint_every or "
                                "--stop-at-step wrote")
    saved = json.loads(run_file.read_text(encoding="utf-8"))
    if saved.get("recipe") != "tiny-blip2" or saved.get("format") != RUN_FORMAT:
        raise CheckpointMismatchError(f"{run_file} is not a tiny-blip2 run record; resume it with the recipe that "
                                      "wrote it")
    changed = changed_settings(saved["settings"], recipe)
    if changed:
        raise CheckpointMismatchError(
            f"{path} continues a run with other settings ({'; '.join(changed)}). Resume with the settings it was "
            f"started with (only {', '.join(FREE_SETTINGS)} may change).")
    step = int(match.group(1))
    if step >= recipe.stage2_steps:
        raise CheckpointMismatchError(f"{path} was saved at stage-2 step {step}, the run's last step; its output was "
                                      "written then (rerun without resume_from to train again).")
    return Blip2Resume(path=path, step=step, stage2_start=saved["stage2_start"])


def check_stage2_start(resume: Blip2Resume, rebuilt: str) -> None:
    """Refuse to continue when the rebuilt stages before stage 2 differ from those the state was trained from."""
    if rebuilt != resume.stage2_start:
        raise CheckpointMismatchError(
            f"{resume.path}: the data, tower warm-up and stage 1 rebuilt for this resume differ from the run's "
            "(another torch build or thread count changes their float sums); resume with the threads setting and "
            "install the run started with, or train again without resume_from.")
