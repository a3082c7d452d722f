"""`/sdapi/v1/embeddings` (the textual-inversion embeddings a prompt may name on this server) and A1111's
`/sdapi/v1/create/embedding` and `/sdapi/v1/train/embedding` (see `webui.embedding_jobs`)."""

from __future__ import annotations

from fastapi import APIRouter, Body, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict

from webui.api_training_requests import run_create_request, run_training_request
from webui.embedding_list import embeddings_response
from webui.server_state import ServerState


class CreateEmbeddingRequest(BaseModel):
    """A1111's create_embedding arguments. Unlike the generation requests, an unknown key is refused (422 naming
    it): a misspelt `overwrite_old` must not silently keep or replace a file."""

    model_config = ConfigDict(extra="forbid")

    name: str
    num_vectors_per_token: int = 1
    overwrite_old: bool = False
    init_text: str = "*"


def build_embeddings_router(state: ServerState) -> APIRouter:
    from webui.embedding_jobs import create_embedding, submit_embedding_training

    router = APIRouter()

    def listing() -> dict:
        # Prompts read the folder as it is now, so the list does too (A1111 rescans it before each generation).
        state.refresh_embeddings()
        model = state.holder.loaded_model()
        return embeddings_response(state.embedding_library, model)

    @router.get("/sdapi/v1/embeddings")
    async def embeddings():
        # Reading the files hashes them once (cached by the library): keep it off the event loop.
        return await run_in_threadpool(listing)

    @router.post("/sdapi/v1/refresh-embeddings")
    async def refresh_embeddings():
        await run_in_threadpool(state.refresh_embeddings)
        return {}

    @router.post("/sdapi/v1/create/embedding")
    async def create(body: CreateEmbeddingRequest):
        arguments = body.model_dump()
        return await run_create_request(create_embedding, "embedding", state, arguments.pop("name"), **arguments)

    @router.post("/sdapi/v1/train/embedding")
    async def train(request: Request, body: dict = Body(...)):
        return await run_training_request(state, request, submit_embedding_training, body, "train embedding")

    return router

