"""The hypernetworks folder (A1111's `--hypernetwork-dir`, default `models/hypernetworks`): names -> files.

As A1111's `list_hypernetworks`: every `.pt` file below the folder, recursively, named by its file stem, sorted
case-insensitively, a file named `None.pt` left out (A1111 reserves "None" for "no hypernetwork"). Loaded files are
kept while their size and modification time stay the same, so a prompt tag does not re-read its file every call.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from mixkit.errors import ModelNotFoundError
from mixkit.hypernetworks.network import Hypernetwork, load_hypernetwork

HYPERNETWORK_SUFFIX = ".pt"
# A1111's default folder (its --hypernetwork-dir)
DEFAULT_HYPERNETWORK_DIR = "models/hypernetworks"


@dataclass(frozen=True)
class HypernetworkEntry:
    """One file of the folder: its prompt-tag name and path (A1111's `/sdapi/v1/hypernetworks` item)."""

    name: str
    path: Path


class HypernetworkLibrary:
    """The hypernetwork files under `folder`; rescanned on every `entries()` (one stat per file, as A1111's
    refresh), files read once per version."""

    def __init__(self, folder: str | Path) -> None:
        folder = Path(folder).expanduser()
        if not folder.is_dir():
            raise ModelNotFoundError(f"hypernetwork folder not found: {folder}; create it or pass the folder holding "
                                     "your A1111 hypernetwork .pt files (--hypernetwork-dir).")
        self.folder = folder
        self._loaded: dict[Path, tuple[tuple[int, int], Hypernetwork]] = {}

    def entries(self) -> list[HypernetworkEntry]:
        """One entry per name, in A1111's order (paths sorted case-insensitively). A1111 fills a name -> path dict
        in that order, so of two files with one stem in different subfolders the last sorted one is used."""
        found = [path for path in self.folder.rglob("*") if path.suffix == HYPERNETWORK_SUFFIX and path.is_file()]
        found.sort(key=lambda path: str(path).lower())
        by_name = {path.stem: path for path in found if path.stem != "None"}
        return [HypernetworkEntry(name=name, path=path) for name, path in by_name.items()]

    def names(self) -> list[str]:
        return [entry.name for entry in self.entries()]

    def resolve(self, name: str) -> Path:
        """The file of the tag name `name` (a file stem; never a path, tags being untrusted prompt text).

        An unknown name is a ModelNotFoundError listing the closest names.
        """
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"hypernetwork name must be a non-empty string, got {name!r}")
        by_name = {entry.name: entry.path for entry in self.entries()}
        if name in by_name:
            return by_name[name]
        close = difflib.get_close_matches(name, list(by_name), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        listed = ", ".join(list(by_name)[:10]) or "none"
        raise ModelNotFoundError(f"hypernetwork {name!r} not found in {self.folder} (names are .pt file stems, "
                                 f"case-sensitive as in A1111; available: {listed}).{hint}")

    def load(self, name: str) -> Hypernetwork:
        """The loaded hypernetwork `name`, read again only when its file changed."""
        path = self.resolve(name)
        stat = path.stat()
        version = (stat.st_size, stat.st_mtime_ns)
        cached = self._loaded.get(path)
        if cached is None or cached[0] != version:
            self._loaded[path] = (version, load_hypernetwork(path))
        return self._loaded[path][1]
