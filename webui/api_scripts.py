"""`/sdapi/v1/img2img` with `script_name: "Poor man's outpainting"` or `"Outpainting mk2"`: A1111's selectable
outpainting scripts, run by `pipelines.outpaint` / `pipelines.outpaint_mk2` through the server's outpaint job (the one
the web UI's outpaint mode queues).

A1111 finds a script by its title, case-insensitively (`script_name_to_index`), and passes `script_args` in the
order of its `ui()`: pixels to expand (128), mask blur (4), masked content as the radio's index (0 fill, 1 original,
2 latent noise, 3 latent nothing; default 0) and the directions (all four); args left out take those defaults, as
A1111 fills them from the script's UI defaults. As A1111's script, the run sets the mask, the doubled mask blur, the
masked content and whole-picture inpainting itself and makes one image (batch size and count 1). Unlike A1111,
which rounds every axis up to 64 and paints the canvas in request-sized tiles, the canvas grows on the extended axes
only, to the next multiple of 8 (`pipelines.outpaint.outpaint_sides`), and is painted in one pass.

Outpainting mk2's `script_args` follow its `ui()` too: a first slot for its "Recommended settings" note (an HTML
component, whose value A1111's `run` ignores as `_`; any value is taken), pixels to expand (128; 8-256), mask blur (8;
0-32 here, see `pipelines.outpaint_mk2`), the directions (all four), the fall-off exponent (1.0; 0-4) and the colour
variation (0.05; 0-1). As A1111's mk2, it paints from masked content "original" and honours batch size and count.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mixkit.finite_numbers import is_finite_number


OUTPAINT_SCRIPT = "poor man's outpainting"  # A1111's title, lower-cased as /sdapi/v1/scripts lists it
# A1111's ui() order and defaults: pixels, mask_blur, inpainting_fill (radio index), direction
SCRIPT_ARG_DEFAULTS = (128, 4, 0, ["left", "right", "up", "down"])
MASKED_CONTENT_LABELS = ("fill", "original", "latent noise", "latent nothing")  # the script's radio, in index order


MK2_SCRIPT = "outpainting mk2"  # A1111's title, lower-cased
# its ui() order and defaults: the note's slot, pixels, mask_blur, direction, noise_q (fall-off), color_variation
MK2_ARG_DEFAULTS = (None, 128, 8, ["left", "right", "up", "down"], 1.0, 0.05)
MK2_ARG_NAMES = ("info", "pixels", "mask_blur", "direction", "falloff_exponent", "color_variation")


def is_outpaint_script(script_name: Any) -> bool:
    """Poor man's outpainting, by A1111's title in any case."""
    return isinstance(script_name, str) and script_name.strip().lower() == OUTPAINT_SCRIPT


def is_mk2_script(script_name: Any) -> bool:
    """Outpainting mk2, by A1111's title in any case."""
    return isinstance(script_name, str) and script_name.strip().lower() == MK2_SCRIPT


def _whole_number(name: str, value: Any) -> int:
    """An int, or a float with no fraction (a Gradio slider's value arrives as 128.0); ValueError naming the arg.

    NaN and Infinity (JSON from Python's json module) are refused here too, before `int()` would raise its own
    ValueError or OverflowError (a 500)."""
    if not is_finite_number(value) or value != int(value):
        raise ValueError(f"script_args {name}: must be a whole number, got {value!r}.")
    return int(value)


def _number(name: str, value: Any) -> float:
    """A finite int or float; ValueError naming the arg."""
    if not is_finite_number(value):
        raise ValueError(f"script_args {name}: must be a number, got {value!r}.")
    return float(value)


def _directions(direction: Any) -> list:
    if not isinstance(direction, list) or not all(isinstance(side, str) for side in direction):
        raise ValueError(f"script_args direction must be a list of 'left', 'right', 'up', 'down', got {direction!r}.")
    return direction


def _refuse_controlnet(params, title: str) -> None:
    if getattr(params, "controlnets", None) or getattr(params, "ip_adapter", None):
        raise ValueError(f"script_name {title!r} cannot be combined with ControlNet or IP-Adapter units; send them "
                         "without the script.")


def outpaint_script_params(params, script_args: list) -> tuple[Any, dict[str, int]]:
    """(params to run, pixels per side) for the script's args on the request's checked `params`.

    Raises ValueError naming the bad arg; the sides and the size are checked by `pipelines.outpaint`'s own checks
    (`submit_outpaint` checks the extended size against the limits before anything is queued)."""
    from pipelines.outpaint import check_outpaint_inputs, outpaint_sides

    if not isinstance(script_args, list) or len(script_args) > len(SCRIPT_ARG_DEFAULTS):
        raise ValueError(f"script_args for {OUTPAINT_SCRIPT!r} must be a list of at most {len(SCRIPT_ARG_DEFAULTS)} "
                         "values: [pixels, mask_blur, inpainting_fill, direction], got "
                         f"{len(script_args) if isinstance(script_args, list) else type(script_args).__name__}.")
    pixels, mask_blur, fill, direction = [*script_args, *SCRIPT_ARG_DEFAULTS[len(script_args):]]
    pixels, mask_blur, fill = (_whole_number(name, value) for name, value in
                               (("pixels", pixels), ("mask_blur", mask_blur), ("inpainting_fill", fill)))
    if not 0 <= fill < len(MASKED_CONTENT_LABELS):
        raise ValueError(f"script_args inpainting_fill must be 0-3 ({', '.join(MASKED_CONTENT_LABELS)}), got {fill}.")
    _directions(direction)
    _refuse_controlnet(params, OUTPAINT_SCRIPT)
    image = params.init_images[0]
    try:
        sides = outpaint_sides(image.width, image.height, pixels, direction, 8)
        check_outpaint_inputs(image, **sides, multiple=8, mask_blur=mask_blur)
    except ValueError as error:
        raise ValueError(f"script_args: {error}") from None
    return replace(params, init_images=[image], mask=None, latent_mask=None, mask_blur=mask_blur, mask_blur_x=None,
                   mask_blur_y=None, inpainting_fill=MASKED_CONTENT_LABELS[fill], inpaint_full_res=False,
                   batch_size=1, batch_count=1), sides


def mk2_script_params(params, script_args: list) -> tuple[Any, dict[str, int], dict[str, float]]:
    """(params to run, pixels per side, fill settings for `outpaint_mk2`) for Outpainting mk2's args on the request's
    checked `params`; ValueError naming the bad arg. The mask blur travels in `params.mask_blur`."""
    from pipelines.outpaint import check_outpaint_inputs
    from pipelines.outpaint_mk2 import check_mk2_settings, mk2_sides

    if not isinstance(script_args, list) or len(script_args) > len(MK2_ARG_DEFAULTS):
        raise ValueError(f"script_args for {MK2_SCRIPT!r} must be a list of at most {len(MK2_ARG_DEFAULTS)} values: "
                         f"[{', '.join(MK2_ARG_NAMES)}], got "
                         f"{len(script_args) if isinstance(script_args, list) else type(script_args).__name__}.")
    _, pixels, mask_blur, direction, falloff, variation = [*script_args, *MK2_ARG_DEFAULTS[len(script_args):]]
    pixels, mask_blur = _whole_number("pixels", pixels), _whole_number("mask_blur", mask_blur)
    fill = {"falloff_exponent": _number("falloff_exponent", falloff),
            "color_variation": _number("color_variation", variation)}
    direction = _directions(direction)
    _refuse_controlnet(params, MK2_SCRIPT)
    image = params.init_images[0]
    try:
        check_mk2_settings(mask_blur, **fill)
        sides = mk2_sides(image.width, image.height, pixels, direction, 8)
        check_outpaint_inputs(image, **sides, multiple=8)
    except ValueError as error:
        raise ValueError(f"script_args: {error}") from None
    return replace(params, init_images=[image], mask=None, latent_mask=None, mask_blur=mask_blur, mask_blur_x=None,
                   mask_blur_y=None, inpainting_fill="original", inpaint_full_res=False), sides, fill
