"""Training metadata of a LoRA file (kohya `ss_*`, `modelspec.*`), decoded for display and checks."""

from __future__ import annotations

import json
from dataclasses import dataclass, field


@dataclass
class LoraMetadata:
    """What a LoRA file says about itself; every field optional, as trainers write different subsets."""

    base_model: str | None = None
    architecture: str | None = None
    network_dim: str | None = None
    network_alpha: str | None = None
    network_module: str | None = None
    output_name: str | None = None
    title: str | None = None
    tag_frequency: dict[str, dict[str, int]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    raw: dict[str, str] = field(default_factory=dict)

    def top_tags(self, limit: int = 10) -> list[tuple[str, int]]:
        """Most frequent training tags over all datasets (what A1111 shows as trigger words)."""
        totals: dict[str, int] = {}
        for tags in self.tag_frequency.values():
            for tag, count in tags.items():
                totals[tag] = totals.get(tag, 0) + int(count)
        return sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:limit]


def read_metadata(raw: dict[str, str]) -> LoraMetadata:
    """Decode `ss_*` / `modelspec.*`; an undecodable optional field becomes a warning, not an error.

    Tag frequencies only inform the user, so a corrupt JSON value must not stop the LoRA from loading.
    """
    meta = LoraMetadata(raw=dict(raw))
    meta.base_model = raw.get("ss_sd_model_name") or raw.get("ss_base_model_version") or raw.get("modelspec.architecture")
    meta.architecture = raw.get("modelspec.architecture") or raw.get("ss_base_model_version")
    meta.network_dim = raw.get("ss_network_dim")
    meta.network_alpha = raw.get("ss_network_alpha")
    meta.network_module = raw.get("ss_network_module")
    meta.output_name = raw.get("ss_output_name") or None
    meta.title = raw.get("modelspec.title") or None
    if "ss_tag_frequency" in raw:
        try:
            decoded = json.loads(raw["ss_tag_frequency"])
            if not isinstance(decoded, dict):
                raise ValueError("not a JSON object")
            meta.tag_frequency = {str(k): {str(t): int(c) for t, c in v.items()} for k, v in decoded.items() if isinstance(v, dict)}
        except (ValueError, TypeError, AttributeError) as error:
            meta.warnings.append(f"metadata 'ss_tag_frequency' is not valid JSON ({error}); tags ignored")
    return meta
