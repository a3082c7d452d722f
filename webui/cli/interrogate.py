"""`mixkit interrogate IMAGE_OR_FOLDER ... [--model clip|deepbooru]`: A1111's Interrogate CLIP / DeepBooru from the
command line, for captioning a training set or reading an image's prompt back.

The same interrogators as `POST /sdapi/v1/interrogate` and the img2img tab's buttons, so one image gets the same text
from all three: CLIP is the caption app's caption (mixkit-tiny-blip2 unless `--caption-model`) followed by CLIP's best
terms of each word list; DeepBooru is the `--deepdanbooru-models-path` tagger's tags. Settings > Interrogate's options
are flags (`webui.cli.interrogate_settings`). The answers go to stdout as `FILE<TAB>TEXT` lines, as one JSON list
(`--json`), or into a kohya caption file beside each image (`--write-captions`, `webui.cli.caption_files`); progress
goes to stderr (`--quiet` silences it), so stdout stays the answers alone.

Order of work: flags and settings, then the images are listed (`--recursive`: subfolders too; each image once, however
often it is given), the caption files are planned (existing ones refused, skipped, appended to or overwritten:
`--existing`), every image to interrogate is read (an unreadable one is named before any model loads), then the models
load, all before the first image is interrogated, so any of these errors leaves every file as it was.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path


def add_parser(subparsers) -> None:
    from webui.cli.caption_files import DEFAULT_EXTENSION, EXISTING
    from webui.cli.interrogate_settings import add_interrogator_flags

    p = subparsers.add_parser(
        "interrogate", help="caption or tag images (A1111's Interrogate CLIP / DeepBooru)",
        description="Caption images with A1111's Interrogate CLIP (a caption and CLIP-ranked terms) or tag them with "
                    "Interrogate DeepBooru, as POST /sdapi/v1/interrogate answers. Prints 'FILE<TAB>TEXT' lines, "
                    "--json, or writes NAME.txt caption files beside the images (--write-captions); progress goes to "
                    "stderr.")
    p.add_argument("inputs", nargs="+", metavar="IMAGE_OR_FOLDER",
                   help="image files, and folders whose images (png, jpg, webp, ...) are taken in name order "
                        "(--recursive: with their subfolders')")
    p.add_argument("--model", default="clip", metavar="MODEL",
                   help="clip (A1111's Interrogate CLIP, default) or deepbooru (Interrogate DeepBooru; needs "
                        "--deepdanbooru-models-path)")
    output = p.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true",
                        help="print one JSON list of {\"file\": ..., \"caption\": ...} (the API's key) instead of "
                             "lines")
    output.add_argument("--write-captions", action="store_true",
                        help="write each answer to a caption file beside its image (NAME.txt beside NAME.png, "
                             "kohya / A1111 caption files) and print the files written")
    p.add_argument("--existing", choices=EXISTING, default=None,
                   help="with --write-captions, for a caption file that is already there: refuse (default; nothing "
                        "is written), skip its image, append the new tags not already in it, or overwrite it")
    p.add_argument("--overwrite", action="store_true", help="the same as --existing overwrite")
    p.add_argument("--caption-extension", default=None, metavar="EXT",
                   help=f"with --write-captions: the caption files' extension (kohya's; default {DEFAULT_EXTENSION})")
    p.add_argument("--recursive", action="store_true",
                   help="take the images of the folders' subfolders too (hidden folders are skipped), each caption "
                        "file beside its image")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print no progress on stderr (errors and warnings still)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cpu)")
    add_interrogator_flags(p)
    p.set_defaults(func=run)


def folder_images(folder: Path, recursive: bool) -> list[Path]:
    """A folder's images sorted by name; with `recursive`, its subfolders' too, sorted by their path under `folder`.
    Hidden folders (`.git`, `.cache`, a tool's `.thumbnails`) are not entered, nor are links to folders, which
    could lead back into the tree."""
    from mixkit.data.image_probe import is_image_file

    if not recursive:
        return sorted(f for f in folder.iterdir() if is_image_file(f))
    found = []
    for root, folders, names in os.walk(folder):  # os.walk does not follow links to folders
        folders[:] = [name for name in folders if not name.startswith(".")]
        found += [Path(root, name) for name in names if is_image_file(Path(root, name))]
    return sorted(found, key=lambda path: path.relative_to(folder).parts)


def image_files(inputs: list[str], recursive: bool = False) -> list[Path]:
    """The files to interrogate, in order: each file as given, each folder's images (see `folder_images`), each image
    once: one reached again (`set/ set/a.png`, overlapping folders with --recursive, `set/../set/a.png`) keeps its
    first place and spelling and is answered once."""
    from mixkit.data.image_probe import IMAGE_SUFFIXES

    files = []
    for value in inputs:
        path = Path(value).expanduser()
        if path.is_dir():
            found = folder_images(path, recursive)
            if not found:
                where = "a folder with no images, in it or its subfolders," if recursive else "a folder with no images"
                hint = ("" if recursive or not any(p.is_dir() and not p.name.startswith(".") for p in path.iterdir())
                        else " (add --recursive to take its subfolders' images)")
                raise ValueError(f"{value!r} is {where} ({', '.join(IMAGE_SUFFIXES)}){hint}; give another")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"{value!r} does not exist; give an image file or a folder of images")
    return _without_repeats(files)


def _without_repeats(files: list[Path]) -> list[Path]:
    """`files` with each image entry once, the first occurrence kept. Two spellings are the same entry when they name
    the same file in the same real folder: the folder is resolved (links, `..`, relative spellings), the name is not,
    because a link `b.png -> a.png` is its own dataset entry, whose caption file is b.txt, not a.txt."""
    seen, kept = set(), []
    for file in files:
        key = (Path(file).absolute().parent.resolve(), file.name)
        if key not in seen:
            seen.add(key)
            kept.append(file)
    return kept


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


def check_output_flags(args: argparse.Namespace) -> tuple[str, str]:
    """(what to do with existing caption files, the caption extension) from the flags; ValueError for a caption flag
    without --write-captions (it would change nothing) and for --overwrite against another --existing."""
    from webui.cli.caption_files import DEFAULT_EXTENSION, check_caption_extension

    if not args.write_captions:
        given = [flag for flag, value in (("--existing", args.existing), ("--overwrite", args.overwrite or None),
                                          ("--caption-extension", args.caption_extension)) if value is not None]
        if given:
            raise ValueError(f"{', '.join(given)} only matter{'s' if len(given) == 1 else ''} for caption files; add "
                             "--write-captions or leave " + ("it" if len(given) == 1 else "them") + " out")
    if args.overwrite and args.existing not in (None, "overwrite"):
        raise ValueError(f"--overwrite means --existing overwrite, which contradicts --existing {args.existing}; "
                         "give one of them")
    existing = "overwrite" if args.overwrite else args.existing or "refuse"
    extension = DEFAULT_EXTENSION if args.caption_extension is None else args.caption_extension
    return existing, check_caption_extension(extension)


class Progress:
    """What the command is doing, on stderr (stdout holds only the answers); silent with --quiet."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def __call__(self, message: str) -> None:
        if not self.quiet:
            print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def transformers_bars_silenced(silenced: bool):
    """transformers' own progress bars ("Loading weights") off while the block runs, for --quiet with the models
    it loads (CLIP's); restored afterwards, so a caller in the same process keeps its bars."""
    if not silenced:
        yield
        return
    from transformers.utils import logging as transformers_logging

    was_enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            transformers_logging.enable_progress_bar()


OUTCOME_WORDS = {"written": "written", "appended": "appended to", "overwritten": "overwritten",
                 "unchanged": "unchanged (every tag there already)", "skipped": "skipped (appeared meanwhile)",
                 "empty": "not written (empty answer)"}


def summary(count: int, outcomes: dict[str, int], skipped: int) -> str:
    """The closing progress line: how many images were interrogated and what became of their caption files."""
    done = [f"{outcomes[name]} {words}" for name, words in OUTCOME_WORDS.items() if outcomes.get(name)]
    before = f"; {skipped} image(s) skipped, their caption file existing" if skipped else ""
    return f"interrogated {count} image(s)" + (f"; caption files: {', '.join(done)}" if done else "") + before


def interrogate_all(args: argparse.Namespace, checked, files: list[Path], plans, skipped: int,
                    progress: Progress) -> tuple[list[dict], dict[str, int]]:
    """Load the interrogator, then answer each image: a line on stdout, a JSON item (returned), or its caption file
    saved as its plan says (the outcomes counted)."""
    from mixkit.io.images import load_image
    from webui.cli.caption_files import save_caption
    from webui.cli.interrogate_settings import interrogator_of

    # 3. The interrogator, its weights loaded now: a model that cannot load fails before the first image
    progress(f"loading {'DeepBooru' if checked.model == 'deepbooru' else 'the captioner and CLIP'} for "
             f"{len(files)} image(s)" + (f" ({skipped} skipped, their caption file existing)" if skipped else ""))
    interrogate = interrogator_of(args, checked)
    # 4. Each image
    answers, outcomes = [], {}
    for index, file in enumerate(files):
        progress(f"[{index + 1}/{len(files)}] {file}")
        answer = interrogate(load_image(file))
        if plans is not None:
            outcome = save_caption(plans[index], answer.text, list(answer.parts)) if answer.text else "empty"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if outcome in ("written", "appended", "overwritten"):
                print(plans[index].path, flush=True)
            elif outcome == "empty":  # A1111's Extras writes no caption file for an empty caption either
                print(f"{file}: no {'tags' if checked.model == 'deepbooru' else 'caption'}, so no "
                      f"{plans[index].path.name} was written", file=sys.stderr)
            elif outcome == "unchanged":
                progress(f"{plans[index].path}: every tag is there already; left as it was")
        elif args.json:
            answers.append({"file": str(file), "caption": answer.text})
        else:
            print(f"{file}\t{one_line(answer.text)}", flush=True)
    return answers, outcomes


def run(args: argparse.Namespace) -> int:
    from webui.cli.caption_files import plan_caption_files
    from webui.cli.interrogate_settings import check_interrogate_flags

    # 1. Flags, settings and model names, before any file is read
    existing, extension = check_output_flags(args)
    checked = check_interrogate_flags(args)
    progress = Progress(args.quiet)
    # 2. The images and their caption files; every image to interrogate readable, before any model loads
    files = image_files(args.inputs, args.recursive)
    plans = plan_caption_files(files, existing, extension) if args.write_captions else None
    skipped = 0
    if plans is not None:
        plans = [plan for plan in plans if plan.action != "skip"]
        skipped, files = len(files) - len(plans), [plan.image for plan in plans]
        if not files:
            progress(f"all {skipped} image(s) have a caption file already (--existing skip); nothing to interrogate")
            return 0
    check_images_readable(files)
    # 3. and 4. The models, then each image
    with transformers_bars_silenced(args.quiet and checked.model == "clip"):
        answers, outcomes = interrogate_all(args, checked, files, plans, skipped, progress)
    if args.json:
        print(json.dumps(answers, ensure_ascii=False, indent=2))
    progress(summary(len(files), outcomes, skipped))
    return 0
