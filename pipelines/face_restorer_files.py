"""Where A1111 keeps the face restorer and face detector weights, and how it names them.

A1111 looks for GFPGAN in `models/GFPGAN` (`--gfpgan-models-path`; the first .pth whose name contains "GFPGAN",
downloading GFPGANv1.4.pth when there is none) and for CodeFormer in `models/Codeformer` (`--codeformer-models-path`;
the first .pth, downloading codeformer-v0.1.0.pth). It patches facexlib to keep the RetinaFace detector
(detection_Resnet50_Final.pth) in the same folder as the restorer that asked for it. Nothing is downloaded here: a
missing file is an error naming the file, the folder to put it in and the URL A1111 fetches it from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RestorerRelease:
    """An A1111 face restorer: its name, folder flag, the file A1111 downloads and a test its files must pass."""

    name: str
    flag: str
    download_name: str
    url: str
    name_must_contain: str = ""

    def matches(self, file: Path) -> bool:
        return (file.suffix.lower() == ".pth" and self.name_must_contain in file.name
                and file.name not in FACEXLIB_FILES)


RELEASES = {
    "CodeFormer": RestorerRelease("CodeFormer", "--codeformer-models-path", "codeformer-v0.1.0.pth",
                                  "https://github.com/sczhou/CodeFormer/releases/download/v0.1.0/codeformer.pth"),
    "GFPGAN": RestorerRelease("GFPGAN", "--gfpgan-models-path", "GFPGANv1.4.pth",
                              "https://github.com/TencentARC/GFPGAN/releases/download/v1.3.0/GFPGANv1.4.pth",
                              name_must_contain="GFPGAN"),
}
DETECTOR_FILE = "detection_Resnet50_Final.pth"
DETECTOR_URL = "https://github.com/xinntao/facexlib/releases/download/v0.1.0/detection_Resnet50_Final.pth"
PARSER_FILE = "parsing_parsenet.pth"
PARSER_URL = "https://github.com/xinntao/facexlib/releases/download/v0.2.2/parsing_parsenet.pth"
# facexlib's own downloads, which A1111 puts next to the restorers: never taken for a restorer.
FACEXLIB_FILES = frozenset({DETECTOR_FILE, "detection_mobilenet0.25_Final.pth", PARSER_FILE,
                            "parsing_bisenet.pth"})


def restorer_weights_file(name: str, folder: str | os.PathLike) -> Path:
    """The weights A1111 would load for restorer `name` from `folder`: its download name if present, else the first
    matching .pth in name order. FileNotFoundError names the folder, the file and its URL when there is none."""
    release = RELEASES[name]
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"{release.flag} {str(root)!r} is not a folder; create it and put "
                                f"{release.download_name} ({release.url}) in it.")
    preferred = root / release.download_name
    if preferred.is_file():
        return preferred
    candidates = sorted(file for file in root.iterdir() if file.is_file() and release.matches(file))
    if not candidates:
        wanted = f"a .pth file with {release.name_must_contain!r} in its name" if release.name_must_contain \
            else "a .pth file"
        raise FileNotFoundError(
            f"No {name} weights in {str(root)!r} ({release.flag}): it needs {wanted}; A1111 downloads "
            f"{release.url} as {release.download_name}. Download it into that folder.")
    return candidates[0]


def detector_file(folders: list[str | os.PathLike]) -> Path:
    """facexlib's RetinaFace weights from the first of `folders` holding them (the restorer's own folder first)."""
    roots = [Path(folder).expanduser() for folder in folders]
    for root in roots:
        if (root / DETECTOR_FILE).is_file():
            return root / DETECTOR_FILE
    where = ", ".join(repr(str(root)) for root in roots) or "(no face restorer folder set)"
    raise FileNotFoundError(
        f"Face restoration needs the face detector {DETECTOR_FILE}, found in none of {where}. Download "
        f"{DETECTOR_URL} into {str(roots[0]) if roots else 'the restorer folder'!r} (A1111 keeps it next to the "
        "restorer weights).")


def parser_file(folders: list[str | os.PathLike]) -> Path | None:
    """facexlib's ParseNet weights from the first of `folders` holding them (the restorer's own folder first), or
    None: A1111 pastes faces under the parse mask when it has the file and the square soft mask is the fallback."""
    for root in (Path(folder).expanduser() for folder in folders):
        if (root / PARSER_FILE).is_file():
            return root / PARSER_FILE
    return None
