"""A1111's inpainting_mask_weight ("Inpainting conditioning mask strength", infotext "Conditional mask weight"): an
inpainting checkpoint's conditioning image is `torch.lerp(image, image * (1 - mask), weight)` (A1111's
`inpainting_image_conditioning`), with a mask, without one (the whole image faded) and in hires fix's second pass."""

import numpy as np
import pytest
import torch
from PIL import Image

from pipelines.image_prep import to_model_pixels
from pipelines.inpaint_mask import masked_model_pixels
from pipelines.vae_decode import encode_images

from .unet_spy import recorded_unet_inputs
from .tiny_images import square_mask

SMALL = dict(prompt="a cat", seed=11, width=64, height=64, steps=3, sampler="Euler", denoising_strength=0.75)


def a1111_lerp(pixels, mask, weight):
    """A1111's formula restated with torch.lerp on the rounded mask (1 = repaint)."""
    repaint = torch.round(torch.from_numpy(np.asarray(mask, dtype=np.float32) / 255))[None, None]
    return torch.lerp(pixels, pixels * (1.0 - repaint), weight)


@pytest.mark.parametrize("weight", [0.0, 0.25, 0.5, 1.0])
def test_the_masked_pixels_are_a1111s_lerp(weight):
    pixels = torch.rand(2, 3, 8, 8) * 2 - 1
    mask = Image.new("L", (8, 8), 0)
    mask.paste(255, (0, 0, 4, 8))
    mask.putpixel((5, 0), 128)
    mask.putpixel((6, 0), 127)
    torch.testing.assert_close(masked_model_pixels(pixels, mask, weight=weight), a1111_lerp(pixels, mask, weight),
                               rtol=0, atol=1e-7)
    torch.testing.assert_close(masked_model_pixels(pixels, None, weight=weight), pixels * (1 - weight), rtol=0, atol=0)


def test_inpainting_with_a_weight_conditions_on_the_partly_masked_image(inpaint_pipe, picture):
    mask = square_mask()
    with recorded_unet_inputs(inpaint_pipe) as seen:
        result = inpaint_pipe(init_images=[picture], mask=mask, mask_blur=0, inpainting_mask_weight=0.3, **SMALL)
    oracle = encode_images(inpaint_pipe.model.vae, a1111_lerp(to_model_pixels([picture]), mask, 0.3))
    torch.testing.assert_close(seen[0][0, 5:9], oracle[0], rtol=0, atol=1e-6)
    assert ", Conditional mask weight: 0.3, " in result.infotexts[0]


def test_img2img_without_a_mask_fades_the_whole_image(inpaint_pipe, picture):
    with recorded_unet_inputs(inpaint_pipe) as seen:
        inpaint_pipe(init_images=[picture], batch_size=2, inpainting_mask_weight=0.25, **SMALL)
    oracle = encode_images(inpaint_pipe.model.vae, to_model_pixels([picture]) * 0.75)[0]
    for model_input in seen:
        assert torch.equal(model_input[:, 4], torch.ones_like(model_input[:, 4]))
        for row in model_input:
            torch.testing.assert_close(row[5:9], oracle, rtol=0, atol=1e-6)


def test_weight_zero_conditions_on_the_init_image_itself(inpaint_pipe, picture):
    with recorded_unet_inputs(inpaint_pipe) as seen:
        inpaint_pipe(init_images=[picture], mask=square_mask(), mask_blur=0, inpainting_mask_weight=0.0, **SMALL)
    torch.testing.assert_close(seen[0][0, 5:9], encode_images(inpaint_pipe.model.vae, to_model_pixels([picture]))[0],
                               rtol=0, atol=1e-6)


def test_weight_one_is_bit_identical_to_the_default(inpaint_pipe, picture):
    default = inpaint_pipe(init_images=[picture], mask=square_mask(), **SMALL).images[0]
    explicit = inpaint_pipe(init_images=[picture], mask=square_mask(), inpainting_mask_weight=1, **SMALL).images[0]
    assert np.array_equal(np.asarray(default), np.asarray(explicit))


def test_hires_second_pass_conditions_on_the_faded_upscaled_image(inpaint_pipe):
    from pipelines.hires import HiresFix
    from pipelines.txt2img import TextToImage

    hires = HiresFix(TextToImage.from_pipeline(inpaint_pipe))
    args = dict(prompt="a cat", seed=5, width=64, height=64, steps=2, sampler="Euler",
                hr_scale=1.5, hr_upscaler="Lanczos", denoising_strength=0.5)
    first = TextToImage.from_pipeline(inpaint_pipe)(prompt="a cat", seed=5, width=64, height=64, steps=2,
                                                    sampler="Euler").images[0]
    with recorded_unet_inputs(inpaint_pipe) as seen:
        result = hires(**args, inpainting_mask_weight=0.5)
    second_pass = [x for x in seen if x.shape[-1] == 12]
    assert second_pass and all(x.shape[-2:] == (12, 12) for x in second_pass)
    upscaled = first.resize((96, 96), Image.LANCZOS)
    oracle = encode_images(inpaint_pipe.model.vae, to_model_pixels([upscaled]) * 0.5)[0]
    torch.testing.assert_close(second_pass[0][0, 5:9], oracle, rtol=0, atol=1e-5)
    assert ", Conditional mask weight: 0.5, " in result.infotexts[0]
    with recorded_unet_inputs(inpaint_pipe) as seen_default:
        hires(**args)
    blank = encode_images(inpaint_pipe.model.vae, torch.zeros(1, 3, 96, 96))[0]
    assert torch.equal([x for x in seen_default if x.shape[-1] == 12][0][0, 5:9], blank)


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.5", True, float("nan")])
def test_a_bad_weight_is_refused_before_anything_runs(inpaint_pipe, picture, bad):
    with pytest.raises(ValueError, match="inpainting_mask_weight must be a number in \\[0, 1\\]"):
        inpaint_pipe(init_images=[picture], inpainting_mask_weight=bad, **SMALL)
