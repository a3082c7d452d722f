"""Settings > Sampler parameters' schedule and churn controls, and Settings > img2img's noise controls.

A1111's options of the same names (`pipelines.sampler_parameters`, `pipelines.img2img_noise`), applied with their
own button so the Settings tab's main form keeps its inputs; every UI generation and every API request that does not
override them uses them.
"""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState

# option -> (label, slider range as A1111's Settings show it, step); 0 keeps the sampler's default where noted
SLIDERS = {
    "sigma_min": ("Schedule min sigma (0: the model's)", 0.0, 2.0, 0.0001),
    "sigma_max": ("Schedule max sigma (0: the model's)", 0.0, 100.0, 0.01),
    "rho": ("Schedule rho (Karras, Polyexponential; 0: the schedule's own)", 0.0, 10.0, 0.01),
    "s_churn": ("Sigma churn (Euler, Heun, DPM2)", 0.0, 100.0, 0.01),
    "s_tmin": ("Sigma tmin (churn only at sigmas above it)", 0.0, 10.0, 0.01),
    "s_tmax": ("Sigma tmax (churn only at sigmas below it; 0: infinity)", 0.0, 999.0, 0.01),
    "s_noise": ("Sigma noise (scale of the churn noise)", 0.0, 1.1, 0.001),
    "initial_noise_multiplier": ("img2img: noise multiplier", 0.0, 1.5, 0.001),
    "img2img_extra_noise": ("img2img: extra noise", 0.0, 1.0, 0.01),
    "inpainting_mask_weight": ("img2img: inpainting conditioning mask strength (inpainting checkpoints; 1: the masked "
                               "area fully grey)", 0.0, 1.0, 0.01),
}
DISCARD = "always_discard_next_to_last_sigma"
SGM = "sgm_noise_multiplier"


def build_sampler_parameter_settings(state: ServerState, apply_settings) -> None:
    """The controls and their Apply button; `apply_settings(state, values)` checks and applies (settings_tab's)."""
    with gr.Row():
        sliders = [gr.Slider(low, high, value=lambda key=key: state.options.get(key), step=step, label=label,
                             elem_id=f"settings_{key}") for key, (label, low, high, step) in SLIDERS.items()]
    discard = gr.Checkbox(lambda: state.options.get(DISCARD), elem_id=f"settings_{DISCARD}",
                          label="Always discard the penultimate sigma (DPM2 and DPM2 a always do)")
    sgm = gr.Checkbox(lambda: state.options.get(SGM), elem_id=f"settings_{SGM}",
                      label="SGM noise multiplier: txt2img starts from noise of std sqrt(1 + sigma_max^2)")
    status = gr.Markdown()
    button = gr.Button("Apply sampler parameters", elem_id="settings_apply_sampler_parameters")

    def do_apply(*values):
        changes = {key: float(value) for key, value in zip(SLIDERS, values[:-2])}
        changes[DISCARD], changes[SGM] = bool(values[-2]), bool(values[-1])
        return apply_settings(state, changes)

    button.click(do_apply, inputs=[*sliders, discard, sgm], outputs=status)
