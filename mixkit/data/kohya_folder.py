"""Scan a kohya-style training folder: `<root>/<repeats>_<concept>/image.png` + `image.txt`.

A subfolder named `10_sks dog` means "repeat these images 10 times per epoch, concept `sks dog`"
(kohya's DreamBooth convention). Images beside such subfolders are ignored with a warning naming them, as
kohya (`generate_dreambooth_subsets_config_by_subdirs`) reads only the subfolders: a stray preview in the
root is not training data. A folder without any such subfolder is a plain image folder (a mixkit
extension, used by the CLIP and VLM trainers): its images count once, concept = the folder's name.
A `<stem>-masklabel.png` beside an image is its loss mask (`loss_masks`), not an image of its own.
Unreadable images are skipped and reported, never fatal: one corrupt file among thousands should
not cost a training run.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from mixkit.data.captions import MISSING_CAPTION_POLICIES, read_caption
from mixkit.data.image_probe import IMAGE_SUFFIXES, is_image_file, probe_image
from mixkit.data.loss_masks import is_mask_file, mask_file_beside
from mixkit.data.records import ImageRecord, ScanReport

logger = logging.getLogger(__name__)

REPEAT_FOLDER = re.compile(r"^(\d+)_(.+)$")


def parse_repeat_folder(name: str) -> tuple[int, str] | None:
    """`10_sks dog` -> (10, "sks dog"); None for a folder without the repeat prefix."""
    match = REPEAT_FOLDER.match(name)
    if not match:
        return None
    return int(match.group(1)), match.group(2).strip()


def _check_inputs(root: Path, missing_captions: str, caption_extension: str) -> None:
    check_caption_extension(caption_extension)
    if not root.is_dir():
        what = "is a file" if root.exists() else "does not exist"
        raise FileNotFoundError(f"Dataset folder {str(root)!r} {what}; pass a folder of images with caption files "
                                f"({caption_extension} beside each image).")
    MISSING_CAPTION_POLICIES.get(missing_captions)


def check_caption_extension(extension) -> None:
    """A caption extension as kohya's `caption_extension` takes it: `.txt`, `.caption`, `.tags.txt`..."""
    if (not isinstance(extension, str) or len(extension) < 2 or not extension.startswith(".")
            or any(c in extension for c in "/\\")):
        raise ValueError(f"caption_extension must be a file extension starting with a dot, like '.txt' or "
                         f"'.caption' (kohya's default), got {extension!r}")
    if extension.lower() in IMAGE_SUFFIXES:
        raise ValueError(f"caption_extension={extension!r} is an image suffix: the images would be read as their "
                         "own captions; use the extension of the caption text files, like '.txt' or '.caption'")


def _scan_images(images: list[Path], repeats: int, concept: str, policy: str, extension: str,
                 report: ScanReport) -> None:
    choose_caption = MISSING_CAPTION_POLICIES.get(policy)
    for image in images:
        size = probe_image(image)
        if isinstance(size, str):
            report.skipped.append((image, size))
            logger.warning("Skipping unreadable training image %s: %s", image, size)
            continue
        caption = read_caption(image, extension)
        if caption is None:
            caption = choose_caption(image, concept, extension)
            message = f"{image} has no {extension} caption; using {caption!r} (missing_captions={policy!r})"
            report.warnings.append(message)
            logger.warning(message)
        report.records.append(ImageRecord(image, caption, repeats, concept, size[0], size[1],
                                          mask=mask_file_beside(image)))


def _training_images(folder: Path) -> list[Path]:
    """The images of `folder` itself, sorted; `<stem>-masklabel.png` files are loss masks, not training images."""
    return sorted(p for p in folder.iterdir() if is_image_file(p) and not is_mask_file(p))


def scan_image_folder(folder: Path, repeats: int, concept: str, *, missing_captions: str, caption_extension: str,
                      report: ScanReport) -> None:
    """Add the images of `folder` itself (a kohya dataset-config subset's image_dir) to `report`, each repeated
    `repeats` times per epoch; a missing caption is chosen by `missing_captions` from `concept`."""
    _scan_images(_training_images(folder), repeats, concept, missing_captions, caption_extension, report)


def _warn_ignored_root_images(root: Path, images: list[Path], report: ScanReport) -> None:
    """Name the images kohya would not train because they lie beside the repeat subfolders, not in one."""
    shown = ", ".join(p.name for p in images[:5]) + (f" and {len(images) - 5} more" if len(images) > 5 else "")
    report.warnings.append(
        f"{len(images)} image(s) directly in {root} are ignored, as kohya ignores them: {shown}. Only the "
        "'<repeats>_<concept>' subfolders are trained; move the images into one (like '1_concept') to train them.")
    logger.warning(report.warnings[-1])


def scan_kohya_folder(root: str | Path, *, missing_captions: str = "folder_name",
                      caption_extension: str = ".txt") -> ScanReport:
    """Every usable image under `root` with caption and repeat count; skipped files listed in the report.

    With `<repeats>_<concept>` subfolders only those are read, as kohya reads them (images beside them are ignored
    with a warning); without any, `root` is a plain image folder whose images count once.
    `caption_extension` is kohya's: `photo.png` is captioned by `photo<caption_extension>` (`.txt` by default here,
    `.caption` in kohya)."""
    root = Path(root).expanduser()
    _check_inputs(root, missing_captions, caption_extension)
    report = ScanReport()
    subfolders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    root_images = _training_images(root)
    if not any(parse_repeat_folder(sub.name) for sub in subfolders):
        _scan_images(root_images, 1, root.name, missing_captions, caption_extension, report)
    elif root_images:
        _warn_ignored_root_images(root, root_images, report)
    for sub in subfolders:
        parsed = parse_repeat_folder(sub.name)
        if parsed is None:
            report.warnings.append(f"{sub} is not named '<repeats>_<concept>' (like '10_dog'); its images are ignored")
            logger.warning(report.warnings[-1])
            continue
        repeats, concept = parsed
        if repeats < 1:
            raise ValueError(f"Folder {str(sub)!r} asks for {repeats} repeats; use at least 1 (like '1_{concept}').")
        _scan_images(_training_images(sub), repeats, concept, missing_captions, caption_extension, report)
    return report
