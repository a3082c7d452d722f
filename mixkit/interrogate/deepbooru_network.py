"""DeepDanbooru's `resnet_custom_v3` tagger network, laid out as A1111's torch port stores it.

DeepDanbooru (KichangKim) trained a bottleneck ResNet in Keras: a 7x7 stem, then six stages of widths
256/512/1024/1024/2048/4096 (inner width a quarter of that) with 2, 7, 19, 19, 2, 2 plain blocks after each stage's
widening block, then a bias-free 1x1 convolution to one logit per tag, a global average and a sigmoid. A1111's
`model-resnet_custom_v3.pt` is an ONNX-derived port of it: BatchNorm folded into the convolutions (so every
convolution has a bias except the last), all 179 named `n_Conv_<i>` in the order the ONNX graph met them, and
Keras' "same" padding written out (stride-2 convolutions pad one pixel on the bottom/right only).

The port numbers each widening block's shortcut before its bottleneck, except in the fourth stage, where the
graph met it after; `SHORTCUT_NUMBERED_LAST` reproduces that so the keys line up with the file. Widths come from
`DeepDanbooruSizes` (read from the file), so tests run the same structure at a few channels.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

STAGE_REPEATS = (2, 7, 19, 19, 2, 2)  # plain blocks after each stage's widening block (create_resnet_custom_v3)
SHORTCUT_NUMBERED_LAST = 3  # the stage whose widening-block shortcut A1111's port numbers after its bottleneck
INPUT_SIZE = 512  # the square the tagger was trained on (A1111 resizes every image to it)


@dataclass(frozen=True)
class DeepDanbooruSizes:
    """Channel widths of the network: A1111's file by default; read back from a file by `sizes_from_state`."""

    stem: int = 64
    widths: tuple[int, ...] = (256, 512, 1024, 1024, 2048, 4096)
    inners: tuple[int, ...] = (64, 128, 256, 256, 512, 1024)
    num_tags: int = 9176

    def __post_init__(self) -> None:
        counts = (len(self.widths), len(self.inners))
        if counts != (len(STAGE_REPEATS),) * 2:
            raise ValueError(f"DeepDanbooru has {len(STAGE_REPEATS)} stages; got {counts[0]} widths and "
                             f"{counts[1]} inner widths.")
        for value in (self.stem, *self.widths, *self.inners, self.num_tags):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"DeepDanbooru widths and the tag count must be whole numbers >= 1, got {value!r}.")


def stage_first_conv_indices() -> list[int]:
    """The `n_Conv_<i>` index each stage's widening block starts at (1 after the stem; 4 + 3 per plain block)."""
    starts, index = [], 1
    for repeats in STAGE_REPEATS:
        starts.append(index)
        index += 4 + 3 * repeats
    return starts


def widening_block_indices(stage: int) -> tuple[int, int, int, int]:
    """(reduce, spatial, expand, shortcut) conv indices of a stage's widening block, in the port's numbering."""
    first = stage_first_conv_indices()[stage]
    if stage == SHORTCUT_NUMBERED_LAST:
        return first, first + 1, first + 2, first + 3
    return first + 1, first + 2, first + 3, first


CONV_COUNT = stage_first_conv_indices()[-1] + 4 + 3 * STAGE_REPEATS[-1] + 1  # 179: stem, stages, classifier


@dataclass
class _Block:
    reduce: nn.Conv2d
    spatial: nn.Conv2d
    expand: nn.Conv2d
    shortcut: nn.Conv2d | None  # None: identity
    stride: int


class DeepDanbooruNetwork(nn.Module):
    """Images [B, 3, H, W] in [0, 1] -> tag probabilities [B, num_tags] (A1111 feeds 512x512)."""

    def __init__(self, sizes: DeepDanbooruSizes = DeepDanbooruSizes()) -> None:
        super().__init__()
        self.sizes = sizes
        self._conv(0, 3, sizes.stem, 7, stride=2)
        self._blocks: list[_Block] = []
        channels = sizes.stem
        for stage, (width, inner, repeats) in enumerate(zip(sizes.widths, sizes.inners, STAGE_REPEATS)):
            stride = 1 if stage == 0 else 2  # the stem's max pool already halved the first stage's input
            reduce_i, spatial_i, expand_i, shortcut_i = widening_block_indices(stage)
            # created in index order so the state dict lists the keys as the port does
            made = {i: None for i in sorted((reduce_i, spatial_i, expand_i, shortcut_i))}
            specs = {reduce_i: (channels, inner, 1, 1), spatial_i: (inner, inner, 3, stride),
                     expand_i: (inner, width, 1, 1), shortcut_i: (channels, width, 1, stride)}
            for index in made:
                made[index] = self._conv(index, *specs[index][:3], stride=specs[index][3])
            self._blocks.append(_Block(made[reduce_i], made[spatial_i], made[expand_i], made[shortcut_i], stride))
            index = max(made) + 1
            for _ in range(repeats):
                self._blocks.append(_Block(self._conv(index, width, inner, 1), self._conv(index + 1, inner, inner, 3),
                                           self._conv(index + 2, inner, width, 1), None, 1))
                index += 3
            channels = width
        self._conv(CONV_COUNT - 1, channels, sizes.num_tags, 1, bias=False)  # one logit per tag

    def _conv(self, index: int, channels_in: int, channels_out: int, kernel: int, *, stride: int = 1,
              bias: bool = True) -> nn.Conv2d:
        conv = nn.Conv2d(channels_in, channels_out, kernel, stride=stride, bias=bias)
        self.add_module(f"n_Conv_{index}", conv)
        return conv

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        # Keras "same" padding, as the port writes it out: the 7x7/2 stem pads 2 before and 3 after, the max pool
        # pads its bottom/right with -inf (so padding never wins the max), stride-2 3x3 convs pad bottom/right only.
        x = F.relu(self.n_Conv_0(F.pad(pixels, (2, 3, 2, 3))))
        x = F.max_pool2d(F.pad(x, (0, 1, 0, 1), value=float("-inf")), kernel_size=3, stride=2)
        for block in self._blocks:
            skip = x if block.shortcut is None else block.shortcut(x)
            h = F.relu(block.reduce(x))
            h = F.pad(h, (1, 1, 1, 1) if block.stride == 1 else (0, 1, 0, 1))
            h = block.expand(F.relu(block.spatial(h)))
            x = F.relu(h + skip)
        classifier = getattr(self, f"n_Conv_{CONV_COUNT - 1}")
        return torch.sigmoid(classifier(x).mean(dim=(2, 3)))
