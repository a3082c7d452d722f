"""What a 9-channel inpainting UNet is given: the masked area of the masked image at 0 in model space (mid grey, as
diffusers and A1111), and without a mask a full mask over a fully masked image (A1111's conditioning for plain
img2img), so such checkpoints no longer fail outside inpainting."""

import numpy as np
import torch
from PIL import Image

from pipelines.image_prep import to_model_pixels
from pipelines.img2img import ImageToImage
from pipelines.inpaint_mask import full_mask_channels, masked_model_pixels
from pipelines.vae_decode import encode_images

from .unet_spy import recorded_unet_inputs
from .tiny_images import square_mask

SMALL = dict(prompt="a cat", seed=11, width=64, height=64, steps=3, sampler="Euler", denoising_strength=0.75)


def test_masked_area_is_zero_in_model_space():
    pixels = torch.rand(2, 3, 8, 8) * 2 - 1
    mask = Image.new("L", (8, 8), 0)
    mask.paste(255, (0, 0, 4, 8))
    mask.putpixel((5, 0), 128)  # A1111 rounds mask / 255: 128 repaints, 127 keeps
    mask.putpixel((6, 0), 127)
    masked = masked_model_pixels(pixels, mask)
    repaint = torch.from_numpy(np.asarray(mask) >= 128)
    assert torch.equal(masked[:, :, repaint], torch.zeros_like(masked[:, :, repaint]))
    assert torch.equal(masked[:, :, ~repaint], pixels[:, :, ~repaint])


def test_inpainting_unet_gets_the_mid_grey_masked_image(inpaint_pipe, picture):
    mask = square_mask()
    with recorded_unet_inputs(inpaint_pipe) as seen:
        inpaint_pipe(init_images=[picture], mask=mask, mask_blur=0, inpainting_fill="original", **SMALL)
    keep = torch.from_numpy(np.asarray(mask) < 128).float()
    oracle = encode_images(inpaint_pipe.model.vae, to_model_pixels([picture]) * keep)  # diffusers' masked image
    assert torch.equal(seen[0][0, 5:9], oracle[0])
    assert torch.equal(seen[0][0, 4:5], torch.from_numpy(np.asarray(mask.resize((8, 8))) >= 128).float()[None])


def test_inpainting_unet_runs_img2img_without_mask_with_a1111s_full_mask(inpaint_pipe, picture):
    with recorded_unet_inputs(inpaint_pipe) as seen:
        result = inpaint_pipe(init_images=[picture], batch_size=2, **SMALL)
    assert len(result.images) == 2 and len(seen) == 3  # int(0.75 * 3) + 1 steps
    blank = encode_images(inpaint_pipe.model.vae, torch.zeros(1, 3, 64, 64))[0]
    for model_input in seen:
        assert model_input.shape[1] == 9
        assert torch.equal(model_input[:, 4], torch.ones_like(model_input[:, 4]))  # everything repainted
        for row in model_input:
            assert torch.equal(row[5:9], blank)  # the init image fully masked out: 0 in model space


def test_full_mask_channels_only_for_inpainting_unets(inpaint_pipe, sd1_pipe):
    assert full_mask_channels(sd1_pipe.model, 2, (4, 8, 8)) is None
    channels = full_mask_channels(inpaint_pipe.model, 2, (4, 8, 8))
    assert channels.shape == (2, 5, 8, 8)


def test_an_inpainting_checkpoint_runs_txt2img_with_a_full_mask(inpaint_pipe):
    from pipelines.txt2img import TextToImage

    pipe = TextToImage.from_pipeline(inpaint_pipe)
    with recorded_unet_inputs(pipe) as seen:
        result = pipe(prompt="a cat", width=64, height=64, steps=2, seed=1, sampler="Euler")
    assert len(result.images) == 1 and len(seen) == 2
    blank = encode_images(pipe.model.vae, torch.zeros(1, 3, 64, 64))[0]
    for model_input in seen:
        assert model_input.shape[1] == 9 and torch.equal(model_input[:, 4], torch.ones_like(model_input[:, 4]))
        assert all(torch.equal(row[5:9], blank) for row in model_input)


def test_mask_channel_is_a1111s_nearest_shrink_of_the_full_size_rounded_mask():
    # A1111's inpainting_image_conditioning: round the (blurred) mask at full size, then F.interpolate (nearest) to the
    # latent size; diffusers' prepare_mask_latents likewise. The blending mask's bicubic resize differs at the edge.
    from pipelines.inpaint_mask import blur_mask, conditioning_mask, latent_mask, prepare_mask

    mask = Image.new("L", (128, 96), 0)
    mask.paste(255, (37, 29, 83, 61))
    blurred = blur_mask(prepare_mask(mask, (128, 96)), 4, 4)
    full = torch.from_numpy(np.asarray(blurred, dtype=np.float32) / 255)[None, None]
    expected = torch.nn.functional.interpolate(torch.round(full), size=(12, 16))
    assert torch.equal(conditioning_mask(blurred, (16, 12)), expected)
    assert not torch.equal(latent_mask(blurred, (16, 12)), expected)  # the case the hunt found: 4 cells differ
    assert torch.equal(conditioning_mask(blurred, (16, 12), round=False), torch.nn.functional.interpolate(full, size=(12, 16)))


def test_inpainting_unet_gets_the_conditioning_mask_of_the_blurred_mask(inpaint_pipe, picture):
    from pipelines.inpaint_mask import blur_mask, conditioning_mask, prepare_mask

    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (13, 19, 45, 41))
    with recorded_unet_inputs(inpaint_pipe) as seen:
        inpaint_pipe(init_images=[picture], mask=mask, mask_blur=4, inpainting_fill="original", **SMALL)
    expected = conditioning_mask(blur_mask(prepare_mask(mask, (64, 64)), 4, 4), (8, 8))
    assert torch.equal(seen[0][0, 4:5], expected[0])


def test_an_inpainting_model_records_a1111s_conditional_mask_weight_and_flag(inpaint_pipe, sd1_pipe, picture):
    # A1111's create_infotext: "Conditional mask weight" (the inpainting_mask_weight setting, 1.0) whenever
    # is_using_inpainting_conditioning, which txt2img sets for a hybrid/concat model too.
    from pipelines.infotext import parse_infotext
    from pipelines.txt2img import TextToImage

    small = dict(SMALL, steps=1)
    runs = {
        "inpaint": inpaint_pipe(init_images=[picture], mask=square_mask(), **small),
        "img2img": inpaint_pipe(init_images=[picture], **small),
        "txt2img": TextToImage.from_pipeline(inpaint_pipe)(**{k: v for k, v in small.items()
                                                              if k != "denoising_strength"}),
    }
    for name, result in runs.items():
        assert result.inpainting_conditioning, name
        assert ", Conditional mask weight: 1.0, " in result.infotexts[0], name
        assert parse_infotext(result.infotexts[0])["Conditional mask weight"] == "1.0"
    plain = ImageToImage.from_pipeline(sd1_pipe)(init_images=[picture], mask=square_mask(), **small)
    assert not plain.inpainting_conditioning and "Conditional mask weight" not in plain.infotexts[0]
