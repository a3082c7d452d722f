"""A 9-channel inpainting UNet with an inpaint unit: its mask and masked-image channels come from the unit, as
sd-webui-controlnet's hook builds them ("Replace x_t to support inpaint models", scripts/hook.py):
mask = max_pool2d((mask > 0.5), 8), masked = VAE(picture in [-1, 1] * (1 - mask)), concatenated after the latents."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from pipelines.controlnet import ControlNetImageToImage, ControlNetTextToImage, ControlNetUnit

from .tiny_images import box_mask

SIZE = 64
SMALL = dict(prompt="a cat", seed=5, width=SIZE, height=SIZE, steps=2, sampler="Euler")


@pytest.fixture(scope="module")
def mask():
    return box_mask((20, 12, 44, 37))  # not on the 8-pixel grid: pooling marks every cell it touches


def unet_inputs(pipe, run) -> list:
    seen = []
    handle = pipe.model.unet.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone()))
    try:
        result = run()
    finally:
        handle.remove()
    return seen, result


def expected_channels(pipe, picture, mask) -> torch.Tensor:
    """The extension's channels, restated: block max of the thresholded mask, VAE of the masked picture."""
    from pipelines.vae_decode import encode_images

    m = (np.asarray(mask, dtype=np.float32) / 255.0 > 0.5).astype(np.float32)
    pooled = m.reshape(SIZE // 8, 8, SIZE // 8, 8).max(axis=(1, 3))
    pixels = (np.asarray(picture, dtype=np.float32) / 127.5 - 1.0) * (1.0 - m)[..., None]
    latents = encode_images(pipe.model.vae, torch.from_numpy(pixels).permute(2, 0, 1)[None].contiguous())
    return torch.cat([torch.from_numpy(pooled)[None, None], latents], dim=1)


@pytest.mark.parametrize("module", ["inpaint_only", "inpaint"])
def test_txt2img_inpaint_unit_gives_the_unet_its_mask_and_masked_picture(tiny_sd1_inpaint_dir, controlnet, picture, mask, module):
    pipe = ControlNetTextToImage.from_pretrained(tiny_sd1_inpaint_dir)
    unit = ControlNetUnit(controlnet, picture, preprocessor=module, mask=mask)
    seen, result = unet_inputs(pipe, lambda: pipe(controlnets=[unit], **SMALL))
    want = expected_channels(pipe, picture, mask)
    assert want[0, 0].sum() == 4 * 4  # cells of rows 1-4 and columns 2-5 are touched by the mask
    assert len(seen) == SMALL["steps"]
    for model_input in seen:
        assert model_input.shape[1] == 9
        for row in model_input:
            assert torch.equal(row[4:], want[0].to(row))
    assert result.images[0].size == (SIZE, SIZE)


def test_other_units_leave_the_whole_image_default(tiny_sd1_inpaint_dir, controlnet, picture):
    pipe = ControlNetTextToImage.from_pretrained(tiny_sd1_inpaint_dir)
    seen, _ = unet_inputs(pipe, lambda: pipe(controlnets=[ControlNetUnit(controlnet, picture)], **SMALL))
    assert all(torch.equal(x[:, 4], torch.ones_like(x[:, 4])) for x in seen)  # A1111's full mask: repaint all


def test_the_last_inpaint_unit_decides_and_img2img_inpainting_takes_it_too(tiny_sd1_inpaint_dir, controlnet, picture, mask):
    pipe = ControlNetImageToImage.from_pretrained(tiny_sd1_inpaint_dir)
    other = Image.new("L", (SIZE, SIZE), 0)
    other.paste(255, (0, 0, 16, 16))
    units = [ControlNetUnit(controlnet, picture, preprocessor="inpaint", mask=other),
             ControlNetUnit(controlnet, picture, preprocessor="inpaint", mask=mask)]
    seen, _ = unet_inputs(pipe, lambda: pipe(init_images=[picture], mask=other, controlnets=units,
                                             denoising_strength=0.75, **SMALL))
    want = expected_channels(pipe, picture, mask)
    assert seen and all(torch.equal(x[0, 4:], want[0].to(x)) for x in seen)


def test_a_nine_channel_controlnet_is_refused_on_a_four_channel_model(tiny_sd1_dir, picture):
    from diffusers import ControlNetModel

    from mixkit.testing.tiny_controlnet import TINY_CONDITIONING_CHANNELS

    nine = ControlNetModel(block_out_channels=(32, 64), layers_per_block=1, in_channels=9,
                           down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), cross_attention_dim=32,
                           norm_num_groups=8, attention_head_dim=4,
                           conditioning_embedding_out_channels=TINY_CONDITIONING_CHANNELS)
    pipe = ControlNetTextToImage.from_pretrained(tiny_sd1_dir)
    with pytest.raises(ValueError, match=r"ControlNet 0 \(controlnet\) takes 9 input channels, but this model's UNet "
                                         r"gives 4"):
        pipe(controlnets=[ControlNetUnit(nine, picture)], **SMALL)
