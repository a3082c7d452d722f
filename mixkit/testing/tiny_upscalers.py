"""Tiny ESRGAN / Real-ESRGAN / SRVGG / SwinIR upscaler files for tests, written in the key layouts found in the wild."""

from __future__ import annotations

from pathlib import Path

from mixkit.models.upscalers.layouts import module_to_basicsr, module_to_esrgan
from mixkit.models.upscalers.loading import build_upscaler
from mixkit.models.upscalers.rrdbnet import RRDBNetConfig
from mixkit.models.upscalers.srvgg import SRVGGConfig
from mixkit.models.upscalers.swinir import SwinIRConfig

TINY_RRDB = RRDBNetConfig(features=8, growth=4, blocks=1)
TINY_SRVGG = SRVGGConfig(features=8, convs=1)
# the smallest SwinIR that still has shifted blocks, two layers of different head counts and an MLP ratio of 2
TINY_SWINIR = SwinIRConfig(embed_dim=8, depths=(2, 1), num_heads=(2, 1), window_size=4, mlp_ratio=2.0,
                           upsampler="pixelshuffle", upscale=2, num_feat=8)


def tiny_upscaler(config=TINY_RRDB, seed: int = 0):
    """A seeded random network of `config` in eval mode."""
    import torch

    torch.manual_seed(seed)
    return build_upscaler(config).eval()


def save_upscaler(model, path: str | Path, layout: str, *, wrapper: str | None = None) -> Path:
    """Write `model` as `layout` ("esrgan", "basicsr", "srvgg", "swinir"); `wrapper` nests it as BasicSR's trainer
    does ("params_ema" / "params"). `.safetensors` paths are written as safetensors, others with torch.save. SwinIR
    files get the buffers the official network stores too (`with_swinir_buffers`)."""
    import torch

    state = {key: value.detach().clone().contiguous() for key, value in model.state_dict().items()}
    state = {"esrgan": module_to_esrgan, "basicsr": module_to_basicsr, "srvgg": dict,
             "swinir": with_swinir_buffers}[layout](state)
    path = Path(path)
    if path.suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file(state, str(path))
    else:
        torch.save({wrapper: state} if wrapper else state, path)
    return path


def with_swinir_buffers(state: dict, train_size: int | None = None) -> dict:
    """`state` plus what the official network_swinir.py also writes to its files: every block's
    `attn.relative_position_index` and each shifted block's `attn_mask`, sized for its training patch
    (`train_size` pixels, 64 in the released models; default 4 windows)."""
    import re

    from mixkit.models.upscalers.windows import relative_position_index, shift_mask

    out = dict(state)
    for key, table in state.items():
        match = re.match(r"(layers\.\d+\.residual_group\.blocks\.(\d+)\.)attn\.relative_position_bias_table$", key)
        if not match:
            continue
        window = (round(table.shape[0] ** 0.5) + 1) // 2
        out[match.group(1) + "attn.relative_position_index"] = relative_position_index(window, window)
        if int(match.group(2)) % 2:
            side = train_size or 4 * window
            out[match.group(1) + "attn_mask"] = shift_mask(side, side, window, window, window // 2, window // 2)
    return out
