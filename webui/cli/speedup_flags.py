"""`mixkit generate` / `img2img` flags for HyperTile (A1111's Settings > Hypertile) and FreeU, and their infotext keys.

Both change the image and are recorded in its infotext, so `--infotext` of such an image switches them on again.
The checks are the Python API's (`HyperTile`, `FreeU`); these flags only translate.
"""

from __future__ import annotations

import argparse
from dataclasses import astuple
from typing import Any, Callable

from pipelines.infotext_values import as_flag, as_integer

# argparse destination -> HyperTile field (the size flags stay None unless given, so the defaults are HyperTile's)
_HYPERTILE_FIELDS = {
    "hypertile": "unet", "hypertile_hires": "unet_hires", "hypertile_max_depth": "unet_max_depth",
    "hypertile_max_tile": "unet_max_tile", "hypertile_swap_size": "unet_swap_size", "hypertile_vae": "vae",
    "hypertile_vae_max_depth": "vae_max_depth", "hypertile_vae_max_tile": "vae_max_tile",
    "hypertile_vae_swap_size": "vae_swap_size",
}
_SWITCHES = ("hypertile", "hypertile_hires", "hypertile_vae")


def add_speedup_flags(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("HyperTile and FreeU", "APPROXIMATE / image-changing, per generation; recorded in "
                                                        "the infotext (A1111's 'Hypertile U-Net: True' ...; 'FreeU')")
    group.add_argument("--hypertile", action="store_true", default=None,
                       help="A1111's Hypertile U-Net: self-attention in tiles of at least 128 px, drawn per call from "
                            "the seed (faster for large images; details change)")
    group.add_argument("--hypertile-hires", action="store_true", default=None,
                       help="Hypertile U-Net in the hires fix's second pass only")
    group.add_argument("--hypertile-vae", action="store_true", default=None,
                       help="Hypertile VAE: the VAE decoder's mid-block attention in tiles (minimal change)")
    for flag, default, low, high, what in (("max-depth", 3, 0, 3, "deepest U-Net level tiled"),
                                           ("max-tile", 256, 0, 512, "U-Net tile size cap in px"),
                                           ("swap-size", 3, 1, 64, "U-Net tile layouts drawn from"),
                                           ("vae-max-depth", 3, 0, 3, "VAE max depth (no effect: one level)"),
                                           ("vae-max-tile", 128, 0, 512, "VAE tile size cap in px"),
                                           ("vae-swap-size", 3, 1, 64, "VAE tile layouts drawn from")):
        group.add_argument(f"--hypertile-{flag}", type=int, default=None, metavar="N",
                           help=f"{what}, {low}-{high} (default {default}, A1111's)")
    group.add_argument("--freeu", type=float, nargs=4, default=None, metavar=("B1", "B2", "S1", "S2"),
                       help="FreeU: backbone factors B1 B2, skip factors S1 S2, each in (0, 10] (SD 1.5: 1.5 1.6 0.9 "
                            "0.2; SD 2.1: 1.4 1.6 0.9 0.2; SDXL: 1.3 1.4 0.9 0.2)")


def speedup_params_of(args: argparse.Namespace) -> dict[str, Any]:
    """`hypertile` (None unless a switch is on) and `freeu` params from the flags; sizes without a switch are an error
    (they would do nothing)."""
    from pipelines.approx.hypertile_settings import HyperTile

    given = {field: getattr(args, dest) for dest, field in _HYPERTILE_FIELDS.items()
             if getattr(args, dest, None) is not None}
    hypertile = None
    if any(getattr(args, dest, None) for dest in _SWITCHES):
        try:
            hypertile = HyperTile(**{"unet": False, **given})
        except (TypeError, ValueError) as error:
            raise ValueError(_in_flag_terms(str(error))) from None
    elif given:
        flags = ", ".join(f"--{dest.replace('_', '-')}" for dest, field in _HYPERTILE_FIELDS.items() if field in given)
        raise ValueError(f"{flags} set HyperTile's sizes, but none of --hypertile, --hypertile-hires, --hypertile-vae "
                         "switches it on; add one of them")
    freeu = None
    if getattr(args, "freeu", None) is not None:
        from pipelines.approx.freeu import FreeU

        try:
            freeu = FreeU(*args.freeu)
        except ValueError as error:
            raise ValueError(f"--freeu: {error}") from None
    return {"hypertile": hypertile, "freeu": freeu}


def _in_flag_terms(message: str) -> str:
    for dest, field in sorted(_HYPERTILE_FIELDS.items(), key=lambda item: -len(item[1])):
        message = message.replace(f"HyperTile.{field} ", f"--{dest.replace('_', '-')} ")
    return message


def _freeu_values(text: object) -> list[float]:
    from pipelines.approx.freeu import FreeU

    return list(astuple(FreeU.from_infotext(str(text))))


def _flag_keys() -> dict[str, tuple[str, Callable[[object], Any]]]:
    from pipelines.approx.hypertile_settings import INFOTEXT_KEYS

    keys: dict[str, tuple[str, Callable[[object], Any]]] = {}
    for dest, field in _HYPERTILE_FIELDS.items():
        keys[dest] = (INFOTEXT_KEYS[field], as_flag if dest in _SWITCHES else as_integer)
    keys["freeu"] = ("FreeU", _freeu_values)
    return keys


# argparse destination -> (infotext key, conversion), for `--infotext` (webui.cli.generate_infotext.FLAG_KEYS)
SPEEDUP_FLAG_KEYS = _flag_keys()
