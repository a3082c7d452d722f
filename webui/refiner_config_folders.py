"""How a web request names the configs folder of a single-file refiner (the Python API's `refiner_config_dir`).

A client never sends a server path: as with `refiner_checkpoint`, it sends a name, looked up among the server's own
checkpoints (`CheckpointCatalog`: the operator's --model sources and what --models-dir holds), by any title A1111
accepts. Only a diffusers folder there can serve, since a folder's configs (unet/, vae/, scheduler/, text encoder
and tokenizer folders) are what a single file lacks; a config-only copy (no weights) works too, and is offered here
only: it is no checkpoint, so the checkpoint lists leave it out (`CheckpointCatalog.config_folders`; a client lists
the folders with GET CONFIG_FOLDERS_ROUTE). So a client can only point the refiner at configs the operator put in
the models folder, and whether they describe the refiner file is checked by the Python API's own check
(`pipelines.refiner_configs.check_refiner_config_dir`), not here.

The answers are in the web user's terms too: a check's message quotes the folder by the name the request or the web
UI picked (`named_as_picked`), and a refiner file that the configs it was read with do not describe, found when a
queued job loads it, is explained with what a request can change (`refiner_errors_in_web_terms`), not with the
Python API's `refiner_config_dir=FOLDER` or the CLI's `--refiner-config-dir`.
"""

from __future__ import annotations

from typing import Callable

# mixkit's listing of what a refiner_config_dir may name: config-only folders are in no A1111 checkpoint list
CONFIG_FOLDERS_ROUTE = "/mixkit/v1/refiner-config-folders"
NO_CONFIG_FOLDER = (None, "", "None", "none")  # as A1111's "no refiner" spellings: the UI's dropdown sends "None"


def config_folder_titles(catalog) -> list[str]:
    """The titles a `refiner_config_dir` may name: the diffusers folders among the server's models, config-only ones
    included."""
    return [entry.title for entry in catalog.config_folders()]


def config_folder_listing(catalog) -> list[dict]:
    """CONFIG_FOLDERS_ROUTE's answer: each diffusers folder's title (what refiner_config_dir sends), its model_name
    (also accepted) and whether it holds configs only (then it is no checkpoint: not in /sdapi/v1/sd-models)."""
    return [{"title": entry.title, "model_name": entry.model_name, "config_only": entry.config_only}
            for entry in catalog.config_folders()]


def find_config_folder(name: str | None, catalog) -> str | None:
    """The folder (server-side path) `name` means, None for no config folder; ValueError saying what to send for a
    name that is no checkpoint of this server or names a checkpoint file or hub id."""
    if name in NO_CONFIG_FOLDER:
        return None
    if not isinstance(name, str):
        raise TypeError(f"refiner_config_dir must be the name of a diffusers folder among this server's models "
                        f"(GET {CONFIG_FOLDERS_ROUTE}), got {name!r}.")
    if catalog is None:
        raise ValueError(f"refiner_config_dir={name!r}: this server has no checkpoint list to find it in; leave it "
                         "empty")
    try:
        folder = catalog.find_config_folder(name)
        entry = folder or catalog.find(name)
    except ValueError as error:
        raise ValueError(f"refiner_config_dir={name!r}: {error}") from None
    if folder is None:
        folders = ", ".join(config_folder_titles(catalog)) or "none; add one to the models folder"
        raise ValueError(f"refiner_config_dir={name!r} is the checkpoint {entry.name!r}, not a diffusers folder: name "
                         "the diffusers folder among this server's checkpoints whose configs describe the refiner "
                         f"file ({folders}).")
    return folder.source


def named_as_picked(message: str, folder: str | None, name: str | None) -> str:
    """`message` (a check's, which quotes the folder the pipeline got: `refiner_config_dir='/srv/models/xl'`) with
    that server path replaced by the name the request or the web UI's Config folder picked it by."""
    if folder is None or name in NO_CONFIG_FOLDER:
        return message
    return message.replace(f"refiner_config_dir={folder!r}", f"refiner_config_dir={name!r}")


SHOWN_FOLDERS = 8  # diffusers folders listed in an advice before "and N more"

# what a single-file refiner was read with, as a web user set it (`pipelines.refiner_configs.READ_WITH`)
WEB_READ_WITH = {"refiner_config_dir": "the configs of the diffusers folder named in refiner_config_dir",
                 "config_dir": "the configs folder this server's model was loaded with (its --config-dir)",
                 "shipped": "the shipped configs of its family"}


def web_refiner_advice(read_with: str, catalog) -> str:
    """What a web user (an API request, the web UI's Refiner accordion) can do when a single-file refiner does not fit
    the configs it was read with: name, in the request's refiner_config_dir, a diffusers folder among this server's
    checkpoints (listed), or pick that folder as the refiner; never a server path or a Python call they cannot make."""
    titles = config_folder_titles(catalog) if catalog is not None else []
    listed = ", ".join(titles[:SHOWN_FOLDERS]) + (f" and {len(titles) - SHOWN_FOLDERS} more"
                                                   if len(titles) > SHOWN_FOLDERS else "")
    folders = (f"this server's are: {listed}" if titles
               else "this server has none; the operator can add one to its models folder")
    return (f"The refiner is a single file, read with {WEB_READ_WITH.get(read_with, WEB_READ_WITH['shipped'])}. If it "
            "is complete, it has another architecture: name the diffusers folder whose configs match it in the "
            "request's refiner_config_dir (the web UI's Refiner > Config folder), a diffusers folder among this "
            f"server's models (GET {CONFIG_FOLDERS_ROUTE}; {folders}), or pick that diffusers folder as the refiner "
            "itself.")


def refiner_errors_in_web_terms(run: Callable, catalog) -> Callable:
    """A queued job's `run(control, on_step)` whose refiner config mismatch (raised when the job loads the refiner)
    carries `web_refiner_advice` instead of the Python API's (`refiner_config_dir=FOLDER`, `--refiner-config-dir`);
    the mismatch itself, naming the file and the keys, is kept."""
    from mixkit.errors import ConfigMismatchError
    from pipelines.refiner_configs import RefinerConfigMismatchError

    def in_web_terms(control, on_step):
        try:
            return run(control, on_step)
        except RefinerConfigMismatchError as error:
            raise ConfigMismatchError(error.mismatch, web_refiner_advice(error.read_with, catalog)) from None
    return in_web_terms
