"""Image- and text-guided generation: blend several images, then repaint the blend with a prompt.

PaddleMIX uses Versatile Diffusion's dual-guided pipeline; mixkit has no Versatile Diffusion
model, so this task reaches the same user goal with the shared SD model: a weighted pixel blend of
the input images is the img2img starting point and the prompt steers the denoising. PaddleMIX's
`text_to_image_strength` (how far the text outweighs the image, 0..1) is therefore this task's
`denoising_strength` (how far the result departs from the blend towards the prompt, 0..1).
"""

from __future__ import annotations

import numbers
from typing import Any

from appflow.progress import images_made, pipeline_hooks
from appflow.task import Port, check_number_option, register_task
from appflow.tasks.diffusion import (
    DEFAULT_SD, GENERATION_OPTIONS, IMAGE_TO_IMAGE_SPECS, IMG2IMG_ALIASES, GenerationTask, check_lora_folder,
    generation_kwargs, generation_record, image_to_image_pipeline, one_call_at_a_time, specs_for, working_size,
)


def as_weight_list(weights: Any) -> Any:
    """A 1-D numpy array of weights as the list it stands for (numpy values are taken as the pipelines take them);
    anything else unchanged, for the checks to name."""
    if type(weights).__module__ == "numpy" and getattr(weights, "ndim", None) == 1:
        return weights.tolist()
    return list(weights) if isinstance(weights, (list, tuple)) else weights


def blend_images(images: list, weights: list[float] | None = None):
    """Weighted average of the images, all resized to the first one's size."""
    import numpy as np
    from PIL import Image

    weights = [1.0] * len(images) if weights is None else as_weight_list(weights)
    if len(weights) != len(images) or any(isinstance(w, bool) or not isinstance(w, numbers.Real) or w < 0
                                          for w in weights) or sum(weights) <= 0:
        raise ValueError(f"image_weights must be {len(images)} non-negative numbers with a positive sum, got {weights!r}.")
    size = images[0].size
    stack = np.stack([np.asarray(image.convert("RGB").resize(size), dtype=np.float64) for image in images])
    mixed = np.tensordot(np.asarray(weights, dtype=np.float64) / sum(weights), stack, axes=1)
    return Image.fromarray(np.clip(np.rint(mixed), 0, 255).astype(np.uint8))


@register_task
class DualGuidedGenerationTask(GenerationTask):
    """One image guided by several images (blended) and a prompt; `infotexts` and `seeds` as image_to_image's."""

    name = "dual_guided_generation"
    description = "blend images + prompt -> img2img"
    inputs = {"images": Port("images"), "prompt": Port("text")}
    outputs = {"image": "image", "blend": "image", "infotexts": "texts", "seeds": "ints"}
    main_output = "image"
    models = {"generator": "stable-diffusion"}
    default_models = {"generator": DEFAULT_SD}
    options = {**GENERATION_OPTIONS, "denoising_strength": 0.6, "image_weights": None, "width": None, "height": None}
    option_specs = specs_for(options, IMAGE_TO_IMAGE_SPECS)
    option_aliases = {**IMG2IMG_ALIASES, "text_to_image_strength": "denoising_strength"}

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        super().check_options(options)
        weights = as_weight_list(options["image_weights"])
        if weights is None:
            return
        if isinstance(weights, (str, bytes)) or not isinstance(weights, (list, tuple)) or not weights:
            raise ValueError(f"image_weights must be None (equal weights) or a list of numbers, one per image, "
                             f"got {weights!r}.")
        for index, weight in enumerate(weights):
            check_number_option(f"image_weights[{index}]", weight, 0)
        if sum(weights) <= 0:
            raise ValueError(f"image_weights must have a positive sum, got {list(weights)!r}.")

    def run(self, models, options, *, images: list, prompt: str) -> dict[str, Any]:
        check_lora_folder(models, prompt, self.name)
        blend = blend_images(list(images), options["image_weights"])
        pipe = image_to_image_pipeline(models)
        width, height = working_size(blend, pipe, options["width"], options["height"])
        with one_call_at_a_time(pipe.model):
            result = pipe(prompt=prompt, init_images=[blend], width=width, height=height,
                          denoising_strength=options["denoising_strength"], **generation_kwargs(options),
                          **pipeline_hooks())
        return {"image": images_made(result)[0], "blend": blend, **generation_record(result)}
