"""What A1111's create and train routes for embeddings and hypernetworks share: running a Create and answering its
CreateResponse, queueing a training run and answering its TrainResponse, with one mapping of errors to statuses.

422: a refused field or file (the message names it); 409: the file is being trained by a queued or running job
(`webui.training_targets`), to wait for or interrupt; 503: the queue is full; 500: a bug, in A1111's error shape.
"""

from __future__ import annotations

import logging
from typing import Callable

from fastapi import HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from webui.error_paths import server_error_response, server_path_redactor
from webui.http_guards import AUTH_USER_KEY
from webui.server_state import ServerState
from webui.training_targets import TargetBusyError
from webui.worker import QueueFullError

logger = logging.getLogger(__name__)


def refused(error: Exception) -> HTTPException:
    """409 for a file a training job holds, 422 for every other refused value."""
    from webui.api import unprocessable

    if isinstance(error, TargetBusyError):
        return HTTPException(status_code=409, detail=str(error))
    return unprocessable(error)


async def run_create_request(create: Callable, what: str, *args, **kwargs) -> dict:
    """Run `create(*args, **kwargs)` (it writes a file and returns its path) off the event loop; A1111's
    CreateResponse `{"info": "create <what> filename: <path>"}`."""
    try:
        path = await run_in_threadpool(create, *args, **kwargs)
    except (ValueError, TypeError) as error:
        raise refused(error) from None
    return {"info": f"create {what} filename: {path}"}


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
        raise refused(error) from None
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
