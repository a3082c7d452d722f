"""LoRA browser: one card per file of the LoRA folder, with its preview image; clicking a card adds `<lora:name:1>`
to the txt2img or img2img prompt (or negative prompt) chosen under "Add to", or removes it when it is there.
With an A1111 side-car (`NAME.json`) the card adds `<lora:name:preferred weight>` plus its activation text, and its
negative text to the same tab's negative prompt, as A1111's card does.

Card images are thumbnails decoded on the server from the preview next to each LoRA file (see
`webui.lora_previews`), or a placeholder, so the browser never needs a file URL into the folder.
"""

from __future__ import annotations

import re
from pathlib import Path

import gradio as gr
from webui.lora_cards import CardText, LoraCard, card_text, lora_cards, read_user_metadata
from webui.lora_previews import load_thumbnail, placeholder_image
from webui.ui.card_gallery import build_card_gallery
from webui.ui.prompt_targets import TARGETS, insert_into
from webui.server_state import ServerState


def add_tag(prompt: str, tag: str) -> str:
    """The prompt with `tag` appended (A1111 adds it after a comma-free space); unchanged if already there."""
    prompt = prompt or ""
    # An embedding name counts as present only as a whole word: "shinystyle2" in the prompt is not "shinystyle".
    present = tag in prompt if tag.startswith("<") else re.search(rf"(?<!\w){re.escape(tag)}(?!\w)", prompt)
    if present:
        return prompt
    return f"{prompt.rstrip()} {tag}".strip()


def toggle_lora_tag(prompt: str, name: str) -> str:
    """The prompt without its `<lora:name:...>` tags (whatever their weight) if it has one, else with `<lora:name:1>`.

    A1111's card click toggles the same way (extraNetworks.js `tryToRemoveExtraNetworkFromPrompt`: a tag of the
    same `lora:NAME` is removed, its weight ignored), so a second click never adds a duplicate at another weight."""
    return toggle_card_text(prompt, name, f"<lora:{name}:1>")


def toggle_card_text(prompt: str, name: str, text: str) -> str:
    """`toggle_lora_tag` for a card's whole text (`<lora:name:w> activation text`): the tag is removed with the
    activation text right after it, as A1111's `tryToRemoveExtraNetworkFromPrompt` removes `extraTextAfterNet`."""
    prompt = prompt or ""
    after = text.split(">", 1)[1] if ">" in text else ""
    same = re.compile(rf"\s*<lora:{re.escape(name)}:[^>]*>(?:{re.escape(after)})?" if after else
                      rf"\s*<lora:{re.escape(name)}:[^>]*>")
    if same.search(prompt):
        return same.sub("", prompt).strip()
    return f"{prompt.rstrip()} {text}".strip()


def toggle_text(prompt: str, text: str) -> str:
    """The prompt without `text` (each occurrence, with the space before it) if it holds it, else with it appended
    after a space: A1111's `updatePromptArea` for a card's negative text."""
    prompt = prompt or ""
    if not text:
        return prompt
    if text in prompt:
        return re.sub(rf"\s*{re.escape(text)}", "", prompt).strip()
    return f"{prompt.rstrip()} {text}".strip()


def click_card(target: str, name: str, text: CardText, prompts: list[str]) -> list[str]:
    """`prompts` (in `TARGETS` order) after a click on the card whose tag name is `name`.

    Without negative text the card's text goes to (or leaves) the box chosen under "Add to". With it, as A1111's
    `cardClicked` does when `textToAddNegative` is set, the text goes to that tab's prompt and the negative text
    to that tab's negative prompt, whichever of the two boxes was chosen."""
    prompt_text = text.prompt_text(name)
    if not text.negative_text:
        return insert_into(target, prompt_text, prompts, lambda box, _tag: toggle_card_text(box, name, prompt_text))
    tab_prompt = TARGETS.index(target) // 2 * 2  # txt2img: boxes 0 and 1, img2img: 2 and 3
    updated = list(prompts)
    updated[tab_prompt] = toggle_card_text(prompts[tab_prompt], name, prompt_text)
    updated[tab_prompt + 1] = toggle_text(prompts[tab_prompt + 1], text.negative_text)
    return updated


def card_text_for(library, name: str) -> CardText:
    """The insert texts of the library file a card's tag name resolves to (its side-car, read at click time so an
    edited `NAME.json` applies without a refresh); the plain `<lora:name:1>` when there is none."""
    try:
        path = library.resolve_name(name)
    except (ValueError, OSError):
        return CardText()
    return card_text(read_user_metadata(path, library.folder)[0])[0]


def card_tag_name(library, card: LoraCard) -> str:
    """The name a card's tag uses: A1111's alias (`ss_output_name`, else the file stem) when it resolves to this
    very file here, else the stem, else the path relative to the folder (`sub/detail`), which always does.

    A1111 inserts the alias and falls back to the file name when the alias is ambiguous (`get_alias`), and never
    the sub-folder path (A1111 does not resolve `sub/detail`)."""
    own = (library.folder / card.relative_path).resolve()
    for candidate in (card.alias, Path(card.relative_path).stem):
        try:
            if candidate and library.resolve_name(candidate) == own:
                return candidate
        except (ValueError, OSError):
            continue  # another file has this name too, or none: try the next one
    return card.name


def card_caption(card: LoraCard) -> str:
    """The name, then base model, dimension and top training tags when the file's metadata has them."""
    details = [x for x in (card.base_model, f"dim {card.network_dim}" if card.network_dim else None) if x]
    if card.top_tags:
        details.append(", ".join(card.top_tags[:3]))
    return " | ".join([card.name, *details])


def card_items(library) -> tuple[list[tuple], list[str]]:
    """(gallery items [(image, caption)], tag names in the same order): a placeholder where there is no usable preview."""
    items, names = [], []
    for card in lora_cards(library):
        image = load_thumbnail(card.preview) if card.preview else None
        items.append((image if image is not None else placeholder_image(card.name), card_caption(card)))
        names.append(card_tag_name(library, card))
    return items, names


def build_lora_tab(state: ServerState, boxes: list) -> None:
    """`boxes`: the prompt Textboxes in `webui.ui.prompt_targets.TARGETS` order."""
    if state.lora_library is None:
        gr.Markdown("No LoRA folder configured: start the server with `--lora-dir FOLDER`.")
        return
    library = state.lora_library
    build_card_gallery(
        "lora", "LoRA (click a card to add it to the chosen prompt, again to remove it; preview: NAME.png / "
        "NAME.preview.png next to the file)", boxes, lambda: card_items(library),
        lambda target, name, prompts: click_card(target, name, card_text_for(library, name), prompts),
        library.refresh)
