"""The axis types of an X/Y/Z plot, by A1111's labels (scripts/xyz_grid.py `axis_options`), in its order.

Each axis says what its values are (whole numbers, numbers, text, permutations of text), how a value changes a
cell's params (a new params object; the caller's is never changed), how the value is written on the grid, which
values are valid (dropdown axes) and what it costs to change (the checkpoint, 1.0, is switched least often).

Every axis of A1111 1.10 is listed, in its order, because API clients send `x_type` as an index into that list. The
ones that need a model feature run only where the model has it (Image CFG Scale on instruct-pix2pix checkpoints, as
A1111 applies it; refused on any other model rather than plotting identical cells); RNG source runs CPU and NV
(`pipelines.rng_source`), and GPU on a CPU model, where it is the CPU noise. Axes that change the loaded model
(Checkpoint name, FP8 mode, VAE, Token merging ratio) have a `switch` (`pipelines.scripts.xyz_model_axes`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable

from mixkit.registry import Registry
from pipelines.rng_source import RNG_SOURCES, check_rng_source_device
from pipelines.scripts.xyz_model_axes import (check_fp8_pipe, check_fp8_values, check_token_merging_pipe,
                                              check_token_merging_values, check_vaes, fp8_choices, switch_fp8,
                                              switch_token_merging, switch_vae, vae_choices)

NOTHING, INT, FLOAT, TEXT, PERMUTATIONS = "nothing", "int", "float", "text", "permutations"
BOTH = frozenset({"txt2img", "img2img"})
TXT2IMG, IMG2IMG = frozenset({"txt2img"}), frozenset({"img2img"})


@dataclass
class PlotContext:
    """What a plot may need beyond the pipeline: the caller's ways to switch checkpoints and read styles.

    `switch_checkpoint(name)` loads checkpoint `name` and returns the pipeline to use with it (the server passes its
    model holder's; None: the "Checkpoint name" axis is refused). `checkpoint_names`: the names it takes (the axis's
    choices, and what values are checked against). `styles`: a `mixkit.prompts.styles.StyleLibrary` for "Styles".
    `refiner_source(name)`: what `params.refiner` takes for checkpoint `name` (the server passes its catalog's file;
    None: the "Refiner checkpoint" axis is refused). `switch_vae(name)`: makes the loaded model decode with VAE
    `name` ("Automatic", "None" or one of `vae_names`) and returns the pipeline to use (None: the "VAE" axis is
    refused); the caller puts its own VAE back after the plot. `fixed_unet`: why the UNet the plot will run on has a
    fixed graph, when the caller knows it before the model loads (the CLI's "--int8 compiles the UNet into a fixed
    int8 graph"); axes that change the UNet's layers (Token merging ratio, FP8 mode) refuse their values with it
    while the plot is validated, instead of after the load.
    """

    kind: str = "txt2img"
    switch_checkpoint: Callable[[str], Any] | None = None
    checkpoint_names: list[str] = field(default_factory=list)
    styles: Any = None
    refiner_source: Callable[[str], Any] | None = None  # a checkpoint name -> `params.refiner` (Refiner checkpoint)
    switch_vae: Callable[[str], Any] | None = None
    vae_names: list[str] = field(default_factory=list)
    fixed_unet: str | None = None

    @classmethod
    def of(cls, **context: Any) -> "PlotContext":
        """From a server's script context, keeping the keys a plot reads (other scripts read other keys)."""
        names = {item.name for item in fields(cls)}
        return cls(**{key: value for key, value in context.items() if key in names})


def label_and_value(axis: "AxisOption", value: Any) -> str:
    """A1111's `format_value_add_label`: "Steps: 20" (floats rounded to 8 decimals)."""
    return f"{axis.label}: {round(value, 8) if isinstance(value, float) else value}"


def value_only(axis: "AxisOption", value: Any) -> str:
    return str(round(value, 8) if isinstance(value, float) else value)


def joined(axis: "AxisOption", value: Any) -> str:
    return ", ".join(value)


def file_name(axis: "AxisOption", value: Any) -> str:
    return os.path.basename(value)


@dataclass(frozen=True)
class AxisOption:
    """One axis type. `apply(params, value, values, context)` returns the cell's params; `check(params, values,
    context)` refuses bad values before anything is generated; `choices(context)` lists a dropdown axis's values.

    An axis that changes the loaded model has `switch(pipe, value, context, restorer) -> pipe`, run before a cell
    whose value differs from the last cell's, and may have `check_pipe(pipe, values)`, run on the plot's pipeline
    before the first cell and on each pipeline a costlier axis switches to."""

    label: str
    value_type: str
    apply: Callable[..., Any]
    format_value: Callable[["AxisOption", Any], str] = label_and_value
    kinds: frozenset = BOTH
    choices: Callable[[PlotContext], list[str]] | None = None
    check: Callable[..., None] | None = None
    cost: float = 0.0
    needs_field: str | None = None  # a params field the axis sets, refused when the call's params lack it
    switch: Callable[..., Any] | None = None
    check_pipe: Callable[[Any, list], None] | None = None


def set_field(name: str) -> Callable:
    def apply(params, value, values, context):
        return replace(params, **{name: value})
    return apply


def set_sampler_parameter(name: str, boolean: bool = False) -> Callable:
    def apply(params, value, values, context):
        if boolean:
            value = str(value).strip().lower() == "true"
        return replace(params, sampler_parameters=replace(params.sampler_parameters, **{name: value}))
    return apply


def apply_nothing(params, value, values, context):
    return params


def _both_prompts(params, change: Callable[[str], str]):
    def each(prompt):
        return [change(text) for text in prompt] if isinstance(prompt, list) else change(prompt)
    return replace(params, prompt=each(params.prompt), negative_prompt=each(params.negative_prompt))


def _texts(prompt) -> list[str]:
    return prompt if isinstance(prompt, list) else [prompt]


def apply_prompt_sr(params, value, values, context):
    """Every occurrence of the axis's first value, in the prompt and the negative prompt, becomes `value`."""
    return _both_prompts(params, lambda text: text.replace(values[0], value))


def check_prompt_sr(params, values, context) -> None:
    """A1111 raises this too, but at the first cell; here before anything is generated."""
    texts = _texts(params.prompt) + _texts(params.negative_prompt)
    if not any(values[0] in text for text in texts):
        raise ValueError(f"Prompt S/R did not find {values[0]!r} (the first value, which the others replace) in the "
                         "prompt or the negative prompt; put it there or make it the first value.")


def apply_prompt_order(params, value, values, context):
    """The axis's words, where they stand in the prompt, put back in the order of `value` (A1111's apply_order)."""
    def reorder(prompt: str) -> str:
        found = sorted((prompt.find(token), token) for token in value)
        parts, rest = [], prompt
        for _, token in found:
            at = rest.find(token)
            parts.append(rest[:at])
            rest = rest[at + len(token):]
        return "".join(part + token for part, token in zip(parts, value)) + rest
    prompt = params.prompt
    return replace(params, prompt=[reorder(p) for p in prompt] if isinstance(prompt, list) else reorder(prompt))


def check_prompt_order(params, values, context) -> None:
    missing = sorted({token for permutation in values for token in permutation
                      if not all(token in text for text in _texts(params.prompt))})
    if missing:
        raise ValueError(f"Prompt order: {', '.join(map(repr, missing))} not found in the prompt; each value must be "
                         "a piece of the prompt.")


def sampler_names(context: PlotContext) -> list[str]:
    from pipelines.samplers import list_samplers

    return [sampler["name"] for sampler in list_samplers()]


def check_samplers(params, values, context) -> None:
    from pipelines.samplers import resolve_sampler

    for value in values:
        try:
            resolve_sampler(value, params.schedule_type)
        except (ValueError, KeyError) as error:
            message = str(error.args[0]) if error.args else str(error)
            raise ValueError(f"Sampler {value!r}: {message}") from None


def apply_hires_sampler(params, value, values, context):
    """The hires pass's sampler (A1111's `apply_field("hr_sampler_name")`); "Use same sampler" is the first pass's.
    `hr_eta` is cleared: a request's Settings eta was for its own hires sampler's kind, so a cell's sampler takes its
    own kind's Settings eta (`settings_eta`), else the first pass's `eta` (pipelines.hires_sampler.hires_eta)."""
    from pipelines.hires_sampler import hires_sampler_choice

    return replace(params, hr_sampler=hires_sampler_choice(value, None)[0], hr_eta=None)


def check_hires_samplers(params, values, context) -> None:
    """Every value runs as the hires pass's sampler with the call's hires schedule and steps (A1111's
    `confirm_samplers`, with the schedule checked too)."""
    from pipelines.hires_sampler import check_hires_sampler

    steps = params.hr_second_pass_steps or params.steps
    for value in values:
        try:
            check_hires_sampler(apply_hires_sampler(params, value, values, context), steps)
        except (TypeError, ValueError) as error:
            raise ValueError(f"Hires sampler {value!r}: {error}") from None


def check_token_merging_hr_values(params, values, context) -> None:
    """A1111's "Token merging ratio high-res" (its `token_merging_ratio_hr` override per cell): every ratio in ToMe's
    range, 0 meaning the first pass's, as the hires pass checks it; none above 0 on a UNet the caller knows is fixed."""
    check_token_merging_values(params, values, context, "Token merging ratio high-res", "0 is the first pass's ratio")


def check_token_merging_hr_pipe(pipe, values) -> None:
    """Whether the plot's model can merge tokens in the hires pass (not on an int8 or OpenVINO UNet)."""
    check_token_merging_pipe(pipe, values, "Token merging ratio high-res")


def schedule_names(context: PlotContext) -> list[str]:
    from pipelines.samplers import SCHEDULE_TYPES

    return [schedule.name for _, schedule in SCHEDULE_TYPES.items()]


def check_schedules(params, values, context) -> None:
    from pipelines.samplers import resolve_sampler

    for value in values:
        try:
            resolve_sampler(params.sampler, value)
        except (ValueError, KeyError) as error:
            message = str(error.args[0]) if error.args else str(error)
            raise ValueError(f"Schedule type {value!r}: {message}") from None


def checkpoint_names(context: PlotContext) -> list[str]:
    return sorted(context.checkpoint_names, key=str.casefold)


def find_checkpoint_name(context: PlotContext, value: str) -> str | None:
    """The known name `value` means (`pipelines.scripts.checkpoint_names.find_checkpoint`)."""
    from pipelines.scripts.checkpoint_names import find_checkpoint

    return find_checkpoint(context.checkpoint_names, value)


def check_checkpoints(params, values, context) -> None:
    if context.switch_checkpoint is None:
        raise ValueError("The Checkpoint name axis needs a way to load checkpoints, which this caller did not give "
                         "(the Python API: pass switch_checkpoint=callable(name) -> pipeline); run the plot from the "
                         "web UI or the HTTP API, or choose another axis.")
    unknown = [value for value in values if find_checkpoint_name(context, value) is None]
    if unknown:
        valid = ", ".join(repr(name) for name in checkpoint_names(context)) or "(none)"
        raise ValueError(f"Unknown checkpoint {unknown[0]!r} on the Checkpoint name axis. Valid names: {valid}.")


def switch_checkpoint(pipe, value, context: PlotContext, restorer) -> Any:
    """The pipeline of checkpoint `value`. It was valid when the plot was checked; a file removed or broken since
    fails here, named as the axis value, not as whatever the loader calls it."""
    try:
        return context.switch_checkpoint(find_checkpoint_name(context, value) or value)
    except (ValueError, LookupError, OSError) as error:
        raise ValueError(f"the Checkpoint name axis could not load {value!r} ({error}); was it removed or changed? "
                         "Refresh the checkpoint list and plot again.") from error


def refiner_choices(context: PlotContext) -> list[str]:
    return ["None", *checkpoint_names(context)]  # A1111's: "None" first, then the checkpoints


def apply_refiner(params, value, values, context):
    """A1111's Refiner checkpoint axis: the cell refines with checkpoint `value` (at the call's switch point), or,
    with "None", without a refiner. The call's `refiner_config_dir` (the configs of its single-file refiners) goes
    with a single-file cell only: a "None" cell has no refiner, and a diffusers folder or hub id has its own configs."""
    from pipelines.refiner_configs import config_dir_for_refiner

    if str(value).strip().lower() == "none":
        refiner = None
    else:
        refiner = context.refiner_source(find_checkpoint_name(context, value))
    config_dir = config_dir_for_refiner(refiner, params.refiner_config_dir)
    return replace(params, refiner=refiner, refiner_config_dir=config_dir)


def check_refiners(params, values, context) -> None:
    named = [value for value in values if str(value).strip().lower() != "none"]
    if named and context.refiner_source is None:
        raise ValueError("The Refiner checkpoint axis needs the caller's checkpoint list, which it did not give (the "
                         "Python API: pass refiner_source=callable(name) -> checkpoint file and checkpoint_names); "
                         "run the plot from the web UI or the HTTP API, or plot only 'None'.")
    unknown = [value for value in named if find_checkpoint_name(context, value) is None]
    if unknown:
        valid = ", ".join(repr(name) for name in refiner_choices(context))
        raise ValueError(f"Unknown checkpoint {unknown[0]!r} on the Refiner checkpoint axis. Valid names: {valid}.")


def apply_size(params, value, values, context):
    width, height = parse_size(value)
    return replace(params, width=width, height=height)


def parse_size(value: str) -> tuple[int, int]:
    parts = str(value).lower().replace(" ", "").split("x")
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        raise ValueError(f"Size value {value!r} must be WIDTHxHEIGHT, such as 512x768.")
    return int(parts[0]), int(parts[1])


def check_sizes(params, values, context) -> None:
    for value in values:
        parse_size(value)


def hires_upscalers(context: PlotContext) -> list[str]:
    from pipelines.hires import hires_upscaler_names

    return hires_upscaler_names()


def style_names(context: PlotContext) -> list[str]:
    return list(context.styles.names()) if context.styles is not None else []


def apply_styles(params, value, values, context):
    """A1111 adds the value's comma-separated styles to the call's; here they are merged into its prompts."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    prompt, negative = context.styles.apply(params.prompt, params.negative_prompt, names)
    return replace(params, prompt=prompt, negative_prompt=negative)


def check_styles(params, values, context) -> None:
    if context.styles is None:
        raise ValueError("The Styles axis needs a styles file; start the server with --styles-file styles.csv.")
    if not isinstance(params.prompt, str) or not isinstance(params.negative_prompt, str):
        raise ValueError("The Styles axis needs one prompt for the whole batch, not a prompt per image.")
    known = style_names(context)
    for value in values:
        for name in (name.strip() for name in value.split(",")):
            if name and name not in known:
                raise ValueError(f"Unknown style {name!r} on the Styles axis. Valid styles: "
                                 f"{', '.join(map(repr, known)) or '(none)'}.")


def apply_face_restore(params, value, values, context):
    """A1111's: "CodeFormer" / "GFPGAN" restore with that model; true/yes/y/1 with the call's; anything else off."""
    folded = str(value).strip().lower()
    if folded == "codeformer":
        return replace(params, restore_faces=True, face_restoration_model="CodeFormer")
    if folded == "gfpgan":
        return replace(params, restore_faces=True, face_restoration_model="GFPGAN")
    return replace(params, restore_faces=folded in ("true", "yes", "y", "1"))


def true_false(context: PlotContext) -> list[str]:
    return ["False", "True"]


def check_true_false(params, values, context) -> None:
    for value in values:
        if str(value).strip().lower() not in ("true", "false"):
            raise ValueError(f"{value!r} must be True or False.")


# A1111's `randn_source` choices, in its order (pipelines.rng_source): each cell's `rng_source`, as A1111's axis sets
# the option. "GPU" runs where it is the CPU noise, on a model on the CPU (`check_rng_source_pipe`).
def rng_source_choices(context: PlotContext) -> list[str]:
    return list(RNG_SOURCES)


def find_rng_source(value: Any) -> str | None:
    folded = str(value).strip().casefold()
    return next((source for source in RNG_SOURCES if source.casefold() == folded), None)


def apply_rng_source(params, value, values, context):
    return replace(params, rng_source=find_rng_source(value))


def check_rng_sources(params, values, context) -> None:
    unknown = [value for value in values if find_rng_source(value) is None]
    if unknown:
        raise ValueError(f"RNG source {unknown[0]!r} is not one of {', '.join(map(repr, RNG_SOURCES))}.")


def check_rng_source_pipe(pipe, values) -> None:
    """"GPU" only where it is the CPU source's noise: on a model running on the CPU (the pipeline's own rule)."""
    if any(find_rng_source(value) == "GPU" for value in values):
        check_rng_source_device("GPU", getattr(pipe.model, "device", None))


XYZ_AXES: Registry[AxisOption] = Registry("X/Y/Z plot axis type")


def _register(*axes: AxisOption) -> None:
    for axis in axes:
        XYZ_AXES.register(axis.label, axis)


def check_image_cfg_pipe(pipe, values) -> None:
    """Image CFG Scale changes only an instruct-pix2pix checkpoint's images (A1111 sets it to None for other models):
    on another model every cell would be the same image, so the plot is refused before any cell runs."""
    from pipelines.instruct_pix2pix import is_instruct_pix2pix_unet

    if not is_instruct_pix2pix_unet(pipe.model.unet):
        raise ValueError(f"Image CFG Scale applies to instruct-pix2pix checkpoints only (an 8-channel UNet, as A1111 "
                         f"applies it), and {pipe.model.name!r} is not one; load an instruct-pix2pix model, or plot "
                         "CFG Scale or Denoising instead.")


# A1111 1.10's list, in its order: a client's `x_type` index counts in it (txt2img and img2img each skip the other's).
_register(
    AxisOption("Nothing", NOTHING, apply_nothing, format_value=lambda axis, value: ""),
    AxisOption("Seed", INT, set_field("seed")),
    AxisOption("Var. seed", INT, set_field("subseed")),
    AxisOption("Var. strength", FLOAT, set_field("subseed_strength")),
    AxisOption("Steps", INT, set_field("steps")),
    AxisOption("Hires steps", INT, set_field("hr_second_pass_steps"), kinds=TXT2IMG,
               needs_field="hr_second_pass_steps"),
    AxisOption("CFG Scale", FLOAT, set_field("cfg_scale")),
    AxisOption("Image CFG Scale", FLOAT, set_field("image_cfg_scale"), kinds=IMG2IMG, needs_field="image_cfg_scale",
               check_pipe=check_image_cfg_pipe),
    AxisOption("Prompt S/R", TEXT, apply_prompt_sr, format_value=value_only, check=check_prompt_sr),
    AxisOption("Prompt order", PERMUTATIONS, apply_prompt_order, format_value=joined, check=check_prompt_order),
    AxisOption("Sampler", TEXT, set_field("sampler"), format_value=value_only, choices=sampler_names,
               check=check_samplers),
    AxisOption("Hires sampler", TEXT, apply_hires_sampler, kinds=TXT2IMG, choices=sampler_names,
               check=check_hires_samplers, needs_field="hr_sampler"),
    AxisOption("Checkpoint name", TEXT, apply_nothing, format_value=file_name, choices=checkpoint_names,
               check=check_checkpoints, cost=1.0, switch=switch_checkpoint),
    AxisOption("Negative Guidance minimum sigma", FLOAT, set_field("s_min_uncond")),
    AxisOption("Sigma Churn", FLOAT, set_sampler_parameter("s_churn")),
    AxisOption("Sigma min", FLOAT, set_sampler_parameter("s_tmin")),
    AxisOption("Sigma max", FLOAT, set_sampler_parameter("s_tmax")),
    AxisOption("Sigma noise", FLOAT, set_sampler_parameter("s_noise")),
    AxisOption("Schedule type", TEXT, set_field("schedule_type"), choices=schedule_names, check=check_schedules),
    AxisOption("Schedule min sigma", FLOAT, set_sampler_parameter("sigma_min")),
    AxisOption("Schedule max sigma", FLOAT, set_sampler_parameter("sigma_max")),
    AxisOption("Schedule rho", FLOAT, set_sampler_parameter("rho")),
    AxisOption("Skip Early CFG", FLOAT, set_field("skip_early_cond")),
    AxisOption("Beta schedule alpha", FLOAT, set_sampler_parameter("beta_dist_alpha")),
    AxisOption("Beta schedule beta", FLOAT, set_sampler_parameter("beta_dist_beta")),
    AxisOption("Eta", FLOAT, set_field("eta")),
    AxisOption("Clip skip", INT, set_field("clip_skip")),
    AxisOption("Denoising", FLOAT, set_field("denoising_strength"), needs_field="denoising_strength"),
    AxisOption("Initial noise multiplier", FLOAT, set_field("initial_noise_multiplier"),
               needs_field="initial_noise_multiplier"),
    AxisOption("Extra noise", FLOAT, set_field("img2img_extra_noise"), needs_field="img2img_extra_noise"),
    AxisOption("Hires upscaler", TEXT, set_field("hr_upscaler"), kinds=TXT2IMG, choices=hires_upscalers,
               needs_field="hr_upscaler"),
    AxisOption("Cond. Image Mask Weight", FLOAT, set_field("inpainting_mask_weight"), kinds=IMG2IMG),
    AxisOption("VAE", TEXT, apply_nothing, choices=vae_choices, check=check_vaes, cost=0.7, switch=switch_vae),
    AxisOption("Styles", TEXT, apply_styles, choices=style_names, check=check_styles),
    AxisOption("UniPC Order", INT, set_sampler_parameter("uni_pc_order"), cost=0.5),
    AxisOption("Face restore", TEXT, apply_face_restore, format_value=value_only),
    AxisOption("Token merging ratio", FLOAT, apply_nothing, check=check_token_merging_values,
               switch=switch_token_merging, check_pipe=check_token_merging_pipe),
    AxisOption("Token merging ratio high-res", FLOAT, set_field("token_merging_ratio_hr"),
               check=check_token_merging_hr_values, check_pipe=check_token_merging_hr_pipe,
               needs_field="token_merging_ratio_hr"),
    AxisOption("Always discard next-to-last sigma", TEXT,
               set_sampler_parameter("always_discard_next_to_last_sigma", boolean=True), choices=true_false,
               check=check_true_false),
    AxisOption("SGM noise multiplier", TEXT, set_sampler_parameter("sgm_noise_multiplier", boolean=True),
               choices=true_false, check=check_true_false),
    AxisOption("Refiner checkpoint", TEXT, apply_refiner, format_value=file_name, choices=refiner_choices,
               check=check_refiners, cost=1.0),
    AxisOption("Refiner switch at", FLOAT, set_field("refiner_switch_at")),
    AxisOption("RNG source", TEXT, apply_rng_source, choices=rng_source_choices, check=check_rng_sources,
               check_pipe=check_rng_source_pipe),
    AxisOption("FP8 mode", TEXT, apply_nothing, choices=fp8_choices, check=check_fp8_values, cost=0.9,
               switch=switch_fp8, check_pipe=check_fp8_pipe),
    AxisOption("Size", TEXT, apply_size, check=check_sizes),
)


def axes_for(kind: str) -> list[AxisOption]:
    """The axis types of a txt2img or img2img plot in A1111's order (the order its `x_type` indexes count)."""
    return [axis for _, axis in XYZ_AXES.items() if kind in axis.kinds]
