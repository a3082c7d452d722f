"""Image prompts of a pasted infotext -> the form's ControlNet units, as sd-webui-controlnet's paste fills its units.

An infotext spells an IP-Adapter one of two ways. The extension's: a `ControlNet N` unit whose Module is one of its
IP-Adapter modules (`ip-adapter_clip_sd15`, ...), filled like any unit by
`webui.ui.paste_infotext.infotext_controlnet_values`, which takes those modules too. mixkit's own (its web UI, API and
CLI write it, `pipelines.ip_adapter_infotext`): `IP-Adapter: "ip-adapter_sd15: 0.6"` with
`IP-Adapter Guidance: "0.2-0.8"` when a window is not every step, naming each adapter by its file stem. Each of
those fills the next unit the `ControlNet N` keys left free: Preprocessor `ip-adapter-auto` (the encoder found beside
the weights, as the extension's auto module picks one), Model the adapter, Control weight its scale, the control
steps its window, Control mode Balanced (the only mode an IP-Adapter unit takes). No infotext holds the reference
picture, so every filled unit gets a note asking for it.
"""

from __future__ import annotations

from typing import Callable

AUTO_MODULE = "ip-adapter-auto"


def reference_picture_note() -> str:
    """What a filled IP-Adapter unit still needs, in the words of the paste notes."""
    return ("no infotext holds its reference picture; add it as the unit's control image (in img2img an empty one "
            "takes the init image)")


def infotext_ip_adapter_values(parsed: dict, first_unit: int, unit_count: int,
                               model_of: Callable[[str], str | None] | None) -> tuple[dict[str, object], list[str]]:
    """(ControlNet unit field -> value, notes) for mixkit's `IP-Adapter` / `IP-Adapter Guidance` keys, the adapters
    filling units `first_unit`, `first_unit + 1`, ... of the `unit_count` the form has."""
    from pipelines.ip_adapter_infotext import INFOTEXT_KEY, ip_adapter_entries_from_infotext
    from pipelines.ip_adapter_inputs import IP_ADAPTER_SCALE_RANGE
    from webui.ui.paste_infotext import controlnet_field

    if INFOTEXT_KEY not in parsed:
        return {}, []
    try:
        entries = ip_adapter_entries_from_infotext(parsed)
    except ValueError as error:
        return {}, [f"{INFOTEXT_KEY}: not read ({str(error).rstrip('.')}); set the IP-Adapter units by hand."]
    values: dict[str, object] = {}
    notes: list[str] = []
    low, high = IP_ADAPTER_SCALE_RANGE
    for offset, entry in enumerate(entries):
        index = first_unit + offset
        described = f"{INFOTEXT_KEY} {entry.name}: {entry.scale:g}"
        if index >= unit_count:
            notes.append(f"{described}: this form has no ControlNet Unit {index} left for it (the infotext's ControlNet "
                         "units come first); the image cannot be reproduced without that image prompt.")
            continue
        model = model_of(entry.name) if model_of is not None else None
        values.update({controlnet_field(index, "enabled"): True, controlnet_field(index, "preprocessor"): AUTO_MODULE,
                       controlnet_field(index, "start"): entry.guidance_start,
                       controlnet_field(index, "end"): entry.guidance_end,
                       controlnet_field(index, "control_mode"): "Balanced"})
        left = []
        if model is None:
            left.append(f"model {entry.name!r} (put the file in the ControlNet folder)")
        else:
            values[controlnet_field(index, "model")] = model
        if low <= entry.scale <= high:
            values[controlnet_field(index, "weight")] = entry.scale
        else:
            left.append(f"weight {entry.scale:g} (outside [{low:g}, {high:g}])")
        notes.append(f"{described}: ControlNet Unit {index} is enabled as this IP-Adapter ({AUTO_MODULE}), but "
                     f"{reference_picture_note()}." + (f" Not available here, so not set: {', '.join(left)}."
                                                           if left else ""))
    return values, notes
