"""The Gradio Blocks app: txt2img, img2img, Extras, PNG Info, AppFlow, LoRA, Textual Inversion, Checkpoint Merger,
Train and Settings tabs over one `ServerState`."""

from __future__ import annotations

import gradio as gr
from webui.server_state import ServerState

CSS = """
.mixkit-progress { height: 10px; background: var(--neutral-200); border-radius: 5px; overflow: hidden; }
.mixkit-progress-bar { height: 100%; background: var(--color-accent); transition: width 0.3s; }
.mixkit-progress-text { font-size: 0.85em; margin-top: 4px; }
"""


def build_ui(state: ServerState):
    """The app's Blocks; its `mixkit_page_values` are the values each served page starts from (Settings defaults)."""
    from pipelines.samplers import list_samplers
    from pipelines.samplers.schedule_types import SCHEDULE_TYPES
    from webui.ui.appflow_tab import build_appflow_tab
    from webui.ui.embeddings_tab import build_embeddings_tab
    from webui.ui.errors import redact_handler_errors
    from webui.ui.extras_tab import build_extras_tab
    from webui.ui.generate_tab import build_generate_tab
    from webui.ui.hypernetwork_tab import build_hypernetwork_tab
    from webui.ui.image_cfg_controls import image_cfg_visibility
    from webui.ui.lora_tab import build_lora_tab
    from webui.ui.merger_tab import build_merger_tab, wire_merge
    from webui.ui.merger_task import CheckpointList
    from webui.ui.page_values import take_page_values
    from webui.ui.png_info_tab import build_png_info_tab
    from webui.ui.prompt_targets import prompt_boxes
    from webui.ui.reattach import wire_reattach
    from webui.ui.refiner_controls import NO_CHECKPOINT
    from webui.ui.send_to import wire_paste_button, wire_send_buttons
    from webui.ui.settings_tab import build_settings_tab
    from webui.ui.train_tab import build_train_tab

    sampler_names = [item["name"] for item in list_samplers()]
    schedule_names = SCHEDULE_TYPES.names()
    with gr.Blocks(title="mixkit", analytics_enabled=False) as blocks:
        with gr.Tabs() as tabs:
            with gr.Tab("txt2img", id="txt2img"):
                txt2img = build_generate_tab(state, "txt2img", sampler_names, schedule_names)
            with gr.Tab("img2img", id="img2img"):
                img2img = build_generate_tab(state, "img2img", sampler_names, schedule_names)
            with gr.Tab("Extras", id="extras"):
                extras_image, extras_followed = build_extras_tab(state)
            with gr.Tab("PNG Info", id="pnginfo"):
                build_png_info_tab(state, tabs, {"txt2img": txt2img, "img2img": img2img}, sampler_names, schedule_names,
                                   extras_image)
            with gr.Tab("AppFlow", id="appflow"):
                appflow_followed = build_appflow_tab(state)
            boxes = prompt_boxes({"txt2img": txt2img, "img2img": img2img})
            with gr.Tab("LoRA", id="lora"):
                build_lora_tab(state, boxes)
            with gr.Tab("Hypernetworks", id="hypernetworks"):
                build_hypernetwork_tab(state, boxes)
            with gr.Tab("Textual Inversion", id="embeddings"):
                build_embeddings_tab(state, boxes)
            with gr.Tab("Checkpoint Merger", id="modelmerger"):
                merger = build_merger_tab(state)
            with gr.Tab("Train", id="train"):
                train_followed = build_train_tab(state)  # one per sub-tab family
            with gr.Tab("Settings", id="settings"):
                settings_checkpoint = build_settings_tab(state)
        for tab in (txt2img, img2img):  # wired once every target exists
            wire_paste_button(state, tab, sampler_names, schedule_names)
            wire_send_buttons(state, tabs, tab, img2img, extras_image, sampler_names, schedule_names)

        for kind, tab in (("txt2img", txt2img), ("img2img", img2img)):  # a reloaded page follows its task again
            wire_reattach(state, blocks, kind, tab.task_box, tab.outputs)
        # A1111 shows Image CFG Scale while an instruct-pix2pix checkpoint is loaded: a Load updates it
        settings_checkpoint.change(lambda: image_cfg_visibility(state), outputs=img2img.image_cfg_scale)
        merger_followed = wire_merge(state, merger, [  # a merge ends with the new file in every checkpoint list
            CheckpointList(settings_checkpoint, state.catalog.titles),
            *(CheckpointList(tab.refiner[1], lambda: [NO_CHECKPOINT, *state.catalog.titles()])
              for tab in (txt2img, img2img))])
        for followed in (extras_followed, appflow_followed, *train_followed, merger_followed):
            if followed is not None:
                wire_reattach(state, blocks, followed.kind, followed.task_box, followed.outputs, followed.follow)

        def end_session(request: gr.Request):
            # The tab was closed or reloaded (Gradio's heartbeat connection ended): the jobs its tabs started go on
            # for a reloaded page to follow by task id (`webui.ui.reattach`); a job of the session not kept on
            # disconnect (no tab queues one now) would be dropped or interrupted.
            state.cancel_session(getattr(request, "session_hash", None))

        blocks.unload(end_session)
        # Before the Blocks closes (which would attach a page-load event for each): see `webui.ui.page_values`.
        blocks.mixkit_page_values = take_page_values(blocks)
    redact_handler_errors(blocks, state)  # once the Blocks is closed: every handler it has shows no server path
    return blocks
