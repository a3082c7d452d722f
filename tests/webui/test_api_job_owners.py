"""With several --auth users, /progress, /interrupt and /skip act on the caller's own running job only.

A1111's API acts on whatever runs because it serves one user; here a second user could read another's prompt and
live preview and stop their job. Without --auth the API stays A1111's (covered in test_api.py).
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from webui.http_guards import parse_credentials
from webui.worker import GenerationWorker

from .worker_jobs import submit_until_interrupted


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path_factory.mktemp("owners")), ui=False,
                          auth=parse_credentials("alice:pw1,bob:pw2"), preview_every=1)
    with serving(config) as running:
        yield running


def test_worker_scopes_job_control_to_the_owner():
    worker = GenerationWorker(2)
    try:
        submitted, _ = submit_until_interrupted(worker, owner="alice")
        assert worker.progress("bob").busy is False and worker.progress("bob").job == ""
        assert worker.progress(None).busy is False  # a UI job's owner is None: not an API user's
        assert worker.progress("alice").job == "txt2img" and worker.progress().job == "txt2img"
        assert worker.skip("bob") is False and worker.interrupt("bob") is False and worker.interrupt(None) is False
        assert not submitted.future.done()
        assert worker.interrupt("alice") is True
        assert submitted.future.result(10) == "interrupted"
    finally:
        worker.close()


def test_another_user_can_neither_watch_nor_stop_a_job(server):
    results = {}
    alice = httpx.Client(base_url=server.url, timeout=120, auth=("alice", "pw1"))
    bob = httpx.Client(base_url=server.url, timeout=120, auth=("bob", "pw2"))

    def generate():
        results["response"] = alice.post("/sdapi/v1/txt2img", json={
            "prompt": "alice's secret prompt", "steps": 200, "width": 64, "height": 64, "sampler_name": "Euler"})

    thread = threading.Thread(target=generate)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while alice.get("/sdapi/v1/progress").json()["state"]["sampling_step"] < 2:
            assert time.monotonic() < deadline and thread.is_alive(), f"generation never started: {results}"
            time.sleep(0.05)
        seen_by_bob = bob.get("/sdapi/v1/progress").json()
        assert seen_by_bob["state"]["sampling_steps"] == 0 and seen_by_bob["current_image"] is None
        assert seen_by_bob["textinfo"] == "Waiting..." and seen_by_bob["current_task"] is None
        assert bob.post("/sdapi/v1/skip").json() == {"skipped": False}
        assert bob.post("/sdapi/v1/interrupt").json() == {"interrupted": False}
        seen_by_alice = alice.get("/sdapi/v1/progress").json()
        assert seen_by_alice["state"]["sampling_steps"] == 200 and seen_by_alice["current_image"] is not None
        assert alice.post("/sdapi/v1/interrupt").json() == {"interrupted": True}
        thread.join(60)
        assert results["response"].status_code == 200
    finally:
        thread.join(120)
        alice.close()
        bob.close()
