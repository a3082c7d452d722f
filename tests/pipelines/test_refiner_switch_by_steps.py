"""A1111's "Switch to refiner by sampling steps instead of model timesteps" (`refiner_switch_by_sample_steps`): the
refiner takes over at the first model call `i` of the run with `i / total_steps >= refiner_switch_at`, `total_steps`
being the steps the run makes (an img2img or hires pass: its truncated tail) times 2 for second-order samplers."""

from __future__ import annotations

import pytest

from pipelines.refiner import sample_steps_switch_index
from .unet_spy import run_base_and_refiner

SMALL = dict(prompt="a red fox", negative_prompt="blurry", width=64, height=64, seed=3, sampler="Euler")


def _names(pipe, refiner_model, **values):
    result, log = run_base_and_refiner(pipe, refiner_model, **{**SMALL, **values})
    return result, [name for name, *_ in log]


def test_sample_steps_switch_index_is_a1111s_step_ratio():
    assert sample_steps_switch_index(10, 10, 0.8) == 8  # 8 / 10
    assert sample_steps_switch_index(10, 10, 0.85) == 9  # 8 / 10 < 0.85 <= 9 / 10
    assert sample_steps_switch_index(9, 10, 0.5) == 5  # Heun, 5 steps: 9 calls over A1111's total_steps 10
    assert sample_steps_switch_index(4, 4, 0.8) is None  # 3 / 4 < 0.8: never reached
    assert sample_steps_switch_index(0, 4, 0.5) is None


@pytest.mark.parametrize("by_steps, expected", [
    # Euler, 10 steps, t = 999, 888, ..., 111, 0: by noise level (999 - 111) / 1000 = 0.888 reaches 0.85 at the 9th
    # call; by steps 8 / 10 does not, 9 / 10 does
    (False, ["base"] * 8 + ["refiner"] * 2),
    (True, ["base"] * 9 + ["refiner"]),
])
def test_txt2img_switch_by_steps_or_noise_level(base_pipe, refiner_model, by_steps, expected):
    result, names = _names(base_pipe, refiner_model, steps=10, refiner_switch_at=0.85,
                           refiner_switch_by_sample_steps=by_steps)
    assert names == expected
    assert ("Refiner switch by sampling steps: True" in result.infotexts[0]) is by_steps


def test_second_order_samplers_count_two_calls_per_step(base_pipe, refiner_model):
    # Heun, 5 steps: 9 model calls; A1111's total_steps is 10, so 0.5 is reached at call 5
    _, names = _names(base_pipe, refiner_model, sampler="Heun", steps=5, refiner_switch_at=0.5,
                      refiner_switch_by_sample_steps=True)
    assert names == ["base"] * 5 + ["refiner"] * 4


@pytest.mark.parametrize("by_steps, expected", [
    # 10 steps at strength 0.5 run A1111's t_enc + 1 = 6 steps, t = 555, 444, ..., 0: by noise level 0.555 reaches
    # 0.5 at the 2nd call; by steps over total_steps 6, 3 / 6 at the 4th
    (False, ["base"] + ["refiner"] * 5),
    (True, ["base"] * 3 + ["refiner"] * 3),
])
def test_img2img_counts_the_steps_its_strength_leaves(tiny_sdxl_dir, refiner_model, by_steps, expected):
    from PIL import Image

    from pipelines.img2img import ImageToImage

    pipe = ImageToImage.from_pretrained(tiny_sdxl_dir)
    _, names = _names(pipe, refiner_model, init_images=[Image.new("RGB", (64, 64), (200, 40, 40))], steps=10,
                      denoising_strength=0.5, refiner_switch_at=0.5, refiner_switch_by_sample_steps=by_steps)
    assert names == expected


@pytest.mark.parametrize("by_steps, second", [
    # hires pass: exactly 4 steps of an 8-step schedule (t = 428.1, 285.4, 142.7, 0): by noise level 0.571 is past
    # 0.5 from its first call; by steps over total_steps 4, 2 / 4 at the 3rd
    (False, ["refiner"] * 4),
    (True, ["base"] * 2 + ["refiner"] * 2),
])
def test_a_hires_pass_counts_its_own_steps(base_pipe, refiner_model, by_steps, second):
    from pipelines.hires import HiresFix
    from pipelines.infotext import parse_infotext

    hires = HiresFix(base_pipe)
    result, names = _names(hires, refiner_model, steps=4, hr_scale=1.5, denoising_strength=0.5,
                           refiner_switch_at=0.5, refiner_switch_by_sample_steps=by_steps)
    assert names == ["base"] * 4 + second  # the first pass is not refined ("second pass", A1111's default)
    values = parse_infotext(result.infotexts[0])
    assert values.get("Refiner switch by sampling steps") == ("True" if by_steps else None)


def test_the_option_is_recorded_without_a_refiner_too(base_pipe):
    # A1111's apply_refiner writes the key at every model call while the option is on, before looking for a refiner
    result = base_pipe(**SMALL, steps=2, refiner_switch_by_sample_steps=True)
    assert "Refiner switch by sampling steps: True" in result.infotexts[0]
    assert "Refiner switch by sampling steps" not in base_pipe(**SMALL, steps=2).infotexts[0]


def test_a_non_bool_is_refused_before_sampling(base_pipe):
    with pytest.raises(TypeError, match="refiner_switch_by_sample_steps must be True or False"):
        base_pipe(**SMALL, steps=2, refiner_switch_by_sample_steps="yes")
