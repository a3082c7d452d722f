"""The checkpoints a server may load: chosen by the operator, picked by clients only by title.

Requests name a checkpoint by the title this catalog lists (as A1111's `sd_model_checkpoint`
option does); they never pass a path, so an API client cannot make the server read an
arbitrary file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".ckpt")


@dataclass(frozen=True)
class CheckpointEntry:
    """One loadable model: `title` is what clients send; `source` stays on the server."""

    title: str
    model_name: str
    source: str  # a diffusers folder, a single file, or a Hugging Face id

    def as_a1111(self) -> dict:
        """The item shape of A1111's `/sdapi/v1/sd-models`.

        `sha256`/`hash` (its first 10 digits) are filled once the file has been hashed (loading a model hashes it),
        like A1111, which hashes lazily; a listing never hashes files itself, so it stays fast.
        """
        filename = self.source if os.path.exists(self.source) else None
        sha256 = known_sha256(self.source)
        return {"title": self.title, "model_name": self.model_name, "hash": sha256[:10] if sha256 else None,
                "sha256": sha256, "filename": filename or self.source, "config": None}


def known_sha256(source: str) -> str | None:
    """The sha256 already computed for a checkpoint (mixkit's hash cache), without hashing; None if not yet known.

    A diffusers folder's hash is its UNet weights file's (the loader's "Model hash"); a hub id has none here.
    """
    from mixkit.io.hash_cache import cached_hash

    path = Path(source)
    if path.is_dir():
        weights = sorted((path / "unet").glob("*.safetensors")) or sorted((path / "unet").glob("*.bin"))
        path = weights[0] if len(weights) == 1 else path
    try:
        return cached_hash(path, "sha256") if path.is_file() else None
    except OSError:
        return None


def _is_diffusers_folder(path: Path) -> bool:
    return (path / "model_index.json").is_file() or (path / "unet" / "config.json").is_file()


def _name_of(source: str) -> str:
    path = Path(source)
    if path.exists():
        return path.stem if path.is_file() else path.name
    return source.rstrip("/").split("/")[-1]


class CheckpointCatalog:
    """Explicit model sources plus whatever a models folder holds; `refresh()` rescans the folder."""

    def __init__(self, sources: list[str] | None = None, models_dir: str | os.PathLike | None = None) -> None:
        self.sources = [str(s) for s in (sources or [])]
        self.models_dir = Path(models_dir).expanduser() if models_dir is not None else None
        if self.models_dir is not None and not self.models_dir.is_dir():
            raise NotADirectoryError(f"Models folder {str(self.models_dir)!r} does not exist; create it or fix --models-dir.")
        self._entries: list[CheckpointEntry] = []
        self.refresh()

    def refresh(self) -> list[CheckpointEntry]:
        found = list(self.sources)
        if self.models_dir is not None:
            for path in sorted(self.models_dir.iterdir()):
                if (path.is_file() and path.suffix.lower() in WEIGHT_SUFFIXES) or (path.is_dir() and _is_diffusers_folder(path)):
                    if str(path) not in found:
                        found.append(str(path))
        entries, titles = [], set()
        for source in found:
            name = _name_of(source)
            title = name
            suffix = 2
            while title in titles:  # two folders with one name: keep both, distinguishable
                title, suffix = f"{name} ({suffix})", suffix + 1
            titles.add(title)
            entries.append(CheckpointEntry(title=title, model_name=name, source=source))
        self._entries = entries
        return list(entries)

    def entries(self) -> list[CheckpointEntry]:
        return list(self._entries)

    def titles(self) -> list[str]:
        return [entry.title for entry in self._entries]

    def find(self, title: str) -> CheckpointEntry:
        """The entry whose title (or model name, or A1111-style "name [hash]") is `title`."""
        if not isinstance(title, str):
            raise TypeError(f"A checkpoint title must be a string, got {type(title).__name__}.")
        # The exact title first: "model [v2]" is a file's own name before it is "model" with an A1111 " [hash]".
        for candidate in (title, title.split(" [", 1)[0].strip()):
            for entry in self._entries:
                if candidate in (entry.title, entry.model_name):
                    return entry
        raise ValueError(f"Unknown checkpoint {title!r}; available: {', '.join(self.titles()) or '(none)'}. "
                         "Call /sdapi/v1/refresh-checkpoints after adding files to the models folder.")
