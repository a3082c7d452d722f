"""The VAEs of `--vae-dir` by name, plus "Automatic" (the loaded checkpoint's own VAE), as A1111's `sd_vae`.

"None" is accepted too: in A1111 it is the checkpoint's built-in VAE, never a file, and scripts post it
to reset the VAE. "Automatic" is the checkpoint's VAE as the loader chose it: like A1111, a
`<checkpoint>.vae.safetensors` (`.vae.pt`, `.vae.ckpt`) next to a single-file checkpoint is used when
there is one (`mixkit.models.diffusion.loading.find_vae_near_checkpoint`), else the built-in VAE.

A name is the file name (`kl-f8.safetensors`, `vae-ft-mse-840000-ema-pruned.ckpt`) or the folder name of a
diffusers VAE folder (one with `config.json` or `vae/config.json`), matching what A1111 shows in its VAE list
and writes as the infotext's `VAE:`. A1111 lists `*.pt`, `*.ckpt` and `*.safetensors` in its VAE folder,
and so does this catalog: pickled VAEs load with torch's weights-only loader (`mixkit.io`). A pickle
that imports anything that could run code is left out of the list with a warning naming the import.
With `checkpoints_dir`, the `*.vae.*` files next to the checkpoints are listed too, as A1111 lists them.
"""

from __future__ import annotations

import logging
from pathlib import Path

from mixkit.errors import ModelNotFoundError, UnknownNameError
from mixkit.models.diffusion.loading import VAE_NEAR_CHECKPOINT_SUFFIXES

logger = logging.getLogger(__name__)

AUTOMATIC = "Automatic"
NONE = "None"  # A1111's "the checkpoint's own VAE, never a file"
VAE_FILE_SUFFIXES = (".safetensors", ".pt", ".ckpt")  # A1111's models/VAE glob
PICKLE_SUFFIXES = (".pt", ".ckpt")


def _is_vae_folder(path: Path) -> bool:
    return path.is_dir() and ((path / "config.json").is_file() or (path / "vae" / "config.json").is_file())


def _refused_pickle(path: Path) -> str | None:
    """Why mixkit would refuse to load the pickled VAE at `path` (it imports code), or None if it may load."""
    from mixkit.errors import CheckpointFormatError, UnsafeCheckpointError
    from mixkit.io import check_pickle_is_safe

    try:
        check_pickle_is_safe(path, a1111_types=True)  # mixkit's own reader loads VAE files
    except UnsafeCheckpointError as error:
        return str(error)
    except CheckpointFormatError:
        return None  # corrupt: listed, and choosing it fails with the reader's message, as a broken .safetensors does
    return None


def _is_loadable_vae_file(path: Path) -> bool:
    if path.suffix.lower() not in PICKLE_SUFFIXES:
        return True
    refusal = _refused_pickle(path)
    if refusal:
        logger.warning("VAE file %s is not listed: %s", path, refusal)
    return refusal is None


class VaeCatalog:
    def __init__(self, folder: str | None, checkpoints_dir: str | None = None) -> None:
        self.folder = Path(folder).expanduser() if folder else None
        if self.folder is not None and not self.folder.is_dir():
            raise ModelNotFoundError(f"--vae-dir {self.folder} does not exist or is not a folder.")
        self.checkpoints_dir = Path(checkpoints_dir).expanduser() if checkpoints_dir else None
        if self.checkpoints_dir is not None and not self.checkpoints_dir.is_dir():
            raise ModelNotFoundError(f"--models-dir {self.checkpoints_dir} does not exist or is not a folder.")
        self._paths: dict[str, Path] = {}
        self.refresh()

    def refresh(self) -> None:
        paths: dict[str, Path] = {}
        candidates: list[Path] = []
        if self.checkpoints_dir is not None:
            candidates += [p for p in sorted(self.checkpoints_dir.rglob("*"))
                           if p.is_file() and p.name.lower().endswith(VAE_NEAR_CHECKPOINT_SUFFIXES)]
        if self.folder is not None:
            candidates += [p for p in sorted(self.folder.iterdir())
                           if (p.is_file() and p.suffix.lower() in VAE_FILE_SUFFIXES) or _is_vae_folder(p)]
        for path in candidates:
            if path.is_dir() or _is_loadable_vae_file(path):
                paths[path.name] = path  # as A1111's vae_dict: a later folder's file of the same name wins
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

    def name_for_infotext(self, written: str) -> str | None:
        """The `sd_vae` value an infotext's `VAE:` selects, or None when no listed VAE has that name.

        A1111 writes the file name with its extension and pastes it back into `sd_vae` as is; mixkit before
        this release wrote the name without extension, so a unique stem match is accepted too.
        """
        if not isinstance(written, str) or not written.strip():
            return None
        written = written.strip()
        if written in self._paths:
            return written
        stems = [name for name, path in self._paths.items() if path.is_file() and path.stem == written]
        return stems[0] if len(stems) == 1 else None
