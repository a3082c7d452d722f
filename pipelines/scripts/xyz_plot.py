"""A1111's "X/Y/Z plot" script: one generation per combination of up to three axes' values, drawn as a labelled grid.

From Python::

    from pipelines.scripts import xyz_plot
    config = xyz_plot.xyz_config(("Steps", "10,20"), ("CFG Scale", "5-7 (+2)"))
    result = xyz_plot.run(pipe, params, config)   # result.images[0] is the grid; result.save_grids(folder)

Each cell is the call's params with the axes' values applied (the caller's params are never changed). Every cell is
checked by the pipeline before the first one is generated, so a bad value fails the plot at once, not half-way; a
fault while generating stops the plot (as A1111's does) with an error naming the cell by its axis values.
Cells run with the most expensive axis outermost (a checkpoint is switched once per value, as in A1111), progress
counts over all cells, Interrupt stops the plot (cells not reached are blank, as A1111's), and Skip ends the current
cell's batch. Seeds: -1 on the call or on a Seed / Var. seed axis is drawn once for the whole plot unless
`no_fixed_seeds` ("Keep -1 for seeds"); "Vary seeds for X/Y/Z" add the cell's position to its seed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pipelines.control import GenerationControl
from pipelines.generation import GenerationResult
from pipelines.scripts.grid_budget import batch_grid_size, check_grid_size
from pipelines.scripts.image_budget import check_script_images, images_of_calls, script_image_cap
from pipelines.scripts.legend_font import legend_font
from pipelines.scripts.registry import ScriptResult
from pipelines.scripts.xyz_axes import PlotContext
from pipelines.scripts.xyz_config import (MAX_CELLS, PlotAxis, XyzConfig, parse_script_args, script_args_info,
                                          xyz_config)
from pipelines.scripts.xyz_model_axes import ModelRestorer
from pipelines.seeds import resolve_seed

TITLE = "X/Y/Z plot"
GRID_PREFIX = "xyz_grid"  # A1111 saves the grids as xyz_grid-NNNN.png
SEED_AXES = ("Seed", "Var. seed")

__all__ = ["TITLE", "XyzConfig", "check_plot", "parse_script_args", "plan_order", "run", "xyz_config"]


@dataclass(frozen=True)
class PlotCell:
    """One generation of the plot: its position and its params."""

    ix: int
    iy: int
    iz: int
    params: Any

    def index(self, config: XyzConfig) -> int:
        """Its place in the grids: x fastest, then y, then z (A1111's `index`)."""
        nx, ny = len(config.x.values), len(config.y.values)
        return self.ix + self.iy * nx + self.iz * nx * ny


def plan_order(config: XyzConfig) -> list[tuple[int, int, int]]:
    """(ix, iy, iz) in generation order: the costliest axis outermost, the next one second (A1111's rule: an axis
    goes first only if strictly costlier than both others; ties keep z, then y, outermost)."""
    costs = {"x": config.x.option.cost, "y": config.y.option.cost, "z": config.z.option.cost}
    first, second = "z", "y"
    for axis, others in (("x", ("y", "z")), ("y", ("x", "z")), ("z", ("x", "y"))):
        if all(costs[axis] > costs[other] for other in others):
            first = axis
            second = others[0] if costs[others[0]] > costs[others[1]] else others[1]
            break
    third = ({"x", "y", "z"} - {first, second}).pop()
    sizes = {"x": len(config.x.values), "y": len(config.y.values), "z": len(config.z.values)}
    order = []
    for a in range(sizes[first]):
        for b in range(sizes[second]):
            for c in range(sizes[third]):
                position = {first: a, second: b, third: c}
                order.append((position["x"], position["y"], position["z"]))
    return order


def fix_seeds(params, config: XyzConfig) -> tuple[Any, XyzConfig]:
    """A1111's fix_seed and fix_axis_seeds: -1 (the call's seeds, and Seed / Var. seed axis values) drawn once,
    so every cell shares them; unchanged with `no_fixed_seeds`."""
    if config.no_fixed_seeds:
        return params, config
    params = replace(params, seed=resolve_seed(params.seed), subseed=resolve_seed(params.subseed))

    def fixed(axis: PlotAxis) -> PlotAxis:
        if axis.label not in SEED_AXES:
            return axis
        return replace(axis, values=tuple(resolve_seed(value) for value in axis.values))
    return params, replace(config, x=fixed(config.x), y=fixed(config.y), z=fixed(config.z))


def cell_params(params, config: XyzConfig, ix: int, iy: int, iz: int, context: PlotContext):
    """The call's params with the three axes' values applied, then "Vary seeds" (A1111's order)."""
    cell = params
    for axis, index in zip(config.axes, (ix, iy, iz)):
        cell = axis.option.apply(cell, axis.values[index], axis.values, context)
    nx = len(config.x.values) if config.vary_seeds_x else 1
    ny = len(config.y.values) if config.vary_seeds_y else 1
    offset = (ix if config.vary_seeds_x else 0) + (iy * nx if config.vary_seeds_y else 0) + \
        (iz * nx * ny if config.vary_seeds_z else 0)
    if offset and cell.seed != -1:  # a kept -1 stays random per cell anyway
        cell = replace(cell, seed=cell.seed + offset)
    return cell


def check_plot(params, config: XyzConfig, context: PlotContext) -> list[PlotCell]:
    """Every cell's params in generation order, after the axes' own checks (Prompt S/R's first value in the prompt,
    samplers, checkpoints, styles, fields the call lacks) and the size caps; ValueError before anything runs."""
    for name, axis in zip("XYZ", config.axes):
        option = axis.option
        if option.needs_field and not hasattr(params, option.needs_field):
            hires_field = option.needs_field.startswith("hr_") or option.needs_field.endswith("_hr")
            needs = "hires fix (enable_hr)" if hires_field else (
                "img2img or hires fix (enable_hr)" if option.needs_field == "denoising_strength" else "img2img")
            raise ValueError(f"{name} axis {option.label!r} needs {needs}, which this call does not use.")
        if option.check is not None:
            try:
                option.check(params, list(axis.values), context)
            except ValueError as error:
                raise ValueError(f"{name} axis: {error}") from None
    if config.cell_count > MAX_CELLS:
        raise ValueError(f"The plot has {config.cell_count} cells, more than {MAX_CELLS}; split it into smaller plots.")
    cells = [PlotCell(ix, iy, iz, cell_params(params, config, ix, iy, iz, context))
             for ix, iy, iz in plan_order(config)]
    check_grid_size("The plot's", [batch_grid_size(cell.params) for cell in cells],
                    "use fewer values, a smaller size or batch, or no hires fix")
    return cells


def cell_labels(config: XyzConfig, position: tuple[int, int, int]) -> str:
    """The cell at (ix, iy, iz) by its axes' labels ("Steps: 20, CFG Scale: 7"); "" on a plot of Nothing."""
    return ", ".join(axis.labels()[at] for axis, at in zip(config.axes, position) if not axis.is_nothing)


def describe_cell(config: XyzConfig, index: int) -> str:
    """Cell `index` of `planned_params` by its axes' labels ("cell Steps: 20, CFG Scale: 7"), for errors."""
    return "cell " + (cell_labels(config, plan_order(config)[index]) or str(index + 1))


def planned_params(params, config: XyzConfig, **context: Any) -> list:
    """Every cell's params (after `check_plot` and the script-image cap), for a server's own checks before it queues
    the plot (the legend's `font` too)."""
    legend_font(context)
    cells = check_plot(params, config, PlotContext.of(**context))
    check_plot_images(cells, script_image_cap(context))
    return [cell.params for cell in cells]


def check_plot_images(cells: list[PlotCell], cap: int) -> None:
    """ValueError when the plot's cells generate more than `cap` images in all (each its batch size x count)."""
    calls = [cell.params for cell in cells]
    check_script_images("The X/Y/Z plot", images_of_calls(calls), cap,
                        f"{len(cells):,} cells x their batch size x batch count",
                        "use fewer axis values or a smaller batch size or count")


def _cell_progress(callback, position: int, cells: int):
    """The pipeline's step callback, counting batches over the whole plot (A1111's job_count = cells * n_iter)."""
    if callback is None:
        return None

    def on_step(state):
        callback(replace(state, batch_index=position * state.batch_count + state.batch_index,
                         batch_count=cells * state.batch_count))
    return on_step


def _cell_image(images: list):
    """A cell shows its one image, or the grid of its batch (A1111 shows the cell's batch grid)."""
    if len(images) == 1:
        return images[0]
    from pipelines.image_grid import image_grid

    return image_grid(images)


def _stopped_at(config: XyzConfig, cell: PlotCell, position: int, cells: int) -> str:
    labels = cell_labels(config, (cell.ix, cell.iy, cell.iz))
    return f"X/Y/Z plot stopped at cell {position + 1} of {cells}" + (f" ({labels})" if labels else "")


def error_message(error: Exception) -> str:
    """What an error says (a KeyError's message, not its quoted repr)."""
    return str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)


def reworded(error: Exception, message: str) -> Exception:
    """`error` again with `message`: as its own type when that type takes a message (so a server still answers a
    ValueError as one), else as the first of ValueError, TypeError, OSError it is, else as a RuntimeError."""
    try:
        failure = type(error)(message)
        if error_message(failure) == message:
            return failure
    except Exception:  # an exception type with other constructor arguments
        pass
    base = next((base for base in (ValueError, TypeError, OSError) if isinstance(error, base)), RuntimeError)
    return base(message)


def _failed_cell(error: Exception, where: str) -> Exception:
    """`error` again with `where` (the cell) in front of its message (`reworded`)."""
    return reworded(error, f"{where}: {error_message(error)}")


class ModelSwitches:
    """The plot's axes that change the loaded model (Checkpoint name, FP8 mode, VAE, Token merging ratio), costliest
    first, and the value each last switched to: a costlier switch (a new checkpoint) makes the cheaper ones switch
    again. Axes that only need the model to allow their values (RNG source's GPU on a CPU model) are checked on every
    pipeline too."""

    def __init__(self, config: XyzConfig, context: PlotContext, restorer: ModelRestorer) -> None:
        ranked = [(axis, at) for at, axis in enumerate(config.axes) if axis.option.switch is not None]
        self.axes = sorted(ranked, key=lambda item: -item[0].option.cost)
        self.checked_only = [(axis, at) for at, axis in enumerate(config.axes)
                             if axis.option.switch is None and axis.option.check_pipe is not None]
        self.context, self.restorer = context, restorer
        self.current: list[Any] = [None] * len(self.axes)

    def check(self, pipe, below: int = 0) -> None:
        """The `check_pipe` of every axis cheaper than the one at `below` (all with 0), and of the axes that switch
        nothing, on `pipe`."""
        for axis, at in [*self.axes[below:], *self.checked_only]:
            if axis.option.check_pipe is not None:
                try:
                    axis.option.check_pipe(pipe, list(axis.values))
                except ValueError as error:
                    raise ValueError(f"{'XYZ'[at]} axis: {error}") from None

    def pipeline_for(self, pipe, cell: PlotCell):
        """`pipe` switched to the cell's values (unchanged when they are the last cell's)."""
        position = (cell.ix, cell.iy, cell.iz)
        for rank, (axis, at) in enumerate(self.axes):
            wanted = axis.values[position[at]]
            if self.current[rank] is not None and wanted == self.current[rank][0]:
                continue
            pipe = axis.option.switch(pipe, wanted, self.context, self.restorer)
            self.current[rank] = (wanted,)
            if rank + 1 < len(self.axes):  # a new checkpoint has its own VAE and no ToMe: the cheaper ones again
                self.current[rank + 1:] = [None] * (len(self.axes) - rank - 1)
                self.check(pipe, rank + 1)
        return pipe


def run(pipe, params, config: XyzConfig, callback=None, control: GenerationControl | None = None,
        **context: Any) -> ScriptResult:
    """Generate the plot with `pipe` (a txt2img, img2img or hires-fix pipeline) on `params`.

    `context`: `switch_checkpoint(name) -> pipeline` and `checkpoint_names` for the Checkpoint name axis,
    `switch_vae(name) -> pipeline` and `vae_names` for VAE, `styles` (a StyleLibrary) for Styles, `kind`
    ("txt2img" / "img2img"), `font` (A1111's `font` option: the legend's font file; None: automatic). Returns a
    `ScriptResult`: the grid (and, with include_sub_grids, one per Z value) first, then, with include_lone_images,
    every cell's images. What the Token merging ratio and FP8 mode axes changed
    on a model is put back when the plot ends or fails."""
    plot_context = PlotContext.of(**context)
    font = legend_font(context)
    control = control or GenerationControl()
    params, config = fix_seeds(params, config)
    cells = check_plot(params, config, plot_context)
    check_plot_images(cells, script_image_cap(context, pipe))
    restorer = ModelRestorer()
    switches = ModelSwitches(config, plot_context, restorer)
    switches.check(pipe)  # what the model can change (no ToMe on an int8 UNet), before any cell
    for position, cell in enumerate(cells):  # the pipeline's own checks, every cell, before the first generation
        try:
            pipe.check_inputs(replace(cell.params))
        except (ValueError, TypeError) as error:
            raise type(error)(f"X/Y/Z plot, {describe_cell(config, position)}: {error}") from None

    samples = GenerationResult()
    by_index: dict[int, GenerationResult] = {}
    try:
        for position, cell in enumerate(cells):
            if control.interrupted:
                break
            try:
                pipe = switches.pipeline_for(pipe, cell)
                result = pipe(cell.params, callback=_cell_progress(callback, position, len(cells)), control=control)
            except Exception as error:  # A1111 stops the plot too; the error says which cell
                raise _failed_cell(error, _stopped_at(config, cell, position, len(cells))) from error
            by_index[cell.index(config)] = result
            for index in range(len(result.images)):
                samples.add_from(result, index)
    finally:
        restorer.restore()
    samples.interrupted = control.interrupted
    return assemble(config, by_index, samples, params, font)


def assemble(config: XyzConfig, by_index: dict[int, GenerationResult], samples: GenerationResult,
             params, font: str | None = None) -> ScriptResult:
    """The plot's result from each cell's result (by grid index): grids with their infotexts, then sub images;
    legends in `font` (a checked font path; None: automatic)."""
    from PIL import Image

    from pipelines.grid_annotations import GridAnnotation, draw_grid_annotations
    from pipelines.image_grid import image_grid
    from pipelines.scripts.xyz_infotext import grid_infotext

    nx, ny, nz = (len(axis.values) for axis in config.axes)
    done = [result for result in by_index.values() if result.images]
    if not done:  # interrupted before the first image: nothing to draw
        return ScriptResult(interrupted=samples.interrupted, samples=samples, grid_prefix=GRID_PREFIX)
    size = _cell_image(done[0].images).size
    cell_images, cell_infotexts, cell_seeds = [], [], []
    for index in range(nx * ny * nz):
        result = by_index.get(index)
        if result is not None and result.images:
            cell_images.append(_cell_image(result.images))
            cell_infotexts.append(result.infotexts[0])
            cell_seeds.append(result.seeds[0])
        else:  # not reached (interrupted): blank, as A1111's
            cell_images.append(Image.new("RGB", size))
            cell_infotexts.append("")
            cell_seeds.append(params.seed)
    hor = [[GridAnnotation(label)] for label in config.x.labels()]
    ver = [[GridAnnotation(label)] for label in config.y.labels()]
    titles = [[GridAnnotation(label)] for label in config.z.labels()]
    sub_grids, sub_texts, sub_seeds = [], [], []
    for iz in range(nz):
        images = cell_images[iz * nx * ny:(iz + 1) * nx * ny]
        grid = image_grid(images, rows=ny)
        if config.draw_legend:
            width, height = (max(sizes) for sizes in zip(*(image.size for image in images)))
            grid = draw_grid_annotations(grid, width, height, hor, ver, config.margin_size, font)
        first = next((text for text in cell_infotexts[iz * nx * ny:(iz + 1) * nx * ny] if text), "")
        sub_grids.append(grid)
        sub_texts.append(grid_infotext(first, config, with_z=False))
        sub_seeds.append(cell_seeds[iz * nx * ny])
    main = image_grid(sub_grids, rows=1)
    if config.draw_legend:
        width, height = (max(sizes) for sizes in zip(*(grid.size for grid in sub_grids)))
        main = draw_grid_annotations(main, width, height, titles, [[GridAnnotation()]], font=font)
    first_text = next((text for text in cell_infotexts if text), "")
    grids = [main] + (sub_grids if config.include_sub_grids else [])
    texts = [grid_infotext(first_text, config, with_z=True)] + (sub_texts if config.include_sub_grids else [])
    seeds = [cell_seeds[0]] + (sub_seeds if config.include_sub_grids else [])
    result = ScriptResult(images=list(grids), seeds=list(seeds), infotexts=list(texts), index_of_first_image=len(grids),
                          grid_prefix=GRID_PREFIX, samples=samples, interrupted=samples.interrupted,
                          subseed=done[0].subseed)
    if config.include_lone_images:
        for index in range(nx * ny * nz):
            cell = by_index.get(index)
            if cell is not None:
                for image, seed, text in zip(cell.images, cell.seeds, cell.infotexts):
                    result.add(image, seed, text)
    return result


def script_args(kind: str, **context: Any):
    return script_args_info(kind, **context)
