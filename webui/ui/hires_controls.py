"""Hires. fix controls for the txt2img tab, converted by the API's own code so both accept the same values.

The form values become a `Txt2ImgRequest` carrying only the hires fields and go through
`webui.api_convert.hires_params`, the function `POST /sdapi/v1/txt2img` uses: one place
decides defaults (upscaler "Latent", strength 0.7) and limits (scale, target size, steps).
"""

from __future__ import annotations

import gradio as gr

HIRES_FIELDS = ("enable_hr", "hr_upscaler", "hr_scale", "hr_second_pass_steps", "hr_resize_x", "hr_resize_y",
                "denoising_strength")


def hires_upscaler_names() -> list[str]:
    from pipelines.hires import LATENT_UPSCALERS
    from pipelines.upscale import UPSCALERS

    return LATENT_UPSCALERS.names() + UPSCALERS.names()


def build_hires_controls(limits) -> list:
    """The accordion's widgets, in HIRES_FIELDS order (inputs for `with_hires`)."""
    from pipelines.hires import MAX_HIRES_SCALE

    with gr.Accordion("Hires. fix", open=False, elem_id="txt2img_hires"):
        enabled = gr.Checkbox(False, label="Enable hires. fix", elem_id="txt2img_enable_hr")
        with gr.Row():
            upscaler = gr.Dropdown(hires_upscaler_names(), value="Latent", label="Upscaler", elem_id="txt2img_hr_upscaler")
            steps = gr.Slider(0, limits.max_steps, value=0, step=1, label="Hires steps (0 = same as sampling)",
                              elem_id="txt2img_hires_steps")
            strength = gr.Slider(0, 1, value=0.7, step=0.01, label="Denoising strength", elem_id="txt2img_hr_denoising")
        with gr.Row():
            scale = gr.Slider(1, MAX_HIRES_SCALE, value=2, step=0.05, label="Upscale by", elem_id="txt2img_hr_scale")
            resize_x = gr.Slider(0, limits.max_side, value=0, step=8, label="Resize width to (0 = use scale)",
                                 elem_id="txt2img_hr_resize_x")
            resize_y = gr.Slider(0, limits.max_side, value=0, step=8, label="Resize height to (0 = use scale)",
                                 elem_id="txt2img_hr_resize_y")
    return [enabled, upscaler, scale, steps, resize_x, resize_y, strength]


def with_hires(params, values: list, limits):
    """`params` unchanged when hires fix is off, else HiresParams checked exactly as the API checks them."""
    from webui.api_convert import hires_params
    from webui.api_requests import Txt2ImgRequest

    fields = dict(zip(HIRES_FIELDS, values))
    if not fields["enable_hr"]:
        return params

    def whole(value):  # Gradio sliders send floats; the API fields are integers
        return int(value) if isinstance(value, float) and value.is_integer() else value

    request = Txt2ImgRequest(enable_hr=True, hr_upscaler=fields["hr_upscaler"], hr_scale=float(fields["hr_scale"]),
                             hr_second_pass_steps=whole(fields["hr_second_pass_steps"]), hr_resize_x=whole(fields["hr_resize_x"]),
                             hr_resize_y=whole(fields["hr_resize_y"]), denoising_strength=float(fields["denoising_strength"]))
    return hires_params(request, params, limits)
