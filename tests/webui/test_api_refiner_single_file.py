"""`refiner_checkpoint` naming a single-file checkpoint of a server started on single files with a configs folder:
the refiner file is read with the same configs as the server's checkpoints (pipelines/refiner_configs.py), so it
refines as the Python API does with that file (which itself refines as the same weights in a diffusers folder)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipelines.infotext import parse_infotext

from .png_payloads import decode_png

SMALL = {"prompt": "a red cube", "seed": 3, "steps": 4, "width": 64, "height": 64, "sampler_name": "Euler"}


@pytest.fixture(scope="module")
def server(single_file_checkpoints, single_file_serving, tmp_path_factory):
    with single_file_serving(single_file_checkpoints, tmp_path_factory.mktemp("refiner-file")) as running:
        yield running


def generate(client, **body):
    response = client.post("/sdapi/v1/txt2img", json={**SMALL, **body})
    assert response.status_code == 200, response.text
    payload = response.json()
    image = decode_png(payload["images"][0])
    return np.asarray(image.convert("RGB")), json.loads(payload["info"])["infotexts"][0]


def test_a_refiner_file_refines_with_the_servers_configs(client, single_file_checkpoints, tiny_sd1_dir):
    from pipelines.txt2img import TextToImage

    refined, infotext = generate(client, refiner_checkpoint="other", refiner_switch_at=0.5)
    plain, _ = generate(client)
    assert not np.array_equal(refined, plain)
    assert parse_infotext(infotext)["Refiner"].startswith("other [")
    pipe = TextToImage.from_pretrained(single_file_checkpoints / "sd1.safetensors", config_dir=tiny_sd1_dir)
    expected = pipe(prompt=SMALL["prompt"], seed=3, steps=4, width=64, height=64, sampler="Euler",
                    refiner=str(single_file_checkpoints / "other.safetensors"), refiner_switch_at=0.5)
    assert np.array_equal(refined, np.asarray(expected.images[0].convert("RGB")))
