"""`run APP` and `describe APP` on the command line: shared by `mixkit apps` and `python -m appflow`.

A run checks everything it can before any model loads (the app, each input, option and model role, the output
folder), shows the sampling steps on a terminal, treats the first Ctrl-C as Interrupt (the finished work is saved, as
`mixkit generate` saves an interrupted batch; a second one aborts) and writes the outputs with
`appflow.saved_outputs`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from typing import Any

DEFAULT_OUTPUT_ROOT = "outputs/appflow"
RUN_FOLDER = re.compile(r"(\d+)-")  # `00042-app`, `100000-app`: the number of a run folder, any width
CLAIM_ATTEMPTS = 1000  # numbers tried past the highest when other runs take them first
INTERRUPTED_EXIT_CODE = 130  # what a shell reports for a process stopped by SIGINT (128 + 2), as `mixkit generate`


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app", help="the app's name or alias (`mixkit apps` lists them)")
    parser.add_argument("--input", "-i", action="append", default=[], metavar="NAME=VALUE",
                        help="an app input: text as given, an image as a file path or URL; repeat it (or give a "
                             "folder) for an input taking several images or texts")
    parser.add_argument("--inputs-json", metavar="FILE",
                        help="a JSON object of input name -> value (text, list of texts, image path(s), flag, object)")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="an app option, typed by its default (`describe APP` lists them); repeat for a list "
                             "option such as loras")
    parser.add_argument("--seed", type=int, help="the app's seed option (-1: random, the seed used is in result.json)")
    parser.add_argument("--models", action="append", default=[], metavar="ROLE=SOURCE",
                        help="the model for a role (a hub id or local folder/file); roles not given use defaults")
    parser.add_argument("--model", action="append", default=[], metavar="SOURCE",
                        help="models in role order, as Appflow(models=[...]); not together with --models")
    parser.add_argument("-o", "--output", metavar="OUTDIR",
                        help=f"folder for the outputs, new or empty unless --overwrite (default: a new numbered one, "
                             f"{DEFAULT_OUTPUT_ROOT}/00001-APP, 00002-APP ...)")
    parser.add_argument("--overwrite", action="store_true", help="replace files of the same names in OUTDIR")
    parser.add_argument("--video-format", choices=["auto", "mp4", "gif"], default="auto",
                        help="a video output's file type (auto: .mp4 where OpenCV can encode it, else .gif)")
    parser.add_argument("--device", default="cpu", help="torch device (default: %(default)s)")
    parser.add_argument("--dtype", help="fp32, fp16 or bf16 (default: fp32 on CPU, fp16 on GPUs)")
    parser.add_argument("--lora-dir", help="folder of LoRA files named by <lora:...> prompt tags")
    parser.add_argument("--embeddings-dir", help="folder of textual-inversion embeddings")
    parser.add_argument("--hypernetwork-dir", help="folder of A1111 hypernetwork .pt files")


def add_describe_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app", help="the app's name or alias")
    parser.add_argument("--json", action="store_true", help="print JSON (describe_app's dict) instead of text")


def describe_command(args: argparse.Namespace) -> int:
    from appflow.apps import APPS, describe_app
    from appflow.listing import format_option

    info = describe_app(APPS.get(args.app).name)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    lines = [info["name"], f"  {info['description']}", "", "inputs (--input NAME=VALUE):"]
    for name, kind in info["inputs"].items():
        port = kind.rstrip("?")
        notes = [("optional" if kind.endswith("?") else "required")]
        if name in info["batch_inputs"] or port in ("images", "texts"):
            notes.append("repeat for several" + (", or a folder" if port.startswith("image") else ""))
        if name in info["mask_inputs"]:
            notes.append("a mask image: white (or opaque strokes) = repaint")
        lines.append(f"  {name}: {port} ({'; '.join(notes)})")
    lines += ["", f"outputs: {', '.join(info['outputs'])}", "", "options (--option NAME=VALUE; auto = the model's):"]
    lines += [f"  {format_option(name, default)}" for name, default in info["options"].items()]
    if info["option_aliases"]:
        lines.append("  also: " + ", ".join(f"{alias} (= {name})" for alias, name in info["option_aliases"].items()))
    lines += ["", "models (--models ROLE=SOURCE):"]
    lines += [f"  {role} ({model['kind']}): {model['default'] or '(none: required)'}"
              for role, model in info["models"].items()]
    print("\n".join(lines))
    return 0


def run_command(args: argparse.Namespace) -> int:
    """Run one app from parsed arguments; the exit code (0, or 130 when interrupted with what was made saved)."""
    from appflow.apps import APPS, app_for_models, describe_app
    from appflow.command_values import (inputs_from_strings, models_from_strings, options_from_strings,
                                        read_inputs_json, split_assignments)
    from appflow.saved_outputs import check_output_folder, save_app_outputs

    # 1. Everything a user can get wrong, before any model loads
    models_given = split_assignments(args.models, "--models")
    name = app_for_models(args.app, dict(models_given) if models_given else (args.model or None))
    description = describe_app(APPS.get(name).name)  # unknown app -> the error lists the valid ones
    models = models_from_strings(description, models_given, args.model)
    options = options_from_strings(description, split_assignments(args.option, "--option"))
    if args.seed is not None:
        if "seed" not in description["options"]:
            raise ValueError(f"App {description['name']!r} has no seed option (it draws no noise); drop --seed.")
        if "seed" in options:
            raise ValueError("The seed is given both as --seed and as --option seed=; pass it once.")
        options["seed"] = args.seed
    json_inputs = read_inputs_json(args.inputs_json) if args.inputs_json else None
    inputs = inputs_from_strings(description, split_assignments(args.input, "--input"), json_inputs)
    claimed = claim_run_folder(DEFAULT_OUTPUT_ROOT, description["name"]) if args.output is None else None
    try:
        folder = check_output_folder(args.output if claimed is None else claimed, args.overwrite)
        flow = build_flow(description["name"], models, options, args)  # option values and model configs: no weights

        # 2. Run, Ctrl-C as Interrupt
        result, interrupted = run_with_progress(flow, inputs)

        # 3. Save what was made, complete files only
        written = save_app_outputs(flow.name, result, flow.plan.outputs, folder, overwrite=args.overwrite,
                                   interrupted=interrupted, video_format=args.video_format,
                                   documents=labelme_outputs(flow))
    except BaseException:
        if claimed is not None:  # a failed run leaves no empty numbered folder behind
            with contextlib.suppress(OSError):
                os.rmdir(claimed)
        raise
    for path in written:
        print(path)
    if interrupted:
        print(f"{flow.name}: interrupted; saved what the finished steps made ({', '.join(sorted(result)) or 'nothing'})",
              file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    return 0


def labelme_outputs(flow) -> tuple[str, ...]:
    """The outputs that are LabelMe annotations (auto_label's `annotation`): saved as their own .json too, for
    LabelMe to open next to the image."""
    plan = flow.plan
    return tuple(name for name, binding in plan.outputs.items()
                 if binding.step is not None and plan.task_classes[binding.step].name == "labelme_annotation")


def claim_run_folder(root: str, app: str) -> str:
    """Make and return `root/NNNNN-app`, numbered one past the highest run folder there of any width (A1111 numbers
    its outputs the same way; past 99999 the numbers grow to six digits). The folder is made without exist_ok, so
    two runs started together never share one: the second takes the next number. Made before any model loads, so a
    run is never refused after its work is done."""
    from pathlib import Path

    from appflow.saved_outputs import OutputExistsError

    folder = Path(root).expanduser()
    numbers = [int(match.group(1)) for path in (folder.iterdir() if folder.is_dir() else ())
               if (match := RUN_FOLDER.match(path.name))]
    number = max(numbers, default=0) + 1
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for number in range(number, number + CLAIM_ATTEMPTS):
            path = folder / f"{number:05d}-{app}"
            try:
                path.mkdir()
            except FileExistsError:  # another run (or a file of that name) took it meanwhile
                continue
            return str(path)
    except OSError as error:
        raise PermissionError(f"Run folder in {str(folder)!r} cannot be made ({error.strerror or error}); choose "
                              "another folder with -o.") from None
    raise OutputExistsError(f"No free run folder in {str(folder)!r} after {CLAIM_ATTEMPTS} tries; choose one with -o.")


def build_flow(name: str, models: Any, options: dict, args: argparse.Namespace):
    from appflow.flow import Appflow

    return Appflow(app=name, models=models, device=args.device, dtype=args.dtype, lora_dir=args.lora_dir,
                   embeddings_dir=args.embeddings_dir, hypernetwork_dir=args.hypernetwork_dir, **options)


def run_with_progress(flow, inputs: dict, control=None) -> tuple[dict, bool]:
    """(outputs, interrupted) of `flow(**inputs)`, run with a step bar on a terminal and Ctrl-C as Interrupt; an
    interrupted run's outputs are what its finished steps made (`AppInterrupted.partial`)."""
    from tqdm import tqdm

    from appflow.progress import AppInterrupted
    from pipelines.control import GenerationControl
    from pipelines.interrupt_signal import interrupt_on_sigint

    control = control if control is not None else GenerationControl()
    with tqdm(unit="step", file=sys.stderr, disable=not sys.stderr.isatty()) as bar, interrupt_on_sigint(control):
        def progress(state) -> None:
            bar.total = state.total_steps * state.batch_count
            bar.n = state.batch_index * state.total_steps + state.step
            bar.refresh()

        try:
            result = flow(**inputs, callback=progress, control=control)
        except AppInterrupted as stopped:
            return dict(stopped.partial), True
    return dict(result), bool(getattr(result, "interrupted", False))
