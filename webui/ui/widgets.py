"""Generation widgets built from `GenerationLimits` and `Txt2ImgParams`, the schema the API validates with.

`widget_ranges(limits)` is the single translation from limits to slider ranges; the values a
user submits still go through the pipelines' `check_*_params`, so a client that bypasses the
sliders (or a stale page) meets the same limits as the API.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.params import CLIP_SKIP_MAX, SEED_MAX, GenerationLimits, Txt2ImgParams

SIZE_STEP = 8  # SD's VAE downsamples by 8; the pipelines refuse other sizes
DEFAULTED_FIELDS = ("sampler", "schedule_type", "steps", "cfg_scale", "width", "height")  # from Settings


@dataclass(frozen=True)
class WidgetRange:
    minimum: float
    maximum: float
    step: float


def widget_ranges(limits: GenerationLimits) -> dict[str, WidgetRange]:
    """Slider ranges per `Txt2ImgParams` field; the maxima are the limits the API enforces."""
    return {
        "steps": WidgetRange(1, limits.max_steps, 1),
        "cfg_scale": WidgetRange(0, limits.max_cfg_scale, 0.5),
        "width": WidgetRange(SIZE_STEP * 8, limits.max_side, SIZE_STEP),
        "height": WidgetRange(SIZE_STEP * 8, limits.max_side, SIZE_STEP),
        "batch_size": WidgetRange(1, limits.max_batch_size, 1),
        "batch_count": WidgetRange(1, limits.max_batch_count, 1),
        "clip_skip": WidgetRange(1, CLIP_SKIP_MAX, 1),
        "seed": WidgetRange(-1, SEED_MAX, 1),
        # A1111's "Extra" seed options: its sliders' steps; "Resize seed from" 0 is off
        "subseed": WidgetRange(-1, SEED_MAX, 1),
        "subseed_strength": WidgetRange(0, 1, 0.01),
        "seed_resize_from_w": WidgetRange(0, limits.max_side, SIZE_STEP),
        "seed_resize_from_h": WidgetRange(0, limits.max_side, SIZE_STEP),
    }


@dataclass
class GenerationWidgets:
    """The components of one generation form, in the order `values_to_params` expects."""

    prompt: object
    negative_prompt: object
    sampler: object
    schedule_type: object
    steps: object
    cfg_scale: object
    width: object
    height: object
    seed: object
    batch_count: object
    batch_size: object
    clip_skip: object
    # A1111's "Extra" seed options (None in forms built without them: the Txt2ImgParams defaults apply)
    subseed: object = None
    subseed_strength: object = None
    seed_resize_from_w: object = None
    seed_resize_from_h: object = None
    seed_dice: object = None  # sets the seed to -1 (random)
    seed_recycle: object = None  # sets the seed to the last image's
    subseed_dice: object = None  # sets the variation seed to -1 (random)
    subseed_recycle: object = None  # sets the variation seed to the selected image's

    FIELDS = ("prompt", "negative_prompt", "sampler", "schedule_type", "steps", "cfg_scale", "width", "height", "seed",
              "batch_count", "batch_size", "clip_skip", "subseed", "subseed_strength", "seed_resize_from_w",
              "seed_resize_from_h")

    def inputs(self) -> list:
        return [getattr(self, name) for name in self.FIELDS]


def values_to_params(values: list) -> Txt2ImgParams:
    """Txt2ImgParams from the widget values (Gradio delivers numbers as floats; whole ones become ints).

    An empty Seed (or Variation seed) box is -1 (random): A1111's `processing.get_fixed_seed` maps `None`/`''`
    to -1, and the HTTP API reads a null seed the same way. Values missing from the end (a form without the
    Extra seed options) keep the Txt2ImgParams defaults."""
    named = dict(zip(GenerationWidgets.FIELDS, values))
    for name in ("seed", "subseed"):
        if name in named and named[name] is None:
            named[name] = -1
    for name in ("steps", "width", "height", "seed", "batch_count", "batch_size", "clip_skip", "subseed",
                 "seed_resize_from_w", "seed_resize_from_h"):
        value = named.get(name)
        if isinstance(value, float) and value.is_integer():
            named[name] = int(value)
    if named.get("subseed_strength") is not None:
        named["subseed_strength"] = float(named["subseed_strength"])
    named["cfg_scale"] = float(named["cfg_scale"])
    named["prompt"] = named["prompt"] or ""
    named["negative_prompt"] = named["negative_prompt"] or ""
    return Txt2ImgParams(**named)


def build_generation_widgets(prefix: str, limits: GenerationLimits, sampler_names: list[str],
                             schedule_names: list[str], defaults=None, clip_skip_default=None) -> GenerationWidgets:
    """Create the widgets inside the current Gradio layout; element ids are `{prefix}_{field}`.

    `defaults` (a function returning `GenerationDefaults`, i.e. Settings) gives sampler, schedule
    type, steps, CFG scale and size; `clip_skip_default` (a function returning the Settings value
    `CLIP_stop_at_last_layers`) gives Clip skip, which an A1111 user sets once in Settings. Both are
    called on every page load, so a page opened after a Settings change starts from the new values.
    Without them the `Txt2ImgParams` defaults are used.
    """
    import gradio as gr

    from webui.ui.form_components import form_number, form_slider

    d = Txt2ImgParams()
    r = widget_ranges(limits)

    def initial(name: str):
        if name == "clip_skip" and clip_skip_default is not None:
            return clip_skip_default
        if defaults is None or name not in DEFAULTED_FIELDS:
            return getattr(d, name)
        return lambda: getattr(defaults(), name)

    def slider(name: str, label: str):
        spec = r[name]
        return form_slider(spec.minimum, spec.maximum, value=initial(name), step=spec.step, label=label,
                           elem_id=f"{prefix}_{name}")

    prompt = gr.Textbox(label="Prompt", lines=3, max_length=limits.max_prompt_chars, elem_id=f"{prefix}_prompt",
                        placeholder="Prompt (A1111 syntax: (word:1.2), [a:b:0.5], <lora:name:1>)")
    negative = gr.Textbox(label="Negative prompt", lines=2, max_length=limits.max_prompt_chars,
                          elem_id=f"{prefix}_negative_prompt")
    with gr.Row():
        sampler = gr.Dropdown(sampler_names, value=initial("sampler") if defaults else
                              (d.sampler if d.sampler in sampler_names else sampler_names[0]),
                              label="Sampling method", elem_id=f"{prefix}_sampler")
        schedule = gr.Dropdown(schedule_names, value=initial("schedule_type"), label="Schedule type",
                               elem_id=f"{prefix}_schedule_type")
        steps = slider("steps", "Sampling steps")
    with gr.Row():
        width = slider("width", "Width")
        height = slider("height", "Height")
    with gr.Row():
        batch_count = slider("batch_count", "Batch count")
        batch_size = slider("batch_size", "Batch size")
    with gr.Row():
        cfg = slider("cfg_scale", "CFG Scale")
        clip_skip = slider("clip_skip", "Clip skip")
    with gr.Row(equal_height=True):
        seed_range = r["seed"]
        seed = form_number(value=d.seed, minimum=seed_range.minimum, maximum=seed_range.maximum, precision=0, label="Seed",
                           elem_id=f"{prefix}_seed", scale=4)
        dice = gr.Button("Random", elem_id=f"{prefix}_random_seed", scale=0, min_width=90)
        recycle = gr.Button("Reuse", elem_id=f"{prefix}_reuse_seed", scale=0, min_width=90)
    # A1111's "Extra" checkbox next to Seed reveals the same four controls
    with gr.Accordion("Extra seed options", open=False, elem_id=f"{prefix}_seed_extras"):
        with gr.Row(equal_height=True):
            subseed = form_number(value=d.subseed, minimum=r["subseed"].minimum, maximum=r["subseed"].maximum,
                                  precision=0, label="Variation seed", elem_id=f"{prefix}_subseed", scale=4)
            subseed_dice = gr.Button("Random", elem_id=f"{prefix}_random_subseed", scale=0, min_width=90)
            subseed_recycle = gr.Button("Reuse", elem_id=f"{prefix}_reuse_subseed", scale=0, min_width=90)
            subseed_strength = slider("subseed_strength", "Variation strength")
        with gr.Row():
            resize_w = slider("seed_resize_from_w", "Resize seed from width")
            resize_h = slider("seed_resize_from_h", "Resize seed from height")
    return GenerationWidgets(prompt, negative, sampler, schedule, steps, cfg, width, height, seed, batch_count,
                             batch_size, clip_skip, subseed, subseed_strength, resize_w, resize_h, dice, recycle,
                             subseed_dice, subseed_recycle)
