"""ControlNet models the operator put in `--controlnet-dir`, picked by name, loaded once and reused.

As for checkpoints, requests name a model (as sd-webui-controlnet's `model` field does, with or
without its " [hash]" suffix); they never pass a path.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

SUFFIXES = (".safetensors", ".pth", ".pt", ".ckpt", ".bin")


def _without_hash_suffix(name: str) -> str:
    """"canny [fp16] [abc123]" -> "canny [fp16]": only the last bracketed part is the extension's hash."""
    stem, bracket, rest = name.rpartition(" [")
    return stem.strip() if bracket and rest.endswith("]") else name


class ControlNetModels:
    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder).expanduser()
        if not self.folder.is_dir():
            raise NotADirectoryError(f"ControlNet folder {str(self.folder)!r} does not exist; create it or fix --controlnet-dir.")
        self._loaded: dict[str, object] = {}
        self._lock = threading.Lock()

    def sources(self) -> dict[str, Path]:
        """name -> file or diffusers folder, rescanned on every call (the folder is small)."""
        found = {}
        for path in sorted(self.folder.iterdir()):
            if path.is_file() and path.suffix.lower() in SUFFIXES:
                found[path.stem] = path
            elif path.is_dir() and (path / "config.json").is_file():
                found[path.name] = path
        return found

    def names(self) -> list[str]:
        return list(self.sources())

    def resolve(self, name: object) -> str:
        """The catalog name for `name`: a listed name as given (a file may be called "canny [fp16]"), else the name
        without a trailing " [hash]" (the extension's "canny [abc123]" form); ValueError listing the names otherwise."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"ControlNet model must be a name from /controlnet/model_list, got {name!r}.")
        names = self.sources()
        for candidate in (name.strip(), _without_hash_suffix(name.strip())):
            if candidate in names:
                return candidate
        raise ValueError(f"Unknown ControlNet model {name!r}; available: {', '.join(names) or '(none)'}.")

    def load(self, name: str, base_unet):
        """The loaded ControlNetModel for a resolved name (cached; single files get their config from `base_unet`)."""
        from pipelines.controlnet import load_controlnet

        with self._lock:
            if name not in self._loaded:
                model = load_controlnet(self.sources()[name], base_unet=base_unet)
                model.register_to_config(_name_or_path=name)
                self._loaded[name] = model
            return self._loaded[name]

    def release(self) -> None:
        with self._lock:
            self._loaded.clear()
