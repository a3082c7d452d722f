"""`mixkit extras IMAGE_OR_FOLDER ...`: the Extras tab's upscale from the command line, on one image or a batch.

The flags are the fields of `/sdapi/v1/extra-single-image` and `/extra-batch-images` (`webui.api_requests`'s
`ExtrasBaseRequest`), checked by the same `webui.api_extras.check_extras_request`, and every image is read and its
upscale checked (`pipelines.upscale.check_upscale`) before the first one is written. The files are the Extras tab's
(`webui.ui.extras_output`): the source's text chunks (its infotext under `parameters`) plus A1111's `postprocessing`
text, written atomically. As A1111 names them, one image gets the next counter name (`00007.png`); a batch (a folder,
A1111's "Batch from Directory", or several files, its "Batch Process") keeps each source's name (its
`use_original_name_batch` default), as PNG. --gfpgan-visibility / --codeformer-visibility / --codeformer-weight restore
faces after the upscale, with the restorers of --gfpgan-models-path / --codeformer-models-path.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

# Pillow's usual image suffixes: what a folder's files are taken by (A1111 takes every file Pillow opens)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff")
DEFAULT_OUTPUT = "outputs/extras-images"  # A1111's outdir_extras_samples
# ExtrasBaseRequest field -> flag, for the request check's messages
REQUEST_FLAGS = {"upscaling_resize_w / upscaling_resize_h": "--scale-to",
                 "upscaling_resize_w and upscaling_resize_h": "--scale-to",
                 "extras_upscaler_2_visibility": "--upscaler-2-visibility",  # before upscaler_2, which it holds
                 "upscaler_2": "--upscaler-2", "gfpgan_visibility": "--gfpgan-visibility",
                 "codeformer_visibility": "--codeformer-visibility", "codeformer_weight": "--codeformer-weight",
                 "this server's Extras": "mixkit's Extras",
                 "Upscale factor must": "--scale must"}


def add_parser(subparsers) -> None:
    from pipelines.upscale import UPSCALERS, UpscaleLimits
    from webui.api_requests import ExtrasBaseRequest

    d = ExtrasBaseRequest()
    p = subparsers.add_parser(
        "extras", help="upscale images as A1111's Extras tab does (one image, several, or a folder)",
        description="A1111's Extras: upscale each image by --scale or to --scale-to WxH with a named upscaler, and "
                    "save it as PNG keeping the source's infotext plus a `postprocessing` text, as the web UI's Extras "
                    "tab and /sdapi/v1/extra-single-image do. Every image is checked before the first is written.")
    p.add_argument("inputs", nargs="+", metavar="IMAGE_OR_FOLDER",
                   help="image files, or folders whose images are all upscaled (A1111's Batch from Directory)")
    p.add_argument("--upscaler", default=UPSCALERS.names()[0], metavar="NAME",
                   help=f"{', '.join(UPSCALERS.names())}, the file name (without extension) of a model in "
                        f"--esrgan-models-path / --realesrgan-models-path / --swinir-models-path / --dat-models-path "
                        f"/ --scunet-models-path (A1111's release files also by A1111's names: 'R-ESRGAN 4x+', "
                        f"'SwinIR 4x', 'DAT x4', 'ScuNET GAN' ...), "
                        f"or None to copy the image unchanged "
                        f"(default: {UPSCALERS.names()[0]})")
    add_upscaler_flags(p)
    p.add_argument("--scale", type=finite_float, default=None, metavar="X",
                   help=f"A1111's 'Scale by': each side times X, floored to a multiple of 8, as A1111 "
                        f"(0-{UpscaleLimits().max_scale}; default {d.upscaling_resize})")
    p.add_argument("--scale-to", type=size_argument, default=None, metavar="WxH",
                   help="A1111's 'Scale to': upscale until the image covers WxH, then crop it to WxH (centred)")
    p.add_argument("--no-crop", action="store_true",
                   help="with --scale-to: keep the covering size instead of cropping (A1111's 'Crop to fit' off)")
    f = p.add_argument_group("face restoration", "A1111's Extras GFPGAN / CodeFormer steps, after the upscale; they "
                                                 "need --gfpgan-models-path / --codeformer-models-path")
    f.add_argument("--gfpgan-visibility", type=finite_float, default=d.gfpgan_visibility, metavar="X",
                   help="GFPGAN face restoration blended in by X in [0, 1] (default 0: off)")
    f.add_argument("--codeformer-visibility", type=finite_float, default=d.codeformer_visibility, metavar="X",
                   help="CodeFormer face restoration blended in by X in [0, 1] (default 0: off)")
    f.add_argument("--codeformer-weight", type=finite_float, default=d.codeformer_weight, metavar="W",
                   help="CodeFormer's weight in [0, 1]: 0 = maximum effect, 1 = minimum (default 0, A1111's Extras)")
    from webui.cli.webui import add_face_restorer_folder_flags

    add_face_restorer_folder_flags(f)
    from webui.cli.extras_training import add_training_flags

    add_training_flags(p)  # before the refused group, so --help lists what works first
    g = p.add_argument_group("not supported by mixkit yet", "A1111's other Extras options: refused unless left off")
    g.add_argument("--upscaler-2", default=d.upscaler_2, metavar="NAME", help="a second upscaler (default None)")
    g.add_argument("--upscaler-2-visibility", type=finite_float, default=d.extras_upscaler_2_visibility, metavar="X",
                   help="its blend (default 0)")
    p.add_argument("-o", "--output", default=DEFAULT_OUTPUT,
                   help=f"output folder (default: ./{DEFAULT_OUTPUT}), or a .png file name for a single image")
    from webui.cli.infotext_flags import add_saving_flags

    add_saving_flags(p)  # as A1111's Extras save: no text chunk at all, or the postprocessing text in a .txt
    p.set_defaults(func=run, extra_flags=_more_inputs)


# A1111's tile option pairs as flags: (--<flag>-tile, option prefix, the networks it applies to)
TILE_FLAGS = (("esrgan", "ESRGAN", "ESRGAN, Real-ESRGAN and HAT"), ("swin", "SWIN", "SwinIR"), ("dat", "DAT", "DAT"),
              ("scunet", "SCUNET", "ScuNET"))


def add_upscaler_flags(parser) -> None:
    """The model folders (as `mixkit webui`'s) and A1111's tiling settings of each network, for `extras` and
    `generate`."""
    from pipelines.model_upscale import A1111_TILING_DEFAULTS
    from webui.cli.webui import add_upscaler_folder_flags

    add_upscaler_folder_flags(parser)
    for flag, option, networks in TILE_FLAGS:
        size, overlap = A1111_TILING_DEFAULTS[option]
        parser.add_argument(f"--{flag}-tile", type=int, default=size, metavar="PX",
                            help=f"{networks} upscalers work in tiles of this many input pixels, 0 = whole image "
                                 f"(A1111's {option}_tile; default {size})")
        parser.add_argument(f"--{flag}-tile-overlap", type=int, default=overlap, metavar="PX",
                            help=f"overlap of those tiles (A1111's {option}_tile_overlap; default {overlap})")
    parser.add_argument("--swin-torch-compile", action="store_true",
                        help="torch.compile SwinIR upscalers (A1111's SWIN_torch_compile; slower first run; runs "
                             "uncompiled, with a warning, where compiling fails)")


def register_upscaler_flags(args: argparse.Namespace) -> None:
    """Register the models of --esrgan-models-path / --realesrgan-models-path / --swinir-models-path / --dat-models-path
    / --scunet-models-path before any name is checked; a refused file is reported on stderr (its name then is not an
    upscaler)."""
    from pipelines.model_upscale import check_tiling, register_model_upscalers

    tiling = {}
    for flag, option, _ in TILE_FLAGS:
        pair = getattr(args, f"{flag}_tile"), getattr(args, f"{flag}_tile_overlap")
        try:
            check_tiling(*pair)
        except ValueError as error:
            raise ValueError(str(error).replace("tile_size", f"--{flag}-tile").replace("tile_overlap",
                                                                                        f"--{flag}-tile-overlap")) from None
        tiling[option] = pair
    from webui.config import upscaler_folders

    folders = upscaler_folders(args)
    if folders:
        scan = register_model_upscalers(folders, device=getattr(args, "device", None), tiling=tiling,
                                        compile_swinir=args.swin_torch_compile)
        for path, reason in scan.refused.items():
            print(f"upscaler {path} skipped: {reason}", file=sys.stderr)


def register_face_restorer_flags(args: argparse.Namespace) -> None:
    """Register "CodeFormer" / "GFPGAN" for --codeformer-models-path / --gfpgan-models-path (`extras`, `generate`,
    `img2img`, `outpaint`), so requests naming them are checked against what is there."""
    gfpgan, codeformer = getattr(args, "gfpgan_models_path", None), getattr(args, "codeformer_models_path", None)
    if gfpgan or codeformer:
        from pipelines.face_restoration import register_face_restorers

        register_face_restorers(gfpgan_folder=gfpgan, codeformer_folder=codeformer, device=getattr(args, "device", None))


def _more_inputs(args, extra: list[str]) -> None:
    """Inputs named after an option (`mixkit extras a.png -o out b.png`), which argparse leaves over, are inputs too;
    anything else left over is still an unknown flag."""
    unknown = [item for item in extra if item.startswith("-")]
    if unknown:
        raise ValueError(f"unrecognized arguments: {' '.join(unknown)}; see `mixkit extras --help`")
    args.inputs = [*args.inputs, *extra]


def finite_float(text: str) -> float:
    """A number flag's value: `nan`, `inf` and `1e400` (which float() reads as inf) are refused by argparse, naming
    the flag, before they reach the request model (whose own refusal is a pydantic dump)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def size_argument(text: str) -> tuple[int, int]:
    """`--scale-to WxH` as (width, height), both positive."""
    width, separator, height = text.lower().partition("x")
    if not separator or not width.strip().isdigit() or not height.strip().isdigit() or not int(width) or not int(height):
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT with positive sides, e.g. 1024x768")
    return int(width), int(height)


def extras_request(args: argparse.Namespace):
    """The flags as the API's request model, checked by the API's own check (its messages naming the flags)."""
    from webui.api_extras import SCALE_BY, SCALE_TO, check_extras_request
    from webui.api_requests import ExtrasBaseRequest

    if args.no_crop and args.scale_to is None:
        raise ValueError("--no-crop goes with --scale-to WxH (it keeps the covering size instead of cropping)")
    if args.scale is not None and args.scale_to is not None:
        raise ValueError("--scale and --scale-to both say how large the result is; give one of them")
    d = ExtrasBaseRequest()
    width, height = args.scale_to or (d.upscaling_resize_w, d.upscaling_resize_h)
    body = ExtrasBaseRequest(resize_mode=SCALE_BY if args.scale_to is None else SCALE_TO,
                             upscaling_resize=d.upscaling_resize if args.scale is None else args.scale,
                             upscaling_resize_w=width, upscaling_resize_h=height, upscaling_crop=not args.no_crop,
                             upscaler_1=args.upscaler, upscaler_2=args.upscaler_2,
                             extras_upscaler_2_visibility=args.upscaler_2_visibility,
                             gfpgan_visibility=args.gfpgan_visibility, codeformer_visibility=args.codeformer_visibility,
                             codeformer_weight=args.codeformer_weight)
    try:
        check_extras_request(body)
    except ValueError as error:
        raise ValueError(in_flag_terms(str(error))) from None
    return body


def in_flag_terms(message: str) -> str:
    """A request check's message with the API's field names replaced by the flags."""
    for field, flag in REQUEST_FLAGS.items():
        message = message.replace(field, flag)
    return message


def source_files(inputs: list[str]) -> tuple[list[Path], bool]:
    """(image files in order, is_batch): each file as given, each folder's images sorted by name."""
    files, batch = [], len(inputs) > 1
    for value in inputs:
        path = Path(value).expanduser()
        if path.is_dir():
            found = sorted(f for f in path.iterdir() if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES)
            if not found:
                raise ValueError(f"{value!r} is a folder with no images ({', '.join(IMAGE_SUFFIXES)}); give another")
            files += found
            batch = True
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"{value!r} does not exist; give an image file or a folder of images")
    return files, batch


def run(args: argparse.Namespace) -> int:
    from pipelines.params import GenerationLimits
    from webui.cli.extras_batch import TrainingRun, checked_sources, output_paths, upscale_and_save
    from webui.cli.extras_training import (captioner_of, existing_caption_action, resolve_target_flags, tagger_of,
                                           training_steps_of)
    from webui.cli.infotext_flags import infotext_writing_of

    register_upscaler_flags(args)
    register_face_restorer_flags(args)
    steps = training_steps_of(args)
    resolve_target_flags(args)
    body = extras_request(args)
    files, batch = source_files(args.inputs)
    sources = checked_sources(files, body, GenerationLimits().max_pixels * 4, steps)
    # the captioners load before the output folder is made: a model that cannot load leaves nothing behind
    tagger = tagger_of(args, steps)
    training = TrainingRun(steps, captioner_of(args, steps), _face_finder(steps), existing_caption_action(args),
                           tagger)
    paths, folder = output_paths(sources, batch, args.output)
    writing = infotext_writing_of(args)
    for source, path in zip(sources, paths):
        written, before, after = upscale_and_save(source, body, path, folder, writing, training)
        print(f"{source.file.name}: {before} -> {after}", file=sys.stderr)
        print("\n".join(str(file) for file in written))
    return 0


def _face_finder(steps):
    """mixkit's RetinaFace for the focal crop's faces, when a face restorer folder holds it (else None: no faces)."""
    if not steps.focal_crop or steps.focal_weights.face <= 0:
        return None
    from pipelines.focal_crop import face_finder_from_restorers

    finder = face_finder_from_restorers()
    if finder is None:
        print("focal crop: no face detector (detection_Resnet50_Final.pth in --gfpgan-models-path / "
              "--codeformer-models-path), so faces are not looked for", file=sys.stderr)
    return finder
