"""Fixtures shared by the web UI tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx
import pytest


@contextlib.contextmanager
def _serving(state_or_config, *, load_model: bool = True) -> Iterator:
    """Start `RunningServer` on a `ServerState` (or a `ServerConfig`, wrapped in one).

    `load_model=False` keeps the model unloaded, for tests that must show a route never needs it.
    """
    from webui.config import ServerConfig
    from webui.server import RunningServer
    from webui.server_state import ServerState

    state = ServerState(state_or_config) if isinstance(state_or_config, ServerConfig) else state_or_config
    if load_model:
        state.load_initial_model()
    running = RunningServer(state).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="session")
def deepbooru_folder(tmp_path_factory):
    """A torch_deepdanbooru folder with the crafted tagger of `tests.webui.crafted_deepbooru` (answers known to the
    character), shared by the interrogation tests."""
    from .crafted_deepbooru import write_crafted_deepbooru

    return write_crafted_deepbooru(tmp_path_factory.mktemp("torch_deepdanbooru"))


@pytest.fixture(scope="session")
def serving():
    """`with serving(config_or_state) as running:` a real API server on a free port, stopped even when a test fails."""
    return _serving


@pytest.fixture()
def client(server):
    """An HTTP client on the requesting module's own `server` fixture."""
    with httpx.Client(base_url=server.url, timeout=120) as http:
        yield http


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    """A plain API server on the tiny SD1 model, one per test module; a module that needs other options defines its own."""
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("api")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False)) as running:
        yield running


@pytest.fixture(scope="session")
def single_file_checkpoints(tiny_sd1_dir, tmp_path_factory):
    """A models folder of A1111-style single files: `sd1.safetensors` (the tiny SD1 model), `other.safetensors` (the
    same architecture, other weights: other images) and `broken.safetensors` (not a checkpoint: its load fails)."""
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint
    from mixkit.testing.tiny_models import build_tiny_sd1

    folder = tmp_path_factory.mktemp("single-files")
    save_ldm_checkpoint(load_diffusion_model(tiny_sd1_dir), folder / "sd1.safetensors")
    other = build_tiny_sd1(tmp_path_factory.mktemp("tiny-sd1-other"), seed=1)
    save_ldm_checkpoint(load_diffusion_model(other), folder / "other.safetensors")
    (folder / "broken.safetensors").write_bytes(b"not a safetensors file")
    return folder


@pytest.fixture(scope="session")
def single_file_serving(tiny_sd1_dir, serving):
    """`with single_file_serving(models_dir, root) as running:` an API server on the single files of `models_dir`
    (loaded with the tiny SD1 folder's configs: tiny files match no published architecture), starting on
    `sd1.safetensors`, writing below `root`."""

    def start(models_dir, root):
        from webui.config import ServerConfig
        from webui.model_switch import ModelHolder
        from webui.server_state import ServerState

        state = ServerState(ServerConfig(models_dir=str(models_dir), output_dir=str(root / "outputs"), ui=False,
                                         settings_file=str(root / "settings.json")))
        state.holder = ModelHolder(state.catalog, pipeline_kwargs={"config_dir": str(tiny_sd1_dir),
                                                                   "limits": state.config.limits})
        state.options.apply({"sd_model_checkpoint": "sd1.safetensors"})  # not the catalog's first (broken)
        return serving(state)

    return start
