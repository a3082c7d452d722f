"""A1111 1.10's "DDIM CFG++" (`sd_samplers_timesteps_impl.ddim_cfgpp`) against its formula restated, float64."""

from __future__ import annotations

import pytest
import torch

from pipelines.samplers import make_scheduler, resolve_sampler
from pipelines.samplers.ddim_cfgpp import CFG_SCALE_MULTIPLIER

from . import a1111_timestep_reference as reference
from .kdiffusion_oracle import model_alphas_cumprod
from .kdiffusion_reference import SD15_SCHEDULER_CONFIG


def eps_cond(x, t):
    return torch.tanh(x) * 0.3 + 0.001 * t


def eps_uncond(x, t):
    return x * 0.2 - 0.0005 * t


def a1111_ddim_cfgpp(x, timesteps: list[int], alphas, cfg_scale: float, eta: float = 0.0, generator=None):
    """A1111's ddim_cfgpp: e_t is the CFG denoiser's output at cond_scale * (1 / 12.5), last_noise_uncond its uncond
    rows; pred_x0 from e_t, the direction sqrt(1 - a_prev - sigma^2) from the uncond noise, then sigma * randn."""
    def guided(x, t):
        uncond = eps_uncond(x, t)
        return uncond + (eps_cond(x, t) - uncond) * (cfg_scale / 12.5)

    return reference.ddim(guided, x, timesteps, alphas, eta=eta, generator=generator, renoise_model=eps_uncond)


def run_guided(scheduler, x, steps: int, cfg_scale: float, generator=None):
    """mixkit's loop for a sampler that asks for the uncond prediction: CFG at scale * cfg_scale_multiplier, and the
    uncond prediction handed to `step`."""
    scheduler.set_timesteps(steps)
    for t in scheduler.timesteps:
        uncond, cond = eps_uncond(x, int(t)), eps_cond(x, int(t))
        guided = uncond + (cond - uncond) * (cfg_scale * scheduler.cfg_scale_multiplier)
        x = scheduler.step(guided, t, x, noise_uncond=uncond, generator=generator).prev_sample
    return x


@pytest.mark.parametrize("steps, cfg_scale", [(2, 7.0), (10, 7.0), (20, 1.0), (30, 12.5)])
def test_matches_a1111s_ddim_cfgpp(steps, cfg_scale):
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    alphas = model_alphas_cumprod().double()  # the float32 schedule mixkit's scheduler holds, as both read it
    expected = a1111_ddim_cfgpp(latents, reference.grid(steps), alphas, cfg_scale)
    got = run_guided(make_scheduler("DDIM CFG++", SD15_SCHEDULER_CONFIG), latents, steps, cfg_scale)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-9)


def test_eta_draws_a1111s_noise_from_the_images_generator():
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    alphas = model_alphas_cumprod().double()
    expected = a1111_ddim_cfgpp(latents, reference.grid(10), alphas, 7.0, eta=0.5,
                                generator=torch.Generator().manual_seed(9))
    scheduler = make_scheduler("DDIM CFG++", SD15_SCHEDULER_CONFIG)
    scheduler.eta = 0.5
    got = run_guided(scheduler, latents.float(), 10, 7.0, generator=torch.Generator().manual_seed(9))
    torch.testing.assert_close(got.double(), expected, rtol=1e-6, atol=1e-6)  # a float32 sample: its rounding


def test_renoising_with_the_uncond_prediction_is_what_sets_it_apart_from_ddim():
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    cfgpp = run_guided(make_scheduler("DDIM CFG++", SD15_SCHEDULER_CONFIG), latents, 10, 7.0)
    ddim = make_scheduler("DDIM", SD15_SCHEDULER_CONFIG)
    ddim.set_timesteps(10)
    x = latents
    for t in ddim.timesteps:  # DDIM at the same (scaled) guidance, renoised with the guided prediction
        uncond = eps_uncond(x, int(t))
        x = ddim.step(uncond + (eps_cond(x, int(t)) - uncond) * (7.0 / 12.5), t, x).prev_sample
    assert (cfgpp - x).abs().max() > 1e-3
    # without guidance (one prediction, no noise_uncond) CFG++ is DDIM
    plain = make_scheduler("DDIM CFG++", SD15_SCHEDULER_CONFIG)
    plain.set_timesteps(10)
    ddim.set_timesteps(10)
    a = b = latents
    for t in plain.timesteps:
        a = plain.step(eps_cond(a, int(t)), t, a).prev_sample
        b = ddim.step(eps_cond(b, int(t)), t, b).prev_sample
    assert torch.equal(a, b)


def test_registered_as_a1111_lists_it():
    spec, schedule = resolve_sampler("ddim_cfgpp", "Karras")  # A1111 ignores schedule types for timestep samplers
    assert (spec.name, schedule) == ("DDIM CFG++", "Automatic")
    assert spec.eta_default == 0.0 and spec.eta_infotext_key == "Eta DDIM" and spec.mask_before_denoising
    assert CFG_SCALE_MULTIPLIER == 1 / 12.5
