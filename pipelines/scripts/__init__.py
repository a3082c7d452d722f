"""Selectable scripts (A1111's "Script" dropdown) by title: X/Y/Z plot, Loopback, and the ones that plug in after them.

`find_script("x/y/z plot")` gives a `SelectableScript`; the HTTP API, the web UI and the CLI all run scripts
through it. Register a new script with `register_script` in its own module and import that module here.
"""

from pipelines.scripts import loopback, xyz_plot
from pipelines.scripts.registry import (SCRIPTS, ScriptArg, ScriptResult, SelectableScript, find_script,
                                        is_registered_script, register_script, script_info)

register_script(SelectableScript(
    title=xyz_plot.TITLE, kinds=frozenset({"txt2img", "img2img"}), args=xyz_plot.script_args,
    parse=xyz_plot.parse_script_args, plan=xyz_plot.planned_params, run=xyz_plot.run,
    description="one generation per combination of up to three axes' values, in a labelled grid"))

register_script(SelectableScript(
    title=loopback.TITLE, kinds=frozenset({"img2img"}), args=loopback.script_args,
    parse=loopback.parse_script_args, plan=loopback.planned_params, run=loopback.run,
    description="img2img again and again, each output the next init image, at a scheduled denoising strength"))

__all__ = ["SCRIPTS", "ScriptArg", "ScriptResult", "SelectableScript", "find_script", "is_registered_script",
           "register_script", "script_info", "loopback", "xyz_plot"]
