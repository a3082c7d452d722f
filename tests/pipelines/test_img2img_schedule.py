"""img2img starts every k-diffusion sampler at the noise level of step `total - run` and runs `run` steps
(A1111's int(steps * strength) + 1); DDIM, PLMS and UniPC start as A1111's timestep samplers do (DDIM's and
PLMS's own tests: samplers/test_a1111_timesteps.py; UniPC's: samplers/test_a1111_unipc.py)."""

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


K_SAMPLERS = sorted(set(SAMPLERS) - {"DDIM", "DDIM CFG++", "PLMS", "UniPC"})


@pytest.mark.parametrize("name", K_SAMPLERS)
def test_tail_has_the_model_calls_of_a_schedule_of_that_many_steps(name):
    for total, run in ((10, 6), (10, 1), (10, 10), (7, 3)):
        calls = len(img2img_timesteps(scheduler(name, total), total, run)[1])
        assert calls == len(scheduler(name, run).timesteps), (total, run)


@pytest.mark.parametrize("name, first", [
    ("Euler", 555), ("Heun", 555), ("DPM2", 594),  # DPM2: Karras for 11 steps, penultimate dropped
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


def test_unipc_img2img_walks_a1111s_grid(sd1_pipe):
    # A1111: t_enc = int(0.5 * 10) = 5; noised to grid[5] = 501, then 5 time-uniform UniPC steps from model time
    # grid[4] = 401 down to 0 (t_start = 401 / 1000 + 1 / 1000 in its continuous time): calls at 401 ... 80.2.
    i2i = ImageToImage.from_pipeline(sd1_pipe)
    seen = []
    handle = i2i.model.unet.register_forward_pre_hook(lambda module, args: seen.append(float(args[1])))
    try:
        i2i(init_images=[Image.new("RGB", (64, 64), (90, 120, 30))], denoising_strength=0.5, steps=10, seed=1,
            width=64, height=64, sampler="UniPC")
    finally:
        handle.remove()
    assert seen == pytest.approx([401.0, 320.8, 240.6, 160.4, 80.2], abs=1e-3)


def test_unipc_progress_counts_the_steps_its_grid_runs(sd1_pipe):
    # A1111's UniPC runs len(timesteps) steps and reports them (launch_sampling(len(timesteps))): 7 asked, 8 run;
    # img2img at 10 steps and 0.5: t_enc = 5.
    progress = []
    sd1_pipe(prompt="a red circle", steps=7, seed=1, width=64, height=64, sampler="UniPC",
             callback=lambda p: progress.append((p.step, p.total_steps)))
    assert progress == [(step, 8) for step in range(1, 9)]
    progress.clear()
    ImageToImage.from_pipeline(sd1_pipe)(init_images=[Image.new("RGB", (64, 64), (90, 120, 30))], denoising_strength=0.5,
                                         steps=10, seed=1, width=64, height=64, sampler="UniPC",
                                         callback=lambda p: progress.append((p.step, p.total_steps)))
    assert progress == [(step, 5) for step in range(1, 6)]
