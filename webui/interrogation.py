"""A1111's "Interrogate CLIP" on this server: a caption, then the best terms of each word list, in one queued job.

The caption comes from AppFlow's `image2text_generation` app (the operator's captioner with `--appflow-config`,
mixkit-tiny-blip2 by default) with Settings > Interrogate's num_beams / min / max length; the terms from
`state.interrogator` (`--interrogate-clip-model`, `--interrogate-categories-dir`). Shared by
`POST /sdapi/v1/interrogate`, the img2img tab's Interrogate CLIP button and Loopback's "Append interrogated prompt".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from webui.server_state import ServerState
    from webui.worker import Job

CAPTION_APP = "image2text_generation"


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


def interrogate_now(state: ServerState, image, settings=None) -> str:
    """A1111's Interrogate CLIP answer for `image`, in the calling (worker) thread: what a queued interrogation
    runs, and what Loopback's "Append interrogated prompt" CLIP appends at each loop. `settings`: Settings >
    Interrogate as they are now when None."""
    from mixkit.interrogate import join_terms

    settings = settings or state.options.interrogate_settings()
    caption = state.run_app(CAPTION_APP, {"image": image}, settings.caption_options())["text"]
    return join_terms(caption, state.interrogator.terms(image, settings), settings.return_ranks)
