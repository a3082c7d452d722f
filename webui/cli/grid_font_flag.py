"""`--grid-font PATH` for `mixkit generate` and `mixkit img2img`: the font file X/Y/Z plot and Prompt matrix draw their
legends in, as A1111's `font` setting (and `mixkit webui`'s `font` option) chooses it. Without it each label is drawn
in Pillow's font, or in a system font that has its glyphs (`pipelines.grid_fonts`). Checked with the script's plan,
before the model loads."""

from __future__ import annotations

import argparse

FLAG = "--grid-font"


def add_grid_font_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(FLAG, default=None, metavar="PATH",
                   help="font file (.ttf, .otf, .ttc) for the labels of --xyz-x/y/z and --prompt-matrix grids, as "
                        "A1111's font setting (default: Pillow's font, or a system font such as DejaVu Sans or "
                        "Noto Sans CJK for labels with characters it lacks)")


def grid_font_context(args: argparse.Namespace) -> dict:
    """The scripts' context key for the flag ({} without it: automatic); ValueError naming the flag and the path."""
    from pipelines.grid_fonts import OPTION_NAME, check_font

    font = check_font(getattr(args, "grid_font", None), FLAG)
    return {} if font is None else {OPTION_NAME: font}
