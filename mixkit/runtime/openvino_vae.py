"""Run a diffusers AutoencoderKL's decoder (and encoder, for img2img) through OpenVINO.

Each part is converted on first use at the shape it is called with and saved as a static-shape
graph, keyed by model hash + merged LoRA set + weights + shape (see `openvino_cache`): the image
size is fixed for a whole generation, and static graphs are what OpenVINO's CPU plugin runs
fastest. Images are processed one at a time (pipelines decode per image anyway), so the batch
size never adds a shape.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from mixkit.runtime.openvino_cache import (CompiledShapes, ExportIdentity, cache_key, load_or_export, require_openvino,
                                           trace_to_openvino, weights_fingerprint)


class _DecoderGraph(torch.nn.Module):
    def __init__(self, vae: torch.nn.Module) -> None:
        super().__init__()
        self.vae = vae

    def forward(self, z):
        return self.vae.decode(z, return_dict=False)[0]


class _EncoderGraph(torch.nn.Module):
    """The posterior's moments (mean and log-variance stacked on channels), before any sampling."""

    def __init__(self, vae: torch.nn.Module) -> None:
        super().__init__()
        self.vae = vae

    def forward(self, x):
        return self.vae.encode(x, return_dict=False)[0].parameters


class OpenVinoVae:
    """Stands in for a diffusers AutoencoderKL in mixkit's pipelines: `decode(z).sample`,
    `encode(x).latent_dist`, `.config`, `.dtype`, `.device`.

    Inputs and outputs are float32 on the CPU. Features the fixed graphs do not contain (tiling,
    slicing, a torch module's hooks) are refused, never ignored.
    """

    dtype = torch.float32
    device = torch.device("cpu")

    def __init__(self, vae: torch.nn.Module, *, cache_dir: str | os.PathLike, inference_precision: str = "f32",
                 identity: ExportIdentity | None = None) -> None:
        require_openvino()
        if not isinstance(vae, torch.nn.Module) or not hasattr(vae, "decode") or not hasattr(vae, "encode"):
            raise TypeError(f"OpenVinoVae expects a diffusers AutoencoderKL, got {type(vae).__name__}")
        if inference_precision not in ("f32", "bf16"):
            raise ValueError(f"inference_precision must be 'f32' or 'bf16', got {inference_precision!r}")
        self.torch_module = vae.float().eval()
        self.config = vae.config
        self.cache_dir = Path(cache_dir)
        self.inference_precision = inference_precision
        self.identity = identity or ExportIdentity()
        self._parts: dict[tuple, CompiledShapes] = {}
        self._fingerprint: str | None = None
        self.cache_paths: dict[tuple, Path] = {}
        self.cache_hits: dict[tuple, bool] = {}

    def _run(self, part: str, graph: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        outputs = []
        for item in x.float().contiguous().split(1):  # one image at a time: one static shape per size
            slot = (part, tuple(item.shape))
            if slot not in self._parts:
                if self._fingerprint is None:  # once: the weights cannot change under a converted model
                    self._fingerprint = weights_fingerprint(self.torch_module)
                key = cache_key(f"vae-{part}", self.torch_module, self.identity, [item.shape], fingerprint=self._fingerprint)
                model, path, hit = load_or_export(self.cache_dir, key,
                                                  lambda: trace_to_openvino(graph, (item,), static=True))
                self._parts[slot] = CompiledShapes(model, cache_dir=self.cache_dir,
                                                   inference_precision=self.inference_precision)
                self.cache_paths[slot], self.cache_hits[slot] = path, hit
            outputs.append(self._parts[slot]([item.numpy()])[0])
        return torch.cat(outputs)

    def decode(self, z: torch.Tensor, return_dict: bool = True, generator=None):
        """Latents (already divided by the scaling factor) -> pixels in about [-1, 1]."""
        from diffusers.models.autoencoders.vae import DecoderOutput

        _check_latents(z, self.config.latent_channels, "decode")
        sample = self._run("decoder", _DecoderGraph(self.torch_module), z)
        return DecoderOutput(sample=sample) if return_dict else (sample,)

    def encode(self, x: torch.Tensor, return_dict: bool = True):
        """Pixels in [-1, 1] -> the latent posterior (its `.mean`, `.sample(generator)`, `.mode()`)."""
        from diffusers.models.autoencoders.autoencoder_kl import AutoencoderKLOutput
        from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution

        _check_latents(x, self.config.in_channels, "encode")
        posterior = DiagonalGaussianDistribution(self._run("encoder", _EncoderGraph(self.torch_module), x))
        return AutoencoderKLOutput(latent_dist=posterior) if return_dict else (posterior,)

    def __call__(self, *args, **kwargs):
        raise ValueError("OpenVinoVae runs decode() and encode() only; call those (a full forward pass "
                         "is a training-time use: use backend='torch')")

    def __getattr__(self, name: str):
        # Only reached for attributes a torch VAE has and this stand-in does not (tiling, slicing, modules...).
        raise AttributeError(f"{name!r}: the openvino backend runs converted VAE graphs, so features that need the "
                             "torch VAE's modules (tiling, slicing, hooks, training) need backend='torch'")


def _check_latents(x, channels: int, what: str) -> None:
    if not isinstance(x, torch.Tensor) or x.ndim != 4 or x.shape[1] != channels:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"OpenVinoVae.{what} expects a [batch, {channels}, height, width] tensor, got {shape}")
