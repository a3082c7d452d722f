"""mixkit's Querying Transformer (Q-Former), the BLIP-2 bridge between a frozen image encoder and an LM.

A fixed set of learned query tokens self-attend (together with text tokens when present),
cross-attend to image features every `cross_attention_frequency` layers, and pass through
feed-forward networks that are separate for queries and for text: the queries learn to extract
what the LM needs, while the text path serves the stage-1 objectives (ITC, ITM, ITG).
Layers are BERT-style post-LayerNorm because BLIP-2 initialises the Q-Former from BERT-base.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

ATTENTION_IMPLEMENTATIONS = ("sdpa", "eager", "mixkit")  # "mixkit": mixkit.attention picks the kernel


@dataclass
class QFormerConfig:
    """Sizes of a Q-Former; defaults are BLIP-2's (BERT-base with 32 queries, EVA ViT-g features)."""

    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    encoder_hidden_size: int = 1408
    cross_attention_frequency: int = 2
    num_query_tokens: int = 32
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    text_vocab_size: int = 0  # 0: queries only (inference); > 0 adds the text path for stage-1 training
    max_position_embeddings: int = 512
    attn_implementation: str = "sdpa"
    # > 0: a learned position embedding per image token, added to the image features the
    # cross-attention reads (Qwen-VL's position-aware adapter does this too). A contrastively
    # trained tower's last layer keeps what is in the image but little of where; 0 is BLIP-2.
    image_positions: int = 0

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} must be divisible by num_attention_heads {self.num_attention_heads}"
            )
        if self.cross_attention_frequency < 1 or self.num_query_tokens < 1:
            raise ValueError(
                f"cross_attention_frequency and num_query_tokens must be >= 1, got "
                f"{self.cross_attention_frequency} and {self.num_query_tokens}"
            )
        if not isinstance(self.image_positions, int) or self.image_positions < 0:
            raise ValueError(f"image_positions must be an integer >= 0 (the number of image tokens, or 0 for none), "
                             f"got {self.image_positions!r}")
        if self.attn_implementation not in ATTENTION_IMPLEMENTATIONS:
            raise ValueError(f"attn_implementation must be one of {ATTENTION_IMPLEMENTATIONS}, got {self.attn_implementation!r}")


def multi_head_attention(query, key, value, mask: torch.Tensor | None, implementation: str) -> torch.Tensor:
    """softmax(QK^T / sqrt(d)) V over (batch, heads, length, head_dim); `mask` is True where allowed."""
    if implementation == "sdpa":
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    if implementation == "mixkit":
        from mixkit.attention import attention

        return attention(query, key, value, attn_mask=mask)
    scores = query @ key.transpose(-1, -2) / query.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return scores.softmax(dim=-1) @ value


def grid_position_encoding(tokens: int, width: int) -> torch.Tensor:
    """2-D sine-cosine codes (MAE / Qwen-VL style) for a square grid of patches, plus a zero row for a
    leading CLS token when `tokens` is one more than a square.

    Used as the *start* of the learned image positions: from zero they barely grow in a short run
    (measured: std 0.06 after 1200 steps against features of std 2.2, and captions kept saying
    "at the top left"), while a code that already tells every patch apart only has to be read.
    """
    side = math.isqrt(tokens)
    has_cls = side * side != tokens
    if has_cls:
        side = math.isqrt(tokens - 1)
        if side * side != tokens - 1:
            raise ValueError(f"image_positions {tokens} is neither a square number of patches nor one more (CLS)")
    quarter = width // 4
    frequencies = 1.0 / 10000 ** (torch.arange(quarter, dtype=torch.float64) / max(quarter, 1))
    rows, columns = torch.meshgrid(torch.arange(side, dtype=torch.float64), torch.arange(side, dtype=torch.float64),
                                   indexing="ij")
    codes = []
    for axis in (rows.reshape(-1), columns.reshape(-1)):
        angles = axis[:, None] * frequencies[None]
        codes += [angles.sin(), angles.cos()]
    grid = torch.cat(codes, dim=1)
    grid = torch.cat([grid, grid.new_zeros(grid.shape[0], width - grid.shape[1])], dim=1)
    if has_cls:
        grid = torch.cat([grid.new_zeros(1, width), grid])
    return grid.float()


class QFormerAttention(nn.Module):
    """Multi-head attention with a post-LayerNorm residual; `context` makes it cross-attention."""

    def __init__(self, config: QFormerConfig, context_size: int) -> None:
        super().__init__()
        self.heads = config.num_attention_heads
        self.implementation = config.attn_implementation
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(context_size, config.hidden_size)
        self.value = nn.Linear(context_size, config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        return x.view(batch, length, self.heads, width // self.heads).transpose(1, 2)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None, mask: torch.Tensor | None = None):
        context = x if context is None else context
        attended = multi_head_attention(
            self._split(self.query(x)), self._split(self.key(context)), self._split(self.value(context)),
            mask, self.implementation,
        )
        attended = attended.transpose(1, 2).reshape(x.shape)
        return self.norm(self.out(attended) + x)


class QFormerFeedForward(nn.Module):
    def __init__(self, config: QFormerConfig) -> None:
        super().__init__()
        from transformers.activations import ACT2FN

        self.up = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = ACT2FN[config.hidden_act]
        self.down = nn.Linear(config.intermediate_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.down(self.act(self.up(x))) + x)


class QFormerLayer(nn.Module):
    def __init__(self, config: QFormerConfig, index: int) -> None:
        super().__init__()
        self.self_attention = QFormerAttention(config, config.hidden_size)
        self.cross_attention = (
            QFormerAttention(config, config.encoder_hidden_size) if index % config.cross_attention_frequency == 0 else None
        )
        self.query_ffn = QFormerFeedForward(config)
        self.text_ffn = QFormerFeedForward(config) if config.text_vocab_size > 0 else None

    def forward(self, x, image_features, num_queries: int, mask):
        x = self.self_attention(x, mask=mask)
        queries, text = x[:, :num_queries], x[:, num_queries:]
        if self.cross_attention is not None:
            queries = self.cross_attention(queries, context=image_features)
        queries = self.query_ffn(queries)
        if text.shape[1] == 0:
            return queries
        if self.text_ffn is None:
            raise ValueError("this Q-Former has no text path; build it with text_vocab_size > 0")
        return torch.cat([queries, self.text_ffn(text)], dim=1)


class QFormer(nn.Module):
    """Queries (+ optional text) -> contextualised states; queries read the image by cross-attention."""

    def __init__(self, config: QFormerConfig) -> None:
        super().__init__()
        self.config = config
        if config.text_vocab_size > 0:
            self.word_embeddings = nn.Embedding(config.text_vocab_size, config.hidden_size)
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        if config.image_positions:
            grid = grid_position_encoding(config.image_positions, config.encoder_hidden_size)
            self.image_position_embeddings = nn.Parameter(grid.unsqueeze(0))
        self.input_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.layers = nn.ModuleList(QFormerLayer(config, i) for i in range(config.num_hidden_layers))

    def forward(
        self,
        query_embeds: torch.Tensor,
        image_features: torch.Tensor,
        text_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`attention_mask`: bool (batch, L, L), True = may attend, e.g. `multimodal_causal_mask`."""
        num_queries = query_embeds.shape[1]
        hidden = query_embeds
        if text_ids is not None:
            if self.config.text_vocab_size == 0:
                raise ValueError("this Q-Former has no text path; build it with text_vocab_size > 0")
            positions = torch.arange(text_ids.shape[1], device=text_ids.device)
            text = self.word_embeddings(text_ids) + self.position_embeddings(positions)
            hidden = torch.cat([hidden, text.to(hidden.dtype)], dim=1)
        hidden = self.input_norm(hidden)
        mask = attention_mask.unsqueeze(1) if attention_mask is not None else None
        image_features = image_features.to(hidden.dtype)
        if self.config.image_positions:
            if image_features.shape[1] != self.config.image_positions:
                raise ValueError(f"this Q-Former was built for {self.config.image_positions} image tokens "
                                 f"(image_positions) but got {image_features.shape[1]}; "
                                 "use the image size it was trained on")
            image_features = image_features + self.image_position_embeddings.to(image_features.dtype)
        for layer in self.layers:
            hidden = layer(hidden, image_features, num_queries, mask)
        return hidden
