"""A1111's Extra seed fields through the HTTP API (webui.api_convert, webui.api_response, webui.api_infotext)."""

from __future__ import annotations

import json

SMALL = {"steps": 2, "width": 64, "height": 64, "sampler_name": "Euler a", "cfg_scale": 5.0}


def _post(client, path="/sdapi/v1/txt2img", **body):
    return client.post(path, json={"prompt": "a cube", **SMALL, **body})


def test_txt2img_takes_the_variation_fields_and_reports_them_as_a1111(client):
    response = _post(client, seed=5, subseed=70, subseed_strength=0.3, seed_resize_from_w=48, seed_resize_from_h=80,
                     batch_size=2)
    assert response.status_code == 200, response.text
    info = json.loads(response.json()["info"])
    assert info["all_seeds"] == [5, 5] and (info["subseed"], info["all_subseeds"]) == (70, [70, 71])
    assert info["subseed_strength"] == 0.3
    assert (info["seed_resize_from_w"], info["seed_resize_from_h"]) == (48, 80)
    assert "Variation seed: 71, Variation seed strength: 0.3, Seed resize from: 48x80," in info["infotexts"][1]


def test_each_image_of_a_batch_count_takes_subseed_plus_its_index(client):
    # A1111's process_images_inner: all_subseeds = [subseed + x for x in range(n_iter * batch_size)], and the
    # infotext of image x records all_subseeds[x]
    info = json.loads(_post(client, seed=5, subseed=70, subseed_strength=0.3, batch_size=1, n_iter=3).json()["info"])
    assert info["all_seeds"] == [5, 5, 5] and info["all_subseeds"] == [70, 71, 72]
    assert [text.split("Variation seed: ")[1].split(",")[0] for text in info["infotexts"]] == ["70", "71", "72"]


def test_a_random_subseed_is_the_one_the_images_used(client):
    info = json.loads(_post(client, seed=5, subseed_strength=0.5).json()["info"])
    assert f"Variation seed: {info['subseed']}," in info["infotexts"][0]
    again = json.loads(_post(client, seed=5, subseed=info["subseed"], subseed_strength=0.5).json()["info"])
    assert again["infotexts"] == info["infotexts"]


def test_the_infotext_field_reproduces_a_variation_image(client):
    made = _post(client, seed=9, subseed=3, subseed_strength=0.6, seed_resize_from_w=80, seed_resize_from_h=48).json()
    infotext = json.loads(made["info"])["infotexts"][0]
    pasted = client.post("/sdapi/v1/txt2img", json={"infotext": infotext}).json()
    assert pasted["images"] == made["images"]
    info = json.loads(pasted["info"])
    assert (info["subseed"], info["subseed_strength"], info["seed_resize_from_w"]) == (3, 0.6, 80)


def test_img2img_takes_them_too(client):
    import base64
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), "red").save(buffer, format="PNG")
    image = base64.b64encode(buffer.getvalue()).decode()
    response = _post(client, "/sdapi/v1/img2img", init_images=[image], seed=2, subseed=11, subseed_strength=0.2)
    assert response.status_code == 200, response.text
    assert "Variation seed: 11, Variation seed strength: 0.2" in json.loads(response.json()["info"])["infotexts"][0]


def test_bad_values_are_a_422_naming_the_field(client):
    response = _post(client, subseed_strength=2)
    assert response.status_code == 422 and "subseed_strength must be a number in [0, 1]" in response.text
    response = _post(client, seed_resize_from_w=50, seed_resize_from_h=64)  # refused as sent, not as converted
    assert response.status_code == 422 and "'Resize seed from' 50x64 is not a size" in response.text


def test_a_resize_with_a_side_at_or_below_0_is_off_as_a1111_reads_it(client):
    # A1111 (modules/processing.py, rng.py) draws the noise at the resize size only if both sides are > 0
    plain = _post(client, seed=4).json()
    for sides in ({"seed_resize_from_w": 64}, {"seed_resize_from_w": -1, "seed_resize_from_h": 64},
                  {"seed_resize_from_w": 0, "seed_resize_from_h": 64},
                  {"seed_resize_from_w": -8, "seed_resize_from_h": -8}):
        response = _post(client, seed=4, **sides)
        assert response.status_code == 200, (sides, response.text)
        infotexts = json.loads(response.json()["info"])["infotexts"]
        assert "Seed resize from" not in infotexts[0] and infotexts == json.loads(plain["info"])["infotexts"]
        assert response.json()["images"] == plain["images"]  # the noise is the plain seed's
