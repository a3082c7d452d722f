"""ControlNet models the operator put in `--controlnet-dir`, picked by name, loaded once and reused.

As for checkpoints, requests name a model (as sd-webui-controlnet's `model` field does, with or
without its " [hash]" suffix); they never pass a path.

Loaded models are kept by file version (resolved path, size, modification time; a diffusers folder's every file), not
by name, so a file replaced under the same name is read again. They share one `pipelines.unit_model_cache` with the
folder's IP-Adapters, bounded by sd-webui-controlnet's `control_net_model_cache_size`. A checkpoint switch keeps the
models made for the new checkpoint's family and drops the others (`keep_for_checkpoint`: an SD 1.5 ControlNet cannot
run with an SDXL checkpoint, and the next SD 1.5 checkpoint reads it again); unload-checkpoint frees them all.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from pipelines.unit_model_cache import DEFAULT_CACHE_SIZE, UnitModelCache

SUFFIXES = (".safetensors", ".pth", ".pt", ".ckpt", ".bin")


def _without_hash_suffix(name: str) -> str:
    """"canny [fp16] [abc123]" -> "canny [fp16]": only the last bracketed part is the extension's hash."""
    stem, bracket, rest = name.rpartition(" [")
    return stem.strip() if bracket and rest.endswith("]") else name


CONTROLNET = "controlnet"  # the first part of a ControlNet's key in the shared cache


class ControlNetModels:
    """The folder's ControlNets and IP-Adapters by name, and the loaded ones kept between jobs (`cache`, at most
    `cache_size` models, the server's `control_net_model_cache_size`; None: no limit, a command line's one job)."""

    def __init__(self, folder: str | os.PathLike, *, cache_size: int | None = DEFAULT_CACHE_SIZE) -> None:
        self.folder = Path(folder).expanduser()
        if not self.folder.is_dir():
            raise NotADirectoryError(f"ControlNet folder {str(self.folder)!r} does not exist; create it or fix --controlnet-dir.")
        self.cache = UnitModelCache(cache_size)
        self._families: dict[tuple, object] = {}  # (path, size, mtime) -> ModelFamily | None
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()  # apart: a family check (a request thread) need not wait for a load
        from pipelines.ip_adapter_store import IPAdapterStore

        # the folder's IP-Adapter files (sd-webui-controlnet keeps them here) and their image encoders, read once per
        # file version and kept between jobs in the same cache as the ControlNets; a job's pipeline reads through it
        self.ip_adapters = IPAdapterStore(self.cache)

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
        from pipelines.controlnet.family import read_family

        path = self.sources().get(name)
        if path is None:  # removed since the request named it: the job's load reports that
            return None
        stat = (path / "config.json" if path.is_dir() else path).stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        with self._lock:
            if key not in self._families:
                self._families[key] = read_family(path)
            return self._families[key]

    def load(self, name: str, base_unet):
        """The loaded ControlNetModel for a resolved name, kept per file version (a file replaced under the same name
        is read again) and, for a single file, per the config it takes from `base_unet`."""
        from pipelines.controlnet import load_controlnet
        from pipelines.controlnet.family import family_of_config
        from pipelines.ip_adapter_store import file_version, folder_version

        path = self.sources()[name]
        version = folder_version(path) if path.is_dir() else file_version(path)
        key = (CONTROLNET, name, version, None if path.is_dir() else _derived_config(base_unet))
        with self._load_lock:  # one load at a time: two requests for one model read it once
            model = self.cache.get(key)
            if model is None:
                model = load_controlnet(path, base_unet=base_unet)
                model.register_to_config(_name_or_path=name)
                # the same name's other versions are never asked for again
                self.cache.forget(lambda old: old[0] == CONTROLNET and old[1] == name and old != key)
                self.cache.put(key, model, family_width=family_of_config(model.config).cross_attention_dim)
            return model

    def keep_for_checkpoint(self, unet_config) -> int:
        """After a checkpoint load: drop the ControlNets and IP-Adapters made for another family than its UNet's
        (useless with it); image encoders and the models of its family stay. Returns how many were dropped."""
        from pipelines.controlnet.family import family_of_config

        try:
            width = family_of_config(unet_config).cross_attention_dim
        except ValueError:  # a UNet config without a readable width: its units' own checks refuse what does not fit
            return 0
        return self.cache.keep_family(width)

    def release(self) -> int:
        """Forget the loaded ControlNets and IP-Adapters (weights and image encoders), as unload-checkpoint frees the
        server's models; the next unit reads its files again. Returns how many models were held."""
        count = self.cache.forget(lambda key: key[0] == CONTROLNET)
        return count + self.ip_adapters.release()


def _derived_config(base_unet) -> str:
    """The config a single-file ControlNet takes from the checkpoint's UNet, as a key: two checkpoints of one family
    share the loaded model, another family's needs its own."""
    from pipelines.controlnet.loading import controlnet_config_from_unet

    return json.dumps(controlnet_config_from_unet(base_unet.config), sort_keys=True, default=str)


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
