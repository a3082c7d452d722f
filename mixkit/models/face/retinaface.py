"""RetinaFace (Deng et al. 2019) as facexlib builds it: backbone, FPN, SSH context modules, three 1×1 heads.

Module names are the keys of facexlib's `detection_Resnet50_Final.pth` / `detection_mobilenet0.25_Final.pth`
(`body.*` is torchvision's ResNet-50 layout, or the mobilenet0.25 `stage1..3`), so those files load with no renaming
beyond the `module.` prefix of DataParallel. The forward returns raw head outputs; decoding lives in `detection`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class RetinaFaceConfig:
    """Which backbone and how wide the FPN/SSH/heads are; facexlib's two configs are `resnet50()` / `mobilenet()`."""

    backbone: str = "resnet50"
    in_channel: int = 256
    out_channel: int = 256
    min_sizes: tuple[tuple[int, ...], ...] = ((16, 32), (64, 128), (256, 512))
    steps: tuple[int, ...] = (8, 16, 32)
    variance: tuple[float, float] = (0.1, 0.2)

    @classmethod
    def resnet50(cls) -> "RetinaFaceConfig":
        return cls()

    @classmethod
    def mobilenet(cls) -> "RetinaFaceConfig":
        return cls(backbone="mobilenet0.25", in_channel=32, out_channel=64)

    @property
    def anchors_per_cell(self) -> int:
        return len(self.min_sizes[0])


def _conv_bn(inp: int, oup: int, *, kernel: int = 3, stride: int = 1, leaky: float | None = 0.0) -> nn.Sequential:
    """Conv (no bias) + BatchNorm (+ LeakyReLU unless `leaky` is None): facexlib's conv_bn / conv_bn1X1 / no_relu."""
    layers: list[nn.Module] = [nn.Conv2d(inp, oup, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(oup)]
    if leaky is not None:
        layers.append(nn.LeakyReLU(negative_slope=leaky))
    return nn.Sequential(*layers)


def _conv_dw(inp: int, oup: int, stride: int, leaky: float = 0.1) -> nn.Sequential:
    """MobileNet-v1 depthwise-separable block, keys `.0`..`.5` as in the mobilenet0.25 checkpoint."""
    return nn.Sequential(nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False), nn.BatchNorm2d(inp),
                         nn.LeakyReLU(negative_slope=leaky), nn.Conv2d(inp, oup, 1, 1, 0, bias=False),
                         nn.BatchNorm2d(oup), nn.LeakyReLU(negative_slope=leaky))


class _Bottleneck(nn.Module):
    """torchvision's ResNet v1.5 bottleneck (stride on the 3×3), same attribute names."""

    def __init__(self, inp: int, width: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, width * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(width * 4)
        self.downsample = None
        if stride != 1 or inp != width * 4:
            self.downsample = nn.Sequential(nn.Conv2d(inp, width * 4, 1, stride, bias=False), nn.BatchNorm2d(width * 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class _ResNet50Body(nn.Module):
    """ResNet-50 up to layer4 (no pooling/fc, as torchvision's IntermediateLayerGetter keeps it); C3, C4, C5 out."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        inp = 64
        for index, (blocks, width, stride) in enumerate(((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)), 1):
            layer = []
            for block in range(blocks):
                layer.append(_Bottleneck(inp, width, stride if block == 0 else 1))
                inp = width * 4
            setattr(self, f"layer{index}", nn.Sequential(*layer))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        c2 = self.layer1(x)
        c3 = self.layer2(c2)
        c4 = self.layer3(c3)
        return [c3, c4, self.layer4(c4)]


class _MobileNetBody(nn.Module):
    """MobileNet-v1 ×0.25 of Pytorch_Retinaface / facexlib (its `avg`/`fc` are not in the detection checkpoint)."""

    def __init__(self):
        super().__init__()
        self.stage1 = nn.Sequential(_conv_bn(3, 8, stride=2, leaky=0.1), _conv_dw(8, 16, 1), _conv_dw(16, 32, 2),
                                    _conv_dw(32, 32, 1), _conv_dw(32, 64, 2), _conv_dw(64, 64, 1))
        self.stage2 = nn.Sequential(_conv_dw(64, 128, 2), *[_conv_dw(128, 128, 1) for _ in range(5)])
        self.stage3 = nn.Sequential(_conv_dw(128, 256, 2), _conv_dw(256, 256, 1))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        c3 = self.stage1(x)
        c4 = self.stage2(c3)
        return [c3, c4, self.stage3(c4)]


class _FPN(nn.Module):
    def __init__(self, in_channels: list[int], out: int):
        super().__init__()
        leaky = 0.1 if out <= 64 else 0.0  # facexlib's rule: the narrow mobilenet model uses a leaky slope
        self.output1 = _conv_bn(in_channels[0], out, kernel=1, leaky=leaky)
        self.output2 = _conv_bn(in_channels[1], out, kernel=1, leaky=leaky)
        self.output3 = _conv_bn(in_channels[2], out, kernel=1, leaky=leaky)
        self.merge1 = _conv_bn(out, out, leaky=leaky)
        self.merge2 = _conv_bn(out, out, leaky=leaky)

    def forward(self, features: list[torch.Tensor]) -> list[torch.Tensor]:
        p3, p4, p5 = self.output1(features[0]), self.output2(features[1]), self.output3(features[2])
        p4 = self.merge2(p4 + F.interpolate(p5, size=p4.shape[-2:], mode="nearest"))
        p3 = self.merge1(p3 + F.interpolate(p4, size=p3.shape[-2:], mode="nearest"))
        return [p3, p4, p5]


class _SSH(nn.Module):
    """Single-stage headless context module: 3×3, 5×5 and 7×7 receptive fields from stacked 3×3 convs."""

    def __init__(self, channels: int):
        super().__init__()
        leaky = 0.1 if channels <= 64 else 0.0
        self.conv3X3 = _conv_bn(channels, channels // 2, leaky=None)
        self.conv5X5_1 = _conv_bn(channels, channels // 4, leaky=leaky)
        self.conv5X5_2 = _conv_bn(channels // 4, channels // 4, leaky=None)
        self.conv7X7_2 = _conv_bn(channels // 4, channels // 4, leaky=leaky)
        self.conv7x7_3 = _conv_bn(channels // 4, channels // 4, leaky=None)  # lower-case x: the checkpoint's key

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branch5 = self.conv5X5_1(x)
        return F.relu(torch.cat([self.conv3X3(x), self.conv5X5_2(branch5), self.conv7x7_3(self.conv7X7_2(branch5))], 1))


class _Head(nn.Module):
    def __init__(self, channels: int, outputs: int):
        super().__init__()
        self.outputs = outputs
        self.conv1x1 = nn.Conv2d(channels, outputs, 1)

    def forward(self, x: torch.Tensor, values_per_anchor: int) -> torch.Tensor:
        return self.conv1x1(x).permute(0, 2, 3, 1).reshape(x.shape[0], -1, values_per_anchor)


class RetinaFace(nn.Module):
    """Maps a BGR, mean-subtracted image batch to (box offsets [N,P,4], class logits [N,P,2], landmarks [N,P,10])."""

    def __init__(self, config: RetinaFaceConfig = RetinaFaceConfig()):
        super().__init__()
        if config.backbone not in ("resnet50", "mobilenet0.25"):
            raise ValueError(f"RetinaFace backbone {config.backbone!r} is not one of 'resnet50', 'mobilenet0.25'.")
        self.config = config
        self.body = _ResNet50Body() if config.backbone == "resnet50" else _MobileNetBody()
        widths = [config.in_channel * 2, config.in_channel * 4, config.in_channel * 8]
        out, anchors = config.out_channel, config.anchors_per_cell
        self.fpn = _FPN(widths, out)
        self.ssh1, self.ssh2, self.ssh3 = _SSH(out), _SSH(out), _SSH(out)
        self.ClassHead = nn.ModuleList(_Head(out, anchors * 2) for _ in range(3))
        self.BboxHead = nn.ModuleList(_Head(out, anchors * 4) for _ in range(3))
        self.LandmarkHead = nn.ModuleList(_Head(out, anchors * 10) for _ in range(3))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        p3, p4, p5 = self.fpn(self.body(x))
        features = [self.ssh1(p3), self.ssh2(p4), self.ssh3(p5)]
        boxes = torch.cat([head(f, 4) for head, f in zip(self.BboxHead, features)], 1)
        logits = torch.cat([head(f, 2) for head, f in zip(self.ClassHead, features)], 1)
        landmarks = torch.cat([head(f, 10) for head, f in zip(self.LandmarkHead, features)], 1)
        return boxes, logits, landmarks
