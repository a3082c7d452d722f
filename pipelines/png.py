"""Saving generated images as PNG files that carry their A1111 infotext.

Writes are atomic (a temporary file in the target folder, then `os.replace`) so an interrupted
run or a full disk never leaves a truncated PNG that image browsers would choke on; a counter name is taken only
if it is still free (`save_png_numbered`), so concurrent writers never overwrite each other's images.
Where the infotext goes is A1111's two saving options (`InfotextWriting`): the PNG's `parameters` chunk
(`enable_pnginfo`) and a `.txt` file of the same name beside it (`save_txt`).
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, PngImagePlugin

INFOTEXT_KEY = "parameters"  # the PNG text keyword A1111 (and Civitai, ComfyUI readers) use
COUNTER_PATTERN = re.compile(r"^(\d+)(?:-|$)")  # matched against the name without extension
COUNTER_DIGITS = 5


@dataclass(frozen=True)
class InfotextWriting:
    """Where a saved image's infotext is written: A1111's Settings > Saving images options of the same meaning.

    `pnginfo` ("Write infotext to metadata of the generated image", `enable_pnginfo`, default on): the PNG's
    `parameters` text chunk. Off, the image carries no parameters (a shared picture does not tell its prompt).
    `txt` ("Create a text file next to every image with generation parameters", `save_txt`, default off):
    `<name>.txt` beside `<name>.png`, the infotext and a line break in UTF-8, as A1111 writes it.
    """

    pnginfo: bool = True
    txt: bool = False

    def __post_init__(self) -> None:
        for name in ("pnginfo", "txt"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"InfotextWriting.{name} must be True or False, got {getattr(self, name)!r}")

    def chunk(self, infotext: str | None) -> str | None:
        """The infotext to put in the PNG's `parameters` chunk (None: no chunk)."""
        return infotext if self.pnginfo else None


PNG_ONLY = InfotextWriting()  # A1111's defaults: infotext in the PNG, no text file


def infotext_png_info(infotext: str) -> PngImagePlugin.PngInfo:
    """PNG text chunks for an infotext: `tEXt` when Latin-1 can hold it, `iTXt` (UTF-8) otherwise.

    This is the choice A1111 gets from Pillow's `PngInfo.add_text(key, value)`: the PNG spec
    makes `tEXt` Latin-1 only, so Japanese or emoji prompts need the UTF-8 `iTXt` chunk.
    Neither is compressed, as in A1111, so plain-text tools can still find the prompt.
    """
    info = PngImagePlugin.PngInfo()
    try:
        infotext.encode("latin-1")
    except UnicodeEncodeError:
        info.add_itxt(INFOTEXT_KEY, infotext, zip=False)
    else:
        info.add_text(INFOTEXT_KEY, infotext, zip=False)
    return info


def check_save_png_inputs(image: object, path: Path, infotext: object) -> None:
    """Validate `save_png` arguments; raise TypeError/ValueError naming the bad value."""
    if not isinstance(image, Image.Image):
        raise TypeError(f"image must be a PIL.Image.Image, got {type(image).__name__}")
    if infotext is not None and not isinstance(infotext, str):
        raise TypeError(f"infotext must be a str or None, got {type(infotext).__name__}")
    if path.suffix.lower() != ".png":
        raise ValueError(f"PNG output path must end in .png, got {str(path)!r}")
    if path.exists() and path.is_dir():
        raise ValueError(f"PNG output path {str(path)!r} is a folder; give a file name such as 00000-1234.png")


def prepare_output_folder(folder: Path) -> None:
    """Create the output folder if needed, turning OS errors into one clear message that names it."""
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"Output folder {str(folder)!r} exists and is not a folder; choose another output folder.")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as error:
        raise NotADirectoryError(
            f"Cannot create output folder {str(folder)!r}: a part of its path is a file ({error.strerror}). "
            "Choose another output folder."
        ) from error
    except PermissionError as error:
        raise PermissionError(f"Cannot create output folder {str(folder)!r}: permission denied. Choose a writable folder.") from error


def save_png(image: Image.Image, path: str | os.PathLike, infotext: str | None, *, replace: bool = True,
             writing: InfotextWriting = PNG_ONLY) -> Path:
    """Save `image` as PNG at `path` with `infotext` where `writing` says (by default the `parameters` text chunk);
    returns the path.

    The parent folder is created if missing (as A1111 does). An existing file at `path` is replaced, or with
    `replace=False` left alone and FileExistsError raised (`publish_file`). On any failure nothing is left behind:
    neither a partial PNG nor the temporary file, nor a PNG whose `.txt` (`writing.txt`) could not be written.
    """
    path = Path(path)
    check_save_png_inputs(image, path, infotext)
    if not isinstance(writing, InfotextWriting):
        raise TypeError(f"writing must be an InfotextWriting, got {type(writing).__name__}")
    chunk = writing.chunk(infotext)
    png_info = infotext_png_info(chunk) if chunk is not None else None
    return write_png_file(image, path, png_info, replace=replace, text=infotext if writing.txt else None)


def write_png_file(image: Image.Image, path: Path, png_info: PngImagePlugin.PngInfo | None, *, replace: bool,
                   text: str | None = None) -> Path:
    """Write `image` as PNG at `path` with `png_info`'s chunks, and `text` (when not None) and a line break in
    `<stem>.txt` beside it, each through a temporary file (`publish_file`); returns the path.

    On any failure nothing is left behind: no partial file, no temporary file, and no PNG whose text file could not
    be written (a half-written result)."""
    folder = path.parent
    prepare_output_folder(folder)
    text_file = written_temporary_file(folder, path.stem, (text + "\n").encode("utf-8")) if text is not None else None
    temp_path, published = None, False
    try:
        handle, temp_path = open_temporary_file(folder, path.stem)
        with handle:
            image.save(handle, format="PNG", pnginfo=png_info)
            handle.flush()
            os.fsync(handle.fileno())
        publish_file(temp_path, path, replace=replace)
        published = True
        if text_file is not None:
            os.replace(text_file, path.with_suffix(".txt"))
    except BaseException:
        if temp_path is not None:
            temp_path.unlink(missing_ok=True)
        if text_file is not None:
            text_file.unlink(missing_ok=True)
        if published:
            path.unlink(missing_ok=True)
        raise
    return path


def written_temporary_file(folder: Path, stem: str, data: bytes) -> Path:
    """A finished hidden temporary file in `folder` holding `data` (to be renamed into place); its path."""
    handle, temp_path = open_temporary_file(folder, stem)
    try:
        with handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        temp_path.unlink(missing_ok=True)
        raise
    return temp_path


def publish_file(temp_path: Path, path: Path, *, replace: bool) -> None:
    """Give a finished temporary file its name: replacing a file of that name, or (`replace=False`) only if the name
    is free, raising FileExistsError otherwise.

    The no-replace form is for counter names (`next_image_path`): two writers that listed the folder at the same
    time (two browser tabs' Extras, two `mixkit` runs) pick the same name, and `os.replace` would silently drop the
    first image. A hard link is POSIX's atomic create-if-absent for a finished file; where the file system has
    none (FAT, some network shares) a check before the rename narrows the window instead.
    """
    if replace:
        os.replace(temp_path, path)
        return
    try:
        os.link(temp_path, path)
    except FileExistsError:
        raise
    except OSError:  # no hard links here
        if os.path.lexists(path):
            raise FileExistsError(f"{path} was written by another process meanwhile") from None
        os.replace(temp_path, path)
        return
    temp_path.unlink()


def save_png_numbered(image: Image.Image, folder: str | os.PathLike, seed: int, infotext: str | None, *,
                      writing: InfotextWriting = PNG_ONLY) -> Path:
    """Save `image` under the next free counter name of `folder` (`next_image_path`), taking the following one when
    another writer got there first; returns the path. `writing` as for `save_png`."""
    for _ in range(100):
        try:
            return save_png(image, next_image_path(folder, seed), infotext, replace=False, writing=writing)
        except FileExistsError:
            continue  # another writer took that counter between our listing and our write
    raise FileExistsError(f"Could not find a free file name in {str(folder)!r}: 100 counter names were taken while "
                          "saving; is another program writing there in a loop?")


def open_temporary_file(folder: Path, stem: str):
    """Create a new hidden temporary file in `folder`; returns (binary file object, its path).

    Unlike `tempfile`, the file gets the usual permissions (0666 minus the umask): the finished PNG
    is this very file, and image browsers or web servers running as other users must read it.
    """
    for _ in range(100):
        temp_path = folder / f".{stem}.{secrets.token_hex(4)}.tmp"
        try:
            descriptor = os.open(temp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        except FileExistsError:
            continue
        except PermissionError as error:
            raise PermissionError(f"Output folder {str(folder)!r} is not writable; choose a writable folder.") from error
        return os.fdopen(descriptor, "wb"), temp_path
    raise FileExistsError(f"Could not create a temporary file in {str(folder)!r}: 100 random names were all taken.")


def next_image_path(folder: str | os.PathLike, seed: int) -> Path:
    """The next free A1111-style file name in `folder`: `00000-1234.png`, `00001-1234.png`, ...

    The counter is one more than the highest counter any file in the folder starts with (A1111's
    `get_next_sequence_number`), so numbering continues across runs and other file types. Names
    carry no prompt text, so a prompt can never produce an unsafe or overlong file name.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}: {seed!r}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0 for a file name, got {seed}; resolve a random seed (-1) before saving")
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"Output folder {str(folder)!r} exists and is not a folder; choose another output folder.")
    highest = -1
    if folder.is_dir():
        for name in os.listdir(folder):
            match = COUNTER_PATTERN.match(os.path.splitext(name)[0])
            if match is not None:
                highest = max(highest, int(match.group(1)))
    return folder / f"{highest + 1:0{COUNTER_DIGITS}d}-{seed}.png"
