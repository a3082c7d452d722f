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
