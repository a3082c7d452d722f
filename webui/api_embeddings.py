"""`/sdapi/v1/embeddings` (the textual-inversion embeddings a prompt may name on this server) and A1111's
`/sdapi/v1/create/embedding` and `/sdapi/v1/train/embedding` (see `webui.embedding_jobs`)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Body, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict

from webui.embedding_list import embeddings_response
from webui.error_paths import server_error_response, server_path_redactor
from webui.http_guards import AUTH_USER_KEY
from webui.server_state import ServerState
from webui.worker import QueueFullError

logger = logging.getLogger(__name__)


class CreateEmbeddingRequest(BaseModel):
    """A1111's create_embedding arguments. Unlike the generation requests, an unknown key is refused (422 naming
    it): a misspelt `overwrite_old` must not silently keep or replace a file."""

    model_config = ConfigDict(extra="forbid")

    name: str
    num_vectors_per_token: int = 1
    overwrite_old: bool = False
    init_text: str = "*"


def build_embeddings_router(state: ServerState) -> APIRouter:
    from webui.api import unprocessable
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
        try:
            path = await run_in_threadpool(create_embedding, state, body.name,
                                           num_vectors_per_token=body.num_vectors_per_token,
                                           init_text=body.init_text, overwrite_old=body.overwrite_old)
        except (ValueError, TypeError) as error:
            raise unprocessable(error) from None
        return {"info": f"create embedding filename: {path}"}  # A1111's CreateResponse

    @router.post("/sdapi/v1/train/embedding")
    async def train(request: Request, body: dict = Body(...)):
        return await run_training_request(state, request, submit_embedding_training, body, "train embedding")

    return router


async def run_training_request(state: ServerState, request: Request, submit, body: dict, what: str):
    """Queue a training run (`submit(state, body, owner=...)`, which checks the body) and answer A1111's
    TrainResponse when it ends; shared by the embedding and hypernetwork routes."""
    from webui.api import ClientGone, queue_full, unprocessable, wait_for_job
    from webui.request_checkpoint import CheckpointLoadError

    try:
        job = await run_in_threadpool(submit, state, body, owner=request.scope.get(AUTH_USER_KEY))
    except QueueFullError as error:
        raise queue_full(error) from None
    except (ValueError, TypeError) as error:
        raise unprocessable(error) from None
    try:
        # the trained file is the run's result: it trains to the end even if the client leaves, as A1111's
        trained = await wait_for_job(job, request, state, finish_if_gone=True)
    except (ValueError, TypeError, KeyError, FileNotFoundError, CheckpointLoadError) as error:
        raise unprocessable(error) from None  # CheckpointLoadError: an unloaded checkpoint did not load again
    except ClientGone:
        raise
    except Exception as error:  # a bug or a broken model: A1111's error shape, and the server lives on
        logger.exception("%s failed", what)
        return server_error_response(error, what, server_path_redactor(state))
    # A1111's TrainResponse, also after an Interrupt (the file then holds the steps done); A1111's hypernetwork
    # route answers "train embedding complete" too, which clients may match on.
    return {"info": f"train embedding complete: filename: {trained.filename} error: None"}
