"""ASGI middleware in front of both the API and the UI: HTTP Basic auth and a request-size cap.

Both run before any route, so no endpoint (ours or Gradio's) can forget them. The size cap
answers 413 from the Content-Length header without reading the body, and counts the bytes of
bodies without one, so a client cannot stream an unbounded upload into memory or a temp file.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets


def parse_credentials(text: str) -> tuple[str, str]:
    """`user:pass` -> (user, pass); the password may contain ':'."""
    if not isinstance(text, str) or ":" not in text:
        raise ValueError(f"--auth must be user:password, got {text!r}.")
    user, password = text.split(":", 1)
    if not user or not password:
        raise ValueError("--auth needs a non-empty user and password, as user:password.")
    return user, password


async def _send_json(send, status: int, body: dict, headers: list | None = None) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": data})


class BasicAuthMiddleware:
    """Require `Authorization: Basic` with the configured user and password on every HTTP request."""

    def __init__(self, app, credentials: tuple[str, str]) -> None:
        self.app = app
        self._expected = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()

    def _authorized(self, scope) -> bool:
        for key, value in scope.get("headers", []):
            if key == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                if scheme.lower() != "basic":
                    return False
                try:
                    base64.b64decode(token, validate=True)
                except (binascii.Error, ValueError):
                    return False
                return secrets.compare_digest(token.strip(), self._expected)
        return False

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket") and not self._authorized(scope):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await _send_json(send, 401, {"detail": "Not authenticated: send HTTP Basic credentials (the server's --auth)."},
                             [(b"www-authenticate", b'Basic realm="mixkit"')])
            return
        await self.app(scope, receive, send)


class BodySizeLimitMiddleware:
    """Answer 413 to requests whose body exceeds `max_bytes`, whether declared or streamed."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _message(self) -> dict:
        return {"detail": f"Request body too large: the limit is {self.max_bytes:,} bytes; send a smaller image."}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await _send_json(send, 400, {"detail": "Invalid Content-Length header."})
                    return
                if declared > self.max_bytes:
                    await _send_json(send, 413, self._message(), [(b"connection", b"close")])
                    return
        received = 0
        too_large = False
        started = False

        async def counting_receive():
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    too_large = True
                    # The app sees the client go away, so it stops reading and cleans up its upload.
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message):
            nonlocal started
            if too_large:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not too_large:
                raise
        if too_large and not started:
            await _send_json(send, 413, self._message(), [(b"connection", b"close")])
