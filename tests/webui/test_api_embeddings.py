"""`GET /sdapi/v1/embeddings` and the embeddings browser rows, over a folder of tiny embedding files."""

from __future__ import annotations

import pytest
import torch
from fastapi import FastAPI
from fastapi.testclient import TestClient
from safetensors.torch import save_file

from webui.config import ServerConfig
from webui.server_state import ServerState


@pytest.fixture()
def embeddings_dir(tmp_path):
    folder = tmp_path / "embeddings"
    (folder / "styles").mkdir(parents=True)
    save_file({"emb_params": torch.randn(2, 32)}, str(folder / "cube-style.safetensors"))
    save_file({"clip_l": torch.randn(3, 8), "clip_g": torch.randn(3, 16)}, str(folder / "styles" / "xl-thing.safetensors"))
    save_file({"emb_params": torch.full((1, 32), float("nan"))}, str(folder / "broken.safetensors"))
    return folder


def make_state(tmp_path, embeddings_dir) -> ServerState:
    return ServerState(ServerConfig(models=["unused"], output_dir=str(tmp_path / "out"), ui=False,
                                    embeddings_dir=None if embeddings_dir is None else str(embeddings_dir)))


def get_embeddings(state: ServerState) -> dict:
    from webui.api_embeddings import build_embeddings_router

    app = FastAPI()
    app.include_router(build_embeddings_router(state))
    with TestClient(app) as client:
        response = client.get("/sdapi/v1/embeddings")
    assert response.status_code == 200, response.text
    return response.json()


def test_embeddings_endpoint_has_a1111_shape(tmp_path, embeddings_dir):
    state = make_state(tmp_path, embeddings_dir)
    try:
        body = get_embeddings(state)
    finally:
        state.close()
    assert body == {"skipped": {}, "loaded": {
        "cube-style": {"step": None, "sd_checkpoint": None, "sd_checkpoint_name": None, "shape": 32, "vectors": 2},
        # SDXL: A1111 reports clip_l width + clip_g width.
        "xl-thing": {"step": None, "sd_checkpoint": None, "sd_checkpoint_name": None, "shape": 24, "vectors": 3},
    }}


def test_embeddings_endpoint_without_a_folder_is_empty(tmp_path):
    state = make_state(tmp_path, None)
    try:
        assert state.embedding_library is None
        assert get_embeddings(state) == {"loaded": {}, "skipped": {}}
    finally:
        state.close()


def test_refresh_picks_up_new_files_and_browser_rows_follow(tmp_path, embeddings_dir):
    from webui.ui.embeddings_tab import embedding_rows
    from webui.ui.lora_tab import add_tag

    state = make_state(tmp_path, embeddings_dir)
    try:
        assert embedding_rows(state) == [["cube-style", "2 vectors", "dim 32"], ["xl-thing", "3 vectors", "dim 24"]]
        save_file({"emb_params": torch.randn(4, 32)}, str(embeddings_dir / "added.safetensors"))
        # The list reads the folder as prompts do (A1111 rescans before each generation): no refresh call needed.
        assert get_embeddings(state)["loaded"]["added"]["vectors"] == 4
        assert embedding_rows(state)[0] == ["added", "4 vectors", "dim 32"]
        (embeddings_dir / "added.safetensors").unlink()
        app = FastAPI()
        from webui.api_embeddings import build_embeddings_router

        app.include_router(build_embeddings_router(state))
        with TestClient(app) as client:
            assert client.post("/sdapi/v1/refresh-embeddings").json() == {}  # A1111's explicit refresh route
        assert embedding_rows(state)[0] == ["cube-style", "2 vectors", "dim 32"]
    finally:
        state.close()
    # The browser inserts the bare name (A1111's trigger), once.
    assert add_tag("a cat", "cube-style") == "a cat cube-style"
    assert add_tag("a cat cube-style", "cube-style") == "a cat cube-style"
    assert add_tag("a cat cube-style2", "cube-style") == "a cat cube-style2 cube-style"  # another name, not this one


def test_missing_embeddings_folder_is_named_at_startup(tmp_path):
    from mixkit.errors import ModelNotFoundError

    with pytest.raises(ModelNotFoundError, match="nope"):
        make_state(tmp_path, tmp_path / "nope")


@pytest.mark.parametrize("model_fixture, loaded, skipped", [
    ("tiny_sd1_dir", ["cube-style"], ["xl-thing"]),
    ("tiny_sdxl_dir", [], ["cube-style", "xl-thing"]),
])
def test_embeddings_that_do_not_fit_the_loaded_model_are_listed_as_skipped(request, embeddings_dir, model_fixture,
                                                                           loaded, skipped):
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.prompts import EmbeddingLibrary
    from webui.embedding_list import embeddings_response, encoder_widths

    model = load_diffusion_model(request.getfixturevalue(model_fixture))
    body = embeddings_response(EmbeddingLibrary(embeddings_dir), model)
    assert (sorted(body["loaded"]), sorted(body["skipped"])) == (loaded, skipped), encoder_widths(model)


def test_a1111_training_metadata_and_unreadable_files(tmp_path):
    import os

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'PWNED'}",))

    folder = tmp_path / "emb"
    folder.mkdir()
    torch.save({"string_to_token": {"*": 265}, "string_to_param": {"*": torch.randn(3, 32)}, "name": "foo",
                "step": 1000, "sd_checkpoint": "abc123", "sd_checkpoint_name": "v1-5"}, folder / "foo.pt")
    torch.save({"string_to_param": {"*": torch.randn(2, 32)}, "x": Payload()}, folder / "evil.pt")
    body = get_embeddings(make_state(tmp_path, folder))
    assert body == {"skipped": {}, "loaded": {
        "foo": {"step": 1000, "sd_checkpoint": "abc123", "sd_checkpoint_name": "v1-5", "shape": 32, "vectors": 3}}}
    assert not (tmp_path / "PWNED").exists()
