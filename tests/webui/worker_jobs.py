"""Worker jobs the web UI tests submit: they hold the worker busy until a test interrupts them.

Several tests need "a job that is running right now" to show what Interrupt, Skip, a closed tab or another user
does to it; a job that sleeps a fixed time would make them slow or flaky.
"""

from __future__ import annotations

import threading


class UntilInterrupted:
    """A worker job that runs until interrupted and returns "interrupted"; `started` is set once it runs.

    `skips` counts the Skip requests it took while running, so a test can tell a skip that reached it.
    """

    def __init__(self) -> None:
        self.started = threading.Event()
        self.skips: list[bool] = []

    def __call__(self, control, on_step) -> str:
        self.started.set()
        while not control.interrupted:
            if control.take_skip():
                self.skips.append(True)
            self.started.wait(0.01)
        return "interrupted"


def submit_until_interrupted(worker, kind: str = "txt2img", **submit_options):
    """Submit an `UntilInterrupted` job and wait until it runs; returns (submitted job, the job body)."""
    body = UntilInterrupted()
    submitted = worker.submit(body, kind, **submit_options)
    assert body.started.wait(10), "the worker never started the job"
    return submitted, body
