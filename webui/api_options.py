"""`/sdapi/v1/options`: read the settings, and change them (model, VAE and performance preset changes load models).

Every key of a body is checked before anything loads. A model or preset change (one reload even
when both change) and a VAE change then run in the generation queue, each keeping the old model
or VAE if it fails; the plain settings are applied (and saved to the settings file) only after
those loads succeeded, so a failed load leaves them unchanged.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from starlette.concurrency import run_in_threadpool

from webui.api import queue_full, unprocessable, wait_for_job
from webui.interrogation import KEEP_KEY, release_unkept_interrogation_models
from webui.options import MODEL_KEY, PRESET_KEY, VAE_KEY
from webui.server_state import ServerState
from webui.worker import QueueFullError


def submit_model_changes(state: ServerState, changes: dict):
    """(queued job or None, title, preset) for the `sd_model_checkpoint` / `performance_preset` changes of an options body.

    Both reload the model, so a body that changes both is one load, not two.
    """
    from webui.options import check_preset

    title, preset = changes.get(MODEL_KEY), changes.get(PRESET_KEY)
    if preset is not None:
        check_preset(preset)
    new_title = title is not None and title != state.model_title
    new_preset = preset is not None and preset != state.preset
    if not new_title and not new_preset:
        return None, title, None
    if not new_title and state.model_title is None:
        state.submit_preset_switch(preset)  # nothing loaded: remembered for the next load
        return None, None, preset
    target = title if new_title else state.model_title
    return state.submit_model_switch(target, preset if new_preset else None), target, preset if new_preset else None


def is_json_content_type(header: str | None) -> bool:
    """True for `application/json` and `application/<anything>+json` (parameters such as charset allowed).

    The same test FastAPI applies before it parses a typed body as JSON (strict: a missing header is not JSON).
    Anything else must be refused: a web page can send a cross-origin `text/plain` POST without a CORS
    preflight, so reading such a body as JSON would let any site change (and save) this server's settings.
    """
    from email.message import Message

    if not header:
        return False
    message = Message()
    message["content-type"] = header
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def build_options_router(state: ServerState) -> APIRouter:
    router = APIRouter()

    @router.get("/sdapi/v1/options")
    async def get_options():
        return state.options_snapshot()

    @router.post("/sdapi/v1/options")
    async def set_options(request: Request):
        content_type = request.headers.get("content-type")
        if not is_json_content_type(content_type):
            # 422 as FastAPI answers a typed body (A1111's `set_config(req: dict[str, Any])`) sent so
            raise HTTPException(status_code=422, detail=f"The options body must be sent as JSON with the header "
                                                        f"'Content-Type: application/json', got {content_type!r}.")
        try:
            changes = await request.json()
        except (ValueError, RecursionError):  # RecursionError: lists or objects nested ~1,000 levels deep
            raise HTTPException(status_code=422, detail="The options body is not valid JSON (or nests too deeply); "
                                                        "send a JSON object of option names and values.") from None
        try:
            checked = state.options.check_update(changes)
            job, title, preset = submit_model_changes(state, changes)
        except QueueFullError as error:
            raise queue_full(error) from None
        except (ValueError, TypeError, KeyError) as error:
            raise unprocessable(error) from None
        if job is not None:
            try:
                await wait_for_job(job, request, state)
            except (ValueError, TypeError, OSError, RuntimeError) as error:
                what = f"checkpoint {title!r}" + (f" with performance preset {preset!r}" if preset else "")
                raise HTTPException(status_code=422, detail=f"Could not load {what}: {error}; "
                                                            f"still serving {state.model_title!r} ({state.preset}).") from None
        vae = changes.get(VAE_KEY)
        if vae is not None and vae != state.holder.vae_name:
            try:
                vae_job = state.submit_vae_switch(vae)
            except QueueFullError as error:
                raise queue_full(error) from None
            except (ValueError, TypeError, KeyError, FileNotFoundError) as error:
                raise unprocessable(error) from None
            try:
                await wait_for_job(vae_job, request, state)
            except (ValueError, TypeError, OSError, RuntimeError) as error:
                raise HTTPException(status_code=422, detail=f"Could not load VAE {vae!r}: {error}; "
                                                            f"still using {state.holder.vae_name!r}.") from None
        kept = bool(state.options.get(KEEP_KEY))
        try:
            state.options.apply(checked)
        except OSError as error:  # the settings file could not be written: nothing was changed
            raise HTTPException(status_code=500, detail=f"Could not save the settings to "
                                                        f"{state.options.settings_file!r}: {error}; nothing changed.") from None
        # keep-in-memory turned off frees the interrogation models now; off the event loop, as it waits for a
        # running interrogation to end
        await run_in_threadpool(release_unkept_interrogation_models, state, kept)
        return None

    return router
