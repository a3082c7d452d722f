"""A1111's `POST /sdapi/v1/unload-checkpoint` and `/sdapi/v1/reload-checkpoint`: release the model's memory, load it back.

A1111 moves the model to the CPU; on this server the CPU is where it runs, so unloading drops it (A1111 1.5's
`unload_model_weights` did the same) and the memory goes back to the system. The checkpoint stays chosen:
`/sdapi/v1/options` keeps naming it, `reload-checkpoint` loads the same weights with the same performance preset
and VAE choice, and a generation request reloads it by itself (as A1111's `process_images` does), so a client
that unloads between bursts of work need not reload explicitly.

Both run in the generation queue, so they never pull the model from under a running job, and answer `{}` (as
A1111) once done.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

from webui.api import queue_full, unprocessable, wait_for_job
from webui.server_state import ServerState
from webui.worker import QueueFullError


def build_checkpoint_memory_router(state: ServerState) -> APIRouter:
    router = APIRouter()

    @router.post("/sdapi/v1/unload-checkpoint")
    async def unload_checkpoint(request: Request):
        try:
            job = state.submit_unload()
        except QueueFullError as error:
            raise queue_full(error) from None
        await wait_for_job(job, request, state)
        return {}

    @router.post("/sdapi/v1/reload-checkpoint")
    async def reload_checkpoint(request: Request):
        try:
            job = state.submit_reload()
        except QueueFullError as error:
            raise queue_full(error) from None
        except ValueError as error:
            raise unprocessable(error) from None
        try:
            await wait_for_job(job, request, state)
        except (ValueError, TypeError, OSError, RuntimeError) as error:
            what = f"checkpoint {state.model_title!r} again" if state.model_title else "the server's first checkpoint"
            raise HTTPException(status_code=422, detail=f"Could not load {what}: {str(error).rstrip('.')}; it stays "
                                                        "unloaded.") from None
        return {}

    return router
