"""A refiner with hires fix: A1111's default `hires_fix_refiner_pass` ("second pass") refines the hires pass only,
and the image's one infotext names the refiner."""

from __future__ import annotations

import pytest

from .unet_spy import recorded_calls

SMALL = dict(prompt="a red fox", negative_prompt="blurry", width=64, height=64, seed=3, sampler="Euler")


@pytest.fixture(scope="module")
def refiner_model(tiny_sdxl_refiner_dir):
    from mixkit.models.diffusion.loading import load_diffusion_model

    return load_diffusion_model(tiny_sdxl_refiner_dir)


def test_the_refiner_finishes_the_hires_pass_only(tiny_sdxl_dir, refiner_model):
    from pipelines.hires import HiresFix
    from pipelines.infotext import parse_infotext
    from pipelines.txt2img import TextToImage

    hires = HiresFix(TextToImage.from_pretrained(tiny_sdxl_dir))
    log = []
    with recorded_calls(hires.model.unet, "base", log), recorded_calls(refiner_model.unet, "refiner", log):
        result = hires(**SMALL, steps=4, hr_scale=1.5, denoising_strength=0.5, refiner=refiner_model,
                       refiner_switch_at=0.8)
    # first pass, A1111's Euler 4 steps (t = 999, 666, 333, 0; 0 reaches 0.8 but the first pass is not refined);
    # hires pass: exactly 4 steps of an 8-step schedule, t = 428.1, 285.4, 142.7, 0 -> the refiner from 142.7
    assert [name for name, *_ in log] == ["base"] * 4 + ["base"] * 2 + ["refiner"] * 2
    assert [round(t, 1) for _, t, *_ in log[4:]] == [428.1, 285.4, 142.7, 0.0]
    values = parse_infotext(result.infotexts[0])
    assert values["Refiner"] == f"{refiner_model.name} [{refiner_model.model_hash}]"
    assert values["Refiner switch at"] == "0.8" and values["Hires upscale"] == "1.5"
    assert "Hires refiner" not in values  # A1111 writes it only for a non-default hires_fix_refiner_pass
