"""A1111 1.10's built-in always-on scripts, which clients that copy a UI payload or build one from `/script-info`
send in `alwayson_scripts`: accepted when they ask for nothing this server would have to do.

A1111 finds a script by its title, case-insensitively (`script_name_to_index`). Refiner, Seed and Sampler are
`ScriptBuiltinUI` scripts, whose `setup_for_ui_only` makes A1111's API skip their setup: their args are ignored there
(the request's own `refiner_checkpoint`, `seed`, `subseed`, `sampler_name`, `steps` fields rule), so any args pass
here too. Extra options fills only the settings listed in `extra_options_txt2img` / `extra_options_img2img` (none by
default, so its args are unused); Hypertile and Comments take no args (they read Settings). Soft Inpainting runs when
its first arg (`enabled`) is true: on img2img (webui.api_soft_inpainting reads its args); A1111's txt2img has no such
script (its `show` hides it there), so switched on in txt2img it is refused.
"""

from __future__ import annotations

from typing import Any

IGNORED_ARGS = frozenset({"refiner", "seed", "sampler", "extra options", "hypertile", "comments"})
ENABLED_BY_FIRST_ARG = frozenset({"soft inpainting"})
IMG2IMG_SCRIPTS = frozenset({"soft inpainting"})  # run when switched on, on img2img only


def _args(entry: Any) -> list:
    args = entry.get("args", []) if isinstance(entry, dict) else None
    return args if isinstance(args, list) else None


def unsupported_scripts(scripts: dict, img2img: bool = False) -> list[str]:
    """Refusals for the `alwayson_scripts` entries (ControlNet taken out) this server cannot honour: an unknown
    script, or a built-in one switched on that does not run here (Soft inpainting outside img2img); empty when
    every entry is one of A1111's built-ins asking for nothing or one this request runs."""
    refused = []
    for name, entry in scripts.items():
        key, args = str(name).lower(), _args(entry)
        if key not in IGNORED_ARGS | ENABLED_BY_FIRST_ARG:
            refused.append(f"alwayson_scripts.{name!r} (not a script of this server)")
        elif args is None:
            refused.append(f"alwayson_scripts.{name!r} (its value must be {{\"args\": [...]}})")
        elif key in IMG2IMG_SCRIPTS and img2img:
            continue  # its args are checked where they are read (webui.api_soft_inpainting)
        elif key in ENABLED_BY_FIRST_ARG and args and args[0] is not False:
            where = " in txt2img (an img2img script in A1111)" if key in IMG2IMG_SCRIPTS else ""
            refused.append(f"alwayson_scripts.{name!r} switched on{where} (args[0]={args[0]!r}; send false)")
    return refused
