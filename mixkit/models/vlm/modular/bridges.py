"""Bridges from vision features to language-model embeddings, chosen by name.

- "qformer": BLIP-2 / InstructBLIP / MiniGPT-4; a Q-Former compresses the image into a few query
  outputs, then a linear projection maps them to the LM width. It runs in fp32 whatever the
  rest of the model uses, as in the reference implementation.
- "linear": one linear layer on the vision tokens (MiniGPT-4's trainable part, PaLI-style).
- "mlp": Linear-GELU-Linear on the vision patch tokens (LLaVA-1.5).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from mixkit.models.vlm.modular.qformer import QFormer, QFormerConfig
from mixkit.registry import Registry

BRIDGES: Registry[type["Bridge"]] = Registry("vision-language bridge")


class Bridge(nn.Module):
    """Maps (batch, tokens, vision_width) features to (batch, tokens', lm_width) LM embeddings."""

    kind = ""
    config_class: type = object
    takes_instruction = False  # only an instruction-aware Q-Former reads the prompt text

    def config_dict(self) -> dict:
        return {"kind": self.kind, **asdict(self.config)}


@dataclass
class QFormerBridgeConfig:
    qformer: QFormerConfig = field(default_factory=QFormerConfig)
    output_size: int = 2560
    # InstructBLIP: the instruction text also enters the Q-Former. Off for BLIP-2, whose Q-Former
    # may have a text path (from stage-1 training) that stage 2 and inference never feed.
    instruction_aware: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.qformer, dict):
            self.qformer = QFormerConfig(**self.qformer)
        if self.instruction_aware and self.qformer.text_vocab_size == 0:
            raise ValueError("an instruction_aware Q-Former bridge needs a text path: set qformer.text_vocab_size > 0")


@BRIDGES.register("qformer")
class QFormerBridge(Bridge):
    kind = "qformer"
    config_class = QFormerBridgeConfig

    def __init__(self, config: QFormerBridgeConfig) -> None:
        super().__init__()
        self.config = config
        q = config.qformer
        self.query_tokens = nn.Parameter(torch.zeros(1, q.num_query_tokens, q.hidden_size))
        nn.init.normal_(self.query_tokens, std=0.02)
        self.qformer = QFormer(q)
        self.projection = nn.Linear(q.hidden_size, config.output_size)

    @property
    def num_output_tokens(self) -> int:
        return self.config.qformer.num_query_tokens

    @property
    def takes_instruction(self) -> bool:
        """True when the Q-Former reads the instruction text (InstructBLIP), not for BLIP-2."""
        return self.config.instruction_aware

    def query_outputs(
        self,
        image_features: torch.Tensor,
        instruction_ids: torch.Tensor | None = None,
        instruction_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The Q-Former's query states (batch, queries, hidden) in the Q-Former's own dtype.

        With `instruction_ids` the instruction tokens join the queries in self-attention, as in
        InstructBLIP, so the queries extract what the instruction asks about; padded instruction
        tokens (`instruction_mask` 0) are hidden from every position.
        """
        queries = self.query_tokens.expand(image_features.shape[0], -1, -1)
        if instruction_ids is None:
            return self.qformer(queries, image_features)
        if instruction_mask is None:
            instruction_mask = torch.ones_like(instruction_ids)
        num_queries, length = queries.shape[1], instruction_ids.shape[1]
        keys = torch.cat([torch.ones_like(instruction_mask[:, :1]).expand(-1, num_queries), instruction_mask], dim=1)
        mask = keys.bool().unsqueeze(1).expand(-1, num_queries + length, -1)
        return self.qformer(queries, image_features, instruction_ids, mask)[:, :num_queries]

    def forward(
        self,
        image_features: torch.Tensor,
        instruction_ids: torch.Tensor | None = None,
        instruction_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        states = self.query_outputs(image_features, instruction_ids, instruction_mask)
        return self.projection(states.to(self.projection.weight.dtype))

    def keep_qformer_in_fp32(self) -> "QFormerBridge":
        self.qformer.float()
        self.query_tokens.data = self.query_tokens.data.float()
        return self


@dataclass
class ProjectionBridgeConfig:
    input_size: int = 1024
    output_size: int = 4096
    hidden_act: str = "gelu"  # MLP only; LLaVA's `projector_hidden_act`, a transformers ACT2FN name
    bias: bool = True  # LLaVA's `multimodal_projector_bias`


@BRIDGES.register("linear")
class LinearBridge(Bridge):
    kind = "linear"
    config_class = ProjectionBridgeConfig

    def __init__(self, config: ProjectionBridgeConfig) -> None:
        super().__init__()
        self.config = config
        self.projection = nn.Linear(config.input_size, config.output_size, bias=config.bias)

    def forward(self, image_features: torch.Tensor) -> torch.Tensor:
        return self.projection(image_features.to(self.projection.weight.dtype))


@BRIDGES.register("mlp")
class MLPBridge(Bridge):
    kind = "mlp"
    config_class = ProjectionBridgeConfig

    def __init__(self, config: ProjectionBridgeConfig) -> None:
        super().__init__()
        self.config = config
        from transformers.activations import ACT2FN

        if config.hidden_act not in ACT2FN:
            raise ValueError(f"MLP bridge hidden_act {config.hidden_act!r} is not a transformers activation; "
                             f"use one of {sorted(ACT2FN)}")
        self.up = nn.Linear(config.input_size, config.output_size, bias=config.bias)
        self.act = ACT2FN[config.hidden_act]
        self.down = nn.Linear(config.output_size, config.output_size, bias=config.bias)

    def forward(self, image_features: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(image_features.to(self.up.weight.dtype))))


def build_bridge(config: dict) -> Bridge:
    """A bridge from its saved dict, e.g. {"kind": "mlp", "input_size": 1024, "output_size": 4096}."""
    config = dict(config)
    kind = config.pop("kind", None)
    bridge_class = BRIDGES.get(kind)
    try:
        return bridge_class(bridge_class.config_class(**config))
    except TypeError as error:
        raise ValueError(f"bad {kind!r} bridge config {config}: {error}") from None
