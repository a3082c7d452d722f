"""A client that closes its connection mid-job: a generation that saves its images runs to the end and saves them
(as A1111's does), `/sdapi/v1/progress` showing it meanwhile; one whose result exists only in the answer is dropped
(`test_api_bad_input.py::test_client_disconnecting_mid_generation_frees_the_queue`)."""

from __future__ import annotations

import base64
import io
import json
import logging
import socket
import time

import pytest
from PIL import Image

STEPS = 80  # long enough that the disconnect is noticed (polled every 0.25s) while it samples
REQUEST = {"prompt": "a cube left alone", "seed": 7, "steps": STEPS, "width": 64, "height": 64,
           "sampler_name": "Euler", "save_images": True}


def init_image() -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (30, 160, 90)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


# img2img samples denoising_strength x steps (A1111): 0.9 x 80 = 72 steps
ROUTES = {"txt2img": {}, "img2img": {"init_images": [init_image()], "denoising_strength": 0.9}}


def send_and_close_when_sampling(server, client, route: str, payload: dict) -> None:
    """POST `payload` on a raw socket, close the socket once the job samples its first step."""
    body = json.dumps(payload).encode()
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as raw:
        raw.sendall(f"POST {route} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n".encode()
                    + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        deadline = time.monotonic() + 60
        while client.get("/sdapi/v1/progress").json()["state"]["sampling_step"] < 1:
            assert time.monotonic() < deadline, "the generation never started"
            time.sleep(0.02)


@pytest.mark.parametrize("route", ROUTES)
def test_a_generation_that_saves_finishes_and_saves_after_its_client_left(client, server, caplog, route):
    caplog.set_level(logging.INFO, logger="webui")
    outputs = server.state.output_dir
    before = set(outputs.rglob("*.png")) if outputs.exists() else set()
    request = {**REQUEST, **ROUTES[route]}
    send_and_close_when_sampling(server, client, f"/sdapi/v1/{route}", request)

    seen_steps = []  # what /sdapi/v1/progress shows while the orphaned job runs on
    deadline = time.monotonic() + 120
    while (state := client.get("/sdapi/v1/progress").json()["state"])["job"]:
        assert time.monotonic() < deadline, "the generation never finished"
        assert not state["interrupted"]
        seen_steps.append(state["sampling_step"])
        time.sleep(0.05)
    assert seen_steps and max(seen_steps) > 1  # it was shown running after the socket closed

    (saved,) = set(outputs.rglob("*.png")) - before
    assert "the client closed the connection; the job runs on" in caplog.text  # the disconnect was noticed mid-job
    assert not [r for r in caplog.records if "failed" in r.getMessage()]
    # Finished, not interrupted: the same request answered in full gives the very same pixels.
    answered = client.post(f"/sdapi/v1/{route}", json={**request, "save_images": False}).json()["images"][0]
    with Image.open(saved) as on_disk, Image.open(io.BytesIO(base64.b64decode(answered))) as expected:
        assert on_disk.info["parameters"].startswith(f"a cube left alone\nSteps: {STEPS}, ")
        assert list(on_disk.convert("RGB").getdata()) == list(expected.convert("RGB").getdata())
