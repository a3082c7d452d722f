"""Settings > Hypertile: A1111's nine Hypertile options (tiled self-attention, an approximate speed-up for large
images; `pipelines.approx.hypertile`), with A1111's labels and sliders, applied with their own button.

The values are `/sdapi/v1/options`' `hypertile_*` keys, read by every UI generation and every API request that does
not override them, as A1111's built-in Hypertile script reads its settings.
"""

from __future__ import annotations

import gradio as gr

from pipelines.approx.hypertile_settings import MAX_DEPTH, MAX_SWAP, MAX_TILE
from webui.server_state import ServerState

# option -> label (A1111's, with what it does); checkboxes first, then (label, low, high, step) sliders
CHECKBOXES = {
    "hypertile_enable_unet": "Enable Hypertile U-Net (every pass, the hires fix's second pass too; noticeable change "
                             "in details; infotext 'Hypertile U-Net')",
    "hypertile_enable_unet_secondpass": "Enable Hypertile U-Net for the hires fix second pass only",
    "hypertile_enable_vae": "Enable Hypertile VAE (minimal change in the picture; infotext 'Hypertile VAE')",
}
SLIDERS = {
    "hypertile_max_depth_unet": ("Hypertile U-Net max depth (larger: more levels tiled)", 0, MAX_DEPTH, 1),
    "hypertile_max_tile_unet": ("Hypertile U-Net max tile size (px; larger: slower, closer to untiled)", 0, MAX_TILE,
                                16),
    "hypertile_swap_size_unet": ("Hypertile U-Net swap size (tile layouts drawn from at random)", 1, MAX_SWAP, 1),
    "hypertile_max_depth_vae": ("Hypertile VAE max depth", 0, MAX_DEPTH, 1),
    "hypertile_max_tile_vae": ("Hypertile VAE max tile size (px)", 0, MAX_TILE, 16),
    "hypertile_swap_size_vae": ("Hypertile VAE swap size", 1, MAX_SWAP, 1),
}


def build_hypertile_settings(state: ServerState, apply_settings) -> None:
    """The controls and their Apply button; `apply_settings(state, values)` checks and applies (settings_tab's)."""
    gr.Markdown("[Hypertile](https://github.com/tfernd/HyperTile) runs self-attention in tiles of the image: faster "
                "for large images, and approximate (the image changes). Tiles are at least 128 px; with the defaults "
                "a 512 px image is tiled only where the tile size allows.")
    checkboxes = [gr.Checkbox(lambda key=key: state.options.get(key), label=label, elem_id=f"settings_{key}")
                  for key, label in CHECKBOXES.items()]
    sliders = [gr.Slider(low, high, value=lambda key=key: state.options.get(key), step=step, label=label,
                         elem_id=f"settings_{key}") for key, (label, low, high, step) in SLIDERS.items()]
    status = gr.Markdown()
    button = gr.Button("Apply Hypertile settings", elem_id="settings_apply_hypertile")
    button.click(lambda *values: apply_settings(state, hypertile_changes(*values)), inputs=[*checkboxes, *sliders],
                 outputs=status)


def hypertile_changes(*values) -> dict:
    """The form's values (checkboxes, then sliders) as option changes, checked by `apply_settings` as an API change."""
    values = list(values)
    changes = {key: bool(values.pop(0)) for key in CHECKBOXES}
    changes.update({key: int(values.pop(0)) for key in SLIDERS})
    return changes
