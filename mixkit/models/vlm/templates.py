"""Prompt text: zero-shot classification templates and each family's VQA / caption format."""

from __future__ import annotations

ZERO_SHOT_TEMPLATES: tuple[str, ...] = (
    "a photo of a {}.",
    "a bad photo of a {}.",
    "a photo of the large {}.",
    "a photo of the small {}.",
    "a cropped photo of a {}.",
    "a close-up photo of a {}.",
    "a bright photo of a {}.",
    "a drawing of a {}.",
)
"""A subset of the 80 ImageNet prompts of the CLIP paper; averaging them ('prompt ensembling')
gained CLIP several points of zero-shot accuracy over a single template."""

SIGLIP_ZERO_SHOT_TEMPLATES: tuple[str, ...] = ("This is a photo of {}.",)
"""SigLIP's zero-shot prompt: its model cards' and transformers' zero-shot image classification pipeline's
default `hypothesis_template`."""

BLIP2_QUESTION_FORMAT = "Question: {} Short answer:"
"""The VQA prompt the BLIP-2 paper and its released models were evaluated with."""

LLAVA_CHAT_FORMAT = "USER: <image>\n{} ASSISTANT:"
"""LLaVA-1.5's conversation template for one image and one user turn."""

LLAVA_CAPTION_PROMPT = "Describe the image briefly."


def check_template(template: str) -> str:
    """A template must contain exactly one `{}` for the label or question."""
    if not isinstance(template, str) or template.count("{}") != 1:
        raise ValueError(f"template must be a string with exactly one '{{}}' placeholder, got {template!r}")
    return template
