"""`--controlnet-json FILE`: ControlNet units written as sd-webui-controlnet's API takes them, read from a file.

The file holds the units list (`[unit, ...]`), or the objects around it in a request: `{"args": [...]}`,
`{"controlnet": {"args": [...]}}` or `{"alwayson_scripts": {"controlnet": {"args": [...]}}}`, so the
`alwayson_scripts` of an API request can be saved and reused. Units take the API's keys, spellings and image forms
(webui.api_controlnet: old clients' keys renamed, unknown keys refused, `enabled: false` skipped,
`{"image": ..., "mask": ...}` or `[image, mask]`); a picture or mask is a file path (relative to the JSON file) or
base64 data as the API takes it. A unit with an IP-Adapter module is an image prompt (`webui.cli.ip_adapter_units`),
whose `image` may also be a list of `{"image": ...}` objects, several pictures for one adapter.
"""

from __future__ import annotations

import json
from pathlib import Path


class Base64Picture(str):
    """A unit picture given as base64 data (decoded by `read_picture`), not as a file path."""


def json_units(path: str) -> list[dict]:
    """The enabled units of the file, as `--controlnet` collects them: {"flag": label, "fields": API unit keys}."""
    from webui.api_controlnet import _given, enabled_units, unit_picture

    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"--controlnet-json {path!r} does not exist or is not a file; check the path")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"--controlnet-json {path}: not a JSON file ({error})") from None
    units = _units_list(data, path)
    collected = []
    for label, unit in enabled_units(units, "--controlnet-json unit"):
        if _is_picture_list(unit):  # an IP-Adapter unit's several pictures (the extension's multiple inputs)
            fields = {key: value for key, value in unit.items()
                      if key not in ("image", "enabled", "low_vram", "save_detected_map") and _given(value)}
            fields["image"] = [{**item, "image": _picture(item["image"], file.parent)}
                               if isinstance(item.get("image"), str) else item for item in unit["image"]]
            collected.append({"flag": label, "fields": fields})
            continue
        image, mask, _ = unit_picture(label, unit)
        fields = {key: value for key, value in unit.items()
                  if key not in ("image", "mask", "enabled", "low_vram", "save_detected_map") and _given(value)}
        for key, value in (("image", image), ("mask", mask),
                           ("effective_region_mask", unit.get("effective_region_mask"))):
            if _given(value):
                if not isinstance(value, str):
                    raise ValueError(f"{label} {key} must be a file path or base64 image data, got "
                                     f"{type(value).__name__}")
                fields[key] = _picture(value, file.parent)
        collected.append({"flag": label, "fields": fields})
    return collected


def _is_picture_list(unit: dict) -> bool:
    """An IP-Adapter unit whose `image` is a list of {"image": ...} objects (read by `webui.api_ip_adapter`)."""
    from webui.api_ip_adapter import is_ip_adapter_module

    image = unit.get("image")
    return (is_ip_adapter_module(unit.get("module")) and isinstance(image, list) and bool(image)
            and all(isinstance(item, dict) for item in image))


def _units_list(data, path: str) -> list:
    for key in ("alwayson_scripts", "controlnet", "args"):
        if isinstance(data, dict):
            found = next((value for name, value in data.items() if name.lower() == key), None)
            data = data if found is None else found
    if not isinstance(data, list):
        raise ValueError(f"--controlnet-json {path}: expected a list of units, or {{\"args\": [unit, ...]}} "
                         "(as in alwayson_scripts.controlnet)")
    return data


def _picture(value: str, folder: Path) -> str:
    """A file path made absolute (relative ones are the JSON file's), or the base64 data marked as such."""
    candidate = (folder / value).expanduser() if not Path(value).expanduser().is_absolute() else Path(value)
    if candidate.is_file():
        return str(candidate)
    if value.startswith("data:") or len(value) > 260:  # no file name is that long; base64 images are longer
        return Base64Picture(value)
    return str(candidate)  # a missing file: reading it names the path


def read_picture(value: str, what: str, mask: bool = False):
    """A unit's picture or mask: base64 data decoded as the API decodes it, else the file (a mask as stored, so
    its alpha can hold the strokes)."""
    from mixkit.io.images import DEFAULT_MAX_PIXELS
    from webui.cli.img2img import read_init_image, read_mask

    if isinstance(value, Base64Picture):
        from webui.base64_images import decode_base64_image

        return decode_base64_image(what, str(value), max_pixels=DEFAULT_MAX_PIXELS, max_bytes=1 << 30)
    return read_mask(value, what) if mask else read_init_image(value)
