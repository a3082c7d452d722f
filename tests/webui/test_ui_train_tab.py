"""The Train tab, driven through the built Blocks' own handlers on the tiny SD 1.x model: Create embedding, Train with
progress and log, Interrupt of the caller's own run, and refusals shown as errors."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import gradio as gr
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from .ui_blocks import component, handler

SESSION = SimpleNamespace(session_hash="tab-train")


@pytest.fixture(scope="module")
def built(tiny_sd1_dir, tmp_path_factory):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-train")
    (root / "embeddings").mkdir()
    squares = root / "data" / "people" / "squares"
    squares.mkdir(parents=True)
    for name, colour in [("red", (255, 0, 0)), ("blue", (0, 0, 255))]:
        Image.new("RGB", (32, 32), colour).save(squares / f"1-{name} square.png")  # captioned by file name
    state = ServerState(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "out"),
                                     embeddings_dir=str(root / "embeddings"), training_data_dir=str(root / "data")))
    state.load_initial_model()
    try:
        yield state, build_ui(state), root
    finally:
        state.close()


def form(name: str, steps: int, task_id: str = "", **changes) -> list:
    """The Train button's inputs: the form, then the task id the page makes ("": the server makes one)."""
    from webui.ui.train_tab import TRAIN_INPUTS

    values = {"embedding_name": name, "data_root": "people/squares", "template_filename": "subject_filewords.txt",
              "steps": steps, "learn_rate": "0.05", "batch_size": 2, "gradient_step": 1, "training_width": 32,
              "training_height": 32,
              "shuffle_tags": False, "tag_drop_out": 0.0, "clip_grad_mode": "norm", "clip_grad_value": "1.0",
              "save_embedding_every": 1, "create_image_every": 0, "preview_prompt": "", **changes}
    return [values[key] for key in TRAIN_INPUTS] + [task_id]


def create(blocks, name: str, text: str = "red", vectors: int = 1, overwrite: bool = False):
    return handler(blocks, "train_create", "click").fn(name, text, vectors, overwrite)


def test_create_and_train_write_the_embedding_and_show_the_log(built):
    state, blocks, root = built
    message, dropdown = create(blocks, "uitok", vectors=2)
    path = root / "embeddings" / "uitok.pt"
    assert message == f"Created embedding {path}" and dropdown.value == "uitok" and ("uitok", "uitok") in dropdown.choices
    created = torch.load(path, weights_only=True)["string_to_param"]["*"].clone()
    assert ("people/squares", "people/squares") in component(blocks, "train_data_root").choices

    *_, (progress, log, task_box) = list(handler(blocks, "train_start", "click").fn(SESSION, *form("uitok", 2)))
    trained = torch.load(path, weights_only=True)
    assert trained["step"] == 2 and not torch.allclose(trained["string_to_param"]["*"], created)
    assert log.splitlines()[0].startswith(f"Done: {path} holds step 2 (2 step(s)")
    assert "Saved embedding:" in log and "uitok-step00000001.pt" in log  # save every 1 step, in the run folder
    assert "Done" in progress and task_box.startswith("ended task(")  # the page forgets the id it kept
    assert not list((root / "embeddings").glob("uitok-*"))


def test_the_tab_has_a1111s_width_and_height_and_sends_both(built):
    from webui.ui.train_tab import TRAIN_INPUTS, train_fields

    _, blocks, _ = built
    assert [(component(blocks, f"train_training_{side}").label, component(blocks, f"train_training_{side}").value)
            for side in ("width", "height")] == [("Width", 512), ("Height", 512)]

    values = dict(zip(TRAIN_INPUTS, form("tall", 2, training_width=32.0, training_height=48.0)))
    fields = train_fields(values)
    assert (fields["training_width"], fields["training_height"]) == (32, 48)  # sliders give floats
    assert "resolution" not in fields


def test_refusals_are_shown_as_errors_and_change_nothing(built):
    state, blocks, root = built
    with pytest.raises(gr.Error, match="holds '/'"):
        create(blocks, "../escape")
    create(blocks, "twice")
    with pytest.raises(gr.Error, match="overwrite_old"):
        create(blocks, "twice")
    with pytest.raises(gr.Error, match="outside the server's training data folder"):
        list(handler(blocks, "train_start", "click").fn(SESSION, *form("twice", 2, data_root=str(root))))
    # No embedding chosen: said in the tab's own terms, not the API's ("POST /sdapi/v1/create/embedding")
    with pytest.raises(gr.Error, match="Choose the embedding to train under Embedding"):
        list(handler(blocks, "train_start", "click").fn(SESSION, *form(None, 2)))
    with pytest.raises(gr.Error, match="unknown embedding 'nothing-here'"):
        list(handler(blocks, "train_start", "click").fn(SESSION, *form("nothing-here", 2)))
    # a number box left empty: named by its label, not Python's "int() argument must be ... not 'NoneType'"
    with pytest.raises(gr.Error, match=r"Max steps is empty; enter a whole number\."):
        list(handler(blocks, "train_start", "click").fn(SESSION, *form("twice", None)))
    with pytest.raises(gr.Error, match=r"Gradient accumulation steps is empty; enter a whole number\."):
        list(handler(blocks, "train_start", "click").fn(SESSION, *form("twice", 2, gradient_step=None)))
    assert torch.load(root / "embeddings" / "twice.pt", weights_only=True)["step"] == 0


def test_interrupt_stops_the_callers_run_which_keeps_its_steps(built):
    state, blocks, root = built
    create(blocks, "halt")
    outputs = []
    run = threading.Thread(target=lambda: outputs.extend(
        handler(blocks, "train_start", "click").fn(SESSION, *form("halt", 400, save_embedding_every=0))))
    run.start()
    deadline = time.monotonic() + 120
    while state.worker.progress().step < 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    handler(blocks, "train_interrupt", "click").fn(SimpleNamespace(session_hash="another-tab"), "")
    time.sleep(0.3)
    assert run.is_alive()  # another tab's Interrupt leaves it running
    handler(blocks, "train_interrupt", "click").fn(SESSION, "")
    run.join(120)
    progress, log, _ = outputs[-1]
    step = torch.load(root / "embeddings" / "halt.pt", weights_only=True)["step"]
    assert 1 <= step < 400
    assert log.startswith(f"Interrupted: {root / 'embeddings' / 'halt.pt'} holds step {step}")


def test_a_page_served_after_a_create_lists_the_new_embedding_and_dataset_folders(built):
    # Browser hunt: after Create embedding and a reload, the Train dropdown and the Textual Inversion rows still
    # showed the server-start lists until Refresh was found; A1111 builds its lists into each page it serves.
    from .ui_blocks import page_props

    state, blocks, root = built
    assert "served" not in [value for _, value in page_props(blocks, "train_embedding")["choices"]]
    create(blocks, "served")
    (root / "data" / "people" / "circles").mkdir()
    try:
        assert ("served", "served") in page_props(blocks, "train_embedding")["choices"]
        assert ("people/circles", "people/circles") in page_props(blocks, "train_data_root")["choices"]
        served_rows = [row for row in page_props(blocks, "embedding_cards")["samples"] if row[0] == "served"]
        assert [row[:2] for row in served_rows] == [["served", "1 vectors"]]  # the Textual Inversion tab's row
        # A page holding the new name (not among the build-time choices) can send it: the API's check decides.
        assert component(blocks, "train_embedding").preprocess("served") == "served"
    finally:
        (root / "data" / "people" / "circles").rmdir()


def test_the_embeddings_table_names_the_files_made_for_another_model(built):
    from .ui_blocks import page_props

    state, blocks, root = built
    narrow = root / "embeddings" / "narrow.safetensors"
    save_file({"emb_params": torch.zeros(1, 7)}, str(narrow))  # no text encoder of the tiny model is 7 wide
    try:
        props = page_props(blocks, "embedding_cards")
        assert "narrow" not in [row[0] for row in props["samples"]]
        assert props["label"].endswith("; made for another model than the loaded one, so not listed: narrow")
        assert "narrow" not in [value for _, value in page_props(blocks, "train_embedding")["choices"]]
    finally:
        narrow.unlink()
    assert page_props(blocks, "embedding_cards")["label"] == \
        "Textual inversion embeddings (click to add to the chosen prompt, again to remove it)"
