"""Hires. fix controls for the txt2img tab, converted by the API's own code so both accept the same values.

The form values become a `Txt2ImgRequest` carrying only the hires fields and go through
`webui.api_hires.hires_params`, the function `POST /sdapi/v1/txt2img` uses: one place
decides defaults (upscaler "Latent", strength 0.7) and limits (scale, target size, steps).
"""

from __future__ import annotations

import gradio as gr

HIRES_FIELDS = ("enable_hr", "hr_upscaler", "hr_scale", "hr_second_pass_steps", "hr_resize_x", "hr_resize_y",
                "denoising_strength", "hr_prompt", "hr_negative_prompt", "hr_sampler_name", "hr_scheduler")


def hires_upscaler_names() -> list[str]:
    from pipelines.hires import hires_upscaler_names as names

    return names()


def hires_sampler_choices() -> tuple[list[str], list[str]]:
    """The hires sampler and schedule dropdowns' choices: A1111's "Use same ..." first, then every sampler / schedule
    type the main dropdowns offer."""
    from pipelines.hires_sampler import SAME_SAMPLER, SAME_SCHEDULER
    from pipelines.samplers import SCHEDULE_TYPES, list_samplers

    return ([SAME_SAMPLER, *(item["name"] for item in list_samplers())],
            [SAME_SCHEDULER, *SCHEDULE_TYPES.names()])


def build_hires_controls(limits, state=None) -> list:
    """The accordion's widgets, in HIRES_FIELDS order (inputs for `with_hires`); with the server's `state`, a refresh
    button next to the upscaler dropdown rescans the upscaler folders (`webui.ui.upscaler_refresh`)."""
    from pipelines.hires import MAX_HIRES_SCALE
    from webui.ui.form_components import form_slider

    with gr.Accordion("Hires. fix", open=False, elem_id="txt2img_hires"):
        enabled = gr.Checkbox(False, label="Enable hires. fix", elem_id="txt2img_enable_hr")
        with gr.Row():
            upscaler = gr.Dropdown(hires_upscaler_names(), value="Latent", label="Upscaler", elem_id="txt2img_hr_upscaler")
            if state is not None:
                from webui.ui.upscaler_refresh import add_upscaler_refresh

                add_upscaler_refresh(state, upscaler, hires_upscaler_names, elem_id="txt2img_hr_refresh_upscalers")
            steps = form_slider(0, limits.max_steps, value=0, step=1, label="Hires steps (0 = same as sampling)",
                                elem_id="txt2img_hires_steps")
            strength = form_slider(0, 1, value=0.7, step=0.01, label="Denoising strength", elem_id="txt2img_hr_denoising")
        with gr.Row():
            scale = form_slider(1, MAX_HIRES_SCALE, value=2, step=0.05, label="Upscale by", elem_id="txt2img_hr_scale")
            resize_x = form_slider(0, limits.max_side, value=0, step=8, label="Resize width to (0 = use scale)",
                                   elem_id="txt2img_hr_resize_x")
            resize_y = form_slider(0, limits.max_side, value=0, step=8, label="Resize height to (0 = use scale)",
                                   elem_id="txt2img_hr_resize_y")
        with gr.Row():  # A1111 1.10's "Hires prompt" / "Hires negative prompt" ("" = the first pass's)
            hr_prompt = gr.Textbox(label="Hires prompt", lines=2, max_length=limits.max_prompt_chars,
                                   placeholder="Prompt for the hires fix pass; leave empty to use the first pass's.",
                                   elem_id="txt2img_hr_prompt")
            hr_negative = gr.Textbox(label="Hires negative prompt", lines=2, max_length=limits.max_prompt_chars,
                                     placeholder="Negative prompt for the hires fix pass; leave empty to use the "
                                                 "first pass's.", elem_id="txt2img_hr_negative_prompt")
        # A1111 1.10 shows these with its "hires_fix_show_sampler" setting; here they are always shown
        samplers, schedules = hires_sampler_choices()
        with gr.Row():
            hr_sampler = gr.Dropdown(samplers, value=samplers[0], label="Hires sampling method",
                                     elem_id="hr_sampler")
            hr_schedule = gr.Dropdown(schedules, value=schedules[0], label="Hires schedule type",
                                      elem_id="hr_scheduler")
    return [enabled, upscaler, scale, steps, resize_x, resize_y, strength, hr_prompt, hr_negative, hr_sampler,
            hr_schedule]


def with_hires(params, values: list, limits, *, styles=None, style_names: list[str] | None = None,
               unstyled_prompts: tuple[str, str] | None = None, hires_eta=None):
    """`params` unchanged when hires fix is off, else HiresParams checked exactly as the API checks them;
    `hires_eta(sampler)`: the Settings' eta for a hires sampler other than the first pass's (as the API's).

    With styles chosen, `params` carries the styled prompts and `unstyled_prompts` the form's own (prompt, negative
    prompt): the API's `hires_params` styles a Hires prompt from those, as A1111 styles its `all_hr_prompts`."""
    from webui.api_hires import hires_params
    from webui.api_requests import Txt2ImgRequest

    fields = dict(zip(HIRES_FIELDS, values))
    if not fields["enable_hr"]:
        return params

    def whole(value):  # Gradio sliders send floats; the API fields are integers
        return int(value) if isinstance(value, float) and value.is_integer() else value

    prompt, negative_prompt = unstyled_prompts or (params.prompt, params.negative_prompt)
    request = Txt2ImgRequest(enable_hr=True, hr_upscaler=fields["hr_upscaler"], hr_scale=float(fields["hr_scale"]),
                             hr_second_pass_steps=whole(fields["hr_second_pass_steps"]), hr_resize_x=whole(fields["hr_resize_x"]),
                             hr_resize_y=whole(fields["hr_resize_y"]),
                             denoising_strength=float(fields["denoising_strength"]), hr_prompt=fields["hr_prompt"] or "",
                             hr_negative_prompt=fields["hr_negative_prompt"] or "",
                             prompt=prompt, negative_prompt=negative_prompt, styles=list(style_names or []),
                             hr_sampler_name=fields["hr_sampler_name"], hr_scheduler=fields["hr_scheduler"])
    return hires_params(request, params, limits, styles, hires_eta=hires_eta)


# Hires keys the form has no control for, with the value A1111 writes (or assumes) when they are unused.
_UNCONTROLLED_HIRES_KEYS = {"Hires CFG Scale": None, "Hires checkpoint": "Use same checkpoint"}


def infotext_hires_prompts(parsed: dict) -> dict[str, str]:
    """The Hires prompt boxes from an infotext, filled on every paste as A1111's are: its `parse_generation_parameters`
    adds "" for a missing "Hires prompt" / "Hires negative prompt" (= the first pass's), so a paste never leaves a
    stale hires prompt in place for the next time hires fix is ticked."""
    return {"hr_prompt": str(parsed.get("Hires prompt", "")),
            "hr_negative_prompt": str(parsed.get("Hires negative prompt", ""))}


def infotext_hires_values(parsed: dict, limits, upscaler_names: list[str]) -> tuple[dict[str, object], list[str]]:
    """(Hires. fix form values, notes) from a parsed infotext, as A1111's paste fills its Hires. fix controls.

    A1111 ticks hires fix when the infotext has "Denoising strength" and a hires recipe ("Hires upscale",
    "Hires upscaler" or "Hires resize"), and unticks it otherwise (its paste field for `enable_hr` is that
    boolean, modules/ui.py txt2img_paste_fields), so the pasted image is what Generate makes; A1111's default
    resize of 0x0 does not count as a recipe here, or every img2img infotext would tick it. A value outside the controls' range (the API's limits) or an upscaler this
    server lacks is left out and named in a note. "Denoising strength" itself is filled with the other fields."""
    from pipelines.hires import MAX_HIRES_SCALE

    recipe = [key for key in ("Hires upscale", "Hires upscaler", "Hires resize-1", "Hires resize-2")
              if str(parsed.get(key, "0")) not in ("0", "")]
    if not recipe:
        return {"enable_hr": False, **infotext_hires_prompts(parsed)}, []
    if "Denoising strength" not in parsed:
        found = ", ".join(f"{key}: {parsed[key]}" for key in recipe)
        return {"enable_hr": False, **infotext_hires_prompts(parsed)}, [
            f"Hires fix ({found}): the infotext has no Denoising strength, so hires fix is left off, as A1111 does."]
    values: dict[str, object] = {"enable_hr": True, "hr_second_pass_steps": 0, "hr_resize_x": 0, "hr_resize_y": 0,
                                 **infotext_hires_prompts(parsed)}
    notes: list[str] = infotext_hires_sampler(parsed, values)
    numeric = {"hr_scale": ("Hires upscale", float, 1, MAX_HIRES_SCALE),
               "hr_second_pass_steps": ("Hires steps", int, 0, limits.max_steps),
               "hr_resize_x": ("Hires resize-1", int, 0, limits.max_side),
               "hr_resize_y": ("Hires resize-2", int, 0, limits.max_side)}
    for field, (key, convert, low, high) in numeric.items():
        if key not in parsed:
            continue  # A1111 leaves these out at their defaults (steps 0 = same as sampling, resize 0 = use scale)
        try:
            value = convert(str(parsed[key]).strip())
        except ValueError:
            values.pop(field, None)
            notes.append(f"{key}: {parsed[key]!r} is not {'an integer' if convert is int else 'a number'}; "
                         "kept the current value.")
            continue
        if not low <= value <= high:
            values.pop(field, None)
            notes.append(f"{key}: {parsed[key]!r} is outside [{low}, {high}]; kept the current value.")
            continue
        values[field] = value
    upscaler = parsed.get("Hires upscaler")
    if upscaler is not None:
        from pipelines.upscale import UPSCALERS

        # an upscaler's other A1111 name ("DAT_x4" for "DAT x4") selects the entry it stands for
        upscaler = UPSCALERS.resolve(upscaler) if upscaler not in upscaler_names and upscaler in UPSCALERS else upscaler
        if upscaler in upscaler_names:
            values["hr_upscaler"] = upscaler
        else:
            notes.append(f"Hires upscaler {upscaler!r} is not available here (choose one of {', '.join(upscaler_names)}); "
                         "kept the current upscaler.")
    for key, unused in _UNCONTROLLED_HIRES_KEYS.items():
        if key in parsed and parsed[key] != unused:
            notes.append(f"{key}: {parsed[key]}: the Hires. fix here has no such control (its second pass uses the "
                         "first pass's); the image will differ.")
    return values, notes


def infotext_hires_sampler(parsed: dict, values: dict) -> list[str]:
    """Fill the hires sampler and schedule dropdowns from an infotext, as A1111's paste (`get_hr_sampler_and_scheduler`)
    does: a missing key is "Use same ...", a pre-1.9 "Hires sampler: DPM++ 2M Karras" fills both, an alias selects its
    sampler. A name this server lacks leaves the dropdowns as they are, with a note."""
    from pipelines.hires_sampler import SAMPLER_KEY, SCHEDULE_KEY, hires_sampler_from_infotext
    from pipelines.infotext_samplers import split_sampler_name
    from pipelines.samplers import find_sampler, get_schedule_type

    samplers, schedules = hires_sampler_choices()
    sampler, schedule = hires_sampler_from_infotext(parsed)
    chosen = {"hr_sampler_name": samplers[0], "hr_scheduler": schedules[0]}
    try:
        if sampler is not None:
            spec = find_sampler(sampler)
            if spec is None:
                name, implied = split_sampler_name(sampler)
                spec = find_sampler(name)
                if implied is not None and schedule is None:
                    schedule = implied
            if spec is None or spec.name not in samplers:
                raise ValueError(f"{SAMPLER_KEY}: {sampler}: no such sampler here (choose one of "
                                 f"{', '.join(samplers[1:])}); kept the current hires sampler.")
            chosen["hr_sampler_name"] = spec.name
        if schedule is not None:
            try:
                name = get_schedule_type(schedule).name
            except (KeyError, ValueError):
                name = None
            if name not in schedules:
                raise ValueError(f"{SCHEDULE_KEY}: {schedule}: no such schedule type here (choose one of "
                                 f"{', '.join(schedules[1:])}); kept the current hires schedule type.")
            chosen["hr_scheduler"] = name
    except ValueError as error:
        return [str(error)]
    values.update(chosen)
    return []
