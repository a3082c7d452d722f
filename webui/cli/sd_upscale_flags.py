"""`mixkit img2img IMAGE "prompt" --sd-upscale 2 --sd-upscale-upscaler ESRGAN_4x`: A1111's SD upscale script.

IMAGE is upscaled by the factor, cut into --width x --height tiles (default: IMAGE's own size, as A1111's sliders after
"Send to img2img") overlapping by --sd-upscale-overlap, every tile redrawn by img2img and the tiles blended back
(`pipelines.scripts.sd_upscale`). Everything is checked before the model loads: the upscaler's name (the folders' model
files count, as `mixkit extras`), the overlap against the tile size, the upscaled size against the upscale budget.
One picture per --batch-count, written as img2img writes its images.
"""

from __future__ import annotations

import argparse

# the script's error slots, in flag terms
FLAG_NAMES = {"script_args[1] (Tile overlap)": "--sd-upscale-overlap",
              "script_args[2] (upscaler_index)": "--sd-upscale-upscaler",
              "script_args[3] (Scale Factor)": "--sd-upscale"}


def add_sd_upscale_flags(p: argparse.ArgumentParser) -> None:
    from pipelines.scripts.sd_upscale import DEFAULT_OVERLAP
    from webui.cli.extras import add_upscaler_flags

    group = p.add_argument_group("SD upscale (A1111's img2img script): upscale, redraw every tile, blend the tiles")
    group.add_argument("--sd-upscale", type=float, default=None, metavar="FACTOR",
                       help="upscale IMAGE by FACTOR (1-8) and redraw it tile by tile; --width/--height are the tile "
                            "size")
    group.add_argument("--sd-upscale-overlap", type=int, default=DEFAULT_OVERLAP, metavar="PX",
                       help=f"pixels neighbouring tiles share and blend over (A1111's Tile overlap; default "
                            f"{DEFAULT_OVERLAP}); less than the tile size")
    group.add_argument("--sd-upscale-upscaler", default="Lanczos", metavar="NAME",
                       help="the upscaler, by A1111's name: Lanczos (default), Nearest, None (no upscale), or a model "
                            "file's name from the upscaler folders (ESRGAN_4x, SwinIR_4x, DAT x4 ...)")
    add_upscaler_flags(group)


def sd_upscale_requested(args: argparse.Namespace) -> bool:
    return getattr(args, "sd_upscale", None) is not None


def sd_upscale_config_of(args: argparse.Namespace):
    """The script's config from the flags, the folders' upscalers registered first; ValueError naming the flag."""
    from pipelines.scripts.sd_upscale import sd_upscale_config
    from webui.cli.extras import register_upscaler_flags

    if getattr(args, "controlnet", None):
        raise ValueError("--sd-upscale cannot be combined with ControlNet units; leave out --controlnet.")
    register_upscaler_flags(args)
    with flag_terms():
        return sd_upscale_config(args.sd_upscale, args.sd_upscale_upscaler, args.sd_upscale_overlap)


class flag_terms:
    """Re-raise the script's ValueErrors with its slots named by their flags."""

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if isinstance(error, ValueError):
            message = str(error)
            for slot, flag in FLAG_NAMES.items():
                message = message.replace(slot, flag)
            raise ValueError(message) from None
        return False


def check_sd_upscale_run(params, config, **cap) -> int:
    """The run's checks that need no model (one image, no mask, the upscaled size, the tiles, the script-image cap),
    before the load; returns the tile images it generates (what the cap counts)."""
    from pipelines.scripts.sd_upscale import check_sd_upscale, planned_params

    with flag_terms():
        planned_params(params, config, **cap)
        plan = check_sd_upscale(params, config)
    return plan.tile_count * plan.iterations


def run_sd_upscale(pipe, params, config, output, output_is_file: bool, writing=None, save=None, **cap) -> int:
    """Run the script with a progress bar and Ctrl-C as Interrupt; write each upscale (or `save(result) -> paths`);
    print the paths."""
    from pipelines.scripts import sd_upscale
    from webui.cli.progress import report_written, run_with_progress

    plan = sd_upscale.check_sd_upscale(params, config)
    result = run_with_progress(lambda **hooks: sd_upscale.run(pipe, params, config, **cap, **hooks),
                               params.steps * plan.batches * plan.iterations)
    if save is not None:
        paths = save(result)
    else:
        paths = result.save_as(output, writing) if output_is_file else result.save(output, writing)
    return report_written(paths, result.interrupted, f"kept {len(result.images)} of {plan.iterations} upscale(s)")
