"""Turn what a user typed as a model ("./models/sd15", "stabilityai/sdxl-turbo@main") into a local path.

Local paths win: if the string names an existing file or folder it is used as is, so a local
folder called `org/name` is never shadowed by the hub. Anything else shaped like a Hugging Face
repo id is fetched with `huggingface_hub.snapshot_download`, which reuses the shared HF cache.
Offline mode (`HF_HUB_OFFLINE`) is read at call time, not at import, so it can be toggled per run.
A caller that knows which of a repo's files it reads (`select_files`, e.g. a diffusers pipeline's
components) gets only those: a whole-repo snapshot of a model repo can be tens of GB of files nobody loads.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from pathlib import Path
from typing import Callable

from mixkit.errors import CheckpointFormatError, MixkitError, ModelNotFoundError

logger = logging.getLogger(__name__)
HUB_ID_PATTERN = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<revision>[\w./-]+))?$")
_TRUTHY = {"1", "true", "yes", "on"}


def is_hub_offline() -> bool:
    """True when the user asked huggingface_hub not to touch the network."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUTHY


def parse_hub_id(source: str) -> tuple[str, str | None] | None:
    """Split "org/name@revision" into (repo id, revision); None if `source` is not shaped like a hub id."""
    match = HUB_ID_PATTERN.match(source)
    if match is None or ".." in match["repo"] or match["repo"].endswith((".", "-")):
        return None
    return match["repo"], match["revision"]


# select_files(repo_id, repo file listing, read_json(repo path) -> dict) -> the repo paths to download
FileSelector = Callable[[str, list[str], Callable[[str], dict]], list[str]]


def resolve_model_source(source: str | os.PathLike, *, allow_patterns: list[str] | str | None = None,
                         select_files: FileSelector | None = None, local_files_only: bool = False) -> Path:
    """Return a local path for `source`: an existing path as is, or a hub repo's cached/downloaded snapshot.

    `select_files` chooses the files to download from the repo's listing (it may read small JSON files of the
    repo, such as model_index.json, first); offline the cache is used as it is. `local_files_only=True` is
    `HF_HUB_OFFLINE` for this call: the hub cache only, no network.
    """
    if allow_patterns is not None and select_files is not None:
        raise ValueError("pass allow_patterns or select_files, not both")
    if not isinstance(local_files_only, bool):
        raise TypeError(f"local_files_only must be True or False, got {local_files_only!r}")
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"model source must be a path or a Hugging Face id string, got {type(source).__name__}: {source!r}")
    text = os.fspath(source)
    if not text.strip():
        raise ValueError("model source is empty; pass a local path or a Hugging Face id like 'org/name'")
    local = Path(text).expanduser()
    if local.exists():
        return local
    shipped = shipped_tiny_model(text)
    if shipped is not None:
        return shipped
    hub_id = None if isinstance(source, Path) else parse_hub_id(text)
    if hub_id is None:
        raise ModelNotFoundError(f"Model path {text!r} does not exist; check the path (it is not a Hugging Face "
                                 "id either, which looks like 'org/name' or 'org/name@revision').")
    return _snapshot(text, *hub_id, allow_patterns=allow_patterns, select_files=select_files,
                     local_files_only=local_files_only)


def with_shipped_folders(config, names: tuple[str, ...]):
    """A copy of a dataclass config whose settings `names` that name a shipped tiny model (and no local path) hold
    its folder: the trainers read those settings as folders (tokenizer/ inside, config.json), and the shipped
    models must work wherever a model path does."""
    import dataclasses

    changes = {}
    for name in names:
        value = getattr(config, name)
        if isinstance(value, str) and value and not Path(value).expanduser().exists():
            shipped = shipped_tiny_model(value)
            if shipped is not None:
                changes[name] = str(shipped)
    return dataclasses.replace(config, **changes) if changes else config


def shipped_tiny_model(name: str) -> Path | None:
    """The package's own mixkit-tiny models answer to their names (e.g. "mixkit-tiny-sd")."""
    from mixkit.tiny.shipped import SHIPPED_MODELS, shipped_model_path

    return shipped_model_path(name) if name in SHIPPED_MODELS.names() else None


def _snapshot(source: str, repo_id: str, revision: str | None, allow_patterns, select_files: FileSelector | None,
              local_files_only: bool) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ModelNotFoundError(f"{source!r} is not a local path and huggingface_hub is not installed to fetch it "
                                 "from the hub; `pip install huggingface_hub` or pass a local folder.") from None

    offline = is_hub_offline() or local_files_only
    cause = "local_files_only=True was passed" if local_files_only else "HF_HUB_OFFLINE is set"
    cache_dir = os.environ.get("HF_HUB_CACHE") or None
    if select_files is not None and not offline:  # offline, the cache holds what an earlier download chose
        listing = _repo_listing(source, repo_id, revision)
        if listing is None:  # unreachable: the cache, as snapshot_download itself falls back to it
            offline, cause = True, "the hub is unreachable"
        else:
            with _hub_errors(source, repo_id, revision, cause):
                allow_patterns = select_files(repo_id, listing, _json_reader(repo_id, revision, cache_dir))
    with _hub_errors(source, repo_id, revision, cause if offline else "the hub is unreachable"):
        folder = snapshot_download(repo_id, revision=revision, cache_dir=cache_dir, local_files_only=offline,
                                   allow_patterns=allow_patterns)
    return Path(folder)


def _repo_listing(source: str, repo_id: str, revision: str | None) -> list[str] | None:
    """The repo's file paths, or None when the hub cannot be reached (a missing repo or revision is an error)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    with _hub_errors(source, repo_id, revision, "the hub is unreachable"):
        try:
            # model_info's siblings, as diffusers and snapshot_download list a repo (one request, no retry loop)
            return [sibling.rfilename for sibling in HfApi().model_info(repo_id, revision=revision).siblings or []]
        except (RepositoryNotFoundError, GatedRepoError, RevisionNotFoundError):
            raise
        except Exception as error:  # connection/HTTP trouble: diffusers also falls back to the cache then
            logger.warning("Could not list %s on the Hugging Face hub (%s: %s); using the hub cache.",
                           repo_id, type(error).__name__, error)
            return None


def _json_reader(repo_id: str, revision: str | None, cache_dir: str | None) -> Callable[[str], dict]:
    """read_json(path) for `select_files`: one small file of the repo, downloaded to the cache and parsed."""
    from huggingface_hub import hf_hub_download

    def read_json(path: str) -> dict:
        file = Path(hf_hub_download(repo_id, path, revision=revision, cache_dir=cache_dir))
        try:
            return json.loads(file.read_text(encoding="utf-8"))
        except (ValueError, OSError) as error:
            raise CheckpointFormatError(f"{path} of the Hugging Face repo {repo_id!r} is not valid JSON ({error}); "
                                        "the repo is broken, use another revision.") from None

    return read_json


@contextlib.contextmanager
def _hub_errors(source: str, repo_id: str, revision: str | None, offline_cause: str):
    """huggingface_hub's errors as ModelNotFoundError naming the repo and what to do (mixkit's own pass through)."""
    from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    where = f"no local path {source!r} exists and the Hugging Face repo {repo_id!r}"
    where += f" (revision {revision!r})" if revision else ""
    fetch_hint = f"download it first with `hf download {repo_id}" + (f" --revision {revision}" if revision else "") + "`"
    try:
        yield
    except MixkitError:
        raise
    except (RepositoryNotFoundError, GatedRepoError) as error:
        raise ModelNotFoundError(f"{where} was not found or needs access ({type(error).__name__}); check the "
                                 "spelling, accept its licence on huggingface.co and log in, or pass a local folder.") from None
    except RevisionNotFoundError:
        raise ModelNotFoundError(f"{where} has no such revision; check the part after '@'.") from None
    except LocalEntryNotFoundError:
        raise ModelNotFoundError(f"{where} is not in the Hugging Face cache and {offline_cause}; {fetch_hint} "
                                 "(with network access), or pass a local folder.") from None
    except Exception as error:  # network/HTTP errors of any kind: the user needs a message, not a traceback
        raise ModelNotFoundError(f"{where} could not be fetched ({type(error).__name__}: {error}); {fetch_hint} "
                                 "or pass a local folder.") from None
