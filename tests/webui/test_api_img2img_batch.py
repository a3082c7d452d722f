"""/sdapi/v1/img2img with several init images: as A1111, fewer images than batch_size shrink the batch to one image
each (`elif len(imgs) <= self.batch_size: self.batch_size = len(imgs)`), more are refused with a 422 naming both."""

from __future__ import annotations

import json

import numpy as np
from PIL import Image

from webui.base64_images import encode_png_base64

SMALL = {"steps": 1, "width": 64, "height": 64, "sampler_name": "Euler", "cfg_scale": 5.0, "seed": 5}


def pictures(count: int) -> list[str]:
    rng = np.random.default_rng(4)
    return [encode_png_base64(Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))) for _ in range(count)]


def test_two_images_with_batch_size_3_run_as_a_batch_of_2(client):
    response = client.post("/sdapi/v1/img2img", json={"init_images": pictures(2), "batch_size": 3, "n_iter": 2,
                                                      "prompt": "x", **SMALL})
    assert response.status_code == 200, response.text
    body = response.json()
    info = json.loads(body["info"])
    assert len(body["images"]) == 4
    assert info["all_seeds"] == [5, 6, 7, 8] and info["batch_size"] == 2
    assert all(f"Seed: {seed}," in text for seed, text in zip([5, 6, 7, 8], info["infotexts"]))


def test_more_images_than_batch_size_are_refused(client):
    response = client.post("/sdapi/v1/img2img", json={"init_images": pictures(3), "batch_size": 2, "prompt": "x",
                                                      **SMALL})
    assert response.status_code == 422
    assert "Got 3 init images for batch_size 2; give at most 2" in response.text
