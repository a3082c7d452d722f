"""CodeFormer (Zhou et al. 2022, "Towards Robust Blind Face Restoration with Codebook Lookup Transformer"): a VQGAN
encoder, a transformer that predicts a codebook index per latent position, the VQGAN generator decoding those
codes, and controllable feature transforms (CFT) that blend the encoder's features back in by the fidelity w.

Module and parameter names are the official `codeformer_arch.py`'s (`position_emb`, `feat_emb`,
`ft_layers.N.self_attn.in_proj_weight`, `idx_pred_layer`, `fuse_convs_dict.<size>`, `quantize.embedding`,
`encoder.blocks.N`, `generator.blocks.N`), so `codeformer.pth` (v0.1.0) loads key for key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from mixkit.models.face_restorers.faces import check_faces, check_fidelity, restore_at_size
from mixkit.models.face_restorers.vqgan import BlockStack, Codebook, ResBlock, VQGANSizes, encoder_plan, generator_plan


@dataclass(frozen=True)
class CodeFormerConfig:
    """Sizes of a CodeFormer network; the defaults are the released codeformer.pth's (and A1111's)."""

    dim_embd: int = 512
    n_head: int = 8  # not stored in files: every released CodeFormer uses 8
    n_layers: int = 9
    codebook_size: int = 1024
    connect_list: tuple[int, ...] = (32, 64, 128, 256)  # resolutions whose encoder features the CFT blocks fuse
    vqgan: VQGANSizes = field(default_factory=VQGANSizes)

    def __post_init__(self) -> None:
        if min(self.dim_embd, self.n_head, self.n_layers, self.codebook_size) < 1 or self.dim_embd % self.n_head:
            raise ValueError(f"CodeFormer needs positive sizes and dim_embd divisible by n_head: {self}.")
        levels = len(self.vqgan.channel_multipliers)
        resolutions = [self.vqgan.image_size // 2 ** level for level in range(levels)]
        if self.vqgan.latent_side * 2 ** (levels - 1) != self.vqgan.image_size or self.vqgan.latent_side < 1:
            raise ValueError(f"CodeFormer's image_size {self.vqgan.image_size} must halve evenly {levels - 1} times.")
        if any(size not in resolutions for size in self.connect_list):
            raise ValueError(f"CodeFormer connect_list {self.connect_list} must name level resolutions {resolutions}.")

    @property
    def latent_tokens(self) -> int:
        return self.vqgan.latent_side ** 2


class PackedSelfAttention(nn.Module):
    """Multi-head self-attention with q, k, v packed in one projection (`in_proj_weight` [3 * dim, dim], the layout
    of torch's nn.MultiheadAttention, which the files were saved from); inputs are batch-first [B, L, dim]."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * dim, dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * dim))
        self.out_proj = nn.Linear(dim, dim)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def forward(self, query_key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        from mixkit.attention import attention

        weights, biases = self.in_proj_weight.chunk(3), self.in_proj_bias.chunk(3)
        batch, length, dim = value.shape

        def heads(x: torch.Tensor, index: int) -> torch.Tensor:
            projected = F.linear(x, weights[index], biases[index])
            return projected.view(batch, length, self.heads, dim // self.heads).transpose(1, 2)

        out = attention(heads(query_key, 0), heads(query_key, 1), heads(value, 2))
        return self.out_proj(out.transpose(1, 2).reshape(batch, length, dim))


class TransformerSALayer(nn.Module):
    """Pre-norm transformer layer; the position embedding is added to queries and keys only (DETR style)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.self_attn = PackedSelfAttention(dim, heads)
        self.linear1 = nn.Linear(dim, 2 * dim)
        self.linear2 = nn.Linear(2 * dim, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        normed = self.norm1(x)
        x = x + self.self_attn(normed + position, normed)
        return x + self.linear2(F.gelu(self.linear1(self.norm2(x))))


class FuseSFTBlock(nn.Module):
    """CFT: from the encoder's and the generator's features, a scale and shift added to the generator's, times w."""

    def __init__(self, channels: int):
        super().__init__()
        self.encode_enc = ResBlock(2 * channels, channels)
        self.scale = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.LeakyReLU(0.2),
                                   nn.Conv2d(channels, channels, 3, padding=1))
        self.shift = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.LeakyReLU(0.2),
                                   nn.Conv2d(channels, channels, 3, padding=1))

    def forward(self, encoded: torch.Tensor, decoded: torch.Tensor, fidelity: float) -> torch.Tensor:
        features = self.encode_enc(torch.cat([encoded, decoded], dim=1))
        return decoded + fidelity * (decoded * self.scale(features) + self.shift(features))


def adaptive_instance_norm(content: torch.Tensor, style: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """`content` with each channel's mean and (unbiased) std replaced by `style`'s: the codes take the input's
    colour and lighting (A1111 runs CodeFormer with `adain=True`)."""
    def stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat = x.flatten(2)
        return flat.mean(dim=2)[:, :, None, None], (flat.var(dim=2) + eps).sqrt()[:, :, None, None]

    content_mean, content_std = stats(content)
    style_mean, style_std = stats(style)
    return (content - content_mean) / content_std * style_std + style_mean


class CodeFormer(nn.Module):
    """CodeFormer at inference: aligned faces [N, 3, S, S] in [-1, 1] -> restored faces, same shape and range.

    `weight` is the fidelity w in [0, 1] (None = 0.5, A1111's default): 0 decodes the predicted codes alone (most
    restored), 1 blends in the most of the input's own features. Faces of another size than the network's are
    resized to it and back.
    """

    arch_name = "CodeFormer"

    def __init__(self, config: CodeFormerConfig):
        super().__init__()
        self.config = config
        sizes = config.vqgan
        encoder, self.encoder_taps = encoder_plan(sizes)
        generator, self.generator_taps = generator_plan(sizes)
        self.encoder = BlockStack(encoder)
        self.quantize = Codebook(config.codebook_size, sizes.code_dim)
        self.generator = BlockStack(generator)
        self.position_emb = nn.Parameter(torch.zeros(config.latent_tokens, config.dim_embd))
        self.feat_emb = nn.Linear(sizes.code_dim, config.dim_embd)
        self.ft_layers = nn.Sequential(*(TransformerSALayer(config.dim_embd, config.n_head)
                                         for _ in range(config.n_layers)))
        self.idx_pred_layer = nn.Sequential(nn.LayerNorm(config.dim_embd),
                                            nn.Linear(config.dim_embd, config.codebook_size, bias=False))
        levels = {sizes.image_size // 2 ** level: level for level in range(len(sizes.channel_multipliers))}
        self.fuse_convs_dict = nn.ModuleDict({str(size): FuseSFTBlock(sizes.width(levels[size]))
                                              for size in config.connect_list})

    def forward(self, x: torch.Tensor, weight: float | None = None, *, adain: bool = True) -> torch.Tensor:
        """Restore `x` with fidelity `weight`; `adain=False` skips matching the codes' statistics to the input's."""
        check_faces(x, self)
        fidelity = check_fidelity(weight)
        if not isinstance(adain, bool):
            raise TypeError(f"adain must be True or False, got {adain!r}.")
        with torch.no_grad():
            return restore_at_size(x, self.config.vqgan.image_size, lambda faces: self._restore(faces, fidelity, adain))

    def _restore(self, x: torch.Tensor, fidelity: float, adain: bool) -> torch.Tensor:
        taps = {index: size for size, index in self.encoder_taps.items() if size in self.config.connect_list}
        encoded = {}
        for index, block in enumerate(self.encoder.blocks):
            x = block(x)
            if index in taps:
                encoded[taps[index]] = x
        latent = x
        tokens = self.feat_emb(latent.flatten(2).transpose(1, 2))
        for layer in self.ft_layers:
            tokens = layer(tokens, self.position_emb)
        # the softmax before the official top-1 changes no ranking: the code is the argmax of the logits
        codes = self.quantize.lookup(self.idx_pred_layer(tokens).argmax(dim=2), self.config.vqgan.latent_side)
        x = adaptive_instance_norm(codes, latent) if adain else codes
        fuse_after = {index: size for size, index in self.generator_taps.items() if size in self.config.connect_list}
        for index, block in enumerate(self.generator.blocks):
            x = block(x)
            if index in fuse_after and fidelity > 0:
                size = fuse_after[index]
                x = self.fuse_convs_dict[str(size)](encoded[size], x, fidelity)
        return x
