"""`mixkit train <trainer> --config run.json|run.toml [--set key=value ...]`: run a trainer from a config file.

Runs on one process as is; `accelerate launch --num_processes N -m webui.cli train ...` spreads the
same command over N processes (or GPUs, or DeepSpeed/FSDP through an accelerate config).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("train", help="train a LoRA or model (sd-lora, ...) from a JSON config")
    p.add_argument("trainer", help="which trainer to run, e.g. sd-lora (an unknown name lists the valid ones); "
                                   "`recipe NAME` runs a mixkit-tiny recipe (tiny-clip, tiny-vae, tiny-sd, tiny-blip2)")
    p.add_argument("recipe", nargs="?", default=None, help=argparse.SUPPRESS)
    p.add_argument("--config", type=Path, help="JSON or TOML file with the trainer's settings (keys of its config "
                                                "dataclass; kohya's option names are translated)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting; VALUE is JSON if it parses (4, 1e-4, true, null) else a string")
    p.add_argument("--stop-at-step", type=int, default=None, help="stop after this step with a checkpoint (resume later); the tiny recipes also write what they have, and their resume state to <output>-state")
    p.add_argument("--print-config", action="store_true", help="print the resolved config as JSON and exit")
    p.set_defaults(func=run, extra_flags=add_kohya_flags)
    p.epilog = ("kohya's command-line options also work as they are (--network_dim=16, --enable_bucket, --network_args "
                "conv_dim=4 conv_alpha=2, --config_file run.toml): each is read as --set NAME=VALUE.")


def kohya_flags(flags: list[str]) -> list[str]:
    """`--set` texts for kohya-style command-line options copied from a kohya command (`accelerate launch
    train_network.py --network_dim=16 --enable_bucket --network_args "conv_dim=4" "conv_alpha=2" ...`), as kohya's
    argparse reads them: `--name=value`, `--name value`, `--name v1 v2` (its nargs="*" options: a list) and a bare
    `--name` (its store_true switches: true)."""
    overrides: list[str] = []
    index = 0
    while index < len(flags):
        flag = flags[index]
        if not flag.startswith("--") or len(flag) == 2:
            raise ValueError(f"unexpected argument {flag!r}: settings are --set NAME=VALUE or kohya's --NAME VALUE")
        name, sep, value = flag[2:].partition("=")
        index += 1
        if sep:
            overrides.append(f"{name}={value}")
            continue
        values = []
        while index < len(flags) and not flags[index].startswith("--"):
            values.append(flags[index])
            index += 1
        if not values:
            overrides.append(f"{name}=true")
        elif len(values) == 1:
            overrides.append(f"{name}={values[0]}")
        else:
            overrides.append(f"{name}={json.dumps(values)}")
    return overrides


def add_kohya_flags(args: argparse.Namespace, flags: list[str]) -> None:
    """Fold kohya-style flags into `args`: they win over the --config file as kohya's command line wins over its
    --config_file, and a later --set of the same name wins over them; `--config_file` is kohya's --config."""
    overrides = kohya_flags(flags)
    config_files = [text.partition("=")[2] for text in overrides if text.partition("=")[0] == "config_file"]
    if config_files:
        if args.config is not None or len(config_files) > 1:
            raise ValueError("give the settings file once: --config or kohya's --config_file")
        args.config = Path(config_files[0])
    args.kohya_flags = [text for text in overrides if text.partition("=")[0] != "config_file"]


def parse_override(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--set expects KEY=VALUE, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def resolve_config(config_cls, config_file: Path | None, overrides: list[str], kohya_flags: list[str] = ()):
    """The trainer's config from the file (.json, or .toml as kohya's --config_file), then kohya-style command-line
    flags (`kohya_flags`, as `--set` texts), then `--set` overrides, each winning over the one before; kohya's option
    names are translated (`mixkit.training.config_file`), unknown keys are named in the error. A kohya command line,
    like a kohya file, brings kohya's defaults where they differ from mixkit's (`with_kohya_defaults`)."""
    from mixkit.training.config_file import (read_config_file, translate_kohya_options, with_kohya_defaults,
                                             without_replaced_lists)

    known = {f.name for f in dataclasses.fields(config_cls)}
    raw_kohya_flags = dict(parse_override(text) for text in kohya_flags)
    raw_overrides = dict(parse_override(text) for text in overrides)
    from_file, raw = {}, {}
    if config_file is not None:
        raw = without_replaced_lists(read_config_file(config_file), {**raw_kohya_flags, **raw_overrides}, known)
    # every source's options, later winning: an option read together with another (LyCORIS's network_args with
    # network_module) sees it wherever it was given
    everything = {**raw, **raw_kohya_flags, **raw_overrides}
    if config_file is not None:
        from_file = with_kohya_defaults(raw, translate_kohya_options(raw, known, everything), known)
    from_kohya_flags = translate_kohya_options(raw_kohya_flags, known, everything)
    # kohya's defaults fill what neither the flags nor the file set (a file's network_train_unet_only stays)
    defaults = with_kohya_defaults(raw_kohya_flags, from_kohya_flags, known)
    from_kohya_flags = {**{k: v for k, v in defaults.items() if k not in from_file}, **from_kohya_flags}
    from_flags = {**from_kohya_flags, **translate_kohya_options(raw_overrides, known, everything)}
    data = {**from_file, **from_flags}
    unknown = sorted(set(data) - known)
    if unknown:
        where = ", ".join(f"{key} (from {config_file})" if key in from_file and key not in from_flags
                          else f"{key} (from --{key})" if key in raw_kohya_flags
                          else f"{key} (from --set)" for key in unknown)
        raise ValueError(f"unknown setting(s) {where} for {config_cls.__name__}: neither a setting of this trainer "
                         "nor a kohya option mixkit translates or accepts; remove it or use one of "
                         f"{sorted(known)} (kohya's names are listed in README, Training)")
    required = [f.name for f in dataclasses.fields(config_cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and f.name not in data]
    if required:
        raise ValueError(f"missing required setting(s) {required}; put them in --config or pass --set {required[0]}=...")
    return config_cls(**data)


def run(args: argparse.Namespace) -> int:
    import logging

    from mixkit.training.trainers import TRAINERS

    # Trainers report progress (steps, validation figures) through logging; show it unless the caller set logging up.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    name = args.trainer
    if name == "recipe":
        if not args.recipe:
            raise ValueError("`mixkit train recipe` needs a recipe name: tiny-clip, tiny-vae, tiny-sd or tiny-blip2")
        name = args.recipe
    elif args.recipe:
        raise ValueError(f"unexpected extra argument {args.recipe!r}; did you mean `mixkit train recipe {args.recipe}`?")
    config_cls, train = TRAINERS.get(name).load()
    config = resolve_config(config_cls, args.config, args.overrides, getattr(args, "kohya_flags", []))
    config.check()
    if args.print_config:
        print(config.to_json())
        return 0
    result = train(config, stop_at_step=args.stop_at_step)
    if result.steps == 0 and result.output:  # a trainer that only creates (hypernetwork-create)
        print(f"wrote {result.output}")
        return 0
    resumed = f" (resumed at step {result.first_step}: {result.steps - result.first_step} in this run)" \
        if result.first_step else ""
    print(f"trained {result.steps} steps{resumed} in {result.seconds:.1f} s"
          + (f"; wrote {result.output}" if result.output else "")
          + (f"; checkpoint {result.last_checkpoint}" if result.last_checkpoint else "")
          + (f"; skipped {len(result.skipped_images)} unreadable images" if result.skipped_images else ""))
    return 0
