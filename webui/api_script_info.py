"""A1111's `GET /sdapi/v1/script-info`: the selectable scripts this server runs and their `script_args`, in order.

Registered scripts (`pipelines.scripts`: X/Y/Z plot, Prompt matrix, Prompts from file or textbox, Loopback, SD
upscale) come first, one entry per kind they run for. Clients that
build a request from it (instead of hard-coding A1111's argument order) read each script's name (A1111's
title, lower-cased, as `/sdapi/v1/scripts` lists it), whether it is always on or an img2img script, and one entry per
`script_args` slot: its label, default value and, for sliders, range and step, for choices the choices. The ranges
are the ones this server accepts (`pipelines.outpaint`, `pipelines.outpaint_mk2`), which for Outpainting mk2's mask
blur is narrower than A1111's slider. Soft Inpainting is listed as A1111 lists it for img2img: always on, its
`enabled` checkbox then its six sliders (`pipelines.soft_inpainting`).
"""

from __future__ import annotations

from typing import Any

from pipelines.matched_noise import MAX_COLOR_VARIATION, MAX_FALLOFF_EXPONENT
from pipelines.outpaint import MAX_EXTENSION, MAX_MASK_BLUR, OUTPAINT_DIRECTIONS
from pipelines.outpaint_mk2 import MAX_MK2_MASK_BLUR
from pipelines.soft_inpainting import SOFT_INPAINTING_FIELDS, SoftInpainting
from webui.api_soft_inpainting import SOFT_INPAINTING_SCRIPT
from webui.api_scripts import MASKED_CONTENT_LABELS, MK2_ARG_DEFAULTS, MK2_SCRIPT, OUTPAINT_SCRIPT, SCRIPT_ARG_DEFAULTS

# Outpainting mk2's first slot: the script's "Recommended settings" HTML note, whose value its run ignores
MK2_NOTE = ("Recommended settings: Sampling Steps: 80-100, Sampler: Euler a, Denoising strength: 0.8")


def _arg(label: str | None, value: Any, minimum=None, maximum=None, step=None, choices=None) -> dict:
    return {"label": label, "value": value, "minimum": minimum, "maximum": maximum, "step": step, "choices": choices}


def soft_inpainting_info() -> dict:
    """Soft Inpainting's ScriptInfo: the "Soft inpainting" checkbox (off), then each slider with A1111's label,
    default, range and step."""
    defaults = SoftInpainting()
    sliders = [_arg(label, getattr(defaults, field), low, high, step)
               for field, _, label, low, high, step in SOFT_INPAINTING_FIELDS]
    return {"name": SOFT_INPAINTING_SCRIPT, "is_alwayson": True, "is_img2img": True,
            "args": [_arg("Soft inpainting", False), *sliders]}


def script_info(**context) -> list[dict]:
    """A1111's ScriptInfo list: the registered scripts (`pipelines.scripts`, one entry per kind they run for;
    `context` as `webui.api_selectable_scripts.script_context`), Poor man's outpainting and Outpainting mk2 (img2img
    scripts, not always on), and Soft Inpainting (img2img, always on)."""
    from pipelines.scripts import script_info as registered_script_info

    pixels, blur, content, directions = SCRIPT_ARG_DEFAULTS
    poor = [_arg("Pixels to expand", pixels, 8, MAX_EXTENSION, 8), _arg("Mask blur", blur, 0, MAX_MASK_BLUR, 1),
            _arg("Masked content", content, choices=list(MASKED_CONTENT_LABELS)),
            _arg("Outpainting direction", list(directions), choices=list(OUTPAINT_DIRECTIONS))]
    _, pixels, blur, directions, falloff, variation = MK2_ARG_DEFAULTS
    mk2 = [_arg(None, MK2_NOTE), _arg("Pixels to expand", pixels, 8, 256, 8),
           _arg("Mask blur", blur, 0, MAX_MK2_MASK_BLUR, 1),
           _arg("Outpainting direction", list(directions), choices=list(OUTPAINT_DIRECTIONS)),
           _arg("Fall-off exponent (lower=higher detail)", falloff, 0.0, MAX_FALLOFF_EXPONENT, 0.01),
           _arg("Color variation", variation, 0.0, MAX_COLOR_VARIATION, 0.01)]
    return [*registered_script_info(**context),
            *({"name": name, "is_alwayson": False, "is_img2img": True, "args": args}
              for name, args in ((OUTPAINT_SCRIPT, poor), (MK2_SCRIPT, mk2))), soft_inpainting_info()]
