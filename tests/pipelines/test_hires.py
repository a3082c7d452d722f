"""Hires fix: final size, A1111 infotext keys, latent and pixel upscalers, second-pass steps, bad input."""

import numpy as np
import pytest

from pipelines.hires import HiresFix, HiresParams, hires_target_size
from pipelines.infotext import parse_infotext
from pipelines.txt2img import TextToImage

BASE = dict(prompt="a castle", seed=21, width=32, height=32, steps=3, sampler="Euler")


@pytest.fixture(scope="module")
def hires(tiny_sd1_dir):
    return HiresFix(TextToImage.from_pretrained(tiny_sd1_dir))


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
    result = hires(hr_scale=2.0, hr_upscaler="Lanczos", hr_second_pass_steps=4, denoising_strength=0.5,
                   callback=lambda p: progress.append((p.step, p.total_steps)), **BASE)
    # first pass: 3 steps; second: int(0.5 * 4) + 1 = 3 of a 4-step schedule (A1111's img2img rule)
    assert progress == [(1, 3), (2, 3), (3, 3), (1, 3), (2, 3), (3, 3)]
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
    (dict(hr_scale=4.0, width=1024, height=1024), "pixels, over the budget"), (dict(hr_resize_x=60), "multiple of 8"),
])
def test_bad_hires_settings_are_refused_before_any_pass(hires, change, message, monkeypatch):
    monkeypatch.setattr(hires.model.unet, "forward", lambda *a, **k: pytest.fail("the UNet ran"))
    with pytest.raises(ValueError, match=message):
        hires(**{**BASE, **change})
