"""The A1111-compatible HTTP API (`/sdapi/v1/...`) plus `/appflow/{app}`.

Every request is validated completely before it is queued (see `webui.api_convert`); invalid
input gets 422 with a message naming the field and the allowed range, a full queue gets 503
with `Retry-After`. A client that disconnects has its queued job dropped or its running job interrupted, so the
queue moves on, unless the job writes to the output folder (a generation with `save_images` and saving on): that one
runs to completion and saves, as A1111's does (it never notices a client leaving), since its files are its result.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any, Callable

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from webui.api_controlnet_routes import add_controlnet_routes
from webui.api_convert import to_img2img_params, to_txt2img_params
from webui.api_scripts import (MK2_SCRIPT, OUTPAINT_SCRIPT, is_mk2_script, is_outpaint_script, mk2_script_params,
                                outpaint_script_params)
from webui.api_selectable_scripts import request_script, script_response_info
from webui.api_response import generation_info, info_json, request_parameters
from webui.api_extras import (
    check_extras_request, crop_to, crops_to_size, encode_png_with_chunks, extras_faces, extras_postprocess,
    plaintext_to_html,
    request_postprocessing_text, source_text_chunks, upscale_factor, upscales,
)
from webui.api_infotext import apply_infotext
from webui.api_interrogate import add_interrogate_route
from webui.api_requests import (
    AppflowRequest, ExtrasBatchImagesRequest, ExtrasSingleImageRequest, Img2ImgRequest, PngInfoRequest, Txt2ImgRequest,
)
from webui.base64_images import decode_base64_image, decode_base64_png_info, encode_png_base64
from webui.error_paths import server_error_response, server_path_redactor
from webui.http_guards import AUTH_USER_KEY, error_body
from webui.refiner_config_folders import named_as_picked
from webui.request_checkpoint import CheckpointLoadError
from webui.result_grid import api_result_grid
from webui.server_state import ServerState
from webui.unexpected_errors import UnexpectedErrorMiddleware
from webui.worker import ANY_OWNER, Job, QueueFullError

logger = logging.getLogger(__name__)

DISCONNECT_POLL_SECONDS = 0.25


class ClientGone(Exception):
    """The client closed the connection while its job waited or ran."""


def unprocessable(error: Exception, in_request_terms: Callable[[str], str] = lambda message: message
                  ) -> HTTPException:
    """A 422 with `error`'s message (a KeyError's without its quotes), passed through `in_request_terms` (a request's
    own names for what the checks got as server paths)."""
    message = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
    return HTTPException(status_code=422, detail=in_request_terms(message))


def queue_full(error: QueueFullError) -> HTTPException:
    return HTTPException(status_code=503, detail=str(error), headers={"Retry-After": "5"})


async def wait_for_job(job: Job, request: Request, state: ServerState, *, finish_if_gone: bool = False):
    """The job's result; cancels (queued) or interrupts (running) it if the client goes away, or with
    `finish_if_gone` (a job that saves its files) waits for it to the end (ClientGone is then the caller's to raise
    once it has done its own saving; `client_left` tells)."""
    future = asyncio.wrap_future(job.future)
    while True:
        done, _ = await asyncio.wait({future}, timeout=DISCONNECT_POLL_SECONDS)
        if done:
            return future.result()
        if await request.is_disconnected():
            break
    if not finish_if_gone:
        state.worker.cancel(job)
        raise ClientGone()
    logger.info("%s: the client closed the connection; the job runs on, as it saves its results to %s",
                job.description, state.output_dir)
    return await future


async def client_left(request: Request) -> bool:
    """Whether the client has closed the connection (then nobody reads the answer: it need not be encoded)."""
    return await request.is_disconnected()


def check_free_task_id(state: ServerState, task_id: str) -> None:
    """A request's `force_task_id`: well formed, and no other task's (which `/internal/progress` would then mix up)."""
    from webui.ui_tasks import check_task_id

    check_task_id(task_id, field="force_task_id", remedy="send a new id per request, e.g. task(<22 random letters>)")
    if state.tasks.in_use(task_id):
        raise ValueError(f"force_task_id {task_id!r} is already in use; send a new id per request.")


def follow_by_task_id(state: ServerState, task_id: str, job, owner: str | None) -> None:
    """Register the queued `job` under `task_id` (API results stay in the response: none is kept for a page)."""
    try:
        state.tasks.register(task_id, "api", job, owner, lambda outcome: None)
    except ValueError:  # taken since the check by a concurrent request: this job must not run unfollowed
        state.worker.interrupt_job(job)
        raise


def kept_overrides(body: Txt2ImgRequest, state: ServerState) -> dict:
    """The checked option changes of `override_settings` when `override_settings_restore_afterwards` is false:
    A1111 then leaves them set after the job. The checkpoint key is the job's (`webui.request_checkpoint`)."""
    if body.override_settings_restore_afterwards or not body.override_settings:
        return {}
    changes = {key: value for key, value in body.override_settings.items() if key != "sd_model_checkpoint"}
    return state.options.check_update(changes)


def save_option(body: Txt2ImgRequest, state: ServerState, key: str) -> bool:
    """A saving setting (samples_save, return_grid, grid_save, enable_pnginfo, save_txt) for this request: its
    override_settings value (checked by `to_txt2img_params`), else the server's, as A1111 applies override_settings
    for the job."""
    return bool((body.override_settings or {}).get(key, state.options.get(key)))


def infotext_writing(body: Txt2ImgRequest, state: ServerState):
    """Where this request's images carry their infotext: enable_pnginfo (the saved and the returned PNGs' `parameters`
    chunk; the response's `info` keeps the infotexts either way, as A1111's) and save_txt (a `.txt` beside each saved
    image and grid)."""
    from pipelines.png import InfotextWriting

    return InfotextWriting(pnginfo=save_option(body, state, "enable_pnginfo"), txt=save_option(body, state, "save_txt"))


def writes_outputs(body: Txt2ImgRequest, state: ServerState, save: bool) -> bool:
    """Whether the request's job leaves files in the output folder (its images, or its grid with grid_save): such a
    job runs to the end even if the client leaves, as A1111's does, since the files are what it was for. Any other
    job's result exists only in the answer, so a client that left has it dropped and the queue moves on."""
    return save or (bool(body.save_images) and save_option(body, state, "grid_save"))


async def _generate(kind: str, params, body: Txt2ImgRequest, request: Request, state: ServerState,
                    outpaint_sides: dict[str, int] | None = None, mk2: dict[str, float] | None = None,
                    script: tuple | None = None):
    """Queue the job, wait for it, answer as A1111; `outpaint_sides`: an outpainting script's extension
    (webui.api_scripts), run as the server's outpaint job; `mk2`: Outpainting mk2's fill settings (None: Poor man's);
    `script`: a registered selectable script and its checked config (webui.api_selectable_scripts), which makes its
    own grids (saved with save_images and grid_save, as A1111's xyz_grid-NNNN.png)."""
    save = bool(body.save_images) and not body.do_not_save_samples and save_option(body, state, "samples_save")
    writing = infotext_writing(body, state)
    owner = request.scope.get(AUTH_USER_KEY)

    def as_requested(message: str) -> str:  # a script cell's check quotes the config folder's path: the request's name
        return named_as_picked(message, getattr(params, "refiner_config_dir", None),
                               getattr(body, "refiner_config_dir", None))
    try:
        kept = kept_overrides(body, state)
        if body.force_task_id is not None:
            check_free_task_id(state, body.force_task_id)
        where = {"save": save, "owner": owner, "writing": writing,
                 "checkpoint": (body.override_settings or {}).get("sd_model_checkpoint"),
                 "restore_checkpoint": body.override_settings_restore_afterwards}
        if script is not None:
            job = state.submit_script(kind, params, *script, **where, grid_save=bool(body.save_images) and save_option(
                body, state, "grid_save"), override_settings=body.override_settings)
        elif outpaint_sides is None:
            job = state.submit_generation(kind, params, **where)
        else:
            job = state.submit_outpaint(params, outpaint_sides, mk2=mk2, **where)
        if body.force_task_id is not None:  # A1111's add_task_to_queue: `/internal/progress` follows it by this id
            follow_by_task_id(state, body.force_task_id, job, owner)
    except QueueFullError as error:
        raise queue_full(error) from None
    except (ValueError, TypeError) as error:
        raise unprocessable(error, as_requested) from None
    if kept:
        try:
            state.options.apply(kept)  # as A1111: set when the job starts, kept even if it then fails
        except OSError as error:  # in effect; only saving them for the next start failed
            logger.warning("override_settings %s are set but could not be saved: %s", sorted(kept), error)
    try:
        outcome = await wait_for_job(job, request, state, finish_if_gone=writes_outputs(body, state, save))
    except (ValueError, TypeError, KeyError, FileNotFoundError, CheckpointLoadError) as error:
        raise unprocessable(error, as_requested) from None  # e.g. a LoRA that does not fit the model, a checkpoint
        # that did not load, a refiner file its configs do not describe (`webui.refiner_config_folders`)
    except RuntimeError as error:
        raise HTTPException(status_code=503, detail=str(error)) from None
    except ClientGone:
        raise  # not a failure: the client left, its job was cancelled (see install_error_handlers)
    except Exception as error:  # a bug or a broken model: A1111's error shape, and the server lives on
        logger.exception("%s failed", kind)
        return server_error_response(error, kind, server_path_redactor(state))
    result = outcome.result

    def grid():
        # A1111's API makes a grid only when asked to save (`do_not_save_grid = not save_images`); a script's grids
        # are its own, already first among its images
        if not body.save_images or script is not None:
            return None
        return api_result_grid(result.images, result.infotexts, return_grid=save_option(body, state, "return_grid"),
                               save_to=state.output_dir if save_option(body, state, "grid_save") else None,
                               writing=writing)

    grid_image = await run_in_threadpool(grid)
    if await client_left(request):  # its images and grid are saved; nobody reads the answer
        raise ClientGone()
    pairs = list(zip(result.images, result.infotexts))
    if grid_image is not None:  # first, with the first image's infotext, as A1111's process_images
        pairs.insert(0, (grid_image, result.infotexts[0] if result.infotexts else ""))

    def encode() -> list[str]:
        if not body.send_images:
            return []
        return [encode_png_base64(image, writing.chunk(text)) for image, text in pairs]

    images = await run_in_threadpool(encode)
    # A1111's sd_model_name is the checkpoint's name_for_extra (the infotext's "Model"), not its title: the one the
    # job ran on, which a request's own checkpoint may have replaced again since.
    info = generation_info(params, result, model_name=outcome.model_name,
                           model_hash=outcome.model_hash, job_timestamp=job.timestamp, vae_name=outcome.vae_name,
                           vae_hash=outcome.vae_hash, styles=list(body.styles or []), with_grid=grid_image is not None)
    info = script_response_info(info, result)
    return {"images": images, "parameters": request_parameters(body), "info": info_json(info)}


def build_api(state: ServerState) -> APIRouter:
    router = APIRouter()
    limits, request_limits = state.limits, state.config.request_limits

    def validation_context(body, request: Request) -> dict:
        prompts = (body.prompt,)  # a tag naming a new file rescans the LoRA folder (negative tags are text)
        return {"limits": limits, "lora_names": state.lora_names(prompts), "controlnet_models": state.controlnets,
                "default_clip_skip": state.options.get("CLIP_stop_at_last_layers"),
                "current_vae_names": state.vae_names(),
                "defaults": state.generation_defaults(),
                "uncond_skip_options": state.options.uncond_skip(), "sampler_options": state.options.sampler_options(),
                "prompt_options": state.options.prompt_options(), "styles": state.styles(),
                "refiner_catalog": state.catalog, "infotext_options": state.options.infotext_settings(),
                "user": request.scope.get(AUTH_USER_KEY),  # the --auth user: the infotext's `User`, when asked for
                "model_device": state.holder.model_device()}  # RNG source GPU is refused off the CPU, before queueing

    @router.post("/sdapi/v1/txt2img")
    async def txt2img(body: Txt2ImgRequest, request: Request):
        try:
            # before anything reads the prompt: it may come from the infotext. In a worker thread, as every step that
            # grows with the request: a body may hold megabytes of infotext, and the event loop serves everyone.
            body = await run_in_threadpool(apply_infotext, body, state.lora_library, state.running_labels())
            params = await run_in_threadpool(to_txt2img_params, body, request_limits=request_limits,
                                             **validation_context(body, request))
            script = await run_in_threadpool(request_script, state, "txt2img", body.script_name, body.script_args,
                                             params, body.override_settings)
        except (ValueError, TypeError, KeyError) as error:
            raise unprocessable(error) from None
        return await _generate("txt2img", params, body, request, state, script=script)

    @router.post("/sdapi/v1/img2img")
    async def img2img(body: Img2ImgRequest, request: Request):
        try:
            body = await run_in_threadpool(apply_infotext, body, state.lora_library, state.running_labels())
            params = await run_in_threadpool(to_img2img_params, body, request_limits=request_limits,
                                             **validation_context(body, request))
            sides = mk2 = None
            script = await run_in_threadpool(request_script, state, "img2img", body.script_name, body.script_args,
                                             params, body.override_settings)
            if is_outpaint_script(body.script_name):
                params, sides = outpaint_script_params(params, body.script_args)
            elif is_mk2_script(body.script_name):
                params, sides, mk2 = mk2_script_params(params, body.script_args)
        except (ValueError, TypeError, KeyError) as error:
            raise unprocessable(error) from None
        return await _generate("img2img", params, body, request, state, sides, mk2, script=script)

    add_controlnet_routes(router, state)
    add_interrogate_route(router, state, wait_for_job)

    @router.get("/appflow")
    async def appflow_apps():
        from appflow import APPS

        return [state.describe_app(name) for name in APPS.names()]

    @router.post("/appflow/{app}")
    async def appflow_run(app: str, body: AppflowRequest, request: Request):
        from appflow.apps import check_app_option_values
        from webui.appflow_io import check_app_options, decode_app_inputs, encode_app_outputs

        try:
            description = state.describe_app(app)
            inputs = await run_in_threadpool(decode_app_inputs, description, body.inputs, max_pixels=request_limits.image_pixel_cap(limits),
                                             max_bytes=request_limits.max_image_bytes, max_chars=limits.max_prompt_chars,
                                             max_items=limits.max_batch_size)
            options = check_app_options(body.options, limits, state.lora_names())
            # the app's own checks, also against this server's models: a bad value is a 422, not a failed job
            check_app_option_values(app, options, {role: m["source"] for role, m in description["models"].items()})
            job = state.submit_app(app, inputs, options, owner=request.scope.get(AUTH_USER_KEY))
        except QueueFullError as error:
            raise queue_full(error) from None
        except (ValueError, TypeError, KeyError) as error:
            raise unprocessable(error) from None
        try:
            outputs = await wait_for_job(job, request, state)
        except (ValueError, TypeError, KeyError) as error:
            raise unprocessable(error) from None
        except (OSError, RuntimeError) as error:  # a model missing offline, a task that failed
            raise HTTPException(status_code=503, detail=f"App {app!r} could not run: {error}") from None
        # `interrupted`: Interrupt stopped the run; `outputs` then holds what its finished steps made (200, as an
        # interrupted txt2img answers with the images it has)
        return {"app": app, "outputs": await run_in_threadpool(encode_app_outputs, outputs),
                "interrupted": bool(getattr(outputs, "interrupted", False))}

    def controlled_owner(request: Request):
        """Whose running job a caller may see and stop: its own as an --auth user (another user's job, or a UI job,
        is left alone and shows as idle); anything's on a server without auth, as A1111's one-user API."""
        return ANY_OWNER if state.config.auth is None else request.scope.get(AUTH_USER_KEY)

    @router.get("/sdapi/v1/progress")
    async def progress(request: Request, skip_current_image: bool = False):
        owner = controlled_owner(request)
        snapshot = state.worker.progress(owner)
        current_image = None
        if not skip_current_image and snapshot.preview_latents is not None:
            preview = await run_in_threadpool(state.current_preview, owner)
            current_image = encode_png_base64(preview) if preview is not None else None
        textinfo = "Waiting..." if not snapshot.busy else (
            f"Step {snapshot.step}/{snapshot.total_steps}, batch {snapshot.batch_index + 1}/{max(1, snapshot.batch_count)}")
        return {
            "progress": round(snapshot.fraction, 4), "eta_relative": round(snapshot.eta_seconds, 2),
            "state": {"skipped": snapshot.skipped, "interrupted": snapshot.interrupted, "stopping_generation": False,
                      # A1111's state.job_no / job_count: the batch (with hires fix, the pass) within the job
                      "job": snapshot.job, "job_count": snapshot.pass_count,
                      "job_timestamp": snapshot.job_timestamp, "job_no": snapshot.pass_index,
                      "sampling_step": snapshot.step, "sampling_steps": snapshot.total_steps},
            "current_image": current_image, "textinfo": textinfo, "current_task": snapshot.job or None,
            "queued": snapshot.queued,
        }

    @router.post("/sdapi/v1/interrupt")
    async def interrupt(request: Request):
        # A1111 answers 200 even when nothing runs; `interrupted` says whether something was.
        return {"interrupted": state.worker.interrupt(controlled_owner(request))}

    @router.post("/sdapi/v1/skip")
    async def skip(request: Request):
        return {"skipped": state.worker.skip(controlled_owner(request))}

    @router.get("/sdapi/v1/samplers")
    async def samplers():
        from pipelines.samplers import list_samplers

        return list_samplers()

    @router.get("/sdapi/v1/schedulers")
    async def schedulers():
        from pipelines.samplers.schedule_types import SCHEDULE_TYPES

        return [{"name": schedule.internal_name, "label": schedule.name, "aliases": list(schedule.aliases) or None,
                 "default_rho": schedule.default_rho, "need_inner_model": schedule.need_inner_model}
                for _, schedule in SCHEDULE_TYPES.items()]

    @router.get("/sdapi/v1/scripts")
    async def scripts():
        # Clients (webuiapi) probe this for extensions; none are installed. A1111 lists its scripts' titles
        # lower-cased: the registered selectable ones (pipelines.scripts), the two outpainting ones
        # (webui.api_scripts) and always-on Soft inpainting.
        from pipelines.scripts import SCRIPTS
        from webui.api_soft_inpainting import SOFT_INPAINTING_SCRIPT

        registered = {kind: [script.name for _, script in SCRIPTS.items() if kind in script.kinds]
                      for kind in ("txt2img", "img2img")}
        return {"txt2img": sorted(registered["txt2img"]),
                "img2img": sorted([*registered["img2img"], MK2_SCRIPT, OUTPAINT_SCRIPT, SOFT_INPAINTING_SCRIPT])}

    from webui.refiner_config_folders import CONFIG_FOLDERS_ROUTE, config_folder_listing

    @router.get("/sdapi/v1/sd-models")
    async def sd_models():
        return [entry.as_a1111() for entry in state.catalog.entries()]

    @router.get(CONFIG_FOLDERS_ROUTE)
    async def refiner_config_folders():
        return config_folder_listing(state.catalog)

    @router.post("/sdapi/v1/refresh-checkpoints")
    async def refresh_checkpoints():
        await run_in_threadpool(state.catalog.refresh)
        return {}

    async def extras_one(body, data: str, field: str, request: Request) -> tuple[str, str]:
        """One Extras image: (base64 PNG with the source's text chunks plus `postprocessing`, that text)."""
        try:
            image = await run_in_threadpool(decode_base64_image, field, data, max_pixels=request_limits.image_pixel_cap(limits),
                                            max_bytes=request_limits.max_image_bytes)
            chunks = await run_in_threadpool(source_text_chunks, data, max_pixels=request_limits.image_pixel_cap(limits),
                                             max_bytes=request_limits.max_image_bytes)
            factor = upscale_factor(body, image.width, image.height)
            # A1111's order: upscale (and crop), then GFPGAN, then CodeFormer, in one job
            after = extras_postprocess(body, extras_faces(body), unload=state.options.get("face_restoration_unload"))
            if upscales(body):
                job = state.submit_upscale(image, factor, body.upscaler_1, after=after)
            else:
                job = None if after is None else state.submit_postprocess(image, after)
        except QueueFullError as error:
            raise queue_full(error) from None
        except (ValueError, TypeError, KeyError) as error:
            raise unprocessable(error) from None
        # A1111 sets the result's PNG info only with enable_pnginfo on: off, the PNG carries no text chunk
        pnginfo = bool(state.options.get("enable_pnginfo"))
        if job is None:
            return await run_in_threadpool(encode_png_with_chunks, image,
                                           {**chunks, "postprocessing": ""} if pnginfo else {}), ""
        try:
            image = await wait_for_job(job, request, state)
        except (ValueError, TypeError, KeyError, FileNotFoundError) as error:
            raise unprocessable(error) from None  # e.g. a restorer or upscaler file that does not load (as txt2img)
        except RuntimeError as error:
            raise HTTPException(status_code=503, detail=str(error)) from None
        if crops_to_size(body) and upscales(body):
            image = crop_to(image, body.upscaling_resize_w, body.upscaling_resize_h)
        text = request_postprocessing_text(body)
        return await run_in_threadpool(encode_png_with_chunks, image,
                                       {**chunks, "postprocessing": text} if pnginfo else {}), text

    def checked_extras(body) -> None:
        try:
            check_extras_request(body)
        except ValueError as error:
            raise unprocessable(error) from None

    @router.post("/sdapi/v1/extra-single-image")
    async def extra_single_image(body: ExtrasSingleImageRequest, request: Request):
        checked_extras(body)
        encoded, text = await extras_one(body, body.image, "image", request)
        return {"html_info": plaintext_to_html(text), "image": encoded}

    @router.post("/sdapi/v1/extra-batch-images")
    async def extra_batch_images(body: ExtrasBatchImagesRequest, request: Request):
        checked_extras(body)
        results = [await extras_one(body, item.data, f"imageList[{index}].data", request)
                   for index, item in enumerate(body.imageList)]
        # A1111's run_extras answers with the postprocessing text of the last image.
        return {"html_info": plaintext_to_html(results[-1][1] if results else ""), "images": [r[0] for r in results]}

    @router.get("/sdapi/v1/upscalers")
    async def upscalers():
        from pipelines.model_upscale_listing import listed_upscaler_names, upscaler_listing

        # A1111 lists "None" (no upscaling) first; model files carry their architecture, path and native scale, and a
        # DAT release file is listed under its stem too ("DAT x4", "DAT_x4"), as there
        return [upscaler_listing(name)
                for name in listed_upscaler_names(dat_enabled=state.options.get("dat_enabled_models"))]

    @router.post("/sdapi/v1/png-info")
    async def png_info(body: PngInfoRequest):
        try:
            # no pixel cap: only the text chunks are read (A1111 reads png-info of any image PIL opens)
            read = await run_in_threadpool(decode_base64_png_info, "image", body.image,
                                           max_bytes=request_limits.max_image_bytes)
        except (ValueError, TypeError) as error:
            raise unprocessable(error) from None
        from pipelines.infotext import parse_infotext

        text = read["infotext"] or ""
        parameters = await run_in_threadpool(parse_infotext, text) if text else {}
        return {"info": text, "items": {k: v for k, v in read["items"].items() if k != "parameters"},
                "parameters": parameters}

    from webui.api_listings import build_listings_router

    router.include_router(build_listings_router(state))
    return router


ECHO_DEPTH = 8  # levels of a refused value a validation error echoes back; deeper ones are cut (see clipped_input)
ECHO_CHARS = 200  # characters of a refused string echoed back (a base64 image, a prompt)
ECHO_ITEMS = 50  # items of a refused list or object echoed back
MESSAGE_CHARS = 1000  # characters of a validator's message (its own text, which may quote the value)


def clipped_input(value, depth: int = ECHO_DEPTH):
    """A refused request value as FastAPI's validation error echoes it, cut to what says what was sent: containers
    deeper than `depth` levels become "...", strings keep their first ECHO_CHARS characters, lists and objects their
    first ECHO_ITEMS items, each cut saying how much there was.

    json.loads takes about 990 nested lists, so `{"steps": [[[...]]]}` is valid JSON; echoed whole, walking it back
    (jsonable_encoder, json_safe, the JSON encoder) ran out of Python's recursion limit and the client got a 500
    instead of the 422. And a missing or mistyped field echoes the whole request object, whose base64 images and
    prompts ran to megabytes in the error body (and in any client log printing it).
    """
    if isinstance(value, str):
        return clipped_text(value, ECHO_CHARS)
    if isinstance(value, dict):
        if depth <= 0:
            return "..."
        items = list(value.items())
        clipped = {key: clipped_input(item, depth - 1) for key, item in items[:ECHO_ITEMS]}
        if len(items) > ECHO_ITEMS:
            clipped["..."] = f"{len(items) - ECHO_ITEMS} more keys not shown"
        return clipped
    if isinstance(value, (list, tuple)):
        if depth <= 0:
            return "..."
        clipped = [clipped_input(item, depth - 1) for item in value[:ECHO_ITEMS]]
        if len(value) > ECHO_ITEMS:
            clipped.append(f"... {len(value) - ECHO_ITEMS} more items not shown")
        return clipped
    return value


def clipped_text(text: str, limit: int) -> str:
    """`text`, or its first `limit` characters followed by how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text):,} characters, cut to the first {limit}]"


def _echoed(item: dict) -> dict:
    """One FastAPI validation error with its echoed input and its message cut (`clipped_input`)."""
    item = dict(item)
    if "input" in item:
        item["input"] = clipped_input(item["input"])
    if isinstance(item.get("msg"), str):
        item["msg"] = clipped_text(item["msg"], MESSAGE_CHARS)
    return item


def json_safe(value):
    """`value` with every NaN/Infinity float replaced by its JSON-ish spelling and every lone surrogate in a string
    by its `\\udXXX` escape, so a JSONResponse can encode it.

    FastAPI echoes a field's input in a validation error; a client that sent `NaN` or `1e999` (Python's
    json.dumps writes the former for float("nan")), or a string holding `"\\ud800"` (valid JSON, which json.loads
    turns into a lone surrogate that UTF-8 cannot encode), would otherwise get a 500 instead of the 422.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {json_safe(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def validation_summary(errors: list[dict]) -> str:
    """'steps: Input should be a finite number; ...' from FastAPI's error list, naming each field."""
    def where(loc) -> str:
        parts = [str(part) for part in loc if part != "body"]
        return ".".join(parts) or "body"

    return "; ".join(f"{where(error.get('loc', ()))}: {error.get('msg', '')}" for error in errors)


def install_error_handlers(app: FastAPI, redact: Callable[[Any], Any] = lambda text: text) -> None:
    """Every API error in A1111's shape `{error, detail, body, errors}` (modules/api/api.py `handle_exception`).

    HTTP errors keep their status, headers (Retry-After, WWW-Authenticate) and string `detail`. A request
    that fails FastAPI's validation gets 422 with FastAPI's error list as `detail` (what FastAPI, and so
    A1111, answers there) and a readable summary naming the fields as `errors`. `redact` (a
    `webui.error_paths.PathRedactor`) takes the server's folders out of every message. Any other exception is a
    JSON 500 from `webui.unexpected_errors` (one handler for every route, the connection kept usable).
    """
    from fastapi.encoders import jsonable_encoder
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException as StarletteHTTPException

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException):
        return JSONResponse(status_code=error.status_code, headers=error.headers,
                            content=error_body(error.status_code, redact(json_safe(error.detail))))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError):
        errors = json_safe(jsonable_encoder([_echoed(item) for item in error.errors()]))
        body = error_body(422, errors, error=type(error).__name__)
        return JSONResponse(status_code=422, content={**body, "errors": f"422: {validation_summary(errors)}"})

    @app.exception_handler(ClientGone)
    async def client_gone(request: Request, error: ClientGone):
        # Nobody reads this answer; 499 is nginx's "client closed request", for the server log.
        return JSONResponse(status_code=499, content=error_body(499, "client closed the connection", error="ClientGone"))

    # A bug: A1111's 500 shape, the traceback in the log, the client's connection kept open
    app.add_middleware(UnexpectedErrorMiddleware, redact=redact)
