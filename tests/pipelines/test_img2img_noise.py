"""A1111's img2img "Noise multiplier" and "Extra noise" (pipelines/img2img_noise.py).

A1111 1.10 reference: `StableDiffusionProcessingImg2Img.sample` (`x *= initial_noise_multiplier`), then
`KDiffusionSampler.sample_img2img` (`xi = x + noise * sigma_sched[0]; xi += noise * opts.img2img_extra_noise`) and
`CompVisTimestepsSampler.sample_img2img` (`xi += noise * opts.img2img_extra_noise * sqrt_alpha_cumprod`).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image

from pipelines.img2img import ImageToImage
from pipelines.img2img_noise import noised_init
from pipelines.infotext import parse_infotext
from pipelines.params import GenerationLimits
from pipelines.samplers import make_scheduler

from .samplers.kdiffusion_reference import SD15_SCHEDULER_CONFIG

SMALL = dict(width=64, height=64, steps=6, seed=3, prompt="a red circle", denoising_strength=0.6)


def _tensors():
    generator = torch.Generator().manual_seed(5)
    return torch.randn(1, 4, 8, 8, generator=generator), torch.randn(1, 4, 8, 8, generator=generator)


def test_sigma_space_samplers_add_the_extra_noise_as_it_is():
    init, noise = _tensors()
    scheduler = make_scheduler("Euler", SD15_SCHEDULER_CONFIG, "Karras")
    scheduler.set_timesteps(10)
    scheduler.set_begin_index(4)
    t = scheduler.timesteps[4:5]
    sigma = scheduler.sigmas[4].item()
    got = noised_init(scheduler, init, noise, t, initial_noise_multiplier=0.9, img2img_extra_noise=0.3)
    torch.testing.assert_close(got, init + noise * 0.9 * sigma + noise * 0.9 * 0.3, rtol=1e-6, atol=1e-6)


def test_variance_preserving_samplers_scale_it_by_sqrt_alpha_bar():
    init, noise = _tensors()
    scheduler = make_scheduler("DDIM", SD15_SCHEDULER_CONFIG)
    scheduler.set_timesteps(10)
    t = torch.tensor([500])
    alpha_bar = scheduler.alphas_cumprod[500].item()
    got = noised_init(scheduler, init, noise, t, initial_noise_multiplier=1.1, img2img_extra_noise=0.5)
    expected = init * alpha_bar**0.5 + noise * 1.1 * (1 - alpha_bar) ** 0.5 + noise * 1.1 * 0.5 * alpha_bar**0.5
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("sampler", ["Euler", "DDIM", "DPM++ 2M"])
def test_defaults_are_add_noise_itself(sampler):
    init, noise = _tensors()
    scheduler = make_scheduler(sampler, SD15_SCHEDULER_CONFIG)
    scheduler.set_timesteps(10)
    t = scheduler.timesteps[3:4]
    if hasattr(scheduler, "set_begin_index"):
        scheduler.set_begin_index(3)
    assert torch.equal(noised_init(scheduler, init, noise, t), scheduler.add_noise(init, noise, t))


@pytest.fixture(scope="module")
def i2i(sd1_pipe):
    return ImageToImage.from_pipeline(sd1_pipe)


def _image():
    rng = np.random.default_rng(1)
    return Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))


@pytest.mark.parametrize("settings, written", [
    ({"initial_noise_multiplier": 0.8}, {"Noise multiplier": "0.8"}),
    ({"img2img_extra_noise": 0.4}, {"Extra noise": "0.4"}),
])
def test_img2img_changes_with_them_and_records_them(i2i, settings, written):
    plain = i2i(**SMALL, init_images=[_image()], sampler="Euler")
    changed = i2i(**SMALL, init_images=[_image()], sampler="Euler", **settings)
    assert not np.array_equal(np.asarray(plain.images[0]), np.asarray(changed.images[0]))
    recorded = parse_infotext(changed.infotexts[0], defaults=False)
    assert {key: recorded.get(key) for key in written} == written
    assert "Noise multiplier" not in parse_infotext(plain.infotexts[0], defaults=False)
    same = i2i(**SMALL, init_images=[_image()], sampler="Euler", initial_noise_multiplier=1.0, img2img_extra_noise=0.0)
    assert np.array_equal(np.asarray(plain.images[0]), np.asarray(same.images[0]))


@pytest.mark.parametrize("settings, message", [
    ({"initial_noise_multiplier": -0.1}, r"initial_noise_multiplier must be a number in \[0, 1\.5\] .* got -0\.1"),
    ({"img2img_extra_noise": math.nan}, r"img2img_extra_noise must be a number in \[0, 1\] .* got nan"),
    # A1111's Settings > img2img sliders bound them: 1e30 would overflow the start latents to inf
    ({"initial_noise_multiplier": 1e30}, r"initial_noise_multiplier must be a number in \[0, 1\.5\] .* got 1e\+30"),
    ({"initial_noise_multiplier": 1.501}, r"initial_noise_multiplier must be a number in \[0, 1\.5\]"),
    ({"img2img_extra_noise": 1.01}, r"img2img_extra_noise must be a number in \[0, 1\] .* got 1\.01"),
])
def test_bad_values_are_refused_before_any_work(i2i, settings, message):
    with pytest.raises(ValueError, match=message):
        i2i(**SMALL, init_images=[_image()], **settings)


def test_the_api_reads_them_from_settings_the_request_and_an_infotext():
    import base64
    import io

    from webui.api_convert import RequestLimits, to_img2img_params
    from webui.api_infotext import apply_infotext
    from webui.api_requests import Img2ImgRequest

    buffer = io.BytesIO()
    _image().save(buffer, format="PNG")
    body = {"init_images": [base64.b64encode(buffer.getvalue()).decode()], "sampler_name": "Euler"}

    def params(request_body, settings=None):
        request = apply_infotext(Img2ImgRequest(**request_body))
        return to_img2img_params(request, limits=GenerationLimits(), request_limits=RequestLimits(), lora_names=None,
                                 sampler_options=settings)

    got = params(body, {"initial_noise_multiplier": 0.9, "img2img_extra_noise": 0.2})
    assert (got.initial_noise_multiplier, got.img2img_extra_noise) == (0.9, 0.2)
    assert params({**body, "initial_noise_multiplier": 0.7}).initial_noise_multiplier == 0.7
    text = ("a red circle\nSteps: 4, Sampler: Euler, CFG scale: 7, Seed: 1, Size: 64x64, Denoising strength: 0.5, "
            "Noise multiplier: 0.95, Extra noise: 0.1")
    pasted = params({**body, "infotext": text})
    assert (pasted.initial_noise_multiplier, pasted.img2img_extra_noise) == (0.95, 0.1)
    with pytest.raises(ValueError, match="img2img_extra_noise must be"):
        params({**body, "override_settings": {"img2img_extra_noise": -1}})


def test_the_sgm_noise_multiplier_is_txt2img_only_as_in_a1111(i2i):
    from pipelines.sampler_parameters import SamplerParameters

    plain = i2i(**SMALL, init_images=[_image()], sampler="Euler")
    sgm = i2i(**SMALL, init_images=[_image()], sampler="Euler",
              sampler_parameters=SamplerParameters(sgm_noise_multiplier=True))
    assert np.array_equal(np.asarray(plain.images[0]), np.asarray(sgm.images[0]))
    assert "SGM noise multiplier" not in sgm.infotexts[0]
