"""The Train tab's "Create hypernetwork" and "Train hypernetwork" sub-tabs, driven through the built Blocks' own
handlers on the tiny SD 1.x model: the file created and trained in `--hypernetwork-dir`, the log, Interrupt of the
caller's own run, and refusals (the API's own) shown as errors that change nothing."""

from __future__ import annotations

import hashlib
import threading
import time
from types import SimpleNamespace

import gradio as gr
import pytest
import torch
from PIL import Image

from .ui_blocks import component, handler, page_props

SESSION = SimpleNamespace(session_hash="tab-train-hn")


@pytest.fixture(scope="module")
def built(tiny_sd1_dir, tmp_path_factory):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-train-hn")
    (root / "hypernetworks").mkdir()
    squares = root / "data" / "squares"
    squares.mkdir(parents=True)
    for name, colour in [("red", (255, 0, 0)), ("blue", (0, 0, 255))]:
        Image.new("RGB", (32, 32), colour).save(squares / f"{name} square.png")  # captioned by file name
    state = ServerState(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "out"),
                                     hypernetwork_dir=str(root / "hypernetworks"),
                                     training_data_dir=str(root / "data")))
    state.load_initial_model()
    try:
        yield state, build_ui(state), root
    finally:
        state.close()


def create(blocks, name: str, sizes=("32", "64"), layers="1, 2, 1", activation="linear", init="Normal",
           layer_norm=False, dropout=False, dropouts="0, 0, 0", overwrite=False):
    return handler(blocks, "train_hn_create", "click").fn(name, list(sizes), layers, activation, init, layer_norm,
                                                          dropout, dropouts, overwrite)


def form(name, steps, task_id: str = "", **changes) -> list:
    from webui.ui.hypernetwork_train_tab import HN_TRAIN_INPUTS

    values = {"hypernetwork_name": name, "data_root": "squares", "template_filename": "style_filewords.txt",
              "steps": steps, "learn_rate": "0.01", "batch_size": 2, "gradient_step": 1, "training_width": 32.0,
              "training_height": 32.0, "shuffle_tags": False, "tag_drop_out": 0.0, "clip_grad_mode": "norm",
              "clip_grad_value": "1.0", "save_hypernetwork_every": 1, "create_image_every": 0, "preview_prompt": "",
              "save_optimizer_state": False, **changes}
    return [values[key] for key in HN_TRAIN_INPUTS] + [task_id]


def train(blocks, *values, session=SESSION):
    return list(handler(blocks, "train_hn_start", "click").fn(session, *values))


def test_the_create_tab_offers_a1111s_modules_and_the_loaded_models_widths(built):
    _, blocks, _ = built
    sizes = component(blocks, "train_hn_sizes")
    assert [value for _, value in sizes.choices] == ["32", "64", "320", "640", "768", "1024", "1280"]
    assert sizes.value == ["768", "320", "640", "1280"]  # A1111's ticked ones
    assert component(blocks, "train_hn_learn_rate").value == "0.00001"


def test_create_and_train_write_the_file_and_show_the_log(built):
    _, blocks, root = built
    path = root / "hypernetworks" / "uihn.pt"
    message, dropdown = create(blocks, "uihn", activation="relu", init="KaimingNormal", layer_norm=True)
    assert message == f"Created hypernetwork {path}" and dropdown.value == "uihn" and ("uihn", "uihn") in dropdown.choices
    created = torch.load(path, weights_only=True)
    assert (created["step"], created["activation_func"], created["weight_initialization"], created["is_layer_norm"]) \
        == (0, "relu", "KaimingNormal", True)

    *_, (progress, log, task_box) = train(blocks, *form("uihn", 2))
    trained = torch.load(path, weights_only=True)
    assert trained["step"] == 2
    assert not torch.equal(trained[32][1]["linear.0.weight"], created[32][1]["linear.0.weight"])
    assert log.splitlines()[0].startswith(f"Done: {path} holds step 2 (2 step(s)")
    assert "Saved hypernetwork:" in log and "uihn-1.pt" in log  # A1111's name for the step-1 copy, in the run folder
    assert "Done" in progress and task_box.startswith("ended task(")
    assert sorted(p.name for p in (root / "hypernetworks").iterdir()) == ["uihn.pt"]


def test_refusals_are_shown_as_errors_and_change_nothing(built):
    _, blocks, root = built
    create(blocks, "keep")
    before = (root / "hypernetworks" / "keep.pt").read_bytes()
    with pytest.raises(gr.Error, match="overwrite"):
        create(blocks, "keep", sizes=("32",))
    with pytest.raises(gr.Error, match="use_dropout needs dropout_structure|must start and end with 0"):
        create(blocks, "drop", dropout=True, dropouts="0.5, 0.5, 0.5")
    with pytest.raises(gr.Error, match="enable_sizes"):
        create(blocks, "none", sizes=())
    with pytest.raises(gr.Error, match="Choose the hypernetwork to train under Hypernetwork"):
        train(blocks, *form(None, 2))
    with pytest.raises(gr.Error, match="unknown hypernetwork 'nothing-here'"):
        train(blocks, *form("nothing-here", 2))
    with pytest.raises(gr.Error, match=r"Save a copy of hypernetwork every N steps is empty; enter a whole number\."):
        train(blocks, *form("keep", 2, save_hypernetwork_every=None))
    with pytest.raises(gr.Error, match="outside the server's training data folder"):
        train(blocks, *form("keep", 2, data_root=str(root)))
    assert (root / "hypernetworks" / "keep.pt").read_bytes() == before
    assert not (root / "hypernetworks" / "drop.pt").exists() and not (root / "hypernetworks" / "none.pt").exists()


def test_interrupt_stops_the_callers_run_which_keeps_its_steps(built):
    state, blocks, root = built
    create(blocks, "halt")
    outputs = []
    run = threading.Thread(target=lambda: outputs.extend(train(blocks, *form("halt", 400, save_hypernetwork_every=0))))
    run.start()
    deadline = time.monotonic() + 120
    while state.worker.progress().step < 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    handler(blocks, "train_hn_interrupt", "click").fn(SimpleNamespace(session_hash="another-tab"), "")
    time.sleep(0.3)
    assert run.is_alive()  # another tab's Interrupt leaves it running
    handler(blocks, "train_hn_interrupt", "click").fn(SESSION, "")
    run.join(120)
    _, log, _ = outputs[-1]
    step = torch.load(root / "hypernetworks" / "halt.pt", weights_only=True)["step"]
    assert 1 <= step < 400
    assert log.startswith(f"Interrupted: {root / 'hypernetworks' / 'halt.pt'} holds step {step}")


def test_a_page_served_after_a_create_lists_the_new_hypernetwork(built):
    _, blocks, _ = built
    assert ("fresh", "fresh") not in component(blocks, "train_hn_hypernetwork").choices  # the list built at start
    create(blocks, "fresh")
    assert ("fresh", "fresh") in page_props(blocks, "train_hn_hypernetwork")["choices"]
    assert ("squares", "squares") in page_props(blocks, "train_hn_data_root")["choices"]


def test_a_reloaded_page_follows_the_run_interrupts_it_and_shows_its_log(built):
    from .test_ui_reattach import end_session, page, restore_handler

    state, blocks, root = built
    create(blocks, "reload")
    task_id = "task(hn-reload-00001)"
    old_page = SimpleNamespace(session_hash="old-hn-tab", request=SimpleNamespace(scope={}))
    first_page = []
    run = threading.Thread(target=lambda: first_page.extend(
        train(blocks, *form("reload", 400, task_id, save_hypernetwork_every=0), session=old_page)))
    run.start()
    deadline = time.monotonic() + 120
    while state.worker.progress().step < 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    end_session(blocks, "old-hn-tab")  # the reload: the run goes on
    updates = restore_handler(blocks, "train_hn")(page("new-hn-tab"), task_id)
    assert next(updates)[-1] == task_id
    handler(blocks, "train_hn_interrupt", "click").fn(page("new-hn-tab"), task_id)  # reaches it by its task id
    *_, (progress, log, task_box) = updates
    run.join(120)
    step = torch.load(root / "hypernetworks" / "reload.pt", weights_only=True)["step"]
    assert 1 <= step < 400
    assert log.startswith(f"Interrupted: {root / 'hypernetworks' / 'reload.pt'} holds step {step}")
    assert task_box.endswith(task_id) and task_box != task_id  # ended


# After the tests above, which look at the whole hypernetworks folder
def test_the_modules_follow_the_model_loaded_when_a_page_is_served(built, monkeypatch):
    import mixkit.training.hn_trainer as hn_trainer

    _, blocks, _ = built
    sizes = component(blocks, "train_hn_sizes")
    monkeypatch.setattr(hn_trainer, "attention_context_widths", lambda unet: [48, 96])  # another model loaded now
    served = [value for _, value in page_props(blocks, "train_hn_sizes")["choices"]]
    assert served == ["48", "96", "320", "640", "768", "1024", "1280"]
    assert sizes.preprocess(["48", "96"]) == ["48", "96"]  # the new widths pass Gradio's choice check
    assert sizes.preprocess(["32"]) == ["32"]  # and a page served before the switch still sends its own
    with pytest.raises(gr.Error, match="not in the list of choices"):
        sizes.preprocess(["33"])


def test_the_optimizer_state_checkbox_writes_the_optim_beside_the_file(built):
    state, blocks, root = built
    assert component(blocks, "train_hn_save_optimizer_state").value is False  # the server's option, A1111's off
    create(blocks, "moments")
    *_, (_, log, _) = train(blocks, *form("moments", 1, save_optimizer_state=True))
    assert log.startswith("Done:")
    path = root / "hypernetworks" / "moments.pt"
    saved = torch.load(path.with_name("moments.pt.optim"), weights_only=True)
    assert saved["hash"] == hashlib.sha256(path.read_bytes()).hexdigest()[:10]
    state.options.apply({"save_optimizer_state": True})
    try:
        assert page_props(blocks, "train_hn_save_optimizer_state")["value"] is True
    finally:
        state.options.apply({"save_optimizer_state": False})
