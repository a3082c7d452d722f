"""ControlNet units on `mixkit generate` / `mixkit img2img`: `--controlnet MODEL[:IMAGE]` and the `--cn-*` options.

Each `--controlnet` starts a unit; every `--cn-*` option after it sets a field of that unit (the last one started),
as sd-webui-controlnet's API names them (`--cn-module` is `module`, `--cn-start` is `guidance_start`, ...). The
flags only collect the unit's fields as API unit keys; `webui.cli.controlnet_units` reads the images and checks
and builds the units through the API's own unit code, so a unit gives the same image from the CLI, the API and
the web UI.
"""

from __future__ import annotations

import argparse

# --cn-* option -> (API unit key, argparse type, metavar, help)
UNIT_OPTIONS: dict[str, tuple[str, object, str | None, str]] = {
    "--cn-image": ("image", str, "IMAGE",
                   "the unit's control picture (same as MODEL:IMAGE; img2img's default: the init image)"),
    "--cn-module": ("module", str, "NAME",
                    "preprocessor: none (default), canny, depth_midas, lineart_standard, inpaint_only, ... (the "
                    "extension's names, e.g. 'inpaint_global_harmonious', work too)"),
    "--cn-weight": ("weight", float, "W", "control weight, any number >= 0 (default 1; the UI slider runs 0-2)"),
    "--cn-start": ("guidance_start", float, "FRACTION", "starting control step, 0-1 (default 0)"),
    "--cn-end": ("guidance_end", float, "FRACTION", "ending control step, 0-1 (default 1)"),
    "--cn-control-mode": ("control_mode", str, "MODE",
                          "Balanced (default), 'My prompt is more important', 'ControlNet is more important' "
                          "(or 0, 1, 2)"),
    "--cn-resize-mode": ("resize_mode", str, "MODE",
                         "how the picture is fitted to the generation size: 'Just Resize', 'Crop and Resize' "
                         "(default), 'Resize and Fill'"),
    "--cn-pixel-perfect": ("pixel_perfect", None, None,
                           "preprocess at the resolution computed from the picture and the generation size"),
    "--cn-processor-res": ("processor_res", int, "PIXELS",
                           "preprocessor resolution (default 512, the extension's; ignored with --cn-pixel-perfect)"),
    "--cn-threshold-a": ("threshold_a", float, "X", "the preprocessor's first slider (canny: low threshold)"),
    "--cn-threshold-b": ("threshold_b", float, "X", "the preprocessor's second slider (canny: high threshold)"),
    "--cn-mask": ("mask", str, "MASK",
                  "the unit's mask, the picture's size, white = masked (inpaint modules: the area to fill)"),
    "--cn-region-mask": ("effective_region_mask", str, "MASK",
                         "effective region mask: the unit's control applies only where it is white"),
}
# API unit key -> the flag that sets it, for error messages (`guidance_start must be ...` -> `--cn-start ...`)
KEY_FLAGS = {key: flag for flag, (key, *_rest) in UNIT_OPTIONS.items()}


class StartUnit(argparse.Action):
    """`--controlnet MODEL[:IMAGE]`: a new unit, the target of the `--cn-*` options after it."""

    def __call__(self, parser, namespace, value, option_string=None):
        units = list(getattr(namespace, self.dest) or [])
        model, image = split_model_and_image(value)
        if not model:
            raise argparse.ArgumentError(self, f"{value!r} names no model; write MODEL or MODEL:IMAGE")
        fields = {"model": model}
        if image is not None:
            fields["image"] = image
        units.append({"flag": f"--controlnet {value}", "fields": fields})
        setattr(namespace, self.dest, units)


class UnitOption(argparse.Action):
    """A `--cn-*` option: one field of the unit the last `--controlnet` started."""

    def __init__(self, option_strings, dest, key: str, **kwargs):
        self.key = key
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, value, option_string=None):
        units = getattr(namespace, "controlnet", None)
        if not units:
            raise argparse.ArgumentError(self, "sets a field of a ControlNet unit; put it after the --controlnet "
                                               "MODEL[:IMAGE] it belongs to")
        fields = units[-1]["fields"]
        if self.key in fields:
            raise argparse.ArgumentError(self, f"given twice for {units[-1]['flag']} (an image given as MODEL:IMAGE "
                                               "counts as --cn-image); start another unit with --controlnet")
        fields[self.key] = True if self.nargs == 0 else value


def add_controlnet_flags(p: argparse.ArgumentParser, img2img: bool) -> None:
    """The ControlNet flags of `generate` and `img2img`."""
    fallback = ("; without IMAGE the unit uses the init image, as sd-webui-controlnet in img2img" if img2img
                else "")
    g = p.add_argument_group(
        "ControlNet", "sd-webui-controlnet's units: each --controlnet starts one; the --cn-* options after it set "
                      "that unit's fields (e.g. --controlnet canny:edges.png --cn-module canny --cn-weight 0.8)")
    g.add_argument("--controlnet", action=StartUnit, default=[], metavar="MODEL[:IMAGE]",
                   help="add a ControlNet unit (repeatable, up to 4): MODEL is a name in --controlnet-dir (with or "
                        "without the extension's ' [hash]') or a ControlNet file / diffusers folder; IMAGE the control "
                        f"picture{fallback}")
    g.add_argument("--controlnet-json", default=None, metavar="FILE",
                   help="units as sd-webui-controlnet's API takes them: a JSON list of units (or the request's "
                        "alwayson_scripts / {\"args\": [...]}), pictures as file paths (relative to FILE) or base64; "
                        "they come before the --controlnet units")
    g.add_argument("--controlnet-dir", default=None, metavar="DIR",
                   help="folder of ControlNet models (files or diffusers folders), as `mixkit webui --controlnet-dir`")
    for flag, (key, kind, metavar, text) in UNIT_OPTIONS.items():
        if kind is None:
            g.add_argument(flag, action=UnitOption, key=key, nargs=0, dest="cn_option", help=text)
        else:
            g.add_argument(flag, action=UnitOption, key=key, type=kind, metavar=metavar, dest="cn_option", help=text)


def split_model_and_image(value: str) -> tuple[str, str | None]:
    """`MODEL[:IMAGE]` -> (model, image or None). The image follows the last ':' unless the whole value is an
    existing path (a Windows drive `C:\\...` or a file named with ':'), so paths keep working."""
    from pathlib import Path

    if ":" not in value or Path(value).expanduser().exists():
        return value.strip(), None
    model, _, image = value.rpartition(":")
    if len(model) == 1 and model.isalpha():  # `C:\cn\canny.safetensors` that does not exist: a path, not C + image
        return value.strip(), None
    return model.strip(), image or None


def in_option_terms(message: str) -> str:
    """An API unit check's message in flag terms: the unit keys with an underscore (`guidance_start`) wherever they
    stand, `weight` where it is the message's subject; plain words such as "image" or "mask" are left alone."""
    import re

    keys = sorted((key for key in KEY_FLAGS if "_" in key), key=len, reverse=True)
    message = re.sub(r"(?<![\w-])(" + "|".join(keys) + r")(?!\w)", lambda m: KEY_FLAGS[m.group(1)], message)
    return message.replace(" weight must be", " --cn-weight must be")
