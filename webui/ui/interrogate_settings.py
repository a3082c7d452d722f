"""Settings > Interrogate: A1111's options for Interrogate CLIP (img2img button, POST /sdapi/v1/interrogate).

Applied with their own button, as the upscaler tiles are; the values are `/sdapi/v1/options`' `interrogate_*` keys,
checked by `mixkit.interrogate.InterrogateSettings`. The skip list offers the categories this server ranks
(the `--interrogate-categories-dir` lists, else the built-in ones).
"""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState


def category_choices(state: ServerState) -> list[str]:
    from mixkit.interrogate import BUILTIN_CATEGORIES
    from mixkit.interrogate.categories import category_names

    folder = state.config.interrogate_categories_dir
    return category_names(folder) if folder else list(BUILTIN_CATEGORIES)


def build_interrogate_settings(state: ServerState, apply_settings) -> None:
    """A1111's widgets and ranges: two checkboxes, three caption sliders, the line limit and the skip list."""
    def current(key: str):
        return lambda: state.options.get(key)

    with gr.Row():
        keep = gr.Checkbox(current("interrogate_keep_models_in_memory"), elem_id="settings_interrogate_keep_models",
                           label="Keep the interrogation CLIP in memory (else it is dropped after each use)")
        ranks = gr.Checkbox(current("interrogate_return_ranks"), elem_id="settings_interrogate_return_ranks",
                            label="Include ranks of model tags matches in results, as (term:0.123)")
    with gr.Row():
        beams = gr.Slider(1, 16, value=current("interrogate_clip_num_beams"), step=1,
                          label="Caption: num_beams", elem_id="settings_interrogate_clip_num_beams")
        least = gr.Slider(1, 128, value=current("interrogate_clip_min_length"), step=1,
                          label="Caption: minimum length (new tokens)", elem_id="settings_interrogate_clip_min_length")
        most = gr.Slider(1, 256, value=current("interrogate_clip_max_length"), step=1,
                         label="Caption: maximum length (new tokens)", elem_id="settings_interrogate_clip_max_length")
    limit = gr.Number(current("interrogate_clip_dict_limit"), precision=0, minimum=0,
                      label="CLIP: maximum number of lines in text file (0 = no limit)",
                      elem_id="settings_interrogate_clip_dict_limit")
    skip = gr.CheckboxGroup(category_choices(state), value=current("interrogate_clip_skip_categories"),
                            label="CLIP: skip inquire categories", elem_id="settings_interrogate_clip_skip_categories")
    status = gr.Markdown()
    button = gr.Button("Apply interrogate settings", elem_id="settings_apply_interrogate")

    def apply(keep_value, ranks_value, beams_value, least_value, most_value, limit_value, skip_value):
        return apply_settings(state, {
            "interrogate_keep_models_in_memory": bool(keep_value), "interrogate_return_ranks": bool(ranks_value),
            "interrogate_clip_num_beams": int(beams_value), "interrogate_clip_min_length": int(least_value),
            "interrogate_clip_max_length": int(most_value),
            "interrogate_clip_dict_limit": int(limit_value) if limit_value is not None else limit_value,
            "interrogate_clip_skip_categories": list(skip_value or [])})

    button.click(apply, inputs=[keep, ranks, beams, least, most, limit, skip], outputs=status)
