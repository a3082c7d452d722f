"""img2img and inpainting: A1111 strength semantics, exact paste-back, resize modes, bad input."""

import numpy as np
import pytest
from PIL import Image

from pipelines.image_prep import resize_image
from pipelines.img2img import ImageToImage, img2img_steps
from pipelines.inpaint_mask import blur_mask

SMALL = dict(width=64, height=64, steps=10, seed=3, prompt="a red circle")


def noise_image(seed, size=(64, 64)):
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


def px(image):
    return np.asarray(image).astype(np.int16)


@pytest.fixture(scope="module")
def i2i(sd1_pipe):
    return ImageToImage.from_pipeline(sd1_pipe)


@pytest.fixture(scope="module")
def i2i_xl(sdxl_pipe):
    return ImageToImage.from_pipeline(sdxl_pipe)


def test_steps_follow_a1111():
    assert img2img_steps(20, 0.75, exact_steps=False) == (20, 16)
    assert img2img_steps(20, 0.75, exact_steps=True) == (26, 20)
    assert img2img_steps(20, 1.0, exact_steps=False) == (20, 20)
    # A1111: t_enc = int(0 * 20) = 0, sigma_sched = sigmas[19:]: one step from the smallest sigma
    assert img2img_steps(20, 0.0, exact_steps=False) == (20, 1)
    # fixed steps: A1111's schedule has int(...) if strength > 0 else 0 steps, sigmas [0], nothing runs
    assert img2img_steps(20, 0.0, exact_steps=True) == (20, 0)


def test_strength_0_runs_a1111s_last_step_and_with_exact_steps_is_a_vae_round_trip(i2i):
    from pipelines.image_prep import to_model_pixels
    from pipelines.vae_decode import decode_latents, encode_images

    image = noise_image(1)
    round_trip = decode_latents(i2i.model.vae, encode_images(i2i.model.vae, to_model_pixels([image])))[0]
    calls = []
    exact = i2i(init_images=[image], denoising_strength=0.0, exact_steps=True, callback=calls.append, **SMALL)
    assert np.array_equal(px(exact.images[0]), px(round_trip))
    assert calls == []
    one = i2i(init_images=[image], denoising_strength=0.0, callback=calls.append, **SMALL)
    assert len(calls) == 1
    assert not np.array_equal(px(one.images[0]), px(round_trip))
    # A1111's t_enc is int(strength * steps) = 0 for both: the same noising and the same single last step
    tiny = i2i(init_images=[image], denoising_strength=0.01, **SMALL)
    assert np.array_equal(px(one.images[0]), px(tiny.images[0]))


@pytest.mark.parametrize("fixture", ["i2i", "i2i_xl"])
def test_strength_1_is_a1111s_0_999_noising_the_input(request, fixture):
    # A1111 caps strength at 0.999 and noises the init image to sigma_max: a trace of the input stays.
    pipe = request.getfixturevalue(fixture)
    a = pipe(init_images=[noise_image(1)], denoising_strength=1.0, **SMALL)
    capped = pipe(init_images=[noise_image(1)], denoising_strength=0.999, **SMALL)
    b = pipe(init_images=[noise_image(2)], denoising_strength=1.0, **SMALL)
    assert np.array_equal(px(a.images[0]), px(capped.images[0]))
    assert not np.array_equal(px(a.images[0]), px(b.images[0]))


def test_partial_strength_runs_a1111_step_count_and_depends_on_input(i2i):
    seen = []
    a = i2i(init_images=[noise_image(1)], denoising_strength=0.5, callback=lambda p: seen.append((p.step, p.total_steps)), **SMALL)
    b = i2i(init_images=[noise_image(2)], denoising_strength=0.5, **SMALL)
    assert seen[-1] == (6, 6)  # int(0.5 * 10) + 1
    assert not np.array_equal(px(a.images[0]), px(b.images[0]))
    assert "Denoising strength: 0.5" in a.infotexts[0]


def test_batch_image_reproduced_by_its_seed(i2i):
    batch = i2i(init_images=[noise_image(1)], denoising_strength=0.6, batch_size=2, sampler="Euler a", **{**SMALL, "seed": 40})
    single = i2i(init_images=[noise_image(1)], denoising_strength=0.6, sampler="Euler a", **{**SMALL, "seed": 41})
    assert np.abs(px(batch.images[1]) - px(single.images[0])).max() <= 1


def square_mask(size=(64, 64), box=(16, 16, 48, 48)):
    mask = Image.new("L", size, 0)
    mask.paste(255, box)
    return mask


@pytest.mark.parametrize("fixture", ["i2i", "i2i_xl"])
@pytest.mark.parametrize("fill", ["original", "fill", "latent noise", "latent nothing"])
def test_inpaint_keeps_unmasked_pixels_bit_identical(request, fixture, fill):
    pipe = request.getfixturevalue(fixture)
    image, mask = noise_image(5), square_mask()
    result = pipe(init_images=[image], mask=mask, mask_blur=4, inpainting_fill=fill, denoising_strength=0.8, **SMALL)
    out, src = px(result.images[0]), px(image)
    untouched = np.asarray(blur_mask(mask, 4)) == 0  # beyond A1111's blur (OpenCV's kernel, 2.5 sigma a side)
    assert np.array_equal(out[untouched], src[untouched])
    assert np.abs(out[~untouched] - src[~untouched]).mean() > 5
    assert "Mask blur: 4" in result.infotexts[0] and f"Masked content: {fill}" in result.infotexts[0]


def test_inpaint_not_masked_inverts(i2i):
    image, mask = noise_image(5), square_mask()
    result = i2i(init_images=[image], mask=mask, mask_blur=0, inpainting_mask_invert=True, **SMALL)
    out, src = px(result.images[0]), px(image)
    assert np.array_equal(out[16:48, 16:48], src[16:48, 16:48])


def test_only_masked_works_on_the_region_and_returns_the_full_image(i2i):
    image, mask = noise_image(6, (128, 96)), square_mask((128, 96), (60, 40, 76, 56))
    result = i2i(init_images=[image], mask=mask, mask_blur=2, inpaint_full_res=True, inpaint_full_res_padding=8, **SMALL)
    out, src = px(result.images[0]), px(image)
    assert result.images[0].size == (128, 96)
    untouched = np.asarray(blur_mask(mask, 2)) == 0
    assert np.array_equal(out[untouched], src[untouched])
    assert "Inpaint area: Only masked" in result.infotexts[0]


def test_all_black_mask_returns_the_input_and_all_white_repaints_everything(i2i):
    image = noise_image(7)
    black = i2i(init_images=[image], mask=Image.new("L", (64, 64), 0), **SMALL)
    assert np.array_equal(px(black.images[0]), px(image))
    white = i2i(init_images=[image], mask=Image.new("L", (64, 64), 255), mask_blur=0, **SMALL)
    plain = i2i(init_images=[image], **SMALL)
    assert np.abs(px(white.images[0]) - px(plain.images[0])).max() <= 2


def test_mask_of_another_size_is_resized_with_a_warning_or_refused(i2i):
    image = noise_image(8)
    with pytest.warns(UserWarning, match="Mask resized"):
        i2i(init_images=[image], mask=square_mask((128, 128), (32, 32, 96, 96)), **{**SMALL, "steps": 2})
    with pytest.raises(ValueError, match="aspect ratios differ"):
        i2i(init_images=[image], mask=square_mask((128, 64), (0, 0, 10, 10)), **SMALL)


@pytest.mark.parametrize("bad, error, message", [
    (dict(denoising_strength=1.5), ValueError, "denoising_strength"),
    (dict(denoising_strength=-0.1), ValueError, "denoising_strength"),
    (dict(denoising_strength=float("nan")), ValueError, "denoising_strength"),
    (dict(init_images=[]), ValueError, "non-empty"),
    (dict(init_images=["not an image"]), TypeError, "PIL image"),
    (dict(resize_mode="stretch"), ValueError, "resize mode"),
    (dict(inpainting_fill="lava"), ValueError, "masked content"),
    (dict(mask_blur=-1), ValueError, "mask_blur"),
])
def test_bad_input(i2i, bad, error, message):
    kwargs = {**SMALL, "init_images": [noise_image(1)], **bad}
    with pytest.raises(error, match=message):
        i2i(**kwargs)


@pytest.mark.parametrize("mode, expected_size", [("just resize", (64, 32)), ("crop and resize", (64, 32)), ("resize and fill", (64, 32))])
def test_resize_modes_give_the_target_size(mode, expected_size):
    assert resize_image(noise_image(1, (50, 50)), 64, 32, mode).size == expected_size


def test_crop_and_resize_keeps_the_centre_and_fill_stretches_edges():
    image = Image.new("RGB", (40, 20), (255, 0, 0))
    image.paste((0, 0, 255), (0, 0, 40, 1))  # blue top row
    filled = resize_image(image, 40, 40, "resize and fill")
    assert filled.getpixel((20, 0)) == (0, 0, 255)  # the top band repeats the top row
    assert filled.getpixel((20, 39))[0] > 200  # the bottom band repeats the red bottom row
    cropped = resize_image(image, 20, 20, "crop and resize")
    assert cropped.getpixel((10, 10))[0] > 200
