"""A reloaded page (or one opened after the tab closed) reattaches to the Extras upscale, AppFlow run and Train-tab
training its browser started: driven through the built Blocks' own Run, unload, page-load and Interrupt handlers, as
a page's events would call them. The job is started once: the reloaded page only follows it."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pytest
from PIL import Image

from webui.http_guards import AUTH_USER_KEY
from webui.ui.reattach import ENDED

from .ui_blocks import handler
from .worker_jobs import submit_until_interrupted

SKIP = gr.skip()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A model-less server with an embeddings folder (so it has a Train tab) and its built Blocks."""
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-reattach-tabs")
    (root / "models").mkdir(), (root / "embeddings").mkdir()
    state = ServerState(ServerConfig(models_dir=str(root / "models"), output_dir=str(root / "out"),
                                     embeddings_dir=str(root / "embeddings")))
    try:
        yield state, build_ui(state)
    finally:
        state.close()


def page(session: str, user: str | None = None):
    """A page's request as Gradio hands it to a handler: its session, and the --auth user the server checked."""
    return SimpleNamespace(session_hash=session, request=SimpleNamespace(scope={AUTH_USER_KEY: user} if user else {}))


def restore_handler(blocks, kind: str):
    """Tab `kind`'s page-load handler (it gets the task id the page kept in localStorage)."""
    (fn,) = [fn for fn in blocks.fns.values() if (blocks._id, "load") in [tuple(t) for t in fn.targets]
             and fn.outputs and fn.outputs[0].elem_id == f"{kind}_progress"]
    assert fn.outputs[-1].elem_id == f"{kind}_task_id"
    return fn.fn


def end_session(blocks, session: str) -> None:
    (fn,) = [fn for fn in blocks.fns.values() if (None, "unload") in [tuple(t) for t in fn.targets]]
    fn.fn(page(session))


@pytest.fixture()
def busy_worker(built):
    """The worker running another job, so the tab's job waits in the queue until the test calls `release()`."""
    state, _ = built
    job, _ = submit_until_interrupted(state.worker, "txt2img")
    released = []

    def release() -> None:
        released.append(state.worker.interrupt_job(job))

    yield release
    if not released:
        release()


def source_png(tmp_path) -> Image.Image:
    from pipelines.png import save_png

    path = save_png(Image.new("RGB", (24, 16), (200, 10, 30)), tmp_path / "source.png", "a cube\nSteps: 4, Seed: 5")
    with Image.open(path) as image:
        image.load()
        return image.convert("RGB")


def test_a_reloaded_extras_page_follows_its_upscale_and_shows_the_saved_result(built, busy_worker, tmp_path):
    state, blocks = built
    state.options.apply({"samples_save": True})
    before = set(state.output_dir.glob("*.png"))
    task_id = "task(extras-reload-0001)"
    run = handler(blocks, "extras_generate", "click").fn(source_png(tmp_path), "Lanczos", 2.0, 0, 512, 512, True,
                                                         0.0, 0.0, 0.0,  # no face restoration
                                                         task_id, page("old-tab"))
    first = next(run)
    assert "Waiting in queue (1 job(s) ahead)" in first[0] and first[-1] == task_id  # the page keeps this id
    run.close()  # the reload: the old page stops listening and its session ends; the upscale stays queued
    end_session(blocks, "old-tab")
    task = state.tasks.find(task_id, None)
    assert task is not None and task.kind == "extras" and task.job.keep_on_disconnect and not task.done.is_set()

    updates = restore_handler(blocks, "extras")(page("new-tab"), task_id)
    assert "Waiting in queue (1 job(s) ahead)" in next(updates)[0]
    busy_worker()
    *_, last = updates
    progress, path, batch, size, info, task_box = last
    assert "Done: 1 image(s) in" in progress and batch == SKIP and task_box == ENDED + task_id
    (saved,) = set(state.output_dir.glob("*.png")) - before  # upscaled and saved once, not twice
    assert path == str(saved) and size == "24x16 -> 48x32"
    with Image.open(saved) as result:
        assert result.size == (48, 32) and result.info["postprocessing"] == info and info.startswith("Postprocess")


def test_an_extras_batch_that_ended_while_the_page_was_away_is_shown_at_once(built, tmp_path):
    from pipelines.png import save_png

    state, blocks = built
    state.options.apply({"samples_save": False})
    try:
        paths = [str(save_png(Image.new("RGB", (8, 8 * n), (9, 9, 9)), tmp_path / f"{n}.png", None)) for n in (1, 2)]
        run = handler(blocks, "extras_batch_generate", "click").fn(paths, "Nearest", 2.0, 0, 512, 512, True,
                                                                   0.0, 0.0, 0.0,  # no face restoration
                                                                   "task(extras-batch-away)", page("old-tab"))
        next(run)
        run.close()
        end_session(blocks, "old-tab")
        task = state.tasks.find("task(extras-batch-away)", None)
        assert task.done.wait(30)
    finally:
        state.options.apply({"samples_save": True})
    (only,) = list(restore_handler(blocks, "extras")(page("new-tab"), "task(extras-batch-away)"))
    progress, image, gallery, sizes, _, task_box = only
    assert "Done: 2 image(s)" in progress and image == SKIP and task_box == ENDED + "task(extras-batch-away)"
    assert sizes == "8x8 -> 16x16; 8x16 -> 16x32" and [Image.open(path).size for path, _ in gallery] == \
        [(16, 16), (16, 32)]


def test_an_extras_upscale_that_fails_is_shown_to_the_reloaded_page(built, tmp_path, monkeypatch):
    state, blocks = built

    def broken(image, scale, upscaler):
        raise RuntimeError("the upscaler model is corrupt")

    monkeypatch.setattr("pipelines.upscale.upscale_image", broken)
    run = handler(blocks, "extras_generate", "click").fn(source_png(tmp_path), "Lanczos", 2.0, 0, 512, 512, True,
                                                         0.0, 0.0, 0.0,  # no face restoration
                                                         "task(extras-failed-01)", page("old-tab"))
    with pytest.raises(gr.Error, match="Upscale failed: the upscaler model is corrupt"):
        list(run)
    updates = restore_handler(blocks, "extras")(page("new-tab"), "task(extras-failed-01)")
    assert next(updates)[-1] == ENDED + "task(extras-failed-01)"
    with pytest.raises(gr.Error, match="Upscale failed: the upscaler model is corrupt"):
        next(updates)


def appflow_task(state, task_id: str, user: str | None = None, outputs: dict | None = None):
    """An AppFlow run a page started (running until interrupted), registered as the Run handler registers it; its
    outputs are `outputs`, by default an image and a caption."""
    from webui.ui.appflow_task import appflow_finish

    job, _ = submit_until_interrupted(state.worker, "appflow caption", session="old-tab", keep_on_disconnect=True)
    finish = appflow_finish("caption", state.output_dir / "cache")
    if outputs is None:
        outputs = {"image": Image.new("RGB", (8, 8), (1, 2, 3)), "caption": "a red cube"}
    return state.tasks.register(task_id, "appflow", job, user, lambda _: finish(outputs), label="caption")


def test_a_reloaded_appflow_page_follows_its_run_and_shows_its_outputs(built):
    state, blocks = built
    task = appflow_task(state, "task(appflow-reload-01)")
    end_session(blocks, "old-tab")
    updates = restore_handler(blocks, "appflow")(page("new-tab"), "task(appflow-reload-01)")
    first = next(updates)
    assert "Running caption (" in first[0] and first[1:5] == (SKIP, SKIP, SKIP, SKIP) \
        and first[-1] == "task(appflow-reload-01)"
    state.tasks.interrupt("task(appflow-reload-01)", None)
    *_, (progress, gallery, audio, clips, outputs, task_box) = updates
    assert "Done: caption, 1 image(s) in" in progress and outputs == {"caption": "a red cube"} and audio is None
    assert clips["choices"] == [] and clips["visible"] is False
    assert task_box == ENDED + "task(appflow-reload-01)" and task.done.is_set()
    with Image.open(gallery[0][0]) as image:
        assert image.getpixel((0, 0)) == (1, 2, 3)


def test_an_interrupted_appflow_run_shows_interrupted_with_what_it_made(built):
    """As the txt2img tab shows an interrupted batch: "Interrupted", and the outputs the finished steps made."""
    from appflow import APPS
    from appflow.flow import AppResult

    state, blocks = built
    made = AppResult(APPS.get("text2image_generation"), {"images": [Image.new("RGB", (8, 8), (4, 5, 6))]},
                     interrupted=True)
    task = appflow_task(state, "task(appflow-stopped-01)", outputs=made)
    end_session(blocks, "old-tab")
    updates = restore_handler(blocks, "appflow")(page("new-tab"), "task(appflow-stopped-01)")
    next(updates)
    state.tasks.interrupt("task(appflow-stopped-01)", None)
    *_, (progress, gallery, _audio, _clips, outputs, task_box) = updates
    assert "Interrupted: caption, 1 image(s) in" in progress and "Done" not in progress and outputs == {}
    assert task_box == ENDED + "task(appflow-stopped-01)" and task.done.is_set()
    with Image.open(gallery[0][0]) as image:
        assert image.getpixel((0, 0)) == (4, 5, 6)


def test_the_appflow_run_button_runs_the_app_as_a_task_a_reloaded_page_is_shown(built):
    # The app's default generator is the built-in tiny SD model: a real run, no download
    from webui.ui.appflow_tab import run_app

    state, blocks = built
    ports = state.describe_app("text2image_generation")["inputs"]
    run = run_app(state, "text2image_generation", ports, ["prompt"], ["a cube"], "task(appflow-run-0001)",
                  page("tab"), state.output_dir / "cache")
    *_, (progress, gallery, audio, clips, outputs, task_box) = run
    assert audio is None and clips["visible"] is False
    assert "Done: text2image_generation, 1 image(s) in" in progress and task_box == ENDED + "task(appflow-run-0001)"
    task = state.tasks.find("task(appflow-run-0001)", None)
    assert task.kind == "appflow" and task.job.keep_on_disconnect and task.job.session == "tab"
    (only,) = list(restore_handler(blocks, "appflow")(page("new-tab"), "task(appflow-run-0001)"))
    assert only[1:] == (gallery, None, clips, outputs, task_box) and len(gallery) == 1
    with Image.open(gallery[0][0]) as image:
        assert image.size == (64, 64)  # the tiny generator's picture, as a PNG file kept for the page


def test_an_appflow_run_that_failed_names_its_app_to_the_reloaded_page(built):
    state, blocks = built

    def broken(control, on_step):
        raise RuntimeError("the captioner model is missing")

    job = state.worker.submit(broken, "appflow caption", session="old-tab", keep_on_disconnect=True)
    task = state.tasks.register("task(appflow-failed-1)", "appflow", job, None, lambda outputs: None, label="caption")
    assert task.done.wait(10)
    updates = restore_handler(blocks, "appflow")(page("new-tab"), "task(appflow-failed-1)")
    assert "caption failed" in next(updates)[0]
    with pytest.raises(gr.Error, match="caption failed: the captioner model is missing"):
        next(updates)


def training_task(state, task_id: str, user: str | None = None):
    """A Train-tab training a page started (running until interrupted), registered as Train registers it."""
    job, _ = submit_until_interrupted(state.worker, "train embedding cube", session="old-tab", keep_on_disconnect=True)
    return state.tasks.register(task_id, "train", job, user,
                                lambda outcome: f"Interrupted: cube.pt holds step 3 ({outcome})\nLoss: 0.25")


def test_a_reloaded_train_page_follows_the_training_interrupts_it_and_shows_its_log(built):
    state, blocks = built
    task = training_task(state, "task(train-reload-0001)")
    end_session(blocks, "old-tab")  # the reload: the training goes on
    assert not task.job.control.interrupted
    updates = restore_handler(blocks, "train")(page("new-tab"), "task(train-reload-0001)")
    first = next(updates)
    assert "Starting..." in first[0] and first[1] == SKIP and first[-1] == "task(train-reload-0001)"
    # Interrupt from the reloaded page (another session) reaches the run by the task it follows
    handler(blocks, "train_interrupt", "click").fn(page("new-tab"), "task(train-reload-0001)")
    *_, (progress, log, task_box) = updates
    assert "Interrupted: cube.pt holds step 3 (interrupted)" in progress
    assert log == "Interrupted: cube.pt holds step 3 (interrupted)\nLoss: 0.25"
    assert task_box == ENDED + "task(train-reload-0001)"


@pytest.mark.parametrize("kind, user", [("extras", None), ("appflow", None), ("train", "mallory")])
def test_a_training_task_is_followed_only_by_the_train_tab_of_its_user(built, kind, user):
    state, blocks = built
    task = training_task(state, f"task(train-{kind}-{user})")
    try:
        (only,) = list(restore_handler(blocks, kind)(page("new-tab", user), task.task_id))
        noun = {"extras": "upscale", "appflow": "AppFlow run", "train": "training"}[kind]
        assert f"Couldn&#x27;t restore the last {noun}: its result was discarded" in only[0]
        assert list(only[1:-1]) == [SKIP] * (len(only) - 2) and only[-1] == ENDED + task.task_id
        handler(blocks, "train_interrupt", "click").fn(page("new-tab", user), task.task_id)
        assert task.job.control.interrupted is (user is None)  # only its own user's Interrupt reaches it
    finally:
        state.tasks.interrupt(task.task_id, None)
        assert task.done.wait(10)


def test_train_refuses_a_task_id_in_use_before_queueing(built):
    state, blocks = built
    task = training_task(state, "task(train-in-use-001)")
    try:
        before = (len(state.tasks), state.worker.queued)
        with pytest.raises(gr.Error, match=r"task id 'task\(train-in-use-001\)' is already in use"):
            list(handler(blocks, "train_start", "click").fn(page("tab"), *["x"] * 15, task.task_id))
        assert (len(state.tasks), state.worker.queued) == before
    finally:
        state.tasks.interrupt(task.task_id, None)
        assert task.done.wait(10)


def test_extras_interrupt_from_a_reloaded_page_drops_its_queued_upscale_only_for_its_user(built, busy_worker,
                                                                                       tmp_path):
    state, blocks = built
    task_id = "task(extras-interrupt-01)"
    run = handler(blocks, "extras_generate", "click").fn(source_png(tmp_path), "Lanczos", 2.0, 0, 512, 512, True,
                                                         0.0, 0.0, 0.0,  # no face restoration
                                                         task_id, page("old-tab", "alice"))
    next(run)
    run.close()
    end_session(blocks, "old-tab")
    interrupt = handler(blocks, "extras_interrupt", "click")
    assert [block.elem_id for block in interrupt.inputs] == ["extras_task_id"]
    task = state.tasks.find(task_id, "alice")
    interrupt.fn(page("mallory-tab", "mallory"), task_id)  # another user's page: not theirs to stop
    assert not task.done.is_set() and state.worker.jobs_ahead(task.job) == 1  # still queued
    interrupt.fn(page("new-tab", "alice"), task_id)
    assert task.done.wait(10) and task.cancelled
    (only,) = list(restore_handler(blocks, "extras")(page("new-tab", "alice"), task_id))
    assert "Interrupted before it started" in only[0] and only[-1] == ENDED + task_id


def test_appflow_interrupt_from_a_reloaded_page_stops_its_run(built):
    state, blocks = built
    task = appflow_task(state, "task(appflow-interrupt-1)", user="alice")
    end_session(blocks, "old-tab")
    interrupt = handler(blocks, "appflow_interrupt", "click")
    assert [block.elem_id for block in interrupt.inputs] == ["appflow_task_id"]
    interrupt.fn(page("mallory-tab", "mallory"), task.task_id)
    assert not task.job.control.interrupted
    interrupt.fn(page("new-tab", "alice"), task.task_id)
    assert task.job.control.interrupted and task.done.wait(10)


def test_the_appflow_progress_line_shows_an_sd_steps_progress(built):
    import threading

    from pipelines.control import StepProgress
    from webui.ui.appflow_task import follow_appflow

    state, _ = built
    stepped = threading.Event()

    def sampling(control, on_step):  # an app at step 3 of 8 of its first of 2 batches, as its pipeline reports it
        on_step(StepProgress(step=3, total_steps=8, batch_index=0, batch_count=2, latents=None, control=control))
        stepped.set()
        while not control.interrupted:
            control_wait.wait(0.01)
        return {}

    control_wait = threading.Event()
    job = state.worker.submit(sampling, "appflow caption", keep_on_disconnect=True)
    task = state.tasks.register("task(appflow-steps-0001)", "appflow", job, None, lambda outputs: None,
                                label="caption")
    try:
        assert stepped.wait(10)
        progress = next(follow_appflow(state, task))[0]
        assert "Running caption: step 3/8, batch 1/2, ETA " in progress
    finally:
        state.tasks.interrupt(task.task_id, None)
        assert task.done.wait(10)
