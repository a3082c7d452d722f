"""How a web request names the configs folder of a single-file refiner (the Python API's `refiner_config_dir`).

A client never sends a server path: as with `refiner_checkpoint`, it sends a name, looked up among the server's own
checkpoints (`CheckpointCatalog`: the operator's --model sources and what --models-dir holds), by any title A1111
accepts. Only a diffusers folder there can serve, since a folder's configs (unet/, vae/, scheduler/, text encoder
and tokenizer folders) are what a single file lacks; a config-only copy (no weights) works too, and is listed like
any diffusers folder. So a client can only point the refiner at configs the operator put in the models folder, and
whether they describe the refiner file is checked by the Python API's own check
(`pipelines.refiner_configs.check_refiner_config_dir`), not here.
"""

from __future__ import annotations

from pathlib import Path

NO_CONFIG_FOLDER = (None, "", "None", "none")  # as A1111's "no refiner" spellings: the UI's dropdown sends "None"


def config_folder_titles(catalog) -> list[str]:
    """The titles of the server's checkpoints a `refiner_config_dir` may name: its diffusers folders on disk."""
    return [entry.title for entry in catalog.entries() if Path(entry.source).is_dir()]


def find_config_folder(name: str | None, catalog) -> str | None:
    """The folder (server-side path) `name` means, None for no config folder; ValueError saying what to send for a
    name that is no checkpoint of this server or names a checkpoint file or hub id."""
    if name in NO_CONFIG_FOLDER:
        return None
    if not isinstance(name, str):
        raise TypeError(f"refiner_config_dir must be the name of a diffusers folder among this server's checkpoints "
                        f"(GET /sdapi/v1/sd-models), got {name!r}.")
    if catalog is None:
        raise ValueError(f"refiner_config_dir={name!r}: this server has no checkpoint list to find it in; leave it "
                         "empty")
    try:
        entry = catalog.find(name)
    except ValueError as error:
        raise ValueError(f"refiner_config_dir={name!r}: {error}") from None
    if not Path(entry.source).is_dir():
        folders = ", ".join(config_folder_titles(catalog)) or "none; add one to the models folder"
        raise ValueError(f"refiner_config_dir={name!r} is the checkpoint {entry.name!r}, not a diffusers folder: name "
                         "the diffusers folder among this server's checkpoints whose configs describe the refiner "
                         f"file ({folders}).")
    return entry.source
