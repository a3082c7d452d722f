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

AUTH_USER_KEY = "mixkit.user"  # the ASGI scope key BasicAuthMiddleware stores the authenticated user name under


def parse_credentials(text: str) -> tuple[tuple[str, str], ...]:
    """`user:pass` or A1111's `u1:p1,u2:p2` -> ((user, pass), ...); a password may contain ':' but not ','.

    A1111's `--api-auth` / `--gradio-auth` split the list on ',' and each entry on ':' (a password with ':'
    crashes A1111's start; here everything after the first ':' is the password). Blanks around entries are
    dropped as A1111's --gradio-auth does; a user named twice is refused rather than silently overridden.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"--auth must be user:password (or user1:pass1,user2:pass2 as A1111's --api-auth), got {text!r}.")
    pairs: dict[str, str] = {}
    for entry in (part.strip() for part in text.split(",")):
        user, colon, password = entry.partition(":")
        if not colon or not user or not password:
            raise ValueError(f"--auth entry {entry!r} is not user:password; pass user:password, or several as "
                             "user1:pass1,user2:pass2 (a password cannot contain ',').")
        if user in pairs:
            raise ValueError(f"--auth names user {user!r} twice; give each user once.")
        pairs[user] = password
    return tuple(pairs.items())


def credential_pairs(credentials) -> tuple[tuple[str, str], ...]:
    """((user, password), ...) from one (user, password) pair or a sequence of them (ServerConfig.auth)."""
    if isinstance(credentials, tuple) and len(credentials) == 2 and all(isinstance(x, str) for x in credentials):
        credentials = (credentials,)
    pairs = tuple(tuple(pair) for pair in credentials)
    if not pairs or not all(len(pair) == 2 and all(isinstance(x, str) and x for x in pair) for pair in pairs):
        raise ValueError(f"auth must be a (user, password) pair or a sequence of them, got {credentials!r}.")
    return pairs


def error_body(status: int, detail, error: str = "HTTPException") -> dict:
    """A1111's API error shape: `{error, detail, body, errors}` (modules/api/api.py `handle_exception`).

    `errors` is `str(e)` there, which for an HTTPException reads "<status>: <detail>"; `body` is the
    exception's `body` attribute, which A1111's own errors never set.
    """
    return {"error": error, "detail": detail, "body": "", "errors": f"{status}: {detail}"}


def basic_auth_token(header: str) -> str | None:
    """The credentials token of an `Authorization: Basic <token>` header, or None for another scheme.

    The scheme is case-insensitive and may be followed by several spaces or tabs (RFC 7235: `1*SP`).
    """
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    return token.strip(" \t")


async def _send_json(send, status: int, body: dict, headers: list | None = None) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": data})


class BasicAuthMiddleware:
    """Require `Authorization: Basic` with one of the configured users' credentials on every HTTP request."""

    def __init__(self, app, credentials) -> None:
        self.app = app
        pairs = credential_pairs(credentials)
        self._users = [user for user, _ in pairs]
        self._expected = [base64.b64encode(f"{user}:{password}".encode()).decode() for user, password in pairs]

    def _user(self, scope) -> str | None:
        """The user whose credentials the request carries, or None."""
        for key, value in scope.get("headers", []):
            if key == b"authorization":
                token = basic_auth_token(value.decode("latin-1"))
                if token is None:
                    return None
                try:
                    base64.b64decode(token, validate=True)
                except (binascii.Error, ValueError):
                    return None
                # every entry compared, so the answer time does not tell which user exists
                matches = [secrets.compare_digest(token, expected) for expected in self._expected]
                return self._users[matches.index(True)] if any(matches) else None
        return None

    async def __call__(self, scope, receive, send):
        user = self._user(scope) if scope["type"] in ("http", "websocket") else None
        if user is not None:
            # who sent it, for the API's /progress, /interrupt and /skip, which act on the caller's own job only
            scope[AUTH_USER_KEY] = user
        if scope["type"] in ("http", "websocket") and user is None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await _send_json(send, 401, error_body(401, "Not authenticated: send HTTP Basic credentials (the server's --auth)."),
                             [(b"www-authenticate", b'Basic realm="mixkit"')])
            return
        await self.app(scope, receive, send)


class BodySizeLimitMiddleware:
    """Answer 413 to requests whose body exceeds `max_bytes`, whether declared or streamed."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _message(self) -> dict:
        return error_body(413, f"Request body too large: the limit is {self.max_bytes:,} bytes; send a smaller image.")

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await _send_json(send, 400, error_body(400, "Invalid Content-Length header: send the body's size in bytes."))
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
