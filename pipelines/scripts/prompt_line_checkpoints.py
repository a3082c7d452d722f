"""A prompt list's `--sd_model "name"` (A1111's "Prompts from file or textbox" sets the line's checkpoint with it):
each name checked against the caller's checkpoint list before the first image, and the order the lines run in so
each checkpoint loads once.

A1111 loads the named checkpoint for the line and the original one back after it (its override_settings), so a list
alternating two checkpoints loads one per line. Here the lines without `--sd_model` run first, on the checkpoint the
job started with, then each named checkpoint's lines together, in the order of their first line; the images still
come back in the lines' order, and the caller puts its checkpoint back after the job (the server does, also when the
job fails or is interrupted).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable

from pipelines.scripts.checkpoint_names import close_names, find_checkpoint

NO_LOADER = ("--sd_model needs a way to load checkpoints, which this caller did not give (the Python API: pass "
             "switch_checkpoint=callable(name) -> pipeline and checkpoint_names=[...]); run the list from the web UI "
             "or the HTTP API, or remove --sd_model and run one list per checkpoint.")


def line_checkpoints(jobs: Sequence, context: dict[str, Any]) -> list[str | None]:
    """The checkpoint name (as `context["checkpoint_names"]` lists it) each line's `--sd_model` means, None for a line
    without one; ValueError naming the line for an unknown name (with the close ones) or a caller without
    `switch_checkpoint`."""
    wanted = [(line, line.get("sd_model")) for line in jobs]
    if not any(value is not None for _, value in wanted):
        return [None] * len(wanted)
    if context.get("switch_checkpoint") is None:
        first = next(line for line, value in wanted if value is not None)
        raise ValueError(f"line {first.number}: {NO_LOADER}")
    names = list(context.get("checkpoint_names") or [])
    found = []
    for line, value in wanted:
        if value is None:
            found.append(None)
            continue
        name = find_checkpoint(names, value)
        if name is None:
            listed = ", ".join(repr(close) for close in close_names(names, value)) or "(none: the list is empty)"
            raise ValueError(f"line {line.number}: --sd_model names an unknown checkpoint {value!r}; close names: "
                             f"{listed}. Refresh the checkpoint list if the file was added since.")
        found.append(name)
    return found


def run_order(checkpoints: Sequence[str | None]) -> list[int]:
    """The lines' indices in the order they run: those without a checkpoint first (the job's own), then each
    checkpoint's lines in the order of its first line; within a group, the lines' order."""
    groups: dict[str | None, list[int]] = {None: []}
    for index, name in enumerate(checkpoints):
        groups.setdefault(name, []).append(index)
    return [index for indices in groups.values() for index in indices]


def switched_pipeline(switch: Callable[[str], Any], name: str, line_number: int, position: int, total: int):
    """The pipeline of checkpoint `name` for the line `line_number`. It was listed when the list was checked; a file
    removed or broken since fails here, named as the line names it."""
    try:
        return switch(name)
    except (ValueError, LookupError, OSError) as error:
        raise ValueError(f"Prompts from file stopped before line {line_number} ({position} of {total} lines done): "
                         f"--sd_model could not load {name!r} ({error}); was it removed or changed? Refresh the "
                         "checkpoint list and run the list again.") from error
