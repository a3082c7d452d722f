"""InstructPix2Pix (8-channel UNet) in img2img: the image channels, A1111's three-way Image CFG, the refusals, and the
infotext; diffusers' StableDiffusionInstructPix2PixPipeline on the same tiny components is the oracle."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from pipelines.img2img import Img2ImgParams, ImageToImage
from pipelines.instruct_pix2pix import ImageGuidance, check_image_cfg_scale, image_guidance_for
from pipelines.seeds import image_generators, initial_noise
from pipelines.vae_decode import encode_images
from tests.pipelines.unet_spy import recorded_unet_inputs

SMALL = dict(width=64, height=64, steps=4)


def pixels(image):
    return np.asarray(image).astype(np.int16)


@pytest.fixture(scope="module")
def ip2p_pipe(tiny_ip2p_dir):
    return ImageToImage.from_pretrained(tiny_ip2p_dir)


@pytest.fixture(scope="module")
def photo():
    rng = np.random.default_rng(4)
    return Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))


def test_the_model_is_described_as_instruct_pix2pix(ip2p_pipe):
    assert ip2p_pipe.model.unet.config.in_channels == 8
    assert ip2p_pipe.model.description == "SD 1.x instruct-pix2pix"


def test_image_guidance_adds_the_image_term_to_the_ordinary_cfg():
    guided, with_image, without_image = torch.tensor([1.0]), torch.tensor([3.0]), torch.tensor([0.5])
    # A1111: u + cfg (c - ic) + icfg (ic - u) == [ic + cfg (c - ic)] + (icfg - 1)(ic - u)
    assert ImageGuidance(scale=1.5).guided(guided, with_image, without_image).item() == 1.0 + 0.5 * 2.5
    cond, image_cond, uncond, cfg, icfg = 2.0, 3.0, 0.5, 7.0, 1.5
    ordinary = image_cond + cfg * (cond - image_cond)
    a1111 = uncond + cfg * (cond - image_cond) + icfg * (image_cond - uncond)
    assert ImageGuidance(scale=icfg).guided(torch.tensor(ordinary), torch.tensor(image_cond),
                                            torch.tensor(uncond)).item() == a1111


def test_no_image_pass_at_image_cfg_one_or_none_or_for_other_models(ip2p_pipe, sd1_model):
    assert image_guidance_for(ip2p_pipe.model, 1.0) is None
    assert image_guidance_for(ip2p_pipe.model, None) is None
    assert image_guidance_for(sd1_model, 1.5) is None
    assert image_guidance_for(ip2p_pipe.model, 0.0) == ImageGuidance(scale=0.0, channels=4)


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), True, "1.5", 101])
def test_image_cfg_scale_outside_its_range_is_refused(bad):
    with pytest.raises(ValueError, match=r"image_cfg_scale must be a number in \[0, 100\].*got"):
        check_image_cfg_scale(bad, 100.0)


def test_numpy_image_cfg_scale_becomes_its_shortest_float():
    assert check_image_cfg_scale(np.float32(1.3), 100.0) == 1.3


@pytest.mark.parametrize("image_cfg_scale", [1.0, 1.5, 2.5])
def test_matches_diffusers_instruct_pix2pix_pipeline_on_the_same_latents(ip2p_pipe, tiny_ip2p_dir, photo,
                                                                        image_cfg_scale):
    """Oracle: diffusers' StableDiffusionInstructPix2PixPipeline with the same scheduler, image and starting latents.
    At strength 1 the sampler runs the whole schedule from the init latents noised to its first sigma (A1111's
    0.999), which diffusers is handed as `latents` (it multiplies them by init_noise_sigma)."""
    from diffusers import StableDiffusionInstructPix2PixPipeline

    from pipelines.image_prep import to_model_pixels
    from pipelines.samplers import make_scheduler

    ours = ip2p_pipe(prompt="make it red", negative_prompt="ugly", init_images=[photo], seed=7, sampler="Euler",
                     schedule_type="Automatic", cfg_scale=5.0, image_cfg_scale=image_cfg_scale,
                     denoising_strength=1.0, **SMALL)
    reference = StableDiffusionInstructPix2PixPipeline.from_pretrained(tiny_ip2p_dir, safety_checker=None,
                                                                       requires_safety_checker=False)
    reference.scheduler = make_scheduler("Euler", dict(reference.scheduler.config), "Automatic")
    reference.scheduler.set_timesteps(SMALL["steps"])
    init = encode_images(reference.vae, to_model_pixels([photo]))
    noise = initial_noise(image_generators([7]), (4, 8, 8))
    start = reference.scheduler.add_noise(init, noise, reference.scheduler.timesteps[:1])
    theirs = reference(prompt="make it red", negative_prompt="ugly", image=photo,
                       latents=start / reference.scheduler.init_noise_sigma, guidance_scale=5.0,
                       image_guidance_scale=image_cfg_scale, num_inference_steps=SMALL["steps"],
                       output_type="np").images[0]
    theirs = (theirs * 255).round().astype(np.int16)
    assert np.abs(pixels(ours.images[0]) - theirs).max() <= 1
    assert f"Image CFG scale: {image_cfg_scale:g}," in ours.infotexts[0]


def test_image_cfg_scale_changes_the_image_and_one_runs_one_unet_call_per_step(ip2p_pipe, photo):
    settings = dict(prompt="make it red", init_images=[photo], seed=3, batch_size=2, **SMALL)
    with recorded_unet_inputs(ip2p_pipe) as plain:
        at_one = ip2p_pipe(image_cfg_scale=1.0, **settings)
    with recorded_unet_inputs(ip2p_pipe) as guided:
        at_two = ip2p_pipe(image_cfg_scale=2.0, **settings)
    steps = int(0.75 * SMALL["steps"]) + 1
    # 1.0: one call per step, prompt + negative rows, every row with the image (A1111's is_edit_model False)
    assert [x.shape[0] for x in plain] == [4] * steps
    assert all(x[:, 4:].abs().sum() > 0 for x in plain)
    # otherwise: one more call per step on the two negative rows with the image channels zeroed
    assert [x.shape[0] for x in guided] == [4, 2] * steps
    assert all(torch.count_nonzero(x[:, 4:]) == 0 for x in guided[1::2])
    assert torch.equal(guided[1][:, :4], guided[0][2:, :4])  # the negative rows' own latents
    assert not np.array_equal(pixels(at_one.images[0]), pixels(at_two.images[0]))


def test_the_image_channels_are_the_unscaled_posterior_mean_of_the_resized_image(ip2p_pipe, photo):
    from pipelines.image_prep import resize_image, to_model_pixels

    with recorded_unet_inputs(ip2p_pipe) as inputs:
        ip2p_pipe(prompt="x", init_images=[photo], seed=1, **{**SMALL, "width": 48, "height": 64})
    vae = ip2p_pipe.model.vae
    resized = resize_image(photo, 48, 64, "just resize")
    with torch.inference_mode():
        expected = vae.encode(to_model_pixels([resized])).latent_dist.mean
    torch.testing.assert_close(inputs[0][:1, 4:], expected, rtol=0, atol=1e-5)


def test_inpainting_keeps_unmasked_pixels_and_feeds_the_image(ip2p_pipe, photo):
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (16, 16, 48, 48))
    result = ip2p_pipe(prompt="make it red", init_images=[photo], mask=mask, mask_blur=0, seed=2, **SMALL)
    out = pixels(result.images[0])
    assert np.array_equal(out[:8], pixels(photo)[:8])
    assert not np.array_equal(out[20:44, 20:44], pixels(photo)[20:44, 20:44])
    assert "Image CFG scale: 1.5," in result.infotexts[0]


def test_infotext_records_image_cfg_scale_after_cfg_scale_and_not_when_none(ip2p_pipe, photo):
    text = ip2p_pipe(prompt="x", init_images=[photo], seed=1, cfg_scale=6, image_cfg_scale=1.25, **SMALL).infotexts[0]
    assert "CFG scale: 6, Image CFG scale: 1.25, Seed: 1," in text
    none = ip2p_pipe(prompt="x", init_images=[photo], seed=1, image_cfg_scale=None, **SMALL)
    assert "Image CFG scale" not in none.infotexts[0]
    ones = ip2p_pipe(prompt="x", init_images=[photo], seed=1, image_cfg_scale=1.0, **SMALL)
    assert np.array_equal(pixels(none.images[0]), pixels(ones.images[0]))  # None runs as 1


def test_other_models_ignore_image_cfg_scale_and_do_not_record_it(sd1_model, photo):
    pipe = ImageToImage(sd1_model)
    first = pipe(prompt="x", init_images=[photo], seed=1, image_cfg_scale=2.0, **SMALL)
    second = pipe(prompt="x", init_images=[photo], seed=1, image_cfg_scale=0.5, **SMALL)
    assert np.array_equal(pixels(first.images[0]), pixels(second.images[0]))
    assert "Image CFG scale" not in first.infotexts[0]


def test_txt2img_with_an_instruct_pix2pix_model_is_refused_before_any_work(ip2p_pipe, monkeypatch):
    from pipelines.txt2img import TextToImage
    from tests.pipelines.unet_spy import fail_if_called

    fail_if_called(monkeypatch, ip2p_pipe.model.unet)
    with pytest.raises(ValueError, match=r"is an instruct-pix2pix checkpoint .*txt2img has no input image for it\. "
                                         r"Use img2img"):
        TextToImage.from_pipeline(ip2p_pipe)(prompt="x", **SMALL)


def test_skip_early_cfg_with_image_guidance_is_refused_and_ngms_dropped(ip2p_pipe, photo):
    with pytest.raises(ValueError, match=r"skip_early_cond=0.5 \(Skip Early CFG\) cannot run with an instruct-pix2pix "
                                         r"model's image_cfg_scale=1.5"):
        ip2p_pipe(prompt="x", init_images=[photo], skip_early_cond=0.5, **SMALL)
    # at 1.0 it is the ordinary CFG, which skips as usual
    assert "Skip Early CFG: 0.5" in ip2p_pipe(prompt="x", init_images=[photo], skip_early_cond=0.5,
                                              image_cfg_scale=1.0, **SMALL).infotexts[0]
    # A1111 applies NGMS to non-edit models only: not run, not recorded
    plain = ip2p_pipe(prompt="x", init_images=[photo], seed=1, **SMALL)
    ngms = ip2p_pipe(prompt="x", init_images=[photo], seed=1, s_min_uncond=10.0, **SMALL)
    assert "NGMS" not in ngms.infotexts[0]
    assert np.array_equal(pixels(plain.images[0]), pixels(ngms.images[0]))


def test_a_refiner_is_refused(ip2p_pipe, photo, sd1_model):
    with pytest.raises(ValueError, match="A refiner cannot finish an instruct-pix2pix model's image"):
        ip2p_pipe(Img2ImgParams(prompt="x", init_images=[photo], refiner=sd1_model, **SMALL))


def test_a_lora_tag_applies_for_the_call_and_is_removed(tiny_ip2p_dir, photo, tmp_path):
    from mixkit.testing.tiny_lora import write_attention_lora

    write_attention_lora(ImageToImage.from_pretrained(tiny_ip2p_dir).model.unet, tmp_path / "shiny.safetensors")
    pipe = ImageToImage.from_pretrained(tiny_ip2p_dir, lora_dir=tmp_path)
    settings = dict(init_images=[photo], seed=4, **SMALL)
    plain = pipe(prompt="make it red", **settings)
    tagged = pipe(prompt="make it red <lora:shiny:0.8>", **settings)
    assert not np.array_equal(pixels(plain.images[0]), pixels(tagged.images[0]))
    assert np.array_equal(pixels(plain.images[0]), pixels(pipe(prompt="make it red", **settings).images[0]))
    assert "Image CFG scale: 1.5," in tagged.infotexts[0] and "Lora hashes" in tagged.infotexts[0]


def test_a_controlnet_unit_sees_the_plain_latents_on_every_pass(tiny_ip2p_dir, photo, controlnet):
    """The ControlNet gets the 4 latent channels (as beside an inpainting UNet), on the image-free pass too."""
    from pipelines.controlnet import ControlNetImageToImage, ControlNetUnit

    pipe = ControlNetImageToImage.from_pretrained(tiny_ip2p_dir)
    seen = []
    handle = controlnet.register_forward_pre_hook(lambda module, args: seen.append(tuple(args[0].shape)))
    try:
        settings = dict(prompt="make it red", init_images=[photo], seed=4, **SMALL)
        on = pipe(controlnets=[ControlNetUnit(controlnet, photo, weight=1.0)], **settings)
    finally:
        handle.remove()
    steps = int(0.75 * SMALL["steps"]) + 1
    assert seen == [(2, 4, 8, 8), (1, 4, 8, 8)] * steps
    off = pipe(controlnets=[ControlNetUnit(controlnet, photo, weight=0.0)], **settings)
    assert np.array_equal(pixels(off.images[0]), pixels(ImageToImage.from_pipeline(pipe)(**settings).images[0]))
    assert not np.array_equal(pixels(on.images[0]), pixels(off.images[0]))
