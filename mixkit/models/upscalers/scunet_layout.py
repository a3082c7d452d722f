"""An SCUNet state dict's hyper-parameters, read from its keys and tensor shapes.

In the official `network_scunet.py` names:
- dim / in_channels: `m_head.0.weight` (dim, in_nc, 3, 3);
- depths (the official `config`): the Swin-Conv block indices of each stage (`m_down1.N.conv1_1`; the up stages'
  blocks start at 1, after their transposed convolution);
- window_size and head count: a block's `trans_block.msa.relative_position_params` (heads, 2w-1, 2w-1); head_dim is
  that block's transformer width over its heads (32 in the official code, which does not store it).
"""

from __future__ import annotations

import re

import torch

from mixkit.models.upscalers.scunet import STAGES, SCUNetConfig
from mixkit.models.upscalers.swinir_layout import TransformerLayoutError, sized

_BLOCK = re.compile(r"^(m_down[123]|m_body|m_up[123])\.(\d+)\.conv1_1\.weight$")


def looks_like_scunet(state: dict[str, torch.Tensor]) -> bool:
    return "m_head.0.weight" in state and "m_tail.0.weight" in state


def scunet_to_module(state: dict[str, torch.Tensor]) -> tuple[SCUNetConfig, dict[str, torch.Tensor]]:
    """(config, weights for `SCUNet`) of an official-layout state dict; raises TransformerLayoutError naming what is
    off."""
    head = sized(state, "m_head.0.weight", 4, "SCUNet")
    dim, in_channels = head.shape[0], head.shape[1]
    indices: dict[str, list[int]] = {name: [] for name, _ in STAGES}
    for key in state:
        match = _BLOCK.match(key)
        if match:
            indices[match.group(1)].append(int(match.group(2)))
    depths = []
    for name, _ in STAGES:
        first = 1 if name.startswith("m_up") else 0  # after the transposed convolution
        found = sorted(indices[name])
        if found != list(range(first, first + len(found))):
            raise TransformerLayoutError(f"an SCUNet whose {name} blocks are not numbered {first}, {first + 1} ...: "
                                         f"{found}")
        depths.append(len(found))
    name, width = next(((name, width) for (name, width), depth in zip(STAGES, depths) if depth), (None, 0))
    if name is None:
        raise TransformerLayoutError("an SCUNet without any Swin-Conv block (m_down1.0.conv1_1 ...)")
    first = 1 if name.startswith("m_up") else 0
    params = sized(state, f"{name}.{first}.trans_block.msa.relative_position_params", 3, "SCUNet")
    heads, span = params.shape[0], params.shape[1]
    if span % 2 == 0 or params.shape[2] != span:
        raise TransformerLayoutError(f"an SCUNet whose relative_position_params has shape {tuple(params.shape)}, not "
                                     "(heads, 2 * window - 1, 2 * window - 1)")
    transformer_width = dim // 2 * width
    if transformer_width % heads:
        raise TransformerLayoutError(f"an SCUNet whose {name} transformer of {transformer_width} channels does not "
                                     f"split into its {heads} heads")
    if in_channels != 3:
        raise TransformerLayoutError(f"an SCUNet of {in_channels} channels (grayscale denoising); only RGB models "
                                     "upscale images")
    try:
        config = SCUNetConfig(in_channels=in_channels, dim=dim, depths=tuple(depths),
                              head_dim=transformer_width // heads, window_size=(span + 1) // 2)
    except ValueError as error:
        raise TransformerLayoutError(f"an SCUNet whose shapes do not make a network: {error}") from None
    return config, dict(state)
