"""A tab following its job by task id, so a reload or a second tab reattaches to it: txt2img and img2img (their
generation), Extras (its upscale), AppFlow (its run), Train (its training) and Checkpoint Merger (its merge).

As in A1111 (1.6+, `javascript/progressbar.js`, `modules/progress.py`), Generate makes a task id in the page and
keeps it in the browser's localStorage; a page that loads with one follows that task: its progress and live
preview while it runs, then its gallery, infotext and seeds, also when it finished while no page was open. The
page forgets the id once it has shown the result, so the next load starts clean. A1111 offers a button for this;
here the page reattaches as it loads. Interrupt and Skip send the followed task's id (the tab's hidden task box),
so they reach a job started by the page before the reload (whose Gradio session has ended). Each tab's outputs
start with its progress line and end with its task box.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import gradio as gr

from webui.server_state import ServerState
from webui.ui.progress_view import POLL_SECONDS, progress_html, status_text
from webui.ui_tasks import TaskResult, UiTask, check_task_id, new_task_id

# What the "Couldn't restore" line calls a tab's job, by kind (txt2img / img2img: "generation").
RESTORED_NOUNS = {"extras": "upscale", "appflow": "AppFlow run", "train": "training", "modelmerger": "merge"}

# The page keeps the task id of each tab's last Generate here (A1111: "txt2img_task_id" in localStorage).
STORAGE_KEY = "mixkit_{kind}_task_id"


def page_owner(request) -> str | None:
    """The --auth user of the page's request (None without auth), whose tasks alone it may follow."""
    from webui.http_guards import AUTH_USER_KEY

    scope = getattr(getattr(request, "request", None), "scope", None)
    return scope.get(AUTH_USER_KEY) if isinstance(scope, dict) else None


def gallery_result(state: ServerState, outcome, cache_dir) -> TaskResult:
    """The gallery of a finished generation: its saved files (else PNGs with their infotext in Gradio's cache),
    with the grid first when Settings ask for one. Run once when the job ends, whether or not a page watches."""
    from webui.ui.gallery_files import gallery_pngs
    from webui.ui.result_grid import grid_for_gallery, with_grid

    from pipelines.scripts import ScriptResult

    result = outcome.result
    writing = state.options.infotext_writing()  # enable_pnginfo / save_txt, as the grid's and unsaved files' own
    if isinstance(result, ScriptResult):  # its own grids first, then what it returns; its samples were saved apart
        paths = gallery_pngs(result.images, result.seeds, result.infotexts, cache_dir, pnginfo=writing.pnginfo)
        # "N image(s)" counts what the script generated (a 20-cell plot returns only its grid unless asked)
        generated = result.samples.images if result.samples is not None else \
            result.images[result.index_of_first_image:]
        return TaskResult(paths, list(result.seeds), list(result.infotexts), image_count=len(generated),
                          interrupted=bool(result.interrupted))
    if outcome.saved:
        paths = [str(path) for path in outcome.saved]
    else:
        paths = gallery_pngs(result.images, result.seeds, result.infotexts, cache_dir, pnginfo=writing.pnginfo)
    grid = grid_for_gallery(result.images, result.infotexts, return_grid=bool(state.options.get("return_grid")),
                            # A1111's grid_save ("Always save all generated image grids") does not depend on
                            # samples_save: process_images saves the grid whenever it is on
                            save_to=state.output_dir if state.options.get("grid_save") else None, cache_dir=cache_dir,
                            writing=writing)
    paths, seeds, texts = with_grid(paths, list(result.seeds), list(result.infotexts), grid)
    return TaskResult(paths, seeds, texts, image_count=len(result.images), interrupted=bool(result.interrupted))


ENDED = "ended "  # the task box's value once its task ended: "ended task(…)"


def follow_ui_task(task: UiTask, count: int, running: Callable[[UiTask], tuple], shown: Callable[[UiTask], tuple],
                   cleared: tuple = ()) -> Iterator[tuple]:
    """Yield a tab's `count` outputs for `task` until it ends, then its result; several pages may follow one task,
    each gets the same result. `running(task)` gives the outputs before the task box while it runs (the progress line
    first), `shown(task)` those of its result; `cleared` the outputs after the progress line when it ended without one
    (a preview cleared), the rest left as they are.

    The task box names the task while it is followed (the page keeps the id in localStorage then, `remember_js`)
    and "ended <id>" once it has ended (the page forgets that id, and only that one)."""
    rest = (*cleared, *[gr.skip()] * (count - 2 - len(cleared)))
    task_box = task.task_id
    while not task.done.is_set():
        yield *running(task), task_box
        task_box = gr.skip()
        task.done.wait(POLL_SECONDS)
    ended = ENDED + task.task_id
    if task.cancelled:  # Interrupt pressed while it waited: it never ran
        yield progress_html(0, "Interrupted before it started: removed from the queue"), *rest, ended
        return
    if task.failure is not None:  # logged once, when it failed (`webui.ui_tasks`)
        yield progress_html(0, f"{task.failure_label} failed"), *rest, ended
        raise gr.Error(f"{task.failure_label} failed: {task.failure}", print_exception=False)
    yield *shown(task), ended


def follow_task(state: ServerState, task: UiTask):
    """Yield a generating tab's outputs (progress, preview, gallery, infotext, infotexts, seeds, selection, task box)
    for `task` (`follow_ui_task`)."""

    def running(task: UiTask) -> tuple:
        fraction, text = status_text(state, task.job)
        preview = state.current_preview() if state.options.get("live_previews_enable") and fraction else None
        return progress_html(fraction, text), preview, *[gr.skip()] * 5

    def shown(task: UiTask) -> tuple:
        result = task.result
        label = "Interrupted" if result.interrupted else "Done"
        done = progress_html(1.0, f"{label}: {result.image_count} image(s) in {task.seconds:.1f}s")
        return (done, None, [(path, None) for path in result.paths],
                (result.infotexts[0] if result.infotexts else ""), result.infotexts, result.seeds, None)

    return follow_ui_task(task, 8, running, shown, cleared=(None,))


def checked_task_id(state: ServerState, task_id) -> str:
    """The task id a tab's Generate / Run / Train sent (a new one for a Gradio client that sent none); ValueError
    when it is malformed or already in use."""
    task_id = check_task_id(task_id) if task_id else new_task_id()
    if state.tasks.in_use(task_id):
        raise ValueError(f"task id {task_id!r} is already in use; reload the page to get a new one.")
    return task_id


def registered_task(state: ServerState, task_id: str, kind: str, job, request, finish, *,
                    label: str | None = None) -> UiTask:
    """`job` registered under `task_id` for the page's user; an id taken meanwhile interrupts the job (it must not
    run unseen) and is refused."""
    from webui.ui.errors import refused

    try:
        return state.tasks.register(task_id, kind, job, page_owner(request), finish, label=label)
    except ValueError as error:
        state.worker.interrupt_job(job)
        raise refused(str(error)) from None


def followed_task_id(task_box: str) -> str:
    """The task id a tab's task box names, whether its task runs or has ended ("" for none)."""
    return task_box[len(ENDED):] if isinstance(task_box, str) and task_box.startswith(ENDED) else task_box or ""


def interrupt_own_job(state: ServerState) -> Callable:
    """A tab's Interrupt handler (inputs: its task box): the page's own session's job, and the task the tab follows,
    which reaches a job started before a reload (another session) and nobody else's (`UiTasks.interrupt` checks the
    --auth user). A queued job is dropped, a running one returns what it has."""

    def interrupt(request: gr.Request, task_box: str = "") -> None:
        state.interrupt_session(getattr(request, "session_hash", None))
        state.tasks.interrupt(followed_task_id(task_box), page_owner(request))

    return interrupt


def restore_task(state: ServerState, kind: str, follow: Callable[[UiTask], Iterator[tuple]] | None = None,
                 count: int = 8):
    """The page-load handler of tab `kind` (`count` outputs): follow the task id the browser kept, if this server
    still has it, with `follow(task)` (a generating tab's `follow_task` by default)."""
    follow = follow or (lambda task: follow_task(state, task))
    noun = RESTORED_NOUNS.get(kind, "generation")

    def restore(request: gr.Request, task_id):
        if not task_id:  # nothing was running when the page was left: a fresh page
            yield (*[gr.skip()] * count,)
            return
        task = state.tasks.find(task_id, page_owner(request))
        if task is None or task.kind != kind:
            # A1111's restore_progress says the same; the page forgets the id (the task box says it ended)
            yield (progress_html(0, f"Couldn't restore the last {noun}: its result was discarded (results are "
                                    "kept 6 hours, the last 32) or the server restarted"),
                   *[gr.skip()] * (count - 2), ENDED + str(task_id))
            return
        yield from follow(task)

    return restore


def submit_js(input_count: int) -> str:
    """Generate's page side: a new unguessable task id (A1111's "task(…)" form) sent as the last input. Gradio
    hands this function the inputs' and the outputs' values; only the inputs go on to the server."""
    return f"""(...values) => {{
        const bytes = crypto.getRandomValues(new Uint8Array(16));
        const id = "task(" + Array.from(bytes, b => b.toString(16).padStart(2, "0")).join("") + ")";
        return [...values.slice(0, {input_count - 1}), id];
    }}"""


def load_js(kind: str) -> str:
    """The page-load side: the task id this browser kept for tab `kind` ("" for none)."""
    return f"""() => {{
        try {{ return [localStorage.getItem("{STORAGE_KEY.format(kind=kind)}") || ""]; }} catch (error) {{ return [""]; }}
    }}"""


def remember_js(kind: str) -> str:
    """The task box changed: keep a followed task's id in localStorage (it survives a reload there), and forget an
    ended one's, unless this browser has since started a newer task (then the kept id is that one)."""
    key = STORAGE_KEY.format(kind=kind)
    return f"""(value) => {{
        try {{
            if (value && value.startsWith("{ENDED}")) {{
                if (localStorage.getItem("{key}") === value.slice({len(ENDED)})) {{ localStorage.removeItem("{key}"); }}
            }} else if (value) {{
                localStorage.setItem("{key}", value);
            }}
        }} catch (error) {{}}
        return [];
    }}"""


@dataclass
class FollowedTab:
    """What a tab other than txt2img/img2img hands `build_ui` so a loading page follows its task (`wire_reattach`)."""

    kind: str
    task_box: Any
    outputs: list  # its Run event's, the progress line first and the task box last
    follow: Callable[[UiTask], Iterator[tuple]]


def wire_reattach(state: ServerState, blocks, kind: str, task_box, outputs: list,
                  follow: Callable[[UiTask], Iterator[tuple]] | None = None) -> None:
    """Follow the browser's kept task of tab `kind` when a page loads (`outputs`: the Generate event's, the progress
    line first and the task box last; `follow`: `restore_task`'s), and keep the id of the task the tab follows in
    localStorage while it runs."""
    task_box.change(None, inputs=[task_box], js=remember_js(kind), queue=False)
    blocks.load(restore_task(state, kind, follow, len(outputs)), inputs=[task_box], outputs=outputs,
                js=load_js(kind), concurrency_limit=None, show_progress="hidden")


def task_box_for(kind: str, *, render: bool = True) -> gr.Textbox:
    """A tab's hidden task box: the id of the task it follows, which its page keeps (`remember_js`); hidden but in
    the page, so its changes reach the page's script."""
    return gr.Textbox("", label="Task id (the page makes one; empty: the server does)", visible="hidden",
                      elem_id=f"{kind}_task_id", interactive=False, render=render)
