"""JSON round trip shared by every trainer's config dataclass; reading also takes TOML and kohya's option names."""

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
        """The config in a .json file, or a .toml one (kohya's --config_file form, `config_file.read_config_file`);
        kohya's option names become mixkit's (`config_file.KOHYA_OPTIONS`)."""
        from mixkit.training.config_file import read_config_file, translate_kohya_options, with_kohya_defaults

        known = {f.name for f in fields(cls)}
        raw = read_config_file(path)
        data = with_kohya_defaults(raw, translate_kohya_options(raw, known), known)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{path}: unknown config keys {unknown}; valid keys: {sorted(known)}")
        return cls(**data)
