"""One generation at a time per device, behind a bounded queue that both the UI and the API share.

A diffusion model cannot usefully run two samplings at once on one device (they would only
compete for memory and time), so every job runs on a single worker thread. The queue is bounded
so that a burst of requests gets a fast, clear "queue full" answer instead of piling up memory
and timing out minutes later.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from pipelines.control import GenerationControl, StepProgress

JobFunction = Callable[[GenerationControl, Callable[[StepProgress], None]], Any]


class QueueFullError(RuntimeError):
    """The queue holds its maximum number of waiting jobs; the caller should retry later."""


@dataclass
class Job:
    """A queued or running unit of work; `future` resolves to the function's return value."""

    number: int
    description: str
    function: JobFunction
    control: GenerationControl = field(default_factory=GenerationControl)
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    session: str | None = None  # the UI session (browser tab) that asked for it; None for API and CLI jobs
    owner: str | None = None  # the --auth user whose API request it is; None for UI jobs and servers without auth
    timestamp: str | None = None  # A1111's state.job_timestamp: set once, when the job starts running
    # A UI generation a reloaded page can reattach to (`webui.ui_tasks`): its tab going away does not cancel it
    keep_on_disconnect: bool = False


# For the job-control methods' `owner`: act on whatever runs, as A1111's API does on its one-user server.
ANY_OWNER = object()


@dataclass
class ProgressSnapshot:
    """What `/sdapi/v1/progress` and the UI's progress bar show, copied under the worker's lock."""

    job: str = ""
    job_number: int = 0
    queued: int = 0
    step: int = 0
    total_steps: int = 0
    batch_index: int = 0
    batch_count: int = 0
    # A1111's state.job_no / job_count (`/sdapi/v1/progress`): the running pass within the job and how many it
    # runs, i.e. the batch and the batch count, or in a hires fix two passes per batch (`pass_position`)
    pass_index: int = 0
    pass_count: int = 0
    fraction: float = 0.0
    eta_seconds: float = 0.0
    started_at: float | None = None
    interrupted: bool = False
    skipped: bool = False
    # A1111's state.job_timestamp: the running (else the last) job's start, "0" before any (A1111's initial value)
    job_timestamp: str = "0"
    preview_latents: Any = None  # latents of the last preview step (cloned), or None
    # A1111's id_live_preview: which preview `preview_latents` is; numbered across jobs, so a client that sends back
    # the last id it got is sent a preview again only when there is a new one (0: none yet)
    preview_id: int = 0

    @property
    def busy(self) -> bool:
        return self.started_at is not None


def job_timestamp() -> str:
    """A job's start time as A1111's `state.begin` records it (`%Y%m%d%H%M%S`, local time)."""
    return time.strftime("%Y%m%d%H%M%S")


def estimate_eta(elapsed: float, fraction: float) -> float:
    """Seconds left, assuming the remaining steps take as long as the finished ones did."""
    if fraction <= 0:
        return 0.0
    return max(0.0, elapsed / fraction * (1.0 - fraction))


def pass_position(state: StepProgress) -> tuple[int, int]:
    """(A1111's state.job_no, state.job_count) at this step: the batch index and batch count, except in a hires
    fix, where A1111 doubles job_count and calls nextjob() before each hires pass, so each pass counts
    (pipelines.hires_progress.HiresStepProgress carries pass_index and pass_count)."""
    return getattr(state, "pass_index", state.batch_index), getattr(state, "pass_count", state.batch_count)


class GenerationWorker:
    """Runs submitted jobs one by one on a daemon thread; at most `max_queued` wait behind the running one."""

    def __init__(self, max_queued: int, *, preview_every: int = 5) -> None:
        if isinstance(max_queued, bool) or not isinstance(max_queued, int) or not 0 <= max_queued <= 10_000:
            raise ValueError(f"max_queued must be an integer in [0, 10000], got {max_queued!r}.")
        if isinstance(preview_every, bool) or not isinstance(preview_every, int) or preview_every < 0:
            raise ValueError(f"preview_every must be a non-negative integer (0 = no previews), got {preview_every!r}.")
        self.max_queued = max_queued
        self.preview_every = preview_every
        self._waiting: collections.deque[Job] = collections.deque()
        self._condition = threading.Condition()
        self._numbers = itertools.count(1)
        self._preview_ids = itertools.count(1)
        self._current: Job | None = None
        self._progress = ProgressSnapshot()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="mixkit-generation", daemon=True)
        self._thread.start()

    # -- submitting ----------------------------------------------------------------------------
    def submit(self, function: JobFunction, description: str, *, session: str | None = None,
               owner: str | None = None, keep_on_disconnect: bool = False) -> Job:
        """Queue `function(control, on_step)`; raises QueueFullError when `max_queued` jobs already wait.

        `session` ties the job to a UI session, so the tab's Interrupt reaches it and `end_session` drops it when the
        tab goes away, unless `keep_on_disconnect` (a generation a reloaded page reattaches to).
        """
        with self._condition:
            if self._closed:
                raise RuntimeError("The generation worker has been shut down.")
            # Counted as running + waiting, so the answer does not depend on whether the worker
            # thread has already picked up the previous job.
            active = len(self._waiting) + (self._current is not None)
            if active >= self.max_queued + 1:
                raise QueueFullError(
                    f"Queue full: {active - 1} job(s) are waiting (the limit is {self.max_queued}); "
                    "retry when the current generations have finished."
                )
            job = Job(next(self._numbers), description, function, session=session, owner=owner,
                      keep_on_disconnect=keep_on_disconnect)
            self._waiting.append(job)
            self._condition.notify_all()
            return job

    def cancel(self, job: Job) -> None:
        """Drop `job` if it still waits, or interrupt it if it runs (a client went away)."""
        with self._condition:
            if job in self._waiting:
                self._waiting.remove(job)
                job.future.cancel()
                return
        job.control.interrupt()

    def cancel_session(self, session: str) -> int:
        """Drop every queued job of `session` and interrupt its running one; returns how many were hit."""
        return self._cancel_session_jobs(session, lambda job: True)

    def end_session(self, session: str) -> int:
        """A UI session ended (its tab closed or reloaded): drop and interrupt its jobs, except those kept on
        disconnect, which a reloaded page reattaches to (A1111 never cancels on a reload); returns how many were hit.

        A closed tab cannot show an Extras or AppFlow result, so that work would only delay everyone else's.
        """
        return self._cancel_session_jobs(session, lambda job: not job.keep_on_disconnect)

    def _cancel_session_jobs(self, session: str, hit: Callable[[Job], bool]) -> int:
        if not session:
            return 0
        with self._condition:
            dropped = [job for job in self._waiting if job.session == session and hit(job)]
            for job in dropped:
                self._waiting.remove(job)
                job.future.cancel()
            running = self._current if self._current is not None and self._current.session == session else None
            running = running if running is not None and hit(running) else None
            if running is not None:
                running.control.interrupt()
                self._progress.interrupted = True
        return len(dropped) + (running is not None)

    # -- controlling the running job -----------------------------------------------------------
    def _runs_for(self, owner) -> bool:
        return self._current is not None and (owner is ANY_OWNER or self._current.owner == owner)

    def interrupt(self, owner=ANY_OWNER) -> bool:
        """Interrupt the running job (it returns what it has); False when nothing runs, or when `owner` is given and
        the running job is not that API user's."""
        with self._condition:
            if not self._runs_for(owner):
                return False
            self._current.control.interrupt()
            self._progress.interrupted = True
            return True

    def skip(self, owner=ANY_OWNER) -> bool:
        """End the running job's current batch; False when nothing runs (or none of `owner`'s, as `interrupt`)."""
        with self._condition:
            if not self._runs_for(owner):
                return False
            self._current.control.skip()
            self._progress.skipped = True
            return True

    def interrupt_job(self, job: Job) -> bool:
        """Drop `job` if it waits, interrupt it if it runs (it returns what it has); False once it has finished."""
        with self._condition:
            if job in self._waiting:
                self._waiting.remove(job)
                job.future.cancel()
                return True
            if self._current is not job:
                return False
            job.control.interrupt()
            self._progress.interrupted = True
            return True

    def skip_job(self, job: Job) -> bool:
        """End the running batch of `job`; False when it is not the running job (a waiting job is left alone)."""
        with self._condition:
            if self._current is not job:
                return False
            job.control.skip()
            self._progress.skipped = True
            return True

    def skip_session(self, session: str | None) -> bool:
        """End the current batch of the running job if `session` asked for it; False otherwise (nothing is touched)."""
        with self._condition:
            if not session or self._current is None or self._current.session != session:
                return False
            self._current.control.skip()
            self._progress.skipped = True
            return True

    def progress(self, owner=ANY_OWNER) -> ProgressSnapshot:
        """The running job's progress; with `owner`, another user's job shows as idle (its prompt, steps and
        preview are that user's), only the queue length stays."""
        with self._condition:
            shown = self._progress if self._current is None or self._runs_for(owner) else ProgressSnapshot()
            snapshot = ProgressSnapshot(**vars(shown))
            snapshot.queued = len(self._waiting)
        if snapshot.started_at is not None:
            snapshot.eta_seconds = estimate_eta(time.monotonic() - snapshot.started_at, snapshot.fraction)
        return snapshot

    def jobs_ahead(self, job: Job) -> int | None:
        """How many jobs run before `job` (the running one included), or None once it is no longer waiting."""
        with self._condition:
            if job not in self._waiting:
                return None
            return self._waiting.index(job) + (self._current is not None)

    def waiting_position(self, job: Job) -> tuple[int, int] | None:
        """(1-based place of `job` among the waiting jobs, how many wait), A1111's "In queue: 2/3"; None once it
        no longer waits."""
        with self._condition:
            if job not in self._waiting:
                return None
            return self._waiting.index(job) + 1, len(self._waiting)

    def is_running(self, job: Job) -> bool:
        with self._condition:
            return self._current is job

    @property
    def queued(self) -> int:
        with self._condition:
            return len(self._waiting)

    def close(self, timeout: float = 5.0) -> None:
        """Stop taking jobs, cancel waiting ones, interrupt the running one and join the thread."""
        with self._condition:
            self._closed = True
            while self._waiting:
                self._waiting.popleft().future.cancel()
            if self._current is not None:
                self._current.control.interrupt()
            self._condition.notify_all()
        self._thread.join(timeout)

    # -- the worker thread ---------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._waiting and not self._closed:
                    self._condition.wait()
                if self._closed:
                    return
                job = self._waiting.popleft()
                if not job.future.set_running_or_notify_cancel():
                    continue
                self._current = job
                job.timestamp = job_timestamp()
                self._progress = ProgressSnapshot(job=job.description, job_number=job.number, started_at=time.monotonic(),
                                                  job_timestamp=job.timestamp)
            value, failure = None, None
            try:
                value = job.function(job.control, self._on_step)
            except BaseException as error:  # the job's error belongs to its caller; the worker lives on
                failure = error
            with self._condition:  # idle before the caller hears back, so its next /progress reads idle
                self._current = None
                self._progress = ProgressSnapshot(job_timestamp=job.timestamp)  # kept while idle, as A1111's
            if failure is not None:
                job.future.set_exception(failure)
            else:
                job.future.set_result(value)
            # Not held while the worker waits for the next job: a kept UI task lets go of these (`webui.ui_tasks`)
            job = value = failure = None

    def _on_step(self, state: StepProgress) -> None:
        preview = None
        # A training job reports steps without latents: nothing to preview.
        if state.latents is not None and self.preview_every and (
                state.step % self.preview_every == 0 or state.step == state.total_steps):
            preview = state.latents.detach().to("cpu", copy=True)
        with self._condition:
            progress = self._progress
            progress.step, progress.total_steps = state.step, state.total_steps
            progress.batch_index, progress.batch_count = state.batch_index, state.batch_count
            progress.pass_index, progress.pass_count = pass_position(state)
            progress.fraction = state.fraction
            if preview is not None:
                progress.preview_latents = preview
                progress.preview_id = next(self._preview_ids)
