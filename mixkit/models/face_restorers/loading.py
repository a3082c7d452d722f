"""Load a GFPGAN or CodeFormer file (.pth / .pt / .safetensors) into an eval-mode restorer without gradients.

Pickled files go through `mixkit.io.loading` (scanned, then torch's weights-only loader), so nothing in a file can
run code. The network and its sizes come from the tensors alone; the weights must then fill it exactly.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from mixkit.errors import CheckpointFormatError
from mixkit.io.state_fit import check_state_fits
from mixkit.models.face_restorers.codeformer import CodeFormer, CodeFormerConfig
from mixkit.models.face_restorers.gfpgan import GFPGAN, GFPGANConfig
from mixkit.models.face_restorers.layouts import UnknownFaceRestorerError, detect_face_restorer, unwrap_trainer_state

FaceRestorer = GFPGAN | CodeFormer
FACE_RESTORER_SUFFIXES = (".pth", ".pt", ".safetensors")


def build_face_restorer(config: GFPGANConfig | CodeFormerConfig) -> FaceRestorer:
    """A randomly initialised network of `config` (the tests' tiny models, and the shell the loader fills)."""
    if isinstance(config, GFPGANConfig):
        return GFPGAN(config)
    if isinstance(config, CodeFormerConfig):
        return CodeFormer(config)
    raise TypeError(f"config must be a GFPGANConfig or CodeFormerConfig, got {type(config).__name__}.")


def read_face_restorer_weights(path: str | os.PathLike) -> tuple[GFPGANConfig | CodeFormerConfig,
                                                                 dict[str, torch.Tensor]]:
    """(config, state dict) of a face restorer file, on the CPU; CheckpointFormatError names the file and what is
    supported when it is neither network."""
    from mixkit.io.loading import read_checkpoint
    from mixkit.io.tensor_checks import refuse_hollow_tensors, refuse_non_finite_tensors

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file path (str or os.PathLike), got {type(path).__name__}.")
    file = Path(path).expanduser()
    loaded = read_checkpoint(file)
    if not isinstance(loaded, dict):
        raise CheckpointFormatError(f"{str(file)!r} holds a {type(loaded).__name__}, not face restorer weights.")
    _, weights = unwrap_trainer_state(loaded)
    state = {key: value for key, value in weights.items() if isinstance(key, str) and isinstance(value, torch.Tensor)}
    refuse_hollow_tensors(file, state)  # before the shapes size a network: a tiny file must not ask for gigabytes
    try:
        config = detect_face_restorer(state)
    except UnknownFaceRestorerError as error:
        keys = ", ".join(list(state)[:5]) or "no tensors"
        raise CheckpointFormatError(f"{str(file)!r} is {error} (its first keys: {keys}).") from None
    refuse_non_finite_tensors(file, state, config.__class__.__name__.removesuffix("Config"))
    return config, state


def load_face_restorer(path: str | os.PathLike, device: str | torch.device | None = None,
                       dtype: torch.dtype | None = None) -> tuple[str, FaceRestorer]:
    """("GFPGAN" | "CodeFormer", the network in `path`) in eval mode without gradients, on `device` (default CPU)
    in `dtype` (default float32). `module(faces, weight=None)` restores aligned faces [N, 3, 512, 512] in [-1, 1]."""
    if device is not None and not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be None, a str such as 'cuda:0' or a torch.device, got {device!r}.")
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be None or a floating torch dtype (torch.float32, torch.float16, "
                        f"torch.bfloat16), got {dtype!r}.")
    device = _available_device(device)
    config, state = read_face_restorer_weights(path)
    with torch.device("meta"):  # a shell without memory: the file fills every tensor below
        model = build_face_restorer(config)
    expected = model.state_dict()
    check_state_fits(expected, state, path, f"{model.arch_name} (the network its shapes describe)",
                     hint=f"Expected the weights of one network: {model.arch_name} as released (e.g. GFPGANv1.4.pth, "
                          "codeformer.pth) or retrained with its code.")
    # allocated straight on `device` in `dtype`, then filled: no random init, no float32 CPU copy of a GPU model
    model = model.to_empty(device=device).to(dtype or torch.float32)
    model.load_state_dict(state)
    return model.arch_name, model.eval().requires_grad_(False)


def _available_device(device: str | torch.device | None) -> torch.device:
    """`device` (None = CPU), checked before the file is read, so a missing GPU is not reported as a bad file."""
    try:
        device = torch.device("cpu" if device is None else device)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as error:
        raise ValueError(f"device {str(device)!r} is not a usable torch device here ({error}); use 'cpu' or an "
                         "available accelerator such as 'cuda:0'.") from None
    return device
