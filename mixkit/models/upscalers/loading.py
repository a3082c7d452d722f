"""Load an upscaler file (.pth / .pt / .safetensors) into an eval-mode `RRDBNet`, `SRVGGNetCompact`, `SwinIR`, `DAT`,
`HAT` or `SCUNet`.

Pickled files go through `mixkit.io.loading` (scanned, then torch's weights-only loader); nothing in a file can run
code. The network and its sizes come from the tensors alone, so a renamed file still loads.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from mixkit.errors import CheckpointFormatError
from mixkit.io.state_fit import check_state_fits
from mixkit.models.upscalers.dat import DAT, DATConfig
from mixkit.models.upscalers.layouts import TO_MODULE, UnknownLayoutError, detect_layout, unwrap_trainer_state
from mixkit.models.upscalers.hat import HAT, HATConfig
from mixkit.models.upscalers.rrdbnet import RRDBNet, RRDBNetConfig
from mixkit.models.upscalers.scunet import SCUNet, SCUNetConfig
from mixkit.models.upscalers.srvgg import SRVGGConfig, SRVGGNetCompact
from mixkit.models.upscalers.swinir import SwinIR, SwinIRConfig

UpscalerConfig = RRDBNetConfig | SRVGGConfig | SwinIRConfig | DATConfig | HATConfig | SCUNetConfig
UpscalerNetwork = RRDBNet | SRVGGNetCompact | SwinIR | DAT | HAT | SCUNet
_NETWORKS = {RRDBNetConfig: RRDBNet, SRVGGConfig: SRVGGNetCompact, SwinIRConfig: SwinIR, DATConfig: DAT, HATConfig: HAT,
             SCUNetConfig: SCUNet}

UPSCALER_SUFFIXES = (".pth", ".pt", ".safetensors")


def read_upscaler_weights(path: str | os.PathLike) -> tuple[str, UpscalerConfig, dict[str, torch.Tensor]]:
    """(layout, config, state dict in the module's names) of an upscaler file, on the CPU.

    Raises CheckpointFormatError naming the file and the layouts expected when the file is none of them.
    """
    from mixkit.io.loading import read_checkpoint
    from mixkit.io.tensor_checks import refuse_hollow_tensors, refuse_non_finite_tensors

    file = Path(path).expanduser()
    loaded = read_checkpoint(file)
    if not isinstance(loaded, dict):
        raise CheckpointFormatError(f"{str(file)!r} holds a {type(loaded).__name__}, not upscaler weights.")
    state = {key: value for key, value in unwrap_trainer_state(loaded).items()
             if isinstance(key, str) and isinstance(value, torch.Tensor)}
    refuse_hollow_tensors(file, state)  # before the shapes size a network: a tiny file must not ask for gigabytes
    try:
        layout = detect_layout(state)
        config, renamed = TO_MODULE[layout](state)
    except UnknownLayoutError as error:
        keys = ", ".join(list(state)[:5]) or "no tensors"
        raise CheckpointFormatError(f"{str(file)!r} is {error} (its first keys: {keys}).") from None
    refuse_non_finite_tensors(file, renamed, f"{layout} upscaler")  # NaN weights would upscale to black
    return layout, config, renamed


def build_upscaler(config: UpscalerConfig) -> UpscalerNetwork:
    """A randomly initialised network of `config` (the tests' tiny models, and the shell `load_upscaler` fills)."""
    return _NETWORKS[type(config)](config)


def load_upscaler(path: str | os.PathLike, *, device: str | torch.device = "cpu",
                  dtype: torch.dtype = torch.float32) -> UpscalerNetwork:
    """The network in `path`, in eval mode on `device` in `dtype`; the weights must fill it exactly."""
    layout, config, state = read_upscaler_weights(path)
    # The sizes come from a few tensors and the block count from key names, so the network is first laid out on
    # the meta device (no memory): a file that does not hold every weight of it is refused before allocating it.
    with torch.device("meta"):
        expected = build_upscaler(config).state_dict()
    check_state_fits(expected, state, path, f"the {layout} layout", hint=f"Expected {layout} weights of a single network.")
    model = build_upscaler(config)
    model.load_state_dict(state)
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)
