"""The img2img request's mask_blur_x / mask_blur_y / mask_round reach Img2ImgParams as A1111 reads them.

A1111 reference (`modules/processing.py` StableDiffusionProcessingImg2Img): the request's `mask_blur_x` and
`mask_blur_y` (default 4) blur each axis separately; a `mask_blur` int sets both through its property setter;
`mask_round=False` keeps the mask soft (`create_binary_mask(round=False)`, no `np.around(latmask)`).
"""

from __future__ import annotations

import base64
import io
import json

from PIL import Image

from pipelines.params import GenerationLimits
from webui.api_convert import RequestLimits, to_img2img_params
from webui.api_requests import Img2ImgRequest
from webui.base64_images import encode_png_base64


def inputs(level: int = 255) -> dict:
    picture = Image.new("RGB", (64, 64), (30, 60, 200))
    picture.paste((240, 200, 20), (8, 8, 40, 40))
    mask = Image.new("L", (64, 64), 0)
    mask.paste(level, (16, 16, 48, 48))
    return {"init_images": [encode_png_base64(picture)], "mask": encode_png_base64(mask)}


def params(**fields):
    return to_img2img_params(Img2ImgRequest(**inputs(), width=64, height=64, **fields), limits=GenerationLimits(),
                             request_limits=RequestLimits(), lora_names=None)


def test_blur_fields_and_mask_round_reach_the_params():
    unequal = params(mask_blur_x=0, mask_blur_y=8, mask_round=False)
    assert (unequal.mask_blur_x, unequal.mask_blur_y, unequal.mask_round) == (0, 8, False)
    default = params()
    assert (default.mask_blur_x, default.mask_blur_y, default.mask_round) == (4, 4, True)
    # mask_blur, when sent, sets both axes (A1111's mask_blur setter), whatever mask_blur_x/y say.
    both = params(mask_blur=3, mask_blur_x=0, mask_blur_y=8)
    assert (both.mask_blur, both.mask_blur_x, both.mask_blur_y) == (3, None, None)


def post(client, **fields) -> tuple[bytes, str]:
    response = client.post("/sdapi/v1/img2img", json={
        **inputs(fields.pop("level", 255)), "prompt": "a box", "steps": 2, "seed": 3, "width": 64, "height": 64,
        "sampler_name": "Euler", "inpainting_fill": 1, "inpaint_full_res": False, "denoising_strength": 1.0, **fields})
    assert response.status_code == 200, response.text
    body = response.json()
    pixels = Image.open(io.BytesIO(base64.b64decode(body["images"][0]))).convert("RGB").tobytes()
    return pixels, json.loads(body["info"])["infotexts"][0]


def test_a_vertical_only_blur_runs_and_is_not_recorded_as_an_even_blur(client):
    vertical, text = post(client, mask_blur_x=0, mask_blur_y=8)
    even, even_text = post(client, mask_blur_x=8, mask_blur_y=8)
    assert vertical != even
    assert "Mask blur" not in text and "Mask blur: 8" in even_text


def test_mask_round_false_is_not_ignored(client):
    # A grey (level 128) mask: rounded, it repaints fully; soft, it blends half the original back.
    rounded, _ = post(client, level=128, mask_blur=0)
    soft, _ = post(client, level=128, mask_blur=0, mask_round=False)
    assert rounded != soft


def test_mask_round_false_keeps_soft_alpha_strokes_of_a_canvas_mask():
    # A1111's canvas mask: strokes in the alpha channel; create_binary_mask(round=False) keeps their alpha as is.
    canvas = Image.new("RGBA", (64, 64), (0, 0, 0, 0))
    canvas.paste((0, 0, 0, 100), (16, 16, 48, 48))
    fields = {**inputs(), "mask": encode_png_base64(canvas)}
    limits = dict(limits=GenerationLimits(), request_limits=RequestLimits(), lora_names=None)
    soft = to_img2img_params(Img2ImgRequest(**fields, width=64, height=64, mask_round=False), **limits)
    rounded = to_img2img_params(Img2ImgRequest(**fields, width=64, height=64), **limits)
    assert soft.mask.getpixel((20, 20)) == 100 and rounded.mask.getpixel((20, 20)) == 0
