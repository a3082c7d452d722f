"""Tiny ESRGAN / Real-ESRGAN / SRVGG / SwinIR / DAT / HAT / SCUNet upscaler files for tests, written in the key layouts
found in the wild."""

from __future__ import annotations

from pathlib import Path

from mixkit.models.upscalers.dat import DATConfig
from mixkit.models.upscalers.hat import HATConfig
from mixkit.models.upscalers.layouts import module_to_basicsr, module_to_esrgan
from mixkit.models.upscalers.loading import build_upscaler
from mixkit.models.upscalers.rrdbnet import RRDBNetConfig
from mixkit.models.upscalers.scunet import SCUNetConfig
from mixkit.models.upscalers.srvgg import SRVGGConfig
from mixkit.models.upscalers.swinir import SwinIRConfig

TINY_RRDB = RRDBNetConfig(features=8, growth=4, blocks=1)
TINY_SRVGG = SRVGGConfig(features=8, convs=1)
# the smallest SwinIR that still has shifted blocks, two layers of different head counts and an MLP ratio of 2
TINY_SWINIR = SwinIRConfig(embed_dim=8, depths=(2, 1), num_heads=(2, 1), window_size=4, mlp_ratio=2.0,
                           upsampler="pixelshuffle", upscale=2, num_feat=8)
# the smallest DAT with shifted and unshifted spatial blocks, channel blocks, rectangular windows and an odd group
TINY_DAT = DATConfig(embed_dim=32, depths=(3, 2), num_heads=(2, 4), split_size=(2, 4), expansion_factor=2.0, upscale=2,
                     num_feat=8)
# the smallest HAT with shifted blocks, two layers of different head counts, an overlap window 1.5x its window and
# the released compress ratio (3) of its channel-attention branch
TINY_HAT = HATConfig(embed_dim=8, depths=(2, 1), num_heads=(2, 1), window_size=4, overlap_window_size=6,
                     cab_channels=2, squeeze_channels=1, mlp_ratio=2.0, upscale=2, num_feat=8)
# the smallest SCUNet with shifted blocks (down1 and body hold two) and more than one head per stage
TINY_SCUNET = SCUNetConfig(dim=16, depths=(2, 1, 1, 2, 1, 1, 1), head_dim=4, window_size=4)


def tiny_upscaler(config=TINY_RRDB, seed: int = 0):
    """A seeded random network of `config` in eval mode."""
    import torch

    torch.manual_seed(seed)
    return build_upscaler(config).eval()


def save_upscaler(model, path: str | Path, layout: str, *, wrapper: str | None = None) -> Path:
    """Write `model` as `layout` ("esrgan", "basicsr", "srvgg", "swinir", "dat", "hat", "scunet"); `wrapper` nests it
    as BasicSR's trainer does ("params_ema" / "params"). `.safetensors` paths are written as safetensors, others with
    torch.save.
    SwinIR, DAT and HAT files get the buffers their official networks store too (`with_swinir_buffers`,
    `with_dat_buffers`, `with_hat_buffers`)."""
    import torch

    state = {key: value.detach().clone().contiguous() for key, value in model.state_dict().items()}
    state = {"esrgan": module_to_esrgan, "basicsr": module_to_basicsr, "srvgg": dict,
             "swinir": with_swinir_buffers,
             "dat": lambda weights: with_dat_buffers(weights, model.config.split_size),
             "hat": lambda weights: with_hat_buffers(weights, model.config), "scunet": dict}[layout](state)
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


def with_dat_buffers(state: dict, split_size: tuple[int, int], train_size: int = 64) -> dict:
    """`state` plus what the official dat_arch.py also writes to its files: each spatial branch's `rpe_biases` and
    `relative_position_index` (branch 0 in split_size windows, branch 1 in transposed ones), and each shifted
    spatial block's `attn_mask_0` / `attn_mask_1` (for its training patch of `train_size` pixels)."""
    import re

    from mixkit.models.upscalers.dat import WindowBranch, shifted_block
    from mixkit.models.upscalers.windows import shift_mask

    out = dict(state)
    for key in state:
        match = re.match(r"(layers\.(\d+)\.blocks\.(\d+)\.attn\.)qkv\.weight$", key)
        if not match or int(match.group(3)) % 2:  # channel blocks (odd) have no windows
            continue
        prefix, group, block = match.group(1), int(match.group(2)), int(match.group(3))
        for index, (wh, ww) in enumerate((tuple(split_size), tuple(split_size)[::-1])):
            branch = WindowBranch(32, 1, wh, ww)
            out[f"{prefix}attns.{index}.rpe_biases"] = branch.rpe_biases
            out[f"{prefix}attns.{index}.relative_position_index"] = branch.relative_position_index
            if shifted_block(group, block):
                out[f"{prefix}attn_mask_{index}"] = shift_mask(train_size, train_size, wh, ww, wh // 2, ww // 2)
    return out


def with_hat_buffers(state: dict, config) -> dict:
    """`state` plus what the official hat_arch.py also writes to its files: the network's `relative_position_index_SA`
    (window attention) and `relative_position_index_OCA` (overlapping cross-attention) buffers, the latter without
    the wrap of its negative entries (the original stores them negative)."""
    import torch

    from mixkit.models.upscalers.windows import relative_position_index

    window, overlap = config.window_size, config.overlap_window_size

    def coords(side: int):
        return torch.stack(torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")).flatten(1)

    offsets = coords(overlap)[:, None, :] - coords(window)[:, :, None] + (window - overlap + 1)
    return {**state, "relative_position_index_SA": relative_position_index(window, window),
            "relative_position_index_OCA": offsets[0] * (window + overlap - 1) + offsets[1]}
