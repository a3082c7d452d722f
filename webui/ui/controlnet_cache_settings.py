"""Settings > ControlNet: sd-webui-controlnet's "Model cache size" (`control_net_model_cache_size`), applied with its
own button.

How many ControlNet / IP-Adapter models (weights and image encoders: one place each) stay loaded between jobs, the
least recently used evicted first (`pipelines.unit_model_cache`). Unlike the extension's, the new size applies at once
(a lowered one frees the models over it now, those the running job uses when it ends), no restart needed.
"""

from __future__ import annotations

import gradio as gr

from pipelines.unit_model_cache import CACHE_SIZE_KEY, MAX_CACHE_SIZE
from webui.server_state import ServerState


def build_controlnet_cache_settings(state: ServerState, apply_settings) -> None:
    """The cache size slider, what it holds now, and its Apply button; `apply_settings(state, values)` checks and
    applies (settings_tab's)."""
    size = gr.Slider(0, MAX_CACHE_SIZE, value=lambda: state.options.get(CACHE_SIZE_KEY), step=1,
                     elem_id=f"settings_{CACHE_SIZE_KEY}",
                     label="Model cache size: ControlNet / IP-Adapter models kept loaded between jobs (an IP-Adapter "
                           "takes two places, its weights and its image encoder; 0 keeps none)")
    status = gr.Markdown(lambda: held_line(state), elem_id="settings_controlnet_cache_status")
    button = gr.Button("Apply ControlNet settings", elem_id="settings_apply_controlnet_cache")

    def apply(value):
        applied = apply_settings(state, cache_size_changes(value))
        return f"{applied} {held_line(state)}"

    button.click(apply, inputs=size, outputs=status)


def cache_size_changes(value) -> dict:
    """The slider's value as the option change (a whole float as int; anything else left for the check to name)."""
    return {CACHE_SIZE_KEY: int(value) if isinstance(value, float) and value.is_integer() else value}


def held_line(state: ServerState) -> str:
    """How many unit models the server holds now, or why it holds none (no ControlNet folder)."""
    if state.controlnets is None:
        return "This server has no ControlNet folder (start it with --controlnet-dir); the setting is kept for then."
    return f"Loaded now: {len(state.controlnets.cache)} of at most {state.options.get(CACHE_SIZE_KEY)}."
