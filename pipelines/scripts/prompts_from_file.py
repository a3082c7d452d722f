"""A1111's "Prompts from file or textbox" script: one generation per line of a list, each line a prompt or a set of
options (`--prompt "a cat" --steps 20`, read by `pipelines.scripts.prompt_lines`), the call's params the rest.

From Python::

    from pipelines.scripts import prompts_from_file
    config = prompts_from_file.prompts_config("a cat\\n--prompt a dog --steps 30 --n_iter 2", iterate_seed=True)
    result = prompts_from_file.run(pipe, params, config)   # every line's images with their infotexts, no grid

As A1111's: a line's prompt goes before the call's prompt (or after it, `prompt_position="end"`), joined by a space,
or replaces it when the call's is empty; the same for the negative prompt. Seeds: a -1 seed stays random per line
unless "Iterate seed every line" or "Use same random seed for all lines" draws it once; iterating adds the call's
batch size x batch count after each line. A line's own `--seed` wins for that line. No grid is made unless
`make_combined` (A1111's later "Make a combined image containing all outputs"), which puts one grid of every image
first. Every line is checked (options, samplers, styles, checkpoints, the pipeline's limits) before the first image.

A line's `--sd_model "name"` generates it with that checkpoint (`pipelines.scripts.prompt_line_checkpoints`: each
checkpoint loaded once, the images in the lines' order, the infotext naming the checkpoint); it needs the caller's
`switch_checkpoint` and `checkpoint_names`, which the server passes and a plain Python call does not.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pipelines.control import GenerationControl
from pipelines.generation import GenerationResult
from pipelines.scripts.grid_budget import check_grid_size, images_per_call, output_size
from pipelines.scripts.image_budget import check_script_images, images_of_calls, script_image_cap
from pipelines.scripts.prompt_line_checkpoints import line_checkpoints, run_order, switched_pipeline
from pipelines.scripts.prompt_lines import OPTIONS, PromptLine, parse_prompt_lines
from pipelines.scripts.registry import ScriptArg, ScriptResult
from pipelines.scripts.script_args import check_choice, check_flag, overall_progress, positional_args
from pipelines.seeds import resolve_seed

TITLE = "Prompts from file or textbox"
ARG_NAMES = ("checkbox_iterate", "checkbox_iterate_batch", "prompt_position", "prompt_txt", "make_combined")
ARG_DEFAULTS = (False, False, "start", "", False)
POSITIONS = ("start", "end")
# Lines are jobs of one queue entry: as X/Y/Z plot's 1,000 cells, a longer list is several requests.
MAX_LINES = 1000

__all__ = ["TITLE", "PromptsFromFileConfig", "line_params", "parse_script_args", "prompts_config", "run"]


@dataclass(frozen=True)
class PromptsFromFileConfig:
    """The parsed lines and A1111's controls: "Iterate seed every line", "Use same random seed for all lines",
    "Insert prompts at the" start / end, and "Make a combined image containing all outputs"."""

    jobs: tuple[PromptLine, ...]
    iterate_seed: bool = False
    same_seed: bool = False
    prompt_position: str = "start"
    make_combined: bool = False


def prompts_config(text: str, *, iterate_seed: bool = False, same_seed: bool = False,
                   prompt_position: str = "start", make_combined: bool = False) -> PromptsFromFileConfig:
    """A checked config from the list's text (a file's contents or the textbox's) and the options."""
    return parse_script_args([iterate_seed, same_seed, prompt_position, text, make_combined])


def parse_script_args(script_args: Any, kind: str = "txt2img", **context: Any) -> PromptsFromFileConfig:
    """A1111's positional script_args [checkbox_iterate, checkbox_iterate_batch, prompt_position, prompt_txt,
    make_combined] (the last optional) as a checked config; ValueError naming the slot or the line."""
    values = positional_args(TITLE, script_args, ARG_NAMES, ARG_DEFAULTS)
    if not isinstance(values["prompt_txt"], str):
        raise ValueError(f"script_args prompt_txt: must be the list's text, got {type(values['prompt_txt']).__name__}.")
    # counted before the lines are read: shlex-splitting 100,000 option lines took 10 s of a request thread
    count = sum(1 for line in values["prompt_txt"].splitlines() if line.strip())
    if count > MAX_LINES:
        raise ValueError(f"script_args prompt_txt: {count:,} lines, more than {MAX_LINES:,} in one job; split the "
                         "list into several requests.")
    try:
        jobs = parse_prompt_lines(values["prompt_txt"])
    except ValueError as error:
        raise ValueError(f"script_args prompt_txt, {error}") from None
    if not jobs:
        raise ValueError("script_args prompt_txt: the list has no lines; give one prompt (or --options) per line.")
    return PromptsFromFileConfig(jobs, check_flag("checkbox_iterate", values["checkbox_iterate"]),
                                 check_flag("checkbox_iterate_batch", values["checkbox_iterate_batch"]),
                                 check_choice("prompt_position", values["prompt_position"], POSITIONS),
                                 check_flag("make_combined", values["make_combined"]))


def script_args(kind: str, **context: Any) -> list[ScriptArg]:
    return [ScriptArg("Iterate seed every line", False), ScriptArg("Use same random seed for all lines", False),
            ScriptArg("Insert prompts at the", "start", choices=list(POSITIONS)),
            ScriptArg("List of prompt inputs", ""),
            ScriptArg("Make a combined image containing all outputs (if more than one)", False)]


def _joined(line_text: str, call_text: str, position: str) -> str:
    if not line_text or not call_text:  # A1111 sets the line's text as it is when either is empty
        return line_text
    return f"{line_text} {call_text}" if position == "start" else f"{call_text} {line_text}"


def _sampler_name(value: str, line: PromptLine) -> str:
    """The sampler a line names, in any case or by an alias (A1111's samplers_map)."""
    from pipelines.samplers import list_samplers

    for sampler in list_samplers():
        if value.lower() in (name.lower() for name in (sampler["name"], *sampler.get("aliases", []))):
            return sampler["name"]
    names = ", ".join(sampler["name"] for sampler in list_samplers())
    raise ValueError(f"line {line.number}: unknown sampler {value!r} in --sampler_name; valid: {names}.")


def line_params(params, line: PromptLine, config: PromptsFromFileConfig, seed: int, styles=None):
    """The call's params with `line`'s options set, its prompts placed, its styles merged and `seed` unless the line
    sets its own."""
    fields: dict[str, Any] = {"seed": seed}
    for name, value in line.options.items():
        target = OPTIONS[name][2]
        if target is not None and target != "styles":
            fields[target] = value
    if "sampler" in fields:
        fields["sampler"] = _sampler_name(fields["sampler"], line)
    for name in ("prompt", "negative_prompt"):
        if name in fields:
            fields[name] = _joined(fields[name], getattr(params, name), config.prompt_position)
    unknown = [name for name in fields if not hasattr(params, name)]
    if unknown:
        raise ValueError(f"line {line.number}: this call has no {unknown[0]!r} to set.")
    result = replace(params, **fields)
    names = [name.strip() for name in line.get("styles", "").split(",") if name.strip()]
    if names:
        if styles is None:
            raise ValueError(f"line {line.number}: --styles needs a styles file; start the server with --styles-file "
                             "(the Python API: pass styles=StyleLibrary).")
        try:
            prompt, negative = styles.apply(result.prompt, result.negative_prompt, names)
        except ValueError as error:
            raise ValueError(f"line {line.number}: {error}") from None
        result = replace(result, prompt=prompt, negative_prompt=negative)
    return result


def plan_lines(params, config: PromptsFromFileConfig, styles=None) -> list:
    """Every line's params in order, the seeds A1111's way; ValueError naming the line before anything runs."""
    if not isinstance(params.prompt, str) or not isinstance(params.negative_prompt, str):
        raise ValueError("Prompts from file needs one prompt and negative prompt for the call, not one per image.")
    seed = params.seed
    if (config.iterate_seed or config.same_seed) and seed == -1:
        seed = resolve_seed(seed)
    planned = []
    for line in config.jobs:
        planned.append(line_params(params, line, config, seed, styles))
        if config.iterate_seed:
            seed += params.batch_size * params.batch_count
    if config.make_combined:  # its grid holds every image of every line, each at the largest image's size
        check_grid_size("Prompts from file: the combined",
                        [output_size(call) for call in planned for _ in range(images_per_call(call))],
                        "use fewer lines or images per line, or turn off the combined image")
    return planned


def describe_line(config: PromptsFromFileConfig, index: int) -> str:
    """Call `index` of `planned_params` by its line in the list ("line 12"), for errors."""
    return f"line {config.jobs[index].number}"


def planned_params(params, config: PromptsFromFileConfig, **context: Any) -> list:
    """Every line's params, for a server's own checks before it queues the list: its `--sd_model` names checked
    against `context["checkpoint_names"]` first, then the script-image cap."""
    line_checkpoints(config.jobs, context)
    planned = plan_lines(params, config, context.get("styles"))
    check_list_images(planned, script_image_cap(context))
    return planned


def check_list_images(planned: list, cap: int) -> None:
    """ValueError when the lines generate more than `cap` images in all (each line its batch size x count)."""
    check_script_images("Prompts from file", images_of_calls(planned), cap,
                        f"{len(planned):,} lines x each line's batch size x batch count",
                        "use fewer lines or a smaller batch size or count (a line's --batch_size / --n_iter "
                        "included)")


def run(pipe, params, config: PromptsFromFileConfig, callback=None, control: GenerationControl | None = None,
        **context: Any) -> ScriptResult:
    """Generate every line with `pipe` (txt2img, img2img or hires fix). `context`: `styles` (a StyleLibrary) for
    lines with --styles; `switch_checkpoint(name) -> pipeline` and `checkpoint_names` for lines with --sd_model (the
    caller puts its own checkpoint back afterwards). The result holds every image with its infotext, in the lines'
    order; a line with --do_not_save_samples true keeps its images out of `samples` (what is saved). Interrupt stops
    after the current line."""
    control = control or GenerationControl()
    checkpoints = line_checkpoints(config.jobs, context)
    planned = plan_lines(params, config, context.get("styles"))
    check_list_images(planned, script_image_cap(context, pipe))
    for line, line_call in zip(config.jobs, planned):
        try:
            pipe.check_inputs(replace(line_call))
        except (ValueError, TypeError) as error:
            raise type(error)(f"line {line.number}: {error}") from None
    total = sum(line_call.batch_count for line_call in planned)
    generated_by_line: dict[int, GenerationResult] = {}
    done, current = 0, None
    for position, at in enumerate(run_order(checkpoints)):
        if control.interrupted:
            break
        if checkpoints[at] != current:  # runs are grouped: each checkpoint is loaded once
            pipe = switched_pipeline(context["switch_checkpoint"], checkpoints[at], config.jobs[at].number, position,
                                     len(planned))
            current = checkpoints[at]
        line_call = planned[at]
        generated_by_line[at] = pipe(line_call, callback=overall_progress(callback, done, total), control=control)
        done += line_call.batch_count
    result, samples = ScriptResult(), GenerationResult()
    for at, line in enumerate(config.jobs):  # the lines' order, whatever order they ran in
        generated = generated_by_line.get(at)
        if generated is None:  # not reached: interrupted
            continue
        result.subseed = generated.subseed if result.subseed is None else result.subseed
        for index, (image, seed, text) in enumerate(zip(generated.images, generated.seeds, generated.infotexts)):
            result.add(image, seed, text)
            if not line.get("do_not_save_samples", False):
                samples.add_from(generated, index)
    result.samples = samples
    result.interrupted = samples.interrupted = control.interrupted
    if config.make_combined and len(result.images) > 1:
        from pipelines.image_grid import image_grid

        result.images.insert(0, image_grid(result.images))
        result.seeds.insert(0, result.seeds[0])
        result.infotexts.insert(0, "\n".join(result.infotexts))
        result.index_of_first_image = 1
    return result
