"""`GET /sdapi/v1/embeddings`: the textual-inversion embeddings a prompt may name on this server."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from webui.embedding_list import embeddings_response
from webui.server_state import ServerState


def build_embeddings_router(state: ServerState) -> APIRouter:
    router = APIRouter()

    def listing() -> dict:
        # Prompts read the folder as it is now, so the list does too (A1111 rescans it before each generation).
        state.refresh_embeddings()
        model = state.holder.txt2img().model if state.holder.loaded else None
        return embeddings_response(state.embedding_library, model)

    @router.get("/sdapi/v1/embeddings")
    async def embeddings():
        # Reading the files hashes them once (cached by the library): keep it off the event loop.
        return await run_in_threadpool(listing)

    @router.post("/sdapi/v1/refresh-embeddings")
    async def refresh_embeddings():
        await run_in_threadpool(state.refresh_embeddings)
        return {}

    return router
