"""Several init images in one call, as A1111's `StableDiffusionProcessingImg2Img.init` takes them: fewer images
than batch_size shrink the batch to one image each (`elif len(imgs) <= self.batch_size: self.batch_size =
len(imgs)`), more are refused; and inpainting init images of different sizes on the whole picture, each with the
mask prepared at its own size; plus the checks of `latent_mask`."""

import numpy as np
import pytest
from PIL import Image

from pipelines.image_prep import resize_image
from pipelines.img2img import Img2ImgParams, ImageToImage, check_img2img_params
from pipelines.params import GenerationLimits

from .unet_spy import fail_if_called

SMALL = dict(width=64, height=64, steps=3, seed=5, prompt="a red circle", sampler="Euler")


@pytest.fixture(scope="module")
def i2i(sd1_pipe):
    return ImageToImage.from_pipeline(sd1_pipe)


def noise_image(seed, size=(64, 64)):
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


def square_mask(size=(64, 64)):
    mask = Image.new("L", size, 0)
    mask.paste(255, (size[0] // 4, size[1] // 4, size[0] // 2, size[1] // 2))
    return mask


def recorded_inputs(pipe, monkeypatch):
    seen = []
    real = ImageToImage._prepare_inpaint

    def recording(self, params, images):
        seen.append(real(self, params, images))
        return seen[-1]

    monkeypatch.setattr(ImageToImage, "_prepare_inpaint", recording)
    return seen


def test_fewer_images_than_batch_size_shrink_the_batch(i2i):
    images = [noise_image(1), noise_image(2)]
    shrunk = i2i(init_images=images, batch_size=3, batch_count=2, **SMALL)
    exact = i2i(init_images=images, batch_size=2, batch_count=2, **SMALL)
    assert shrunk.seeds == exact.seeds == [5, 6, 7, 8]  # A1111: batch k takes all_seeds[2k:2k + 2]
    assert shrunk.infotexts == exact.infotexts
    for a, b in zip(shrunk.images, exact.images):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_the_check_shrinks_batch_size_in_place_and_refuses_more_images_than_it():
    limits = GenerationLimits()
    params = Img2ImgParams(init_images=[noise_image(1), noise_image(2)], batch_size=4, **SMALL)
    check_img2img_params(params, limits, 8)
    assert params.batch_size == 2
    one = Img2ImgParams(init_images=[noise_image(1)], batch_size=4, **SMALL)
    check_img2img_params(one, limits, 8)
    assert one.batch_size == 4  # one image serves the whole batch
    too_many = Img2ImgParams(init_images=[noise_image(k) for k in range(3)], batch_size=2, **SMALL)
    with pytest.raises(ValueError, match="Got 3 init images for batch_size 2; give at most 2"):
        check_img2img_params(too_many, limits, 8)


def test_a_prompt_list_must_follow_the_shrunk_batch():
    params = Img2ImgParams(init_images=[noise_image(1), noise_image(2)], batch_size=3,
                           **{**SMALL, "prompt": ["a"] * 3})
    with pytest.raises(ValueError, match="prompt has 3 entries for batch_size 3, but 2 init images shrink the batch"):
        check_img2img_params(params, GenerationLimits(), 8)
    fitting = Img2ImgParams(init_images=[noise_image(1), noise_image(2)], batch_size=3,
                            **{**SMALL, "prompt": ["a", "b"]})
    check_img2img_params(fitting, GenerationLimits(), 8)  # one prompt per init image fits the shrunk batch
    assert fitting.batch_size == 2


def test_whole_picture_inpainting_takes_init_images_of_different_sizes(i2i, monkeypatch):
    small, large, mask = noise_image(1), noise_image(2, (128, 128)), square_mask()
    seen = recorded_inputs(i2i, monkeypatch)
    with pytest.warns(UserWarning, match="Mask resized from 64x64 to the image's 128x128"):
        result = i2i(init_images=[small, large], mask=mask, batch_size=2, denoising_strength=0.5, **SMALL)
        for image in (small, large):  # each image alone: what the batch must have prepared for it
            i2i(init_images=[image], mask=mask, denoising_strength=0.5, **SMALL)
    batch, alone_small, alone_large = seen
    for k, alone in enumerate((alone_small, alone_large)):
        assert np.array_equal(np.asarray(batch.overlay_masks[k]), np.asarray(alone.overlay_masks[0]))
        assert np.array_equal(batch.latent_mask[k].numpy(), alone.latent_mask[0].numpy())
        assert np.array_equal(np.asarray(batch.originals[k]), np.asarray(alone.originals[0]))
    for k, image in enumerate((small, large)):
        kept = np.asarray(batch.overlay_masks[k]) == 0
        assert kept.mean() > 0.5
        resized = np.asarray(resize_image(image, 64, 64, "just resize"))
        assert np.array_equal(np.asarray(result.images[k])[kept], resized[kept])


def test_only_masked_still_needs_one_image_size(i2i, monkeypatch):
    fail_if_called(monkeypatch, i2i.model.unet)
    with pytest.raises(ValueError, match="only masked.*same size"):
        i2i(init_images=[noise_image(1), noise_image(2, (128, 128))], mask=square_mask(), inpaint_full_res=True,
            batch_size=2, **SMALL)


@pytest.mark.parametrize("extra, error, message", [
    (dict(latent_mask="mask.png", mask=square_mask()), TypeError, "latent_mask must be a PIL image"),
    (dict(latent_mask=square_mask()), ValueError, "latent_mask needs a mask"),
    (dict(latent_mask=square_mask(), mask=square_mask(), inpaint_full_res=True), ValueError, "whole picture"),
])
def test_latent_mask_is_checked_before_running(extra, error, message):
    params = Img2ImgParams(init_images=[noise_image(1)], **extra, **SMALL)
    with pytest.raises(error, match=message):
        check_img2img_params(params, GenerationLimits(), 8)
