"""Run a transformers CLIP text encoder (SD 1.x/2.x, both SDXL encoders) through OpenVINO.

The token-embedding lookup stays in torch and the converted graph starts from its output, so
textual-inversion embeddings (inserted by a forward hook on `get_input_embeddings()`) keep working
unchanged. The graph returns every hidden state, so clip skip needs no second graph. Prompts are
encoded one 77-token chunk at a time through a static [1, 77] graph: chunks are independent in
CLIP, and one fixed shape is what OpenVINO's CPU plugin runs fastest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from mixkit.runtime.openvino_cache import (CompiledShapes, ExportIdentity, cache_key, load_or_export, require_openvino,
                                           trace_to_openvino, weights_fingerprint)


class _InjectedEmbeddings(torch.nn.Module):
    """Replaces the token embedding while tracing, so the graph takes the embeddings as an input."""

    def __init__(self, like: torch.nn.Embedding) -> None:
        super().__init__()
        self.embedding_dim = like.embedding_dim
        self.value: torch.Tensor | None = None

    def forward(self, input_ids):
        return self.value


class _TextGraph(torch.nn.Module):
    def __init__(self, encoder: torch.nn.Module, injected: _InjectedEmbeddings) -> None:
        super().__init__()
        self.encoder, self.injected = encoder, injected

    def forward(self, input_ids, token_embeds):
        self.injected.value = token_embeds
        out = self.encoder(input_ids=input_ids, output_hidden_states=True)
        pooled = out.text_embeds if getattr(out, "text_embeds", None) is not None else out.pooler_output
        return out.last_hidden_state, pooled, torch.stack(out.hidden_states)


@dataclass
class TextEncoderOutput:
    """The fields of transformers' CLIP outputs that mixkit reads."""

    last_hidden_state: torch.Tensor
    hidden_states: tuple
    pooler_output: torch.Tensor | None = None
    text_embeds: torch.Tensor | None = None


class OpenVinoTextEncoder:
    """Stands in for a `CLIPTextModel` / `CLIPTextModelWithProjection` in `mixkit.prompts.PromptEncoder`.

    Keeps the torch token embedding (`get_input_embeddings()`, `parameters()`) and final layer norm
    (clip skip on SD 1.x); everything else runs in OpenVINO. Attention masks, attention weights and
    LoRA merges are refused: the converted graph contains none of them.
    """

    dtype = torch.float32
    device = torch.device("cpu")

    def __init__(self, encoder: torch.nn.Module, *, cache_dir: str | os.PathLike, inference_precision: str = "f32",
                 identity: ExportIdentity | None = None, part: str = "text-encoder") -> None:
        require_openvino()
        if not hasattr(encoder, "get_input_embeddings") or not hasattr(encoder, "config"):
            raise TypeError(f"OpenVinoTextEncoder expects a transformers CLIP text model, got {type(encoder).__name__}")
        if inference_precision not in ("f32", "bf16"):
            raise ValueError(f"inference_precision must be 'f32' or 'bf16', got {inference_precision!r}")
        self.torch_module = encoder.float().eval()
        self.config = encoder.config
        self.cache_dir = Path(cache_dir)
        self.inference_precision = inference_precision
        self.identity = identity or ExportIdentity()
        self.part = part
        self.final_layer_norm = getattr(encoder, "text_model", encoder).final_layer_norm
        self.has_projection = hasattr(encoder, "text_projection")
        self._graphs: dict[int, CompiledShapes] = {}
        self._fingerprint: str | None = None
        self.cache_paths: dict[int, Path] = {}
        self.cache_hits: dict[int, bool] = {}

    def get_input_embeddings(self) -> torch.nn.Embedding:
        return self.torch_module.get_input_embeddings()

    def parameters(self):
        """The torch parameters still in use (the token embedding): PromptEncoder reads their device/version."""
        return self.get_input_embeddings().parameters()

    def modules(self):
        """The torch modules still in use (the token embedding): PromptEncoder reads their forward-patch stamps
        (`mixkit.forward_patches`), as it reads `parameters()`; the converted layers have none to read."""
        return self.get_input_embeddings().modules()

    def _graph(self, length: int) -> CompiledShapes:
        if length not in self._graphs:
            encoder = self.torch_module
            embedding = encoder.get_input_embeddings()
            if self._fingerprint is None:
                self._fingerprint = weights_fingerprint(encoder)
            key = cache_key(self.part, encoder, self.identity, [(1, length), (1, length, embedding.embedding_dim)],
                            fingerprint=self._fingerprint)

            def convert():
                injected = _InjectedEmbeddings(embedding)
                example = (torch.zeros(1, length, dtype=torch.long), torch.randn(1, length, embedding.embedding_dim))
                example[0][0, -1] = self.config.eos_token_id if self.config.eos_token_id is not None else 0
                encoder.set_input_embeddings(injected)
                try:
                    return trace_to_openvino(_TextGraph(encoder, injected), example, static=True)
                finally:
                    encoder.set_input_embeddings(embedding)

            model, path, hit = load_or_export(self.cache_dir, key, convert)
            self._graphs[length] = CompiledShapes(model, cache_dir=self.cache_dir,
                                                  inference_precision=self.inference_precision)
            self.cache_paths[length], self.cache_hits[length] = path, hit
        return self._graphs[length]

    def __call__(self, input_ids=None, attention_mask=None, output_hidden_states=None, return_dict=None,
                 **kwargs) -> TextEncoderOutput:
        unsupported = sorted(k for k, v in {"attention_mask": attention_mask, **kwargs}.items()
                             if v is not None and v is not False)
        if unsupported:
            raise ValueError(f"The openvino backend runs a fixed text-encoder graph and cannot honour {unsupported}; "
                             "use backend='torch' for this call")
        if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2 or input_ids.dtype != torch.long:
            got = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
            raise ValueError(f"OpenVinoTextEncoder expects input_ids as a [batch, tokens] int64 tensor, got {got}")
        with torch.no_grad():
            embeds = self.get_input_embeddings()(input_ids).float()  # runs any textual-inversion hook
        graph = self._graph(input_ids.shape[1])
        rows = [graph([ids.numpy(), emb.contiguous().numpy()]) for ids, emb in zip(input_ids.split(1), embeds.split(1))]
        last, pooled, hidden = (torch.cat([row[i] for row in rows], dim=1 if i == 2 else 0) for i in range(3))
        return TextEncoderOutput(
            last_hidden_state=last, hidden_states=tuple(hidden.unbind(0)),
            pooler_output=None if self.has_projection else pooled,
            text_embeds=pooled if self.has_projection else None,
        )

    def __getattr__(self, name: str):
        # Only reached for attributes a torch text encoder has and this stand-in does not.
        raise AttributeError(f"{name!r}: the openvino backend runs a converted text-encoder graph, so features that "
                             "need the torch encoder's modules (LoRA, hooks, training) need backend='torch'")
