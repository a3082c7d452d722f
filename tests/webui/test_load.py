"""A burst of 40 concurrent API requests against a queue of 8: every request completes or gets the
queue-full answer, the server keeps answering, memory stays bounded and no file is half-written."""

from __future__ import annotations

import concurrent.futures
import json
import time

import httpx
import psutil
import pytest
from PIL import Image

REQUESTS = 40
QUEUE = 8


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("load")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False, queue_size=QUEUE)) as running:
        yield running


def test_burst_of_40_requests_with_queue_of_8(server):
    process = psutil.Process()
    payload = {"prompt": "burst", "steps": 1, "width": 64, "height": 64, "sampler_name": "Euler", "save_images": True}
    with httpx.Client(base_url=server.url, timeout=60) as warm:  # first call pays one-time costs; not part of the burst
        assert warm.post("/sdapi/v1/txt2img", json={**payload, "save_images": False}).status_code == 200
    rss_before = process.memory_info().rss

    def one(index: int) -> httpx.Response:
        with httpx.Client(base_url=server.url, timeout=300) as http:
            return http.post("/sdapi/v1/txt2img", json={**payload, "seed": index})

    progress_latencies = []
    with concurrent.futures.ThreadPoolExecutor(REQUESTS) as pool:
        futures = [pool.submit(one, i) for i in range(REQUESTS)]
        with httpx.Client(base_url=server.url, timeout=30) as probe:
            while not all(f.done() for f in futures):
                started = time.monotonic()
                assert probe.get("/sdapi/v1/progress").status_code == 200
                progress_latencies.append(time.monotonic() - started)
                time.sleep(0.2)
        responses = [f.result() for f in futures]

    done = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 503]
    assert len(done) + len(refused) == REQUESTS, sorted({r.status_code for r in responses})
    assert len(done) >= QUEUE + 1 and len(refused) >= 1
    for response in refused:
        assert response.json()["detail"].startswith("Queue full") and response.headers["retry-after"] == "5"
    seeds = sorted(json.loads(r.json()["info"])["seed"] for r in done)
    assert len(set(seeds)) == len(done)
    assert max(progress_latencies) < 5.0  # the API stayed responsive during the burst

    saved = sorted(server.state.output_dir.iterdir())
    assert len(saved) == len(done) and all(p.suffix == ".png" for p in saved)  # no temp or partial files
    for path in saved:
        with Image.open(path) as image:
            image.load()
            assert image.info["parameters"].startswith("burst\nSteps: 1")
    assert process.memory_info().rss - rss_before < 400 * 1024 * 1024
    assert server.state.worker.queued == 0 and not server.state.worker.progress().busy
    with httpx.Client(base_url=server.url, timeout=60) as after:
        assert after.post("/sdapi/v1/txt2img", json={**payload, "save_images": False}).status_code == 200
