"""Settings > Upscaling: A1111's tile size and overlap for model upscalers, one pair per network family, its
SwinIR torch.compile switch and which DAT release entries are listed (`dat_enabled_models`).

Applied with their own button, as the sampler parameters are, so the Settings tab's main form keeps its inputs; the
values are `/sdapi/v1/options`' `ESRGAN_tile` / `ESRGAN_tile_overlap` (ESRGAN, Real-ESRGAN and HAT files),
`SWIN_tile` / `SWIN_tile_overlap` (SwinIR), `DAT_tile` / `DAT_tile_overlap` (DAT), `SCUNET_tile` /
`SCUNET_tile_overlap` (ScuNET) and `SWIN_torch_compile`, and retile (or compile)
the registered model upscalers they apply to.
"""

from __future__ import annotations

import gradio as gr

from pipelines.model_upscale_listing import DAT_RELEASE_NAMES
from webui.options import DAT_ENABLED_KEY, SWIN_COMPILE_KEY, UPSCALER_TILE_OPTIONS
from webui.server_state import ServerState

# A1111's labels and slider ranges: tile 0-512 step 16 (SwinIR's from 16: its extension's slider), overlap 0-48
# (ScuNET's 0-64)
_FAMILIES = {"ESRGAN": ("ESRGAN upscalers", 0, 48), "SWIN": ("SwinIR", 16, 48), "DAT": ("DAT upscalers", 0, 48),
             "SCUNET": ("SCUNET upscalers", 0, 64)}


def build_upscaler_settings(state: ServerState, apply_settings) -> None:
    """The four slider pairs, the compile checkbox and their Apply button."""
    sliders = []
    for option in UPSCALER_TILE_OPTIONS:
        label, lowest, overlap_top = _FAMILIES[option]
        with gr.Row():
            sliders.append(gr.Slider(lowest, 512, value=lambda key=f"{option}_tile": state.options.get(key), step=16,
                                     elem_id=f"settings_{option}_tile",
                                     label=f"Tile size for {label} (input pixels; 0 = no tiling)"))
            sliders.append(gr.Slider(0, overlap_top, value=lambda key=f"{option}_tile_overlap": state.options.get(key), step=1,
                                     elem_id=f"settings_{option}_tile_overlap",
                                     label=f"Tile overlap for {label} (pixels; low values make a seam visible)"))
    compile_swinir = gr.Checkbox(lambda: state.options.get(SWIN_COMPILE_KEY), elem_id=f"settings_{SWIN_COMPILE_KEY}",
                                 label="Use torch.compile to accelerate SwinIR (takes longer on first run; runs "
                                       "uncompiled, with a warning, where compiling fails)")
    dat_enabled = gr.CheckboxGroup(list(DAT_RELEASE_NAMES), value=lambda: state.options.get(DAT_ENABLED_KEY),
                                   elem_id=f"settings_{DAT_ENABLED_KEY}",
                                   label="Select which DAT models to show in the web UI (the /sdapi/v1/upscalers "
                                         "listing; a file is listed by its name either way)")
    status = gr.Markdown()
    button = gr.Button("Apply upscaling settings", elem_id="settings_apply_upscaling")
    keys = [key for option in UPSCALER_TILE_OPTIONS for key in (f"{option}_tile", f"{option}_tile_overlap")]

    def apply(*values):
        *pixels, compiled, enabled = values
        return apply_settings(state, {**{key: int(value) for key, value in zip(keys, pixels)},
                                      SWIN_COMPILE_KEY: bool(compiled), DAT_ENABLED_KEY: list(enabled or [])})

    button.click(apply, inputs=[*sliders, compile_swinir, dat_enabled], outputs=status)
