"""Decide, before transformers touches the network, whether a hub id can load now, and fail fast if not.

transformers' `from_pretrained` retries an unreachable hub with exponential backoff (1+2+4+8+8 s
per file request, so about 46 s for a model and its processor) and then says only that the files
are not "in the cached files". mixkit's Stable Diffusion loader (`mixkit.io.sources`) instead asks
the hub once, through `snapshot_download`'s single, unretried `repo_info` request, and names the
model and what to do. AppFlow's transformers loaders get the same behaviour here: one look at the
local cache, at most one request to the hub, then either the `from_pretrained` keywords that load
without further network retries or a `ModelNotFoundError`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mixkit.errors import ModelNotFoundError
from mixkit.io.sources import is_hub_offline, parse_hub_id


def hub_load_arguments(source: str) -> tuple[str, dict[str, Any]]:
    """What to pass to `from_pretrained` for `source`: (path or repo id, keywords); refuses what cannot load now.

    A local path is passed as is. A hub id ("org/name", optionally "@revision") is loaded from the
    cache alone (`local_files_only=True`) when HF_HUB_OFFLINE is set or the hub does not answer,
    and refused at once with ModelNotFoundError when it is not cached in that case.
    """
    if Path(source).expanduser().exists():
        return source, {}
    hub_id = parse_hub_id(source)
    if hub_id is None:
        return source, {}  # not a hub id: from_pretrained reports the bad path without any network access
    repo_id, revision = hub_id
    # Read at call time, like mixkit.io.sources, so a run can switch caches or go offline after import.
    cache_dir = os.environ.get("HF_HUB_CACHE") or None
    options: dict[str, Any] = {key: value for key, value in (("revision", revision), ("cache_dir", cache_dir)) if value}
    if _is_offline():
        cause = "HF_HUB_OFFLINE is set"
    else:
        unreachable = _ask_hub(source, repo_id, revision)
        if unreachable is None:
            return repo_id, options  # the hub answers: from_pretrained may download or refresh as usual
        cause = f"the hub is unreachable ({unreachable})"
    if not _is_cached(repo_id, revision, cache_dir):
        command = f"hf download {repo_id}" + (f" --revision {revision}" if revision else "")
        raise ModelNotFoundError(
            f"Cannot load {source!r}: it is not a local path and the Hugging Face repo {repo_id!r}"
            + (f" (revision {revision!r})" if revision else "") + f" is not in the Hugging Face cache, and {cause}. "
            f"Download it once with network access (`{command}`), or pass a local folder saved with save_pretrained.")
    return repo_id, {**options, "local_files_only": True}


def _is_offline() -> bool:
    from huggingface_hub import constants

    # huggingface_hub reads HF_HUB_OFFLINE once, at import, and then refuses every request; mixkit reads it
    # per call. Either one set means asking the hub is pointless.
    return is_hub_offline() or bool(constants.HF_HUB_OFFLINE)


def _is_cached(repo_id: str, revision: str | None, cache_dir: str | None) -> bool:
    from huggingface_hub import try_to_load_from_cache

    # config.json is what every transformers model (and processor lookup) reads first; weights missing
    # next to a cached config are reported by from_pretrained itself, still without retries.
    return isinstance(try_to_load_from_cache(repo_id, "config.json", cache_dir=cache_dir, revision=revision), str)


def _ask_hub(source: str, repo_id: str, revision: str | None) -> str | None:
    """One unretried request for the repo's metadata: None if the hub answered, else why it did not."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    where = f"the Hugging Face repo {repo_id!r}" + (f" (revision {revision!r})" if revision else "")
    try:
        # The timeout huggingface_hub itself allows a file-freshness check (HF_HUB_ETAG_TIMEOUT, 10 s by default).
        HfApi().repo_info(repo_id, revision=revision, timeout=constants.HF_HUB_ETAG_TIMEOUT)
    except (RepositoryNotFoundError, GatedRepoError) as error:
        raise ModelNotFoundError(f"Cannot load {source!r}: {where} was not found or needs access "
                                 f"({type(error).__name__}); check the spelling, accept its licence on "
                                 "huggingface.co and log in, or pass a local folder.") from None
    except RevisionNotFoundError:
        raise ModelNotFoundError(f"Cannot load {source!r}: {where} has no such revision; check the part "
                                 "after '@'.") from None
    except Exception as error:  # connection refused, DNS failure, timeout, proxy or 5xx: the hub is not usable now
        return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'no answer'}"
    return None

