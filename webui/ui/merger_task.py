"""The Checkpoint Merger's merge as a UI task: one queued job that goes on when its page goes away, so a reloaded page
(or one opened after the tab closed) follows it by its task id and is shown how it ended (`webui.ui.reattach`); and
the checkpoint lists of the other tabs refreshed when it ends, as A1111's merge refreshes its checkpoint dropdown.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Callable

import gradio as gr

from webui.error_paths import server_path_redactor
from webui.server_state import ServerState
from webui.ui.progress_view import POLL_SECONDS, job_status, progress_html

KIND = "modelmerger"  # the task's kind: the tab's elem_id prefix, as A1111's


@dataclass(frozen=True)
class CheckpointList:
    """A checkpoint dropdown of another tab (Settings' checkpoint, a Refiner checkpoint) and its choices now; a
    finished merge sets its choices, and leaves its value to the page (these dropdowns take any title)."""

    dropdown: object
    choices: Callable[[], list[str]]

    def refreshed(self):
        return gr.update(choices=self.choices())


def merging_text(snapshot) -> str:
    """The progress line while the merge runs: which key of how many."""
    if snapshot.total_steps > 1:
        return f"Merging: key {snapshot.step}/{snapshot.total_steps}"
    return "Saving..."


def saved_text(merged) -> str:
    """A1111's result line for a written checkpoint (and the config copied beside it)."""
    return f"Checkpoint saved to {merged.path.name}" + (f" (config: {merged.config_path.name})"
                                                        if merged.config_path else "")


def follow_merge(state: ServerState, task):
    """Yield the tab's outputs (progress, result, task box) for the merge `task` until it ends, then how it ended.

    A failed merge is shown in the result as A1111 shows it ("Error merging checkpoints: ..."), not as a pop-up,
    with no server path in it. The task box says "ended <id>" then: the page forgets the id, and the checkpoint lists
    are refreshed (`refreshed_lists`)."""
    from webui.ui.reattach import ENDED

    task_box = task.task_id
    while not task.done.is_set():
        yield progress_html(*job_status(state, task.job, merging_text)), gr.skip(), task_box
        task_box = gr.skip()
        task.done.wait(POLL_SECONDS)
    if task.cancelled:  # Interrupt pressed while it waited in the queue
        line, text = progress_html(0, "Interrupted before it started: nothing was written"), ""
    elif task.failure is not None:  # logged once, when it failed (`webui.ui_tasks`)
        message = server_path_redactor(state)(f"Error merging checkpoints: {task.failure}")
        line, text = progress_html(0, "Merge failed"), html.escape(message, quote=False)
    else:
        line, text = progress_html(1, "Checkpoint saved"), html.escape(saved_text(task.result), quote=False)
    yield line, text, ENDED + task.task_id


def refreshed_lists(model_choices: Callable[..., list], other_lists: list[CheckpointList]):
    """The handler of the task box's change: once the followed merge has ended (by Merge or on a reloaded page), the
    A/B/C dropdowns (`model_choices(a, b, c)`, each choice kept) and `other_lists` as the catalog is now.

    A change of the task box, not the page-load event: a load event that lands late must not touch a dropdown the
    user may already have chosen in (`webui.ui.page_values`), and this one runs only when a merge ended."""
    from webui.ui.reattach import ENDED

    def refresh(task_box: str, a: str | None, b: str | None, c: str | None):
        if not (isinstance(task_box, str) and task_box.startswith(ENDED)):
            return (*[gr.skip()] * (3 + len(other_lists)),)
        return *model_choices(a, b, c), *(listed.refreshed() for listed in other_lists)

    return refresh
