"""Text-guided 4x upscaling with Stable Diffusion's x4 upscaler (tiled for large inputs)."""

from __future__ import annotations

import random
from typing import Any

from appflow.option_specs import OptionSpec
from appflow.task import Port, Task, register_task
from appflow.tasks.diffusion import GENERATION_ALIASES, one_call_at_a_time
from pipelines.params import SEED_MAX

# The upper bound of noise_level is the model's (max_noise_level), checked once it loads; tile_overlap's is half the
# tile size, checked with it.
UPSCALE_SPECS = {
    "negative_prompt": OptionSpec("text", label="Negative prompt"),
    "steps": OptionSpec("int", 1, 1000, 1, label="Sampling steps"),
    "cfg_scale": OptionSpec("float", 0, 100, 0.5, label="CFG Scale"),
    "noise_level": OptionSpec("int", 0, None, 1, label="Noise level"),
    "seed": OptionSpec("seed", -1, SEED_MAX, 1, label="Seed"),
    "tile_size": OptionSpec("int", 8, None, 8, label="Tile size (latent pixels)"),
    "tile_overlap": OptionSpec("int", 0, None, 1, label="Tile overlap"),
}


@register_task
class TextGuidedUpscaleTask(Task):
    """Upscale an image 4x; the prompt describes the content, steering the added detail."""

    name = "text_guided_upscale"
    description = "SD x4 upscaler"
    inputs = {"image": Port("image"), "prompt": Port("text")}
    outputs = {"image": "image", "seed": "int"}  # the seed used: with seed -1, the one drawn for the call
    main_output = "image"
    models = {"upscaler": "sd-x4-upscaler"}
    default_models = {"upscaler": "stabilityai/stable-diffusion-x4-upscaler"}
    # The names and the seed convention (-1: a new random seed per call) of the other SD tasks; CFG 9 and 20 noise
    # levels are the x4 upscaler's own defaults (diffusers' StableDiffusionUpscalePipeline).
    options = {"negative_prompt": "", "steps": 20, "cfg_scale": 9.0, "noise_level": 20, "seed": -1,
               "tile_size": 128, "tile_overlap": 16}
    option_specs = UPSCALE_SPECS
    option_aliases = GENERATION_ALIASES  # `guidance_scale`, this task's option's earlier name and diffusers' spelling

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        def check_int(name: str, low: int, high: int | None) -> None:
            value = options[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
                bounds = f"in [{low}, {high}]" if high is not None else f">= {low}"
                raise ValueError(f"{name} must be an integer {bounds}, got {value!r}.")

        for name in ("steps", "seed", "noise_level", "tile_size"):
            check_int(name, UPSCALE_SPECS[name].low, UPSCALE_SPECS[name].high)
        check_int("tile_overlap", UPSCALE_SPECS["tile_overlap"].low, options["tile_size"] // 2 - 1)
        cfg, (low, high) = options["cfg_scale"], (UPSCALE_SPECS["cfg_scale"].low, UPSCALE_SPECS["cfg_scale"].high)
        # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
        if isinstance(cfg, bool) or not isinstance(cfg, (int, float)) or not low <= cfg <= high:
            raise ValueError(f"cfg_scale must be a number in [{low}, {high}], got {cfg!r}.")
        if not isinstance(options["negative_prompt"], str):
            raise TypeError(f"negative_prompt must be a string, got {type(options['negative_prompt']).__name__}.")

    def run(self, models, options, *, image, prompt: str) -> dict[str, Any]:
        from pipelines.params import RANDOM_SEED_MAX
        from pipelines.upscale import SDx4Upscaler, upscale_image

        loaded = models.get("upscaler")
        settings = dict(options)
        settings["guidance_scale"] = settings.pop("cfg_scale")
        if settings["seed"] == -1:
            settings["seed"] = random.randint(0, RANDOM_SEED_MAX)  # as A1111 draws a seed for -1
        # A per-call view on the cached diffusers pipeline: the settings differ per call, the weights do not.
        upscaler = SDx4Upscaler(loaded.pipeline, prompt=prompt, **settings)
        # Exactly 4x, as diffusers' x4 pipeline returns (a scale would floor each side to a multiple of 8, as
        # A1111's Extras do).
        factor = SDx4Upscaler.scale
        with one_call_at_a_time(loaded.pipeline):
            upscaled = upscale_image(image.convert("RGB"), width=factor * image.width, height=factor * image.height,
                                     upscaler=upscaler)
        return {"image": upscaled, "seed": settings["seed"]}
