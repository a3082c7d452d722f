"""`mixkit lora inspect FILE [--model MODEL]` and `mixkit lora convert FILE --to kohya|diffusers -o OUT`.

inspect prints a LoRA's format, algorithm families, base model, rank/alpha, how it was trained (network module,
LyCORIS algo and preset, dims, DoRA, from kohya's ss_* metadata), hash and tags, and with
`--model` how many of its modules match that model (and every key that does not). convert rewrites
a file in kohya (A1111/ComfyUI) or diffusers/PEFT naming; kohya -> diffusers needs `--model`.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("lora", help="inspect or convert LoRA files", description=__doc__.splitlines()[0])
    actions = parser.add_subparsers(dest="lora_command", metavar="ACTION", required=True)

    inspect = actions.add_parser("inspect", help="describe a LoRA file (and check it against a model)")
    inspect.add_argument("file", help="LoRA file (.safetensors, or a plain-tensor .pt)")
    inspect.add_argument("--model", metavar="MODEL", help="the model to match the LoRA against: anything `mixkit generate --model` takes")
    inspect.set_defaults(func=run_inspect)

    convert = actions.add_parser("convert", help="rewrite a LoRA in kohya or diffusers naming")
    convert.add_argument("file", help="LoRA file to convert")
    convert.add_argument("--to", required=True, choices=["kohya", "diffusers"], help="output naming")
    convert.add_argument("-o", "--output", required=True, help="output .safetensors path")
    convert.add_argument("--model", metavar="MODEL", help="anything `mixkit generate --model` takes (needed for kohya -> diffusers, and for SDXL -> kohya)")
    convert.set_defaults(func=run_convert)


def load_model_components(source: str | Path):
    """(unet, [text encoders]) of the model `--model` names, in any form `mixkit generate` takes: a diffusers
    folder, a single-file checkpoint, a Hugging Face id in the cache, or a built-in name such as mixkit-tiny-sd."""
    from mixkit.models.diffusion.loading import load_diffusion_model

    model = load_diffusion_model(source)
    return model.unet, list(model.text_encoders)


def run_inspect(args: argparse.Namespace) -> int:
    from mixkit.lora.report import inspect_lora

    unet, encoders = load_model_components(args.model) if args.model else (None, None)
    report = inspect_lora(args.file, unet, encoders)
    print("\n".join(report.lines()))
    return 0 if not report.problems else 1


def run_convert(args: argparse.Namespace) -> int:
    from mixkit.lora.convert import convert_lora
    from mixkit.lora.model_index import ModelIndex

    index = None
    if args.model:
        unet, encoders = load_model_components(args.model)
        index = ModelIndex(unet, encoders)
    written = convert_lora(args.file, args.to, args.output, index)
    print(written)
    return 0
