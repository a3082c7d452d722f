"""A1111 API requests -> mixkit parameters (responses: `webui.api_response`).

Validation happens here, once, before a request enters the queue: the pipelines' own
`check_*_params` with the server's `GenerationLimits`, sampler names against the sampler
registry, LoRA tags against the LoRA library, and images through the pixel-capped decoder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mixkit.prompts import extract_extra_networks
from pipelines.params import GenerationLimits, Txt2ImgParams, check_txt2img_params
from pipelines.rng_source import check_rng_source_device
from webui.api_hires import hires_params
from webui.api_requests import Img2ImgRequest, Txt2ImgRequest
from webui.base64_images import decode_base64_image
from webui.generation_defaults import GenerationDefaults, apply_request_defaults
from webui.options import (INFOTEXT_OPTION_KEYS, PROMPT_OPTION_DEFAULTS, PROMPT_OPTION_KEYS, SAMPLER_OPTION_KEYS,
                           SETTABLE, UNCOND_SKIP_KEYS, hires_refiner_pass, img2img_color_correction, img2img_fix_steps,
                           img2img_noise_values,
                           restore_faces_default, sampler_option_params, token_merging_ratio_hr, uncond_skip_values)
from webui.prompt_guard import check_prompt_networks
from webui.refiner_config_folders import find_config_folder, named_as_picked

# A1111's integer codes for img2img choices, in its order.
RESIZE_MODES = {0: "just resize", 1: "crop and resize", 2: "resize and fill", 3: "just resize (latent upscale)"}
INPAINTING_FILL = {0: "fill", 1: "original", 2: "latent noise", 3: "latent nothing"}
# A1111's option keys for skipping the negative prompt (NGMS, Skip Early CFG) may also come per request.
# The settings the API reads when it saves a result (`webui.api`: samples, and the grid of 2+ images) too.
SAVE_OVERRIDES = ("samples_save", "return_grid", "grid_save", "enable_pnginfo", "save_txt")
# The grid legends' font, read by the scripts that draw labelled grids (webui.api_selectable_scripts.request_font).
SETTABLE_OVERRIDES = {"CLIP_stop_at_last_layers", *UNCOND_SKIP_KEYS, *SAMPLER_OPTION_KEYS, *PROMPT_OPTION_KEYS,
                      *SAVE_OVERRIDES, *INFOTEXT_OPTION_KEYS, "font"}
# What A1111's API request models default to (its UI's defaults differ: 20 steps, DPM++ 2M).
A1111_API_DEFAULTS = GenerationDefaults(sampler="Euler", schedule_type="Automatic", steps=50, cfg_scale=7.0, width=512,
                                        height=512)


@dataclass(frozen=True)
class RequestLimits:
    """What a single HTTP request may carry, on top of the generation limits."""

    max_body_bytes: int = 50 * 1024 * 1024
    max_image_bytes: int = 40 * 1024 * 1024
    # Pixels an input image may have (`mixkit webui --max-image-pixels`); None: 4x the generation cap, room for a
    # hires-fix result sent back to img2img or Extras.
    max_image_pixels: int | None = None

    def image_pixel_cap(self, limits: GenerationLimits) -> int:
        return self.max_image_pixels if self.max_image_pixels is not None else limits.max_pixels * 4


def _seed_extras(request: Txt2ImgRequest) -> dict[str, Any]:
    """A1111's Extra seed fields as Txt2ImgParams values (a null is the default: a random variation seed, no
    variation); a resize with a side <= 0 (the API's default -1) is off, as A1111 reads it."""
    strength = 0.0 if request.subseed_strength is None else request.subseed_strength
    sides = (request.seed_resize_from_w, request.seed_resize_from_h)
    # A1111 (modules/processing.py, rng.py) resizes only when both sides are > 0: `seed_resize_from_w: 64` alone (the
    # height left at its -1) is off, not an error; a pair it takes is checked as sent ("50x64 is not a size ...")
    resize = sides if all(side is not None and side > 0 for side in sides) else (0, 0)
    return {"subseed": -1 if request.subseed is None else request.subseed, "subseed_strength": strength,
            "seed_resize_from_w": resize[0], "seed_resize_from_h": resize[1]}


def _unsupported(request: Txt2ImgRequest) -> list[str]:
    """A1111 features this server does not implement, but the request turned on."""
    found = []
    from pipelines.scripts import is_registered_script
    from webui.api_scripts import is_mk2_script, is_outpaint_script

    if request.script_name and not is_registered_script(request.script_name) and not (
            isinstance(request, Img2ImgRequest) and (
            is_outpaint_script(request.script_name) or is_mk2_script(request.script_name))):
        found.append(f"script_name={request.script_name!r}")
    from webui.a1111_builtin_scripts import unsupported_scripts
    from webui.api_controlnet import controlnet_args

    _, other_scripts = controlnet_args(request.alwayson_scripts)
    found.extend(unsupported_scripts(other_scripts, img2img=isinstance(request, Img2ImgRequest)))
    if request.enable_hr and request.hr_checkpoint_name not in (None, "", "Use same checkpoint"):
        # A1111's UI sends its "off" value: the first pass's checkpoint, which is what this server's hires pass uses.
        # Hires prompts, sampler and schedule are supported (HiresParams.hr_prompt / hr_sampler / ...).
        found.append(f"hr_checkpoint_name={request.hr_checkpoint_name!r}")
    return found


NO_REFINER = (None, "", "None", "none")  # A1111's "no refiner" spellings (its UI sends "None")


def refiner_values(name: str | None, switch_at: float | None, catalog, config_name: str | None = None
                   ) -> dict[str, Any]:
    """`refiner` (the checkpoint's source), `refiner_switch_at` and `refiner_config_dir` for the pipeline, {} for no
    refiner: `name` found among the server's checkpoints by any of their titles, as sd_model_checkpoint is; `switch_at`
    None is A1111's 0.8 (checked with the other params by the pipeline's check). With no refiner, a given `switch_at`
    is kept, as A1111 keeps the field: an X/Y/Z "Refiner checkpoint" axis that sets a refiner switches there.
    `config_name` names a diffusers folder among the same checkpoints (`webui.refiner_config_folders`), passed on as
    the folder's path whether or not a refiner is set: whether it applies is the pipeline's check."""
    folder = find_config_folder(config_name, catalog)
    config = {} if folder is None else {"refiner_config_dir": folder}
    if name in NO_REFINER:
        return config if switch_at is None else {**config, "refiner_switch_at": switch_at}
    from pipelines.refiner import DEFAULT_SWITCH_AT

    if catalog is None:
        raise ValueError(f"refiner_checkpoint={name!r}: this server has no checkpoint list to find it in; leave it "
                         "empty")
    try:
        source = catalog.find(name).source
    except ValueError as error:
        raise ValueError(f"refiner_checkpoint={name!r}: {error}") from None
    return {"refiner": source, "refiner_switch_at": DEFAULT_SWITCH_AT if switch_at is None else switch_at, **config}


def _clip_skip(request: Txt2ImgRequest, default_clip_skip: int, current_vae_names: frozenset[str] | None = None
               ) -> int:
    overrides = dict(request.override_settings or {})
    # the request's checkpoint: found and loaded for the job by `ServerState.submit_generation(checkpoint=...)`
    overrides.pop("sd_model_checkpoint", None)
    vae = overrides.pop("sd_vae", None)  # also the infotext's `VAE`, which A1111 pastes into sd_vae
    if vae is not None and (current_vae_names is None or vae not in current_vae_names):
        running = f" ({', '.join(sorted(current_vae_names))})" if current_vae_names else ""
        raise ValueError(f"sd_vae={vae!r} (override_settings, or the infotext's VAE) is not the VAE this server "
                         f"runs{running}; a request cannot switch it here: set sd_vae with POST /sdapi/v1/options "
                         "first, or leave it out.")
    unknown = sorted(set(overrides) - SETTABLE_OVERRIDES)
    if unknown:
        raise ValueError(f"override_settings keys {unknown} are not supported; supported: {sorted(SETTABLE_OVERRIDES)}.")
    for key in (*SAVE_OVERRIDES, "font"):
        if key in overrides:
            SETTABLE[key](overrides[key])  # ValueError naming the key: true or false; the font's path
    return overrides.get("CLIP_stop_at_last_layers", default_clip_skip)


# The pipeline's parameter names that an A1111 request spells otherwise.
REQUEST_NAMES = {"batch_count": "n_iter", "clip_skip": "CLIP_stop_at_last_layers (clip skip)",
                 "schedule_type": "scheduler"}


def in_request_terms(message: str) -> str:
    """A pipeline check's message with its parameter names as the request wrote them (n_iter, not batch_count)."""
    return re.sub(r"\b(" + "|".join(REQUEST_NAMES) + r")\b", lambda found: REQUEST_NAMES[found.group(1)], message)


def _uncond_skip(request: Txt2ImgRequest, options: dict[str, Any] | None) -> dict[str, Any]:
    """s_min_uncond / s_min_uncond_all / skip_early_cond: Settings, then override_settings, then the request field."""
    values = dict(options or {})
    overrides = request.override_settings or {}
    values.update({key: overrides[key] for key in UNCOND_SKIP_KEYS if key in overrides})
    if request.s_min_uncond is not None:
        values["s_min_uncond"] = request.s_min_uncond
    return uncond_skip_values(values)


def with_styles(request: Txt2ImgRequest, prompt: str, styles) -> tuple[str, str]:
    """The prompt and negative prompt with the request's `styles` merged (mixkit.prompts.styles)."""
    if not request.styles:
        return prompt, request.negative_prompt
    if styles is None:
        raise ValueError(f"styles={request.styles}: this server has no styles file; start it with --styles-file "
                         "styles.csv, or leave styles empty")
    return styles.apply(prompt, request.negative_prompt, list(request.styles))


def _prompt_options(request: Txt2ImgRequest, options: dict[str, Any] | None) -> dict[str, Any]:
    """emphasis / comma_padding_backtrack / sdxl_clip_l_skip: A1111's defaults, then Settings, then override_settings
    (checked by the pipeline, whose message names the field)."""
    overrides = request.override_settings or {}
    values = {**PROMPT_OPTION_DEFAULTS, **(options or {})}
    values.update({key: overrides[key] for key in PROMPT_OPTION_KEYS if key in overrides})
    return {key: values[key] for key in PROMPT_OPTION_KEYS}


def _infotext_options(request: Txt2ImgRequest, options: dict[str, Any] | None):
    """The Settings > Infotext switches: A1111's defaults, then Settings, then override_settings (each checked here,
    naming the key: an override has not been through /sdapi/v1/options)."""
    from pipelines.infotext_options import InfotextOptions

    overrides = request.override_settings or {}
    values = dict(options or {})
    values.update({key: SETTABLE[key](overrides[key]) for key in INFOTEXT_OPTION_KEYS if key in overrides})
    return InfotextOptions(**{key: values[key] for key in INFOTEXT_OPTION_KEYS if key in values})


def _sampler_options(request: Txt2ImgRequest, sampler: str, options: dict[str, Any] | None) -> dict[str, Any]:
    """eta, ENSD and A1111's other Sampler parameters: Settings, then override_settings, then the request's `eta`,
    `s_churn`, `s_tmin`, `s_tmax`, `s_noise` (checked strictly by the pipeline). A1111 itself lets the setting win over
    the request's churn fields (`getattr(opts, 's_churn', p.s_churn)`); here the request's own field wins, as its eta."""
    values = _sampler_option_values(request, options)
    chosen = sampler_option_params(sampler, values)
    if request.eta is not None:
        chosen["eta"] = request.eta
    if request.tiling is not None:  # A1111: `p.tiling = opts.tiling` only when the request leaves it out
        chosen["tiling"] = request.tiling
    # A1111's process_images: a request without restore_faces takes the "Restore faces" setting
    chosen["restore_faces"] = restore_faces_default(values) if request.restore_faces is None else request.restore_faces
    return chosen


CHURN_REQUEST_FIELDS = ("s_churn", "s_tmin", "s_tmax", "s_noise")  # A1111's top-level request fields


def _sampler_option_values(request: Txt2ImgRequest, options: dict[str, Any] | None) -> dict[str, Any]:
    """The sampler settings in force for the request: Settings, then override_settings, then its churn fields."""
    overrides = request.override_settings or {}
    values = {**(options or {}), **{key: overrides[key] for key in SAMPLER_OPTION_KEYS if key in overrides}}
    values.update({name: getattr(request, name) for name in CHURN_REQUEST_FIELDS if getattr(request, name) is not None})
    return values


def _hires_eta(request: Txt2ImgRequest, hires_sampler: str, options: dict[str, Any] | None) -> float | None:
    """The eta of a hires sampler other than the first pass's: the request's `eta` (None here: HiresParams.eta, which
    holds it, serves both passes, as A1111's `p.eta`), else the Settings' eta for the hires sampler's kind (eta_ddim or
    eta_ancestral; None for a sampler without eta), as A1111's sampler reads `p.eta` or its own option."""
    if request.eta is not None:
        return None
    return sampler_option_params(hires_sampler, _sampler_option_values(request, options))["eta"]


def _img2img_noise(request: Img2ImgRequest, options: dict[str, Any] | None) -> dict[str, Any]:
    """initial_noise_multiplier / img2img_extra_noise: Settings, then override_settings, then the request's
    `initial_noise_multiplier` (checked by the pipeline)."""
    overrides = request.override_settings or {}
    values = {**(options or {}), **{key: overrides[key] for key in SAMPLER_OPTION_KEYS if key in overrides}}
    chosen = img2img_noise_values(values)
    if request.initial_noise_multiplier is not None:
        chosen["initial_noise_multiplier"] = request.initial_noise_multiplier
    return {key: float(value) if isinstance(value, str) else value for key, value in chosen.items()}


def _hires_extra_noise(request: Txt2ImgRequest, options: dict[str, Any] | None) -> list[str]:
    """A1111 adds img2img_extra_noise in its hires pass too (`sample_img2img`); this server's hires pass does not."""
    if not request.enable_hr or isinstance(request, Img2ImgRequest):
        return []
    overrides = request.override_settings or {}
    extra = overrides.get("img2img_extra_noise", (options or {}).get("img2img_extra_noise", 0.0))
    try:
        extra = float(extra)
    except (TypeError, ValueError):
        return [f"img2img_extra_noise={extra!r} is not a number"]
    if extra > 0:
        return [f"img2img_extra_noise={extra} (A1111's Settings > img2img 'Extra noise') in the hires-fix pass; set it "
                "to 0 for txt2img with hires fix (img2img takes it)"]
    return []


def _hires_refiner_pass(request: Txt2ImgRequest, options: dict[str, Any] | None) -> str:
    """A1111's `hires_fix_refiner_pass`: Settings, then override_settings (where an infotext's "Hires refiner" goes);
    checked for every request, as A1111's override check does, though only a hires fix with a refiner reads it."""
    overrides = request.override_settings or {}
    values = {**(options or {}), **{key: overrides[key] for key in SAMPLER_OPTION_KEYS if key in overrides}}
    return hires_refiner_pass(values)


def _token_merging_ratio_hr(request: Txt2ImgRequest, options: dict[str, Any] | None) -> float:
    """A1111's `token_merging_ratio_hr`: Settings, then override_settings (where an infotext's "Token merging ratio hr"
    goes); checked for every request, as `_hires_refiner_pass`, though only a hires fix reads it."""
    overrides = request.override_settings or {}
    values = {**(options or {}), **{key: overrides[key] for key in SAMPLER_OPTION_KEYS if key in overrides}}
    return token_merging_ratio_hr(values)


def _exact_steps(request: Img2ImgRequest, options: dict[str, Any] | None) -> bool:
    """A1111's `img2img_fix_steps` for an img2img request: Settings, then override_settings (`img2img_fix_steps`)."""
    overrides = request.override_settings or {}
    values = {**(options or {}), **{key: overrides[key] for key in SAMPLER_OPTION_KEYS if key in overrides}}
    return img2img_fix_steps(values)


def _color_correction(request: Img2ImgRequest, options: dict[str, Any] | None) -> dict[str, bool]:
    """A1111's `img2img_color_correction` and `save_images_before_color_correction` for an img2img request: Settings,
    then override_settings."""
    overrides = request.override_settings or {}
    values = {**(options or {}), **{key: overrides[key] for key in SAMPLER_OPTION_KEYS if key in overrides}}
    return img2img_color_correction(values)


def to_txt2img_params(request: Txt2ImgRequest, *, limits: GenerationLimits, lora_names: set[str] | None,
                      default_clip_skip: int = 1, current_vae_names: frozenset[str] | None = None, controlnet_models=None,
                      request_limits: RequestLimits | None = None, defaults: GenerationDefaults | None = None,
                      uncond_skip_options: dict[str, Any] | None = None,
                      sampler_options: dict[str, Any] | None = None,
                      prompt_options: dict[str, Any] | None = None, styles=None,
                      refiner_catalog=None, infotext_options: dict[str, Any] | None = None,
                      user: str | None = None, model_device=None) -> Txt2ImgParams:
    """Txt2ImgParams for a request, validated; raises ValueError/TypeError naming the bad field.

    Sampler, scheduler, steps, CFG scale and size the request leaves out come from `defaults`
    (Settings); without `defaults`, from A1111's API request defaults (Euler, 50 steps).
    NGMS and Skip Early CFG come from `uncond_skip_options` (Settings), override_settings and
    the request's `s_min_uncond`, in that order; eta and ENSD likewise from `sampler_options`
    (eta_ancestral, eta_ddim, eta_noise_seed_delta), override_settings and the request's `eta`; emphasis and
    comma_padding_backtrack from `prompt_options` (Settings), then override_settings. `styles` (a StyleLibrary of
    the server's --styles-file) merges the request's `styles` into its prompts, as A1111 does before generating.
    `refiner_checkpoint` is looked up in `refiner_catalog` (the server's CheckpointCatalog), by any title A1111
    accepts; `refiner_switch_at` defaults to A1111's 0.8.
    `hires_fix_refiner_pass` comes from `sampler_options` (Settings), then override_settings; a hires sampler
    other than the first pass's takes its own eta from them too (`_hires_eta`), unless the request sends `eta`.
    The Settings > Infotext switches come from `infotext_options` (Settings), then override_settings; `user` is the
    --auth user who sent the request (the infotext's `User` when add_user_name_to_info is on). `model_device` (the
    server's model device, `ModelHolder.model_device`) refuses RNG source GPU where it is not the CPU's noise.
    """
    from pipelines.samplers import resolve_sampler

    unsupported = _unsupported(request)
    if unsupported:
        raise ValueError(f"Not supported by this server: {', '.join(unsupported)}; leave these at their defaults.")
    chosen = apply_request_defaults(request, defaults or A1111_API_DEFAULTS)
    chosen.update(_first_phase_size(request))
    # unknown name -> error listing the valid ones
    resolve_sampler(chosen["sampler"], chosen["schedule_type"])
    refiner_pass = _hires_refiner_pass(request, sampler_options)
    tome_hr = _token_merging_ratio_hr(request, sampler_options)
    refused = _hires_extra_noise(request, sampler_options)
    if refused:
        raise ValueError(f"Not supported by this server: {'; '.join(refused)}.")
    # disable_extra_networks (A1111): the tags leave the prompt but nothing is applied.
    prompt = extract_extra_networks(request.prompt)[0] if request.disable_extra_networks else request.prompt
    prompt, negative_prompt = with_styles(request, prompt, styles)
    params = Txt2ImgParams(
        prompt=prompt, negative_prompt=negative_prompt, **chosen, seed=request.seed, **_seed_extras(request),
        **_sampler_options(request, chosen["sampler"], sampler_options),
        batch_size=request.batch_size, batch_count=request.n_iter,
        clip_skip=_clip_skip(request, default_clip_skip, current_vae_names),
        **_uncond_skip(request, uncond_skip_options), **_prompt_options(request, prompt_options),
        **refiner_values(request.refiner_checkpoint, request.refiner_switch_at, refiner_catalog,
                         request.refiner_config_dir),
        infotext_options=_infotext_options(request, infotext_options), user=user,
    )
    try:
        check_txt2img_params(params, limits)
    except ValueError as error:
        # the config folder as the request named it, not its server path
        message = named_as_picked(in_request_terms(str(error)), params.refiner_config_dir, request.refiner_config_dir)
        raise ValueError(message) from None
    _refuse_gpu_noise_off_the_cpu(params.rng_source, model_device)
    if request.enable_hr and not isinstance(request, Img2ImgRequest):
        params = hires_params(request, params, limits, styles, refiner_pass=refiner_pass,
                              hires_eta=lambda sampler: _hires_eta(request, sampler, sampler_options),
                              token_merging_ratio_hr=tome_hr)
    units = _controlnet_units(request, limits, request_limits or RequestLimits(), controlnet_models)
    img2img = isinstance(request, Img2ImgRequest)  # its IP-Adapter units are read with its init images
    ip_units = [] if img2img else _ip_adapter_units(request, limits, request_limits or RequestLimits(),
                                                    controlnet_models)
    if ip_units and request.enable_hr:
        _refuse_single_pass_ip_units(request)
    _refuse_ip_units_with_refiner(ip_units, params)
    if units:
        params = _with_units(params, units)
    if ip_units:
        params = _with_ip_adapter_units(params, ip_units)
    if not request.disable_extra_networks:  # the negative prompt's tags are text, as in A1111 1.10
        check_prompt_networks("prompt", request.prompt, lora_names)
    return params


def _refuse_gpu_noise_off_the_cpu(rng_source: str, model_device) -> None:
    """RNG source GPU on a model that is not on the CPU, refused when the request arrives: the pipeline refuses it
    too (`check_rng_source_device`), but only once the job runs, after the queue and perhaps a checkpoint load."""
    if model_device is None:
        return
    try:
        check_rng_source_device(rng_source, model_device)
    except ValueError as error:
        raise ValueError(f"randn_source={rng_source!r} (override_settings, the infotext's RNG, or the server's "
                         f"Settings) is refused: {error}") from None


def _with_units(params: Txt2ImgParams, units: list) -> Txt2ImgParams:
    """The params with ControlNet units; hires fix keeps its recipe and the units guide both of its passes."""
    from pipelines.controlnet import ControlHiresParams, ControlTxt2ImgParams
    from pipelines.hires import HiresParams

    if isinstance(params, HiresParams):
        single_pass = [f"controlnet unit {i}: hr_option={unit.hr_option!r}" for i, unit in enumerate(units)
                       if unit.hr_option != "Both"]
        if single_pass:
            raise ValueError(f"{', '.join(single_pass)} is not supported: units guide both hires-fix passes here; "
                             "send hr_option 'Both'.")
    params_class = ControlHiresParams if isinstance(params, HiresParams) else ControlTxt2ImgParams
    return params_class(**{f: getattr(params, f) for f in params.__dataclass_fields__}, controlnets=units)


def _first_phase_size(request: Txt2ImgRequest) -> dict[str, int]:
    """A1111's legacy `firstphase_width/height`: when set, they replace width and height (A1111 1.10's
    `StableDiffusionProcessingTxt2Img.__post_init__`); a hires pass then scales from them by hr_scale or
    hr_resize_x/y, since its target is computed after the swap."""
    first_width, first_height = request.firstphase_width, request.firstphase_height
    if not first_width and not first_height:
        return {}
    if isinstance(request, Img2ImgRequest):
        raise ValueError(f"firstphase_width/firstphase_height ({first_width}x{first_height}) are txt2img hires-fix "
                         "fields; img2img has no first pass, leave them at 0.")
    if not first_width or not first_height:
        raise ValueError(f"firstphase_width and firstphase_height must be set together (the first pass runs at "
                         f"firstphase_width x firstphase_height), got {first_width}x{first_height}; set both or neither.")
    return {"width": first_width, "height": first_height}


def _controlnet_units(request: Txt2ImgRequest, limits: GenerationLimits, request_limits: RequestLimits, models) -> list:
    from pipelines.controlnet import ControlNetLimits
    from webui.api_controlnet import controlnet_args, parse_units

    args, _ = controlnet_args(request.alwayson_scripts)
    return parse_units(args, models=models, max_units=ControlNetLimits().max_units,
                       max_pixels=request_limits.image_pixel_cap(limits), max_bytes=request_limits.max_image_bytes)


def _ip_adapter_units(request: Txt2ImgRequest, limits: GenerationLimits, request_limits: RequestLimits,
                      models) -> list:
    from webui.api_controlnet import controlnet_args, parse_ip_adapter_units
    from webui.api_ip_adapter import check_region_mask_sizes

    args, _ = controlnet_args(request.alwayson_scripts)
    units = parse_ip_adapter_units(args, models=models, max_pixels=request_limits.image_pixel_cap(limits),
                                   max_bytes=request_limits.max_image_bytes)
    check_region_mask_sizes(units, request.width, request.height)  # the output's size, txt2img's and img2img's
    return units


def _refuse_single_pass_ip_units(request: Txt2ImgRequest) -> None:
    """With hires fix, IP-Adapter units guide both passes (as the extension's default hr_option "Both" does, and
    `pipelines.ip_adapter_hires` runs them); one pass only is refused, as for ControlNet units."""
    from webui.api_controlnet import controlnet_args, enabled_units, hr_option_of
    from webui.api_ip_adapter import is_ip_adapter_module

    args, _ = controlnet_args(request.alwayson_scripts)
    single_pass = [f"{label}: hr_option={unit.get('hr_option')!r}"
                   for label, unit in enabled_units(args, "controlnet unit")
                   if is_ip_adapter_module(unit.get("module")) and hr_option_of(label, unit) != "Both"]
    if single_pass:
        raise ValueError(f"{', '.join(single_pass)} is not supported: IP-Adapter units guide both hires-fix passes "
                         "here; send hr_option 'Both'.")


def _refuse_ip_units_with_refiner(ip_units: list, params) -> None:
    """The pipelines refuse IP-Adapter with a refiner (its UNet has no adapter layers); said here before queueing."""
    if ip_units and params.refiner is not None:
        raise ValueError(f"{ip_units[0].label}: IP-Adapter units cannot run with a refiner yet (the refiner's UNet has "
                         "no adapter layers, so the image prompt would stop at the switch); send no "
                         "refiner_checkpoint, or refine the result afterwards with img2img.")


def _with_ip_adapter_units(params: Txt2ImgParams, ip_units: list) -> Txt2ImgParams:
    """The txt2img params with the IP-Adapter units' fields, in the class of the units the call has (hires fix
    included: its params carry the adapters into both passes)."""
    from pipelines.hires import HiresParams
    from pipelines.ip_adapter_controlnet import params_class_for
    from pipelines.ip_adapter_hires import hires_params_class
    from webui.api_ip_adapter import ip_adapter_fields

    has_units = bool(getattr(params, "controlnets", None))
    params_class = hires_params_class(has_units, True) if isinstance(params, HiresParams) else \
        params_class_for("txt2img", has_units, True)
    return params_class(**{f: getattr(params, f) for f in params.__dataclass_fields__}, **ip_adapter_fields(ip_units))


def to_img2img_params(request: Img2ImgRequest, *, limits: GenerationLimits, request_limits: RequestLimits,
                      lora_names: set[str] | None, default_clip_skip: int = 1,
                      current_vae_names: frozenset[str] | None = None,
                      controlnet_models=None, defaults: GenerationDefaults | None = None,
                      uncond_skip_options: dict[str, Any] | None = None, sampler_options: dict[str, Any] | None = None,
                      prompt_options: dict[str, Any] | None = None, styles=None, refiner_catalog=None,
                      infotext_options: dict[str, Any] | None = None, user: str | None = None,
                      model_device=None):
    """Img2ImgParams for a request with its images decoded; raises ValueError naming the bad field.

    `exact_steps` is A1111's `img2img_fix_steps`: from `sampler_options` (Settings), then override_settings."""
    from pipelines.img2img import check_img2img_params

    base = to_txt2img_params(request, limits=limits, lora_names=lora_names, default_clip_skip=default_clip_skip,
                             current_vae_names=current_vae_names, controlnet_models=controlnet_models,
                             request_limits=request_limits, defaults=defaults,
                             uncond_skip_options=uncond_skip_options, sampler_options=sampler_options,
                             prompt_options=prompt_options, styles=styles, refiner_catalog=refiner_catalog,
                             infotext_options=infotext_options, user=user, model_device=model_device)
    units = getattr(base, "controlnets", None) or []
    if request.resize_mode not in RESIZE_MODES:
        raise ValueError(f"resize_mode must be one of {sorted(RESIZE_MODES)} ({RESIZE_MODES}), got {request.resize_mode}.")
    if request.inpainting_fill not in INPAINTING_FILL:
        raise ValueError(f"inpainting_fill must be one of {sorted(INPAINTING_FILL)} ({INPAINTING_FILL}), got {request.inpainting_fill}.")
    if request.inpainting_mask_invert not in (0, 1):
        raise ValueError(f"inpainting_mask_invert must be 0 or 1, got {request.inpainting_mask_invert}.")
    if request.latent_mask:
        raise ValueError("latent_mask is not supported; send the mask in 'mask'.")
    if not request.init_images:
        raise ValueError("init_images must hold at least one base64-encoded image.")
    max_pixels = request_limits.image_pixel_cap(limits)
    decode = lambda field, data: decode_base64_image(field, data, max_pixels=max_pixels,  # noqa: E731
                                                     max_bytes=request_limits.max_image_bytes)
    images = [decode(f"init_images[{i}]", data) for i, data in enumerate(request.init_images)]
    from webui.api_controlnet import controlnet_args
    from webui.api_soft_inpainting import soft_inpainting_from_scripts

    soft_inpainting = soft_inpainting_from_scripts(controlnet_args(request.alwayson_scripts)[1])
    # A1111's Soft inpainting sets mask_round=False before the mask is read: a transparent mask keeps its soft alpha
    mask_round = request.mask_round and soft_inpainting is None
    mask = _decode_mask(request.mask, decode, round=mask_round) if request.mask else None
    ip_units = _ip_adapter_units(request, limits, request_limits, controlnet_models)
    _refuse_ip_units_with_refiner(ip_units, base)
    from pipelines.ip_adapter_controlnet import params_class_for
    from webui.api_ip_adapter import ip_adapter_fields

    params_class = params_class_for("img2img", bool(units), bool(ip_units))
    extra = {"controlnets": units} if units else {}
    if ip_units:  # a unit without image takes the first init image, as the extension's units do in img2img
        extra.update(ip_adapter_fields(ip_units, init_image=images[0]))
    params = params_class(
        **{f: getattr(base, f) for f in Txt2ImgParams.__dataclass_fields__}, **extra,
        init_images=images, denoising_strength=request.denoising_strength, resize_mode=RESIZE_MODES[request.resize_mode],
        image_cfg_scale=request.image_cfg_scale,
        mask=mask, **mask_blur_params(request), mask_round=request.mask_round,
        inpainting_mask_invert=bool(request.inpainting_mask_invert),
        inpainting_fill=INPAINTING_FILL[request.inpainting_fill], inpaint_full_res=request.inpaint_full_res,
        inpaint_full_res_padding=request.inpaint_full_res_padding,
        exact_steps=_exact_steps(request, sampler_options), **_img2img_noise(request, sampler_options),
        **_color_correction(request, sampler_options),
        soft_inpainting=soft_inpainting,
    )
    check_img2img_params(params, limits, 8)
    return params


def mask_blur_params(request: Img2ImgRequest) -> dict[str, int]:
    """The request's blur as Img2ImgParams takes it: `mask_blur`, when sent, sets both axes (A1111's
    `mask_blur` setter); otherwise each axis has its own `mask_blur_x` / `mask_blur_y` (default 4 and 4)."""
    if request.mask_blur is not None:
        return {"mask_blur": request.mask_blur}
    return {"mask_blur_x": request.mask_blur_x, "mask_blur_y": request.mask_blur_y}


def _decode_mask(data: str, decode, *, round: bool = True):
    """The request's mask read as A1111 reads it (`pipelines.inpaint_mask.binary_mask`): strokes in the alpha
    channel of a transparent mask (A1111's canvas), else its grey levels.

    `decode` (the init images' decoder) checks the field first: base64, byte size, pixel cap, a readable image.
    It flattens transparency onto white, which would erase alpha strokes (a black canvas mask with
    transparent background turned inside out), so the checked bytes are then read again as they are.
    """
    import base64
    import io

    from PIL import Image

    from pipelines.inpaint_mask import binary_mask

    decode("mask", data)
    text = data.strip()
    if text.startswith("data:"):
        text = text.partition(",")[2]
    with Image.open(io.BytesIO(base64.b64decode(text, validate=True))) as image:
        image.load()
        return binary_mask(image, round=round)  # `mask_round: false` keeps soft alpha strokes, as A1111
