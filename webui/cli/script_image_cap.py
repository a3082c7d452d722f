"""`--max-script-images N` for `mixkit generate` and `mixkit img2img`: the most images one script run (X/Y/Z plot,
Prompt matrix, Prompts from file, Loopback, SD upscale) may generate in all, as `mixkit webui`'s flag of the same name
sets a server's (pipelines.scripts.image_budget). Checked with the script's plan, before the model loads."""

from __future__ import annotations

import argparse


def add_script_image_cap_flag(p: argparse.ArgumentParser) -> None:
    from pipelines.params import DEFAULT_MAX_SCRIPT_IMAGES

    p.add_argument("--max-script-images", type=int, default=None, metavar="N",
                   help="most images a script (--xyz-x/y/z, --prompt-matrix, --prompts-from-file, --loopback, "
                        f"--sd-upscale) may generate in all (default: {DEFAULT_MAX_SCRIPT_IMAGES:,})")


def script_image_context(args: argparse.Namespace) -> dict:
    """The scripts' context key for the flag ({} without it: the default cap); ValueError naming the flag."""
    from pipelines.params import check_max_script_images

    value = getattr(args, "max_script_images", None)
    if value is None:
        return {}
    return {"max_script_images": check_max_script_images("--max-script-images", value)}
