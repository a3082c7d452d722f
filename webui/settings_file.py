"""The UI settings file (A1111's `config.json`, here `--ui-settings-file`): read at start, rewritten on change.

Writes go to a temporary file in the same folder that then replaces the old one, so a crash or
a full disk never leaves a half-written settings file. Keys this server does not know are kept
as they are, so pointing it at a file another tool also writes loses nothing.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from mixkit.io.json_object import parse_json_object


def read_settings_file(path: str | os.PathLike) -> dict:
    """The saved settings ({} when the file does not exist yet); ValueError naming the file if it is not a JSON object."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise OSError(f"Settings file {str(path)!r} cannot be read ({error.strerror}); fix its permissions "
                      "or pass another --ui-settings-file.") from None
    if not text.strip():
        return {}
    return parse_json_object(text, f"Settings file {str(path)!r}", "fix it or delete it to start from the defaults.")


def write_settings_file(path: str | os.PathLike, values: dict) -> None:
    """Replace the file with `values` (plus the unknown keys it already had) atomically."""
    path = Path(path)
    try:
        kept = read_settings_file(path)
    except ValueError:
        kept = {}  # a broken file is replaced; it was refused at start, so this only follows a manual edit
    kept.update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.",
                                         suffix=".tmp", delete=False)
    try:
        with handle:
            json.dump(kept, handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
