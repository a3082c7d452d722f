"""`mixkit interrogate IMAGE_OR_FOLDER ... [--model clip|deepbooru]`: A1111's Interrogate CLIP / DeepBooru from the
command line, for captioning a training set or reading an image's prompt back.

The same interrogators as `POST /sdapi/v1/interrogate` and the img2img tab's buttons, so one image gets the same text
from all three: CLIP is the caption app's caption (mixkit-tiny-blip2 unless `--caption-model`) followed by CLIP's best
terms of each word list; DeepBooru is the `--deepdanbooru-models-path` tagger's tags. Settings > Interrogate's options
are flags (`webui.cli.interrogate_settings`). The answers go to stdout as `FILE<TAB>TEXT` lines, as one JSON list
(`--json`), or into a kohya caption file beside each image (`--write-captions`, `webui.cli.caption_files`).

Order of work: flags and settings, then every image is read (an unreadable one is named before any model loads),
then the caption files are planned (existing ones refused without `--overwrite`), then the models load.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(subparsers) -> None:
    from webui.cli.interrogate_settings import add_interrogator_flags

    p = subparsers.add_parser(
        "interrogate", help="caption or tag images (A1111's Interrogate CLIP / DeepBooru)",
        description="Caption images with A1111's Interrogate CLIP (a caption and CLIP-ranked terms) or tag them with "
                    "Interrogate DeepBooru, as POST /sdapi/v1/interrogate answers. Prints 'FILE<TAB>TEXT' lines, "
                    "--json, or writes NAME.txt caption files beside the images (--write-captions).")
    p.add_argument("inputs", nargs="+", metavar="IMAGE_OR_FOLDER",
                   help="image files, and folders whose images (png, jpg, webp, ...) are taken in name order")
    p.add_argument("--model", default="clip", metavar="MODEL",
                   help="clip (A1111's Interrogate CLIP, default) or deepbooru (Interrogate DeepBooru; needs "
                        "--deepdanbooru-models-path)")
    output = p.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true",
                        help="print one JSON list of {\"file\": ..., \"caption\": ...} (the API's key) instead of "
                             "lines")
    output.add_argument("--write-captions", action="store_true",
                        help="write each answer to NAME.txt beside NAME.png (kohya / A1111 caption files) and print "
                             "the files written")
    p.add_argument("--overwrite", action="store_true",
                   help="with --write-captions: replace caption files that already exist (refused otherwise)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cpu)")
    add_interrogator_flags(p)
    p.set_defaults(func=run)


def image_files(inputs: list[str]) -> list[Path]:
    """The files to interrogate, in order: each file as given, each folder's images sorted by name."""
    from mixkit.data.image_probe import IMAGE_SUFFIXES, is_image_file

    files = []
    for value in inputs:
        path = Path(value).expanduser()
        if path.is_dir():
            found = sorted(f for f in path.iterdir() if is_image_file(f))
            if not found:
                raise ValueError(f"{value!r} is a folder with no images ({', '.join(IMAGE_SUFFIXES)}); give another")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"{value!r} does not exist; give an image file or a folder of images")
    return files


def check_images_readable(files: list[Path]) -> None:
    """Decode every image once (the pixels are dropped: a large folder is never held in memory); ValueError naming
    each one that cannot be read, and why."""
    from mixkit.io.images import load_image

    unreadable = []
    for file in files:
        try:
            load_image(file)
        except (OSError, ValueError) as error:  # InvalidImageError, ImageTooLargeError, a file unreadable on disk
            reason = str(error)
            unreadable.append(reason if str(file) in reason else f"{file}: {reason}")
    if unreadable:
        raise ValueError(f"{len(unreadable)} of {len(files)} image(s) cannot be read, so nothing was interrogated: "
                         + "; ".join(unreadable) + ". Fix or remove them.")


def one_line(text: str) -> str:
    """`text` on one line, for the FILE<TAB>TEXT output (--json keeps it as it is)."""
    return " ".join(text.split()) if any(c in text for c in "\r\n\t") else text


def run(args: argparse.Namespace) -> int:
    from mixkit.io.images import load_image
    from webui.cli.caption_files import plan_caption_files, write_caption_file
    from webui.cli.interrogate_settings import check_interrogate_flags, interrogator_of

    # 1. Flags, settings and model names, before any file is read
    if args.overwrite and not args.write_captions:
        raise ValueError("--overwrite replaces caption files; it only matters with --write-captions")
    checked = check_interrogate_flags(args)
    # 2. Every image readable, every caption file free, before any model loads
    files = image_files(args.inputs)
    check_images_readable(files)
    captions = plan_caption_files(files, args.overwrite) if args.write_captions else None
    # 3. The interrogator (its weights load at the first image)
    interrogate = interrogator_of(args, checked)
    answers = []
    for index, file in enumerate(files):
        text = interrogate(load_image(file))
        if captions is not None:
            if text:
                write_caption_file(captions[index], text, args.overwrite)
                print(captions[index], flush=True)
            else:  # A1111's Extras writes no caption file for an empty caption either
                print(f"{file}: no {'tags' if checked.model == 'deepbooru' else 'caption'}, so no "
                      f"{captions[index].name} was written", file=sys.stderr)
        elif args.json:
            answers.append({"file": str(file), "caption": text})
        else:
            print(f"{file}\t{one_line(text)}", flush=True)
    if args.json:
        print(json.dumps(answers, ensure_ascii=False, indent=2))
    return 0
