"""VAE posteriors on disk, kept between runs (kohya's `cache_latents_to_disk`).

Why: `cache_latents` spares the encoder at every step, but each run starts cold and holds every
posterior in RAM (131 KB per 512-px SD 1.5 image: 1.3 GB for 10,000 images). Hyper-parameter
searches and resumed jobs put the same images through the same VAE again and again; on disk the
encoder runs once per image for all of them, and a run holds only the file names in memory.

Layout: `<cache root>/latents/<encoder fingerprint>/<pixels key>.safetensors`, one file per training
image at its bucket's size. The pixels key hashes the exact tensor the encoder sees (after loading,
resizing and cropping), so an edited image, another resolution, bucket or crop is a new file, never a
stale hit. The fingerprint hashes the encoder's weights, dtype and class: another VAE, or the same one
in bf16, never reads these posteriors, while a VAE whose decoder alone was fine-tuned (SD's ft-MSE
VAE) shares them, since its posteriors are the same. Files are written atomically; one that cannot
be read is encoded again and replaced, with a warning.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import torch

from mixkit.errors import MixkitError
from mixkit.io.atomic import atomic_output_path
from mixkit.io.cache_root import LATENTS_DESCRIPTION, LATENTS_FOLDER, cache_root

_ENCODER_PARTS = ("encoder.", "quant_conv.")  # all a diffusers AutoencoderKL's posterior depends on


class LatentCacheFolderError(MixkitError, OSError):
    """The latent cache folder cannot be written; raised before the first training step."""


def latent_cache_dir(root: Path | None = None) -> Path:
    return (Path(root) if root is not None else cache_root()) / LATENTS_FOLDER


def encoder_fingerprint(vae: torch.nn.Module) -> str:
    """A hash of what decides a posterior: the encoder's (and quant_conv's) tensors, their dtypes and the class."""
    state = vae.state_dict()
    names = sorted(n for n in state if n.startswith(_ENCODER_PARTS)) or sorted(state)
    digest = hashlib.blake2b(type(vae).__name__.encode(), digest_size=16)
    for name in names:
        tensor = state[name].detach().contiguous().cpu()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def pixels_key(pixels: torch.Tensor) -> str:
    """A hash of one image exactly as the encoder receives it (values, shape and dtype)."""
    row = pixels.detach().contiguous().cpu()
    digest = hashlib.blake2b(f"{row.dtype}:{tuple(row.shape)}".encode(), digest_size=20)
    digest.update(row.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


class LatentDiskStore:
    """One VAE encoder's posteriors, one safetensors file per image."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._warned = False

    @classmethod
    def for_vae(cls, vae: torch.nn.Module, root: Path | None = None) -> "LatentDiskStore":
        """The store of `vae`'s encoder under the cache root, created and checked writable now, so an
        unwritable cache fails the run before its first step rather than in the middle of it."""
        folder = latent_cache_dir(root) / encoder_fingerprint(vae)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            about = folder / LATENTS_DESCRIPTION
            if not about.exists():
                dtype = next((p.dtype for p in vae.parameters()), torch.float32)
                with atomic_output_path(about) as temp:
                    temp.write_text(json.dumps({"vae": type(vae).__name__, "dtype": str(dtype).removeprefix("torch."),
                                                "latent_channels": getattr(vae.config, "latent_channels", None)}))
        except OSError as error:
            raise LatentCacheFolderError(
                f"cache_latents_to_disk cannot write the latent cache folder {str(folder)!r} "
                f"({getattr(error, 'strerror', None) or error}); make it writable, point MIXKIT_CACHE_DIR at a "
                "writable folder, or use cache_latents=True (in memory) instead") from error
        return cls(folder)

    def key(self, pixels: torch.Tensor) -> str:
        return pixels_key(pixels)

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.safetensors"

    def load(self, key: str) -> torch.Tensor | None:
        """The stored posterior parameters, or None when there is no readable file for `key`."""
        from safetensors.torch import load_file

        path = self.path(key)
        if not path.is_file():
            return None
        try:
            return load_file(path)["parameters"]
        except Exception as error:  # noqa: BLE001 - any unreadable file is re-encoded, never trusted
            if not self._warned:
                warnings.warn(f"latent cache file {path} could not be read ({type(error).__name__}: {error}); "
                              "encoding that image again and replacing the file", RuntimeWarning, stacklevel=2)
                self._warned = True
            return None

    def save(self, key: str, parameters: torch.Tensor) -> None:
        from safetensors.torch import save_file

        with atomic_output_path(self.path(key)) as temp:
            save_file({"parameters": parameters.detach().contiguous().cpu()}, str(temp))
