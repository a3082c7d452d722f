"""A1111's `POST /sdapi/v1/interrogate` with model "clip": the caption of the image2text_generation app (a 501 before).

Oracle: the same app called in Python on the same image. A1111's own answers are kept where a client may read them:
404 "Model not found" for an unknown model, 404 "Image not found" for an empty image."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image, ImageDraw


def png_base64(image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.fixture
def circle():
    image = Image.new("RGB", (64, 64), (40, 60, 220))
    ImageDraw.Draw(image).ellipse((16, 16, 48, 48), fill=(220, 30, 30))
    return image


def test_clip_interrogation_answers_the_captioning_apps_caption(client, circle):
    from appflow import Appflow

    response = client.post("/sdapi/v1/interrogate", json={"image": png_base64(circle), "model": "clip"})
    assert response.status_code == 200, response.text
    assert response.json() == {"caption": Appflow("image2text_generation")(image=circle)["text"]}
    # "clip" is A1111's default model, and a data URL is read as the other image fields read it
    default = client.post("/sdapi/v1/interrogate", json={"image": "data:image/png;base64," + png_base64(circle)})
    assert default.status_code == 200 and default.json() == response.json()


@pytest.mark.parametrize("body, status, detail", [
    ({"image": "", "model": "clip"}, 404, "Image not found"),
    ({"model": "clip"}, 404, "Image not found"),
    ({"image": "aGVsbG8=", "model": "blip"}, 404, "Model not found"),
    ({"image": "aGVsbG8=", "model": "deepdanbooru"}, 501, "'deepdanbooru' tagger is not available"),
    ({"image": "aGVsbG8=", "model": "clip"}, 422, "image: "),
    ({"image": "aGVsbG8=", "model": "clip", "extra": 1}, 422, "Unknown field(s) ['extra']"),
])
def test_a1111s_answers_to_requests_it_cannot_serve(client, body, status, detail):
    response = client.post("/sdapi/v1/interrogate", json=body)
    assert response.status_code == status, response.text
    assert detail in response.json()["detail"]
