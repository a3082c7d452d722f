"""Which configs a refiner given as a single-file checkpoint is read with: its own `refiner_config_dir` when given,
else the base model's `config_dir`, when the base model was loaded from a single file with one and the refiner file
is of the same family.

`refiner_config_dir` (`mixkit generate --refiner-config-dir`) is for the refiner the base's configs cannot describe:
a single-file refiner next to a base loaded from a diffusers folder (which has no config_dir to pass on), or next to
a base file of another architecture. It is checked once, before any model loads (`check_refiner_config_dir`).

A single file holds weights only; its architecture comes from configs, the shipped SD 1.x/2.x/XL ones unless
`config_dir` names a diffusers folder (`mixkit.models.diffusion.single_file`). A user who loads a non-standard base
file with `config_dir` (`mixkit generate --config-dir`; a web UI `ModelHolder` given one loads every checkpoint it
switches to with it) has said which architecture their checkpoints have, and a refiner of that family is another
such checkpoint: A1111 loads its refiner as one more checkpoint switch, through the same config choice as any
other. Without this the refiner was read with the shipped configs and refused ("does not match the 'sd15'
configs") although the same weights as a diffusers folder refined fine.

A refiner of another family (an SDXL refiner file next to an SDXL base file) keeps its shipped configs: the base's
folder describes another architecture. The family is read from the file's tensor names and shapes before anything
loads (`pipelines.refiner_families`): a `.safetensors` header, or a `.ckpt` unpickled by mixkit's safe reader onto
the meta device, so a `.ckpt` of the wrong family is refused before the base model samples, not at the switch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mixkit.errors import ConfigMismatchError
from mixkit.models.diffusion import DiffusionModel
from mixkit.models.diffusion.single_file import CONFIG_DIR_KEY
from pipelines.refiner_families import configs_family, single_file_family


def refiner_config_options(base: DiffusionModel, refiner: Any, refiner_config_dir: Any = None) -> dict:
    """`load_diffusion_model` options for `refiner` (a path, hub id or loaded model): `{"config_dir": ...}` when the
    refiner is a single file to read with its `refiner_config_dir` (checked by `check_refiner_config_dir`) or the
    base model's configs (see the module docstring), else `{}`."""
    if refiner_config_dir is not None:
        return {"config_dir": str(Path(refiner_config_dir).expanduser())}
    config_dir = base.extras.get(CONFIG_DIR_KEY)
    if config_dir is None or not isinstance(refiner, (str, os.PathLike)):
        return {}
    path = Path(refiner).expanduser()
    if not path.is_file():
        return {}  # a diffusers folder or hub id brings its own configs
    if single_file_family(path) is not base.family:
        return {}
    return {"config_dir": config_dir}


def config_dir_for_refiner(refiner: Any, refiner_config_dir: Any) -> Any:
    """The part of a call's `refiner_config_dir` that applies to `refiner`: kept for a single-file refiner, None for
    no refiner, a diffusers folder, a hub id or a loaded model (each has its own configs). For callers that vary the
    refiner under one call's settings (an X/Y/Z plot's Refiner checkpoint axis), so a "None" or folder cell runs as
    the user plotted it instead of being refused for a config folder meant for the plot's files."""
    if refiner is None or not isinstance(refiner, (str, os.PathLike)):
        return None
    return refiner_config_dir if Path(refiner).expanduser().is_file() else None


class RefinerConfigMismatchError(ConfigMismatchError):
    """A single-file refiner's tensors do not fit the configs it was read with. `read_with` says which configs those
    were (one of READ_WITH), so a caller that names things otherwise than the Python API (the web server, where a
    request names a config folder among the server's checkpoints) can give its own advice for the same mismatch."""

    def __init__(self, mismatch: str, advice: str = "", read_with: str = "shipped") -> None:
        super().__init__(mismatch, advice)  # (an unpickled copy gets the message alone: advice and read_with default)
        self.read_with = read_with


# the configs a single-file refiner is read with: its own refiner_config_dir, the base model's config_dir, or the
# shipped configs of its family
READ_WITH = ("refiner_config_dir", "config_dir", "shipped")


def refiner_configs_read_with(refiner: Any, base: DiffusionModel, refiner_config_dir: Any = None
                              ) -> tuple[str, str | None]:
    """(which of READ_WITH, the folder or None) a single-file `refiner` is read with (`refiner_config_options`)."""
    options = refiner_config_options(base, refiner, refiner_config_dir)
    if refiner_config_dir is not None:
        return "refiner_config_dir", options["config_dir"]
    if options:
        return "config_dir", options["config_dir"]
    return "shipped", None


def refiner_configs_advice(refiner: Any, base: DiffusionModel, refiner_config_dir: Any = None) -> str:
    """What to do when a refiner file does not fit the configs it was read with (the loader's advice is about
    `config_dir`, which sets the base model's configs, not the refiner's), in the Python API's and the CLI's terms."""
    read_with, folder = refiner_configs_read_with(refiner, base, refiner_config_dir)
    if read_with == "refiner_config_dir":
        read_with = f"the configs of {folder!r}, its refiner_config_dir"
    elif read_with == "config_dir":
        read_with = f"the configs of {folder!r}, the base model's config_dir"
    else:
        read_with = "the shipped configs of its family"
    return (f"The refiner is a single file, read with {read_with}. If it is complete, it has another architecture: "
            "give the diffusers folder whose configs match it as refiner_config_dir=FOLDER (mixkit generate / "
            "img2img --refiner-config-dir FOLDER), or pass the refiner loaded with them "
            "(refiner=TextToImage.from_pretrained(path, config_dir=FOLDER)), or give the refiner as that diffusers "
            "folder; without refiner_config_dir, a refiner file of the base model's family is read with the base "
            "model's config_dir when the base was loaded from a single file with one (mixkit generate --config-dir "
            "FOLDER).")


def check_refiner_config_dir(refiner: Any, refiner_config_dir: Any) -> None:
    """`refiner_config_dir` is None, or a diffusers model folder holding every config the single-file loader reads
    (unet/, vae/, scheduler/, text encoder and tokenizer folders) for a `refiner` that is a single-file checkpoint;
    of the refiner file's family (read from its keys, `.safetensors` or `.ckpt`). ValueError / TypeError saying what to
    do, before any model loads; the families are read once per version of the file and folder (`refiner_families`)."""
    if refiner_config_dir is None:
        return
    if not isinstance(refiner_config_dir, (str, os.PathLike)) or not str(refiner_config_dir).strip():
        raise TypeError("refiner_config_dir must be the path of a diffusers model folder (its unet/, vae/, scheduler/ "
                        f"and text encoder configs describe the refiner file), got {refiner_config_dir!r}.")
    if refiner is None:
        raise ValueError(f"refiner_config_dir={str(refiner_config_dir)!r} sets the configs of a single-file refiner, "
                         "and no refiner is given: add the refiner checkpoint, or drop refiner_config_dir.")
    if not isinstance(refiner, (str, os.PathLike)):
        raise ValueError(f"refiner_config_dir={str(refiner_config_dir)!r} applies to a refiner read from a single "
                         "file; this refiner is already a loaded model, built with its configs: drop "
                         "refiner_config_dir.")
    path = Path(refiner).expanduser()
    if path.is_dir():
        raise ValueError(f"refiner_config_dir={str(refiner_config_dir)!r} applies to a single-file refiner; the "
                         f"refiner {str(refiner)!r} is a diffusers folder, which has its own configs: drop "
                         "refiner_config_dir.")
    if not path.is_file():
        raise ValueError(f"refiner_config_dir={str(refiner_config_dir)!r} applies to a single-file refiner; the "
                         f"refiner {str(refiner)!r} is no file (a hub id brings its own configs): give the refiner's "
                         ".safetensors / .ckpt path, or drop refiner_config_dir.")
    described = _configs_family(refiner_config_dir)
    family = single_file_family(path)
    if family is not described:
        raise ValueError(f"refiner_config_dir={str(refiner_config_dir)!r} describes {described.label} but the "
                         f"refiner {str(refiner)!r} is {family.label}: give the diffusers folder of a model of the "
                         f"refiner's family ({family.label}) and architecture.")


def _configs_family(refiner_config_dir):
    """The family of the configs the single-file loader would read from `refiner_config_dir`, or a ValueError naming
    what is missing there."""
    folder = Path(refiner_config_dir).expanduser()
    if not folder.is_dir():
        raise ValueError(f"refiner_config_dir={str(refiner_config_dir)!r} is not a folder: give the diffusers model "
                         "folder whose configs describe the refiner file (the folder holding unet/, vae/, "
                         "scheduler/, text_encoder/ ...).")
    try:
        return configs_family(folder)
    except (FileNotFoundError, ValueError, OSError) as error:
        raise ValueError(f"refiner_config_dir={str(refiner_config_dir)!r} does not hold the configs a single-file "
                         f"refiner is read with: {error}. Give a diffusers model folder of the refiner's "
                         "architecture (its weights are not needed, only the config files and tokenizers).") from None
