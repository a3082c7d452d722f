"""The Checkpoint Merger tab: A1111's controls, a merge queued and followed, the new file in every checkpoint list."""

from __future__ import annotations

import json
import shutil

import gradio as gr
import httpx
import pytest
import torch
from safetensors.torch import load_file, save_file

from .ui_blocks import component, handler

SKIP = gr.skip()

FORM_DEFAULTS = dict(method="Weighted sum", multiplier=0.3, save_as_half=False, custom_name="",
                     checkpoint_format="safetensors", config_source="A, B or C", bake_in_vae="None",
                     discard_weights="", save_metadata=True, add_merge_recipe=True, copy_metadata=True,
                     metadata_json="{}")


@pytest.fixture
def built(single_file_checkpoints, tmp_path, monkeypatch):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "cache"))
    models = tmp_path / "models"
    models.mkdir()
    for name in ("sd1", "other"):
        shutil.copy(single_file_checkpoints / f"{name}.safetensors", models)
    vaes = tmp_path / "vae"
    vaes.mkdir()
    first_stage = {key.removeprefix("first_stage_model."): value * 0 + 0.5
                   for key, value in load_file(models / "sd1.safetensors").items() if key.startswith("first_stage_model.")}
    save_file(first_stage, vaes / "half.safetensors")
    save_file({"decoder.conv_in.bias": torch.zeros(5)}, vaes / "wrong.safetensors")  # another architecture's shape
    state = ServerState(ServerConfig(models_dir=str(models), output_dir=str(tmp_path / "out"), vae_dir=str(vaes)))
    try:
        yield state, build_ui(state), models
    finally:
        state.close()


def run_merge(blocks, a, b=None, c=None, *, task_id="", request=None, **changes):
    """Every update Merge yields (`merge_updates`), the merge run to its end."""
    return list(merge_updates(blocks, a, b, c, task_id=task_id, request=request, **changes))


def merge_updates(blocks, a, b=None, c=None, *, task_id="", request=None, **changes):
    """Merge's handler as a page calls it: the form, then the task id the page made ("": the server makes one)."""
    form = {**FORM_DEFAULTS, **changes}
    merge = handler(blocks, "modelmerger_merge", "click").fn
    return merge(a, b, c, *form.values(), task_id, request=request)


def test_controls_have_a1111_defaults(built):
    _, blocks, _ = built
    assert component(blocks, "modelmerger_interp_amount").value == 0.3
    assert component(blocks, "modelmerger_interp_method").value == "Weighted sum"
    assert component(blocks, "modelmerger_checkpoint_format").value == "safetensors"
    assert [value for value, _ in component(blocks, "modelmerger_bake_in_vae").choices] == [
        "None", "half.safetensors", "wrong.safetensors"]
    assert component(blocks, "modelmerger_primary_model_name").choices == [("other.safetensors", "other.safetensors"),
                                                                           ("sd1.safetensors", "sd1.safetensors")]


def test_merge_runs_in_the_queue_and_the_new_file_is_listed(built, serving):
    state, blocks, models = built
    outputs = run_merge(blocks, "sd1.safetensors", "other.safetensors", save_as_half=True,
                        bake_in_vae="half.safetensors", metadata_json='{"author": "me"}')
    progress, text, task_box = outputs[-1]
    boxes = list(lists_after(blocks, task_box, "sd1.safetensors", "other.safetensors", None).values())
    assert "Checkpoint saved" in progress and text == "Checkpoint saved to 0.7(sd1) + 0.3(other).safetensors"
    written = models / "0.7(sd1) + 0.3(other).safetensors"
    merged = load_file(written)
    assert merged["first_stage_model.decoder.conv_in.bias"].unique().tolist() == [0.5]
    assert merged["first_stage_model.decoder.conv_in.bias"].dtype.is_floating_point
    assert str(merged["model.diffusion_model.out.2.weight"].dtype) == "torch.float16"
    from mixkit.io.hashing import sha256_file

    titles = [f"{name} [{sha256_file(models / name)[:10]}]" for name in
              (written.name, "other.safetensors", "sd1.safetensors")]
    assert boxes[0]["choices"] == titles and boxes[0]["value"] == titles[2]  # hashed now, the choice kept
    from mixkit.io.safetensors_header import read_safetensors_metadata

    recipe = json.loads(read_safetensors_metadata(written)["sd_merge_recipe"])
    assert recipe["bake_in_vae"] == "half.safetensors" and recipe["save_as_half"] is True
    with serving(state, load_model=False) as running:
        listed = httpx.get(f"{running.url}/sdapi/v1/sd-models", timeout=30).json()
    assert "0.7(sd1) + 0.3(other)" in [item["model_name"] for item in listed]


def test_form_mistakes_are_refused_before_queueing(built):
    state, blocks, models = built
    with pytest.raises(gr.Error, match="requires a tertiary model"):
        run_merge(blocks, "sd1.safetensors", "other.safetensors", method="Add difference")
    with pytest.raises(gr.Error, match="not valid JSON"):
        run_merge(blocks, "sd1.safetensors", "other.safetensors", metadata_json="{")
    with pytest.raises(gr.Error, match="Unknown checkpoint 'nope'"):
        run_merge(blocks, "nope", "other.safetensors")
    assert sorted(path.name for path in models.iterdir()) == ["other.safetensors", "sd1.safetensors"]
    assert state.worker.queued == 0


def test_a_failed_merge_shows_the_error_and_writes_nothing(built):
    _, blocks, models = built
    save_file({"model.diffusion_model.out.2.weight": torch.zeros(1)}, models / "tiny.safetensors")
    blocks_state = handler(blocks, "modelmerger_refresh_checkpoints", "click").fn
    blocks_state(None, None, None)
    progress, text, *_ = run_merge(blocks, "sd1.safetensors", "tiny.safetensors")[-1]
    assert "Merge failed" in progress and "Cannot merge key 'model.diffusion_model.out.2.weight'" in text
    assert not any("0.7" in path.name for path in models.iterdir())


def test_read_metadata_merges_the_selected_files(built):
    _, blocks, models = built
    save_file(load_file(models / "sd1.safetensors"), models / "meta.safetensors", metadata={"ss_x": "1"})
    handler(blocks, "modelmerger_refresh_checkpoints", "click").fn(None, None, None)
    read = handler(blocks, "modelmerger_read_metadata", "click").fn
    assert json.loads(read("meta.safetensors", "other.safetensors", None)) == {"ss_x": "1", "format": "pt"}  # A, then B


def test_a_failure_inside_the_job_names_no_server_path(built, tmp_path):
    _, blocks, models = built
    progress, text, *_ = run_merge(blocks, "sd1.safetensors", "other.safetensors", bake_in_vae="wrong.safetensors")[-1]
    assert "Merge failed" in progress and "decoder.conv_in.bias" in text and "another architecture" in text
    assert str(tmp_path) not in text and "VAE file 'wrong.safetensors'" in text  # named as the VAE list names it
    assert sorted(path.name for path in models.iterdir()) == ["other.safetensors", "sd1.safetensors"]


def test_a_page_merges_through_gradio(built, serving):
    """End to end through the served app: the form's values as the browser sends them, the file written and listed."""
    from gradio_client import Client

    state, _, models = built
    with serving(state, load_model=False) as running:
        client = Client(running.url + "/", verbose=False)
        _, text, *_ = client.predict("sd1.safetensors", "other.safetensors", None, *FORM_DEFAULTS.values(),
                                     api_name="/modelmerger")
        listed = httpx.get(f"{running.url}/sdapi/v1/sd-models", timeout=30).json()
    assert text == "Checkpoint saved to 0.7(sd1) + 0.3(other).safetensors"
    assert "0.7(sd1) + 0.3(other)" in [item["model_name"] for item in listed]


MERGED = "0.7(sd1) + 0.3(other).safetensors"


def lists_after(blocks, task_box: str, a=None, b=None, c=None) -> dict:
    """What the task box's change sets, by elem_id, when the merge handler (or a reloaded page's) left `task_box` in
    it: the A/B/C dropdowns (chosen `a`, `b`, `c` on the page) and the other tabs' checkpoint lists."""
    target = component(blocks, "modelmerger_task_id")
    (fn,) = [fn for fn in blocks.fns.values() if (target._id, "change") in [tuple(t) for t in fn.targets]
             and fn.fn is not None]  # the other change listener is the page's localStorage script
    assert [block.elem_id for block in fn.inputs] == ["modelmerger_task_id", "modelmerger_primary_model_name",
                                                      "modelmerger_secondary_model_name",
                                                      "modelmerger_tertiary_model_name"]
    return dict(zip([block.elem_id for block in fn.outputs], fn.fn(task_box, a, b, c)))


def test_a_merge_lists_the_new_file_in_settings_and_the_refiner_lists(built):
    from .ui_blocks import page_props

    state, blocks, models = built
    assert not any(MERGED in value for value, _ in page_props(blocks, "settings_checkpoint")["choices"])
    *_, last = run_merge(blocks, "sd1.safetensors", "other.safetensors", task_id="task(merge-lists-0001)")
    assert last[-1] == "ended task(merge-lists-0001)"  # the page forgets the finished task, and the lists refresh
    running = lists_after(blocks, "task(merge-lists-0001)", "sd1.safetensors")  # the task box while it runs
    assert list(running.values()) == [SKIP] * 6
    lists = lists_after(blocks, last[-1], "sd1.safetensors", "nope.safetensors")
    assert list(lists)[3:] == ["settings_checkpoint", "txt2img_refiner_checkpoint", "img2img_refiner_checkpoint"]
    titles = state.catalog.titles()
    assert any(title.startswith(MERGED) for title in titles) and len(titles) == 3
    assert lists["settings_checkpoint"] == gr.update(choices=titles)  # the value stays the page's choice
    assert lists["txt2img_refiner_checkpoint"] == lists["img2img_refiner_checkpoint"] == \
        gr.update(choices=["None", *titles])
    assert lists["modelmerger_primary_model_name"] == gr.update(choices=titles, value=titles[2])  # sd1, now hashed
    assert lists["modelmerger_secondary_model_name"] == gr.update(choices=titles, value=None)  # a title gone
    assert lists["modelmerger_tertiary_model_name"] == gr.update(choices=titles, value=None)
    served = [value for value, _ in page_props(blocks, "modelmerger_primary_model_name")["choices"]]
    assert served == titles  # a page opened now lists it in A, B and C


def restore_merge(blocks):
    """The merger tab's page-load handler: it follows the task id the browser kept."""
    from webui.ui.reattach import RESTORED_NOUNS

    (fn,) = [fn for fn in blocks.fns.values() if (blocks._id, "load") in [tuple(t) for t in fn.targets]
             and fn.outputs and fn.outputs[0].elem_id == "modelmerger_progress"]
    assert fn.outputs[-1].elem_id == "modelmerger_task_id" and RESTORED_NOUNS["modelmerger"] == "merge"
    return fn.fn


def page(session: str):
    from types import SimpleNamespace

    return SimpleNamespace(session_hash=session, request=SimpleNamespace(scope={}))


def end_session(blocks, session: str) -> None:
    (fn,) = [fn for fn in blocks.fns.values() if (None, "unload") in [tuple(t) for t in fn.targets]]
    fn.fn(page(session))


def test_a_reloaded_page_follows_the_merge_and_is_shown_its_file(built):
    from .worker_jobs import submit_until_interrupted

    state, blocks, models = built
    busy, _ = submit_until_interrupted(state.worker, "txt2img")  # the merge waits behind it
    task_id = "task(merge-reload-0001)"
    try:
        updates = merge_updates(blocks, "sd1.safetensors", "other.safetensors", task_id=task_id,
                                request=page("old-tab"))
        first = next(updates)
        assert "Waiting in queue (1 job(s) ahead)" in first[0] and first[-1] == task_id  # the page keeps this id
        updates.close()  # the reload: the old page stops listening and its session ends
        end_session(blocks, "old-tab")
        task = state.tasks.find(task_id, None)
        assert task is not None and task.kind == "modelmerger" and not task.done.is_set()
        restored = restore_merge(blocks)(page("new-tab"), task_id)
        assert "Waiting in queue (1 job(s) ahead)" in next(restored)[0]
    finally:
        state.worker.interrupt_job(busy)
    *_, last = restored
    progress, text, task_box = last
    assert "Checkpoint saved" in progress and text == f"Checkpoint saved to {MERGED}"
    assert (models / MERGED).is_file()  # the session's end did not cancel the merge
    assert task_box == "ended " + task_id
    titles = state.catalog.titles()
    lists = lists_after(blocks, task_box, "other.safetensors")  # chosen on the reloaded page meanwhile: kept
    assert lists["modelmerger_primary_model_name"] == gr.update(choices=titles, value=titles[1])
    assert lists["settings_checkpoint"] == gr.update(choices=titles)


def test_a_failed_merge_is_shown_to_a_page_that_comes_back_later(built):
    state, blocks, models = built
    save_file({"model.diffusion_model.out.2.weight": torch.zeros(1)}, models / "tiny.safetensors")
    handler(blocks, "modelmerger_refresh_checkpoints", "click").fn(None, None, None)
    task_id = "task(merge-failed-away1)"
    updates = merge_updates(blocks, "sd1.safetensors", "tiny.safetensors", task_id=task_id, request=page("old"))
    next(updates)
    updates.close()
    end_session(blocks, "old")
    assert state.tasks.find(task_id, None).done.wait(60)
    (only,) = list(restore_merge(blocks)(page("new"), task_id))
    progress, text, task_box = only
    assert "Merge failed" in progress and "Cannot merge key 'model.diffusion_model.out.2.weight'" in text
    assert text.startswith("Error merging checkpoints: ") and task_box == "ended " + task_id
    (gone,) = list(restore_merge(blocks)(page("new"), "task(merge-unknown-01)"))
    assert "restore the last merge: its result was discarded" in gone[0] and gone[-1] == "ended task(merge-unknown-01)"


def test_interrupt_reaches_a_merge_started_before_the_reload(built):
    from .worker_jobs import submit_until_interrupted

    state, blocks, models = built
    busy, _ = submit_until_interrupted(state.worker, "txt2img")
    task_id = "task(merge-interrupt-1)"
    try:
        updates = merge_updates(blocks, "sd1.safetensors", "other.safetensors", task_id=task_id,
                                request=page("old-tab"))
        next(updates)
        updates.close()
        end_session(blocks, "old-tab")
        interrupt = handler(blocks, "modelmerger_interrupt", "click").fn
        interrupt(page("new-tab"), task_id)  # the new page's Interrupt sends the followed task's id
    finally:
        state.worker.interrupt_job(busy)
    (only,) = list(restore_merge(blocks)(page("new-tab"), task_id))
    assert "Interrupted before it started: nothing was written" in only[0]
    assert sorted(path.name for path in models.iterdir()) == ["other.safetensors", "sd1.safetensors"]
