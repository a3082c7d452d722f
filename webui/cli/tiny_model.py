"""`mixkit tiny-model DIR`: write a tiny random-weight SD model folder, for smoke tests offline.

Its images are noise-like (the weights are random): it proves the installation and every code
path (loading, samplers, infotext, LoRA) without downloading gigabytes.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("tiny-model", help="write a tiny random-weight SD model (offline smoke tests)",
                              description=__doc__.splitlines()[0])
    p.add_argument("folder", help="where to write the diffusers folder")
    p.add_argument("--family", choices=["sd1", "sd2", "sdxl"], default="sd1")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mixkit.io.atomic import check_new_output_folder
    from mixkit.testing.tiny_models import build_tiny_sd1, build_tiny_sdxl

    folder = Path(args.folder)
    if (folder / "model_index.json").is_file():
        print(folder)  # already there: keeps the README's one-line demo re-runnable
        return 0
    check_new_output_folder(folder, "The model folder")  # also a file of that name, which iterdir() crashed on
    if args.family == "sdxl":
        build_tiny_sdxl(folder, seed=args.seed)
    else:
        sd2 = args.family == "sd2"
        build_tiny_sd1(folder, seed=args.seed, sd2=sd2, prediction_type="v_prediction" if sd2 else "epsilon")
    print(folder)
    return 0
