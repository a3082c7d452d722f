"""SCUNet (Zhang et al. 2022, "Practical Blind Image Denoising via Swin-Conv-UNet and Data Synthesis"): a same-size
denoiser, a UNet of three downsampling stages, a body and three upsampling stages, each stage a row of Swin-Conv
blocks that split the channels into a residual convolution half and a (shifted-)window transformer half.

A1111 offers it as "ScuNET GAN" / "ScuNET PSNR" (the release files scunet_color_real_gan.pth and
scunet_color_real_psnr.pth). Module and parameter names are those of the official `network_scunet.py`
(`m_head.0`, `m_down1.N.trans_block.msa.embedding_layer`, `m_up3.0` ...), so the release files load key for key.
Inputs of any size are reflect-padded to whole windows at the deepest stage (8 windows: 64 pixels for the released
8-pixel windows) and the output cropped back, as spandrel, which A1111 runs ScuNET through, does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from mixkit.models.upscalers.windows import (ATTENTION_CHUNK_SCORES, MAX_BLOCKS, MAX_WINDOW_TOKENS, attend, merge,
                                             partition, reflect_pad_to_multiple, relative_position_index, shift_mask)

# The stages in the official order: (name, width of the stage's blocks as a multiple of dim / 2)
STAGES = (("m_down1", 1), ("m_down2", 2), ("m_down3", 4), ("m_body", 8), ("m_up3", 4), ("m_up2", 2), ("m_up1", 1))


@dataclass(frozen=True)
class SCUNetConfig:
    in_channels: int = 3
    dim: int = 64
    depths: tuple[int, ...] = (4, 4, 4, 4, 4, 4, 4)  # Swin-Conv blocks per stage, in STAGES order (the paper's config)
    head_dim: int = 32  # channels per attention head (fixed in the official code; read from the file here)
    window_size: int = 8

    @property
    def scale(self) -> int:
        return 1  # a denoiser: A1111 runs it once, then resizes

    def __post_init__(self) -> None:
        if len(self.depths) != len(STAGES) or any(depth < 0 for depth in self.depths):
            raise ValueError(f"SCUNet depths must be {len(STAGES)} block counts (down1, down2, down3, body, up3, up2, "
                             f"up1), got {self.depths}.")
        if sum(self.depths) > MAX_BLOCKS:
            raise ValueError(f"SCUNet may have at most {MAX_BLOCKS} blocks in all, got {sum(self.depths)}.")
        if self.dim < 2 or self.dim % 2 or self.head_dim < 1 or (self.dim // 2) % self.head_dim:
            raise ValueError(f"SCUNet dim must be even and dim / 2 a multiple of head_dim: dim {self.dim}, head_dim "
                             f"{self.head_dim}.")
        if not 1 <= self.window_size ** 2 <= MAX_WINDOW_TOKENS:
            raise ValueError(f"SCUNet window_size must be 1 to {int(MAX_WINDOW_TOKENS ** 0.5)} (released models use "
                             f"8), got {self.window_size}.")

    @property
    def pad_multiple(self) -> int:
        """Input sides are padded to this: whole windows after the three 2x downsamplings."""
        return 8 * self.window_size


class WindowSelfAttention(nn.Module):
    """SCUNet's WMSA: multi-head attention inside windows, with a learned bias per head and relative offset stored as
    a (heads, 2w-1, 2w-1) grid; shifted blocks roll by half a window and mask rolled-over tokens out entirely."""

    def __init__(self, dim: int, head_dim: int, window_size: int, shifted: bool) -> None:
        super().__init__()
        self.heads, self.window_size, self.shifted = dim // head_dim, window_size, shifted
        span = 2 * window_size - 1
        self.embedding_layer = nn.Linear(dim, 3 * dim)
        self.relative_position_params = nn.Parameter(nn.init.trunc_normal_(torch.empty(self.heads, span, span),
                                                                           std=0.02))
        self.linear = nn.Linear(dim, dim)
        self.register_buffer("relative_position_index", relative_position_index(window_size, window_size),
                             persistent=False)

    def forward(self, x: torch.Tensor, chunk_scores: int = ATTENTION_CHUNK_SCORES) -> torch.Tensor:
        """x (B, H, W, C) with H, W whole windows -> (B, H, W, C)."""
        b, h, w, c = x.shape
        size, shift = self.window_size, self.window_size // 2
        if self.shifted:
            x = torch.roll(x, (-shift, -shift), dims=(1, 2))
        windows = partition(x, size, size)
        count, n = windows.shape[1:3]
        q, k, v = self.embedding_layer(windows).view(b, count, n, 3, self.heads, -1).permute(3, 0, 1, 4, 2, 5).unbind(0)
        bias = self.relative_position_params.flatten(1)[:, self.relative_position_index].to(x.dtype)
        mask = None
        if self.shifted:
            # the official code fills -inf where Swin adds -100; the same regions, and no exp(-100) leaking through
            differ = shift_mask(h, w, size, size, shift, shift, device=x.device) != 0
            mask = torch.zeros(differ.shape, device=x.device, dtype=x.dtype).masked_fill_(differ, float("-inf"))
        out = merge(self.linear(attend(q, k, v, bias, mask, chunk_scores)), size, size, h, w)
        return torch.roll(out, (shift, shift), dims=(1, 2)) if self.shifted else out


class TransformerBlock(nn.Module):
    """Pre-norm window attention and a 4x MLP (the official `Block`)."""

    def __init__(self, dim: int, head_dim: int, window_size: int, shifted: bool) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.msa = WindowSelfAttention(dim, head_dim, window_size, shifted)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.msa(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class SwinConvBlock(nn.Module):
    """A 1x1 convolution splits the channels into a residual-convolution half and a transformer half, another joins
    them; the block adds the result to its input (the official `ConvTransBlock`)."""

    def __init__(self, half: int, head_dim: int, window_size: int, shifted: bool) -> None:
        super().__init__()
        self.half = half
        self.trans_block = TransformerBlock(half, head_dim, window_size, shifted)
        self.conv1_1 = nn.Conv2d(2 * half, 2 * half, 1)
        self.conv1_2 = nn.Conv2d(2 * half, 2 * half, 1)
        self.conv_block = nn.Sequential(nn.Conv2d(half, half, 3, 1, 1, bias=False), nn.ReLU(),
                                        nn.Conv2d(half, half, 3, 1, 1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv_x, trans_x = torch.split(self.conv1_1(x), self.half, dim=1)
        conv_x = conv_x + self.conv_block(conv_x)
        trans_x = self.trans_block(trans_x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return x + self.conv1_2(torch.cat((conv_x, trans_x), 1))


class SCUNet(nn.Module):
    """RGB in [0, 1] -> denoised RGB of the same size, any input size."""

    architecture = "ScuNET"

    def __init__(self, config: SCUNetConfig) -> None:
        super().__init__()
        self.config = config
        self.scale = config.scale
        dim, half = config.dim, config.dim // 2

        def blocks(depth: int, width: int) -> list[nn.Module]:
            return [SwinConvBlock(half * width, config.head_dim, config.window_size, index % 2 == 1)
                    for index in range(depth)]

        self.m_head = nn.Sequential(nn.Conv2d(config.in_channels, dim, 3, 1, 1, bias=False))
        for (name, width), depth in zip(STAGES, config.depths):
            stage = blocks(depth, width)
            if name.startswith("m_down"):  # blocks, then a strided 2x2 convolution doubling the channels
                stage.append(nn.Conv2d(dim * width, 2 * dim * width, 2, 2, 0, bias=False))
            elif name.startswith("m_up"):  # a transposed 2x2 convolution halving the channels, then blocks
                stage.insert(0, nn.ConvTranspose2d(2 * dim * width, dim * width, 2, 2, 0, bias=False))
            setattr(self, name, nn.Sequential(*stage))
        self.m_tail = nn.Sequential(nn.Conv2d(dim, config.in_channels, 3, 1, 1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        height, width = x.shape[-2:]
        x1 = self.m_head(reflect_pad_to_multiple(x, self.config.pad_multiple))
        x2 = self.m_down1(x1)
        x3 = self.m_down2(x2)
        x4 = self.m_down3(x3)
        out = self.m_up3(self.m_body(x4) + x4)
        out = self.m_up2(out + x3)
        out = self.m_up1(out + x2)
        return self.m_tail(out + x1)[..., :height, :width]
