"""A1111's img2img "SD upscale" script: upscale the picture, run img2img on every tile of it, blend the tiles back.

From Python::

    from pipelines.scripts import sd_upscale
    config = sd_upscale.sd_upscale_config(scale_factor=2.0, upscaler="Lanczos", overlap=64)
    result = sd_upscale.run(img2img_pipe, params, config)   # result.images[0]: the upscaled picture

The init image is upscaled by `scale_factor` with the chosen upscaler (A1111's names, as `/sdapi/v1/upscalers` lists
them; "None" keeps the picture as it is), cut into tiles of the call's width x height overlapping by `overlap`
(`pipelines.tile_grid`, A1111's split_grid), and the tiles go through img2img `batch_size` at a time. `batch_count`
(A1111's n_iter) makes that many upscales, as A1111: upscale n starts at seed + n, and each batch of tiles takes the
seed after the previous batch's first seed (so with batch_size 1 tile k of upscale n has seed + n + k). The tiles are
joined with A1111's linear blend over the overlaps (combine_grid).

Every upscale's infotext is its first tile's (Seed: the upscale's first seed, Size: the tile size, as A1111 writes
it) with `SD upscale overlap` and `SD upscale upscaler` added. Progress counts tile batches over all upscales;
Interrupt stops after the current batch (an upscale cut short keeps its unprocessed tiles as upscaled, where A1111
leaves them black); Skip ends the current tile batch as elsewhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from pipelines.control import GenerationControl
from pipelines.scripts.image_budget import check_script_images, script_image_cap
from pipelines.scripts.registry import ScriptArg, ScriptResult
from pipelines.seeds import resolve_seed

TITLE = "SD upscale"
INFO = "Will upscale the image by the selected scale factor; use width and height sliders to set tile size"
DEFAULT_OVERLAP = 64
DEFAULT_SCALE = 2.0
MIN_SCALE = 1.0  # A1111's Scale Factor slider starts at 1: the script is for making pictures larger
MAX_OVERLAP_SLIDER = 256  # A1111's Tile overlap slider's end; larger overlaps are taken when under the tile size
MAX_TILES = 1024  # tiles per upscale: one script holds the queue until it ends
ARG_NAMES = ("info", "overlap", "upscaler_index", "scale_factor")

__all__ = ["TITLE", "SdUpscaleConfig", "check_sd_upscale", "parse_script_args", "run", "sd_upscale_config"]


@dataclass(frozen=True)
class SdUpscaleConfig:
    """The script's settings: tile `overlap` in pixels, the `upscaler`'s listed name, `scale_factor`."""

    overlap: int = DEFAULT_OVERLAP
    upscaler: str = "None"
    scale_factor: float = DEFAULT_SCALE


def upscaler_choices(**context: Any) -> list[str]:
    """The upscaler names `upscaler_index` counts in: the server's `/sdapi/v1/upscalers` listing (context
    `upscaler_names`), else every registered upscaler as that listing shows it."""
    names = context.get("upscaler_names")
    if names:
        return list(names)
    from pipelines.model_upscale_listing import listed_upscaler_names

    return listed_upscaler_names()


def _upscaler(value: Any, choices: list[str]) -> str:
    """A listed name from an index into `choices` (what A1111's API takes) or a name in any case (A1111 takes that
    too)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < len(choices):
            return choices[value]
        raise ValueError(f"script_args[2] (upscaler_index) {value} is out of range: 0..{len(choices) - 1} for "
                         f"{choices}.")
    if isinstance(value, str):
        by_lower = {name.lower(): name for name in choices}
        if value.strip().lower() in by_lower:
            return by_lower[value.strip().lower()]
        from pipelines.upscale import UPSCALERS

        if value.strip() in UPSCALERS:  # an alias a model upscaler answers to ("SwinIR 4x")
            return value.strip()
    raise ValueError(f"script_args[2] (upscaler_index) must be an index into or a name from the upscalers {choices}, "
                     f"got {value!r}.")


def _overlap(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"script_args[1] (Tile overlap) must be a whole number of pixels >= 0, got {value!r}.")
    return value


def _scale(value: Any) -> float:
    from pipelines.upscale import UpscaleLimits

    top = UpscaleLimits().max_scale
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not MIN_SCALE <= value <= top:
        raise ValueError(f"script_args[3] (Scale Factor) must be a number in [{MIN_SCALE}, {top}], got {value!r}.")
    return float(value)


def sd_upscale_config(scale_factor: Any = DEFAULT_SCALE, upscaler: Any = "Lanczos", overlap: Any = DEFAULT_OVERLAP,
                      **context: Any) -> SdUpscaleConfig:
    """A checked config from Python values (upscaler by name or listing index; Lanczos by default, where A1111's
    radio starts at "None", which keeps the picture's size whatever the factor); ValueError as `parse_script_args`."""
    return parse_script_args([None, overlap, upscaler, scale_factor], "img2img", **context)


def parse_script_args(script_args: Any, kind: str = "img2img", **context: Any) -> SdUpscaleConfig:
    """A1111's positional `script_args` [info, overlap, upscaler_index, scale_factor] as a checked config; missing
    trailing slots (or None) take the defaults. ValueError naming the slot, the value and what is allowed."""
    if kind != "img2img":
        raise ValueError(f"'{TITLE}' is an img2img script, not {kind}.")
    if not isinstance(script_args, (list, tuple)) or len(script_args) > len(ARG_NAMES):
        got = len(script_args) if isinstance(script_args, (list, tuple)) else type(script_args).__name__
        raise ValueError(f"script_args for '{TITLE}' must be a list of at most {len(ARG_NAMES)} values: "
                         f"[{', '.join(ARG_NAMES)}], got {got}.")
    choices = upscaler_choices(**context)
    defaults = [INFO, DEFAULT_OVERLAP, 0, DEFAULT_SCALE]
    values = [default if value is None else value
              for value, default in zip([*script_args, *[None] * (len(ARG_NAMES) - len(script_args))], defaults)]
    return SdUpscaleConfig(overlap=_overlap(values[1]), upscaler=_upscaler(values[2], choices),
                           scale_factor=_scale(values[3]))


def script_args(kind: str, **context: Any) -> list[ScriptArg]:
    """The slots as `/sdapi/v1/script-info` describes them (A1111's UI: the note, two sliders, the upscaler radio)."""
    from pipelines.upscale import UpscaleLimits

    choices = upscaler_choices(**context)
    return [ScriptArg(None, INFO), ScriptArg("Tile overlap", DEFAULT_OVERLAP, 0, MAX_OVERLAP_SLIDER, 16),
            ScriptArg("Upscaler", choices[0], choices=choices),
            ScriptArg("Scale Factor", DEFAULT_SCALE, MIN_SCALE, UpscaleLimits().max_scale, 0.05)]


@dataclass(frozen=True)
class UpscalePlan:
    """What a run will do: the picture's size after upscaling, the tile grid's positions, the tile batches."""

    width: int
    height: int
    xs: list
    ys: list
    batch_size: int
    iterations: int

    @property
    def tile_count(self) -> int:
        return len(self.xs) * len(self.ys)

    @property
    def batches(self) -> int:
        return math.ceil(self.tile_count / self.batch_size)


def upscaled_size(image, config: SdUpscaleConfig) -> tuple[int, int]:
    """The size the upscale ends at (A1111's: each side times the factor, floored to a multiple of 8; "None" keeps
    the picture), checked against the upscale budget (UpscaleLimits) and a model's passes on the way."""
    from pipelines.upscale import UpscaleLimits, check_upscale

    if config.upscaler == "None":
        return image.width, image.height
    return check_upscale(image.width, image.height, config.scale_factor, UpscaleLimits(), config.upscaler)


def check_sd_upscale(params, config: SdUpscaleConfig) -> UpscalePlan:
    """The run's plan after every check that needs no model: one init image and no mask, the upscaler known, the
    upscaled size within the budget and at least one tile, overlap under the tile size, the tile count; ValueError
    before anything runs."""
    from PIL import Image

    from pipelines.image_prep import normalize_init_image
    from pipelines.tile_grid import check_tiling, tile_starts
    from pipelines.upscale import UPSCALERS

    images = getattr(params, "init_images", None)
    if not isinstance(images, list) or len(images) != 1 or not isinstance(images[0], Image.Image):
        count = len(images) if isinstance(images, list) else type(images).__name__
        raise ValueError(f"'{TITLE}' upscales one init image (A1111 takes the first); got {count}. Send one image.")
    for name in ("batch_size", "batch_count"):
        value = getattr(params, name, None)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    if getattr(params, "mask", None) is not None:
        raise ValueError(f"'{TITLE}' works on the whole picture; send it without a mask (inpainting).")
    if config.upscaler != "None":
        UPSCALERS.get(config.upscaler)  # a name since unregistered: the error lists the valid ones
    source = normalize_init_image(images[0])  # EXIF rotation may swap the sides
    width, height = upscaled_size(source, config)
    check_tiling(width, height, params.width, params.height, config.overlap)
    plan = UpscalePlan(width, height, tile_starts(width, params.width, config.overlap),
                       tile_starts(height, params.height, config.overlap), params.batch_size, params.batch_count)
    if plan.tile_count > MAX_TILES:
        raise ValueError(f"{TITLE}: {width}x{height} in {params.width}x{params.height} tiles is {plan.tile_count} "
                         f"tiles, more than {MAX_TILES}; raise width/height (the tile size) or upscale by less.")
    return plan


def tile_params(params, tiles: list, seed: int, subseed: int):
    """The img2img call for one batch of tiles (A1111 sets p.init_images and p.seed; its n_iter is 1 here)."""
    return replace(params, init_images=list(tiles), batch_size=len(tiles), batch_count=1, seed=seed, subseed=subseed)


def planned_params(params, config: SdUpscaleConfig, **context: Any) -> list:
    """The img2img calls the run makes, one per distinct batch shape (full batches and a last shorter one; they
    differ only in seeds otherwise), with blank tiles, for a server's checks before it queues the run."""
    from PIL import Image

    plan = check_sd_upscale(params, config)
    check_tile_images(plan, script_image_cap(context))
    blank = Image.new("RGB", (params.width, params.height))
    sizes = {min(plan.batch_size, plan.tile_count), plan.tile_count - (plan.batches - 1) * plan.batch_size}
    return [tile_params(params, [blank] * size, 0, 0) for size in sorted(sizes)]


def check_tile_images(plan: UpscalePlan, cap: int) -> None:
    """ValueError when the run's img2img tiles are more than `cap` images (every tile of every upscale is one)."""
    made_of = f"{plan.tile_count:,} tiles of the {plan.width}x{plan.height} upscale x batch count {plan.iterations}"
    check_script_images(TITLE, plan.tile_count * plan.iterations, cap, made_of,
                        "use a smaller batch count, larger tiles (width/height) or a smaller scale factor")


def _batch_progress(callback, position: int, total: int):
    """The pipeline's step callback, counting tile batches over every upscale (A1111's job_count)."""
    if callback is None:
        return None

    def on_step(state):
        callback(replace(state, batch_index=position, batch_count=total))
    return on_step


def script_infotext(infotext: str, config: SdUpscaleConfig) -> str:
    """The first tile's infotext with A1111's `SD upscale overlap` and `SD upscale upscaler`, where A1111 writes them:
    first among the extra generation params (the script sets them before processing starts), so right after `RNG`
    (before `Version` when there is no `RNG`)."""
    from pipelines.infotext import build_infotext, split_infotext

    if not infotext:
        return ""
    prompt, negative, keys = split_infotext(infotext)
    ours = {"SD upscale overlap": config.overlap, "SD upscale upscaler": config.upscaler}
    anchor = "RNG" if "RNG" in keys else None
    ordered: dict = {}
    for key, value in keys.items():
        if anchor is None and key == "Version":
            ordered.update(ours)
        ordered[key] = value
        if key == anchor:
            ordered.update(ours)
    if not set(ours) <= set(ordered):
        ordered.update(ours)
    return build_infotext(prompt, negative, ordered)


def run(pipe, params, config: SdUpscaleConfig, callback=None, control: GenerationControl | None = None,
        **context: Any) -> ScriptResult:
    """Upscale `params.init_images[0]` with an img2img `pipe` (see the module docstring); `context` is unused
    beyond the upscaler listing `config` was parsed with. Returns one picture per upscale (batch_count of them)."""
    from pipelines.image_prep import normalize_init_image
    from pipelines.tile_grid import combine_grid, split_grid
    from pipelines.upscale import upscale_image

    control = control or GenerationControl()
    # 1. Check everything, the tiles' img2img calls included, before the upscale
    plan = check_sd_upscale(params, config)
    cap = script_image_cap(context, pipe)
    check_tile_images(plan, cap)
    for checked in planned_params(params, config, max_script_images=cap):
        pipe.check_inputs(replace(checked))
    seed, subseed = resolve_seed(params.seed), resolve_seed(params.subseed)  # A1111's fix_seed

    # 2. Upscale once and cut into tiles
    source = normalize_init_image(params.init_images[0])
    picture = source if config.upscaler == "None" else upscale_image(source, config.scale_factor,
                                                                     upscaler=config.upscaler)
    grid = split_grid(picture, params.width, params.height, config.overlap)
    tiles = grid.images()

    # 3. img2img on every tile, batch by batch, for each upscale
    result = ScriptResult()
    total = plan.batches * plan.iterations
    for n in range(plan.iterations):
        if control.interrupted:
            break
        start_seed = batch_seed = seed + n
        done, first_infotext = [], None
        for i in range(plan.batches):
            if control.interrupted:
                break
            batch = tiles[i * plan.batch_size:(i + 1) * plan.batch_size]
            processed = pipe(tile_params(params, batch, batch_seed, subseed),
                             callback=_batch_progress(callback, n * plan.batches + i, total), control=control)
            if first_infotext is None and processed.infotexts:
                first_infotext = processed.infotexts[0]
            batch_seed = (processed.seeds[0] if processed.seeds else batch_seed) + 1
            done += processed.images[:len(batch)]
        if not done:
            break
        # 4. Join: tiles not reached (interrupted) keep their upscaled pixels
        joined = grid.with_images([*done, *tiles[len(done):]])
        result.add(combine_grid(joined), start_seed, script_infotext(first_infotext or "", config))
        result.subseed = subseed
    result.interrupted = control.interrupted
    return result
