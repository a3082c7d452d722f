"""A1111's `/sdapi/v1/create/embedding` and `/sdapi/v1/train/embedding` on the tiny SD 1.x model: the file written,
its vectors, its step, its use in prompts, what a client may not do (paths outside the training data folder, unknown
or unsupported fields), and Interrupt."""

from __future__ import annotations

import json
import threading
import time

import pytest
import torch
from PIL import Image

from mixkit.prompts.embeddings import EmbeddingLibrary, load_textual_inversion
from mixkit.prompts.encoder import PromptEncoder

SMALL = {"steps": 2, "width": 64, "height": 64, "sampler_name": "Euler", "cfg_scale": 5.0, "seed": 11}
TRAIN = {"learn_rate": "0.05", "batch_size": 2, "training_width": 32, "training_height": 32,
         "template_filename": "subject_filewords.txt", "data_root": "squares"}


def write_squares(folder) -> None:
    folder.mkdir(parents=True)
    for name, colour in [("red", (255, 0, 0)), ("blue", (0, 0, 255)), ("green", (0, 200, 0))]:
        Image.new("RGB", (32, 32), colour).save(folder / f"{name}.png")
        (folder / f"{name}.txt").write_text(f"a {name} square, flat", encoding="utf-8")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("train-api")
    (root / "embeddings").mkdir()
    write_squares(root / "data" / "squares")
    (root / "elsewhere").mkdir()
    write_squares(root / "elsewhere" / "private")
    (root / "data" / "link").symlink_to(root / "elsewhere" / "private")
    return root


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, folders, serving):
    from webui.config import ServerConfig

    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(folders / "outputs"), ui=False,
                          embeddings_dir=str(folders / "embeddings"), training_data_dir=str(folders / "data"))
    with serving(config) as running:
        yield running


def conditioning(model, folder, prompt: str) -> torch.Tensor:
    library = EmbeddingLibrary(folder) if folder is not None else None
    return PromptEncoder(model.tokenizers, model.text_encoders, is_sdxl=False, embeddings=library).encode(prompt).hidden


def listed(client, name: str) -> dict:
    return client.get("/sdapi/v1/embeddings").json()["loaded"].get(name)


def test_create_embedding_writes_a1111s_pt_from_the_init_texts_token_vectors(client, folders, sd1_model):
    response = client.post("/sdapi/v1/create/embedding",
                           json={"name": "zqx", "num_vectors_per_token": 3, "init_text": "red square"})
    assert response.status_code == 200, response.text
    path = folders / "embeddings" / "zqx.pt"
    assert response.json() == {"info": f"create embedding filename: {path}"}
    data = torch.load(path, weights_only=True)
    assert (data["name"], data["step"], data["string_to_token"]) == ("zqx", 0, {"*": 265})
    # A1111's pick: vector i is token i * count // n of the init text (the tiny tokenizer spells it in 9 tokens:
    # 0, 3, 6), not kohya's i mod count (0, 1, 2)
    ids = sd1_model.tokenizers[0]("red square", add_special_tokens=False).input_ids
    table = sd1_model.text_encoders[0].get_input_embeddings().weight
    assert len(ids) == 9
    assert torch.equal(data["string_to_param"]["*"], torch.stack([table[ids[0]], table[ids[3]], table[ids[6]]]))
    assert listed(client, "zqx") == {"step": 0, "sd_checkpoint": None, "sd_checkpoint_name": data["sd_checkpoint_name"],
                                     "shape": 32, "vectors": 3}


def test_create_embedding_refuses_an_existing_name_unless_overwrite_old(client, folders):
    assert client.post("/sdapi/v1/create/embedding", json={"name": "keep", "init_text": "blue"}).status_code == 200
    path = folders / "embeddings" / "keep.pt"
    before = path.read_bytes()
    refused = client.post("/sdapi/v1/create/embedding", json={"name": "keep", "init_text": "green"})
    assert refused.status_code == 422 and "overwrite_old" in refused.json()["detail"]
    assert path.read_bytes() == before
    replaced = client.post("/sdapi/v1/create/embedding", json={"name": "keep", "init_text": "", "overwrite_old": True})
    assert replaced.status_code == 200
    assert torch.count_nonzero(torch.load(path, weights_only=True)["string_to_param"]["*"]) == 0  # empty text: zeros


@pytest.mark.parametrize("body, says", [
    ({"name": "../evil"}, "'/'"),
    ({"name": ".hidden"}, "dot"),
    ({"name": "ok", "num_vectors_per_token": 76}, "1..75"),
    ({"name": "ok", "overwrite": True}, "overwrite"),
])
def test_create_embedding_refuses_bad_input_and_writes_nothing(client, folders, body, says):
    response = client.post("/sdapi/v1/create/embedding", json=body)
    assert response.status_code == 422, response.text
    assert says in json.dumps(response.json()["detail"])
    assert not (folders / "evil.pt").exists() and not (folders / "embeddings" / "ok.pt").exists()
    assert not list((folders / "embeddings").glob(".*"))


def test_train_embedding_trains_the_file_which_prompts_then_use(client, server, folders, sd1_model):
    assert client.post("/sdapi/v1/create/embedding",
                       json={"name": "sks", "num_vectors_per_token": 2, "init_text": "red"}).status_code == 200
    path = folders / "embeddings" / "sks.pt"
    created = torch.load(path, weights_only=True)["string_to_param"]["*"].clone()
    created_cond = conditioning(sd1_model, folders / "embeddings", "a sks square")
    before_image = client.post("/sdapi/v1/txt2img", json={"prompt": "a blue square", **SMALL}).json()["images"][0]

    response = client.post("/sdapi/v1/train/embedding", json={**TRAIN, "embedding_name": "sks", "steps": 2})
    assert response.status_code == 200, response.text
    assert response.json() == {"info": f"train embedding complete: filename: {path} error: None"}
    trained = torch.load(path, weights_only=True)
    assert trained["step"] == 2 and trained["name"] == "sks"
    assert trained["string_to_param"]["*"].shape == created.shape
    assert not torch.allclose(trained["string_to_param"]["*"], created)
    assert listed(client, "sks")["step"] == 2
    # the trained vectors are what a prompt naming the embedding now reads; other prompts are untouched
    cond = conditioning(sd1_model, folders / "embeddings", "a sks square")
    assert not torch.allclose(cond, created_cond)
    assert not torch.allclose(cond, conditioning(sd1_model, None, "a sks square"))
    assert torch.equal(conditioning(sd1_model, folders / "embeddings", "a blue square"),
                       conditioning(sd1_model, None, "a blue square"))
    # the server's prompts use it at once, and the served model is unchanged by the training
    used = client.post("/sdapi/v1/txt2img", json={"prompt": "a sks square", **SMALL}).json()
    assert "TI hashes: \"sks:" in json.loads(used["info"])["infotexts"][0]
    assert client.post("/sdapi/v1/txt2img", json={"prompt": "a blue square", **SMALL}).json()["images"][0] == before_image
    # its log folder holds the run's own copy; the embeddings folder holds no leftovers
    assert sorted(p.name for p in (folders / "embeddings").iterdir() if p.name.startswith(("sks", "."))) == ["sks.pt"]
    assert list((folders / "outputs" / "textual_inversion").glob("*/sks/sks.pt"))

    again = client.post("/sdapi/v1/train/embedding", json={**TRAIN, "embedding_name": "sks", "steps": 2})
    assert again.status_code == 422 and "already trained to step 2" in again.json()["detail"]
    further = client.post("/sdapi/v1/train/embedding", json={**TRAIN, "embedding_name": "sks", "steps": 3})
    assert further.status_code == 200
    assert torch.load(path, weights_only=True)["step"] == 3  # A1111 counts steps across runs


def test_train_embedding_trains_at_a_training_width_other_than_its_height(client, folders):
    """A1111's training_width x training_height need not be a square: the run trains and saves at 32x48 (its
    preview, drawn at the training size, says so)."""
    assert client.post("/sdapi/v1/create/embedding", json={"name": "tall", "init_text": "red"}).status_code == 200
    path = folders / "embeddings" / "tall.pt"
    created = torch.load(path, weights_only=True)["string_to_param"]["*"].clone()
    response = client.post("/sdapi/v1/train/embedding", json={**TRAIN, "embedding_name": "tall", "steps": 2,
                                                              "training_height": 48, "create_image_every": 2})
    assert response.status_code == 200, response.text
    trained = torch.load(path, weights_only=True)
    assert trained["step"] == 2 and not torch.allclose(trained["string_to_param"]["*"], created)
    [run] = (folders / "outputs" / "textual_inversion").glob("*/tall")
    previews = list(run.rglob("*.png"))
    assert previews and all(Image.open(p).size == (32, 48) for p in previews)


@pytest.mark.parametrize("change, says", [
    ({"data_root": "../elsewhere/private"}, "outside the server's training data folder"),
    ({"data_root": "/etc"}, "outside the server's training data folder"),
    ({"data_root": "link"}, "outside the server's training data folder"),  # a symlink out of it
    ({"preview_sampler_index": 0}, "send preview_sampler_name"),
    ({"data_root": "missing"}, "is not a folder"),
    ({"embedding_name": "nobody"}, "unknown embedding 'nobody'"),
    ({"hypernetwork_name": "x"}, "unknown field(s) hypernetwork_name"),
    ({"latent_sampling_method": "once"}, "latent_sampling_method='once' is not supported"),
    ({"log_directory": "/tmp/anywhere"}, "log_directory"),
    ({"learn_rate": "0.005:100, 1e-3"}, "stepped schedules"),
    ({"template_filename": "nope.txt"}, "Unknown prompt template 'nope.txt'"),
    ({"training_width": 32, "training_height": 44}, "height must be a multiple of 8"),
    ({"steps": "ten"}, "steps must be int"),
    # the server's generation limits hold for what a run allocates
    ({"training_width": 8192, "training_height": 8192}, "width must be"),
    ({"batch_size": 10_000}, "batch_size must be in [1, 16]"),
    ({"gradient_step": 0}, "gradient_step must be in [1, 100]"),
    ({"create_image_every": 1, "preview_from_txt2img": True, "preview_width": 4096, "preview_height": 4096},
     "over the budget"),
    ({"create_image_every": 1, "preview_from_txt2img": True, "preview_steps": 5000}, "preview_steps must be in"),
    ({"create_image_every": 1, "preview_from_txt2img": True, "preview_prompt": "a cat --w 4096 --h 4096"},
     "cannot hold ' --'"),
])
def test_train_embedding_refuses_what_it_cannot_do_before_queueing(client, change, says):
    assert client.post("/sdapi/v1/create/embedding", json={"name": "refused", "overwrite_old": True}).status_code == 200
    response = client.post("/sdapi/v1/train/embedding", json={**TRAIN, "embedding_name": "refused", "steps": 2, **change})
    assert response.status_code == 422, response.text
    assert says in response.json()["detail"]
    assert listed(client, "refused")["step"] == 0


def test_interrupt_ends_the_training_with_a_complete_file_of_the_steps_done(client, folders):
    assert client.post("/sdapi/v1/create/embedding", json={"name": "stopme", "init_text": "red"}).status_code == 200
    answers = []
    thread = threading.Thread(target=lambda: answers.append(client.post(
        "/sdapi/v1/train/embedding", json={**TRAIN, "embedding_name": "stopme", "steps": 500})))
    thread.start()
    deadline = time.monotonic() + 120
    while True:
        progress = client.get("/sdapi/v1/progress").json()
        if progress["current_task"] == "train embedding stopme" and progress["state"]["sampling_step"] >= 1:
            break
        assert time.monotonic() < deadline, progress
        time.sleep(0.05)
    assert progress["state"]["sampling_steps"] == 500
    assert client.post("/sdapi/v1/interrupt").json() == {"interrupted": True}
    thread.join(120)
    assert answers and answers[0].status_code == 200, answers
    data = torch.load(folders / "embeddings" / "stopme.pt", weights_only=True)
    assert 1 <= data["step"] < 500
    assert load_textual_inversion(folders / "embeddings" / "stopme.pt").num_vectors == 1
    assert not list((folders / "embeddings").glob(".*"))


def test_a_training_whose_client_left_trains_to_the_end(client, server, folders):
    # The embedding file is the run's result: A1111 trains on when the client goes away, and so does this server
    # (a generation without saving is dropped instead: test_api_bad_input.py)
    import socket

    steps = 60
    assert client.post("/sdapi/v1/create/embedding", json={"name": "orphan", "init_text": "red"}).status_code == 200
    body = json.dumps({**TRAIN, "embedding_name": "orphan", "steps": steps, "save_embedding_every": 0}).encode()
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as raw:
        raw.sendall(b"POST /sdapi/v1/train/embedding HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
                    + f"\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        deadline = time.monotonic() + 120
        while client.get("/sdapi/v1/progress").json()["state"]["sampling_step"] < 1:
            assert time.monotonic() < deadline, "the training never started"
            time.sleep(0.02)
    seen = []
    deadline = time.monotonic() + 180
    while (progress := client.get("/sdapi/v1/progress").json())["current_task"] == "train embedding orphan":
        assert time.monotonic() < deadline, progress
        seen.append(progress["state"]["sampling_step"])
        time.sleep(0.05)
    assert seen and max(seen) > 1  # shown running after the socket closed
    assert torch.load(folders / "embeddings" / "orphan.pt", weights_only=True)["step"] == steps


def test_training_is_refused_without_a_training_data_folder(tiny_sd1_dir, tmp_path, serving):
    import httpx

    from webui.config import ServerConfig

    (tmp_path / "embeddings").mkdir()
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path / "outputs"), ui=False,
                          embeddings_dir=str(tmp_path / "embeddings"))
    with serving(config) as running, httpx.Client(base_url=running.url, timeout=60) as http:
        assert http.post("/sdapi/v1/create/embedding", json={"name": "a"}).status_code == 200
        response = http.post("/sdapi/v1/train/embedding", json={**TRAIN, "embedding_name": "a", "steps": 1})
        assert response.status_code == 422 and "--training-data-dir" in response.json()["detail"]


def test_create_image_every_draws_previews_into_the_run_folder(client, folders):
    assert client.post("/sdapi/v1/create/embedding", json={"name": "shown", "init_text": "red"}).status_code == 200
    preview = {"create_image_every": 1, "preview_from_txt2img": True, "preview_prompt": "a shown square",
               "preview_negative_prompt": "blurry", "preview_steps": 2, "preview_sampler_name": "DDIM",
               "preview_cfg_scale": 3.0, "preview_seed": 5, "preview_width": 64, "preview_height": 64}
    refused = client.post("/sdapi/v1/train/embedding", json={**TRAIN, "embedding_name": "shown", "steps": 2, **preview,
                                                             "preview_sampler_name": "Euler a"})
    assert refused.status_code == 422 and "DDIM" in refused.json()["detail"]
    response = client.post("/sdapi/v1/train/embedding", json={**TRAIN, "embedding_name": "shown", "steps": 2, **preview})
    assert response.status_code == 200, response.text
    images = sorted((folders / "outputs" / "textual_inversion").glob("*/shown/**/*.png"))
    assert len(images) == 2 and Image.open(images[0]).size == (64, 64)


def test_training_an_unloaded_checkpoint_says_to_reload_it(client):
    assert client.post("/sdapi/v1/create/embedding", json={"name": "later", "overwrite_old": True}).status_code == 200
    assert client.post("/sdapi/v1/unload-checkpoint").status_code == 200
    try:
        response = client.post("/sdapi/v1/train/embedding", json={**TRAIN, "embedding_name": "later", "steps": 2})
        assert response.status_code == 422, response.text
        assert "is unloaded; load it again (POST /sdapi/v1/reload-checkpoint" in response.json()["detail"]
    finally:
        assert client.post("/sdapi/v1/reload-checkpoint").status_code == 200
    assert listed(client, "later")["step"] == 0


def test_a_training_queued_behind_an_unload_reloads_the_checkpoint_and_trains(client, server):
    """As a generation does: the unload ran after the request was checked, so the run loads the model back."""
    from .worker_jobs import submit_until_interrupted

    assert client.post("/sdapi/v1/create/embedding", json={"name": "behind", "init_text": "red"}).status_code == 200
    state = server.state
    blocker, _ = submit_until_interrupted(state.worker)
    state.submit_unload()
    answers = []
    thread = threading.Thread(target=lambda: answers.append(client.post(
        "/sdapi/v1/train/embedding", json={**TRAIN, "embedding_name": "behind", "steps": 1})))
    thread.start()
    deadline = time.monotonic() + 60
    while state.worker.queued < 2:  # the unload, then the training
        assert time.monotonic() < deadline and thread.is_alive(), answers
        time.sleep(0.02)
    state.worker.cancel(blocker)
    thread.join(120)
    assert answers and answers[0].status_code == 200, answers[0].text
    assert state.holder.loaded and listed(client, "behind")["step"] == 1


def test_the_embedding_a_queued_run_will_train_cannot_be_trained_again_or_overwritten(client, server):
    """The first run holds the file from its queueing to its end: a second one, checked at step 0 too, would continue
    the first's file yet count its steps from 0, and a Create over it would be replaced when the run ends."""
    from .worker_jobs import submit_until_interrupted

    assert client.post("/sdapi/v1/create/embedding", json={"name": "twice", "init_text": "red"}).status_code == 200
    state = server.state
    blocker, _ = submit_until_interrupted(state.worker)
    answers = []
    first = threading.Thread(target=lambda: answers.append(client.post(
        "/sdapi/v1/train/embedding", json={**TRAIN, "embedding_name": "twice", "steps": 2})))
    first.start()
    deadline = time.monotonic() + 60
    while state.worker.queued < 1:
        assert time.monotonic() < deadline and first.is_alive(), answers
        time.sleep(0.02)
    try:
        second = client.post("/sdapi/v1/train/embedding", json={**TRAIN, "embedding_name": "twice", "steps": 2})
        assert second.status_code == 409, second.text
        assert "cannot train embedding 'twice': twice.pt is being trained by job" in second.json()["detail"]
        assert "which waits in the queue and replaces the file when it ends" in second.json()["detail"]
        replaced = client.post("/sdapi/v1/create/embedding", json={"name": "twice", "init_text": "blue",
                                                                   "overwrite_old": True})
        assert replaced.status_code == 409 and "cannot create embedding 'twice'" in replaced.json()["detail"]
    finally:
        state.worker.cancel(blocker)
    first.join(120)
    assert answers and answers[0].status_code == 200, answers
    assert listed(client, "twice")["step"] == 2
    again = client.post("/sdapi/v1/create/embedding", json={"name": "twice", "init_text": "blue",
                                                            "overwrite_old": True})
    assert again.status_code == 200, again.text  # the run is over: the file is free
