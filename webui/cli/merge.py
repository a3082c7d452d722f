"""`mixkit merge A [B [C]]`: A1111's Checkpoint Merger tab on the command line (`mixkit.io.merge_checkpoints`).

Models are checkpoint files, given as paths or as names below `--ckpt-dir` (A1111's checkpoint names, e.g.
`sub/model.safetensors`); the merged file is written into `--ckpt-dir` (default: A's folder, where its checkpoint
list will show it), named as A1111 names it unless `--name` is given. Prints the written path.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# The tab's labels are accepted as written, and as flag-style words (no quoting needed in a shell).
METHOD_ALIASES = {"weighted-sum": "Weighted sum", "add-difference": "Add difference",
                  "no-interpolation": "No interpolation"}
CONFIG_ALIASES = {"auto": "A, B or C", "b": "B", "c": "C", "none": "Don't"}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("merge", help="merge checkpoints as A1111's Checkpoint Merger",
                                   description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", metavar="MODEL",
                        help="A, then B (weighted sum, add difference), then C (add difference): paths or names "
                             "below --ckpt-dir")
    parser.add_argument("--method", default="weighted-sum",
                        help="weighted-sum (A*(1-M) + B*M, default), add-difference (A + (B-C)*M) or "
                             "no-interpolation (A alone: fp16 conversion, VAE bake, pruning); A1111's labels work too")
    parser.add_argument("--multiplier", "-m", type=float, default=0.3, metavar="M",
                        help="M, from 0 to 1 (default 0.3, A1111's slider default)")
    parser.add_argument("--fp16", action="store_true", help="save as float16 (A1111's 'Save as float16')")
    parser.add_argument("--format", default="safetensors", choices=["safetensors", "ckpt"], dest="checkpoint_format",
                        help="checkpoint format (default: safetensors)")
    parser.add_argument("--name", default="", help="file name without extension (default: A1111's recipe name, "
                                                   "e.g. '0.7(a) + 0.3(b)')")
    parser.add_argument("--ckpt-dir", "--models-dir", dest="ckpt_dir", default=None, metavar="FOLDER",
                        help="checkpoint folder: where names are looked up and the result is written (default: A's folder)")
    parser.add_argument("--bake-in-vae", default=None, metavar="VAE_FILE",
                        help="an LDM-format VAE file whose weights replace the checkpoint's first_stage_model")
    parser.add_argument("--discard-weights", default="", metavar="REGEX",
                        help="drop every key this regular expression is found in (e.g. '^model_ema')")
    parser.add_argument("--no-metadata", action="store_true", help="write no safetensors metadata at all")
    parser.add_argument("--no-merge-recipe", action="store_true",
                        help="leave out sd_merge_recipe / sd_merge_models from the metadata")
    parser.add_argument("--no-copy-metadata", action="store_true", help="do not copy the merged models' metadata")
    parser.add_argument("--metadata-json", default=None, metavar="JSON",
                        help="a JSON object of extra metadata entries (A1111's 'Metadata in JSON format')")
    parser.add_argument("--copy-config", default="auto", metavar="FROM",
                        help="copy the .yaml beside a model: auto (A, B or C; default), b, c or none")
    parser.set_defaults(func=run_merge)


def run_merge(args: argparse.Namespace) -> int:
    from mixkit.io.checkpoint_merge import merge_checkpoints

    method = METHOD_ALIASES.get(args.method, args.method)
    config_source = CONFIG_ALIASES.get(args.copy_config.lower(), args.copy_config)
    if len(args.models) > 3:
        raise ValueError(f"merge takes at most three models (A, B, C), got {len(args.models)}.")
    folder = Path(args.ckpt_dir).expanduser() if args.ckpt_dir else None
    sources = [_source(model, folder) for model in args.models]
    metadata = _metadata(args.metadata_json)
    used = {"No interpolation": 1, "Weighted sum": 2, "Add difference": 3}.get(method, 3)
    if len(sources) > used:
        raise ValueError(f"{method} uses {used} model(s), got {len(sources)}: {', '.join(args.models[used:])} would be "
                         "ignored; leave it out or choose another --method.")
    result = merge_checkpoints(*sources, output_dir=folder or sources[0].path.parent, method=method,
                               multiplier=args.multiplier, save_as_half=args.fp16,
                               checkpoint_format=args.checkpoint_format, custom_name=args.name,
                               bake_in_vae=args.bake_in_vae, discard_weights=args.discard_weights,
                               save_metadata=not args.no_metadata, add_merge_recipe=not args.no_merge_recipe,
                               copy_metadata_fields=not args.no_copy_metadata, metadata=metadata,
                               config_source=config_source, progress=_progress_printer())
    print(result.path)
    if result.config_path is not None:
        print(f"config: {result.config_path}", file=sys.stderr)
    return 0


def _progress_printer():
    """A progress callback writing "Merging 120/1131" over itself on stderr when it is a terminal (None otherwise:
    a log or a pipe gets only the result)."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int, text: str) -> None:
        print(f"\r{text} {done}/{total}", end="\n" if text == "Saving" else "", file=sys.stderr, flush=True)

    return show


def _source(model: str, folder: Path | None):
    """A path as given, else a name below the checkpoint folder; named as A1111 lists it (path below the folder)."""
    from mixkit.io.merge_inputs import MergeSource

    path = Path(model).expanduser()
    if not path.exists() and folder is not None and (folder / model).exists():
        path = folder / model
    if not path.exists():
        where = f" or below {str(folder)!r}" if folder is not None else ""
        raise FileNotFoundError(f"Checkpoint {model!r} not found as a path{where}.")
    name = path.name
    if folder is not None:
        try:
            name = path.resolve().relative_to(folder.resolve()).as_posix()
        except ValueError:
            pass
    return MergeSource(path, name)


def _metadata(text: str | None) -> dict | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ValueError(f"--metadata-json is not valid JSON ({error}).") from None
    if not isinstance(value, dict):
        raise ValueError(f"--metadata-json must be a JSON object, got {text!r:.100}.")
    return value
