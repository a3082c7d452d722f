"""Settings > Interrogate, DeepBooru part: A1111's deepbooru options (img2img's Interrogate DeepBooru button,
POST /sdapi/v1/interrogate with model "deepdanbooru").

Applied with their own button; the values are `/sdapi/v1/options`' A1111 keys, checked by
`mixkit.interrogate.DeepbooruSettings`. The ranks checkbox above (`interrogate_return_ranks`) applies here too, as in
A1111.
"""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState


def build_deepbooru_settings(state: ServerState, apply_settings) -> None:
    """A1111's widgets, labels and ranges: the threshold slider, three checkboxes and the filter list."""
    def current(key: str):
        return lambda: state.options.get(key)

    threshold = gr.Slider(0, 1, value=current("interrogate_deepbooru_score_threshold"), step=0.01,
                          label="deepbooru: score threshold", elem_id="settings_interrogate_deepbooru_score_threshold")
    with gr.Row():
        alpha = gr.Checkbox(current("deepbooru_sort_alpha"), label="deepbooru: sort tags alphabetically (else by score)",
                            elem_id="settings_deepbooru_sort_alpha")
        spaces = gr.Checkbox(current("deepbooru_use_spaces"), label="deepbooru: use spaces in tags (else underscores)",
                             elem_id="settings_deepbooru_use_spaces")
        escape = gr.Checkbox(current("deepbooru_escape"), label="deepbooru: escape (\\) brackets (literal brackets, "
                             "not emphasis)", elem_id="settings_deepbooru_escape")
    filter_tags = gr.Textbox(current("deepbooru_filter_tags"), label="deepbooru: filter out those tags (separate by "
                             "comma)", elem_id="settings_deepbooru_filter_tags")
    status = gr.Markdown()
    button = gr.Button("Apply DeepBooru settings", elem_id="settings_apply_deepbooru")

    def apply(threshold_value, alpha_value, spaces_value, escape_value, filter_value):
        return apply_settings(state, {
            "interrogate_deepbooru_score_threshold": threshold_value, "deepbooru_sort_alpha": bool(alpha_value),
            "deepbooru_use_spaces": bool(spaces_value), "deepbooru_escape": bool(escape_value),
            "deepbooru_filter_tags": filter_value if filter_value is not None else ""})

    button.click(apply, inputs=[threshold, alpha, spaces, escape, filter_tags], outputs=status)
