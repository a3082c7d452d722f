"""The infotext of an X/Y/Z plot's grids, as A1111 writes it: the first cell's, plus the plot's own keys.

A1111 adds `Script: X/Y/Z plot`, then `X Type` / `X Values` (the values as typed) and, for a Seed or Var. seed axis
whose -1s were drawn, `Fixed X Values` (the seeds used), the same for Y, and on the main grid for Z. Pasting the
grid's infotext back thus says how the plot was made. They go before `Version`, where A1111's extra generation
params go.
"""

from __future__ import annotations

from pipelines.infotext import build_infotext, split_infotext

SEED_AXES = ("Seed", "Var. seed")


def plot_keys(config, *, with_z: bool) -> dict[str, str]:
    """The plot's infotext keys, in A1111's order."""
    keys = {"Script": "X/Y/Z plot"}
    for name, axis in zip("XYZ", config.axes):
        if axis.is_nothing or (name == "Z" and not with_z):
            continue
        keys[f"{name} Type"] = axis.label
        keys[f"{name} Values"] = axis.text
        if axis.label in SEED_AXES and not config.no_fixed_seeds:
            keys[f"Fixed {name} Values"] = ", ".join(str(value) for value in axis.values)
    return keys


def grid_infotext(cell_infotext: str, config, *, with_z: bool) -> str:
    """`cell_infotext` (the grid's first cell's) with the plot's keys added before `Version`."""
    if not cell_infotext:
        return ""
    prompt, negative, params = split_infotext(cell_infotext)
    version = params.pop("Version", None)
    params.update(plot_keys(config, with_z=with_z))
    if version is not None:
        params["Version"] = version
    return build_infotext(prompt, negative, params)
