"""HTTP img2img resize_mode 3, A1111's "Just resize (latent upscale)" (modules/ui.py lists it fourth; processing.py's
StableDiffusionProcessingImg2Img.init encodes the init image unresized and stretches its latents bilinearly)."""

from __future__ import annotations

import pytest
from PIL import Image

from pipelines.params import GenerationLimits
from webui.api_convert import RequestLimits, to_img2img_params
from webui.api_requests import Img2ImgRequest
from webui.base64_images import encode_png_base64


def params(**fields):
    picture = encode_png_base64(Image.new("RGB", (100, 60), (30, 60, 200)))
    return to_img2img_params(Img2ImgRequest(init_images=[picture], width=64, height=64, **fields),
                             limits=GenerationLimits(), request_limits=RequestLimits(), lora_names=None)


def test_resize_mode_3_is_the_latent_upscale_mode():
    assert params(resize_mode=3).resize_mode == "just resize (latent upscale)"


def test_resize_mode_3_with_a_mask_is_refused_naming_the_modes_that_work():
    mask = encode_png_base64(Image.new("L", (100, 60), 255))
    with pytest.raises(ValueError, match="without a mask.*just resize, crop and resize, resize and fill"):
        params(resize_mode=3, mask=mask)


def test_an_unknown_resize_mode_lists_all_four():
    with pytest.raises(ValueError, match="3: 'just resize \\(latent upscale\\)'"):
        params(resize_mode=4)
