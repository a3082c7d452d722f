"""`mixkit generate ... --xyz-x "Steps:10,20" --xyz-y "CFG Scale:5,7"`: A1111's X/Y/Z plot from the command line
(and on `mixkit img2img`, with img2img's axes such as "Denoising").

Each axis is `LABEL:VALUES` with A1111's labels and value syntax (`mixkit generate --xyz-x "Sampler:Euler,DPM++ 2M"`,
ranges such as `Steps:10-30 (+10)`); the options are A1111's checkboxes. The VAE axis picks from `--vae-dir`
(`webui.cli.xyz_model`). The plot is checked before the model loads (ToMe and FP8 against --int8 / --backend too);
the grid is written as `xyz_grid-NNNN.png` (with `--xyz-include-sub-grids`, one per Z value too) and every image as
`generate` writes them, into the -o folder.
"""

from __future__ import annotations

import argparse


def add_xyz_flags(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("X/Y/Z plot (A1111's script): one image per combination, in a labelled grid")
    for name in "xyz":
        group.add_argument(f"--xyz-{name}", default=None, metavar="LABEL:VALUES",
                           help=f"the {name.upper()} axis: an A1111 axis label and its values, e.g. \"Steps:10-30 "
                                "(+10)\", \"CFG Scale:5,7.5\", \"Prompt S/R:cat,dog\", \"Sampler:Euler a,DPM++ 2M\"")
    group.add_argument("--xyz-no-legend", action="store_true", help="draw the grid without its labels")
    group.add_argument("--xyz-include-sub-grids", action="store_true", help="also write one grid per Z value")
    group.add_argument("--xyz-keep-random-seeds", action="store_true",
                       help="A1111's 'Keep -1 for seeds': a -1 seed is drawn per cell instead of once for the plot")
    group.add_argument("--xyz-vary-seeds", default="", metavar="AXES",
                       help="A1111's 'Vary seeds for X/Y/Z': the axes (e.g. xy) along which each cell adds its "
                            "position to the seed")
    group.add_argument("--xyz-margin", type=int, default=0, metavar="PX", help="white pixels between cells (0-500), drawn with the legend as in A1111")
    group.add_argument("--vae-dir", default=None, metavar="DIR",
                       help="folder of VAEs (.safetensors, .pt, .ckpt files or diffusers VAE folders) the VAE axis "
                            "picks from by name, as mixkit webui's --vae-dir (\"VAE:Automatic,kl-f8.safetensors\"); "
                            "Automatic is the VAE the command loaded, None the checkpoint's built-in one")


def xyz_requested(args: argparse.Namespace) -> bool:
    return any(getattr(args, f"xyz_{name}", None) for name in "xyz")


def _axis(flag: str, value: str | None) -> tuple[str, str] | None:
    if value is None:
        return None
    label, colon, values = value.partition(":")
    if not colon or not label.strip():
        raise ValueError(f"{flag} must be LABEL:VALUES, such as \"Steps:10,20\", got {value!r}.")
    return label.strip(), values


def xyz_config_of(args: argparse.Namespace, kind: str = "txt2img"):
    """The plot the flags ask for, checked (ValueError naming the flag's slot) before any model loads."""
    from pipelines.scripts.xyz_config import xyz_config

    vary = args.xyz_vary_seeds.lower()
    if set(vary) - set("xyz"):
        raise ValueError(f"--xyz-vary-seeds takes the letters x, y and z, got {args.xyz_vary_seeds!r}.")
    x = _axis("--xyz-x", args.xyz_x) or ("Nothing", "")
    return xyz_config(x, _axis("--xyz-y", args.xyz_y), _axis("--xyz-z", args.xyz_z), kind=kind,
                      draw_legend=not args.xyz_no_legend, include_lone_images=True,
                      include_sub_grids=args.xyz_include_sub_grids, no_fixed_seeds=args.xyz_keep_random_seeds,
                      vary_seeds_x="x" in vary, vary_seeds_y="y" in vary, vary_seeds_z="z" in vary,
                      margin_size=args.xyz_margin)


def check_xyz_plot(config, params, kind: str = "txt2img", check=None, model=None, **cap) -> int:
    """The plot's checks on the call's params (Prompt S/R, samplers, sizes, the script-image cap: `cap` is
    `script_image_context`'s, with `grid_font_context`'s `font`, already checked as --grid-font), and `check` (the
    command's limits) on every cell's params, before the model loads; a cell's error names its axis values. `model`:
    the flags' `CliPlotModel` (the VAE axis's names, what --int8 or --backend fix). Returns how many images the cells
    generate (what the cap counts)."""
    from dataclasses import replace

    from pipelines.scripts.image_budget import images_of_calls, script_image_cap
    from pipelines.scripts.xyz_axes import PlotContext
    from pipelines.scripts.xyz_plot import check_plot, check_plot_images

    cells = check_plot(params, config, PlotContext(kind=kind, **(model.context() if model is not None else {})))
    check_plot_images(cells, script_image_cap(cap))
    for cell in cells:
        if check is not None:
            try:
                check(replace(cell.params))
            except (ValueError, TypeError) as error:
                raise type(error)(f"X/Y/Z plot cell {cell_label(config, cell)}: {error}") from None
    return images_of_calls([cell.params for cell in cells])


def cell_label(config, cell) -> str:
    """A cell as its axis values, "Denoising 2, Steps 20" (the Nothing axes left out)."""
    parts = [f"{axis.label} {axis.values[index]}" for axis, index in zip(config.axes, (cell.ix, cell.iy, cell.iz))
             if axis.label != "Nothing"]
    return ", ".join(parts) or "1"


def run_xyz_plot(pipe, params, config, output, writing=None, kind: str = "txt2img", save=None, model=None,
                 **cap) -> int:
    """Run the plot with a progress bar and Ctrl-C as Interrupt; write the grids, then the images (or
    `save(result) -> paths`); print the paths. `model` (the flags' `CliPlotModel`) swaps the VAE for a VAE axis and
    puts the loaded one back after the plot and its writing."""
    from contextlib import nullcontext

    from pipelines.scripts import xyz_plot
    from webui.cli.progress import report_written, run_with_progress

    if model is not None:
        model.attach(pipe)
    plot_context = model.context() if model is not None else {}
    with model.vae_kept() if model is not None else nullcontext():
        result = run_with_progress(
            lambda **hooks: xyz_plot.run(pipe, params, config, kind=kind, **plot_context, **cap, **hooks),
            params.steps * params.batch_count * config.cell_count)
        paths = save(result) if save is not None else [*result.save_grids(output, writing),
                                                       *result.save(output, writing)]
    return report_written(paths, result.interrupted,
                          f"kept {len(result.samples.images)} of {config.cell_count * params.total_images} image(s) "
                          "of the plot")
