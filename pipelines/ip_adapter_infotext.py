"""The `IP-Adapter` infotext key: each adapter's name and scale, written and read back.

sd-webui-controlnet records an IP-Adapter as a ControlNet unit (`ControlNet 0: "Module: ip-adapter_clip_sd15,
Model: ip-adapter_sd15, Weight: 0.6, ..."`), but pasting that into mixkit would ask the ControlNet path for a
model that is no ControlNet; mixkit writes its own key instead, e.g. `IP-Adapter: "ip-adapter_sd15: 0.6,
ip-adapter-plus_sd15: 0.4"` (quoted by the infotext writer, since it holds ':' and ',').
"""

from __future__ import annotations

from pipelines.infotext import format_value

INFOTEXT_KEY = "IP-Adapter"


def ip_adapter_infotext(names: list[str], scales: list[float]) -> dict[str, str]:
    """{"IP-Adapter": "name: scale, ..."} for the adapters a call ran ({} for none)."""
    if not names:
        return {}
    for name in names:
        if any(c in name for c in ",:\n"):
            raise ValueError(f"IP-Adapter name {name!r} holds ',' ':' or a line break, which the infotext entry "
                             "cannot carry; rename the weights file.")
    return {INFOTEXT_KEY: ", ".join(f"{name}: {format_value(scale)}" for name, scale in zip(names, scales))}


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
