"""img2img starts every k-diffusion sampler at the noise level of step `total - run` and runs `run` steps
(A1111's int(steps * strength) + 1); DDIM and PLMS start as A1111's timestep samplers do (their own
tests: samplers/test_a1111_timesteps.py)."""

import functools

import pytest
from PIL import Image

from pipelines.img2img import ImageToImage, img2img_timesteps
from pipelines.samplers import SAMPLERS, make_scheduler

CONFIG = {"num_train_timesteps": 1000, "beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear"}


@functools.lru_cache(maxsize=None)
def _made(name):
    return make_scheduler(name, CONFIG)  # slow for some samplers (~1 s): one per sampler, re-set per use


def scheduler(name, steps):
    made = _made(name)
    made.set_timesteps(steps)
    return made


K_SAMPLERS = sorted(set(SAMPLERS) - {"DDIM", "PLMS"})


@pytest.mark.parametrize("name", K_SAMPLERS)
def test_tail_has_the_model_calls_of_a_schedule_of_that_many_steps(name):
    for total, run in ((10, 6), (10, 1), (10, 10), (7, 3)):
        calls = len(img2img_timesteps(scheduler(name, total), total, run)[1])
        assert calls == len(scheduler(name, run).timesteps), (total, run)


@pytest.mark.parametrize("name, first", [
    ("Euler", 555), ("Heun", 555), ("DPM2", 594), ("UniPC", 599),  # DPM2: Karras for 11 steps, penultimate dropped
])
def test_tail_starts_at_step_total_minus_run(name, first):
    begin, timesteps = img2img_timesteps(scheduler(name, 10), 10, 6)
    assert int(timesteps[0]) == first


@pytest.mark.parametrize("sampler, expected", [
    # A1111: t_enc = int(0.5 * 10) = 5; noised to grid[5] = 501, calls from grid[4] = 401 down to grid[1] = 101.
    ("DDIM", [401, 301, 201, 101]),
    ("PLMS", [401, 301, 301, 201, 101]),  # A1111's PLMS evaluates its first step twice
])
def test_plms_and_ddim_img2img_walk_a1111s_grid(sd1_pipe, sampler, expected):
    i2i = ImageToImage.from_pipeline(sd1_pipe)
    seen = []
    handle = i2i.model.unet.register_forward_pre_hook(lambda module, args: seen.append(int(args[1])))
    progress = []
    try:
        i2i(init_images=[Image.new("RGB", (64, 64), (90, 120, 30))], denoising_strength=0.5, steps=10, seed=1,
            width=64, height=64, sampler=sampler, callback=lambda p: progress.append((p.step, p.total_steps)))
    finally:
        handle.remove()
    assert seen == expected
    assert progress[-1] == (6, 6)
