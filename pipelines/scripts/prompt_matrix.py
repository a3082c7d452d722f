"""A1111's "Prompt matrix" script: `|` splits a prompt into a fixed first part and optional parts, and every
combination of the optional parts is one image (2^n for n parts), drawn as a grid labelled with the parts.

From Python::

    from pipelines.scripts import prompt_matrix
    config = prompt_matrix.PromptMatrixConfig(different_seeds=True)
    result = prompt_matrix.run(pipe, Txt2ImgParams(prompt="a cat|red hat|at night", ...), config)
    # result.images[0]: the 2x2 grid; result.images[1:]: "a cat", "a cat, red hat", "a cat, at night", ...

As A1111's (scripts/prompt_matrix.py): combination c holds optional part i when bit i of c is set; the parts join
the first one with ", " (or " "), after it or, with `put_at_start`, before it. Every image has the call's seed
(drawn once if -1) unless `different_seeds`, then image c has seed + c. The call's batch size is kept and the batch
count becomes what covers every combination (the last batch may be smaller); each image's infotext carries its own
prompt. The grid has 2^floor(n/2) rows: the first ceil(n/2) parts label the columns and the rest the rows, each label
black where the part is in that cell and struck-through grey where it is not (A1111's `draw_prompt_matrix`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pipelines.control import GenerationControl
from pipelines.generation import GenerationResult
from pipelines.scripts.grid_budget import check_grid_size, output_size
from pipelines.scripts.image_budget import check_script_images, images_of_calls, script_image_cap
from pipelines.scripts.registry import ScriptArg, ScriptResult
from pipelines.scripts.script_args import (MAX_MARGIN, check_choice, check_flag, check_margin, overall_progress,
                                           positional_args)
from pipelines.seeds import image_generators, resolve_seed

TITLE = "Prompt matrix"
GRID_PREFIX = "prompt_matrix"  # A1111 saves the grid as prompt_matrix-NNNN.png
ARG_NAMES = ("put_at_start", "different_seeds", "prompt_type", "variations_delimiter", "margin_size")
ARG_DEFAULTS = (False, False, "positive", "comma", 0)
PROMPT_TYPES = ("positive", "negative")
DELIMITERS = {"comma": ", ", "space": " "}
# 2^n images: 9 optional parts are 512 images, already a long hold on the worker; 10 would be 1,024 (over X/Y/Z
# plot's 1,000-cell cap for one job). A bigger study is several matrices.
MAX_OPTIONAL_PARTS = 9

__all__ = ["TITLE", "PromptMatrixConfig", "matrix_prompts", "parse_script_args", "plan_batches", "run"]


@dataclass(frozen=True)
class PromptMatrixConfig:
    """A1111's five controls: "Put variable parts at start of prompt", "Use different seed for each picture",
    "Select prompt" (positive / negative), "Select joining char" (comma / space), "Grid margins (px)"."""

    put_at_start: bool = False
    different_seeds: bool = False
    prompt_type: str = "positive"
    variations_delimiter: str = "comma"
    margin_size: int = 0

    def __post_init__(self) -> None:
        for slot in ARG_NAMES[:2]:
            check_flag(slot, getattr(self, slot))
        object.__setattr__(self, "prompt_type", check_choice("prompt_type", self.prompt_type, PROMPT_TYPES))
        object.__setattr__(self, "variations_delimiter",
                           check_choice("variations_delimiter", self.variations_delimiter, tuple(DELIMITERS)))
        object.__setattr__(self, "margin_size", check_margin("margin_size", self.margin_size))


def parse_script_args(script_args: Any, kind: str = "txt2img", **context: Any) -> PromptMatrixConfig:
    """A1111's positional script_args [put_at_start, different_seeds, prompt_type, variations_delimiter,
    margin_size] as a checked config; ValueError naming the slot."""
    values = positional_args(TITLE, script_args, ARG_NAMES, ARG_DEFAULTS)
    return PromptMatrixConfig(**{name: check_flag(name, values[name]) if index < 2 else values[name]
                                 for index, name in enumerate(ARG_NAMES)})


def script_args(kind: str, **context: Any) -> list[ScriptArg]:
    return [ScriptArg("Put variable parts at start of prompt", False),
            ScriptArg("Use different seed for each picture", False),
            ScriptArg("Select prompt", "positive", choices=list(PROMPT_TYPES)),
            ScriptArg("Select joining char", "comma", choices=list(DELIMITERS)),
            ScriptArg("Grid margins (px)", 0, minimum=0, maximum=MAX_MARGIN, step=2)]


def matrix_prompts(prompt: str, put_at_start: bool = False, delimiter: str = ", ") -> list[str]:
    """Every combination's prompt, combination c holding optional part i when bit i of c is set.

    Exactly A1111's strings: optional parts are stripped of spaces and commas, the first part is kept as written
    ("a cat |red" gives "a cat , red"; CLIP's tokenizer reads it as "a cat, red"), so infotexts match A1111's."""
    first, *optional = prompt.split("|")
    prompts = []
    for combination in range(2 ** len(optional)):
        chosen = [part.strip().strip(",") for bit, part in enumerate(optional) if combination & (1 << bit)]
        prompts.append(delimiter.join(chosen + [first] if put_at_start else [first] + chosen))
    return prompts


@dataclass(frozen=True)
class MatrixBatch:
    """One call: its params (prompts of its combinations, seed -1: `seeds` decide) and each image's seed."""

    params: Any
    seeds: tuple[int, ...]


def check_matrix(params, config: PromptMatrixConfig) -> list[str]:
    """The prompt field's matrix parts; ValueError before anything runs (a prompt per image, too many parts, a grid
    over the size cap)."""
    field = "prompt" if config.prompt_type == "positive" else "negative_prompt"
    text = getattr(params, field)
    if not isinstance(text, str):
        raise ValueError(f"Prompt matrix needs one {field} for the call (its '|' parts make the images), "
                         "not one per image.")
    parts = text.split("|")
    optional = len(parts) - 1
    if optional > MAX_OPTIONAL_PARTS:
        raise ValueError(f"Prompt matrix: the {field} has {optional} optional '|' parts, making 2^{optional} = "
                         f"{2 ** optional:,} images; the most is {MAX_OPTIONAL_PARTS} parts "
                         f"({2 ** MAX_OPTIONAL_PARTS} images, one job holding the queue). Split it into smaller "
                         "matrices.")
    check_grid_size("Prompt matrix: its", [output_size(params)] * 2 ** optional,
                    "use fewer '|' parts, a smaller size or no hires fix")
    return parts


def plan_batches(params, config: PromptMatrixConfig) -> list[MatrixBatch]:
    """The calls that make the matrix, in combination order: batches of the call's batch size (the last may be
    smaller), seeds made concrete (pass params with seed and subseed already drawn to get the same seeds twice)."""
    check_matrix(params, config)
    field = "prompt" if config.prompt_type == "positive" else "negative_prompt"
    prompts = matrix_prompts(getattr(params, field), config.put_at_start,
                             DELIMITERS[config.variations_delimiter])
    seed, subseed = resolve_seed(params.seed), resolve_seed(params.subseed)
    batches = []
    for start in range(0, len(prompts), params.batch_size):
        chunk = prompts[start:start + params.batch_size]
        seeds = tuple(seed + (start + k if config.different_seeds else 0) for k in range(len(chunk)))
        # image i of the matrix keeps A1111's variation seed subseed + i
        batch_params = replace(params, **{field: chunk}, seed=-1, subseed=subseed + start, batch_size=len(chunk),
                               batch_count=1)
        batches.append(MatrixBatch(batch_params, seeds))
    return batches


def planned_params(params, config: PromptMatrixConfig, **context: Any) -> list:
    """Every call's params (after the script-image cap and the legend's `font` check), for a server's own checks
    before it queues the matrix."""
    from pipelines.scripts.legend_font import legend_font

    legend_font(context)
    batches = plan_batches(params, config)
    check_matrix_images(batches, script_image_cap(context))
    return [batch.params for batch in batches]


def check_matrix_images(batches: list[MatrixBatch], cap: int) -> None:
    """ValueError when the matrix's combinations are more than `cap` images (one image each)."""
    count = images_of_calls([batch.params for batch in batches])
    check_script_images("Prompt matrix", count, cap, f"one per combination of the '|' parts: {count:,}",
                        "use fewer '|' parts")


def run(pipe, params, config: PromptMatrixConfig, callback=None, control: GenerationControl | None = None,
        **context: Any) -> ScriptResult:
    """Generate the matrix with `pipe` (txt2img, img2img or hires fix) on `params`: the annotated grid first, then
    every combination's image. Interrupt stops after the current batch (cells not reached are blank). `context`:
    `font` (A1111's `font` option: the legend's font file; None: automatic), `max_script_images`."""
    from pipelines.scripts.legend_font import legend_font

    font = legend_font(context)
    control = control or GenerationControl()
    params = replace(params, seed=resolve_seed(params.seed), subseed=resolve_seed(params.subseed))
    parts = check_matrix(params, config)
    batches = plan_batches(params, config)
    check_matrix_images(batches, script_image_cap(context, pipe))
    for batch in batches:  # the pipeline's own checks, every call, before the first generation
        pipe.check_inputs(replace(batch.params))
    samples = GenerationResult()
    for position, batch in enumerate(batches):
        if control.interrupted:
            break
        result = pipe(batch.params, callback=overall_progress(callback, position, len(batches)), control=control,
                      generator=image_generators(list(batch.seeds)))
        for index in range(len(result.images)):
            samples.add_from(result, index)
    samples.interrupted = control.interrupted
    return assemble(parts, samples, config, params.subseed, font)


def assemble(parts: list[str], samples: GenerationResult, config: PromptMatrixConfig, subseed,
             font: str | None = None) -> ScriptResult:
    """The grid (cells not reached are blank) with its labels in `font` (a checked font path; None: automatic), then
    the images; the grid takes the first image's infotext and seed, as A1111's."""
    from PIL import Image

    from pipelines.grid_annotations import draw_grid_annotations
    from pipelines.image_grid import image_grid

    if not samples.images:
        return ScriptResult(interrupted=samples.interrupted, samples=samples, grid_prefix=GRID_PREFIX)
    count = 2 ** (len(parts) - 1)
    width, height = (max(sizes) for sizes in zip(*(image.size for image in samples.images)))
    cells = samples.images + [Image.new("RGB", (width, height))] * (count - len(samples.images))
    grid = image_grid(cells, rows=1 << ((len(parts) - 1) // 2))
    hor, ver = matrix_annotations(parts)
    grid = draw_grid_annotations(grid, width, height, hor, ver, config.margin_size, font)
    return ScriptResult(images=[grid, *samples.images], seeds=[samples.seeds[0], *samples.seeds],
                        infotexts=[samples.infotexts[0], *samples.infotexts], index_of_first_image=1,
                        grid_prefix=GRID_PREFIX, samples=samples, interrupted=samples.interrupted, subseed=subseed)


def matrix_annotations(parts: list[str]):
    """(column labels, row labels) as A1111's `draw_prompt_matrix`: the first ceil(n/2) optional parts across the
    top, the rest down the left, each active where its bit is set in the column's (row's) number."""
    from pipelines.grid_annotations import GridAnnotation

    optional = [part.strip() for part in parts[1:]]
    boundary = (len(optional) + 1) // 2
    across, down = optional[:boundary], optional[boundary:]

    def labels(texts: list[str]):
        return [[GridAnnotation(text, is_active=bool(position & (1 << bit))) for bit, text in enumerate(texts)]
                for position in range(1 << len(texts))]
    return labels(across), labels(down)
