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
        self.aliases: dict[str, str] = {}

    def register_alias(self, alias: str, name: str) -> None:
        self.get(name)  # an alias of an unknown app fails now, not at first use
        if alias in self or alias in self.aliases:
            raise ValueError(f"AppFlow app name {alias!r} is already taken; pick another alias.")
        self.aliases[alias] = name

    def get(self, name: str) -> Chain:
        if isinstance(name, str) and name not in self and name in self.aliases:
            return super().get(self.aliases[name])
        return super().get(name)

    def unknown_message(self, name: object) -> str:
        close = difflib.get_close_matches(str(name), [*self.names(), *self.aliases], n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        aliases = ", ".join(f"{alias!r} (= {target!r})" for alias, target in self.aliases.items())
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
# PaddleMIX's caption task reads its prompt as `blip2_prompt` (paddlemix/appflow/image2text_generation.py).
register_app(Chain("image2text_generation", [Step("image_caption", id="caption")],
                   inputs=["image", "prompt", "question"], input_aliases={"blip2_prompt": "prompt"},
                   unavailable_outputs={"prompt": NOUN_TAGS_UNAVAILABLE},
                   description="Caption an image, or answer a question about it (BLIP-2, InstructBLIP, LLaVA)."))
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


def register_app_alias(alias: str, name: str) -> None:
    """Let `alias` (another project's name for the same app) open the registered app `name`."""
    APPS.register_alias(alias, name)


# PaddleMIX's `inpainting` with its default models (a detector, SAM and an SD model) is this chain.
register_app_alias("inpainting", "text_guided_inpainting")


def describe_app(name: str) -> dict[str, Any]:
    """Inputs (with port types; '?' = optional), outputs, options (with defaults) and default models of an app."""
    from appflow.model_kinds import MODEL_KINDS

    plan = validate_chain(APPS.get(name))
    defaults: dict[str, str] = {}
    for step in plan.order:
        for role, source in plan.task_classes[step.id].default_models.items():
            defaults.setdefault(role, source)
    defaults.update(plan.chain.default_models)
    options: dict[str, Any] = {}
    option_aliases: dict[str, str] = {}
    for step in plan.order:
        option_aliases.update(plan.task_classes[step.id].option_aliases)
        options.update({key: value for key, value in plan.task_classes[step.id].options.items() if key not in options})
        chosen = plan.task_classes[step.id].canonical_options(step.options)
        options.update({key: value for key, value in chosen.items() if key in options})
    return {
        "name": plan.chain.name, "description": plan.chain.description,
        "aliases": [alias for alias, target in APPS.aliases.items() if target == plan.chain.name],
        "inputs": {k: p.type + ("?" if p.optional else "") for k, p in plan.app_inputs.items()},
        "outputs": list(plan.outputs),
        "options": options,
        "option_aliases": option_aliases,  # other accepted spellings (PaddleMIX's) -> the option
        "input_aliases": dict(plan.chain.input_aliases),  # other accepted spellings of inputs -> the input
        "models": {role: {"kind": MODEL_KINDS.get(kind).name, "default": defaults.get(role)}
                   for role, kind in plan.model_roles.items()},
        "steps": [f"{step.id}:{step.task}" for step in plan.order],
    }


def list_apps() -> list[dict[str, Any]]:
    return [describe_app(name) for name in APPS.names()]
