"""How every generating CLI command runs its job: a progress bar on stderr counting sampling steps, Ctrl-C as A1111's
Interrupt (the first stops after the current step and keeps what was made, a second aborts), then the written paths
on stdout and exit code 130 when the job was cut short."""

from __future__ import annotations

import sys
from typing import Any, Callable, Iterable

INTERRUPTED_EXIT_CODE = 130  # what a shell reports for a command ended by SIGINT


def steps_done(state) -> tuple[int, int]:
    """(steps done, steps in all) of the job a step callback reports on: the steps each pass runs (img2img runs fewer
    than --steps, as A1111), both passes of every hires-fix batch (`HiresStepProgress`) counted."""
    if hasattr(state, "steps_before"):
        return state.steps_before + state.step, state.steps_before + state.total_steps + state.steps_after
    return state.batch_index * state.total_steps + state.step, state.total_steps * state.batch_count


def run_with_progress(run: Callable[..., Any], total_steps: int) -> Any:
    """`run(callback=..., control=...)`'s result, with a step progress bar (first sized `total_steps`, then by the
    job's own count) and Ctrl-C as Interrupt."""
    from tqdm import tqdm

    from pipelines.control import GenerationControl
    from pipelines.interrupt_signal import interrupt_on_sigint

    control = GenerationControl()
    with tqdm(total=total_steps, unit="step", file=sys.stderr) as bar, interrupt_on_sigint(control):
        def progress(state) -> None:
            bar.n, bar.total = steps_done(state)
            bar.refresh()

        return run(callback=progress, control=control)


def report_written(paths: Iterable, interrupted: bool, kept: str) -> int:
    """Print the written paths; the exit code: 0, or 130 after saying what an interrupted job kept (`kept`, as in
    "kept 2 of 4 image(s)")."""
    for path in paths:
        print(path)
    if interrupted:
        print(f"mixkit: interrupted; {kept}", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    return 0
