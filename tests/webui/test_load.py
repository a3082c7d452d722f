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


# -- what loading a model means for the server: catalog titles, known hashes, refused broken models --------------

def test_catalog_finds_the_exact_title_before_the_hash_stripped_name(tmp_path):
    from webui.checkpoints import CheckpointCatalog

    (tmp_path / "model" / "unet").mkdir(parents=True)
    (tmp_path / "model" / "model_index.json").write_text("{}")
    (tmp_path / "model" / "unet" / "diffusion_pytorch_model.safetensors").write_bytes(b"x")  # a model, not configs
    (tmp_path / "model [v2].safetensors").write_bytes(b"x")
    catalog = CheckpointCatalog(models_dir=tmp_path)
    assert catalog.find("model [v2]").source.endswith("model [v2].safetensors")
    assert catalog.find("model [abcdef1234]").source.endswith("/model")  # A1111's "title [hash]" still works


def test_sd_models_fills_hash_and_sha256_once_known_without_hashing(tmp_path, monkeypatch):
    import hashlib

    from mixkit.io.hashing import a1111_model_hash
    from webui.checkpoints import CheckpointCatalog

    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "a.safetensors").write_bytes(b"weights a")
    (tmp_path / "b.safetensors").write_bytes(b"weights b")
    catalog = CheckpointCatalog(models_dir=tmp_path)
    assert [(e["hash"], e["sha256"]) for e in map(lambda e: e.as_a1111(), catalog.entries())] == [(None, None)] * 2
    a1111_model_hash(tmp_path / "a.safetensors")  # what loading the model does
    listed = {e.title: e.as_a1111() for e in catalog.entries()}
    digest = hashlib.sha256(b"weights a").hexdigest()
    a = listed[f"a.safetensors [{digest[:10]}]"]  # A1111's title once the hash is known
    assert (a["sha256"], a["hash"]) == (digest, digest[:10])
    assert listed["b.safetensors"]["sha256"] is None  # never hashed by a listing


@pytest.fixture(scope="module")
def switch_server(tiny_sd1_dir, tmp_path_factory, serving):
    import shutil

    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("switch")
    broken = root / "no-tokenizer"
    shutil.copytree(tiny_sd1_dir, broken)
    for file in (broken / "tokenizer").iterdir():
        file.unlink()
    with serving(ServerConfig(models=[str(tiny_sd1_dir), str(broken)], output_dir=str(root / "out"), ui=False)) as running:
        yield running


def test_switching_to_a_model_without_tokenizer_is_refused_and_keeps_the_old_one(switch_server):
    with httpx.Client(base_url=switch_server.url, timeout=120) as http:
        before = http.get("/sdapi/v1/options").json()["sd_model_checkpoint"]
        response = http.post("/sdapi/v1/options", json={"sd_model_checkpoint": "no-tokenizer"})
        assert response.status_code == 422, response.text
        detail = response.json()["detail"]  # named by the checkpoint and its subfolder, not the server's path
        assert "Could not load checkpoint 'no-tokenizer': tokenizer has no tokenizer vocabulary" in detail
        assert "/no-tokenizer/tokenizer" not in detail  # the absolute folder it was read from
        assert http.get("/sdapi/v1/options").json()["sd_model_checkpoint"] == before
        listed = {m["title"]: m for m in http.get("/sdapi/v1/sd-models").json()}
        assert len(listed[before]["sha256"]) == 64 and listed[before]["hash"] == listed[before]["sha256"][:10]
        options = http.get("/sdapi/v1/options").json()
        assert options["sd_checkpoint_hash"] == listed[before]["sha256"]  # A1111 fills it for the loaded model
