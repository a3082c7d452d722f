"""img2img inputs: init images read as A1111 reads them (EXIF, transparency on white, 16-bit), spellings normalised
once so the run and the infotext agree, switches that must be bools, numpy strengths, degenerate sizes, and the
"resize and fill" bands."""

import io

import numpy as np
import pytest
from PIL import Image

from pipelines.image_prep import resize_image
from pipelines.img2img import Img2ImgParams, ImageToImage, check_img2img_params
from pipelines.outpaint import outpaint
from pipelines.params import GenerationLimits

from .tiny_images import box_mask
from .unet_spy import fail_if_called

SMALL = dict(width=64, height=64, steps=4, seed=3, prompt="a red circle", sampler="Euler")


@pytest.fixture(scope="module")
def i2i(sd1_pipe):
    return ImageToImage.from_pipeline(sd1_pipe)


def px(image):
    return np.asarray(image).astype(np.int16)


def noise_image(seed, size=(64, 64), channels=3):
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], channels), dtype=np.uint8))


def round_trip(i2i, image, **kwargs):
    """Strength 0 with exact steps (a 0-step schedule): the init image as the pipeline read it, through the VAE."""
    return px(i2i(init_images=[image], denoising_strength=0.0, exact_steps=True, **{**SMALL, **kwargs}).images[0])


def on_white(rgba):
    return Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba).convert("RGB")


def square_mask():
    return box_mask((16, 16, 48, 48))


# -- init images read like A1111 (and like the web API's decoder) ------------------------------------------------
def test_transparent_init_image_is_composited_on_white(i2i):
    rgba = noise_image(1, channels=4)  # random alpha, including fully transparent pixels
    assert np.array_equal(round_trip(i2i, rgba), round_trip(i2i, on_white(rgba)))


def test_16_bit_init_image_is_scaled_not_clipped(i2i):
    assert np.array_equal(round_trip(i2i, Image.new("I;16", (64, 64), 32768)),
                          round_trip(i2i, Image.new("RGB", (64, 64), (128, 128, 128))))


def test_exif_orientation_is_applied(i2i):
    picture = noise_image(2, size=(64, 48))
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 clockwise to view"
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG", exif=exif)
    tagged = Image.open(io.BytesIO(buffer.getvalue()))
    upright = picture.transpose(Image.Transpose.ROTATE_270)
    assert np.array_equal(round_trip(i2i, tagged, width=48, height=64), round_trip(i2i, upright, width=48, height=64))


def test_outpaint_puts_a_transparent_image_on_white(i2i):
    rgba = noise_image(3, size=(48, 40), channels=4)
    result = outpaint(i2i, rgba, left=8, right=8, top=12, bottom=12, mask_blur=1, prompt="a field", seed=2, steps=2,
                      sampler="Euler")
    # outside the blend (the keep rectangle inset by 2, blurred with sigma 2: 7 pixels in) the pixels come back as read
    assert np.array_equal(np.asarray(result.images[0])[19:45, 15:49], np.asarray(on_white(rgba))[7:33, 7:41])


# -- masked content: one spelling for the run and the infotext ----------------------------------------------------
@pytest.mark.parametrize("spelling, canonical", [("Latent Noise", "latent noise"), (" fill ", "fill"),
                                                 ("LATENT NOTHING", "latent nothing")])
def test_masked_content_is_normalised_before_it_runs(i2i, spelling, canonical):
    image = noise_image(5)
    kwargs = dict(init_images=[image], mask=square_mask(), denoising_strength=0.8, **SMALL)
    spelled = i2i(inpainting_fill=spelling, **kwargs)
    plain = i2i(inpainting_fill=canonical, **kwargs)
    assert np.array_equal(px(spelled.images[0]), px(plain.images[0]))
    assert f"Masked content: {canonical}," in spelled.infotexts[0]


def test_check_normalises_the_params_in_place():
    params = Img2ImgParams(**SMALL, init_images=[noise_image(1)], inpainting_fill=" Original", resize_mode="Crop and Resize")
    check_img2img_params(params, GenerationLimits(), 8)
    assert (params.inpainting_fill, params.resize_mode) == ("original", "crop and resize")


# -- switches are bools ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["inpaint_full_res", "inpainting_mask_invert", "exact_steps"])
@pytest.mark.parametrize("value", ["no", "False", 0, 1, None])
def test_switches_refuse_anything_but_a_bool(i2i, name, value, monkeypatch):
    fail_if_called(monkeypatch, i2i.model.unet)
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        i2i(init_images=[noise_image(1)], mask=square_mask(), **{name: value}, **SMALL)


def test_numpy_bools_are_accepted():
    params = Img2ImgParams(**SMALL, init_images=[noise_image(1)], inpaint_full_res=np.bool_(True),
                           inpainting_mask_invert=np.bool_(False), exact_steps=np.bool_(False))
    check_img2img_params(params, GenerationLimits(), 8)


def test_web_api_sends_a1111s_integer_switches_as_bools():
    import base64

    from webui.api_convert import RequestLimits, to_img2img_params
    from webui.api_requests import Img2ImgRequest

    buffer = io.BytesIO()
    noise_image(1).save(buffer, format="PNG")
    data = base64.b64encode(buffer.getvalue()).decode()
    for invert, full_res in ((1, 0), (0, 1)):
        request = Img2ImgRequest(init_images=[data], mask=data, steps=2, width=64, height=64,
                                 inpainting_mask_invert=invert, inpaint_full_res=full_res)
        params = to_img2img_params(request, limits=GenerationLimits(), request_limits=RequestLimits(), lora_names=set())
        assert (params.inpainting_mask_invert, params.inpaint_full_res) == (bool(invert), bool(full_res))


# -- numbers --------------------------------------------------------------------------------------------------------
def test_numpy_strength_is_accepted_as_the_number_written():
    params = Img2ImgParams(**{**SMALL, "steps": 10}, init_images=[noise_image(1)], denoising_strength=np.float32(0.7))
    check_img2img_params(params, GenerationLimits(), 8)
    assert type(params.denoising_strength) is float and params.denoising_strength == 0.7  # not 0.699999988


def test_numpy_strength_runs_like_the_float(i2i):
    a = i2i(init_images=[noise_image(1)], denoising_strength=np.float32(0.5), **SMALL)
    b = i2i(init_images=[noise_image(1)], denoising_strength=0.5, **SMALL)
    assert np.array_equal(px(a.images[0]), px(b.images[0])) and a.infotexts == b.infotexts


@pytest.mark.parametrize("bad", [True, "0.5", np.bool_(True), float("inf")])
def test_strength_still_refuses_non_numbers(bad):
    params = Img2ImgParams(**SMALL, init_images=[noise_image(1)], denoising_strength=bad)
    with pytest.raises(ValueError, match="denoising_strength must be a number"):
        check_img2img_params(params, GenerationLimits(), 8)


# -- degenerate sizes -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(0, 0), (0, 64), (64, 0)])
def test_empty_init_image_or_mask_is_refused(i2i, size, monkeypatch):
    fail_if_called(monkeypatch, i2i.model.unet)
    with pytest.raises(ValueError, match=r"init_images\[0\] is \d+x\d+ pixels"):
        i2i(init_images=[Image.new("RGB", size)], **SMALL)
    with pytest.raises(ValueError, match=r"mask is \d+x\d+ pixels"):
        i2i(init_images=[noise_image(1)], mask=Image.new("L", size), **SMALL)


def test_empty_outpaint_image_is_refused(i2i):
    with pytest.raises(ValueError, match="image is 0x0 pixels"):
        outpaint(i2i, Image.new("RGB", (0, 0)), left=64, top=64, prompt="a field", steps=2)


# -- resize and fill ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(64, 63), (63, 64), (64, 61), (61, 64), (64, 62)])
def test_resize_and_fill_leaves_no_black_band(size):
    filled = resize_image(Image.new("RGB", size, (200, 200, 200)), 64, 64, "resize and fill")
    assert np.array_equal(np.asarray(filled), np.full((64, 64, 3), 200, dtype=np.uint8))


def test_the_callers_params_object_is_left_as_given(i2i):
    from pipelines.img2img import Img2ImgParams

    params = Img2ImgParams(prompt="a cat", init_images=[Image.new("RGB", (64, 64), (90, 20, 20))], steps=2, width=64,
                           height=64, seed=1, inpainting_fill="Latent Noise", resize_mode="Just Resize")
    i2i(params)
    assert (params.inpainting_fill, params.resize_mode) == ("Latent Noise", "Just Resize")
