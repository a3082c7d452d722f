"""resolve_model_source: local paths as is, hub ids through a fake offline Hugging Face cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from mixkit.errors import ModelNotFoundError
from mixkit.io.sources import parse_hub_id, resolve_model_source

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    """A Hugging Face cache holding org/tiny-model at `main`, in the layout huggingface_hub writes."""
    cache = tmp_path / "hub"
    repo = cache / "models--org--tiny-model"
    snapshot = repo / "snapshots" / COMMIT
    (snapshot / "unet").mkdir(parents=True)
    (snapshot / "model_index.json").write_text('{"_class_name": "StableDiffusionPipeline"}')
    (snapshot / "unet" / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


@pytest.mark.parametrize(
    "text, expected",
    [
        ("org/name", ("org/name", None)),
        ("stabilityai/sdxl-turbo@main", ("stabilityai/sdxl-turbo", "main")),
        ("org/name@refs/pr/3", ("org/name", "refs/pr/3")),
        ("org/name.v1_2", ("org/name.v1_2", None)),
        ("./models/sd15", None),
        ("/abs/model", None),
        ("a/b/c", None),
        ("org/..", None),
        ("C:/models", None),
        ("model.safetensors", None),
    ],
)
def test_parse_hub_id(text, expected):
    assert parse_hub_id(text) == expected


def test_existing_file_and_folder_are_returned_as_is(tmp_path):
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"x")
    assert resolve_model_source(weights) == weights
    assert resolve_model_source(str(tmp_path)) == tmp_path


def test_local_folder_shadows_a_hub_id(tmp_path, monkeypatch, hub_cache):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "tiny-model").mkdir(parents=True)
    assert resolve_model_source("org/tiny-model") == Path("org/tiny-model")


def test_missing_local_path_says_it_does_not_exist(tmp_path):
    with pytest.raises(ModelNotFoundError, match=r"missing-folder.*does not exist"):
        resolve_model_source(str(tmp_path / "missing-folder"))


def test_offline_hub_id_resolves_to_cached_snapshot(hub_cache):
    folder = resolve_model_source("org/tiny-model")
    assert folder == hub_cache / "models--org--tiny-model" / "snapshots" / COMMIT
    assert (folder / "unet" / "config.json").is_file()


def test_offline_hub_id_with_commit_revision(hub_cache):
    folder = resolve_model_source(f"org/tiny-model@{COMMIT}")
    assert folder.name == COMMIT


def test_offline_not_cached_is_a_clear_error(hub_cache):
    with pytest.raises(ModelNotFoundError) as info:
        resolve_model_source("org/not-downloaded")
    message = str(info.value)
    assert "'org/not-downloaded'" in message
    assert "not in the Hugging Face cache and HF_HUB_OFFLINE is set" in message
    assert "hf download org/not-downloaded" in message and "local folder" in message


def test_offline_unknown_revision_is_not_cached(hub_cache):
    with pytest.raises(ModelNotFoundError, match=r"revision 'v9'.*not in the Hugging Face cache"):
        resolve_model_source("org/tiny-model@v9")


def test_unreachable_hub_is_a_clear_error(monkeypatch, hub_cache):
    from huggingface_hub.errors import LocalEntryNotFoundError

    def unreachable(*args, **kwargs):
        raise LocalEntryNotFoundError("cannot reach huggingface.co and not cached")

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr("huggingface_hub.snapshot_download", unreachable)
    with pytest.raises(ModelNotFoundError, match="the hub is unreachable"):
        resolve_model_source("org/other")


def test_network_error_is_wrapped(monkeypatch, hub_cache):
    def broken(*args, **kwargs):
        raise ConnectionError("connection reset by peer")

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr("huggingface_hub.snapshot_download", broken)
    with pytest.raises(ModelNotFoundError, match=r"could not be fetched \(ConnectionError: connection reset"):
        resolve_model_source("org/other")


def test_bad_argument_types():
    with pytest.raises(TypeError, match="path or a Hugging Face id"):
        resolve_model_source(42)
    with pytest.raises(ValueError, match="empty"):
        resolve_model_source("  ")


def test_shipped_names_in_trainer_settings_become_their_folders(tmp_path, monkeypatch):
    from dataclasses import dataclass

    from mixkit.io.sources import with_shipped_folders
    from mixkit.tiny.shipped import shipped_model_path

    @dataclass
    class Settings:
        model: str | None
        other: str | None

    monkeypatch.chdir(tmp_path)
    changed = with_shipped_folders(Settings("mixkit-tiny-blip2", None), ("model", "other"))
    assert changed == Settings(str(shipped_model_path("mixkit-tiny-blip2")), None)
    (tmp_path / "mixkit-tiny-blip2").mkdir()  # a local folder of that name wins, as everywhere
    assert with_shipped_folders(Settings("mixkit-tiny-blip2", "x/y"), ("model", "other")) == Settings("mixkit-tiny-blip2", "x/y")
