"""A folder of LoRA files: list, search, and resolve `<lora:name:...>` names to files.

Names resolve like A1111: the file stem (`add_detail`), the path relative to the folder without
suffix (`styles/add_detail`), or the alias the trainer stored (`ss_output_name`). An exact match on
any of them wins over a case-insensitive one, as A1111's lookups are case-sensitive. A name that fits
several files is an error listing them, never a silent pick.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mixkit.errors import ModelNotFoundError
from mixkit.lora.reading import LORA_SUFFIXES, read_safetensors_header


@dataclass(frozen=True)
class LoraEntry:
    """One file of the library."""

    path: Path
    name: str
    relative_name: str
    alias: str | None


class LoraLibrary:
    """The LoRA files under `folder` (recursively), indexed by name, relative name and alias."""

    def __init__(self, folder: str | Path) -> None:
        folder = Path(folder).expanduser()
        if not folder.is_dir():
            raise ModelNotFoundError(f"LoRA folder not found: {folder}; create it or pass the folder holding your LoRA files.")
        self.folder = folder
        self._entries: list[LoraEntry] | None = None
        self._short_hashes: dict[tuple[Path, int, int], str] = {}  # (path, size, mtime) -> A1111 short hash

    def find_by_short_hash(self, short_hash: str) -> LoraEntry | None:
        """The library file whose A1111 short hash (`Lora hashes` in an infotext) is `short_hash`, if any.

        The stored `sshs_model_hash` is read when the trainer wrote one, else the tensor bytes are hashed once
        per file version (A1111 hashes its whole folder likewise, and caches the result).
        """
        wanted = str(short_hash).strip().lower()
        for entry in self.entries():
            if self._short_hash(entry.path) == wanted:
                return entry
        return None

    def _short_hash(self, path: Path) -> str | None:
        try:
            stat = path.stat()
        except OSError:
            return None
        key = (path, stat.st_size, stat.st_mtime_ns)
        if key not in self._short_hashes:
            from mixkit.lora.lora_file import addnet_hash

            stored = None
            if path.suffix.lower() == ".safetensors":
                try:
                    header, _ = read_safetensors_header(path)
                    metadata = header.get("__metadata__") or {}
                    stored = metadata.get("sshs_model_hash") if isinstance(metadata, dict) else None
                except (ValueError, OSError):
                    return None
            try:
                self._short_hashes[key] = str(stored or addnet_hash(path))[:12].lower()
            except (ValueError, OSError):
                return None
        return self._short_hashes[key]

    def refresh(self) -> None:
        """Forget the scan so files added since are found."""
        self._entries = None

    def entries(self) -> list[LoraEntry]:
        if self._entries is None:
            found = []
            for path in sorted(self.folder.rglob("*")):
                if path.is_file() and path.suffix.lower() in LORA_SUFFIXES:
                    relative = path.relative_to(self.folder).with_suffix("").as_posix()
                    found.append(LoraEntry(path=path, name=path.stem, relative_name=relative, alias=_alias(path)))
            self._entries = found
        return list(self._entries)

    def names(self) -> list[str]:
        return [entry.relative_name for entry in self.entries()]

    def search(self, text: str) -> list[LoraEntry]:
        """Entries whose name, relative name or alias contains `text` (case-insensitive)."""
        needle = text.casefold()
        return [e for e in self.entries()
                if needle in e.relative_name.casefold() or (e.alias and needle in e.alias.casefold())]

    def resolve(self, name_or_path: str) -> Path:
        """A file path, or the one library file whose name, relative name or alias is `name_or_path`."""
        if not isinstance(name_or_path, str) or not name_or_path.strip():
            raise ValueError(f"LoRA name must be a non-empty string, got {name_or_path!r}")
        direct = Path(name_or_path).expanduser()
        if direct.is_file():
            return direct.resolve()
        in_folder = (self.folder / name_or_path).resolve()
        if in_folder.is_file() and in_folder.is_relative_to(self.folder.resolve()):
            return in_folder
        return self.resolve_name(name_or_path)

    def resolve_name(self, name: str) -> Path:
        """The one library file called `name` (stem, relative name or alias); never a path outside the folder.

        Prompt tags come from untrusted text (the HTTP API), so they resolve only through this.
        """
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"LoRA name must be a non-empty string, got {name!r}")
        entries = self.entries()
        # A1111 looks tags up in case-sensitive dicts (networks.py: stem, then trainer alias), so an exact
        # match on any field wins; the case-insensitive pass is mixkit's convenience for names typed by hand.
        for normalise in (str, str.casefold):
            wanted = normalise(name)
            for field in ("relative_name", "name", "alias"):
                hits = [e for e in entries
                        if getattr(e, field) is not None and normalise(getattr(e, field)) == wanted]
                if len(hits) == 1:
                    # the file as it sits in the folder, a symlink not followed: an error about it then names the
                    # folder's file (which HTTP answers show relative to --lora-dir), not where the link points
                    return hits[0].path.absolute()
                if len(hits) > 1:
                    listed = ", ".join(h.relative_name + h.path.suffix for h in hits)
                    raise ValueError(f"LoRA name {name!r} fits several files in {self.folder}: {listed}; use the relative path.")
        close = [e.relative_name for e in self.search(name)][:5]
        hint = f" Similar: {', '.join(close)}." if close else f" {len(entries)} LoRA file(s) in the folder."
        raise ModelNotFoundError(f"No LoRA named {name!r} in {self.folder}.{hint}")


# path -> ((mtime_ns, size), alias): the header of an unchanged file is read once per process. Generation scans the
# folder for every call (a file copied in applies at once), and kohya headers carry tens of kB of tag counts:
# re-reading 1,500 of them took 1.7 s a call, a stat each takes milliseconds.
_ALIASES: dict[Path, tuple[tuple[int, int], str | None]] = {}


def _alias(path: Path) -> str | None:
    """`ss_output_name` from a safetensors header (only the header is read); None if absent or unreadable."""
    if path.suffix.lower() != ".safetensors":
        return None
    try:
        status = path.stat()
    except OSError:
        return None
    stamp = (status.st_mtime_ns, status.st_size)
    cached = _ALIASES.get(path)
    if cached is None or cached[0] != stamp:
        cached = _ALIASES[path] = (stamp, _read_alias(path))
    return cached[1]


def _read_alias(path: Path) -> str | None:
    try:
        header, _ = read_safetensors_header(path)
    except (ValueError, OSError):
        return None
    metadata = header.get("__metadata__") or {}
    alias = metadata.get("ss_output_name") if isinstance(metadata, dict) else None
    return str(alias) if alias else None
