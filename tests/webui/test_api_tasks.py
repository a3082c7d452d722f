"""A1111's `POST /internal/progress`: one task's state by the id its page made, in A1111's shape."""

from __future__ import annotations

import threading

import httpx
import pytest
import torch

from pipelines.control import StepProgress
from webui.ui_tasks import TaskResult

from .worker_jobs import submit_until_interrupted

UNKNOWN = {"active": False, "queued": False, "completed": False, "progress": None, "eta": None, "live_preview": None,
           "id_live_preview": -1, "textinfo": "Waiting..."}


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("internal-progress")
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False, preview_every=1,
                          auth=(("alice", "pw1"), ("bob", "pw2")))
    with serving(config) as running:
        yield running


def progress(server, user: str = "alice", **body) -> dict:
    password = {"alice": "pw1", "bob": "pw2"}[user]
    response = httpx.post(server.url + "/internal/progress", json=body, auth=(user, password), timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def finish(outcome) -> TaskResult:
    return TaskResult(["/gallery/x.png"], [1], ["x"], image_count=1, interrupted=outcome == "interrupted")


class HalfwayJob:
    """A job that reports step 1 of 2 with 4-channel latents (a live preview), then runs until interrupted."""

    def __init__(self) -> None:
        self.reported = threading.Event()

    def __call__(self, control, on_step):
        on_step(StepProgress(1, 2, 0, 1, torch.zeros(1, 4, 8, 8), control))
        self.reported.set()
        while not control.interrupted:
            self.reported.wait(0.01)
        return "interrupted"


def test_an_unknown_or_missing_task_id_reads_as_a1111s_unknown_task(server):
    assert progress(server, id_task="task(never-made-0001)") == UNKNOWN
    assert progress(server) == UNKNOWN
    assert progress(server, id_task="x" * 500, unknown_key=1) == UNKNOWN  # other keys are ignored, as in A1111


def test_a_task_is_queued_then_active_with_its_preview_then_completed(server):
    state = server.state
    blocker, _ = submit_until_interrupted(state.worker, owner="bob")
    body = HalfwayJob()
    job = state.worker.submit(body, "txt2img", keep_on_disconnect=True)
    task = state.tasks.register("task(progress-test-01)", "txt2img", job, "alice", finish)
    try:
        assert progress(server, id_task=task.task_id) == {**UNKNOWN, "queued": True, "textinfo": "In queue: 1/1"}
        state.worker.interrupt_job(blocker)
        assert body.reported.wait(30)
        active = progress(server, id_task=task.task_id)
        assert active["active"] and not active["queued"] and not active["completed"]
        assert active["progress"] == 0.5 and active["eta"] >= 0 and active["textinfo"] == "Step 1/2, batch 1/1"
        assert active["live_preview"].startswith("data:image/png;base64,") and active["id_live_preview"] > 0
        # the preview the caller already has is not sent again; none is sent when not asked for
        again = progress(server, id_task=task.task_id, id_live_preview=active["id_live_preview"])
        assert again["live_preview"] is None and again["id_live_preview"] == active["id_live_preview"]
        assert progress(server, id_task=task.task_id, live_preview=False)["live_preview"] is None
        assert progress(server, "bob", id_task=task.task_id) == UNKNOWN  # another user's task is not given out
    finally:
        state.worker.interrupt_job(job)
    assert task.done.wait(30)
    assert progress(server, id_task=task.task_id) == {**UNKNOWN, "completed": True, "progress": 1.0, "eta": 0.0,
                                                      "textinfo": "Interrupted"}


@pytest.mark.parametrize("body", [{"id_live_preview": "abc"}, {"id_task": ["task(a)"]}, {"live_preview": "maybe"}])
def test_a_malformed_request_is_a_422_naming_the_field(server, body):
    response = httpx.post(server.url + "/internal/progress", json=body, auth=("alice", "pw1"), timeout=60)
    assert response.status_code == 422 and next(iter(body)) in response.text


def test_without_credentials_the_route_is_closed_as_every_route(server):
    response = httpx.post(server.url + "/internal/progress", json={}, timeout=60)
    assert response.status_code == 401


FIRST_PASS = {"prompt": "a cube", "steps": 2, "width": 64, "height": 64, "seed": 5, "sampler_name": "Euler"}


def test_an_api_request_is_followed_by_its_force_task_id(server):
    # A1111 1.6+: txt2img/img2img take `force_task_id`, and `/internal/progress` reports that task (it used to be
    # silently ignored here, so the progress of a request could not be followed by its id).
    response = httpx.post(server.url + "/sdapi/v1/txt2img", json={**FIRST_PASS, "force_task_id": "task(api-request-1)"},
                          auth=("alice", "pw1"), timeout=300)
    assert response.status_code == 200, response.text
    assert progress(server, id_task="task(api-request-1)") == {**UNKNOWN, "completed": True, "progress": 1.0,
                                                               "eta": 0.0, "textinfo": "Done"}
    assert progress(server, "bob", id_task="task(api-request-1)") == UNKNOWN
    again = httpx.post(server.url + "/sdapi/v1/txt2img", json={**FIRST_PASS, "force_task_id": "task(api-request-1)"},
                       auth=("alice", "pw1"), timeout=300)
    assert again.status_code == 422 and "force_task_id 'task(api-request-1)' is already in use" in again.text


@pytest.mark.parametrize("task_id", ["short", "task(a b c d e)", "x" * 129])
def test_a_malformed_force_task_id_is_a_422_before_anything_is_queued(server, task_id):
    response = httpx.post(server.url + "/sdapi/v1/img2img", json={**FIRST_PASS, "force_task_id": task_id,
                                                                  "init_images": [TINY_PNG]},
                          auth=("alice", "pw1"), timeout=300)
    assert response.status_code == 422 and "force_task_id must be 8 to 128 characters" in response.text
    assert server.state.worker.queued == 0 and not server.state.tasks.in_use(task_id)


def tiny_png() -> str:
    import base64
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (90, 10, 10)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


TINY_PNG = tiny_png()
