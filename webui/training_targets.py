"""The files a queued or running training job will replace when it ends, so nothing else writes them meanwhile.

A training job copies its result over the hypernetwork file at its end; a Create with overwrite, or a second
training of the same file, in between would be lost then (or would make the job's continued steps count from a file
that is no longer there). So each server keeps the target of every training job until the job is over, and
refuses the other writers with `TargetBusyError` (the HTTP routes answer 409 Conflict), naming the job to wait for
or interrupt. Embeddings and hypernetworks alike. Python and CLI runs have no queue and write their own output
files: this is the server's concern.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from pathlib import Path

from webui.worker import Job


class TargetBusyError(ValueError):
    """A file a queued or running training job will write was asked to be written by something else."""


class TrainingTargets:
    """A server's files reserved by training jobs, each until its job's future is done (finished, failed or
    cancelled while queued)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[Path, Job] = {}

    def _busy(self, path: Path) -> Job | None:
        job = self._jobs.get(path)
        if job is not None and job.future.done():
            del self._jobs[path]
            return None
        return job

    @contextlib.contextmanager
    def writing(self, paths: list[Path], what: str):
        """Hold `paths` (what a Create may write) for a write that happens at once: refused while a training job
        holds one of them."""
        with self._lock:
            for path in paths:
                self._refuse_if_busy(Path(path).resolve(), what)
            yield

    @contextlib.contextmanager
    def reserving(self, path: Path, what: str):
        """Around queueing a training job of `path`: the block returns the job, which then holds `path` until it is
        over; refused while another job holds it."""
        path = Path(path).resolve()
        with self._lock:
            self._refuse_if_busy(path, what)
            reservation = _Reservation()
            yield reservation
            if reservation.job is not None and not reservation.job.future.done():
                self._jobs[path] = reservation.job

    def _refuse_if_busy(self, path: Path, what: str) -> None:
        job = self._busy(path)
        if job is not None:
            state = "runs" if job.future.running() else "waits in the queue"
            raise TargetBusyError(f"{what}: {path.name} is being trained by job {job.number} ({job.description}), "
                                  f"which {state} and replaces the file when it ends; wait for it to finish or "
                                  "interrupt it, then try again")


class _Reservation:
    job: Job | None = None


_TARGETS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_TARGETS_LOCK = threading.Lock()


def training_targets(state) -> TrainingTargets:
    """The `TrainingTargets` of the server `state` (made on first use)."""
    with _TARGETS_LOCK:
        targets = _TARGETS.get(state)
        if targets is None:
            targets = _TARGETS[state] = TrainingTargets()
        return targets
