"""X/Y/Z plot's settings: A1111's positional `script_args` read into a typed, checked `XyzConfig`.

The slots are A1111 1.10's, in its `ui()` order: x_type, x_values, x_values_dropdown, y_type, y_values,
y_values_dropdown, z_type, z_values, z_values_dropdown, draw_legend, include_lone_images, include_sub_grids,
no_fixed_seeds, vary_seeds_x, vary_seeds_y, vary_seeds_z, margin_size, csv_mode. Slots left out take the UI's
defaults (X: Seed, Y and Z: Nothing, Draw legend on), as does a null. An axis type is A1111's index into the kind's axis list (its
dropdowns are `type="index"`) or the axis's label in any case. A dropdown axis (Sampler, Checkpoint name, ...) reads
its values from the dropdown slot (a list) unless csv_mode is on or the dropdown is empty, then from the text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pipelines.scripts.registry import ScriptArg
from pipelines.scripts.script_args import check_margin
from pipelines.scripts.xyz_axes import (FLOAT, INT, NOTHING, PERMUTATIONS, XYZ_AXES, AxisOption, PlotContext,
                                        axes_for)
from pipelines.scripts.xyz_values import float_values, int_values, join_values, split_values

ARG_NAMES = ("x_type", "x_values", "x_values_dropdown", "y_type", "y_values", "y_values_dropdown", "z_type",
             "z_values", "z_values_dropdown", "draw_legend", "include_lone_images", "include_sub_grids",
             "no_fixed_seeds", "vary_seeds_x", "vary_seeds_y", "vary_seeds_z", "margin_size", "csv_mode")
ARG_DEFAULTS = (1, "", [], 0, "", [], 0, "", [], True, False, False, False, False, False, False, 0, False)
MAX_MARGIN = 500  # A1111's "Grid margins (px)" slider: 0-500 in steps of 2
# A plot is one job holding the worker: this many cells (at one image each, already a long wait) is the most one
# request may ask for; a bigger study is several plots. Prompt order's permutations count too (7 words: 5,040).
MAX_CELLS = 1000
MAX_PERMUTED = 6  # Prompt order's values: 6! = 720 orders fit in MAX_CELLS, 7! = 5,040 do not


@dataclass(frozen=True)
class PlotAxis:
    """One axis: its type, its values (seeds not yet made concrete) and the values as the user wrote them."""

    option: AxisOption
    values: tuple
    text: str = ""

    @property
    def label(self) -> str:
        return self.option.label

    @property
    def is_nothing(self) -> bool:
        return self.option.value_type == NOTHING

    def labels(self, values=None) -> list[str]:
        return [self.option.format_value(self.option, value) for value in (self.values if values is None else values)]


NOTHING_AXIS = PlotAxis(XYZ_AXES.get("Nothing"), (0,))


@dataclass(frozen=True)
class XyzConfig:
    """A checked X/Y/Z plot: three axes and A1111's options."""

    x: PlotAxis
    y: PlotAxis = NOTHING_AXIS
    z: PlotAxis = NOTHING_AXIS
    draw_legend: bool = True
    include_lone_images: bool = False
    include_sub_grids: bool = False
    no_fixed_seeds: bool = False
    vary_seeds_x: bool = False
    vary_seeds_y: bool = False
    vary_seeds_z: bool = False
    margin_size: int = 0
    csv_mode: bool = False

    @property
    def axes(self) -> tuple[PlotAxis, PlotAxis, PlotAxis]:
        return self.x, self.y, self.z

    @property
    def cell_count(self) -> int:
        return len(self.x.values) * len(self.y.values) * len(self.z.values)


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):  # a client's 0/1
        return bool(value)
    raise ValueError(f"script_args {name}: must be true or false, got {value!r}.")


def _margin(value: Any) -> int:
    return check_margin("margin_size", value)


def find_axis(slot: str, value: Any, kind: str) -> AxisOption:
    """The axis type an `x_type` slot names: A1111's index into the kind's list, or a label in any case."""
    options = axes_for(kind)
    labels = ", ".join(f"{index} {axis.label!r}" for index, axis in enumerate(options))
    if isinstance(value, bool):
        raise ValueError(f"script_args {slot}: must be an axis index or label, got {value!r}. Valid: {labels}.")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        if not 0 <= value < len(options):
            raise ValueError(f"script_args {slot}: axis index {value} is out of range 0-{len(options) - 1} for "
                             f"{kind}. Valid: {labels}.")
        axis = options[value]
    elif isinstance(value, str):
        matches = [axis for axis in options if axis.label.casefold() == value.strip().casefold()]
        if not matches:
            raise ValueError(f"script_args {slot}: unknown {kind} axis type {value!r}. Valid: {labels}.")
        axis = matches[0]
    else:
        raise ValueError(f"script_args {slot}: must be an axis index or label, got {value!r}. Valid: {labels}.")
    return axis


def parse_axis(name: str, option: AxisOption, text: Any, dropdown: Any, *, csv_mode: bool,
               context: PlotContext) -> PlotAxis:
    """One axis's values, expanded (ranges, permutations) and checked against its choices; ValueError naming the
    slot (`name`: "x", "y" or "z"), the value and what is allowed."""
    if option.value_type == NOTHING:
        return PlotAxis(option, (0,), "")
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise ValueError(f"script_args {name}_values: must be a string of comma-separated values, got {text!r}.")
    if dropdown is None:
        dropdown = []
    if not isinstance(dropdown, list) or not all(isinstance(item, str) for item in dropdown):
        raise ValueError(f"script_args {name}_values_dropdown: must be a list of strings, got {dropdown!r}.")
    if option.choices is not None and not csv_mode and dropdown:
        items, text = [item.strip() for item in dropdown if item.strip()], join_values(dropdown)
    else:
        items = split_values(text)
    if not items:
        raise ValueError(f"script_args {name}_values: the {option.label!r} axis has no values; give at least one "
                         "(comma separated), or set its type to Nothing.")
    where = f"script_args {name}_values: {option.label}"
    try:
        if option.value_type == INT:
            values = int_values(where, items)
        elif option.value_type == FLOAT:
            values = float_values(where, items)
        elif option.value_type == PERMUTATIONS:
            # the count first: the factorial of 200,000 values took a second to compute (and to print, failed)
            if len(items) > MAX_PERMUTED or math.factorial(len(items)) > MAX_CELLS:
                orders = f"{math.factorial(len(items)):,}" if len(items) <= 12 else "billions of"
                raise ValueError(f"{where}: {len(items)} values make {orders} orders, more than a plot's {MAX_CELLS} "
                                 f"cells; give at most {MAX_PERMUTED}.")
            from itertools import permutations

            values = [tuple(order) for order in permutations(items)]
        else:
            values = items
    except ValueError as error:
        message = str(error)
        raise ValueError(message if message.startswith("script_args") else f"{where}: {message}") from None
    if not values:
        raise ValueError(f"script_args {name}_values: {text!r} gives no values for {option.label!r} (a range whose "
                         "step runs away from its end?).")
    if option.choices is not None and option.check is None:
        valid = option.choices(context)
        unknown = [value for value in values if value not in valid]
        if unknown:
            raise ValueError(f"script_args {name}_values: {unknown[0]!r} is not a valid {option.label!r} value. Valid: "
                             f"{', '.join(map(repr, valid)) or '(none)'}.")
    return PlotAxis(option, tuple(values), text)


def parse_script_args(script_args: Any, kind: str = "txt2img", **context: Any) -> XyzConfig:
    """A1111's positional X/Y/Z plot `script_args` as a checked `XyzConfig`; ValueError naming the slot and value.

    `context`: as `PlotContext` (checkpoint_names, styles, switch_checkpoint), for the dropdown axes' valid values.
    Checks that need the call's params (Prompt S/R's first value in the prompt, samplers, checkpoints) are
    `xyz_plot.check_plot`'s."""
    if kind not in ("txt2img", "img2img"):
        raise ValueError(f"kind must be 'txt2img' or 'img2img', got {kind!r}.")
    if not isinstance(script_args, (list, tuple)) or len(script_args) > len(ARG_NAMES):
        got = len(script_args) if isinstance(script_args, (list, tuple)) else type(script_args).__name__
        raise ValueError(f"script_args for 'X/Y/Z plot' must be a list of at most {len(ARG_NAMES)} values: "
                         f"[{', '.join(ARG_NAMES)}], got {got}.")
    given = [default if value is None else value for value, default in zip(script_args, ARG_DEFAULTS)]
    values = dict(zip(ARG_NAMES, [*given, *ARG_DEFAULTS[len(given):]]))
    plot_context = PlotContext.of(**{**context, "kind": kind})
    flags = {name: _flag(name, values[name]) for name in ARG_NAMES[9:16] + ("csv_mode",)}
    axes = {}
    for name in ("x", "y", "z"):
        option = find_axis(f"{name}_type", values[f"{name}_type"], kind)
        axes[name] = parse_axis(name, option, values[f"{name}_values"], values[f"{name}_values_dropdown"],
                                csv_mode=flags["csv_mode"], context=plot_context)
    config = XyzConfig(**axes, **flags, margin_size=_margin(values["margin_size"]))
    if config.cell_count > MAX_CELLS:
        raise ValueError(f"script_args: the plot has {len(config.x.values)} x {len(config.y.values)} x "
                         f"{len(config.z.values)} = {config.cell_count} cells, more than {MAX_CELLS}; one plot holds "
                         "the queue until it ends, so split it into smaller plots.")
    return config


def xyz_config(x: tuple[str, str], y: tuple[str, str] | None = None, z: tuple[str, str] | None = None, *,
               kind: str = "txt2img", context: dict | None = None, **options: Any) -> XyzConfig:
    """An `XyzConfig` from (axis label, values text) pairs, for Python callers: `xyz_config(("Steps", "10,20"),
    ("CFG Scale", "5-7 (+1)"), draw_legend=True)`. Options are `XyzConfig`'s fields (A1111's checkbox names)."""
    args = list(ARG_DEFAULTS)
    for index, axis in enumerate((x, y, z)):
        if axis is not None:
            args[index * 3], args[index * 3 + 1] = axis[0], axis[1]
            args[index * 3 + 2] = []
        else:
            args[index * 3] = "Nothing"
    unknown = set(options) - set(ARG_NAMES[9:])
    if unknown:
        raise ValueError(f"unknown X/Y/Z plot option(s) {sorted(unknown)}; valid: {', '.join(ARG_NAMES[9:])}.")
    for name, value in options.items():
        args[ARG_NAMES.index(name)] = value
    return parse_script_args(args, kind, **(context or {}))


def script_args_info(kind: str, **context: Any) -> list[ScriptArg]:
    """The slots as `/sdapi/v1/script-info` describes them; the type slots' choices are A1111's axis list for the
    kind (a client's index counts in it; the ones mixkit refuses are in it too, to keep the indexes)."""
    labels = [axis.label for axis in axes_for(kind)]
    args = []
    for name in ("x", "y", "z"):
        upper = name.upper()
        args += [ScriptArg(f"{upper} type", labels[1] if name == "x" else labels[0], choices=labels),
                 ScriptArg(f"{upper} values", ""), ScriptArg(f"{upper} values", [])]
    args += [ScriptArg("Draw legend", True), ScriptArg("Include Sub Images", False),
             ScriptArg("Include Sub Grids", False), ScriptArg("Keep -1 for seeds", False),
             ScriptArg("Vary seeds for X", False), ScriptArg("Vary seeds for Y", False),
             ScriptArg("Vary seeds for Z", False), ScriptArg("Grid margins (px)", 0, 0, MAX_MARGIN, 2),
             ScriptArg("Use text inputs instead of dropdowns", False)]
    return args
