"""DDIM and PLMS walk A1111's own timestep grid, step count and img2img start (checked in float64)."""

from __future__ import annotations

import pytest
import torch

from pipelines.img2img import img2img_noise_timestep, img2img_steps, img2img_timesteps
from pipelines.samplers import check_sampler_steps
from pipelines.samplers.a1111_timesteps import plms_eps, timestep_grid

from . import a1111_timestep_reference as reference
from .kdiffusion_reference import SD2_V_SCHEDULER_CONFIG, SD15_SCHEDULER_CONFIG, GaussianDataModel, alphas_cumprod
from .sampling_loop import fresh_scheduler, run_sampler

SAMPLERS = {"DDIM": reference.ddim, "PLMS": reference.plms}


def _model(config):
    """The exact Gaussian-data denoiser, recording the timesteps it is called at."""
    model = GaussianDataModel(config)
    calls = []

    def call(x, t):
        calls.append(int(t))
        return model(x, t)

    return call, calls


@pytest.mark.parametrize("steps", [2, 3, 7, 10, 20, 30, 333])
def test_grid_is_a1111s(steps):
    assert timestep_grid(steps).tolist() == reference.grid(steps)


@pytest.mark.parametrize("sampler", ["DDIM", "PLMS"])
@pytest.mark.parametrize("steps", [2, 3, 10, 20, 30])
def test_txt2img_walk_matches_a1111(sampler, steps):
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    model, calls = _model(SD15_SCHEDULER_CONFIG)
    expected_calls = []
    expected = SAMPLERS[sampler](GaussianDataModel(SD15_SCHEDULER_CONFIG), latents, reference.grid(steps),
                                 alphas_cumprod(SD15_SCHEDULER_CONFIG), expected_calls)
    got = run_sampler(fresh_scheduler(sampler), model, latents.float(), steps)
    assert calls == expected_calls
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=2e-4)


def test_thirty_steps_start_where_a1111_starts():
    # diffusers' "leading" DDIM starts 30 steps at t 958 and makes 30 calls down to t 1; A1111 starts at 991.
    scheduler = fresh_scheduler("DDIM")
    scheduler.set_timesteps(30)
    assert int(scheduler.timesteps[0]) == 991 and int(scheduler.timesteps[-1]) == 34 and len(scheduler.timesteps) == 30
    scheduler.set_timesteps(20)  # 1000 divisible by the steps: A1111 makes one call fewer than diffusers
    assert scheduler.timesteps.tolist() == list(range(951, 50, -50))


@pytest.mark.parametrize("sampler", ["DDIM", "PLMS"])
def test_v_prediction_is_turned_into_epsilon_as_a1111s_v_denoiser(sampler):
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    eps_model = GaussianDataModel(SD15_SCHEDULER_CONFIG)  # same betas; the oracle walks on epsilon
    expected = SAMPLERS[sampler](eps_model, latents, reference.grid(12), alphas_cumprod(SD2_V_SCHEDULER_CONFIG))
    got = run_sampler(fresh_scheduler(sampler, config_name="sd2-v"), GaussianDataModel(SD2_V_SCHEDULER_CONFIG),
                      latents.float(), 12)
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=2e-4)


def _img2img(sampler, steps, strength, exact_steps=False):
    """mixkit's img2img walk on the Gaussian model: (result, called timesteps, noise timestep)."""
    init = torch.full((1, 4, 8, 8), 0.3, dtype=torch.float64)
    noise = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    total, run = img2img_steps(steps, strength, exact_steps)
    scheduler = fresh_scheduler(sampler)
    scheduler.set_timesteps(total)
    _, timesteps = img2img_timesteps(scheduler, total, run)
    noise_at = img2img_noise_timestep(scheduler, timesteps)
    x = scheduler.add_noise(init.float(), noise.float(), noise_at)
    model, calls = _model(SD15_SCHEDULER_CONFIG)
    for t in timesteps:
        x = scheduler.step(model(x, t), t, x).prev_sample
    return x, calls, int(noise_at), init, noise


@pytest.mark.parametrize("sampler", ["DDIM", "PLMS"])
@pytest.mark.parametrize("steps, strength, exact, t_enc", [
    (20, 0.75, False, 15), (30, 0.5, False, 15), (10, 0.999, False, 9), (20, 1.0, False, 19),
    (20, 0.75, True, 19),  # "exact steps" (img2img_fix_steps): a grid of int(20 / 0.75) = 26, t_enc = 19
])
def test_img2img_noises_to_grid_t_enc_and_walks_grid_below_it(sampler, steps, strength, exact, t_enc):
    got, calls, noise_at, init, noise = _img2img(sampler, steps, strength, exact)
    grid_steps = int(steps / min(strength, 0.999)) if exact else steps
    noised, walk = reference.img2img_start(init, noise, grid_steps, t_enc, alphas_cumprod(SD15_SCHEDULER_CONFIG))
    expected_calls = []
    expected = SAMPLERS[sampler](GaussianDataModel(SD15_SCHEDULER_CONFIG), noised, walk,
                                 alphas_cumprod(SD15_SCHEDULER_CONFIG), expected_calls)
    assert noise_at == reference.grid(grid_steps)[t_enc]
    assert calls == expected_calls
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=2e-4)


@pytest.mark.parametrize("sampler", ["DDIM", "PLMS"])
def test_img2img_at_tiny_strength_only_noises_as_a1111(sampler):
    # strength 0.05 at 20 steps: t_enc 1, no model call; the image is the init noised to grid[1] = 51.
    got, calls, noise_at, init, noise = _img2img(sampler, 20, 0.05)
    assert calls == [] and noise_at == 51
    a = float(alphas_cumprod(SD15_SCHEDULER_CONFIG)[51])
    torch.testing.assert_close(got.double(), init * a**0.5 + noise * (1 - a) ** 0.5, rtol=0, atol=1e-5)  # float32 alphas


def test_plms_coefficients_are_adams_bashforth():
    e = torch.tensor(1.0)
    assert plms_eps(e, []) == 1.0
    assert plms_eps(e, [torch.tensor(0.0)]) == 1.5
    assert plms_eps(e, [torch.tensor(0.0)] * 2) == 23 / 12
    assert plms_eps(e, [torch.tensor(0.0)] * 3) == 55 / 24


@pytest.mark.parametrize("sampler", ["DDIM", "PLMS"])
def test_one_step_is_refused_rather_than_returning_the_noise(sampler):
    with pytest.raises(ValueError, match="at least 2 steps.*no model call"):
        check_sampler_steps(sampler, 1)
    check_sampler_steps(sampler, 2)


@pytest.mark.parametrize("sampler, expected", [
    ("DDIM", [995, 853, 711, 569, 427, 285, 143]),  # 7 steps: grid range(0, 1000, 142) + 1 = 1, 143, .., 995
    ("PLMS", [995, 853, 853, 711, 569, 427, 285, 143]),
])
def test_txt2img_pipeline_calls_the_unet_at_a1111s_timesteps(sd1_pipe, sampler, expected):
    from pipelines.txt2img import TextToImage

    pipe = TextToImage.from_pipeline(sd1_pipe)
    seen = []
    handle = pipe.model.unet.register_forward_pre_hook(lambda module, args: seen.append(int(args[1])))
    try:
        pipe(prompt="a red circle", steps=7, seed=1, width=64, height=64, sampler=sampler)
    finally:
        handle.remove()
    assert seen == expected


def test_ddim_eta_adds_a1111s_noise_with_the_images_generator():
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    expected = reference.ddim(GaussianDataModel(SD15_SCHEDULER_CONFIG), latents, reference.grid(10),
                              alphas_cumprod(SD15_SCHEDULER_CONFIG), eta=0.6, generator=torch.Generator().manual_seed(4))
    scheduler = fresh_scheduler("DDIM")
    scheduler.eta = 0.6
    model, _ = _model(SD15_SCHEDULER_CONFIG)
    got = run_sampler(scheduler, model, latents.float(), 10, generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=5e-4)
    deterministic = run_sampler(fresh_scheduler("DDIM"), model, latents.float(), 10, generator=torch.Generator().manual_seed(4))
    assert (got - deterministic).abs().max() > 0.05
