"""Caption files beside images (`mixkit interrogate --write-captions`): `NAME.txt` next to `NAME.png`, the layout
kohya's trainers (`caption_extension`, default ".txt" in its taggers) and A1111's Extras captions use.

All the names are planned before any model loads. What happens to a caption that is already there is the user's
choice (`EXISTING`, the choices kohya's and A1111's taggers offer): refuse (the default: it may be hand-written),
skip its image, append the new tags to it (`webui.cli.caption_merge`), or overwrite it. Two images that would share
one caption file (`cat.png` and `cat.jpg`) are refused, as the second would silently replace the first's. Each file
is written whole to a hidden temporary file and renamed into place, so an interrupted run leaves complete captions
only; a caption file that appears while the command runs is handled as the choice for existing ones says.

Appending is a read-modify-write, and the caption may be open in an editor (a tagging tool, a text editor) while
the model runs: the file is read after its image is answered, and read again right before the rename; if it changed
in between, the tags are merged into the new text instead, so the other program's edit is kept (a few tries, then
CaptionChangedError). Only the instant between that last read and the rename is left, as no portable file lock
exists that text editors honour.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mixkit.data.captions import caption_path, decode_caption
from mixkit.errors import MixkitError

DEFAULT_EXTENSION = ".txt"
# what to do with a caption file that already exists; the first is the default
EXISTING = ("refuse", "skip", "append", "overwrite")
SHOWN = 5  # files named in an error before "and N more"
APPEND_TRIES = 3  # merges of a caption that another program keeps changing before it is refused


class CaptionFileExistsError(MixkitError, FileExistsError):
    """A caption file that would be written is already there (the user's, perhaps hand-written)."""


class CaptionChangedError(MixkitError):
    """Another program changed a caption file each time new tags were about to be appended to it."""


@dataclass(frozen=True)
class CaptionPlan:
    """One image's caption file, what to do with it ("write" a new file, or the `existing` choice for a file already
    there: "append", "overwrite", "skip"), and that choice, for a file that appears while the command runs."""

    image: Path
    path: Path
    action: str
    existing: str = "refuse"


def check_caption_extension(extension: str) -> str:
    """`extension` as given, when it can name a caption file beside an image (ValueError saying why not): a dot and
    a name (`.txt`, `.caption`, `.tags.txt`), no folder, and not an image's own suffix, which would overwrite
    images."""
    from mixkit.data.image_probe import IMAGE_SUFFIXES

    if not isinstance(extension, str) or not extension.startswith(".") or not extension.strip(". "):
        raise ValueError(f"--caption-extension {extension!r} must be a dot and a name, e.g. .txt (kohya's default) "
                         "or .caption")
    if "/" in extension or "\\" in extension or extension != extension.strip():
        raise ValueError(f"--caption-extension {extension!r} must be a file extension such as .txt, without a folder "
                         "or surrounding spaces")
    if extension.lower() in IMAGE_SUFFIXES:
        raise ValueError(f"--caption-extension {extension!r} is an image extension: its caption files would replace "
                         "images; use .txt or .caption")
    return extension


def _listed(paths: list[str]) -> str:
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return ", ".join(paths[:SHOWN]) + more


def _refuse_shared(images: list[Path], captions: list[Path]) -> None:
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


def read_caption(path: Path) -> str:
    """A caption file's text, to append to, decoded as the trainers read it (`mixkit.data.captions`: UTF-8, or UTF-16
    / UTF-32 with a byte-order mark; it is written back as UTF-8). Refused, naming the file: another encoding, and
    several lines of text, as the trainers read only the first line, so tags appended after it would be lost."""
    return caption_text(path.read_bytes(), path)


def caption_text(data: bytes, path: Path) -> str:
    """`read_caption` of the bytes `data` read from `path`."""
    text = decode_caption(data, path)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if len(lines) > 1:
        raise ValueError(f"{path} holds {len(lines)} lines and trainers read only the first, so appended tags would "
                         "be lost; join its lines, or use --existing skip or overwrite")
    return text


def plan_caption_files(images: list[Path], existing: str = "refuse",
                       extension: str = DEFAULT_EXTENSION) -> list[CaptionPlan]:
    """Each image's caption file and what to do with it, in order (`existing`: one of `EXISTING`, for the captions
    already there). Refused before any model loads: two images sharing a caption file (ValueError), a caption path
    that is a folder (ValueError), existing captions under "refuse" (CaptionFileExistsError naming them), existing
    captions under "append" that cannot take more tags (`read_caption`; all of them named at once)."""
    if existing not in EXISTING:
        raise ValueError(f"--existing {existing!r} is not a choice; use one of {', '.join(EXISTING)}")
    captions = [caption_path(image, extension) for image in images]
    _refuse_shared(images, captions)
    folders = [str(caption) for caption in captions if caption.is_dir()]
    if folders:
        raise ValueError(f"{len(folders)} caption path(s) are folders: {_listed(folders)}; rename them or choose "
                         "another --caption-extension")
    found = [caption for caption in captions if caption.exists()]
    there = set(found)
    if found and existing == "refuse":
        raise CaptionFileExistsError(f"{len(found)} caption file(s) already exist: {_listed([str(c) for c in found])}"
                                     "; add --existing skip to leave them (and their images) alone, --existing append "
                                     "to add the new tags to them, --existing overwrite (--overwrite) to replace "
                                     "them, or move them away")
    if existing == "append":
        unusable = []
        for caption in found:
            try:
                read_caption(caption)
            except ValueError as error:  # CaptionEncodingError, several lines
                unusable.append(str(error))
        if unusable:
            more = f"; and {len(unusable) - SHOWN} more" if len(unusable) > SHOWN else ""
            raise ValueError(f"{len(unusable)} caption file(s) cannot be appended to, so nothing was written: "
                             + "; ".join(unusable[:SHOWN]) + more)
    return [CaptionPlan(image, caption, existing if caption in there else "write", existing)
            for image, caption in zip(images, captions)]


def write_caption_file(path: Path, caption: str, overwrite: bool) -> None:
    """`caption` (UTF-8, no trailing newline, as A1111 writes captions) atomically at `path`; without `overwrite` a
    file that appeared since the plan is kept and CaptionFileExistsError names it."""
    from pipelines.png import publish_file, written_temporary_file

    temp = written_temporary_file(path.parent, path.stem, caption.encode("utf-8"))
    try:
        publish_file(temp, path, replace=overwrite)
    except FileExistsError:
        raise CaptionFileExistsError(f"{path} was created by another program while this one ran; it is kept (add "
                                     "--existing overwrite or append to change existing captions)") from None
    finally:
        temp.unlink(missing_ok=True)


def save_caption(plan: CaptionPlan, text: str, parts: list[str]) -> str:
    """Carry out `plan` for an answer (`text`, made of comma `parts`); what was done: "written", "overwritten",
    "appended", "unchanged" (append found every part already there) or "skipped". A caption file that appeared
    since the plan is treated as the plan's `existing` choice says (refused: CaptionFileExistsError)."""
    action = plan.action
    if action == "write":
        try:
            write_caption_file(plan.path, text, overwrite=False)
            return "written"
        except CaptionFileExistsError:
            if plan.existing == "refuse":
                raise
            action = plan.existing
    if action == "skip":
        return "skipped"
    if action == "overwrite":
        write_caption_file(plan.path, text, overwrite=True)
        return "overwritten"
    outcome = append_to_caption_file(plan.path, parts)
    if outcome is None:  # removed since the plan: the answer is the whole caption
        return save_caption(CaptionPlan(plan.image, plan.path, "write", plan.existing), text, parts)
    return outcome


def _bytes_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def append_to_caption_file(path: Path, parts: list[str]) -> str | None:
    """Append the answer's new `parts` to the caption file at `path` (`caption_merge`); "appended" or "unchanged",
    None when there is no such file (any more). The merged caption replaces the file only if the file still holds
    what the merge was made from, checked right before the rename; otherwise the merge is made again from the new
    text, so a concurrent edit is kept. A file that changes on every try raises CaptionChangedError and is left as
    the other program wrote it; a change that makes it unusable (several lines) raises `read_caption`'s ValueError.
    No temporary file is left behind either way."""
    from pipelines.png import publish_file, written_temporary_file
    from webui.cli.caption_merge import appended_caption

    for _ in range(APPEND_TRIES):
        read = _bytes_or_none(path)
        if read is None:
            return None
        merged = appended_caption(caption_text(read, path), parts)
        if merged is None:
            return "unchanged"
        temp = written_temporary_file(path.parent, path.stem, merged.encode("utf-8"))
        try:
            if _bytes_or_none(path) == read:
                publish_file(temp, path, replace=True)
                return "appended"
        finally:
            temp.unlink(missing_ok=True)
    raise CaptionChangedError(f"{path} was changed by another program each of the {APPEND_TRIES} times new tags "
                              "were about to be appended, so it is left as that program wrote it; close it there "
                              "and run the command again")
