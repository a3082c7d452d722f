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


class TinyVae(torch.nn.Module):
    """An encoder and a decoder, named as diffusers' AutoencoderKL names them; posterior = a 1x1 conv of the pixels."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder, self.decoder = torch.nn.Conv2d(3, 8, 1), torch.nn.Conv2d(4, 3, 1)
        self.config = SimpleNamespace(latent_channels=4)
        self.rows: list[int] = []

    def encode(self, pixels):
        self.rows.append(len(pixels))
        return SimpleNamespace(latent_dist=DiagonalGaussianDistribution(self.encoder(pixels)))


def test_disk_cache_is_shared_by_later_runs_and_samples_as_the_vae(tmp_path):
    from mixkit.training.latent_disk_store import LatentDiskStore

    torch.manual_seed(0)
    vae = TinyVae()
    images = {record: torch.randn(3, 2, 2) for record in (7, 8, 9)}
    batch = [7, 8, 7]
    pixels = torch.stack([images[r] for r in batch])
    first = LatentCache(LatentDiskStore.for_vae(vae, tmp_path))
    with torch.no_grad():
        sampled = first.posterior(vae, batch, pixels).sample(generator=torch.Generator().manual_seed(3))
        direct = vae.encode(pixels).latent_dist.sample(generator=torch.Generator().manual_seed(3))
    assert vae.rows == [2, 3] and torch.equal(sampled, direct)
    files = sorted((tmp_path / "latents").glob("*/*.safetensors"))
    assert len(files) == 2
    # A new run (new cache object, records numbered differently) reads them: the encoder sees record 9 only.
    later = LatentCache(LatentDiskStore.for_vae(vae, tmp_path))
    vae.rows.clear()
    with torch.no_grad():
        again = later.posterior(vae, [0, 1, 2], torch.stack([images[8], images[9], images[7]]))
    assert vae.rows == [1] and len(later) == 3
    assert torch.equal(again.parameters[0], vae.encoder(images[8][None])[0].detach())
    # A file removed during the run is encoded again rather than failing the step.
    for file in (tmp_path / "latents").glob("*/*.safetensors"):
        file.unlink()
    vae.rows.clear()
    with torch.no_grad():
        later.posterior(vae, [0, 1], torch.stack([images[8], images[9]]))
    assert vae.rows == [2]


def test_fingerprint_follows_the_encoder_and_its_dtype_not_the_decoder():
    from mixkit.training.latent_disk_store import encoder_fingerprint

    torch.manual_seed(0)
    vae = TinyVae()
    same = encoder_fingerprint(vae)
    with torch.no_grad():
        vae.decoder.weight.add_(1.0)  # a decoder-only fine-tune (SD's ft-MSE VAE) keeps the posteriors
    assert encoder_fingerprint(vae) == same
    with torch.no_grad():
        vae.encoder.bias[0] += 1e-3
    changed = encoder_fingerprint(vae)
    assert changed != same
    assert encoder_fingerprint(vae.to(torch.bfloat16)) not in (same, changed)


def test_pixels_key_changes_with_any_value_shape_or_dtype():
    from mixkit.training.latent_disk_store import pixels_key

    image = torch.zeros(3, 4, 4)
    nudged = image.clone()
    nudged[0, 0, 0] = 1 / 127.5
    keys = {pixels_key(image), pixels_key(nudged), pixels_key(image.reshape(3, 2, 8)), pixels_key(image.double())}
    assert len(keys) == 4 and pixels_key(image.clone()) == pixels_key(image)


def test_an_unreadable_file_is_encoded_again_with_a_warning(tmp_path):
    import pytest

    from mixkit.training.latent_disk_store import LatentDiskStore

    vae = TinyVae()
    image = torch.randn(1, 3, 2, 2)
    store = LatentDiskStore.for_vae(vae, tmp_path)
    store.path(store.key(image[0])).write_bytes(b"not a safetensors file")
    with torch.no_grad(), pytest.warns(RuntimeWarning, match="could not be read.*encoding that image again"):
        posterior = LatentCache(store).posterior(vae, [0], image)
    assert vae.rows == [1]
    assert torch.equal(store.load(store.key(image[0])), posterior.parameters[0])


def test_an_unwritable_cache_folder_is_refused_up_front(tmp_path):
    import pytest

    from mixkit.training.latent_disk_store import LatentCacheFolderError, LatentDiskStore

    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder should be")
    with pytest.raises(LatentCacheFolderError, match="cannot write the latent cache folder.*MIXKIT_CACHE_DIR"):
        LatentDiskStore.for_vae(TinyVae(), blocked)
