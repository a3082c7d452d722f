"""Selectable scripts (A1111's "Script" dropdown) by title: X/Y/Z plot, SD upscale, and the ones that plug in after.

`find_script("x/y/z plot")` gives a `SelectableScript`; the HTTP API, the web UI and the CLI all run scripts
through it. Register a new script with `register_script` in its own module and import that module here.
"""

from pipelines.scripts import sd_upscale, xyz_plot
from pipelines.scripts.registry import (SCRIPTS, ScriptArg, ScriptResult, SelectableScript, find_script,
                                        is_registered_script, register_script, script_info)

register_script(SelectableScript(
    title=xyz_plot.TITLE, kinds=frozenset({"txt2img", "img2img"}), args=xyz_plot.script_args,
    parse=xyz_plot.parse_script_args, plan=xyz_plot.planned_params, run=xyz_plot.run,
    description="one generation per combination of up to three axes' values, in a labelled grid"))
register_script(SelectableScript(
    title=sd_upscale.TITLE, kinds=frozenset({"img2img"}), args=sd_upscale.script_args,
    parse=sd_upscale.parse_script_args, plan=sd_upscale.planned_params, run=sd_upscale.run,
    description="upscale the init image, img2img every tile of it, blend the tiles back"))

__all__ = ["SCRIPTS", "ScriptArg", "ScriptResult", "SelectableScript", "find_script", "is_registered_script",
           "register_script", "script_info", "sd_upscale", "xyz_plot"]
