"""A1111's `/sdapi/v1/create/hypernetwork` and `/sdapi/v1/train/hypernetwork` on the tiny SD 1.x model: the file
written into `--hypernetwork-dir` and listed at once, its step counted across runs, A1111's stepped learning rate,
what a client may not do (unknown or unsupported fields, paths outside the training data folder), and Interrupt."""

from __future__ import annotations

import hashlib
import threading
import time

import pytest
import torch
from PIL import Image

SMALL = {"steps": 2, "width": 64, "height": 64, "sampler_name": "Euler", "cfg_scale": 5.0, "seed": 11}
TRAIN = {"learn_rate": "0.01", "batch_size": 2, "training_width": 32, "training_height": 32,
         "template_filename": "style_filewords.txt", "data_root": "squares"}
TINY_WIDTHS = [32, 64]  # the tiny model's attention context widths


def write_squares(folder) -> None:
    folder.mkdir(parents=True)
    for name, colour in [("red", (255, 0, 0)), ("blue", (0, 0, 255)), ("green", (0, 200, 0))]:
        Image.new("RGB", (32, 32), colour).save(folder / f"{name}.png")
        (folder / f"{name}.txt").write_text(f"a {name} square, flat", encoding="utf-8")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("train-hn-api")
    (root / "hypernetworks").mkdir()
    write_squares(root / "data" / "squares")
    write_squares(root / "elsewhere" / "private")
    return root


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, folders, serving):
    from webui.config import ServerConfig

    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(folders / "outputs"), ui=False,
                          hypernetwork_dir=str(folders / "hypernetworks"), training_data_dir=str(folders / "data"))
    with serving(config) as running:
        yield running


def create(client, name: str, **changes):
    return client.post("/sdapi/v1/create/hypernetwork", json={"name": name, "enable_sizes": TINY_WIDTHS, **changes})


def stored(folders, name: str) -> dict:
    return torch.load(folders / "hypernetworks" / f"{name}.pt", weights_only=True)


def test_create_writes_a1111s_file_and_lists_it_at_once(client, folders):
    response = create(client, "style", layer_structure="1, 1.5, 1", activation_func="relu",
                      weight_init="XavierNormal", add_layer_norm=True, use_dropout=True, dropout_structure="0, 0.1, 0")
    assert response.status_code == 200, response.text
    path = folders / "hypernetworks" / "style.pt"
    assert response.json() == {"info": f"create hypernetwork filename: {path}"}
    data = stored(folders, "style")
    assert (data["step"], data["name"], data["layer_structure"], data["activation_func"]) == \
        (0, "style", [1.0, 1.5, 1.0], "relu")
    assert (data["weight_initialization"], data["is_layer_norm"], data["use_dropout"], data["dropout_structure"]) == \
        ("XavierNormal", True, True, [0.0, 0.1, 0.0])
    assert sorted(key for key in data if isinstance(key, int)) == TINY_WIDTHS
    assert {"name": "style", "path": str(path)} in client.get("/sdapi/v1/hypernetworks").json()


def test_create_takes_a1111s_none_as_its_defaults(client, folders):
    response = create(client, "plain", layer_structure=None, activation_func=None, weight_init=None,
                      dropout_structure=None)
    assert response.status_code == 200, response.text
    data = stored(folders, "plain")
    assert (data["layer_structure"], data["activation_func"], data["weight_initialization"]) == \
        ([1.0, 2.0, 1.0], "linear", "Normal")


def test_create_keeps_an_existing_file_unless_overwrite_old(client, folders):
    assert create(client, "kept", enable_sizes=[32]).status_code == 200
    before = (folders / "hypernetworks" / "kept.pt").read_bytes()
    refused = create(client, "kept", enable_sizes=[64])
    assert refused.status_code == 422 and "overwrite" in refused.json()["detail"]
    assert (folders / "hypernetworks" / "kept.pt").read_bytes() == before
    assert create(client, "kept", enable_sizes=[64], overwrite_old=True).status_code == 200
    assert sorted(key for key in stored(folders, "kept") if isinstance(key, int)) == [64]


@pytest.mark.parametrize("changes, says", [
    ({"activation_func": "nope"}, "activation_func 'nope'"),
    ({"weight_init": "Zeros"}, "weight_init 'Zeros'"),
    ({"layer_structure": "2, 1"}, "must start and end with 1"),
    ({"dropout_structure": "0, 0.5, 0"}, "use_dropout is false"),
    ({"enable_sizes": []}, "enable_sizes"),
    ({"enable_sizes": [True]}, "enable_sizes"),
    ({"name": "../up"}, "without folders"),
    ({"name": "my:style"}, "characters A1111 removes"),
    ({"name": ""}, "name"),
    ({"overwrite": True}, "overwrite"),  # misspelt overwrite_old: refused, not ignored
])
def test_create_refuses_bad_input_and_writes_nothing(client, folders, changes, says):
    before = sorted(path.name for path in (folders / "hypernetworks").rglob("*"))
    response = client.post("/sdapi/v1/create/hypernetwork",
                           json={"name": "bad", "enable_sizes": TINY_WIDTHS, **changes})
    assert response.status_code == 422, response.text
    assert says in str(response.json()["detail"])
    assert sorted(path.name for path in (folders / "hypernetworks").rglob("*")) == before


def test_train_continues_the_file_which_prompts_then_use(client, folders):
    assert create(client, "sks").status_code == 200
    untrained = stored(folders, "sks")
    plain = client.post("/sdapi/v1/txt2img", json={"prompt": "a blue square", **SMALL}).json()["images"][0]
    response = client.post("/sdapi/v1/train/hypernetwork", json={**TRAIN, "hypernetwork_name": "sks", "steps": 2})
    assert response.status_code == 200, response.text
    path = folders / "hypernetworks" / "sks.pt"
    assert response.json() == {"info": f"train embedding complete: filename: {path} error: None"}  # A1111's words
    trained = stored(folders, "sks")
    assert trained["step"] == 2
    assert not torch.equal(trained[32][0]["linear.0.weight"], untrained[32][0]["linear.0.weight"])
    # the run folder keeps its own copy, A1111's log layout; the hypernetworks folder only the one file
    assert len(list((folders / "outputs" / "textual_inversion").rglob("sks.pt"))) == 1
    assert sorted(path.name for path in (folders / "hypernetworks").glob("sks*")) == ["sks.pt"]
    tagged = client.post("/sdapi/v1/txt2img", json={"prompt": "a blue square <hypernet:sks:1>", **SMALL}).json()
    assert tagged["images"][0] != plain
    # the loaded model came back unchanged
    assert client.post("/sdapi/v1/txt2img", json={"prompt": "a blue square", **SMALL}).json()["images"][0] == plain

    again = client.post("/sdapi/v1/train/hypernetwork", json={**TRAIN, "hypernetwork_name": "sks", "steps": 2})
    assert again.status_code == 422 and "already trained to step 2" in again.json()["detail"]
    further = client.post("/sdapi/v1/train/hypernetwork", json={**TRAIN, "hypernetwork_name": "sks", "steps": 3})
    assert further.status_code == 200, further.text
    assert stored(folders, "sks")["step"] == 3
    # the second run of the day wrote a run folder of its own, not over the first one's file
    assert len(list((folders / "outputs" / "textual_inversion").rglob("sks.pt"))) == 2


def test_a_stepped_learn_rate_ends_the_run_at_its_last_step(client, folders):
    # A1111's "rate:step, ..." counts the hypernetwork's own steps and stops training where it ends
    assert create(client, "stepped").status_code == 200
    response = client.post("/sdapi/v1/train/hypernetwork",
                           json={**TRAIN, "hypernetwork_name": "stepped", "steps": 10, "learn_rate": "0.01:1, 0.005:2"})
    assert response.status_code == 200, response.text
    assert stored(folders, "stepped")["step"] == 2
    ended = client.post("/sdapi/v1/train/hypernetwork",
                        json={**TRAIN, "hypernetwork_name": "stepped", "steps": 10, "learn_rate": "0.01:1, 0.005:2"})
    assert ended.status_code == 422 and "ends at step 2" in ended.json()["detail"]


def test_save_hypernetwork_every_writes_a1111s_step_copies_into_the_run_folder(client, folders):
    assert create(client, "copies").status_code == 200
    response = client.post("/sdapi/v1/train/hypernetwork",
                           json={**TRAIN, "hypernetwork_name": "copies", "steps": 2, "save_hypernetwork_every": 1})
    assert response.status_code == 200, response.text
    copies = sorted(path.name for path in (folders / "outputs" / "textual_inversion").rglob("copies-*.pt"))
    assert copies == ["copies-1.pt"]  # the last step is the final file itself
    assert not list((folders / "hypernetworks").glob("copies-*"))


@pytest.mark.parametrize("change, says", [
    ({"save_embedding_every": 5}, "unknown field(s) save_embedding_every"),
    ({"hypernetwork_name": "missing"}, "unknown hypernetwork 'missing'"),
    ({"hypernetwork_name": "narrow"}, "none of the loaded model's attention widths [32, 64]"),
    ({"data_root": "../elsewhere/private"}, "outside the server's training data folder"),
    ({"varsize": True}, "varsize=True is not supported"),
    ({"use_weight": True}, "use_weight=True is not supported"),
    ({"latent_sampling_method": "once"}, "latent_sampling_method='once' is not supported"),
    ({"clip_grad_mode": "value"}, "clip_grad_mode='value' is not supported"),
    ({"log_directory": "/tmp/x"}, "log_directory='/tmp/x' is not supported"),
    ({"learn_rate": "fast"}, "learn_rate 'fast' is not a number"),
    ({"learn_rate": "0.01:x"}, "learn_rate '0.01:x': '0.01:x' is not 'rate' or 'rate:step'"),
    ({"template_filename": "nope.txt"}, "nope.txt"),
    ({"steps": "2"}, "steps must be int"),
    ({"batch_size": 0}, "batch_size must be in"),
])
def test_train_refuses_what_it_cannot_do_before_queueing(client, folders, change, says):
    assert create(client, "refused", overwrite_old=True).status_code == 200
    assert create(client, "narrow", enable_sizes=[768], overwrite_old=True).status_code == 200
    response = client.post("/sdapi/v1/train/hypernetwork",
                           json={**TRAIN, "hypernetwork_name": "refused", "steps": 2, **change})
    assert response.status_code == 422, response.text
    assert says in response.json()["detail"]
    assert stored(folders, "refused")["step"] == 0


def test_interrupt_ends_the_training_with_a_complete_file_of_the_steps_done(client, folders):
    assert create(client, "stopme").status_code == 200
    answers = []
    thread = threading.Thread(target=lambda: answers.append(client.post(
        "/sdapi/v1/train/hypernetwork", json={**TRAIN, "hypernetwork_name": "stopme", "steps": 500})))
    thread.start()
    deadline = time.monotonic() + 120
    while True:
        progress = client.get("/sdapi/v1/progress").json()
        if progress["current_task"] == "train hypernetwork stopme" and progress["state"]["sampling_step"] >= 1:
            break
        assert time.monotonic() < deadline, progress
        time.sleep(0.05)
    assert progress["state"]["sampling_steps"] == 500
    assert client.post("/sdapi/v1/interrupt").json() == {"interrupted": True}
    thread.join(120)
    assert answers and answers[0].status_code == 200, answers
    assert 1 <= stored(folders, "stopme")["step"] < 500
    assert not list((folders / "hypernetworks").glob(".*"))  # no temporary file left behind


def test_training_is_refused_without_a_hypernetwork_folder(tiny_sd1_dir, tmp_path, serving):
    import httpx

    from webui.config import ServerConfig

    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path / "outputs"), ui=False)
    with serving(config) as running, httpx.Client(base_url=running.url, timeout=60) as http:
        created = http.post("/sdapi/v1/create/hypernetwork", json={"name": "x", "enable_sizes": TINY_WIDTHS})
        trained = http.post("/sdapi/v1/train/hypernetwork", json={**TRAIN, "hypernetwork_name": "x", "steps": 2})
    for response in (created, trained):
        assert response.status_code == 422 and "--hypernetwork-dir" in response.json()["detail"]


def test_create_image_every_draws_previews_into_the_run_folder(client, folders):
    assert create(client, "shown").status_code == 200
    preview = {"create_image_every": 1, "preview_from_txt2img": True, "preview_prompt": "a red square",
               "preview_width": 64, "preview_height": 64, "preview_steps": 2, "preview_seed": 3}
    refused = client.post("/sdapi/v1/train/hypernetwork", json={**TRAIN, "hypernetwork_name": "shown", "steps": 2,
                                                                **preview, "preview_sampler_name": "Euler a"})
    assert refused.status_code == 422 and "DDIM" in refused.json()["detail"]
    response = client.post("/sdapi/v1/train/hypernetwork",
                           json={**TRAIN, "hypernetwork_name": "shown", "steps": 2, **preview})
    assert response.status_code == 200, response.text
    images = sorted((folders / "outputs" / "textual_inversion").glob("*/shown/**/*.png"))
    assert len(images) == 2 and Image.open(images[0]).size == (64, 64)


def test_training_an_unloaded_checkpoint_says_to_reload_it(client, folders):
    assert create(client, "later").status_code == 200
    assert client.post("/sdapi/v1/unload-checkpoint").status_code == 200
    try:
        response = client.post("/sdapi/v1/train/hypernetwork", json={**TRAIN, "hypernetwork_name": "later", "steps": 2})
        assert response.status_code == 422, response.text
        assert "is unloaded; load it again (POST /sdapi/v1/reload-checkpoint" in response.json()["detail"]
    finally:
        assert client.post("/sdapi/v1/reload-checkpoint").status_code == 200
    assert stored(folders, "later")["step"] == 0


def _start_long_training(client, name: str, answers: list) -> threading.Thread:
    """A 500-step training of `name`, sent from a thread; returns once it has taken its first step."""
    thread = threading.Thread(target=lambda: answers.append(client.post(
        "/sdapi/v1/train/hypernetwork", json={**TRAIN, "hypernetwork_name": name, "steps": 500})))
    thread.start()
    deadline = time.monotonic() + 120
    while True:
        progress = client.get("/sdapi/v1/progress").json()
        if progress["current_task"] == f"train hypernetwork {name}" and progress["state"]["sampling_step"] >= 1:
            return thread
        assert time.monotonic() < deadline, progress
        time.sleep(0.05)


def test_the_file_a_training_runs_on_cannot_be_overwritten_or_trained_twice(client, folders):
    assert create(client, "busy").status_code == 200
    answers = []
    thread = _start_long_training(client, "busy", answers)
    try:
        before = (folders / "hypernetworks" / "busy.pt").read_bytes()
        replaced = create(client, "busy", overwrite_old=True, enable_sizes=[32])
        assert replaced.status_code == 409, replaced.text
        detail = replaced.json()["detail"]
        assert "cannot create hypernetwork 'busy': busy.pt is being trained by job" in detail
        assert "which runs and replaces the file when it ends; wait for it to finish or interrupt it" in detail
        assert (folders / "hypernetworks" / "busy.pt").read_bytes() == before
        twice = client.post("/sdapi/v1/train/hypernetwork", json={**TRAIN, "hypernetwork_name": "busy", "steps": 3})
        assert twice.status_code == 409 and "cannot train hypernetwork 'busy'" in twice.json()["detail"]
        assert create(client, "other", enable_sizes=[32]).status_code == 200  # other files are free
    finally:
        client.post("/sdapi/v1/interrupt")
        thread.join(120)
    assert answers and answers[0].status_code == 200, answers
    trained_to = stored(folders, "busy")["step"]
    assert 1 <= trained_to < 500 and stored(folders, "busy")[64]  # the run's result, not a Create's 32-only file
    # once the job is over the file is free again
    assert create(client, "busy", overwrite_old=True, enable_sizes=[32]).status_code == 200


def test_save_optimizer_state_writes_the_optim_beside_the_file(client, folders):
    hypernetworks = folders / "hypernetworks"
    assert create(client, "moments").status_code == 200
    assert client.get("/sdapi/v1/options").json()["save_optimizer_state"] is False  # A1111's default
    response = client.post("/sdapi/v1/train/hypernetwork", json={**TRAIN, "hypernetwork_name": "moments",
                                                                  "steps": 1})
    assert response.status_code == 200, response.text
    assert not (hypernetworks / "moments.pt.optim").exists()
    assert client.post("/sdapi/v1/options", json={"save_optimizer_state": True}).status_code == 200
    try:
        response = client.post("/sdapi/v1/train/hypernetwork", json={**TRAIN, "hypernetwork_name": "moments",
                                                                      "steps": 2})
        assert response.status_code == 200, response.text
    finally:
        client.post("/sdapi/v1/options", json={"save_optimizer_state": False})
    saved = torch.load(hypernetworks / "moments.pt.optim", weights_only=True)
    digest = hashlib.sha256((hypernetworks / "moments.pt").read_bytes()).hexdigest()[:10]
    assert (saved["optimizer_name"], saved["hash"]) == ("AdamW", digest)
    assert {int(state["step"]) for state in saved["optimizer_state_dict"]["state"].values()} == {1}  # this run's
    # the request's own field wins over the option; the next run continues the moments (steps 1 + 1)
    response = client.post("/sdapi/v1/train/hypernetwork", json={**TRAIN, "hypernetwork_name": "moments",
                                                                  "steps": 3, "save_optimizer_state": True})
    assert response.status_code == 200, response.text
    saved = torch.load(hypernetworks / "moments.pt.optim", weights_only=True)
    assert {int(state["step"]) for state in saved["optimizer_state_dict"]["state"].values()} == {2}
    bad = client.post("/sdapi/v1/train/hypernetwork", json={**TRAIN, "hypernetwork_name": "moments", "steps": 4,
                                                             "save_optimizer_state": "yes"})
    assert bad.status_code == 422 and "save_optimizer_state must be bool, got 'yes'" in bad.json()["detail"]
