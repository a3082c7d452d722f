"""JSON round trip shared by every trainer's config dataclass."""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from pathlib import Path


class JsonConfig:
    """Mixin for config dataclasses: `to_json()` and `from_json_file(path)`.

    Unknown keys are an error naming them: a typo in a training config must not be silently ignored.
    """

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json_file(cls, path: str | Path):
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{path}: unknown config keys {unknown}; valid keys: {sorted(known)}")
        return cls(**data)
