"""Stable Diffusion tasks: text-to-image, image-to-image and inpainting on one shared model.

All three take the `generator` role, so one loaded model (cached by source, dtype, device) serves
every SD step of every app in the process: img2img and inpaint wrap the cached `TextToImage`
with `ImageToImage.from_pipeline`, which shares its weights and caches.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from appflow.option_specs import OptionSpec, check_options_against_specs, sampler_choices, schedule_choices
from appflow.progress import images_made, pipeline_hooks
from appflow.task import Port, Task, register_task

from mixkit.tiny.shipped import DEFAULT_TEXT_TO_IMAGE
from pipelines.inpaint_mask import MASKED_CONTENT

DEFAULT_SD = DEFAULT_TEXT_TO_IMAGE  # shipped and offline; pass models={"generator": ...} for a real checkpoint
SD15 = "stable-diffusion-v1-5/stable-diffusion-v1-5"  # for apps whose add-on models (ControlNets) need SD 1.5

# None: the model's recommended value (its mixkit_generation.json: CFG 5 for mixkit-tiny-sd), else A1111's
# (20 steps, CFG 7, DPM++ 2M), chosen by the pipeline.
# subseed .. seed_resize_from_h are A1111's Extra seed options (`pipelines.seeds`): a variation seed slerped in by
# its strength (0: off, image k takes subseed + k), and "Resize seed from" W x H (0 x 0: off).
GENERATION_OPTIONS: dict[str, Any] = {
    "negative_prompt": "", "steps": None, "cfg_scale": None, "seed": -1, "sampler": None,
    "schedule_type": "Automatic", "clip_skip": 1, "loras": [],
    "subseed": -1, "subseed_strength": 0.0, "seed_resize_from_w": 0, "seed_resize_from_h": 0,
}
# PaddleMIX's and diffusers' spellings of the same options (a diffusers call's `num_inference_steps=30` is `steps`).
GENERATION_ALIASES = {"guidance_scale": "cfg_scale", "num_inference_steps": "steps"}
IMG2IMG_ALIASES = {**GENERATION_ALIASES, "strength": "denoising_strength"}
_CHECKED_WITH_PARAMS = (*GENERATION_OPTIONS, "width", "height", "batch_size", "batch_count")


def generation_option_specs() -> dict[str, OptionSpec]:
    """Forms' view of the SD options: the bounds `check_txt2img_params` holds them to (`GenerationLimits`' defaults,
    `SEED_MAX`, `CLIP_SKIP_MAX`), named here, not repeated. Sizes step by 8 (SD's VAE); the check itself takes the
    model's multiple when it runs. `loras` has no spec: a list of LoRA specs, given in the prompt's <lora:...> tags."""
    from pipelines.params import CLIP_SKIP_MAX, SEED_MAX, GenerationLimits

    limits = GenerationLimits()
    return {
        "negative_prompt": OptionSpec("text", label="Negative prompt"),
        "steps": OptionSpec("int", 1, limits.max_steps, 1, auto=True, label="Sampling steps"),
        "cfg_scale": OptionSpec("float", 0, limits.max_cfg_scale, 0.5, auto=True, label="CFG Scale"),
        "seed": OptionSpec("seed", -1, SEED_MAX, 1, label="Seed"),
        "sampler": OptionSpec("choice", choices=sampler_choices, auto=True, label="Sampling method"),
        "schedule_type": OptionSpec("choice", choices=schedule_choices, label="Schedule type"),
        "clip_skip": OptionSpec("int", 1, CLIP_SKIP_MAX, 1, label="Clip skip"),
        "subseed": OptionSpec("seed", -1, SEED_MAX, 1, label="Variation seed"),
        "subseed_strength": OptionSpec("float", 0, 1, 0.01, label="Variation strength"),
        "seed_resize_from_w": OptionSpec("int", 0, limits.max_side, 8, label="Resize seed from width"),
        "seed_resize_from_h": OptionSpec("int", 0, limits.max_side, 8, label="Resize seed from height"),
        "width": OptionSpec("int", 8, limits.max_side, 8, auto=True, label="Width"),
        "height": OptionSpec("int", 8, limits.max_side, 8, auto=True, label="Height"),
        "batch_size": OptionSpec("int", 1, limits.max_batch_size, 1, label="Batch size"),
        "batch_count": OptionSpec("int", 1, limits.max_batch_count, 1, label="Batch count"),
    }


# Checked here, not by the pipeline's params (img2img's and inpainting's own options): these specs are the check.
IMAGE_TO_IMAGE_SPECS = {"denoising_strength": OptionSpec("float", 0, 1, 0.01, label="Denoising strength")}
INPAINT_SPECS = {**IMAGE_TO_IMAGE_SPECS, "mask_blur": OptionSpec("int", 0, 64, 1, label="Mask blur"),
                 "inpainting_fill": OptionSpec("choice", choices=MASKED_CONTENT, label="Masked content")}


def specs_for(options: dict[str, Any], *extra: dict[str, OptionSpec]) -> dict[str, OptionSpec]:
    """The generation specs and `extra` ones, for the options a task has."""
    specs = {**generation_option_specs()}
    for more in extra:
        specs.update(more)
    return {name: spec for name, spec in specs.items() if name in options}


_MODEL_LOCKS_GUARD = threading.Lock()
_MODEL_LOCKS: dict[int, threading.Lock] = {}


@contextlib.contextmanager
def one_call_at_a_time(model: Any):
    """Hold `model`'s own lock for one generation. The cached model serves every flow and thread in the process, and a
    call changes it while it runs (a prompt's `<lora:...>` is applied to the shared UNet for the call, diffusers'
    x4 pipeline sets its scheduler's timesteps): two threads generating at once on one model got each other's
    LoRA. Calls on one model now run one after the other; calls on different models still run in parallel."""
    with _MODEL_LOCKS_GUARD:
        lock = _MODEL_LOCKS.setdefault(id(model), threading.Lock())
    with lock:
        yield


def generation_kwargs(options: dict[str, Any]) -> dict[str, Any]:
    """The pipeline keywords among a task's options (the pipeline validates their values); None is left out."""
    return {key: options[key] for key in GENERATION_OPTIONS if options[key] is not None}


def generation_record(result) -> dict[str, list]:
    """`infotexts` and `seeds` of a `GenerationResult`: what a caller of a seed -1 call needs to make an image again
    (the seed drawn is in neither the options it passed nor the image)."""
    return {"infotexts": list(result.infotexts), "seeds": [int(seed) for seed in result.seeds]}


def check_generation_options(options: dict[str, Any]) -> None:
    """The generation options' values checked as the pipeline checks them, but before the model loads.

    What depends on the model stays with the pipeline: the size's multiple (the VAE's: 4 px for mixkit-tiny-sd,
    8 for SD) and, when no sampler is named, the model's recommended sampler with the schedule type.
    """
    from pipelines.params import GenerationLimits, Txt2ImgParams, check_txt2img_params

    values = {key: options[key] for key in _CHECKED_WITH_PARAMS if options.get(key) is not None}
    if "sampler" not in values:
        values.pop("schedule_type", None)
    check_txt2img_params(Txt2ImgParams(**values), GenerationLimits(), size_multiple=1)
    own = {"denoising_strength": INPAINT_SPECS["denoising_strength"], "mask_blur": INPAINT_SPECS["mask_blur"]}
    check_options_against_specs({key: spec for key, spec in own.items() if options.get(key) is not None}, options)
    if "inpainting_fill" in options:
        from pipelines.inpaint_mask import check_masked_content

        check_masked_content(options["inpainting_fill"])


def check_lora_folder(models, prompt: str, task: str) -> None:
    """Prompt tags (`<lora:name:0.8>`) name LoRAs in the flow's LoRA folder: refuse them before any model loads when
    there is no folder or it has no LoRA of that name (found as generation would find it: `resolve_lora_requests`).
    With a hypernetwork folder, `<hypernet:name:strength>` tags are checked against it likewise."""
    from mixkit.errors import ModelNotFoundError
    from mixkit.lora import resolve_lora_requests
    from mixkit.prompts import extract_extra_networks

    hypernetwork_dir = folders_of(models).get("hypernetwork_dir")
    if hypernetwork_dir is not None:
        from mixkit.hypernetworks import HypernetworkLibrary, parse_hypernetwork_tags

        library = HypernetworkLibrary(hypernetwork_dir)
        try:
            for request in parse_hypernetwork_tags(prompt):
                library.resolve(request.name)
        except (ValueError, ModelNotFoundError) as error:
            raise ValueError(f"Task {task!r}: {error}") from None
    tags = extract_extra_networks(prompt)[1]
    if not tags:
        return
    folder = folders_of(models)["lora_dir"]
    if folder is None:
        raise ValueError(f"Task {task!r}: prompt tag {tags[0].raw!r} names a LoRA but this flow has no LoRA folder; "
                         "build it with Appflow(app=..., lora_dir='path/to/loras').")
    try:
        resolve_lora_requests([], tags, folder)
    except ModelNotFoundError as error:  # an unknown name is the caller's mistake, not a missing model
        raise ValueError(f"Task {task!r}: {error}") from None


def folders_of(models) -> dict[str, Any]:
    """The flow's LoRA, embeddings and hypernetwork folders (none for a `ModelAccess` that does not carry them)."""
    folders = getattr(models, "extra_network_folders", None)
    return folders() if callable(folders) else {"lora_dir": None, "embeddings_dir": None, "hypernetwork_dir": None}


def sd_pipeline(models, pipeline_class):
    """The shared SD model as a `pipeline_class`, prompts read with the flow's LoRA, embeddings and hypernetwork folders.

    The cached model serves every flow; the folders belong to one flow, so a flow that sets them gets its own
    `ModelSession` (kept for the flow's life, so its prompt encodings stay cached across calls).
    """
    loaded = models.get("generator")
    folders = folders_of(models)
    if all(folder is None for folder in folders.values()):
        return pipeline_class.from_pipeline(loaded)
    from pipelines.generation import ModelSession

    session = models.flow_state(("sd-session", id(loaded.model)),
                                lambda: ModelSession(loaded.model, **folders))
    return pipeline_class(loaded.model, limits=loaded.limits, session=session)


def working_size(image, pipe, width: int | None, height: int | None) -> tuple[int, int]:
    """The generation size: given, or the input image's size rounded down to the VAE's multiple."""
    multiple = pipe.model.vae_scale_factor
    width = width if width is not None else max(multiple, image.width - image.width % multiple)
    height = height if height is not None else max(multiple, image.height - image.height % multiple)
    return width, height


def image_to_image_pipeline(models):
    from pipelines.img2img import ImageToImage

    return sd_pipeline(models, ImageToImage)


class GenerationTask(Task):
    """Shared by the SD tasks: PaddleMIX's option spellings, and option values checked before the model loads."""

    option_aliases = GENERATION_ALIASES

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        check_generation_options(options)


@register_task
class TextToImageTask(GenerationTask):
    """Text-to-image with every mixkit prompt feature (weights, schedules, LoRA tags, embeddings).

    `images` holds every image of the call; `image` (the main output, as PaddleMIX's `result`) is the first,
    so the task chains into the tasks that take one `image` (img2img, inpaint, upscale). `infotexts` holds each
    image's A1111 parameters text (seed, variation seed, sampler ...), as a PNG of the web UI carries it, and `seeds`
    each image's seed: with seed -1 the one drawn for the call (image k: that seed + k), as `GenerationResult.seeds`.
    """

    name = "text_to_image"
    description = "SD/SDXL txt2img"
    inputs = {"prompt": Port("text")}
    outputs = {"image": "image", "images": "images", "infotexts": "texts", "seeds": "ints"}
    main_output = "image"
    models = {"generator": "stable-diffusion"}
    default_models = {"generator": DEFAULT_SD}
    options = {**GENERATION_OPTIONS, "width": None, "height": None, "batch_size": 1, "batch_count": 1}
    option_specs = specs_for(options)
    option_aliases = {**GENERATION_ALIASES, "num_images_per_prompt": "batch_size"}  # diffusers' name for it

    def run(self, models, options, *, prompt: str) -> dict[str, Any]:
        from pipelines.txt2img import TextToImage

        check_lora_folder(models, prompt, self.name)
        pipe = sd_pipeline(models, TextToImage)
        native = pipe.model.native_size  # used when width/height are None: the training size, as diffusers does
        with one_call_at_a_time(pipe.model):
            result = pipe(prompt=prompt, width=options["width"] or native, height=options["height"] or native,
                          batch_size=options["batch_size"],
                          batch_count=options["batch_count"], **generation_kwargs(options), **pipeline_hooks())
        return {"image": images_made(result)[0], "images": result.images, **generation_record(result)}


@register_task
class ImageToImageTask(GenerationTask):
    """img2img: repaint an image guided by a prompt; strength 0 keeps it, 1 ignores it. `infotexts` holds the
    image's A1111 parameters text, `seeds` its seed (the one drawn for seed -1)."""

    name = "image_to_image"
    description = "SD/SDXL img2img"
    inputs = {"image": Port("image"), "prompt": Port("text")}
    outputs = {"image": "image", "infotexts": "texts", "seeds": "ints"}
    main_output = "image"
    models = {"generator": "stable-diffusion"}
    default_models = {"generator": DEFAULT_SD}
    options = {**GENERATION_OPTIONS, "denoising_strength": 0.75, "width": None, "height": None}
    option_specs = specs_for(options, IMAGE_TO_IMAGE_SPECS)
    option_aliases = IMG2IMG_ALIASES

    def run(self, models, options, *, image, prompt: str) -> dict[str, Any]:
        check_lora_folder(models, prompt, self.name)
        pipe = image_to_image_pipeline(models)
        width, height = working_size(image, pipe, options["width"], options["height"])
        with one_call_at_a_time(pipe.model):
            result = pipe(prompt=prompt, init_images=[image], width=width, height=height,
                          denoising_strength=options["denoising_strength"], **generation_kwargs(options),
                          **pipeline_hooks())
        return {"image": images_made(result)[0], **generation_record(result)}


@register_task
class InpaintTask(GenerationTask):
    """Repaint the white area of `mask` with `prompt`; an all-black mask returns the image unchanged (and, as nothing
    was generated, no infotexts and no seeds). `infotexts` and `seeds` as image_to_image's."""

    name = "inpaint"
    description = "SD inpainting (masked img2img, or a 9-channel inpainting model)"
    inputs = {"image": Port("image"), "mask": Port("image", mask=True), "prompt": Port("text")}
    outputs = {"image": "image", "infotexts": "texts", "seeds": "ints"}
    main_output = "image"
    models = {"generator": "stable-diffusion"}
    default_models = {"generator": DEFAULT_SD}
    options = {**GENERATION_OPTIONS, "denoising_strength": 1.0, "mask_blur": 4, "inpainting_fill": "original",
               "width": None, "height": None}
    option_specs = specs_for(options, INPAINT_SPECS)
    option_aliases = IMG2IMG_ALIASES

    def run(self, models, options, *, image, mask, prompt: str) -> dict[str, Any]:
        check_lora_folder(models, prompt, self.name)
        if mask.size != image.size:
            raise ValueError(f"Task 'inpaint': mask is {mask.size[0]}x{mask.size[1]} but image is "
                             f"{image.size[0]}x{image.size[1]}; they must match.")
        from pipelines.inpaint_mask import binary_mask

        # Read as the pipeline reads it (strokes in the alpha channel count), so the shortcut agrees with it.
        if binary_mask(mask).getbbox() is None:
            # nothing to repaint (e.g. nothing was detected): skip loading SD; nothing generated, nothing to record
            return {"image": image.copy(), "infotexts": [], "seeds": []}
        pipe = image_to_image_pipeline(models)
        width, height = working_size(image, pipe, options["width"], options["height"])
        with one_call_at_a_time(pipe.model):
            result = pipe(prompt=prompt, init_images=[image.convert("RGB")], mask=mask, width=width,
                          height=height, denoising_strength=options["denoising_strength"], mask_blur=options["mask_blur"],
                          inpainting_fill=options["inpainting_fill"], **generation_kwargs(options),
                          **pipeline_hooks())
        painted = images_made(result)[0]
        if painted.size != image.size:
            # The working size was rounded to the VAE multiple: scale back, and keep unmasked pixels exact.
            from PIL import Image

            painted = Image.composite(painted.resize(image.size, Image.Resampling.LANCZOS), image.convert("RGB"),
                                      binary_mask(mask))
        return {"image": painted, **generation_record(result)}
