"""The objective's pieces against diffusers' scheduler (the peer oracle) and the Min-SNR paper's formula."""

import pytest
import torch
from diffusers import DDPMScheduler

from mixkit.training import diffusion_objective as objective


@pytest.fixture(scope="module")
def scheduler():
    return DDPMScheduler(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012, num_train_timesteps=1000)


def test_add_noise_and_velocity_match_diffusers(scheduler):
    generator = torch.Generator().manual_seed(0)
    latents = torch.randn(3, 4, 8, 8, generator=generator)
    noise = torch.randn(3, 4, 8, 8, generator=generator)
    timesteps = torch.tensor([0, 500, 999])
    ours = objective.add_noise(latents, noise, timesteps, scheduler.alphas_cumprod)
    torch.testing.assert_close(ours, scheduler.add_noise(latents, noise, timesteps))
    velocity = objective.diffusion_target(latents, noise, timesteps, scheduler.alphas_cumprod, "v_prediction")
    torch.testing.assert_close(velocity, scheduler.get_velocity(latents, noise, timesteps))
    assert objective.diffusion_target(latents, noise, timesteps, scheduler.alphas_cumprod, "epsilon") is noise


@pytest.mark.parametrize("prediction_type", ["epsilon", "v_prediction"])
def test_min_snr_weights_match_diffusers_recipe(scheduler, prediction_type):
    timesteps = torch.tensor([1, 10, 100, 400, 999])
    # diffusers' compute_snr: (alpha / sigma)^2 with alpha = sqrt(a_bar), sigma = sqrt(1 - a_bar).
    alpha = scheduler.alphas_cumprod[timesteps].sqrt()
    sigma = (1.0 - scheduler.alphas_cumprod[timesteps]).sqrt()
    snr = (alpha / sigma) ** 2
    clipped = torch.stack([snr, 5.0 * torch.ones_like(snr)], dim=1).min(dim=1)[0]
    expected = clipped / snr if prediction_type == "epsilon" else clipped / (snr + 1)
    ours = objective.min_snr_weights(scheduler.alphas_cumprod, timesteps, 5.0, prediction_type)
    torch.testing.assert_close(ours, expected.float(), rtol=1e-5, atol=1e-7)
    expected_last = 1.0 if prediction_type == "epsilon" else float(snr[-1] / (snr[-1] + 1))
    assert float(ours[-1]) == pytest.approx(expected_last, rel=1e-5)


def test_noise_offset_shifts_channel_means_only_when_asked():
    plain = objective.offset_noise((64, 4, 8, 8), torch.Generator().manual_seed(1), 0.0)
    shifted = objective.offset_noise((64, 4, 8, 8), torch.Generator().manual_seed(1), 1.0)
    # Same first draw, plus a per-(sample, channel) constant: the difference is constant over pixels.
    difference = shifted - plain
    torch.testing.assert_close(difference, difference[..., :1, :1].expand_as(difference), atol=1e-6, rtol=0)
    assert difference.flatten(1).std() > 0.5


def test_weighted_mse():
    prediction, target = torch.zeros(2, 1, 2, 2), torch.tensor([1.0, 2.0]).view(2, 1, 1, 1).expand(2, 1, 2, 2)
    assert objective.weighted_mse(prediction, target, None).item() == pytest.approx(2.5)
    assert objective.weighted_mse(prediction, target, torch.tensor([1.0, 0.0])).item() == pytest.approx(0.5)
    # A per-cell weight map counts inside each sample's mean, before the per-sample weights.
    cells = torch.tensor([[[[1.0, 3.0]]], [[[0.0, 2.0]]]])
    # per sample: (1 + 3 + 1 + 3) / 4 * 1 = 2 and (0 + 2 + 0 + 2) / 4 * 4 = 4
    assert objective.weighted_mse(prediction, target, None, cells).item() == pytest.approx(3.0)
    assert objective.weighted_mse(prediction, target, torch.tensor([0.0, 2.0]), cells).item() == pytest.approx(4.0)
