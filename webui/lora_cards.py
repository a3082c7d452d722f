"""What the LoRA browser and `/sdapi/v1/loras` show for each file of the LoRA folder.

Only the safetensors header is read (never the tensors), so listing a folder of large files
stays fast; a file whose header is unreadable still gets a card, with the problem as a warning.
A1111's user-metadata side-car (`NAME.json` next to `NAME.safetensors`, written by its card editor)
is read too: its activation text, preferred weight and negative text decide what a card click inserts.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

# A1111's `network.SdVersion` names a side-car's "sd version" may hold ("Unknown" means: not set).
SIDECAR_SD_VERSIONS = ("SD1", "SD2", "SDXL")
# A side-car is a few hundred bytes of text; anything far larger is not one and is not read.
MAX_SIDECAR_BYTES = 1024 * 1024


@dataclass(frozen=True)
class CardText:
    """What clicking a card inserts, from A1111's side-car keys (`ui_extra_networks_lora.create_item`):
    `<lora:NAME:preferred weight>` (1 when unset or 0) plus " activation text" into the prompt, and the
    "negative text" into the negative prompt."""

    preferred_weight: float = 1.0
    activation_text: str = ""
    negative_text: str = ""

    def prompt_text(self, tag_name: str) -> str:
        tag = f"<lora:{tag_name}:{self.preferred_weight:g}>"
        return f"{tag} {self.activation_text}" if self.activation_text else tag


def read_user_metadata(lora_file: Path, folder: Path) -> tuple[dict, list[str]]:
    """A1111's user metadata of a LoRA file (`NAME.json` beside it, `extra_networks.get_user_metadata`) and the
    problems found reading it; ({}, []) when there is none.

    The side-car is used only when its real path is inside the LoRA folder (as previews, `webui.lora_previews`):
    a symlink cannot make the server read another file. A broken side-car leaves the card usable, with a warning,
    as A1111 logs the error and shows the card without it."""
    base = Path(lora_file)
    sidecar = base.with_name(base.stem + ".json")
    if not sidecar.is_file():
        return {}, []
    if not sidecar.resolve().is_relative_to(Path(folder).resolve()):
        return {}, [f"{sidecar.name} points outside the LoRA folder; ignored"]
    try:
        if sidecar.stat().st_size > MAX_SIDECAR_BYTES:
            return {}, [f"{sidecar.name} is larger than {MAX_SIDECAR_BYTES // 1024} KB; not an A1111 side-car, ignored"]
        raw = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return {}, [f"{sidecar.name} is not valid JSON ({error}); fix or delete it"]
    if not isinstance(raw, dict):
        return {}, [f"{sidecar.name} must hold a JSON object (A1111's user metadata), got {type(raw).__name__}"]
    return raw, []


def card_text(user_metadata: dict) -> tuple[CardText, list[str]]:
    """The insert texts of a side-car's keys, and a warning for each value that cannot be used (it is skipped)."""
    warnings: list[str] = []
    weight = user_metadata.get("preferred weight", 0)
    try:
        weight = float(weight or 0)
        if not math.isfinite(weight):
            raise ValueError
    except (TypeError, ValueError, OverflowError):  # OverflowError: a 400-digit int, which no float holds
        warnings.append(f"side-car \"preferred weight\" {weight!r} is not a number; 1 is used")
        weight = 0.0
    texts = {}
    for key in ("activation text", "negative text"):
        value = user_metadata.get(key) or ""
        if not isinstance(value, str):
            warnings.append(f"side-car {key!r} must be text, got {type(value).__name__}; ignored")
            value = ""
        texts[key] = value.strip()
    return CardText(weight or 1.0, texts["activation text"], texts["negative text"]), warnings


@dataclass
class LoraCard:
    name: str  # what a prompt tag uses: <lora:name:1>
    alias: str
    relative_path: str  # inside the LoRA folder
    folder: Path | None = None  # the LoRA folder, for A1111's absolute `path`
    base_model: str | None = None
    network_dim: str | None = None
    top_tags: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    preview: Path | None = None  # image next to the LoRA file (see webui.lora_previews); never sent to clients
    user_metadata: dict = field(default_factory=dict)  # A1111's side-car `NAME.json`, as stored
    text: CardText = field(default_factory=CardText)

    @property
    def prompt_tag(self) -> str:
        return self.text.prompt_text(self.name)

    def as_a1111(self) -> dict:
        """A1111's `/sdapi/v1/loras` item; `path` is the file's absolute path, as A1111's `NetworkOnDisk.filename` (the
        server already shows its absolute `--output-dir` in /cmd-flags and /options).

        `preview` and `user_metadata` (not in A1111's item) are the URL of the card's image on this server (or
        None) and the side-car's keys (`activation text`, `preferred weight`, `negative text`, `sd version`, ...),
        which A1111 shows only in its card editor.
        """
        from webui.lora_previews import preview_url

        path = os.path.abspath(self.folder / self.relative_path) if self.folder is not None else self.relative_path
        return {"name": self.name, "alias": self.alias, "path": path, "metadata": metadata_as_a1111(self.metadata),
                "preview": preview_url(self.name) if self.preview else None, "user_metadata": self.user_metadata}


def metadata_as_a1111(metadata: dict) -> dict:
    """A safetensors header's metadata as A1111's `sd_models.read_metadata_from_safetensors` serves it.

    A1111 decodes each value that starts with "{" (kohya's `ss_tag_frequency`, `ss_dataset_dirs`, `ss_bucket_info`,
    `ss_network_args`) into a JSON object and keeps it a string when it does not parse; other values (`ss_network_dim`
    "4", `ss_datasets` "[...]") stay strings. Clients read trigger words as `metadata["ss_tag_frequency"][folder]`.
    """
    decoded = {}
    for key, value in metadata.items():
        decoded[key] = value
        if isinstance(value, str) and value.startswith("{"):
            try:
                decoded[key] = json.loads(value)
            except ValueError:
                pass
    return decoded


def lora_cards(library) -> list[LoraCard]:
    from mixkit.lora.metadata import read_metadata
    from mixkit.lora.reading import read_safetensors_header
    from webui.lora_previews import find_preview

    cards = []
    for entry in library.entries():
        card = LoraCard(name=entry.relative_name, alias=entry.alias or entry.name,
                        relative_path=entry.path.relative_to(library.folder).as_posix(), folder=Path(library.folder),
                        preview=find_preview(entry.path, library.folder))
        card.user_metadata, card.warnings = read_user_metadata(entry.path, library.folder)
        card.text, text_warnings = card_text(card.user_metadata)
        card.warnings.extend(text_warnings)
        if entry.path.suffix.lower() == ".safetensors":
            try:
                header, _ = read_safetensors_header(entry.path)
                raw = header.get("__metadata__") or {}
                meta = read_metadata({str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {})
                card.metadata = meta.raw
                card.base_model, card.network_dim = meta.base_model, meta.network_dim
                card.top_tags = [tag for tag, _count in meta.top_tags(8)]
                card.warnings.extend(meta.warnings)
            except (ValueError, OSError) as error:
                card.warnings.append(f"header unreadable: {error}")
        if card.user_metadata.get("sd version") in SIDECAR_SD_VERSIONS:  # A1111: the user's choice wins
            card.base_model = card.user_metadata["sd version"]
        cards.append(card)
    return cards
