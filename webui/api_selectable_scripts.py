"""`/sdapi/v1/txt2img` and `/img2img` with the `script_name` of a registered selectable script (`pipelines.scripts`,
e.g. "X/Y/Z plot"), found by A1111's title in any case, its `script_args` checked into the script's config here
(422 naming the slot) and run as one job of the server's queue (`webui.generation_jobs.script_job`).

The two outpainting scripts keep their own dispatch (`webui.api_scripts`).
"""

from __future__ import annotations

from typing import Any

from pipelines.scripts import ScriptResult, find_script, is_registered_script


def script_context(state, override_settings: dict | None = None) -> dict[str, Any]:
    """What scripts may need from the server: the checkpoints' titles and files (X/Y/Z's Checkpoint name and Refiner
    checkpoint axes), the `--vae-dir` VAEs' names (its VAE axis; the worker's `switch_vae` is passed with the job),
    the styles file (its Styles axis), Interrogate CLIP and, when the server has a DeepDanbooru folder, DeepBooru
    (Loopback's "Append interrogated prompt", run in the worker; None without `--deepdanbooru-models-path`, so
    Loopback refuses DeepBooru naming the flag before queueing), and the upscalers as
    `/sdapi/v1/upscalers` lists them (SD upscale's `upscaler_index`), and the server's cap on the images one script
    job generates (`--max-script-images`, which every script's plan checks before queueing), and the `font` option
    (the grid legends' font file; None: automatic), a request's `override_settings` font winning (`request_font`).
    Each script reads the keys it needs."""
    from pipelines.model_upscale_listing import listed_upscaler_names
    from webui.interrogation import deepbooru_now, interrogate_now

    return {"checkpoint_names": [entry.title for entry in state.catalog.entries()], "styles": state.styles(),
            "refiner_source": lambda name: state.catalog.find(name).source,
            "vae_names": [name for name in state.vaes.names() if name != "Automatic"],
            "interrogate": lambda image: interrogate_now(state, image),
            "deepbooru": None if state.deepbooru is None else lambda image: deepbooru_now(state, image),
            "upscaler_names": listed_upscaler_names(dat_enabled=state.options.get("dat_enabled_models")),
            "max_script_images": state.limits.max_script_images, "font": request_font(state, override_settings)}


def request_font(state, override_settings: dict | None = None) -> str | None:
    """The grid legends' font for one request: its `override_settings` `font` (checked as `/sdapi/v1/options` checks
    it: ValueError naming the path; "" is automatic), as A1111 applies override_settings for the job, else the
    server's `font` option. None: automatic."""
    from webui.options import check_settable

    if override_settings and "font" in override_settings:
        return check_settable("font", override_settings["font"]) or None
    return state.options.get("font") or None


def request_script(state, kind: str, script_name: Any, script_args: Any, params,
                   override_settings: dict | None = None) -> tuple[Any, Any] | None:
    """(script, checked config) for a request naming a registered script, else None; ValueError (a 422) for bad
    `script_args`, a script that cannot run on these params, or a bad `font` in the request's `override_settings`."""
    if not is_registered_script(script_name):
        return None
    script = find_script(script_name, kind)
    if getattr(params, "controlnets", None):
        raise ValueError(f"script_name {script.title!r} cannot be combined with ControlNet units; send them without "
                         "the script.")
    from pipelines.ip_adapter_reuse import SCRIPTS_REFUSING_IMAGE_PROMPTS, STALE_REFERENCE_REASON

    if getattr(params, "ip_adapter", None) and script.title in SCRIPTS_REFUSING_IMAGE_PROMPTS:
        raise ValueError(f"script_name {script.title!r} cannot be combined with IP-Adapter units: "
                         f"{STALE_REFERENCE_REASON}; send them without the script (X/Y/Z plot, Prompt matrix and "
                         "Prompts from file take IP-Adapter units).")
    return script, script.parse(script_args, kind, **script_context(state, override_settings))


def script_response_info(info: dict, result) -> dict:
    """A script's `info`: its images start with its grids (A1111's `index_of_first_image`), their infotexts first."""
    if isinstance(result, ScriptResult):
        info = {**info, "index_of_first_image": result.index_of_first_image, "infotexts": list(result.infotexts)}
    return info
