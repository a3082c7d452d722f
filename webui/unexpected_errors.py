"""A route's unexpected exception answered as A1111's JSON 500 with the connection kept open.

Starlette hands an exception no handler claims to `ServerErrorMiddleware`, which sends the `Exception` handler's
answer and then re-raises it for the server log; uvicorn, seeing an exception leave the app, closes the connection.
A keep-alive client (`requests.Session`, `webuiapi`, httpx) then finds its pooled connection dead on the next request.
A1111's API avoids that with an `http` middleware that catches the exception and returns `handle_exception`'s
`{error, detail, body, errors}` (modules/api/api.py `api_middleware`); this is that middleware, as plain ASGI so it
also covers streamed answers and needs no `BaseHTTPMiddleware` task group.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from webui.error_paths import server_error_response

logger = logging.getLogger(__name__)


class UnexpectedErrorMiddleware:
    """Answers an exception that left a route as a JSON 500 (its message redacted by `redact`) and logs its traceback.

    Once a response has started, a 500 can no longer be sent: the exception is re-raised and the server closes the
    connection, which is then the only way to tell the client its answer is cut short."""

    def __init__(self, app, redact: Callable[[Any], Any]) -> None:
        self.app = app
        self.redact = redact

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as error:
            if started:
                raise
            what = f"{scope.get('method', '')} {scope.get('path', '')}"
            logger.exception("%s failed", what)
            await server_error_response(error, what, self.redact)(scope, receive, send)
