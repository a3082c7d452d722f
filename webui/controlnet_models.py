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
        self._families: dict[tuple, object] = {}  # (path, size, mtime) -> ModelFamily | None
        self._lock = threading.Lock()
        from pipelines.ip_adapter_store import IPAdapterStore

        # the folder's IP-Adapter files (sd-webui-controlnet keeps them here) and their image encoders, read once per
        # file version and kept between jobs like the ControlNets; a job's pipeline reads through it
        self.ip_adapters = IPAdapterStore()

    def sources(self) -> dict[str, Path]:
        """name -> file or diffusers folder, rescanned on every call (the folder is small). IP-Adapter files are listed
        too (the extension keeps them here); their image encoders' folders (`image_encoder*/`) are not."""
        from webui.api_ip_adapter import is_encoder_folder

        found = {}
        for path in sorted(self.folder.iterdir()):
            if path.is_file() and path.suffix.lower() in SUFFIXES:
                found[path.stem] = path
            elif path.is_dir() and (path / "config.json").is_file() and not is_encoder_folder(path):
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

    def family(self, name: str):
        """The model family the named ControlNet is made for (`pipelines.controlnet.family.ModelFamily`), read from
        its config or tensor shapes without loading it (remembered per file version); None when that cannot be told."""
        from pipelines.controlnet.family import family_of_config, read_family

        with self._lock:
            if name in self._loaded:
                return family_of_config(self._loaded[name].config)
        path = self.sources().get(name)
        if path is None:  # removed since the request named it: the job's load reports that
            return None
        stat = (path / "config.json" if path.is_dir() else path).stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        if key not in self._families:
            self._families[key] = read_family(path)
        return self._families[key]

    def load(self, name: str, base_unet):
        """The loaded ControlNetModel for a resolved name (cached; single files get their config from `base_unet`)."""
        from pipelines.controlnet import load_controlnet

        with self._lock:
            if name not in self._loaded:
                model = load_controlnet(self.sources()[name], base_unet=base_unet)
                model.register_to_config(_name_or_path=name)
                self._loaded[name] = model
            return self._loaded[name]

    def release(self) -> int:
        """Forget the loaded ControlNets and IP-Adapters (weights and image encoders), as unload-checkpoint frees the
        server's models; the next unit reads its files again. Returns how many models were held."""
        with self._lock:
            count = len(self._loaded)
            self._loaded.clear()
        return count + self.ip_adapters.release()


def check_unit_families(models: ControlNetModels, specs: list, holder, entry=None) -> None:
    """Refuse, before a job is queued, a unit whose ControlNet is made for another model family than the checkpoint
    the job runs on (`entry`, a request's own checkpoint; None: the server's), naming the unit, the ControlNet and
    both families. Units or checkpoints whose family cannot be read without loading them are left to the pipeline's
    own check (`pipelines.controlnet.units.check_controlnet_matches_unet`), which also runs before sampling."""
    from pipelines.controlnet.family import check_same_family

    target = checkpoint_family(holder, entry)
    if target is None:
        return
    family, title = target
    for index, spec in enumerate(specs):
        made_for = models.family(spec.model_name)
        if made_for is not None:
            check_same_family(getattr(spec, "label", None) or f"ControlNet {index}", spec.model_name, made_for, family,
                              title)


def checkpoint_family(holder, entry=None):
    """(family, title) of the checkpoint a job runs on: the loaded model's UNet config when it is that one, else read
    without loading it (`read_family`: its folder's unet/config.json, its safetensors header, a pickled `.ckpt`'s
    tensor shapes read onto the meta device, a Hugging Face id's config in the hub cache); None when unknown."""
    from pipelines.controlnet.family import family_of_config, read_family

    current = holder.entry
    entry = entry or current
    if entry is None:
        return None
    model = holder.loaded_model() if entry == current else None
    if model is not None:
        return family_of_config(model.unet.config), entry.title
    try:
        family = read_family(entry.source)
    except (ValueError, OSError):  # a broken file: its load fails in the job with the loader's own message
        return None
    return None if family is None else (family, entry.title)
