"""Hires fix: A1111's sizes and crops, A1111 infotext keys, latent and pixel upscalers,
second-pass steps, bad input."""

import numpy as np
import pytest

from pipelines.hires import HiresFix, HiresParams, check_hires_params, hires_target_size
from pipelines.hires_size import HiresSize
from pipelines.infotext import parse_infotext
from pipelines.params import GenerationLimits
from pipelines.txt2img import TextToImage

from .unet_spy import fail_if_called, replace_forward_for_the_test, replaced_forward

BASE = dict(prompt="a castle", seed=21, width=32, height=32, steps=3, sampler="Euler")


@pytest.fixture(scope="module")
def hires(sd1_pipe):
    return HiresFix(sd1_pipe)


@pytest.mark.parametrize("upscaler", ["Latent", "Latent (nearest)", "Lanczos"])
def test_output_size_seeds_and_infotext(hires, upscaler):
    result = hires(hr_scale=2.0, hr_upscaler=upscaler, hr_second_pass_steps=2, denoising_strength=0.6,
                   batch_size=2, batch_count=2, **BASE)
    assert [image.size for image in result.images] == [(64, 64)] * 4
    assert result.seeds == [21, 22, 23, 24]
    params = parse_infotext(result.infotexts[3])
    # A1111 records the first-pass size and steps, plus the hires recipe
    assert (params["Size-1"], params["Size-2"], params["Steps"], params["Seed"]) == ("32", "32", "3", "24")
    assert (params["Hires upscale"], params["Hires steps"], params["Hires upscaler"]) == ("2", "2", upscaler)
    assert params["Denoising strength"] == "0.6"


def test_second_pass_refines_the_first_pass_and_runs_its_own_steps(hires):
    first = TextToImage.from_pipeline(hires.pipe)(**BASE)
    progress = []
    # Latent: no round trip through the tiny random VAE between the passes, which alone moves every pixel
    result = hires(hr_scale=2.0, hr_upscaler="Latent", hr_second_pass_steps=4, denoising_strength=0.25,
                   callback=lambda p: progress.append((p.step, p.total_steps)), **BASE)
    # first pass: 3 steps; second: exactly its 4 steps, of an int(4 / 0.25) = 16-step schedule (A1111's hires pass)
    assert progress == [(1, 3), (2, 3), (3, 3), (1, 4), (2, 4), (3, 4), (4, 4)]
    upscaled_first = np.asarray(first.images[0].resize((64, 64))).astype(float)
    final = np.asarray(result.images[0]).astype(float)
    unrelated = np.asarray(TextToImage.from_pipeline(hires.pipe)(**{**BASE, "seed": 99, "width": 64, "height": 64}).images[0])
    assert np.abs(final - upscaled_first).mean() < np.abs(unrelated.astype(float) - upscaled_first).mean()


def test_resize_to_explicit_size_keeps_aspect_when_one_side_is_zero(hires):
    params = HiresParams(width=32, height=48, hr_resize_x=64, hr_resize_y=0)
    assert hires_target_size(params) == (64, 96)
    result = hires(hr_resize_x=48, hr_resize_y=0, hr_upscaler="Latent", **{**BASE, "width": 32, "height": 48})
    assert result.images[0].size == (48, 72)
    params = parse_infotext(result.infotexts[0])
    assert params["Hires resize-1"] == "48" and params["Hires resize-2"] == "0" and "Hires upscale" not in params


@pytest.mark.parametrize("change, message", [
    (dict(hr_scale=0.5), "hr_scale"), (dict(hr_scale=float("nan")), "hr_scale"),
    (dict(hr_scale=True), "hr_scale"), (dict(denoising_strength=1.5), "denoising_strength"),
    (dict(hr_upscaler="ESRGAN_4x"), "Unknown hr_upscaler"), (dict(hr_second_pass_steps=-1), "hr_second_pass_steps"),
    (dict(hr_scale=4.0, width=1024, height=1024), "pixels, over the budget"),
    (dict(hr_resize_x=4), "target size 0x0 is not usable"),  # under one latent cell
    # covering 2048x64 from 64x1024 would upscale to 2048x32768 before cropping
    (dict(width=64, height=1024, hr_resize_x=2048, hr_resize_y=64), "upscales to 2048x32768 before cropping"),
])
def test_bad_hires_settings_are_refused_before_any_pass(hires, change, message, monkeypatch):
    fail_if_called(monkeypatch, hires.model.unet)
    with pytest.raises(ValueError, match=message):
        hires(**{**BASE, **change})


# -- A1111's target size and crop ------------------------------------------------------------

def test_scale_1_3_on_512_is_usable_and_the_infotext_reproduces_it():
    size = check_hires_params(HiresParams(width=512, height=512, hr_scale=1.3), GenerationLimits(), 8)
    assert size == HiresSize(upscale_width=665, upscale_height=665, crop=(0, 0, 83, 83), factor=8)
    assert size.size == (664, 664)
    fields = parse_infotext("a castle\nSteps: 20, Sampler: Euler, CFG scale: 7, Seed: 1, Size: 512x512, "
                            "Denoising strength: 0.7, Hires upscale: 1.3, Hires upscaler: Latent")
    params = HiresParams(width=int(fields["Size-1"]), height=int(fields["Size-2"]), hr_scale=float(fields["Hires upscale"]),
                         hr_resize_x=int(fields["Hires resize-1"]), hr_resize_y=int(fields["Hires resize-2"]))
    assert check_hires_params(params, GenerationLimits(), 8) == size




def _first_pass_latents(hires, params):
    """The first pass's final latents, as the step callback sees them (steps=BASE's 3)."""
    seen = []
    hires(**params, callback=lambda progress: seen.append(progress.latents.clone()))
    return seen[params["steps"] - 1]


@pytest.mark.parametrize("upscaler", ["Latent (nearest)", "Nearest"])
def test_resize_128x64_from_64x64_crops_a_128x128_upscale_instead_of_stretching(hires, upscaler):
    import torch
    from PIL import Image

    from pipelines.image_prep import to_model_pixels
    from pipelines.vae_decode import decode_latents, encode_images

    # strength 0: the second pass runs no step, so the output is the decoded starting latents
    params = dict(BASE, width=64, height=64, hr_resize_x=128, hr_resize_y=64, hr_upscaler=upscaler,
                  denoising_strength=0.0)
    result = hires(**params)
    assert result.images[0].size == (128, 64)
    first = _first_pass_latents(hires, params)
    vae = hires.model.vae
    if upscaler == "Nearest":  # the whole 128x128 image is encoded, then latent rows are cut, as in A1111
        image = decode_latents(vae, first)[0].resize((128, 128), Image.Resampling.NEAREST)
        square = encode_images(vae, to_model_pixels([image]))
        stretched = encode_images(vae, to_model_pixels([decode_latents(vae, first)[0].resize((128, 64), Image.Resampling.NEAREST)]))
    else:
        square = torch.nn.functional.interpolate(first, size=(16, 16), mode="nearest")
        stretched = torch.nn.functional.interpolate(first, size=(8, 16), mode="nearest")
    output = np.asarray(result.images[0])
    assert np.array_equal(output, np.asarray(decode_latents(vae, square[:, :, 4:12, :])[0]))
    assert not np.array_equal(output, np.asarray(decode_latents(vae, stretched)[0]))


@pytest.mark.parametrize("upscaler", ["Latent", "Lanczos"])
def test_scale_1_3_runs_at_a1111s_size_and_records_the_users_scale(hires, upscaler):
    progress = []
    result = hires(**{**BASE, "width": 64, "height": 64}, hr_scale=1.3, hr_upscaler=upscaler, hr_second_pass_steps=2,
                   denoising_strength=0.5, callback=lambda p: progress.append(tuple(p.latents.shape[2:])))
    # 64 x 1.3 = 83.2 -> upscaled to 83 px -> 10 latent cells -> sampled and returned at 80 px
    assert result.images[0].size == (80, 80)
    assert progress == [(8, 8)] * 3 + [(10, 10)] * 2
    params = parse_infotext(result.infotexts[0])
    assert (params["Size-1"], params["Size-2"], params["Hires upscale"]) == ("64", "64", "1.3")


def test_pixel_upscaler_encodes_the_full_non_multiple_of_8_image(hires):
    from PIL import Image

    from pipelines.image_prep import to_model_pixels
    from pipelines.vae_decode import decode_latents, encode_images

    params = dict(BASE, width=64, height=64, hr_scale=1.3, hr_upscaler="Lanczos", denoising_strength=0.0)
    result = hires(**params)
    vae = hires.model.vae
    image = decode_latents(vae, _first_pass_latents(hires, params))[0]
    # A1111 resizes to 83x83 and lets the VAE encoder floor it to 10 cells; resizing to 80 first differs
    full = encode_images(vae, to_model_pixels([image.resize((83, 83), Image.Resampling.LANCZOS)]))
    assert full.shape[2:] == (10, 10)
    assert np.array_equal(np.asarray(result.images[0]), np.asarray(decode_latents(vae, full)[0]))


def test_sdxl_second_pass_is_conditioned_on_the_size_before_cropping(sdxl_pipe, monkeypatch):
    unet = sdxl_pipe.model.unet
    forward, sizes = unet.forward, []

    def recording(*args, **kwargs):
        sizes.append(tuple(int(v) for v in kwargs["added_cond_kwargs"]["time_ids"][0]))
        return forward(*args, **kwargs)

    replace_forward_for_the_test(monkeypatch, unet, recording)
    result = HiresFix(sdxl_pipe)(**{**BASE, "width": 64, "height": 64, "steps": 2}, hr_resize_x=128, hr_resize_y=64,
                                 hr_second_pass_steps=2, denoising_strength=0.5)
    assert result.images[0].size == (128, 64)
    # A1111's SdConditioning for the hires pass carries hr_upscale_to_x/y: (h, w, crop top, left, h, w)
    assert sizes[0] == (64, 64, 0, 0, 64, 64) and sizes[-1] == (128, 128, 0, 0, 128, 128)


@pytest.mark.parametrize("hr_steps, denoise, calls", [(10, 0.5, 10), (0, 0.7, 3)])
def test_the_second_pass_runs_exactly_its_steps_over_a1111s_stretched_schedule(sd1_pipe, hr_steps, denoise, calls):
    # A1111's sample_hr_pass passes steps=hr_second_pass_steps or steps to sample_img2img, so setup_img2img_steps
    # takes its fixed-steps branch: exactly that many steps of an int(steps / denoise)-step schedule (10 of 20,
    # starting at its step 10; 3 of int(3 / 0.7) = 4), not int(denoise * steps) + 1 steps of the plain one.
    from pipelines.samplers import make_scheduler

    seen = []
    original = sd1_pipe.model.unet.forward

    def spy(sample, timestep, *args, **kwargs):
        seen.append(float(timestep.flatten()[0]))
        return original(sample, timestep, *args, **kwargs)

    with replaced_forward(sd1_pipe.model.unet, spy):
        HiresFix(sd1_pipe)(**BASE, hr_scale=2.0, hr_upscaler="Latent", hr_second_pass_steps=hr_steps,
                           denoising_strength=denoise)
    second_pass = seen[BASE["steps"]:]
    total = int((hr_steps or BASE["steps"]) / denoise)
    scheduler = make_scheduler("Euler", dict(sd1_pipe.model.scheduler_config))
    scheduler.set_timesteps(total)
    assert len(second_pass) == calls
    assert second_pass == pytest.approx([float(t) for t in scheduler.timesteps[total - calls:]])


def test_a_generator_seeds_hires_fix_as_the_same_seed_does(hires):
    import torch

    call = dict(**BASE, hr_scale=2.0, hr_upscaler="Latent", denoising_strength=0.5)
    seeded = hires(**{**call, "seed": 7})
    generated = hires(**{key: value for key, value in call.items() if key != "seed"},
                      generator=torch.Generator().manual_seed(7))
    assert generated.seeds == [7] and generated.images[0].tobytes() == seeded.images[0].tobytes()


def test_a_model_upscalers_pass_is_held_to_the_hires_budget_not_its_own(hires, tmp_path):
    # the x4 network's 128x128 pass (for a 64x64 hires size) is over the file's own budget of 32x32 but inside hires
    # fix's (4x the generation limits, at least UpscaleLimits'): the hires pass must run, not be refused mid-run
    from mixkit.testing.tiny_upscalers import TINY_RRDB, save_upscaler, tiny_upscaler
    from pipelines.model_upscale import LOADED, register_model_upscalers
    from pipelines.upscale import UPSCALERS, UpscaleLimits

    save_upscaler(tiny_upscaler(TINY_RRDB, seed=9), tmp_path / "4x-Small.pth", "esrgan")
    register_model_upscalers(tmp_path, limits=UpscaleLimits(max_pixels=32 * 32))
    try:
        result = hires(hr_scale=2.0, hr_upscaler="4x-Small", hr_second_pass_steps=1, denoising_strength=0.3, **BASE)
        assert result.images[0].size == (64, 64)
    finally:
        UPSCALERS.unregister("4x-Small")
        LOADED.clear()


def test_a_model_upscaler_file_upscales_the_first_pass_by_its_name(hires, tmp_path):
    from mixkit.testing.tiny_upscalers import TINY_RRDB, save_upscaler, tiny_upscaler
    from pipelines.hires import hires_upscaler_names
    from pipelines.model_upscale import LOADED, register_model_upscalers
    from pipelines.upscale import UPSCALERS

    save_upscaler(tiny_upscaler(TINY_RRDB, seed=9), tmp_path / "4x-UltraSharp.pth", "esrgan")
    register_model_upscalers(tmp_path)
    try:
        assert hires_upscaler_names()[-1] == "4x-UltraSharp"
        result = hires(hr_scale=2.0, hr_upscaler="4x-UltraSharp", hr_second_pass_steps=1, denoising_strength=0.3, **BASE)
        lanczos = hires(hr_scale=2.0, hr_upscaler="Lanczos", hr_second_pass_steps=1, denoising_strength=0.3, **BASE)
        assert result.images[0].size == (64, 64)
        assert parse_infotext(result.infotexts[0])["Hires upscaler"] == "4x-UltraSharp"
        assert result.images[0].tobytes() != lanczos.images[0].tobytes()  # the network, not a resize, made the pixels
    finally:
        UPSCALERS.unregister("4x-UltraSharp")
        LOADED.clear()
