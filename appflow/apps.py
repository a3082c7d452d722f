"""The registered apps (PaddleMIX's set), each a `Chain` of registered tasks.

Register your own with `register_app(Chain(...))` or `register_app(chain_from_dict(...))`; audio
and video apps can join the same registry once their tasks exist.
"""

from __future__ import annotations

import difflib
from typing import Any

import appflow.loaders  # noqa: F401  (registers the model kinds)
import appflow.tasks  # noqa: F401  (registers the built-in tasks)
from appflow.chain import Chain, Step, validate_chain
from mixkit.registry import Registry


class AppRegistry(Registry[Chain]):
    """The apps by name; an alias (PaddleMIX's name for the same app) opens the app it stands for."""

    def __init__(self) -> None:
        super().__init__("AppFlow app")
        # PaddleMIX's app names, apart from the base registry's aliases (whose `aliases(name)` method this must not
        # hide: `unregister` uses it)
        self.app_aliases: dict[str, str] = {}

    def register_alias(self, alias: str, name: str) -> None:
        self.get(name)  # an alias of an unknown app fails now, not at first use
        if alias in self or alias in self.app_aliases:
            raise ValueError(f"AppFlow app name {alias!r} is already taken; pick another alias.")
        self.app_aliases[alias] = name

    def get(self, name: str) -> Chain:
        if isinstance(name, str) and name not in self and name in self.app_aliases:
            return super().get(self.app_aliases[name])
        return super().get(name)

    def unknown_message(self, name: object) -> str:
        close = difflib.get_close_matches(str(name), [*self.names(), *self.app_aliases], n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        aliases = ", ".join(f"{alias!r} (= {target!r})" for alias, target in self.app_aliases.items())
        return (f"Unknown {self.kind} {name!r}.{hint} Valid names: {', '.join(repr(n) for n in self.names())}"
                + (f"; aliases: {aliases}." if aliases else "."))


APPS = AppRegistry()


def register_app(chain: Chain, *, replace: bool = False) -> Chain:
    """Validate `chain` and register it under its name (validation happens here, loading never)."""
    validate_chain(chain)
    return APPS.register(chain.name, chain, replace=replace)


NOUN_TAGS_UNAVAILABLE = (
    "PaddleMIX returns the caption's nouns there (nltk's tokenizer, tagger and WordNet lemmatiser), but nltk's "
    "corpora are downloaded at run time and cannot be fetched offline, so no noun tags are made here; the caption "
    "is result['text'] (auto_label: result['caption']), and detection is prompted with the whole caption.")


def _detect_and_segment(prompt: str = "prompt", empty_prompt: str = "error") -> list[Step]:
    return [Step("open_vocabulary_detection", id="detect", inputs={"prompt": prompt},
                 options={"empty_prompt": empty_prompt} if empty_prompt != "error" else {}),
            Step("box_segmentation", id="segment", inputs={"boxes": "detect.boxes"})]


register_app(Chain("text2image_generation", [Step("text_to_image", id="generate")], inputs=["prompt"],
                   description="Text to image with SD 1.x/2.x/SDXL (prompt weights, LoRA tags, samplers)."))
register_app(Chain("image2image_text_guided_generation", [Step("image_to_image", id="generate")],
                   inputs=["image", "prompt"], description="Repaint an image guided by a prompt (img2img)."))
# PaddleMIX's caption task reads its prompt as `blip2_prompt` (paddlemix/appflow/image2text_generation.py), and its
# MiniGPT-4 task the user's instruction as `minigpt4_text`, put in the chat template's "###Human: <image> <text>" turn:
# a question to the model, here asked in the loaded family's own VQA / chat format.
register_app(Chain("image2text_generation", [Step("image_caption", id="caption")],
                   inputs=["image", "prompt", "question"],
                   input_aliases={"blip2_prompt": "prompt", "minigpt4_text": "question"},
                   unavailable_outputs={"prompt": NOUN_TAGS_UNAVAILABLE},
                   description="Caption an image, or answer a question about it (BLIP-2, InstructBLIP, LLaVA)."))
# A1111's Interrogate CLIP (modules/interrogate.py): the caption, then CLIP's best lines of each word list
register_app(Chain("clip_interrogation",
                   [Step("image_caption", id="caption"),
                    Step("clip_interrogation", id="rank", inputs={"caption": "caption.text"})],
                   inputs=["image"], outputs={"text": "rank.text", "caption": "caption.text", "terms": "rank.terms"},
                   description="Caption an image and append CLIP's best terms of word lists (A1111's Interrogate "
                               "CLIP)."))
register_app(Chain("zero_shot_classification", [Step("zero_shot_classification", id="classify")],
                   inputs=["image", "labels"], description="Score text labels for an image with CLIP/SigLIP."))
register_app(Chain("openset_det_sam", _detect_and_segment(), inputs=["image", "prompt"],
                   description="Find what the prompt names (Grounding DINO) and segment it (SAM)."))
register_app(Chain(
    "auto_label",
    [Step("image_caption", id="caption", inputs={"prompt": "caption_prompt"}),
     *_detect_and_segment("caption.text", empty_prompt="no_detections"),
     Step("labelme_annotation", id="annotate", inputs={"scores": "detect.scores"})],
    inputs=["image", "caption_prompt"], input_aliases={"blip2_prompt": "caption_prompt"},
    unavailable_outputs={"prompt": NOUN_TAGS_UNAVAILABLE},
    outputs={"masks": "segment.seg_masks", "caption": "caption.text"},
    description="Caption, detect the caption's objects, segment them, and write a LabelMe JSON."))
register_app(Chain(
    "text_guided_inpainting",
    [*_detect_and_segment(), Step("merge_masks", id="mask"),
     Step("inpaint", id="inpaint", inputs={"prompt": "inpaint_prompt"})],
    inputs=["image", "prompt", "inpaint_prompt"],
    description="Repaint what `prompt` names with `inpaint_prompt` (Grounding DINO -> SAM -> SD inpaint)."))
# PaddleMIX's `inpainting` with one SD model and a mask the user paints (`seg_masks=`, a mask image: white = repaint)
register_app(Chain(
    "mask_guided_inpainting", [Step("inpaint", id="inpaint", inputs={"prompt": "inpaint_prompt"})],
    inputs=["image", "mask", "inpaint_prompt"], input_aliases={"seg_masks": "mask"},
    description="Repaint the white area of your mask with `inpaint_prompt` (SD inpaint; PaddleMIX: seg_masks=)."))
register_app(Chain(
    "dialog_image_editing",
    [Step("edit_instruction_parsing", id="parse"), *_detect_and_segment("parse.prompt"), Step("merge_masks", id="mask"),
     Step("inpaint", id="inpaint", inputs={"prompt": "parse.inpaint_prompt"})],
    inputs=["image", "instruction"],
    description="Edit an image from an instruction ('make the dog a cat'): an LLM picks what and into what."))
register_app(Chain("dual_text_and_image_guided_generation", [Step("dual_guided_generation", id="generate")],
                   inputs=["images", "prompt"],
                   description="Blend several images and repaint the blend guided by a prompt."))
register_app(Chain("image2image_text_guided_upscaling", [Step("text_guided_upscale", id="upscale")],
                   inputs=["image", "prompt"], description="Upscale an image 4x guided by a prompt (SD x4 upscaler)."))
register_app(Chain(
    "qrcode_art",
    [Step("qr_code", id="qr"), Step("controlnet_text_to_image", id="generate", inputs={"control_image": "qr.qr_image"}),
     Step("qr_check", id="check", inputs={"image": "generate.image"})],
    inputs=["text", "prompt"], result="generate.image",
    description="Paint a scannable QR code for `text` as art (segno -> ControlNet txt2img -> OpenCV decode check)."))

register_app(Chain("text_to_video_generation", [Step("text_to_video", id="generate")], inputs=["prompt"],
                   description="Text to video (ModelScope's text-to-video-ms-1.7b); frames, and .mp4/.gif via "
                               "result['video'].save(path)."))
# PaddleMIX's music_generation (applications/MusicGeneration): text to music; its image-to-music route (MiniGPT-4
# caption, then ChatGLM writes the music prompt) is an app of its own here, the prompt written by a template (no third
# model, offline) or, as PaddleMIX, by an LLM
register_app(Chain("music_generation", [Step("text_to_audio", id="generate")], inputs=["prompt"],
                   description="Text to music/audio (AudioLDM by default, cvssp/audioldm; MusicLDM and AudioLDM 2 "
                               "folders too): a 16 kHz float32 waveform, and .wav via result['audio'].save(path)."))
register_app(Chain(
    "image2music_generation",
    [Step("image_caption", id="caption"), Step("music_prompt", id="describe", inputs={"caption": "caption.text"}),
     Step("text_to_audio", id="generate", inputs={"prompt": "describe.prompt"})],
    inputs=["image"], outputs={"caption": "caption.text", "music_prompt": "describe.prompt"},
    description="Image to music: caption the image, turn the caption into a music prompt (a template), AudioLDM."))
register_app(Chain(
    "image2music_llm_generation",
    [Step("image_caption", id="caption"),
     Step("music_prompt_writing", id="describe", inputs={"caption": "caption.text"}),
     Step("text_to_audio", id="generate", inputs={"prompt": "describe.prompt"})],
    inputs=["image"], outputs={"caption": "caption.text", "music_prompt": "describe.prompt"},
    description="Image to music as PaddleMIX: caption the image, an LLM writes the music prompt, AudioLDM."))


def register_app_alias(alias: str, name: str) -> None:
    """Let `alias` (another project's name for the same app) open the registered app `name`."""
    APPS.register_alias(alias, name)


# PaddleMIX's `inpainting` picks its sub-flow from the models given (paddlemix/appflow/text_guided_image_inpainting.py
# and its README): with its default models (a detector, SAM and an SD model) it is this chain; `app_for_models`
# picks the others.
register_app_alias("inpainting", "text_guided_inpainting")

CHAT_INPAINTING_REFUSED = (
    "PaddleMIX's 4-model `inpainting` (ChatGLM, Grounding DINO, SAM, SD) is chat-guided editing; here that is "
    "Appflow(app='dialog_image_editing', models=[llm, detector, segmenter, generator]) called with "
    "instruction=<your edit, e.g. 'make the bus a yellow van'>. Its LLM answers mixkit's own JSON prompt, so "
    "PaddleMIX's prompt= template (for ChatGLM's free-text reply) has no counterpart and is not taken.")


def inpainting_for_models(models: Any) -> str:
    """The app PaddleMIX's `inpainting` runs for these models: one SD model -> your own mask (`seg_masks=`);
    detector, SAM, SD -> text-guided; an LLM first (4 models) -> refused, pointing at `dialog_image_editing`."""
    if isinstance(models, dict):
        if "llm" in models:
            raise ValueError(CHAT_INPAINTING_REFUSED)
        return "mask_guided_inpainting" if set(models) == {"generator"} else "text_guided_inpainting"
    if isinstance(models, (list, tuple)):
        if len(models) == 4:
            raise ValueError(CHAT_INPAINTING_REFUSED)
        if len(models) == 1:
            return "mask_guided_inpainting"
    return "text_guided_inpainting"


APPS_CHOSEN_BY_MODELS = {"inpainting": inpainting_for_models}
"""App names whose chain depends on the models given (as PaddleMIX's do) -> the function that picks the app."""


def app_for_models(name: Any, models: Any) -> Any:
    """The registered app `name` stands for with these `models` (`name` itself unless it is chosen by models)."""
    if isinstance(name, str) and name in APPS_CHOSEN_BY_MODELS and name not in APPS:
        return APPS_CHOSEN_BY_MODELS[name](models)
    return name


def describe_app(name: str) -> dict[str, Any]:
    """Inputs (with port types; '?' = optional), outputs, options (with defaults, and the types and bounds of those a
    form shows), and default models of an app."""
    from appflow.model_kinds import MODEL_KINDS

    plan = validate_chain(APPS.get(name))
    defaults: dict[str, str] = {}
    for step in plan.order:
        for role, source in plan.task_classes[step.id].default_models.items():
            defaults.setdefault(role, source)
    defaults.update(plan.chain.default_models)
    options: dict[str, Any] = {}
    option_aliases: dict[str, str] = {}
    option_specs: dict[str, dict[str, Any]] = {}
    for step in plan.order:
        option_aliases.update(plan.task_classes[step.id].option_aliases)
        option_specs.update({key: spec.as_dict() for key, spec in plan.task_classes[step.id].option_specs.items()
                             if key not in option_specs})
        options.update({key: value for key, value in plan.task_classes[step.id].options.items() if key not in options})
        chosen = plan.task_classes[step.id].canonical_options(step.options)
        options.update({key: value for key, value in chosen.items() if key in options})
    return {
        "name": plan.chain.name, "description": plan.chain.description,
        "aliases": [alias for alias, target in APPS.app_aliases.items() if target == plan.chain.name],
        "inputs": {k: p.type + ("?" if p.optional else "") for k, p in plan.app_inputs.items()},
        "outputs": list(plan.outputs),
        "options": options,
        # type, bounds and choices of the options that have a form widget (`appflow.option_specs`), in option order
        "option_specs": {key: option_specs[key] for key in options if key in option_specs},
        "option_aliases": option_aliases,  # other accepted spellings (PaddleMIX's) -> the option
        "input_aliases": dict(plan.chain.input_aliases),  # other accepted spellings of inputs -> the input
        # inputs that also take a list of values of their type, run as one batch (captioning several images)
        "batch_inputs": [name for name, port in plan.app_inputs.items() if port.batch],
        # image inputs read as inpainting masks, transparency kept (strokes in the alpha channel = repaint)
        "mask_inputs": [name for name, port in plan.app_inputs.items() if port.mask],
        "models": {role: {"kind": MODEL_KINDS.get(kind).name, "default": defaults.get(role)}
                   for role, kind in plan.model_roles.items()},
        "steps": [f"{step.id}:{step.task}" for step in plan.order],
    }


def check_app_option_values(name: str, options: dict[str, Any], models: dict[str, Any] | None = None) -> None:
    """Check per-call `options` for app `name` as a run would, before anything is queued: an options dict
    (`generate_kwargs`) spread and other spellings renamed as the run does, each option goes to every step that
    declares it, and each step's task checks its settings with them (and, given `models` (role -> source), against
    the models the run will use, from their configs: `Task.check_options_for_models`); ValueError/TypeError naming
    the app, the step and the value."""
    from appflow.task import rename_aliases, spread_options_dicts

    plan = validate_chain(APPS.get(name))
    options = spread_options_dicts(plan.chain.name, plan.task_classes, options)
    aliases = {alias: option for task in plan.task_classes.values() for alias, option in task.option_aliases.items()}
    options = rename_aliases(options, aliases, f"App {plan.chain.name!r}")
    known = {key for step in plan.order for key in plan.task_classes[step.id].options}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(f"App {plan.chain.name!r} has no option(s) {unknown}; its options are {sorted(known)}.")
    for step in plan.order:
        task_class = plan.task_classes[step.id]
        settings = {**task_class.options, **task_class.canonical_options(step.options)}
        settings.update({key: value for key, value in options.items() if key in task_class.options})
        try:
            task_class.check_options(settings)
            if models is not None and set(task_class.models) <= set(models):
                task_class.check_options_for_models(settings, {role: models[role] for role in task_class.models},
                                                    at_call=True)
        except (TypeError, ValueError) as error:
            try:  # the same exception type, naming the step, as the flow's own check (`Appflow._named`) does
                named = type(error)(f"App {plan.chain.name!r}, step {step.id!r}: {error}")
            except Exception:  # an exception class taking other arguments: raise it unchanged
                raise error from None
            raise named from None


def list_apps() -> list[dict[str, Any]]:
    return [describe_app(name) for name in APPS.names()]
