"""`mixkit img2img` with one of A1111's img2img scripts: Loopback (`--loopback`), X/Y/Z plot (`--xyz-x/y/z`),
Prompt matrix (`--prompt-matrix`), Prompts from file or textbox (`--prompts-from-file`) or SD upscale
(`--sd-upscale`, webui.cli.sd_upscale_flags).

The flags are `mixkit generate`'s for the three shared scripts (webui.cli.xyz_flags, webui.cli.prompt_script_flags)
and webui.cli.loopback_flags' for Loopback. As A1111 (and the API) one script runs per generation, without ControlNet
units: on IMAGE, or with --input-dir on every image of the folder in turn (A1111's img2img Batch runs the chosen script
for each input; webui.cli.img2img_batch_scripts). Every choice is checked, with every call the script will make,
before the model loads, and the script writes its grid(s) and images into the -o folder.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class Img2ImgScript:
    """The script the flags chose: its flag (for errors), its module and checked config, and for Loopback the
    interrogators its "Append interrogated prompt" uses."""

    flag: str
    module: Any
    config: Any
    interrogate: Callable | None = None
    deepbooru: Callable | None = None
    model: Any = None  # an X/Y/Z plot's `webui.cli.xyz_model.CliPlotModel`

    @property
    def several_files(self) -> bool:
        """Whether the script writes grids and several images (an -o .png name is refused); SD upscale writes one
        picture per batch count, so a file name works for it."""
        return self.flag != "--sd-upscale"

    def check(self, params, check: Callable, args: argparse.Namespace) -> int:
        """The script's plan on the command's params, and `check` (the command's limits) on every call it makes;
        returns how many images the plan generates (what --max-script-images counts)."""
        from webui.cli.script_image_cap import script_image_context

        cap = script_image_context(args)  # --max-script-images, for every script
        if self.flag == "--sd-upscale":
            from webui.cli.sd_upscale_flags import check_sd_upscale_run

            return check_sd_upscale_run(params, self.config, **cap)
        if self.flag == "--loopback":
            from dataclasses import replace

            from pipelines.scripts.loopback import planned_params
            from webui.cli.loopback_flags import cli_deepbooru, cli_interrogator

            # built once: a batch checks every input with the same interrogator, which keeps its CLIP loaded
            if self.config.append_interrogation == "CLIP" and self.interrogate is None:
                self.interrogate = cli_interrogator(args, args.device)
            if self.config.append_interrogation == "DeepBooru" and self.deepbooru is None:
                self.deepbooru = cli_deepbooru(args, args.device)
            for loop in planned_params(params, self.config, interrogate=self.interrogate, deepbooru=self.deepbooru,
                                       **cap):
                check(replace(loop))
            return self.config.loops * params.batch_count  # one image per loop of each batch (`check_loop_images`)
        if self.flag == "--xyz-x/y/z":
            from webui.cli.xyz_flags import check_xyz_plot

            from webui.cli.grid_font_flag import grid_font_context

            return check_xyz_plot(self.config, params, kind="img2img", check=check, model=self.model, **cap,
                                  **grid_font_context(args))
        from webui.cli.prompt_script_flags import check_prompt_script

        return check_prompt_script(self.module, self.config, params, check, args)

    def load_models(self) -> None:
        """The script's own models loaded now, after every check and before the checkpoint loads (Loopback's
        "Append interrogated prompt" CLIP, captioner or DeepBooru tagger): one that cannot load is one error naming
        its flag, before any image is generated or file written."""
        if self.flag == "--loopback":
            from webui.cli.loopback_flags import load_interrogation_models

            load_interrogation_models(self.interrogate, self.deepbooru)

    def run(self, pipe, params, output, args: argparse.Namespace, writing=None, output_is_file: bool = False,
            save: Callable | None = None) -> int:
        """Run the script with a progress bar and Ctrl-C as Interrupt; write its grid(s) then its images, or hand the
        result to `save(result) -> paths` (the img2img batch names them after the input)."""
        from webui.cli.script_image_cap import script_image_context

        cap = script_image_context(args)  # the run checks its plan again, with the same cap
        if self.flag == "--sd-upscale":
            from webui.cli.sd_upscale_flags import run_sd_upscale

            return run_sd_upscale(pipe, params, self.config, output, output_is_file, writing, save=save, **cap)
        if self.flag == "--loopback":
            from webui.cli.loopback_flags import run_loopback

            return run_loopback(pipe, params, self.config, output, writing, self.interrogate, self.deepbooru,
                                save=save, **cap)
        if self.flag == "--xyz-x/y/z":
            from webui.cli.xyz_flags import run_xyz_plot

            from webui.cli.grid_font_flag import grid_font_context

            return run_xyz_plot(pipe, params, self.config, output, writing, kind="img2img", save=save, model=self.model,
                                **cap, **grid_font_context(args))
        from webui.cli.prompt_script_flags import run_prompt_script

        return run_prompt_script(self.module, self.config, pipe, params, output, args, writing, save=save)


def img2img_script_of(args: argparse.Namespace) -> Img2ImgScript | None:
    """The script the flags ask for, its settings checked (ValueError naming the flag), or None; two scripts are
    refused. With --input-dir the script runs on every input (`webui.cli.img2img_batch_scripts`)."""
    from pipelines.scripts import loopback, xyz_plot
    from webui.cli.loopback_flags import loopback_config_of
    from webui.cli.prompt_script_flags import prompt_script_of
    from webui.cli.xyz_flags import xyz_config_of, xyz_requested

    from webui.cli.sd_upscale_flags import sd_upscale_config_of, sd_upscale_requested
    from webui.cli.xyz_model import cli_plot_model

    plotted = xyz_requested(args)
    plot_model = cli_plot_model(args)  # --vae-dir without a plot: refused
    prompts = prompt_script_of(args, plotted)  # refuses two of these three itself
    loops = loopback_config_of(args)
    upscaling = sd_upscale_requested(args)
    chosen = ["--loopback"] * (loops is not None) + ([] if prompts is None and not plotted else [
        "--xyz-x/y/z" if plotted else "--prompt-matrix" if args.prompt_matrix else "--prompts-from-file"])
    chosen += ["--sd-upscale"] * upscaling
    if len(chosen) > 1:
        raise ValueError(f"{chosen[0]} and {chosen[1]} are two scripts; A1111 runs one script per generation, so give "
                         "one.")
    if upscaling:
        from pipelines.scripts import sd_upscale

        return Img2ImgScript("--sd-upscale", sd_upscale, sd_upscale_config_of(args))
    if loops is not None:
        return Img2ImgScript("--loopback", loopback, loops)
    if plotted:
        return Img2ImgScript("--xyz-x/y/z", xyz_plot, xyz_config_of(args, kind="img2img"), model=plot_model)
    if prompts is not None:
        return Img2ImgScript(chosen[0], *prompts)
    return None
