"""tiny-blip2's resume record: what it refuses before any work, and the check that the rebuilt stages before stage 2
are the ones the state was trained from (the whole stop-and-resume run is in test_recipes.py)."""

from __future__ import annotations

import json

import pytest

from mixkit.tiny.recipe_blip2 import TinyBlip2Recipe
from mixkit.tiny.recipe_blip2_resume import (RUN_FILE, check_stage2_start, read_blip2_resume, stage2_start_digest,
                                             write_run_file)
from mixkit.training.training_state import CheckpointMismatchError


def _states(tmp_path, recipe, steps=(2,)):
    folder = tmp_path / "run-state"
    write_run_file(folder, recipe, "abc")
    for step in steps:
        (folder / f"step-{step:08d}.pt").write_bytes(b"")
    return folder


def test_the_newest_state_is_resumed_with_the_digest_it_started_from(tmp_path):
    recipe = TinyBlip2Recipe(output=str(tmp_path / "run"), stage2_steps=5)
    folder = _states(tmp_path, recipe, steps=(2, 4))
    resume = read_blip2_resume(str(folder), TinyBlip2Recipe(output=str(tmp_path / "run"), stage2_steps=5, threads=1))
    assert (resume.path.name, resume.step, resume.stage2_start) == ("step-00000004.pt", 4, "abc")
    check_stage2_start(resume, "abc")
    with pytest.raises(CheckpointMismatchError, match="rebuilt for this resume differ from the run's"):
        check_stage2_start(resume, "abd")


def test_changed_settings_the_last_step_and_other_records_are_refused(tmp_path):
    recipe = TinyBlip2Recipe(output=str(tmp_path / "run"), stage2_steps=5)
    folder = _states(tmp_path, recipe, steps=(5,))
    with pytest.raises(CheckpointMismatchError, match="seed: 0 in the state, 1 now"):
        read_blip2_resume(str(folder), TinyBlip2Recipe(output=str(tmp_path / "run"), stage2_steps=5, seed=1))
    with pytest.raises(CheckpointMismatchError, match="stage-2 step 5, the run's last step"):
        read_blip2_resume(str(folder), recipe)
    (folder / RUN_FILE).write_text(json.dumps({"recipe": "tiny-sd"}), encoding="utf-8")
    with pytest.raises(CheckpointMismatchError, match="not a tiny-blip2 run record"):
        read_blip2_resume(str(folder), recipe)
    (folder / RUN_FILE).unlink()
    with pytest.raises(FileNotFoundError, match="is not a tiny-blip2 resume state"):
        read_blip2_resume(str(folder), recipe)


def test_the_digest_covers_each_weight_file_and_its_name(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"weights")
    (first / "notes.txt").write_text("not weights")
    assert stage2_start_digest([first]) == stage2_start_digest([second])
    (second / "model.safetensors").write_bytes(b"weightz")
    assert stage2_start_digest([first]) != stage2_start_digest([second])
    (second / "model.safetensors").rename(second / "other.safetensors")
    (second / "other.safetensors").write_bytes(b"weights")
    assert stage2_start_digest([first]) != stage2_start_digest([second])
