"""Task ids for UI jobs, so a reloaded page (or a second tab of the same browser) reattaches to its job.

A1111 (1.6+) keeps the `id_task` of a Generate in the browser's localStorage and asks for it again when the page
loads (`modules/progress.py`: its pending, current and finished tasks, and the last results it records for
`restore_progress`). Here the page makes an unguessable id per Generate (and per Upscale, AppFlow Run and Train) and
this registry maps it to the worker job. The job's UI result (gallery files, grid, saved upscales, the training log)
is finished when the job ends, whether or not a page still watches, and kept for a while, so a page that was away
while it finished is still shown it.

A task is found only by its id and only for the `--auth` user who started it: ids are never listed, so a page (or an
`/internal/progress` caller) cannot learn another browser's task.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import secrets
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from webui.worker import GenerationWorker, Job

logger = logging.getLogger("webui.ui")

# A1111's page sends "task(" + 15 random letters + ")"; this page sends 32 random hex digits in the same wrapper
# (`webui.ui.reattach.submit_js`). Any id of these characters is taken, so an API client's `force_task_id` works too.
TASK_ID_PATTERN = re.compile(r"[A-Za-z0-9_\-().:]{8,128}")
# Finished results kept for a page that comes back: A1111 keeps 2 (one user), a shared server keeps more.
KEEP_FINISHED = 32
# An unsaved result's gallery files live 6 hours in Gradio's cache (`webui.ui.gallery_files.KEEP_UNSAVED_SECONDS`);
# a result kept longer would point at files already removed.
KEEP_FINISHED_SECONDS = 6 * 3600


@dataclass
class TaskResult:
    """What a page shows once the job ended: gallery files in order (a grid first), their seeds and infotexts."""

    paths: list[str]
    seeds: list
    infotexts: list[str]
    image_count: int  # the generated images, the grid not counted
    interrupted: bool


# What a failed task's message calls its job, by kind ("Generation failed: ...").
FAILURE_LABELS = {"extras": "Upscale", "appflow": "AppFlow run", "train": "Training",
                  "modelmerger": "Checkpoint merge"}


@dataclass
class UiTask:
    """One UI job: its job, whose it is, and once it ended, its result (or why there is none)."""

    task_id: str
    # the tab that shows it: "txt2img", "img2img", "extras", "appflow", "train", "modelmerger"; "api" for a
    # request's `force_task_id`
    kind: str
    job: Job
    owner: str | None  # the --auth user of the page that started it (None without auth)
    submitted_at: float
    result: Any = None  # what `finish` made of the job's return value: a TaskResult for txt2img/img2img
    failure: BaseException | None = None  # the job's error, or the error finishing its gallery files
    cancelled: bool = False  # dropped from the queue before it ran (Interrupt while it waited)
    finished_at: float | None = None
    done: threading.Event = field(default_factory=threading.Event)
    label: str | None = None  # what a failure message calls the job (an AppFlow app's name); else by kind

    @property
    def failure_label(self) -> str:
        """What a failure message calls this task's job: "Generation", "Upscale", "Training", an app's name."""
        return self.label or FAILURE_LABELS.get(self.kind, "Generation")

    @property
    def seconds(self) -> float:
        """How long it took from Generate to its result (as the page's "Done: … in 3.2s" counts)."""
        return (self.finished_at or time.monotonic()) - self.submitted_at


def check_task_id(task_id, *, field: str = "task id", remedy: str = "reload the page to get a new one") -> str:
    """`task_id` as a page or client may send it; ValueError naming `field`, the value and the allowed form
    otherwise."""
    if not isinstance(task_id, str) or not TASK_ID_PATTERN.fullmatch(task_id):
        shown = repr(task_id) if not isinstance(task_id, str) or len(task_id) <= 140 else repr(task_id[:140]) + "…"
        raise ValueError(f"{field} must be 8 to 128 characters of letters, digits and _-().: (as \"task(…)\"), "
                         f"got {shown}; {remedy}.")
    return task_id


def new_task_id() -> str:
    """A fresh unguessable id in A1111's "task(…)" form, for a caller that sent none."""
    return f"task({secrets.token_urlsafe(16)})"


def released(job: Job) -> Job:
    """A finished `job` without its function (whose closure holds the request's images) and its outcome (the
    images made): a finished task is kept for hours, and needs only its TaskResult then."""
    future = concurrent.futures.Future()
    future.set_result(None)
    return replace(job, function=None, future=future)


class UiTasks:
    """The registry of UI tasks, shared by every page and `/internal/progress`; thread-safe.

    `finish(outcome)` turns a job's return value into what the tab shows (a TaskResult for a gallery); it runs once,
    on the thread that completes the job, so a grid is saved and the gallery files are written even when no page
    watches."""

    def __init__(self, worker: GenerationWorker, *, keep_finished: int = KEEP_FINISHED,
                 keep_seconds: float = KEEP_FINISHED_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(keep_finished, bool) or not isinstance(keep_finished, int) or keep_finished < 1:
            raise ValueError(f"keep_finished must be a positive integer, got {keep_finished!r}.")
        if not keep_seconds > 0:
            raise ValueError(f"keep_seconds must be positive, got {keep_seconds!r}.")
        self.worker = worker
        self.keep_finished = keep_finished
        self.keep_seconds = keep_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._tasks: dict[str, UiTask] = {}  # insertion order: the oldest task first

    def register(self, task_id: str, kind: str, job: Job, owner: str | None,
                 finish: Callable[[Any], Any], *, label: str | None = None) -> UiTask:
        """Record `job` under `task_id` (checked; an id already in use is refused, so no page can take over
        another's task by sending its id with a Generate); `label`: what its failure message calls it."""
        check_task_id(task_id)
        task = UiTask(task_id, kind, job, owner, self._clock(), label=label)
        with self._lock:
            self._prune()
            if task_id in self._tasks:
                raise ValueError(f"task id {task_id!r} is already in use; reload the page to get a new one.")
            self._tasks[task_id] = task
        job.future.add_done_callback(lambda future: self._finished(task, future, finish))
        return task

    def find(self, task_id, owner: str | None) -> UiTask | None:
        """The task `task_id` names, if it is `owner`'s and still kept; None for an unknown, expired, malformed or
        another user's id (the same answer, so a caller cannot tell another user's task from no task)."""
        if not isinstance(task_id, str):
            return None
        with self._lock:
            self._prune()
            task = self._tasks.get(task_id)
        return task if task is not None and task.owner == owner else None

    def interrupt(self, task_id, owner: str | None) -> bool:
        """Interrupt (or drop, while it waits) the job of `owner`'s task `task_id`; False when there is none left."""
        task = self.find(task_id, owner)
        return task is not None and self.worker.interrupt_job(task.job)

    def skip(self, task_id, owner: str | None) -> bool:
        """End the running batch of `owner`'s task `task_id`; False when it is not running."""
        task = self.find(task_id, owner)
        return task is not None and self.worker.skip_job(task.job)

    def in_use(self, task_id) -> bool:
        """Whether `task_id` names a kept task (anyone's): a new Generate must bring an id of its own."""
        with self._lock:
            return task_id in self._tasks

    def __len__(self) -> int:
        with self._lock:
            return len(self._tasks)

    def _finished(self, task: UiTask, future, finish: Callable[[Any], Any]) -> None:
        try:
            if future.cancelled():
                task.cancelled = True
            elif future.exception() is not None:
                task.failure = future.exception()
            else:
                task.result = finish(future.result())
        except Exception as error:  # writing the gallery files failed: the page shows it as the job's failure
            task.failure = error
        if task.failure is not None:  # logged here, once, whether or not a page follows the task
            logger.error("UI job failed: %s failed: %s", task.failure_label, task.failure, exc_info=task.failure)
            task.failure = task.failure.with_traceback(None)  # its frames hold the request's images
        task.job = released(task.job)
        task.finished_at = self._clock()
        task.done.set()
        with self._lock:
            self._prune()

    def _prune(self) -> None:
        """Forget finished tasks older than `keep_seconds` and beyond the newest `keep_finished` (called locked).
        Queued and running tasks are always kept."""
        now = self._clock()
        finished = [task for task in self._tasks.values() if task.done.is_set()]
        finished.sort(key=lambda task: task.finished_at)
        excess = len(finished) - self.keep_finished
        for index, task in enumerate(finished):
            if index < excess or now - task.finished_at > self.keep_seconds:
                del self._tasks[task.task_id]
