"""New and trainable A1111 hypernetworks: MLPs initialised as A1111's create does, and the `.pt` written in A1111's
exact format (the keys `Hypernetwork.save` of v1.10 writes), which A1111 and `load_hypernetwork` read.

The MLPs are `HypernetworkMLP`s laid out by `network.build_mlp` (the loader's own layout, so a written file loads
strictly), with real Dropout layers for training. `TrainableHypernetwork` holds them as one module (what an
optimizer and accelerate see) and can hand them to `apply_hypernetworks` as a `Hypernetwork`, so training runs the
very forward that generation runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from mixkit.hypernetworks.network import (DEFAULT_LAYER_STRUCTURE, Hypernetwork, HypernetworkMLP, build_mlp,
                                          dropout_structure_of)
from mixkit.hypernetworks.shape import HypernetworkShape


def _initialise(mlp: nn.Sequential, weight_init: str, activation: str, generator: torch.Generator) -> None:
    """A1111's initialisation: Linear weights by `weight_init` with zero biases ("Normal": std 0.01), LayerNorm
    weights always Normal(0, 0.01) with zero biases (A1111 initialises them so too, not to ones)."""
    nonlinearity = "leaky_relu" if activation == "leakyrelu" else "relu"
    for layer in mlp:
        if type(layer) not in (nn.Linear, nn.LayerNorm):
            continue
        weight, bias = layer.weight.data, layer.bias.data
        if weight_init == "Normal" or type(layer) is nn.LayerNorm:
            nn.init.normal_(weight, mean=0.0, std=0.01, generator=generator)
        elif weight_init == "XavierUniform":
            nn.init.xavier_uniform_(weight, generator=generator)
        elif weight_init == "XavierNormal":
            nn.init.xavier_normal_(weight, generator=generator)
        elif weight_init == "KaimingUniform":
            nn.init.kaiming_uniform_(weight, nonlinearity=nonlinearity, generator=generator)
        else:  # KaimingNormal (the shape's check allows no other)
            nn.init.kaiming_normal_(weight, nonlinearity=nonlinearity, generator=generator)
        nn.init.zeros_(bias)


@dataclass(frozen=True)
class FileShape:
    """A hypernetwork file's description keys, as A1111's `Hypernetwork.load` reads them (with its defaults)."""

    layer_structure: list[float]
    activation_func: str | None
    weight_init: str
    add_layer_norm: bool
    use_dropout: bool
    dropout_structure: list[float]
    activate_output: bool

    @classmethod
    def of(cls, shape: HypernetworkShape) -> "FileShape":
        """What a new hypernetwork of `shape` (checked) records."""
        return cls(shape.layers(), shape.activation_func, shape.weight_init, shape.add_layer_norm, shape.use_dropout,
                   shape.dropouts(), shape.activate_output)

    @classmethod
    def of_checkpoint(cls, checkpoint: dict) -> "FileShape":
        """What an existing file (already read by `load_hypernetwork`, so its description is valid) records; missing
        keys take A1111's load defaults, so training it on keeps the layout it is used with."""
        structure = [float(x) for x in (checkpoint.get("layer_structure") or DEFAULT_LAYER_STRUCTURE)]
        use_dropout = bool(checkpoint.get("use_dropout", False))
        dropout = dropout_structure_of(checkpoint.get("dropout_structure"), structure, use_dropout,
                                     bool(checkpoint.get("last_layer_dropout", False)))
        return cls(structure, checkpoint.get("activation_func"),
                   checkpoint.get("weight_initialization") or "Normal", bool(checkpoint.get("is_layer_norm", False)),
                   use_dropout or any(dropout), dropout, bool(checkpoint.get("activate_output", True)))

    def mlp(self, width: int) -> HypernetworkMLP:
        """An uninitialised trainable MLP of `width` in this layout (real Dropout layers)."""
        return HypernetworkMLP(build_mlp(width, self.layer_structure, self.activation_func, self.add_layer_norm,
                                          self.activate_output, self.dropout_structure, trainable=True))


class TrainableHypernetwork(nn.Module):
    """A hypernetwork's MLPs as one module, float32, with its file description, name and step."""

    def __init__(self, name: str, shape: FileShape, mlps: dict[int, tuple[HypernetworkMLP, HypernetworkMLP]],
                 step: int = 0) -> None:
        super().__init__()
        self.name = name
        self.shape = shape
        self.step = step
        self.pairs = nn.ModuleDict({str(width): nn.ModuleList(pair) for width, pair in sorted(mlps.items())})

    @classmethod
    def new(cls, name: str, shape: HypernetworkShape, seed: int) -> "TrainableHypernetwork":
        """A new hypernetwork of `shape` (checked) initialised as A1111's create does, drawn from `seed`."""
        file_shape = FileShape.of(shape)
        generator = torch.Generator().manual_seed(seed)
        mlps = {}
        for width in sorted(shape.context_widths()):
            pair = (file_shape.mlp(width), file_shape.mlp(width))
            for mlp in pair:
                _initialise(mlp.linear, shape.weight_init, shape.activation_func, generator)
            mlps[width] = pair
        return cls(name, file_shape, mlps)

    @classmethod
    def from_file(cls, path: str | Path) -> "TrainableHypernetwork":
        """An existing A1111 hypernetwork file, checked by `load_hypernetwork`, with its step, to train on."""
        from mixkit.hypernetworks.network import load_hypernetwork
        from mixkit.io import read_checkpoint

        loaded = load_hypernetwork(path)  # every refusal of a bad file, with its reasons
        checkpoint = read_checkpoint(path)
        shape = FileShape.of_checkpoint(checkpoint)
        mlps = {}
        for width, (key, value) in loaded.layers.items():
            pair = (shape.mlp(width), shape.mlp(width))
            pair[0].load_state_dict(key.state_dict(), strict=True)
            pair[1].load_state_dict(value.state_dict(), strict=True)
            mlps[width] = pair
        step = checkpoint.get("step")
        step = step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else 0
        return cls(loaded.name, shape, mlps, step)

    @property
    def widths(self) -> list[int]:
        return [int(width) for width in self.pairs]

    def as_hypernetwork(self) -> Hypernetwork:
        """These very MLPs as a `Hypernetwork` for `apply_hypernetworks` (their training state is kept)."""
        return Hypernetwork(name=self.name, path=Path(f"{self.name}.pt"),
                            layers={int(width): (pair[0], pair[1]) for width, pair in self.pairs.items()},
                            layer_structure=tuple(self.shape.layer_structure),
                            activation_func=self.shape.activation_func)

    def attach(self, unet: nn.Module) -> None:
        """Put these MLPs (at strength 1, as A1111 trains) on `unet`'s key/value projections until `detach()`."""
        from mixkit.hypernetworks.apply import HypernetworkApplication, apply_hypernetworks

        self.detach()
        self._applied = apply_hypernetworks(unet, [HypernetworkApplication(self.as_hypernetwork(), 1.0)])

    def detach(self) -> None:
        """Take the MLPs off the UNet again (harmless when not attached)."""
        applied = self.__dict__.pop("_applied", None)
        if applied is not None:
            applied.remove()

    def file_dict(self, *, step: int, sd_checkpoint: str | None, sd_checkpoint_name: str | None) -> dict:
        """The `.pt` content in A1111 v1.10's format: {width: (key state dict, value state dict)} and its keys."""
        shape = self.shape
        data: dict = {int(width): tuple({key: value.detach().to("cpu", torch.float32).clone()
                                         for key, value in mlp.state_dict().items()} for mlp in pair)
                      for width, pair in self.pairs.items()}
        data.update({
            "step": step, "name": self.name, "layer_structure": list(shape.layer_structure),
            "activation_func": shape.activation_func, "is_layer_norm": shape.add_layer_norm,
            "weight_initialization": shape.weight_init, "sd_checkpoint": sd_checkpoint,
            "sd_checkpoint_name": sd_checkpoint_name, "activate_output": shape.activate_output,
            "use_dropout": shape.use_dropout, "dropout_structure": list(shape.dropout_structure),
            # A1111 derives it from the dropout structure when it saves
            "last_layer_dropout": shape.dropout_structure[-2] != 0, "optional_info": None,
        })
        return data

    def save(self, path: str | Path, *, step: int, sd_checkpoint: str | None = None,
             sd_checkpoint_name: str | None = None) -> Path:
        """Write the `.pt` atomically (a failed write leaves any old file as it was)."""
        from mixkit.io.atomic import atomic_output_path

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = self.file_dict(step=step, sd_checkpoint=sd_checkpoint, sd_checkpoint_name=sd_checkpoint_name)
        with atomic_output_path(path) as temp:
            torch.save(data, temp)
        return path
