"""A1111's `/sdapi/v1/upscalers` listing: which names it lists, and each item's fields.

A1111 lists "None" first, then every upscaler; a model file with its architecture, path and native scale. A DAT
release file appears twice there (its folder lists every file by stem, and DAT's release entries, those
`dat_enabled_models` holds, by name as well). A1111's SwinIR download is listed by its stem, "SwinIR_4x", once the file
is there ("SwinIR 4x" only resolves to it). ScuNET's release files are listed as "ScuNET GAN" / "ScuNET PSNR" and by
stem, as A1111's ScuNET folder lists its files.
"""

from __future__ import annotations

from typing import Any, Iterable

from pipelines.model_upscale import A1111_DAT_NAMES, A1111_LISTED_STEMS, ModelUpscaler
from pipelines.upscale import UPSCALERS

DAT_RELEASE_NAMES = tuple(A1111_DAT_NAMES.values())  # A1111's `dat_enabled_models` choices, all enabled by default


def check_dat_enabled_models(value: Any) -> list[str]:
    """A1111's `dat_enabled_models`: a list of its DAT release names; ValueError naming the value and the choices."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or \
            not all(isinstance(name, str) and name in DAT_RELEASE_NAMES for name in value):
        raise ValueError(f"dat_enabled_models must be a list of DAT release names from {list(DAT_RELEASE_NAMES)}, "
                         f"got {value!r}.")
    return [name for name in DAT_RELEASE_NAMES if name in value]


def listed_upscaler_names(registry=UPSCALERS, *, dat_enabled: Iterable[str] = DAT_RELEASE_NAMES) -> list[str]:
    """The names `/sdapi/v1/upscalers` lists, as A1111 does: "None", each registered name, and after a DAT release
    file's name its stem ("DAT x4", "DAT_x4"), which A1111 lists as well. A DAT release name `dat_enabled` (A1111's
    `dat_enabled_models`) leaves out is not listed, its file still is by stem, as A1111's DAT folder lists it."""
    enabled = set(dat_enabled)
    names = ["None"]
    for name, entry in registry.items():
        if not (name in DAT_RELEASE_NAMES and name not in enabled):
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
