"""A1111 hypernetwork files (`.pt`): read safely, rebuilt as the small residual MLPs they hold.

An A1111 hypernetwork is a pickled dict: integer keys are context widths (320, 640, 768, 1024, 1280) mapping to a
pair of state dicts, one MLP for the keys' context and one for the values'; string keys describe the MLPs
(`layer_structure` such as [1, 2, 1], `activation_func`, `is_layer_norm`, `activate_output`, `use_dropout`,
`last_layer_dropout`, `dropout_structure`) and the training (`name`, `step`, `sd_checkpoint`, ...). Each MLP is a
`Sequential` of Linear, then per layer an optional activation, LayerNorm and Dropout, so the state-dict indices
(`linear.0.weight`, `linear.2.weight`, ...) depend on that description: the layout is rebuilt exactly as A1111
builds it (modules/hypernetworks/hypernetwork.py, v1.10) and the weights are loaded strictly into it.

The file is read through `mixkit.io.read_checkpoint` (torch's weights-only unpickler, no unsafe fallback): a file
that needs other globals is refused with their names. A1111 lists only `.pt` files as hypernetworks.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from mixkit.errors import CheckpointFormatError

# A1111's defaults for keys missing from old files (its `Hypernetwork.load`)
DEFAULT_LAYER_STRUCTURE = (1, 2, 1)
# What A1111 writes as the dropout probability when `use_dropout` is set without a `dropout_structure`
A1111_DROPOUT = 0.3
# Files from before the `linear` Sequential named their two layers linear1 / linear2
_OLD_KEYS = {"linear1.weight": "linear.0.weight", "linear1.bias": "linear.0.bias",
             "linear2.weight": "linear.1.weight", "linear2.bias": "linear.1.bias"}


def _activation_classes() -> dict[str, type[nn.Module]]:
    """A1111's activation names: its own short list, then every class of torch.nn.modules.activation by lower-case
    name. "swish" is Hardswish there (not SiLU); files trained with it expect that."""
    names: dict[str, type[nn.Module]] = {"linear": nn.Identity, "relu": nn.ReLU, "leakyrelu": nn.LeakyReLU,
                                         "elu": nn.ELU, "swish": nn.Hardswish, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}
    for class_name, cls in inspect.getmembers(torch.nn.modules.activation, inspect.isclass):
        if cls.__module__ == "torch.nn.modules.activation":
            names[class_name.lower()] = cls
    return names


ACTIVATIONS = _activation_classes()


class HypernetworkMLP(nn.Module):
    """One of a hypernetwork's residual MLPs: `x + mlp(x) * multiplier`, A1111's `HypernetworkModule.forward` in
    evaluation (dropout off). The multiplier is the prompt tag's strength, passed per call: one loaded file serves
    calls at different strengths."""

    def __init__(self, linear: nn.Sequential) -> None:
        super().__init__()
        self.linear = linear

    def forward(self, x: torch.Tensor, multiplier: float = 1.0) -> torch.Tensor:
        return x + self.linear(x) * multiplier


@dataclass
class Hypernetwork:
    """A loaded hypernetwork: per context width, the (key MLP, value MLP) pair, plus what the file says of itself."""

    name: str  # the file stem, the name prompt tags use
    path: Path
    layers: dict[int, tuple[HypernetworkMLP, HypernetworkMLP]]
    layer_structure: tuple[float, ...]
    activation_func: str | None
    metadata: dict = field(default_factory=dict)  # trained name, step, sd_checkpoint(_name), when written

    @property
    def widths(self) -> list[int]:
        return sorted(self.layers)


def _fail(path: Path, problem: str) -> CheckpointFormatError:
    return CheckpointFormatError(f"hypernetwork {path}: {problem}. It is not an A1111 hypernetwork file as A1111 v1.10 "
                                 "writes them (a dict of context widths -> [key MLP, value MLP] state dicts); "
                                 "re-save it with A1111 or remove it from the hypernetworks folder.")


def dropout_structure_of(saved, layer_structure, use_dropout: bool, last_layer_dropout: bool) -> list[float]:
    """Where the Dropout layers sit (they take a Sequential index, so the weights' keys depend on them)."""
    if saved is not None:
        return [float(p) for p in saved]
    if not use_dropout:
        return [0.0] * len(layer_structure)
    # A1111's `parse_dropout_structure`: after every hidden layer but the last one, which has it only with
    # last_layer_dropout, never after the output layer
    middle = [A1111_DROPOUT] * (len(layer_structure) - 3)
    return [0.0, *middle, A1111_DROPOUT if last_layer_dropout else 0.0, 0.0]


def build_mlp(width: int, layer_structure, activation: str | None, layer_norm: bool,
               activate_output: bool, dropout: list[float], *, trainable: bool = False) -> nn.Sequential:
    """A1111's `HypernetworkModule.linear` layout; `trainable` puts real Dropout layers where inference needs only
    their index (the training path, `mixkit.hypernetworks.create`)."""
    layers: list[nn.Module] = []
    last = len(layer_structure) - 2
    for i in range(len(layer_structure) - 1):
        layers.append(nn.Linear(int(width * layer_structure[i]), int(width * layer_structure[i + 1])))
        if activation not in (None, "linear") and (i < last or activate_output):
            layers.append(ACTIVATIONS[activation]())  # checked to build in _check_description
        if layer_norm:
            layers.append(nn.LayerNorm(int(width * layer_structure[i + 1])))
        if dropout[i + 1] > 0:
            # Identity, not Dropout, for inference: the index is all that matters for the keys
            layers.append(nn.Dropout(p=dropout[i + 1]) if trainable else nn.Identity())
    return nn.Sequential(*layers)


def _check_description(path: Path, checkpoint: dict):
    structure = checkpoint.get("layer_structure") or DEFAULT_LAYER_STRUCTURE
    try:
        structure = tuple(float(x) for x in structure)
    except (TypeError, ValueError):
        raise _fail(path, f"layer_structure {checkpoint.get('layer_structure')!r} is not a list of numbers") from None
    if len(structure) < 2 or structure[0] != 1 or structure[-1] != 1 or min(structure) <= 0:
        raise _fail(path, f"layer_structure {list(structure)} must start and end with 1, all sizes positive")
    activation = checkpoint.get("activation_func")
    if activation is not None and (not isinstance(activation, str) or activation not in ACTIVATIONS):
        raise _fail(path, f"activation_func {activation!r} is not one A1111 knows (e.g. "
                          f"{', '.join(list(ACTIVATIONS)[:7])})")
    if activation is not None:
        try:
            ACTIVATIONS[activation]()
        except TypeError:  # torch classes that need arguments (MultiheadAttention, Threshold): A1111 fails too
            raise _fail(path, f"activation_func {activation!r} cannot be built without arguments") from None
    try:
        dropout = dropout_structure_of(checkpoint.get("dropout_structure"), structure,
                                       bool(checkpoint.get("use_dropout", False)),
                                       bool(checkpoint.get("last_layer_dropout", False)))
    except (TypeError, ValueError):
        raise _fail(path, f"dropout_structure {checkpoint.get('dropout_structure')!r} is not a list of numbers") from None
    if len(dropout) != len(structure) or any(not 0 <= p < 1 for p in dropout):
        raise _fail(path, f"dropout_structure {dropout} must have one probability in [0, 1) per layer_structure entry")
    return structure, activation, dropout


def _state_mismatch(mlp: nn.Module, state: dict) -> str:
    """What keeps `state` from loading into `mlp`, in words ("" when it fits)."""
    expected = {key: tuple(value.shape) for key, value in mlp.state_dict().items()}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        return f"missing {missing or 'nothing'}, unexpected {unexpected or 'nothing'}"
    for key, shape in expected.items():
        value = state[key]
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
            found = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            return f"{key} is {found}, expected {shape}"
    return ""


def load_hypernetwork(path: str | Path) -> Hypernetwork:
    """Read an A1111 hypernetwork `.pt` safely and rebuild its MLPs (in float32, on the CPU, in eval mode).

    Refuses, naming the file and what is wrong: a pickle needing unsafe globals (UnsafeCheckpointError), a file
    that is not such a dict, an unknown activation, weights that do not fit the described layers.
    """
    from mixkit.io import read_checkpoint

    path = Path(path)
    checkpoint = read_checkpoint(path)
    if not isinstance(checkpoint, dict):
        raise _fail(path, f"it holds a {type(checkpoint).__name__}, not a dict")
    structure, activation, dropout = _check_description(path, checkpoint)
    layer_norm = bool(checkpoint.get("is_layer_norm", False))
    activate_output = bool(checkpoint.get("activate_output", True))
    layers: dict[int, tuple[HypernetworkMLP, HypernetworkMLP]] = {}
    for width, pair in checkpoint.items():
        if isinstance(width, bool) or not isinstance(width, int):
            continue  # the description and training keys
        if width <= 0 or not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise _fail(path, f"entry {width} must be a positive width with [key, value] state dicts")
        mlps = []
        for role, state in zip(("key", "value"), pair):
            if not isinstance(state, dict):
                raise _fail(path, f"the {role} MLP of width {width} is a {type(state).__name__}, not a state dict")
            state = {_OLD_KEYS.get(key, key): value for key, value in state.items()}
            # Built without memory (meta tensors) and given the file's own tensors: the layer sizes come from the
            # file's width and layer_structure, so a few-byte file naming a huge width must not allocate them.
            with torch.device("meta"):
                mlp = HypernetworkMLP(build_mlp(width, structure, activation, layer_norm, activate_output, dropout))
            problem = _state_mismatch(mlp, state)
            if problem:
                raise _fail(path, f"the {role} MLP of width {width} does not fit layer_structure {list(structure)} "
                                  f"(activation {activation}, layer norm {layer_norm}): {problem}")
            mlp.load_state_dict(state, strict=True, assign=True)
            mlps.append(mlp.float().eval().requires_grad_(False))
        layers[width] = (mlps[0], mlps[1])
    if not layers:
        raise _fail(path, "it has no context-width entries (320, 640, 768, 1024, 1280)")
    metadata = {key: checkpoint[key] for key in ("name", "step", "sd_checkpoint", "sd_checkpoint_name")
                if checkpoint.get(key) is not None}
    return Hypernetwork(name=path.stem, path=path, layers=layers, layer_structure=structure,
                        activation_func=activation, metadata=metadata)
