"""The checkpoints a server may load: chosen by the operator, picked by clients only by name.

Requests name a checkpoint (A1111's `sd_model_checkpoint` option); they never pass a path, so an API
client cannot make the server read an arbitrary file.

Names follow A1111's `sd_models.CheckpointInfo`: a file's `name` is its path below the models folder with
its extension (`sub/beta.safetensors`; subfolders are walked), its title is `name [shorthash]` once its
sha256 is known (loading hashes it; a listing never does), and it is found by any of its aliases
(`CheckpointInfo.ids`): the title, the name, the file name without extension, `model_name`, the short hash
(10 hex digits), the full sha256, `name [hash]` and the legacy 8-digit hash. A diffusers folder has no
A1111 counterpart: its title is its folder path, its hash (listed) that of its UNet weights.

A diffusers folder holding configs only (no weights in unet/, vae/ or a text encoder folder: a copy kept to read a
non-standard single-file refiner with, `webui.refiner_config_folders`) is no checkpoint: it is left out of the
checkpoint list (`entries`, `titles`, `/sdapi/v1/sd-models`, every checkpoint dropdown) and `find` refuses it
saying what it is, while `config_folders` / `find_config_folder` still offer it as a refiner's config folder.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from mixkit.models.diffusion.loading import VAE_NEAR_CHECKPOINT_SUFFIXES

WEIGHT_SUFFIXES = (".safetensors", ".ckpt")
SHORT_HASH_LENGTH = 10
LEGACY_HASH = re.compile(r"^[0-9a-fA-F]{8}$")
# A1111's re_strip_checksum: a trailing " [hash]" dropped when the exact title is not known.
TRAILING_CHECKSUM = re.compile(r"\s*\[[^]]+]\s*$")


@dataclass(frozen=True)
class CheckpointEntry:
    """One loadable model: its `title` (and other aliases) is what clients send; `source` stays on the server."""

    name: str  # A1111's CheckpointInfo.name: the path below the models folder, extension included
    model_name: str  # A1111's model_name: the name without extension, "/" replaced by "_"
    source: str  # a diffusers folder, a single file, or a Hugging Face id
    config_only: bool = False  # a diffusers folder without weights: a refiner's config folder, not a checkpoint

    @property
    def is_file(self) -> bool:
        return os.path.isfile(self.source)

    @property
    def name_for_extra(self) -> str:
        """The file name without folder or extension (A1111's name_for_extra), e.g. for `<lora:...>`-style lookups."""
        base = self.name.rsplit("/", 1)[-1]
        return os.path.splitext(base)[0] if self.is_file else base

    @property
    def title(self) -> str:
        """`name [shorthash]` for a file whose sha256 is known, else `name`, as A1111's CheckpointInfo.title."""
        sha256 = known_sha256(self.source) if self.is_file else None
        return f"{self.name} [{sha256[:SHORT_HASH_LENGTH]}]" if sha256 else self.name

    def aliases(self) -> list[str]:
        """The strings this checkpoint is found by (A1111's CheckpointInfo.ids, but the lazily computed legacy hash)."""
        ids = [self.title, self.name, self.name_for_extra, self.model_name]
        sha256 = known_sha256(self.source) if self.is_file else None
        if sha256:
            short = sha256[:SHORT_HASH_LENGTH]
            ids += [short, sha256, f"{self.name} [{short}]", f"{self.name_for_extra} [{short}]"]
        return list(dict.fromkeys(ids))

    def legacy_hash(self) -> str | None:
        """A1111's pre-2023 8-digit "Model hash" of a file (64 KiB read), None for folders and hub ids."""
        if not self.is_file:
            return None
        from mixkit.io.hashing import legacy_a1111_hash

        try:
            return legacy_a1111_hash(self.source)
        except (OSError, ValueError):
            return None

    def as_a1111(self) -> dict:
        """The item shape of A1111's `/sdapi/v1/sd-models`.

        `sha256`/`hash` (its first 10 digits) are filled once the file has been hashed (loading a model hashes it),
        like A1111, which hashes lazily; a listing never hashes files itself, so it stays fast.
        """
        filename = os.path.abspath(self.source) if os.path.exists(self.source) else None  # A1111's is absolute
        sha256 = known_sha256(self.source)
        return {"title": self.title, "model_name": self.model_name, "hash": sha256[:SHORT_HASH_LENGTH] if sha256 else None,
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


def is_config_only(source: str) -> bool:
    """Whether `source` is a folder on disk holding configs and no weights: none in unet/, vae/ or a text encoder
    folder (`pipelines.refiner_folders.holds_no_weights`, the refiner check's own test)."""
    from pipelines.refiner_folders import holds_no_weights

    path = Path(source)
    try:
        return path.is_dir() and holds_no_weights(path)
    except OSError:  # an unreadable folder is listed as before; loading it says what is wrong
        return False


def _is_checkpoint_file(path: Path) -> bool:
    # A1111's checkpoint list skips the VAE files kept next to checkpoints (list_models' ext_blacklist).
    lower = path.name.lower()
    return path.suffix.lower() in WEIGHT_SUFFIXES and not lower.endswith(VAE_NEAR_CHECKPOINT_SUFFIXES)


def models_in_folder(folder: Path) -> list[Path]:
    """Checkpoint files and diffusers folders below `folder` (subfolders walked, a diffusers folder not entered)."""
    found: list[Path] = []
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        models = [d for d in dirs if _is_diffusers_folder(here / d)]
        found += [here / d for d in models]
        dirs[:] = sorted(d for d in dirs if d not in models)
        found += [here / f for f in files if _is_checkpoint_file(here / f)]
    return sorted(found, key=lambda p: p.relative_to(folder).as_posix())


def name_in_catalog(source: str, models_dir: Path | None) -> str:
    """A1111's CheckpointInfo.name: the path below the models folder (extension kept), else the file or folder name.

    A hub id (not on disk) keeps its last part, the name the infotext's `Model:` shows.
    """
    path = Path(source)
    if not path.exists():
        return source.rstrip("/").split("/")[-1]
    if models_dir is not None:
        try:
            return path.resolve().relative_to(models_dir.resolve()).as_posix()
        except ValueError:
            pass
    return path.name


def model_name_of(name: str, is_file: bool) -> str:
    """A1111's CheckpointInfo.model_name: the name with "/" replaced by "_", without a file's extension."""
    flat = name.replace("/", "_").replace("\\", "_")
    return os.path.splitext(flat)[0] if is_file else flat


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
            found += [str(path) for path in models_in_folder(self.models_dir) if str(path) not in found]
        entries, names = [], set()
        for source in found:
            base = name_in_catalog(source, self.models_dir)
            name, suffix = base, 2
            # Names below one folder are unique; only explicit sources elsewhere can collide. They come first, so a
            # file added to the models folder never renames an existing entry.
            while name in names:
                name, suffix = f"{base} ({suffix})", suffix + 1
            names.add(name)
            entries.append(CheckpointEntry(name=name, model_name=model_name_of(name, os.path.isfile(source)),
                                           source=source, config_only=is_config_only(source)))
        self._entries = entries
        return self.entries()

    def entries(self) -> list[CheckpointEntry]:
        """The checkpoints: every entry but the config-only folders."""
        return [entry for entry in self._entries if not entry.config_only]

    def titles(self) -> list[str]:
        return [entry.title for entry in self.entries()]

    def config_folders(self) -> list[CheckpointEntry]:
        """The diffusers folders on disk, with weights or configs only: what a refiner's config folder may name."""
        return [entry for entry in self._entries if Path(entry.source).is_dir()]

    def find(self, title: str) -> CheckpointEntry:
        """The checkpoint one of whose aliases is `title` (A1111's checkpoint_aliases lookup).

        As A1111's get_closet_checkpoint_match, a title whose " [hash]" is not known (a remembered title from
        before the file was hashed or changed) is looked up again without it. An 8-digit hex string is compared
        with each file's legacy hash. A name that fits several entries (`model` for model.ckpt and
        model.safetensors) is refused, listing them: A1111 would take whichever it registered last. A config-only
        folder is refused saying so (it is only a refiner's config folder).
        """
        if not isinstance(title, str):
            raise TypeError(f"A checkpoint title must be a string, got {type(title).__name__}.")
        entry = _find_among(self.entries(), title)
        if entry is not None:
            return entry
        configs = _find_among([entry for entry in self._entries if entry.config_only], title)
        if configs is not None:
            raise ValueError(f"{title!r} is the folder {configs.name!r}, which holds configs only (no weights): it is "
                             "no checkpoint, only a refiner's config folder (refiner_config_dir, the Refiner's Config "
                             "folder). Pick a checkpoint; available: "
                             f"{', '.join(self.titles()) or '(none)'}.")
        raise ValueError(f"Unknown checkpoint {title!r}; available: {', '.join(self.titles()) or '(none)'}. "
                         "Call /sdapi/v1/refresh-checkpoints after adding files to the models folder.")

    def find_config_folder(self, title: str) -> CheckpointEntry | None:
        """The diffusers folder (with weights or configs only) one of whose aliases is `title`, or None."""
        return _find_among(self.config_folders(), title)


def _find_among(entries: list[CheckpointEntry], title: str) -> CheckpointEntry | None:
    """The entry of `entries` that `title` names (see `CheckpointCatalog.find`), None when none does; ValueError
    listing them when several do."""
    for candidate in dict.fromkeys((title, TRAILING_CHECKSUM.sub("", title))):
        if not candidate:
            continue
        exact = [entry for entry in entries if candidate in (entry.title, entry.name)]
        if exact:
            return exact[0]
        matches = [entry for entry in entries if candidate in entry.aliases()]
        if not matches and LEGACY_HASH.match(candidate):
            matches = [entry for entry in entries if entry.legacy_hash() == candidate.lower()]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise ValueError(f"Checkpoint {title!r} is ambiguous: it names {', '.join(e.title for e in matches)}; "
                             "send one of these titles.")
    return None
