"""Settings: which checkpoint and VAE are loaded, whether images are saved, live previews, default clip skip.

Changes go through the same `ServerOptions` checks and the same queued model switch as
`POST /sdapi/v1/options`. The output folder is shown, not editable: it is the operator's choice.
"""

from __future__ import annotations

import gradio as gr
from webui.server_state import ServerState


def switch_vae(state: ServerState, name: str) -> str:
    """Queue the VAE swap, wait for it, and return the status line; a failure keeps the current VAE and says so."""
    if not name:
        raise gr.Error("Choose a VAE first.")
    try:
        state.submit_vae_switch(name).future.result()
    except Exception as error:  # keep decoding with the previous VAE; tell the user why
        raise gr.Error(f"Could not use VAE {name!r}: {error}. Still using {state.holder.vae_name!r}.") from None
    return f"Loaded: **{state.model_title}**, VAE: **{state.holder.vae_name}**"


def build_settings_tab(state: ServerState) -> None:
    with gr.Row():
        checkpoint = gr.Dropdown(state.catalog.titles(), value=state.model_title, label="Stable Diffusion checkpoint",
                                 elem_id="settings_checkpoint", scale=4)
        refresh = gr.Button("\U0001f504", scale=0, min_width=40, elem_id="settings_refresh_checkpoints")
        load = gr.Button("Load", variant="primary", scale=1, elem_id="settings_load_checkpoint")
    with gr.Row():
        vae = gr.Dropdown(state.vaes.names(), value=state.options.get("sd_vae"), label="SD VAE (Automatic: the checkpoint's own)",
                          elem_id="settings_sd_vae", scale=4)
        vae_refresh = gr.Button("\U0001f504", scale=0, min_width=40, elem_id="settings_refresh_vaes")
        vae_load = gr.Button("Use VAE", scale=1, elem_id="settings_load_vae")
    status = gr.Markdown(f"Loaded: **{state.model_title or 'none'}**", elem_id="settings_status")
    gr.Textbox(str(state.output_dir), label="Output folder (set with --output-dir)", interactive=False)
    with gr.Row():
        save = gr.Checkbox(state.options.get("samples_save"), label="Save generated images with their infotext")
        previews = gr.Checkbox(state.options.get("live_previews_enable"), label="Live previews")
        clip_skip = gr.Slider(1, 12, value=state.options.get("CLIP_stop_at_last_layers"), step=1,
                              label="Default clip skip (API requests)")
    apply = gr.Button("Apply settings", elem_id="settings_apply")

    def do_refresh():
        return gr.Dropdown(choices=state.catalog.refresh() and state.catalog.titles(), value=state.model_title)

    def do_load(title: str):
        if not title:
            raise gr.Error("Choose a checkpoint first.")
        try:
            job = state.submit_model_switch(title)
            job.future.result()
        except Exception as error:  # keep serving the previous model; tell the user why
            raise gr.Error(f"Could not load {title!r}: {error}. Still using {state.model_title!r}.") from None
        return f"Loaded: **{state.model_title}**"

    def do_apply(save_value: bool, previews_value: bool, clip_value: float):
        try:
            checked = state.options.check_update({"samples_save": bool(save_value), "live_previews_enable": bool(previews_value),
                                                  "CLIP_stop_at_last_layers": int(clip_value)})
        except ValueError as error:
            raise gr.Error(str(error)) from None
        state.options.apply(checked)
        return "Settings applied."

    def do_vae_refresh():
        state.vaes.refresh()
        return gr.Dropdown(choices=state.vaes.names(), value=state.holder.vae_name)

    refresh.click(do_refresh, outputs=checkpoint)
    vae_refresh.click(do_vae_refresh, outputs=vae)
    vae_load.click(lambda name: switch_vae(state, name), inputs=vae, outputs=status)
    load.click(do_load, inputs=checkpoint, outputs=status)
    apply.click(do_apply, inputs=[save, previews, clip_skip], outputs=status)
