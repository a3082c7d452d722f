"""BLIP-2 stage-2 objective: language modelling conditioned on Q-Former outputs.

The LM input is [query embeddings][prompt tokens][target tokens][padding]. Only the target
tokens are supervised: query positions carry no token to predict and the prompt is given, not
generated (prefix language modelling, as in the reference OPT and Flan-T5 training code).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def build_lm_labels(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    num_query_tokens: int,
    prompt_lengths: torch.Tensor | list[int] | None = None,
) -> torch.Tensor:
    """Labels (batch, Q + T) for a decoder-only LM: -100 at queries, prompt tokens and padding.

    Prompt tokens are counted from each row's first real token, so this works with left or
    right padding.
    """
    if input_ids.shape != attention_mask.shape or input_ids.ndim != 2:
        raise ValueError(
            f"input_ids {tuple(input_ids.shape)} and attention_mask {tuple(attention_mask.shape)} must both be (batch, T)"
        )
    if num_query_tokens < 0:
        raise ValueError(f"num_query_tokens must be >= 0, got {num_query_tokens}")
    batch = input_ids.shape[0]
    if prompt_lengths is None:
        prompt_lengths = torch.zeros(batch, dtype=torch.long)
    prompt_lengths = torch.as_tensor(prompt_lengths, dtype=torch.long, device=input_ids.device)
    if prompt_lengths.shape != (batch,) or (prompt_lengths < 0).any():
        raise ValueError(f"prompt_lengths must be {batch} non-negative ints, got {prompt_lengths.tolist()}")
    real = attention_mask.bool()
    index_among_real = real.long().cumsum(dim=1) - 1
    supervised = real & (index_among_real >= prompt_lengths.unsqueeze(1))
    text_labels = input_ids.masked_fill(~supervised, -100)
    query_labels = torch.full((batch, num_query_tokens), -100, dtype=input_ids.dtype, device=input_ids.device)
    return torch.cat([query_labels, text_labels], dim=1)


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy: logits at position t predict labels at t+1; -100 is ignored."""
    if logits.shape[:2] != labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and labels {tuple(labels.shape)} must agree in (batch, length)")
    if not (labels[:, 1:] != -100).any():
        raise ValueError("no supervised target token: every label is -100 (prompt longer than the text?)")
    shifted_logits = logits[:, :-1]
    return F.cross_entropy(shifted_logits.reshape(-1, shifted_logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100)
