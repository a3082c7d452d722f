"""Stand-ins for face-parsing tests: a tiny ParseNet saved as facexlib saves `parsing_parsenet.pth` (a bare state
dict), and a parser whose segmentation is planted, so the paste mask is known without real weights."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch
from torch import nn

from mixkit.models.face.parsenet import PARSENET_CLASSES, ParseNet, ParseNetConfig

# Two stride-2 steps, widths 4 → 8 (clipped), one body block: the full layout (shortcuts, batch norms, both heads)
# at a few thousand parameters.
TINY_PARSENET_CONFIG = ParseNetConfig(base_channels=4, min_channels=4, max_channels=8, down_steps=2, up_steps=2,
                                      res_depth=1, parsing_channels=PARSENET_CLASSES)


def tiny_parsenet(config: ParseNetConfig = TINY_PARSENET_CONFIG, seed: int = 0) -> ParseNet:
    """An eval-mode ParseNet with seeded random weights and batch-norm statistics (so loading them is visible)."""
    generator = torch.Generator().manual_seed(seed)
    model = ParseNet(config)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                tensor.fill_(7)
            elif name.endswith("running_var"):
                tensor.copy_(torch.rand(tensor.shape, generator=generator) + 0.5)
            else:
                tensor.copy_(torch.randn(tensor.shape, generator=generator) * 0.2)
    return model.eval()


def write_tiny_parsenet(path: str | Path, config: ParseNetConfig = TINY_PARSENET_CONFIG, seed: int = 0,
                        prefix: str = "") -> ParseNet:
    """Save a seeded tiny ParseNet's state dict to `path` (keys optionally prefixed, e.g. "module.") and return it."""
    model = tiny_parsenet(config, seed)
    torch.save({prefix + key: value for key, value in model.state_dict().items()}, Path(path))
    return model


class PlantedParser(nn.Module):
    """Looks like a ParseNet to the paste-back: for a [1, 3, S, S] face it returns logits whose argmax is
    `classes(S)` (a long [S, S] map), whatever the face shows; records how many faces it parsed."""

    def __init__(self, classes: Callable[[int], torch.Tensor], parsing_channels: int = PARSENET_CLASSES):
        super().__init__()
        self.config = ParseNetConfig(parsing_channels=parsing_channels)
        self.classes = classes
        self.anchor = nn.Parameter(torch.zeros(1))  # gives the module a device and dtype
        self.calls = 0

    def forward(self, x: torch.Tensor):
        self.calls += 1
        size = x.shape[-1]
        classes = self.classes(size).to(x.device)
        logits = torch.nn.functional.one_hot(classes, self.config.parsing_channels).permute(2, 0, 1)[None].float()
        return logits, x


def centre_square_classes(inner: float = 0.5, face_class: int = 1) -> Callable[[int], torch.Tensor]:
    """A segmentation: `face_class` (1, skin) in the centred square covering `inner` of the side, background (0)
    around it."""

    def classes(size: int) -> torch.Tensor:
        start = round(size * (1 - inner) / 2)
        labels = torch.zeros(size, size, dtype=torch.long)
        labels[start:size - start, start:size - start] = face_class
        return labels

    return classes


def planted_parser_loader(parser: nn.Module):
    """A `parser_loader` for `FaceRestorer` returning `parser` and recording the files it was asked for."""

    def load(path, device=None):
        load.paths.append(Path(path))
        return parser.to(device or "cpu")

    load.paths = []
    load.parser = parser
    return load
