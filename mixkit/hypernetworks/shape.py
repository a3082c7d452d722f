"""What A1111's "Create hypernetwork" asks for: the context widths, layer structure, activation, weight
initialisation, layer norm, dropout and output activation, checked once, as a dataclass both the create and the
train configs carry.

A1111 (modules/hypernetworks/hypernetwork.py, v1.10) takes the layer structure and the dropout structure as
comma-separated text ("1, 2, 1", "0, 0.3, 0"); both forms (text or a list of numbers) are accepted here and kept
as lists of floats, which is what A1111 writes into the file.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

from mixkit.hypernetworks.network import ACTIVATIONS

# The widths A1111's Create tab offers (the attention contexts of SD 1.x/2.x: 768 / 1024 text, 320 / 640 / 1280
# self-attention), and what it ticks by default.
A1111_WIDTHS = (320, 640, 768, 1024, 1280)
A1111_DEFAULT_WIDTHS = (768, 320, 640, 1280)
# A1111's weight initialisations, by the names its UI and files use (`weight_initialization`).
WEIGHT_INITS = ("Normal", "KaimingUniform", "KaimingNormal", "XavierUniform", "XavierNormal")
# A1111 cleans a new hypernetwork's name down to these characters (plus letters and digits).
NAME_CHARACTERS = "._- "
MAX_WIDTH = 16384


def parse_number_list(value, setting: str, example: str) -> list[float]:
    """A1111's "1, 2, 1" text (or a list of numbers) as floats; anything else is a ValueError naming `setting`."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"{setting} must be comma-separated numbers like {example!r} (or a list), got {value!r}")
    numbers = []
    for item in items:
        try:
            if isinstance(item, bool):
                raise ValueError
            number = float(item.strip() if isinstance(item, str) else item)
            if not math.isfinite(number):
                raise ValueError
            numbers.append(number)
        except (TypeError, ValueError):
            shown = item.strip() if isinstance(item, str) else item
            raise ValueError(f"{setting} {value!r}: {shown!r} is not a number; write it like {example!r}") from None
    return numbers


def buildable_activations() -> list[str]:
    """The activation names a hypernetwork can use: A1111's list, minus torch classes that need arguments
    (MultiheadAttention, Threshold) or change the width (GLU halves it), with which A1111 fails to build or to run."""
    import torch

    names = []
    probe = torch.zeros(1, 2, 4)
    for name, cls in ACTIVATIONS.items():
        try:
            with warnings.catch_warnings():  # softmax & co. warn of their implicit dim, as they do in A1111
                warnings.simplefilter("ignore")
                if cls()(probe).shape != probe.shape:
                    continue
        except TypeError:
            continue
        names.append(name)
    return names


def check_name(name: str) -> None:
    """A hypernetwork's name (its file stem, the prompt tag's name) must be what A1111's create keeps of it."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"the hypernetwork's name (the output's file stem) must not be empty, got {name!r}")
    bad = sorted({c for c in name if not (c.isalnum() or c in NAME_CHARACTERS)})
    if bad:
        raise ValueError(f"hypernetwork name {name!r} has characters A1111 removes from names ({''.join(bad)!r}); "
                         "use letters, digits and '._- ' only")


@dataclass(kw_only=True)
class HypernetworkShape:
    """The layout of a new hypernetwork: one (key, value) pair of residual MLPs per width of `enable_sizes`, each
    MLP's layer widths `layer_structure` times the context width."""

    enable_sizes: list[int] | str = field(default_factory=lambda: list(A1111_DEFAULT_WIDTHS))
    layer_structure: str | list[float] = "1, 2, 1"
    activation_func: str = "linear"
    weight_init: str = "Normal"
    add_layer_norm: bool = False
    # Dropout after the hidden layers, one probability per layer_structure entry ("0, 0.3, 0"), with use_dropout.
    use_dropout: bool = False
    dropout_structure: str | list[float] | None = None
    # Also the activation after the output layer (A1111's create leaves it off).
    activate_output: bool = False

    def context_widths(self) -> list[int]:
        """`enable_sizes` as whole numbers: a list ([768, 320]), A1111's checkbox values as text (["768", "320"],
        what a `--enable_sizes 768 320` command line gives), one text "768, 320" or one number."""
        sizes = self.enable_sizes
        items = sizes.split(",") if isinstance(sizes, str) else [sizes] if isinstance(sizes, int) else sizes
        if not isinstance(items, (list, tuple)) or not items:
            raise ValueError(f"enable_sizes must be a non-empty list of context widths (A1111's: "
                             f"{list(A1111_WIDTHS)}), got {sizes!r}")
        widths = []
        for item in items:
            text = item.strip() if isinstance(item, str) else item
            if isinstance(text, str) and text.isdigit():
                text = int(text)
            if isinstance(text, bool) or not isinstance(text, int) or not 0 < text <= MAX_WIDTH:
                raise ValueError(f"enable_sizes entry {item!r} must be a context width in 1..{MAX_WIDTH}, like "
                                 f"{list(A1111_WIDTHS)}")
            widths.append(text)
        return widths

    def layers(self) -> list[float]:
        return parse_number_list(self.layer_structure, "layer_structure", "1, 2, 1")

    def dropouts(self) -> list[float]:
        """The dropout probability after each layer (all 0 without use_dropout), as A1111's create stores it."""
        if not self.use_dropout:
            return [0.0] * len(self.layers())
        return parse_number_list(self.dropout_structure, "dropout_structure", "0, 0.3, 0")

    def check_shape(self) -> None:
        """Raise ValueError/TypeError naming the first setting A1111 could not build a hypernetwork from."""
        sizes = self.context_widths()
        if len(set(sizes)) != len(sizes):
            raise ValueError(f"enable_sizes {list(sizes)} names a width twice; list each once")
        layers = self.layers()
        if len(layers) < 2 or layers[0] != 1 or layers[-1] != 1:
            raise ValueError(f"layer_structure {self.layer_structure!r} must start and end with 1 (the MLP maps the "
                             "context back to its own width), with the hidden sizes between: like '1, 2, 1'")
        if min(layers) <= 0:
            raise ValueError(f"layer_structure {self.layer_structure!r}: every size must be positive")
        small = [s for s in sizes for ratio in layers if int(s * ratio) < 1]
        if small:
            raise ValueError(f"layer_structure {self.layer_structure!r} gives width {small[0]} a layer of no units; "
                             "raise the hidden sizes")
        valid = buildable_activations()
        if not isinstance(self.activation_func, str) or self.activation_func not in valid:
            raise ValueError(f"activation_func {self.activation_func!r} is not one A1111 knows; choose one of "
                             f"{', '.join(valid)}")
        if self.weight_init not in WEIGHT_INITS:
            raise ValueError(f"weight_init {self.weight_init!r} is not one A1111 knows; choose one of "
                             f"{', '.join(WEIGHT_INITS)}")
        for name in ("add_layer_norm", "use_dropout", "activate_output"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.use_dropout and self.dropout_structure is None:
            raise ValueError("use_dropout needs dropout_structure, one probability per layer_structure entry, like "
                             f"'{', '.join(['0'] + ['0.3'] * (len(layers) - 2) + ['0'])}'")
        if not self.use_dropout and self.dropout_structure is not None and any(
                parse_number_list(self.dropout_structure, "dropout_structure", "0, 0.3, 0")):
            raise ValueError(f"dropout_structure {self.dropout_structure!r} is set but use_dropout is false (A1111 "
                             "would drop it silently); set use_dropout=true or remove dropout_structure")
        dropouts = self.dropouts()
        if len(dropouts) != len(layers):
            raise ValueError(f"dropout_structure {self.dropout_structure!r} has {len(dropouts)} entries; it needs "
                             f"one per layer_structure entry ({len(layers)})")
        if dropouts[0] != 0 or dropouts[-1] != 0 or any(not 0 <= p < 1 for p in dropouts):
            raise ValueError(f"dropout_structure {self.dropout_structure!r} must start and end with 0 (no dropout "
                             "on the input or the output) with probabilities in [0, 1) between, like '0, 0.3, 0'")
