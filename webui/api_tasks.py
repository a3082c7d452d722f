"""A1111's `POST /internal/progress`: the progress of one task, found by the id its page (or client) made.

A1111's page polls it with the `id_task` it keeps in localStorage (`javascript/progressbar.js`,
`modules/progress.py` `progressapi`); clients written against it poll it the same way. The answer has A1111's
shape: `active` (running now), `queued`, `completed`, `progress` 0..1, `eta` seconds, `live_preview` (a data: URL,
sent only when it differs from the `id_live_preview` the caller already has) and `textinfo`.
An id this server does not know, or one of another `--auth` user's tasks, reads as A1111 answers an unknown id:
nothing active, queued or completed, "Waiting...".
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from webui.http_guards import AUTH_USER_KEY
from webui.server_state import ServerState


class ProgressRequest(BaseModel):
    """A1111's `ProgressRequest` (its fields and defaults; other keys are ignored, as there)."""

    id_task: str | None = Field(default=None, max_length=1000, description="id of the task to get progress for")
    id_live_preview: int = Field(default=-1, description="id of the last live preview received")
    live_preview: bool = Field(default=True, description="whether to include the live preview image")


class ProgressResponse(BaseModel):
    """A1111's `ProgressResponse`."""

    active: bool
    queued: bool
    completed: bool
    progress: float | None = None
    eta: float | None = None
    live_preview: str | None = None
    id_live_preview: int | None = None
    textinfo: str | None = None


def task_progress(state: ServerState, request: ProgressRequest, owner: str | None) -> ProgressResponse:
    """What `/internal/progress` answers for `request` from `owner` (the --auth user, None without auth)."""
    task = state.tasks.find(request.id_task, owner)
    if task is None:
        return ProgressResponse(active=False, queued=False, completed=False, id_live_preview=-1, textinfo="Waiting...")
    if task.done.is_set():
        ended = "Interrupted" if task.cancelled or (task.result and task.result.interrupted) else (
            "Failed" if task.failure is not None else "Done")
        return ProgressResponse(active=False, queued=False, completed=True, progress=1.0, eta=0.0,
                                id_live_preview=request.id_live_preview, textinfo=ended)
    position = state.worker.waiting_position(task.job)
    if position is not None:
        return ProgressResponse(active=False, queued=True, completed=False, id_live_preview=-1,
                                textinfo=f"In queue: {position[0]}/{position[1]}")
    snapshot = state.worker.progress()
    if snapshot.job_number != task.job.number:  # taken from the queue, its first step not yet reported
        return ProgressResponse(active=True, queued=False, completed=False, progress=0.0,
                                id_live_preview=request.id_live_preview, textinfo="Starting...")
    fraction = min(1.0, snapshot.fraction)
    response = ProgressResponse(
        active=True, queued=False, completed=False, progress=fraction,
        # A1111: the time so far scaled by what is left; unknown (null) before the first step
        eta=snapshot.eta_seconds if fraction > 0 else None, id_live_preview=request.id_live_preview,
        textinfo=(f"Step {snapshot.step}/{snapshot.total_steps}, batch {snapshot.batch_index + 1}/"
                  f"{max(1, snapshot.batch_count)}" if snapshot.total_steps else "Starting..."))
    if (request.live_preview and state.options.get("live_previews_enable") and snapshot.preview_id
            and snapshot.preview_id != request.id_live_preview):
        image = state.current_preview()
        if image is not None:
            from webui.base64_images import encode_png_base64

            response.live_preview = "data:image/png;base64," + encode_png_base64(image)
            response.id_live_preview = snapshot.preview_id
    return response


def build_tasks_router(state: ServerState) -> APIRouter:
    router = APIRouter()

    @router.post("/internal/progress", response_model=ProgressResponse)
    async def internal_progress(body: ProgressRequest, request: Request):
        # A preview is decoded from latents: off the event loop
        return await run_in_threadpool(task_progress, state, body, request.scope.get(AUTH_USER_KEY))

    return router
