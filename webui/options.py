"""The subset of A1111's settings (`/sdapi/v1/options`) this server has, and which a client may change.

Paths (output folders) are set by the operator on the command line and are read-only over the
API: a network client choosing where the server writes files would be a path-traversal hole.
Settable values (and the performance preset) are saved to the settings file when one is given,
and read back from it at start.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import asdict
from typing import Any

from pipelines.approx.hypertile_settings import HYPERTILE_OPTION_DEFAULTS, HyperTile, check_hypertile_option
from pipelines.infotext_options import INFOTEXT_OPTION_DEFAULTS, InfotextOptions
from pipelines.model_upscale import A1111_TILING_DEFAULTS
from pipelines.model_upscale_listing import DAT_RELEASE_NAMES, check_dat_enabled_models
from pipelines.params import GenerationLimits
from pipelines.rng_source import DEFAULT_RNG_SOURCE, check_rng_source
from pipelines.rng_source import SETTING_KEY as RNG_SOURCE_KEY
from pipelines.sampler_parameters import INTEGERS as _SAMPLER_INTEGERS
from pipelines.sampler_parameters import NUMBERS as _SAMPLER_NUMBERS
from pipelines.sampler_parameters import SamplerParameters, check_sampler_parameters, parameters_from_values
from pipelines.uncond_skip import UncondSkip, check_uncond_skip
from pipelines.unit_model_cache import CACHE_SIZE_KEY, DEFAULT_CACHE_SIZE, check_cache_size
from webui.generation_defaults import (OPTION_KEYS, GenerationDefaults, check_generation_defaults, check_option_value,
                                       defaults_from_options, options_from_defaults)
from webui.interrogate_options import (DEEPBOORU_OPTION_DEFAULTS, INTERROGATE_OPTION_DEFAULTS, INTERROGATE_OPTION_KEYS,
                                       LENGTH_KEYS, check_deepbooru_option, check_interrogate_option,
                                       deepbooru_settings, interrogate_settings)

logger = logging.getLogger(__name__)
FONT_KEY = "font"  # A1111's grid legend font (pipelines.grid_fonts.OPTION_NAME)


def _check_clip_skip(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 12:
        raise ValueError(f"CLIP_stop_at_last_layers must be an integer in [1, 12], got {value!r}.")
    return value


def _check_bool(name: str):
    def check(value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}.")
        return value
    return check


def _check_font_option(value: Any) -> str:
    """A1111's `font` (Settings > Saving images/grids: the grid legends' font file): "" for automatic, else a path
    Pillow's FreeType loads (`pipelines.grid_fonts.check_font`)."""
    from pipelines.grid_fonts import OPTION_NAME, check_font

    if not isinstance(value, str):
        raise ValueError(f"{OPTION_NAME} must be a font file path, or \"\" for an automatic system font; "
                         f"got {value!r}.")
    return check_font(value.strip(), OPTION_NAME) or ""


def _check_preview_every(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -1 <= value <= 1000:
        raise ValueError(f"show_progress_every_n_steps must be an integer in [-1, 1000], got {value!r}.")
    return value


UNCOND_SKIP_OFF = asdict(UncondSkip())  # A1111's option names (s_min_uncond, ...) at their "off" values
UNCOND_SKIP_KEYS = tuple(UNCOND_SKIP_OFF)


def uncond_skip_values(values: dict[str, Any]) -> dict[str, Any]:
    """NGMS / Skip Early CFG params (`Txt2ImgParams` fields of the same names) from option values.

    A standing "NGMS all steps" says how often NGMS skips; without a sigma it does nothing, as in A1111.
    """
    chosen = {**UNCOND_SKIP_OFF, **{key: values[key] for key in UNCOND_SKIP_KEYS if key in values}}
    if not chosen["s_min_uncond"]:
        chosen["s_min_uncond_all"] = False
    return chosen


def _check_uncond_skip(key: str):
    """A1111's NGMS / Skip Early CFG options, checked by the pipeline's own rule (pipelines.uncond_skip)."""
    def check(value: Any):
        settings = {**UNCOND_SKIP_OFF, key: value}
        if key == "s_min_uncond_all":
            settings["s_min_uncond"] = 1.0  # on its own it is only a how-often switch, valid without a sigma yet
        check_uncond_skip(**settings)
        return value
    return check


def _check_eta(key: str):
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ValueError(f"{key} must be a number in [0, 1], got {value!r}.")
        return float(value)
    return check


def _check_ensd(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**53 - 1:
        raise ValueError(f"eta_noise_seed_delta must be an integer >= 0, got {value!r}.")
    return value


# The options A1111's samplers read: Settings > Sampler parameters' eta of ancestral samplers, eta of DDIM and
# ENSD, and Settings > img2img's "With img2img, do exactly the amount of steps the slider specifies"
# (`img2img_fix_steps`, default False, read by `sd_samplers_common.setup_img2img_steps`; it becomes
# `Img2ImgParams.exact_steps`, see `img2img_fix_steps`). Hires fix ignores it: its second pass always runs exactly
# its steps, as A1111's `sample_hr_pass` does.
# A1111's other Sampler parameters (schedule min/max sigma, rho, churn, discard penultimate sigma, Beta alpha/beta,
# UniPC options, noise schedule) and its "Pad prompt/negative prompt" (Optimizations) and "Downcast alphas_cumprod"
# (Compatibility) keep its option names and defaults (`pipelines.sampler_parameters.SamplerParameters`).
SAMPLER_PARAMETER_DEFAULTS = asdict(SamplerParameters())
# Settings > img2img's noise options (pipelines.img2img_noise), read by img2img requests only.
IMG2IMG_NOISE_DEFAULTS = {"initial_noise_multiplier": 1.0, "img2img_extra_noise": 0.0}
# Settings > img2img "Inpainting conditioning mask strength" (`Txt2ImgParams.inpainting_mask_weight`): read by every
# generation of an inpainting checkpoint (img2img, hires fix's second pass), so it travels with the sampler options.
INPAINTING_MASK_WEIGHT_KEY = "inpainting_mask_weight"
# Settings > Stable Diffusion "Hires fix: which pass to enable refiner for" (`HiresParams.hires_fix_refiner_pass`): read
# by hires-fix generations with a refiner; it travels with the sampler options to the request conversion too.
HIRES_REFINER_PASS_KEY = "hires_fix_refiner_pass"
# Settings > Optimizations "Token merging ratio for high-res pass" (A1111's `token_merging_ratio_hr`, infotext "Token
# merging ratio hr"; `HiresParams.token_merging_ratio_hr`): ToMe in the hires pass only, 0 = the first pass's ratio.
# Read by hires-fix generations; it travels with the sampler options, so override_settings and the settings file
# carry it too.
TOME_HR_KEY = "token_merging_ratio_hr"
# Settings > Compatibility "Switch to refiner by sampling steps instead of model timesteps"
# (`Txt2ImgParams.refiner_switch_by_sample_steps`): read by every generation with a refiner, as the sampler options.
REFINER_BY_STEPS_KEY = "refiner_switch_by_sample_steps"
# Settings > Compatibility "Use old prompt editing timelines" (`Txt2ImgParams.use_old_scheduling`): read by every
# generation's prompt schedules, so it travels with the sampler options too.
OLD_SCHEDULING_KEY = "use_old_scheduling"
# Settings "Tiling" (`Txt2ImgParams.tiling`; a request's `tiling` wins): read by every generation, as A1111's
# `p.tiling = opts.tiling` when the request leaves it out.
TILING_KEY = "tiling"
# Settings > Face restoration (pipelines.face_restoration), read by every generation: `face_restoration` is what a
# request leaving `restore_faces` out gets (A1111's "Restore faces" setting); the others are Txt2ImgParams fields of
# the same names. They travel with the sampler options, so override_settings and the settings file carry them too.
FACE_RESTORATION_DEFAULTS = {"face_restoration": False, "face_restoration_model": "CodeFormer",
                             "code_former_weight": 0.5, "face_restoration_unload": False,
                             "save_images_before_face_restoration": False}
FACE_RESTORATION_PARAM_KEYS = ("face_restoration_model", "code_former_weight", "face_restoration_unload",
                               "save_images_before_face_restoration")
# Settings > img2img "Apply color correction to img2img results to match original colors" (A1111's
# `img2img_color_correction`, off by default; `Img2ImgParams.color_correction`, pipelines.color_correction): read by
# img2img requests, and Loopback re-applies it at every loop; it travels with the sampler options so that
# override_settings and the settings file carry it too.
COLOR_CORRECTION_KEY = "img2img_color_correction"
# Settings > Saving "Save a copy of image before applying color correction to img2img results" (A1111's key; the
# `Img2ImgParams` field of the same name)
BEFORE_COLOR_CORRECTION_KEY = "save_images_before_color_correction"
# Settings > Hypertile (A1111's nine hypertile_* options; pipelines.approx.hypertile_settings): read by every
# generation, as A1111's built-in Hypertile script reads them; they make `Txt2ImgParams.hypertile`.
# Settings > Sampler parameters "Random number generator source" (A1111's `randn_source`; `Txt2ImgParams.rng_source`,
# pipelines.rng_source): read by every generation. Its default here is CPU, what mixkit draws; A1111's is GPU.
SAMPLER_OPTION_DEFAULTS = {"eta_ancestral": 1.0, "eta_ddim": 0.0, "eta_noise_seed_delta": 0,
                           RNG_SOURCE_KEY: DEFAULT_RNG_SOURCE, "img2img_fix_steps": False,
                           **SAMPLER_PARAMETER_DEFAULTS, **IMG2IMG_NOISE_DEFAULTS, INPAINTING_MASK_WEIGHT_KEY: 1.0,
                           HIRES_REFINER_PASS_KEY: "second pass", TOME_HR_KEY: 0.0, REFINER_BY_STEPS_KEY: False,
                           OLD_SCHEDULING_KEY: False, TILING_KEY: False, COLOR_CORRECTION_KEY: False,
                           BEFORE_COLOR_CORRECTION_KEY: False,
                           **FACE_RESTORATION_DEFAULTS,
                           **HYPERTILE_OPTION_DEFAULTS}
SAMPLER_OPTION_KEYS = tuple(SAMPLER_OPTION_DEFAULTS)


def img2img_fix_steps(values: dict[str, Any]) -> bool:
    """`Img2ImgParams.exact_steps` from option values (Settings, then override_settings): A1111's `img2img_fix_steps`,
    checked here because an override value has not been through `/sdapi/v1/options`."""
    return SETTABLE["img2img_fix_steps"](values.get("img2img_fix_steps", SAMPLER_OPTION_DEFAULTS["img2img_fix_steps"]))


def img2img_color_correction(values: dict[str, Any]) -> dict[str, bool]:
    """`Img2ImgParams.color_correction` and `save_images_before_color_correction` from option values (Settings, then
    override_settings), checked here because an override value has not been through `/sdapi/v1/options`."""
    return {"color_correction": SETTABLE[COLOR_CORRECTION_KEY](values.get(COLOR_CORRECTION_KEY, False)),
            BEFORE_COLOR_CORRECTION_KEY: SETTABLE[BEFORE_COLOR_CORRECTION_KEY](
                values.get(BEFORE_COLOR_CORRECTION_KEY, False))}


def sampler_option_params(sampler: str, values: dict[str, Any]) -> dict[str, Any]:
    """The `eta` / `ensd` / `rng_source` / `sampler_parameters` / `inpainting_mask_weight` /
    `refiner_switch_by_sample_steps` / `use_old_scheduling` / `tiling` / `hypertile` params
    the sampler settings give `sampler`, as A1111 reads its options.

    DDIM takes `eta_ddim`, the k-diffusion samplers with an eta (ancestral and SDE) `eta_ancestral`, others none.
    """
    from pipelines.samplers import resolve_sampler

    chosen = {**SAMPLER_OPTION_DEFAULTS, **{key: values[key] for key in SAMPLER_OPTION_KEYS if key in values}}
    spec, _ = resolve_sampler(sampler)
    eta = None
    if spec.eta_default is not None:
        eta = chosen["eta_ddim"] if spec.eta_infotext_key == "Eta DDIM" else chosen["eta_ancestral"]
    # checked: an override_settings value has not been through /sdapi/v1/options (inf made int() a 500)
    return {"eta": eta, "ensd": _check_ensd(chosen["eta_noise_seed_delta"]),
            "rng_source": check_rng_source(chosen[RNG_SOURCE_KEY], RNG_SOURCE_KEY),
            "sampler_parameters": parameters_from_values(chosen),
            INPAINTING_MASK_WEIGHT_KEY: _as_number(chosen[INPAINTING_MASK_WEIGHT_KEY]),
            REFINER_BY_STEPS_KEY: chosen[REFINER_BY_STEPS_KEY],  # checked by the pipeline (bools)
            OLD_SCHEDULING_KEY: chosen[OLD_SCHEDULING_KEY], TILING_KEY: chosen[TILING_KEY],
            "hypertile": HyperTile.from_options({key: check_hypertile_option(key, chosen[key])
                                                 for key in HYPERTILE_OPTION_DEFAULTS}),
            **{key: _as_number(chosen[key]) if key == "code_former_weight" else chosen[key]
               for key in FACE_RESTORATION_PARAM_KEYS}}


def restore_faces_default(values: dict[str, Any]) -> bool:
    """A1111's "Restore faces" setting (`face_restoration`): what a request that leaves `restore_faces` out gets."""
    return SETTABLE["face_restoration"](values.get("face_restoration", FACE_RESTORATION_DEFAULTS["face_restoration"]))


def _check_face_restoration_model(value: Any) -> str:
    from pipelines.face_restoration import FACE_RESTORER_NAMES

    if value not in FACE_RESTORER_NAMES:
        raise ValueError(f"face_restoration_model must be one of {list(FACE_RESTORER_NAMES)}, got {value!r}.")
    return value


def _check_code_former_weight(value: Any) -> float:
    from pipelines.face_restoration import check_face_restoration_weight

    return check_face_restoration_weight(value, "code_former_weight")


def _as_number(value: Any) -> Any:
    """An infotext's "0.5" as 0.5; anything else as it is, for the pipeline's check to name."""
    try:
        return float(value) if isinstance(value, str) else value
    except ValueError:
        return value


def hires_refiner_pass(values: dict[str, Any]) -> str:
    """`HiresParams.hires_fix_refiner_pass` from option values (Settings, then override_settings), checked here because
    an override value has not been through `/sdapi/v1/options`."""
    return SETTABLE[HIRES_REFINER_PASS_KEY](values.get(HIRES_REFINER_PASS_KEY,
                                                       SAMPLER_OPTION_DEFAULTS[HIRES_REFINER_PASS_KEY]))


def token_merging_ratio_hr(values: dict[str, Any]) -> float:
    """`HiresParams.token_merging_ratio_hr` from option values (Settings, then override_settings), checked here because
    an override value has not been through `/sdapi/v1/options`."""
    return SETTABLE[TOME_HR_KEY](values.get(TOME_HR_KEY, SAMPLER_OPTION_DEFAULTS[TOME_HR_KEY]))


def _check_token_merging_ratio_hr(value: Any) -> float:
    from pipelines.approx.tome_unet import check_tome_ratio

    try:
        return check_tome_ratio(value)
    except ValueError as error:
        raise ValueError(f"{TOME_HR_KEY} (Token merging ratio for high-res pass; 0 = the first pass's): {error}") \
            from None


def _check_hires_refiner_pass(value: Any) -> str:
    from pipelines.hires import check_hires_refiner_pass

    return check_hires_refiner_pass(value)


def img2img_noise_values(values: dict[str, Any]) -> dict[str, Any]:
    """`Img2ImgParams.initial_noise_multiplier` / `img2img_extra_noise` from option values (checked by the pipeline)."""
    return {key: values.get(key, default) for key, default in IMG2IMG_NOISE_DEFAULTS.items()}


def _check_img2img_noise(key: str):
    def check(value: Any) -> float:
        from pipelines.img2img_noise import check_img2img_noise

        check_img2img_noise(**{**IMG2IMG_NOISE_DEFAULTS, key: value})
        return float(value)
    return check


def _check_sampler_parameter(key: str):
    """One of A1111's Sampler parameters, checked by the pipeline's own rule (`check_sampler_parameters`)."""
    def check(value: Any):
        if key in _SAMPLER_INTEGERS and isinstance(value, float) and value.is_integer():
            value = int(value)  # "uni_pc_order": 3.0 from a JSON client
        check_sampler_parameters(SamplerParameters(**{key: value}))
        return float(value) if key in _SAMPLER_NUMBERS else value
    return check


DEFAULT_CONTROLNET_UNITS = 3  # sd-webui-controlnet's default for `control_net_unit_count`
MAX_CONTROLNET_UNITS = 4  # pipelines.controlnet.ControlNetLimits().max_units


# A1111's Settings > Upscaling tile size / overlap pairs (0 = no tiling): ESRGAN_* for ESRGAN, Real-ESRGAN and HAT
# files, SWIN_* for SwinIR (its SwinIR extension's options), DAT_* for DAT, SCUNET_* for ScuNET
# (pipelines.model_upscale.TILE_OPTIONS); each pair checked together, the overlap must stay under half its tile.
# A1111's defaults: 192 and 8, SCUNET_tile 256 (A1111_TILING_DEFAULTS).
UPSCALER_TILE_OPTIONS = ("ESRGAN", "SWIN", "DAT", "SCUNET")
UPSCALER_TILING_DEFAULTS = {key: value for option in UPSCALER_TILE_OPTIONS
                            for key, value in zip((f"{option}_tile", f"{option}_tile_overlap"),
                                                  A1111_TILING_DEFAULTS[option])}
SWIN_COMPILE_KEY = "SWIN_torch_compile"  # A1111's "Use torch.compile to accelerate SwinIR" (off by default)
DAT_ENABLED_KEY = "dat_enabled_models"  # A1111 1.8+: which DAT release entries /sdapi/v1/upscalers lists


def _check_tiling_number(key: str, top: int):
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
            raise ValueError(f"{key} must be an integer in [0, {top}] pixels, got {value!r}.")
        return value
    return check


def _check_unit_count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONTROLNET_UNITS:
        raise ValueError(f"control_net_unit_count must be an integer in [1, {MAX_CONTROLNET_UNITS}], got {value!r}.")
    return value


# A1111's Settings > Stable Diffusion prompt options, with its defaults; checked by the prompt encoder's own checks.
PROMPT_OPTION_DEFAULTS = {"emphasis": "Original", "comma_padding_backtrack": 20, "sdxl_clip_l_skip": False}
PROMPT_OPTION_KEYS = tuple(PROMPT_OPTION_DEFAULTS)


def _check_emphasis_option(value: Any) -> str:
    from mixkit.prompts.emphasis import check_emphasis

    return check_emphasis(value)


def _check_comma_option(value: Any) -> int:
    from mixkit.prompts.encoder import check_comma_backtrack

    return check_comma_backtrack(value)


# A1111's Settings > Infotext (and its Lora / Textual Inversion extensions' infotext options), with its defaults:
# which model, VAE, version, user, LoRA and embedding details each image's infotext tells (pipelines.infotext_options).
INFOTEXT_OPTION_KEYS = tuple(INFOTEXT_OPTION_DEFAULTS)

SETTABLE = {
    "CLIP_stop_at_last_layers": _check_clip_skip,
    **{key: _check_bool(key) for key in INFOTEXT_OPTION_KEYS},
    "emphasis": _check_emphasis_option,
    "comma_padding_backtrack": _check_comma_option,
    "sdxl_clip_l_skip": _check_bool("sdxl_clip_l_skip"),  # A1111's "Clip skip SDXL" (Settings > Stable Diffusion)
    "samples_save": _check_bool("samples_save"),
    "live_previews_enable": _check_bool("live_previews_enable"),
    # A1111's grid options (both default True): a result of 2+ images gets a grid first in the UI's gallery (and in
    # an API response with save_images: true; A1111's API sets do_not_save_grid otherwise), saved as grid-NNNN.png.
    "return_grid": _check_bool("return_grid"),
    "grid_save": _check_bool("grid_save"),
    # A1111's Settings > Saving images: where each saved image's infotext goes (pipelines.png.InfotextWriting)
    "enable_pnginfo": _check_bool("enable_pnginfo"),
    "save_txt": _check_bool("save_txt"),
    # A1111's Settings > Saving images/grids "Font for image grids that have text" (X/Y/Z plot, Prompt matrix legends)
    "font": _check_font_option,
    "show_progress_every_n_steps": _check_preview_every,
    "control_net_unit_count": _check_unit_count,  # sd-webui-controlnet's key; the UI uses it when it is built
    # sd-webui-controlnet's too: how many ControlNet / IP-Adapter models stay loaded (pipelines.unit_model_cache)
    CACHE_SIZE_KEY: check_cache_size,
    # A1111's Settings > Optimizations: skip the negative prompt on some steps (approximate; see pipelines.uncond_skip)
    **{key: _check_uncond_skip(key) for key in UNCOND_SKIP_KEYS},
    "eta_ancestral": _check_eta("eta_ancestral"),
    "eta_ddim": _check_eta("eta_ddim"),
    "eta_noise_seed_delta": _check_ensd,
    RNG_SOURCE_KEY: lambda value: check_rng_source(value, RNG_SOURCE_KEY),
    "img2img_fix_steps": _check_bool("img2img_fix_steps"),
    COLOR_CORRECTION_KEY: _check_bool(COLOR_CORRECTION_KEY),
    BEFORE_COLOR_CORRECTION_KEY: _check_bool(BEFORE_COLOR_CORRECTION_KEY),
    INPAINTING_MASK_WEIGHT_KEY: _check_eta(INPAINTING_MASK_WEIGHT_KEY),  # a number in [0, 1], as the etas
    HIRES_REFINER_PASS_KEY: _check_hires_refiner_pass,
    TOME_HR_KEY: _check_token_merging_ratio_hr,
    REFINER_BY_STEPS_KEY: _check_bool(REFINER_BY_STEPS_KEY),
    OLD_SCHEDULING_KEY: _check_bool(OLD_SCHEDULING_KEY),
    TILING_KEY: _check_bool(TILING_KEY),
    **{key: (lambda value, key=key: check_hypertile_option(key, value)) for key in HYPERTILE_OPTION_DEFAULTS},
    "face_restoration": _check_bool("face_restoration"),
    "face_restoration_model": _check_face_restoration_model,
    "code_former_weight": _check_code_former_weight,
    "face_restoration_unload": _check_bool("face_restoration_unload"),
    "save_images_before_face_restoration": _check_bool("save_images_before_face_restoration"),
    **{key: _check_sampler_parameter(key) for key in SAMPLER_PARAMETER_DEFAULTS},
    **{key: _check_img2img_noise(key) for key in IMG2IMG_NOISE_DEFAULTS},
    **{key: (lambda value, key=key: check_option_value(key, value)) for key in OPTION_KEYS},
    **{key: _check_tiling_number(key, 2047 if key.endswith("_overlap") else 4096) for key in UPSCALER_TILING_DEFAULTS},
    SWIN_COMPILE_KEY: _check_bool(SWIN_COMPILE_KEY),
    DAT_ENABLED_KEY: check_dat_enabled_models,
    # A1111's Settings > Training "Saves Optimizer state as separate *.optim file" (hypernetwork training, off)
    "save_optimizer_state": _check_bool("save_optimizer_state"),
    # A1111's Settings > Interrogate (POST /sdapi/v1/interrogate, the img2img tab's Interrogate CLIP)
    **{key: check_interrogate_option(key) for key in INTERROGATE_OPTION_KEYS},
    **{key: check_deepbooru_option(key) for key in DEEPBOORU_OPTION_DEFAULTS},  # and its Interrogate DeepBooru
}
SIZE_KEYS = ("default_width", "default_height")  # the defaults that start at the loaded model's native size
MODEL_KEY = "sd_model_checkpoint"
VAE_KEY = "sd_vae"  # like the model key, applied by the caller: it loads a file
PRESET_KEY = "performance_preset"  # applied by the caller too: switching reloads the model (see ServerState)
CALLER_APPLIED = (MODEL_KEY, VAE_KEY, PRESET_KEY)
# Reported by GET /options (ServerState.options_snapshot) but never set: A1111 rewrites its sd_checkpoint_hash at every
# checkpoint load and accepts any value posted, so a whole GET body posted back (even one read before another client
# switched models) passes; the value is ignored.
REPORTED_ONLY = ("sd_checkpoint_hash",)


def check_settable(key: str, value: Any) -> Any:
    """The checked value of the settable option `key` (an API change or a settings file's entry).

    Python's json reads NaN and Infinity: kept, GET /options (and the settings file) could no longer be written as
    JSON. s_tmax alone takes infinity in Python (`SamplerParameters`); as an option A1111 spells that 0.
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"Option {key!r} is {value}, which is not a JSON number; send a finite number"
                         + (" (0 means infinity)." if key == "s_tmax" else "."))
    return SETTABLE[key](value)


class ServerOptions:
    """Current option values; the model, VAE and preset keys are handled by the caller (they load models)."""

    def __init__(self, output_dir: str, preview_every: int, *, limits: GenerationLimits | None = None,
                 settings_file: str | None = None) -> None:
        self._lock = threading.Lock()
        self.limits = limits or GenerationLimits()
        self.settings_file = settings_file
        self._values: dict[str, Any] = {
            "sd_vae": "Automatic",
            "samples_save": True,
            "return_grid": True,
            "grid_save": True,
            "enable_pnginfo": True,
            "save_txt": False,
            "font": "",
            "samples_format": "png",
            "outdir_samples": output_dir,
            "outdir_txt2img_samples": output_dir,
            "outdir_img2img_samples": output_dir,
            "CLIP_stop_at_last_layers": 1,
            **PROMPT_OPTION_DEFAULTS,
            **INFOTEXT_OPTION_DEFAULTS,
            "live_previews_enable": preview_every > 0,
            "show_progress_every_n_steps": preview_every,
            **SAMPLER_OPTION_DEFAULTS,
            "control_net_unit_count": DEFAULT_CONTROLNET_UNITS,
            CACHE_SIZE_KEY: DEFAULT_CACHE_SIZE,
            **UPSCALER_TILING_DEFAULTS,
            SWIN_COMPILE_KEY: False,
            DAT_ENABLED_KEY: list(DAT_RELEASE_NAMES),
            "save_optimizer_state": False,
            **UNCOND_SKIP_OFF,
            **INTERROGATE_OPTION_DEFAULTS,
            **DEEPBOORU_OPTION_DEFAULTS,
            PRESET_KEY: "exact",
            **options_from_defaults(GenerationDefaults()),
        }
        self._adopted: set[str] = set()  # size defaults taken from the loaded model, not chosen by the user
        # every value each size default was given by a model (a page opened before a switch still shows an older one)
        self._adopted_values: dict[str, set] = {}
        # saved values the server starts without (a grid font file that went missing), kept in the settings file
        # until the user sets the key again, so the choice comes back once the file does
        self._unusable_saved: dict[str, Any] = {}
        saved = self._read_saved(settings_file) if settings_file else {}
        self._values.update(saved)
        self._chosen = set(saved)  # keys the user chose: in the settings file, or changed since
        self._watchers: dict[str, list] = {}  # key -> callbacks told each new value (`watch`)

    def watch(self, key: str, callback) -> None:
        """Call `callback(value)` after every `apply` that sets `key` (an API POST or the Settings tab), so what
        holds a setting's effect (a cache's size) follows it at once, not at its next use."""
        self._watchers.setdefault(key, []).append(callback)

    def adopt_native_size(self, size: int) -> None:
        """Make the size defaults the user has not chosen the loaded model's native size (64 px for mixkit-tiny-sd,
        512 for SD 1.5, 1024 for SDXL); called at start and after every model switch, so they follow the model.

        A size the limits refuse gives those keys the usual default (A1111's 512) instead. Adopted values are
        never written to the settings file, and they stay adopted until the user sets another value (`apply`)."""
        with self._lock:
            keys = [key for key in SIZE_KEYS if key not in self._chosen]
            values = dict(self._values)
        usual = options_from_defaults(GenerationDefaults())
        for candidate in ({key: size for key in keys}, {key: usual[key] for key in keys}):
            try:
                check_generation_defaults(defaults_from_options({**values, **candidate}), self.limits)
            except ValueError:
                continue
            with self._lock:
                self._values.update(candidate)
                self._adopted.update(candidate)
                for key, value in candidate.items():
                    self._adopted_values.setdefault(key, set()).add(value)
            return

    def snapshot(self, model_title: str | None) -> dict[str, Any]:
        with self._lock:
            values = dict(self._values)
        values[MODEL_KEY] = model_title
        return values

    def remembered(self, key: str) -> Any:
        """A value the settings file (or a change since) holds for a key with no default, such as the checkpoint."""
        with self._lock:
            return self._values.get(key)

    def get(self, key: str) -> Any:
        with self._lock:
            return self._values[key]

    def uncond_skip(self) -> dict[str, Any]:
        """The NGMS / Skip Early CFG settings every generation starts from (`uncond_skip_values`)."""
        with self._lock:
            return uncond_skip_values(self._values)

    def sampler_params(self, sampler: str) -> dict[str, Any]:
        """The eta / ENSD params the Settings give a generation with `sampler` (`sampler_option_params`)."""
        with self._lock:
            values = dict(self._values)
        return sampler_option_params(sampler, values)

    def prompt_options(self) -> dict[str, Any]:
        """emphasis, comma_padding_backtrack and sdxl_clip_l_skip as the Settings hold them (Txt2ImgParams fields of
        those names)."""
        with self._lock:
            return {key: self._values[key] for key in PROMPT_OPTION_KEYS}

    def infotext_settings(self) -> dict[str, Any]:
        """The Settings > Infotext switches as option values (`INFOTEXT_OPTION_KEYS`), for `to_*_params`."""
        with self._lock:
            return {key: self._values[key] for key in INFOTEXT_OPTION_KEYS}

    def infotext_options(self) -> InfotextOptions:
        """The Settings > Infotext switches as the `Txt2ImgParams.infotext_options` every generation takes."""
        return InfotextOptions(**self.infotext_settings())

    def sampler_options(self) -> dict[str, Any]:
        """The options the samplers read (`SAMPLER_OPTION_KEYS`: eta, ENSD, img2img_fix_steps), for `to_*_params`."""
        with self._lock:
            return {key: self._values[key] for key in SAMPLER_OPTION_KEYS}

    def generation_defaults(self) -> GenerationDefaults:
        """What requests that omit sampler/scheduler/steps/CFG/size get, and what the UI starts with."""
        with self._lock:
            return defaults_from_options(self._values)

    def check_update(self, changes: Any) -> dict[str, Any]:
        """Validated copies of the changes (model, VAE and preset keys excluded); raises ValueError on any bad key/value."""
        if not isinstance(changes, dict):
            raise ValueError(f"The options body must be a JSON object, got {type(changes).__name__}.")
        checked = {}
        for key, value in changes.items():
            if key in CALLER_APPLIED or key in REPORTED_ONLY:
                continue
            if key not in SETTABLE:
                with self._lock:
                    unchanged = key in self._values and self._values[key] == value
                if unchanged:  # a client posting back the whole GET /options body, one key changed
                    continue
                # An unknown key is refused, as A1111 refuses it (its `opts.set` raises KeyError: a 500, after the
                # body's earlier keys were set); here a 422 naming it, before anything changes.
                settable = sorted([*CALLER_APPLIED, *SETTABLE])
                if key in self._values:
                    raise ValueError(f"Option {key!r} cannot be set over the API (fixed on this server; output folders "
                                     f"come from --output-dir); nothing was changed. Settable: {settable}.")
                raise ValueError(f"Option {key!r} is not a setting of this server (a typo, or an A1111 extension's "
                                 f"option); nothing was changed. Remove it from the body; settable: {settable}.")
            checked[key] = check_settable(key, value)
        with self._lock:
            merged = {**self._values, **checked}
        for keys, check in combined_checks(self.limits):
            if any(key in keys for key in checked):
                check(merged)
        return checked

    def interrogate_settings(self):
        """The Settings > Interrogate values as `mixkit.interrogate.InterrogateSettings`."""
        with self._lock:
            return interrogate_settings(self._values)

    def deepbooru_settings(self):
        """The Settings > Interrogate DeepBooru values as `mixkit.interrogate.DeepbooruSettings`."""
        with self._lock:
            return deepbooru_settings(self._values)

    def infotext_writing(self):
        """Where the Settings put a saved image's infotext (enable_pnginfo, save_txt), as `save_png` takes it."""
        from pipelines.png import InfotextWriting

        with self._lock:
            return InfotextWriting(pnginfo=self._values["enable_pnginfo"], txt=self._values["save_txt"])

    def upscaler_tiling(self) -> dict[str, tuple[int, int]]:
        """How model upscalers split an image, per option pair: {"ESRGAN": (ESRGAN_tile, ESRGAN_tile_overlap),
        "SWIN": (...), "DAT": (...), "SCUNET": (...)} (`register_model_upscalers`' `tiling`)."""
        with self._lock:
            return {option: (self._values[f"{option}_tile"], self._values[f"{option}_tile_overlap"])
                    for option in UPSCALER_TILE_OPTIONS}

    def apply(self, checked: dict[str, Any], *, whole_form: bool = False) -> None:
        """Make checked changes current; with a settings file, saved first, so a failed write changes nothing.

        `whole_form`: the changes are a form that sends every field (the Settings tab's Apply), so an adopted size
        default sent back with a value a model gave it (the current one, or an earlier model's on a page opened before
        a switch) is not a choice: it stays adopted at the current model's size, follows the next model and is not
        saved. Otherwise (an API POST, which names what it sets, as A1111 saves it) and for any other
        value, it is the user's: saved, and kept across model switches."""
        with self._lock:
            if whole_form:
                checked = {key: value for key, value in checked.items()
                           if not (key in self._adopted and value in self._adopted_values.get(key, ()))}
            if self.settings_file and any(key in PERSISTED for key in checked):
                from webui.settings_file import write_settings_file

                current = {key: value for key, value in self._values.items() if key not in self._adopted}
                kept = {key: value for key, value in self._unusable_saved.items() if key not in checked}
                saved = {key: value for key, value in {**current, **checked, **kept}.items() if key in PERSISTED}
                write_settings_file(self.settings_file, saved)
            for key in checked:
                self._unusable_saved.pop(key, None)
            self._values.update(checked)
            self._adopted.difference_update(checked)
            self._chosen.update(checked)
        from pipelines.model_upscale import set_model_upscaler_tiling, set_swinir_compile

        for option, pair in self.upscaler_tiling().items():
            if f"{option}_tile" in checked or f"{option}_tile_overlap" in checked:
                set_model_upscaler_tiling(*pair, option=option)  # the registered files' entries tile this way now
        if SWIN_COMPILE_KEY in checked:
            set_swinir_compile(checked[SWIN_COMPILE_KEY])
        for key, value in checked.items():
            for callback in self._watchers.get(key, ()):
                callback(value)

    def _read_saved(self, path: str) -> dict[str, Any]:
        """The known keys of the settings file, each checked as an API change would be; ValueError naming file and key."""
        from webui.settings_file import read_settings_file

        saved = {key: value for key, value in read_settings_file(path).items() if key in PERSISTED}
        checked = {}
        for key, value in saved.items():
            try:
                if key in (MODEL_KEY, VAE_KEY):
                    if not isinstance(value, str) or not value.strip():
                        raise ValueError(f"{key} must be a name from the models / VAE list, got {value!r}.")
                    checked[key] = value
                    continue
                checked[key] = check_preset(value) if key == PRESET_KEY else check_settable(key, value)
            except ValueError as error:
                if key == FONT_KEY:
                    # A1111 draws with its default font when the chosen one cannot be loaded; a font file removed
                    # or moved since it was chosen must not keep the server from starting
                    self._unusable_saved[key] = value
                    logger.warning("Settings file %r, key %r: %s Grid legends are drawn in the automatic font "
                                   "until the file is back or another font is set.", path, key, error)
                    continue
                raise ValueError(f"Settings file {path!r}, key {key!r}: {error} Fix the value or delete the key.") from None
        merged = {**self._values, **checked}
        for keys, check in combined_checks(self.limits):
            try:
                check(merged)
            except ValueError as error:
                # a pair (ESRGAN_tile/_overlap) is named whole, one key may come from the defaults; of a larger
                # rule the file's keys, when few
                named = [repr(key) for key in (keys if len(keys) <= 3 else [k for k in keys if k in checked])]
                where = f", key{'s' * (len(named) > 1)} {' and '.join(named)}" if 0 < len(named) <= 3 else ""
                raise ValueError(f"Settings file {path!r}{where}: {error} Fix the values or delete the keys.") from None
        return checked


def combined_checks(limits: GenerationLimits) -> list[tuple[tuple[str, ...], Any]]:
    """The rules between options ((keys, check(values))): each key is checked alone by `SETTABLE`, but sigma_min <
    sigma_max, a size default within the limits for its sampler/steps, and each tile overlap (ESRGAN_, SWIN_, DAT_,
    SCUNET_)
    under half its tile hold only together. An API change and the settings file read at start go through the same
    list, so a file holding a pair the API would refuse (tile 16, overlap 8) is refused at start naming the file, not
    later by the upscaler."""
    from pipelines.model_upscale import check_tiling

    return [
        (tuple(SAMPLER_PARAMETER_DEFAULTS), lambda values: check_sampler_parameters(parameters_from_values(values))),
        (tuple(OPTION_KEYS), lambda values: check_generation_defaults(defaults_from_options(values), limits)),
        *(((f"{option}_tile", f"{option}_tile_overlap"),
           lambda values, option=option: check_tiling(values[f"{option}_tile"], values[f"{option}_tile_overlap"]))
          for option in UPSCALER_TILE_OPTIONS),
        (LENGTH_KEYS, interrogate_settings),  # min length <= max length
    ]


def check_preset(value: Any) -> str:
    from mixkit.runtime import PRESETS

    if not isinstance(value, str) or value not in PRESETS.names():
        raise ValueError(f"{PRESET_KEY} must be one of {PRESETS.names()}, got {value!r}.")
    return value


# The checkpoint and VAE are remembered too (A1111 restarts with the ones last chosen); they are written once a
# switch has loaded, and a saved name the folder no longer has falls back at start-up (`ServerState`).
PERSISTED = (*SETTABLE, PRESET_KEY, MODEL_KEY, VAE_KEY)
