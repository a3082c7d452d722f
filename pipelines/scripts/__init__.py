"""Selectable scripts (A1111's "Script" dropdown) by title: X/Y/Z plot, Prompt matrix, Prompts from file or
textbox, Loopback, SD upscale, and the ones that plug in after them.

`find_script("x/y/z plot")` gives a `SelectableScript`; the HTTP API, the web UI and the CLI all run scripts
through it. Register a new script with `register_script` in its own module and import that module here.
"""

from pipelines.scripts import loopback, prompt_matrix, prompts_from_file, sd_upscale, xyz_plot
from pipelines.scripts import xyz_hypertile_axes  # appends A1111's Hypertile axes after its own list
from pipelines.scripts.registry import (SCRIPTS, ScriptArg, ScriptResult, SelectableScript, find_script,
                                        is_registered_script, register_script, script_info)

register_script(SelectableScript(
    title=xyz_plot.TITLE, kinds=frozenset({"txt2img", "img2img"}), args=xyz_plot.script_args,
    parse=xyz_plot.parse_script_args, plan=xyz_plot.planned_params, run=xyz_plot.run,
    description="one generation per combination of up to three axes' values, in a labelled grid",
    describe_call=xyz_plot.describe_cell))
register_script(SelectableScript(
    title=prompt_matrix.TITLE, kinds=frozenset({"txt2img", "img2img"}), args=prompt_matrix.script_args,
    parse=prompt_matrix.parse_script_args, plan=prompt_matrix.planned_params, run=prompt_matrix.run,
    description="one image per combination of the prompt's '|' parts, in a grid labelled with the parts"))
register_script(SelectableScript(
    title=prompts_from_file.TITLE, kinds=frozenset({"txt2img", "img2img"}), args=prompts_from_file.script_args,
    parse=prompts_from_file.parse_script_args, plan=prompts_from_file.planned_params, run=prompts_from_file.run,
    description="one job per line of a list: a prompt, or A1111's --prompt/--steps/... options",
    describe_call=prompts_from_file.describe_line))

register_script(SelectableScript(
    title=loopback.TITLE, kinds=frozenset({"img2img"}), args=loopback.script_args,
    parse=loopback.parse_script_args, plan=loopback.planned_params, run=loopback.run,
    description="img2img again and again, each output the next init image, at a scheduled denoising strength"))
register_script(SelectableScript(
    title=sd_upscale.TITLE, kinds=frozenset({"img2img"}), args=sd_upscale.script_args,
    parse=sd_upscale.parse_script_args, plan=sd_upscale.planned_params, run=sd_upscale.run,
    description="upscale the init image, img2img every tile of it, blend the tiles back"))

__all__ = ["SCRIPTS", "ScriptArg", "ScriptResult", "SelectableScript", "find_script", "is_registered_script",
           "register_script", "script_info", "loopback", "prompt_matrix", "prompts_from_file", "sd_upscale",
           "xyz_hypertile_axes",
           "xyz_plot"]
