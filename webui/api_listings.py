"""A1111's read-only listing endpoints that clients (webuiapi's helpers) call, in A1111's JSON shapes.

Lists of things mixkit does not have (extensions, sd-modules) are served empty rather than 404, as an A1111 without
them answers; hypernetworks are the `.pt` files of `--hypernetwork-dir` (empty without one), prompt styles those of
`--styles-file` (empty without one), Real-ESRGAN models those of `--realesrgan-models-path`, face restorers those of
`--gfpgan-models-path` / `--codeformer-models-path`.
"""

from __future__ import annotations

import os

from fastapi import APIRouter, HTTPException
from fastapi.concurrency import run_in_threadpool

from webui.api_refused_routes import add_refused_routes
from webui.server_state import ServerState

# A1111 endpoints whose items mixkit has none of: an A1111 without any answers [] too.
# sd-modules: A1111's separate text-encoder / VAE module files (Forge-style); mixkit loads them with the checkpoint.
EMPTY_LISTS = ("extensions", "sd-modules")


def command_line_flags(state: ServerState) -> dict:
    """The server's own start-up settings, one key per `mixkit webui` flag: A1111's flag name where it has one
    (`ckpt_dir`, `nowebui`, `ui_settings_file`), else the flag's own; `--auth` is never shown.

    Limits are the values in force, defaults included (`max_image_pixels` without the flag is 4x the generation cap),
    so a client can size its requests from this answer alone. `tests/webui/test_api_cmd_flags.py` checks every flag
    of the parser has its key here."""
    config = state.config
    return {"port": config.port, "listen": config.listen, "api": True, "nowebui": not config.ui,
            "model": list(config.models),
            "ckpt_dir": config.models_dir, "lora_dir": config.lora_dir, "embeddings_dir": config.embeddings_dir,
            "hypernetwork_dir": config.hypernetwork_dir, "training_data_dir": config.training_data_dir,
            "vae_dir": config.vae_dir, "controlnet_dir": config.controlnet_dir, "device": config.device,
            "esrgan_models_path": config.esrgan_models_path, "realesrgan_models_path": config.realesrgan_models_path,
            "swinir_models_path": config.swinir_models_path, "dat_models_path": config.dat_models_path,
            "scunet_models_path": config.scunet_models_path,
            "gfpgan_models_path": config.gfpgan_models_path, "codeformer_models_path": config.codeformer_models_path,
            "deepdanbooru_models_path": config.deepdanbooru_models_path,
            "interrogate_clip_model": config.interrogate_clip_model,
            "interrogate_categories_dir": config.interrogate_categories_dir,
            # the parsed --appflow-config file: app -> role -> model source
            "appflow_config": {app: dict(roles) for app, roles in config.appflow_models.items()},
            # A1111's --styles-file may repeat (a list); its --cors-allow-origins is one comma-separated string
            "styles_file": [config.styles_file] if config.styles_file else [],
            "cors_allow_origins": ",".join(config.cors_allow_origins) or None,
            "allowed_hosts": ",".join(config.allowed_hosts) or None,
            "insecure_no_auth": config.insecure_no_auth,
            "ui_settings_file": config.settings_file, "output_dir": str(state.output_dir),
            "preview_every": config.preview_every,
            # limits: --queue, --max-image-pixels, --max-script-images
            "queue_size": config.queue_size,
            "max_image_pixels": config.request_limits.image_pixel_cap(state.limits),
            "max_script_images": state.limits.max_script_images}


def memory_usage() -> dict:
    """A1111's `/sdapi/v1/memory`: this process's RAM and, with CUDA, the device's allocator statistics."""
    import psutil
    import torch

    process = psutil.Process(os.getpid())
    rss = process.memory_info().rss
    total = psutil.virtual_memory().total
    ram = {"free": total - rss, "used": rss, "total": total}
    if not torch.cuda.is_available():
        return {"ram": ram, "cuda": {"error": "unavailable"}}
    free, device_total = torch.cuda.mem_get_info()
    stats = torch.cuda.memory_stats()

    def pair(name: str) -> dict:
        return {"current": stats.get(f"{name}.all.current", 0), "peak": stats.get(f"{name}.all.peak", 0)}

    cuda = {"system": {"free": free, "used": device_total - free, "total": device_total},
            "active": pair("active_bytes"), "allocated": pair("allocated_bytes"), "reserved": pair("reserved_bytes"),
            "inactive": pair("inactive_split_bytes"),
            "events": {"retries": stats.get("num_alloc_retries", 0), "oom": stats.get("num_ooms", 0)}}
    return {"ram": ram, "cuda": cuda}


def build_listings_router(state: ServerState) -> APIRouter:
    router = APIRouter()

    @router.get("/sdapi/v1/sd-vae")
    async def sd_vae():
        # A1111 lists the VAE files only; "Automatic" and "None" are option values, not files.
        return [{"model_name": name, "filename": str(path)} for name, path in state.vaes.files().items()]

    @router.post("/sdapi/v1/refresh-vae")
    async def refresh_vae():
        await run_in_threadpool(state.vaes.refresh)
        return None

    @router.get("/sdapi/v1/latent-upscale-modes")
    async def latent_upscale_modes():
        from pipelines.hires import LATENT_UPSCALERS

        return [{"name": name} for name in LATENT_UPSCALERS.names()]

    @router.post("/sdapi/v1/refresh-upscalers")
    async def refresh_upscalers():
        # mixkit's own: A1111 has no such endpoint (it rescans its upscaler folders when its UI reloads)
        try:
            scan = await run_in_threadpool(state.refresh_upscalers)
        except NotADirectoryError as error:  # a folder removed since start: nothing changed
            raise HTTPException(status_code=409, detail=str(error)) from None
        from webui.error_paths import server_path_redactor

        # the refusals are error messages: their paths are redacted as every error body's (`webui.error_paths`)
        redact = server_path_redactor(state)
        refused = {redact(path): redact(reason) for path, reason in scan.refused.items()}
        return {"upscalers": scan.names, "refused": refused}

    @router.get("/sdapi/v1/realesrgan-models")
    async def realesrgan_models():
        from webui.upscaler_models import realesrgan_models

        return realesrgan_models(state.config)

    @router.get("/sdapi/v1/face-restorers")
    async def face_restorers():
        from pipelines.face_restoration import face_restorer_listing

        return face_restorer_listing()

    @router.get("/sdapi/v1/cmd-flags")
    async def cmd_flags():
        return command_line_flags(state)

    @router.get("/sdapi/v1/memory")
    async def memory():
        return await run_in_threadpool(memory_usage)

    @router.get("/sdapi/v1/prompt-styles")
    async def prompt_styles():
        library = await run_in_threadpool(state.styles)
        if library is None:
            return []
        return [{"name": style.name, "prompt": style.prompt, "negative_prompt": style.negative_prompt}
                for style in library.styles.values()]

    @router.get("/sdapi/v1/hypernetworks")
    async def hypernetworks():
        # A1111's `{name, path}` per file; the folder is scanned on every call (A1111 has no refresh route for it)
        return await run_in_threadpool(state.hypernetwork_listing)

    def empty_list():
        return []

    @router.get("/sdapi/v1/script-info")
    async def script_info_route():
        from webui.api_script_info import script_info
        from webui.api_selectable_scripts import script_context

        return await run_in_threadpool(lambda: script_info(**script_context(state)))

    for name in EMPTY_LISTS:
        router.add_api_route(f"/sdapi/v1/{name}", empty_list, methods=["GET"], name=name.replace("-", "_"))
    add_refused_routes(router)
    return router
