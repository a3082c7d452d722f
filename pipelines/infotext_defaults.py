"""The values A1111 assumes for keys an infotext leaves out.

A1111 omits a key when its setting has the default value (no "Clip skip" means clip skip 1) and
older versions never wrote newer keys, so a reader must fill them in to reproduce an image.
The defaults and the old hires-fix conversion follow A1111's `parse_generation_parameters`.
"""

from __future__ import annotations

import math

from pipelines.infotext_samplers import AUTOMATIC_SCHEDULE, split_sampler_name

# (key, value) in the order A1111 adds them; values keep A1111's types (str or int).
A1111_DEFAULTS: tuple[tuple[str, object], ...] = (
    ("Hires sampler", "Use same sampler"),
    ("Hires checkpoint", "Use same checkpoint"),
    ("Hires prompt", ""),
    ("Hires negative prompt", ""),
    ("Mask mode", "Inpaint masked"),
    ("Masked content", "original"),
    ("Inpaint area", "Whole picture"),
    ("Masked area padding", 32),
)
A1111_LATE_DEFAULTS: tuple[tuple[str, object], ...] = (
    ("Schedule max sigma", 0),
    ("Schedule min sigma", 0),
    ("Schedule rho", 0),
    ("VAE Encoder", "Full"),
    ("VAE Decoder", "Full"),
    ("FP8 weight", "Disable"),
)


def apply_a1111_defaults(params: dict[str, object]) -> None:
    """Fill in, in place, the keys A1111 assumes when an infotext does not mention them (in A1111's order)."""
    params.setdefault("Clip skip", "1")
    hypernet = params.get("Hypernet")
    if hypernet is not None:
        # Infotexts from before hypernetworks became an extra network name them in a key; A1111
        # turns that back into the prompt syntax that loads them.
        params["Prompt"] = f"{params['Prompt']}<hypernet:{hypernet}:{params.get('Hypernet strength', '1.0')}>"
    if "Hires resize-1" not in params:
        params["Hires resize-1"] = 0
        params["Hires resize-2"] = 0
    for key, value in A1111_DEFAULTS:
        params.setdefault(key, value)
    restore_old_hires_fix_sizes(params)
    params.setdefault("RNG", "GPU")
    if "Schedule type" not in params:
        # A1111 writes "Automatic" here; its paste handler then takes the schedule from an old-style
        # sampler name ("DPM++ 2M Karras"). We record that effective schedule directly.
        sampler = params.get("Sampler")
        suffix = split_sampler_name(sampler)[1] if isinstance(sampler, str) else None
        params["Schedule type"] = suffix or AUTOMATIC_SCHEDULE
    for key, value in A1111_LATE_DEFAULTS:
        params.setdefault(key, value)
    if params["FP8 weight"] != "Disable":
        params.setdefault("Cache FP16 weight for LoRA", False)


def old_hires_fix_first_pass_size(width: int, height: int) -> tuple[int, int]:
    """First-pass size the pre-1.0 hires fix chose: about 512x512 pixels, rounded up to multiples of 64."""
    scale = math.sqrt(512 * 512 / (width * height))
    return math.ceil(scale * width / 64) * 64, math.ceil(scale * height / 64) * 64


def restore_old_hires_fix_sizes(params: dict[str, object]) -> None:
    """Convert an old "First pass size" infotext into today's Size (first pass) + Hires resize (final).

    Old hires-fix infotexts wrote the final size in "Size" and the first pass separately; 0x0
    meant "choose automatically". A1111's default (`use_old_hires_fix_width_height` off) is used.
    """
    first_width, first_height = params.get("First pass size-1"), params.get("First pass size-2")
    if first_width is None or first_height is None:
        return
    first_width, first_height = int(first_width), int(first_height)
    width, height = int(params.get("Size-1", 512)), int(params.get("Size-2", 512))
    if first_width == 0 or first_height == 0:
        first_width, first_height = old_hires_fix_first_pass_size(width, height)
    params["Size-1"], params["Size-2"] = first_width, first_height
    params["Hires resize-1"], params["Hires resize-2"] = width, height
