"""A1111's `POST /sdapi/v1/interrogate`: an image's caption with CLIP-ranked terms appended (`webui.interrogation`).

Model "clip" (A1111's default) answers `{"caption": "<caption>, term, term"}`, as A1111's BLIP + CLIP interrogator
does; the Settings > Interrogate options (`interrogate_*` over /sdapi/v1/options) apply. "deepdanbooru" (a tagger
this server does not have) is refused with 501 naming what to use; any other model is A1111's 404 "Model not
found", and an empty image its 404 "Image not found".
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from fastapi import APIRouter, Body, HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from webui.base64_images import decode_base64_image
from webui.http_guards import AUTH_USER_KEY
from webui.interrogation import CAPTION_APP, submit_interrogation
from webui.server_state import ServerState

INTERROGATORS = ("clip", "deepdanbooru")  # A1111's; any other name is its 404 "Model not found"
DEEPDANBOORU_REFUSED = ("The 'deepdanbooru' tagger is not available on this server; model 'clip' captions the image "
                        f"with the {CAPTION_APP} app and appends CLIP-ranked terms (POST /appflow/{CAPTION_APP} "
                        "takes the captioner's options).")


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
    if model == "deepdanbooru":
        raise HTTPException(status_code=501, detail=DEEPDANBOORU_REFUSED)
    if image is None or image == "":
        raise HTTPException(status_code=404, detail="Image not found")  # A1111's answer to an empty image
    return image, model


def add_interrogate_route(router: APIRouter, state: ServerState, wait_for_job: Callable[..., Awaitable[Any]]) -> None:
    """Register the route; `wait_for_job` (the API's) cancels the job if the client goes away."""
    from webui.worker import QueueFullError

    @router.post("/sdapi/v1/interrogate")
    async def interrogate(request: Request, body: Any = Body(default=None)):
        image, _ = interrogate_request({} if body is None else body)
        request_limits = state.config.request_limits
        try:
            decoded = await run_in_threadpool(decode_base64_image, "image", image,
                                              max_pixels=request_limits.image_pixel_cap(state.limits),
                                              max_bytes=request_limits.max_image_bytes)
            job = submit_interrogation(state, decoded, owner=request.scope.get(AUTH_USER_KEY))
        except QueueFullError as error:
            raise HTTPException(status_code=503, detail=str(error), headers={"Retry-After": "5"}) from None
        except (ValueError, TypeError) as error:
            raise HTTPException(status_code=422, detail=str(error)) from None
        try:
            caption = await wait_for_job(job, request, state)
        except ValueError as error:  # a word list edited into an empty one since the request was checked
            raise HTTPException(status_code=422, detail=str(error)) from None
        except (OSError, RuntimeError, TypeError) as error:  # the captioner or the CLIP missing offline, no CLIP, failing
            raise HTTPException(status_code=503, detail=f"The interrogator could not run: {error}") from None
        return {"caption": caption}
