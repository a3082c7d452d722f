"""`mixkit generate --hires ...`: A1111's txt2img "Hires. fix" flags, and their keys in a pasted infotext.

Each flag is a field of `pipelines.hires.HiresParams` under A1111's API name (`hr_scale`, `hr_resize_x` ...), checked
by `check_hires_params` before the model loads. Hires fix runs when `--hires` or any `--hr-*` flag is given, as
A1111's "Send to txt2img" ticks the Hires. fix box for an infotext with `Denoising strength` and a hires key.
"""

from __future__ import annotations

import argparse
from typing import Any

from pipelines.infotext_values import as_integer, as_number, as_text

# argparse destination -> (HiresParams field, infotext key, conversion of the infotext's value)
HIRES_FLAGS: dict[str, tuple[str, str, Any]] = {
    "hr_scale": ("hr_scale", "Hires upscale", as_number),
    "hr_resize_x": ("hr_resize_x", "Hires resize-1", as_integer),
    "hr_resize_y": ("hr_resize_y", "Hires resize-2", as_integer),
    "hr_upscaler": ("hr_upscaler", "Hires upscaler", as_text),
    "hr_steps": ("hr_second_pass_steps", "Hires steps", as_integer),
    "denoising_strength": ("denoising_strength", "Denoising strength", as_number),
    "hr_prompt": ("hr_prompt", "Hires prompt", as_text),
    "hr_negative": ("hr_negative_prompt", "Hires negative prompt", as_text),
    "hr_sampler": ("hr_sampler", "Hires sampler", as_text),
    "hr_schedule_type": ("hr_schedule_type", "Hires schedule type", as_text),
    "hr_tome": ("token_merging_ratio_hr", "Token merging ratio hr", as_number),  # A1111's token_merging_ratio_hr
}
# argparse destination -> (infotext key, conversion), as `webui.cli.generate_infotext.FLAG_KEYS`
HIRES_INFOTEXT_KEYS = {dest: (key, convert) for dest, (_, key, convert) in HIRES_FLAGS.items()}
# A1111's paste turns Hires. fix on for `Denoising strength` with one of these (generation_parameters_copypaste)
HIRES_MARKER_KEYS = ("Hires upscale", "Hires upscaler", "Hires resize-1")


def add_hires_flags(p: argparse.ArgumentParser) -> None:
    from pipelines.hires import HiresParams, hires_upscaler_names

    d = HiresParams()
    g = p.add_argument_group("hires fix", "A1111's Hires. fix: generate, upscale, then redraw at the larger size "
                                          "(on with --hires or any --hr-* flag)")
    g.add_argument("--hires", action="store_true", help="run hires fix with the defaults of the flags below")
    g.add_argument("--hr-scale", type=float, default=None, metavar="X",
                   help=f"upscale the first pass by X (1-8; default {d.hr_scale})")
    g.add_argument("--hr-resize-x", type=int, default=None, metavar="PIXELS",
                   help="resize the width to PIXELS instead of --hr-scale (0: follow --hr-resize-y's ratio)")
    g.add_argument("--hr-resize-y", type=int, default=None, metavar="PIXELS",
                   help="resize the height to PIXELS instead of --hr-scale (both given: cover and crop, as A1111)")
    g.add_argument("--hr-upscaler", default=None, metavar="NAME",
                   help=f"{', '.join(hires_upscaler_names())}, or the file name (without extension) of a model in "
                        f"--esrgan-models-path / --realesrgan-models-path / --swinir-models-path / --dat-models-path "
                        f"/ --scunet-models-path (default: {d.hr_upscaler})")
    from webui.cli.extras import add_upscaler_flags

    add_upscaler_flags(g)
    g.add_argument("--hr-steps", type=int, default=None, metavar="N",
                   help="steps of the second pass (default 0: as many as --steps)")
    g.add_argument("--denoising-strength", type=float, default=None, metavar="STRENGTH",
                   help=f"how much the second pass redraws, 0-1 (default {d.denoising_strength})")
    g.add_argument("--hr-prompt", default=None, metavar="PROMPT", help="the second pass's prompt (default: the prompt)")
    g.add_argument("--hr-negative", default=None, metavar="PROMPT",
                   help="the second pass's negative prompt (default: --negative)")
    g.add_argument("--hr-sampler", default=None, metavar="NAME",
                   help="the second pass's sampler, any name --sampler takes (default: --sampler's; "
                        "'Use same sampler' also means that)")
    g.add_argument("--hr-schedule-type", default=None, metavar="NAME",
                   help="the second pass's schedule type, any name --schedule-type takes (default: --schedule-type's; "
                        "'Use same scheduler' also means that)")
    g.add_argument("--hr-tome", type=float, default=None, metavar="R",
                   help="merge R (0-0.75) of the self-attention tokens in the second pass only, as A1111's 'Token "
                        "merging ratio for high-res pass' (approximate, faster; default 0: as the first pass, see "
                        "--tome); infotext 'Token merging ratio hr'")


def hires_requested(args: argparse.Namespace) -> bool:
    """--hires or any --hr-* flag (from the command line or a hires infotext) turns hires fix on."""
    return bool(args.hires) or any(getattr(args, dest) is not None for dest in HIRES_FLAGS
                                   if dest != "denoising_strength")


def hires_fields(args: argparse.Namespace) -> dict[str, Any] | None:
    """The HiresParams fields the hires flags set (A1111's defaults for those not given), None without hires fix;
    a --denoising-strength without it is refused: txt2img has nothing to redraw."""
    if not hires_requested(args):
        if args.denoising_strength is not None:
            raise ValueError("--denoising-strength sets how much hires fix's second pass redraws; add --hires (or an "
                             "--hr-* flag), or use `mixkit img2img IMAGE` to redraw an image")
        return None
    from pipelines.hires_sampler import hires_sampler_choice

    fields = {field: getattr(args, dest) for dest, (field, _, _) in HIRES_FLAGS.items()
              if getattr(args, dest) is not None}
    # A1111's "Use same sampler" / "Use same scheduler" (and "") are the first pass's: HiresParams' None
    sampler, schedule = hires_sampler_choice(fields.pop("hr_sampler", None), fields.pop("hr_schedule_type", None))
    return {**fields, **({"hr_sampler": sampler} if sampler else {}),
            **({"hr_schedule_type": schedule} if schedule else {})}


def is_hires_infotext(written: dict[str, object]) -> bool:
    """The infotext is a hires-fix image's, as A1111's paste decides it."""
    return "Denoising strength" in written and any(key in written for key in HIRES_MARKER_KEYS)
