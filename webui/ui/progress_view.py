"""The progress line a generating tab (and the Train tab) shows: a bar, then "Step 3/20, batch 1/2, ETA 4s" or the
job's place in the queue."""

from __future__ import annotations

import html

from webui.server_state import ServerState

POLL_SECONDS = 0.4


def progress_html(fraction: float, text: str) -> str:
    percent = max(0.0, min(1.0, fraction)) * 100
    return (f'<div class="mixkit-progress"><div class="mixkit-progress-bar" style="width:{percent:.1f}%"></div></div>'
            f'<div class="mixkit-progress-text">{html.escape(text)}</div>')


def status_text(state: ServerState, job) -> tuple[float, str]:
    """(fraction, "Step 3/20, batch 1/2, ETA 4s") for `job`, or its place in the queue."""
    snapshot = state.worker.progress()
    if snapshot.job_number != job.number:
        ahead = state.worker.jobs_ahead(job)  # the job itself is not counted (it used to read "1 job(s) queued")
        return 0.0, (f"Waiting in queue ({ahead} job(s) ahead)" if ahead else "Starting...")
    if not snapshot.total_steps:
        return 0.0, "Starting..."
    return snapshot.fraction, (f"Step {snapshot.step}/{snapshot.total_steps}, batch {snapshot.batch_index + 1}/"
                               f"{snapshot.batch_count}, ETA {snapshot.eta_seconds:.0f}s")


def job_status(state: ServerState, job, describe) -> tuple[float, str]:
    """(fraction, text) for a job that is not a sampling (an upscale, an AppFlow run, a training): its place in the
    queue while it waits, then `describe(snapshot)` while it runs."""
    snapshot = state.worker.progress()
    if snapshot.job_number != job.number:
        return status_text(state, job)
    return snapshot.fraction, describe(snapshot)
