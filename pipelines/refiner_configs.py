"""Which configs a refiner given as a single-file checkpoint is read with: the base model's `config_dir`, when the
base model was loaded from a single file with one and the refiner file is of the same family.

A single file holds weights only; its architecture comes from configs, the shipped SD 1.x/2.x/XL ones unless
`config_dir` names a diffusers folder (`mixkit.models.diffusion.single_file`). A user who loads a non-standard base
file with `config_dir` (`mixkit generate --config-dir`; a web UI `ModelHolder` given one loads every checkpoint it
switches to with it) has said which architecture their checkpoints have, and a refiner of that family is another
such checkpoint: A1111 loads its refiner as one more checkpoint switch, through the same config choice as any
other. Without this the refiner was read with the shipped configs and refused ("does not match the 'sd15'
configs") although the same weights as a diffusers folder refined fine.

A refiner of another family (an SDXL refiner file next to an SDXL base file) keeps its shipped configs: the base's
folder describes another architecture. The family is read from a `.safetensors` header (no tensor is read); a
pickled `.ckpt` has no header, so its family is known only once loaded and it is taken to be the base's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mixkit.models.diffusion import DiffusionModel
from mixkit.models.diffusion.single_file import CONFIG_DIR_KEY


def refiner_config_options(base: DiffusionModel, refiner: Any) -> dict:
    """`load_diffusion_model` options for `refiner` (a path, hub id or loaded model): `{"config_dir": ...}` when the
    refiner is a single file to read with the base model's configs (see the module docstring), else `{}`."""
    config_dir = base.extras.get(CONFIG_DIR_KEY)
    if config_dir is None or not isinstance(refiner, (str, os.PathLike)):
        return {}
    path = Path(refiner).expanduser()
    if not path.is_file():
        return {}  # a diffusers folder or hub id brings its own configs
    family = single_file_family(path)
    if family is not None and family is not base.family:
        return {}
    return {"config_dir": config_dir}


def single_file_family(path: Path):
    """The `ModelFamily` of a `.safetensors` checkpoint from its header's key -> shape table, None for other files
    (a pickle is read only by loading it). A header that is not a checkpoint's raises the loader's own error, naming
    the file, before anything loads."""
    from mixkit.io import detect_checkpoint_format
    from mixkit.io.safetensors_header import read_safetensors_header, tensor_entries
    from mixkit.models.diffusion.detect_keys import detect_family, normalize_legacy_keys

    if detect_checkpoint_format(path) != "safetensors":
        return None
    shapes = {name: tuple(entry["shape"]) for name, entry in tensor_entries(read_safetensors_header(path)).items()}
    return detect_family(normalize_legacy_keys(shapes), str(path))


def refiner_configs_advice(refiner: Any, base: DiffusionModel) -> str:
    """What to do when a refiner file does not fit the configs it was read with (the loader's advice is about
    `config_dir`, which sets the base model's configs, not the refiner's)."""
    options = refiner_config_options(base, refiner)
    read_with = (f"the configs of {options['config_dir']!r}, the base model's config_dir" if options
                 else "the shipped configs of its family")
    return (f"The refiner is a single file, read with {read_with}. If it is complete, it has another architecture: "
            "load it with the configs of a diffusers folder that matches it and pass that as the refiner "
            "(refiner=TextToImage.from_pretrained(path, config_dir=FOLDER)), or give the refiner as that diffusers "
            "folder; a refiner file of the base model's family is read with the base model's config_dir when the "
            "base was loaded from a single file with one (mixkit generate --config-dir FOLDER).")
