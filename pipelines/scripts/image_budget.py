"""The number of images a selectable script job will generate in all, capped from its plan before the first one.

Each script has caps of its own (X/Y/Z plot: 1,000 cells and a 200-megapixel grid; Prompts from file: 1,000 lines;
SD upscale: 1,024 tiles) and every call stays within the generation limits, yet their product is unbounded in
practice: 1,000 list lines x batch size 16 x batch count 100 is 1.6 million images, one queue entry holding the
server for days. A1111 has no such cap; this one is `GenerationLimits.max_script_images` (10,000 by default),
`--max-script-images` on `mixkit webui`, `generate` and `img2img`.

Where the cap comes from: a script's `plan(params, config, **context)` reads `context["max_script_images"]` (the
server passes its limits' value), else the default; `run(pipe, ...)` reads the same key, else `pipe.limits`.
"""

from __future__ import annotations

from typing import Any

from pipelines.params import DEFAULT_MAX_SCRIPT_IMAGES, check_max_script_images

CONTEXT_KEY = "max_script_images"
RAISE_THE_CAP = ("or raise the cap: --max-script-images N (on `mixkit webui` for a server, or on `mixkit generate` / "
                 "`mixkit img2img`); from Python GenerationLimits(max_script_images=N) on the pipeline, or "
                 "max_script_images=N to the script")


def script_image_cap(context: dict[str, Any], pipe=None) -> int:
    """The cap a script job is checked against: the context's `max_script_images`, else `pipe.limits`' (a run), else
    the default (a plan without a pipeline). ValueError for a cap that is not a whole number of at least 1."""
    if context.get(CONTEXT_KEY) is not None:
        return check_max_script_images(CONTEXT_KEY, context[CONTEXT_KEY])
    if pipe is not None and getattr(pipe, "limits", None) is not None:
        return pipe.limits.max_script_images
    return DEFAULT_MAX_SCRIPT_IMAGES


def images_of_calls(calls: list) -> int:
    """How many images these planned calls generate: each call's batch size x batch count."""
    return sum(call.batch_size * call.batch_count for call in calls)


def check_script_images(title: str, count: int, cap: int, made_of: str, advice: str) -> None:
    """ValueError naming the count (`made_of`: what it multiplies out of), the cap and how to lower the one or raise
    the other, when a job would generate more than `cap` images."""
    if count > cap:
        raise ValueError(f"{title} would generate {count:,} images ({made_of}), more than the {cap:,} one script job "
                         f"may make (max_script_images); {advice}, {RAISE_THE_CAP}.")
