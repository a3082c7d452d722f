"""Which super-resolution network a state dict holds, its sizes read from the tensor shapes, and its keys renamed
to the modules of `rrdbnet` / `srvgg`.

Three key layouts are in the wild:
- the original ESRGAN repository's `model.0.weight`, `model.1.sub.N.RDB1.conv1.0.weight` (a flat nn.Sequential;
  4x-UltraSharp, 4x_foolhardy_Remacri, ESRGAN_4x and most community models),
- BasicSR's `conv_first`, `body.N.rdb1.conv1`, `conv_up1` (RealESRGAN_x4plus, _x2plus ...), often wrapped in
  `params_ema` / `params` by the trainer,
- SRVGGNetCompact's `body.N.weight` with PReLU weights at the odd indices (realesr-general-x4v3, animevideov3),
- SwinIR's `conv_first`, `layers.N.residual_group.blocks.M...` (the official network_swinir.py names; its sizes are
  read by `swinir_layout`),
- DAT's `conv_first`, `before_RG.1`, `layers.N.blocks.M...` (the official dat_arch.py names; `dat_layout`),
- HAT's SwinIR-like names plus `...blocks.M.conv_block.cab` and `...residual_group.overlap_attn` (the official
  hat_arch.py names; `hat_layout`; told apart before SwinIR),
- SCUNet's `m_head.0`, `m_down1.N.trans_block.msa...`, `m_tail.0` (the official network_scunet.py names;
  `scunet_layout`).
The ESRGAN repository's later `RRDBNet_arch.py` names (`RRDB_trunk.N.RDB1.conv1`, `trunk_conv`, `upconv1`, `HRconv`;
its RRDB_ESRGAN_x4.pth release) are BasicSR's under other names and are read too.
"""

from __future__ import annotations

import re
from typing import Callable

import torch

from mixkit.models.upscalers.dat_layout import dat_to_module, looks_like_dat
from mixkit.models.upscalers.hat_layout import hat_to_module, looks_like_hat
from mixkit.models.upscalers.rrdbnet import RRDBNetConfig
from mixkit.models.upscalers.scunet_layout import looks_like_scunet, scunet_to_module
from mixkit.models.upscalers.srvgg import SRVGGConfig
from mixkit.models.upscalers.swinir_layout import TransformerLayoutError, looks_like_swinir, swinir_to_module

EXPECTED = ("ESRGAN (keys model.0.weight, model.1.sub.0.RDB1.conv1.0.weight ... or RRDB_trunk.0.RDB1.conv1.weight ...), "
            "BasicSR RRDBNet (conv_first.weight, body.0.rdb1.conv1.weight ...), SRVGGNetCompact (body.0.weight ... "
            "with PReLU weights), SwinIR (conv_first.weight, layers.0.residual_group.blocks.0.attn.qkv.weight ...), "
            "DAT (conv_first.weight, before_RG.1.weight, layers.0.blocks.0.attn.attns.0.rpe_biases ...), HAT "
            "(conv_first.weight, layers.0.residual_group.blocks.0.conv_block.cab.0.weight, "
            "layers.0.residual_group.overlap_attn.qkv.weight ...) or SCUNet (m_head.0.weight, "
            "m_down1.0.trans_block.msa.relative_position_params, m_tail.0.weight ...)")
# the later ESRGAN names -> BasicSR's
_TRUNK_NAMES = ((re.compile(r"^RRDB_trunk\.(\d+)\.RDB(\d)\."), r"body.\1.rdb\2."),
                (re.compile(r"^trunk_conv\."), "conv_body."), (re.compile(r"^upconv(\d)\."), r"conv_up\1."),
                (re.compile(r"^HRconv\."), "conv_hr."))

_OLD_DENSE = re.compile(r"model\.1\.sub\.(\d+)\.RDB(\d)\.conv(\d)\.0\.(weight|bias)$")
_OLD_CONV = re.compile(r"model\.(\d+)\.(weight|bias)$")
_BASICSR_UP = re.compile(r"conv_up(\d+)\.(weight|bias)$")


class UnknownLayoutError(ValueError):
    """A state dict that is none of the supported networks."""


def unwrap_trainer_state(loaded: dict) -> dict:
    """The weights of a BasicSR training checkpoint: its EMA weights (`params_ema`) when present, as Real-ESRGAN's
    inference does, else `params`; any other dict is taken as the weights themselves."""
    for key in ("params_ema", "params"):
        if isinstance(loaded.get(key), dict):
            return loaded[key]
    return loaded


def detect_layout(state: dict[str, torch.Tensor]) -> str:
    """"esrgan", "esrgan_trunk", "basicsr", "srvgg", "hat", "swinir", "dat" or "scunet" (raises
    UnknownLayoutError)."""
    if "model.0.weight" in state and any(_OLD_DENSE.match(key) for key in state):
        return "esrgan"
    if "conv_first.weight" in state and "body.0.rdb1.conv1.weight" in state:
        return "basicsr"
    if "conv_first.weight" in state and "RRDB_trunk.0.RDB1.conv1.weight" in state:
        return "esrgan_trunk"
    if "body.0.weight" in state and getattr(state.get("body.1.weight"), "ndim", 0) == 1:
        return "srvgg"
    if looks_like_hat(state):  # before SwinIR: a HAT has every key prefix a SwinIR has
        return "hat"
    if looks_like_swinir(state):
        return "swinir"
    if looks_like_dat(state):
        return "dat"
    if looks_like_scunet(state):
        return "scunet"
    raise UnknownLayoutError(f"not a known upscaler layout; expected {EXPECTED}")


def esrgan_to_module(state: dict[str, torch.Tensor]) -> tuple[RRDBNetConfig, dict[str, torch.Tensor]]:
    """The old ESRGAN layout renamed to `RRDBNet`'s modules. After `model.1` (the RRDB trunk and its closing conv)
    the convolutions are, in order: one per nearest-x2 stage, then the HR conv and the last conv."""
    renamed, tail = {}, {}
    trunk_end = -1
    for key, value in state.items():
        dense = _OLD_DENSE.match(key)
        if dense:
            block, rdb, conv, kind = dense.groups()
            renamed[f"body.{block}.rdb{rdb}.conv{conv}.{kind}"] = value
            continue
        trunk = re.match(r"model\.1\.sub\.(\d+)\.(weight|bias)$", key)
        if trunk:
            trunk_end = int(trunk.group(1))
            renamed[f"conv_body.{trunk.group(2)}"] = value
            continue
        conv = _OLD_CONV.match(key)
        if conv and int(conv.group(1)) == 0:
            renamed[f"conv_first.{conv.group(2)}"] = value
        elif conv:
            tail.setdefault(int(conv.group(1)), {})[conv.group(2)] = value
        else:
            raise UnknownLayoutError(f"unexpected key {key!r} for the ESRGAN layout; expected {EXPECTED}")
    if trunk_end < 0 or len(tail) < 2:
        raise UnknownLayoutError(f"the ESRGAN layout's trunk conv (model.1.sub.N) or HR/last convs are missing; "
                                 f"expected {EXPECTED}")
    order = sorted(tail)
    names = [f"ups.{i}" for i in range(len(order) - 2)] + ["conv_hr", "conv_last"]
    for name, index in zip(names, order):
        for kind, value in tail[index].items():
            renamed[f"{name}.{kind}"] = value
    return _rrdb_config(renamed, len(order) - 2), renamed


def basicsr_to_module(state: dict[str, torch.Tensor]) -> tuple[RRDBNetConfig, dict[str, torch.Tensor]]:
    """BasicSR's RRDBNet renamed to `RRDBNet`'s modules (`conv_upN` -> `ups.N-1`)."""
    renamed = {}
    for key, value in state.items():
        up = _BASICSR_UP.match(key)
        renamed[f"ups.{int(up.group(1)) - 1}.{up.group(2)}" if up else key] = value
    upsamples = len({key.split(".")[1] for key in renamed if key.startswith("ups.")})
    return _rrdb_config(renamed, upsamples), renamed


def esrgan_trunk_to_module(state: dict[str, torch.Tensor]) -> tuple[RRDBNetConfig, dict[str, torch.Tensor]]:
    """The later ESRGAN names renamed to BasicSR's, then as BasicSR."""
    renamed = {}
    for key, value in state.items():
        for pattern, replacement in _TRUNK_NAMES:
            key = pattern.sub(replacement, key)
        renamed[key] = value
    return basicsr_to_module(renamed)


def srvgg_to_module(state: dict[str, torch.Tensor]) -> tuple[SRVGGConfig, dict[str, torch.Tensor]]:
    """SRVGGNetCompact's keys are already the module's; the sizes come from the first and last convolutions."""
    convs = sorted(int(key.split(".")[1]) for key, value in state.items()
                   if key.startswith("body.") and key.endswith(".weight") and value.ndim == 4)
    first, last = state[f"body.{convs[0]}.weight"], state[f"body.{convs[-1]}.weight"]
    in_channels = first.shape[1]
    scale = round((last.shape[0] / in_channels) ** 0.5)
    if scale * scale * in_channels != last.shape[0]:
        raise UnknownLayoutError(f"the last convolution's {last.shape[0]} outputs are not {in_channels} channels "
                                 "times a square scale; expected an SRVGGNetCompact")
    config = SRVGGConfig(in_channels=in_channels, out_channels=in_channels, features=first.shape[0],
                         convs=len(convs) - 2, scale=scale)
    return config, dict(state)


def _transformer_layout(to_module: Callable) -> Callable:
    """A transformer network's converter (`swinir_layout`, `dat_layout`, `hat_layout`, `scunet_layout`: the keys are
    already the module's, every size is read from the shapes), refusing a file as the other layouts do: with
    UnknownLayoutError, which lists the layouts expected."""
    def convert(state: dict[str, torch.Tensor]):
        try:
            return to_module(state)
        except TransformerLayoutError as error:
            raise UnknownLayoutError(f"{error}; expected {EXPECTED}") from None

    return convert


def _rrdb_config(state: dict[str, torch.Tensor], upsamples: int) -> RRDBNetConfig:
    first, last = state["conv_first.weight"], state["conv_last.weight"]
    blocks = len({key.split(".")[1] for key in state if key.startswith("body.")})
    config = RRDBNetConfig(in_channels=first.shape[1], out_channels=last.shape[0], features=first.shape[0],
                           growth=state["body.0.rdb1.conv1.weight"].shape[0], blocks=blocks, upsamples=upsamples)
    if config.in_channels // config.out_channels not in (1, 4, 16) or config.in_channels % config.out_channels:
        raise UnknownLayoutError(f"conv_first takes {config.in_channels} channels for {config.out_channels} output "
                                 "channels; expected 1x (RGB), 4x (x2 pixel-unshuffle) or 16x (x1 pixel-unshuffle)")
    return config


TO_MODULE: dict[str, Callable] = {"esrgan": esrgan_to_module, "esrgan_trunk": esrgan_trunk_to_module,
                                  "basicsr": basicsr_to_module, "srvgg": srvgg_to_module,
                                  "swinir": _transformer_layout(swinir_to_module),
                                  "dat": _transformer_layout(dat_to_module), "hat": _transformer_layout(hat_to_module),
                                  "scunet": _transformer_layout(scunet_to_module)}
# what `/sdapi/v1/upscalers` and the logs call each layout's network
ARCHITECTURES = {"esrgan": "ESRGAN", "esrgan_trunk": "ESRGAN", "basicsr": "ESRGAN", "srvgg": "SRVGG",
                 "swinir": "SwinIR", "dat": "DAT", "hat": "HAT", "scunet": "ScuNET"}


def module_to_basicsr(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """An `RRDBNet` state dict in BasicSR's names (for writing files Real-ESRGAN's tools read)."""
    out = {}
    for key, value in state.items():
        up = re.match(r"ups\.(\d+)\.(weight|bias)$", key)
        out[f"conv_up{int(up.group(1)) + 1}.{up.group(2)}" if up else key] = value
    return out


def module_to_esrgan(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """An `RRDBNet` state dict in the original ESRGAN names: model.0, model.1.sub.N, then per upsample a
    (nearest, conv, lrelu) triple, then HR conv, lrelu, last conv."""
    blocks = len({key.split(".")[1] for key in state if key.startswith("body.")})
    upsamples = len({key.split(".")[1] for key in state if key.startswith("ups.")})
    index = {"conv_first": "model.0", "conv_body": f"model.1.sub.{blocks}",
             "conv_hr": f"model.{3 * upsamples + 2}", "conv_last": f"model.{3 * upsamples + 4}"}
    index.update({f"ups.{i}": f"model.{3 * (i + 1)}" for i in range(upsamples)})
    out = {}
    for key, value in state.items():
        dense = re.match(r"body\.(\d+)\.rdb(\d)\.conv(\d)\.(weight|bias)$", key)
        if dense:
            block, rdb, conv, kind = dense.groups()
            out[f"model.1.sub.{block}.RDB{rdb}.conv{conv}.0.{kind}"] = value
        else:
            module, kind = key.rsplit(".", 1)
            out[f"{index[module]}.{kind}"] = value
    return out
