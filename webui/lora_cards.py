"""What the LoRA browser and `/sdapi/v1/loras` show for each file of the LoRA folder.

Only the safetensors header is read (never the tensors), so listing a folder of large files
stays fast; a file whose header is unreadable still gets a card, with the problem as a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class LoraCard:
    name: str  # what a prompt tag uses: <lora:name:1>
    alias: str
    relative_path: str
    base_model: str | None = None
    network_dim: str | None = None
    top_tags: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    preview: Path | None = None  # image next to the LoRA file (see webui.lora_previews); never sent to clients

    @property
    def prompt_tag(self) -> str:
        return f"<lora:{self.name}:1>"

    def as_a1111(self) -> dict:
        """A1111's `/sdapi/v1/loras` item; `path` is relative to the LoRA folder (no server paths leak).

        `preview` (not in A1111's item) is the URL of the card's image on this server, or None.
        """
        from webui.lora_previews import preview_url

        return {"name": self.name, "alias": self.alias, "path": self.relative_path, "metadata": self.metadata,
                "preview": preview_url(self.name) if self.preview else None}


def lora_cards(library) -> list[LoraCard]:
    from mixkit.lora.metadata import read_metadata
    from mixkit.lora.reading import read_safetensors_header
    from webui.lora_previews import find_preview

    cards = []
    for entry in library.entries():
        card = LoraCard(name=entry.relative_name, alias=entry.alias or entry.name,
                        relative_path=entry.path.relative_to(library.folder).as_posix(),
                        preview=find_preview(entry.path, library.folder))
        if entry.path.suffix.lower() == ".safetensors":
            try:
                header, _ = read_safetensors_header(entry.path)
                raw = header.get("__metadata__") or {}
                meta = read_metadata({str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {})
                card.metadata = meta.raw
                card.base_model, card.network_dim = meta.base_model, meta.network_dim
                card.top_tags = [tag for tag, _count in meta.top_tags(8)]
                card.warnings = list(meta.warnings)
            except (ValueError, OSError) as error:
                card.warnings.append(f"header unreadable: {error}")
        cards.append(card)
    return cards
