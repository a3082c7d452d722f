"""Step progress and Interrupt for a running app: the caller's `callback=` and `control=` reach every SD pipeline
call of the chain.

An app's tasks call the pipelines several layers below `Appflow.__call__`, through a task contract (`Task.run`)
that knows nothing of progress. Rather than widen every task's signature, the call sets the hooks for its own
duration in a context variable (per thread, so two apps running in two threads never see each other's), and each
diffusion task passes `pipeline_hooks()` to its pipeline, as the web UI's worker passes its own to txt2img.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from pipelines.control import GenerationControl


class AppInterrupted(RuntimeError):
    """The caller interrupted an app between two of its steps: the chain stops before the next one.

    `partial` holds the app outputs the finished steps made (an `AppResult` with `interrupted` set; empty when the
    main output comes from a later step), which a UI shows as A1111 shows an interrupted batch's finished images."""

    def __init__(self, message: str, *, partial=None) -> None:
        super().__init__(message)
        self.partial = partial if partial is not None else {}


@dataclass(frozen=True)
class RunHooks:
    """A run's step callback (`pipelines.control.StepProgress` per sampling step) and its Interrupt/Skip control."""

    callback: Callable[[Any], Any] | None = None
    control: GenerationControl | None = None


_HOOKS: contextvars.ContextVar[RunHooks] = contextvars.ContextVar("appflow_run_hooks", default=RunHooks())


def check_run_hooks(callback: Any, control: Any) -> RunHooks:
    """The hooks an `Appflow` call was given, checked: TypeError naming the bad one."""
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be a function taking a StepProgress, or None; got {type(callback).__name__}.")
    if control is not None and not isinstance(control, GenerationControl):
        raise TypeError(f"control must be a pipelines.control.GenerationControl or None; got {type(control).__name__}.")
    return RunHooks(callback, control)


@contextlib.contextmanager
def running_with(hooks: RunHooks) -> Iterator[None]:
    """Make `hooks` the ones `pipeline_hooks` hands out until the block ends (nested calls restore the outer ones)."""
    token = _HOOKS.set(hooks)
    try:
        yield
    finally:
        _HOOKS.reset(token)


def pipeline_hooks() -> dict[str, Any]:
    """The `callback=` / `control=` keywords of a pipeline call inside the running app (none when not given)."""
    hooks = _HOOKS.get()
    return {key: value for key, value in (("callback", hooks.callback), ("control", hooks.control))
            if value is not None}


def interrupted() -> bool:
    """Whether the running app's caller pressed Interrupt (the steps after the current one are then not run)."""
    control = _HOOKS.get().control
    return control is not None and control.interrupted


def images_made(result) -> list:
    """A pipeline result's images, for a task to hand on. An Interrupt that reached the pipeline before its first
    image leaves none: that is AppInterrupted (the app shows what its earlier steps made), not an IndexError."""
    if not result.images and interrupted():
        raise AppInterrupted("interrupted before its first image was made")
    return result.images
