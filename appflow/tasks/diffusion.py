"""Stable Diffusion tasks: text-to-image, image-to-image and inpainting on one shared model.

All three take the `generator` role, so one loaded model (cached by source, dtype, device) serves
every SD step of every app in the process: img2img and inpaint wrap the cached `TextToImage`
with `ImageToImage.from_pipeline`, which shares its weights and caches.
"""

from __future__ import annotations

from typing import Any

from appflow.task import Port, Task, register_task

from mixkit.tiny.shipped import DEFAULT_TEXT_TO_IMAGE

DEFAULT_SD = DEFAULT_TEXT_TO_IMAGE  # shipped and offline; pass models={"generator": ...} for a real checkpoint
SD15 = "stable-diffusion-v1-5/stable-diffusion-v1-5"  # for apps whose add-on models (ControlNets) need SD 1.5

# None: the model's recommended value (its mixkit_generation.json: CFG 5 for mixkit-tiny-sd), else A1111's
# (20 steps, CFG 7, DPM++ 2M), chosen by the pipeline.
GENERATION_OPTIONS: dict[str, Any] = {
    "negative_prompt": "", "steps": None, "cfg_scale": None, "seed": -1, "sampler": None,
    "schedule_type": "Automatic", "clip_skip": 1, "loras": [],
}


def generation_kwargs(options: dict[str, Any]) -> dict[str, Any]:
    """The pipeline keywords among a task's options (the pipeline validates their values); None is left out."""
    return {key: options[key] for key in GENERATION_OPTIONS if options[key] is not None}


def working_size(image, pipe, width: int | None, height: int | None) -> tuple[int, int]:
    """The generation size: given, or the input image's size rounded down to the VAE's multiple."""
    multiple = pipe.model.vae_scale_factor
    width = width if width is not None else max(multiple, image.width - image.width % multiple)
    height = height if height is not None else max(multiple, image.height - image.height % multiple)
    return width, height


def image_to_image_pipeline(models):
    from pipelines.img2img import ImageToImage

    return ImageToImage.from_pipeline(models.get("generator"))


@register_task
class TextToImageTask(Task):
    """Text-to-image with every mixkit prompt feature (weights, schedules, LoRA tags, embeddings)."""

    name = "text_to_image"
    description = "SD/SDXL txt2img"
    inputs = {"prompt": Port("text")}
    outputs = {"images": "images"}
    main_output = "images"
    models = {"generator": "stable-diffusion"}
    default_models = {"generator": DEFAULT_SD}
    options = {**GENERATION_OPTIONS, "width": None, "height": None, "batch_size": 1, "batch_count": 1}

    def run(self, models, options, *, prompt: str) -> dict[str, Any]:
        pipe = models.get("generator")
        native = pipe.model.native_size  # used when width/height are None: the training size, as diffusers does
        result = pipe(prompt=prompt, width=options["width"] or native, height=options["height"] or native,
                      batch_size=options["batch_size"],
                      batch_count=options["batch_count"], **generation_kwargs(options))
        return {"images": result.images}


@register_task
class ImageToImageTask(Task):
    """img2img: repaint an image guided by a prompt; strength 0 keeps it, 1 ignores it."""

    name = "image_to_image"
    description = "SD/SDXL img2img"
    inputs = {"image": Port("image"), "prompt": Port("text")}
    outputs = {"image": "image"}
    main_output = "image"
    models = {"generator": "stable-diffusion"}
    default_models = {"generator": DEFAULT_SD}
    options = {**GENERATION_OPTIONS, "denoising_strength": 0.75, "width": None, "height": None}

    def run(self, models, options, *, image, prompt: str) -> dict[str, Any]:
        pipe = image_to_image_pipeline(models)
        width, height = working_size(image, pipe, options["width"], options["height"])
        result = pipe(prompt=prompt, init_images=[image], width=width, height=height,
                      denoising_strength=options["denoising_strength"], **generation_kwargs(options))
        return {"image": result.images[0]}


@register_task
class InpaintTask(Task):
    """Repaint the white area of `mask` with `prompt`; an all-black mask returns the image unchanged."""

    name = "inpaint"
    description = "SD inpainting (masked img2img, or a 9-channel inpainting model)"
    inputs = {"image": Port("image"), "mask": Port("image"), "prompt": Port("text")}
    outputs = {"image": "image"}
    main_output = "image"
    models = {"generator": "stable-diffusion"}
    default_models = {"generator": DEFAULT_SD}
    options = {**GENERATION_OPTIONS, "denoising_strength": 1.0, "mask_blur": 4, "inpainting_fill": "original",
               "width": None, "height": None}

    def run(self, models, options, *, image, mask, prompt: str) -> dict[str, Any]:
        if mask.size != image.size:
            raise ValueError(f"Task 'inpaint': mask is {mask.size[0]}x{mask.size[1]} but image is "
                             f"{image.size[0]}x{image.size[1]}; they must match.")
        if mask.convert("L").getbbox() is None:
            return {"image": image.copy()}  # nothing to repaint (e.g. nothing was detected); skip loading SD
        pipe = image_to_image_pipeline(models)
        width, height = working_size(image, pipe, options["width"], options["height"])
        result = pipe(prompt=prompt, init_images=[image.convert("RGB")], mask=mask.convert("L"), width=width,
                      height=height, denoising_strength=options["denoising_strength"], mask_blur=options["mask_blur"],
                      inpainting_fill=options["inpainting_fill"], **generation_kwargs(options))
        painted = result.images[0]
        if painted.size != image.size:
            # The working size was rounded to the VAE multiple: scale back, and keep unmasked pixels exact.
            from PIL import Image

            painted = Image.composite(painted.resize(image.size, Image.Resampling.LANCZOS), image.convert("RGB"),
                                      mask.convert("L"))
        return {"image": painted}
