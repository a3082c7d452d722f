"""The denoising objective of Stable Diffusion training, as pure functions on tensors.

Kept free of models and optimizers so each piece (noise offset, target, min-SNR weights) is
testable on its own against the formulas of the papers.
"""

from __future__ import annotations

import math

import torch


def offset_noise(shape, generator: torch.Generator, offset: float, dtype=torch.float32, *,
                 random_strength: bool = False, adaptive_scale: float = 0.0,
                 latents: torch.Tensor | None = None) -> torch.Tensor:
    """Gaussian noise plus a per-channel constant noise times `offset` (Guttenberg 2023, "noise offset").

    Plain noise never shifts an image's mean, so models cannot learn very dark or bright images;
    the constant term lets them. kohya's variants: `random_strength` scales the offset by one uniform draw per
    batch (noise_offset_random_strength), `adaptive_scale` adds |mean of each latent channel| times it per sample
    (adaptive_noise_scale: more offset for images far from mid-grey), the sum clamped at 0. Their draws come after
    the plain ones, so a run without them draws exactly what it did before.
    """
    noise = torch.randn(shape, generator=generator, dtype=dtype)
    if offset:
        constant = torch.randn((shape[0], shape[1], 1, 1), generator=generator, dtype=dtype)
        scale = torch.tensor(float(offset), dtype=dtype)
        if random_strength:
            scale = scale * torch.rand((), generator=generator, dtype=dtype)
        if adaptive_scale:
            scale = (scale + adaptive_scale * latents.to(dtype).mean(dim=(2, 3), keepdim=True).abs()).clamp(min=0)
        noise = noise + scale * constant
    return noise


def pyramid_noise(noise: torch.Tensor, generator: torch.Generator, iterations: int, discount: float) -> torch.Tensor:
    """Multi-resolution ("pyramid") noise (Whitaker 2023; kohya's multires_noise_iterations / _discount).

    Plain noise is independent per latent cell, so it barely disturbs an image's coarse structure at
    moderate timesteps and the model never learns to change it; adding upsampled lower-resolution noise
    (level i at a random 1/r^i of the size, r in [2, 4), weighted discount^i, stopping at a 1-cell side)
    and renormalising to unit standard deviation lets training move large-scale colour and layout.
    """
    batch, channels, height, width = noise.shape
    result = noise.clone()
    for level in range(iterations):
        ratio = float(torch.rand((), generator=generator)) * 2 + 2
        size = (max(1, int(height / ratio ** level)), max(1, int(width / ratio ** level)))
        coarse = torch.randn((batch, channels, *size), generator=generator, dtype=noise.dtype)
        result = result + torch.nn.functional.interpolate(coarse, size=(height, width), mode="bilinear") * discount ** level
        if 1 in size:
            break
    return result / result.std()


def debiased_weights(alphas_cumprod: torch.Tensor, timesteps: torch.Tensor, prediction_type: str) -> torch.Tensor:
    """Per-sample loss weights of debiased estimation (Yu et al. 2024; kohya's debiased_estimation_loss):
    1 / sqrt(SNR) for epsilon targets, 1 / (SNR + 1) for v targets, with SNR capped at 1000 so the
    nearly clean timesteps do not vanish entirely."""
    ratio = torch.clamp(snr(alphas_cumprod, timesteps), max=1000.0)
    if prediction_type == "v_prediction":
        return 1.0 / (ratio + 1.0)
    if prediction_type == "epsilon":
        return 1.0 / ratio.sqrt()
    raise ValueError(f"debiased estimation supports prediction types 'epsilon' and 'v_prediction', got {prediction_type!r}")


def sample_timesteps(count: int, low: int, high: int, generator: torch.Generator,
                     stratified: bool = False) -> torch.Tensor:
    """`count` integer timesteps in [low, high): independent uniform draws, or with `stratified` one uniform
    offset u and the points (u + i / count) mod 1 (the low-discrepancy sampler of Kingma et al. 2021, VDM):
    each batch then covers the range evenly, which lowers the variance of the batch's loss and gradient."""
    if not stratified:
        return torch.randint(low, high, (count,), generator=generator)
    offset = torch.rand((), generator=generator, dtype=torch.float64)
    points = (offset + torch.arange(count, dtype=torch.float64) / count) % 1.0
    return (low + (points * (high - low)).floor()).long().clamp_(low, high - 1)


def snr(alphas_cumprod: torch.Tensor, timesteps: torch.Tensor) -> torch.Tensor:
    """Signal-to-noise ratio alpha_bar / (1 - alpha_bar) at each timestep."""
    alpha_bar = alphas_cumprod.to(torch.float64)[timesteps]
    return (alpha_bar / (1.0 - alpha_bar)).to(torch.float32)


def min_snr_weights(alphas_cumprod: torch.Tensor, timesteps: torch.Tensor, gamma: float,
                    prediction_type: str) -> torch.Tensor:
    """Per-sample loss weights of Min-SNR-gamma (Hang et al. 2023, eq. 10) for an MSE on the model output.

    For epsilon targets the weight is min(SNR, gamma) / SNR; for v targets min(SNR, gamma) / (SNR + 1),
    the paper's conversion of the same x0-space weighting to each parameterisation.
    """
    ratio = snr(alphas_cumprod, timesteps)
    clipped = torch.clamp(ratio, max=gamma)
    if prediction_type == "v_prediction":
        return clipped / (ratio + 1.0)
    if prediction_type == "epsilon":
        return clipped / ratio
    raise ValueError(f"min-SNR weighting supports prediction types 'epsilon' and 'v_prediction', got {prediction_type!r}")


def diffusion_target(latents: torch.Tensor, noise: torch.Tensor, timesteps: torch.Tensor,
                     alphas_cumprod: torch.Tensor, prediction_type: str) -> torch.Tensor:
    """What the UNet should output: the noise (epsilon) or the velocity v = sqrt(a) eps - sqrt(1-a) x0."""
    if prediction_type == "epsilon":
        return noise
    if prediction_type == "v_prediction":
        alpha_bar = alphas_cumprod[timesteps].to(latents.dtype).view(-1, 1, 1, 1)
        return alpha_bar.sqrt() * noise - (1 - alpha_bar).sqrt() * latents
    raise ValueError(f"training supports prediction types 'epsilon' and 'v_prediction', got {prediction_type!r}")


def add_noise(latents: torch.Tensor, noise: torch.Tensor, timesteps: torch.Tensor,
              alphas_cumprod: torch.Tensor) -> torch.Tensor:
    """Forward diffusion q(x_t | x_0) = sqrt(a_bar) x_0 + sqrt(1 - a_bar) eps."""
    alpha_bar = alphas_cumprod[timesteps].to(latents.dtype).view(-1, 1, 1, 1)
    return alpha_bar.sqrt() * latents + (1 - alpha_bar).sqrt() * noise


def latent_loss_mask(masks: torch.Tensor, latent_size: tuple[int, int], unmasked_weight: float = 0.0,
                     normalize: bool = False) -> torch.Tensor:
    """Per-latent-cell loss weights (B, 1, h, w) from pixel masks (B, 1, H, W) in [0, 1].

    Each latent cell gets the mean of the mask pixels it covers (area averaging, as kohya's masked loss
    does), raised to at least `unmasked_weight` (OneTrainer's "unmasked weight": the background is still
    learned a little, so the model keeps drawing one). With `normalize` each sample's weights are divided by
    their mean (OneTrainer's normalize_masked_area_loss), so an image whose subject is small weighs as much
    in the batch as one filled by it; an all-zero mask stays all zero.
    """
    weights = torch.nn.functional.interpolate(masks.float(), size=tuple(latent_size), mode="area")
    weights = weights.clamp(min=unmasked_weight, max=1.0)
    if normalize:
        mean = weights.mean(dim=(1, 2, 3), keepdim=True)
        weights = torch.where(mean > 0, weights / mean.clamp(min=torch.finfo(weights.dtype).tiny), weights)
    return weights


def scheduled_huber_c(timesteps: torch.Tensor, alphas_cumprod: torch.Tensor, huber_c: float,
                      schedule: str) -> torch.Tensor:
    """The pseudo-Huber threshold per sample (Khrapov et al. 2024, "scheduled pseudo-Huber loss"; kohya's
    huber_schedule): "constant" keeps `huber_c`; "exponential" is exp(-alpha t) with alpha = -ln(huber_c) / T,
    1 at t = 0 falling to `huber_c` at t = T; "snr" is (1 - c) / (1 + sigma_t)^2 + c with
    sigma_t = sqrt((1 - a_bar) / a_bar): near 1 (squared error) at low noise, near c (robust) at high noise."""
    t = timesteps.to(torch.float64)
    if schedule == "constant":
        values = torch.full_like(t, huber_c)
    elif schedule == "exponential":
        alpha = -math.log(huber_c) / len(alphas_cumprod)
        values = torch.exp(-alpha * t)
    elif schedule == "snr":
        alpha_bar = alphas_cumprod.to(torch.float64)[timesteps]
        sigma = ((1.0 - alpha_bar) / alpha_bar).sqrt()
        values = (1.0 - huber_c) / (1.0 + sigma) ** 2 + huber_c
    else:
        raise ValueError(f"huber_schedule must be 'constant', 'exponential' or 'snr', got {schedule!r}")
    return values.to(torch.float32)


def elementwise_loss(prediction: torch.Tensor, target: torch.Tensor, loss_type: str = "l2",
                     huber_c: torch.Tensor | None = None) -> torch.Tensor:
    """The loss of each element, in float32: "l2" (squared error), "huber" 2c (sqrt(d^2 + c^2) - c) (pseudo-Huber,
    about d^2 for |d| << c and 2c|d| beyond: outliers, such as a mislabelled image, pull linearly, not
    quadratically) or "smooth_l1" 2 (sqrt(d^2 + c^2) - c) (the same without the factor c); `huber_c` per sample."""
    difference = prediction.float() - target.float()
    if loss_type == "l2":
        return difference.pow(2)
    if loss_type not in ("huber", "smooth_l1"):
        raise ValueError(f"loss_type must be 'l2', 'huber' or 'smooth_l1', got {loss_type!r}")
    c = huber_c.float().view(-1, *([1] * (difference.ndim - 1)))
    squared = difference.pow(2)
    # sqrt(d^2 + c^2) - c written as d^2 / (sqrt(d^2 + c^2) + c): the same number without float32's cancellation
    # for |d| << c (where the difference form loses most digits of a loss near d^2).
    robust = 2.0 * squared / ((squared + c.pow(2)).sqrt() + c)
    return robust * c if loss_type == "huber" else robust


def weighted_mean(elementwise: torch.Tensor, weights: torch.Tensor | None,
                  element_weights: torch.Tensor | None = None) -> torch.Tensor:
    """An elementwise loss averaged per sample, optionally weighted, then over the batch.

    `element_weights` (broadcast to the loss, e.g. (B, 1, H, W)) weigh each latent cell inside a
    sample's mean before `weights` weigh the samples: a spatial mask that makes some regions count more.
    """
    if element_weights is not None:
        elementwise = elementwise * element_weights.float()
    per_sample = elementwise.flatten(1).mean(dim=1)
    if weights is not None:
        per_sample = per_sample * weights
    return per_sample.mean()


def weighted_mse(prediction: torch.Tensor, target: torch.Tensor, weights: torch.Tensor | None,
                 element_weights: torch.Tensor | None = None) -> torch.Tensor:
    """Mean squared error per sample, optionally weighted (see `weighted_mean`), averaged over the batch."""
    return weighted_mean(elementwise_loss(prediction, target), weights, element_weights)
