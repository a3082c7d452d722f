"""ControlNet units in the infotext, in sd-webui-controlnet's format, so "send to img2img" restores them.

sd-webui-controlnet writes one key per enabled unit, `ControlNet 0`, `ControlNet 1`, ..., whose
value is `Field Name: value` pairs joined by ", " (then JSON-quoted by the infotext writer because
it holds commas and colons), e.g.
`ControlNet 0: "Module: canny, Model: control_sd15_canny, Weight: 1, Resize Mode: Crop and Resize, ..."`.
"""

from __future__ import annotations

from pipelines.infotext import format_value

_RESIZE_MODE_NAMES = {"just resize": "Just Resize", "crop and resize": "Crop and Resize",
                      "resize and fill": "Resize and Fill"}


def control_mode_name(unit) -> str:
    """The extension's name of the unit's control mode, as its infotext writes it."""
    if unit.guess_mode:
        return "ControlNet is more important"
    return "My prompt is more important" if getattr(unit, "soft_injection", False) else "Balanced"


def serialize_unit(unit, size: tuple[int, int] | None = None) -> str:
    """One unit as sd-webui-controlnet's `serialize_unit` writes it (unused thresholds left out; no "Processor Res"
    with pixel perfect, which computes it per picture).

    A unit with `processor_res` None is preprocessed once fitted to the generation `size` (width, height), so its
    preprocessor ran at that size's short side: that is the "Processor Res" written, so a paste (the UI and API
    default to 512) detects at it again.
    """
    resolution = unit.processor_res
    if resolution is None and size is not None:
        resolution = min(size)
    fields = {
        "Module": unit.preprocessor,
        "Model": unit.display_name,
        "Weight": unit.weight,
        "Resize Mode": _RESIZE_MODE_NAMES[unit.resize_mode.strip().lower()],
        "Processor Res": None if unit.pixel_perfect else resolution,
        "Threshold A": _threshold(unit, "a"),
        "Threshold B": _threshold(unit, "b"),
        "Guidance Start": unit.guidance_start,
        "Guidance End": unit.guidance_end,
        "Pixel Perfect": unit.pixel_perfect,
        "Control Mode": control_mode_name(unit),
    }
    for name, value in fields.items():
        if value is not None and any(c in str(value) for c in ",:"):
            raise ValueError(f"ControlNet {name} {value!r} contains ',' or ':', which the ControlNet infotext "
                             "format cannot hold; rename it (model_name=...).")
    return ", ".join(f"{name}: {format_value(value)}" for name, value in fields.items() if value is not None)


def _threshold(unit, which: str):
    from pipelines.preprocessors import PREPROCESSORS

    a, b = PREPROCESSORS.get(unit.preprocessor).resolve_thresholds(unit.threshold_a, unit.threshold_b)
    return a if which == "a" else b


def controlnet_infotext(units: list, size: tuple[int, int] | None = None) -> dict[str, str]:
    """The `ControlNet N` infotext keys of units run at the generation `size` (width, height)."""
    return {f"ControlNet {index}": serialize_unit(unit, size) for index, unit in enumerate(units)}


def parse_unit(text: str) -> dict[str, object]:
    """Read one `ControlNet N` value back: {"module", "model", "weight", ...} with numbers as numbers.

    Keys are the snake_case field names sd-webui-controlnet uses ("guidance_start", "control_mode").
    """
    result: dict[str, object] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition(": ")
        if not sep:
            raise ValueError(f"ControlNet infotext item {item!r} is not 'Name: value' (in {text!r}).")
        result["_".join(key.lower().split(" "))] = _parse_value(value)
    return result


def controlnet_units_from_infotext(params: dict) -> list[dict[str, object]]:
    """Every `ControlNet N` entry of a parsed infotext (`parse_infotext`), in unit order."""
    units = []
    index = 0
    while f"ControlNet {index}" in params:
        units.append(parse_unit(str(params[f"ControlNet {index}"])))
        index += 1
    return units


def _parse_value(value: str):
    if value in ("True", "False"):
        return value == "True"
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value
