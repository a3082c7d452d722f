"""A reloaded page (or a second tab) reattaches to the generation its browser started: driven through the built
Blocks' own page-load, unload, Generate, Interrupt and Skip handlers, as a page's events would call them."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pytest
from PIL import Image

from webui.http_guards import AUTH_USER_KEY
from webui.ui.reattach import ENDED, gallery_result
from webui.ui_tasks import TaskResult

from .ui_blocks import handler, model_less_ui
from .worker_jobs import submit_until_interrupted

SKIP = gr.skip()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    with model_less_ui(tmp_path_factory.mktemp("ui-reattach")) as built_ui:
        yield built_ui


def page(session: str, user: str | None = None):
    """A page's request as Gradio hands it to a handler: its session, and the --auth user the server checked."""
    return SimpleNamespace(session_hash=session, request=SimpleNamespace(scope={AUTH_USER_KEY: user} if user else {}))


def restore_handler(blocks, kind: str):
    """The tab's page-load handler (it gets the task id the page kept in localStorage)."""
    (fn,) = [fn for fn in blocks.fns.values() if (blocks._id, "load") in [tuple(t) for t in fn.targets]
             and fn.outputs and fn.outputs[0].elem_id == f"{kind}_progress"]
    assert [output.elem_id for output in fn.outputs][-1] == f"{kind}_task_id"
    return fn.fn


def end_session(blocks, session: str) -> None:
    (fn,) = [fn for fn in blocks.fns.values() if (None, "unload") in [tuple(t) for t in fn.targets]]
    fn.fn(page(session))


def started_task(state, kind: str, task_id: str, *, session: str = "old-tab", user: str | None = None):
    """A generation of `kind` a page started (running until interrupted), registered as the Generate handler does;
    its result names the job's return value."""
    job, body = submit_until_interrupted(state.worker, kind, session=session, keep_on_disconnect=True)

    def finish(outcome) -> TaskResult:
        return TaskResult([f"/gallery/{task_id}.png"], [42], [f"infotext of {task_id}"], image_count=1,
                          interrupted=outcome == "interrupted")

    return state.tasks.register(task_id, kind, job, user, finish), body


def test_a_page_without_a_kept_task_id_loads_unchanged(built):
    _, blocks = built
    assert list(restore_handler(blocks, "txt2img")(page("fresh"), "")) == [(SKIP,) * 8]


@pytest.mark.parametrize("kind", ["txt2img", "img2img"])
def test_a_reloaded_page_follows_the_running_task_interrupts_it_and_gets_its_result(built, kind):
    state, blocks = built
    task_id = f"task({kind}-reload-0001)"
    task, _ = started_task(state, kind, task_id)
    end_session(blocks, "old-tab")  # the reload ends the old page's session: the generation goes on
    assert not task.job.control.interrupted and not task.done.is_set()

    updates = restore_handler(blocks, kind)(page("new-tab"), task_id)
    first = next(updates)
    assert "Starting..." in first[0] and first[-1] == task_id  # the page keeps following this id
    handler(blocks, f"{kind}_interrupt", "click").fn(page("new-tab"), task_id)  # another session: by task id
    *_, last = updates
    progress, preview, gallery, infotext, infotexts, seeds, selected, task_box = last
    assert "Interrupted: 1 image(s) in" in progress and preview is None
    assert gallery == [(f"/gallery/{task_id}.png", None)] and infotext == f"infotext of {task_id}"
    assert (infotexts, seeds, selected, task_box) == ([f"infotext of {task_id}"], [42], None, ENDED + task_id)


def test_skip_after_a_reload_ends_the_running_batch(built):
    state, blocks = built
    task, body = started_task(state, "txt2img", "task(skip-after-reload)")
    end_session(blocks, "old-tab")
    handler(blocks, "txt2img_skip", "click").fn(page("new-tab"), "task(skip-after-reload)")
    assert wait_for(lambda: body.skips == [True])
    handler(blocks, "txt2img_interrupt", "click").fn(page("new-tab"), "task(skip-after-reload)")
    assert task.done.wait(10) and task.result.interrupted


def test_two_tabs_following_one_task_both_get_its_result(built):
    state, blocks = built
    task, _ = started_task(state, "txt2img", "task(two-tabs-0001)")
    restore = restore_handler(blocks, "txt2img")
    tab_one, tab_two = restore(page("tab-1"), "task(two-tabs-0001)"), restore(page("tab-2"), "task(two-tabs-0001)")
    assert next(tab_one)[-1] == next(tab_two)[-1] == "task(two-tabs-0001)"
    state.tasks.interrupt("task(two-tabs-0001)", None)
    one, two = list(tab_one)[-1], list(tab_two)[-1]
    assert one == two and one[2] == [("/gallery/task(two-tabs-0001).png", None)]


def test_a_task_that_ended_while_the_page_was_away_is_shown_at_once(built):
    state, blocks = built
    task, _ = started_task(state, "img2img", "task(ended-away-01)")
    end_session(blocks, "old-tab")
    state.tasks.interrupt("task(ended-away-01)", None)
    assert task.done.wait(10)
    (only,) = list(restore_handler(blocks, "img2img")(page("new-tab"), "task(ended-away-01)"))
    assert only[2] == [("/gallery/task(ended-away-01).png", None)] and only[-1] == ENDED + "task(ended-away-01)"


@pytest.fixture()
def running_task(built):
    """A txt2img task of the "old-tab" page running until the test ends."""
    state, _ = built
    number = len(state.tasks)
    task, _ = started_task(state, "txt2img", f"task(txt2img-running-{number:04d})")
    yield task
    state.worker.interrupt_job(task.job)
    assert task.done.wait(10)


@pytest.mark.parametrize("kind, task_id, user", [
    ("txt2img", "task(never-made-0001)", None),  # unknown, discarded, or from before a restart
    ("img2img", "RUNNING", None),  # the other tab's task
    ("txt2img", "RUNNING", "mallory"),  # another --auth user's
    ("txt2img", "not a task id", None),  # malformed
])
def test_a_task_id_the_page_may_not_follow_says_so_and_is_forgotten(built, running_task, kind, task_id, user):
    _, blocks = built
    task_id = running_task.task_id if task_id == "RUNNING" else task_id
    (only,) = list(restore_handler(blocks, kind)(page("new-tab", user), task_id))
    assert "Couldn&#x27;t restore the last generation: its result was discarded" in only[0]
    assert only[1:7] == (SKIP,) * 6 and only[-1] == ENDED + task_id
    assert not running_task.job.control.interrupted  # nothing of it was touched
    handler(blocks, "txt2img_interrupt", "click").fn(page("new-tab", user), running_task.task_id)
    assert running_task.job.control.interrupted is (user is None)  # only its own user's Interrupt reaches it


def test_a_failed_task_shows_its_error_to_the_reloaded_page(built):
    state, blocks = built

    def broken(control, on_step):
        raise RuntimeError("the LoRA does not fit")

    job = state.worker.submit(broken, "txt2img", session="old-tab", keep_on_disconnect=True)
    task = state.tasks.register("task(failed-task-01)", "txt2img", job, None, lambda outcome: None)
    assert task.done.wait(10)
    updates = restore_handler(blocks, "txt2img")(page("new-tab"), "task(failed-task-01)")
    assert next(updates)[-1] == ENDED + "task(failed-task-01)"  # forgotten, then the error is shown
    with pytest.raises(gr.Error, match="Generation failed: the LoRA does not fit"):
        next(updates)


GENERATE_FORM = ["a cube", "", "Euler", "Automatic", 2, 7, 64, 64, 1, 1, 1, 1, -1, 0, 0, 0]  # then the Extra seed options
HIRES_OFF = [False, "Latent", 2, 0, 0, 0, 0.7, "", "", "Use same sampler", "Use same scheduler"]


@pytest.mark.parametrize("task_id, message", [
    ("RUNNING", r"task id 'task\(txt2img-running-\d+\)' is already in use; reload the page"),
    ("task(<b>)", "task id must be 8 to 128 characters"),
])
def test_generate_refuses_a_task_id_in_use_or_malformed_before_queueing(built, running_task, task_id, message):
    state, blocks = built
    task_id = running_task.task_id if task_id == "RUNNING" else task_id
    before = (len(state.tasks), state.worker.queued)
    run = handler(blocks, "txt2img_generate", "click").fn(page("tab"), *GENERATE_FORM, [], *HIRES_OFF, None, task_id)
    with pytest.raises(gr.Error, match=message):
        next(run)
    assert (len(state.tasks), state.worker.queued) == before


def test_generate_follows_its_task_and_names_it_for_the_page(built):
    # Model-less: the job fails in the worker ("no model"), which the registry records; what matters here is that
    # Generate registered the page's id, kept on disconnect, and named it in the task box.
    state, blocks = built
    run = handler(blocks, "txt2img_generate", "click").fn(page("tab"), *GENERATE_FORM, [], *HIRES_OFF, None,
                                                          "task(generate-0001)")
    first = next(run)
    task = state.tasks.find("task(generate-0001)", None)
    assert task is not None and task.job.keep_on_disconnect and task.job.session == "tab" and task.kind == "txt2img"
    assert first[-1] in ("task(generate-0001)", ENDED + "task(generate-0001)")
    with pytest.raises(gr.Error, match="Generation failed"):
        list(run)


def test_the_gallery_result_is_made_with_the_grid_first(built, tmp_path):
    # The gallery files are made when the job ends (here, directly): the grid first with the first image's seed
    state, _ = built
    images = [Image.new("RGB", (8, 8), (value, 0, 0)) for value in (10, 200)]
    result = SimpleNamespace(images=images, seeds=[7, 8], infotexts=["cube\nSeed: 7", "cube\nSeed: 8"],
                             interrupted=False)
    made = gallery_result(state, SimpleNamespace(result=result, saved=[]), tmp_path)
    assert made.image_count == 2 and not made.interrupted
    assert made.seeds == [7, 7, 8] and made.infotexts == ["cube\nSeed: 7", "cube\nSeed: 7", "cube\nSeed: 8"]
    assert len(made.paths) == 3 and made.paths[1].endswith("-7.png") and made.paths[2].endswith("-8.png")
    with Image.open(made.paths[0]) as grid:
        assert grid.size == (16, 8)


def wait_for(condition, seconds: float = 10) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(condition())


def test_a_script_result_counts_the_images_it_generated_not_its_grid(built, tmp_path):
    from pipelines.generation import GenerationResult
    from pipelines.scripts import ScriptResult

    state, _ = built
    samples = GenerationResult([Image.new("RGB", (8, 8))] * 4, [1, 2, 3, 4], ["a"] * 4)
    plot = ScriptResult(images=[Image.new("RGB", (16, 16))], seeds=[1], infotexts=["grid"], index_of_first_image=1,
                        samples=samples)  # a 2x2 plot without "Include Sub Images": the grid only
    made = gallery_result(state, SimpleNamespace(result=plot, saved=[]), tmp_path)
    assert made.image_count == 4 and len(made.paths) == 1
