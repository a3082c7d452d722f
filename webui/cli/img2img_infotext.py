"""`mixkit img2img --infotext IMAGE_OR_TEXT`: an infotext's settings, as A1111's "Send to img2img" / "Send to inpaint"
pastes them.

`mixkit generate --infotext` does the reading and the common keys (webui.cli.generate_infotext); this adds the keys
A1111's img2img tab takes from it: Denoising strength, the img2img noise settings, Conditional mask weight and, with
--mask, the inpaint controls (Mask blur, Mask mode, Masked content, Inpaint area, Masked area padding, the Soft
inpainting accordion). As in A1111, a txt2img infotext is welcome too: its hires-fix keys are named in the warning as
unused (img2img has no hires fix), and its `Size` sets --width / --height. Inpaint keys without --mask are named there
as unused as well.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

from pipelines.infotext_values import as_integer, as_number, as_text
from webui.cli.soft_inpainting_flags import SOFT_INPAINTING_INFOTEXT_KEYS

# A1111's radio labels, as its infotext writes them (webui.api_infotext reads the same ones for the API)
MASK_MODES = ("Inpaint masked", "Inpaint not masked")
INPAINT_AREAS = ("Whole picture", "Only masked")


def _label_is(labels: tuple[str, str]) -> Callable[[object], bool]:
    """A conversion of a two-label radio's infotext value to the flag that picks its second label."""
    def convert(text: object) -> bool:
        value = str(text).strip()
        if value not in labels:
            raise ValueError(value)
        return value == labels[1]
    return convert


# argparse destination -> (infotext key, conversion): the img2img keys every run takes ...
IMG2IMG_KEYS: dict[str, tuple[str, Callable[[object], Any]]] = {
    "denoising_strength": ("Denoising strength", as_number),
    "image_cfg_scale": ("Image CFG scale", as_number),  # instruct-pix2pix checkpoints only
    "noise_multiplier": ("Noise multiplier", as_number),
    "extra_noise": ("Extra noise", as_number),
    "inpainting_mask_weight": ("Conditional mask weight", as_number),  # inpainting checkpoints, masked or not
}
# ... and those only an inpaint run (--mask) uses
INPAINT_KEYS: dict[str, tuple[str, Callable[[object], Any]]] = {
    "mask_blur": ("Mask blur", as_integer),
    "inpaint_not_masked": ("Mask mode", _label_is(MASK_MODES)),
    "masked_content": ("Masked content", as_text),  # checked (and its spelling normalised) by check_img2img_params
    "only_masked": ("Inpaint area", _label_is(INPAINT_AREAS)),
    "only_masked_padding": ("Masked area padding", as_integer),
    **SOFT_INPAINTING_INFOTEXT_KEYS,  # A1111's Soft inpainting accordion sits in the inpaint section
}


def inpainting(args: argparse.Namespace) -> bool:
    """The run inpaints: --mask, or a batch's --mask-dir."""
    return args.mask is not None or getattr(args, "mask_dir", None) is not None


class Img2ImgInfotextKeys:
    """What `webui.cli.generate_infotext.apply_infotext` fills and leaves unused for `mixkit img2img`."""

    @staticmethod
    def flag_keys(args: argparse.Namespace) -> dict[str, tuple[str, Callable[[object], Any]]]:
        return {**IMG2IMG_KEYS, **(INPAINT_KEYS if inpainting(args) else {})}

    @staticmethod
    def unused(args: argparse.Namespace, written: dict[str, object]) -> dict[str, str]:
        """Infotext key -> why this run leaves it unused (the warning's wording)."""
        from webui.cli.generate_infotext import HIRES_KEYS

        why = {key: " (img2img has no hires fix)" for key in HIRES_KEYS}
        if not inpainting(args):
            why.update({key: " (an inpaint setting; give --mask to inpaint)" for key, _ in INPAINT_KEYS.values()})
        return {key: reason for key, reason in why.items() if key in written}
