"""Settings > Infotext: A1111's switches for what each image's parameters text tells about its making.

Model and VAE names and hashes, the program version, the --auth user name, LoRA hashes and textual-inversion hashes
(with the LoRA name of a word whose vectors a LoRA bundles). Applied with their own button, as the upscaling
settings are, so the Settings tab's main form keeps its inputs; the values are `/sdapi/v1/options`' keys of the
same names (`webui.options.INFOTEXT_OPTION_KEYS`) and hold for every UI and API generation after.
"""

from __future__ import annotations

import gradio as gr

from webui.options import INFOTEXT_OPTION_KEYS
from webui.server_state import ServerState

# A1111's labels (modules/shared_options.py, the Lora and Textual Inversion options), with the key each one writes.
LABELS = {
    "add_model_name_to_info": "Add model name to infotext (Model)",
    "add_model_hash_to_info": "Add model hash to infotext (Model hash)",
    "add_vae_name_to_info": "Add VAE name to infotext (VAE)",
    "add_vae_hash_to_info": "Add VAE hash to infotext (VAE hash)",
    "add_user_name_to_info": "Add user name to infotext when authenticated (User; the --auth user)",
    "add_version_to_infotext": "Add program version to infotext (Version)",
    "lora_add_hashes_to_infotext": "Add Lora hashes to infotext (Lora hashes)",
    "textual_inversion_add_hashes_to_infotext": "Add Textual Inversion hashes to infotext (TI hashes)",
    "lora_bundled_ti_to_infotext": "Add Lora name as TI hashes for bundled Textual Inversion (needs TI hashes on)",
}


def infotext_values(checked: list) -> dict:
    """The checkboxes' values as option changes, in `INFOTEXT_OPTION_KEYS` order; not cast with bool(), so a Gradio
    client's "false" is refused by the option's check instead of read as True."""
    return dict(zip(INFOTEXT_OPTION_KEYS, checked))


def build_infotext_settings(state: ServerState, apply_settings) -> None:
    """One checkbox per switch and their Apply button."""
    boxes = []
    with gr.Row():
        for key in INFOTEXT_OPTION_KEYS:
            boxes.append(gr.Checkbox(value=lambda key=key: state.options.get(key), label=LABELS[key],
                                     elem_id=f"settings_{key}"))
    gr.Markdown("Turned off, a key is left out of the infotext of new images (PNG text, API `info`); the image "
                "itself does not change, and a paste of such an infotext keeps the current model and LoRA names.")
    status = gr.Markdown()
    button = gr.Button("Apply infotext settings", elem_id="settings_apply_infotext")
    button.click(lambda *checked: apply_settings(state, infotext_values(list(checked))), inputs=boxes, outputs=status)
