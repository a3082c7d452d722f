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


def test_kohyas_noise_offset_variants_by_the_formula():
    shape, offset = (3, 4, 8, 8), 0.1
    latents = torch.randn(shape, generator=torch.Generator().manual_seed(7))
    draws = torch.Generator().manual_seed(2)
    base, constant = torch.randn(shape, generator=draws), torch.randn((3, 4, 1, 1), generator=draws)
    strength = torch.rand((), generator=draws)
    plain = objective.offset_noise(shape, torch.Generator().manual_seed(2), offset)
    assert torch.equal(plain, base + torch.tensor(offset) * constant)
    random = objective.offset_noise(shape, torch.Generator().manual_seed(2), offset, random_strength=True)
    assert torch.equal(random, base + torch.tensor(offset) * strength * constant)
    adaptive = objective.offset_noise(shape, torch.Generator().manual_seed(2), offset, adaptive_scale=-0.5,
                                      latents=latents)
    scale = (offset - 0.5 * latents.mean(dim=(2, 3), keepdim=True).abs()).clamp(min=0)
    assert torch.equal(adaptive, base + scale * constant)
    assert (scale == 0).any() and (scale > 0).any()  # a negative scale clamps some channels' offset to 0


def test_weighted_mse():
    prediction, target = torch.zeros(2, 1, 2, 2), torch.tensor([1.0, 2.0]).view(2, 1, 1, 1).expand(2, 1, 2, 2)
    assert objective.weighted_mse(prediction, target, None).item() == pytest.approx(2.5)
    assert objective.weighted_mse(prediction, target, torch.tensor([1.0, 0.0])).item() == pytest.approx(0.5)
    # A per-cell weight map counts inside each sample's mean, before the per-sample weights.
    cells = torch.tensor([[[[1.0, 3.0]]], [[[0.0, 2.0]]]])
    # per sample: (1 + 3 + 1 + 3) / 4 * 1 = 2 and (0 + 2 + 0 + 2) / 4 * 4 = 4
    assert objective.weighted_mse(prediction, target, None, cells).item() == pytest.approx(3.0)
    assert objective.weighted_mse(prediction, target, torch.tensor([0.0, 2.0]), cells).item() == pytest.approx(4.0)


def test_uniform_timesteps_are_torch_randint_draws():
    # The default keeps the draws runs have always made (and resumed checkpoints expect).
    drawn = objective.sample_timesteps(6, 0, 1000, torch.Generator().manual_seed(3))
    assert torch.equal(drawn, torch.randint(0, 1000, (6,), generator=torch.Generator().manual_seed(3)))


@pytest.mark.parametrize("count, low, high", [(8, 0, 1000), (5, 200, 1000), (24, 0, 1000), (3, 10, 12), (1, 0, 1000)])
def test_stratified_timesteps_put_one_draw_in_each_equal_slice_of_the_range(count, low, high):
    generator = torch.Generator().manual_seed(7)
    for _ in range(20):
        drawn = objective.sample_timesteps(count, low, high, generator, stratified=True)
        assert drawn.dtype == torch.long and drawn.shape == (count,)
        assert int(drawn.min()) >= low and int(drawn.max()) < high
        # One point per slice of width (high - low) / count, for the offset the generator drew.
        fractions = ((drawn.double() - low) / (high - low) * count).floor().long()
        if (high - low) % count == 0:
            assert sorted(fractions.tolist()) == list(range(count))
    # Over many batches every timestep of the range is reachable, with the same mean as uniform draws.
    many = torch.cat([objective.sample_timesteps(count, low, high, generator, stratified=True) for _ in range(4000)])
    assert abs(many.double().mean().item() - (low + high - 1) / 2) < 0.02 * (high - low)


def test_stratified_draws_depend_only_on_the_generator():
    a = objective.sample_timesteps(8, 0, 1000, torch.Generator().manual_seed(1), stratified=True)
    b = objective.sample_timesteps(8, 0, 1000, torch.Generator().manual_seed(1), stratified=True)
    c = objective.sample_timesteps(8, 0, 1000, torch.Generator().manual_seed(2), stratified=True)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_pseudo_huber_losses_by_their_formulas():
    prediction = torch.tensor([[0.0, 3.0], [1.0, -1.0]])
    target = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    c = torch.tensor([4.0, 1.0])
    # row 0: d = 0 -> 0; d = 3, c = 4 -> 2 (sqrt(9 + 16) - 4) = 2, times c for "huber" = 8.
    # row 1: d = 0 -> 0; d = -2, c = 1 -> 2 (sqrt(4 + 1) - 1).
    robust = 2 * (5 ** 0.5 - 1)
    assert torch.allclose(objective.elementwise_loss(prediction, target, "smooth_l1", c),
                          torch.tensor([[0.0, 2.0], [0.0, robust]]))
    assert torch.allclose(objective.elementwise_loss(prediction, target, "huber", c),
                          torch.tensor([[0.0, 8.0], [0.0, robust]]))
    assert torch.equal(objective.elementwise_loss(prediction, target), torch.tensor([[0.0, 9.0], [0.0, 4.0]]))
    small = objective.elementwise_loss(torch.tensor([[1e-3]]), torch.zeros(1, 1), "huber", torch.tensor([0.5]))
    assert small.item() == pytest.approx(1e-6, rel=1e-4)  # near zero pseudo-Huber is the squared error
    with pytest.raises(ValueError, match="loss_type must be"):
        objective.elementwise_loss(prediction, target, "l1")


def test_huber_schedules_reach_their_ends(scheduler):
    alphas = scheduler.alphas_cumprod
    t = torch.tensor([0, 500, 999])
    assert torch.allclose(objective.scheduled_huber_c(t, alphas, 0.1, "constant"), torch.full((3,), 0.1))
    exponential = objective.scheduled_huber_c(torch.tensor([0, 1000]), alphas, 0.1, "exponential")
    assert torch.allclose(exponential, torch.tensor([1.0, 0.1]))
    snr = objective.scheduled_huber_c(t, alphas, 0.1, "snr")
    sigma = ((1 - alphas[t].double()) / alphas[t].double()).sqrt()
    assert torch.allclose(snr, ((0.9 / (1 + sigma) ** 2) + 0.1).float())
    assert snr[0] > 0.9 and snr[2] < 0.11  # near squared error at low noise, robust at high noise
    with pytest.raises(ValueError, match="huber_schedule must be"):
        objective.scheduled_huber_c(t, alphas, 0.1, "cosine")


def test_pyramid_noise_adds_coarse_levels_and_keeps_unit_std():
    generator = torch.Generator().manual_seed(0)
    noise = torch.randn((4, 4, 64, 64), generator=generator)
    pyramid = objective.pyramid_noise(noise, torch.Generator().manual_seed(1), iterations=6, discount=0.4)
    assert pyramid.shape == noise.shape and pyramid.std().item() == pytest.approx(1.0, abs=1e-5)
    # Coarse levels correlate neighbouring cells, which independent noise does not.
    def neighbour_correlation(x):
        return torch.corrcoef(torch.stack([x[..., :-1].flatten(), x[..., 1:].flatten()]))[0, 1].item()
    strong = objective.pyramid_noise(noise, torch.Generator().manual_seed(1), iterations=6, discount=0.8)
    assert abs(neighbour_correlation(noise)) < 0.01
    assert 0.02 < neighbour_correlation(pyramid) < neighbour_correlation(strong)  # more with a milder discount
    again = objective.pyramid_noise(noise, torch.Generator().manual_seed(1), iterations=6, discount=0.4)
    assert torch.equal(pyramid, again)
    # One level is the noise plus a full-size copy of fresh noise, renormalised.
    fresh = torch.Generator().manual_seed(2)
    ratio = float(torch.rand((), generator=fresh)) * 2 + 2  # drawn but unused at level 0 (r^0 = 1)
    expected = noise + torch.randn(noise.shape, generator=fresh)
    one = objective.pyramid_noise(noise, torch.Generator().manual_seed(2), iterations=1, discount=0.4)
    assert ratio >= 2 and torch.allclose(one, expected / expected.std(), atol=1e-6)


def test_debiased_weights_are_the_inverse_root_snr(scheduler):
    alphas = scheduler.alphas_cumprod
    t = torch.tensor([0, 10, 500, 999])
    ratio = objective.snr(alphas, t)
    assert torch.allclose(objective.debiased_weights(alphas, t, "epsilon"), 1 / ratio.clamp(max=1000).sqrt())
    assert torch.allclose(objective.debiased_weights(alphas, t, "v_prediction"), 1 / (ratio.clamp(max=1000) + 1))
    assert ratio[0] > 1000 and objective.debiased_weights(alphas, t[:1], "epsilon").item() == pytest.approx(1000 ** -0.5)
