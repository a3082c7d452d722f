"""A route's unexpected exception is A1111's JSON 500, redacted, and the client's keep-alive connection stays usable."""

from __future__ import annotations

import http.client
import json

import pytest


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("api")
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False)
    with serving(config, load_model=False) as running:
        yield running


def test_a_failing_route_answers_a_redacted_json_500_and_keeps_the_connection(server, tiny_sd1_dir, monkeypatch):
    import pipelines.model_upscale_listing as listing

    def broken(*_, **__):  # takes what the route passes (dat_enabled=)
        raise OSError(f"cannot list {tiny_sd1_dir}/unet/x.bin")

    monkeypatch.setattr(listing, "listed_upscaler_names", broken)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        connection.request("GET", "/sdapi/v1/upscalers")
        failed = connection.getresponse()
        body = json.loads(failed.read())
        socket_used = connection.sock
        assert failed.status == 500 and failed.getheader("connection") != "close"
        assert body == {"error": "OSError", "detail": "cannot list unet/x.bin", "body": "",
                        "errors": "GET /sdapi/v1/upscalers failed: cannot list unet/x.bin"}
        monkeypatch.undo()
        connection.request("GET", "/sdapi/v1/upscalers")  # the same socket: uvicorn did not close it after the 500
        answered = connection.getresponse()
        names = [entry["name"] for entry in json.loads(answered.read())]
        assert connection.sock is socket_used
        assert answered.status == 200 and names[0] == "None"
    finally:
        connection.close()


def test_a_cross_origin_client_reads_the_500_as_cors_lets_it(tiny_sd1_dir, tmp_path, serving, monkeypatch):
    """The JSON 500 passes through --cors-allow-origins' middleware, so a browser page on an allowed origin gets the
    error body rather than an opaque CORS failure."""
    import httpx

    import pipelines.model_upscale_listing as listing
    from webui.config import ServerConfig

    def broken(*_, **__):  # takes what the route passes (dat_enabled=)
        raise OSError("cannot list")

    monkeypatch.setattr(listing, "listed_upscaler_names", broken)
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path / "outputs"), ui=False,
                          cors_allow_origins=["http://page.example"])
    with serving(config, load_model=False) as running:
        # a browser leaves the default port out of Origin: the allowed origin matches it as written
        answered = httpx.get(f"{running.url}/sdapi/v1/samplers", headers={"Origin": "http://page.example"}, timeout=60)
        failed = httpx.get(f"{running.url}/sdapi/v1/upscalers", headers={"Origin": "http://page.example"}, timeout=60)
    assert answered.status_code == 200 and answered.headers["access-control-allow-origin"] == "http://page.example"
    assert failed.status_code == 500 and failed.json()["error"] == "OSError"
    assert failed.headers.get("access-control-allow-origin") == "http://page.example"
