"""ControlNet units on both hires-fix passes, and the "only masked" crop of control images fitted as A1111 fits the
crop ("resize and fill").

References: sd-webui-controlnet `scripts/controlnet.py` (`get_target_dimensions` gives the first pass's and the
hires size; the detected map goes through `detectmap_proc` to each, so the units guide both passes); A1111
`modules/processing.py` StableDiffusionProcessingImg2Img.init, "only masked": `images.resize_image(2, crop,
self.width, self.height)`.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import pipelines.controlnet.pipelines as control_pipelines
from pipelines.controlnet import ControlHiresParams, ControlNetImageToImage, ControlNetUnit
from pipelines.hires import HiresFix, HiresParams
from pipelines.image_prep import resize_image
from pipelines.txt2img import TextToImage

from .tiny_images import noise_picture

SMALL = dict(prompt="a red circle", seed=3, width=64, height=64, steps=3, sampler="Euler", hr_scale=2.0,
             hr_upscaler="Latent", denoising_strength=0.6)


@pytest.fixture(scope="module")
def hires(tiny_sd1_dir):
    return HiresFix(TextToImage.from_pretrained(tiny_sd1_dir))


@pytest.fixture(scope="module")
def control_image():
    return noise_picture(0)


def pixels(result):
    return np.asarray(result.images[0]).astype(np.int16)


def test_units_guide_both_passes_at_each_pass_size(hires, controlnet, control_image, monkeypatch):
    sizes = []
    original = control_pipelines.controlnet_unet_extra

    def recording(controls, total, time_ids=None):
        sizes.append(tuple(controls[0].tensor.shape[-2:]))
        return original(controls, total, time_ids)

    monkeypatch.setattr(control_pipelines, "controlnet_unet_extra", recording)
    unit = ControlNetUnit(controlnet, control_image, preprocessor="none", model_name="tiny")
    result = hires(ControlHiresParams(**SMALL, controlnets=[unit]))
    assert result.images[0].size == (128, 128)
    assert sizes == [(64, 64), (128, 128)]  # one batch per pass: the first pass's size, then the hires size
    infotext = result.infotexts[0]
    assert "Hires upscale: 2" in infotext and "ControlNet 0: " in infotext


def test_a_weight_zero_unit_is_exactly_plain_hires_fix_and_weight_one_is_not(hires, controlnet, control_image):
    plain = hires(HiresParams(**SMALL))
    silent = hires(ControlHiresParams(**SMALL, controlnets=[ControlNetUnit(controlnet, control_image, weight=0.0)]))
    guided = hires(ControlHiresParams(**SMALL, controlnets=[ControlNetUnit(controlnet, control_image, weight=1.0)]))
    assert np.array_equal(pixels(plain), pixels(silent))
    assert not np.array_equal(pixels(plain), pixels(guided))


def test_a_keyword_call_with_controlnets_is_the_params_call(hires, controlnet, control_image):
    # As ControlNetTextToImage takes `controlnets=` as a keyword, so does HiresFix.
    unit = ControlNetUnit(controlnet, control_image, weight=1.0)
    by_keywords = hires(**SMALL, controlnets=[unit])
    assert np.array_equal(pixels(by_keywords), pixels(hires(ControlHiresParams(**SMALL, controlnets=[unit]))))
    assert "ControlNet 0: " in by_keywords.infotexts[0]


def test_a_bad_unit_is_refused_before_the_first_pass(hires, controlnet):
    with pytest.raises(ValueError, match="ControlNet 0 has no image"):
        hires(ControlHiresParams(**SMALL, controlnets=[ControlNetUnit(controlnet, None)]))


def test_only_masked_control_images_are_fitted_as_the_crop_resize_and_fill(tiny_sd1_dir, controlnet):
    from pipelines.controlnet import ControlImg2ImgParams

    picture = noise_picture(4)
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (24, 0, 40, 64))  # full height: a 64 x 32 target's 2:1 crop cannot fit in the picture
    pipe = ControlNetImageToImage.from_pretrained(tiny_sd1_dir)
    params = ControlImg2ImgParams(prompt="x", seed=1, width=64, height=32, steps=2, sampler="Euler", init_images=[picture],
                                  mask=mask, inpaint_full_res=True, inpaint_full_res_padding=0,
                                  controlnets=[ControlNetUnit(controlnet, None), ControlNetUnit(controlnet, picture)])
    pipe.check_inputs(params)
    state = pipe._prepare(params)
    crop = state.base.crop
    box = (crop.left, crop.top, crop.right, crop.bottom)
    assert (crop.right - crop.left) / (crop.bottom - crop.top) != 2  # the crop keeps another aspect ratio
    expected = np.asarray(resize_image(picture.crop(box), 64, 32, "resize and fill"))
    for control in state.controls:  # the init image fallback and a unit image of the picture's size alike
        assert np.array_equal(np.asarray(control.image), expected)
        assert not np.array_equal(np.asarray(control.image), np.asarray(picture.crop(box).resize((64, 32))))
