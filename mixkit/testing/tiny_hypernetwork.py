"""A1111 hypernetwork files for tests, written as A1111's `Hypernetwork.save` writes them (`torch.save` of a dict).

Each MLP is built as A1111 lays it out (Linear, activation but after the last layer, LayerNorm, Dropout per
`dropout_structure`) so that the state-dict indices are the ones real files carry; weights are drawn from a seeded
generator, large enough (`scale`) to change a tiny model's image visibly.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import torch
from torch import nn


def a1111_mlp_state(width: int, layer_structure=(1, 2, 1), *, activation: str | None = "relu",
                    layer_norm: bool = False, dropout_structure=None, activate_output: bool = False,
                    generator: torch.Generator | None = None, scale: float = 0.5) -> OrderedDict:
    """The state dict of one A1111 `HypernetworkModule` (keys `linear.<index>.weight` / `.bias`)."""
    dropout_structure = dropout_structure or [0] * len(layer_structure)
    layers: list[nn.Module] = []
    for i in range(len(layer_structure) - 1):
        layers.append(nn.Linear(int(width * layer_structure[i]), int(width * layer_structure[i + 1])))
        if activation not in (None, "linear") and (i < len(layer_structure) - 2 or activate_output):
            layers.append(nn.ReLU())  # no parameters: only its index matters, whatever the activation
        if layer_norm:
            layers.append(nn.LayerNorm(int(width * layer_structure[i + 1])))
        if dropout_structure[i + 1] > 0:
            layers.append(nn.Dropout(dropout_structure[i + 1]))
    state = OrderedDict()
    for key, value in nn.Sequential(*layers).state_dict().items():
        state[f"linear.{key}"] = torch.randn(value.shape, generator=generator) * scale
    return state


def write_a1111_hypernetwork(path: str | Path, widths=(32, 64), *, layer_structure=(1, 2, 1),
                             activation_func: str | None = "relu", is_layer_norm: bool = False,
                             use_dropout: bool = False, dropout_structure=None, activate_output: bool = False,
                             seed: int = 0, scale: float = 0.5, extra: dict | None = None) -> Path:
    """Save a hypernetwork dict as A1111 v1.10 does (training keys included); returns the path."""
    generator = torch.Generator().manual_seed(seed)
    options = dict(activation=activation_func, layer_norm=is_layer_norm, dropout_structure=dropout_structure,
                   activate_output=activate_output, generator=generator, scale=scale)
    checkpoint: dict = {}
    for width in widths:
        checkpoint[width] = (a1111_mlp_state(width, layer_structure, **options),
                             a1111_mlp_state(width, layer_structure, **options))
    checkpoint.update({"step": 1000, "name": Path(path).stem, "layer_structure": list(layer_structure),
                       "activation_func": activation_func, "is_layer_norm": is_layer_norm,
                       "weight_initialization": "Normal", "sd_checkpoint": "925997e9",
                       "sd_checkpoint_name": "model", "activate_output": activate_output,
                       "use_dropout": use_dropout, "dropout_structure": dropout_structure,
                       "last_layer_dropout": False, "optional_info": None})
    checkpoint.update(extra or {})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, path)
    return path
