"""A request's `infotext` field: the fields the request leaves out are read from it, as A1111 1.10's
`Api.apply_infotext` does, so posting an image's infotext reproduces the image.

Only fields absent from the request (pydantic's `model_fields_set`; a `null` counts as absent) are
filled; the request's own values always win. The infotext is read with mixkit's own parser
(`pipelines.infotext.parse_infotext`, A1111's reading with its defaults for missing keys). Values
are copied as they are and then checked like any request value, so an infotext this server cannot
reproduce (another hires sampler or schedule type) is refused by the usual checks, not half-applied.
Settings that A1111 pastes as `override_settings` (clip skip, NGMS, Skip Early CFG) go there unless the
request overrides them itself, as do A1111's Sampler parameters (`Schedule rho`, `Sigma churn`,
`Discard penultimate sigma`, `UniPC variant`, `Noise Schedule`, `Pad conds` ...: `pipelines.sampler_parameters`),
`Conditional mask weight`, `Hires refiner`, `Refiner switch by sampling steps` and `Old prompt editing timelines`
(`SETTING_KEYS`), and a written `RNG` (`randn_source`: NV or CPU noise). A1111 never switches the checkpoint from
an infotext (its `disable_weights_auto_swap` default), and neither does this server.
sd-webui-controlnet's unit keys (`ControlNet 0`, ...) are refused unless the request sends that unit itself in
`alwayson_scripts.controlnet` (A1111 writes the request's units over the infotext's): no infotext holds a
unit's control image (`check_controlnet_keys`).
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import ValidationError

from pipelines.approx.hypertile_settings import HYPERTILE_OPTION_DEFAULTS
from pipelines.approx.hypertile_settings import INFOTEXT_OPTIONS as HYPERTILE_INFOTEXT_OPTIONS
from pipelines.infotext_values import as_flag, as_integer, as_number, as_text
from pipelines.rng_source import SETTING_KEY as RNG_SOURCE_KEY
from webui.api_convert import INPAINTING_FILL
from webui.api_requests import Img2ImgRequest, Txt2ImgRequest
from pipelines.sampler_parameters import from_infotext as sampler_parameters_in_infotext


# A1111's img2img radio buttons (`type="index"`): the infotext holds the label, the request the label's index.
MASK_MODES = ("Inpaint masked", "Inpaint not masked")
MASKED_CONTENTS = tuple(INPAINTING_FILL.values())  # fill, original, latent noise, latent nothing
INPAINT_AREAS = ("Whole picture", "Only masked")


def _choice_index(text: object, labels: tuple[str, ...]) -> int:
    """The index of an A1111 radio label, as its paste sets an index radio; ValueError for another label."""
    value = str(text).strip()
    if value not in labels:
        raise ValueError(value)
    return labels.index(value)


# request field -> (infotext key as `parse_infotext` returns it, conversion): A1111's txt2img/img2img paste fields.
COMMON_FIELDS: dict[str, tuple[str, Callable[[object], Any]]] = {
    "prompt": ("Prompt", as_text),
    "negative_prompt": ("Negative prompt", as_text),
    "steps": ("Steps", as_integer),
    "cfg_scale": ("CFG scale", as_number),
    "seed": ("Seed", as_integer),
    "width": ("Size-1", as_integer),
    "height": ("Size-2", as_integer),
    "subseed": ("Variation seed", as_integer),
    "subseed_strength": ("Variation seed strength", as_number),
    "seed_resize_from_w": ("Seed resize from-1", as_integer),
    "seed_resize_from_h": ("Seed resize from-2", as_integer),
    "denoising_strength": ("Denoising strength", as_number),
    # A1111 1.6+'s refiner (processing_scripts/refiner.py writes and pastes both): the title is looked up among the
    # server's checkpoints by the conversion, as a refiner_checkpoint sent in the request is.
    "refiner_checkpoint": ("Refiner", as_text),
    "refiner_switch_at": ("Refiner switch at", as_number),
}
HIRES_FIELDS: dict[str, tuple[str, Callable[[object], Any]]] = {
    "hr_scale": ("Hires upscale", as_number),
    "hr_upscaler": ("Hires upscaler", as_text),
    "hr_second_pass_steps": ("Hires steps", as_integer),
    "hr_resize_x": ("Hires resize-1", as_integer),
    "hr_resize_y": ("Hires resize-2", as_integer),
    "hr_checkpoint_name": ("Hires checkpoint", as_text),
    "hr_sampler_name": ("Hires sampler", as_text),
    "hr_scheduler": ("Hires schedule type", as_text),  # A1111 writes it when the hires schedule differs
    "hr_prompt": ("Hires prompt", as_text),
    "hr_negative_prompt": ("Hires negative prompt", as_text),
}
IMG2IMG_FIELDS: dict[str, tuple[str, Callable[[object], Any]]] = {
    "image_cfg_scale": ("Image CFG scale", as_number),  # written for instruct-pix2pix checkpoints only
    "mask_blur": ("Mask blur", as_integer),
    "inpainting_mask_invert": ("Mask mode", lambda text: _choice_index(text, MASK_MODES)),
    "inpainting_fill": ("Masked content", lambda text: _choice_index(text, MASKED_CONTENTS)),
    "inpaint_full_res": ("Inpaint area", lambda text: bool(_choice_index(text, INPAINT_AREAS))),
    "inpaint_full_res_padding": ("Masked area padding", as_integer),
}
# infotext key -> (option key for override_settings, conversion), as A1111's infotext-to-setting mapping.
SETTING_KEYS: dict[str, tuple[str, Callable[[object], Any]]] = {
    "Clip skip": ("CLIP_stop_at_last_layers", as_integer),
    "NGMS": ("s_min_uncond", as_number),
    "NGMS all steps": ("s_min_uncond_all", as_flag),
    "Skip Early CFG": ("skip_early_cond", as_number),
    "ENSD": ("eta_noise_seed_delta", as_integer),  # A1111's paste maps it to the same setting
    "Emphasis": ("emphasis", as_text),  # written by A1111 when not "Original" (sd_hijack_clip)
    "Noise multiplier": ("initial_noise_multiplier", as_number),  # Settings > img2img (pipelines.img2img_noise)
    "Extra noise": ("img2img_extra_noise", as_number),
    "Conditional mask weight": ("inpainting_mask_weight", as_number),  # Settings > img2img, inpainting checkpoints
    "Hires refiner": ("hires_fix_refiner_pass", as_text),  # Settings > Stable Diffusion; written when not "second pass"
    "Token merging ratio hr": ("token_merging_ratio_hr", as_number),  # Settings > Optimizations: the hires pass's ToMe
    # Settings > Compatibility; A1111 writes it on every image made with the option on
    "Refiner switch by sampling steps": ("refiner_switch_by_sample_steps", as_flag),
    # Settings > Compatibility; A1111 writes it when the option changed a schedule
    "Old prompt editing timelines": ("use_old_scheduling", as_flag),
    "Tiling": ("tiling", as_flag),  # A1111's `tiling` option has infotext="Tiling"
    # A1111's Hypertile options carry infotext= names ("Hypertile U-Net: True", "Hypertile VAE max tile size: 256" ...)
    **{key: (option, as_integer if isinstance(HYPERTILE_OPTION_DEFAULTS[option], int)
             and not isinstance(HYPERTILE_OPTION_DEFAULTS[option], bool) else as_flag)
       for key, option in HYPERTILE_INFOTEXT_OPTIONS.items()},
    # the restorer that made the image; with it the paste turns restore_faces on (`apply_infotext`)
    "Face restoration": ("face_restoration_model", as_text),
    "VAE": ("sd_vae", as_text),  # A1111's sd_vae option has infotext="VAE"; a VAE other than the loaded one is refused
}


def check_controlnet_keys(written: dict, alwayson_scripts: dict | None) -> None:
    """Refuse the infotext's sd-webui-controlnet units (`ControlNet 0`, ...) that the request does not replace.

    In A1111 the infotext's unit settings become script args, and then `init_script_args` writes the request's
    `alwayson_scripts.controlnet.args[i]` over script arg slot i, so the request's unit i wins over the infotext's
    `ControlNet i` and an infotext unit past the request's units stays. Such a unit has no control image (no
    infotext holds one), so here it is refused rather than dropped: the image would silently lack its control."""
    from webui.api_controlnet import controlnet_args

    sent_units = len(controlnet_args(alwayson_scripts or {})[0])
    for key in written:
        prefix, _, number = key.partition(" ")
        if prefix == "ControlNet" and number.isdigit() and int(number) >= sent_units:
            raise ValueError(f"infotext: {key}: a ControlNet unit's control image cannot come from an infotext; send "
                             f"the unit, with its image, in alwayson_scripts.controlnet (as args[{number}]).")


def check_approximation_keys(written: dict, running=None) -> None:
    """Refuse an infotext recording approximations (mixkit's DeepCache, TAESD decode, int8, VAE tiling; A1111's Token
    merging ratio) other than those the server's model runs (`running`, its `OptimizationLabels`; None: exact): the
    image would differ, and the request has no field that could turn them on. A1111's `Token merging ratio hr` is
    not one of them: it goes to override_settings (`token_merging_ratio_hr`), which the hires pass runs."""
    from pipelines.approx.labels import OptimizationLabels

    try:
        wanted = OptimizationLabels.from_infotext(written).approximations()
    except ValueError as error:
        raise ValueError(f"{error}; fix the infotext or remove the key.") from None
    have = (running or OptimizationLabels()).approximations()
    if wanted != have:
        runs = ", ".join(have) or "the exact model, no approximation"
        raise ValueError(f"infotext: it records {', '.join(wanted) or 'no approximation'}, but this "
                         f"server runs {runs}, so the image would differ; remove those keys (DeepCache, VAE Decoder, "
                         "Token merging ratio, UNet/VAE quantization, VAE tiling) to generate without them, or "
                         "reproduce it with `mixkit generate --infotext`, which applies them.")


def apply_infotext(request: Txt2ImgRequest, lora_library=None, running_labels=None) -> Txt2ImgRequest:
    """The request with the fields it left out filled from its `infotext`; unchanged without one.

    A prompt taken from the infotext has its `<lora:...>` tags re-linked through `Lora hashes` to the files of
    `lora_library` (a `mixkit.lora.LoraLibrary`) with those hashes, as A1111's paste does. Approximations it records
    must be those the server's model runs (`running_labels`, `check_approximation_keys`).
    Raises ValueError naming the infotext key whose value has the wrong type.
    """
    if not request.infotext:
        return request
    from pipelines.infotext import parse_infotext
    from pipelines.infotext_samplers import sampler_and_schedule

    parsed = parse_infotext(request.infotext)
    written = parse_infotext(request.infotext, defaults=False)  # the keys the text itself has
    check_controlnet_keys(written, request.alwayson_scripts)
    check_approximation_keys(written, running_labels)
    if written.get("FreeU") not in (None, ""):  # mixkit's key; the API has no FreeU field (A1111 has none either)
        raise ValueError(f"infotext: FreeU: {written['FreeU']}: the image was made with FreeU, which the API cannot "
                         "switch on, so it would differ; remove the key, or reproduce it with `mixkit generate "
                         "--infotext` (or the Python API's freeu=)")
    sent = request.model_fields_set
    fields = dict(COMMON_FIELDS)
    fields.update(IMG2IMG_FIELDS if isinstance(request, Img2ImgRequest) else HIRES_FIELDS)
    filled: dict[str, Any] = {}
    for name, (key, convert) in fields.items():
        if name in sent or key not in parsed:
            continue
        try:
            filled[name] = convert(parsed[key])
        except ValueError:
            raise ValueError(f"infotext: {key}: {parsed[key]!r} is not a valid {name}; fix the infotext or send "
                             f"{name} in the request.") from None
    if "prompt" in filled and lora_library is not None:
        from mixkit.lora.relink import library_lookup, relink_lora_tags

        filled["prompt"] = relink_lora_tags(filled["prompt"], written.get("Lora hashes"), library_lookup(lora_library))
    sampler, schedule = sampler_and_schedule(parsed)
    if sampler is not None and not {"sampler_name", "sampler_index"} & sent:
        filled["sampler_name"] = sampler
        if "scheduler" not in sent:
            filled["scheduler"] = schedule
    overrides = dict(request.override_settings or {})
    etas = {key: parsed[key] for key in ("Eta DDIM", "Eta") if key in written}  # each written when not its default
    # A hires pass with a sampler of its own reads its own kind's eta: then each key goes to its Settings eta
    # (eta_ddim / eta_ancestral), as A1111's paste does with both; otherwise the one key is the request's eta
    by_kind = len(etas) > 1 or "Hires sampler" in written
    for key, value in etas.items() if "eta" not in sent else ():
        try:
            number = as_number(value)
        except ValueError:
            raise ValueError(f"infotext: {key}: {value!r} is not a valid eta; fix the infotext or send eta in the "
                             "request.") from None
        if by_kind:
            overrides.setdefault("eta_ddim" if key == "Eta DDIM" else "eta_ancestral", number)
        else:
            filled["eta"] = number
    if not isinstance(request, Img2ImgRequest) and "enable_hr" not in sent:
        # A1111's paste ticks hires fix for a denoising strength together with a hires recipe.
        recipe = any(key in written for key in ("Hires upscale", "Hires upscaler", "Hires resize-1"))
        filled["enable_hr"] = "Denoising strength" in written and recipe
    if "Face restoration" in written and "restore_faces" not in sent:
        filled["restore_faces"] = True
    for key, (option, convert) in SETTING_KEYS.items():
        if key in parsed and option not in overrides:
            try:
                overrides[option] = convert(parsed[key])
            except ValueError:
                raise ValueError(f"infotext: {key}: {parsed[key]!r} is not a valid {option}; fix the infotext or "
                                 f"set {option} in override_settings.") from None
    if "RNG" in written and RNG_SOURCE_KEY not in overrides:
        # A1111 pastes `RNG` into randn_source. Only a written key: A1111 writes it when the source is not its default
        # GPU, and a missing key (GPU noise, which this server cannot draw) leaves the server's setting in force.
        overrides[RNG_SOURCE_KEY] = as_text(written["RNG"])
    for option, value in sampler_parameters_in_infotext(written).items():
        if option not in sent:  # "Sigma churn" & co: override_settings, as A1111's paste; a request field wins
            overrides.setdefault(option, value)
    if isinstance(request, Img2ImgRequest):  # A1111's Soft inpainting script fields (its infotext_fields)
        from webui.api_soft_inpainting import with_infotext_soft_inpainting

        scripts = with_infotext_soft_inpainting(request.alwayson_scripts, written)
        if scripts is not None:
            filled["alwayson_scripts"] = scripts
    if overrides != (request.override_settings or {}):
        filled["override_settings"] = overrides
    values = {**request.model_dump(include=sent), **filled}
    try:
        return type(request).model_validate(values)
    except ValidationError as error:  # pydantic's multi-line dump would otherwise be the 422's message
        problems = "; ".join(f"{'.'.join(map(str, item['loc']))}: {item['msg']}" for item in error.errors())
        raise ValueError(f"infotext: the fields it fills are not valid ({problems}); fix the infotext or send those "
                         "fields in the request.") from None
