"""Selectable scripts (A1111's "Script" dropdown) by title: X/Y/Z plot, and the ones that plug in after it.

`find_script("x/y/z plot")` gives a `SelectableScript`; the HTTP API, the web UI and the CLI all run scripts
through it. Register a new script with `register_script` in its own module and import that module here.
"""

from pipelines.scripts import xyz_plot
from pipelines.scripts.registry import (SCRIPTS, ScriptArg, ScriptResult, SelectableScript, find_script,
                                        is_registered_script, register_script, script_info)

register_script(SelectableScript(
    title=xyz_plot.TITLE, kinds=frozenset({"txt2img", "img2img"}), args=xyz_plot.script_args,
    parse=xyz_plot.parse_script_args, plan=xyz_plot.planned_params, run=xyz_plot.run,
    description="one generation per combination of up to three axes' values, in a labelled grid"))

__all__ = ["SCRIPTS", "ScriptArg", "ScriptResult", "SelectableScript", "find_script", "is_registered_script",
           "register_script", "script_info", "xyz_plot"]
