"""Caption files beside images (`mixkit interrogate --write-captions`): `NAME.txt` next to `NAME.png`, the layout
kohya's trainers (`caption_extension=".txt"`) and A1111's Extras captions use.

All the names are planned before any model loads: an existing caption is refused unless overwriting is asked for (it
may be hand-written), and two images that would share one caption file (`cat.png` and `cat.jpg`) are refused, as
the second would silently replace the first's. Each file is written whole to a hidden temporary file and renamed into
place, without overwriting a file that appeared meanwhile, so an interrupted run leaves complete captions only.
"""

from __future__ import annotations

from pathlib import Path

from mixkit.errors import MixkitError

CAPTION_SUFFIX = ".txt"
SHOWN = 5  # files named in an error before "and N more"


class CaptionFileExistsError(MixkitError, FileExistsError):
    """A caption file that would be written is already there (the user's, perhaps hand-written)."""


def caption_path(image: Path) -> Path:
    return image.with_suffix(CAPTION_SUFFIX)


def _listed(paths: list[str]) -> str:
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return ", ".join(paths[:SHOWN]) + more


def plan_caption_files(images: list[Path], overwrite: bool) -> list[Path]:
    """The caption file of each image, in order; ValueError naming the images that share one, CaptionFileExistsError
    naming the captions already there (without `overwrite`)."""
    captions = [caption_path(image) for image in images]
    first: dict[Path, Path] = {}
    shared = []
    for image, caption in zip(images, captions):
        key = caption.resolve()
        if key in first:
            shared.append(f"{first[key]} and {image} -> {caption}")
        else:
            first[key] = image
    if shared:
        raise ValueError(f"two images would write the same caption file: {_listed(shared)}; give only one of each, or "
                         "rename one")
    existing = [str(caption) for caption in captions if caption.exists()]
    if existing and not overwrite:
        raise CaptionFileExistsError(f"{len(existing)} caption file(s) already exist: {_listed(existing)}; add "
                                     "--overwrite to replace them, or move them away")
    return captions


def write_caption_file(path: Path, caption: str, overwrite: bool) -> None:
    """`caption` (UTF-8, no trailing newline, as A1111 writes captions) atomically at `path`; without `overwrite` a
    file that appeared since the plan is kept and CaptionFileExistsError names it."""
    from pipelines.png import publish_file, written_temporary_file

    temp = written_temporary_file(path.parent, path.stem, caption.encode("utf-8"))
    try:
        publish_file(temp, path, replace=overwrite)
    except FileExistsError:
        raise CaptionFileExistsError(f"{path} was created by another program while this one ran; it is kept (add "
                                     "--overwrite to replace captions)") from None
    finally:
        temp.unlink(missing_ok=True)
