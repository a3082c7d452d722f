"""img2img resize_mode "just resize (latent upscale)" (A1111's resize_mode 3).

A1111 (modules/processing.py, StableDiffusionProcessingImg2Img.init) skips `images.resize_image` when
`resize_mode == 3`, VAE-encodes the init image at its own size and then stretches the latents with
`torch.nn.functional.interpolate(init_latent, size=(height // 8, width // 8), mode="bilinear")`.
"""

import numpy as np
import pytest
import torch
from PIL import Image

from pipelines.image_prep import resize_image, to_model_pixels
from pipelines.img2img import ImageToImage
from pipelines.vae_decode import decode_latents, encode_images

from .unet_spy import fail_if_called

SMALL = dict(width=64, height=64, steps=4, seed=3, prompt="a red circle")
MODE = "just resize (latent upscale)"


def noise_image(seed, size):
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


@pytest.fixture(scope="module")
def i2i(sd1_pipe):
    return ImageToImage.from_pipeline(sd1_pipe)


def test_the_init_image_is_encoded_at_its_own_size_and_its_latents_stretched_bilinearly(i2i):
    image = noise_image(1, (100, 60))  # not a multiple of 8: the encoder floors it to 12 x 7 cells
    # strength 0 with exact steps (A1111: a 0-step schedule) decodes the init latents unchanged: what the resize made
    result = i2i(init_images=[image], denoising_strength=0.0, exact_steps=True,
                 resize_mode="Just resize (latent upscale)", **SMALL)
    own = encode_images(i2i.model.vae, to_model_pixels([image]))
    assert tuple(own.shape[2:]) == (7, 12)
    stretched = torch.nn.functional.interpolate(own, size=(8, 8), mode="bilinear")
    expected = decode_latents(i2i.model.vae, stretched)[0]
    assert result.images[0].size == (64, 64)
    assert np.array_equal(np.asarray(result.images[0]), np.asarray(expected))
    pixel_resize = decode_latents(i2i.model.vae, encode_images(i2i.model.vae, to_model_pixels(
        [resize_image(image, 64, 64, "just resize")])))[0]
    assert not np.array_equal(np.asarray(result.images[0]), np.asarray(pixel_resize))


def test_a_denoising_run_gives_the_output_size_and_one_init_image_per_batch_image(i2i):
    images = [noise_image(1, (100, 60)), noise_image(2, (40, 48))]
    result = i2i(init_images=images, denoising_strength=0.5, resize_mode=MODE, batch_size=2, **SMALL)
    assert [image.size for image in result.images] == [(64, 64)] * 2
    assert "Resize mode" not in result.infotexts[0]  # A1111's infotext has no resize mode key


@pytest.mark.parametrize("extra, message", [
    (dict(mask=Image.new("L", (100, 60), 255)), "without a mask"),
])
def test_latent_resize_with_a_mask_is_refused_before_any_work(i2i, extra, message, monkeypatch):
    fail_if_called(monkeypatch, i2i.model.unet)
    with pytest.raises(ValueError, match=message):
        i2i(init_images=[noise_image(1, (100, 60))], resize_mode=MODE, **SMALL, **extra)


def test_latent_resize_with_controlnet_units_is_refused():
    from pipelines.controlnet import ControlImg2ImgParams
    from pipelines.img2img import check_img2img_params
    from pipelines.params import GenerationLimits

    params = ControlImg2ImgParams(init_images=[noise_image(1, (100, 60))], resize_mode=MODE, controlnets=[object()],
                                  **SMALL)
    with pytest.raises(ValueError, match="cannot be combined with ControlNet units"):
        check_img2img_params(params, GenerationLimits(), 8)


@pytest.mark.parametrize("size", [(64, 7), (7, 64), (5, 5)])
def test_an_init_image_under_one_latent_cell_is_refused_before_any_work(i2i, size, monkeypatch):
    """The VAE encodes the image at its own size: under 8 px a side its convolutions failed deep inside torch."""
    monkeypatch.setattr(i2i.model.vae, "encode", lambda *a, **k: pytest.fail("the VAE ran"))
    with pytest.raises(ValueError, match=rf"init_images\[1\] is {size[0]}x{size[1]} pixels.*at least 8 pixels a side"):
        i2i(init_images=[noise_image(1, (64, 64)), noise_image(2, size)], batch_size=2, resize_mode=MODE, **SMALL)


def test_an_image_of_one_latent_cell_still_runs(i2i):
    result = i2i(init_images=[noise_image(1, (8, 64))], denoising_strength=0.5, resize_mode=MODE, **SMALL)
    assert result.images[0].size == (64, 64)
