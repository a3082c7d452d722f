"""A1111 prompt styles: `styles.csv` rows (name, prompt, negative_prompt) merged into a prompt by name.

Merging is A1111 v1.10's (`modules/styles.py`): a style text containing `{prompt}` has every `{prompt}` replaced
by the prompt; any other style text is appended as ", " + style (both stripped; an empty one is left out). Styles
apply in the order given, each to the result of the previous one; negative prompts merge the same way with the
styles' negative texts. The file is A1111's: UTF-8 (a BOM is allowed), a header row, columns `name`, `prompt`
(or the old `text`) and optional `negative_prompt`; `skipinitialspace` as A1111 reads it.

Unlike A1111, which treats an unknown style name as an empty style, an unknown name is an error listing the
known ones: a misspelt style would otherwise give a different image without a word.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

from mixkit.errors import ModelNotFoundError

PROMPT_PLACEHOLDER = "{prompt}"


@dataclass(frozen=True)
class PromptStyle:
    name: str
    prompt: str
    negative_prompt: str = ""


def merge_style(style_text: str, prompt: str) -> str:
    """One style applied to `prompt`: `{prompt}` replaced, or the style appended after ", "."""
    if PROMPT_PLACEHOLDER in style_text:
        return style_text.replace(PROMPT_PLACEHOLDER, prompt)
    return ", ".join(part for part in (prompt.strip(), style_text.strip()) if part)


def apply_style_texts(prompt: str, style_texts: list[str]) -> str:
    """`prompt` with each style text merged in turn (A1111's `apply_styles_to_prompt`)."""
    for text in style_texts:
        prompt = merge_style(text, prompt)
    return prompt


def read_styles_csv(path: str | os.PathLike) -> dict[str, PromptStyle]:
    """The styles of an A1111 `styles.csv`, by name (a later row of the same name wins, as in A1111)."""
    path = Path(path)
    if not path.is_file():
        raise ModelNotFoundError(f"styles file {path} does not exist; pass an A1111 styles.csv")
    with open(path, encoding="utf-8-sig", newline="") as file:
        reader = csv.DictReader(file, skipinitialspace=True)
        fields = reader.fieldnames or []
        if "name" not in fields or not ({"prompt", "text"} & set(fields)):
            raise ValueError(f"styles file {path} has columns {fields}; A1111's format needs a header with 'name' "
                             "and 'prompt' (or the old 'text'), and optionally 'negative_prompt'")
        styles = {}
        for row in reader:
            name = row.get("name") or ""
            prompt = row.get("prompt") if "prompt" in fields else row.get("text")
            styles[name] = PromptStyle(name, prompt or "", row.get("negative_prompt") or "")
    return styles


class StyleLibrary:
    """The styles of one `styles.csv`; `apply` gives the (prompt, negative prompt) a generation with them uses."""

    def __init__(self, path: str | os.PathLike | None = None, styles: dict[str, PromptStyle] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.styles = dict(styles or {})
        if path is not None:
            self.styles.update(read_styles_csv(path))

    def names(self) -> list[str]:
        return list(self.styles)

    def apply(self, prompt: str, negative_prompt: str, names: list[str]) -> tuple[str, str]:
        """The prompt and negative prompt with the named styles merged, in order; unknown names are refused."""
        if isinstance(names, str) or not isinstance(names, (list, tuple)):
            raise TypeError(f"styles must be a list of style names, got {type(names).__name__}: {names!r:.80}")
        unknown = [name for name in names if name not in self.styles]
        if unknown:
            where = f" in {self.path}" if self.path else ""
            raise ValueError(f"unknown style(s) {unknown}{where}; known styles: {', '.join(self.names()) or '(none)'}")
        chosen = [self.styles[name] for name in names]
        return (apply_style_texts(prompt, [style.prompt for style in chosen]),
                apply_style_texts(negative_prompt, [style.negative_prompt for style in chosen]))
