"""Which web pages may drive the server: the Host a request names and the Origin a browser sends with it.

Two attacks get past HTTP Basic-less local servers (the default: 127.0.0.1, no `--auth`):
- DNS rebinding: a page on attacker.example re-points its name at 127.0.0.1 and then talks to this server as its
  own origin; the browser sends `Host: attacker.example:7860`. A server bound to localhost answers only to loopback
  names (and to `--allowed-hosts`), as Jupyter and Vite's dev server do.
- Another page on this machine (a dev server on localhost:8080): Gradio's CORS layer grants any localhost origin
  credentials on every route, so such a page could POST JSON to the API. A request that changes something
  (any method but GET/HEAD) from a page of another origin is refused unless `--cors-allow-origins` names that
  origin (A1111's flag), and so is its CORS preflight.

Same-origin requests (the UI's own) and clients that send no Origin header (curl, Python, webuiapi) pass.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from webui.http_guards import _send_json, error_body

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD"})


def host_name(host_header: str) -> str:
    """The name part of a Host header value ("[::1]:7860" -> "::1", "Example.COM:80" -> "example.com")."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def origin_authority(origin: str) -> str | None:
    """"http://Example.com:8080" -> "example.com:8080"; None for "null" or anything that is not an http(s) origin."""
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    default_port = 443 if parts.scheme == "https" else 80
    try:
        port = parts.port or default_port
    except ValueError:
        return None
    name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{name}:{port}"


def has_port(host_header: str) -> bool:
    host = host_header.strip()
    return host.rsplit("]", 1)[-1].count(":") == 1 if host.startswith("[") else host.count(":") == 1


def request_authority(host_header: str, scheme: str) -> str:
    """The request's own "name:port" from its Host header, with the scheme's default port when none is given."""
    host = host_header.strip().lower()
    return host if has_port(host) else f"{host}:{443 if scheme == 'https' else 80}"


def normalise_origin(origin: str) -> str:
    """A `--cors-allow-origins` entry as it is compared; ValueError for one that is not scheme://host[:port]."""
    authority = origin_authority(origin)
    parts = urlsplit(origin.strip())
    if authority is None or parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"--cors-allow-origins entry {origin!r} is not an origin: write scheme://host[:port], "
                         "e.g. http://localhost:3000.")
    return f"{parts.scheme}://{authority}"


def browser_origin(origin: str) -> str:
    """A `--cors-allow-origins` entry as a browser writes it in its Origin header, which leaves out the scheme's default
    port ("https://app.example", not "https://app.example:443"): the form CORS' exact comparison needs."""
    normal = normalise_origin(origin)
    for default in ("http://", ":80"), ("https://", ":443"):
        if normal.startswith(default[0]) and normal.endswith(default[1]):
            return normal[:-len(default[1])]
    return normal


class OriginGuardMiddleware:
    """Refuse requests naming a foreign Host (server bound to localhost) and cross-origin changes from browsers."""

    def __init__(self, app, *, local_only: bool, allowed_hosts=(), cors_allow_origins=()) -> None:
        self.app = app
        self.local_only = local_only
        self.allowed_hosts = frozenset(name.strip().lower() for name in allowed_hosts)
        self.allowed_origins = frozenset(normalise_origin(origin) for origin in cors_allow_origins)

    def _host_allowed(self, host: str) -> bool:
        if not self.local_only or "*" in self.allowed_hosts or not host:  # browsers always send a Host
            return True
        name = host_name(host)
        return name in LOOPBACK_NAMES or name.endswith(".localhost") or name in self.allowed_hosts

    def _origin_allowed(self, origin: str, host: str, scheme: str) -> bool:
        authority = origin_authority(origin)
        if authority is None:  # "null": sandboxed frames, file:// pages
            return False
        parts = urlsplit(origin.strip())
        if f"{parts.scheme}://{authority}" in self.allowed_origins:
            return True
        if authority == request_authority(host, scheme):
            return True
        if host and not has_port(host) and host_name(authority) == host_name(host):
            # a Host without a port comes from a default port, which a TLS-terminating proxy makes 80 on this side
            # of it while the page's origin says 443: the same name is the same site
            return True
        # behind a reverse proxy the Host may be the upstream's while the page's origin is the public name
        return host_name(authority) in self.allowed_hosts and host_name(authority) not in LOOPBACK_NAMES

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {key: value.decode("latin-1") for key, value in scope.get("headers", [])}
        host = headers.get(b"host", "")
        if not self._host_allowed(host):
            await self._refuse(scope, send, 400, f"Invalid Host header {host!r}: this server listens on localhost and "
                                                 "answers to localhost / 127.0.0.1 / [::1] only (a DNS-rebinding "
                                                 "guard); behind a reverse proxy, start it with --allowed-hosts "
                                                 "<the proxy's host name>.")
            return
        origin = headers.get(b"origin")
        method = scope.get("method", "GET")
        preflight = method == "OPTIONS" and b"access-control-request-method" in headers
        changes = scope["type"] == "websocket" or method not in SAFE_METHODS
        if origin is not None and changes and not self._origin_allowed(origin, host, scope.get("scheme", "http")):
            what = "CORS preflight" if preflight else f"{method} request"
            await self._refuse(scope, send, 403, f"Cross-origin {what} from {origin!r} refused: only the server's "
                                                 "own pages may change things; to let that page call the API, start "
                                                 f"the server with --cors-allow-origins {origin}.")
            return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(scope, send, status: int, message: str) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await _send_json(send, status, error_body(status, message))
