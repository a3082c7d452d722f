"""The latent cache encodes each record once, also when a batch holds a record twice, and samples as the VAE would."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution

from mixkit.training.latent_cache import LatentCache


class CountingEncoder:
    """Posterior parameters = the pixels' first 2C channels: a record's posterior is known from its pixels."""

    def __init__(self) -> None:
        self.rows: list[int] = []

    def encode(self, pixels):
        self.rows.append(len(pixels))
        return SimpleNamespace(latent_dist=DiagonalGaussianDistribution(pixels[:, :4]))


def test_each_record_is_encoded_once_and_sampling_matches_the_vae():
    torch.manual_seed(0)
    images = {record: torch.randn(6, 2, 2) for record in (7, 8, 9)}
    vae, cache = CountingEncoder(), LatentCache()
    first = [7, 8, 7]  # record 7 twice in one batch (a kohya repeat)
    cache.posterior(vae, first, torch.stack([images[r] for r in first]))
    assert vae.rows == [2] and len(cache) == 2
    second = [9, 8, 7]
    pixels = torch.stack([images[r] for r in second])
    cached = cache.posterior(vae, second, pixels).sample(generator=torch.Generator().manual_seed(3))
    assert vae.rows == [2, 1] and len(cache) == 3
    direct = DiagonalGaussianDistribution(pixels[:, :4]).sample(generator=torch.Generator().manual_seed(3))
    assert torch.equal(cached, direct)
