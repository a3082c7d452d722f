"""Settings: checkpoint, VAE and performance preset; saving, live previews, clip skip; sampler defaults; prompt options;
what the infotext tells.

Changes go through the same `ServerOptions` checks and the same queued model switch as
`POST /sdapi/v1/options`, and are saved to the settings file when the server has one. The
output folder is shown, not editable: it is the operator's choice.
"""

from __future__ import annotations

import gradio as gr
from mixkit.runtime import PRESETS
from pipelines.uncond_skip import MAX_S_MIN_UNCOND
from webui.generation_defaults import OPTION_KEYS
from webui.options import MAX_CONTROLNET_UNITS, SIZE_KEYS
from webui.server_state import ServerState
from webui.ui.errors import failed, refused
from webui.ui.page_values import serve_props

GRID_KEYS = ("return_grid", "grid_save")  # the Apply button's inputs after the generation defaults
# its last inputs; a caller sending fewer leaves them unchanged
PROMPT_KEYS = ("emphasis", "comma_padding_backtrack", "sdxl_clip_l_skip")


def switch_vae(state: ServerState, name: str) -> str:
    """Queue the VAE swap, wait for it, and return the status line; a failure keeps the current VAE and says so."""
    if not name:
        raise refused("Choose a VAE first.")
    try:
        state.submit_vae_switch(name).future.result()
    except Exception as error:  # keep decoding with the previous VAE; tell the user why
        raise failed(f"Could not use VAE {name!r}: {error}. Still using {state.holder.vae_name!r}.", error) from None
    return f"Loaded: **{state.model_title}**, VAE: **{state.holder.vae_name}**"


def switch_preset(state: ServerState, preset: str) -> str:
    """Reload the model with `preset` (queued, waited for) and return the status line; a failure keeps the old model."""
    if not preset:
        raise refused("Choose a performance preset first.")
    try:
        job = state.submit_preset_switch(preset)
        if job is not None:
            job.future.result()
    except Exception as error:  # keep serving the previous model and preset; tell the user why
        raise failed(f"Could not apply preset {preset!r}: {error}. Still using {state.model_title!r} "
                     f"with preset {state.preset!r}.", error) from None
    return status_line(state)


def status_line(state: ServerState) -> str:
    # After POST /sdapi/v1/unload-checkpoint the checkpoint is still the chosen one but holds no memory; the next
    # generation (or Load) brings it back.
    loaded = "Unloaded (reloads on the next generation)" if state.holder.unloaded else "Loaded"
    return (f"{loaded}: **{state.model_title or 'none'}**, VAE: **{state.holder.vae_name}**, "
            f"performance preset: **{state.preset}**")


def apply_settings(state: ServerState, values: dict) -> str:
    """Check and apply option changes from the form (`/sdapi/v1/options` keys); gr.Error naming the bad value."""
    from webui.interrogation import KEEP_KEY, release_unkept_interrogation_models

    kept = bool(state.options.get(KEEP_KEY))
    try:
        state.options.apply(state.options.check_update(values), whole_form=True)
    except (ValueError, OSError) as error:
        raise refused(str(error)) from None
    release_unkept_interrogation_models(state, kept)  # the form sends every field: only a change to off frees them
    return "Settings applied."


def checkpoint_choices(state: ServerState):
    """The checkpoint dropdown as the catalog is now: its titles as choices, the loaded one as value.

    A title gains " [hash]" once its file is hashed (loading hashes it, as A1111's titles do), so choices fixed when
    the page was built would not hold the loaded title and Gradio would refuse the next Load; each page served, Load and
    🔄 therefore set choices and value together."""
    return gr.Dropdown(choices=state.catalog.titles(), value=state.model_title)


def served_checkpoint_props(state: ServerState) -> dict:
    """The checkpoint dropdown's choices and value for a page served now, in Gradio's config form."""
    dropdown = checkpoint_choices(state)
    return {"choices": dropdown.choices, "value": dropdown.value}


def build_settings_tab(state: ServerState) -> gr.Dropdown:
    """The Settings tab; returns its checkpoint dropdown, which a finished merge refreshes (`webui.ui.merger_tab`)."""
    with gr.Row():
        # Choices and value written into each page served (as the VAE's value below), so a page opened after a
        # switch shows the checkpoint that is loaded and its hashed title; no page-load event replaces a choice made
        # before it lands. Gradio checks a value against the choices of build time unless custom values are
        # allowed: the catalog checks the title at Load instead (any of its titles, those of an older page too).
        checkpoint = gr.Dropdown(state.catalog.titles(), value=None, label="Stable Diffusion checkpoint",
                                 elem_id="settings_checkpoint", scale=4, allow_custom_value=True)
        serve_props(checkpoint, lambda: served_checkpoint_props(state))
        refresh = gr.Button("\U0001f504", scale=0, min_width=40, elem_id="settings_refresh_checkpoints")
        load = gr.Button("Load", variant="primary", scale=1, elem_id="settings_load_checkpoint")
    with gr.Row():
        vae = gr.Dropdown(state.vaes.names(), value=lambda: state.options.get("sd_vae"),
                          label="SD VAE (Automatic: the checkpoint's own)",
                          elem_id="settings_sd_vae", scale=4)
        vae_refresh = gr.Button("\U0001f504", scale=0, min_width=40, elem_id="settings_refresh_vaes")
        vae_load = gr.Button("Use VAE", scale=1, elem_id="settings_load_vae")
    with gr.Row():
        preset = gr.Radio(PRESETS.names(), value=lambda: state.preset, elem_id="settings_performance_preset",
                          label="Performance preset (exact: reference output; fast: reduced precision, channels-last, "
                                "fused QKV; low-memory: float16-held weights, attention and VAE slicing, idle weights "
                                "paged out; no preset tiles the VAE). Switching reloads the model.", scale=4)
        preset_apply = gr.Button("Apply preset", scale=1, elem_id="settings_apply_preset")
    status = gr.Markdown(lambda: status_line(state), elem_id="settings_status")
    gr.Textbox(str(state.output_dir), label="Output folder (set with --output-dir)", interactive=False)
    with gr.Row():
        save = gr.Checkbox(lambda: state.options.get("samples_save"), label="Save generated images with their infotext")
        previews = gr.Checkbox(lambda: state.options.get("live_previews_enable"), label="Live previews")
        return_grid = gr.Checkbox(lambda: state.options.get("return_grid"), elem_id="settings_return_grid",
                                  label="Show a grid of 2+ images first in the gallery (return_grid)")
        grid_save = gr.Checkbox(lambda: state.options.get("grid_save"), elem_id="settings_grid_save",
                                label="Save that grid as grid-NNNN.png when saving images (grid_save)")
        clip_skip = gr.Slider(1, 12, value=lambda: state.options.get("CLIP_stop_at_last_layers"), step=1,
                              label="Clip skip (CLIP_stop_at_last_layers): new txt2img/img2img pages start from it, "
                                    "API requests that leave it out use it", elem_id="settings_clip_skip")
    defaults_widgets = build_defaults_widgets(state)
    size_widgets = [widget for key, widget in zip(OPTION_KEYS, defaults_widgets) if key in SIZE_KEYS]
    unit_count = gr.Slider(1, MAX_CONTROLNET_UNITS, value=lambda: state.options.get("control_net_unit_count"), step=1,
                           label="ControlNet units per tab (control_net_unit_count; takes effect after a restart)",
                           elem_id="settings_control_net_unit_count")
    with gr.Accordion("Optimizations (APPROXIMATE: the image changes; recorded in the infotext)", open=False,
                      elem_id="settings_optimizations"):
        with gr.Row():
            ngms = gr.Slider(0, MAX_S_MIN_UNCOND, value=lambda: state.options.get("s_min_uncond"), step=0.01,
                             label="Negative Guidance minimum sigma (NGMS): below it, every other step skips the "
                                   "negative prompt (0: off)", elem_id="settings_s_min_uncond")
            ngms_all = gr.Checkbox(lambda: state.options.get("s_min_uncond_all"), elem_id="settings_s_min_uncond_all",
                                   label="NGMS on every step below that sigma, not every other one")
            skip_early = gr.Slider(0, 1, value=lambda: state.options.get("skip_early_cond"), step=0.01,
                                   label="Ignore the negative prompt during the first fraction of the steps "
                                         "(Skip Early CFG; 0: off)", elem_id="settings_skip_early_cond")
    with gr.Accordion("Sampler parameters (recorded in the infotext when not the default)", open=False,
                      elem_id="settings_sampler_parameters"):
        with gr.Row():
            eta_ancestral = gr.Slider(0, 1, value=lambda: state.options.get("eta_ancestral"), step=0.01,
                                      label="Eta for ancestral and SDE samplers (Euler a, DPM2 a, DPM++ 2S a, "
                                            "DPM++ SDE, DPM++ 2M SDE)", elem_id="settings_eta_ancestral")
            eta_ddim = gr.Slider(0, 1, value=lambda: state.options.get("eta_ddim"), step=0.01,
                                 label="Eta for DDIM", elem_id="settings_eta_ddim")
            ensd = gr.Number(lambda: state.options.get("eta_noise_seed_delta"), precision=0, minimum=0,
                             label="Eta noise seed delta (ENSD; 31337 in NovelAI-style infotexts)",
                             elem_id="settings_eta_noise_seed_delta")
            fix_steps = gr.Checkbox(lambda: state.options.get("img2img_fix_steps"),
                                    label="With img2img, do exactly the amount of steps the slider specifies "
                                          "(normally fewer with less denoising)", elem_id="settings_img2img_fix_steps")
        from webui.ui.rng_source_settings import build_rng_source_settings
        from webui.ui.sampler_parameter_settings import build_sampler_parameter_settings

        build_rng_source_settings(state, apply_settings)
        build_sampler_parameter_settings(state, apply_settings)
    with gr.Accordion("Hypertile (tiled self-attention: faster large images, approximate)", open=False,
                      elem_id="settings_hypertile"):
        from webui.ui.hypertile_settings import build_hypertile_settings

        build_hypertile_settings(state, apply_settings)
    with gr.Accordion("ControlNet (how many ControlNet / IP-Adapter models stay loaded)", open=False,
                      elem_id="settings_controlnet_cache"):
        from webui.ui.controlnet_cache_settings import build_controlnet_cache_settings

        build_controlnet_cache_settings(state, apply_settings)
    with gr.Accordion("Upscaling (model upscalers' tiles)", open=False, elem_id="settings_upscaling"):
        from webui.ui.upscaler_settings import build_upscaler_settings

        build_upscaler_settings(state, apply_settings)
    with gr.Accordion("Saving images/grids (infotext in the PNG, a .txt beside it; the grid legends' font)",
                      open=False, elem_id="settings_saving"):
        from webui.ui.saving_settings import build_saving_settings

        build_saving_settings(state, apply_settings)
    with gr.Accordion("Face restoration (GFPGAN / CodeFormer)", open=False, elem_id="settings_face_restoration_group"):
        from webui.ui.face_restoration_settings import build_face_restoration_settings

        build_face_restoration_settings(state, apply_settings)
    with gr.Accordion("img2img colour correction", open=False, elem_id="settings_img2img_color_correction_group"):
        from webui.ui.color_correction_settings import build_color_correction_settings

        build_color_correction_settings(state, apply_settings)
    with gr.Accordion("Infotext (what each image's parameters text tells: model, VAE, version, user, LoRA and TI "
                      "hashes)", open=False, elem_id="settings_infotext"):
        from webui.ui.infotext_settings import build_infotext_settings

        build_infotext_settings(state, apply_settings)
    with gr.Accordion("Interrogate (Interrogate CLIP: caption length, ranked word lists; Interrogate DeepBooru: "
                      "tag threshold and format)", open=False, elem_id="settings_interrogate"):
        from webui.ui.deepbooru_settings import build_deepbooru_settings
        from webui.ui.interrogate_settings import build_interrogate_settings

        build_interrogate_settings(state, apply_settings)
        build_deepbooru_settings(state, apply_settings)
    emphasis, comma_backtrack, clip_l_skip = build_prompt_option_widgets(state)
    apply = gr.Button("Apply settings", elem_id="settings_apply")

    def do_refresh():
        state.catalog.refresh()
        return checkpoint_choices(state)

    def do_load(title: str):
        if not title:
            raise refused("Choose a checkpoint first.")
        try:
            job = state.submit_model_switch(title)
            job.future.result()
        except Exception as error:  # keep serving the previous model; tell the user why
            raise failed(f"Could not load {title!r}: {error}. Still using {state.model_title!r}.", error) from None
        # the size defaults the user has not set follow the new model's native size: show them, so an Apply
        # from this page posts back what the server has (which keeps them the model's, not the user's)
        return status_line(state), checkpoint_choices(state), *(state.options.get(key) for key in SIZE_KEYS)

    def do_apply(save_value: bool, previews_value: bool, clip_value: float, units: float, ngms_value: float,
                 ngms_all_value: bool, skip_early_value: float, eta_ancestral_value: float, eta_ddim_value: float,
                 ensd_value: float, fix_steps_value: bool, *default_grid_and_prompt_values):
        if ensd_value is None or ensd_value != int(ensd_value):
            raise refused(f"Eta noise seed delta must be a whole number >= 0, got {ensd_value!r}.")
        values = {"samples_save": bool(save_value), "live_previews_enable": bool(previews_value),
                  "CLIP_stop_at_last_layers": int(clip_value), "control_net_unit_count": int(units),
                  "s_min_uncond": float(ngms_value), "s_min_uncond_all": bool(ngms_all_value),
                  "skip_early_cond": float(skip_early_value), "eta_ancestral": float(eta_ancestral_value),
                  "eta_ddim": float(eta_ddim_value), "eta_noise_seed_delta": int(ensd_value),
                  "img2img_fix_steps": bool(fix_steps_value)}
        values.update(zip(OPTION_KEYS, default_grid_and_prompt_values))
        grid_values = default_grid_and_prompt_values[len(OPTION_KEYS):len(OPTION_KEYS) + len(GRID_KEYS)]
        values.update((key, bool(value)) for key, value in zip(GRID_KEYS, grid_values))
        prompt_values = default_grid_and_prompt_values[len(OPTION_KEYS) + len(GRID_KEYS):]
        values.update((key, value if isinstance(value, bool) else whole_number(value))
                      for key, value in zip(PROMPT_KEYS, prompt_values))
        return apply_settings(state, values)

    def do_vae_refresh():
        state.vaes.refresh()
        return gr.Dropdown(choices=state.vaes.names(), value=state.holder.vae_name)

    refresh.click(do_refresh, outputs=checkpoint)
    vae_refresh.click(do_vae_refresh, outputs=vae)
    vae_load.click(lambda name: switch_vae(state, name), inputs=vae, outputs=status)
    load.click(do_load, inputs=checkpoint, outputs=[status, checkpoint, *size_widgets])
    apply.click(do_apply, inputs=[save, previews, clip_skip, unit_count, ngms, ngms_all, skip_early, eta_ancestral, eta_ddim,
                                  ensd, fix_steps, *defaults_widgets, return_grid, grid_save, emphasis, comma_backtrack,
                                  clip_l_skip],
                outputs=status)
    preset_apply.click(lambda name: switch_preset(state, name), inputs=preset, outputs=status)
    return checkpoint


def whole_number(value):
    """A slider's float as the int an option wants (20.0 -> 20); anything else is left for the option's check to name."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def build_prompt_option_widgets(state: ServerState) -> tuple:
    """A1111's Settings > Stable Diffusion prompt options (`emphasis`, `comma_padding_backtrack`): every UI
    generation and every API request without override_settings use them."""
    from mixkit.prompts.emphasis import EMPHASIS_MODES
    from mixkit.prompts.encoder import CHUNK_TOKENS

    with gr.Accordion("Stable Diffusion: prompt options (Emphasis is recorded in the infotext)", open=False,
                      elem_id="settings_prompt_options"):
        with gr.Row():
            emphasis = gr.Radio(EMPHASIS_MODES.names(), value=lambda: state.options.get("emphasis"),
                                label="Emphasis mode",
                                info="How (more:1.1) / (less:0.9) change the prompt's attention. Original: weights, "
                                     "then the mean restored; No norm: weights only; Ignore: syntax read, weights "
                                     "ignored; None: brackets are plain text.", elem_id="settings_emphasis")
            comma = gr.Slider(0, CHUNK_TOKENS - 1, value=lambda: state.options.get("comma_padding_backtrack"), step=1,
                              label="Prompt word wrap length limit (comma_padding_backtrack)",
                              info="In tokens: a text after the last comma shorter than this that does not fit in the "
                                   "75-token chunk moves to the next chunk (0: off).",
                              elem_id="settings_comma_padding_backtrack")
        clip_l_skip = gr.Checkbox(value=lambda: state.options.get("sdxl_clip_l_skip"),
                                  label="Clip skip SDXL (sdxl_clip_l_skip)",
                                  info="On SDXL, Clip skip also moves CLIP-L's layer (OpenCLIP-G keeps its penultimate "
                                       "one). No effect on SD 1.x/2.x. Not recorded in the infotext, as in A1111.",
                                  elem_id="settings_sdxl_clip_l_skip")
    return emphasis, comma, clip_l_skip


def build_defaults_widgets(state: ServerState) -> list:
    """Sampler defaults, in OPTION_KEYS order: what new pages start with and what API requests that omit them get."""
    from pipelines.samplers import list_samplers
    from pipelines.samplers.schedule_types import SCHEDULE_TYPES
    from webui.ui.widgets import widget_ranges

    ranges = widget_ranges(state.limits)

    def current(field: str):
        return lambda: getattr(state.generation_defaults(), field)

    def slider(field: str, label: str):
        spec = ranges[field]
        return gr.Slider(spec.minimum, spec.maximum, value=current(field), step=spec.step, label=label,
                         elem_id=f"settings_default_{field}")

    with gr.Accordion("Generation defaults (new pages, and API requests that leave these fields out)", open=True,
                      elem_id="settings_defaults"):
        with gr.Row():
            sampler = gr.Dropdown([item["name"] for item in list_samplers()], value=current("sampler"),
                                  label="Sampling method", elem_id="settings_default_sampler")
            schedule = gr.Dropdown(SCHEDULE_TYPES.names(), value=current("schedule_type"), label="Schedule type",
                                   elem_id="settings_default_schedule_type")
            steps = slider("steps", "Sampling steps")
        with gr.Row():
            cfg = slider("cfg_scale", "CFG Scale")
            width = slider("width", "Width")
            height = slider("height", "Height")
    widgets = {"sampler": sampler, "schedule_type": schedule, "steps": steps, "cfg_scale": cfg, "width": width,
               "height": height}
    return [widgets[field] for field in OPTION_KEYS.values()]
