"""Run a diffusers AutoencoderKL's decoder (and encoder, for img2img) through OpenVINO.

Each part is converted on first use at the shape it is called with and saved as a static-shape
graph, keyed by model hash + merged LoRA set + weights + shape (see `openvino_cache`): the image
size is fixed for a whole generation, and static graphs are what OpenVINO's CPU plugin runs
fastest. Images are processed one at a time (pipelines decode per image anyway), so the batch
size never adds a shape. The int8 decoder (`pipelines.approx.int8`) is the exception: it is made
from a graph with free height and width and reshaped per size, so one calibration serves all sizes.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

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
    int8_decoder_path: Path | None = None  # the int8 decoder graph in use (pipelines.approx.int8), None: float
    _int8_decoder: CompiledShapes | None = None
    _recorded: list | None = None  # decoder inputs collected by `recording()`

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

    @contextmanager
    def recording(self) -> Iterator[list]:
        """Collect the decoder's inputs inside the block (one [1, C, h, w] numpy array per image, in a
        list each, as NNCF's dataset wants them): the calibration data of the int8 decoder."""
        self._recorded = []
        try:
            yield self._recorded
        finally:
            self._recorded = None

    def dynamic_decoder_graph(self):
        """The float decoder converted with free batch, height and width: the source of the int8 decoder,
        which serves every image size from one calibration (its per-channel ranges do not depend on size)."""
        example = torch.zeros(1, self.config.latent_channels, 8, 8)
        return trace_to_openvino(_DecoderGraph(self.torch_module), (example,), static=False)

    def use_int8_decoder(self, model, path: Path) -> None:
        """Decode with the quantized decoder graph `model` from now on (compiled once per image size)."""
        self._int8_decoder = CompiledShapes(model, cache_dir=self.cache_dir, inference_precision=self.inference_precision)
        self.int8_decoder_path = path

    @property
    def int8_decoder_graph(self):
        """The quantized decoder graph in use, or None (the float one)."""
        return self._int8_decoder.model if self._int8_decoder is not None else None

    def use_float_decoder(self) -> None:
        self._int8_decoder, self.int8_decoder_path = None, None

    def fingerprint(self) -> str:
        """A content hash of the VAE weights (see `openvino_cache.weights_fingerprint`), computed once."""
        if self._fingerprint is None:  # once: the weights cannot change under a converted model
            self._fingerprint = weights_fingerprint(self.torch_module)
        return self._fingerprint

    def _run(self, part: str, graph: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        outputs = []
        for item in x.float().contiguous().split(1):  # one image at a time: one static shape per size
            if part == "decoder" and self._recorded is not None:
                self._recorded.append([item.numpy().copy()])
            if part == "decoder" and self._int8_decoder is not None:
                outputs.append(self._int8_decoder([item.numpy()])[0])
                continue
            slot = (part, tuple(item.shape))
            if slot not in self._parts:
                key = cache_key(f"vae-{part}", self.torch_module, self.identity, [item.shape],
                                fingerprint=self.fingerprint())
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
