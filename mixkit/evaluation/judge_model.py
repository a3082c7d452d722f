"""The attribute judge: a small CNN that reads a shapes-world image back into its attributes.

It is the independent referee of `mixkit eval tiny`: trained only on clean images drawn by the
world's own renderer (never on model outputs), so a generator cannot score well by producing
whatever the judge happens to like. Two-shape images are read by *slot* (slot 1 is the left or top
shape, slot 2 the right or bottom one) because "A left of B" and "B right of A" are the same
picture; the scorer maps a prompt's relation onto slots.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from mixkit.data.shapes_render import place_scene
from mixkit.data.shapes_vocab import COLOURS, POSITIONS, SHAPES, SIZES, Scene

LAYOUTS: tuple[str, ...] = ("single", "horizontal", "vertical")
IGNORE = -100  # torch's cross-entropy ignore_index: heads that do not apply to an image


@dataclass(frozen=True)
class JudgeConfig:
    """Architecture and label vocabularies; saved next to the weights as JSON."""

    image_size: int = 64
    channels: tuple[int, ...] = (12, 24, 48, 64)
    hidden: int = 128
    shapes: tuple[str, ...] = SHAPES
    colours: tuple[str, ...] = COLOURS
    sizes: tuple[str, ...] = SIZES
    positions: tuple[str, ...] = POSITIONS
    layouts: tuple[str, ...] = field(default=LAYOUTS)

    def head_sizes(self) -> dict[str, int]:
        return {"layout": len(self.layouts), "background": len(self.colours), "position": len(self.positions),
                "shape1": len(self.shapes), "colour1": len(self.colours), "size1": len(self.sizes),
                "shape2": len(self.shapes), "colour2": len(self.colours), "size2": len(self.sizes)}

    def to_dict(self) -> dict:
        return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict) -> "JudgeConfig":
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown judge config keys {unknown}; valid: {sorted(known)}")
        return cls(**{key: tuple(value) if isinstance(value, list) else value for key, value in data.items()})


class AttributeJudge(nn.Module):
    """Four conv blocks, a small MLP, one linear head per attribute (a few hundred K parameters)."""

    def __init__(self, config: JudgeConfig) -> None:
        super().__init__()
        self.config = config
        c1, c2, c3, c4 = config.channels
        # Max-pooling (not strided convolution) after full-resolution 3x3 convolutions: a "small"
        # shape is ~13 px wide at 64 px, and a first probe with stride-2 convolutions learned
        # colour, size and position but only ~50% shape accuracy in the same CPU budget.
        self.features = nn.Sequential(
            _block(3, c1), nn.MaxPool2d(2), _block(c1, c2), nn.MaxPool2d(2), _block(c2, c3), nn.MaxPool2d(2),
            _block(c3, c4),
        )
        cells = (config.image_size // 16) ** 2
        # Two views of the final 8x8 map: a coarse grid (where things are: position, which slot is
        # left/top) and a global max (what is there, wherever it is: shape evidence is translation-invariant).
        self.trunk = nn.Sequential(nn.Linear(c4 * cells + c4, config.hidden), nn.ReLU(inplace=True))
        self.heads = nn.ModuleDict({name: nn.Linear(config.hidden, size) for name, size in config.head_sizes().items()})

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        """Logits per head for images (N, 3, S, S) with values in [0, 1]."""
        features = self.features(images * 2.0 - 1.0)
        grid = nn.functional.avg_pool2d(features, 2).flatten(1)
        anywhere = features.amax(dim=(2, 3))
        hidden = self.trunk(torch.cat([grid, anywhere], dim=1))
        return {name: head(hidden) for name, head in self.heads.items()}


def _block(inputs: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(inputs, outputs, 3, 1, 1, bias=False), nn.BatchNorm2d(outputs),
                         nn.ReLU(inplace=True))


def scene_labels(scene: Scene, config: JudgeConfig) -> dict[str, int]:
    """Class indices per head for a fully specified scene (IGNORE where a head does not apply)."""
    labels = {name: IGNORE for name in config.head_sizes()}
    labels["background"] = config.colours.index(scene.background)
    if len(scene.objects) == 1:
        obj = scene.objects[0]
        labels.update(layout=0, position=config.positions.index(obj.position), shape1=config.shapes.index(obj.shape),
                      colour1=config.colours.index(obj.colour), size1=config.sizes.index(obj.size))
        return labels
    first, second = place_scene(scene)  # un-jittered centres say which shape is left/top
    horizontal = scene.relation in ("left of", "right of")
    first_in_slot1 = first.centre_x < second.centre_x if horizontal else first.centre_y < second.centre_y
    ordered = scene.objects if first_in_slot1 else scene.objects[::-1]
    labels["layout"] = 1 if horizontal else 2
    for slot, obj in zip("12", ordered):
        labels[f"shape{slot}"] = config.shapes.index(obj.shape)
        labels[f"colour{slot}"] = config.colours.index(obj.colour)
        labels[f"size{slot}"] = config.sizes.index(obj.size)
    return labels


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
