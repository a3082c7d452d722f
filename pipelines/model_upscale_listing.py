"""A1111's `/sdapi/v1/upscalers` listing: which names it lists, and each item's fields.

A1111 lists "None" first, then every upscaler; a model file with its architecture, path and native scale. A DAT
release file appears twice there (its folder lists every file by stem, and DAT's release entries, those
`dat_enabled_models` holds, by name as well). A1111's SwinIR download is listed by its stem, "SwinIR_4x", once the file
is there ("SwinIR 4x" only resolves to it).
"""

from __future__ import annotations

from pipelines.model_upscale import A1111_LISTED_STEMS, ModelUpscaler
from pipelines.upscale import UPSCALERS


def listed_upscaler_names(registry=UPSCALERS) -> list[str]:
    """The names `/sdapi/v1/upscalers` lists, as A1111 does: "None", each registered name, and after a DAT release
    file's name its stem ("DAT x4", "DAT_x4"), which A1111 lists as well."""
    names = ["None"]
    for name, entry in registry.items():
        names.append(name)
        if isinstance(entry, ModelUpscaler):
            names.extend(alias for alias in registry.aliases(name) if alias in A1111_LISTED_STEMS)
    return names


A1111_LISTED_SCALE = 4  # A1111's `UpscalerData` scale default, which its None, Lanczos, Nearest entries keep


def upscaler_listing(name: str) -> dict:
    """A1111's `/sdapi/v1/upscalers` item for a registered name (or "None"): model upscalers carry their file and
    native scale; "None" and the resamplers report 4, as A1111's (their `UpscalerData` never sets one), so a client
    reading `scale` gets a number for every entry. An object with a `scale` (SD x4) reports its own."""
    entry = UPSCALERS.get(name) if name in UPSCALERS else None
    if isinstance(entry, ModelUpscaler):
        return {"name": name, "model_name": entry.architecture, "model_path": str(entry.path), "model_url": None,
                "scale": entry.scale}
    scale = getattr(entry, "scale", None)
    listed = scale if isinstance(scale, (int, float)) and not isinstance(scale, bool) else A1111_LISTED_SCALE
    return {"name": name, "model_name": None, "model_path": None, "model_url": None, "scale": listed}
