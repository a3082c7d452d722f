"""Which prompt box a clicked LoRA card or embedding goes to: txt2img's or img2img's, prompt or negative.

A1111 shows its extra-network cards under each generation tab; here one LoRA tab and one embeddings tab
serve both, with an "Add to" choice. The choice is pure data so the insertion is tested without a browser.
"""

from __future__ import annotations

from typing import Callable

TARGETS = ("txt2img prompt", "txt2img negative prompt", "img2img prompt", "img2img negative prompt")


def prompt_boxes(tabs: dict) -> list:
    """The four prompt Textboxes in `TARGETS` order, from {"txt2img": GenerateTab, "img2img": GenerateTab}."""
    return [tabs["txt2img"].widgets.prompt, tabs["txt2img"].widgets.negative_prompt,
            tabs["img2img"].widgets.prompt, tabs["img2img"].widgets.negative_prompt]


def insert_into(target: str, tag: str, prompts: list[str], add: Callable[[str, str], str]) -> list[str]:
    """`prompts` (in `TARGETS` order) with `tag` added by `add` to the one `target` names; the rest unchanged."""
    if target not in TARGETS:
        raise ValueError(f"Unknown prompt target {target!r}; valid ones: {', '.join(TARGETS)}.")
    index = TARGETS.index(target)
    return [add(text, tag) if position == index else text for position, text in enumerate(prompts)]
