"""Pasting an infotext's script keys: the Script dropdown from `Script`, and the X/Y/Z plot's axis types and values
from `X Type` / `X Values` (and Y, Z), as A1111's paste does (its scripts.py adds the Script dropdown to every tab's
paste fields; its xyz_grid.py registers the axis keys as its `infotext_fields`).

As A1111's, an infotext without `Script` sets the dropdown back to None, so a pasted plain image is not run through
the script left chosen from before. Different on purpose: for an X/Y/Z infotext without `Y Type` / `Z Type` those axes
become Nothing (A1111 keeps whatever they were, which plots a grid the image never had). The values go to each axis's
text box; for an axis with a values dropdown, choosing the type moves them into it (`webui.ui.script_xyz`).
"""

from __future__ import annotations

from webui.ui.script_controls import NO_SCRIPT

XYZ_TITLE = "X/Y/Z plot"
AXES = "xyz"


def script_form_fields(scripts) -> list[tuple[str, object]]:
    """(value name, widget) for the paste: "script" (the dropdown), then "xyz_x_type", "xyz_x_values", ... when the
    tab has the X/Y/Z plot's controls; none for a tab without the Script dropdown."""
    if scripts is None:
        return []
    fields = [("script", scripts.dropdown)]
    group = scripts.groups.get(XYZ_TITLE)
    if group is not None:
        components = group[1]  # per axis: type, values text box, values dropdown (`build_xyz_controls`)
        for index, name in enumerate(AXES):
            fields += [(f"xyz_{name}_type", components[index * 3]), (f"xyz_{name}_values", components[index * 3 + 1])]
    return fields


def infotext_script_values(parsed: dict, titles: list[str], axis_labels: list[str]) -> tuple[dict, list[str]]:
    """(value name -> value, notes) from a parsed infotext, for a tab offering the scripts `titles` and the X/Y/Z axis
    types `axis_labels`; a script or axis type the tab does not have is named in a note and left as it is."""
    written = parsed.get("Script")
    if written is None:
        return {"script": NO_SCRIPT}, []
    title = next((title for title in titles if title.lower() == str(written).strip().lower()), None)
    if title is None:
        return {}, [f"Script {written!r} is not offered here (the Script dropdown has {', '.join(titles)}); the "
                    "dropdown is left as it is."]
    values: dict = {"script": title}
    notes: list[str] = []
    if title != XYZ_TITLE:
        return values, notes
    for name in AXES:
        key = name.upper()
        label = parsed.get(f"{key} Type")
        if label is None:
            if name != "x":  # an axis the plot did not use
                values.update({f"xyz_{name}_type": "Nothing", f"xyz_{name}_values": ""})
            continue
        match = next((known for known in axis_labels if known.lower() == str(label).strip().lower()), None)
        if match is None:
            notes.append(f"{key} Type {label!r} is not an X/Y/Z axis this server plots; the {key} axis is left as "
                         "it is.")
            continue
        values.update({f"xyz_{name}_type": match, f"xyz_{name}_values": str(parsed.get(f"{key} Values", ""))})
    return values, notes
