"""An inpaint image's infotext posted to /sdapi/v1/img2img reproduces it: Mask mode, Masked content, Inpaint area,
Masked area padding and Mask blur are read back as A1111's img2img paste fields read them.

A1111 reference: `modules/ui.py` `img2img_paste_fields` pastes "Mask blur", "Mask mode", "Masked content",
"Inpaint area" and "Masked area padding" into index radios (`inpainting_mask_invert`: Inpaint masked / Inpaint not
masked; `inpainting_fill`: fill / original / latent noise / latent nothing; `inpaint_full_res`: Whole picture / Only
masked) and the padding slider; `parse_generation_parameters` fills the keys an infotext lacks with "Inpaint
masked", "original", "Whole picture" and 32.
"""

from __future__ import annotations

import json

import pytest
from PIL import Image

from webui.api_infotext import apply_infotext
from webui.api_requests import Img2ImgRequest
from webui.base64_images import encode_png_base64

from .png_payloads import decode_png


def inpaint_inputs() -> dict:
    picture = Image.new("RGB", (64, 64), (30, 60, 200))
    picture.paste((240, 200, 20), (8, 8, 40, 40))
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (16, 16, 48, 48))
    return {"init_images": [encode_png_base64(picture)], "mask": encode_png_base64(mask)}


def post(client, body: dict) -> tuple[Image.Image, str]:
    response = client.post("/sdapi/v1/img2img", json=body)
    assert response.status_code == 200, response.text
    payload = response.json()
    return decode_png(payload["images"][0]), json.loads(payload["info"])["infotexts"][0]


@pytest.mark.parametrize("settings", [
    {"inpainting_fill": 1, "inpaint_full_res": False, "mask_blur": 2, "inpainting_mask_invert": 1},
    {"inpainting_fill": 2, "inpaint_full_res": True, "inpaint_full_res_padding": 12, "mask_blur": 3},
], ids=["whole-picture-inverted-original", "only-masked-latent-noise-padding"])
def test_posting_an_inpaint_infotext_with_the_same_image_and_mask_reproduces_it(client, settings):
    inputs = inpaint_inputs()
    first, infotext = post(client, {**inputs, "prompt": "a box", "steps": 3, "seed": 9, "width": 64, "height": 64,
                                    "sampler_name": "Euler", "denoising_strength": 0.5, **settings})
    again, again_infotext = post(client, {**inputs, "infotext": infotext})
    assert again_infotext == infotext
    assert again.tobytes() == first.tobytes()


def test_the_inpaint_keys_fill_the_request_fields_as_a1111s_index_radios():
    text = ("a cat\nSteps: 4, Sampler: Euler, Seed: 1, Size: 64x64, Denoising strength: 0.5, Mask blur: 2, "
            "Mask mode: Inpaint not masked, Masked content: latent nothing, Inpaint area: Only masked, "
            "Masked area padding: 12")
    request = apply_infotext(Img2ImgRequest(infotext=text))
    assert (request.mask_blur, request.inpainting_mask_invert, request.inpainting_fill, request.inpaint_full_res,
            request.inpaint_full_res_padding) == (2, 1, 3, True, 12)
    # Keys the infotext leaves out take A1111's paste defaults: Inpaint masked, original, Whole picture, 32.
    plain = apply_infotext(Img2ImgRequest(infotext="a cat\nSteps: 4, Sampler: Euler, Seed: 1, Size: 64x64"))
    assert (plain.inpainting_mask_invert, plain.inpainting_fill, plain.inpaint_full_res,
            plain.inpaint_full_res_padding) == (0, 1, False, 32)
    # The request's own values win.
    sent = apply_infotext(Img2ImgRequest(infotext=text, inpainting_fill=0, inpaint_full_res=False))
    assert (sent.inpainting_fill, sent.inpaint_full_res, sent.inpainting_mask_invert) == (0, False, 1)


def test_an_unknown_inpaint_label_is_refused_naming_the_key(client):
    response = client.post("/sdapi/v1/img2img", json={
        **inpaint_inputs(), "infotext": "a cat\nSteps: 2, Sampler: Euler, Size: 64x64, Masked content: smudge"})
    assert response.status_code == 422
    assert response.json()["detail"] == ("infotext: Masked content: 'smudge' is not a valid inpainting_fill; fix the "
                                         "infotext or send inpainting_fill in the request.")


def test_an_infotext_with_a_controlnet_unit_is_a_422_not_a_silent_drop(client):
    from .test_paste_infotext import CONTROLNET_TEXT

    response = client.post("/sdapi/v1/txt2img", json={"infotext": CONTROLNET_TEXT})
    assert response.status_code == 422
    assert response.json()["detail"].startswith("infotext: ControlNet 0: a ControlNet unit's control image cannot come "
                                                "from an infotext; send the unit, with its image, in "
                                                "alwayson_scripts.controlnet")
