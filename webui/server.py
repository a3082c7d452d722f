"""One uvicorn server holding the HTTP API and the Gradio UI, with auth and size limits in front.

`build_app(state)` returns the ASGI app (tests serve it on a free port); `serve(config)` loads
the first model and runs it until interrupted.
"""

from __future__ import annotations

import logging
import threading

from fastapi import FastAPI

from webui.api import build_api, install_error_handlers
from webui.api_checkpoint_memory import build_checkpoint_memory_router
from webui.api_embeddings import build_embeddings_router
from webui.api_hypernetwork_training import build_hypernetwork_training_router
from webui.api_loras import build_lora_router
from webui.api_options import build_options_router
from webui.api_tasks import build_tasks_router
from webui.config import ServerConfig, check_server_config
from webui.error_paths import server_path_redactor
from webui.http_guards import BasicAuthMiddleware, BodySizeLimitMiddleware
from webui.origin_guard import OriginGuardMiddleware, browser_origin
from webui.server_state import ServerState

logger = logging.getLogger(__name__)


def build_app(state: ServerState):
    """The ASGI app: API routes, the UI at `/` (when enabled), auth and the body-size cap around both."""
    app = FastAPI(title="mixkit", docs_url="/docs", redoc_url=None)
    # before CORS: a middleware added later wraps it, so the JSON 500 gets the CORS headers a cross-origin page needs
    # to read it
    install_error_handlers(app, server_path_redactor(state))
    if state.config.cors_allow_origins:
        from fastapi.middleware.cors import CORSMiddleware

        # A1111's --cors-allow-origins; with a CORS middleware on the parent app Gradio's own (which trusts any
        # localhost origin) stands aside
        app.add_middleware(CORSMiddleware, allow_origins=[browser_origin(o) for o in state.config.cors_allow_origins],
                           allow_methods=["*"], allow_headers=["*"], allow_credentials=True)
    app.include_router(build_api(state))
    app.include_router(build_embeddings_router(state))
    app.include_router(build_hypernetwork_training_router(state))
    app.include_router(build_options_router(state))
    app.include_router(build_checkpoint_memory_router(state))
    app.include_router(build_lora_router(state))
    app.include_router(build_tasks_router(state))  # A1111's /internal/progress
    if state.config.ui:
        import gradio as gr

        from webui.ui.app import build_ui

        from webui.ui.app import CSS

        # Only the output folder is served besides Gradio's own upload/cache folders.
        blocks = build_ui(state)
        app = gr.mount_gradio_app(app, blocks, path="/", max_file_size=state.config.request_limits.max_image_bytes,
                                  allowed_paths=[str(state.output_dir)], show_error=True, ssr_mode=False, css=CSS)
        # Gradio checks the file paths a client sends to an Image/File input (only its own uploads are taken) only
        # once `has_launched` is set, which `launch()` does and `mount_gradio_app` does not: unset, any client could
        # name any image on the server's disk ({"path": "/home/..."}) and have PNG Info read it or Extras serve it.
        blocks.has_launched = True
        from webui.ui.page_values import ServePageValues

        app = ServePageValues(app, blocks, blocks.mixkit_page_values)  # the Settings defaults of now, in the page
    guarded = BodySizeLimitMiddleware(app, state.config.request_limits.max_body_bytes)
    if state.config.auth is not None:
        guarded = BasicAuthMiddleware(guarded, state.config.auth)
    return OriginGuardMiddleware(guarded, local_only=not state.config.listen, allowed_hosts=state.config.allowed_hosts,
                                 cors_allow_origins=state.config.cors_allow_origins)


class RunningServer:
    """A uvicorn server on a background thread (for tests and for embedding); `stop()` ends it."""

    def __init__(self, state: ServerState, port: int = 0) -> None:
        import socket

        import uvicorn

        self.state = state
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((state.config.host, port))
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(build_app(state), log_level="warning", timeout_graceful_shutdown=2, ws="none")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.state.config.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> "RunningServer":
        import time

        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"The web server did not start within {timeout} s.")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self.state.close()
        self._socket.close()


def serve(config: ServerConfig) -> None:
    """Validate the config, load the first model, then serve until Ctrl+C."""
    import uvicorn

    check_server_config(config)
    state = ServerState(config)
    state.load_initial_model()
    if config.auth is None and config.listen:
        logger.warning("Serving on all interfaces WITHOUT authentication (--insecure-no-auth).")
    app = build_app(state)
    print(f"mixkit web UI: http://{config.host}:{config.port}/  (API: /sdapi/v1/, docs: /docs)", flush=True)
    try:
        uvicorn.run(app, host=config.host, port=config.port, log_level="warning")
    finally:
        state.close()
