"""Infotext -> form values for PNG Info's "Send to txt2img/img2img", as A1111's paste does.

Values are converted to the widgets' types and clamped to nothing: a value outside the limits
is left out (the form keeps its current value) and reported, rather than silently changed.
"""

from __future__ import annotations

from typing import Callable

from pipelines.params import GenerationLimits


def _int(text: object) -> int | None:
    try:
        return int(str(text).strip())
    except ValueError:
        return None


def _float(text: object) -> float | None:
    try:
        return float(str(text).strip())
    except ValueError:
        return None


def infotext_to_form_values(text: str, limits: GenerationLimits, sampler_names: list[str],
                            schedule_names: list[str], current_model: str | None = None,
                            current_model_aliases: frozenset[str] = frozenset(),
                            size_multiple: int = 8, hires_upscalers: list[str] | None = None,
                            lora_name_of: Callable[[str], str | None] | None = None,
                            current_emphasis: str | None = None, current_vae_names: frozenset[str] | None = None,
                            vae_choice: Callable[[str], str | None] | None = None, inpaint_fields: bool = False,
                            controlnet_units: int = 0, controlnet_model_of: Callable[[str], str | None] | None = None,
                            refiner_checkpoint_of: Callable[[str], str | None] | None = None
                            ) -> tuple[dict[str, object], list[str]]:
    """(field -> value for `GenerationWidgets` fields, "denoising_strength" and the Hires. fix fields, notes about
    skipped values).

    `hires_upscalers` (the Hires. fix upscaler choices) says the target form has Hires. fix controls: the
    recorded hires recipe fills them, as A1111's paste does; without it the recipe is only named in a note.
    Every recorded value the form cannot take is named in a note, so a paste never looks complete when the image
    cannot be reproduced from the form alone (another checkpoint or VAE, GPU noise, a hires pass).

    `lora_name_of` (short hash -> local LoRA name, e.g. `mixkit.lora.relink.library_lookup(library)`) re-links the
    prompt's `<lora:...>` tags through the infotext's `Lora hashes` to renamed local files, as A1111's paste does.

    `current_emphasis` (the Settings' "Emphasis mode"; None: A1111's default "Original") is compared with the image's
    (`emphasis_note`). `current_vae_names` (the names of the VAE that decodes now, `ServerState.vae_names()`) and
    `vae_choice` (infotext `VAE:` -> the listed `sd_vae` value, `VaeCatalog.name_for_infotext`) decide the VAE note
    (`vae_note`); without them the note only names the image's VAE.

    `inpaint_fields` says the target form is img2img's, with its inpaint controls: Mask blur, Mask mode, Masked
    content, Inpaint area and Masked area padding are filled (`infotext_inpaint_values`), and the Soft inpainting
    accordion (`infotext_soft_inpainting_values`).

    `controlnet_units` (how many ControlNet units the form has) and `controlnet_model_of` (an infotext model name ->
    this server's ControlNet name, or None) fill those units from the infotext's `ControlNet N` keys, never their
    control image (`infotext_controlnet_values`).

    `refiner_checkpoint_of` (an infotext `Refiner` title -> this server's checkpoint title, or None) says the form has
    the Refiner accordion: `Refiner` and `Refiner switch at` fill it (`infotext_refiner_values`); without it the
    refiner is named in a note."""
    from pipelines.infotext import parse_infotext, split_infotext
    from pipelines.infotext_samplers import SCHEDULE_LABELS, sampler_and_schedule
    from webui.ui.widgets import widget_ranges

    parsed = parse_infotext(text)
    written = split_infotext(text)[2]  # the keys the text itself has, before A1111's defaults are added
    values, notes = _prompt_values(parsed, written, lora_name_of)
    numeric = {"steps": ("Steps", _int), "cfg_scale": ("CFG scale", _float), "seed": ("Seed", _int),
               "width": ("Size-1", _int), "height": ("Size-2", _int), "clip_skip": ("Clip skip", _int)}
    ranges = widget_ranges(limits)
    numbers, number_notes = _checked_numbers(parsed, numeric, ranges)
    values.update(numbers)
    notes += number_notes
    for field, key in (("width", "Size-1"), ("height", "Size-2")):
        if field in values and values[field] % size_multiple:
            notes.append(f"{key}: {values.pop(field)} is not a multiple of {size_multiple}; kept the current value.")
    seed_extras, seed_extra_notes = seed_extra_values(parsed, ranges, size_multiple)
    values.update(seed_extras)
    notes += seed_extra_notes
    sampler, schedule = sampler_and_schedule(parsed)
    if sampler is not None:
        if sampler in sampler_names:
            values["sampler"] = sampler
        else:
            from pipelines.samplers.catalog import refusal_reason

            reason = refusal_reason(sampler)  # an A1111 sampler refused here: say why, not just "not available"
            notes.append(f"{reason} Kept the current sampler." if reason else
                         f"Sampler {sampler!r} is not available here; kept the current sampler.")
    written_schedule = written.get("Schedule type")
    if written_schedule is not None and written_schedule not in SCHEDULE_LABELS:
        notes.append(f"Schedule type {written_schedule!r} is not an A1111 schedule type; kept the current schedule type.")
    elif schedule in schedule_names:
        values["schedule_type"] = schedule
    else:
        notes.append(f"Schedule type {schedule!r} is not available here; kept the current schedule type.")
    strength = _float(parsed.get("Denoising strength", ""))
    if strength is not None and 0 <= strength <= 1:
        values["denoising_strength"] = strength
    elif "Denoising strength" in parsed:
        notes.append(f"Denoising strength: {parsed['Denoising strength']!r} is outside [0, 1]; kept the current value.")
    if inpaint_fields:
        inpaint_values, inpaint_notes = infotext_inpaint_values(parsed)
        values.update(inpaint_values)
        notes += inpaint_notes
        from webui.ui.soft_inpainting_controls import infotext_soft_inpainting_values

        soft_values, soft_notes = infotext_soft_inpainting_values(parsed)
        values.update(soft_values)
        notes += soft_notes
        from webui.ui.image_cfg_controls import infotext_image_cfg_values

        image_cfg_values, image_cfg_notes = infotext_image_cfg_values(parsed)  # the img2img form's slider
        values.update(image_cfg_values)
        notes += image_cfg_notes
    if hires_upscalers is not None:
        from webui.ui.hires_controls import infotext_hires_values

        hires_values, hires_notes = infotext_hires_values(parsed, limits, hires_upscalers)
        values.update(hires_values)
        notes += hires_notes
    if refiner_checkpoint_of is not None:
        from webui.ui.refiner_controls import infotext_refiner_values

        refiner_values, refiner_notes = infotext_refiner_values(parsed, refiner_checkpoint_of)
        values.update(refiner_values)
        notes += refiner_notes
    notes += _reproduction_notes(parsed, current_model, current_model_aliases, hires_filled=hires_upscalers is not None,
                                 has_parameters=bool(written), refiner_filled=refiner_checkpoint_of is not None)
    notes += vae_note(parsed.get("VAE"), current_vae_names, vae_choice)
    notes += emphasis_note(parsed, parsed.get("Prompt", ""), parsed.get("Negative prompt", ""), current_emphasis)
    for key in ("Skip Early CFG", "NGMS", "NGMS all steps"):  # A1111 pastes these as setting overrides
        if key in parsed:
            notes.append(f"{key}: {parsed[key]} is a setting here (Settings > Optimizations), not a form field; "
                         "set it there to reproduce this image.")
    controlnet_values, notes_for_units = infotext_controlnet_values(parsed, controlnet_units, controlnet_model_of)
    values.update(controlnet_values)
    notes += notes_for_units
    from webui.ui.paste_ip_adapter import infotext_ip_adapter_values

    # mixkit's `IP-Adapter` keys take the units after the infotext's `ControlNet N` ones
    used = max((_controlnet_index(key) + 1 for key in parsed if _controlnet_index(key) is not None), default=0)
    ip_values, ip_notes = infotext_ip_adapter_values(parsed, used, controlnet_units, controlnet_model_of)
    values.update(ip_values)
    notes += ip_notes
    return values, notes


# A1111's `img2img_paste_fields` (modules/ui.py): (mask_blur, "Mask blur"), (inpainting_mask_invert, "Mask mode"),
# (inpainting_fill, "Masked content"), (inpaint_full_res, "Inpaint area"), (inpaint_full_res_padding, "Masked area
# padding"). The three radios take the labels the API reads too (`webui.api_infotext`); the sliders' ranges are the
# img2img tab's (A1111's: Mask blur 0..64, padding 0..256).
INPAINT_NUMBERS = {"mask_blur": ("Mask blur", 0, 64), "only_masked_padding": ("Masked area padding", 0, 256)}


def infotext_inpaint_values(parsed: dict) -> tuple[dict[str, object], list[str]]:
    """(img2img inpaint field -> value, notes) from a parsed infotext (`parse_infotext`, with A1111's defaults).

    A missing Mask mode / Masked content / Inpaint area / padding takes A1111's paste default (Inpaint masked,
    original, Whole picture, 32), as `parse_generation_parameters` fills them, so a txt2img infotext resets them;
    a missing Mask blur keeps the form's value, as A1111's paste does. A label or number the form cannot take is
    left out and named in a note."""
    from webui.api_infotext import INPAINT_AREAS, MASK_MODES, MASKED_CONTENTS

    values: dict[str, object] = {}
    notes: list[str] = []
    for field, key, labels in (("mask_mode", "Mask mode", MASK_MODES), ("inpainting_fill", "Masked content", MASKED_CONTENTS),
                               ("only_masked", "Inpaint area", INPAINT_AREAS)):
        if key not in parsed:
            continue
        label = str(parsed[key]).strip()
        if label not in labels:
            notes.append(f"{key}: {parsed[key]!r} is not one of {', '.join(labels)}; kept the current value.")
        else:
            values[field] = label == INPAINT_AREAS[1] if field == "only_masked" else label
    for field, (key, low, high) in INPAINT_NUMBERS.items():
        if key not in parsed:
            continue
        number = _int(parsed[key])
        if number is None or not low <= number <= high:
            notes.append(f"{key}: {parsed[key]!r} is not an integer in [{low}, {high}]; kept the current value.")
        else:
            values[field] = number
    return values, notes


# The UI unit's fields a `ControlNet N` infotext value fills: UI field -> the extension's field (`parse_unit` keys).
CONTROLNET_PASTE_FIELDS = {"preprocessor": "module", "model": "model", "weight": "weight", "start": "guidance_start",
                           "end": "guidance_end", "resize_mode": "resize_mode", "control_mode": "control_mode",
                           "pixel_perfect": "pixel_perfect", "processor_res": "processor_res",
                           "threshold_a": "threshold_a", "threshold_b": "threshold_b"}
# the UI sliders' (and API's) ranges; thresholds are the preprocessor's to check
CONTROLNET_RANGES = {"weight": (0.0, 2.0), "start": (0.0, 1.0), "end": (0.0, 1.0), "threshold_a": (-1e6, 1e6),
                     "threshold_b": (-1e6, 1e6)}


def controlnet_field(unit: int, field: str) -> str:
    """The form-value name of a ControlNet unit's field: "controlnet_0_weight"."""
    return f"controlnet_{unit}_{field}"


def infotext_controlnet_values(parsed: dict, unit_count: int, model_of: Callable[[str], str | None] | None
                               ) -> tuple[dict[str, object], list[str]]:
    """(ControlNet unit field -> value, notes) for the infotext's sd-webui-controlnet units (`ControlNet 0`, ...).

    As the extension's paste (scripts/infotext.py: `parse_unit` gives `enabled=True` and every field but the image),
    a unit the form has is enabled and every field the infotext holds is filled (module, model, weight, guidance
    window, resize and control mode, pixel perfect, processor res, thresholds). A unit whose Module is an IP-Adapter
    module (`ip-adapter_clip_sd15`, ...) is filled the same way: it is the extension's spelling of an image prompt.
    No infotext holds the control image (an IP-Adapter's reference picture), so each unit gets a note asking for it,
    naming what this server could not take; a unit the form does not have is only named."""
    from pipelines.controlnet.infotext import parse_unit
    from pipelines.preprocessors import PREPROCESSORS
    from webui.api_ip_adapter import IP_ADAPTER_MODULES, is_ip_adapter_module
    from webui.ui.paste_ip_adapter import reference_picture_note

    modules = PREPROCESSORS.names() + list(IP_ADAPTER_MODULES)  # the units' Preprocessor choices

    values: dict[str, object] = {}
    notes: list[str] = []
    for key in sorted((key for key in parsed if _controlnet_index(key) is not None), key=_controlnet_index):
        index = _controlnet_index(key)
        if index >= unit_count:
            notes.append(f"{key} ({parsed[key]}): this form has no ControlNet Unit {index}, and a unit's control "
                         "image is not in the infotext; the image cannot be reproduced without that unit.")
            continue
        try:
            unit = parse_unit(str(parsed[key]))
        except ValueError as error:
            notes.append(f"{key}: not read ({error}); set ControlNet Unit {index} by hand.")
            continue
        filled, left = {controlnet_field(index, "enabled"): True}, []
        for field, name in CONTROLNET_PASTE_FIELDS.items():
            if name not in unit:
                continue
            value = _controlnet_value(field, unit[name], modules, model_of)
            if value is None:
                left.append(f"{name} {unit[name]!r}")
            else:
                filled[controlnet_field(index, field)] = value
        values.update(filled)
        unused = [f"{_display(name)}: {value}" for name, value in unit.items()
                  if name not in CONTROLNET_PASTE_FIELDS.values()]
        needs = (reference_picture_note() if is_ip_adapter_module(unit.get("module")) else
                 "no infotext holds its control image; add it to the unit to reproduce the image")
        notes.append(f"{key}: ControlNet Unit {index} is enabled and filled from the infotext, but {needs}."
                     + (f" Not available here, so not set: {', '.join(left)}." if left else "")
                     + (f" The unit has no control for: {', '.join(unused)}." if unused else ""))
    return values, notes


def _controlnet_value(field: str, value: object, preprocessors: list[str], model_of):
    """The UI value for one ControlNet field, or None when this server or the unit's widget cannot take it."""
    if field == "preprocessor":
        from webui.api_controlnet import MODULE_ALIASES

        name = MODULE_ALIASES.get(str(value).lower(), value)  # the extension's names, as the API takes them
        return name if name in preprocessors else None
    if field == "model":
        return model_of(str(value)) if model_of is not None else None
    from webui.ui.controlnet_units import CONTROL_MODE_CHOICES, RESIZE_MODE_CHOICES

    if field in ("resize_mode", "control_mode"):
        choices = RESIZE_MODE_CHOICES if field == "resize_mode" else CONTROL_MODE_CHOICES
        return value if value in choices else None
    if field == "pixel_perfect":
        return value if isinstance(value, bool) else None
    if field == "processor_res":
        from pipelines.controlnet.resolution import PROCESSOR_RES_RANGE

        low, high = PROCESSOR_RES_RANGE
        return value if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high else None
    low, high = CONTROLNET_RANGES[field]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        return None
    return float(value)


def _display(field: str) -> str:
    """The extension's display name of a unit field ("guidance_start" -> "Guidance Start")."""
    return " ".join(word.capitalize() for word in field.split("_"))


def _controlnet_index(key: str) -> int | None:
    """N for an infotext key "ControlNet N" (the extension's unit keys), else None."""
    prefix, _, number = key.partition(" ")
    return int(number) if prefix == "ControlNet" and number.isdigit() else None


# A1111's paste fields for its Extra seed options (modules/ui.py: subseed, subseed_strength, seed_resize_from_w/h)
SEED_EXTRA_NUMBERS = {"subseed": ("Variation seed", _int), "subseed_strength": ("Variation seed strength", _float),
                      "seed_resize_from_w": ("Seed resize from-1", _int),
                      "seed_resize_from_h": ("Seed resize from-2", _int)}
# A1111's gallery Send buttons copy only these fields (`paste_field_names = ['Prompt', 'Negative prompt', 'Steps',
# 'Face restoration'] + ['Seed'] with send_seed`), plus the size of the image itself (send_size); both options are on
# by default. There is no Face restoration control here; the Extra seed options are sent too (`seed_extra_values`).
SENT_NUMBERS = {"steps": ("Steps", _int), "seed": ("Seed", _int)}


def seed_extra_values(parsed: dict, ranges: dict, size_multiple: int) -> tuple[dict[str, object], list[str]]:
    """The Extra seed options (Variation seed, Variation seed strength, Seed resize from) of a parsed infotext.

    An image without a variation or a seed resize had them off, so they are turned off rather than left as the form
    has them (A1111 keeps the form's, and a leftover strength then changes the next image unasked); a value out of
    the form's range, or a resize side off the size step, keeps the form's value and is named in a note."""
    off = {"subseed_strength": 0.0, "seed_resize_from_w": 0, "seed_resize_from_h": 0}
    values: dict[str, object] = {field: value for field, value in off.items()
                                 if SEED_EXTRA_NUMBERS[field][0] not in parsed}  # absent: off
    numbers, notes = _checked_numbers(parsed, SEED_EXTRA_NUMBERS, ranges)  # refused ones stay out: the form's stay
    values.update(numbers)
    for field, key in (("seed_resize_from_w", "Seed resize from-1"), ("seed_resize_from_h", "Seed resize from-2")):
        if field in values and values[field] % size_multiple:
            notes.append(f"{key}: {values.pop(field)} is not a multiple of {size_multiple}; kept the current value.")
    return values, notes


def infotext_to_sent_values(text: str, image_size: tuple[int, int], limits: GenerationLimits,
                            lora_name_of: Callable[[str], str | None] | None = None,
                            size_multiple: int = 8) -> tuple[dict[str, object], list[str]]:
    """(field -> value, notes) for a gallery's "Send to img2img / inpaint": the prompts, steps and seed of the chosen
    image's infotext, its Extra seed options, and the image's own size.

    A1111 sends Prompt, Negative prompt, Steps and Seed only; the variation seed, its strength and "Seed resize from"
    travel here too (`seed_extra_values`), since the seed alone does not reproduce the noise of an image made with
    them. Nothing else travels: the infotext's `Size` is the first pass's for a hires result and its `Denoising
    strength` the hires pass's, neither of which fits the picture sent.
    The size is rounded to the nearest multiple of `size_multiple` (ties upwards), as the browser snaps a value set
    on A1111's step-8 size sliders; the notes say when that changed it, and when a value is out of the form's range
    (the form then keeps its value)."""
    from pipelines.infotext import parse_infotext, split_infotext
    from webui.ui.widgets import widget_ranges

    ranges = widget_ranges(limits)
    values, notes = sent_size_values(image_size, ranges, size_multiple)
    if not text or not text.strip():  # no infotext: only the picture and its size travel
        return values, notes
    parsed = parse_infotext(text)
    prompts, prompt_notes = _prompt_values(parsed, split_infotext(text)[2], lora_name_of)
    numbers, number_notes = _checked_numbers(parsed, SENT_NUMBERS, ranges)
    seed_extras, seed_extra_notes = seed_extra_values(parsed, ranges, size_multiple)
    return {**prompts, **numbers, **seed_extras, **values}, [*prompt_notes, *number_notes, *seed_extra_notes, *notes]


def sent_size_values(image_size: tuple[int, int], ranges: dict, size_multiple: int) -> tuple[dict[str, int], list[str]]:
    """Width and height for the sent image's `image_size`, rounded to `size_multiple`; a note if rounded or refused."""
    width, height = image_size
    # HTML's range input snaps to the nearest step, the larger one on a tie (A1111's sliders start at a multiple of 8).
    rounded = {field: size_multiple * ((side + size_multiple // 2) // size_multiple)
               for field, side in (("width", width), ("height", height))}
    outside = [f"{field} {value}" for field, value in rounded.items()
               if not ranges[field].minimum <= value <= ranges[field].maximum]
    if outside:
        spec = ranges["width"]
        return {}, [f"Size: the image is {width}x{height}; {', '.join(outside)} is outside [{spec.minimum}, "
                    f"{spec.maximum}], so the form keeps its size and the image is resized to it."]
    if (rounded["width"], rounded["height"]) != (width, height):
        return rounded, [f"Size: the image is {width}x{height}; the form takes multiples of {size_multiple}, so it is "
                         f"set to {rounded['width']}x{rounded['height']} and the image is resized to that."]
    return rounded, []


def _prompt_values(parsed: dict, written: dict, lora_name_of) -> tuple[dict[str, object], list[str]]:
    """The prompt and negative prompt, LoRA tags re-linked through `Lora hashes` when `lora_name_of` is given."""
    values: dict[str, object] = {"prompt": parsed.get("Prompt", ""),
                                 "negative_prompt": parsed.get("Negative prompt", "")}
    notes: list[str] = []
    if lora_name_of is not None and written.get("Lora hashes"):
        values["prompt"], notes = _relink_loras(values["prompt"], written["Lora hashes"], lora_name_of)
    return values, notes


def _checked_numbers(parsed: dict, fields: dict, ranges: dict) -> tuple[dict[str, object], list[str]]:
    """`fields` (form field -> (infotext key, converter)) read from `parsed`; a value that is not a number or is
    outside the widget's range is left out and named in a note."""
    values: dict[str, object] = {}
    notes: list[str] = []
    for field, (key, convert) in fields.items():
        if key not in parsed:
            continue
        value = convert(parsed[key])
        spec = ranges[field]
        if value is None:
            kind = "an integer" if convert is _int else "a number"
            notes.append(f"{key}: {parsed[key]!r} is not {kind}; kept the current value.")
        elif not spec.minimum <= value <= spec.maximum:
            notes.append(f"{key}: {parsed[key]!r} is outside [{spec.minimum}, {spec.maximum}]; kept the current value.")
        else:
            values[field] = value
    return values, notes


def vae_note(written: str | None, current_vae_names: frozenset[str] | None,
             vae_choice: Callable[[str], str | None] | None) -> list[str]:
    """A note when the image's `VAE:` is not the VAE that decodes now: the listed `sd_vae` value to choose, or that
    this server has no such VAE.

    A1111's paste turns `VAE:` into an `sd_vae` override only when it differs from the current setting
    (`infotext_utils.connect_paste`, `paste_settings`: `if v == current_value: continue`); here the setting is not
    a form field, so the difference is a note. Without `current_vae_names`/`vae_choice` (nothing known about the
    server's VAEs) the note only names the image's VAE."""
    if not written:
        return []
    if current_vae_names is None or vae_choice is None:
        return [f"VAE: the image was decoded with {written!r}; choose it in Settings > SD VAE."]
    listed = vae_choice(written)
    if written in current_vae_names or (listed is not None and listed in current_vae_names):
        return []
    if listed is None:
        return [f"VAE: the image was decoded with {written!r}, which is not on this server (not listed in Settings > "
                "SD VAE); the image will differ."]
    return [f"VAE: the image was decoded with {written!r}; choose {listed!r} in Settings > SD VAE to reproduce it."]


def _uses_weights(text: str) -> bool:
    """A1111's `prompt_uses_emphasis`: a run of the text has a weight other than 1 (BREAK aside)."""
    from mixkit.prompts.attention import parse_prompt_attention

    try:
        runs = parse_prompt_attention(str(text))
    except ValueError:  # a weight that is not a number: the generation refuses it and says so
        return False
    return any(weight != 1.0 and run != "BREAK" for run, weight in runs)


def emphasis_note(parsed: dict, prompt: str, negative_prompt: str, current_emphasis: str | None) -> list[str]:
    """A note when the image's emphasis mode is not the Settings' one: "Emphasis" is a setting, applied by A1111's
    paste as a setting override, and no form field here.

    A1111 writes "Emphasis" only when it is not "Original"; its `parse_generation_parameters` reads a missing key as
    "Original" when the prompts use weights, so that case is noted too when Settings hold another mode."""
    from mixkit.prompts.emphasis import DEFAULT_EMPHASIS

    current = current_emphasis or DEFAULT_EMPHASIS
    image = parsed.get("Emphasis")
    if image is None and (_uses_weights(prompt) or _uses_weights(negative_prompt)):
        image = DEFAULT_EMPHASIS
    if image is None or image == current:
        return []
    return [f"Emphasis: {image}: the image was encoded with this Emphasis mode, a setting here (Settings > Stable "
            f"Diffusion: prompt options, now {current}), not a form field; set it there to reproduce the image."]


def _relink_loras(prompt: str, lora_hashes: str, lora_name_of) -> tuple[str, list[str]]:
    """The prompt with its LoRA tags re-linked by hash, and a note for each hashed LoRA no local file has."""
    from mixkit.lora.relink import parse_lora_hashes, relink_lora_tags

    found: dict[str, str | None] = {}

    def remembered(short_hash: str) -> str | None:
        if short_hash not in found:
            found[short_hash] = lora_name_of(short_hash)
        return found[short_hash]

    relinked = relink_lora_tags(prompt, lora_hashes, remembered)
    notes = [f"LoRA {name!r} (hash {short}): no local LoRA file has this hash; the tag is kept as written."
             for name, short in parse_lora_hashes(lora_hashes).items()
             if f"<lora:{name}:" in prompt and remembered(short) is None]
    return relinked, notes


def _reproduction_notes(parsed: dict, current_model: str | None, current_model_aliases: frozenset[str],
                        hires_filled: bool, has_parameters: bool, refiner_filled: bool = False) -> list[str]:
    """What else the image was made with, which the form does not carry.

    `hires_filled` / `refiner_filled`: the Hires. fix / Refiner controls took the recipe (their own notes cover it);
    `has_parameters`: the text had a parameters line (a bare prompt says nothing about the noise, so no RNG note)."""
    notes = []
    model = parsed.get("Model")
    # The infotext's "Model" is A1111's name_for_extra (file stem); the title carries the extension and hash.
    names = {current_model.split(" [", 1)[0], *current_model_aliases} if current_model else set()
    if model and current_model and model not in names:
        notes.append(f"Model: the image was made with {model!r}, the loaded checkpoint is {current_model!r}; "
                     "load it in Settings to reproduce the image.")
    hires = [key for key in ("Hires upscale", "Hires resize-1", "Hires resize-2", "Hires steps", "Hires upscaler")
             if key in parsed and str(parsed[key]) not in ("0", "")]  # the paste's defaults fill resize with 0
    if hires and not hires_filled:
        recipe = ", ".join(f"{key}: {parsed[key]}" for key in hires)
        # Only txt2img has Hires. fix controls (A1111's too): the note must not point to controls this tab lacks.
        notes.append(f"Hires fix ({recipe}): hires fix is a txt2img feature and this tab has no Hires. fix controls, "
                     "so the paste fills the first pass only; send the image to txt2img to reproduce it.")
    notes += _hires_refiner_notes(parsed)
    notes += _hires_token_merging_notes(parsed)
    notes += _approximation_notes(parsed)
    sampler_settings = [f"{key}: {parsed[key]}" for key in ("Eta", "Eta DDIM", "ENSD") if parsed.get(key) not in (None, "")]
    sampler_settings += _sampler_parameter_settings(parsed)
    if sampler_settings:
        notes.append(f"{', '.join(sampler_settings)}: these are Settings here (Settings > Sampler parameters), not "
                     "form fields; set them there to reproduce the image.")
    from pipelines.approx.hypertile_settings import INFOTEXT_KEYS as HYPERTILE_KEYS

    hypertile = [f"{key}: {parsed[key]}" for key in HYPERTILE_KEYS.values() if parsed.get(key) not in (None, "")]
    if hypertile:  # A1111's paste sets its Hypertile options; here they are Settings too, which a paste leaves alone
        notes.append(f"{', '.join(hypertile)}: these are Settings here (Settings > Hypertile), not form fields; set "
                     "them there to reproduce the image.")
    if parsed.get("Face restoration") not in (None, ""):  # A1111 1.7+: a Setting, not a form field
        notes.append(f"Face restoration: {parsed['Face restoration']}: the image's faces were restored; Restore faces "
                     "is a Setting here (Settings > Face restoration), not a form field; switch it on there, with that "
                     "restorer, to reproduce the image.")
    if parsed.get("Refiner") and not refiner_filled:
        # A1111's refiner swaps to a second checkpoint for the steps after "Refiner switch at" (a fraction).
        switch = parsed.get("Refiner switch at")
        steps = f"the steps after Refiner switch at: {switch}" if switch not in (None, "") else "the last steps"
        notes.append(f"Refiner: {steps} were sampled with {parsed['Refiner']!r}; this form has no Refiner controls, "
                     "so the paste fills the base model's pass only and the image will differ.")
    rng = parsed.get("RNG", "GPU")  # A1111's default when the key is missing
    if has_parameters and rng == "NV":
        notes.append("RNG: NV: the image's noise is NVIDIA's GPU noise (A1111's NV source); the RNG source is a "
                     "Setting here (Settings > Sampler parameters), not a form field; set it to NV to reproduce the "
                     "image.")
    elif has_parameters and rng != "CPU":
        notes.append(f"RNG: the image's noise was drawn on the {rng} (A1111's default when the key is missing), "
                     "which this server does not draw, so the same seed gives another image; if that GPU was an "
                     "NVIDIA one, Settings > Sampler parameters' RNG source NV draws the same noise.")
    return notes


def _sampler_parameter_settings(parsed: dict) -> list[str]:
    """"Sigma churn: 0.5", "Schedule rho: 5" ... for each of A1111's Sampler parameters the infotext records at a value
    other than its default (those are Settings here, as in A1111, where its paste sets them as overrides)."""
    from pipelines.sampler_parameters import INFOTEXT_ALIASES, INFOTEXT_KEYS, SamplerParameters, parameters_from_values

    found = []
    keys = [*INFOTEXT_KEYS.items(), *((option, key) for key, option in INFOTEXT_ALIASES.items())]
    for option, key in keys:
        if parsed.get(key) in (None, ""):
            continue
        try:
            default = parameters_from_values({option: parsed[key]}) == SamplerParameters()
        except ValueError:
            default = False
        if not default:
            found.append(f"{key}: {parsed[key]}")
    # Settings > img2img here too (Conditional mask weight: inpainting checkpoints' "conditioning mask strength")
    for key, default in (("Noise multiplier", 1.0), ("Extra noise", 0.0), ("Conditional mask weight", 1.0)):
        value = _float(parsed.get(key))
        if parsed.get(key) not in (None, "") and value != default:
            found.append(f"{key}: {parsed[key]}")
    # Settings > Compatibility, and A1111's Tiling setting
    for key in ("Refiner switch by sampling steps", "Old prompt editing timelines", "Tiling"):
        if str(parsed.get(key, "")).strip() == "True":
            found.append(f"{key}: True")
    return found


def _approximation_notes(parsed: dict) -> list[str]:
    """A note naming the approximations the image was made with (DeepCache, TAESD decode, ToMe ...): the web UI runs
    its model without them (the API refuses such an infotext), so the paste cannot reproduce the image."""
    from pipelines.approx.labels import OptimizationLabels

    try:  # the hires pass's ToMe is a Setting here (`_hires_token_merging_notes`)
        items = OptimizationLabels.from_infotext(parsed).approximations()
    except ValueError as error:
        return [f"{error}; the image's approximations cannot be read."]
    if parsed.get("FreeU") not in (None, ""):  # mixkit's FreeU: a per-call setting the web UI has no control for
        items.append(f"FreeU ({parsed['FreeU']})")
    if not items:
        return []
    return [f"{', '.join(items)}: approximations the image was made with; this server runs its model without them, so "
            "the image will differ (`mixkit generate --infotext` reproduces them)."]


def _hires_refiner_notes(parsed: dict) -> list[str]:
    """A note for the infotext's `Hires refiner` (A1111 writes it when not "second pass"): a Setting here too
    (Settings > Sampler parameters, as A1111's Settings > Stable Diffusion), which the paste does not change."""
    value = parsed.get("Hires refiner")
    if value in (None, "", "second pass"):
        return []
    return [f"Hires refiner: {value}: the refiner finished the image's {value} of hires fix; this is a setting here "
            "('Hires fix: which pass to enable refiner for' in Settings > Sampler parameters), not a form field: set "
            "it there to reproduce the image."]


def _hires_token_merging_notes(parsed: dict) -> list[str]:
    """A note for A1111's `Token merging ratio hr` (the hires pass's ToMe ratio, written when not 0): a Setting here
    as in A1111 (its paste sets it as an override), which the paste does not change."""
    value = parsed.get("Token merging ratio hr")
    if value in (None, "") or str(value).strip() in ("0", "0.0"):
        return []
    return [f"Token merging ratio hr: {value}: the hires pass merged that share of its tokens (ToMe); this is a "
            "setting here ('Token merging ratio for high-res pass' in Settings > Sampler parameters), not a form "
            "field: set it there to reproduce the image."]
