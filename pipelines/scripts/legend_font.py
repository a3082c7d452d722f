"""The font the scripts that draw labelled grids (X/Y/Z plot, Prompt matrix) draw their legends in.

It is A1111's `font` option (Settings > Saving images/grids), passed in the scripts' context under that key: the
server passes its option, the CLI its `--grid-font`, Python callers `run(..., font="/path/to/font.ttf")`. None or ""
is automatic (`pipelines.grid_fonts`). Checked when the run starts, so a font file that went missing fails the job
before its first generation, not after the last one.
"""

from __future__ import annotations

from typing import Any

from pipelines.grid_fonts import OPTION_NAME, check_font


def legend_font(context: dict[str, Any]) -> str | None:
    """The checked font path in a script's context (None: automatic); ValueError naming the path."""
    return check_font(context.get(OPTION_NAME))
