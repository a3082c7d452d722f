"""The order of an infotext's keys (`ModelSession.infotext`), A1111's create_infotext order: `Denoising strength`
right after the Extra seed keys, before `Clip skip`, `ENSD` and `RNG`, and the other hires keys after those."""

from __future__ import annotations

from PIL import Image

from pipelines.hires import HiresFix
from pipelines.img2img import ImageToImage
from pipelines.infotext import split_infotext

SMALL = dict(prompt="a cube", width=64, height=64, steps=2, seed=3, clip_skip=2, sampler="Euler a", ensd=31337)


def keys(infotext: str) -> list[str]:
    return list(split_infotext(infotext)[2])


def test_img2img_writes_denoising_strength_after_the_seed_keys(sd1_pipe):
    result = ImageToImage.from_pipeline(sd1_pipe)(init_images=[Image.new("RGB", (64, 64), "red")], subseed=5,
                                                  subseed_strength=0.3, seed_resize_from_w=128,
                                                  seed_resize_from_h=64, denoising_strength=0.5, **SMALL)
    assert keys(result.infotexts[0]) == ["Steps", "Sampler", "Schedule type", "CFG scale", "Seed", "Size",
                                         "Model hash", "Model", "Variation seed", "Variation seed strength",
                                         "Seed resize from", "Denoising strength", "Clip skip", "ENSD", "RNG",
                                         "Version"]


def test_hires_writes_denoising_strength_there_and_its_other_keys_after_rng(sd1_pipe):
    result = HiresFix(sd1_pipe)(hr_scale=1.5, denoising_strength=0.5, hr_upscaler="Lanczos", **SMALL)
    assert keys(result.infotexts[0]) == ["Steps", "Sampler", "Schedule type", "CFG scale", "Seed", "Size",
                                         "Model hash", "Model", "Denoising strength", "Clip skip", "ENSD", "RNG",
                                         "Hires upscale", "Hires upscaler", "Version"]
