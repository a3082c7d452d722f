"""The VAEs of `--vae-dir` by name, plus "Automatic" (the loaded checkpoint's own VAE), as A1111's `sd_vae`.

"None" is accepted too and means the same: in A1111 it is the checkpoint's own VAE, and scripts post it to
reset the VAE. ("Automatic" there may also pick a VAE file named like the checkpoint; this server has none.)

A name is the file name (`kl-f8.safetensors`) or the folder name of a diffusers VAE folder
(one with `config.json` or `vae/config.json`), matching what A1111 shows in its VAE list.
"""

from __future__ import annotations

from pathlib import Path

from mixkit.errors import ModelNotFoundError, UnknownNameError

AUTOMATIC = "Automatic"
NONE = "None"  # A1111's "the checkpoint's own VAE, never a file"
VAE_FILE_SUFFIXES = (".safetensors",)  # pickled .pt/.ckpt VAEs are refused: convert them to safetensors


def _is_vae_folder(path: Path) -> bool:
    return path.is_dir() and ((path / "config.json").is_file() or (path / "vae" / "config.json").is_file())


class VaeCatalog:
    def __init__(self, folder: str | None) -> None:
        self.folder = Path(folder).expanduser() if folder else None
        if self.folder is not None and not self.folder.is_dir():
            raise ModelNotFoundError(f"--vae-dir {self.folder} does not exist or is not a folder.")
        self._paths: dict[str, Path] = {}
        self.refresh()

    def refresh(self) -> None:
        paths: dict[str, Path] = {}
        if self.folder is not None:
            for path in sorted(self.folder.iterdir()):
                if (path.is_file() and path.suffix in VAE_FILE_SUFFIXES) or _is_vae_folder(path):
                    paths[path.name] = path
        self._paths = paths

    def names(self) -> list[str]:
        return [AUTOMATIC, *self._paths]

    def files(self) -> dict[str, Path]:
        """The VAE files and folders by name (`/sdapi/v1/sd-vae`), without "Automatic"."""
        return dict(self._paths)

    def find(self, name: str) -> Path | None:
        """The VAE's path, None for "Automatic" or "None"; an unknown name raises UnknownNameError listing the valid ones."""
        if name in (AUTOMATIC, NONE):
            return None
        if not isinstance(name, str) or name not in self._paths:
            where = f" in --vae-dir {self.folder}" if self.folder else " (no --vae-dir was given)"
            raise UnknownNameError(f"Unknown VAE {name!r}{where}; valid: {', '.join(self.names())}.")
        return self._paths[name]
