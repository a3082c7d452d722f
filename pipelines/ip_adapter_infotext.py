"""The `IP-Adapter` infotext keys: each adapter's name, scale and guidance window, written and read back.

sd-webui-controlnet records an IP-Adapter as a ControlNet unit (`ControlNet 0: "Module: ip-adapter_clip_sd15,
Model: ip-adapter_sd15, Weight: 0.6, ..."`), but pasting that into mixkit would ask the ControlNet path for a
model that is no ControlNet; mixkit writes its own key instead, e.g. `IP-Adapter: "ip-adapter_sd15: 0.6,
ip-adapter-plus_sd15: 0.4"` (quoted by the infotext writer, since it holds ':' and ',').

Guidance windows (sd-webui-controlnet's `Guidance Start` / `Guidance End` of a unit) go in a second key, in the
adapters' order, written only when some adapter acts on part of the steps (A1111 leaves defaults out):
`IP-Adapter Guidance: "0.2-0.8, 0-1"`. A separate key keeps `IP-Adapter` readable by readers that know only names
and scales; a reader that does not know the second key reports it as not honoured instead of misreading it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipelines.infotext import format_value

INFOTEXT_KEY = "IP-Adapter"
GUIDANCE_KEY = "IP-Adapter Guidance"
# "start-end"; a number may be written with an exponent ("1e-05"), whose '-' is not the separator
_NUMBER = r"\d+(?:\.\d*)?(?:[eE][-+]?\d+)?"
_WINDOW = re.compile(f"({_NUMBER})-({_NUMBER})")


@dataclass(frozen=True)
class IPAdapterInfotextEntry:
    """One adapter as an infotext records it: weights name (file stem), scale and guidance window."""

    name: str
    scale: float
    guidance_start: float = 0.0
    guidance_end: float = 1.0


def ip_adapter_infotext(names: list[str], scales: list[float],
                        windows: list[tuple[float, float]] | None = None) -> dict[str, str]:
    """{"IP-Adapter": "name: scale, ...", "IP-Adapter Guidance": "start-end, ..."} for the adapters a call ran
    ({} for none); the guidance key only when some window is not every step."""
    if not names:
        return {}
    for name in names:
        if any(c in name for c in ",:\n"):
            raise ValueError(f"IP-Adapter name {name!r} holds ',' ':' or a line break, which the infotext entry "
                             "cannot carry; rename the weights file.")
    written = {INFOTEXT_KEY: ", ".join(f"{name}: {format_value(scale)}" for name, scale in zip(names, scales))}
    if windows and any(tuple(window) != (0.0, 1.0) for window in windows):
        written[GUIDANCE_KEY] = ", ".join(f"{format_value(start)}-{format_value(end)}" for start, end in windows)
    return written


def ip_adapters_from_infotext(params: dict) -> list[tuple[str, float]]:
    """[(name, scale), ...] from a parsed infotext's `IP-Adapter` entry (`parse_infotext`); [] without one."""
    text = params.get(INFOTEXT_KEY)
    if not text:
        return []
    adapters = []
    for item in str(text).split(","):
        name, sep, scale = item.strip().rpartition(": ")
        try:
            value = float(scale)
        except ValueError:
            value = None
        if not sep or not name or value is None:
            raise ValueError(f"IP-Adapter infotext item {item.strip()!r} is not 'name: scale' (in {text!r}).")
        adapters.append((name, value))
    return adapters


def ip_adapter_entries_from_infotext(params: dict) -> list[IPAdapterInfotextEntry]:
    """Every adapter of a parsed infotext (`parse_infotext`) with its scale and guidance window; [] without one.
    The guidance key must have one window per adapter."""
    adapters = ip_adapters_from_infotext(params)
    text = params.get(GUIDANCE_KEY)
    if not text:
        return [IPAdapterInfotextEntry(name, scale) for name, scale in adapters]
    windows = []
    for item in str(text).split(","):
        match = _WINDOW.fullmatch(item.strip())
        window = (float(match[1]), float(match[2])) if match else None
        if window is None or not 0.0 <= window[0] <= window[1] <= 1.0:
            raise ValueError(f"{GUIDANCE_KEY} infotext item {item.strip()!r} is not 'start-end' with "
                             f"0 <= start <= end <= 1 (in {text!r}).")
        windows.append(window)
    if len(windows) != len(adapters):
        raise ValueError(f"{GUIDANCE_KEY} infotext has {len(windows)} windows for the {len(adapters)} adapters of "
                         f"{INFOTEXT_KEY}; it needs one per adapter (in {text!r}).")
    return [IPAdapterInfotextEntry(name, scale, *window) for (name, scale), window in zip(adapters, windows)]


def ip_adapter_fields_from_infotext(params: dict) -> dict:
    """The call fields an infotext restores: {"ip_adapter_scale": [...], "ip_adapter_guidance": [(start, end), ...]}
    ({} without adapters). The adapters themselves are named by file stem only, so the caller supplies
    `ip_adapter` (and the image)."""
    entries = ip_adapter_entries_from_infotext(params)
    if not entries:
        return {}
    return {"ip_adapter_scale": [entry.scale for entry in entries],
            "ip_adapter_guidance": [(entry.guidance_start, entry.guidance_end) for entry in entries]}
