"""Inpainting's "latent noise" fill with A1111's Extra seed options: A1111 fills the masked latents with
`create_random_tensors(shape, seeds)` in `StableDiffusionProcessingImg2Img.init`, the seeds' own first draw, without
the variation seed or "Resize seed from"; only the sampling noise (`p.rng`) carries those."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

import pipelines.img2img as img2img_module
from pipelines.img2img import ImageToImage

SMALL = dict(width=64, height=64, steps=3, sampler="Euler", prompt="a cube", denoising_strength=0.5)


@pytest.mark.parametrize("extras", [
    dict(),  # the sampling noise and the fill are one draw
    dict(subseed=9, subseed_strength=0.6),
    dict(seed_resize_from_w=48, seed_resize_from_h=80),
    dict(subseed=9, subseed_strength=1.0, seed_resize_from_w=96, seed_resize_from_h=32),
])
def test_the_latent_noise_fill_is_the_seeds_own_noise(sd1_pipe, monkeypatch, extras):
    filled = []
    real = img2img_module._mask_blend
    monkeypatch.setattr(img2img_module, "_mask_blend", lambda init, *rest: filled.append(init.clone()) or
                        real(init, *rest))
    pipe = ImageToImage.from_pipeline(sd1_pipe)
    everything = Image.new("L", (64, 64), 255)  # masked everywhere: the filled latents are the fill noise alone
    pipe(init_images=[Image.new("RGB", (64, 64), "red")], mask=everything, mask_blur=0, inpainting_fill="latent noise",
         seed=4, batch_size=2, **SMALL, **extras)
    seeds = [4, 4] if extras.get("subseed_strength") else [4, 5]
    expected = torch.stack([torch.randn((4, 8, 8), generator=torch.Generator("cpu").manual_seed(seed))
                            for seed in seeds])
    assert len(filled) == 1 and torch.equal(filled[0].cpu().float(), expected)
