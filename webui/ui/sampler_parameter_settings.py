"""Settings > Sampler parameters' schedule, churn, Beta, UniPC, noise schedule and cond padding controls, Settings >
img2img's noise controls, Settings > Stable Diffusion's hires refiner pass and Settings > Compatibility's refiner
switch by sampling steps.

A1111's options of the same names (`pipelines.sampler_parameters`, `pipelines.img2img_noise`), applied with their
own button so the Settings tab's main form keeps its inputs; every UI generation and every API request that does not
override them uses them.
"""

from __future__ import annotations

import gradio as gr

from pipelines.img2img_noise import RANGES as IMG2IMG_NOISE_RANGES
from pipelines.sampler_parameters import RANGES as SAMPLER_PARAMETER_RANGES
from webui.server_state import ServerState

_BOUNDS = {**SAMPLER_PARAMETER_RANGES, **IMG2IMG_NOISE_RANGES}  # the pipelines' own bounds: what a slider can reach

# option -> (label, slider range, step); 0 keeps the sampler's default where noted. The ranges are the pipelines'
# bounds (A1111's sliders), but for the schedule's sigma bounds and rho: A1111 shows number boxes there, and sliders
# over the whole allowed range (up to 5000) would be too coarse, so they cover the usual values only.
SLIDERS = {
    "sigma_min": ("Schedule min sigma (0: the model's)", 0.0, 2.0, 0.0001),
    "sigma_max": ("Schedule max sigma (0: the model's)", 0.0, 100.0, 0.01),
    "rho": ("Schedule rho (Karras, Polyexponential; 0: the schedule's own)", 0.0, 10.0, 0.01),
    "s_churn": ("Sigma churn (Euler, Heun, DPM2)", *_BOUNDS["s_churn"], 0.01),
    "s_tmin": ("Sigma tmin (churn only at sigmas above it)", *_BOUNDS["s_tmin"], 0.01),
    "s_tmax": ("Sigma tmax (churn only at sigmas below it; 0: infinity)", *_BOUNDS["s_tmax"], 0.01),
    "s_noise": ("Sigma noise (scale of the churn noise)", *_BOUNDS["s_noise"], 0.001),
    "initial_noise_multiplier": ("img2img: noise multiplier", *_BOUNDS["initial_noise_multiplier"], 0.001),
    "img2img_extra_noise": ("img2img: extra noise", *_BOUNDS["img2img_extra_noise"], 0.01),
    "inpainting_mask_weight": ("img2img: inpainting conditioning mask strength (inpainting checkpoints; 1: the masked "
                               "area fully grey)", 0.0, 1.0, 0.01),
    "beta_dist_alpha": ("Beta schedule alpha", *_BOUNDS["beta_dist_alpha"], 0.01),  # A1111's Beta schedule shape
    "beta_dist_beta": ("Beta schedule beta", *_BOUNDS["beta_dist_beta"], 0.01),
    # A1111's Settings > Optimizations; mixkit's ToMe merges at most 3 of every 4 tokens (tome_unet.MAX_RATIO)
    "token_merging_ratio_hr": ("Token merging ratio for high-res pass (Optimizations; ToMe in the hires pass only, "
                               "0: the first pass's; infotext 'Token merging ratio hr')", 0.0, 0.75, 0.05),
}
WHOLE_SLIDERS = {"uni_pc_order": ("UniPC order (below the sampling steps)", *_BOUNDS["uni_pc_order"], 1)}
# option -> (label, choices), A1111's
RADIOS = {
    "uni_pc_variant": ("UniPC variant", ["bh1", "bh2", "vary_coeff"]),
    "uni_pc_skip_type": ("UniPC skip type", ["time_uniform", "time_quadratic", "logSNR"]),
    "sd_noise_schedule": ("Noise schedule for sampling (Zero Terminal SNR: for models trained with it)",
                          ["Default", "Zero Terminal SNR"]),
    # A1111 shows it under Settings > Stable Diffusion (pipelines.hires.HIRES_REFINER_PASSES)
    "hires_fix_refiner_pass": ("Hires fix: which pass to enable refiner for (Stable Diffusion; infotext 'Hires "
                               "refiner' when not second pass)", ["first pass", "second pass", "both passes"]),
}
CHECKBOXES = {
    "always_discard_next_to_last_sigma": "Always discard the penultimate sigma (DPM2 and DPM2 a always do)",
    "sgm_noise_multiplier": "SGM noise multiplier: txt2img starts from noise of std sqrt(1 + sigma_max^2)",
    "uni_pc_lower_order_final": "UniPC lower order final",
    "pad_cond_uncond": "Pad prompt/negative prompt to one length with the empty prompt (Optimizations; changes seeds)",
    "pad_cond_uncond_v0": "Pad prompt/negative prompt (v0): repeat or cut the negative prompt (wins over the above)",
    "use_downcasted_alpha_bar": "Downcast model alphas_cumprod to fp16 before sampling (Compatibility; old seeds)",
    "refiner_switch_by_sample_steps": "Switch to refiner by sampling steps instead of model timesteps (Compatibility; "
                                      "A1111's old behaviour; infotext 'Refiner switch by sampling steps')",
    "tiling": "Tiling: produce a tileable picture (the UNet's and VAE's convolutions pad circularly; infotext 'Tiling')",
    "use_old_scheduling": "Use old prompt editing timelines (Compatibility): in [a:b:N] an N below 1 is a fraction of "
                          "the steps, else a step number (hires fix counts the first pass's steps); new: N with a '.' "
                          "is a fraction (1 to 2 in hires fix), else a step number",
}


def build_sampler_parameter_settings(state: ServerState, apply_settings) -> None:
    """The controls and their Apply button; `apply_settings(state, values)` checks and applies (settings_tab's)."""
    with gr.Row():
        sliders = [gr.Slider(low, high, value=lambda key=key: state.options.get(key), step=step, label=label,
                             elem_id=f"settings_{key}") for key, (label, low, high, step) in SLIDERS.items()]
        whole = [gr.Slider(low, high, value=lambda key=key: state.options.get(key), step=step, label=label,
                           elem_id=f"settings_{key}") for key, (label, low, high, step) in WHOLE_SLIDERS.items()]
    radios = [gr.Radio(choices, value=lambda key=key: state.options.get(key), label=label, elem_id=f"settings_{key}")
              for key, (label, choices) in RADIOS.items()]
    checkboxes = [gr.Checkbox(lambda key=key: state.options.get(key), label=label, elem_id=f"settings_{key}")
                  for key, label in CHECKBOXES.items()]
    status = gr.Markdown()
    button = gr.Button("Apply sampler parameters", elem_id="settings_apply_sampler_parameters")

    def do_apply(*values):
        values = list(values)
        changes = {key: float(values.pop(0)) for key in SLIDERS}
        changes.update({key: int(values.pop(0)) for key in WHOLE_SLIDERS})
        changes.update({key: values.pop(0) for key in RADIOS})
        changes.update({key: bool(values.pop(0)) for key in CHECKBOXES})
        return apply_settings(state, changes)

    button.click(do_apply, inputs=[*sliders, *whole, *radios, *checkboxes], outputs=status)
