"""Tiny ESRGAN / Real-ESRGAN / SRVGG upscaler files for tests, written in the key layouts found in the wild."""

from __future__ import annotations

from pathlib import Path

from mixkit.models.upscalers.layouts import module_to_basicsr, module_to_esrgan
from mixkit.models.upscalers.loading import build_upscaler
from mixkit.models.upscalers.rrdbnet import RRDBNetConfig
from mixkit.models.upscalers.srvgg import SRVGGConfig

TINY_RRDB = RRDBNetConfig(features=8, growth=4, blocks=1)
TINY_SRVGG = SRVGGConfig(features=8, convs=1)


def tiny_upscaler(config=TINY_RRDB, seed: int = 0):
    """A seeded random network of `config` in eval mode."""
    import torch

    torch.manual_seed(seed)
    return build_upscaler(config).eval()


def save_upscaler(model, path: str | Path, layout: str, *, wrapper: str | None = None) -> Path:
    """Write `model` as `layout` ("esrgan", "basicsr", "srvgg"); `wrapper` nests it as BasicSR's trainer does
    ("params_ema" / "params"). `.safetensors` paths are written as safetensors, others with torch.save."""
    import torch

    state = {key: value.detach().clone().contiguous() for key, value in model.state_dict().items()}
    state = {"esrgan": module_to_esrgan, "basicsr": module_to_basicsr, "srvgg": dict}[layout](state)
    path = Path(path)
    if path.suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file(state, str(path))
    else:
        torch.save({wrapper: state} if wrapper else state, path)
    return path
