"""A1111's `POST /sdapi/v1/interrogate`: an image's caption with CLIP-ranked terms, or its DeepBooru tags.

Model "clip" (A1111's default) answers `{"caption": "<caption>, term, term"}`, as A1111's BLIP + CLIP interrogator
does; "deepdanbooru" answers `{"caption": "tag, tag"}`, as A1111's DeepBooru (`webui.interrogation`); the Settings >
Interrogate options (over /sdapi/v1/options) apply. A server started without `--deepdanbooru-models-path` answers
"deepdanbooru" with 501 naming the flag; any other model is A1111's 404 "Model not found", and an empty image its
404 "Image not found".
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from fastapi import APIRouter, Body, HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from mixkit.errors import CheckpointFormatError
from webui.base64_images import decode_base64_image
from webui.http_guards import AUTH_USER_KEY
from webui.interrogation import DEEPBOORU_UNAVAILABLE, submit_deepbooru_interrogation, submit_interrogation
from webui.server_state import ServerState

INTERROGATORS = ("clip", "deepdanbooru")  # A1111's; any other name is its 404 "Model not found"


def interrogate_request(body: Any) -> tuple[str, str]:
    """(image, model) from A1111's InterrogateRequest ({"image": "", "model": "clip"} by default)."""
    if not isinstance(body, dict):
        raise HTTPException(status_code=422, detail="The body must be a JSON object {\"image\": ..., \"model\": ...}.")
    unknown = sorted(set(body) - {"image", "model"})
    if unknown:
        raise HTTPException(status_code=422, detail=f"Unknown field(s) {unknown}; interrogate takes 'image' and 'model'.")
    image, model = body.get("image", ""), body.get("model", "clip")
    if not isinstance(model, str) or model not in INTERROGATORS:
        raise HTTPException(status_code=404, detail="Model not found")  # A1111's answer, word for word
    if image is None or image == "":
        raise HTTPException(status_code=404, detail="Image not found")  # A1111's answer to an empty image
    return image, model


def add_interrogate_route(router: APIRouter, state: ServerState, wait_for_job: Callable[..., Awaitable[Any]]) -> None:
    """Register the route; `wait_for_job` (the API's) cancels the job if the client goes away."""
    from webui.worker import QueueFullError

    @router.post("/sdapi/v1/interrogate")
    async def interrogate(request: Request, body: Any = Body(default=None)):
        image, model = interrogate_request({} if body is None else body)
        if model == "deepdanbooru" and state.deepbooru is None:
            raise HTTPException(status_code=501, detail=DEEPBOORU_UNAVAILABLE)  # before reading the image
        submit = submit_deepbooru_interrogation if model == "deepdanbooru" else submit_interrogation
        request_limits = state.config.request_limits
        try:
            decoded = await run_in_threadpool(decode_base64_image, "image", image,
                                              max_pixels=request_limits.image_pixel_cap(state.limits),
                                              max_bytes=request_limits.max_image_bytes)
            job = submit(state, decoded, owner=request.scope.get(AUTH_USER_KEY))
        except FileNotFoundError as error:  # the DeepDanbooru file not (yet) in its folder
            raise HTTPException(status_code=503, detail=str(error)) from None
        except QueueFullError as error:
            raise HTTPException(status_code=503, detail=str(error), headers={"Retry-After": "5"}) from None
        except (ValueError, TypeError) as error:
            raise HTTPException(status_code=422, detail=str(error)) from None
        try:
            caption = await wait_for_job(job, request, state)
        except CheckpointFormatError as error:  # a broken DeepDanbooru file: the server's, not the request's fault
            raise HTTPException(status_code=503, detail=f"The interrogator could not run: {error}") from None
        except ValueError as error:  # a word list edited into an empty one since the request was checked
            raise HTTPException(status_code=422, detail=str(error)) from None
        except (OSError, RuntimeError, TypeError) as error:  # the captioner or the CLIP missing offline, no CLIP, failing
            raise HTTPException(status_code=503, detail=f"The interrogator could not run: {error}") from None
        return {"caption": caption}
