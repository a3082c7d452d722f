"""The nine X/Y/Z plot axes A1111's built-in Hypertile extension registers (extensions-builtin/hypertile), appended
after A1111 1.10's own list as its `on_before_ui` callback appends them, so `x_type` indexes 0 to "Size" stay
A1111's and these follow in its order.

A1111's axes override its Settings > Hypertile options per cell; here each sets one field of the cell's
`params.hypertile` (`pipelines.approx.hypertile_settings.HyperTile`), starting from the call's (the server's
Settings > Hypertile, or the CLI's --hypertile flags) or, when the call has none, from A1111's option defaults
(everything off). As in A1111, a size axis changes nothing while the part it sizes is off. The bounds are
HyperTile's (A1111's sliders; a swap size of 0, which A1111's axis lets through and its tiling then fails on, is
refused before anything runs).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pipelines.approx.hypertile_settings import HyperTile
from pipelines.scripts.xyz_axes import INT, TEXT, XYZ_AXES, AxisOption, check_true_false, true_false

# A1111's label -> HyperTile field, in the order its hypertile script appends them
HYPERTILE_AXES = {
    "[Hypertile] Unet First pass Enabled": "unet",
    "[Hypertile] Unet Second pass Enabled": "unet_hires",
    "[Hypertile] Unet Max Depth": "unet_max_depth",
    "[Hypertile] Unet Max Tile Size": "unet_max_tile",
    "[Hypertile] Unet Swap Size": "unet_swap_size",
    "[Hypertile] VAE Enabled": "vae",
    "[Hypertile] VAE Max Depth": "vae_max_depth",
    "[Hypertile] VAE Max Tile Size": "vae_max_tile",
    "[Hypertile] VAE Swap Size": "vae_swap_size",
}
SWITCHES = ("unet", "unet_hires", "vae")


def _value(name: str, value: Any) -> Any:
    return str(value).strip().lower() == "true" if name in SWITCHES else value


def set_hypertile(name: str):
    """The cell's params with HyperTile field `name` set (None when the result tiles nothing, as the call's None)."""
    def apply(params, value, values, context):
        current = params.hypertile if params.hypertile is not None else HyperTile(unet=False)
        changed = replace(current, **{name: _value(name, value)})
        return replace(params, hypertile=changed if changed.enabled else None)
    return apply


def check_hypertile(name: str):
    """Every value within HyperTile's bounds, before anything runs (ValueError naming the axis and the range)."""
    def check(params, values, context) -> None:
        if name in SWITCHES:
            check_true_false(params, values, context)
            return
        for value in values:
            try:
                HyperTile(unet=False, **{name: value})
            except (TypeError, ValueError) as error:
                raise ValueError(f"{next(label for label, field in HYPERTILE_AXES.items() if field == name)}: "
                                 f"{error}") from None
    return check


def depth_choices(context) -> list[str]:
    return [str(depth) for depth in range(4)]  # A1111's dropdown for the two Max Depth axes


def _axis(label: str, name: str) -> AxisOption:
    if name in SWITCHES:
        return AxisOption(label, TEXT, set_hypertile(name), choices=true_false, check=check_hypertile(name))
    return AxisOption(label, INT, set_hypertile(name), check=check_hypertile(name),
                      choices=depth_choices if name.endswith("max_depth") else None)


for _label, _name in HYPERTILE_AXES.items():
    XYZ_AXES.register(_label, _axis(_label, _name))
