"""Text-guided 4x upscaling with Stable Diffusion's x4 upscaler (tiled for large inputs)."""

from __future__ import annotations

from typing import Any

from appflow.task import Port, Task, register_task


@register_task
class TextGuidedUpscaleTask(Task):
    """Upscale an image 4x; the prompt describes the content, steering the added detail."""

    name = "text_guided_upscale"
    description = "SD x4 upscaler"
    inputs = {"image": Port("image"), "prompt": Port("text")}
    outputs = {"image": "image"}
    main_output = "image"
    models = {"upscaler": "sd-x4-upscaler"}
    default_models = {"upscaler": "stabilityai/stable-diffusion-x4-upscaler"}
    options = {"negative_prompt": "", "steps": 20, "guidance_scale": 9.0, "noise_level": 20, "seed": 0,
               "tile_size": 128, "tile_overlap": 16}

    def run(self, models, options, *, image, prompt: str) -> dict[str, Any]:
        from pipelines.upscale import SDx4Upscaler, upscale_image

        loaded = models.get("upscaler")
        # A per-call view on the cached diffusers pipeline: the settings differ per call, the weights do not.
        upscaler = SDx4Upscaler(loaded.pipeline, prompt=prompt, **options)
        return {"image": upscale_image(image.convert("RGB"), SDx4Upscaler.scale, upscaler=upscaler)}
