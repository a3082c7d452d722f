"""Turn what a user typed as a model ("./models/sd15", "stabilityai/sdxl-turbo@main") into a local path.

Local paths win: if the string names an existing file or folder it is used as is, so a local
folder called `org/name` is never shadowed by the hub. Anything else shaped like a Hugging Face
repo id is fetched with `huggingface_hub.snapshot_download`, which reuses the shared HF cache.
Offline mode (`HF_HUB_OFFLINE`) is read at call time, not at import, so it can be toggled per run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from mixkit.errors import ModelNotFoundError

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


def resolve_model_source(source: str | os.PathLike, *, allow_patterns: list[str] | str | None = None) -> Path:
    """Return a local path for `source`: an existing path as is, or a hub repo's cached/downloaded snapshot."""
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
    return _snapshot(text, *hub_id, allow_patterns=allow_patterns)


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


def _snapshot(source: str, repo_id: str, revision: str | None, allow_patterns) -> Path:
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import (
            GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError,
        )
    except ImportError:
        raise ModelNotFoundError(f"{source!r} is not a local path and huggingface_hub is not installed to fetch it "
                                 "from the hub; `pip install huggingface_hub` or pass a local folder.") from None

    offline = is_hub_offline()
    where = f"no local path {source!r} exists and the Hugging Face repo {repo_id!r}"
    where += f" (revision {revision!r})" if revision else ""
    fetch_hint = f"download it first with `hf download {repo_id}" + (f" --revision {revision}" if revision else "") + "`"
    try:
        folder = snapshot_download(
            repo_id,
            revision=revision,
            cache_dir=os.environ.get("HF_HUB_CACHE") or None,
            local_files_only=offline,
            allow_patterns=allow_patterns,
        )
    except (RepositoryNotFoundError, GatedRepoError) as error:
        raise ModelNotFoundError(f"{where} was not found or needs access ({type(error).__name__}); check the "
                                 "spelling, accept its licence on huggingface.co and log in, or pass a local folder.") from None
    except RevisionNotFoundError:
        raise ModelNotFoundError(f"{where} has no such revision; check the part after '@'.") from None
    except LocalEntryNotFoundError:
        cause = "HF_HUB_OFFLINE is set" if offline else "the hub is unreachable"
        raise ModelNotFoundError(f"{where} is not in the Hugging Face cache and {cause}; {fetch_hint} "
                                 "(with network access), or pass a local folder.") from None
    except Exception as error:  # network/HTTP errors of any kind: the user needs a message, not a traceback
        raise ModelNotFoundError(f"{where} could not be fetched ({type(error).__name__}: {error}); {fetch_hint} "
                                 "or pass a local folder.") from None
    return Path(folder)
