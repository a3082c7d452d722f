"""A1111's "Interrogate CLIP" (a caption, then the best terms of each word list) and "Interrogate DeepBooru" (the
image's Danbooru tags, `pipelines.deepbooru`) on this server, each one queued job.

The caption comes from AppFlow's `image2text_generation` app (the operator's captioner with `--appflow-config`,
mixkit-tiny-blip2 by default) with Settings > Interrogate's num_beams / min / max length; the terms from
`state.interrogator` (`--interrogate-clip-model`, `--interrogate-categories-dir`). Shared by
`POST /sdapi/v1/interrogate`, the img2img tab's Interrogate CLIP and Interrogate DeepBooru buttons and Loopback's
"Append interrogated prompt" (CLIP or DeepBooru).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from mixkit.interrogate.deepbooru import A1111_FILE_NAME, A1111_FOLDER, A1111_URL
from webui.interrogation_captioner import CAPTION_APP

if TYPE_CHECKING:
    from webui.server_state import ServerState
    from webui.worker import Job

# CAPTION_APP is imported from here by the CLI and the tabs; the captioner that holds its models is its own module
__all__ = ["CAPTION_APP", "DEEPBOORU_FLAG", "DEEPBOORU_UNAVAILABLE", "DeepbooruUnavailableError", "KEEP_KEY",
           "deepbooru_now", "interrogate_now", "interrogation_models_held", "release_unkept_interrogation_models",
           "submit_deepbooru_interrogation", "submit_interrogation"]

KEEP_KEY = "interrogate_keep_models_in_memory"


def submit_interrogation(state: ServerState, image, *, owner: str | None = None, session: str | None = None) -> Job:
    """Queue the interrogation of one PIL image; the job's result is A1111's answer string.

    The Settings (a min length over the max) and the word lists (a skip name the lists do not have, a list
    emptied since start) are checked here, so a bad setting is a ValueError before anything is queued.
    """
    settings = state.options.interrogate_settings()
    state.interrogator.categories(settings)

    def run(control, on_step):
        return interrogate_now(state, image, settings)

    return state.worker.submit(run, "interrogate", owner=owner, session=session)


DEEPBOORU_FLAG = "--deepdanbooru-models-path"
DEEPBOORU_UNAVAILABLE = (f"DeepBooru is not set up on this server: start it with {DEEPBOORU_FLAG} FOLDER, the folder "
                         f"holding {A1111_FILE_NAME} ({A1111_URL}; A1111's {A1111_FOLDER}).")


class DeepbooruUnavailableError(RuntimeError):
    """The server was started without a DeepDanbooru folder, so it cannot tag."""


def submit_deepbooru_interrogation(state: ServerState, image, *, owner: str | None = None,
                                   session: str | None = None) -> Job:
    """Queue A1111's Interrogate DeepBooru of one PIL image; the job's result is its tag text.

    Refused before queueing: no `--deepdanbooru-models-path` (DeepbooruUnavailableError), no tagger file in it
    (FileNotFoundError naming the folder and A1111's download), a bad DeepBooru setting (ValueError)."""
    from mixkit.interrogate import find_deepbooru_file

    if state.deepbooru is None:
        raise DeepbooruUnavailableError(DEEPBOORU_UNAVAILABLE)
    settings = state.options.deepbooru_settings()
    keep = bool(state.options.get("interrogate_keep_models_in_memory"))
    find_deepbooru_file(state.deepbooru.folder)

    def run(control, on_step):
        return deepbooru_now(state, image, settings, keep)

    return state.worker.submit(run, "interrogate", owner=owner, session=session)


def deepbooru_now(state: ServerState, image, settings=None, keep: bool | None = None) -> str:
    """A1111's Interrogate DeepBooru tags for `image`, in the calling (worker) thread: what a queued DeepBooru
    interrogation runs, and what Loopback's "Append interrogated prompt" DeepBooru appends at each loop. `settings`
    and `keep`: Settings > Interrogate as they are now when None (A1111 reads them at each tagging)."""
    from pipelines.deepbooru import interrogate_deepbooru

    if state.deepbooru is None:
        raise DeepbooruUnavailableError(DEEPBOORU_UNAVAILABLE)
    settings = settings or state.options.deepbooru_settings()
    keep = bool(state.options.get("interrogate_keep_models_in_memory")) if keep is None else keep
    return interrogate_deepbooru(image, settings, model=state.deepbooru, keep_in_memory=keep)


@contextlib.contextmanager
def interrogation_models_held(state: ServerState):
    """Around a job that may interrogate many pictures (Loopback's loops, the Extras tab's Caption over a batch): the
    server's caption, CLIP and DeepBooru models load at most once for the whole job, and are dropped when it ends
    unless Settings > Interrogate keeps them in memory (`mixkit.interrogate.holding`). Holding loads nothing."""
    with contextlib.ExitStack() as stack:
        for model in (state.captioner, state.interrogator, state.deepbooru):
            if model is not None:
                stack.enter_context(model.held())
        yield


def interrogate_now(state: ServerState, image, settings=None) -> str:
    """A1111's Interrogate CLIP answer for `image`, in the calling (worker) thread: what a queued interrogation
    runs, and what Loopback's "Append interrogated prompt" CLIP appends at each loop. `settings`: Settings >
    Interrogate as they are now when None."""
    from mixkit.interrogate import join_terms

    settings = settings or state.options.interrogate_settings()
    caption = state.captioner.caption(image, settings.caption_options(), settings.keep_models_in_memory)
    return join_terms(caption, state.interrogator.terms(image, settings), settings.return_ranks)


def release_unkept_interrogation_models(state: ServerState, kept_before: bool) -> None:
    """After an options change: when it turned Settings > Interrogate's keep-in-memory off (`kept_before`: its value
    before), free the caption, CLIP and DeepBooru models now (or when the interrogation running ends, which this waits
    for; a job holding them drops them at its end) rather than at their next use. Call it off the event loop."""
    if not kept_before or state.options.get(KEEP_KEY):
        return
    for model in (state.captioner, state.interrogator, state.deepbooru):
        if model is not None:
            model.release()
