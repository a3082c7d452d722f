"""`mixkit generate "a cat|red hat|at night" --prompt-matrix` and `mixkit generate --prompts-from-file list.txt`:
A1111's Prompt matrix and Prompts from file or textbox from the command line.

The options are A1111's controls. Both are checked before the model loads (the matrix's size cap, every line of the
list with its options, samplers and styles, and the generation limits of every call they make). The matrix's grid
is written as `prompt_matrix-NNNN.png` and every image as `generate` writes them into the -o folder; the list writes
its images (and with --prompts-combined one `grid-NNNN.png` of them all first).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace


def add_prompt_script_flags(p: argparse.ArgumentParser) -> None:
    matrix = p.add_argument_group("Prompt matrix (A1111's script): one image per combination of the prompt's '|' "
                                  "parts, in a grid labelled with them")
    matrix.add_argument("--prompt-matrix", action="store_true",
                        help="split the prompt at '|': the first part is in every image, each other part in half of "
                             "them (2^n images, at most 9 parts)")
    matrix.add_argument("--matrix-at-start", action="store_true",
                        help="A1111's 'Put variable parts at start of prompt'")
    matrix.add_argument("--matrix-different-seeds", action="store_true",
                        help="A1111's 'Use different seed for each picture': image c uses seed + c")
    matrix.add_argument("--matrix-prompt", choices=("positive", "negative"), default="positive",
                        help="A1111's 'Select prompt': which prompt holds the '|' parts (default positive)")
    matrix.add_argument("--matrix-joining", choices=("comma", "space"), default="comma",
                        help="A1111's 'Select joining char' between the parts (default comma)")
    matrix.add_argument("--matrix-margin", type=int, default=0, metavar="PX",
                        help="white pixels between the grid's cells (0-500)")
    lines = p.add_argument_group("Prompts from file or textbox (A1111's script): one job per line, a prompt or "
                                 "options such as --prompt \"a cat\" --steps 20 --negative_prompt blurry")
    lines.add_argument("--prompts-from-file", default=None, metavar="FILE",
                       help="the list (UTF-8 text; - for stdin); each line's prompt joins the command's prompt")
    lines.add_argument("--prompts-iterate-seed", action="store_true",
                       help="A1111's 'Iterate seed every line': the seed grows by batch size x count after each line")
    lines.add_argument("--prompts-same-seed", action="store_true",
                       help="A1111's 'Use same random seed for all lines': a -1 seed is drawn once for the list")
    lines.add_argument("--prompts-position", choices=("start", "end"), default="start",
                       help="A1111's 'Insert prompts at the': a line's prompt before (default) or after the command's")
    lines.add_argument("--prompts-combined", action="store_true",
                       help="also write one grid of every image (A1111's 'Make a combined image')")


# A list is at most 1,000 lines (prompts_from_file.MAX_LINES); 16 MB holds any such list. Reading stops there, so
# `--prompts-from-file /dev/zero` (or a wrong, huge file) is refused instead of filling memory.
MAX_LIST_CHARS = 16 * 1024 * 1024


def _read_list(path: str) -> str:
    if path == "-":
        return _bounded(path, sys.stdin.read(MAX_LIST_CHARS + 1))
    try:
        with open(path, encoding="utf-8-sig") as file:
            return _bounded(path, file.read(MAX_LIST_CHARS + 1))
    except OSError as error:
        raise ValueError(f"--prompts-from-file {path}: cannot read it ({error.strerror}).") from None
    except UnicodeDecodeError:
        raise ValueError(f"--prompts-from-file {path}: not UTF-8 text; save it as UTF-8.") from None


def _bounded(path: str, text: str) -> str:
    if len(text) > MAX_LIST_CHARS:
        raise ValueError(f"--prompts-from-file {path}: more than {MAX_LIST_CHARS // (1024 * 1024)} MB of text; a list "
                         "holds at most 1,000 lines, so split it (or check the path).")
    return text


def prompt_script_of(args: argparse.Namespace, xyz_requested: bool = False):
    """(script module, checked config) for --prompt-matrix or --prompts-from-file, else None; ValueError naming the
    flag (or the list's line) before any model loads."""
    from pipelines.scripts import prompt_matrix, prompts_from_file

    chosen = [flag for flag, on in (("--xyz-x/y/z", xyz_requested), ("--prompt-matrix", args.prompt_matrix),
                                    ("--prompts-from-file", args.prompts_from_file is not None)) if on]
    if len(chosen) > 1:
        raise ValueError(f"{' and '.join(chosen)} are two scripts; A1111 runs one script per generation, so give one.")
    if args.prompt_matrix:
        try:
            return prompt_matrix, prompt_matrix.parse_script_args(
                [args.matrix_at_start, args.matrix_different_seeds, args.matrix_prompt, args.matrix_joining,
                 args.matrix_margin])
        except ValueError as error:
            raise ValueError(str(error).replace("script_args margin_size", "--matrix-margin")) from None
    if args.prompts_from_file is not None:
        try:
            return prompts_from_file, prompts_from_file.prompts_config(
                _read_list(args.prompts_from_file), iterate_seed=args.prompts_iterate_seed,
                same_seed=args.prompts_same_seed, prompt_position=args.prompts_position,
                make_combined=args.prompts_combined)
        except ValueError as error:
            raise ValueError(str(error).replace("script_args prompt_txt", f"--prompts-from-file "
                                                                           f"{args.prompts_from_file}")) from None
    return None


def script_context(args: argparse.Namespace) -> dict:
    """What the scripts may need: the --styles-file library, for a list's --styles lines, --max-script-images, and
    --grid-font (Prompt matrix's legend)."""
    from webui.cli.grid_font_flag import grid_font_context
    from webui.cli.script_image_cap import script_image_context

    context = {**script_image_context(args), **grid_font_context(args)}
    if not args.styles_file:
        return context
    from mixkit.prompts.styles import StyleLibrary

    return {**context, "styles": StyleLibrary(args.styles_file)}


def check_prompt_script(script, config, params, check, args: argparse.Namespace) -> int:
    """The script's plan on the command's params, and `check` (the command's limits) on every call it will make
    (a list's errors name its line); returns how many images the calls generate (what the script-image cap counts)."""
    from pipelines.scripts.image_budget import images_of_calls

    planned = script.planned_params(params, config, **script_context(args))
    lines = [job.number for job in getattr(config, "jobs", ())]
    for index, call in enumerate(planned):
        try:
            check(replace(call))
        except (ValueError, TypeError) as error:
            if not lines:
                raise
            raise type(error)(f"--prompts-from-file {args.prompts_from_file}, line {lines[index]}: {error}") from None
    return images_of_calls(planned)


def run_prompt_script(script, config, pipe, params, output, args: argparse.Namespace, writing=None, save=None) -> int:
    """Run the script with a progress bar and Ctrl-C as Interrupt; write its grid, then its images (or
    `save(result) -> paths`); print the paths."""
    from webui.cli.progress import report_written, run_with_progress

    result = run_with_progress(lambda **hooks: script.run(pipe, params, config, **hooks, **script_context(args)),
                               params.steps)
    paths = save(result) if save is not None else [*result.save_grids(output, writing), *result.save(output, writing)]
    return report_written(paths, result.interrupted,
                          f"kept {len(result.samples.images)} image(s) of the {script.TITLE}")
