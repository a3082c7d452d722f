"""Vision-language tasks on mixkit's VLM adapters: captioning / VQA, and zero-shot classification."""

from __future__ import annotations

from typing import Any

from appflow.task import Port, Task, register_task


@register_task
class ImageCaptionTask(Task):
    """A caption (optionally continuing `prompt`), or with `question` an answer (VQA)."""

    name = "image_caption"
    description = "BLIP-2 / InstructBLIP / LLaVA caption or VQA"
    inputs = {"image": Port("image"), "prompt": Port("text", optional=True), "question": Port("text", optional=True)}
    outputs = {"text": "text"}
    main_output = "text"
    models = {"captioner": "vlm-generative"}
    default_models = {"captioner": "mixkit-tiny-blip2"}  # shipped, offline; Salesforce/blip2-opt-2.7b for real photos
    options = {"max_new_tokens": 20}

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        tokens = options["max_new_tokens"]
        if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= 1024:
            raise ValueError(f"Task 'image_caption': max_new_tokens must be an integer in [1, 1024], got {tokens!r}.")

    def run(self, models, options, *, image, prompt: str | None = None, question: str | None = None) -> dict[str, Any]:
        if prompt is not None and question is not None:
            raise ValueError("Task 'image_caption': pass either prompt (caption prefix) or question (VQA), not both.")
        tokens = options["max_new_tokens"]
        vlm = models.get("captioner")
        if question is not None:
            return {"text": vlm.answer([image], [question], max_new_tokens=tokens)[0]}
        return {"text": vlm.caption([image], prompt, max_new_tokens=tokens)[0]}


@register_task
class ZeroShotClassificationTask(Task):
    """Probabilities of `labels` for the image (CLIP: softmax; SigLIP: independent sigmoids)."""

    name = "zero_shot_classification"
    description = "CLIP / SigLIP zero-shot classification"
    inputs = {"image": Port("image"), "labels": Port("texts")}
    outputs = {"scores": "label_scores"}
    main_output = "scores"
    models = {"classifier": "vlm-contrastive"}
    default_models = {"classifier": "mixkit-tiny-clip"}  # shipped, offline; openai/clip-vit-base-patch32 for real photos
    options = {"templates": None}  # None: the model family's default prompt templates

    def run(self, models, options, *, image, labels: list[str]) -> dict[str, Any]:
        classifier = models.get("classifier")
        if options["templates"] is None:
            scores = classifier.classify([image], list(labels))[0]
        else:
            scores = classifier.classify([image], list(labels), options["templates"])[0]
        return {"scores": {label: float(p) for label, p in scores.items()}}
