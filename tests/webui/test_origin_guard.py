"""Host and Origin checks in front of the server (webui.origin_guard): DNS rebinding and other local pages."""

from __future__ import annotations

import httpx
import pytest

from webui.origin_guard import host_name, normalise_origin, origin_authority, request_authority


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("origin")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False,
                              settings_file=str(root / "settings.json"), allowed_hosts=("sd.example.org",),
                              cors_allow_origins=("http://localhost:3000",))) as running:
        yield running


def post_options(server, headers: dict, steps: int = 3) -> httpx.Response:
    return httpx.post(f"http://127.0.0.1:{server.port}/sdapi/v1/options", json={"default_steps": steps},
                      headers=headers, timeout=30)


def steps(server) -> int:
    return httpx.get(f"http://127.0.0.1:{server.port}/sdapi/v1/options", timeout=30).json()["default_steps"]


@pytest.mark.parametrize("header, name", [("127.0.0.1:7860", "127.0.0.1"), ("[::1]:7860", "::1"), ("[::1]", "::1"),
                                          ("Example.COM:80", "example.com"), ("localhost", "localhost")])
def test_host_name(header, name):
    assert host_name(header) == name


def test_origin_and_request_authorities_compare_with_default_ports():
    assert origin_authority("http://Localhost") == "localhost:80" == request_authority("localhost", "http")
    assert origin_authority("https://a.org") == "a.org:443" == request_authority("a.org", "https")
    assert origin_authority("http://[::1]:7860") == "[::1]:7860" == request_authority("[::1]:7860", "http")
    assert origin_authority("null") is None and origin_authority("file:///x.html") is None


@pytest.mark.parametrize("bad", ["localhost:3000", "http://a.org/path", "ftp://a.org", "null", "http://"])
def test_cors_origins_must_be_origins(bad):
    with pytest.raises(ValueError, match="scheme://host"):
        normalise_origin(bad)


@pytest.mark.parametrize("field, value, words", [
    ("cors_allow_origins", ("localhost:3000",), ["--cors-allow-origins", "scheme://host"]),
    ("allowed_hosts", ("http://a.org",), ["--allowed-hosts", "no scheme"]),
    ("allowed_hosts", ("a.org:80",), ["--allowed-hosts"]),
])
def test_server_config_refuses_bad_entries(field, value, words):
    from webui.config import ServerConfig, check_server_config

    with pytest.raises(ValueError) as error:
        check_server_config(ServerConfig(**{field: value}))
    assert all(word in str(error.value) for word in words)


def test_rebinding_host_is_refused_and_changes_nothing(server):
    before = steps(server)
    response = post_options(server, {"Host": f"attacker.example:{server.port}"}, steps=before + 1)
    assert response.status_code == 400 and "--allowed-hosts" in response.json()["detail"]
    assert httpx.get(f"http://127.0.0.1:{server.port}/sdapi/v1/options", headers={"Host": "attacker.example"},
                     timeout=30).status_code == 400  # reads too: a rebound page must not read results either
    assert steps(server) == before


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "sd.example.org", "foo.localhost"])
def test_loopback_and_allowed_hosts_are_served(server, host):
    assert httpx.get(f"http://127.0.0.1:{server.port}/sdapi/v1/options", headers={"Host": host},
                     timeout=30).status_code == 200


@pytest.mark.parametrize("origin", ["http://localhost:8080", "http://evil.example", "null"])
def test_cross_origin_changes_and_preflights_are_refused(server, origin):
    before = steps(server)
    response = post_options(server, {"Origin": origin}, steps=before + 1)
    assert response.status_code == 403 and "--cors-allow-origins" in response.json()["detail"]
    preflight = httpx.options(f"http://127.0.0.1:{server.port}/sdapi/v1/txt2img", timeout=30, headers={
        "Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
    assert preflight.status_code == 403 and "access-control-allow-origin" not in preflight.headers
    assert steps(server) == before


def test_same_origin_no_origin_and_allowed_origins_pass(server):
    base = steps(server)
    assert post_options(server, {"Origin": f"http://127.0.0.1:{server.port}"}, steps=base + 1).status_code == 200
    assert post_options(server, {}, steps=base + 2).status_code == 200  # curl, webuiapi: no Origin
    allowed = post_options(server, {"Origin": "http://localhost:3000"}, steps=base)
    assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == "http://localhost:3000"
    preflight = httpx.options(f"http://127.0.0.1:{server.port}/sdapi/v1/options", timeout=30, headers={
        "Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"})
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == "http://localhost:3000"
    # a proxy that forwards the upstream Host: the page's public origin is an --allowed-hosts name
    assert post_options(server, {"Origin": "https://sd.example.org"}, steps=base).status_code == 200
    assert steps(server) == base


def test_cross_origin_reads_are_left_to_the_browser(server):
    """GETs change nothing; without CORS headers the browser keeps the answer from the other page anyway."""
    response = httpx.get(f"http://127.0.0.1:{server.port}/sdapi/v1/samplers", headers={"Origin": "http://evil.example"},
                         timeout=30)
    assert response.status_code == 200 and "access-control-allow-origin" not in response.headers


def test_a_tls_proxy_in_front_keeps_the_ui_working():
    """nginx terminating TLS and forwarding `Host: sd.example.org` to plain http: the page's origin says port 443,
    the request arrives on 80; the same host name is the same site. Another port's page stays foreign."""
    from webui.origin_guard import OriginGuardMiddleware

    guard = OriginGuardMiddleware(None, local_only=False)
    assert guard._origin_allowed("https://sd.example.org", "sd.example.org", "http")
    assert not guard._origin_allowed("https://evil.example", "sd.example.org", "http")
    assert not guard._origin_allowed("http://localhost:8080", "localhost:7860", "http")


def test_listening_server_does_not_check_host_names():
    from webui.origin_guard import OriginGuardMiddleware

    guard = OriginGuardMiddleware(None, local_only=False)
    assert guard._host_allowed("sd.lan:7860")
    assert not OriginGuardMiddleware(None, local_only=True)._host_allowed("sd.lan:7860")


@pytest.mark.parametrize("entry, origin", [("https://App.example:443", "https://app.example"),
                                           ("http://page.example", "http://page.example"),
                                           ("http://localhost:3000/", "http://localhost:3000"),
                                           ("https://app.example:80", "https://app.example:80")])
def test_cors_origins_are_written_as_browsers_send_them(entry, origin):
    from webui.origin_guard import browser_origin

    assert browser_origin(entry) == origin
