"""hub_load_arguments: local paths as is, hub ids from a fake Hugging Face cache, one quick question to the hub."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from appflow.hub import hub_load_arguments
from mixkit.errors import ModelNotFoundError

COMMIT = "0123456789abcdef0123456789abcdef01234567"
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens, so connecting is refused at once


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    """A Hugging Face cache holding org/cached-model at `main`, in the layout huggingface_hub writes."""
    cache = tmp_path / "hub"
    repo = cache / "models--org--cached-model"
    (repo / "snapshots" / COMMIT).mkdir(parents=True)
    (repo / "snapshots" / COMMIT / "config.json").write_text('{"model_type": "sam"}')
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    # Online unless a test says otherwise (the test session sets HF_HUB_OFFLINE before huggingface_hub is imported).
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    return cache


@pytest.fixture
def unreachable_hub(monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", UNREACHABLE)


@pytest.fixture
def hub_saying_repo_not_found(monkeypatch):
    """A local server answering every request as the hub answers for a repo that does not exist."""
    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    yield
    server.shutdown()
    server.server_close()


def test_a_local_folder_is_passed_as_is_without_asking_the_hub(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "model").mkdir(parents=True)  # a local folder shaped like a hub id wins
    monkeypatch.setattr("huggingface_hub.HfApi.repo_info", lambda *a, **k: pytest.fail("asked the hub"))
    assert hub_load_arguments("org/model") == ("org/model", {})
    assert hub_load_arguments(str(tmp_path)) == (str(tmp_path), {})


def test_offline_and_cached_loads_from_the_cache_only(hub_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.HfApi.repo_info", lambda *a, **k: pytest.fail("asked the hub"))
    assert hub_load_arguments("org/cached-model") == (
        "org/cached-model", {"cache_dir": str(hub_cache), "local_files_only": True})
    assert hub_load_arguments("org/cached-model@main")[1]["revision"] == "main"


def test_offline_and_not_cached_is_refused_at_once(hub_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError) as error:
        hub_load_arguments("org/missing@v2")
    message = str(error.value)
    assert "'org/missing@v2'" in message and "(revision 'v2') is not in the Hugging Face cache" in message
    assert "HF_HUB_OFFLINE is set" in message
    assert "`hf download org/missing --revision v2`" in message and "or pass a local folder" in message


def test_unreachable_hub_and_not_cached_is_refused_after_one_request(hub_cache, unreachable_hub):
    start = time.monotonic()
    with pytest.raises(ModelNotFoundError) as error:
        hub_load_arguments("org/missing")
    assert time.monotonic() - start < 2
    message = str(error.value)
    assert "'org/missing'" in message and "not in the Hugging Face cache" in message
    assert "the hub is unreachable (ConnectError" in message and "Download it once with network access" in message


def test_unreachable_hub_and_cached_loads_from_the_cache_only(hub_cache, unreachable_hub):
    """Without local_files_only, transformers would retry the hub for ~23 s per file before using the cache."""
    assert hub_load_arguments("org/cached-model")[1]["local_files_only"] is True


def test_a_reachable_hub_leaves_downloading_to_from_pretrained(hub_cache, monkeypatch):
    monkeypatch.setattr("huggingface_hub.HfApi.repo_info", lambda self, repo_id, **kwargs: None)
    assert hub_load_arguments("org/new-model@dev") == (
        "org/new-model", {"revision": "dev", "cache_dir": str(hub_cache)})


def test_huggingface_hub_imported_offline_counts_as_offline(hub_cache, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(ModelNotFoundError, match="HF_HUB_OFFLINE is set"):
        hub_load_arguments("org/missing")


def test_a_repo_the_hub_does_not_know_is_named(hub_cache, hub_saying_repo_not_found):
    with pytest.raises(ModelNotFoundError, match="'org/typo' was not found or needs access.*check the spelling"):
        hub_load_arguments("org/typo")
