"""`mixkit outpaint --infotext IMAGE_OR_TEXT`: an infotext's settings for an outpaint, as A1111's "Send to img2img"
pastes them before its outpainting script runs.

`mixkit generate --infotext` does the reading and the common keys (webui.cli.generate_infotext); this adds the keys an
outpaint takes: Denoising strength, Mask blur and, for Poor man's outpainting, Masked content. The infotext's Mask
blur is the one its inpainting pass ran with, which the scripts set from their own control (twice it for Poor man's,
four times for mk2, as A1111 records it); it is divided back, so an outpaint's own PNG reproduces its run. `Size` is
not taken: an outpaint's size is IMAGE's plus the border.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

from pipelines.infotext_values import as_integer, as_number, as_text

BLUR_FACTORS = {"poor": 2, "mk2": 4}  # the pass's mask blur / the script's, as A1111's scripts set it
# img2img keys an outpaint has no control for (the scripts set the mask and the whole-picture area themselves)
NOT_OUTPAINT_KEYS = ("Mask mode", "Inpaint area", "Masked area padding", "Noise multiplier", "Extra noise",
                     "Conditional mask weight")


def script_mask_blur(factor: int) -> Callable[[object], int]:
    """The conversion of an infotext's Mask blur to the script's own, refusing a value the factor does not divide."""
    def convert(text: object) -> int:
        value = as_integer(text)
        if value % factor:
            raise ValueError(value)
        return value // factor
    return convert


class OutpaintInfotextKeys:
    """What `webui.cli.generate_infotext.apply_infotext` fills and leaves unused for `mixkit outpaint`."""

    @staticmethod
    def flag_keys(args: argparse.Namespace) -> dict[str, tuple[str, Callable[[object], Any]]]:
        keys = {"denoising_strength": ("Denoising strength", as_number),
                "mask_blur": ("Mask blur", script_mask_blur(BLUR_FACTORS[args.method]))}
        if args.method == "poor":
            keys["masked_content"] = ("Masked content", as_text)  # checked by check_img2img_params
        return keys

    @staticmethod
    def unused(args: argparse.Namespace, written: dict[str, object]) -> dict[str, str]:
        """Infotext key -> why this run leaves it unused (the warning's wording)."""
        from webui.cli.generate_infotext import HIRES_KEYS

        why = {key: " (outpainting has no hires fix)" for key in HIRES_KEYS}
        why.update({key: " (not an outpainting setting)" for key in NOT_OUTPAINT_KEYS})
        if args.method == "mk2":
            why["Masked content"] = " (Outpainting mk2 always paints from 'original')"
        return {key: reason for key, reason in why.items() if key in written}
